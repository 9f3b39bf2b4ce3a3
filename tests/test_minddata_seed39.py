"""Minddata parsers (ascendprof/readers/minddata.py), mutation seed 39: MindSpore run_2's legacy
profiler directory (rank 1) copied, with its raw pipeline CSV (minddata_pipeline_raw_1.csv)
rewritten, read through ``read_source``. Checks that an output_queue_average_size that is not a
number is recorded as a problem naming the raw CSV itself (its path, not "None"), the line and
the reason, and that the ops then come from pipeline_profiling_1.json instead. The same kind of
check at another place: an output_queue_usage_rate that is not a number, reported the same way.
Expected values are worked out by hand in the docstrings from the profiler's own files."""

from __future__ import annotations

import shutil

from ascendprof.model import schemas as S
from ascendprof.model.problems import Problems
from ascendprof.readers import read_source
from ascendprof.scan import scan

RUN2 = "mindspore-legacy/run_2/normal_run/profiler"
RAW = "minddata_pipeline_raw_1.csv"
PROF = "pipeline_profiling_1.json"


def _read(shared_data, tmp_path, raw_text: str):
    """run_2's profiler directory copied to tmp_path/run/profiler with the raw CSV replaced by
    ``raw_text``; the rank's RankData as read_source gives it."""
    d = tmp_path / "run" / "profiler"
    shutil.copytree(shared_data / RUN2, d)
    (d / RAW).write_text(raw_text, encoding="utf-8")
    source, = scan(d.parent, Problems())
    return read_source(source)


def _raw_lines(shared_data) -> list[str]:
    """run_2's raw CSV: the header (columns op_id, op_type, num_workers, output_queue_size,
    output_queue_average_size, output_queue_length, output_queue_usage_rate, sample_interval,
    parent_id, children_id), then ops 0-3 on lines 2-5."""
    lines = (shared_data / RUN2 / RAW).read_text().splitlines(keepends=True)
    assert lines[1] == "0,BatchOp,4,\"[0, 2]\",1.0,64,0.015625,10,,[1]\n"
    assert lines[2] == "1,MapOp,8,\"[0, 0]\",0.0,128,0.0,10,0,[2]\n"
    return lines


def _only_raw_problem(data, tmp_path):
    """The one problem about the raw CSV; its path must be the copied file's own path."""
    raw = tmp_path / "run" / "profiler" / RAW
    got = [p for p in data.problems if RAW in p.line()]
    assert len(got) == 1, [p.line() for p in data.problems]
    p = got[0]
    assert p.path == str(raw), p.line()
    return p


def test_raw_csv_average_size_not_a_number_names_the_file(shared_data, tmp_path):
    """Op 0's output_queue_average_size (line 2, 5th field "1.0") written "abc": 'not a number:
    'abc'' at line 2, the problem's path being the raw CSV's own path; the ops are then read
    from pipeline_profiling_1.json (all five ops 0-4, source that file)."""
    lines = _raw_lines(shared_data)
    lines[1] = "0,BatchOp,4,\"[0, 2]\",abc,64,0.015625,10,,[1]\n"
    data = _read(shared_data, tmp_path, "".join(lines))
    p = _only_raw_problem(data, tmp_path)
    assert (p.reason, p.where, p.rank) == ("not a number: 'abc'", "line 2", 1)
    ops = data.tables[S.DATASET_OPS].to_pylist()
    assert sorted(r["op_id"] for r in ops) == [0, 1, 2, 3, 4]
    assert {r["source"] for r in ops} == {PROF}


def test_raw_csv_usage_rate_not_a_number_names_the_file(shared_data, tmp_path):
    """Op 1's output_queue_usage_rate (line 3, 7th field "0.0") written "full": 'not a number:
    'full'' at line 3, naming the raw CSV by its own path; ops then from the JSON."""
    lines = _raw_lines(shared_data)
    lines[2] = "1,MapOp,8,\"[0, 0]\",0.0,128,full,10,0,[2]\n"
    data = _read(shared_data, tmp_path, "".join(lines))
    p = _only_raw_problem(data, tmp_path)
    assert (p.reason, p.where, p.rank) == ("not a number: 'full'", "line 3", 1)
    assert {r["source"] for r in data.tables[S.DATASET_OPS].to_pylist()} == {PROF}
