"""readers/ascend_output.py seed-40 survivors, through the user's path (``read_source``) on
copies of the Level1 torch_npu rank of fixtures/torch_npu-static-graph-mem (rank0_ascend_pt,
torch_npu 2025-01) changed by hand. Checked: a row cut short in operator_memory.csv is left out
and reported; a step_trace_time.csv read in batches (lowered SPILL_BYTES) reports its cut rows
and a non-UTF-8 byte as the whole-file read does; an unknown kernel_details column with no value
at all (read as text, the file having a duplicated header) becomes an all-null metric; and a
rank whose ASCEND_PROFILER_OUTPUT is gone after the scan raises InputError saying so. Expected
values are worked out from the files' text in the comments."""

from __future__ import annotations

import shutil

import pytest

from ascendprof.model import schemas as S
from ascendprof.model.errors import InputError
from ascendprof.model.problems import Problems
from ascendprof.readers import read_source
from ascendprof.scan import scan
from ascendprof.sysio import bigtables
from test_ascend_output_paths import _copy, OUT


def _source(rank_dir):
    return next(s for s in scan(rank_dir, Problems()) if s.rank == 0)


def _read(rank_dir):
    return read_source(_source(rank_dir))


def _problems(data, fname):
    return [p for p in data.problems.items if str(p.path).endswith(fname)]


def test_a_cut_row_of_operator_memory_is_left_out_and_reported(tmp_path):
    # operator_memory.csv: header of 15 columns and 184 data rows (lines 2-185); a row
    # "aten::empty_strided,0.5" cut after 2 fields is appended as line 186: left out, reported
    # ("skipped", affecting the memory analysis), the 184 whole rows read
    rank_dir = _copy(tmp_path)
    om = rank_dir / OUT / "operator_memory.csv"
    text = om.read_text(encoding="utf-8")
    lines = text.splitlines()
    assert len(lines[0].split(",")) == 15 and len(lines) == 185
    om.write_text(text.rstrip("\n") + "\naten::empty_strided,0.5\n", encoding="utf-8")
    data = _read(rank_dir)
    assert data.tables[S.OPERATOR_MEMORY].num_rows == 184
    (p,) = _problems(data, "operator_memory.csv")
    assert p.severity == "skipped" and p.rank == 0
    assert p.reason.startswith("1 row(s) left out: 2 field(s) where the header has 15")
    assert p.reason.endswith("; lines 186") and p.where == "line 186"
    assert set(p.affects) == {"memory"}


def test_a_cut_row_of_a_step_trace_time_read_in_batches_is_reported(tmp_path, monkeypatch):
    # SPILL_BYTES lowered to 1 byte: step_trace_time.csv is read in batches. Header of 10
    # columns and one row (step 50); "51,100.0,200.0" cut after 3 fields appended as line 3:
    # left out and reported with its line, step 50 read as in the whole-file read
    monkeypatch.setattr(bigtables, "SPILL_BYTES", 1)
    rank_dir = _copy(tmp_path)
    st = rank_dir / OUT / "step_trace_time.csv"
    text = st.read_text(encoding="utf-8")
    assert len(text.splitlines()[0].split(",")) == 10
    st.write_text(text.rstrip("\n") + "\n51,100.0,200.0\n", encoding="utf-8")
    data = _read(rank_dir)
    assert data.tables[S.STEP_TRACE]["step"].to_pylist() == [50]
    (p,) = _problems(data, "step_trace_time.csv")
    assert p.severity == "skipped"
    assert p.reason.startswith("1 row(s) left out: 3 field(s) where the header has 10")
    assert p.reason.endswith("; lines 3") and p.where == "line 3"


def test_a_step_trace_time_read_in_batches_with_a_non_utf8_byte_is_refused(tmp_path,
                                                                        monkeypatch):
    # read in batches (SPILL_BYTES 1); the data row's Step "50" written as b"5\xff" (0xff is
    # never UTF-8): the file is refused as "not UTF-8 text", the rest of the rank still read
    monkeypatch.setattr(bigtables, "SPILL_BYTES", 1)
    rank_dir = _copy(tmp_path)
    st = rank_dir / OUT / "step_trace_time.csv"
    header, row = st.read_bytes().splitlines()
    assert row.startswith(b"50,")
    st.write_bytes(header + b"\n5\xff" + row[2:] + b"\n")
    data = _read(rank_dir)
    assert S.STEP_TRACE not in data.tables and S.KERNELS in data.tables
    (p,) = _problems(data, "step_trace_time.csv")
    assert p.reason == "not UTF-8 text"
    assert set(p.affects) == {"cluster_step_trace", "step_breakdown"}


def test_an_unknown_kernel_column_without_any_value_is_an_all_null_metric(tmp_path):
    # kernel_details.csv (191 data rows) gets two more columns both headed "extra_metric" (a
    # duplicated header: the file is read all as text, the second copy left out as
    # "extra_metric.dup"), every cell "N/A": the first is an unknown column whose cells are all
    # missing -- no text seen, so a metric, pmu:extra_metric, null on all 191 rows
    rank_dir = _copy(tmp_path)
    kd = rank_dir / OUT / "kernel_details.csv"
    lines = kd.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 192 and "extra_metric" not in lines[0]
    kd.write_text("\n".join([lines[0] + ",extra_metric,extra_metric"]
                            + [ln + ",N/A,N/A" for ln in lines[1:]]) + "\n", encoding="utf-8")
    data = _read(rank_dir)
    k = data.tables[S.KERNELS]
    assert k.num_rows == 191
    col = k.column(S.PMU_PREFIX + "extra_metric")
    assert col.null_count == 191
    assert not _problems(data, "kernel_details.csv")


def test_a_rank_whose_output_directory_is_gone_raises_input_error(tmp_path):
    # scanned, then ASCEND_PROFILER_OUTPUT removed before the read (e.g. a copy still being
    # made): nothing of the rank is readable, an InputError on the rank's directory says why
    rank_dir = _copy(tmp_path)
    source = _source(rank_dir)
    shutil.rmtree(rank_dir / OUT)
    with pytest.raises(InputError) as e:
        read_source(source)
    assert e.value.reason == "no ASCEND_PROFILER_OUTPUT directory"
    assert e.value.path == str(rank_dir)
