"""analyze.step_breakdown: the cases the seed-38 mutation sample showed untested -- a lone
reported step beside more than one recomputed window, a single kernel_details step that must
own a receive before the Overlap Analysis events, a one-letter task type on the device
timeline, a rank missing from multi-rank tables, and the integer arithmetic after the per-step
sums of a very long step.

Every expected value is worked out by hand in the comments (intervals are [start, end) in ns;
spec §7.1: C = union of compute tasks, M = union of communication sections, Communication(Not
Overlapped) = M \\ C, Free = hull(C ∪ M) \\ (C ∪ M), a piece is credited wholly to the step
window holding its start)."""

from __future__ import annotations

import pyarrow as pa

from ascendprof.model import schemas as S
from ascendprof.analyze.step_breakdown import check_table, compute_mask, recompute

NS_KEYS = ["computing_ns", "comm_not_overlapped_ns", "overlapped_ns", "communication_ns",
           "free_ns", "stage_ns", "bubble_ns", "comm_not_overlapped_excl_receive_ns",
           "preparing_ns"]
BIG = "Group 1 Communication"


def timeline(rows) -> pa.Table:
    """rows: (rank, track, thread, name, start, end, task_type)."""
    cols = list(zip(*rows))
    return S.from_lists(S.TIMELINE, {
        "rank": list(cols[0]), "track": list(cols[1]), "process": ["p"] * len(rows),
        "thread": list(cols[2]), "name": list(cols[3]), "start_ns": list(cols[4]),
        "dur_ns": [e - s for s, e in zip(cols[4], cols[5])], "task_type": list(cols[6])})


def kernels(rows) -> pa.Table:
    """rows: (rank, step, name, accelerator_core, start, end)."""
    return S.from_lists(S.KERNELS, {
        "rank": [r[0] for r in rows], "step": [r[1] for r in rows],
        "name": [r[2] for r in rows], "accelerator_core": [r[3] for r in rows],
        "start_ns": [r[4] for r in rows], "dur_ns": [r[5] - r[4] for r in rows]})


def st(rank, rows) -> pa.Table:
    """rows: step -> {STEP_TRACE column: us}; missing metrics null."""
    return S.conform(S.STEP_TRACE, pa.Table.from_pylist([
        {"rank": rank, "step": step, **{k: round(v * 1000) for k, v in vals.items()}}
        for step, vals in rows.items()]))


def ns(row) -> list:
    return [row[k] for k in NS_KEYS]


# ------------------------------------------------------------------ step_trace_check pairing


def test_a_lone_reported_step_does_not_take_an_unnamed_window_beside_a_named_one():
    """The profiler reports step 5 only; the recomputation has two windows: step 3 and one
    without a step. Only a LONE unnamed recomputed window stands for a lone reported step;
    here nothing pairs, so step 5 is 'not found in the recomputed data' and steps 3 and the
    unnamed one are 'not reported by the profiler' -- in step order, the unnamed last."""
    rep = st(0, {5: {"computing_ns": 10}})
    rec = st(0, {None: {"computing_ns": 10}, 3: {"computing_ns": 4}})
    df = check_table({0: (rep, rec, "m")})
    assert len(df) == 27
    assert df["Step"].iloc[:18].tolist() == [3] * 9 + [5] * 9 and df["Step"].iloc[18:].isna().all()
    comp = df[df["Metric"] == "Computing"]
    assert comp["Note"].tolist() == ["not reported by the profiler",
                                     "step not found in the recomputed data",
                                     "not reported by the profiler"]
    # step 5's 10 us is reported only, never compared with the unnamed window's 10 us
    assert comp["Reported(us)"].tolist()[1] == 10.0
    assert comp["Recomputed(us)"].isna().tolist() == [False, True, False]
    assert comp["Deviation(%)"].isna().all()


# ------------------------------------------------------------------ step windows


def test_a_single_kernel_step_owns_a_receive_before_the_overlap_events():
    """Overlap Analysis events only on the timeline (no Ascend Hardware tasks), kernel_details
    rows all of step 1: a MEMCPY_ASYNC row [100,105) and MatMul [200,300), so step 1's kernels
    span [100, 301). The overlap events span [200, 350): Computing [200,300), Communication and
    Communication(Not Overlapped) [300,350). A single step owns everything: its window is
    [min(100, 200), max(301, 350 + 1)) = [100, 351), so an hcom_receive big op at [120,140)
    (left out of the Overlap Analysis) starts inside it and is step 1's Bubble.
    Computing 100; Communication 50; CNO 50; Overlapped 0; Free 0; Bubble 20;
    Stage = last end 350 - first start 120 - Bubble 20 = 210; CNO excl. receive 50 - 20 = 30;
    no ProfilerStep: Preparing null."""
    ov = [("Computing", 200, 300), ("Communication", 300, 350),
          ("Communication(Not Overlapped)", 300, 350)]
    tl = timeline([(0, "overlap", t, t, s, e, None) for t, s, e in ov] + [
        (0, "communication", BIG, "hcom_receive__1", 120, 140, None)])
    k = kernels([(0, 1, "MEMCPY_ASYNC", "", 100, 105), (0, 1, "MatMul", "AI_CORE", 200, 300)])
    bd, method = recompute({S.TIMELINE: tl, S.KERNELS: k}, 0)
    assert method == ("overlap: profiler's Overlap Analysis events summed per step (weaker "
                      "check); step windows from kernel_details Step Id spans")
    (row,) = bd.to_pylist()
    assert row["step"] == 1
    assert ns(row) == [100, 50, 0, 50, 0, 210, 20, 30, None]


# ------------------------------------------------------------------ which tasks compute


def test_a_one_letter_task_type_on_the_device_timeline_is_not_compute():
    """A text trace (no links, no kernel_details): hardware tasks MatMul AI_CORE [100,200) and
    Foo typed 'X' [300,400). 'X' is a task type, of none of the known kinds: on the device
    timeline such a task is left out (unknown="exclude"), whatever its name. C = 100, no
    communication: CNO 0, Free = hull [100,200) minus C = 0, Stage 100."""
    tl = timeline([(0, "hardware", "Stream 1", "MatMul", 100, 200, "AI_CORE"),
                   (0, "hardware", "Stream 1", "Foo", 300, 400, "X")])
    bd, method = recompute({S.TIMELINE: tl}, 0)
    assert ("(tasks classified by task type (no compute-op info in the input): 1 compute, 0 "
            "linked to HCCL ops, 1 of other or unknown types left out)") in method
    (row,) = bd.to_pylist()
    assert ns(row) == [100, 0, 0, 0, 0, 100, 0, 0, None]
    # the rule itself: typed 'X' -> not compute on the timeline; judged by its name (Foo:
    # neither all capitals nor a runtime prefix -> compute) only for kernel_details rows;
    # an empty type is no type: judged by the name either way
    assert compute_mask(["X", "", "AI_CORE"], ["Foo", "Foo", "Foo"],
                        unknown="exclude").tolist() == [False, True, True]
    assert compute_mask(["X", "", "AI_CORE"], ["Foo", "Foo", "Foo"]).tolist() == [True] * 3


# ------------------------------------------------------------------ a rank's rows


def test_a_rank_absent_from_multi_rank_tables_has_no_timeline_and_no_kernels():
    """TIMELINE and KERNELS hold rank 1's rows only: for rank 0 there is no timeline and no
    kernel_details at all (not an empty timeline 'without Ascend Hardware tasks', nor
    kernel_details 'without compute rows'). Rank 1 recomputes from its timeline: C = 100."""
    tl = timeline([(1, "hardware", "Stream 1", "MatMul", 100, 200, "AI_CORE")])
    k = kernels([(1, 1, "MatMul", "AI_CORE", 100, 200)])
    tables = {S.TIMELINE: tl, S.KERNELS: k}
    assert recompute(tables, 0) == (None, "cannot recompute: no trace_view timeline; no "
                                          "kernel_details (KERNELS) for this rank")
    bd, method = recompute(tables, 1)
    assert method.startswith("timeline: ") and bd.column("computing_ns").to_pylist() == [100]


# ------------------------------------------------------------------ integer ns


def test_overlapped_is_communication_minus_cno_in_whole_ns_on_a_very_long_step():
    """One window over all data (no step windows), 2^54 ns long (208 days: beyond float64's
    exact integers, whose spacing there is 4 ns). HCCL big op allReduce [0, 2^54 + 4),
    MatMul AI_CORE [1, 2^54 + 5). M = 2^54 + 4, C = 2^54 + 4 (both multiples of 4: exact as
    float sums), CNO = [0,1) = 1, Overlapped = M - CNO = 2^54 + 3 (an integer subtraction; in
    float64 it would round to 2^54 + 4), Free 0, Stage = 2^54 + 5 - 0, CNO excl. receive 1."""
    big = 2 ** 54
    tl = timeline([(0, "hardware", "Stream 1", "MatMul", 1, big + 5, "AI_CORE"),
                   (0, "communication", BIG, "hcom_allReduce__1", 0, big + 4, None)])
    bd, _ = recompute({S.TIMELINE: tl}, 0)
    (row,) = bd.to_pylist()
    assert ns(row) == [big + 4, 1, big + 3, big + 4, 0, big + 5, 0, 1, None]
