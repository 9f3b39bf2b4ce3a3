"""Rules applied to two observation tables: per rule and scope key the median of each side's
(rank, step) values, the change, and a verdict (pass, fail, skip) -> :data:`CHECK_COLUMNS`."""

from __future__ import annotations

import pandas as pd

from ascendprof.compare.gate.rules import (BANDWIDTH, LINK_BANDWIDTH, OP_TIME, STEP_METRIC_NAMES,
                                           Rule, metric_unit)
from ascendprof.model.ranks import rank_ranges

#: Columns of the check table :func:`evaluate` returns (one row per rule and scope key).
CHECK_COLUMNS = ["rule", "metric", "scope", "key", "unit", "baseline", "current", "change",
                 "change_pct", "limit_pct", "floor", "verdict", "baseline_n", "baseline_min",
                 "baseline_max", "current_n", "current_min", "current_max", "note",
                 "baseline_mean", "current_mean"]
#: The statistic of each side's (rank, step) values that a rule judges (shared with diff).
STATISTIC = "median"
#: Scope key of the one row a rule gets when one side lacks its metric altogether.
NO_KEY = "-"
#: Where each kind of metric comes from, for the reason a rule is skipped.
_SOURCES = {
    "step": "the step breakdown (step_trace_time.csv, cluster_step_trace_time.csv, analysis.db "
            "or a profiling directory)",
    OP_TIME: "op times (kernel_details.csv, op_statistic.csv, ascendprof's op_statistics.csv or "
             "a profiling directory)",
    "comm": "communication data (communication.json / analysis.db in a profiling directory, or "
            "a cluster_communication.json beside the CSVs)",
    "link": "the links of communication_matrix.json in a profiling directory, or a "
            "cluster_communication_matrix.json beside the CSVs",
}

PASS, FAIL, SKIP = "pass", "fail", "skip"


def _observed(rule: Rule) -> str:
    """The observation metric ``rule`` reads: a link's bandwidth is observed per link."""
    return LINK_BANDWIDTH if rule.metric == BANDWIDTH and rule.scope == "link" else rule.metric


def _scope_values(obs: pd.DataFrame, rule: Rule, ranks=None) -> pd.DataFrame:
    """Per scope key: the list of per-(rank, step) values of ``rule.metric`` (display unit).

    Values are first summed within (rank, step, scope key) — bandwidth as Σ size / Σ time.
    ``ranks``: when given, scopes other than ``rank`` use only these ranks (the ones both inputs
    have). Returns columns ``key, values``."""
    o = obs[obs["metric"] == _observed(rule)]
    if ranks is not None and rule.scope != "rank":
        o = o[o["rank"].isin(ranks)]
    if not len(o):
        return pd.DataFrame(columns=["key", "values"])
    o = o.copy()
    if rule.scope == "cluster":
        o["skey"] = "cluster"
    elif rule.scope == "rank":
        o["skey"] = "rank " + o["rank"].astype(str)
    else:  # op_type / group / link
        o["skey"] = o["key"].astype(str)
    if rule.metric == BANDWIDTH:
        o["skey"] = o["skey"] + " " + o["transport"]
        g = o.groupby(["skey", "rank", "step"])[["value", "denom"]].sum().reset_index()
        g["v"] = (g["value"] / (g["denom"] / 1e6)).where(g["denom"] > 0)
        g = g[g["v"].notna()]
    else:
        g = o.groupby(["skey", "rank", "step"])["value"].sum().reset_index()
        g["v"] = g["value"] / 1e6  # ns -> ms
    return g.groupby("skey")["v"].agg(list).reset_index().rename(
        columns={"skey": "key", "v": "values"})


def _median(vals: list[float]) -> float:
    s = sorted(vals)
    n = len(s)
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2


def evaluate(baseline: pd.DataFrame, current: pd.DataFrame, rules: list[Rule],
             ranks=None, said: list[str] | None = None) -> pd.DataFrame:
    """Apply ``rules`` to two observation tables (:func:`observations`) -> :data:`CHECK_COLUMNS`.

    For each rule and each scope key: ``baseline`` / ``current`` are the medians of the
    per-(rank, step) values (ms, or GB/s), ``*_n/min/max`` the spread; ``change`` = current −
    baseline, ``change_pct`` relative to baseline (null when baseline is 0). Verdict ``fail``
    when the change goes the rule's way beyond ``limit_pct`` and its size exceeds ``floor``;
    ``skip`` when the key exists on one side only (an op type new or gone counts as 0 there and
    is judged); a rule whose metric one side (or both) lacks altogether yields one ``skip`` row
    with key :data:`NO_KEY` and the reason in ``note``, so every rule is listed. ``ranks``:
    the ranks both inputs have, when their rank sets differ: the cluster, op type and group
    scopes then compare these ranks only (per-rank checks of the others are skipped).
    Likewise a rank with values of a metric on one side only (its file unreadable or absent
    there) is left out of that metric's cluster, op type, group and link checks, so the
    other ranks' spread is not taken for a change; ``said`` (a list) gets a sentence naming
    the metrics and the ranks left out.
    """
    out = []
    left_out: dict[tuple, list] = {}  # (phrase, ranks compared) -> metrics, in rule order
    for rule in rules:
        use = ranks
        if rule.scope != "rank":
            use, only = _metric_ranks(baseline, current, rule, ranks)
            if only:
                metrics = left_out.setdefault((only, len(use)), [])
                if rule.metric not in metrics:
                    metrics.append(rule.metric)
        vb, vc = _scope_values(baseline, rule, use), _scope_values(current, rule, use)
        if not len(vb) or not len(vc):  # e.g. committed CSVs without bandwidth or op types
            out.append(_skip_rule(rule, not len(vb), not len(vc)))
            continue
        m = vb.merge(vc, on="key", how="outer", suffixes=("_b", "_c"))
        for _, r in m.iterrows():
            lb = r["values_b"] if isinstance(r["values_b"], list) else []
            lc = r["values_c"] if isinstance(r["values_c"], list) else []
            out.append(_check(rule, str(r["key"]), lb, lc))
    if said is not None:
        for (only, n), metrics in left_out.items():
            said.append(f"{', '.join(metrics)}: {only}; compared on the {n} rank(s) with "
                        f"values on both sides")
    df = pd.DataFrame(out, columns=CHECK_COLUMNS)
    if len(df):
        order = df["verdict"].map({FAIL: 0, PASS: 1, SKIP: 2})
        df = df.assign(_o=order).sort_values(["_o"], kind="stable").drop(columns="_o")
    return df.reset_index(drop=True)


def _metric_ranks(baseline: pd.DataFrame, current: pd.DataFrame, rule: Rule, ranks):
    """(the ranks a non-rank scope of ``rule`` compares, a phrase naming the ranks left out
    because only one side has values of the metric, "" when none): ``ranks`` (None: all)
    narrowed to those with values on both sides, when both sides have some."""
    metric = _observed(rule)
    rb = set(baseline.loc[baseline["metric"] == metric, "rank"].tolist())
    rc = set(current.loc[current["metric"] == metric, "rank"].tolist())
    if ranks is not None:
        rb, rc = rb & set(ranks), rc & set(ranks)
    both = rb & rc
    if not both or rb == rc:
        return ranks, ""
    parts = []
    for side, only in (("the baseline", rb - rc), ("the current input", rc - rb)):
        if only:
            parts.append(f"rank(s) {rank_ranges(sorted(only), len(only))} only in {side}")
    return sorted(both), ", ".join(parts)


def _skip_rule(rule: Rule, no_b: bool, no_c: bool) -> list:
    kind = ("step" if rule.metric in STEP_METRIC_NAMES else OP_TIME if rule.metric == OP_TIME
            else "link" if rule.scope == "link" else "comm")
    who = "neither input has" if no_b and no_c else "the baseline has no" if no_b else \
        "the current input has no"
    what = {"step": f"{rule.metric} values", OP_TIME: "op times",
            "comm": f"{rule.metric} per communication group",
            "link": "src -> dst links"}[kind]
    note = f"skipped: {who} {what}; it comes from {_SOURCES[kind]}"
    return [rule.name, rule.metric, rule.scope, NO_KEY, metric_unit(rule.metric), None, None,
            None, None, rule.limit_pct, rule.floor, SKIP, 0, None, None, 0, None, None, note,
            None, None]


def _mean(vals: list[float]):
    return sum(vals) / len(vals) if vals else None


def _check(rule: Rule, key: str, lb: list, lc: list) -> list:
    unit = metric_unit(rule.metric)
    note = ""
    if (not lb or not lc) and rule.scope != "op_type":
        side = "baseline" if not lb else "current"
        b = _median(lb) if lb else None
        c = _median(lc) if lc else None
        return [rule.name, rule.metric, rule.scope, key, unit, b, c, None, None, rule.limit_pct,
                rule.floor, SKIP, len(lb), min(lb, default=None), max(lb, default=None), len(lc),
                min(lc, default=None), max(lc, default=None), f"skipped: not in {side}",
                _mean(lb), _mean(lc)]
    if not lb:
        note = "new in current"
    elif not lc:
        note = "gone in current"
    b = _median(lb) if lb else 0.0
    c = _median(lc) if lc else 0.0
    change = c - b
    pct = change / b * 100.0 if b else None
    if rule.limit_pct >= 0:
        beyond = change > 0 and (pct is None or pct > rule.limit_pct)
    else:
        beyond = change < 0 and (pct is None or pct < rule.limit_pct)
    verdict = FAIL if beyond and abs(change) > rule.floor else PASS
    if beyond and verdict == PASS:
        note = (note + "; " if note else "") + "below noise floor"
    return [rule.name, rule.metric, rule.scope, key, unit, b, c, change, pct, rule.limit_pct,
            rule.floor, verdict, len(lb), min(lb, default=None), max(lb, default=None), len(lc),
            min(lc, default=None), max(lc, default=None), note, _mean(lb), _mean(lc)]
