"""schedule.conjectured_gc's severity at its warning threshold (seed 38): conjectured-GC gaps
holding from 1 % of the mean step are a warning, below 1 % info (the same 1 %/10 % bounds as
schedule.gc). Hand-built tables through :func:`ascendprof.analyze.advice.rank_advice`, with the
by-hand tests' builders; the shares are worked out in the comments."""

from __future__ import annotations

from ascendprof.model import schemas as S
from tests.test_advice_schedule_by_hand import host, kernels, one, run, step_trace


def cgc_one_gap(gap_ms: float, stage_ms: float) -> dict:
    # kernels [0, 10) and [10 + gap, 20 + gap) ms of step 1: one idle gap of gap_ms at 10 ms;
    # one AscendCL call [0, 1) ms before it (no API call inside the gap); one step of stage_ms
    return {S.KERNELS: kernels([(1, 0, 10), (1, 10 + gap_ms, 20 + gap_ms)]),
            S.STEP_TRACE: step_trace([(1, stage_ms, 0)]),
            S.HOST_EVENTS: host([("cann", "AscendCL@a", 0, 1)])}


def test_conjectured_gc_warning_from_one_percent_of_the_step():
    # 200 ms of a 20 s step: 100 * 200 / 20000 = 1.00 % -> warning (the threshold itself)
    f = one(run(cgc_one_gap(200, 20000)), "schedule.conjectured_gc")
    assert f["share_of_step_pct"] == 1.0 and f["impact_us_per_step"] == 200000.0
    assert f["severity"] == "warning"
    # 290 ms of a 20 s step: 1.45 % -> warning
    f = one(run(cgc_one_gap(290, 20000)), "schedule.conjectured_gc")
    assert f["share_of_step_pct"] == 1.45 and f["severity"] == "warning"
    # 390 ms of a 20 s step: 1.95 % -> warning
    f = one(run(cgc_one_gap(390, 20000)), "schedule.conjectured_gc")
    assert f["share_of_step_pct"] == 1.95 and f["severity"] == "warning"


def test_conjectured_gc_info_below_one_percent_of_the_step():
    # 200 ms of a 25 s step: 0.8 % -> info
    f = one(run(cgc_one_gap(200, 25000)), "schedule.conjectured_gc")
    assert f["share_of_step_pct"] == 0.8 and f["severity"] == "info"
