"""Diagnosis section: the run's facts (ranks, parallel layout, steps, profilers, what was
skipped) and the verdicts of verdicts.json as a causal story: cause, evidence, symptoms, next
step; advice.json's items when present."""

from __future__ import annotations

from collections import Counter

from markupsafe import Markup, escape

from ascendprof.report.html.common import Section, ranks_text

_SEV_ORDER = {"critical": 0, "warning": 1, "info": 2}


def _distinct(df, col) -> int | None:
    if df is None or col not in df:
        return None
    import pandas as pd

    v = pd.to_numeric(df[col], errors="coerce").dropna()
    return int(v.nunique()) if len(v) else None


def facts(d) -> list[tuple[str, str]]:
    """(label, text) pairs describing the run, each read off an output file."""
    out: list[tuple[str, str]] = []
    summary = d.summary or {}
    sources = summary.get("sources", [])
    ranks = d.ranks()
    if summary.get("root"):
        out.append(("input", summary["root"]))
    out.append(("ranks", f"{len(ranks)}: {ranks_text(ranks)}" if ranks else "none"))
    rows = d.rank_rows()
    shape = [(k, _distinct(rows, f"{k} Index")) for k in ("TP", "PP", "DP")]
    if any(n for _, n in shape):
        out.append(("parallel layout", " × ".join(f"{k}{n}" for k, n in shape if n)
                    + " (DP/PP/TP Index of cluster_step_trace_time.csv)"))
    if d.group_names:
        sizes: dict[str, list[int]] = {}
        for g in (d.groups or {}).get("comm_group_parallel_info", []) or []:
            name = d.group_names.get(str(g.get("group_name", "")))
            if name:
                sizes.setdefault(name, []).append(len(g.get("rank_set") or []))
        out.append(("communication groups", "; ".join(
            f"{n} ×{len(s)} ({'/'.join(map(str, sorted(set(s))))} "
            f"rank{'' if set(s) == {1} else 's'})"
            for n, s in sorted(sizes.items()))))
    steps = sorted({st for s in sources for st in (s.get("steps") or [])})
    if rows is not None and not steps:
        steps = list(dict.fromkeys(rows["Step"].astype(str)))
    if steps:
        out.append(("steps", ", ".join(map(str, steps[:20])) + (" …" if len(steps) > 20 else "")))
    kinds = Counter(s.get("kind", "?") for s in sources)
    if kinds:
        out.append(("profilers", ", ".join(f"{n} × {k}" for k, n in kinds.items())))
    vers = Counter(" / ".join(x for x in (s.get("framework_version"), s.get("cann_version"))
                              if x) or "not recorded" for s in sources)
    if vers and any(s.get("framework_version") or s.get("cann_version") for s in sources):
        out.append(("framework / CANN version", ", ".join(f"{v} ({n} ranks)"
                                                          for v, n in vers.items())))
    levels = Counter(s.get("profiler_level") or "not recorded" for s in sources)
    if levels and any(s.get("profiler_level") for s in sources):
        out.append(("profiler level", ", ".join(f"{v} ({n} ranks)" for v, n in levels.items())))
    nw = summary.get("not_written") or {}
    if nw:
        out.append(("not written", "; ".join(f"{k}: {v}" for k, v in nw.items())))
    nr: dict[str, list] = {}
    for rank, files in (summary.get("not_read") or {}).items():
        for f in files:
            nr.setdefault(f, []).append(rank)
    if nr:
        out.append(("present but not needed", "; ".join(
            f"{f} of {len(r)} rank(s)" for f, r in nr.items())))
    if d.problems is not None:
        sev = Counter(d.problems["Severity"]) if len(d.problems) else {}
        out.append(("problems", ", ".join(f"{n} {s}" for s, n in sev.items()) or "none"
                    if len(d.problems) else "none"))
    return out


def _value(v) -> str:
    if isinstance(v, float):
        return f"{v:,.3f}".rstrip("0").rstrip(".") if abs(v) < 1e12 else repr(v)
    if isinstance(v, list):
        return ", ".join(_value(x) for x in v) if len(v) <= 16 else (
            ", ".join(_value(x) for x in v[:16]) + f", … ({len(v)})")
    if v is None:
        return "-"
    return str(v)


def _flatten(ev, prefix: str = "", depth: int = 0) -> list[tuple[str, str]]:
    """Evidence as (dotted key, value text) rows; deep structures are cut at depth 3."""
    rows = []
    for k, v in (ev or {}).items():
        key = f"{prefix}{k}"
        if isinstance(v, dict) and depth < 3 and v:
            rows += _flatten(v, key + ".", depth + 1)
        elif isinstance(v, dict):
            rows.append((key, str(v)[:300]))
        else:
            rows.append((key, _value(v)))
    return rows


def _kv(rows, limit: int = 80) -> str:
    body = "".join(f"<tr><td class='k'>{escape(k)}</td><td>{escape(v)}</td></tr>"
                   for k, v in rows[:limit])
    more = (f"<tr><td colspan=2>… {len(rows) - limit} more in the JSON file</td></tr>"
            if len(rows) > limit else "")
    return f"<table class='kv'>{body}{more}</table>"


def _groups_text(groups) -> str:
    out = []
    for g in groups or []:
        if isinstance(g, dict):
            name = g.get("name") or g.get("id") or "?"
            gr = g.get("global_ranks")
            out.append(f"{name} ({ranks_text(gr)})" if gr else str(name))
        else:
            out.append(str(g))
    return "; ".join(out)


def verdict_html(v: dict) -> Markup:
    sev = str(v.get("severity", "info"))
    head = (f"<span class='badge {escape(sev)}'>{escape(sev)}</span>"
            f"{escape(v.get('category', ''))} · {escape(v.get('scope', ''))}")
    if v.get("ranks"):
        head += f" · ranks {escape(ranks_text(v['ranks']))}"
    if v.get("groups"):
        head += f" · groups {escape(_groups_text(v['groups']))}"
    parts = [f"<div class='verdict {escape(sev)}' data-verdict='{escape(v.get('id', ''))}'>",
             f"<div class='head'>{head}</div>",
             f"<p class='cause'><b>Cause:</b> {escape(v.get('message', ''))}</p>"]
    if v.get("symptoms"):
        items = "".join(f"<li>{escape(s.get('message', ''))}</li>" for s in v["symptoms"])
        parts.append(f"<b>Symptoms</b> (consequences of this cause):<ul class='symptoms'>{items}"
                     f"</ul>")
    if v.get("next_step"):
        parts.append(f"<div class='next'><b>Next step:</b> {escape(v['next_step'])}</div>")
    ev = _flatten(v.get("evidence"))
    th = _flatten(v.get("threshold"))
    if ev or th:
        parts.append("<details><summary>Evidence (verdicts.json; units in the key names: "
                     "_ms, _pct, _gbps, _mb)</summary>" + _kv(ev + [("threshold." + k, x)
                                                                      for k, x in th])
                     + "</details>")
    parts.append("</div>")
    return Markup("".join(parts))


def advice_html(a: dict) -> Markup:
    sev = str(a.get("severity", "info"))
    at = ""
    if a.get("impact_us_per_step") is not None:
        at = f" · at stake {a['impact_us_per_step']:,.1f} µs per step"
        if a.get("share_of_step_pct") is not None:
            at += f" ({a['share_of_step_pct']:.1f} % of the step)"
    head = (f"<span class='badge {escape(sev)}'>{escape(sev)}</span>{escape(a.get('area', ''))}"
            f" · {escape(a.get('title', a.get('id', '')))}")
    if a.get("ranks"):
        head += f" · ranks {escape(ranks_text(a['ranks']))}"
    items = "".join(f"<li>{escape(x)}</li>" for x in a.get("advice") or [])
    ev = _flatten(a.get("evidence"))
    return Markup(
        f"<div class='verdict {escape(sev)}' data-advice='{escape(a.get('id', ''))}'>"
        f"<div class='head'>{head}{escape(at)}</div><p>{escape(a.get('message', ''))}</p>"
        + (f"<ul>{items}</ul>" if items else "")
        + (f"<details><summary>Evidence (advice.json)</summary>{_kv(ev)}</details>" if ev else "")
        + "</div>")


def build(d, ctx) -> Section:
    sec = Section("diagnosis", "Diagnosis")
    rows = "".join(f"<dt>{escape(k)}</dt><dd>{escape(v)}</dd>" for k, v in facts(d))
    sec.markup(f"<h3>The run</h3><dl class='facts'>{rows}</dl>")
    vs = (d.verdicts or {}).get("verdicts") if d.verdicts is not None else None
    if vs is None:
        vs = (d.summary or {}).get("verdicts")
    if vs is None:
        sec.markup("<h3>Verdicts</h3><p class='missing'>Not in this analysis: no verdicts.json "
                   "in this output.</p>")
    else:
        vs = sorted(vs, key=lambda v: _SEV_ORDER.get(v.get("severity"), 3))
        sec.markup(f"<h3>Verdicts ({len(vs)}): what limits the job, and what to look at next"
                   f"</h3>" + ("".join(verdict_html(v) for v in vs) if vs else
                               "<p>No verdict: nothing stood out against the thresholds.</p>"))
    if d.advice is not None:
        items = d.advice.get("items") or []
        sec.markup(f"<h3>Advice ({len(items)}): what to change</h3>" + (
            "".join(advice_html(a) for a in items[:30]) if items else "<p>No advice fired.</p>")
            + (f"<p class='note'>the first 30 of {len(items)}; all in advice.json</p>"
               if len(items) > 30 else ""))
    return sec
