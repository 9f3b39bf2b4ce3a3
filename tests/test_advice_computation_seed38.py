"""Computation advice (analyze/advice/computation.py), what users read in advice.json: the AI
CPU replacement advice, the Block Dim and pipe-bound advice in full, the under-used class's
share of the step, the busiest vector pipe named, the headroom to four decimals, and the AI
Core clock window when a sample falls exactly on an operator's start. Hand-built tables
(helpers of tests/test_advice_computation_by_hand.py), values worked out by hand."""

from __future__ import annotations

from ascendprof.analyze.advice import computation as C
from ascendprof.model import schemas as S
from test_advice_computation_by_hand import US, _freq, kernel, one, run, steps, table


def test_aicore_freq_sample_exactly_at_a_kernel_start_is_the_one_in_force():
    # Samples: 1000 MHz at 0, 1800 MHz at 100 us and 300 us (reference 1800, floor 1710).
    # K_low [0, 10) us: the sample at 0 (1000 MHz) is in force -> slow.
    # K_high [100, 110) us starts exactly at the 1800 MHz sample: that sample is in force from
    # its own timestamp, the 1000 MHz one before it no longer -> not slow.
    # Slow: K_low's 10 us of 1000 us Computing = 1.0 % (>= 1 %): fired, K_low alone.
    freq = _freq([(0, 1000.0), (100 * US, 1800.0), (300 * US, 1800.0)])
    k = table(S.KERNELS, [kernel("K_low", "MatMul", "AI_CORE", 10 * US, start_ns=0),
                          kernel("K_high", "MatMul", "AI_CORE", 10 * US, start_ns=100 * US)])
    f = one(run(AICORE_FREQ=freq, KERNELS=k, STEP_TRACE=steps(1, computing_ns=1000 * US)),
            "computation.aicore_freq")
    assert [o["name"] for o in f["evidence"]["operators"]] == ["K_low"]
    assert f["evidence"]["pct_of_computing"] == 1.0
    assert f["message"].startswith("1 kernel(s), 1.0% of Computing")


def test_aicpu_index_gets_its_ai_core_replacement_advice():
    # One AI CPU Index task of 30 us (>= 20 us), float32 input (an AI Core type): the advice is
    # the "move" line, then Index's replacement from aicpu_rules.yaml, nothing about dtypes.
    k = table(S.KERNELS, [kernel("Index_1", "Index", "AI_CPU", 30 * US, input_dtypes="FLOAT")])
    f = one(run(KERNELS=k, STEP_TRACE=steps(1, stage_ns=1000 * US)), "computation.aicpu")
    assert f["advice"] == [
        "Move these operators to AI Core: Index (AI CPU runs them one at a time on the device's "
        "CPU).",
        "Index: replace tensor indexing (x[idx]) with torch.index_select / gather, which run on "
        "AI Core."]


def test_block_dim_advice_read_in_full():
    # 24 AI Cores inferred (the largest cube Block Dim, MatMul_full's 24); MatMul_half runs 12
    # blocks on 24 cores for 20 us: 10 us idle of 100 us Computing = 10 % (>= 5 %): fired.
    k = table(S.KERNELS, [kernel("MatMul_full", "MatMul", "AI_CORE", 10 * US, block_num=24),
                          kernel("MatMul_half", "MatMul", "AI_CORE", 20 * US, block_num=12)])
    f = one(run(KERNELS=k, STEP_TRACE=steps(1, stage_ns=200 * US, computing_ns=100 * US)),
            "computation.block_dim")
    assert f["evidence"]["idle_core_us_per_step"] == 10.0
    assert f["advice"] == [
        "For your own kernels (Ascend C) set the block dim to the core count or a multiple "
        "(GetCoreNumAic/GetCoreNumAiv) and tile the data to fill them.",
        "For built-in operators, small shapes give few blocks: batch or fuse the small "
        "operations, or pick shapes whose split fills the cores."]


def _pmu(**r):
    return {f"pmu:{c}": v for c, v in r.items()}


def test_pipe_bound_memory_advice_read_in_full():
    # A vector op bound by its loads (mte2 0.8 >= 0.7): 20 tasks of 10 us = 200 us, 20 % of the
    # 1000 us Computing (>= 10 %): the memory class fires.
    k = table(S.KERNELS, [kernel("Copy_mem", "Copy", "AI_VECTOR_CORE", 10 * US, input_shapes="8",
                                 **_pmu(aiv_vec_ratio=0.05, aiv_mte2_ratio=0.8))
                          for _ in range(20)])
    f = one(run(KERNELS=k, STEP_TRACE=steps(1, computing_ns=1000 * US)),
            "computation.pipe_bound", "computation.pipe_bound:memory")
    assert f["advice"] == [
        "Fuse chains of element-wise operators so intermediate tensors stay on chip (fused "
        "kernels such as npu_rms_norm, npu_swiglu, fused optimizers, or graph mode).",
        "Move less data: bf16/fp16 instead of fp32 where accuracy allows; avoid format "
        "conversions (TransData) between operators."]


def test_pipe_bound_under_used_vector_op_share_of_step_headroom_and_advice():
    # A vector op whose busiest pipe is vec 0.300008 (< 0.8; mte2 0.1): under-used, "max vec
    # 0.30". 4 tasks of 50 us (>= 20 us each) = 200 us, 20 % of the 1000 us Computing.
    # headroom 1 - 0.300008 / 0.8 = 1 - 0.37501 = 0.62499 -> 0.625 to four decimals.
    # Gain 200 us x 0.625 = 125 us per step, of the 2000 us step (Stage) 6.25 %.
    k = table(S.KERNELS, [kernel("Add_under", "Add", "AI_VECTOR_CORE", 50 * US,
                                 input_shapes="4", **_pmu(aiv_vec_ratio=0.300008,
                                                          aiv_mte2_ratio=0.1))
                          for _ in range(4)])
    f = one(run(KERNELS=k, STEP_TRACE=steps(1, stage_ns=2000 * US, computing_ns=1000 * US)),
            "computation.pipe_bound", "computation.pipe_bound:under")
    (op,) = f["evidence"]["operators"]
    assert op["bound"] == "max vec 0.30"
    assert op["headroom"] == 0.625
    assert f["impact_us_per_step"] == 125.0 and f["share_of_step_pct"] == 6.25
    assert f["advice"][1] == (
        "Check Block Dim (computation.block_dim) and the scalar ratio: a high scalar share means "
        "tiling/control overhead; larger tiles or fused operators help.")


def test_classify_under_used_vector_op_names_vec_when_it_is_the_busiest():
    # vec 0.5, mte2 0.1, mte3 0.1: none >= 0.7, sum 0.7 < 0.9; busiest vec 0.5 < 0.8
    assert C.classify("AI_VECTOR_CORE", {"aiv_vec_ratio": 0.5, "aiv_mte2_ratio": 0.1,
                                         "aiv_mte3_ratio": 0.1}) == ("under", "max vec 0.50")


def test_aicore_freq_samples_without_a_value_are_skipped_saying_so():
    # The AI Core frequency table has a row, but its clock value is missing: no sample can be
    # judged. The rule says so (skipped), instead of failing on an empty array.
    freq = table(S.AICORE_FREQ, [{"ts_ns": 0, "freq_mhz": None}])
    k = table(S.KERNELS, [kernel("K1", "MatMul", "AI_CORE", 10 * US)])
    res = run(AICORE_FREQ=freq, KERNELS=k, STEP_TRACE=steps(1, computing_ns=1000 * US))
    assert res["status"]["computation.aicore_freq"] == [
        "skipped", "no AI Core frequency sample with a time and a value"]
