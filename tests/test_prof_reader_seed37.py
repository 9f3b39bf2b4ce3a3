"""PROF_ directories read through ``read_source``: the cases the seed-37 mutation sample of
readers/prof.py found untested (the host start_info fallback of §D.6, an unreadable or negative
start_info, the rank of the timeline's warnings and iterations, a task without ``dur``, the
step_trace csv's Data Aug Bound, damaged communication_matrix.json / info.json). Directories
built by hand with the helpers of test_prof_reader_by_hand.py; values worked out in the comments.
"""

from __future__ import annotations

import json

from ascendprof.model import schemas as S
from ascendprof.readers import read_source
from test_prof_reader_by_hand import (STEP_TRACE_HEAD, TASK_TIME_HEAD, _export, _msprof, _only,
                                      _problems_of, _timeline_job, _write)


def _rank6_job(tmp_path, start_info=True):
    """_timeline_job with info.json.0 naming rank 6 (so a rank left out reads None, not 0)."""
    tl = _timeline_job(tmp_path, start_info=start_info)
    _write(tl.parent / "info.json.0", json.dumps({"rank_id": 6}))
    return tl


def _k1_start(data):
    return [r["start_ns"] for r in data.tables[S.TIMELINE].to_pylist() if r["name"] == "k1"]


# ------------------------------------------------------------------ start_info (§D.6)

def test_host_start_info_shifts_the_times_when_the_device_has_none(tmp_path):
    """No device_0/start_info.0, but host/start_info: offset 2000 us * 1000 - 400 ns =
    1999600 ns; task k1 at 500 us monotonic -> 500000 + 1999600 ns, and no warning."""
    tl = _rank6_job(tmp_path, start_info=False)
    _write(tl / "msprof_0_1_1.json", _msprof((1,), "k1"))
    _write(tl.parent.parent / "host" / "start_info",
           json.dumps({"collectionTimeBegin": "2000", "clockMonotonicRaw": "400"}))
    data = read_source(_only(tmp_path))
    assert _k1_start(data) == [500000 + 1999600]
    assert list(data.problems) == []


def test_an_unreadable_device_start_info_is_a_problem_and_the_host_one_is_used(tmp_path):
    """device_0/start_info.0 is cut short (not JSON): one problem naming it, affecting the step
    breakdown, of rank 6; the times then take host/start_info's offset (1999600 ns as above)."""
    tl = _rank6_job(tmp_path)
    _write(tl.parent / "start_info.0", '{"collectionTimeBegin": "10')
    _write(tl / "msprof_0_1_1.json", _msprof((1,), "k1"))
    _write(tl.parent.parent / "host" / "start_info",
           json.dumps({"collectionTimeBegin": "2000", "clockMonotonicRaw": "400"}))
    data = read_source(_only(tmp_path))
    probs = _problems_of(data, "start_info.0")
    assert [(p.severity, p.affects, p.rank) for p in probs] == [
        ("skipped", ("step_breakdown",), 6)]
    assert "invalid JSON" in probs[0].reason
    assert _k1_start(data) == [500000 + 1999600]


def test_a_negative_offset_is_a_warning_of_the_rank_and_times_stay_monotonic(tmp_path):
    """start_info.0 collectionTimeBegin 0 us, clockMonotonicRaw 400 ns: offset 0 - 400 < 0, so
    the times stay monotonic (k1 at 500 us = 500000 ns) and rank 6 gets a warning."""
    tl = _rank6_job(tmp_path)
    _write(tl.parent / "start_info.0", json.dumps({"collectionTimeBegin": "0",
                                                   "clockMonotonicRaw": "400"}))
    _write(tl / "msprof_0_1_1.json", _msprof((1,), "k1"))
    data = read_source(_only(tmp_path))
    assert [(p.reason, p.severity, p.rank) for p in _problems_of(data, "start_info.0")] == [
        ("negative monotonic-to-local offset; times kept monotonic", "warning", 6)]
    assert _k1_start(data) == [500000]


def test_the_missing_start_info_warning_is_the_ranks(tmp_path):
    tl = _rank6_job(tmp_path, start_info=False)
    _write(tl / "msprof_0_1_1.json", _msprof((1,), "k1"))
    data = read_source(_only(tmp_path))
    assert [(p.path, p.rank) for p in data.problems] == [(str(tl), 6)]


# ------------------------------------------------------------------ per-iteration timeline files

def test_a_task_without_dur_lasts_zero_ns(tmp_path):
    """A task_time X event with no ``dur`` is a task of 0 ns (next to one of 2.5 us = 2500
    ns); its start 10 us + the start_info offset 999600 ns."""
    tl = _rank6_job(tmp_path)
    _write(tl / "task_time_0_1_1.json", json.dumps([
        {"ph": "X", "name": "a", "ts": 10.0, "args": {"Task Type": "AI_CORE"}},
        {"ph": "X", "name": "b", "ts": 20.0, "dur": 2.5, "args": {"Task Type": "AI_CORE"}}]))
    k = read_source(_only(tmp_path)).tables[S.KERNELS].to_pylist()
    assert [(r["name"], r["start_ns"], r["dur_ns"]) for r in k] == [
        ("a", 10000 + 999600, 0), ("b", 20000 + 999600, 2500)]


def test_iterations_of_the_step_trace_json_are_the_ranks(tmp_path):
    """step_trace_0_1_1.json, Iteration 1: ts 100 us, FP Start 110, BP End 150, Iteration End
    200 (us; offset 999600 ns). First iteration: window [ts, end] = [100000, 200000] + offset,
    interval 0, fp+bp 40000 ns, tail 50000 ns; rank 6."""
    tl = _rank6_job(tmp_path)
    _write(tl / "msprof_0_1_1.json", _msprof((1,), "k1"))
    _write(tl / "step_trace_0_1_1.json", json.dumps([
        {"ph": "X", "name": "Iteration 1", "cat": "Iteration Time", "ts": 100.0, "dur": 100.0,
         "args": {"Iteration ID": 1, "FP Start": 110.0, "BP End": 150.0,
                  "Iteration End": 200.0}}]))
    it = read_source(_only(tmp_path)).tables[S.ITERATIONS].to_pylist()
    assert [(r["rank"], r["step"], r["start_ns"], r["end_ns"], r["iteration_interval_ns"],
             r["fp_bp_ns"], r["tail_ns"]) for r in it] == [
        (6, 1, 100000 + 999600, 200000 + 999600, 0, 40000, 50000)]


# ------------------------------------------------------------------ mindstudio_profiler_output

def test_step_trace_csv_data_aug_bound_is_the_iteration_interval(tmp_path):
    """§C.5 step_trace: Iteration End 1700000000000300 us, Iteration Time 250 us -> window
    [...050, ...300] us; FP to BP 50 us, Refresh 150 us, Data Aug Bound 7.5 us -> interval
    7500 ns."""
    out = _export(tmp_path)
    _write(out / "task_time_20240101.csv", TASK_TIME_HEAD
           + "3,MatMul_1,AI_CORE,2,10,12.25,1700000000000100.5,1700000000000112.75\n")
    _write(out / "step_trace_20240101.csv", STEP_TRACE_HEAD
           + "3,1,1700000000000100.000,1700000000000150.000,1700000000000300.000,250.000,"
             "50.000,150.000,7.500,1\n")
    it = read_source(_only(tmp_path)).tables[S.ITERATIONS].to_pylist()
    assert [(r["rank"], r["step"], r["start_ns"], r["end_ns"], r["iteration_interval_ns"],
             r["fp_bp_ns"], r["tail_ns"]) for r in it] == [
        (5, 1, 1700000000000050000, 1700000000000300000, 7500, 50000, 150000)]


def test_a_damaged_communication_matrix_json_affects_the_matrix(tmp_path):
    out = _export(tmp_path)
    _write(out / "task_time_20240101.csv", TASK_TIME_HEAD
           + "3,MatMul_1,AI_CORE,2,10,12.25,1700000000000100.5,1\n")
    _write(out.parent / "analyze" / "communication_matrix.json", '{"step1": {"collective": ')
    data = read_source(_only(tmp_path))
    probs = _problems_of(data, "communication_matrix.json")
    assert [(p.affects, p.rank) for p in probs] == [(("communication_matrix",), 5)]
    assert data.has(S.KERNELS) and not data.has(S.COMM_LINKS)


def test_a_damaged_info_json_is_a_metadata_problem_and_the_rank_is_read(tmp_path):
    """info.json.0 cut short: the rank is the device id (0), the info is a problem affecting
    the metadata only, and the kernels are read."""
    tl = _timeline_job(tmp_path)
    _write(tl.parent / "info.json.0", '{"rank_id": 6')
    _write(tl / "task_time_0_1_1.json", json.dumps([
        {"ph": "X", "name": "a", "ts": 10.0, "dur": 1.0, "args": {"Task Type": "AI_CORE"}}]))
    data = read_source(_only(tmp_path))
    probs = _problems_of(data, "info.json.0")
    assert [(p.affects, p.rank) for p in probs] == [(("metadata",), 0)]
    assert "prof_info" not in data.meta
    assert data.tables[S.KERNELS].column("name").to_pylist() == ["a"]
