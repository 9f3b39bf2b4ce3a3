"""analyze.step_breakdown on small hand-built ranks: the three recomputation methods (device
timeline classified by task type or by the profiler's links, the Overlap Analysis events,
kernel_details rows with communication from kernel rows or from communication.json), the step
windows, the step_trace_check table (notes, the summarised rows and their limit) and the
per-rank verdict on it.

Every expected value is worked out by hand in the comments (intervals are [start, end) in ns;
spec §7.1: C = union of compute tasks, M = union of communication sections, Communication(Not
Overlapped) = M \\ C, Free = hull(C ∪ M) \\ (C ∪ M), a piece is credited wholly to the step
window holding its start)."""

from __future__ import annotations

import pyarrow as pa
import pytest

from ascendprof.model import schemas as S
from ascendprof.analyze.step_breakdown import (CHECK_COLUMNS, check_table, compute_mask,
                                               rank_checks, recompute)

NS_KEYS = ["computing_ns", "comm_not_overlapped_ns", "overlapped_ns", "communication_ns",
           "free_ns", "stage_ns", "bubble_ns", "comm_not_overlapped_excl_receive_ns",
           "preparing_ns"]


def timeline(rows) -> pa.Table:
    """rows: (rank, track, thread, name, start, end, task_type, category, step)."""
    cols = list(zip(*rows))
    return S.from_lists(S.TIMELINE, {
        "rank": list(cols[0]), "track": list(cols[1]), "process": ["p"] * len(rows),
        "thread": list(cols[2]), "name": list(cols[3]), "start_ns": list(cols[4]),
        "dur_ns": [e - s for s, e in zip(cols[4], cols[5])], "task_type": list(cols[6]),
        "category": list(cols[7]), "step": list(cols[8])})


def step_windows(rows) -> pa.Table:
    """rows: (rank, step, start, end)."""
    return S.from_lists(S.STEPS, {"rank": [r[0] for r in rows], "step": [r[1] for r in rows],
                                  "start_ns": [r[2] for r in rows],
                                  "end_ns": [r[3] for r in rows], "origin": ["test"] * len(rows)})


def kernels(rows) -> pa.Table:
    """rows: (rank, step, name, accelerator_core, start, end)."""
    return S.from_lists(S.KERNELS, {
        "rank": [r[0] for r in rows], "step": [r[1] for r in rows],
        "name": [r[2] for r in rows], "accelerator_core": [r[3] for r in rows],
        "start_ns": [r[4] for r in rows], "dur_ns": [r[5] - r[4] for r in rows]})


def ns(row) -> list:
    return [row[k] for k in NS_KEYS]


BIG = "Group 1 Communication"


def test_timeline_by_task_type_of_one_rank_of_two():
    """A text trace (no links): compute by task type. Rank 0:
    hardware: MatMul AI_CORE [100,200), Add AI_VECTOR_CORE [300,350), MEMCPY_ASYNC [50,60)
    (runtime), an MC2 helper kernel AI_CPU [400,420) (left out);
    HCCL big ops: allReduce [150,260), hcom_receive [500,520); a Plane task (not a big op).
    C = 100 + 50 = 150; M = 110 + 20 = 130; CNO = [200,260) + [500,520) = 80; Overlapped 50;
    Free = hull [100,520) minus C ∪ M = [260,300) + [350,500) = 190; Bubble = the receive, 20;
    Stage = 520 - 100 - 20 = 400; CNO excl. receive = 80 - 20 = 60;
    Preparing = first task 100 - ProfilerStep start 80 = 20.
    Rank 1 has a task and a window of its own that must not count."""
    tl = timeline([
        (0, "hardware", "Stream 1", "MatMul", 100, 200, "AI_CORE", None, None),
        (0, "hardware", "Stream 1", "Add", 300, 350, "AI_VECTOR_CORE", None, None),
        (0, "hardware", "Stream 2", "MEMCPY_ASYNC", 50, 60, "MEMCPY_ASYNC", None, None),
        (0, "hardware", "Stream 1", "MatmulAllReduceAicpuKernel", 400, 420, "AI_CPU", None, None),
        (0, "communication", BIG, "hcom_allReduce__1", 150, 260, None, None, None),
        (0, "communication", BIG, "hcom_receive__2", 500, 520, None, None, None),
        (0, "communication", "Plane 0", "Notify Wait", 150, 160, None, None, None),
        (0, "step", "Step", "ProfilerStep#7", 80, 600, None, None, 7),
        (1, "hardware", "Stream 1", "MatMul", 0, 1000, "AI_CORE", None, None),
        (1, "step", "Step", "ProfilerStep#9", 0, 2000, None, None, 9),
    ])
    tables = {S.TIMELINE: tl, S.STEPS: step_windows([(0, 7, 80, 600), (1, 9, 0, 2000)])}
    bd, method = recompute(tables, 0)
    assert method == (
        "timeline: Ascend Hardware compute tasks + HCCL big ops (interval union/difference) "
        "(tasks classified by task type (no compute-op info in the input): 2 compute, 0 linked "
        "to HCCL ops, 1 of other or unknown types left out); step windows from test")
    (row,) = bd.to_pylist()
    assert (row["rank"], row["step"]) == (0, 7)
    assert ns(row) == [150, 80, 50, 130, 190, 400, 20, 60, 20]


def test_timeline_by_the_profilers_links():
    """A db export: tasks carry what they are linked to (category). Hardware: FlashAttn
    (compute-op info) [100,200), Cast typed 'Other' but linked to compute-op info [250,260),
    a Notify Wait linked to an HCCL op [210,230) (not compute), a copy [50,60) (other), an MC2
    helper with compute-op info [300,310) (left out). Communication: the big ops' spans
    [140,300) and [400,420); the first op's tasks extend over [150,200) and [220,240), the
    second op has no tasks (its span stands for it).
    C = [100,200) + [250,260) = 110; M = [150,200) + [220,240) + [400,420) = 90 (not the
    spans: 180); CNO = [220,240) + [400,420) = 40; Overlapped 50; Free = hull [100,420) minus
    C ∪ M = [200,220) + [240,250) + [260,400) = 170; Stage = 420 - 100 = 320; no receive, no
    ProfilerStep."""
    ops = "Group 1 Communication tasks"
    tl = timeline([
        (0, "hardware", "Stream 1", "FlashAttn", 100, 200, "FFTS_PLUS", "compute", None),
        (0, "hardware", "Stream 1", "Cast", 250, 260, "Other", "compute", None),
        (0, "hardware", "Stream 3", "Notify Wait", 210, 230, "Notify Wait", "communication",
         None),
        (0, "hardware", "Stream 2", "MEMCPY_ASYNC", 50, 60, "MEMCPY_ASYNC", "other", None),
        (0, "hardware", "Stream 1", "AllGatherMatmulAivKernel", 300, 310, "AIV", "compute",
         None),
        (0, "communication", BIG, "hcom_allReduce__1", 140, 300, None, None, None),
        (0, "communication", BIG, "hcom_broadcast__2", 400, 420, None, None, None),
        (0, "communication", ops, "hcom_allReduce__1", 150, 200, "HCCL tasks", "communication",
         None),
        (0, "communication", ops, "hcom_allReduce__1", 220, 240, "HCCL tasks", "communication",
         None),
        (0, "communication", ops, "hcom_broadcast__2", 400, 420, "op span (no tasks)",
         "communication", None),
    ])
    bd, method = recompute({S.TIMELINE: tl, S.STEPS: step_windows([(0, 1, 0, 1000)])}, 0)
    assert method == (
        "timeline: Ascend Hardware compute tasks + HCCL ops' task extents (2 ops, tasks linked "
        "by the profiler) + the spans of 1 HCCL op(s) without tasks (interval "
        "union/difference) (tasks classified by their links: 2 with compute-op info, 1 linked "
        "to HCCL ops, 1 other); step windows from test")
    (row,) = bd.to_pylist()
    assert ns(row) == [110, 40, 50, 90, 170, 320, 0, 40, None]


def test_overlap_events_with_receive_and_device():
    """Only the profiler's Overlap Analysis events (rank 3 of a two-rank table), summed per
    step window (§7.1.c). Step 4 [100,300): Computing [100,150), Communication [140,190),
    CNO [150,190), Free [190,200), an hcom_receive big op [150,170) -> Computing 50,
    Communication 50, CNO 40, Overlapped 10, Free 10, Bubble 20, Stage 200 - 100 - 20 = 80,
    CNO excl. receive 20, Preparing 100 - 90 = 10.
    Step 5 [300,400): Communication and CNO [300,305) and a receive [300,320): Bubble 20 >
    CNO 5, so CNO excl. receive is 0 (never negative); Stage 320 - 300 - 20 = 0; no
    ProfilerStep of step 5: no Preparing. The device id comes from the rank's STEP_TRACE."""
    ov = [("Computing", 100, 150), ("Communication", 140, 190),
          ("Communication(Not Overlapped)", 150, 190), ("Free", 190, 200),
          ("Communication(Not Overlapped)", 300, 305), ("Communication", 300, 305)]
    tl = timeline([(3, "overlap", t, t, s, e, None, None, None) for t, s, e in ov] + [
        (3, "communication", BIG, "hcom_receive__1", 150, 170, None, None, None),
        (3, "communication", BIG, "hcom_receive__2", 300, 320, None, None, None),
        (3, "step", "Step", "ProfilerStep#4", 90, 300, None, None, 4),
        (2, "overlap", "Computing", "Computing", 100, 300, None, None, None)])
    st = S.from_lists(S.STEP_TRACE, {"rank": [2, 3], "step": [4, 4], "device_id": [7, 5],
                                     "computing_ns": [1, 1]})
    tables = {S.TIMELINE: tl, S.STEP_TRACE: st,
              S.STEPS: step_windows([(3, 5, 300, 400), (3, 4, 100, 300)])}
    bd, method = recompute(tables, 3)
    assert method == ("overlap: profiler's Overlap Analysis events summed per step (weaker "
                      "check); step windows from test")
    rows = bd.to_pylist()
    assert [(r["rank"], r["device_id"], r["step"]) for r in rows] == [(3, 5, 4), (3, 5, 5)]
    assert ns(rows[0]) == [50, 40, 10, 50, 10, 80, 20, 20, 10]
    assert ns(rows[1]) == [0, 5, 0, 5, 0, 0, 20, 0, None]


def test_kernels_with_communication_rows_and_one_step():
    """kernel_details only, one Step Id: its window spans all the data. MatMul AI_CORE
    [100,200); a MEMCPY_ASYNC row without a core (a runtime task, not compute) [90,95); big ops
    hcom_allReduce [150,250) and hcom_receive [300,340) (COMMUNICATION rows).
    C = 100; M = 100 + 40 = 140; CNO = [200,250) + [300,340) = 90; Overlapped 50;
    Free = [250,300) = 50; Bubble 40; Stage = 340 - 100 - 40 = 200; CNO excl. receive 50."""
    k = kernels([(0, 1, "MatMul", "AI_CORE", 100, 200), (0, 1, "MEMCPY_ASYNC", "", 90, 95),
                 (0, 1, "hcom_allReduce__1", "COMMUNICATION", 150, 250),
                 (0, 1, "hcom_receive__2", "COMMUNICATION", 300, 340)])
    bd, method = recompute({S.KERNELS: k}, 0)
    assert method == ("kernels: kernel_details compute rows (1) + kernel_details COMMUNICATION "
                      "rows (big ops) (interval union/difference); step windows from "
                      "kernel_details Step Id spans")
    (row,) = bd.to_pylist()
    assert row["step"] == 1
    assert ns(row) == [100, 90, 50, 140, 50, 200, 40, 50, None]


def test_kernels_with_communication_json_ops_and_two_steps():
    """Compute rows only; the big ops from communication.json (start + Elapse Time). Step 1's
    kernels span [100,201) (last end + 1), step 2's [400,451). MatMul [100,200) step 1, Add
    [400,450) step 2; hcom_allReduce [150,250), hcom_receive [440,470).
    Step 1: C 100, M 100, CNO [200,250) 50, Overlapped 50, Stage 250 - 100 = 150, Bubble 0;
    Free [250,400) starts in no window.
    Step 2: C 50, M 30, CNO [450,470) 20 (starts at 450 < 451), Overlapped 10, Bubble 30,
    Stage 470 - 400 - 30 = 40, CNO excl. receive max(20 - 30, 0) = 0, Free 0."""
    k = kernels([(0, 1, "MatMul", "AI_CORE", 100, 200), (0, 2, "Add", "AI_VECTOR_CORE", 400, 450),
                 (1, 1, "MatMul", "AI_CORE", 0, 5000)])
    ops = S.from_lists(S.COMM_OPS, {"rank": [0, 0, 1], "op_name": ["hcom_allReduce__1",
                                                                   "hcom_receive__2", "hcom_x"],
                                    "start_ns": [150, 440, 0], "elapse_ns": [100, 30, 9000]})
    bd, method = recompute({S.KERNELS: k, S.COMM_OPS: ops}, 0)
    assert method == ("kernels: kernel_details compute rows (2) + communication.json ops "
                      "(Start Timestamp + Elapse Time) (interval union/difference); step "
                      "windows from kernel_details Step Id spans")
    rows = {r["step"]: r for r in bd.to_pylist()}
    assert ns(rows[1]) == [100, 50, 50, 100, 0, 150, 0, 50, None]
    assert ns(rows[2]) == [50, 20, 10, 30, 0, 40, 30, 0, None]


def test_nothing_to_recompute_from_says_what_is_missing():
    assert recompute({}, 0) == (None, "cannot recompute: no trace_view timeline; no "
                                      "kernel_details (KERNELS) for this rank")


# ------------------------------------------------------------------ step_trace_check


def st(rank, rows) -> pa.Table:
    """rows: step -> {STEP_TRACE column: us}; missing metrics null."""
    out = []
    for step, vals in rows.items():
        out.append({"rank": rank, "step": step, **{
            k: None if vals.get(k) is None else round(vals[k] * 1000) for k in NS_KEYS}})
    return S.conform(S.STEP_TRACE, pa.Table.from_pylist(out))


def test_check_table_notes_per_step_and_metric():
    # reported steps 5, 6; recomputed 5, 7. Step 5: Computing 100 -> 103 us (+3 %), Free not
    # in the profiler's row, Overlapped 0 -> 0, Bubble 0 -> 2 us, Preparing reported but not
    # recomputable without framework events, the rest recomputed as null.
    rep = st(0, {5: {"computing_ns": 100, "overlapped_ns": 0, "bubble_ns": 0,
                     "preparing_ns": 4, "stage_ns": 200},
                 6: {"computing_ns": 50}})
    rec = st(0, {5: {"computing_ns": 103, "free_ns": 2, "overlapped_ns": 0, "bubble_ns": 2,
                     "stage_ns": 201},
                 7: {"computing_ns": 10}})
    df = check_table({0: (rep, rec, "kernels: x")})
    assert list(df.columns) == CHECK_COLUMNS
    assert str(df["Step"].dtype) == "Int64"
    assert df["Step"].tolist() == [5] * 9 + [6] * 9 + [7] * 9
    assert (df["Method"] == "kernels: x").all()
    by = df.set_index(["Step", "Metric"])
    r = by.loc[(5, "Computing")]
    assert (r["Reported(us)"], r["Recomputed(us)"]) == (100.0, 103.0)
    assert r["Deviation(%)"] == pytest.approx(3.0)
    assert r["Note"] == "recomputed differs by +3.00% (+3.000 us) beyond 1%"
    r = by.loc[(5, "Stage")]  # 0.5 %: within 1 %, no note
    assert (r["Deviation(%)"], r["Note"]) == (pytest.approx(0.5), "")
    assert by.loc[(5, "Free"), "Note"] == "reported value missing"
    assert by.loc[(5, "Overlapped"), "Note"] == ""
    assert by.loc[(5, "Bubble"), "Note"] == "reported 0, recomputed 2.000 us"
    assert by.loc[(5, "Preparing"), "Note"] == ("ProfilerStep start unknown (no framework "
                                                "events in the input)")
    assert by.loc[(5, "Communication"), "Note"] == "not recomputable from this input"
    assert by.loc[(6, "Computing"), "Note"] == "step not found in the recomputed data"
    assert by.loc[(6, "Computing"), "Reported(us)"] == 50.0
    assert by.loc[(7, "Computing"), "Note"] == "not reported by the profiler"
    assert by.loc[(7, "Computing"), "Recomputed(us)"] == 10.0
    assert df.attrs["summarised"] == {}
    # a rank that could not be recomputed: every row says why
    df = check_table({2: (rep, None, "cannot recompute: no kernels")})
    assert df["Note"].tolist() == ["cannot recompute: no kernels"] * 18
    assert df["Recomputed(us)"].isna().all()
    df = check_table({2: (None, None, None)})
    assert df["Note"].tolist() == ["not reported and not recomputed: no data"] * 9


def test_check_table_summarises_more_than_a_thousand_unchecked_steps():
    # 1000 reported steps the recomputation does not cover: still one row each (9 metrics)
    rep = st(0, {s: {"computing_ns": 1} for s in range(1, 1001)})
    rec = st(0, {2000: {"computing_ns": 1}})
    df = check_table({0: (rep, rec, "m")})
    assert len(df) == 1001 * 9 and df.attrs["summarised"] == {}
    # 1001 of them (steps 2..1002; step 1 is recomputed): one row per metric for them, the
    # checked steps in step order (the recomputed table lists 2000 first)
    rep = st(0, {s: {"computing_ns": 2} for s in range(1, 1003)})
    rec = st(0, {2000: {"computing_ns": 1}, 1: {"computing_ns": 3}})
    df = check_table({0: (rep, rec, "m")})
    assert df.attrs["summarised"] == {0: 1001}
    summary = df[df["Step"].isna()]
    assert len(summary) == 9
    assert summary["Note"].iloc[0] == ("1001 steps (2..1002): step not found in the recomputed "
                                       "data; summarised in this row (more than 1000 such "
                                       "steps)")
    rest = df[df["Step"].notna()]
    assert rest["Step"].tolist() == [1] * 9 + [2000] * 9
    one = rest.set_index(["Step", "Metric"]).loc[(1, "Computing")]
    assert (one["Reported(us)"], one["Recomputed(us)"], one["Deviation(%)"]) == (2.0, 3.0, 50.0)
    assert rest.set_index(["Step", "Metric"]).loc[(2000, "Computing"), "Note"] == (
        "not reported by the profiler")


# ------------------------------------------------------------------ the verdict per rank


def test_rank_checks_on_the_check_table():
    C, N = "computing_ns", "comm_not_overlapped_ns"
    per_rank = {
        # within 1 %: 100 -> 100.5 (0.5 %), 50 -> 50.2 (0.4 %)
        0: (st(0, {1: {C: 100, N: 50}}), st(0, {1: {C: 100.5, N: 50.2}}), "m0"),
        # Computing 100 -> 102 us in step 3: +2 %
        1: (st(1, {3: {C: 100, N: 50}}), st(1, {3: {C: 102, N: 50}}), "m1"),
        # CNO reported 0, recomputed 30 us: beyond the 1 us noise, no percentage
        2: (st(2, {1: {C: 100, N: 0}}), st(2, {1: {C: 100, N: 30}}), "m2"),
        # nothing from the profiler
        3: (None, st(3, {1: {C: 80, N: 1}}), "m3"),
        # step 2 of the profiler's has no recomputed value
        4: (st(4, {1: {C: 10, N: 1}, 2: {C: 10, N: 1}}), st(4, {1: {C: 10, N: 1}}), "m4"),
        # the worst step: step 1 at 0.5 %, not step 2 whose 0 -> 0.5 us is within the noise
        5: (st(5, {1: {C: 100, N: 1}, 2: {C: 0, N: 1}}),
            st(5, {1: {C: 100.5, N: 1}, 2: {C: 0.5, N: 1}}), "m5"),
    }
    got = {c["rank"]: c for c in rank_checks(check_table(per_rank))}
    assert [(got[r]["status"], got[r]["used"]) for r in range(6)] == [
        ("agrees", "reported"), ("deviates", "reported"), ("deviates", "reported"),
        ("recomputed_only", "recomputed"), ("not_checked", "reported"), ("agrees", "reported")]
    assert got[0]["reason"] == "" and got[5]["reason"] == ""
    assert got[0]["metrics"]["Computing"] == {"step": 1, "reported_us": 100.0,
                                              "recomputed_us": 100.5,
                                              "deviation_pct": pytest.approx(0.5)}
    assert got[1]["reason"].startswith(
        "recomputed Computing 102.0 us against the profiler's 100.0 us (+2.0 %) in step 3 "
        "(limit 1 %). Recomputed by m1. ")
    cno = got[2]["metrics"]["Communication(Not Overlapped)"]
    assert (cno["step"], cno["reported_us"], cno["recomputed_us"], cno["deviation_pct"]) == (
        1, 0.0, 30.0, None)
    assert got[2]["reason"].startswith(
        "recomputed Communication(Not Overlapped) 30.0 us against the profiler's 0.0 us in "
        "step 1 (limit 1 %)")
    assert got[3]["reason"] == (
        "no step breakdown from the profiler (step_trace_time.csv / StepTraceTime): the "
        "recomputed one is used, not checked against it (m3)")
    assert got[4]["reason"] == ("step(s) 2 of the profiler's breakdown not found in the "
                                "recomputed data (m4); used unchecked")
    assert got[5]["metrics"]["Computing"]["step"] == 1
    assert got[5]["metrics"]["Computing"]["deviation_pct"] == pytest.approx(0.5)


# ------------------------------------------------------------------ inputs at their edges


def test_one_hardware_task_and_no_step_windows_give_one_window_over_all_data():
    """A text trace with a single Ascend Hardware task (MatMul AI_CORE [100,200)), one HCCL
    big op (hcom_allReduce [150,260)), and no ProfilerStep nor STEPS: the task is enough for the
    timeline method, and the one window spans all the data [100, 260] (its last ns included).
    C = 100; M = 110; CNO = [200,260) = 60; Overlapped 50; Free = hull [100,260) minus C ∪ M =
    0; Stage = 260 - 100 = 160; no receive, no ProfilerStep (Preparing null); step null."""
    tl = timeline([
        (0, "hardware", "Stream 1", "MatMul", 100, 200, "AI_CORE", None, None),
        (0, "communication", BIG, "hcom_allReduce__1", 150, 260, None, None, None),
    ])
    bd, method = recompute({S.TIMELINE: tl}, 0)
    assert method == (
        "timeline: Ascend Hardware compute tasks + HCCL big ops (interval union/difference) "
        "(tasks classified by task type (no compute-op info in the input): 1 compute, 0 linked "
        "to HCCL ops, 0 of other or unknown types left out); one window over all data (no step "
        "windows)")
    (row,) = bd.to_pylist()
    assert (row["rank"], row["step"]) == (0, None)
    assert ns(row) == [100, 60, 50, 110, 0, 160, 0, 60, None]


def test_a_timeline_without_hardware_tasks_says_so():
    # only a ProfilerStep: nothing on the device, no overlap events, no kernels
    tl = timeline([(0, "step", "Step", "ProfilerStep#1", 0, 100, None, None, 1)])
    assert recompute({S.TIMELINE: tl}, 0) == (
        None, "cannot recompute: timeline has no Ascend Hardware tasks; timeline has no Overlap "
              "Analysis events; no kernel_details (KERNELS) for this rank")


@pytest.mark.parametrize("receive_start, bubble, stage", [
    # the window is [100, 250 + 1): a receive starting at the data's last ns (250) is its:
    # Bubble 10, Stage = 260 - 100 - 10 = 150
    (250, 10, 150),
    # one ns later it starts in no window: Bubble 0, Stage = 250 - 100 = 150 from the overlap
    # events alone
    (251, 0, 150),
])
def test_overlap_events_without_step_windows_span_the_data_with_its_last_ns(receive_start,
                                                                            bubble, stage):
    """Overlap Analysis events only (Computing [100,200), Communication [150,250),
    Communication(Not Overlapped) [200,250)), no step windows: one window over the events'
    span, [100, 250] with its last ns. An hcom_receive big op of 10 ns is credited to it only if
    it starts inside. Computing 100, Communication 100, CNO 50, Overlapped 100 - 50 = 50, Free 0
    either way; CNO excl. receive = 50 - Bubble."""
    ov = [("Computing", 100, 200), ("Communication", 150, 250),
          ("Communication(Not Overlapped)", 200, 250)]
    tl = timeline([(0, "overlap", t, t, s, e, None, None, None) for t, s, e in ov] + [
        (0, "communication", BIG, "hcom_receive__1", receive_start, receive_start + 10, None,
         None, None)])
    bd, method = recompute({S.TIMELINE: tl}, 0)
    assert method == ("overlap: profiler's Overlap Analysis events summed per step (weaker "
                      "check); one window over all data (no step windows)")
    (row,) = bd.to_pylist()
    assert row["step"] is None
    assert ns(row) == [100, 50, 50, 100, 0, stage, bubble, 50 - bubble, None]


def test_overlap_step_window_without_events_is_all_zero():
    """Overlap events Computing [100,150) and Free [150,160) in step 1 [100,300); step 2
    [300,400) holds no event: every sum 0 and Stage 0 (no piece, no span), not null."""
    tl = timeline([(0, "overlap", "Computing", "Computing", 100, 150, None, None, None),
                   (0, "overlap", "Free", "Free", 150, 160, None, None, None)])
    bd, _ = recompute({S.TIMELINE: tl, S.STEPS: step_windows([(0, 1, 100, 300),
                                                                (0, 2, 300, 400)])}, 0)
    rows = bd.to_pylist()
    assert [r["step"] for r in rows] == [1, 2]
    # step 1: Computing 50, Free 10, Stage = 160 - 100 = 60
    assert ns(rows[0]) == [50, 0, 0, 0, 10, 60, 0, 0, None]
    assert ns(rows[1]) == [0, 0, 0, 0, 0, 0, 0, 0, None]


def test_overlapping_step_windows_credit_a_piece_to_the_earlier_one():
    """STEPS windows that overlap: step 1 [0,300), step 2 [200,500) (and step 3 [450,600)
    overlapping step 2). A piece belongs to the first window (in time order) holding its start:
    MatMul [250,260) starts in both 1 and 2 -> step 1; Add [400,420) only in step 2 -> step 2;
    Mul [460,470) in steps 2 and 3 -> step 2. Computing per step: 10, 10 + 10, 0."""
    tl = timeline([
        (0, "hardware", "Stream 1", "MatMul", 250, 260, "AI_CORE", None, None),
        (0, "hardware", "Stream 1", "Add", 400, 420, "AI_VECTOR_CORE", None, None),
        (0, "hardware", "Stream 1", "Mul", 460, 470, "AI_VECTOR_CORE", None, None),
    ])
    steps = step_windows([(0, 2, 200, 500), (0, 1, 0, 300), (0, 3, 450, 600)])
    bd, _ = recompute({S.TIMELINE: tl, S.STEPS: steps}, 0)
    got = {r["step"]: r["computing_ns"] for r in bd.to_pylist()}
    assert got == {1: 10, 2: 30, 3: 0}


def test_trace_tasks_without_links_are_classified_by_the_kernel_rows_they_match():
    """A text trace (no category) beside kernel_details: a hardware task is compute when a
    kernel_details compute row starts at its ns, whatever its Task Type. Hardware: MatMul
    AI_CORE [100,200) (row at 100), Cast typed 'Other' [300,350) (row at 300: compute despite
    its type), Sub AI_CORE [400,410) (no row: not compute despite its type), MEMCPY_ASYNC [50,60)
    whose start matches only an hcom_ COMMUNICATION row (big ops are left out: no match).
    C = 100 + 50 = 150; no communication: CNO 0, Free = hull [100,350) minus C = [200,300) =
    100, Stage 250."""
    tl = timeline([
        (0, "hardware", "Stream 1", "MatMul", 100, 200, "AI_CORE", None, None),
        (0, "hardware", "Stream 1", "Cast", 300, 350, "Other", None, None),
        (0, "hardware", "Stream 1", "Sub", 400, 410, "AI_CORE", None, None),
        (0, "hardware", "Stream 2", "MEMCPY_ASYNC", 50, 60, "MEMCPY_ASYNC", None, None),
    ])
    k = kernels([(0, 1, "MatMul", "AI_CORE", 100, 200), (0, 1, "Cast", "AI_VECTOR_CORE", 300, 350),
                 (0, 1, "hcom_allReduce__1", "COMMUNICATION", 50, 60)])
    bd, method = recompute({S.TIMELINE: tl, S.KERNELS: k,
                            S.STEPS: step_windows([(0, 1, 0, 1000)])}, 0)
    assert method == (
        "timeline: Ascend Hardware compute tasks + HCCL big ops (interval union/difference) "
        "(tasks classified by their links: 2 matching a kernel_details compute row (2 of 2 rows "
        "found), 0 linked to HCCL ops); no HCCL big ops in the timeline (communication = 0); "
        "step windows from test")
    (row,) = bd.to_pylist()
    assert ns(row) == [150, 0, 0, 0, 100, 250, 0, 0, None]


@pytest.mark.parametrize("task_types", [
    pa.array([None, None, None]),                       # a column of nulls, typed null
    pa.array([None, None, None], pa.string()).dictionary_encode(),
], ids=["null-typed", "dictionary"])
def test_compute_mask_takes_untyped_and_dictionary_columns(task_types):
    """Task types that are all null, as an Arrow null-typed column or a dictionary-encoded one
    (as a spilled rank's slim kernels hold their texts), with dictionary-encoded names: no task
    has a type, so each is judged by its name: MatMul compute; MEMCPY_ASYNC (all capitals, a
    runtime task) and 'Notify Wait' (whitespace) not."""
    names = pa.array(["MatMul", "MEMCPY_ASYNC", "Notify Wait"]).dictionary_encode()
    assert compute_mask(task_types, names).tolist() == [True, False, False]
    # typed, dictionary-encoded: the type decides (AI_CORE compute, MEMCPY_ASYNC not, AI_CPU
    # compute whatever the name)
    types = pa.array(["AI_CORE", "MEMCPY_ASYNC", "AI_CPU"]).dictionary_encode()
    assert compute_mask(types, names).tolist() == [True, False, True]


def test_check_table_pairs_an_unnamed_reported_step_among_many_unchecked():
    """1001 reported steps (1..1001) none of which the recomputation covers, and one reported
    row with no step (Computing 7 us); the recomputation has one window over all data (no
    step, Computing 7 us). The 1001 are summarised in one row per metric; the unnamed steps
    of both sides pair: 9 rows with Step empty whose Computing is 7 us against 7 us."""
    rep = st(0, {s: {"computing_ns": 1} for s in range(1, 1002)})
    rep = pa.concat_tables([rep, st(0, {None: {"computing_ns": 7}})])
    rec = st(0, {None: {"computing_ns": 7}})
    df = check_table({0: (rep, rec, "m")})
    assert df.attrs["summarised"] == {0: 1001}
    summary = df[df["Note"].str.startswith("1001 steps")]
    assert len(summary) == 9
    assert summary["Note"].iloc[0] == ("1001 steps (1..1001): step not found in the recomputed "
                                       "data; summarised in this row (more than 1000 such "
                                       "steps)")
    rest = df[~df["Note"].str.startswith("1001 steps")]
    assert len(rest) == 9 and rest["Step"].isna().all()
    comp = rest[rest["Metric"] == "Computing"].iloc[0]
    assert (comp["Reported(us)"], comp["Recomputed(us)"], comp["Deviation(%)"]) == (7.0, 7.0,
                                                                                      0.0)
    assert comp["Note"] == ""


def test_rank_checks_reasons_when_nothing_or_only_the_profiler_is_there():
    # rank 0: the profiler's values, nothing to recompute them from; rank 1: neither side
    rep = st(0, {1: {"computing_ns": 10, "comm_not_overlapped_ns": 2}})
    df = check_table({0: (rep, None, "cannot recompute: no kernels"),
                      1: (None, None, "cannot recompute: no trace")})
    got = {c["rank"]: c for c in rank_checks(df)}
    assert (got[0]["status"], got[0]["used"]) == ("not_checked", "reported")
    assert got[0]["reason"] == ("the profiler's step breakdown could not be cross-checked "
                                "(cannot recompute: no kernels); its values are used unchecked")
    assert (got[1]["status"], got[1]["used"]) == ("none", None)
    assert got[1]["reason"] == ("no step breakdown for this rank: none from the profiler, and "
                                "it cannot be recomputed (cannot recompute: no trace)")
    assert got[0]["metrics"] == {} and got[1]["metrics"] == {}
