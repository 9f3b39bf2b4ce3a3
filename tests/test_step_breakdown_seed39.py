"""analyze.step_breakdown: the step_trace_check cases the seed-39 mutation sample showed
untested -- a lone reported step paired with the recomputation's one unnamed window, more than
1000 unchecked reported steps beside an unnamed recomputed window (no unnamed reported row),
and more than 1000 reported steps of a rank that could not be recomputed at all.

Values are built in ns and read back in us (/ 1000); every expectation is worked out by hand
in the comments."""

from __future__ import annotations

import pyarrow as pa

from ascendprof.model import schemas as S
from ascendprof.analyze.step_breakdown import check_table


def st(rank, rows) -> pa.Table:
    """rows: step -> {STEP_TRACE *_ns column: ns}; missing metrics null."""
    return S.conform(S.STEP_TRACE, pa.Table.from_pylist([
        {"rank": rank, "step": step, **vals} for step, vals in rows.items()]))


def test_a_lone_reported_step_pairs_with_a_lone_unnamed_recomputed_window():
    """The profiler reports step 7 only (Computing 10 us); the recomputation found no step
    windows and made one window over all data, without a step (Computing 10.05 us). A lone
    unnamed window stands for the lone reported step: 9 rows, all Step 7; Computing 10 us
    against 10.05 us, Deviation (10.05 - 10) / 10 * 100 = 0.5 % (below the 1 % note limit)."""
    rep = st(0, {7: {"computing_ns": 10_000}})
    rec = st(0, {None: {"computing_ns": 10_050}})
    df = check_table({0: (rep, rec, "m")})
    assert len(df) == 9
    assert df["Step"].tolist() == [7] * 9
    comp = df[df["Metric"] == "Computing"].iloc[0]
    assert (comp["Reported(us)"], comp["Recomputed(us)"]) == (10.0, 10.05)
    assert abs(comp["Deviation(%)"] - 0.5) < 1e-9
    assert comp["Note"] == ""


def test_many_unchecked_steps_beside_an_unnamed_window_and_no_unnamed_reported_row():
    """1002 reported steps 0..1001 (Computing 1 ns each), no row without a step; the
    recomputation has one unnamed window (Computing 5 us). With more than one reported step
    the unnamed window pairs with none of them: the 1002 steps are not in the recomputed data
    (> 1000: one summary row per metric, steps 0..1001), and the unnamed window is a step of
    its own, not reported by the profiler: 9 rows with Step empty, Reported empty, Computing
    recomputed 5 us. 18 rows in all."""
    rep = st(0, {s: {"computing_ns": 1} for s in range(1002)})
    rec = st(0, {None: {"computing_ns": 5_000}})
    df = check_table({0: (rep, rec, "m")})
    assert len(df) == 18
    assert df.attrs["summarised"] == {0: 1002}
    summary = df[df["Note"].str.startswith("1002 steps")]
    assert len(summary) == 9
    assert summary["Note"].iloc[0] == ("1002 steps (0..1001): step not found in the recomputed "
                                       "data; summarised in this row (more than 1000 such "
                                       "steps)")
    rest = df[~df["Note"].str.startswith("1002 steps")]
    assert len(rest) == 9 and rest["Step"].isna().all() and rest["Reported(us)"].isna().all()
    comp = rest[rest["Metric"] == "Computing"].iloc[0]
    assert comp["Recomputed(us)"] == 5.0
    assert comp["Note"] == "not reported by the profiler"


def test_many_steps_of_a_rank_not_recomputed_are_summarised_with_the_reason():
    """1001 reported steps 1..1001 and no recomputation (the reason given as the method):
    the summary note says why they are unchecked -- the method's reason, not 'step not found
    in the recomputed data' (there is no recomputed data to look in). 9 summary rows only."""
    rep = st(0, {s: {"computing_ns": 1} for s in range(1, 1002)})
    why = "no kernel_details (KERNELS) for this rank"
    df = check_table({0: (rep, None, why)})
    assert len(df) == 9
    assert df.attrs["summarised"] == {0: 1001}
    assert df["Note"].tolist() == [f"1001 steps (1..1001): {why}; summarised in this row "
                                   f"(more than 1000 such steps)"] * 9
