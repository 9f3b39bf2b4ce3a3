"""Computation advice (analyze/advice/computation.py), the seed-41 sample's survivors: an AI CPU
task without an op type listed under "?"; op_compile's TransData count per step when it is not
whole, its evidence when the rank has no TransData kernel, and its two advice sentences in
full; pipe_bound's under-used class for tasks of exactly 20 us on average, and for an operator
whose only PMU ratio is the scalar one (headroom from no busiest pipe). Hand-built tables
(helpers of tests/test_advice_computation_by_hand.py), values worked out by hand."""

from __future__ import annotations

from ascendprof.model import schemas as S
from test_advice_computation_by_hand import US, kernel, one, run, steps, table


def _pmu(**r):
    return {f"pmu:{c}": v for c, v in r.items()}


def _compile_api(calls=40, total_ns=100 * US):
    """api_statistic with aclopCompileAndExecute only (no opCompile row)."""
    return table(S.API_STATISTIC, [{"api_name": "aclopCompileAndExecute", "count": calls,
                                    "total_ns": total_ns}])


# ------------------------------------------------------------------------------------ AI CPU

def test_aicpu_task_without_an_op_type_is_listed_as_question_mark():
    # One AI CPU task of 30 us (>= 20 us) whose op type is null, in one step of 1000 us:
    # 30 us per step, 3.0 % of the step (warning from 1 %). Its group is named "?".
    k = table(S.KERNELS, [
        kernel("MatMul_1", "MatMul", "AI_CORE", 500 * US),
        kernel("Cpu_1", None, "AI_CPU", 30 * US, input_dtypes="INT64"),
    ])
    f = one(run(KERNELS=k, STEP_TRACE=steps(1, stage_ns=1000 * US)), "computation.aicpu")
    assert [g["op_type"] for g in f["evidence"]["op_types"]] == ["?"]
    assert f["evidence"]["op_types"][0]["names"] == ["Cpu_1"]
    assert f["message"] == ("1 AI CPU task(s) of 1 op type(s) take 30.0 us per step (3.0% of "
                            "the step); most: ? (1 tasks, 30.0 us, longest 30.0 us).")
    assert f["advice"][0] == ("Move these operators to AI Core: ? (AI CPU runs them one at a "
                              "time on the device's CPU).")


# ------------------------------------------------------------------------ online compilation

def test_op_compile_transdata_kernels_per_step_keeps_its_decimal():
    # Two steps; api_statistic: 80 aclopCompileAndExecute calls -> 40 per step (>= 20).
    # Three TransData kernels of 5 us over 2 steps: 3 / 2 = 1.5 kernels and 7.5 us per step.
    k = table(S.KERNELS, [kernel(f"TransData_{i}", "TransData", "AI_CORE", 5 * US,
                                 op_state="static") for i in range(3)])
    f = one(run(API_STATISTIC=_compile_api(calls=80, total_ns=200 * US), KERNELS=k,
                STEP_TRACE=steps(2, stage_ns=1000 * US)), "computation.op_compile")
    assert f["evidence"]["transdata_kernels_per_step"] == 1.5
    assert isinstance(f["evidence"]["transdata_kernels_per_step"], float)
    assert f["evidence"]["transdata_us_per_step"] == 7.5


def test_op_compile_without_transdata_kernels_reports_none():
    # One step of 1000 us; 40 calls (>= 20) of 100 us in all. The kernels are a MatMul and an
    # Add, no TransData: 0 TransData kernels and 0 us per step, and no TransData note.
    k = table(S.KERNELS, [kernel("MatMul_1", "MatMul", "AI_CORE", 10 * US, op_state="static"),
                          kernel("Add_1", "Add", "AI_VECTOR_CORE", 10 * US, op_state="static")])
    f = one(run(API_STATISTIC=_compile_api(), KERNELS=k, STEP_TRACE=steps(1, stage_ns=1000 * US)),
            "computation.op_compile")
    assert f["evidence"]["transdata_kernels_per_step"] == 0.0
    assert f["evidence"]["transdata_us_per_step"] == 0.0
    assert f["message"] == (
        "40 operator call(s) per step take the online-compiled aclop path "
        "(aclopCompileAndExecute: compile or reuse, then launch), 100 us of host time per "
        "step (10.0% of the step), of which opCompile 0 us.")


def test_op_compile_advice_read_in_full():
    # 40 calls in one step (>= 20): fired; its two advice sentences as the report prints them.
    f = one(run(API_STATISTIC=_compile_api(), STEP_TRACE=steps(1, stage_ns=1000 * US)),
            "computation.op_compile")
    assert f["advice"] == [
        "Turn off online compilation (binary kernels instead): at the start of the script "
        "`torch_npu.npu.set_compile_mode(jit_compile=False)` and "
        "`torch_npu.npu.config.allow_internal_format = False`.",
        "If input shapes change from step to step, pad or bucket them to a few fixed shapes; "
        "set HOST_CACHE_CAPACITY (e.g. 20) to cache the executors of recurring shapes."]


# ------------------------------------------------------------------------- PMU pipe ratios

def test_pipe_bound_under_used_tasks_of_exactly_twenty_us_are_reported():
    # A cube op with mac 0.4 (< 0.8, no other pipe): under-used; 4 tasks of exactly 20 us,
    # mean 20 us (the floor is "20 us or more"): 80 us of the 400 us Computing = 20 % (>= 10 %).
    k = table(S.KERNELS, [kernel("MatMul_u", "MatMul", "AI_CORE", 20 * US, input_shapes="4",
                                 **_pmu(aic_mac_ratio=0.4)) for _ in range(4)])
    f = one(run(KERNELS=k, STEP_TRACE=steps(1, stage_ns=1000 * US, computing_ns=400 * US)),
            "computation.pipe_bound", "computation.pipe_bound:under")
    assert f["evidence"]["pct_of_computing"] == 20.0
    (op,) = f["evidence"]["operators"]
    assert (op["name"], op["mean_task_us"], op["count"]) == ("MatMul_u", 20.0, 4)


def test_pipe_bound_op_with_only_a_scalar_ratio_has_full_headroom():
    # A vector op whose only PMU ratio is the scalar one, 0.5: vec, mte2, mte3 read 0, the
    # busiest pipe is scalar 0.50 (< 0.8) -> under-used, bound "max scalar 0.50". Headroom
    # counts data and compute pipes only, and none has a value: busiest 0 -> 1 - 0 / 0.8 = 1.
    # 4 tasks of 50 us = 200 us, 20 % of the 1000 us Computing; gain 200 x 1 = 200 us, 20 % of
    # the 1000 us step -> critical.
    k = table(S.KERNELS, [kernel("Vec_s", "Mul", "AI_VECTOR_CORE", 50 * US, input_shapes="4",
                                 **_pmu(aiv_scalar_ratio=0.5)) for _ in range(4)])
    f = one(run(KERNELS=k, STEP_TRACE=steps(1, stage_ns=1000 * US, computing_ns=1000 * US)),
            "computation.pipe_bound", "computation.pipe_bound:under")
    (op,) = f["evidence"]["operators"]
    assert (op["bound"], op["headroom"]) == ("max scalar 0.50", 1.0)
    assert f["impact_us_per_step"] == 200.0 and f["share_of_step_pct"] == 20.0
    assert f["severity"] == "critical"
