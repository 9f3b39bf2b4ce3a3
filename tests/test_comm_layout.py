"""communication.json's layout through the user's path (``read_source`` on a rank directory):
op keys split at the last '@', the profiler's "Total ..." sums left out, entries that are not
objects skipped with a warning, and the one problem naming the first op left out for a bad time.

Rank directory: a copy of fixtures/torch_npu-static-graph-mem/rank0_ascend_pt (a real Level1
rank) whose communication.json is replaced by the spec-built file below; every expected value is
written out by hand from that file.
"""

from __future__ import annotations

import json
import shutil

import pytest

from ascendprof.model import schemas as S
from ascendprof.model.problems import Problems
from ascendprof.readers import read_source
from ascendprof.scan import scan
from conftest import FIXTURES

RANK0 = FIXTURES / "torch_npu-static-graph-mem" / "rank0_ascend_pt"
OUT = "ASCEND_PROFILER_OUTPUT"


def _times(elapse=2.0):
    return {"Start Timestamp(us)": 1000.5, "Elapse Time(ms)": elapse, "Transit Time(ms)": 0.5,
            "Wait Time(ms)": 0.25, "Synchronization Time(ms)": 0.125, "Idle Time(ms)": 1.25,
            "Wait Time Ratio": 0.3333, "Synchronization Time Ratio": 0.2}


def _read(tmp_path, comm: dict):
    rank_dir = tmp_path / "rank0_ascend_pt"
    shutil.copytree(RANK0, rank_dir)
    path = rank_dir / OUT / "communication.json"
    path.write_text(json.dumps(comm), encoding="utf-8")
    src = next(s for s in scan(rank_dir, Problems()) if s.rank == 0)
    data = read_source(src)
    return data, path, [p for p in data.problems.items if p.path == str(path)]


LONG = "not a number but a sentence far longer than forty characters"


@pytest.mark.parametrize("bad, shown", [
    # JSON text cut to 37 characters (the quote and 36 letters) + '...'
    (LONG, '"not a number but a sentence far long...'),
    (-1e16, "-1e+16"),
    # a NaN literal (read by the per-value rules, with their warning): Python's 'nan', where
    # JSON text would say null
    (float("nan"), "nan"),
])
def test_layout_ops_totals_and_problems(tmp_path, bad, shown):
    comm = {
        "step3": {
            "collective": {
                "hcom_allReduce__1_1@group@a": {"Communication Time Info": _times()},
                "hcom_broadcast__2_1@g2": {"Communication Time Info": _times(bad)},
                "hcom_allGather__3_1": {"Communication Time Info": _times()},
                "tcp_like_op__4_1@g2": {"Communication Time Info": _times()},
                "Total Op Info": {"Communication Time Info": _times(9.0)},
                "total op info": {"Communication Time Info": _times(9.0)},
            },
            "p2p": "not an object",
        },
        "step4": 5,
    }
    data, path, probs = _read(tmp_path, comm)
    ops = data.tables[S.COMM_OPS].to_pylist()
    # the op with the bad time is left out; the two Total sums are not ops
    assert sorted((o["op_name"], o["group"], o["step"], o["kind"]) for o in ops) == [
        ("hcom_allGather__3_1", "", 3, "collective"),  # no '@': no group
        ("hcom_allReduce__1_1@group", "a", 3, "collective"),  # the group follows the LAST '@'
        ("tcp_like_op__4_1", "g2", 3, "collective"),  # starts with 't' but is no "Total"
    ]
    assert {o["rank"] for o in ops} == {0}
    assert all(o["elapse_ns"] == 2_000_000 for o in ops)
    got = sorted((p.reason, p.rank, p.where, p.severity, p.affects) for p in probs)
    nan = [("NaN or Infinity literal(s), not valid JSON: read as numbers that are not a number; "
            "the values holding them are left out", 0, "", "warning", ())] if bad != bad else []
    assert got == sorted(nan + [
        ("step entry 'step4' is not an object; skipped", 0, "", "warning", ()),
        ("step3/p2p is not an object; skipped", 0, "", "warning", ()),
        ("1 op(s) left out: a Communication Time Info time that is not a non-negative number "
         f"(e.g. Elapse Time(ms) = {shown} in hcom_broadcast__2_1@g2)", 0, "step3", "skipped",
         ("communication", "communication_matrix", "verdicts")),
    ])


def test_top_level_not_an_object_names_the_file(tmp_path):
    data, path, probs = _read(tmp_path, [1, 2])
    assert [p.reason for p in probs] == ["top level is not a JSON object"], probs
    assert S.COMM_OPS not in data.tables or not data.tables[S.COMM_OPS].num_rows


def test_matrix_link_keys_groups_and_values(tmp_path):
    """communication_matrix.json through read_source: the group is what follows the last '@' of
    the link key ('' without one); a key entry that is not an object is skipped with a warning;
    a "Total ..." entry is no link; values as written (ms -> ns)."""
    link = {"Transport Type": "HCCS", "Transit Size(MB)": 12.5, "Transit Time(ms)": 0.25,
            "Bandwidth(GB/s)": 50.0, "Large Packet Ratio": 1.0, "Op Name": "hcom_allReduce__1_1"}
    matrix = {"step3": {"collective": {
        "allreduce-top1@group@a": {"0-1": link, "1-0": "not an object"},
        "allreduce-bottom1": {"1-0": dict(link, **{"Transit Time(ms)": 0.5})},
        "bad-key@g": 7,
        "Total Op Info": {"0-1": link},
    }}, "step4": "not an object"}
    rank_dir = tmp_path / "rank0_ascend_pt"
    shutil.copytree(RANK0, rank_dir)
    path = rank_dir / OUT / "communication_matrix.json"
    path.write_text(json.dumps(matrix), encoding="utf-8")
    data = read_source(next(s for s in scan(rank_dir, Problems()) if s.rank == 0))
    links = data.tables[S.COMM_LINKS].to_pylist()
    assert sorted((r["link_key"], r["group"], r["src_rank"], r["dst_rank"], r["transit_ns"],
                   r["size_mb"], r["bandwidth_gbps"], r["step"]) for r in links) == [
        ("allreduce-bottom1", "", 1, 0, 500_000, 12.5, 50.0, 3),
        ("allreduce-top1@group@a", "a", 0, 1, 250_000, 12.5, 50.0, 3),
    ]
    assert {r["op_name"] for r in links} == {"hcom_allReduce__1_1"} and \
        {r["rank"] for r in links} == {0} and {r["transport"] for r in links} == {"HCCS"}
    probs = [(p.reason, p.severity, p.rank) for p in data.problems.items if p.path == str(path)]
    assert sorted(probs) == [("'bad-key@g' in step3 is not an object; skipped", "warning", 0),
                             ("step entry 'step4' is not an object; skipped", "warning", 0)]


def test_start_timestamp_beyond_int64_is_a_problem_not_a_crash(tmp_path):
    """1e16 us is beyond int64 ns: the file is recorded as unreadable, naming the value, and
    the rank's other files are read."""
    data, path, probs = _read(tmp_path, {"step1": {"p2p": {"hcom_send__3@g": {
        "Communication Time Info": dict(_times(), **{"Start Timestamp(us)": 1e16})}}}})
    assert len(probs) == 1 and "out of range" in probs[0].reason and "1e+16" in probs[0].reason
    assert data.tables[S.KERNELS].num_rows > 0


def test_per_value_way_ops_bandwidth_and_problems(tmp_path):
    """A file the typed decoders do not take (a JSON true and a NaN literal in it) is read by
    the per-value rules, through read_source: ops without '@' keep their name and no group, a
    Time Info that is not an object skips its op with a warning, Bandwidth Info values that are
    not numbers are left out (null) with one problem per field counting them, OPINFO kept
    verbatim, NaN literals warned about."""
    bw = {"HCCS": {"Transit Size(MB)": 8, "Transit Time(ms)": 0.5, "Bandwidth(GB/s)": 16.0,
                   "Large Packet Ratio": 0.0, "Size Distribution": {"8.0": [1, 0.5]}}}
    text_bw = {"HCCS": {"Transit Size(MB)": "8", "Transit Time(ms)": 0.5,
                        "Bandwidth(GB/s)": [16.0], "Large Packet Ratio": True}}
    comm = {"step2": {"collective": {
        "hcom_allReduce__1_1@g": {"Communication Time Info": _times(),
                                  "Communication Bandwidth Info": bw},
        "hcom_allGather__2_1": {"Communication Time Info": _times(),
                                "Communication Bandwidth Info": text_bw},
        "hcom_reduce__3_1@g": {"Communication Time Info": _times(),
                               "Communication Bandwidth Info": text_bw},
        "hcom_broadcast__4_1@g": {"Communication Time Info": [1, 2]},
        "hcom_scatter__5_1@g": {"Communication Time Info": dict(_times(), **{
            "Wait Time Ratio": "__NAN__"})},
    }}}
    rank_dir = tmp_path / "rank0_ascend_pt"
    shutil.copytree(RANK0, rank_dir)
    path = rank_dir / OUT / "communication.json"
    path.write_text(json.dumps(comm).replace('"__NAN__"', "NaN"), encoding="utf-8")
    data = read_source(next(s for s in scan(rank_dir, Problems()) if s.rank == 0))
    ops = data.tables[S.COMM_OPS].to_pylist()
    assert sorted((o["op_name"], o["group"]) for o in ops) == [
        ("hcom_allGather__2_1", ""), ("hcom_allReduce__1_1", "g"), ("hcom_reduce__3_1", "g"),
        ("hcom_scatter__5_1", "g")]
    by_name = {o["op_name"]: o for o in ops}
    assert json.loads(by_name["hcom_allReduce__1_1"]["opinfo_json"]) == comm["step2"][
        "collective"]["hcom_allReduce__1_1@g"]
    assert by_name["hcom_allReduce__1_1"]["start_ns"] == 1_000_500
    bws = {(r["op_name"], r["transport"]): r for r in data.tables[S.COMM_BANDWIDTH].to_pylist()}
    assert bws[("hcom_allReduce__1_1", "HCCS")]["size_mb"] == 8.0
    assert bws[("hcom_allReduce__1_1", "HCCS")]["bandwidth_gbps"] == 16.0
    assert bws[("hcom_allGather__2_1", "HCCS")]["size_mb"] is None
    assert bws[("hcom_allGather__2_1", "HCCS")]["bandwidth_gbps"] is None
    assert bws[("hcom_allGather__2_1", "HCCS")]["transit_ns"] == 500_000
    probs = sorted((p.reason, p.rank, p.where, p.severity, p.affects)
                   for p in data.problems.items if p.path == str(path))
    assert probs == sorted([
        ("NaN or Infinity literal(s), not valid JSON: read as numbers that are not a number; "
         "the values holding them are left out", 0, "", "warning", ()),
        ("op 'hcom_broadcast__4_1@g' in step2: 'Communication Time Info' is not an object; "
         "op skipped", 0, "", "warning", ()),
        ('2 Transit Size(MB) value(s) that are not a number left out (e.g. "8" in '
         "hcom_allGather__2_1@, HCCS)", 0, "step2, column Transit Size(MB)", "skipped",
         ("communication", "verdicts")),
        ("2 Bandwidth(GB/s) value(s) that are not a number left out (e.g. [16.0] in "
         "hcom_allGather__2_1@, HCCS)", 0, "step2, column Bandwidth(GB/s)", "skipped",
         ("communication", "verdicts")),
    ])


def test_matrix_local_ranks_beyond_int32_and_times_beyond_int64(tmp_path):
    """src/dst are the group-local ranks as written, null when not an int32 (2^31 is not,
    2^31 - 1 is); a Transit Time beyond int64 ns makes the file unreadable, the problem naming
    the file and the value."""
    from ascendprof.model.errors import InputError
    from ascendprof.readers.communication.matrix import read_matrix

    link = {"Transport Type": "HCCS", "Transit Size(MB)": 1, "Transit Time(ms)": 1,
            "Bandwidth(GB/s)": 1}
    p = tmp_path / "communication_matrix.json"
    p.write_text(json.dumps({"step1": {"collective": {"allreduce-top1@g": {
        "2147483647-2147483648": link, "0-4294967296": link}}}}))
    rows = read_matrix(p, 0).to_pylist()
    assert sorted((r["src_rank"], r["dst_rank"]) for r in rows) == [
        (0, None), (2147483647, None)]
    p.write_text(json.dumps({"step1": {"collective": {"allreduce-top1@g": {
        "0-1": dict(link, **{"Transit Time(ms)": 1e13})}}}}))
    with pytest.raises(InputError,
                       match=r"communication_matrix\.json.*out of range.*10000000000000"):
        read_matrix(p, 0)
