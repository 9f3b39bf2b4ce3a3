"""The schedule advice rules on small hand-built tables, through
:func:`ascendprof.analyze.advice.rank_advice` (what each rank's worker runs on the rank's
tables), and the device gaps they share (:func:`schedule.device_gaps`). Times are written in ms
from a base B (a realistic epoch in ns); every expected value is worked out in the comments."""

from __future__ import annotations

import pyarrow as pa
import pytest

from ascendprof.analyze import advice
from ascendprof.analyze.advice import schedule as SC
from ascendprof.analyze.advice.base import Context, Skip
from ascendprof.model import schemas as S

B = 10 ** 15  # ns
US, MS = 1000, 1_000_000


# The advice texts the user reads, whole (a change to one is a change to the product's output).
DISPATCH_ADVICE = [
    "Enable the level-2 task queue: export TASK_QUEUE_ENABLE=2.",
    "Bind the training processes to the CPU cores of the card's NUMA node (CPU_AFFINITY_CONF=1 "
    "with torch_npu, or taskset/numactl).",
    "Launch fewer, larger operators: fused operators and optimizers (torch_npu.optim.NpuFused*, "
    "foreach), graph mode (torchair) or larger micro-batches.",
    "Raise ACLNN_CACHE_LIMIT (e.g. 100000) so aclnn executors are not rebuilt."]
STALL_ADVICE = [
    "Find what the host does during the largest gaps (evidence.largest_gaps: synchronisation "
    "such as .item()/.cpu()/print of device tensors, data loading, Python work between steps) "
    "and move it off the step or make it asynchronous."]
WAIT_ADVICE = [
    "Avoid reading device values on the host inside the step (loss.item(), tensor.cpu(), print "
    "or logging of device tensors, Python conditions on device tensors): accumulate on the "
    "device and read every N steps.",
    "Where a value is needed, copy it with non_blocking=True and read it one step later."]
BLOCKING_ADVICE = [
    "Unset ASCEND_LAUNCH_BLOCKING (or set it to 0): it is for debugging only.",
    "Remove per-operator synchronisation from the code (torch.npu.synchronize() in a loop)."]
DATALOADER_ADVICE = [
    "Raise DataLoader num_workers and set pin_memory=True (and persistent_workers=True).",
    "Check the disk I/O of the data directory (local SSD or a cache instead of network "
    "storage); avoid archive formats (tar, zip) read per sample.",
    "Do not pin the training process to few cores (taskset) when the loader workers need them."]
SINGLE_PROCESS_ADVICE = ("The dataloader runs in the training process (num_workers=0): set "
                         "num_workers > 0.")
GC_ADVICE = [
    "Release Python objects promptly and avoid reference cycles (they are what the cyclic "
    "collector walks).",
    "Raise the collection thresholds (gc.set_threshold) or run gc.collect() yourself between "
    "steps with gc.disable() inside the step (a temporary measure)."]
CONJ_GC_ADVICE = GC_ADVICE + ["Confirm with torch_npu experimental_config(gc_detect_threshold=1) "
                              "(records GC events)."]
SYNCBN_ADVICE = [
    "Use plain BatchNorm where the per-device batch is large enough (remove "
    "torch.nn.SyncBatchNorm.convert_sync_batchnorm).",
    "Otherwise use the efficient SyncBatchNorm forward (one all-gather of sum/square-sum/count "
    "per layer) given in msprof-analyze's sync_batchnorm.yaml."]


def t(ms: float) -> int:
    """B + ms, in ns (exact for the values used: multiples of 1 us)."""
    return B + round(ms * 1000) * US


def kernels(rows) -> pa.Table:
    """(step or None, start ms, end ms) per kernel."""
    return S.conform(S.KERNELS, pa.table({
        "step": pa.array([r[0] for r in rows], pa.int32()),
        "name": ["MatMul"] * len(rows), "accelerator_core": ["AI_CORE"] * len(rows),
        "start_ns": pa.array([t(r[1]) for r in rows], pa.int64()),
        "dur_ns": pa.array([t(r[2]) - t(r[1]) for r in rows], pa.int64())}))


def steps(rows) -> pa.Table:
    """(step, start ms, end ms) step windows."""
    return S.conform(S.STEPS, pa.table({
        "step": pa.array([r[0] for r in rows], pa.int32()),
        "start_ns": pa.array([None if r[1] is None else t(r[1]) for r in rows], pa.int64()),
        "end_ns": pa.array([None if r[2] is None else t(r[2]) for r in rows], pa.int64())}))


def step_trace(rows) -> pa.Table:
    """(step, stage ms, free ms) of the profiler's breakdown."""
    return S.conform(S.STEP_TRACE, pa.table({
        "step": pa.array([r[0] for r in rows], pa.int32()),
        "stage_ns": pa.array([round(r[1] * MS) for r in rows], pa.int64()),
        "free_ns": pa.array([round(r[2] * MS) for r in rows], pa.int64())}))


def host(rows) -> pa.Table:
    """(source, name, start ms, dur ms[, tid[, step]]) host events."""
    rows = [(*r, 1, 1)[:6] for r in rows]  # tid 1, step 1 unless given
    return S.conform(S.HOST_EVENTS, pa.table({
        "step": pa.array([r[5] for r in rows], pa.int32()),
        "source": [r[0] for r in rows], "name": [r[1] for r in rows],
        "tid": pa.array([r[4] for r in rows], pa.int64()),
        "start_ns": pa.array([t(r[2]) for r in rows], pa.int64()),
        "dur_ns": pa.array([None if r[3] is None else round(r[3] * 1000) * US for r in rows],
                           pa.int64())}))


def launches(rows) -> pa.Table:
    """(device start ms, host start ms or None) per launch."""
    return S.conform(S.LAUNCHES, pa.table({
        "device_start_ns": pa.array([t(r[0]) for r in rows], pa.int64()),
        "host_start_ns": pa.array([None if r[1] is None else t(r[1]) for r in rows],
                                  pa.int64())}))


def run(tables, meta=None) -> dict:
    return advice.rank_advice(tables, meta or {}, 7)


def one(res, rid) -> dict:
    (f,) = [f for f in res["findings"] if f["id"] == rid]
    return f


def status(res, rid):
    return res["status"][rid]


def ctx(tables) -> Context:
    return Context(rank=7, tables=tables)


# ------------------------------------------------------------------------------ device gaps

# Two steps, windows [0, 10] and [20, 30] ms. Busy pieces and the gaps between them:
#   step 1: [0,2) [2.005,4) [4.2,6) [6.3,8) [8.01,9) [9.5,12) [12.5,13)
#           gaps 2.000 (5 us), 4.000 (200 us), 6.000 (300 us), 8.000 (10 us), 9.000 (500 us);
#           [9.5,12) is clipped at the window end 10, [12.5,13) lies outside every window
#   step 2: [20,24) [24.15,27) [27.25,30): gaps 24.000 (150 us), 27.000 (250 us)
KERNELS_D = [(1, 0, 2), (1, 2.005, 4), (1, 4.2, 6), (1, 6.3, 8), (1, 8.01, 9), (1, 9.5, 12),
             (1, 12.5, 13), (2, 20, 24), (2, 24.15, 27), (2, 27.25, 30)]
GAPS_D = [(1, 2.0, 5), (1, 4.0, 200), (1, 6.0, 300), (1, 8.0, 10), (1, 9.0, 500),
          (2, 24.0, 150), (2, 27.0, 250)]  # (step, start ms, us)


def gap_rows(df) -> list[tuple]:
    return [(None if r.step != r.step else int(r.step), int(r.start_ns), int(r.end_ns),
             int(r.dur_ns)) for r in df.itertuples()]


def want(gaps) -> list[tuple]:
    return [(s, t(a), t(a) + us * US, us * US) for s, a, us in gaps]


def test_device_gaps_inside_the_step_windows():
    c = ctx({S.KERNELS: kernels(KERNELS_D), S.STEPS: steps([(1, 0, 10), (2, 20, 30)])})
    got = SC.device_gaps(c)
    assert list(got.columns) == ["step", "start_ns", "end_ns", "dur_ns"]
    assert gap_rows(got) == want(GAPS_D)


def test_device_gaps_without_windows_use_each_steps_kernel_span():
    # no STEPS: step 1 spans its kernels [0, 13) (so 12 -> 12.5 is a gap, 500 us), step 2
    # [20, 30)
    got = SC.device_gaps(ctx({S.KERNELS: kernels(KERNELS_D)}))
    assert gap_rows(got) == want(GAPS_D[:5] + [(1, 12.0, 500)] + GAPS_D[5:])


def test_device_gaps_windows_without_ends_are_ignored():
    # a STEPS table whose only window has no end: as if none (the kernels' step spans)
    got = SC.device_gaps(ctx({S.KERNELS: kernels(KERNELS_D), S.STEPS: steps([(1, 0, None)])}))
    assert len(got) == 8
    got = SC.device_gaps(ctx({S.KERNELS: kernels(KERNELS_D), S.STEPS: steps([(1, None, 10)])}))
    assert len(got) == 8


def test_device_gaps_one_window_of_a_step_skipped_when_its_ends_are_missing():
    # window 2 lacks its start: only step 1's window is used
    got = SC.device_gaps(ctx({S.KERNELS: kernels(KERNELS_D),
                              S.STEPS: steps([(1, 0, 10), (2, None, 30)])}))
    assert gap_rows(got) == want(GAPS_D[:5])


def test_device_gaps_without_any_step_one_window_over_all_kernels():
    # kernels with no step: one window from the first start (0) to the last end (30): the
    # gaps of both steps plus 12 -> 12.5 (500 us) and 13 -> 20 (7 ms); their step is unknown
    rows = [(None, a, b) for _, a, b in KERNELS_D]
    got = gap_rows(SC.device_gaps(ctx({S.KERNELS: kernels(rows)})))
    assert got == want([(None, a, u) for _, a, u in GAPS_D[:5]]
                       + [(None, 12.0, 500), (None, 13.0, 7000)]
                       + [(None, a, u) for _, a, u in GAPS_D[5:]])


def test_device_gaps_ignore_kernels_without_start_or_duration():
    k = kernels([(1, 0, 2), (1, 3, 5), (1, 4, 8), (1, 6, 9)])
    # the second kernel loses its start, the third its duration: [0,2) and [6,9) remain
    start = k["start_ns"].to_pylist()
    dur = k["dur_ns"].to_pylist()
    start[1], dur[2] = None, None
    k = k.set_column(k.schema.get_field_index("start_ns"), "start_ns",
                     pa.array(start, pa.int64()))
    k = k.set_column(k.schema.get_field_index("dur_ns"), "dur_ns", pa.array(dur, pa.int64()))
    assert gap_rows(SC.device_gaps(ctx({S.KERNELS: k}))) == want([(1, 2.0, 4000)])
    # all unusable: no gaps (and no error)
    k2 = k.set_column(k.schema.get_field_index("dur_ns"), "dur_ns",
                      pa.nulls(4, pa.int64()))
    got = SC.device_gaps(ctx({S.KERNELS: k2}))
    assert got.empty and list(got.columns) == ["step", "start_ns", "end_ns", "dur_ns"]


def test_device_gaps_empty_without_kernels():
    got = SC.device_gaps(ctx({}))
    assert got.empty and list(got.columns) == ["step", "start_ns", "end_ns", "dur_ns"]
    got = SC.device_gaps(ctx({S.KERNELS: S.empty(S.KERNELS)}))
    assert got.empty and list(got.columns) == ["step", "start_ns", "end_ns", "dur_ns"]


# ------------------------------------------------------------------------------ device idle

def dispatch_tables(free=(2.5, 3.5)):
    return {S.KERNELS: kernels(KERNELS_D), S.STEPS: steps([(1, 0, 10), (2, 20, 30)]),
            S.STEP_TRACE: step_trace([(1, 10, free[0]), (2, 10, free[1])])}


def test_device_idle_host_bound_dispatch():
    # Free 2.5 and 3.5 ms of 10 ms steps: 3 ms mean, 30 % (= 2 x 10 + 10: critical).
    # Gaps (GAPS_D): task switches (< 10 us): 5 us; dispatch (10 us .. 1 ms): 200, 300, 10,
    # 500, 150, 250 = 1410 us, 705 us and 3 gaps per step, median of
    # [10, 150, 200, 250, 300, 500] = 225 us; no stall: dispatch.
    res = run(dispatch_tables())
    f = one(res, "schedule.device_idle")
    assert f["key"] == "schedule.device_idle:dispatch" and f["ranks"] == [7]
    assert f["severity"] == "critical"
    assert f["impact_us_per_step"] == 3000.0 and f["share_of_step_pct"] == 30.0
    ev = f["evidence"]
    assert ev["free_us_per_step"] == 3000.0 and ev["free_pct_of_step"] == 30.0
    assert ev["gaps_per_step"] == 3.5
    assert ev["task_switch_gaps"] == {"count_per_step": 0.5, "us_per_step": 2.5}
    assert ev["dispatch_gaps"] == {"count_per_step": 3.0, "us_per_step": 705.0,
                                   "median_us": 225.0}
    assert ev["stall_gaps"] == {"count_per_step": 0.0, "us_per_step": 0.0}
    # the five longest, longest first (the 10 us and 5 us gaps are left out)
    assert ev["largest_gaps"] == [
        {"step": 1, "start_ns": t(9.0), "dur_ms": 0.5, "host": []},
        {"step": 1, "start_ns": t(6.0), "dur_ms": 0.3, "host": []},
        {"step": 2, "start_ns": t(27.0), "dur_ms": 0.25, "host": []},
        {"step": 1, "start_ns": t(4.0), "dur_ms": 0.2, "host": []},
        {"step": 2, "start_ns": t(24.0), "dur_ms": 0.15, "host": []}]
    assert ev["host_events_read"] is False
    assert ev["profiler_options_adding_host_time"] == []
    assert "launch" not in ev
    assert f["message"] == (
        "The device idles 30.0% of the step (3.0 ms), 0.7 ms of it in 3 gap(s) of 10 us to "
        "1 ms per step (median 225 us): the host does not launch operators as fast as the "
        "device runs them (host-bound dispatch).")
    assert f["advice"] == DISPATCH_ADVICE


def test_device_idle_severity_below_thirty_percent_is_a_warning():
    # Free 2.5 and 3.3 ms: 2.9 ms mean, 29 % of the step
    f = one(run(dispatch_tables((2.5, 3.3))), "schedule.device_idle")
    assert f["severity"] == "warning" and f["share_of_step_pct"] == 29.0


def test_device_idle_fires_from_ten_percent():
    # 1 ms of 10 ms free: 10 % exactly is reported; 0.9 ms (9 %) is not
    f = one(run(dispatch_tables((1.0, 1.0))), "schedule.device_idle")
    assert f["severity"] == "warning" and f["evidence"]["free_pct_of_step"] == 10.0
    assert status(run(dispatch_tables((0.9, 0.9))), "schedule.device_idle") == ["silent", ""]


def test_device_idle_skipped_without_the_profilers_free():
    tb = dispatch_tables()
    tb[S.STEP_TRACE] = S.conform(S.STEP_TRACE, pa.table({
        "step": pa.array([1, 2], pa.int32()), "stage_ns": pa.array([10 * MS] * 2, pa.int64())}))
    st, why = status(run(tb), "schedule.device_idle")
    assert st == "skipped" and why == ("no step breakdown from the profiler (Free); the kernels "
                                       "alone may not list every device task")


def test_device_idle_dispatch_names_the_profiler_options_adding_host_time():
    meta = {"profiler_info": {"config": {"common_config": {
        "with_stack": True, "record_shapes": False, "profile_memory": "true"}}}}
    f = one(run(dispatch_tables(), meta), "schedule.device_idle")
    # only a real true counts ("true" the text does not)
    assert f["evidence"]["profiler_options_adding_host_time"] == ["with_stack"]
    assert f["advice"][:-1] == DISPATCH_ADVICE
    assert f["advice"][-1] == ("This collection ran with with_stack=True, which adds host time "
                               "to every operator: confirm the gaps with a collection without "
                               "it.")
    meta["profiler_info"]["config"]["common_config"]["record_shapes"] = True
    f = one(run(dispatch_tables(), meta), "schedule.device_idle")
    assert f["advice"][-1] == ("This collection ran with with_stack, record_shapes=True, which "
                               "adds host time to every operator: confirm the gaps with a "
                               "collection without them.")
    meta["profiler_info"]["config"]["common_config"]["profile_memory"] = True
    f = one(run(dispatch_tables(), meta), "schedule.device_idle")
    assert f["evidence"]["profiler_options_adding_host_time"] == [
        "with_stack", "record_shapes", "profile_memory"]


@pytest.mark.parametrize("meta", [None, {"profiler_info": "x"},
                                  {"profiler_info": {"config": None}},
                                  {"profiler_info": {"config": {"common_config": None}}}])
def test_profiler_overhead_of_odd_metadata_is_none(meta):
    assert SC.profiler_overhead(meta) == []


def test_device_idle_launch_delays_and_idle_before_late_launches():
    # (device start, host start) per launch, given out of order; one has no host start
    # (dropped). Delays (us): 50, 1005, 100, 1300, 510, 300, 100, 100, 250; sorted 50 100 100
    # 100 250 300 510 1005 1300: median 250, p95 (linear, 0.95 x 8 = 7.6 between 1005 and
    # 1300) 1005 + 0.6 x 295 = 1182.
    # Each gap is matched with the first launch whose task starts at or after its end; the
    # launch came late when its host call began after the gap did:
    #   gap 4.0 (200 us) <- task 4.2 launched 4.1: late; gap 9.0 (500) <- 9.5 at 9.2: late;
    #   gap 24.0 (150) <- 24.15 at 24.05: late; gap 27.0 <- 27.25 launched at 27.0, as the gap
    #   began: not late; the others were launched before their gap: 850 us late, 425 us per
    #   step.
    lt = launches([(9.5, 9.2), (0, -0.05), (4.2, 4.1), (2.005, 1.0), (6.3, 5.0), (8.01, 7.5),
                   (24.15, 24.05), (20, 19.9), (27.25, 27.0), (31.0, None)])
    res = run({**dispatch_tables(), S.LAUNCHES: lt})
    f = one(res, "schedule.device_idle")
    assert f["evidence"]["launch"] == {"launches": 9, "delay_median_us": 250.0,
                                       "delay_p95_us": 1182.0,
                                       "idle_before_launch_us_per_step": 425.0,
                                       "file": "dispatch.csv"}
    assert f["message"].endswith(
        "(host-bound dispatch). Launch delay median 250 us; 0.4 ms of idle per step is in gaps "
        "whose next task was launched only after they began (dispatch.csv).")


def test_device_idle_launch_evidence_absent_without_usable_launches():
    lt = launches([(1.0, None), (2.0, None)])
    f = one(run({**dispatch_tables(), S.LAUNCHES: lt}), "schedule.device_idle")
    assert "launch" not in f["evidence"]
    f = one(run({**dispatch_tables(), S.LAUNCHES: S.empty(S.LAUNCHES)}), "schedule.device_idle")
    assert "launch" not in f["evidence"]


def test_launch_evidence_gap_after_the_last_launch_is_not_late():
    # the only launch is before every gap's end: no gap has a next launch, nothing late
    c = ctx({**dispatch_tables(), S.LAUNCHES: launches([(0, -1.0)])})
    got = SC._launch_evidence(c, SC.device_gaps(c))
    assert got["idle_before_launch_us_per_step"] == 0.0 and got["launches"] == 1
    assert got["delay_median_us"] == 1000.0 and got["delay_p95_us"] == 1000.0


# One step [0, 50] ms, Stage 50 ms, Free 20 ms (40 %). Kernels [0,10) [10.1,20) [25,30) [32,40):
# gaps 10.0 (100 us, dispatch), 20.0 (5 ms, stall), 30.0 (2 ms, stall): stalls 7 ms >= 0.1 ms.
STALL_K = [(1, 0, 10), (1, 10.1, 20), (1, 25, 30), (1, 32, 40)]


def stall_tables(host_rows=None):
    tb = {S.KERNELS: kernels(STALL_K), S.STEPS: steps([(1, 0, 50)]),
          S.STEP_TRACE: step_trace([(1, 50, 20)])}
    if host_rows is not None:
        tb[S.HOST_EVENTS] = host(host_rows)
    return tb


def test_device_idle_stall_names_what_the_host_did_in_the_largest_gaps():
    # host events overlapping the gaps (ms):
    #   gap [20, 25): SynchronizeStream [20.5, 25) 4.5, aten::item [19, 24) 4.0,
    #                 aten::add [20, 20.5) 0.5, aten::mul [24.9, 25) 0.1 -> the top three;
    #                 ProfilerStep#1 and Node@launch cover it too but are not host work
    #   gap [30, 32): SynchronizeStream [30, 32) 2.0, DataLoader [29, 31.5) 1.5
    #   gap [10, 10.1): aten::item covers none of it; ProfilerStep#1 is left out: no activity
    # summed over the gaps, the synchronisation holds the most (6.5 ms)
    ev = [("framework", "ProfilerStep#1", 0, 50), ("cann", "Node@launch", 20, 5),
          ("framework", "aten::item", 19, 5), ("cann", "AscendCL@aclrtSynchronizeStream", 20.5, 4.5),
          ("framework", "aten::add", 20, 0.5), ("framework", "aten::mul", 24.9, 0.1),
          ("cann", "AscendCL@aclrtSynchronizeStream", 30, 2),
          ("framework", "DataLoader.__next__", 29, 2.5)]
    f = one(run(stall_tables(ev)), "schedule.device_idle")
    assert f["key"] == "schedule.device_idle:stall" and f["severity"] == "critical"
    e = f["evidence"]
    assert e["stall_gaps"] == {"count_per_step": 2.0, "us_per_step": 7000.0}
    assert e["dispatch_gaps"] == {"count_per_step": 1.0, "us_per_step": 100.0,
                                  "median_us": 100.0}
    assert e["host_events_read"] is True
    assert e["largest_gaps"] == [
        {"step": 1, "start_ns": t(20), "dur_ms": 5.0,
         "host": [{"name": "AscendCL@aclrtSynchronizeStream", "overlap_ms": 4.5},
                  {"name": "aten::item", "overlap_ms": 4.0},
                  {"name": "aten::add", "overlap_ms": 0.5}]},
        {"step": 1, "start_ns": t(30), "dur_ms": 2.0,
         "host": [{"name": "AscendCL@aclrtSynchronizeStream", "overlap_ms": 2.0},
                  {"name": "DataLoader.__next__", "overlap_ms": 1.5}]},
        {"step": 1, "start_ns": t(10), "dur_ms": 0.1, "host": []}]
    assert f["message"] == (
        "The device idles 40.0% of the step (20.0 ms), mostly in 2 gap(s) of 1 ms or more "
        "(7.0 ms per step); the host was mostly in AscendCL@aclrtSynchronizeStream during the "
        "largest ones.")
    assert f["advice"] == STALL_ADVICE


def test_host_activity_names_each_event_once_with_its_largest_overlap():
    # two aten::item calls in the gap [20, 25): 1 ms and 3 ms; listed once, with 3 ms
    ev = [("framework", "aten::item", 20, 1), ("framework", "aten::item", 21, 3),
          ("framework", "aten::add", 24, 2)]
    c = ctx(stall_tables(ev))
    assert SC.host_activity(c, t(20), t(25)) == [{"name": "aten::item", "overlap_ms": 3.0},
                                                {"name": "aten::add", "overlap_ms": 1.0}]
    assert SC.host_activity(c, t(20), t(25), top=1) == [{"name": "aten::item",
                                                         "overlap_ms": 3.0}]
    # an event ending where the window starts does not overlap it
    assert SC.host_activity(c, t(26), t(30)) == []


def test_device_idle_stall_without_host_events():
    f = one(run(stall_tables()), "schedule.device_idle")
    assert f["message"].endswith("(7.0 ms per step); the collection has no host timeline to "
                                 "tell what the host did.")
    f = one(run(stall_tables(), {"advice_not_read": "summary mode"}), "schedule.device_idle")
    assert f["message"].endswith("(7.0 ms per step); run with --advice all to see what the "
                                 "host did meanwhile.")


def test_device_idle_stall_with_host_events_none_in_the_gaps():
    # the host timeline was read but nothing of it falls in a gap: no clause
    f = one(run(stall_tables([("framework", "aten::add", 1, 1)])), "schedule.device_idle")
    assert f["message"].endswith("(7.0 ms per step).")
    assert f["evidence"]["host_events_read"] is True


def test_device_idle_stalls_equal_to_dispatch_count_as_stalls():
    # one step [0, 20], Free 5 of 20 ms (25 %); gaps: 1 ms (a stall: from 1 ms) and two of
    # 500 us (1 ms of dispatch gaps): the stall time is not below the dispatch time: stall
    k = [(1, 0, 5), (1, 6, 10), (1, 10.5, 14), (1, 14.5, 20)]
    f = one(run({S.KERNELS: kernels(k), S.STEPS: steps([(1, 0, 20)]),
                 S.STEP_TRACE: step_trace([(1, 20, 5)])}), "schedule.device_idle")
    assert f["key"] == "schedule.device_idle:stall" and f["severity"] == "warning"
    assert f["evidence"]["stall_gaps"] == {"count_per_step": 1.0, "us_per_step": 1000.0}
    assert f["evidence"]["dispatch_gaps"]["us_per_step"] == 1000.0


def test_device_idle_gap_of_just_under_a_millisecond_is_dispatch_and_ten_us_is_not_a_switch():
    # gaps of 999 us and 10 us are dispatch gaps, 9 us a task switch
    k = [(1, 0, 5), (1, 5.999, 10), (1, 10.01, 12), (1, 12.009, 20)]
    f = one(run({S.KERNELS: kernels(k), S.STEPS: steps([(1, 0, 20)]),
                 S.STEP_TRACE: step_trace([(1, 20, 5)])}), "schedule.device_idle")
    e = f["evidence"]
    assert f["key"] == "schedule.device_idle:dispatch"
    assert e["dispatch_gaps"] == {"count_per_step": 2.0, "us_per_step": 1009.0,
                                  "median_us": 504.5}
    assert e["task_switch_gaps"] == {"count_per_step": 1.0, "us_per_step": 9.0}
    assert e["stall_gaps"]["count_per_step"] == 0.0


def test_device_idle_without_dispatch_gaps_has_no_median():
    # only task switches (5 us): no dispatch gap, so no median; with no dispatch time the
    # stall time (0) is not below it, so the finding is a stall one
    k = [(1, 0, 5), (1, 5.005, 20)]
    f = one(run({S.KERNELS: kernels(k), S.STEPS: steps([(1, 0, 20)]),
                 S.STEP_TRACE: step_trace([(1, 20, 5)])}), "schedule.device_idle")
    assert f["evidence"]["dispatch_gaps"] == {"count_per_step": 0.0, "us_per_step": 0.0,
                                              "median_us": None}
    assert f["evidence"]["task_switch_gaps"] == {"count_per_step": 1.0, "us_per_step": 5.0}
    assert f["key"] == "schedule.device_idle:stall"


# -------------------------------------------------------------------------- synchronisation

def sync_tables(host_rows, free=2.0):
    # one step [0, 10] ms, Stage 10 ms; kernels [0,3) [4,10): one gap at 3.0 (1 ms)
    return {S.KERNELS: kernels([(1, 0, 3), (1, 4, 10)]), S.STEPS: steps([(1, 0, 10)]),
            S.STEP_TRACE: step_trace([(1, 10, free)]), S.HOST_EVENTS: host(host_rows)}


SYNC = "AscendCL@aclrtSynchronizeStream"


def test_synchronize_wait_with_triggers_and_the_idle_it_starts():
    # syncs [2.5, 3.6) 1.1 ms and [5, 5.2) 0.2 ms: 1.3 ms = 13 % of the 10 ms step, 2 calls.
    # The gap at 3.0 begins inside the first: 1 ms = 10 % of idle after a sync (>= 5 %:
    # warning). Triggers: aten::item twice, aten::nonzero once (aten::add is none; a CANN
    # event named aten::item is not a framework one).
    ev = [("cann", SYNC, 2.5, 1.1), ("cann", "AscendCL@aclrtSynchronizeDevice", 5, 0.2),
          ("framework", "aten::item", 2.4, 1.2), ("framework", "aten::nonzero", 4.9, 0.3),
          ("framework", "aten::item", 6, 0.1), ("framework", "aten::add", 7, 0.1),
          ("cann", "aten::item", 8, 0.1)]
    f = one(run(sync_tables(ev)), "schedule.synchronize")
    assert f["key"] == "schedule.synchronize:wait" and f["severity"] == "warning"
    assert f["impact_us_per_step"] == 1300.0 and f["share_of_step_pct"] == 13.0
    assert f["evidence"] == {
        "sync_calls_per_step": 2.0, "sync_us_per_step": 1300.0, "sync_pct_of_step": 13.0,
        "launch_then_sync": 0, "node_launches": 0, "co_occurrence_ratio": 0.0,
        "framework_triggers_per_step": {"aten::item": 2.0, "aten::nonzero": 1.0},
        "device_idle_after_sync_us_per_step": 1000.0, "free_pct_of_step": 20.0}
    assert f["message"] == (
        "The host waits 1.3 ms per step (13.0% of the step) in 2 stream/device "
        "synchronisation(s), triggered by aten::item x2, aten::nonzero x1; while it waits it "
        "launches nothing, so the device idles once the queue drains (10.0% of the step is "
        "device idle that begins during a synchronisation).")
    assert f["advice"] == WAIT_ADVICE


def test_synchronize_idle_after_below_five_percent_is_info():
    # the sync [1, 2.1) ends before the gap (3.0) begins: no idle after it; 1.1 ms = 11 %
    f = one(run(sync_tables([("cann", SYNC, 1, 1.1)])), "schedule.synchronize")
    assert f["severity"] == "info"
    assert f["evidence"]["device_idle_after_sync_us_per_step"] == 0.0
    assert f["evidence"]["framework_triggers_per_step"] == {}
    assert f["message"] == (
        "The host waits 1.1 ms per step (11.0% of the step) in 1 stream/device "
        "synchronisation(s); while it waits it launches nothing, so the device idles once the "
        "queue drains (0.0% of the step is device idle that begins during a synchronisation).")


def test_synchronize_gap_at_the_end_or_start_of_a_sync_begins_inside_it():
    # sync [2, 3): the gap at 3.0 begins at its end: inside (idle after 1 ms)
    f = one(run(sync_tables([("cann", SYNC, 2, 1.0)])), "schedule.synchronize")
    assert f["evidence"]["device_idle_after_sync_us_per_step"] == 1000.0
    # sync [3, 4): the gap begins at its start: inside
    f = one(run(sync_tables([("cann", SYNC, 3, 1.0)])), "schedule.synchronize")
    assert f["evidence"]["device_idle_after_sync_us_per_step"] == 1000.0
    # sync [3.001, 4.101): begins after the gap did: not
    f = one(run(sync_tables([("cann", SYNC, 3.001, 1.1)])), "schedule.synchronize")
    assert f["evidence"]["device_idle_after_sync_us_per_step"] == 0.0


def test_synchronize_idle_after_a_short_sync_nested_in_a_long_one():
    # syncs [1, 5) and [2, 2.5): the gap at 3.0 is inside the long one although the sync
    # that started last before it ended at 2.5
    f = one(run(sync_tables([("cann", SYNC, 2, 0.5), ("cann", SYNC, 1, 4.0)])),
            "schedule.synchronize")
    assert f["evidence"]["device_idle_after_sync_us_per_step"] == 1000.0
    assert f["evidence"]["sync_calls_per_step"] == 2.0


def test_synchronize_silent_below_ten_percent():
    # 0.9 ms of 10 ms
    assert status(run(sync_tables([("cann", SYNC, 1, 0.9)])), "schedule.synchronize") == \
        ["silent", ""]
    # exactly 10 % is reported
    f = one(run(sync_tables([("cann", SYNC, 1, 1.0)])), "schedule.synchronize")
    assert f["evidence"]["sync_pct_of_step"] == 10.0


def test_synchronize_after_most_launches_is_blocking():
    # CANN events by start (given out of order): launch, sync, launch, malloc, sync, launch,
    # sync: 2 of the 3 launches are followed at once by a sync (67 % > 50 %)
    ev = [("cann", "Node@launch", 6, 0.1), ("cann", "AscendCL@aclrtSynchronizeDevice", 7, 0.1),
          ("cann", "Node@launch", 1, 0.1), ("cann", SYNC, 2, 0.1),
          ("cann", "Node@launch", 3, 0.1), ("cann", "AscendCL@aclrtMalloc", 4, 0.1),
          ("cann", SYNC, 5, 0.1), ("framework", "aten::add", 6.5, 0.1)]
    f = one(run(sync_tables(ev)), "schedule.synchronize")
    assert f["key"] == "schedule.synchronize:blocking" and f["severity"] == "critical"
    assert f["evidence"]["launch_then_sync"] == 2 and f["evidence"]["node_launches"] == 3
    assert f["evidence"]["co_occurrence_ratio"] == 0.6667
    assert f["impact_us_per_step"] == 300.0
    assert f["message"] == ("2 of 3 operator launches are followed at once by a stream "
                            "synchronisation (67%): every operator waits for the device "
                            "before the next is launched.")
    assert f["advice"] == BLOCKING_ADVICE


def test_synchronize_half_the_launches_is_not_blocking():
    # 1 of 2 launches followed by a sync: 50 %, not above; 0.2 ms of sync is 2 %: silent
    ev = [("cann", "Node@launch", 1, 0.1), ("cann", SYNC, 2, 0.1),
          ("cann", "Node@launch", 3, 0.1), ("cann", "AscendCL@aclrtMalloc", 4, 0.1),
          ("cann", SYNC, 5, 0.1)]
    assert status(run(sync_tables(ev)), "schedule.synchronize") == ["silent", ""]


def test_synchronize_from_api_statistic_without_host_events():
    # 2 steps of 10 ms; the four synchronisation APIs: 3 + 1 + 2 + 2 calls, 1 + 0.5 + 0.3 +
    # 0.4 = 2.2 ms in all -> 4 calls and 1.1 ms per step (11 %); aclrtMalloc is none
    rows = [("aclrtSynchronizeStream", 1_000_000, 3),
            ("aclrtSynchronizeStreamWithTimeout", 500_000, 1),
            ("aclrtSynchronizeDevice", 300_000, 2),
            ("aclrtSynchronizeDeviceWithTimeout", 400_000, 2),
            ("aclrtMalloc", 9_000_000, 5)]
    a = S.conform(S.API_STATISTIC, pa.table({
        "api_name": [r[0] for r in rows], "total_ns": pa.array([r[1] for r in rows], pa.int64()),
        "count": pa.array([r[2] for r in rows], pa.int64())}))
    f = one(run({S.API_STATISTIC: a, S.STEP_TRACE: step_trace([(1, 10, 1), (2, 10, 1)])}),
            "schedule.synchronize")
    assert f["key"] == "schedule.synchronize:wait" and f["severity"] == "info"
    assert f["evidence"] == {
        "sync_calls_per_step": 4.0, "sync_us_per_step": 1100.0, "sync_pct_of_step": 11.0,
        "launch_then_sync": None, "node_launches": None, "co_occurrence_ratio": None,
        "framework_triggers_per_step": {}, "device_idle_after_sync_us_per_step": None,
        "free_pct_of_step": 10.0}
    assert f["message"].endswith("so the device idles once the queue drains.")


# ------------------------------------------------------------------------------- dataloader

def dl_tables(host_rows, stage=100.0):
    return {S.HOST_EVENTS: host(host_rows), S.STEP_TRACE: step_trace([(1, stage, 1)])}


def test_dataloader_sums_the_outermost_loading_per_step():
    # thread 1: DataLoader.__next__ step 1 [0, 12) holds a nested frame [1, 11) (not counted
    # again); step 2 [20, 25); one with no step [40, 41) (per collection).
    # thread 2: a loader frame of step 1 [0, 3), outermost on its own thread: step 1 = 15 ms.
    # A CANN event named like a loader is no framework event.
    ev = [("framework", "DataLoader.__next__", 0, 12, 1, 1),
          ("framework", "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", 1, 10,
           1, 1),
          ("framework", "DataLoader.__next__", 20, 5, 1, 2),
          ("framework", "dataloader_fetch", 0, 3, 2, 1),
          ("framework", "DataLoader.__next__", 40, 1, 1, None),
          ("cann", "dataloader", 50, 30, 1, 1)]
    f = one(run(dl_tables(ev)), "schedule.dataloader")
    e = f["evidence"]
    assert e["dataloader_ms_per_step"] == {"collection": 1.0, "1": 15.0, "2": 5.0}
    assert list(e["dataloader_ms_per_step"]) == ["collection", "1", "2"]
    assert e["events"] == ["DataLoader.__next__", "dataloader_fetch"]
    assert e["single_process"] is False  # the single-process frame is a nested one
    assert f["impact_us_per_step"] == 15000.0 and f["share_of_step_pct"] == 15.0
    assert f["severity"] == "critical"
    assert f["message"] == ("Loading the data of a step takes up to 15.0 ms (15.0% of the "
                            "step), above 10 ms.")
    assert f["advice"] == DATALOADER_ADVICE


def test_dataloader_single_process_and_the_threshold_itself():
    # exactly 10 ms in the single-process iterator (outermost): reported, 10 % of 100 ms is
    # critical; num_workers=0 advice first
    ev = [("framework", "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", 0, 10)]
    f = one(run(dl_tables(ev)), "schedule.dataloader")
    assert f["evidence"]["single_process"] is True
    assert f["evidence"]["dataloader_ms_per_step"] == {"1": 10.0}
    assert f["severity"] == "critical"
    assert f["advice"] == [SINGLE_PROCESS_ADVICE] + DATALOADER_ADVICE
    # 9 ms of 1 s: silent; 12 ms of 1 s (1.2 %): a warning
    ev = [("framework", "DataLoader.__next__", 0, 9)]
    assert status(run(dl_tables(ev, 1000)), "schedule.dataloader") == ["silent", ""]
    ev = [("framework", "DataLoader.__next__", 0, 12)]
    assert one(run(dl_tables(ev, 1000)), "schedule.dataloader")["severity"] == "warning"


def test_dataloader_overlapping_frames_of_one_thread():
    # [0, 6) and [4, 11) overlap without nesting: both outermost (6 + 7 = 13 ms); [4, 10)
    # starts with the second but ends inside it; [0, 6) again (same start and end) is inside
    # the first
    ev = [("framework", "DataLoader.a", 0, 6), ("framework", "DataLoader.b", 4, 7),
          ("framework", "DataLoader.c", 4, 6), ("framework", "DataLoader.d", 0, 6)]
    f = one(run(dl_tables(ev)), "schedule.dataloader")
    assert f["evidence"]["dataloader_ms_per_step"] == {"1": 13.0}
    assert f["evidence"]["events"] == ["DataLoader.a", "DataLoader.b"]


def test_outermost_keeps_the_longest_of_frames_starting_together():
    import numpy as np

    # three frames starting at 0 (lengths 2, 5, 3) and one at 1 (length 1) on thread 4; one on
    # a thread with no id. The longest at 0 holds the others of its thread.
    start = np.array([0, 0, 0, 1, 0], np.int64)
    dur = np.array([2, 5, 3, 1, 2], np.int64)
    tid = np.array([4, 4, 4, 4, np.nan])
    assert SC._outermost(start, dur, tid).tolist() == [4, 1]


def test_dataloader_silent_without_loader_events():
    ev = [("framework", "aten::add", 0, 20)]
    assert status(run(dl_tables(ev)), "schedule.dataloader") == ["silent", ""]


def test_dataloader_lists_at_most_five_event_names():
    ev = [("framework", f"DataLoader.f{i}", 3 * i, 2.5) for i in range(7)]
    f = one(run(dl_tables(ev)), "schedule.dataloader")
    assert f["evidence"]["events"] == [f"DataLoader.f{i}" for i in range(5)]
    assert f["evidence"]["dataloader_ms_per_step"] == {"1": 17.5}


# -------------------------------------------------------------------------------------- GC

def gc_tables(durs_ms, n_steps=2):
    ev = [("gc", "GC", 10 * i, d) for i, d in enumerate(durs_ms)]
    ev.append(("framework", "aten::add", 0, 1))
    return {S.HOST_EVENTS: host(ev),
            S.STEP_TRACE: step_trace([(s, 100, 1) for s in range(1, n_steps + 1)])}


def test_gc_of_one_ms_or_more():
    # 2.5, 0.5, 1.0, 1.2 ms: 2.5, 1.0 (the threshold itself) and 1.2 count: 4.7 ms in all,
    # 2.35 ms per step of 100 ms (2.35 %: a warning)
    f = one(run(gc_tables([2.5, 0.5, 1.0, 1.2])), "schedule.gc")
    assert f["severity"] == "warning"
    assert f["impact_us_per_step"] == 2350.0 and f["share_of_step_pct"] == 2.35
    assert f["evidence"] == {"gc_count": 3, "gc_total_ms": 4.7, "longest_ms": 2.5,
                             "largest": [{"start_ns": t(0), "dur_ms": 2.5},
                                         {"start_ns": t(30), "dur_ms": 1.2},
                                         {"start_ns": t(20), "dur_ms": 1.0}]}
    assert f["message"] == ("3 Python garbage collection(s) of 1 ms or more, 4.7 ms in all; a "
                            "collection blocks the whole process.")
    assert f["advice"] == GC_ADVICE


def test_gc_severity_info_below_one_percent_and_critical_from_ten():
    # 1.8 ms over 2 steps = 0.9 % -> info; 20 ms over 2 steps = 10 % -> critical
    assert one(run(gc_tables([1.8])), "schedule.gc")["severity"] == "info"
    assert one(run(gc_tables([20.0])), "schedule.gc")["severity"] == "critical"
    # 2 ms over 2 steps = 1 % -> warning
    assert one(run(gc_tables([2.0])), "schedule.gc")["severity"] == "warning"


def test_gc_lists_the_ten_longest():
    durs = [1.0 + i / 10 for i in range(12)]  # 1.0 .. 2.1 ms
    f = one(run(gc_tables(durs)), "schedule.gc")
    assert f["evidence"]["gc_count"] == 12
    assert [g["dur_ms"] for g in f["evidence"]["largest"]] == [
        2.1, 2.0, 1.9, 1.8, 1.7, 1.6, 1.5, 1.4, 1.3, 1.2]


def test_gc_short_only_is_silent_and_none_is_skipped():
    assert status(run(gc_tables([0.999, 0.5])), "schedule.gc") == ["silent", ""]
    st, why = status(run(gc_tables([])), "schedule.gc")
    assert st == "skipped" and why == ("no GC events (collected only with torch_npu "
                                       "experimental_config gc_detect_threshold)")


# ---------------------------------------------------------------------------- conjectured GC

def cgc_tables(acl_rows, gap_ms=290.0, extra=()):
    # kernels [0, 10) and [10 + gap, 20 + gap): one idle gap of gap_ms at 10 ms (step 1);
    # Stage 1 s
    return {S.KERNELS: kernels([(1, 0, 10), (1, 10 + gap_ms, 20 + gap_ms)]),
            S.STEP_TRACE: step_trace([(1, 1000, 300)]),
            S.HOST_EVENTS: host([("cann", n, s, d) for n, s, d in acl_rows] + list(extra))}


def test_conjectured_gc_long_gap_with_almost_no_api_calls():
    # in the 290 ms gap [10, 300): AscendCL@a [5, 12) overlaps it 2 ms, AscendCL@b [100,
    # 100.01) 0.01 ms: 2 events (6.9e-6 per us < 1e-4), 2.01 ms (0.69 % < 1 %).
    # AscendCL@c after the gap and Node@launch (not an API call) inside do not count.
    acl = [("AscendCL@a", 5, 7), ("AscendCL@b", 100, 0.01), ("AscendCL@c", 305, 1),
           ("Node@launch", 200, 50)]
    f = one(run(cgc_tables(acl)), "schedule.conjectured_gc")
    assert f["evidence"] == {"gaps": [{"step": 1, "start_ns": t(10), "dur_ms": 290.0,
                                       "acl_events": 2, "acl_ms": 2.01}]}
    # 290 ms of a 1 s step: 29 % -> critical
    assert f["severity"] == "critical" and f["impact_us_per_step"] == 290000.0
    assert f["message"] == ("1 device idle gap(s) of 200 ms or more with almost no host API "
                            "call in them (longest 290 ms): the host was likely paused by "
                            "Python garbage collection.")
    assert f["advice"] == CONJ_GC_ADVICE


def test_conjectured_gc_from_200ms_and_below_the_rates():
    # a gap of exactly 200 ms counts
    f = one(run(cgc_tables([("AscendCL@a", 0, 1)], gap_ms=200)), "schedule.conjectured_gc")
    assert f["evidence"]["gaps"][0]["dur_ms"] == 200.0
    # 199 ms: silent
    assert status(run(cgc_tables([("AscendCL@a", 0, 1)], gap_ms=199)),
                  "schedule.conjectured_gc") == ["silent", ""]


def test_conjectured_gc_event_rate_limit():
    # 200 ms gap = 200 000 us: 20 events are 1e-4 per us (not below): silent; 19 are below
    acl = [("AscendCL@x", 10 + 5 * i + 1, 0.001) for i in range(20)]
    assert status(run(cgc_tables(acl, gap_ms=200)), "schedule.conjectured_gc") == \
        ["silent", ""]
    f = one(run(cgc_tables(acl[:19], gap_ms=200)), "schedule.conjectured_gc")
    assert f["evidence"]["gaps"][0]["acl_events"] == 19


def test_conjectured_gc_time_ratio_limit():
    # 200 ms gap: API calls holding 2 ms of it are 1 % (not below): silent; 1.99 ms is below
    assert status(run(cgc_tables([("AscendCL@x", 50, 2)], gap_ms=200)),
                  "schedule.conjectured_gc") == ["silent", ""]
    f = one(run(cgc_tables([("AscendCL@x", 50, 1.99)], gap_ms=200)), "schedule.conjectured_gc")
    assert f["evidence"]["gaps"][0]["acl_ms"] == 1.99


def test_conjectured_gc_skips():
    st, why = status(run(cgc_tables([("AscendCL@a", 0, 1)], extra=[("gc", "GC", 0, 1)])),
                     "schedule.conjectured_gc")
    assert st == "skipped" and why == "GC events were collected (schedule.gc judges them)"
    st, why = status(run(cgc_tables([("Node@launch", 0, 1)])), "schedule.conjectured_gc")
    assert st == "skipped" and why.startswith("no CANN API events")


def test_conjectured_gc_severity_and_several_gaps():
    # two steps of 1 s, gaps of 250 ms and 210 ms (steps 1 and 2): 460 ms / 2 = 230 ms per
    # step, 23 %: critical; longest 250
    k = kernels([(1, 0, 10), (1, 260, 270), (2, 1000, 1010), (2, 1220, 1230)])
    tb = {S.KERNELS: k, S.STEP_TRACE: step_trace([(1, 1000, 300), (2, 1000, 300)]),
          S.HOST_EVENTS: host([("cann", "AscendCL@a", 0, 1)])}
    f = one(run(tb), "schedule.conjectured_gc")
    assert [g["step"] for g in f["evidence"]["gaps"]] == [1, 2]
    assert f["impact_us_per_step"] == 230000.0
    assert "2 device idle gap(s)" in f["message"] and "(longest 250 ms)" in f["message"]
    # 20 ms steps cannot hold these gaps' share below 10 %; 10 s steps: 2.3 % -> warning
    tb[S.STEP_TRACE] = step_trace([(1, 10000, 300), (2, 10000, 300)])
    assert one(run(tb), "schedule.conjectured_gc")["severity"] == "warning"
    tb[S.STEP_TRACE] = step_trace([(1, 100000, 300), (2, 100000, 300)])
    assert one(run(tb), "schedule.conjectured_gc")["severity"] == "info"


# ---------------------------------------------------------------------------- SyncBatchNorm

def bn_tables(n, name="SyncBatchNorm", source="framework"):
    ev = [(source, name, 0.1 * i, 0.05) for i in range(n)]
    ev.append(("framework", "aten::add", 0, 1))
    return {S.HOST_EVENTS: host(ev), S.STEP_TRACE: step_trace([(1, 100, 1), (2, 100, 1)])}


def test_syncbn_twenty_per_step():
    # 40 calls of 50 us over 2 steps: 20 per step (the threshold), 1 ms per step
    f = one(run(bn_tables(40)), "schedule.syncbn")
    assert f["severity"] == "warning"
    assert f["evidence"] == {"syncbn_calls_per_step": 20.0, "host_ms_per_step": 1.0}
    assert f["impact_us_per_step"] == 1000.0
    assert f["share_of_step_pct"] == 1.0  # of the 100 ms step
    assert f["message"] == ("20 SyncBatchNorm call(s) per step (1.0 ms of host time): each "
                            "synchronises statistics across devices and launches many small "
                            "operators.")
    assert f["advice"] == SYNCBN_ADVICE
    # 39: 19.5 per step, silent
    assert status(run(bn_tables(39)), "schedule.syncbn") == ["silent", ""]


def test_syncbn_name_in_any_case_but_framework_only():
    assert one(run(bn_tables(40, "syncbatchnorm")), "schedule.syncbn")
    assert status(run(bn_tables(40, "SyncBatchNormBackward")), "schedule.syncbn") == \
        ["silent", ""]
    assert status(run(bn_tables(40, source="cann")), "schedule.syncbn") == ["silent", ""]


# ---------------------------------------------------------------------------------- rules

def test_schedule_rule_declarations():
    ids = [r.id for r in SC.RULES]
    assert ids == ["schedule.device_idle", "schedule.synchronize", "schedule.dataloader",
                   "schedule.gc", "schedule.conjectured_gc", "schedule.syncbn"]
    by = {r.id: r for r in SC.RULES}
    assert by["schedule.device_idle"].threshold == {"free_pct_of_step": 10.0,
                                                    "stall_gap_us": 1000.0,
                                                    "task_switch_gap_us": 10.0}
    assert by["schedule.synchronize"].threshold == {
        "launch_then_sync_ratio": 0.5, "sync_pct_of_step": 10.0,
        "idle_after_sync_pct_of_step_for_warning": 5.0}
    assert by["schedule.dataloader"].threshold == {"dataloader_us_per_step": 10000.0}
    assert by["schedule.gc"].threshold == {"gc_us": 1000.0}
    assert by["schedule.conjectured_gc"].threshold == {
        "gap_us": 200000.0, "max_acl_events_per_us": 0.0001, "max_acl_time_ratio": 0.01}
    assert by["schedule.syncbn"].threshold == {"calls_per_step": 20}
    assert by["schedule.device_idle"].needs == ((S.KERNELS,), (S.STEP_TRACE,))
    assert by["schedule.conjectured_gc"].needs == ((S.HOST_EVENTS,), (S.KERNELS,))


# ------------------------------------------------------------- per-step means, more limits

def test_device_gaps_skip_a_window_with_one_busy_piece_and_go_on():
    # window 1 [0, 10] holds one kernel (no gap between pieces); window 2 [20, 30] two: one gap
    k = kernels([(1, 2, 8), (2, 20, 24), (2, 25, 30)])
    got = SC.device_gaps(ctx({S.KERNELS: k, S.STEPS: steps([(1, 0, 10), (2, 20, 30)])}))
    assert gap_rows(got) == want([(2, 24.0, 1000)])


@pytest.mark.parametrize("col", ["start_ns", "dur_ns"])
def test_device_gaps_a_null_in_one_column_only(col):
    # kernels [0,2) [3,5) [6,9) of step 1 (no STEPS: the window is the step's kernel span); the
    # middle one loses its start or its duration: gaps 2 -> 6 (4 ms) only
    k = kernels([(1, 0, 2), (1, 3, 5), (1, 6, 9)])
    v = k[col].to_pylist()
    v[1] = None
    k = k.set_column(k.schema.get_field_index(col), col, pa.array(v, pa.int64()))
    assert gap_rows(SC.device_gaps(ctx({S.KERNELS: k}))) == want([(1, 2.0, 4000)])


def test_device_idle_means_over_three_steps():
    # windows [0,10] [20,30] [40,50], Stage 10 ms, Free 2 ms each (20 %: a warning).
    # step 1: [0,5) [5.1,10): 100 us; step 2: [20,25) [25.2,30): 200 us; step 3: [40,45)
    # [45.003,47) [48.5,50): 3 us (a task switch) and 1.5 ms (a stall).
    # Per step: 4/3 = 1.3 gaps; switches 0.3 (1 us); dispatch 0.7 (300/3 = 100 us, median 150);
    # stalls 0.3 (500 us): stall time above dispatch time: a stall finding.
    k = kernels([(1, 0, 5), (1, 5.1, 10), (2, 20, 25), (2, 25.2, 30), (3, 40, 45),
                 (3, 45.003, 47), (3, 48.5, 50)])
    tb = {S.KERNELS: k, S.STEPS: steps([(1, 0, 10), (2, 20, 30), (3, 40, 50)]),
          S.STEP_TRACE: step_trace([(1, 10, 2), (2, 10, 2), (3, 10, 2)])}
    f = one(run(tb), "schedule.device_idle")
    e = f["evidence"]
    assert e["gaps_per_step"] == 1.3
    assert e["task_switch_gaps"] == {"count_per_step": 0.3, "us_per_step": 1.0}
    assert e["dispatch_gaps"] == {"count_per_step": 0.7, "us_per_step": 100.0,
                                  "median_us": 150.0}
    assert e["stall_gaps"] == {"count_per_step": 0.3, "us_per_step": 500.0}
    assert f["key"] == "schedule.device_idle:stall" and f["severity"] == "warning"
    assert f["message"] == (
        "The device idles 20.0% of the step (2.0 ms), mostly in 1 gap(s) of 1 ms or more "
        "(0.5 ms per step); the collection has no host timeline to tell what the host did.")


def test_synchronize_means_over_three_steps_and_the_first_three_triggers():
    # three 10 ms steps; kernels [0,3) [4,10) in step 1 (one gap at 3.0, 1 ms), none after.
    # Syncs: [2.8, 4.3) 1.5 ms, [12, 13.5) 1.5 ms, [22, 22.5) 0.5 ms, [25, 25.003) 3 us =
    # 3.503 ms: 1167.667 us and 1.3 calls per step, 11.68 % of the step. The gap at 3.0
    # begins in the first: 1 ms / 3 =
    # 333.333 us of idle after syncs per step, 3.33 % (< 5 %: info).
    # Triggers: aten::item 4 (1.3 per step), aten::nonzero 2 (0.7), aten::equal 1 (0.3),
    # aten::masked_select 1 (0.3, listed after aten::equal: first seen later); the message
    # names the first three.
    ev = [("cann", SYNC, 2.8, 1.5), ("cann", SYNC, 12, 1.5), ("cann", SYNC, 22, 0.5),
          ("cann", SYNC, 25, 0.003)]
    ev += [("framework", "aten::item", 1 + i, 0.1) for i in range(4)]
    ev += [("framework", "aten::nonzero", 6 + i, 0.1) for i in range(2)]
    ev += [("framework", "aten::equal", 8, 0.1), ("framework", "aten::masked_select", 9, 0.1)]
    tb = {S.KERNELS: kernels([(1, 0, 3), (1, 4, 10)]),
          S.STEPS: steps([(1, 0, 10), (2, 10, 20), (3, 20, 30)]),
          S.STEP_TRACE: step_trace([(1, 10, 1), (2, 10, 1), (3, 10, 1)]),
          S.HOST_EVENTS: host(ev)}
    f = one(run(tb), "schedule.synchronize")
    e = f["evidence"]
    assert e["sync_calls_per_step"] == 1.3 and e["sync_us_per_step"] == 1167.667
    assert e["sync_pct_of_step"] == 11.68
    assert e["framework_triggers_per_step"] == {"aten::item": 1.3, "aten::nonzero": 0.7,
                                                "aten::equal": 0.3, "aten::masked_select": 0.3}
    assert e["device_idle_after_sync_us_per_step"] == 333.333
    assert f["severity"] == "info"
    assert ("triggered by aten::item x1.3, aten::nonzero x0.7, aten::equal x0.3; while"
            in f["message"])
    assert "(3.3% of the step is device idle" in f["message"]


def test_synchronize_idle_after_of_five_percent_is_a_warning():
    # one 20 ms step; the 1 ms gap at 3.0 begins in the sync [2.5, 5): 5 % of the step idles
    # after a sync (a warning); the sync is 2.5 ms = 12.5 %
    tb = {S.KERNELS: kernels([(1, 0, 3), (1, 4, 20)]), S.STEPS: steps([(1, 0, 20)]),
          S.STEP_TRACE: step_trace([(1, 20, 2)]), S.HOST_EVENTS: host([("cann", SYNC, 2.5, 2.5)])}
    f = one(run(tb), "schedule.synchronize")
    assert f["severity"] == "warning"
    assert "(5.0% of the step is device idle" in f["message"]


def test_synchronize_without_kernels_no_idle_after():
    # host events but no kernels: no device gaps, so no idle after a sync (0 us, 0 %)
    tb = {S.STEP_TRACE: step_trace([(1, 10, 1)]),
          S.HOST_EVENTS: host([("cann", SYNC, 1, 1.5)])}
    f = one(run(tb), "schedule.synchronize")
    assert f["evidence"]["device_idle_after_sync_us_per_step"] == 0.0
    assert f["severity"] == "info"
    assert f["message"].endswith("(0.0% of the step is device idle that begins during a "
                                 "synchronisation).")


def test_dataloader_share_below_one_percent_is_still_a_warning_and_no_step_time_is_info():
    # 12 ms of a 2 s step: 0.6 % -> a warning (any share)
    ev = [("framework", "DataLoader.__next__", 0, 12)]
    f = one(run(dl_tables(ev, 2000)), "schedule.dataloader")
    assert f["severity"] == "warning" and f["share_of_step_pct"] == 0.6
    # without a step time: no share, info, the message without it
    f = one(run({S.HOST_EVENTS: host(ev)}), "schedule.dataloader")
    assert f["severity"] == "info" and f["share_of_step_pct"] is None
    assert f["message"] == "Loading the data of a step takes up to 12.0 ms, above 10 ms."


def test_conjectured_gc_calls_touching_the_gap_ends_are_outside_it():
    # gap [10, 300): AscendCL@a [9, 10) ends where it begins, AscendCL@b [300, 301) starts
    # where it ends: neither is in it; AscendCL@c [50, 50.5) is
    acl = [("AscendCL@a", 9, 1), ("AscendCL@b", 300, 1), ("AscendCL@c", 50, 0.5)]
    f = one(run(cgc_tables(acl)), "schedule.conjectured_gc")
    assert f["evidence"]["gaps"] == [{"step": 1, "start_ns": t(10), "dur_ms": 290.0,
                                      "acl_events": 1, "acl_ms": 0.5}]


def test_conjectured_gc_lists_ten_gaps():
    # 12 gaps of 200 ms: kernels of 1 ms every 201 ms (one step); all reported, 10 listed
    k = kernels([(1, 201 * i, 201 * i + 1) for i in range(13)])
    tb = {S.KERNELS: k, S.STEP_TRACE: step_trace([(1, 3000, 2400)]),
          S.HOST_EVENTS: host([("cann", "AscendCL@a", 0, 0.5)])}
    f = one(run(tb), "schedule.conjectured_gc")
    assert len(f["evidence"]["gaps"]) == 10
    assert [g["start_ns"] for g in f["evidence"]["gaps"]] == [t(201 * i + 1) for i in range(10)]
    assert f["message"].startswith("12 device idle gap(s) of 200 ms or more")
    assert f["impact_us_per_step"] == 2_400_000.0


def test_syncbn_per_step_count_to_one_decimal():
    # 61 calls over 3 steps: 20.333 per step -> 20.3; 50 us each: 1.017 ms per step
    ev = [("framework", "SyncBatchNorm", 0.1 * i, 0.05) for i in range(61)]
    tb = {S.HOST_EVENTS: host(ev), S.STEP_TRACE: step_trace([(s, 100, 1) for s in (1, 2, 3)])}
    f = one(run(tb), "schedule.syncbn")
    assert f["evidence"] == {"syncbn_calls_per_step": 20.3, "host_ms_per_step": 1.017}


def test_device_idle_messages_give_free_in_ms():
    # Free 100 ms of a 200 ms step (50 %): "100.0 ms" in both kinds of message
    tb = stall_tables()
    tb[S.STEP_TRACE] = step_trace([(1, 200, 100)])
    f = one(run(tb), "schedule.device_idle")
    assert f["message"].startswith("The device idles 50.0% of the step (100.0 ms), mostly in ")
    tb = dispatch_tables()
    tb[S.STEP_TRACE] = step_trace([(1, 200, 100), (2, 200, 100)])
    f = one(run(tb), "schedule.device_idle")
    assert f["message"].startswith("The device idles 50.0% of the step (100.0 ms), 0.7 ms of "
                                   "it in 3 gap(s)")


def test_device_idle_stall_message_gives_the_stall_time_per_step_in_ms():
    # window [0, 200], Stage 200 ms, Free 100 ms; kernels [0,10) [110,120): one 100 ms stall
    tb = {S.KERNELS: kernels([(1, 0, 10), (1, 110, 120)]), S.STEPS: steps([(1, 0, 200)]),
          S.STEP_TRACE: step_trace([(1, 200, 100)])}
    f = one(run(tb), "schedule.device_idle")
    assert "mostly in 1 gap(s) of 1 ms or more (100.0 ms per step)" in f["message"]


def test_device_idle_host_event_without_duration_holds_no_time():
    # the stall scenario; the host timeline has an event with no duration inside the 5 ms gap
    # (it covers nothing) besides aten::item [19, 24) (4 ms of the gap)
    ev = [("framework", "aten::item", 19, 5), ("framework", "aten::empty", 21, None)]
    f = one(run(stall_tables(ev)), "schedule.device_idle")
    assert f["evidence"]["largest_gaps"][0]["host"] == [{"name": "aten::item",
                                                         "overlap_ms": 4.0}]
    assert "the host was mostly in aten::item" in f["message"]


def test_synchronize_gap_inside_a_later_sync():
    # syncs [1, 1.5) and [2.5, 3.6): the gap at 3.0 begins in the second (1 ms of idle after)
    f = one(run(sync_tables([("cann", SYNC, 1, 0.5), ("cann", SYNC, 2.5, 1.1)])),
            "schedule.synchronize")
    assert f["evidence"]["device_idle_after_sync_us_per_step"] == 1000.0


def test_device_idle_launches_without_gaps_none_late():
    # one kernel [2, 8) in the window [0, 10] (Free 4 of 10 ms): no gap between kernels; its
    # launch at 1.0 (delay 1 ms): nothing idles before a late launch
    tb = {S.KERNELS: kernels([(1, 2, 8)]), S.STEPS: steps([(1, 0, 10)]),
          S.STEP_TRACE: step_trace([(1, 10, 4)]), S.LAUNCHES: launches([(2, 1)])}
    f = one(run(tb), "schedule.device_idle")
    assert f["evidence"]["gaps_per_step"] == 0.0 and f["evidence"]["largest_gaps"] == []
    assert f["evidence"]["launch"] == {"launches": 1, "delay_median_us": 1000.0,
                                       "delay_p95_us": 1000.0,
                                       "idle_before_launch_us_per_step": 0.0,
                                       "file": "dispatch.csv"}


def test_synchronize_message_gives_the_wait_per_step_in_ms():
    # one 500 ms step (kernels [0, 3) [4, 500)); a 100 ms sync [10, 110): 20 % of the step
    tb = {S.KERNELS: kernels([(1, 0, 3), (1, 4, 500)]), S.STEPS: steps([(1, 0, 500)]),
          S.STEP_TRACE: step_trace([(1, 500, 1)]), S.HOST_EVENTS: host([("cann", SYNC, 10, 100)])}
    f = one(run(tb), "schedule.synchronize")
    assert f["message"].startswith("The host waits 100.0 ms per step (20.0% of the step) in 1 ")


def test_device_idle_late_launch_idle_in_ms():
    # one step [0, 200] (Free 100 of 200 ms); kernels [2i, 2i + 1.1) for i < 100: 99 dispatch
    # gaps of 0.9 ms; each kernel launched 0.5 ms before it starts, i.e. after the gap before
    # it began (0.9 ms before): all 99 gaps idle before a late launch, 89.1 ms
    k = kernels([(1, 2 * i, 2 * i + 1.1) for i in range(100)])
    lt = launches([(2 * i, 2 * i - 0.5) for i in range(100)])
    tb = {S.KERNELS: k, S.STEPS: steps([(1, 0, 200)]), S.STEP_TRACE: step_trace([(1, 200, 100)]),
          S.LAUNCHES: lt}
    f = one(run(tb), "schedule.device_idle")
    assert f["key"] == "schedule.device_idle:dispatch"
    assert f["evidence"]["launch"]["idle_before_launch_us_per_step"] == 89100.0
    assert f["message"].endswith(" Launch delay median 500 us; 89.1 ms of idle per step is in "
                                 "gaps whose next task was launched only after they began "
                                 "(dispatch.csv).")


def test_host_activity_exact_at_a_real_epoch():
    # host clocks in ns since 1970 (~1.7e18): beyond float64's exact integers (2^53), where
    # neighbouring values are 256 ns apart. An event of 1 000 560 ns inside the window
    # overlaps it 1.00056 ms -> 1.001 ms (to the us); as float it would come out 1 000 448 ns
    # (1.0 ms).
    e0 = 1_700_000_000_000_000_000
    h = S.conform(S.HOST_EVENTS, pa.table({
        "source": ["framework"], "name": ["aten::item"], "tid": pa.array([1], pa.int64()),
        "start_ns": pa.array([e0 + 1_000], pa.int64()),
        "dur_ns": pa.array([1_000_560], pa.int64())}))
    c = ctx({S.HOST_EVENTS: h})
    assert SC.host_activity(c, e0, e0 + 5_000_000) == [{"name": "aten::item",
                                                        "overlap_ms": 1.001}]


def test_synchronize_silent_when_the_host_never_synchronises():
    # host events without any synchronisation call, device gaps present: nothing to report
    ev = [("cann", "Node@launch", 1, 0.1), ("cann", "AscendCL@aclrtMalloc", 2, 0.1),
          ("framework", "aten::add", 3, 0.1)]
    assert status(run(sync_tables(ev)), "schedule.synchronize") == ["silent", ""]


def test_host_activity_ties_keep_the_table_order():
    # 20 events starting at the window's start [20, 30), lasting 2 2 3 3 1 1 3 3 1 1 3 2 1 3 1
    # 2 2 2 1 1 ms: the three largest overlaps are the 3 ms ones; of those, the first three in
    # the table (e02, e03, e06) are named, in that order
    lens = [2, 2, 3, 3, 1, 1, 3, 3, 1, 1, 3, 2, 1, 3, 1, 2, 2, 2, 1, 1]
    c = ctx(stall_tables([("framework", f"e{i:02d}", 20, d) for i, d in enumerate(lens)]))
    assert SC.host_activity(c, t(20), t(30)) == [{"name": n, "overlap_ms": 3.0}
                                                for n in ("e02", "e03", "e06")]


def test_synchronize_silent_with_framework_events_only():
    # a host timeline without any CANN event: no launch, no synchronisation
    ev = [("framework", "aten::add", 1, 0.1), ("framework", "aten::item", 2, 0.1)]
    res = run(sync_tables(ev))
    assert status(res, "schedule.synchronize") == ["silent", ""]


def test_synchronize_check_without_api_data_says_so():
    # the rule's check on a rank with neither host events nor API statistics (the pipeline
    # skips it by its needs first)
    with pytest.raises(Skip, match="^no CANN API data$"):
        SC.RULES[1].check(ctx({}))
