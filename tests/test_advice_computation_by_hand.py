"""The computation advice rules on small hand-built tables, run as a rank's worker runs them
(analyze.advice.rank_advice): every number of a finding worked out by hand in the comments.
The real exports and edited copies of them are in test_advice_computation.py."""

from __future__ import annotations

import pyarrow as pa
import pytest

from ascendprof.analyze import advice
from ascendprof.model import schemas as S

US = 1000  # ns


def table(name, rows):
    """Table ``name`` with its schema's columns (those not given: null; "pmu:" columns kept)."""
    return S.conform(name, pa.Table.from_pylist(rows))


def steps(n=1, stage_ns=None, computing_ns=None):
    """STEP_TRACE of ``n`` steps, each with this Stage and Computing."""
    return table(S.STEP_TRACE, [{"step": i + 1, "stage_ns": stage_ns,
                                 "computing_ns": computing_ns} for i in range(n)])


def kernel(name, op_type, core, dur_ns, start_ns=0, **extra):
    return {"name": name, "op_type": op_type, "accelerator_core": core, "start_ns": start_ns,
            "dur_ns": dur_ns, **extra}


def run(**tables):
    return advice.rank_advice({getattr(S, k): v for k, v in tables.items()}, {}, 0)


def one(res, rule_id, key=None):
    st = res["status"][rule_id]
    assert st[0] == "fired", st
    (f,) = [f for f in res["findings"] if f["id"] == rule_id and (key is None or f["key"] == key)]
    return f


# ------------------------------------------------------------------------------------ AI CPU

def test_aicpu_names_the_op_type_with_the_most_time():
    k = table(S.KERNELS, [
        kernel("MatMul_1", "MatMul", "AI_CORE", 500 * US),
        kernel("IndexPut_1", "IndexPut", "AI_CPU", 100 * US, input_dtypes="INT64"),
        kernel("NonZero_1", "NonZero", "AI_CPU", 30 * US, input_dtypes="INT64"),
        kernel("NonZero_2", "NonZero", "AI_CPU", 30 * US, input_dtypes="INT64"),
    ])
    f = one(run(KERNELS=k, STEP_TRACE=steps(2, stage_ns=1000 * US)), "computation.aicpu")
    # two steps: 160 us of AI CPU is 80 us per step, 8 % of the 1000 us step -> warning;
    # IndexPut 100 / 2 = 50 us per step, NonZero 60 / 2 = 30
    assert f["evidence"]["n_steps"] == 2 and f["evidence"]["aicpu_us_per_step"] == 80.0
    assert [g["op_type"] for g in f["evidence"]["op_types"]] == ["IndexPut", "NonZero"]
    assert f["severity"] == "warning" and f["share_of_step_pct"] == 8.0
    assert f["message"] == ("3 AI CPU task(s) of 2 op type(s) take 80.0 us per step (8.0% of "
                            "the step); most: IndexPut (1 tasks, 50.0 us, longest 100.0 us).")


# ------------------------------------------------------------------------ online compilation

def test_op_compile_counts_cann_calls_dynamic_ops_and_transdata():
    cann = "AscendCL@aclopCompileAndExecute"
    host = table(S.HOST_EVENTS,
                 # 45 calls of 10 us on the CANN track
                 [{"source": "cann", "name": cann, "start_ns": i * 100 * US, "dur_ns": 10 * US}
                  for i in range(45)]
                 # a framework event of that name is not a CANN call
                 + [{"source": "framework", "name": cann, "start_ns": 0, "dur_ns": 1000 * US}]
                 # 3 opCompile calls of 20 us
                 + [{"source": "cann", "name": "AscendCL@opCompile", "start_ns": i * 100 * US,
                     "dur_ns": 20 * US} for i in range(3)])
    k = table(S.KERNELS, [
        kernel("MatMul_1", "MatMul", "AI_CORE", 1 * US, op_state="static"),
        kernel("Add_1", "Add", "AI_VECTOR_CORE", 1 * US, op_state="static"),
        kernel("TransData_1", "TransData", "AI_CORE", 5 * US, op_state="static"),
        kernel("TransData_2", "TransData", "AI_CORE", 5 * US, op_state="dynamic"),
    ])
    f = one(run(HOST_EVENTS=host, KERNELS=k, STEP_TRACE=steps(2, stage_ns=1000 * US)),
            "computation.op_compile")
    # per step of 2: 22.5 calls (>= 20) of 225 us (22.5 % of the 1000 us step -> critical);
    # opCompile 1.5 calls, 30 us; 1 of 4 kernels dynamic (25 %); 2 TransData kernels of 5 us:
    # 1 per step, 5 us per step
    assert f["evidence"] == {
        "aclopCompileAndExecute_calls_per_step": 22.5, "aclopCompileAndExecute_us_per_step": 225.0,
        "opCompile_calls_per_step": 1.5, "opCompile_us_per_step": 30.0,
        "dynamic_op_state_pct": 25.0, "n_steps": 2,
        "transdata_kernels_per_step": 1.0, "transdata_us_per_step": 5.0}
    assert f["severity"] == "critical" and f["share_of_step_pct"] == 22.5


# -------------------------------------------------------------------------------- Block Dim

def test_block_dim_by_hand():
    k = table(S.KERNELS, [
        # cores inferred from the largest cube Block Dim, a MIX_AIC task's 24: 24 AI Cores,
        # 48 vector cores (MIX_AIC tasks themselves are not judged)
        kernel("MatMul_a", "MatMul", "AI_CORE", 12 * US, block_num=20),  # idle 4/24 of 12 us
        kernel("MatMul_b", "MatMul", "AI_CORE", 6 * US, block_num=12),   # idle 12/24 of 6 us
        kernel("Mix_1", "FlashAttention", "MIX_AIC", 1 * US, block_num=24),
        kernel("Add_c", "Add", "AI_VECTOR_CORE", 4800, block_num=40),    # idle 8/48 of 4.8 us
        kernel("Add_c", "Add", "AI_VECTOR_CORE", 4800, block_num=40),
        kernel("Add_full", "Add", "AI_VECTOR_CORE", 50 * US, block_num=48),  # no idle core
    ])
    res = run(KERNELS=k, STEP_TRACE=steps(1, stage_ns=200 * US, computing_ns=100 * US))
    f = one(res, "computation.block_dim")
    ev = f["evidence"]
    # idle: 2 + 3 + 0.8 + 0.8 = 6.6 us of 100 us Computing (6.6 % >= 5 %); of the 200 us
    # step 3.3 % -> warning
    assert ev["ai_core_count_inferred"] == 24 and ev["vector_core_count_inferred"] == 48
    assert ev["idle_core_time_pct_of_computing"] == 6.6 and ev["idle_core_us_per_step"] == 6.6
    assert f["severity"] == "warning"
    # operators (name, core), most idle time first
    assert ev["operators"] == [
        {"name": "MatMul_b", "op_type": "MatMul", "accelerator_core": "AI_CORE",
         "block_dim": [12], "cores": 24, "count": 1, "total_us_per_step": 6.0,
         "idle_core_us_per_step": 3.0},
        {"name": "MatMul_a", "op_type": "MatMul", "accelerator_core": "AI_CORE",
         "block_dim": [20], "cores": 24, "count": 1, "total_us_per_step": 12.0,
         "idle_core_us_per_step": 2.0},
        {"name": "Add_c", "op_type": "Add", "accelerator_core": "AI_VECTOR_CORE",
         "block_dim": [40], "cores": 48, "count": 2, "total_us_per_step": 9.6,
         "idle_core_us_per_step": 1.6},
    ]
    assert f["message"] == (
        "4 task(s) of 3 operator(s) use a Block Dim that is not a multiple of the cores (24 AI "
        "Core / 48 vector cores inferred); the idle cores amount to 6.6% of Computing (e.g. "
        "MatMul_b: Block Dim [12] on 24 cores).")
    assert any(a.startswith("For built-in operators, small shapes give few blocks")
               for a in f["advice"])


def test_block_dim_vector_cores_are_the_most_common_block_dim():
    k = table(S.KERNELS, [
        # no cube task: vector cores = the most common Block Dim of 2 or more: 2 (three
        # tasks), not 3 (one)
        *[kernel("Vec_two", "Add", "AI_VECTOR_CORE", 1 * US, block_num=2) for _ in range(3)],
        kernel("Vec_three", "Mul", "AI_VECTOR_CORE", 4 * US, block_num=3),  # 4 slots: idle 1/4
        kernel("Vec_one", "Cast", "AI_VECTOR_CORE", 10 * US, block_num=1),  # 2 slots: idle 1/2
    ])
    f = one(run(KERNELS=k, STEP_TRACE=steps(1, computing_ns=50 * US)), "computation.block_dim")
    ev = f["evidence"]
    # idle 5 + 1 = 6 us of 50 us Computing: 12 %
    assert ev["ai_core_count_inferred"] is None and ev["vector_core_count_inferred"] == 2
    assert ev["idle_core_time_pct_of_computing"] == 12.0
    assert [(o["name"], o["idle_core_us_per_step"]) for o in ev["operators"]] == [
        ("Vec_one", 5.0), ("Vec_three", 1.0)]


def test_block_dim_skipped_when_no_core_count_can_be_inferred():
    # Block Dim 1 everywhere: no core count (it needs a Block Dim of 2 or more)
    k = table(S.KERNELS, [kernel("MatMul_1", "MatMul", "AI_CORE", 10 * US, block_num=1)])
    st = run(KERNELS=k, STEP_TRACE=steps(1, computing_ns=50 * US))["status"]
    assert st["computation.block_dim"] == ["skipped",
                                           "no AI_CORE / AI_VECTOR_CORE task with a Block Dim"]


# ------------------------------------------------------------------------- PMU pipe ratios

def test_pipe_bound_memory_and_under_used_classes_by_hand():
    def pmu(**r):
        return {f"pmu:{c}": r.get(c) for c in ("aic_mac_ratio", "aic_mte2_ratio",
                                                "aiv_vec_ratio", "aiv_mte2_ratio")}

    k = table(S.KERNELS, [
        # memory-bound (vector MTE2 >= 0.7): 20 tasks of 10 us = 200 us, 20 % of Computing;
        # short tasks do not matter for this class
        *[kernel("Copy_mem", "Copy", "AI_VECTOR_CORE", 10 * US, input_shapes="8,8",
                 **pmu(aiv_vec_ratio=0.05, aiv_mte2_ratio=0.8)) for _ in range(20)],
        # under-used cube op (best pipe mac 0.3 < 0.8), 4 tasks of 50 us: 200 us
        *[kernel("FA_under", "FlashAttentionScoreGrad", "AI_CORE", 50 * US, input_shapes="4,4",
                 **pmu(aic_mac_ratio=0.3, aic_mte2_ratio=0.2)) for _ in range(4)],
        # under-used too, but its tasks last 5 us (< 20 us): launch-bound, not counted
        *[kernel("Tiny_under", "Add", "AI_VECTOR_CORE", 5 * US, input_shapes="2",
                 **pmu(aiv_vec_ratio=0.1, aiv_mte2_ratio=0.1)) for _ in range(30)],
        # compute-bound (mac >= 0.8): healthy, never reported
        kernel("MatMul_ok", "MatMul", "AI_CORE", 100 * US, input_shapes="16,16",
               **pmu(aic_mac_ratio=0.9, aic_mte2_ratio=0.1)),
    ])
    res = run(KERNELS=k, STEP_TRACE=steps(1, stage_ns=2000 * US, computing_ns=1000 * US))
    mem = one(res, "computation.pipe_bound", "computation.pipe_bound:memory")
    assert mem["severity"] == "info" and mem["impact_us_per_step"] == 200.0
    assert mem["evidence"] == {
        "class": "memory", "pct_of_computing": 20.0, "class_us_per_step": 200.0,
        "operators": [{"name": "Copy_mem", "op_type": "Copy", "accelerator_core": "AI_VECTOR_CORE",
                       "input_shapes": "8,8", "count": 20, "class": "memory", "bound": "mte2",
                       "headroom": 0.0,  # its busiest pipe is at 0.8 already
                       "mean_task_us": 10.0,
                       "ratios": {"aiv_vec_ratio": 0.05, "aiv_mte2_ratio": 0.8},
                       "us_per_step": 200.0}]}
    under = one(res, "computation.pipe_bound", "computation.pipe_bound:under")
    # FA_under alone: 200 us (20 %); bringing mac from 0.3 to 0.8 saves 1 - 0.3 / 0.8 = 0.625
    # of it: 125 us, 6.25 % of the 2000 us step -> warning
    assert under["evidence"]["pct_of_computing"] == 20.0
    assert [o["name"] for o in under["evidence"]["operators"]] == ["FA_under"]
    (op,) = under["evidence"]["operators"]
    assert op["op_type"] == "FlashAttentionScoreGrad" and op["bound"] == "max mac 0.30"
    assert op["headroom"] == 0.625 and "ns_per_step" not in op
    assert under["impact_us_per_step"] == 125.0 and under["severity"] == "warning"
    assert under["message"] == (
        "20.0% of Computing (200 us per step) is in 1 operator(s) using no data or compute pipe "
        "at 0.8 (or bound by the scalar pipe) while running 20 us or more per task; largest: "
        "FA_under (max mac 0.30, 200 us per step); up to 125 us per step if their busiest pipe "
        "reached 0.8.")


# --------------------------------------------------------------------------- AI Core clock

def _freq(samples):
    return table(S.AICORE_FREQ, [{"ts_ns": t, "freq_mhz": f} for t, f in samples])


@pytest.mark.parametrize("high,low", [(1800.0, 1000.0), (1.0, 0.5)])
def test_aicore_freq_a_drop_just_before_the_kernel_ends(high, low):
    """The clock drops at 150 us, inside K1 [100 us, 200 us): K1 ran slow. The reference is the
    highest sample, whatever its value (only all-zero samples cannot be judged)."""
    freq = _freq([(0, high), (150 * US, low), (300 * US, high)])
    k = table(S.KERNELS, [kernel("K1", "MatMul", "AI_CORE", 100 * US, start_ns=100 * US),
                          kernel("K2", "MatMul", "AI_CORE", 100 * US, start_ns=400 * US)])
    f = one(run(AICORE_FREQ=freq, KERNELS=k, STEP_TRACE=steps(1, computing_ns=1000 * US)),
            "computation.aicore_freq")
    # K1's 100 us of 1000 us Computing: 10 % -> warning
    assert f["evidence"] == {"reference_mhz": high, "lowest_mhz": low, "samples": 3,
                             "pct_of_computing": 10.0,
                             "operators": [{"name": "K1", "count": 1, "us_per_step": 100.0,
                                            "min_mhz": low, "mean_mhz": round(low, 1)}]}
    assert f["severity"] == "warning"


def test_aicore_freq_lists_ten_operators():
    freq = _freq([(0, 1800.0), (150 * US, 1000.0), (300 * US, 1800.0)])
    # eleven kernels of 10 us, one after the other from 150 us: all at 1000 MHz
    k = table(S.KERNELS, [kernel(f"K{i:02}", "MatMul", "AI_CORE", 10 * US,
                                 start_ns=(150 + 10 * i) * US) for i in range(11)])
    f = one(run(AICORE_FREQ=freq, KERNELS=k, STEP_TRACE=steps(1, computing_ns=1000 * US)),
            "computation.aicore_freq")
    assert f["message"].startswith("11 kernel(s), 11.0% of Computing")
    assert len(f["evidence"]["operators"]) == 10


# ------------------------------------------------------------------ boundaries and tie orders

def test_aicpu_a_task_of_exactly_twenty_us_is_reported():
    """The floor is "shorter than 20 us is not worth moving": a 20 us AI CPU task is reported
    (20 us of a 1000 us step: 2 % -> warning, from 1 %)."""
    k = table(S.KERNELS, [kernel("MatMul_1", "MatMul", "AI_CORE", 500 * US),
                          kernel("Index_1", "Index", "AI_CPU", 20 * US)])
    f = one(run(KERNELS=k, STEP_TRACE=steps(1, stage_ns=1000 * US)), "computation.aicpu")
    assert f["evidence"]["longest_task_us"] == 20.0 and f["severity"] == "warning"


def test_op_compile_advice_text():
    """The two advice sentences of op_compile, as the report shows them."""
    api = table(S.API_STATISTIC, [{"api_name": "aclopCompileAndExecute", "count": 40,
                                   "total_ns": 100 * US}])
    # 40 calls in one step (>= 20)
    f = one(run(API_STATISTIC=api, STEP_TRACE=steps(1, stage_ns=1000 * US)),
            "computation.op_compile")
    assert f["advice"][0].startswith("Turn off online compilation (binary kernels instead)")
    assert f["advice"][1].startswith("If input shapes change from step to step, pad or bucket "
                                     "them to a few fixed shapes")


def test_block_dim_operators_of_equal_idle_time_in_name_order():
    """Add and AddN (one name the start of the other) leave the same idle core time: they are
    listed by name, Add first. Cores: the cube task's Block Dim 24 -> 48 vector cores; each
    vector op: Block Dim 40 of 48 slots, 8/48 of 6 us = 1 us idle."""
    k = table(S.KERNELS, [
        kernel("MatMul_full", "MatMul", "AI_CORE", 10 * US, block_num=24),  # no idle core
        kernel("AddN", "AddN", "AI_VECTOR_CORE", 6 * US, block_num=40),
        kernel("Add", "Add", "AI_VECTOR_CORE", 6 * US, block_num=40),
    ])
    # idle 2 us of 20 us Computing: 10 % (>= 5 %)
    f = one(run(KERNELS=k, STEP_TRACE=steps(1, computing_ns=20 * US)), "computation.block_dim")
    assert [(o["name"], o["idle_core_us_per_step"]) for o in f["evidence"]["operators"]] == [
        ("Add", 1.0), ("AddN", 1.0)]


def _pmu(**r):
    return {f"pmu:{c}": v for c, v in r.items()}


def test_pipe_bound_a_cube_op_saturating_fixpipe_is_memory_bound():
    """A cube op with mac 0.2, mte2 0.3 and fixpipe 0.85 (>= 0.8, a data-movement pipe): memory
    bound by fixpipe. 10 tasks of 30 us = 300 us, 30 % of the 1000 us Computing (>= 10 %)."""
    k = table(S.KERNELS, [
        *[kernel("Conv_fix", "Conv2D", "AI_CORE", 30 * US, input_shapes="1,1",
                 **_pmu(aic_mac_ratio=0.2, aic_mte2_ratio=0.3, aic_fixpipe_ratio=0.85))
          for _ in range(10)],
        kernel("MatMul_ok", "MatMul", "AI_CORE", 700 * US, input_shapes="2,2",
               **_pmu(aic_mac_ratio=0.9, aic_mte2_ratio=0.1, aic_fixpipe_ratio=0.1))])
    res = run(KERNELS=k, STEP_TRACE=steps(1, computing_ns=1000 * US))
    mem = one(res, "computation.pipe_bound", "computation.pipe_bound:memory")
    (op,) = mem["evidence"]["operators"]
    assert (op["name"], op["class"], op["bound"]) == ("Conv_fix", "memory", "fixpipe")
    assert mem["evidence"]["pct_of_computing"] == 30.0


def test_pipe_bound_under_used_vector_ops_name_their_busiest_pipe():
    """Vector ops under every threshold (no pipe at 0.7, vec+mte2+mte3 < 0.9): under-used, the
    bound naming the busiest pipe: MTE2 0.5 for Load_v, MTE3 0.6 for Store_v. Each 4 tasks of
    50 us = 200 us, together 40 % of the 1000 us Computing."""
    k = table(S.KERNELS, [
        *[kernel("Load_v", "Cast", "AI_VECTOR_CORE", 50 * US, input_shapes="1",
                 **_pmu(aiv_vec_ratio=0.1, aiv_mte2_ratio=0.5, aiv_mte3_ratio=0.1,
                        aiv_scalar_ratio=0.2)) for _ in range(4)],
        *[kernel("Store_v", "Cast", "AI_VECTOR_CORE", 50 * US, input_shapes="2",
                 **_pmu(aiv_vec_ratio=0.1, aiv_mte2_ratio=0.1, aiv_mte3_ratio=0.6,
                        aiv_scalar_ratio=0.2)) for _ in range(4)]])
    res = run(KERNELS=k, STEP_TRACE=steps(1, computing_ns=1000 * US))
    under = one(res, "computation.pipe_bound", "computation.pipe_bound:under")
    got = {o["name"]: o["bound"] for o in under["evidence"]["operators"]}
    assert got == {"Load_v": "max mte2 0.50", "Store_v": "max mte3 0.60"}
