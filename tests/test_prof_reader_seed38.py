"""PROF_ directories read through ``read_source``: the cases the seed-38 mutation sample of
readers/prof.py found untested (a valid msprof JSON of a mindstudio_profiler_output export
feeding the timeline, the analyses a damaged per-iteration task_time JSON affects, a
task_time csv lacking a required column). Directories built by hand with the helpers of
test_prof_reader_by_hand.py (formats of spec §C); values worked out in the comments.
"""

from __future__ import annotations

import json

from ascendprof.model import schemas as S
from ascendprof.readers import read_source
from test_prof_reader_by_hand import (STEP_TRACE_HEAD, TASK_TIME_HEAD, _export, _only, _problems_of,
                                      _timeline_job, _write)


def test_a_valid_msprof_json_of_the_export_is_the_timeline(tmp_path):
    """mindstudio_profiler_output/msprof_*.json with one Ascend Hardware task 'k' at ts 1.000 us,
    dur 2 us: the TIMELINE table holds that one task of rank 5 (info.json.3 of _export), at
    1000 ns for 2000 ns, and nothing is recorded as a problem."""
    out = _export(tmp_path)
    _write(out / "task_time_20240101.csv", TASK_TIME_HEAD
           + "3,MatMul_1,AI_CORE,2,10,12.25,1700000000000100.5,1\n")
    _write(out / "msprof_20240101.json", json.dumps([
        {"ph": "M", "name": "process_name", "pid": 1, "tid": 0,
         "args": {"name": "Ascend Hardware"}},
        {"ph": "X", "name": "k", "pid": 1, "tid": 1, "ts": "1.000", "dur": 2.0}]))
    data = read_source(_only(tmp_path))
    assert list(data.problems) == []
    rows = [(r["rank"], r["name"], r["start_ns"], r["dur_ns"])
            for r in data.tables[S.TIMELINE].to_pylist()]
    assert rows == [(5, "k", 1000, 2000)]


def test_a_damaged_task_time_json_affects_op_statistics_and_step_breakdown(tmp_path):
    """timeline/task_time_0_1_2.json cut short: one problem naming it, affecting exactly the two
    analyses built from the kernels (op_statistics, step_breakdown, lower case as the analyses
    are named); iteration 1's kernel (task_time_0_1_1.json) is still read."""
    tl = _timeline_job(tmp_path)
    _write(tl / "task_time_0_1_1.json", json.dumps([
        {"ph": "X", "name": "MatMul-op3", "ts": 10.0, "dur": 1.0,
         "args": {"Task Type": "AI_CORE", "Stream Id": 2, "Task Id": 9}}]))
    _write(tl / "task_time_0_1_2.json", '[{"ph": "X", "name": "b", ')
    data = read_source(_only(tmp_path))
    probs = _problems_of(data, "task_time_0_1_2.json")
    assert [(p.severity, p.affects) for p in probs] == [
        ("skipped", ("op_statistics", "step_breakdown"))]
    assert data.tables[S.KERNELS].column("name").to_pylist() == ["MatMul-op3"]


def test_a_task_time_csv_without_task_start_is_a_problem_naming_the_column(tmp_path):
    """task_time csv whose header lacks task_start(us) (§C.2 requires it): the file is one
    problem whose reason names the missing column, and there are no kernels; the rank is still
    read (its step_trace csv gives the one iteration)."""
    out = _export(tmp_path)
    head = TASK_TIME_HEAD.replace("task_start(us),", "")
    _write(out / "task_time_20240101.csv", head + "3,MatMul_1,AI_CORE,2,10,12.25,1\n")
    _write(out / "step_trace_20240101.csv", STEP_TRACE_HEAD
           + "3,1,1700000000000100.000,1700000000000150.000,1700000000000300.000,250.000,"
             "50.000,150.000,0,1\n")
    data = read_source(_only(tmp_path))
    assert S.KERNELS not in data.tables
    assert data.tables[S.ITERATIONS].column("step").to_pylist() == [1]
    probs = _problems_of(data, "task_time_20240101.csv")
    assert len(probs) == 1 and probs[0].affects == ("op_statistics",)
    assert "task_start(us)" in probs[0].reason
