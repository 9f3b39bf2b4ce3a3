"""PROF_ directories: the two 2023 MindSpore-driven CANN jobs in mindspore-legacy/profiler
(per-iteration device_<id>/timeline JSON), plus a mindstudio_profiler_output built from the
column lists of spec §C (no public full-size export exists; said so below).

Expected values are recomputed in the tests with json / csv directly from the files.
"""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path

import pytest

from ascendprof.model import schemas as S
from ascendprof.model.problems import Problems
from ascendprof.readers import prof, read_source
from ascendprof.scan import PROF, scan


def _prof_sources(shared_data):
    return [s for s in scan(shared_data / "mindspore-legacy" / "profiler", Problems())
            if s.kind == PROF]


def test_two_prof_dirs_ranks_from_info_json(shared_data):
    srcs = _prof_sources(shared_data)
    assert [(s.rank, s.device_id, s.rank_origin) for s in srcs] == [
        (0, 0, "device_0/info.json.0 rank_id"), (1, 1, "device_1/info.json.1 rank_id")]
    assert not any(f.endswith(".done") for s in srcs for f in s.files)


@pytest.mark.parametrize("index", [0, 1])
def test_kernels_count_and_total_duration_match_task_time_json(shared_data, index):
    src = _prof_sources(shared_data)[index]
    data = read_source(src)
    k = data.tables[S.KERNELS]
    assert k.schema.equals(S.SCHEMAS[S.KERNELS], check_metadata=False)
    # independent count: every X event carrying "Task Type" in task_time_*.json, dur in us
    tl = Path(src.path) / f"device_{src.device_id}" / "timeline"
    count, total_us, per_iter = 0, Decimal(0), {}
    for f in tl.glob("task_time_*.json"):
        it = int(f.stem.rsplit("_", 1)[1])
        ev = [e for e in json.loads(f.read_text()) if e.get("ph") == "X" and "Task Type" in e["args"]]
        count += len(ev)
        per_iter[it] = len(ev)
        total_us += sum(Decimal(repr(e["dur"])) for e in ev)
    assert k.num_rows == count == 4900
    assert sum(k.column("dur_ns").to_pylist()) == int(total_us * 1000)
    got = {}
    for s in k.column("step").to_pylist():
        got[s] = got.get(s, 0) + 1
    assert got == per_iter


def test_times_are_local_wall_clock_via_start_info(shared_data):
    src = _prof_sources(shared_data)[0]
    data = read_source(src)
    dev = Path(src.path) / "device_0"
    start = json.loads((dev / "start_info.0").read_text())
    end = json.loads((dev / "end_info.0").read_text())
    begin_ns = int(start["collectionTimeBegin"]) * 1000
    end_ns = int(end["collectionTimeEnd"]) * 1000
    k = data.tables[S.KERNELS]
    assert begin_ns <= min(k.column("start_ns").to_pylist()) <= end_ns
    # first task by hand: ts 56635864664.91 us monotonic + (begin us*1000 - clockMonotonicRaw ns)
    first = min(k.column("start_ns").to_pylist())
    assert first == 56635864664910 + begin_ns - int(start["clockMonotonicRaw"])


def test_iterations_from_step_trace_json(shared_data):
    src = _prof_sources(shared_data)[0]
    it = read_source(src).tables[S.ITERATIONS]
    assert it.column("step").to_pylist() == list(range(1, 11))
    # Iteration 2 by hand (step_trace_0_2_1.json): FP Start 56635944375.25, BP End 56635948644.4,
    # Iteration End 56635959739.47; Iteration 1 ended at 56635912240.3
    row = it.to_pylist()[1]
    assert row["fp_bp_ns"] == 56635948644400 - 56635944375250
    assert row["tail_ns"] == 56635959739470 - 56635948644400
    assert row["iteration_interval_ns"] == 56635944375250 - 56635912240300
    assert row["end_ns"] - row["start_ns"] == 56635959739470 - 56635912240300


def test_timeline_tracks(shared_data):
    src = _prof_sources(shared_data)[0]
    tl = read_source(src).tables[S.TIMELINE]
    tracks = dict(zip(*[tl.group_by("track").aggregate([("name", "count")]).column(c).to_pylist()
                        for c in ("track", "name_count")]))
    f = Path(src.path) / "device_0" / "timeline"
    overlap = 0
    for p in f.glob("msprof_*.json"):
        ev = json.loads(p.read_text())
        pid = {e["pid"] for e in ev if e.get("name") == "process_name"
               and e["args"]["name"] == "Overlap Analysis"}
        overlap += sum(1 for e in ev if e.get("ph") == "X" and e["pid"] in pid)
    assert tracks["overlap"] == overlap
    assert tracks["step"] == 10 and tracks["hardware"] == 4900


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_mindstudio_profiler_output_built_from_spec(tmp_path):
    """No public mindstudio_profiler_output of useful size exists; these files follow the column
    lists of spec §C.1/§C.3/§C.5 with values chosen by hand."""
    d = tmp_path / "PROF_1_2_A"
    _write(d / "device_3" / "info.json.3", json.dumps({"rank_id": 5, "DeviceInfo": [{"id": 3}]}))
    out = d / "mindstudio_profiler_output"
    _write(out / "op_summary_slice_0_20240101.csv",
           "Device_id,Model ID,Task ID,Stream ID,Op Name,OP Type,OP State,Task Type,"
           "Task Start Time(us),Task Duration(us),Task Wait Time(us),Block Num,aic_mac_ratio\n"
           "3,1,10,2,MatMul_1,MatMul,static,AI_CORE,1700000000000100.500\t,12.250,0,8,0.5\n")
    _write(out / "op_summary_slice_1_20240101.csv",
           "Device_id,Model ID,Task ID,Stream ID,Op Name,OP Type,OP State,Task Type,"
           "Task Start Time(us),Task Duration(us),Task Wait Time(us),Block Num,aic_mac_ratio\n"
           "3,1,11,2,Add_2,Add,static,AI_VECTOR_CORE,1700000000000200.000\t,1.000,87.250,4,N/A\n")
    _write(out / "op_statistic_20240101.csv",
           "Device_id,OP Type,Core Type,Count,Total Time(us),Min Time(us),Avg Time(us),"
           "Max Time(us),Ratio(%)\n3,MatMul,AI_CORE,1,12.25,12.25,12.25,12.25,92.45\n")
    _write(out / "step_trace_20240101.csv",
           "Device_id,Iteration ID,FP Start(us),BP End(us),Iteration End(us),Iteration Time(us),"
           "FP to BP Time(us),Iteration Refresh(us),Data Aug Bound(us),Model ID\n"
           "3,1,1700000000000100.000\t,1700000000000150.000\t,1700000000000300.000\t,250.000,"
           "50.000,150.000,0,1\n")
    src = scan(tmp_path, Problems())[0]
    assert (src.kind, src.rank, src.device_id) == (PROF, 5, 3)
    data = prof.read(src)
    k = data.tables[S.KERNELS]
    assert k.column("name").to_pylist() == ["MatMul_1", "Add_2"]
    assert k.column("start_ns").to_pylist() == [1700000000000100500, 1700000000000200000]
    assert k.column("dur_ns").to_pylist() == [12250, 1000]
    assert k.column("pmu:aic_mac_ratio").to_pylist() == [0.5, None]
    assert k.column("step").to_pylist() == [1, 1]
    it = data.tables[S.ITERATIONS].to_pylist()[0]
    assert (it["start_ns"], it["end_ns"], it["fp_bp_ns"], it["tail_ns"]) == (
        1700000000000050000, 1700000000000300000, 50000, 150000)
    assert data.tables[S.OP_STATISTIC].column("total_ns").to_pylist() == [12250]


def test_damaged_task_time_is_recorded(tmp_path):
    d = tmp_path / "PROF_x" / "device_0"
    _write(d / "info.json.0", json.dumps({"rank_id": 0}))
    _write(d / "timeline" / "task_time_0_1_1.json", '[{"ph": "X", "name": "a", "ts": "x", '
           '"dur": 1, "args": {"Task Type": "AI_CORE"}}]')
    _write(d / "timeline" / "task_time_0_1_2.json", '[{"ph": "X", "name": "b", "ts": 5.5, '
           '"dur": 1.25, "args": {"Task Type": "AI_CORE"}}]')
    data = prof.read(scan(tmp_path, Problems())[0])
    assert data.tables[S.KERNELS].column("dur_ns").to_pylist() == [1250]
    assert any("task_time_0_1_1.json" in p.path for p in data.problems)
