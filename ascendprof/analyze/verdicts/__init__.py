"""Verdicts: what limits the job, where, and what to look at next - one causal story.

Triage follows the MindSpore / MindStudio Insight guide (seed 000 "定界、分析问题"): compute,
schedule or communication; shares of the step rank the problems, absolute times per step
confirm them (../shared/design/causal-verdicts.md). Rules, thresholds and their sources, and
what each cannot see: docs/verdicts.md.

- :mod:`.facts`: what the rules read (step values, stages, groups and their collected members,
  the op-time split and the wait-for graph, links);
- :mod:`.opsplit`: the op-time split (transfer / waiting for a peer / waiting on ranks not
  collected / the rest) and the per-rank op rows the workers send (:data:`OP_ROWS`);
- :mod:`.rules`: the causes (collection, slow rank / schedule / compute, stage, slow group and
  slow link, legacy iteration trace);
- :mod:`.story`: symptoms attached to their causes; communication that no cause explains.

Inputs (a :class:`ascendprof.engine.pipeline.ClusterAnalysis`): ``step_trace`` / ``breakdown``
(STEP_TRACE schema, ns), the ranks' :data:`OP_ROWS` (``op_row_batches``) or else
``concat("comm_ops")`` and ``concat("comm_bandwidth")``, ``concat("comm_links")``,
``concat("op_statistic")``, ``concat("iterations")``, ``metadata`` (profiler_metadata.json,
spec §A.13), ``ranks`` / ``sources`` (what was collected). Output: a list of verdict dicts
(:data:`VERDICT_KEYS`). Nothing here reads files.
"""

from __future__ import annotations

import inspect

from ascendprof.analyze.verdicts import rules, story
from ascendprof.analyze.verdicts.facts import (Facts, group_directory, link_table, ranks_text,
                                               stages, step_frame)
from ascendprof.analyze.verdicts.model import (make_verdict, SEVERITY_ORDER, SYMPTOM_KEYS,
                                               VERDICT_KEYS)
from ascendprof.analyze.verdicts.opsplit import OP_ROWS, op_rows, op_totals
from ascendprof.analyze.verdicts.thresholds import (BLAME_RATIO, COMM_SHARE_PCT, CONTRIBUTED,
                                                    CRITICAL_FACTOR, EXCESS_OF_STEP_PCT,
                                                    MAX_SEPARATE_VERDICTS, MIN_EXCESS_MS,
                                                    NAMES as _NAMES, SLOW_LINK_BW_RATIO,
                                                    SLOW_LINK_MIN_MB, SLOW_RANK_MAD_Z, thresholds,
                                                    WAIT_RATIO)

_RULES: dict[str, object] = {}


def register_rule(name: str, fn=None, *, thresholds: dict | None = None):
    """Add a rule function to :func:`derive`: ``fn(ca, th) -> list of verdict dicts``
    (:func:`make_verdict`); a function that also takes a ``facts`` parameter gets the
    :class:`~.facts.Facts` the built-in rules read (step values, groups, wait-for graph).
    Usable as a decorator (``@register_rule("data")``). Rules run after the built-in ones, in
    registration order; registering a name again replaces that rule. A contributed verdict may
    set ``caused_by`` to the id of another verdict to be attached under it as a symptom,
    ``_explains`` (ids of other verdicts, e.g. ``"slow_rank:3"``) to take those as its symptoms,
    and ``_late`` (a set of ranks) to have the waits of other ranks for those ranks attached to
    it. A rule that raises loses its own verdicts only (the error is recorded in ``ca.problems``).
    ``thresholds`` ({lower-case name: default}) join :func:`thresholds`: listed in
    verdicts.json, overridable with ``--threshold NAME=VALUE``; the rule reads them from ``th``.
    (ascendprof's own analyses do not register: they are records of analyze.registry, whose
    rules and thresholds the engine passes to :func:`derive` and :func:`thresholds`.)
    """
    for k, v in (thresholds or {}).items():
        CONTRIBUTED[str(k).lower()] = float(v)

    def add(f):
        _RULES[str(name)] = f
        return f
    return add(fn) if fn is not None else add


def registered_rules() -> dict:
    """{name: rule function} of the contributed rules, in the order they run."""
    return dict(_RULES)


def _contributed(ca, th: dict, facts: Facts, rules: dict | None = None) -> list[dict]:
    out = []
    for name, rule in list((rules or {}).items()) + list(_RULES.items()):
        try:
            takes_facts = "facts" in inspect.signature(rule).parameters
            got = rule(ca, th, facts=facts) if takes_facts else rule(ca, th)
            out += [dict(v) for v in (got or [])]
        except Exception as e:  # noqa: BLE001 - a contributed rule must not lose the others
            ca.problems.warn("verdicts", f"verdict rule {name!r} failed: "
                                         f"{type(e).__name__}: {e}")
    return out


def _finish(out: list[dict]) -> list[dict]:
    """Unique ids; verdicts with ``caused_by`` naming another verdict moved under its
    ``symptoms``; internal keys (leading ``_``) dropped; most severe first (stable)."""
    seen: dict[str, int] = {}
    for v in out:
        base = v.get("id") or f"{v.get('category')}:{v.get('scope')}"
        n = seen.get(base, 0)
        seen[base] = n + 1
        v["id"] = base if n == 0 else f"{base}#{n + 1}"
        for k in VERDICT_KEYS:
            v.setdefault(k, [] if k in ("groups", "symptoms") else None)
    by_id = {v["id"]: v for v in out}
    for v in out:  # a contributed cause that explains built-in findings takes them as symptoms
        for vid in v.get("_explains") or ():
            other = by_id.get(vid)
            if other is not None and other is not v and not v.get("caused_by"):
                other["caused_by"] = v["id"]
    kept = []
    for v in out:
        cause = by_id.get(v.get("caused_by") or "")
        if cause is not None and cause is not v and not cause.get("caused_by"):
            cause["symptoms"].append({k: v.get(k) for k in SYMPTOM_KEYS})
        else:
            v["caused_by"] = None
            kept.append(v)
    for v in kept:
        for k in [k for k in v if k.startswith("_")]:
            del v[k]
    kept.sort(key=lambda v: SEVERITY_ORDER.get(v["severity"], 3))
    return [{k: v[k] for k in VERDICT_KEYS} | {k: v[k] for k in v if k not in VERDICT_KEYS}
            for v in kept]


def derive(ca, th: dict, contributed: dict | None = None) -> list[dict]:
    """All verdicts for one :class:`~ascendprof.engine.pipeline.ClusterAnalysis`, most severe
    first.

    Each verdict is a dict with the keys :data:`VERDICT_KEYS` (docs/verdicts.md, "The verdict
    format"; built by :func:`make_verdict`): ``id``, ``category``, ``severity``
    ("critical"|"warning"|"info"), ``scope``, ``ranks`` (global ranks the cause is on),
    ``groups``, ``message``, ``evidence`` (numbers with unit-bearing keys, per step means, and
    ``step_values``: which step values were used per rank), ``symptoms`` (consequences attached
    to this cause), ``threshold``, ``next_step`` and ``caused_by``. ``th`` comes from
    :func:`thresholds`. The built-in rules run first, then ``contributed`` ({name: fn(ca, th)}:
    the analyses' rules of analyze.registry), then those added with :func:`register_rule`.
    Never raises for missing tables: each analysis runs on what
    exists; a cluster with data and no warning gets one "balanced" info verdict.
    """
    f = Facts(ca, th)
    causes = rules.collection_verdicts(f)
    found = rules.imbalance_verdicts(f)
    causes += found
    outliers = {r for v in found if v["category"] == "slow_rank" for r in v["ranks"]}
    causes += rules.stage_verdicts(f, outliers)
    causes += rules.link_verdicts(f)
    causes += rules.iteration_verdicts(f)
    causes += _contributed(ca, th, f, contributed)
    out = story.assemble(f, causes)
    if not [v for v in out if v.get("severity") in ("warning", "critical")] and (
            not f.steps.empty or not f.comp.empty):
        ranks = f.ranks_with_steps() or f.collected
        odd = rules.longest_step_deviation(f)
        notes = [v for v in out if v.get("severity") == "info"]
        if odd is None and not notes:
            msg = ("No pipeline stage, rank, group or link stands out and nothing explains a "
                   "large share of communication: the ranks doing the same work take the same "
                   "time.")
        else:
            msg = ("No pipeline stage, rank, group or link stands out as a cause and nothing "
                   "explains a large share of communication")
            if odd is not None:
                msg += (f"; step lengths still differ: rank {odd['rank']}'s step {odd['step']} "
                        f"takes {odd['step_ms']:.1f} ms, {odd['excess_ms']:.1f} ms more than the "
                        f"median of the ranks doing the same work ({odd['median_ms']:.1f} ms)")
            msg += (" (the notes below say what the data shows)." if notes else ".")
        out.append(make_verdict(
            "balanced", "cluster", ranks, "info", msg,
            "Look at the top kernels and op statistics for single-rank optimisation.",
            evidence={"n_ranks": len(ranks),
                      "n_steps": int(f.steps["step"].nunique()) if not f.steps.empty else 0,
                      "longest_step_deviation": odd,
                      "step_values": f.step_sources(ranks) if len(ranks) <= 64 else
                      {s: int(n) for s, n in f.means.loc[ranks, "source"].value_counts().items()}
                      if f.means is not None else {}},
            threshold=dict(th), id="balanced"))
    return _finish(out)


__all__ = ["thresholds", "derive", "make_verdict", "register_rule", "registered_rules",
           "VERDICT_KEYS", "SYMPTOM_KEYS", "Facts", "group_directory", "stages", "step_frame",
           "link_table", "ranks_text", "op_rows", "op_totals", "OP_ROWS"] + list(_NAMES)
