"""The analysis summary as plain data (for summary.json, ``--format json`` and the terminal).

Shape::

    {"headline": {step_ms, split: {Computing|Communication(Not Overlapped)|Free: {ms, pct}},
                  slowest_rank, slowest_step_ms, ranks, steps, cause: {severity, category,
                  ranks, text, verdict}, next, verdicts: {critical, warning}, definitions},
     "root", "version", "sources": [{rank, kind, path, device_id, steps, analyses, also,
                                     framework_version, cann_version, profiler_level}],
     "ranks": [{rank, step, <nine metrics>_us..., method}],   # per-rank step breakdown
     "breakdown_check": [{rank, status, used, metrics: {Computing: {step, reported_us,
                          recomputed_us, deviation_pct}, ...}, reason}],  # recomputed vs reported
     "top_op_types": [{op_type, accelerator_core, total_us, ratio_pct, count}],
     "iterations": [{rank, steps, iteration_interval_ms, fp_bp_ms, tail_ms, total_ms}],
     "verdicts": [...], "advice": {mode, count, shown, items: [top items]} | null,
     "problems": [...], "notes": [problems grouped by kind, see group_problems], "missing": {rank: [files]},
     "not_read": {rank: {file: why it was not needed}}, "outputs": [...]}

Times are microseconds (keys end in ``_us``).
"""

from __future__ import annotations

import math

from ascendprof._version import __version__
from ascendprof.analyze import memory
from ascendprof.model import schemas as S
from ascendprof.model.problems import printable
from ascendprof.report.files import not_written

METRICS = [(col, name) for name, col in S.STEP_METRICS]  # (STEP_TRACE column, display name)


def _rows(table, origin: str) -> list[dict]:
    if table is None or table.num_rows == 0:
        return []
    out = []
    for r in table.to_pylist():
        row = {"rank": r["rank"], "step": r["step"], "origin": origin}
        for col, _ in METRICS:
            v = r.get(col)
            row[col[:-3] + "_us"] = None if v is None else v / 1000
        out.append(row)
    return out


def _text(v) -> str:
    return "-" if v is None or (isinstance(v, float) and v != v) else str(v)


def _iterations(ca) -> list[dict]:
    """The graph-mode iteration trace per rank (iteration_trace.csv rows: rank, steps and the
    mean interval / fp+bp / tail / total in ms), [] when no rank has one."""
    it = ca.iteration_trace
    if it is None or not len(it):
        return []
    return [{k: (int(v) if k in ("rank", "steps") else float(v)) for k, v in r.items()}
            for r in it.to_dict(orient="records")]


#: Advice items shown in the summary with --advice summary (all of them with --advice all).
ADVICE_TOP = 5


def advice_summary(doc: dict | None) -> dict | None:
    """The top advice items of an advice.json document (all with mode "all"), each with id,
    severity, area, title, ranks, message, the first advice line and the share of the step."""
    if doc is None:
        return None
    items = doc.get("items", [])
    shown = items if doc.get("mode") == "all" else items[:ADVICE_TOP]
    return {"mode": doc.get("mode"), "count": len(items), "shown": len(shown),
            "items": [{"id": f["id"], "severity": f["severity"], "area": f["area"],
                       "title": f["title"], "ranks": f["ranks"], "message": f["message"],
                       "advice": (f["advice"] or [""])[0],
                       "share_of_step_pct": f["share_of_step_pct"]} for f in shown]}


def build_summary(ca, outputs: list[str] | None = None, top: int = 10) -> dict:
    """Summarise ``ca`` (pipeline.ClusterAnalysis). Per-rank rows prefer the profiler's reported
    breakdown and fall back to ascendprof's recomputation (``origin`` says which)."""
    reported = _rows(ca.step_trace, "reported")
    have = {(r["rank"], r["step"]) for r in reported}
    recomputed = [r for r in _rows(ca.breakdown, "recomputed") if (r["rank"], r["step"]) not in have]
    ranks = sorted(reported + recomputed, key=lambda r: (r["rank"], r["step"] or -1))
    tops = []
    ops = ca.op_statistics
    if ops is not None and len(ops):
        cl = ops[ops["Rank"].astype(str) == "cluster"].head(top)
        for _, r in cl.iterrows():
            tops.append({"op_type": _text(r["OP Type"]),
                         "accelerator_core": _text(r["Accelerator Core"]),
                         "count": int(r["Count"]), "total_us": float(r["Total Time(us)"]),
                         "ratio_pct": float(r["Ratio(%)"])})
    s = {
        "root": printable(ca.root),
        "version": __version__,
        "sources": [{"rank": s.rank, "kind": s.label, "path": printable(s.path),
                     "device_id": s.device_id,
                     "steps": s.steps, "analyses": s.analyses, "also": s.also,
                     "framework_version": s.framework_version, "cann_version": s.cann_version,
                     "profiler_level": s.profiler_level}
                    for s in ca.sources],
        "ranks": ranks,
        "breakdown_methods": {r.rank: r.breakdown_method for r in ca.ranks},
        "breakdown_check": list(ca.breakdown_check),
        "top_op_types": tops,
        "iterations": _iterations(ca),
        "verdicts": ca.verdicts,
        "advice": advice_summary(ca.advice),
        "problems": [p.as_dict() for p in ca.problems],
        "missing": {r.rank: r.missing for r in ca.ranks if r.missing},
        "not_read": {r.rank: r.meta["not_read"] for r in ca.ranks
                     if (r.meta or {}).get("not_read")},
        "outputs": outputs or [],
        "not_written": not_written(ca),
        "analyses": _analyses(ca),
    }
    s["notes"] = group_problems(s["problems"])
    return {"headline": headline(s), **s}


def _analyses(ca) -> dict:
    """Pipeline / memory / data preparation / expert-load / efficiency / idle / dispatch
    results in brief (analyze.registry), and why dispatch is absent when it is."""
    out = analyses_summary(ca.csv_files)
    if "dispatch.csv" not in ca.csv_files and ca.ranks:
        unread = any((r.meta or {}).get("advice_not_read") for r in ca.ranks)
        out["dispatch_not_seen"] = (
            "trace_view.json was not read: run with --timeline or --advice all for launch "
            "delays, the task queue and the host causes of idle time" if unread else
            "no launch links (HostToDevice flows or CANN_API connection ids) in this export: "
            "launch delays, the task queue and the host causes of idle time cannot be seen")
    return out


def _num(v, nd=3):
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(f) else round(f, nd)


def _step(v):
    f = _num(v, 0)
    return None if f is None else int(f)


def analyses_summary(csv_files: dict) -> dict:
    """Short per-analysis results for summary.json: ``pipeline`` (per step-averaged stage:
    ranks, computing / bubble ms, bubble %, micro-batches), ``memory`` (per rank, main
    component: peak allocated / reserved MB, % of capacity), ``data_preparation`` (per rank:
    data wait ms and % of the step, its source, bottleneck stage and operator), ``moe`` (per EP
    group: max / mean tokens). Keys only for the analyses that produced output."""
    out: dict = {}
    st = csv_files.get("pipeline_stages.csv")
    if st is not None and len(st):
        rows = []
        for stage, g in st.groupby("Stage", sort=True):
            rows.append({"stage": int(stage), "ranks": str(g["Ranks"].iloc[0]),
                         "computing_ms": _num(g["Computing(us)"].mean() / 1000),
                         "bubble_ms": _num(g["Bubble(us)"].mean() / 1000),
                         "bubble_pct": _num(g["Bubble(%)"].mean(), 2),
                         "micro_batches": None if g["Micro-batches"].isna().all()
                         else int(g["Micro-batches"].dropna().iloc[0])})
        out["pipeline"] = rows
    ms = csv_files.get("memory_summary.csv")
    if ms is not None and len(ms):
        per = memory.rank_peaks(ms)
        out["memory"] = [{"rank": int(r.rank), "component": r.component,
                          "peak_allocated_mb": _num(r.allocated_mb),
                          "peak_reserved_mb": _num(r.reserved_mb),
                          "capacity_pct": _num(r.reserved_mb / r.capacity_mb * 100, 2)
                          if _num(r.capacity_mb) else None} for r in per.itertuples()]
    dp = csv_files.get("data_preparation.csv")
    if dp is not None and len(dp):
        out["data_preparation"] = [{"rank": int(r["Rank"]), "data_wait_ms": _num(r["Data Wait(ms)"]),
                                    "data_wait_pct": _num(r["Data Wait(%)"], 2),
                                    "source": r["Wait Source"],
                                    "bottleneck_stage": r["Bottleneck Stage"] or None,
                                    "bottleneck_operator": r["Bottleneck Operator"] or None}
                                   for r in dp.to_dict("records")]
    oe = csv_files.get("op_efficiency_steps.csv")
    if oe is not None and len(oe):
        out["op_efficiency"] = [{"rank": int(r["Rank"]), "step": _step(r["Step"]),
                                 "mfu_pct": _num(r["MFU(%)"], 2), "chip": r["Chip"]}
                                for r in oe.to_dict("records")]
    ib = csv_files.get("idle_breakdown.csv")
    if ib is not None and len(ib):
        out["idle"] = [{"rank": int(r["Rank"]), "step": _step(r["Step"]),
                        "free_ms": _num(r["Free(us)"] / 1000),
                        "short_ms": _num(r["Short Gaps(us)"] / 1000),
                        "sync_ms": _num(r["Synchronisation(us)"] / 1000),
                        "data_loader_ms": _num(r["Data Loader(us)"] / 1000),
                        "host_launch_ms": _num(r["Host Launch(us)"] / 1000),
                        "other_ms": _num(r["Other(us)"] / 1000), "host_data": r["Host Data"]}
                       for r in ib.to_dict("records")]
    ds = csv_files.get("dispatch_steps.csv")
    if ds is not None and len(ds):
        out["dispatch"] = [{"rank": int(r["Rank"]), "step": _step(r["Step"]),
                            "launch_delay_p50_us": _num(r["Launch Delay P50(us)"]),
                            "queue_wait_avg_us": _num(r["Queue Wait Avg(us)"]),
                            "idle_before_launch_ms": _num(r["Idle Before Launch(us)"] / 1000)}
                           for r in ds.to_dict("records")]
    la = csv_files.get("late_arrivals.csv")
    if la is not None and len(la):
        out["late_arrivals"] = [
            {"op_name": r["Op Name"], "step": _step(r["Step"]), "late_rank": int(r["Late Rank"]),
             "early_rank": int(r["Early Rank"]), "max_wait_ms": _num(r["Max Wait(ms)"]),
             "top_item": r["Item"], "extra_ms": _num(r["Extra(ms)"])}
            for r in la.drop_duplicates(["Step", "Group", "Op Name"]).to_dict("records")]
    me = csv_files.get("moe_expert_load.csv")
    if me is not None and len(me):
        out["moe"] = [{"group": grp, "max_over_mean": _num(g["Group Max / Mean"].max(), 4)}
                      for grp, g in me.groupby("EP Group", sort=True)]
    return out


# ------------------------------------------------------------------------------ headline

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
    from ascendprof.model.ranks import ranks_phrase

    per_rank: dict[int, list[dict]] = {}
    for r in s.get("ranks") or []:
        per_rank.setdefault(r["rank"], []).append(r)
    means = {}
    for rank, rows in per_rank.items():
        parts = {name: _mean([r.get(col) for r in rows]) for name, col in SPLIT}
        if all(v is None for v in parts.values()):
            continue
        means[rank] = parts
    out: dict = {"ranks": len({x["rank"] for x in s.get("sources") or [] if x["rank"] is not None})
                 or len(per_rank),
                 "steps": sorted({r["step"] for r in s.get("ranks") or [] if r["step"] is not None}),
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
        out["step_ms"] = round(_mean([i["total_ms"] for i in s["iterations"]]), 3)
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
        steps = h.get("steps") or []
        st = (f"step {steps[0]}" if len(steps) == 1 else f"{len(steps)} steps") if steps else ""
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
    import re

    return re.sub(r"\d+(\.\d+)?", "#", re.sub(r"\brank[ _]\d+", "rank #", text or ""))


def group_problems(problems: list[dict]) -> list[dict]:
    """The problems as kinds: one entry per (severity, place, reason) once rank numbers and
    other numbers are set aside, with the ranks it covers; largest kinds first. Each entry:
    severity, where (the place without its rank), reason (the first note's, whole when every
    note of the kind says the same), same (bool), count, ranks (list), example_rank."""
    import re

    kinds: dict[tuple, dict] = {}
    for p in problems:
        where = re.sub(r"\brank \d+ ?", "", p.get("where") or "").strip()
        key = (p.get("severity"), _shape(where), _shape(p.get("reason")))
        k = kinds.get(key)
        if k is None:
            k = kinds[key] = {"severity": p.get("severity"), "where": where,
                              "reason": p.get("reason") or "", "same": True, "count": 0,
                              "ranks": [], "example_rank": p.get("rank"),
                              "path": p.get("path") if p.get("rank") is None else ""}
        k["count"] += 1
        if p.get("rank") is not None:
            k["ranks"].append(p["rank"])
        if (p.get("reason") or "") != k["reason"]:
            k["same"] = False
    return sorted(kinds.values(), key=lambda k: (k["severity"] != "skipped", -k["count"]))
