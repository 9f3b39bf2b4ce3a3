"""PROF_ directories read through ``read_source``: the per-iteration timeline of the 2023 CANN
jobs in mindspore-legacy/profiler (real files, copied and damaged where a test needs it) and
mindstudio_profiler_output files built from the column lists of spec §C (no public export of
useful size exists), with the values chosen by hand below.

What is checked: which file feeds which table when several could, the ids taken from the
timeline file names, the monotonic-to-local shift (§D.6) of every table and its boundary, and
that a damaged file is one recorded problem (naming the file and the analyses it affects), not
a failed rank.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import pytest

from ascendprof.model import schemas as S
from ascendprof.model.errors import InputError
from ascendprof.model.problems import Problems
from ascendprof.readers import read_source
from ascendprof.scan import PROF, scan

JOB = "mindspore-legacy/profiler/PROF_000001_20230818142704322_COJGGGCANRMICFBC"
TASK_TIME_HEAD = ("Device_id,kernel_name,kernel_type,stream_id,task_id,task_time(us),"
                  "task_start(us),task_stop(us)\n")
OP_SUMMARY_HEAD = ("Device_id,Model ID,Task ID,Stream ID,Op Name,OP Type,OP State,Task Type,"
                   "Task Start Time(us),Task Duration(us),Task Wait Time(us),Block Num\n")
STEP_TRACE_HEAD = ("Device_id,Iteration ID,FP Start(us),BP End(us),Iteration End(us),"
                   "Iteration Time(us),FP to BP Time(us),Iteration Refresh(us),"
                   "Data Aug Bound(us),Model ID\n")


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def _only(root: Path):
    srcs = [s for s in scan(root, Problems()) if s.kind == PROF]
    assert len(srcs) == 1
    return srcs[0]


def _problems_of(data, name: str):
    return [p for p in data.problems if p.path.endswith(name)]


# ------------------------------------------------------------------ real per-iteration timeline

def _real(shared_data):
    return _only(shared_data / JOB)


def _copy_iterations(shared_data, dst: Path, iterations=(1, 2)) -> Path:
    """The job's device_0 with the timeline files of ``iterations`` only."""
    src = shared_data / JOB
    d = dst / src.name
    (d / "device_0" / "timeline").mkdir(parents=True)
    for f in ("info.json.0", "start_info.0", "end_info.0"):
        shutil.copy(src / "device_0" / f, d / "device_0" / f)
    for p in (src / "device_0" / "timeline").iterdir():
        if int(p.stem.rsplit("_", 1)[1]) in iterations:
            shutil.copy(p, d / "device_0" / "timeline" / p.name)
    return d


def test_kernels_carry_device_and_model_id_of_the_file_name(shared_data):
    """task_time_<dev>_<model>_<iter>.json: this job's files are task_time_0_2_<iter>, so every
    kernel has device 0 and model 2."""
    k = read_source(_real(shared_data)).tables[S.KERNELS]
    assert set(k.column("device_id").to_pylist()) == {0}
    assert set(k.column("model_id").to_pylist()) == {2}


def test_iterations_are_moved_to_local_wall_clock(shared_data):
    """Iteration 2 of step_trace_0_2_2.json ends at 56635959739.47 us monotonic; local time adds
    collectionTimeBegin (us) * 1000 - clockMonotonicRaw (ns) of start_info.0."""
    src = _real(shared_data)
    start = json.loads((Path(src.path) / "device_0" / "start_info.0").read_text())
    offset = int(start["collectionTimeBegin"]) * 1000 - int(start["clockMonotonicRaw"])
    it = read_source(src).tables[S.ITERATIONS].to_pylist()
    assert it[1]["step"] == 2
    assert it[1]["end_ns"] == 56635959739470 + offset
    assert it[1]["start_ns"] == 56635912240300 + offset  # Iteration 1's end


def test_a_source_without_device_id_finds_its_timeline_folder(shared_data):
    """A Source whose device is not known (device_id None) still reads the one */timeline
    folder it lists: the same 4900 device tasks as with the device id."""
    src = dataclasses.replace(_real(shared_data), device_id=None)
    data = read_source(src)
    assert data.tables[S.KERNELS].num_rows == 4900


def test_a_damaged_msprof_file_loses_only_its_iteration(shared_data, tmp_path):
    d = _copy_iterations(shared_data, tmp_path)
    msprof2 = d / "device_0" / "timeline" / "msprof_0_2_2.json"
    msprof2.write_text('[{"ph": "X", "name": "a", "pid": 1, "tid": 1, ')  # cut short
    data = read_source(_only(tmp_path))
    probs = _problems_of(data, "msprof_0_2_2.json")
    assert len(probs) == 1 and probs[0].affects == ("step_breakdown",)
    # the timeline of iteration 1 is still there: its step-trace row "Iteration 1"
    tl = data.tables[S.TIMELINE]
    steps = [n for n, t in zip(tl.column("name").to_pylist(), tl.column("track").to_pylist())
             if t == "step"]
    assert "Iteration 1" in steps


def test_start_info_without_its_keys_is_a_warning_and_times_stay_monotonic(shared_data,
                                                                          tmp_path):
    d = _copy_iterations(shared_data, tmp_path, iterations=(1,))
    (d / "device_0" / "start_info.0").write_text(json.dumps({"collectionDateBegin": "x"}))
    data = read_source(_only(tmp_path))
    reasons = [p.reason for p in _problems_of(data, "start_info.0")]
    assert reasons == ["start_info lacks collectionTimeBegin / clockMonotonicRaw"]
    assert [p.severity for p in _problems_of(data, "start_info.0")] == ["warning"]
    # first task of the job (see test_prof_reader): 56635864664.91 us monotonic, not shifted
    assert min(data.tables[S.KERNELS].column("start_ns").to_pylist()) == 56635864664910


def test_a_ts_of_exactly_ten_to_the_fifteen_us_is_wall_clock(tmp_path):
    """Spec §D.6: a ts *below* 10^15 us is monotonic and shifted by start_info; 10^15 us itself
    (2001-09-09 as Unix time) is taken as wall clock and kept."""
    dev = tmp_path / "PROF_1_A" / "device_0"
    _write(dev / "info.json.0", json.dumps({"rank_id": 0}))
    # offset = 1000 us * 1000 - 400 ns = 999600 ns
    _write(dev / "start_info.0", json.dumps({"collectionTimeBegin": "1000",
                                             "clockMonotonicRaw": "400"}))
    events = [{"ph": "X", "name": "wall", "ts": 1000000000000000, "dur": 1,
               "args": {"Task Type": "AI_CORE"}},
              {"ph": "X", "name": "mono", "ts": 999999999999999, "dur": 1,
               "args": {"Task Type": "AI_CORE"}}]
    _write(dev / "timeline" / "task_time_0_1_1.json", json.dumps(events))
    k = read_source(_only(tmp_path)).tables[S.KERNELS]
    got = dict(zip(k.column("name").to_pylist(), k.column("start_ns").to_pylist()))
    assert got == {"wall": 10 ** 18, "mono": 999999999999999000 + 999600}


# ------------------------------------------------------------------ mindstudio_profiler_output

def _export(tmp_path: Path) -> Path:
    d = tmp_path / "PROF_1_2_A"
    _write(d / "device_3" / "info.json.3", json.dumps({"rank_id": 5, "DeviceInfo": [{"id": 3}]}))
    return d / "mindstudio_profiler_output"


def test_task_time_csv_gives_the_kernels_when_there_is_no_op_summary(tmp_path):
    """§C.2 task_time: one kernel per row, no op type; times us -> ns."""
    out = _export(tmp_path)
    _write(out / "task_time_20240101.csv", TASK_TIME_HEAD
           + "3,MatMul_1,AI_CORE,2,10,12.25,1700000000000100.5,1700000000000112.75\n"
           + "3,Add_2,AI_VECTOR_CORE,7,11,1.000,1700000000000200.000,1700000000000201.000\n")
    k = read_source(_only(tmp_path)).tables[S.KERNELS]
    rows = [{c: r[c] for c in ("name", "accelerator_core", "device_id", "stream_id", "task_id",
                               "start_ns", "dur_ns", "op_type")} for r in k.to_pylist()]
    assert rows == [
        {"name": "MatMul_1", "accelerator_core": "AI_CORE", "device_id": 3, "stream_id": 2,
         "task_id": 10, "start_ns": 1700000000000100500, "dur_ns": 12250, "op_type": None},
        {"name": "Add_2", "accelerator_core": "AI_VECTOR_CORE", "device_id": 3, "stream_id": 7,
         "task_id": 11, "start_ns": 1700000000000200000, "dur_ns": 1000, "op_type": None}]


def test_op_summary_wins_over_task_time(tmp_path):
    """Both files written: the kernels are op_summary's (they have the op type)."""
    out = _export(tmp_path)
    _write(out / "op_summary_20240101.csv", OP_SUMMARY_HEAD
           + "3,1,10,2,MatMul_1,MatMul,static,AI_CORE,1700000000000100.500,12.250,0,8\n")
    _write(out / "task_time_20240101.csv", TASK_TIME_HEAD
           + "3,other,AI_CORE,2,10,5.0,1700000000000100.5,1700000000000105.5\n"
           + "3,other2,AI_CORE,2,11,5.0,1700000000000300.5,1700000000000305.5\n")
    k = read_source(_only(tmp_path)).tables[S.KERNELS]
    assert k.column("name").to_pylist() == ["MatMul_1"]
    assert k.column("op_type").to_pylist() == ["MatMul"]


@pytest.mark.parametrize("row, reason", [
    ("3,MatMul_1,AI_CORE,2,10,abc,1700000000000100.5,1\n", None),
    ("3,MatMul_1,AI_CORE,x2,10,12.25,1700000000000100.5,1\n", "column 'stream_id' is not an integer"),
], ids=["time-not-a-number", "stream-id-not-an-integer"])
def test_a_bad_task_time_csv_is_a_problem_naming_it(tmp_path, row, reason):
    out = _export(tmp_path)
    _write(out / "task_time_20240101.csv", TASK_TIME_HEAD + row)
    _write(out / "step_trace_20240101.csv", STEP_TRACE_HEAD
           + "3,1,1700000000000100.000,1700000000000150.000,1700000000000300.000,250.000,"
             "50.000,150.000,0,1\n")
    data = read_source(_only(tmp_path))
    assert S.KERNELS not in data.tables and data.has(S.ITERATIONS)
    probs = _problems_of(data, "task_time_20240101.csv")
    assert len(probs) == 1 and probs[0].affects == ("op_statistics",)
    if reason:
        assert probs[0].reason == reason


def test_a_step_trace_csv_with_a_bad_iteration_id_is_a_problem_naming_it(tmp_path):
    out = _export(tmp_path)
    _write(out / "task_time_20240101.csv", TASK_TIME_HEAD
           + "3,MatMul_1,AI_CORE,2,10,12.25,1700000000000100.5,1\n")
    _write(out / "step_trace_20240101.csv", STEP_TRACE_HEAD
           + "3,one,1700000000000100.000,1700000000000150.000,1700000000000300.000,250.000,"
             "50.000,150.000,0,1\n")
    data = read_source(_only(tmp_path))
    assert not data.has(S.ITERATIONS) and data.has(S.KERNELS)
    probs = _problems_of(data, "step_trace_20240101.csv")
    assert [p.reason for p in probs] == ["column 'Iteration ID' is not an integer"]


def test_a_damaged_op_summary_affects_op_statistics_and_step_breakdown(tmp_path):
    out = _export(tmp_path)
    _write(out / "op_summary_20240101.csv", "Device_id,Model ID\n3,1\n")  # no op columns
    _write(out / "op_statistic_20240101.csv",
           "Device_id,OP Type,Core Type,Count,Total Time(us),Min Time(us),Avg Time(us),"
           "Max Time(us),Ratio(%)\n3,MatMul,AI_CORE,1,12.25,12.25,12.25,12.25,92.45\n")
    data = read_source(_only(tmp_path))
    probs = _problems_of(data, "op_summary_20240101.csv")
    assert len(probs) == 1 and probs[0].affects == ("op_statistics", "step_breakdown")


def test_a_damaged_msprof_json_of_the_export_affects_step_breakdown(tmp_path):
    out = _export(tmp_path)
    _write(out / "task_time_20240101.csv", TASK_TIME_HEAD
           + "3,MatMul_1,AI_CORE,2,10,12.25,1700000000000100.5,1\n")
    _write(out / "msprof_20240101.json", '[{"ph": "X", ')
    data = read_source(_only(tmp_path))
    probs = _problems_of(data, "msprof_20240101.json")
    assert len(probs) == 1 and probs[0].affects == ("step_breakdown",)


def test_analyze_communication_json_gives_the_comm_ops(shared_data, tmp_path):
    """analyze/communication.json of a PROF_ export has the layout of torch_npu's
    communication.json (§A.5): the real file of torch_npu-2rank-levels level1 rank 0 holds 4
    collective ops in step50, keyed ``<op name>@<group>`` (and a 'Total Op Info' entry that is
    no op)."""
    real = (shared_data / "torch_npu-2rank-levels/text/level1/rank0_ascend_pt/"
            "ASCEND_PROFILER_OUTPUT/communication.json")
    out = _export(tmp_path)
    _write(out.parent / "analyze" / "communication.json", real.read_text())
    data = read_source(_only(tmp_path))
    ops = data.tables[S.COMM_OPS]
    want = sorted(tuple(k.split("@")) for k in json.loads(real.read_text())["step50"]["collective"]
                  if k != "Total Op Info")
    assert len(want) == 4
    assert sorted(zip(ops.column("op_name").to_pylist(), ops.column("group").to_pylist())) == want
    assert set(ops.column("rank").to_pylist()) == {5}


def test_a_prof_directory_of_unknown_rank_is_not_read(tmp_path):
    """PROF_abc: no device_<id> folder and no number in its name, so no rank. Like an
    ASCEND_PROFILER_OUTPUT of unknown rank, it is refused as a whole (one InputError), not read
    into tables whose rank column is null (before: the kernels had rank null and the msprof
    timeline was dropped as an 'unexpected trace event (TypeError ...)')."""
    out = tmp_path / "PROF_abc" / "mindstudio_profiler_output"
    _write(out / "task_time_20240101.csv", TASK_TIME_HEAD
           + "3,MatMul_1,AI_CORE,2,10,12.25,1700000000000100.5,1\n")
    _write(out / "msprof_20240101.json", json.dumps([
        {"ph": "M", "name": "process_name", "pid": 1, "tid": 0,
         "args": {"name": "Ascend Hardware"}},
        {"ph": "X", "name": "k", "pid": 1, "tid": 1, "ts": "1.000", "dur": 1.0}]))
    src = _only(tmp_path)
    assert src.rank is None
    with pytest.raises(InputError, match="rank unknown"):
        read_source(src)


# ------------------------------------------------------------------ hand-built timeline folders

def _timeline_job(tmp_path: Path, start_info: bool = True) -> Path:
    """PROF_1_A/device_0 with info.json.0 (rank 0) and, when asked, start_info.0 whose offset is
    1000 us * 1000 - 400 ns = 999600 ns. Returns the timeline folder (not created yet)."""
    dev = tmp_path / "PROF_1_A" / "device_0"
    _write(dev / "info.json.0", json.dumps({"rank_id": 0, "hostname": "node-a"}))
    if start_info:
        _write(dev / "start_info.0", json.dumps({"collectionTimeBegin": "1000",
                                                 "clockMonotonicRaw": "400"}))
    return dev / "timeline"


def _msprof(iterations, hw_name: str) -> str:
    """An msprof file as the 2023 jobs write it: a Step Trace process with one ``Iteration N``
    event per iteration (cat Iteration Time) and one Ascend Hardware task."""
    events = [{"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "Step Trace"}},
              {"ph": "M", "name": "process_name", "pid": 2, "args": {"name": "Ascend Hardware"}},
              {"ph": "X", "name": hw_name, "pid": 2, "tid": 7, "ts": 500.0, "dur": 2.0,
               "args": {"Task Type": "AI_CORE"}}]
    events += [{"ph": "X", "name": f"Iteration {i}", "pid": 1, "tid": 1, "cat": "Iteration Time",
                "ts": 100.0 * i, "dur": 50.0} for i in iterations]
    return json.dumps(events)


def test_iteration_events_repeated_by_every_msprof_file_are_kept_once(tmp_path):
    """Both per-iteration msprof files repeat the events Iteration 1 and Iteration 2 of the step
    trace: the timeline keeps each once (step track), and both hardware tasks."""
    tl = _timeline_job(tmp_path)
    _write(tl / "msprof_0_1_1.json", _msprof((1, 2), "k1"))
    _write(tl / "msprof_0_1_2.json", _msprof((1, 2), "k2"))
    t = read_source(_only(tmp_path)).tables[S.TIMELINE]
    rows = sorted((r["track"], r["name"], r["step"]) for r in t.to_pylist())
    # step of a hardware task = the iteration of its file; of an Iteration event = its N
    assert rows == [("hardware", "k1", 1), ("hardware", "k2", 2),
                    ("step", "Iteration 1", 1), ("step", "Iteration 2", 2)]


def test_kernels_without_a_step_trace_take_the_iteration_of_their_file(tmp_path):
    """task_time_0_1_7.json and no step_trace file: nothing to assign steps from, so each kernel's
    step is the <iteration> of its file name (7)."""
    tl = _timeline_job(tmp_path)
    _write(tl / "task_time_0_1_7.json", json.dumps([
        {"ph": "X", "name": "MatMul-op3", "ts": 10.0, "dur": 1.0,
         "args": {"Task Type": "AI_CORE", "Stream Id": 2, "Task Id": 9}}]))
    k = read_source(_only(tmp_path)).tables[S.KERNELS]
    assert k.column("step").to_pylist() == [7]
    assert k.column("op_type").to_pylist() == ["MatMul"]


def test_a_missing_start_info_is_one_warning_on_the_timeline_folder(tmp_path):
    """Without start_info the times stay monotonic and the timeline folder gets the warning
    saying so; with a usable start_info there is no such warning."""
    for with_info, root in ((False, tmp_path / "a"), (True, tmp_path / "b")):
        tl = _timeline_job(root, start_info=with_info)
        _write(tl / "msprof_0_1_1.json", _msprof((1,), "k1"))
        data = read_source(_only(root))
        warned = [(p.path, p.reason, p.severity) for p in data.problems]
        if with_info:
            assert warned == []
        else:
            assert warned == [(str(tl), "no start_info: timeline times stay on the monotonic "
                                        "clock", "warning")]
        # k1 at 500 us: 500000 ns monotonic, + 999600 ns with start_info
        hw = [r["start_ns"] for r in data.tables[S.TIMELINE].to_pylist() if r["name"] == "k1"]
        assert hw == [500000 + 999600 if with_info else 500000]


def test_a_timeline_file_that_is_no_event_array_is_a_problem_naming_it(tmp_path):
    """msprof_0_1_2.json holds a JSON object, not an array of events: that file is one problem
    (named, with the reason), iteration 1's timeline is kept."""
    tl = _timeline_job(tmp_path)
    _write(tl / "msprof_0_1_1.json", _msprof((1,), "k1"))
    _write(tl / "msprof_0_1_2.json", json.dumps({"traceEvents": []}))
    data = read_source(_only(tmp_path))
    assert [(p.path, p.reason) for p in data.problems] == [
        (str(tl / "msprof_0_1_2.json"), "expected a JSON array of trace events")]
    assert "k1" in data.tables[S.TIMELINE].column("name").to_pylist()


def test_a_damaged_step_trace_json_affects_the_cluster_step_trace(tmp_path):
    tl = _timeline_job(tmp_path)
    _write(tl / "msprof_0_1_1.json", _msprof((1,), "k1"))
    # an Iteration Time event without its args: no FP Start / BP End / Iteration End
    _write(tl / "step_trace_0_1_1.json", json.dumps([
        {"ph": "X", "name": "Iteration 1", "cat": "Iteration Time", "ts": 1.0, "dur": 1.0}]))
    data = read_source(_only(tmp_path))
    probs = _problems_of(data, "step_trace_0_1_1.json")
    assert len(probs) == 1 and probs[0].affects == ("cluster_step_trace",)
    assert not data.has(S.ITERATIONS)


def test_info_json_is_kept_as_the_rank_metadata(shared_data):
    """device_0/info.json.0 of the real job (hostname A2007104679, rank_id 0) is the rank's
    meta["prof_info"], as written."""
    src = _real(shared_data)
    info = json.loads((Path(src.path) / "device_0" / "info.json.0").read_text())
    assert info["hostname"] == "A2007104679"
    assert read_source(src).meta["prof_info"] == info


def test_a_prof_directory_with_nothing_readable_is_refused_naming_it(tmp_path):
    """Only device_3/info.json.3 and an export file of no known module: no table, so the
    whole PROF_ directory is one InputError saying so."""
    out = _export(tmp_path)
    _write(out / "readme.txt", "nothing\n")
    src = _only(tmp_path)
    with pytest.raises(InputError) as e:
        read_source(src)
    assert e.value.reason == "no readable exported data in this PROF_ directory"
    assert e.value.path == str(src.path)


def test_a_time_that_is_no_number_is_named_in_the_problem(tmp_path):
    """task_time(us) 'abc': the problem names the file and the bad value."""
    out = _export(tmp_path)
    _write(out / "task_time_20240101.csv", TASK_TIME_HEAD
           + "3,MatMul_1,AI_CORE,2,10,abc,1700000000000100.5,1\n")
    _write(out / "step_trace_20240101.csv", STEP_TRACE_HEAD
           + "3,1,1700000000000100.000,1700000000000150.000,1700000000000300.000,250.000,"
             "50.000,150.000,0,1\n")
    data = read_source(_only(tmp_path))
    probs = _problems_of(data, "task_time_20240101.csv")
    assert len(probs) == 1 and "'abc'" in probs[0].reason


def test_a_damaged_analyze_communication_json_affects_communication(tmp_path):
    out = _export(tmp_path)
    _write(out / "task_time_20240101.csv", TASK_TIME_HEAD
           + "3,MatMul_1,AI_CORE,2,10,12.25,1700000000000100.5,1\n")
    _write(out.parent / "analyze" / "communication.json", '{"step1": {"collective": ')
    data = read_source(_only(tmp_path))
    probs = _problems_of(data, "communication.json")
    assert len(probs) == 1 and probs[0].affects == ("communication",)
    assert data.has(S.KERNELS) and not data.has(S.COMM_OPS)


def test_analyze_communication_matrix_json_gives_the_links(shared_data, tmp_path):
    """analyze/communication_matrix.json (the torch_npu layout, §A.6): one COMM_LINKS row per
    step, kind, link key and src-dst link of the real file of torch_npu-2rank-levels level1
    rank 0, all of this PROF_ directory's rank (5)."""
    real = (shared_data / "torch_npu-2rank-levels/text/level1/rank0_ascend_pt/"
            "ASCEND_PROFILER_OUTPUT/communication_matrix.json")
    out = _export(tmp_path)
    _write(out.parent / "analyze" / "communication_matrix.json", real.read_text())
    data = read_source(_only(tmp_path))
    links = data.tables[S.COMM_LINKS]
    want = sorted((kind, key, link) for step in json.loads(real.read_text()).values()
                  for kind, keys in step.items() for key, ls in keys.items() for link in ls)
    assert len(want) > 6
    got = sorted(zip(links.column("kind").to_pylist(), links.column("link_key").to_pylist(),
                     [f"{s}-{d}" for s, d in zip(links.column("src_rank").to_pylist(),
                                                 links.column("dst_rank").to_pylist())]))
    assert got == want
    assert set(links.column("rank").to_pylist()) == {5}
