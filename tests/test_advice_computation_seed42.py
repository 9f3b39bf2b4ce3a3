"""Computation advice (analyze/advice/computation.py), the seed-42 sample's survivors: the AI CPU
evidence lists at most ten of eleven op types (the ten with the most time); op_compile's dynamic
share when the kernels hold as many dynamic as static op states (50 %); pipe_bound's cube op
whose busiest pipe is the scalar one (under-used, bound "scalar" at 0.8 or more, "max scalar"
below). Hand-built tables (helpers of tests/test_advice_computation_by_hand.py), values worked
out by hand."""

from __future__ import annotations

from ascendprof.model import schemas as S
from test_advice_computation_by_hand import US, kernel, one, run, steps, table


def _pmu(**r):
    return {f"pmu:{c}": v for c, v in r.items()}


# ------------------------------------------------------------------------------------ AI CPU

def test_aicpu_evidence_lists_the_ten_op_types_with_the_most_time_of_eleven():
    # Eleven AI CPU op types T00..T10, one task each; T<i> lasts (21 + i) us (all >= 20 us),
    # so the most time is T10 (31 us), then T09 ... T01 (22 us); T00 (21 us) is the eleventh.
    # One step of 10000 us.
    k = table(S.KERNELS, [kernel("MatMul_1", "MatMul", "AI_CORE", 500 * US)]
              + [kernel(f"Cpu_{i:02}", f"T{i:02}", "AI_CPU", (21 + i) * US) for i in range(11)])
    f = one(run(KERNELS=k, STEP_TRACE=steps(1, stage_ns=10000 * US)), "computation.aicpu")
    ev = f["evidence"]
    # all eleven count in the totals: 21 + 22 + ... + 31 = 11 x 26 = 286 us
    assert ev["aicpu_tasks"] == 11 and ev["aicpu_us_per_step"] == 286.0
    assert f["message"].startswith("11 AI CPU task(s) of 11 op type(s) take 286.0 us per step")
    assert [g["op_type"] for g in ev["op_types"]] == [f"T{i:02}" for i in range(10, 0, -1)]
    assert [g["total_us_per_step"] for g in ev["op_types"]] == [
        float(21 + i) for i in range(10, 0, -1)]


# ------------------------------------------------------------------------ online compilation

def test_op_compile_as_many_dynamic_as_static_ops_is_fifty_pct_dynamic():
    # api_statistic: 40 aclopCompileAndExecute calls (>= 20) of 100 us in a 1000 us step.
    # Kernels: two dynamic, two static op states (one spelt "Dynamic": counted case-blind):
    # 2 / (2 + 2) = 50.0 %.
    k = table(S.KERNELS, [
        kernel("MatMul_1", "MatMul", "AI_CORE", 10 * US, op_state="dynamic"),
        kernel("MatMul_2", "MatMul", "AI_CORE", 10 * US, op_state="Dynamic"),
        kernel("Add_1", "Add", "AI_VECTOR_CORE", 10 * US, op_state="static"),
        kernel("Add_2", "Add", "AI_VECTOR_CORE", 10 * US, op_state="static"),
    ])
    api = table(S.API_STATISTIC, [{"api_name": "aclopCompileAndExecute", "count": 40,
                                   "total_ns": 100 * US}])
    f = one(run(API_STATISTIC=api, KERNELS=k, STEP_TRACE=steps(1, stage_ns=1000 * US)),
            "computation.op_compile")
    assert f["evidence"]["dynamic_op_state_pct"] == 50.0


# ------------------------------------------------------------------------- PMU pipe ratios

def test_pipe_bound_cube_op_saturating_the_scalar_pipe_is_under_used_bound_scalar():
    # A cube op: mac 0.2 (< 0.8), mte2 0.3 (< 0.95), fixpipe 0.1, mte1 0.1, scalar 0.85: the
    # busiest pipe is scalar, at >= 0.8 -> under-used (control overhead), bound "scalar".
    # 4 tasks of 50 us = 200 us, 20 % of the 1000 us Computing (>= 10 %), mean 50 us (>= 20).
    # Headroom leaves scalar out: busiest mte2 0.3 -> 1 - 0.3 / 0.8 = 0.625.
    k = table(S.KERNELS, [kernel("Conv_s", "Conv2D", "AI_CORE", 50 * US, input_shapes="1",
                                 **_pmu(aic_mac_ratio=0.2, aic_mte2_ratio=0.3,
                                        aic_fixpipe_ratio=0.1, aic_scalar_ratio=0.85,
                                        aic_mte1_ratio=0.1))
                          for _ in range(4)])
    res = run(KERNELS=k, STEP_TRACE=steps(1, stage_ns=1000 * US, computing_ns=1000 * US))
    f = one(res, "computation.pipe_bound", "computation.pipe_bound:under")
    (op,) = f["evidence"]["operators"]
    assert (op["name"], op["class"], op["bound"], op["headroom"]) == (
        "Conv_s", "under", "scalar", 0.625)
    assert not [x for x in res["findings"] if x["key"] == "computation.pipe_bound:memory"]


def test_pipe_bound_cube_op_whose_busiest_pipe_is_scalar_below_the_floor():
    # A cube op: mac 0.2, mte2 0.3, scalar 0.5 (no other ratio): no pipe at 0.8 -> under-used,
    # and the busiest is scalar: bound "max scalar 0.50". 4 tasks of 50 us, 20 % of Computing.
    k = table(S.KERNELS, [kernel("Conv_s", "Conv2D", "AI_CORE", 50 * US, input_shapes="1",
                                 **_pmu(aic_mac_ratio=0.2, aic_mte2_ratio=0.3,
                                        aic_scalar_ratio=0.5))
                          for _ in range(4)])
    f = one(run(KERNELS=k, STEP_TRACE=steps(1, stage_ns=1000 * US, computing_ns=1000 * US)),
            "computation.pipe_bound", "computation.pipe_bound:under")
    (op,) = f["evidence"]["operators"]
    assert (op["class"], op["bound"]) == ("under", "max scalar 0.50")
