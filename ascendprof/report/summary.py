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
from ascendprof.report.headline import group_problems, headline

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
        # lazy: the terminal summary of a restored run uses this module without pandas

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
