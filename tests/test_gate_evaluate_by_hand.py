"""The gate's evaluation (:func:`ascendprof.compare.gate.evaluate.evaluate`) on small hand-built
observation tables, each expected value worked out by hand in the comments.

Observation rows are ``metric, rank, step, key, transport, value, denom`` (observe.OBS_COLUMNS):
times in ns (the checks show ms), bandwidth as Σ MB in ``value`` over Σ ns in ``denom``
(GB/s = MB / ms).
"""

from __future__ import annotations

import pandas as pd

from ascendprof.compare.gate.evaluate import evaluate
from ascendprof.compare.gate.observe import OBS_COLUMNS
from ascendprof.compare.gate.rules import BANDWIDTH, OP_TIME, Rule

NAN = float("nan")


def _obs(rows) -> pd.DataFrame:
    """rows: (metric, rank, step, key, transport, value, denom)."""
    return pd.DataFrame([list(r) for r in rows], columns=OBS_COLUMNS)


def _stage(rank, step, ms):
    return ("Stage", rank, str(step), "", "", ms * 1e6, NAN)


def _op(rank, step, op_type, ms):
    return (OP_TIME, rank, str(step), op_type, "", ms * 1e6, NAN)


def _row(checks: pd.DataFrame, key: str) -> dict:
    sel = checks[checks["key"] == key]
    assert len(sel) == 1, checks[["rule", "key", "verdict", "note"]]
    return sel.iloc[0].to_dict()


# --- a key on one side only --------------------------------------------------------------

def test_a_rank_on_one_side_only_is_skipped_and_the_note_names_the_side_it_lacks():
    # Stage@rank: rank 0 on both sides (10 -> 10 ms: pass); rank 1 only in the baseline,
    # rank 2 only in the current input. Ranks are not op types: a rank on one side only is
    # not judged as 0 on the other, it is skipped, and the note says which side lacks it.
    base = _obs([_stage(0, 1, 10), _stage(1, 1, 10)])
    cur = _obs([_stage(0, 1, 10), _stage(2, 1, 30)])
    checks = evaluate(base, cur, [Rule("Stage", "rank", 5.0, 0.1)])
    assert len(checks) == 3
    r1 = _row(checks, "rank 1")
    assert r1["verdict"] == "skip"
    assert r1["note"] == "skipped: not in current"
    assert r1["baseline"] == 10.0 and pd.isna(r1["current"])
    r2 = _row(checks, "rank 2")
    assert r2["verdict"] == "skip"
    assert r2["note"] == "skipped: not in baseline"
    assert pd.isna(r2["baseline"]) and r2["current"] == 30.0
    assert _row(checks, "rank 0")["verdict"] == "pass"


def test_an_op_type_new_in_current_counts_as_zero_in_the_baseline_and_is_judged():
    # op_time@op_type +20 %, floor 1 ms. MatMul 4 ms per step on both sides (pass).
    # Softmax only in the current input, 3 ms in step 1: baseline 0.0 ms, change +3 ms,
    # change_pct null (no relative change from 0), so it is beyond any limit and 3 > 1 ms:
    # fail, note "new in current", the baseline spread empty (n 0, min / max null).
    base = _obs([_op(0, 1, "MatMul", 4)])
    cur = _obs([_op(0, 1, "MatMul", 4), _op(0, 1, "Softmax", 3)])
    checks = evaluate(base, cur, [Rule(OP_TIME, "op_type", 20.0, 1.0)])
    s = _row(checks, "Softmax")
    assert s["verdict"] == "fail"
    assert s["note"] == "new in current"
    assert s["baseline"] == 0.0
    assert s["current"] == 3.0
    assert s["change"] == 3.0
    assert pd.isna(s["change_pct"])
    assert s["baseline_n"] == 0
    assert pd.isna(s["baseline_min"]) and pd.isna(s["baseline_max"])
    assert s["current_n"] == 1 and s["current_min"] == 3.0 and s["current_max"] == 3.0
    # the failing check is listed first
    assert checks.iloc[0]["key"] == "Softmax"
    assert _row(checks, "MatMul")["verdict"] == "pass"


def test_an_op_type_gone_in_current_counts_as_zero_there():
    # Softmax 3 ms in the baseline only: current 0.0, change -3 ms, -100 %. A drop in time
    # is not a regression for a +20 % rule: pass, note "gone in current".
    base = _obs([_op(0, 1, "MatMul", 4), _op(0, 1, "Softmax", 3)])
    cur = _obs([_op(0, 1, "MatMul", 4)])
    checks = evaluate(base, cur, [Rule(OP_TIME, "op_type", 20.0, 1.0)])
    s = _row(checks, "Softmax")
    assert s["verdict"] == "pass"
    assert s["note"] == "gone in current"
    assert s["baseline"] == 3.0 and s["current"] == 0.0
    assert s["change"] == -3.0 and s["change_pct"] == -100.0


# --- limits and floors at their edges ----------------------------------------------------

def test_a_change_of_exactly_the_limit_passes():
    # Stage@cluster +25 %: 4 ms -> 5 ms is +1 ms = 1/4 = +25.0 % exactly (binary-exact
    # numbers). The rule allows up to +25 %: "beyond" means strictly more -> pass, no note.
    base = _obs([_stage(0, 1, 4)])
    cur = _obs([_stage(0, 1, 5)])
    checks = evaluate(base, cur, [Rule("Stage", "cluster", 25.0, 0.0)])
    c = _row(checks, "cluster")
    assert c["change_pct"] == 25.0
    assert c["verdict"] == "pass"
    assert c["note"] == ""
    # one step further (4 -> 5.5 ms, +37.5 %) fails
    cur2 = _obs([_stage(0, 1, 5.5)])
    assert _row(evaluate(base, cur2, [Rule("Stage", "cluster", 25.0, 0.0)]),
                "cluster")["verdict"] == "fail"


def test_a_change_of_exactly_the_floor_passes_below_noise_floor():
    # Stage@cluster +5 %, floor 1 ms: 4 -> 5 ms is +25 % (beyond +5 %) but its size, 1 ms,
    # is not above the 1 ms floor -> pass, note exactly "below noise floor".
    base = _obs([_stage(0, 1, 4)])
    cur = _obs([_stage(0, 1, 5)])
    c = _row(evaluate(base, cur, [Rule("Stage", "cluster", 5.0, 1.0)]), "cluster")
    assert c["change"] == 1.0
    assert c["verdict"] == "pass"
    assert c["note"] == "below noise floor"


def test_a_rise_in_bandwidth_from_zero_is_not_a_drop():
    # bandwidth@group −10 %: the baseline's group moved 0 MB in 1 ms (0 GB/s), the current
    # one 0.5 MB in 1 ms (0.5 GB/s). change +0.5 GB/s, change_pct null (baseline 0). A rise
    # is never a regression for a negative limit: pass (even though the change is < 1).
    bw = lambda mb: (BANDWIDTH, 0, "1", "tp", "HCCS", mb, 1e6)  # noqa: E731
    checks = evaluate(_obs([bw(0.0)]), _obs([bw(0.5)]), [Rule(BANDWIDTH, "group", -10.0, 0.1)])
    c = _row(checks, "tp HCCS")
    assert c["baseline"] == 0.0 and c["current"] == 0.5
    assert pd.isna(c["change_pct"])
    assert c["verdict"] == "pass"


# --- a metric missing on a side ----------------------------------------------------------

def test_a_metric_neither_input_has_is_one_skip_row_saying_neither():
    # Both inputs only have Stage; a Computing rule gets one skip row, key "-", whose note
    # says neither input has Computing values.
    base = _obs([_stage(0, 1, 4)])
    cur = _obs([_stage(0, 1, 4)])
    checks = evaluate(base, cur, [Rule("Computing", "cluster", 5.0, 0.1)])
    assert len(checks) == 1
    r = checks.iloc[0]
    assert r["key"] == "-" and r["verdict"] == "skip"
    assert r["note"].startswith("skipped: neither input has Computing values; it comes from ")
    # only the current input lacking it says so
    checks = evaluate(_obs([("Computing", 0, "1", "", "", 1e6, NAN)]), cur,
                      [Rule("Computing", "cluster", 5.0, 0.1)])
    assert checks.iloc[0]["note"].startswith("skipped: the current input has no Computing values")


# --- ranks both inputs have --------------------------------------------------------------

def test_with_common_ranks_the_cluster_compares_those_ranks_on_both_sides():
    # ranks=[0]: the current input also has rank 1 at 20 ms, which the baseline lacks. The
    # cluster check compares rank 0 only: 10 ms -> 10 ms, change 0, pass, one value per side.
    # (Counting rank 1 on the current side would give median(10, 20) = 15 ms, +50 %: fail.)
    base = _obs([_stage(0, 1, 10)])
    cur = _obs([_stage(0, 1, 10), _stage(1, 1, 20)])
    c = _row(evaluate(base, cur, [Rule("Stage", "cluster", 5.0, 0.1)], ranks=[0]), "cluster")
    assert c["current"] == 10.0 and c["current_n"] == 1
    assert c["change"] == 0.0
    assert c["verdict"] == "pass"


def test_with_common_ranks_a_rank_rule_still_lists_the_rank_one_side_lacks_as_skipped():
    # ranks=[0, 1] (both inputs have them); the baseline also has rank 2. The per-rank rule is
    # not narrowed to the common ranks: rank 2 gets its own row, skipped, "not in current".
    base = _obs([_stage(0, 1, 10), _stage(1, 1, 10), _stage(2, 1, 10)])
    cur = _obs([_stage(0, 1, 10), _stage(1, 1, 10)])
    checks = evaluate(base, cur, [Rule("Stage", "rank", 5.0, 0.1)], ranks=[0, 1])
    assert sorted(checks["key"]) == ["rank 0", "rank 1", "rank 2"]
    r2 = _row(checks, "rank 2")
    assert r2["verdict"] == "skip" and r2["note"] == "skipped: not in current"


# --- order of the checks -----------------------------------------------------------------

def test_checks_are_fails_then_passes_then_skips_each_in_rule_and_key_order():
    # 24 ranks (keys "rank 0".."rank 23", listed in text order: rank 0, rank 1, rank 10, ...).
    # Every third rank is slower in the current input (10 -> 20 ms: fail), rank 23 is only in
    # the baseline (skip), the rest unchanged (pass). Fails come first, then passes, then the
    # skip; within each verdict the keys keep their order (a stable sort by verdict only).
    base = _obs([_stage(r, 1, 10) for r in range(24)])
    cur = _obs([_stage(r, 1, 20 if r % 3 == 0 else 10) for r in range(23)])
    checks = evaluate(base, cur, [Rule("Stage", "rank", 5.0, 0.1)])
    keys = sorted(f"rank {r}" for r in range(24))  # text order, as the keys are grouped
    fails = [k for k in keys if int(k.split()[1]) % 3 == 0 and k != "rank 23"]
    passes = [k for k in keys if int(k.split()[1]) % 3 != 0 and k != "rank 23"]
    assert checks["key"].tolist() == fails + passes + ["rank 23"]
    assert checks["verdict"].tolist() == ["fail"] * 8 + ["pass"] * 15 + ["skip"]
