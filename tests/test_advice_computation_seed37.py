"""Computation advice (analyze/advice/computation.py): the PMU classes at their edges, the AI
Core clock rule at its floor and what it says, and the AI CPU rule without step values.
Hand-built tables (helpers of tests/test_advice_computation_by_hand.py), values by hand."""

from __future__ import annotations

from ascendprof.analyze.advice import computation as C
from ascendprof.model import schemas as S
from test_advice_computation_by_hand import US, _freq, kernel, one, run, steps, table


def test_classify_cube_mte2_bound_even_when_another_pipe_is_busier():
    # mac 0.1 < 0.8, mte2 0.96 >= 0.95: MTE2-bound, whatever fixpipe (0.97) does
    assert C.classify("AI_CORE", {"aic_mac_ratio": 0.1, "aic_mte2_ratio": 0.96,
                                  "aic_fixpipe_ratio": 0.97}) == ("memory", "mte2")


def test_classify_vector_single_and_summed_pipes():
    # mte2 0.2 < 0.7, mte3 0.75 >= 0.7: bound by the stores
    assert C.classify("AI_VECTOR_CORE", {"aiv_mte2_ratio": 0.2, "aiv_mte3_ratio": 0.75}) == (
        "memory", "mte3")
    # each below 0.7, sum 0.6 + 0.2 + 0.2 = 1.0 >= 0.9: vec 0.6 > mte2 + mte3 0.4 -> compute
    assert C.classify("AI_VECTOR_CORE", {"aiv_vec_ratio": 0.6, "aiv_mte2_ratio": 0.2,
                                         "aiv_mte3_ratio": 0.2}) == ("compute", "vec+mte2+mte3")
    # vec 0.4 < mte2 + mte3 0.3 + 0.3 = 0.6 (sum 1.0) -> memory
    assert C.classify("AI_VECTOR_CORE", {"aiv_vec_ratio": 0.4, "aiv_mte2_ratio": 0.3,
                                         "aiv_mte3_ratio": 0.3}) == ("memory", "vec+mte2+mte3")


def test_aicore_freq_at_exactly_its_floor_is_reported_with_its_share_and_advice():
    # The clock drops to 1000 MHz at 150 us: K1 [150, 160) us runs
    # at 1000 MHz (< 1800 x 0.95): 10 us of 1000 us Computing = 1.0 %, the floor (>= 1 %):
    # reported, info (< 10 %). Step (Stage) 2000 us: 10 / 2000 = 0.5 % of the step.
    freq = _freq([(0, 1800.0), (150 * US, 1000.0), (300 * US, 1800.0)])
    k = table(S.KERNELS, [kernel("K1", "MatMul", "AI_CORE", 10 * US, start_ns=150 * US),
                          kernel("K2", "MatMul", "AI_CORE", 10 * US, start_ns=400 * US)])
    f = one(run(AICORE_FREQ=freq, KERNELS=k,
                STEP_TRACE=steps(1, stage_ns=2000 * US, computing_ns=1000 * US)),
            "computation.aicore_freq")
    assert f["severity"] == "info" and f["evidence"]["pct_of_computing"] == 1.0
    assert f["share_of_step_pct"] == 0.5
    assert f["advice"] == [
        "Check the card's temperature and power cap while training (npu-smi info -t temp / "
        "-t power): the clock drops when either limit is reached.",
        "Check the cooling and the power configuration of the server."]


def test_aicore_freq_without_compute_kernels_is_skipped_saying_so():
    freq = _freq([(0, 1800.0)])
    k = table(S.KERNELS, [kernel("A", "Index", "AI_CPU", 10 * US)])
    res = run(AICORE_FREQ=freq, KERNELS=k, STEP_TRACE=steps(1, computing_ns=1000 * US))
    st = res["status"]["computation.aicore_freq"]
    assert st[0] == "skipped" and "no AI Core / vector task" in str(st[1])


def test_aicpu_lists_the_op_types_and_at_most_five_names():
    # No step values: one step, as long as the span of the kernels (all start at 0, the longest
    # lasts 30 us). Two op types: Index (6 tasks named I1..I6, 30 us each: 180 us) and NonZero
    # (1 task, 25 us): 205 us per step, 205 / 30 = 683.3 % of the step.
    k = table(S.KERNELS, [kernel(f"I{i}", "Index", "AI_CPU", 30 * US) for i in range(1, 7)]
              + [kernel("N1", "NonZero", "AI_CPU", 25 * US)])
    f = one(run(KERNELS=k), "computation.aicpu")
    assert f["message"] == ("7 AI CPU task(s) of 2 op type(s) take 205.0 us per step (683.3% of the step); "
                            "most: "
                            "Index (6 tasks, 180.0 us, longest 30.0 us).")
    assert f["advice"][0] == ("Move these operators to AI Core: Index, NonZero (AI CPU runs "
                              "them one at a time on the device's CPU).")
    assert f["evidence"]["op_types"][0]["names"] == ["I1", "I2", "I3", "I4", "I5"]


def test_op_compile_and_under_used_advice_read_in_full():
    # op_compile: 40 aclopCompileAndExecute calls in one step (>= 20): fired; its second
    # sentence, whole.
    api = table(S.API_STATISTIC, [{"api_name": "aclopCompileAndExecute", "count": 40,
                                   "total_ns": 100 * US}])
    f = one(run(API_STATISTIC=api, STEP_TRACE=steps(1, stage_ns=1000 * US)),
            "computation.op_compile")
    assert f["advice"][1] == (
        "If input shapes change from step to step, pad or bucket them to a few fixed shapes; set "
        "HOST_CACHE_CAPACITY (e.g. 20) to cache the executors of recurring shapes.")
    # pipe_bound "under": a cube op whose busiest pipe is mac 0.3 (< 0.8), 10 tasks of 30 us
    # (>= 20 us each) = 300 us, 30 % of the 1000 us Computing (>= 10 %); its first advice.
    k = table(S.KERNELS, [kernel("FA", "FlashAttention", "AI_CORE", 30 * US, input_shapes="1",
                                 **{"pmu:aic_mac_ratio": 0.3, "pmu:aic_mte2_ratio": 0.2})
                          for _ in range(10)])
    u = one(run(KERNELS=k, STEP_TRACE=steps(1, computing_ns=1000 * US)),
            "computation.pipe_bound", "computation.pipe_bound:under")
    assert u["advice"][0] == (
        "Tune the cube operators with AOE (aoe --job_type=2) and check their shapes: inner axes "
        "that are multiples of 16 elements (fp16/bf16) and 256 bytes map onto the cube without "
        "padding.")


def test_pipe_groups_of_tasks_without_duration_average_their_ratios():
    # Two tasks of one cube operator, both of 0 ns (no duration to weight by): the ratio is the
    # plain mean of the values, mac (0.2 + 0.6) / 2 = 0.4; a task without a value (None) is
    # left out of that mean.
    from ascendprof.analyze.advice.base import Context
    k = table(S.KERNELS, [kernel("Z", "MatMul", "AI_CORE", 0, input_shapes="1",
                                 **{"pmu:aic_mac_ratio": v}) for v in (0.2, 0.6, None)])
    (g,) = C.pipe_groups(Context(0, {S.KERNELS: k}))
    assert g["count"] == 3 and g["ratios"] == {"aic_mac_ratio": 0.4}


def test_aicpu_without_any_step_time_says_no_share():
    # Kernels without start times and no step values: no step time is known (base.Context
    # step_ns: no Stage, no parts, no STEPS, no kernel span), so the message gives no share.
    # One AI CPU task of 30 us (>= 20 us).
    k = table(S.KERNELS, [kernel("I1", "Index", "AI_CPU", 30 * US, start_ns=None)])
    f = one(run(KERNELS=k), "computation.aicpu")
    assert f["message"] == ("1 AI CPU task(s) of 1 op type(s) take 30.0 us per step; most: "
                            "Index (1 tasks, 30.0 us, longest 30.0 us).")
