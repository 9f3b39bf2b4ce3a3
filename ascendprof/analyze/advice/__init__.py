"""Advice: what to change, each item with the evidence that supports it.

One module per area (computation, schedule, communication, memory, environment) declares its
rules (:class:`~ascendprof.analyze.advice.base.Rule`: the tables read, thresholds and their
sources, the check). Rank rules run in each rank's worker (:func:`rank_advice`, on the rank's
tables; only the findings travel back), cluster rules once on all ranks' metadata and rank
findings (:func:`cluster_advice`), which also merges a rule's findings over ranks.

Output (the advice.json document, see docs/advice.md)::

    {"format": "ascendprof-advice/1", "mode": "summary"|"all",
     "items": [finding, ...],          # sorted: severity, then time per step at stake
     "rules": [{id, area, title, scope, needs, threshold, source,
                "fired_ranks": [...], "silent_ranks": [...],
                "skipped": [{"reason", "ranks"}]}]}

Nothing here reads files.
"""

from __future__ import annotations

from ascendprof.analyze.advice import communication, computation, environment, memory, schedule
from ascendprof.analyze.advice.base import (HOST_TABLES, SEVERITY_RANK, Context, Rule, Skip,
                                            env_of, missing_needs)
from ascendprof.model.ranks import rank_ranges

FORMAT = "ascendprof-advice/1"

#: Every rule, in report order within a severity: rank rules of each area, then cluster rules.
RULES: list[Rule] = (computation.RULES + schedule.RULES + communication.RULES + memory.RULES
                     + environment.RULES)
RANK_RULES = [r for r in RULES if r.scope == "rank"]
CLUSTER_RULES = [r for r in RULES if r.scope == "cluster"]


def rank_advice(tables: dict, meta: dict, rank: int, mode: str = "summary",
                spilled: dict | None = None) -> dict:
    """Run every rank rule on one rank's tables. Returns ``{"findings": [...], "status":
    {rule id: ["fired"|"silent"|"skipped", reason]}}`` (small: it travels back from the
    worker). A rule that fails unexpectedly is reported as skipped with the error, never
    raised: advice must not cost the analysis. ``spilled``: {table name:
    sysio.bigtables.SpilledTable} of tables that ``tables`` holds only in part (the slim
    columns of a large kernels table); the rules read their other columns from the file, one
    at a time (base.Context.column), and get the same findings as from the whole table."""
    ctx = Context(rank=rank, tables=tables, meta=meta or {}, mode=mode, spilled=spilled or {})
    findings, status = [], {}
    for rule in RANK_RULES:
        why = missing_needs(rule, ctx.has)
        if why and any(a in HOST_TABLES for alts in rule.needs for a in alts) \
                and (meta or {}).get("advice_not_read"):
            why += f" ({meta['advice_not_read']})"
        got = _check(rule, ctx, why, status, "; please report this")
        ctx.fired.update(f["key"] for f in got)
        findings.extend(got)
    return {"findings": findings, "status": status}


def _check(rule: Rule, ctx, why: str, status: dict, failed: str = "") -> list[dict]:
    """``rule``'s findings on ``ctx`` (a list), its status in ``status``: skipped for ``why``
    (missing needs), a Skip or an unexpected error (never raised: advice must not cost the
    analysis; ``failed`` is added to the reason), else fired or silent."""
    if why:
        status[rule.id] = ["skipped", why]
        return []
    try:
        got = rule.check(ctx)
    except Skip as e:
        status[rule.id] = ["skipped", str(e)]
        return []
    except Exception as e:  # noqa: BLE001 - one rule's defect loses that rule only
        status[rule.id] = ["skipped", f"rule failed ({type(e).__name__}: {e}){failed}"]
        return []
    got = [] if got is None else got if isinstance(got, list) else [got]
    status[rule.id] = ["fired" if got else "silent", ""]
    return got


def _merge(findings: list[dict]) -> list[dict]:
    """One item per (rule, key) over the ranks: the message, evidence and advice of the rank
    with the most time at stake (then the most severe), all ranks listed, ``per_rank`` giving
    each rank's severity, time per step and share."""
    groups: dict = {}
    for f in findings:
        groups.setdefault(f["key"], []).append(f)
    out = []
    for key, fs in groups.items():
        worst = max(fs, key=lambda f: (-SEVERITY_RANK[f["severity"]],
                                       f["impact_us_per_step"] or 0.0))
        ranks = sorted({r for f in fs for r in f["ranks"]})
        item = dict(worst)
        item["ranks"] = ranks
        item["severity"] = min((f["severity"] for f in fs), key=SEVERITY_RANK.get)
        if len(fs) > 1:
            item["worst_rank"] = worst["ranks"][0]
            item["message"] = (f"ranks {rank_ranges(ranks, len(ranks))} (worst rank "
                               f"{worst['ranks'][0]}): " + worst["message"])
            item["per_rank"] = {str(f["ranks"][0]): {
                "severity": f["severity"], "impact_us_per_step": f["impact_us_per_step"],
                "share_of_step_pct": f["share_of_step_pct"]} for f in fs}
        elif worst["scope"] == "rank":
            item["message"] = f"rank {ranks[0]}: " + worst["message"]
        out.append(item)
    return out


def sort_items(items: list[dict]) -> list[dict]:
    """Severity first, then time per step at stake (largest first), then rule order."""
    order = {r.id: i for i, r in enumerate(RULES)}
    return sorted(items, key=lambda f: (SEVERITY_RANK[f["severity"]],
                                        -(f["impact_us_per_step"] or 0.0),
                                        order.get(f["id"], 999), f["key"]))


def cluster_advice(per_rank: dict[int, dict], metadata: dict[int, dict],
                   mode: str = "summary") -> dict:
    """The advice.json document from the ranks' :func:`rank_advice` results (``per_rank``:
    rank -> result; ranks without one, e.g. unreadable ones, are simply absent) and their
    metadata (rank -> {"profiler_metadata": ...} as RankData.meta holds it)."""
    findings = [f for res in per_rank.values() for f in res.get("findings", [])]
    fired = {r: {f["key"] for f in res.get("findings", [])} for r, res in per_rank.items()}
    env = {r: e for r, m in metadata.items() if (e := env_of(m))}
    cctx = environment.ClusterContext(env=env, fired=fired)
    cluster_status = {}
    for rule in CLUSTER_RULES:
        why = missing_needs(rule, lambda a: a != "meta:env" or bool(env))
        findings.extend(_check(rule, cctx, why, cluster_status))
    items = sort_items(_merge(findings))
    return {"format": FORMAT, "mode": mode, "items": items,
            "rules": _rule_table(per_rank, cluster_status)}


def _rule_table(per_rank: dict, cluster_status: dict) -> list[dict]:
    out = []
    for rule in RULES:
        d = rule.describe()
        if rule.scope == "cluster":
            st, why = cluster_status.get(rule.id, ["skipped", "not run"])
            d.update({"status": st, "fired_ranks": [], "silent_ranks": [],
                      "skipped": [{"reason": why, "ranks": []}] if st == "skipped" else []})
            out.append(d)
            continue
        fired, silent, skipped = [], [], {}
        for r, res in sorted(per_rank.items()):
            st, why = res.get("status", {}).get(rule.id, ["skipped", "not run"])
            if st == "fired":
                fired.append(r)
            elif st == "silent":
                silent.append(r)
            else:
                skipped.setdefault(why, []).append(r)
        d.update({"status": "fired" if fired else "silent" if silent else "skipped",
                  "fired_ranks": fired, "silent_ranks": silent,
                  "skipped": [{"reason": k, "ranks": v} for k, v in skipped.items()]})
        out.append(d)
    return out


#: advice.csv columns, one row per item.
CSV_COLUMNS = ["Severity", "Area", "Rule", "Title", "Ranks", "Impact(us/step)",
               "Share of Step(%)", "Message", "Advice", "Evidence", "Threshold", "Source"]


def csv_rows(doc: dict) -> list[list]:
    """advice.csv rows (:data:`CSV_COLUMNS`) of an advice.json document; evidence and threshold
    as compact JSON, advice lines joined by ' | '."""
    import orjson

    rows = []
    for f in doc.get("items", []):
        rows.append([f["severity"], f["area"], f["id"], f["title"],
                     " ".join(map(str, f["ranks"])),
                     "" if f["impact_us_per_step"] is None else f["impact_us_per_step"],
                     "" if f["share_of_step_pct"] is None else f["share_of_step_pct"],
                     f["message"], " | ".join(f["advice"]),
                     orjson.dumps(f["evidence"]).decode(), orjson.dumps(f["threshold"]).decode(),
                     f["source"]])
    return rows


__all__ = ["RULES", "RANK_RULES", "CLUSTER_RULES", "FORMAT", "rank_advice",
           "cluster_advice", "sort_items", "csv_rows", "CSV_COLUMNS"]
