"""Computation advice (analyze/advice/computation.py), the seed-39 sample's survivors: a clock
sample taken exactly at a kernel's end, a slow kernel without a name, a cube operator whose
busiest pipe is MTE2, the memory-bound finding's message in full, the ten-operator list, and no
numpy warning for a group whose tasks carry no value of a ratio. Hand-built tables (helpers of
tests/test_advice_computation_by_hand.py), values worked out by hand."""

from __future__ import annotations

import warnings

from ascendprof.model import schemas as S
from test_advice_computation_by_hand import US, _freq, kernel, one, run, steps, table


def _pmu(**r):
    return {f"pmu:{c}": v for c, v in r.items()}


def test_aicore_freq_sample_taken_exactly_at_a_kernel_end_does_not_count_for_it():
    # Samples: 1800 MHz at 0, 1000 MHz at 10 us, 1800 MHz at 100 us (reference 1800, floor 1710).
    # K_before [0, 10) us: it ends exactly when the 1000 MHz sample is taken; that sample is not
    # taken before its end -> only the 1800 MHz one counts -> not slow.
    # K_after [10, 20) us: the 1000 MHz sample is in force from its start -> slow.
    # Slow: K_after's 10 us of 1000 us Computing = 1.0 % (>= 1 %): fired, K_after alone.
    freq = _freq([(0, 1800.0), (10 * US, 1000.0), (100 * US, 1800.0)])
    k = table(S.KERNELS, [kernel("K_before", "MatMul", "AI_CORE", 10 * US, start_ns=0),
                          kernel("K_after", "MatMul", "AI_CORE", 10 * US, start_ns=10 * US)])
    f = one(run(AICORE_FREQ=freq, KERNELS=k, STEP_TRACE=steps(1, computing_ns=1000 * US)),
            "computation.aicore_freq")
    assert [o["name"] for o in f["evidence"]["operators"]] == ["K_after"]
    assert f["message"].startswith("1 kernel(s), 1.0% of Computing")


def test_aicore_freq_slow_kernel_without_a_name_is_listed_as_question_mark():
    # One sample of 1000 MHz at 0 and one of 1800 MHz at 500 us (reference 1800).
    # A nameless AI Core kernel [0, 20) us runs at 1000 MHz: slow, 20 us of 1000 us = 2.0 %.
    # It is listed under "?" (its 20 us, lowest 1000 MHz), not dropped from the operators.
    freq = _freq([(0, 1000.0), (500 * US, 1800.0)])
    k = table(S.KERNELS, [kernel(None, "MatMul", "AI_CORE", 20 * US, start_ns=0)])
    f = one(run(AICORE_FREQ=freq, KERNELS=k, STEP_TRACE=steps(1, computing_ns=1000 * US)),
            "computation.aicore_freq")
    assert f["evidence"]["operators"] == [
        {"name": "?", "count": 1, "us_per_step": 20.0, "min_mhz": 1000.0, "mean_mhz": 1000.0}]


def test_pipe_bound_cube_op_whose_busiest_pipe_is_mte2_is_named_so():
    # A cube op: mac 0.3 (< 0.8), mte2 0.6 (< 0.95), fixpipe 0.1: no pipe at 0.8 -> under-used,
    # busiest mte2 0.60. 4 tasks of 50 us (>= 20 us) = 200 us, 20 % of the 1000 us Computing.
    # headroom 1 - 0.6 / 0.8 = 0.25; gain 200 x 0.25 = 50 us.
    k = table(S.KERNELS, [kernel("MatMul_u", "MatMul", "AI_CORE", 50 * US, input_shapes="4",
                                 **_pmu(aic_mac_ratio=0.3, aic_mte2_ratio=0.6,
                                        aic_fixpipe_ratio=0.1))
                          for _ in range(4)])
    f = one(run(KERNELS=k, STEP_TRACE=steps(1, computing_ns=1000 * US)),
            "computation.pipe_bound", "computation.pipe_bound:under")
    (op,) = f["evidence"]["operators"]
    assert op["bound"] == "max mte2 0.60"
    assert op["headroom"] == 0.25
    assert f["message"] == (
        "20.0% of Computing (200 us per step) is in 1 operator(s) using no data or compute pipe "
        "at 0.8 (or bound by the scalar pipe) while running 20 us or more per task; largest: "
        "MatMul_u (max mte2 0.60, 200 us per step); up to 50 us per step if their busiest pipe "
        "reached 0.8.")


def test_pipe_bound_memory_message_read_in_full():
    # A vector op bound by its loads (mte2 0.8 >= 0.7): 20 tasks of 10 us = 200 us, 20 % of the
    # 1000 us Computing (>= 10 %): the memory class fires, its message read in full.
    k = table(S.KERNELS, [kernel("Copy_mem", "Copy", "AI_VECTOR_CORE", 10 * US, input_shapes="8",
                                 **_pmu(aiv_vec_ratio=0.05, aiv_mte2_ratio=0.8))
                          for _ in range(20)])
    f = one(run(KERNELS=k, STEP_TRACE=steps(1, computing_ns=1000 * US)),
            "computation.pipe_bound", "computation.pipe_bound:memory")
    assert f["message"] == (
        "20.0% of Computing (200 us per step) is in 1 operator(s) limited by data movement "
        "(MTE2 loads from HBM / MTE3 stores); largest: Copy_mem (mte2, 200 us per step).")


def test_pipe_bound_lists_the_ten_largest_of_eleven_memory_bound_operators():
    # 11 memory-bound vector ops (mte2 0.9), Copy_0 .. Copy_10, Copy_i one task of (10 + i) us:
    # 10 + 11 + ... + 20 = 165 us of the 1000 us Computing = 16.5 % (>= 10 %): fired, 11
    # operators counted in the message, the ten largest listed (Copy_10 .. Copy_1), not Copy_0.
    k = table(S.KERNELS, [kernel(f"Copy_{i}", "Copy", "AI_VECTOR_CORE", (10 + i) * US,
                                 input_shapes="8", **_pmu(aiv_mte2_ratio=0.9))
                          for i in range(11)])
    f = one(run(KERNELS=k, STEP_TRACE=steps(1, computing_ns=1000 * US)),
            "computation.pipe_bound", "computation.pipe_bound:memory")
    assert f["message"].startswith("16.5% of Computing (165 us per step) is in 11 operator(s)")
    assert [o["name"] for o in f["evidence"]["operators"]] == [
        f"Copy_{i}" for i in range(10, 0, -1)]


def test_pipe_bound_group_without_a_ratio_value_raises_no_numpy_warning():
    # Two vector ops: Copy_mem carries mte2 0.8 (memory-bound, 200 us of 1000 us = 20 %),
    # Add_none has the mte2 column but no value in it: its weighted mean is 0 / 0, which the
    # code turns into "no value" (it is left out) without printing a RuntimeWarning to the user.
    k = table(S.KERNELS, [kernel("Copy_mem", "Copy", "AI_VECTOR_CORE", 200 * US,
                                 input_shapes="8", **_pmu(aiv_mte2_ratio=0.8)),
                          kernel("Add_none", "Add", "AI_VECTOR_CORE", 10 * US,
                                 input_shapes="8", **_pmu(aiv_mte2_ratio=None))])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        res = run(KERNELS=k, STEP_TRACE=steps(1, computing_ns=1000 * US))
    f = one(res, "computation.pipe_bound", "computation.pipe_bound:memory")
    assert [o["name"] for o in f["evidence"]["operators"]] == ["Copy_mem"]
