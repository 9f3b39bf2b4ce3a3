"""readers/ascend_output.py seed-38 survivors, through the user's path (``read_source``) on
copies of a real Level1 torch_npu rank (fixtures/torch_npu-static-graph-mem/rank0_ascend_pt,
torch_npu 2025-01) changed by hand, and :func:`assign_steps` on a hand-built table. Expected
values are worked out from the files' text in the comments."""

from __future__ import annotations

import shutil

import pyarrow as pa

from ascendprof.model import schemas as S
from ascendprof.model.problems import Problems
from ascendprof.readers import ascend_output as AO
from ascendprof.readers import read_source
from ascendprof.scan import scan
from ascendprof.sysio import textio
from conftest import FIXTURES

RANK0 = FIXTURES / "torch_npu-static-graph-mem" / "rank0_ascend_pt"
OUT = "ASCEND_PROFILER_OUTPUT"


def _copy(tmp_path):
    rank_dir = tmp_path / "rank0_ascend_pt"
    shutil.copytree(RANK0, rank_dir)
    return rank_dir


def _read(rank_dir):
    return read_source(next(s for s in scan(rank_dir, Problems()) if s.rank == 0))


def _problems(data, fname):
    return [p for p in data.problems.items if str(p.path).endswith(fname)]


def _cut_step_row(rank_dir):
    # step_trace_time.csv: header of 10 columns and one data row (step 50); a second row
    # "51,100.0,200.0" cut after 3 fields (an interrupted copy) is appended as line 3
    st = rank_dir / OUT / "step_trace_time.csv"
    text = st.read_text(encoding="utf-8")
    assert len(text.splitlines()[0].split(",")) == 10
    st.write_text(text.rstrip("\n") + "\n51,100.0,200.0\n", encoding="utf-8")


def test_a_cut_row_of_step_trace_time_is_left_out_and_the_step_read(tmp_path):
    # the cut row (line 3) is left out and reported ("skipped"), the whole row of step 50 is
    # still read: the file is not refused
    rank_dir = _copy(tmp_path)
    _cut_step_row(rank_dir)
    data = _read(rank_dir)
    assert data.tables[S.STEP_TRACE]["step"].to_pylist() == [50]
    (p,) = _problems(data, "step_trace_time.csv")
    assert p.severity == "skipped" and p.rank == 0
    assert p.reason.startswith("1 row(s) left out: 3 field(s) where the header has 10")
    assert p.reason.endswith("; lines 3") and p.where == "line 3"
    assert set(p.affects) == {"cluster_step_trace", "step_breakdown"}


def test_a_cut_row_without_a_line_number_names_no_lines(tmp_path, monkeypatch):
    # a CSV of THREADED_CSV_BYTES (4 MB) or more is parsed by Arrow's thread pool, which does
    # not know the line of a row of the wrong width (None); set to 0 so this small file is read
    # that way. The problem then names no line: the message ends after "a stray separator)"
    monkeypatch.setattr(textio, "THREADED_CSV_BYTES", 0)
    rank_dir = _copy(tmp_path)
    _cut_step_row(rank_dir)
    data = _read(rank_dir)
    assert data.tables[S.STEP_TRACE]["step"].to_pylist() == [50]
    (p,) = _problems(data, "step_trace_time.csv")
    assert p.reason.startswith("1 row(s) left out: 3 field(s) where the header has 10")
    assert p.reason.endswith("(a row cut off, e.g. by an interrupted copy, or a stray separator)")
    assert "lines" not in p.reason and not p.where


def test_spreadsheet_times_warning_names_the_rank(tmp_path):
    # step_trace_time.csv's Computing cell 8873.756000000001 rewritten as 8.87376E+03 (a
    # spreadsheet): read whole, the value as written, 8873.76 us = 8 873 760 ns, and one
    # warning for rank 0 (the rank of the directory, rank0_ascend_pt / profiler_info_0.json)
    rank_dir = _copy(tmp_path)
    st = rank_dir / OUT / "step_trace_time.csv"
    st.write_text(st.read_text(encoding="utf-8").replace("8873.756000000001", "8.87376E+03"),
                  encoding="utf-8")
    data = _read(rank_dir)
    assert data.tables[S.STEP_TRACE]["computing_ns"].to_pylist() == [8_873_760]
    (p,) = _problems(data, "step_trace_time.csv")
    assert p.severity == "warning" and p.rank == 0
    # a duration (under 1e12 us) read as written: no analysis loses input
    assert tuple(p.affects) == ()


def test_a_broken_profiler_info_does_not_lose_profiler_metadata(tmp_path):
    # profiler_info_0.json cut to its first 10 bytes (not JSON): recorded as a problem of the
    # metadata; profiler_metadata.json, read after it, is still read
    rank_dir = _copy(tmp_path)
    info = rank_dir / "profiler_info_0.json"
    info.write_bytes(info.read_bytes()[:10])
    data = _read(rank_dir)
    assert "profiler_info" not in data.meta
    assert data.meta["profiler_metadata"] == textio.read_json(
        rank_dir / "profiler_metadata.json", textio.METADATA_MAX_BYTES)
    (p,) = _problems(data, "profiler_info_0.json")
    assert "metadata" in p.affects and p.rank == 0


def test_a_host_queue_file_alone_is_read(tmp_path):
    # MindSpore's host queue file device_queue_profiling_0.txt ('type capacity batch size
    # time') written into ASCEND_PROFILER_OUTPUT with no other data-preparation file: batches
    # 1 and 2 of capacity 64 holding 5 and 0 -> the DATASET_QUEUE table, two rows
    rank_dir = _copy(tmp_path)
    (rank_dir / OUT / "device_queue_profiling_0.txt").write_text("1 64 1 5 10\n1 64 2 0 20\n")
    data = _read(rank_dir)
    assert data.tables["dataset_queue"].num_rows == 2


def test_assign_steps_keeps_step_an_int32():
    # kernels starting at 5, 15 and 100 ns, no step; STEPS windows 1 = [0, 9] and 2 = [10, 20]:
    # 5 is in step 1, 15 in step 2, 100 in none (null); the step column stays int32
    k = pa.table({"step": pa.array([None, None, None], pa.int32()),
                  "start_ns": pa.array([5, 15, 100], pa.int64())})
    st = pa.table({"step": pa.array([1, 2], pa.int32()), "start_ns": pa.array([0, 10], pa.int64()),
                   "end_ns": pa.array([9, 20], pa.int64())})
    got = AO.assign_steps(k, st)
    assert got.schema.field("step").type == pa.int32()
    assert got["step"].to_pylist() == [1, 2, None]


def test_a_profiler_info_that_is_not_an_object_does_not_lose_profiler_metadata(tmp_path):
    # profiler_info_0.json rewritten as the JSON array [1] (valid JSON, not an object):
    # recorded as "not a JSON object"; profiler_metadata.json, read after it, is still read
    rank_dir = _copy(tmp_path)
    (rank_dir / "profiler_info_0.json").write_text("[1]", encoding="utf-8")
    data = _read(rank_dir)
    assert "profiler_info" not in data.meta
    assert data.meta["profiler_metadata"] == textio.read_json(
        rank_dir / "profiler_metadata.json", textio.METADATA_MAX_BYTES)
    (p,) = _problems(data, "profiler_info_0.json")
    assert "not a JSON object" in p.reason and "metadata" in p.affects
