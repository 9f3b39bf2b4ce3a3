"""The fast paths of the readers give the same tables and the same errors as the exact ones.

- read_csv parses columns into their types while reading and demotes a column that does not
  parse to text, so the text conversion (rounding, "40.0" integers, bad-cell errors) still runs;
- trace_view.json is cut into orjson blocks at event boundaries, with ijson taking over for odd
  or damaged files;
- the scan table is plain text when piped.
Expected values are written out by hand or come from the stdlib json parser.
"""

from __future__ import annotations

import gc
import io
import json

import pytest

from ascendprof.model import schemas as S
from ascendprof.model.errors import InputError
from ascendprof.readers import trace_view as TV
from ascendprof.readers.ascend_output import read_kernel_details, read_step_trace_time

KD_HEADER = ("Step Id,Name,Type,Accelerator Core,Start Time(us),Duration(us),Wait Time(us),"
             "Block Dim,Input Shapes,aic_mac_ratio,Comment\n")


def _kd(tmp_path, rows: list[str]):
    p = tmp_path / "kernel_details.csv"
    p.write_text(KD_HEADER + "".join(r + "\n" for r in rows), encoding="utf-8")
    return p


def test_typed_read_of_a_clean_file_is_exact(tmp_path):
    p = _kd(tmp_path, [
        '3,MatMul,MatMul,AI_CORE,1736412474597843.402\t,12.345,0.001,24,"""1,2""",0.5,',
        '3,Add,Add,AI_VECTOR_CORE,1736412474597999.999\t,7,N/A,,,-,',
    ])
    t = read_kernel_details(p, 2).to_pylist()
    assert [r["start_ns"] for r in t] == [1736412474597843402, 1736412474597999999]
    assert [r["dur_ns"] for r in t] == [12345, 7000]
    assert [r["wait_ns"] for r in t] == [1, None]
    assert [r["block_num"] for r in t] == [24, None]
    assert [r["input_shapes"] for r in t] == ["1,2", None]  # torch_npu's quotes removed
    assert [r["pmu:aic_mac_ratio"] for r in t] == [0.5, None]
    assert [r["step"] for r in t] == [3, 3] and t[0]["rank"] == 2
    # an unknown column with no value at all: a metric column without values (as the text path)
    assert [r["pmu:Comment"] for r in t] == [None, None]


def test_columns_that_do_not_parse_fall_back_to_the_text_conversion(tmp_path):
    # Duration with 4 decimals (rounded half up on the 4th), Block Dim "40.0", a text column:
    # three columns the typed read demotes to text, one by one.
    p = _kd(tmp_path, [
        '1,MatMul,MatMul,AI_CORE,1.000\t,12.3455,0,40.0,,0.25,first note',
        'None,-,Add,AI_CORE,2.500\t,0.0004, 3.5 ,8,,1,second',
    ])
    t = read_kernel_details(p, 0).to_pylist()
    assert [r["dur_ns"] for r in t] == [12346, 0]  # 12345.5 ns -> 12346; 0.4 ns -> 0
    assert [r["block_num"] for r in t] == [40, 8]
    assert [r["wait_ns"] for r in t] == [0, 3500]  # spaces around " 3.5 " trimmed
    assert [r["step"] for r in t] == [1, None] and [r["name"] for r in t] == ["MatMul", None]
    assert [r["start_ns"] for r in t] == [1000, 2500]
    assert "pmu:Comment" not in t[0]  # a text column some tool added: left out


def test_more_bad_columns_than_demotions_reads_all_text(tmp_path):
    p = tmp_path / "step_trace_time.csv"
    # every time column has more than 3 decimals: the exact text path rounds each one
    p.write_text("Step,Computing,Communication(Not Overlapped),Overlapped,Communication,Free\n"
                 "7,231290.09999999995,1.0005,2.0004,3.00051,0.1234\n", encoding="utf-8")
    r = read_step_trace_time(p, 0).to_pylist()[0]
    assert (r["computing_ns"], r["comm_not_overlapped_ns"], r["overlapped_ns"],
            r["communication_ns"], r["free_ns"]) == (231290100, 1001, 2000, 3001, 123)


@pytest.mark.parametrize("cell, column, row, what", [
    ("7x", "Block Num", 2, "not an integer"),
    ("abc", "Duration(us)", 2, "not a number"),
    ("0.5%", "aic_mac_ratio", 2, "not a number"),
])
def test_bad_cell_is_named_after_the_typed_read_fails(tmp_path, cell, column, row, what):
    good = "1,A,A,AI_CORE,1.000\t,1.0,0,1,,0.5,"
    bad = {"Block Num": f"1,A,A,AI_CORE,1.000\t,1.0,0,{cell},,0.5,",
           "Duration(us)": f"1,A,A,AI_CORE,1.000\t,{cell},0,1,,0.5,",
           "aic_mac_ratio": f"1,A,A,AI_CORE,1.000\t,1.0,0,1,,{cell},"}[column]
    p = _kd(tmp_path, [good, bad])
    with pytest.raises(InputError) as e:
        read_kernel_details(p, 0)
    msg = str(e.value)
    assert str(p) in msg and repr(column) in msg and repr(cell) in msg and what in msg
    assert e.value.where == f"data row {row}"


def test_start_time_beyond_int64_ns_is_an_error(tmp_path):
    # 10^17 us = 10^20 ns > 2^63 ns: parses as a decimal, fails the int64 conversion
    p = _kd(tmp_path, ["1,A,A,AI_CORE,100000000000000000.000\t,1.0,0,1,,0.5,"])
    with pytest.raises(InputError, match="out of range"):
        read_kernel_details(p, 0)


# ----------------------------------------------------------------------------- trace_view blocks

def _events():
    """Events whose strings and args hold the byte patterns a block cut looks for."""
    return [
        {"ph": "M", "name": "process_name", "pid": 1, "tid": 0, "args": {"name": "HCCL"}},
        {"ph": "X", "name": "a},{b", "pid": 1, "tid": 2, "ts": "10.500", "dur": 1.5,
         "args": {"Call stack": "f(): {x},\r\ng(): },{\"ph\":\"X\"}",
                  "list": [{"a": 1}, {"b": 2}]}},
        {"ph": "X", "name": "c\\", "pid": 1, "tid": 2, "ts": "12.000", "dur": 2},
        7,  # not an event: skipped
        {"ph": "C", "name": "HBM", "pid": 3, "tid": 0, "ts": "13.000", "args": {"r": [1, {}]}},
        {"ph": "X", "name": "\u00e9v\u00e9nement", "pid": 1, "tid": 2, "ts": "14.000", "dur": 0.25},
    ] + [{"ph": "X", "name": f"k{i}", "pid": 1, "tid": 2, "ts": f"{20 + i}.000", "dur": 1.0}
         for i in range(40)]


@pytest.fixture
def small_blocks(monkeypatch):
    monkeypatch.setattr(TV, "_BLOCK", 97)  # many cuts, some inside strings and nested values


@pytest.mark.parametrize("indent", [None, 1])
@pytest.mark.parametrize("wrap", [False, True])
def test_blocks_give_the_events_json_gives(tmp_path, small_blocks, indent, wrap):
    evs = _events()
    p = tmp_path / "trace_view.json"
    p.write_text(json.dumps({"traceEvents": evs} if wrap else evs, indent=indent,
                            ensure_ascii=False), encoding="utf-8")
    doc = json.loads(p.read_text(encoding="utf-8"))
    want = [e for e in (doc["traceEvents"] if wrap else doc) if isinstance(e, dict)]
    assert list(TV.iter_events(p)) == want
    assert [ev for b in TV.iter_event_blocks(p) for ev in b] == want


def test_what_orjson_refuses_is_read_by_ijson(tmp_path, small_blocks):
    import ijson

    evs = _events()
    p = tmp_path / "trace_view.json"
    # a lone surrogate escape (orjson refuses it, ijson reads it) in a middle block, and keys
    # after the event array (the block reader only takes the array)
    text = json.dumps({"traceEvents": evs, "displayTimeUnit": "ns"})
    p.write_text(text.replace('"k20"', '"k\\ud800"'), encoding="utf-8")
    with open(p, "rb") as f:  # the reference: ijson on the whole file
        want = [e for e in ijson.items(f, "traceEvents.item", use_float=True)
                if isinstance(e, dict)]
    assert len(want) == 45
    assert list(TV.iter_events(p)) == want


def test_truncated_in_a_later_block_keeps_earlier_events_and_the_offset(tmp_path, small_blocks):
    data = json.dumps(_events()).encode()
    p = tmp_path / "trace_view.json"
    p.write_bytes(data[:len(data) - 30])
    it = TV.iter_events(p)
    assert next(it)["name"] == "process_name"
    with pytest.raises(InputError) as e:
        list(it)
    assert e.value.where == len(data) - 30 and "truncated" in e.value.reason


def test_cyclic_gc_is_restored_after_reading(tmp_path):
    p = tmp_path / "trace_view.json"
    p.write_text(json.dumps(_events()))
    assert gc.isenabled()
    assert TV.read_trace_view(p, 0)[S.TIMELINE].num_rows == 43  # HCCL X events: 3 + 40
    assert gc.isenabled()
    p.write_bytes(b'[{"ph": "X", "ts": }]')
    with pytest.raises(InputError):
        TV.read_trace_view(p, 0)
    assert gc.isenabled()


# ----------------------------------------------------------------------------- scan table

def test_plain_scan_table_one_aligned_line_per_source(qwen3):
    from ascendprof.model.problems import Problems
    from ascendprof.report.terminal import print_scan
    from ascendprof.scan import scan

    sources = scan(qwen3, Problems())
    buf = io.StringIO()
    print_scan(sources, [], out=buf)
    lines = buf.getvalue().splitlines()
    assert lines[0] == "4 profiling source(s)"
    header, rows = lines[1], lines[2:]
    assert header.split()[:2] == ["Rank", "Kind"] and len(rows) == 4
    at = header.index("Path")
    assert sorted(r[at:] for r in rows) == sorted(str(s.path) for s in sources)
    kind_at = header.index("Kind")
    assert all(r[kind_at:].startswith("torch_npu text") for r in rows)


# ----------------------------------------------------------------------------- units

@pytest.mark.parametrize("text, ns", [
    ("1736412474597843.402", 1736412474597843402), ("-0.5", -500), ("+1.5", 1500), (".5", 500),
    ("1e3", 1_000_000), ("2.0005", 2001), ("2.0004", 2000), ("12.", 12000), (None, None),
])
def test_column_decimal_cast_and_text_path_agree_with_hand_values(text, ns):
    import pyarrow as pa

    from ascendprof.model.units import us_column_to_ns

    assert us_column_to_ns(pa.array([text, "1.000"], pa.string())).to_pylist() == [ns, 1000]


def test_decimal_column_beyond_int64_ns_is_out_of_range():
    from decimal import Decimal

    import pyarrow as pa

    from ascendprof.model.units import us_column_to_ns

    with pytest.raises(ValueError, match="out of range"):
        us_column_to_ns(pa.array([Decimal("9999999999999999.999")], pa.decimal128(22, 3)))


def test_an_event_longer_than_the_buffer_grows_it(tmp_path, small_blocks, monkeypatch):
    calls = []
    real = TV._ijson_events
    monkeypatch.setattr(TV, "_ijson_events", lambda *a, **k: calls.append(1) or real(*a, **k))
    evs = _events()
    # one event of ~3 kB whose args hold 200 '},' candidates: the 97-byte buffer must grow
    evs.insert(3, {"ph": "X", "name": "big", "pid": 1, "tid": 2, "ts": "15.000", "dur": 1.0,
                   "args": {"list": [{"i": i} for i in range(200)]}})
    p = tmp_path / "trace_view.json"
    p.write_text(json.dumps(evs), encoding="utf-8")
    want = [e for e in json.loads(p.read_text()) if isinstance(e, dict)]
    assert list(TV.iter_events(p)) == want
    assert calls == []  # read by the orjson blocks alone
