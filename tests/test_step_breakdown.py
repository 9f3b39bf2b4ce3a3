"""Recomputed step breakdown (spec §7.1) against the profiler's own step_trace_time.csv.

Expected values come only from step_trace_time.csv (read here with the csv module) or from the
hand calculations written out below.
"""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ascendprof.model import schemas as S
from ascendprof.analyze import intervals as I
from ascendprof.analyze.step_breakdown import (METRICS, breakdown, check_table, compute_mask,
                                               recompute)
from ascendprof.readers.trace_view import read_trace_view
from ascendprof.model.units import ms_to_ns, us_text_to_ns

def is_compute(task_type, name) -> bool:
    """compute_mask of one task (a falsy task type counts as none)."""
    return bool(compute_mask([task_type or None], [name])[0])


LEVELS = "torch_npu-2rank-levels/text/level{}/rank{}_ascend_pt/ASCEND_PROFILER_OUTPUT"
CHECKED = ("Computing", "Communication(Not Overlapped)", "Free")
KEY = dict(METRICS)


def _reported(d: Path) -> dict:
    """step_trace_time.csv, first data row, as floats (us)."""
    with open(d / "step_trace_time.csv", newline="") as f:
        row = next(csv.DictReader(f))
    return {k: float(v) for k, v in row.items() if k not in ("Step", "Device_id")}


def _agree(bd: pa.Table, rep: dict, metrics=CHECKED, tol_pct=1.0):
    assert bd is not None and bd.num_rows == 1
    row = bd.to_pylist()[0]
    for m in metrics:
        got = row[KEY[m]] / 1000
        assert got == pytest.approx(rep[m], rel=tol_pct / 100, abs=1e-3), (m, got, rep[m])


# ------------------------------------------------------------------ minimal local loaders
# (kernel_details.csv / communication.json -> KERNELS / COMM_OPS, only the columns used here;
# the project's own text readers are tested elsewhere.)

def _load_kernels(d: Path, rank: int) -> pa.Table:
    with open(d / "kernel_details.csv", newline="", encoding="utf-8-sig") as f:
        rows = list(csv.DictReader(f))
    t = pa.table({
        "rank": [rank] * len(rows),
        "step": [int(r["Step Id"]) for r in rows],
        "device_id": [int(r["Device_id"]) for r in rows],
        "name": [r["Name"] for r in rows],
        "accelerator_core": [r["Accelerator Core"] for r in rows],
        "start_ns": [us_text_to_ns(r["Start Time(us)"]) for r in rows],
        "dur_ns": [us_text_to_ns(r["Duration(us)"]) for r in rows],
    })
    return S.conform(S.KERNELS, t)


def _load_comm_ops(d: Path, rank: int) -> pa.Table:
    data = json.loads((d / "communication.json").read_text())
    rows = []
    for step_key, kinds in data.items():
        for kind, ops in kinds.items():
            for key, info in ops.items():
                if key.startswith("Total"):
                    continue
                ti = info["Communication Time Info"]
                rows.append({"rank": rank, "step": int(step_key[4:]), "step_key": step_key,
                             "kind": kind, "op_name": key.split("@")[0],
                             "group": key.split("@")[1],
                             "start_ns": round(ti["Start Timestamp(us)"] * 1000),
                             "elapse_ns": ms_to_ns(ti["Elapse Time(ms)"])})
    return S.conform(S.COMM_OPS, pa.Table.from_pylist(rows))


# ------------------------------------------------------------------ hand-worked arithmetic

def test_breakdown_hand_worked():
    # compute [0,10) [20,30); comm [5,25) and an hcom_receive [40,50)
    compute = I.make([0, 20], [10, 30])
    comm = I.make([5, 40], [25, 50])
    receive = I.make([40], [50])
    row = breakdown(compute, comm, receive, [(3, 0, 100)], {3: -7})[0]
    assert row["computing_ns"] == 20
    assert row["communication_ns"] == 30
    assert row["comm_not_overlapped_ns"] == 10 + 10  # [10,20) and [40,50)
    assert row["overlapped_ns"] == 10  # [5,10) and [20,25)
    assert row["free_ns"] == 10  # [30,40)
    assert row["bubble_ns"] == 10
    assert row["stage_ns"] == 50 - 10
    assert row["comm_not_overlapped_excl_receive_ns"] == 20 - 10
    assert row["preparing_ns"] == 0 - (-7)
    # a piece is credited wholly to the window of its start (spec §7.1.c): split at 22
    a, b = breakdown(compute, comm, receive, [(1, 0, 22), (2, 22, 100)])
    assert a["computing_ns"] == 20 and b["computing_ns"] == 0
    assert b["free_ns"] == 10 and a["free_ns"] == 0


#: Task types that are compute kernels, written out from the spec (not imported from the module):
#: GeTaskType of node_basic_info (§D.2: AI_CORE, AI_CPU, AI_VECTOR_CORE, WRITE_BACK, MIX_AIC,
#: MIX_AIV, FFTS_PLUS, DSA_SQE), kernel_details 'Accelerator Core' (§A.2: ... AI_CPU, DSA),
#: host task_track types of kernels (§D.2, §7.1.b step 6: KERNEL_AICORE, KERNEL_AIVEC,
#: KERNEL_MIX_AIC, KERNEL_MIX_AIV, and KERNEL_AICPU), FFTS+ sub-task types (§D.3: AIC, AIV,
#: MIX_AIC, MIX_AIV, AI_CPU, DSA) and the AICPU spelling of the trace's Task Type.
SPEC_COMPUTE_TYPES = {
    "AI_CORE", "AI_CPU", "AI_VECTOR_CORE", "WRITE_BACK", "MIX_AIC", "MIX_AIV", "FFTS_PLUS",
    "DSA_SQE", "DSA", "KERNEL_AICORE", "KERNEL_AIVEC", "KERNEL_MIX_AIC", "KERNEL_MIX_AIV",
    "KERNEL_AICPU", "AIC", "AIV", "AICPU"}
#: Runtime / communication task types (§D.3 SQE and FFTS+ names, §D.2 task_track, the TASK
#: taskType values of the torch_npu db in ../shared/data, §A.2 HCCL / COMMUNICATION rows).
SPEC_OTHER_TYPES = [
    "EVENT_RECORD", "EVENT_WAIT", "EVENT_RECORD_SQE", "EVENT_WAIT_SQE", "NOTIFY_RECORD_SQE",
    "NOTIFY_WAIT_SQE", "Notify Wait", "Notify Record", "Write Value", "WRITE_VALUE_SQE", "SDMA",
    "SDMA_SQE", "PCIE_DMA_SQE", "PLACE_HOLDER_SQE", "MEMCPY_ASYNC", "STARS_COMMON",
    "PROFILING_ENABLE", "PROFILING_DISABLE", "HCCL", "COMMUNICATION", "RDMA_SEND"]


@pytest.mark.parametrize("task_type", sorted(SPEC_COMPUTE_TYPES))
def test_compute_task_types_decide_over_the_name(task_type):
    # the type decides even when the name looks like a runtime task; the spacing and case of
    # the type do not matter
    assert is_compute(task_type, "EVENT_RECORD")
    assert is_compute(f" {task_type.lower()} ", "MEMCPY_ASYNC")
    # ... except the MC2 helper kernels CANN leaves out of the compute sections (§7.1.b.2)
    assert not is_compute(task_type, "MatmulAllReduceAicpuKernel")
    assert not is_compute(task_type, "AllGatherMatmulAivKernel")


@pytest.mark.parametrize("task_type", SPEC_OTHER_TYPES)
def test_runtime_and_communication_types_are_not_compute(task_type):
    assert not is_compute(task_type, "MatMulV3")
    assert not is_compute(task_type.lower(), "aclnnAdd_AddAiCore_Add")


def test_is_compute():
    assert is_compute("AI_CORE", "aclnnMuls_MulAiCore_Mul")
    assert is_compute("DSA_SQE", "x")
    for tt, name in (("SDMA", "SDMA"), ("Notify Wait", "Notify Wait"),
                     ("PCIE_DMA_SQE", "MEMCPY_ASYNC"), ("EVENT_RECORD_SQE", "EVENT_RECORD"),
                     ("AI_CORE", "MatmulAllReduceAicpuKernel"), (None, "EVENT_WAIT"),
                     ("COMMUNICATION", "hcom_allReduce__1_1")):
        assert not is_compute(tt, name), (tt, name)
    assert is_compute(None, "trans_TransData_0")


# The §7.1.b rule written per task with Python's re, as the module had it before Arrow evaluated
# it: the second method the vectorised compute_mask is checked against.
_ORACLE_NON_COMPUTE = re.compile(
    r"^(EVENT_|MEMCPY|PCIE_DMA|SDMA|NOTIFY|WRITE VALUE|WRITE_VALUE|PLACE_HOLDER|PROFILING_|RDMA|"
    r"REDUCE_INLINE|HCCL|COMMUNICATION|STARS_COMMON|CAPTURE_|MODEL_|STREAM_|LABEL_|BARRIER|"
    r"HCOM_)", re.IGNORECASE)
_ORACLE_RUNTIME = re.compile(r"^[A-Z0-9_]+$|\s")


def _oracle_is_compute(task_type, name) -> bool:
    name = name or ""
    if name.endswith(("AicpuKernel", "AivKernel")) or name.lower().startswith("hcom_"):
        return False
    if task_type:
        t = str(task_type).strip().upper()
        if t in SPEC_COMPUTE_TYPES:
            return True
        if _ORACLE_NON_COMPUTE.match(t):
            return False
    return not (_ORACLE_RUNTIME.search(name) or _ORACLE_NON_COMPUTE.match(name))


_WORDS = ["AI_CORE", "ai_core", " AIV ", "MIX_AIC", "SDMA", "AI_CPU", "KERNEL_AIVEC", "DSA_SQE",
          "WRITE_BACK", "FFTS_PLUS", "AIC", "Notify Wait", "EVENT_RECORD",
          "hcom_allReduce_", "HCOM_SEND", "MatMulV3", "AicpuKernel", "AivKernel", "MEMCPY_ASYNC",
          "x", "Add", "_", "0", " ", "\t", "\u3000", "\xa0", "write value", "COMMUNICATION", ""]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.one_of(st.none(), st.lists(st.sampled_from(_WORDS), max_size=3)
                                    .map("".join)),
                          st.one_of(st.none(), st.lists(st.sampled_from(_WORDS), max_size=3)
                                    .map("".join), st.text(max_size=6))),
                min_size=1, max_size=40))
def test_compute_mask_equals_the_per_task_rule(rows):
    types, names = zip(*rows)
    want = [_oracle_is_compute(t, n) for t, n in rows]
    assert compute_mask(list(types), list(names)).tolist() == want


def test_compute_mask_on_real_kernels_and_trace(shared_data):
    """Every kernel_details row and Ascend Hardware task of the torch_npu level1 rank is
    classified as the per-task rule classifies it."""
    d = shared_data / LEVELS.format(1, 0)
    with open(d / "kernel_details.csv", newline="") as f:
        rows = [(r["Accelerator Core"].upper(), r["Name"]) for r in csv.DictReader(f)]
    events = json.loads((d / "trace_view.json").read_text())
    rows += [((e.get("args") or {}).get("Task Type"), e.get("name")) for e in events
             if isinstance(e, dict) and e.get("ph") == "X"]
    types, names = zip(*rows)
    got = compute_mask(list(types), list(names)).tolist()
    assert got == [_oracle_is_compute(t, n) for t, n in rows]
    assert 0 < sum(got) < len(got)


# ------------------------------------------------------------------ real data: trace_view

@pytest.mark.parametrize("level", [0, 1, 2])
@pytest.mark.parametrize("rank", [0, 1])
def test_timeline_recomputation_matches_step_trace_time(shared_data, level, rank):
    d = shared_data / LEVELS.format(level, rank)
    tables = read_trace_view(d / "trace_view.json", rank)
    # Drop the profiler's own overlap events so only hardware tasks + HCCL big ops are used.
    tl = tables[S.TIMELINE]
    tables[S.TIMELINE] = tl.filter(pc.not_equal(tl["track"], "overlap"))
    bd, method = recompute(tables, rank)
    assert method.startswith("timeline"), method
    rep = _reported(d)
    _agree(bd, rep, CHECKED + ("Communication", "Overlapped", "Stage", "Preparing"))
    assert bd.to_pylist()[0]["step"] == 50


def test_overlap_track_method(shared_data):
    d = shared_data / LEVELS.format(1, 1)
    tables = read_trace_view(d / "trace_view.json", 1)
    tl = tables[S.TIMELINE]
    tables[S.TIMELINE] = tl.filter(pc.not_equal(tl["track"], "hardware"))
    bd, method = recompute(tables, 1)
    assert method.startswith("overlap"), method
    _agree(bd, _reported(d), CHECKED + ("Stage", "Preparing"), tol_pct=0.01)


# ------------------------------------------------------------------ real data: Qwen3 kernels

@pytest.mark.parametrize("rank", [0, 2])
@pytest.mark.parametrize("comm_source", ["kernel rows", "communication.json"])
def test_kernels_recomputation_qwen3(qwen3, rank, comm_source):
    d = qwen3 / f"rank_{rank}_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
    kernels = _load_kernels(d, rank)
    if comm_source == "communication.json":  # only compute rows; big ops from COMM_OPS
        kernels = kernels.filter(pc.not_equal(kernels["accelerator_core"], "COMMUNICATION"))
    tables = {S.KERNELS: kernels, S.COMM_OPS: _load_comm_ops(d, rank)}
    bd, method = recompute(tables, rank)
    assert method.startswith("kernels"), method
    assert ("communication.json" in method) == (comm_source == "communication.json")
    rep = _reported(d)
    _agree(bd, rep, CHECKED + ("Communication", "Stage"))
    row = bd.to_pylist()[0]
    assert row["step"] == 13 and row["device_id"] == {0: 0, 2: 4}[rank]
    assert row["preparing_ns"] is None  # no ProfilerStep start without trace_view


@pytest.mark.parametrize("rank", [1, 3])
def test_qwen3_ranks_without_kernels_give_reason(qwen3, rank):
    d = qwen3 / f"rank_{rank}_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
    assert not (d / "kernel_details.csv").exists()
    bd, reason = recompute({S.COMM_OPS: _load_comm_ops(d, rank)}, rank)
    assert bd is None
    assert "no kernel_details" in reason and "no trace_view" in reason


# ------------------------------------------------------------------ check table

def _st(rank, step, **vals_us) -> pa.Table:
    row = {"rank": rank, "step": step, **{KEY[k]: round(v * 1000) for k, v in vals_us.items()}}
    return S.conform(S.STEP_TRACE, pa.Table.from_pylist([row]))


def test_check_table_deviation_and_notes():
    rep = _st(0, 5, Computing=100.0, Free=0.0, Overlapped=50.0)
    rec = _st(0, 5, Computing=103.0, Free=2.0, Overlapped=50.25)
    df = check_table({0: (rep, rec, "timeline: x"), 7: (None, None, "cannot recompute: why")})
    assert list(df.columns) == ["Rank", "Step", "Metric", "Reported(us)", "Recomputed(us)",
                                "Deviation(%)", "Method", "Note"]
    r0 = df[df.Rank == 0].set_index("Metric")
    assert len(r0) == 9 and set(r0.Step) == {5}
    assert r0.loc["Computing", "Deviation(%)"] == pytest.approx(3.0)  # (103-100)/100*100
    assert "+3.00%" in r0.loc["Computing", "Note"]
    assert r0.loc["Overlapped", "Deviation(%)"] == pytest.approx(0.5) and r0.loc["Overlapped", "Note"] == ""
    assert pd_isna(r0.loc["Free", "Deviation(%)"]) and "reported 0" in r0.loc["Free", "Note"]
    r7 = df[df.Rank == 7]
    assert len(r7) == 9 and all("cannot recompute: why" in n for n in r7.Note)


def pd_isna(v) -> bool:
    import pandas as pd

    return bool(pd.isna(v))


def test_check_table_real_rank_not_recomputed(qwen3):
    d = qwen3 / "rank_1_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
    rep = _reported(d)
    reported = _st(1, 13, **{m: rep[m] for m in ("Computing", "Free")})
    bd, reason = recompute({}, 1)
    df = check_table({1: (reported, bd, reason)})
    assert len(df) == 9 and df["Recomputed(us)"].isna().all()
    assert all(reason in n for n in df.Note)
    assert df.set_index("Metric").loc["Computing", "Reported(us)"] == pytest.approx(
        rep["Computing"], abs=1e-3)


# ------------------------------------------------------------------ step windows (spec §7.1.c)
# "step = first step with start <= ts < end (ts only; an event is credited entirely to the step
# of its start; no clipping)". Two windows: step 1 = [100, 200), step 2 = [200, 300).

_WINDOWS = [(1, 100, 200), (2, 200, 300)]
_EDGES = [  # one compute piece [start, end) -> Computing of step 1, step 2 (ns)
    ((100, 110), (10, 0)),   # starts at the first window's start: step 1
    ((199, 205), (6, 0)),    # starts inside step 1, ends in step 2: wholly step 1, not clipped
    ((200, 210), (0, 10)),   # starts at step 1's end = step 2's start: step 2 only
    ((299, 300), (0, 1)),    # the last nanosecond of step 2
    ((300, 310), (0, 0)),    # starts at the last window's end: no step
    ((90, 150), (0, 0)),     # starts before the first window: no step, although it overlaps it
]


@pytest.mark.parametrize("piece, want", _EDGES)
@pytest.mark.parametrize("order", [1, -1])  # windows given in either order
def test_breakdown_credits_a_piece_to_the_window_of_its_start(piece, want, order):
    rows = breakdown(I.make([piece[0]], [piece[1]]), I.empty(), I.empty(), _WINDOWS[::order])
    assert [r["step"] for r in rows] == [1, 2]  # rows in time order
    assert (rows[0]["computing_ns"], rows[1]["computing_ns"]) == want
    # a communication piece follows the same rule (Communication and, here, all of it not
    # overlapped)
    rows = breakdown(I.empty(), I.make([piece[0]], [piece[1]]), I.empty(), _WINDOWS)
    assert (rows[0]["communication_ns"], rows[1]["communication_ns"]) == want
    assert (rows[0]["comm_not_overlapped_ns"], rows[1]["comm_not_overlapped_ns"]) == want


def test_breakdown_free_gap_and_bubble_at_a_window_edge():
    # compute [150,180) and [240,260); receive (an hcom_receive big op) [200,220).
    # Free = hull [150,260) minus (C ∪ M) = [180,200) + [220,240): the first piece starts in
    # step 1, the second in step 2. The receive starts at step 2's start: Bubble of step 2.
    rows = breakdown(I.make([150, 240], [180, 260]), I.make([200], [220]), I.make([200], [220]),
                     _WINDOWS)
    assert [r["free_ns"] for r in rows] == [20, 20]
    assert [r["bubble_ns"] for r in rows] == [0, 20]
    assert [r["communication_ns"] for r in rows] == [0, 20]
    # Stage = (last end - first start) of the pieces in the step - Bubble:
    # step 1: [150,180) and free [180,200) -> 50; step 2: [200,260) -> 60 - 20
    assert [r["stage_ns"] for r in rows] == [50, 40]
    # Communication(Not Overlapped and Exclude Receive) = max(CNO - Bubble, 0)
    assert [r["comm_not_overlapped_excl_receive_ns"] for r in rows] == [0, 0]


def _overlap_tables(pieces: list[tuple[str, int, int]], windows) -> dict:
    """A rank whose timeline has only the profiler's Overlap Analysis events (so the breakdown
    sums them, spec §7.1.c), with step windows from STEPS."""
    tl = S.from_lists(S.TIMELINE, {
        "rank": [0] * len(pieces), "track": ["overlap"] * len(pieces),
        "process": ["Overlap Analysis"] * len(pieces), "thread": [p[0] for p in pieces],
        "name": [p[0] for p in pieces], "start_ns": [p[1] for p in pieces],
        "dur_ns": [p[2] - p[1] for p in pieces]})
    steps = S.from_lists(S.STEPS, {"rank": [0] * len(windows), "step": [w[0] for w in windows],
                                   "start_ns": [w[1] for w in windows],
                                   "end_ns": [w[2] for w in windows],
                                   "origin": ["test"] * len(windows)})
    return {S.TIMELINE: tl, S.STEPS: steps}


@pytest.mark.parametrize("piece, want", _EDGES)
def test_overlap_events_are_summed_into_the_window_of_their_start(piece, want):
    tables = _overlap_tables([("Computing", *piece), ("Free", piece[0], piece[0] + 1)], _WINDOWS)
    bd, method = recompute(tables, 0)
    assert method.startswith("overlap"), method
    rows = bd.to_pylist()
    assert [r["step"] for r in rows] == [1, 2]
    assert (rows[0]["computing_ns"], rows[1]["computing_ns"]) == want
    assert (rows[0]["free_ns"], rows[1]["free_ns"]) == tuple(int(v > 0) for v in want)


def test_kernel_step_ids_give_windows_that_hold_their_last_kernel():
    """Without STEPS, the window of a Step Id spans its kernels, first start to last end, and a
    piece starting exactly at the last kernel's end (a zero-gap Free, a late communication op)
    is still that step's. Kernels of step 5: [100,150), [160,200); step 6: [300,400)."""
    k = S.from_lists(S.KERNELS, {
        "rank": [0] * 3, "step": [5, 5, 6], "name": ["MatMul", "Add", "Mul"],
        "accelerator_core": ["AI_CORE"] * 3, "start_ns": [100, 160, 300],
        "dur_ns": [50, 40, 100]})
    ops = S.from_lists(S.COMM_OPS, {"rank": [0, 0], "step": [5, 6], "op_name": ["hcom_a", "hcom_b"],
                                    "start_ns": [200, 400], "elapse_ns": [30, 5]})
    bd, method = recompute({S.KERNELS: k, S.COMM_OPS: ops}, 0)
    assert method.startswith("kernels"), method
    rows = {r["step"]: r for r in bd.to_pylist()}
    # step 5: compute 50 + 40, Free [150,160) = 10, comm [200,230) starts at the last end
    assert (rows[5]["computing_ns"], rows[5]["free_ns"], rows[5]["communication_ns"]) == (90, 10, 30)
    # step 6: compute 100; the op at 400 = its last kernel's end is step 6's; [230,300) is Free
    # that starts at 230, inside no window (step 5 ends at 200 + 1, step 6 starts at 300)
    assert (rows[6]["computing_ns"], rows[6]["communication_ns"], rows[6]["free_ns"]) == (100, 5, 0)
