"""Computation advice (analyze/advice/computation.py), the seed-40 sample's survivors: the
op_compile evidence from api_statistic (no opCompile row, a dynamic share that is not whole,
three TransData kernels) and its message without a step time; the pipe_bound skip reason, its
Computing taken from the groups when the step trace reads 0, the critical band of the under-used
class at exactly 10 %, a pct_of_computing that is not whole, a cube op saturating MTE1 and a
vector op at exactly vec+mte2+mte3 = 0.9; Block Dim with a cube Block Dim of 2. Hand-built
tables (helpers of tests/test_advice_computation_by_hand.py), values worked out by hand."""

from __future__ import annotations

from ascendprof.model import schemas as S
from test_advice_computation_by_hand import US, kernel, one, run, steps, table


def _pmu(**r):
    return {f"pmu:{c}": v for c, v in r.items()}


def _compile_api(calls=40, total_ns=100 * US):
    """api_statistic with aclopCompileAndExecute only (no opCompile row)."""
    return table(S.API_STATISTIC, [{"api_name": "aclopCompileAndExecute", "count": calls,
                                    "total_ns": total_ns}])


# ------------------------------------------------------------------------ online compilation

def test_op_compile_evidence_from_api_statistic_without_opcompile_row():
    # One step of 1000 us. api_statistic: 40 aclopCompileAndExecute calls of 100 us in all
    # (>= 20 calls: fired); no opCompile row -> 0 opCompile calls, 0 us.
    # Kernels: three TransData of 5 us, one dynamic and two static: 1 / 3 = 33.33 % -> 33.3;
    # 3 TransData kernels per step, 15 us per step.
    k = table(S.KERNELS, [
        kernel("TransData_1", "TransData", "AI_CORE", 5 * US, op_state="dynamic"),
        kernel("TransData_2", "TransData", "AI_CORE", 5 * US, op_state="static"),
        kernel("TransData_3", "TransData", "AI_CORE", 5 * US, op_state="static"),
    ])
    f = one(run(API_STATISTIC=_compile_api(), KERNELS=k, STEP_TRACE=steps(1, stage_ns=1000 * US)),
            "computation.op_compile")
    assert f["evidence"] == {
        "aclopCompileAndExecute_calls_per_step": 40.0, "aclopCompileAndExecute_us_per_step": 100.0,
        "opCompile_calls_per_step": 0.0, "opCompile_us_per_step": 0.0,
        "dynamic_op_state_pct": 33.3, "n_steps": 1,
        "transdata_kernels_per_step": 3.0, "transdata_us_per_step": 15.0}
    assert isinstance(f["evidence"]["dynamic_op_state_pct"], float)


def test_op_compile_message_without_a_step_time_gives_no_share():
    # api_statistic alone: no step trace, no kernels -> no step time, no share of the step.
    # 40 calls (>= 20) of 100 us in all, opCompile 0 us; severity from no share: info.
    res = run(API_STATISTIC=_compile_api())
    f = one(res, "computation.op_compile")
    assert f["message"] == (
        "40 operator call(s) per step take the online-compiled aclop path "
        "(aclopCompileAndExecute: compile or reuse, then launch), 100 us of host time per "
        "step, of which opCompile 0 us.")
    assert f["severity"] == "info"


# ------------------------------------------------------------------------- PMU pipe ratios

def test_pipe_bound_skipped_when_no_compute_task_has_a_ratio_value():
    # The kernels carry a PMU ratio column, but its only value is on an AI CPU task; the AI
    # Core task has none: no group to judge -> skipped with the reason.
    k = table(S.KERNELS, [
        kernel("Cpu_1", "NonZero", "AI_CPU", 50 * US, **_pmu(aiv_vec_ratio=0.5)),
        kernel("MatMul_1", "MatMul", "AI_CORE", 50 * US, **_pmu(aiv_vec_ratio=None)),
    ])
    st = run(KERNELS=k, STEP_TRACE=steps(1, computing_ns=1000 * US))["status"]
    assert st["computation.pipe_bound"] == ["skipped", "no AI Core / vector task with PMU ratios"]


def test_pipe_bound_computing_from_the_groups_when_the_step_trace_reads_zero():
    # The step trace's Computing is 0 -> Computing = the groups' time per step:
    # Copy_mem 200 us (vector, mte2 0.8: memory) + MatMul_ok 800 us (mac 0.9: compute) =
    # 1000 us; memory 200 / 1000 = 20 % (>= 10 %): fired. (Both rows name both ratio columns:
    # pa.Table.from_pylist takes its columns from the first row.)
    k = table(S.KERNELS, [
        kernel("Copy_mem", "Copy", "AI_VECTOR_CORE", 200 * US, input_shapes="8",
               **_pmu(aiv_mte2_ratio=0.8, aic_mac_ratio=None)),
        kernel("MatMul_ok", "MatMul", "AI_CORE", 800 * US, input_shapes="16",
               **_pmu(aiv_mte2_ratio=None, aic_mac_ratio=0.9)),
    ])
    res = run(KERNELS=k, STEP_TRACE=steps(1, stage_ns=2000 * US, computing_ns=0))
    f = one(res, "computation.pipe_bound", "computation.pipe_bound:memory")
    assert f["evidence"]["pct_of_computing"] == 20.0
    assert [o["name"] for o in f["evidence"]["operators"]] == ["Copy_mem"]


def test_pipe_bound_under_used_gain_of_exactly_ten_pct_of_the_step_is_critical():
    # A cube op with mac 0.4 (< 0.8, no other pipe): under-used, 4 tasks of 50 us = 200 us,
    # 20 % of the 1000 us Computing. headroom 1 - 0.4 / 0.8 = 0.5; gain 200 x 0.5 = 100 us,
    # 10 % of the 1000 us step: critical from 10 %.
    k = table(S.KERNELS, [kernel("MatMul_u", "MatMul", "AI_CORE", 50 * US, input_shapes="4",
                                 **_pmu(aic_mac_ratio=0.4)) for _ in range(4)])
    res = run(KERNELS=k, STEP_TRACE=steps(1, stage_ns=1000 * US, computing_ns=1000 * US))
    f = one(res, "computation.pipe_bound", "computation.pipe_bound:under")
    assert f["impact_us_per_step"] == 100.0 and f["share_of_step_pct"] == 10.0
    assert f["severity"] == "critical"


def test_pipe_bound_pct_of_computing_keeps_its_decimals():
    # One memory-bound vector task (mte2 0.9) of 125 us of the 1000 us Computing: 12.5 %.
    k = table(S.KERNELS, [kernel("Copy_mem", "Copy", "AI_VECTOR_CORE", 125 * US,
                                 input_shapes="8", **_pmu(aiv_mte2_ratio=0.9))])
    f = one(run(KERNELS=k, STEP_TRACE=steps(1, computing_ns=1000 * US)),
            "computation.pipe_bound", "computation.pipe_bound:memory")
    assert f["evidence"]["pct_of_computing"] == 12.5


def test_pipe_bound_cube_op_saturating_mte1_is_memory_bound():
    # A cube op: mac 0.2 (< 0.8), mte2 0.3 (< 0.95), fixpipe 0.1, scalar 0.1, mte1 0.85: the
    # busiest pipe is MTE1 at >= 0.8, a data-movement pipe -> memory, bound "mte1".
    # 4 tasks of 50 us = 200 us, 20 % of the 1000 us Computing (>= 10 %).
    k = table(S.KERNELS, [kernel("Conv_m1", "Conv2D", "AI_CORE", 50 * US, input_shapes="1",
                                 **_pmu(aic_mac_ratio=0.2, aic_mte2_ratio=0.3,
                                        aic_fixpipe_ratio=0.1, aic_scalar_ratio=0.1,
                                        aic_mte1_ratio=0.85))
                          for _ in range(4)])
    f = one(run(KERNELS=k, STEP_TRACE=steps(1, computing_ns=1000 * US)),
            "computation.pipe_bound", "computation.pipe_bound:memory")
    (op,) = f["evidence"]["operators"]
    assert (op["name"], op["class"], op["bound"]) == ("Conv_m1", "memory", "mte1")


def test_pipe_bound_vector_op_at_exactly_the_total_threshold_is_bound():
    # A vector op: vec 0.1, mte2 0.3, mte3 0.5 (none at 0.7); 0.1 + 0.3 + 0.5 = 0.9 exactly
    # (these doubles add up to 0.9 exactly): bound from 0.9, by data movement as
    # mte2 + mte3 = 0.8 > vec 0.1 -> memory, bound "vec+mte2+mte3". One task of 200 us, 20 %
    # of the 1000 us Computing.
    k = table(S.KERNELS, [kernel("Vec_edge", "Mul", "AI_VECTOR_CORE", 200 * US,
                                 input_shapes="1",
                                 **_pmu(aiv_vec_ratio=0.1, aiv_mte2_ratio=0.3,
                                        aiv_mte3_ratio=0.5))])
    res = run(KERNELS=k, STEP_TRACE=steps(1, computing_ns=1000 * US))
    f = one(res, "computation.pipe_bound", "computation.pipe_bound:memory")
    (op,) = f["evidence"]["operators"]
    assert (op["class"], op["bound"]) == ("memory", "vec+mte2+mte3")
    assert not [x for x in res["findings"] if x["key"] == "computation.pipe_bound:under"]


# -------------------------------------------------------------------------------- Block Dim

def test_block_dim_a_cube_block_dim_of_two_gives_two_ai_cores():
    # The largest cube Block Dim is 2: 2 AI Cores, 4 vector cores. MatMul (Block Dim 2 on 2
    # cores) leaves none idle; Add (Block Dim 3 on 4 vector cores) leaves 1/4 of its 8 us idle:
    # 2 us of the 20 us Computing = 10 % (>= 5 %).
    k = table(S.KERNELS, [
        kernel("MatMul_1", "MatMul", "AI_CORE", 10 * US, block_num=2),
        kernel("Add_1", "Add", "AI_VECTOR_CORE", 8 * US, block_num=3),
    ])
    f = one(run(KERNELS=k, STEP_TRACE=steps(1, computing_ns=20 * US)), "computation.block_dim")
    ev = f["evidence"]
    assert ev["ai_core_count_inferred"] == 2 and ev["vector_core_count_inferred"] == 4
    assert ev["idle_core_time_pct_of_computing"] == 10.0
    assert [(o["name"], o["cores"], o["idle_core_us_per_step"]) for o in ev["operators"]] == [
        ("Add_1", 4, 2.0)]
