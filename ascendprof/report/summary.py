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

Times are microseconds (keys end in ``_us``). A list longer than 128 rows (a step id list
too) is written in its bounded form, ``{"bounded": {rows, shown, chosen, full_table}, "items":
[...], ...}`` (rank maps: ``{"bounded": ..., "groups": [{value, ranks}]}``); see
:mod:`ascendprof.report.bounded`.
"""

from __future__ import annotations

import json
import math
import statistics
from collections import Counter

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ascendprof._version import __version__
from ascendprof.analyze import memory
from ascendprof.model import schemas as S
from ascendprof.model.problems import printable
from ascendprof.report.files import not_written
from ascendprof.report.bounded import MAX_ROWS, NAMED, SHOWN, is_bounded, marker, runs
from ascendprof.report.bounded import items as bounded_items
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
    breakdown and fall back to ascendprof's recomputation (``origin`` says which).

    A list longer than :data:`~ascendprof.report.bounded.MAX_ROWS` rows is written in its
    bounded form (:mod:`ascendprof.report.bounded`: the rows that matter, a marker with the
    counts and the file that holds every row), said in problems.csv (one warning added to
    ``ca.problems`` naming every bounded list); the headline and the notes are computed from
    the whole lists first."""
    ranks, per_rank, bounded_steps = _step_rows(ca)
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
        "problems": [],
        "missing": {r.rank: r.missing for r in ca.ranks if r.missing},
        "not_read": {r.rank: r.meta["not_read"] for r in ca.ranks
                     if (r.meta or {}).get("not_read")},
        "outputs": outputs or [],
        "not_written": not_written(ca),
        "analyses": _analyses(ca),
    }
    if per_rank is None:  # every row is here: the headline reads them
        head = headline(s)
    else:  # the headline from each rank's mean over its steps (the same numbers)
        head = headline({**s, "ranks": per_rank})
        head["steps"] = bounded_steps
    bounded_lists = _bound_lists(s, ca, head)
    n = sum(p.path != "summary.json" for p in ca.problems)  # this note aside
    if n + bool(bounded_lists) > MAX_ROWS:
        bounded_lists.append(("problems", f"{n + 1:,} rows, {SHOWN} shown, all in problems.csv"))
    if bounded_lists:  # one short note (one line in the terminal), each list in its Affects
        text = (f"{len(bounded_lists)} list(s) over {MAX_ROWS} rows summarised (see each "
                "'bounded')")
        affects = tuple(f"{label}: {how}" for label, how in bounded_lists)
        if not any(p.path == "summary.json" for p in ca.problems):  # once, however often
            ca.problems.add("summary.json", text, severity="warning", affects=affects)
    s["problems"] = [p.as_dict() for p in ca.problems]
    s["notes"] = group_problems(s["problems"])
    if len(s["problems"]) > MAX_ROWS:
        s["problems"] = _bound_problems(s["problems"])
    return {"headline": head, **s}


# ------------------------------------------------------------------------------ bounded lists
# (see ascendprof.report.bounded for the form; a list up to MAX_ROWS rows is written whole)

_SPLIT_NS = ("computing_ns", "comm_not_overlapped_ns", "free_ns")


def _step_rows(ca):
    """The per-rank step rows: (rows or their bounded form, each rank's mean row over its steps
    or None when every row is kept, the headline's steps or None). Up to MAX_ROWS rows, the
    rows as ever (list of dicts, sorted by rank and step); above, computed on the Arrow tables
    without making one Python object per row (10^6 steps are 10^6 rows)."""
    rep, rec = ca.step_trace, ca.breakdown
    n = (rep.num_rows if rep is not None else 0) + (rec.num_rows if rec is not None else 0)
    if n > MAX_ROWS:
        t = _step_table(rep, rec)
        if t.num_rows > MAX_ROWS:
            return _bounded_step_rows(t, _named_ranks(ca))
    reported = _rows(rep, "reported")
    have = {(r["rank"], r["step"]) for r in reported}
    recomputed = [r for r in _rows(rec, "recomputed") if (r["rank"], r["step"]) not in have]
    return sorted(reported + recomputed, key=lambda r: (r["rank"], r["step"] or -1)), None, None


def _step_table(rep, rec):
    """The reported rows and the recomputed ones of the (rank, step)s not reported, one Arrow
    table of rank, step, the nine metrics (ns, as the tables hold them), ``origin`` (0 reported,
    1 recomputed: see :data:`_ORIGINS`) and ``_total`` (Computing + Communication(Not
    Overlapped) + Free, ns, a missing part as 0). The reported table's columns are used as they
    are, not copied: at 10^6 steps its float and string copies and a hash join took ~0.5 GB."""
    cols = ["rank", "step"] + [c for c, _ in METRICS]
    parts = []
    for t, origin in ((rep, 0), (rec, 1)):
        if t is None or not t.num_rows:
            continue
        t = pa.table({c: (t[c] if c in t.column_names else pa.nulls(t.num_rows, pa.int64()))
                      for c in cols})
        if parts:  # the recomputed rows of (rank, step)s the profiler did not report
            t = t.filter(pa.array(~np.isin(S.pair_codes(t), S.pair_codes(parts[0]))))
        parts.append(t.append_column("origin", pa.repeat(pa.scalar(origin, pa.int8()),
                                                         t.num_rows)))
    if len(parts) > 1 and not parts[1].schema.equals(parts[0].schema):
        parts = [p.cast(pa.schema([(f.name, f.type if f.name in ("origin",) else
                                    pa.int64() if f.name in ("rank", "step") else pa.float64())
                                   for f in p.schema])) for p in parts]
    t = pa.concat_tables(parts)
    total = pc.add(pc.add(pc.fill_null(t["computing_ns"], 0),
                          pc.fill_null(t["comm_not_overlapped_ns"], 0)),
                   pc.fill_null(t["free_ns"], 0))
    return t.append_column("_total", total.cast(pa.float64()))


#: the ``origin`` codes of :func:`_step_table`
_ORIGINS = ("reported", "recomputed")


def _row_of(r: dict) -> dict:
    row = {"rank": r["rank"], "step": r["step"], "origin": r["origin"]}
    for col, _ in METRICS:
        v = r.get(col)
        row[col[:-3] + "_us"] = None if v is None else v / 1000
    return row


def _bounded_step_rows(t, named: set[int]):
    """``ranks`` above MAX_ROWS rows: the SHOWN longest steps, the shortest, the longest of
    each rank a verdict names; each rank's mean over its steps (all of them up to MAX_ROWS
    ranks, else the SHOWN ranks with the longest mean step); the spread of every metric."""
    n = t.num_rows
    key = pc.fill_null(t["step"].cast(pa.int64()), -(1 << 62))  # a missing step sorts first
    order = pc.sort_indices(pa.table({"_total": t["_total"], "rank": t["rank"], "_key": key}),
                            sort_keys=[("_total", "descending"), ("rank", "ascending"),
                                       ("_key", "ascending")])
    del key
    keep = set(order[:SHOWN].to_pylist()) | {order[n - 1].as_py()}
    ranks_in_order = pc.take(t["rank"], order)
    for r in sorted(named)[:NAMED]:  # the longest step of each named rank
        mine = pc.filter(order, pc.equal(ranks_in_order, r))
        if len(mine):
            keep.add(mine[0].as_py())
    del ranks_in_order, order
    picked = t.take(pa.array(sorted(keep))).to_pylist()
    rows = sorted((_row_of(r | {"origin": _ORIGINS[r["origin"]]}) for r in picked),
                  key=lambda r: (r["rank"], r["step"] if r["step"] is not None else -1))
    agg = t.group_by("rank").aggregate([(c, "mean") for c, _ in METRICS]
                                       + [("rank", "count"), ("origin", "min"),
                                          ("origin", "max")])
    means = []
    for r in agg.to_pylist():
        origin = _ORIGINS[r["origin_min"]] if r["origin_min"] == r["origin_max"] else "mixed"
        means.append(_row_of({"rank": r["rank"], "step": None, "origin": origin,
                              **{c: r[f"{c}_mean"] for c, _ in METRICS}})
                     | {"steps": r["rank_count"]})
    means.sort(key=lambda r: r["rank"])
    step_ids = np.sort(pc.unique(t["step"].drop_null()).to_numpy())
    shown_means = means
    how_means = "each rank's mean over its steps"
    if len(means) > MAX_ROWS:
        shown_means = sorted(means, key=lambda r: -sum(r[k[:-3] + "_us"] or 0
                                                       for k in _SPLIT_NS))[:SHOWN]
        shown_means.sort(key=lambda r: r["rank"])
        how_means = f"the mean over its steps of the {SHOWN} ranks with the longest mean step"
    spread = {"step_us": _spread(t["_total"])}
    for col, _ in METRICS:
        spread[col[:-3] + "_us"] = _spread(t[col])
    named_txt = (f", and the longest step of each rank a warning or critical verdict names "
                 f"(up to {NAMED})" if named else "")
    out = {"bounded": marker(n, len(rows), f"the {SHOWN} longest rank-steps (Computing + "
                             f"Communication(Not Overlapped) + Free), the shortest{named_txt}",
                             "cluster_step_trace_time.csv"),
           "items": rows,
           "per_rank_mean": {"ranks": len(means), "shown": len(shown_means),
                             "chosen": how_means, "items": shown_means},
           "spread": spread}
    return out, [{k: v for k, v in m.items() if k != "steps"} for m in means], _steps_value(step_ids)


def _spread(col) -> dict | None:
    """min / median / p90 / max of a column of ns values, in us (None when all are missing)."""
    col = col.drop_null()
    if not len(col):
        return None
    q = pc.quantile(col, q=[0.5, 0.9]).to_pylist()
    mm = pc.min_max(col).as_py()
    return {"min": mm["min"] / 1000, "median": q[0] / 1000, "p90": q[1] / 1000,
            "max": mm["max"] / 1000}


def _steps_value(step_ids) -> list | dict:
    """A sorted list (or numpy array) of step ids, bounded above MAX_ROWS (the first and the
    last SHOWN // 2)."""
    as_list = (lambda a: a.tolist()) if hasattr(step_ids, "tolist") else list
    if len(step_ids) <= MAX_ROWS:
        return as_list(step_ids)
    half = SHOWN // 2
    shown = as_list(step_ids[:half]) + as_list(step_ids[-half:])
    return {"bounded": marker(len(step_ids), len(shown), f"the first {half} and the last "
                              f"{half} steps", "cluster_step_trace_time.csv"),
            "items": shown}


def _named_ranks(ca) -> set[int]:
    """The ranks that warning or critical verdicts name."""
    out: set[int] = set()
    for v in ca.verdicts or []:
        if v.get("severity") in ("warning", "critical"):
            out.update(int(r) for r in v.get("ranks") or [] if isinstance(r, int)
                       or str(r).isdigit())
    return out


def _numeric_spread(rows: list[dict], skip=("rank", "step")) -> dict:
    """min / median / max of every numeric field of ``rows`` (bools and ids left out)."""
    fields: dict[str, list] = {}
    for r in rows:
        for k, v in r.items():
            if k in skip or isinstance(v, bool) or not isinstance(v, (int, float)):
                continue
            if isinstance(v, float) and v != v:
                continue
            fields.setdefault(k, []).append(v)
    out = {}
    for k, xs in fields.items():
        xs.sort()
        out[k] = {"min": xs[0], "median": statistics.median(xs), "max": xs[-1]}
    return out


def _bound_rows(rows: list[dict], *, score: str, full_table: str,
                named: set[int], low_is_worse: bool = False, rank_key: str = "rank") -> dict:
    """A list of rows above MAX_ROWS: the SHOWN worst by ``score`` (highest, or lowest with
    ``low_is_worse``), the best one, the worst of each rank a verdict names (up to NAMED), in
    their order in the whole list; the spread of every numeric field; each rank's mean over
    its steps when the rows are per step and there are at most MAX_ROWS ranks."""
    def key(i):
        v = rows[i].get(score)
        bad = v is None or (isinstance(v, float) and v != v)
        return (bad, (v if low_is_worse else -v) if not bad else 0, i)

    order = sorted(range(len(rows)), key=key)
    valid = [i for i in order if not key(i)[0]]
    keep = set(order[:SHOWN]) | ({valid[-1]} if valid else set())
    seen: set = set()
    for i in order:
        r = rows[i].get(rank_key)
        if r in named and r not in seen and len(seen) < NAMED:
            seen.add(r)
            keep.add(i)
    worst = "lowest" if low_is_worse else "highest"
    best = "highest" if low_is_worse else "lowest"
    named_txt = (f", and the {worst} row of each rank a warning or critical verdict names "
                 f"(up to {NAMED})" if named else "")
    out = {"bounded": marker(len(rows), len(keep), f"the {SHOWN} rows with the {worst} "
                             f"{score}, the row with the {best}{named_txt}", full_table),
           "items": [rows[i] for i in sorted(keep)],
           "spread": _numeric_spread(rows, skip=("rank", "step", rank_key))}
    if rows and "step" in rows[0] and rank_key in rows[0]:
        per: dict = {}
        for r in rows:
            per.setdefault(r[rank_key], []).append(r)
        if len(per) <= MAX_ROWS:
            means = []
            for rank in sorted(per, key=lambda x: (x is None, x)):
                m = {rank_key: rank, "steps": len(per[rank])}
                for k in out["spread"]:
                    xs = [r.get(k) for r in per[rank]
                          if isinstance(r.get(k), (int, float)) and r.get(k) == r.get(k)]
                    m[k] = sum(xs) / len(xs) if xs else None
                means.append(m)
            out["per_rank_mean"] = {"ranks": len(means), "shown": len(means),
                                    "chosen": "each rank's mean over its steps",
                                    "items": means}
    return out


def _group_rank_map(m: dict, label: str) -> dict:
    """A rank map above MAX_ROWS ranks as groups of ranks with the same value (lossless)."""
    groups: list[dict] = []
    index: dict = {}
    for rank, value in m.items():
        k = _value_key(value)
        if k not in index:
            index[k] = len(groups)
            groups.append({"value": value, "ranks": []})
        groups[index[k]]["ranks"].append(rank)
    for g in groups:
        g["ranks"] = runs(g["ranks"])
    return {"bounded": marker(len(m), len(m), f"grouped: the ranks with the same {label} are "
                              "one group (value, ranks as [first, last] runs); every rank is "
                              "in one group", None),
            "groups": groups}


def _value_key(value) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def _bound_sources(sources: list[dict], named: set[int]) -> dict:
    """``sources`` above MAX_ROWS ranks: one source of each (kind, framework, CANN, level,
    analyses), then the sources of the ranks verdicts name, up to SHOWN; every rank's device
    id (columns); how many sources of each kind, version and profiler level; their steps."""
    keep: list[int] = []
    seen: set = set()
    for i, s in enumerate(sources):
        k = (s["kind"], s.get("framework_version"), s.get("cann_version"),
             s.get("profiler_level"), tuple(s.get("analyses") or []))
        if k not in seen and len(keep) < SHOWN:
            seen.add(k)
            keep.append(i)
    for i, s in enumerate(sources):
        if s.get("rank") in named and i not in keep and len(keep) < SHOWN + NAMED:
            keep.append(i)
    keep.sort()
    steps = sorted({st for s in sources for st in s.get("steps") or []})
    versions = Counter(" / ".join(x for x in (s.get("framework_version"),
                                             s.get("cann_version")) if x) or None
                       for s in sources)
    return {"bounded": marker(len(sources), len(keep),
                              "one source of each kind, version, profiler level and set of "
                              "analyses, then those of the ranks warning or critical verdicts "
                              f"name (up to {NAMED}); `ascendprof scan` lists every source",
                              None),
            "items": [sources[i] for i in keep],
            "columns": {"rank": [s.get("rank") for s in sources],
                        "device_id": [s.get("device_id") for s in sources]},
            "counts": {"kind": dict(Counter(s["kind"] for s in sources)),
                       "versions": {str(k): n for k, n in versions.items()},
                       "profiler_level": {str(k): n for k, n in Counter(
                           s.get("profiler_level") for s in sources).items()}},
            "steps": _steps_value(steps)}


def _bound_problems(problems: list[dict]) -> dict:
    """``problems`` above MAX_ROWS: the first SHOWN by severity (skipped, critical, warning,
    then the others), each severity's count; every one is in problems.csv (``notes`` groups
    them all by kind)."""
    rank = {"skipped": 0, "critical": 1, "warning": 2}
    order = sorted(range(len(problems)), key=lambda i: (rank.get(problems[i].get("severity"),
                                                                 3), i))
    keep = sorted(order[:SHOWN])
    return {"bounded": marker(len(problems), len(keep),
                              f"the first {SHOWN} by severity (skipped, critical, warning, "
                              "others), in their order; `notes` groups every problem by kind",
                              "problems.csv"),
            "items": [problems[i] for i in keep],
            "counts": dict(Counter(p.get("severity") for p in problems))}


#: analyses lists: (key, the field that ranks the rows, lowest is worse, rank field, file)
_ANALYSIS_LISTS = (
    ("pipeline", "bubble_ms", False, "stage", "pipeline_stages.csv"),
    ("memory", "peak_allocated_mb", False, "rank", "memory_summary.csv"),
    ("data_preparation", "data_wait_pct", False, "rank", "data_preparation.csv"),
    ("op_efficiency", "mfu_pct", True, "rank", "op_efficiency_steps.csv"),
    ("idle", "free_ms", False, "rank", "idle_breakdown.csv"),
    ("dispatch", "idle_before_launch_ms", False, "rank", "dispatch_steps.csv"),
    ("late_arrivals", "max_wait_ms", False, "late_rank", "late_arrivals.csv"),
    ("moe", "max_over_mean", False, "group", "moe_expert_load.csv"),
)


def _bound_lists(s: dict, ca, head: dict) -> list[tuple[str, str]]:
    """Replace, in ``s``, every list above MAX_ROWS rows by its bounded form; returns
    (which list, how many rows it had and shows) for each."""
    named = _named_ranks(ca)
    said: list[tuple] = []

    def note(label: str, v: dict, rank=None):
        b = v["bounded"]
        where = (f"all in {b['full_table']}" if b["full_table"] else
                 "grouped, nothing left out" if b["shown"] == b["rows"] else "")
        said.append((label if rank is None else f"{label} {rank}",
                     f"{b['rows']:,} rows, {b['shown']:,} shown" + (f", {where}" if where else "")))

    if is_bounded(s["ranks"]):
        note("ranks", s["ranks"])
    if is_bounded(head.get("steps")):
        note("headline steps", head["steps"])
    if len(s["sources"]) > MAX_ROWS:  # first: its step ids are every source's
        s["sources"] = _bound_sources(s["sources"], named)
        note("sources", s["sources"])
    for src in bounded_items(s["sources"]):
        if len(src.get("steps") or []) > MAX_ROWS:
            src["steps"] = _steps_value(sorted(src["steps"]))
            note("step ids of the source of rank", src["steps"], src.get("rank"))
    for key, label in (("breakdown_methods", "step breakdown method"),
                       ("missing", "missing files"), ("not_read", "files not read")):
        if len(s[key]) > MAX_ROWS:
            s[key] = _group_rank_map(s[key], label)
            note(key, s[key])
    if len(s["breakdown_check"]) > MAX_ROWS:
        checks = [dict(c, largest_deviation_pct=_largest_deviation(c))
                  for c in s["breakdown_check"]]
        v = _bound_rows(checks, score="largest_deviation_pct",
                        full_table="step_trace_check.csv", named=named)
        v["items"] = [{k: x for k, x in c.items() if k != "largest_deviation_pct"}
                      for c in v["items"]]
        v["counts"] = {"status": dict(Counter(c.get("status") for c in checks))}
        s["breakdown_check"] = v
        note("breakdown_check", v)
    if len(s["iterations"]) > MAX_ROWS:
        s["iterations"] = _bound_rows(s["iterations"], score="total_ms",
                                      full_table="iteration_trace.csv", named=named)
        note("iterations", s["iterations"])
    an = s["analyses"]
    for key, score, low, rank_key, full in _ANALYSIS_LISTS:
        rows = an.get(key)
        if isinstance(rows, list) and len(rows) > MAX_ROWS:
            an[key] = _bound_rows(rows, score=score, full_table=full,
                                  named=named if rank_key in ("rank", "late_rank") else set(),
                                  low_is_worse=low, rank_key=rank_key)
            note(f"analyses.{key}", an[key])
    return said


def _largest_deviation(c: dict):
    xs = [abs(m["deviation_pct"]) for m in (c.get("metrics") or {}).values()
          if isinstance(m, dict) and isinstance(m.get("deviation_pct"), (int, float))]
    return max(xs) if xs else None


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
