"""The answer first: the headline of an analysis (step time, its split, the cause with its ranks,
what to look at next), the definitions of its numbers, and the notes on the input grouped by
kind — read from summary.json's data, shared by the terminal, summary.json and the page. Light
to import (no Arrow or pandas): a restored run prints its summary with it."""

from __future__ import annotations

import re

from ascendprof.model.ranks import ranks_phrase
from ascendprof.report.bounded import is_bounded, items, total

#: the three parts a step splits into (Computing + Communication(Not Overlapped) + Free = step)
SPLIT = (("Computing", "computing_us"), ("Communication(Not Overlapped)", "comm_not_overlapped_us"),
         ("Free", "free_us"))
DEFINITIONS = {
    "step": "Computing + Communication(Not Overlapped) + Free of one step on one rank, "
            "averaged over the steps and then over the ranks",
    "Computing": "time the device runs compute kernels",
    "Communication(Not Overlapped)": "time in communication ops while no compute kernel runs "
                                     "(transfers and waits for other ranks)",
    "Free": "time the device runs nothing (host launch gaps, synchronisation, data waits)",
}


def first_sentence(text: str, limit: int = 240) -> str:
    """The first sentence of ``text`` (up to '. ' or the end), without a trailing group list
    ('(groups …)'), at most about ``limit`` characters (cut at a word, with '…')."""
    text = (text or "").strip()
    cut = text.find(" (groups ")
    if cut > 0:
        text = text[:cut].rstrip(",;:") + "."
    for i in range(len(text) - 1):
        if text[i] == "." and text[i + 1] == " " and not text[max(0, i - 2):i].isdigit():
            text = text[:i + 1]
            break
    if len(text) > limit:
        text = text[:limit].rsplit(" ", 1)[0].rstrip(",;:") + " …"
    return text


def _mean(xs):
    xs = [x for x in xs if x is not None]
    return sum(xs) / len(xs) if xs else None


def headline(s: dict) -> dict:
    """The answer first: step time (ms, mean over ranks of each rank's mean step), its split
    into Computing / Communication(Not Overlapped) / Free (ms and % of the step), the slowest
    rank, the cause (the first warning or critical verdict, in one sentence, with its ranks)
    and what to look at next. Built from the summary's own rows (``s`` as
    :func:`build_summary` returns it)."""
    rows = s.get("ranks")
    if is_bounded(rows):  # an older page of a bounded summary: each rank's mean row
        rows = (rows.get("per_rank_mean") or {}).get("items") or items(rows)
    per_rank: dict[int, list[dict]] = {}
    for r in rows or []:
        per_rank.setdefault(r["rank"], []).append(r)
    means = {}
    for rank, rows in per_rank.items():
        parts = {name: _mean([r.get(col) for r in rows]) for name, col in SPLIT}
        if all(v is None for v in parts.values()):
            continue
        means[rank] = parts
    srcs = s.get("sources")
    src_ranks = ((srcs.get("columns") or {}).get("rank") or [] if is_bounded(srcs)
                 else [x["rank"] for x in srcs or []])
    out: dict = {"ranks": len({r for r in src_ranks if r is not None}) or len(per_rank),
                 "steps": sorted({r["step"] for r in rows or [] if r["step"] is not None}),
                 "step_ms": None, "split": {}, "slowest_rank": None, "slowest_step_ms": None,
                 "definitions": DEFINITIONS}
    if means:
        step = {rank: sum(v or 0 for v in p.values()) for rank, p in means.items()}
        out["step_ms"] = round(_mean(step.values()) / 1000, 3)
        for name, _ in SPLIT:
            v = _mean([p[name] for p in means.values()])
            out["split"][name] = {"ms": None if v is None else round(v / 1000, 3),
                                  "pct": (None if v is None or not out["step_ms"]
                                          else round(v / 1000 / out["step_ms"] * 100, 1))}
        slow = max(step, key=lambda k: (step[k], -k))
        out["slowest_rank"], out["slowest_step_ms"] = slow, round(step[slow] / 1000, 3)
    elif s.get("iterations"):  # graph mode: the iteration trace only
        its = s["iterations"]
        its = ((its.get("per_rank_mean") or {}).get("items") or items(its) if is_bounded(its)
               else its)
        out["step_ms"] = round(_mean([i["total_ms"] for i in its]), 3)
    vs = [v for v in s.get("verdicts") or [] if v.get("severity") in ("critical", "warning")]
    if vs:
        v = vs[0]
        out["cause"] = {"severity": v["severity"], "category": v.get("category"),
                        "ranks": ranks_phrase(v.get("ranks") or []) if v.get("ranks") else "",
                        "text": first_sentence(v.get("message", "")), "verdict": v.get("id")}
        out["next"] = first_sentence(v.get("next_step") or "", 300) or None
        out["verdicts"] = {"critical": sum(x["severity"] == "critical" for x in vs),
                           "warning": sum(x["severity"] == "warning" for x in vs)}
    else:
        out["cause"] = {"severity": "info", "category": None, "ranks": "", "verdict": None,
                        "text": "No verdict: nothing found that slows the step beyond the "
                                "thresholds."}
        out["next"] = None
        out["verdicts"] = {"critical": 0, "warning": 0}
    if not out["next"]:
        adv = ((s.get("advice") or {}).get("items") or [])
        if adv:
            out["next"] = first_sentence(adv[0]["advice"] or adv[0]["title"], 300)
        elif out["split"]:
            top = max(out["split"], key=lambda k: out["split"][k]["ms"] or 0)
            out["next"] = {"Computing": "The op types that take most of Computing "
                                        "(op_statistics.csv).",
                           "Free": "What the host does between operators (a timeline of the "
                                   "slowest rank: ascendprof timeline).",
                           }.get(top, "The communication ops that wait longest "
                                      "(cluster_communication.json).")
    return out


def headline_lines(h: dict) -> list[str]:
    """The headline as a few lines of plain text (terminal and page)."""
    lines = []
    if h.get("step_ms") is not None:
        steps, n_steps = items(h.get("steps")), total(h.get("steps"))
        st = (f"step {steps[0]}" if n_steps == 1 else f"{n_steps:,} steps") if steps else ""
        slow = ("" if h.get("slowest_rank") is None or h["ranks"] < 2 else
                f"; slowest rank {h['slowest_rank']}: {h['slowest_step_ms']:,.1f} ms")
        lines.append(f"Step time {h['step_ms']:,.1f} ms (mean of {h['ranks']} rank"
                     f"{'s' if h['ranks'] != 1 else ''}{', ' + st if st else ''}{slow})")
        if h.get("split"):
            lines.append("  " + " | ".join(
                f"{k} {v['ms']:,.1f} ms ({v['pct']:.0f}%)" for k, v in h["split"].items()
                if v["ms"] is not None))
    c = h.get("cause") or {}
    if c:
        who = f" [{c['ranks']}]" if c.get("ranks") else ""
        lines.append(f"Cause{who}: {c['text']}")
    if h.get("next"):
        lines.append(f"Next: {h['next']}")
    return lines


# ------------------------------------------------------------------------------ notes


def _shape(text: str) -> str:
    return re.sub(r"\d+(\.\d+)?", "#", re.sub(r"\brank[ _]\d+", "rank #", text or ""))


def group_problems(problems: list[dict]) -> list[dict]:
    """The problems as kinds: one entry per (severity, place, reason) once rank numbers and
    other numbers are set aside, with the ranks it covers; largest kinds first. Each entry:
    severity, where (the place without its rank), reason (the first note's, whole when every
    note of the kind says the same), same (bool), count, ranks (list), example_rank, path (the
    first note's file or folder)."""
    kinds: dict[tuple, dict] = {}
    for p in problems:
        where = re.sub(r"\brank \d+ ?", "", p.get("where") or "").strip()
        key = (p.get("severity"), _shape(where), _shape(p.get("reason")))
        k = kinds.get(key)
        if k is None:
            k = kinds[key] = {"severity": p.get("severity"), "where": where,
                              "reason": p.get("reason") or "", "same": True, "count": 0,
                              "ranks": [], "example_rank": p.get("rank"),
                              "path": p.get("path") or ""}
        k["count"] += 1
        if p.get("rank") is not None:
            k["ranks"].append(p["rank"])
        if (p.get("reason") or "") != k["reason"]:
            k["same"] = False
    return sorted(kinds.values(), key=lambda k: (k["severity"] != "skipped", -k["count"]))
