"""analyze.step_breakdown: the cases the seed-40 mutation sample showed untested -- step
windows whose rows name no origin (the description falls back to the table's name), and the
per-rank verdict of no check table at all.

Every expectation is worked out by hand in the comments."""

from __future__ import annotations

from ascendprof.model import schemas as S
from ascendprof.analyze.step_breakdown import rank_checks, recompute


def test_step_windows_without_an_origin_are_described_as_from_steps():
    """kernel_details: MatMul AI_CORE [100,200) and Add AI_VECTOR_CORE [300,350), both Step Id 4;
    STEPS holds one window of rank 0, step 4 [0,1000), whose origin is null -- and a second
    window of step 5 [1000,2000) with an empty origin. The STEPS windows come first; with no
    origin named on any of them the description says 'step windows from STEPS'.
    Step 4: C = 100 + 50 = 150, no communication: CNO 0, M 0, Free = hull [100,350) minus C =
    [200,300) = 100, Stage 350 - 100 = 250. Step 5 holds nothing: all 0."""
    k = S.from_lists(S.KERNELS, {
        "rank": [0, 0], "step": [4, 4], "name": ["MatMul", "Add"],
        "accelerator_core": ["AI_CORE", "AI_VECTOR_CORE"], "start_ns": [100, 300],
        "dur_ns": [100, 50]})
    steps = S.from_lists(S.STEPS, {"rank": [0, 0], "step": [4, 5], "start_ns": [0, 1000],
                                   "end_ns": [1000, 2000], "origin": [None, ""]})
    bd, method = recompute({S.KERNELS: k, S.STEPS: steps}, 0)
    assert method.endswith("; step windows from STEPS"), method
    rows = {r["step"]: r for r in bd.to_pylist()}
    assert (rows[4]["computing_ns"], rows[4]["free_ns"], rows[4]["stage_ns"]) == (150, 100, 250)
    assert rows[5]["computing_ns"] == 0


def test_no_check_table_gives_no_verdicts():
    """rank_checks on no check table (None) or an empty one: no rank, no verdict -- an empty
    list, not an error."""
    import pandas as pd

    assert rank_checks(None) == []
    assert rank_checks(pd.DataFrame(columns=["Rank", "Step", "Metric", "Reported(us)",
                                             "Recomputed(us)", "Deviation(%)", "Method",
                                             "Note"])) == []
