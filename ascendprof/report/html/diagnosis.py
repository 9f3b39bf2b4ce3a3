"""Diagnosis section: the run's facts (ranks, parallel layout, steps, profilers, what was
skipped) and the verdicts of verdicts.json as a causal story: cause, evidence, symptoms, next
step; advice.json's items when present."""

from __future__ import annotations

from collections import Counter

from markupsafe import Markup, escape

from ascendprof.model.ranks import rank_ranges
from ascendprof.report.bounded import is_bounded, items, rank_map
from ascendprof.report.bounded import total as bounded_total
from ascendprof.report.html.common import COLORS, Section, step_text
from ascendprof.report.headline import DEFINITIONS, headline

#: verdict cards shown open; the others are listed in a closed block by kind
OPEN_VERDICTS = 3
#: symptoms listed in a card; the others in a closed block
OPEN_SYMPTOMS = 3

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
    sources = items(summary.get("sources"))  # bounded: one of each kind, plus counts
    counts = summary["sources"].get("counts") or {} if is_bounded(summary.get("sources")) else {}
    ranks = d.ranks()
    if summary.get("root"):
        out.append(("input", summary["root"]))
    out.append(("ranks", f"{len(ranks)}: {rank_ranges(ranks, 8)}" if ranks else "none"))
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
    step_lists = ([summary["sources"].get("steps")] if counts else
                  [s.get("steps") for s in sources])
    steps = sorted({st for sl in step_lists for st in items(sl)})
    many = max((bounded_total(sl) for sl in step_lists if is_bounded(sl)), default=0)
    if rows is not None and not steps:
        steps = [s for s in dict.fromkeys(step_text(rows["Step"])) if s]
    if many:  # summary.json holds the first and the last step ids of many
        out.append(("steps", f"{many:,}: " + ", ".join(map(str, steps[:10]))
                    + f" … {steps[-1]}"))
    elif steps:
        out.append(("steps", ", ".join(map(str, steps[:20])) + (" …" if len(steps) > 20 else "")))
    kinds = Counter(counts.get("kind") or {}) or Counter(s.get("kind", "?") for s in sources)
    if kinds:
        out.append(("profilers", ", ".join(f"{n} × {k}" for k, n in kinds.items())))
    if counts:
        vers = Counter({("not recorded" if k == "None" else k): n
                        for k, n in (counts.get("versions") or {}).items()})
    else:
        vers = Counter(" / ".join(x for x in (s.get("framework_version"), s.get("cann_version"))
                                  if x) or "not recorded" for s in sources)
    if vers and (any(v != "not recorded" for v in vers) if counts else
                 any(s.get("framework_version") or s.get("cann_version") for s in sources)):
        out.append(("framework / CANN version", ", ".join(f"{v} ({n} ranks)"
                                                          for v, n in vers.items())))
    if counts:
        levels = Counter({("not recorded" if k == "None" else k): n
                          for k, n in (counts.get("profiler_level") or {}).items()})
    else:
        levels = Counter(s.get("profiler_level") or "not recorded" for s in sources)
    if levels and (any(v != "not recorded" for v in levels) if counts else
                   any(s.get("profiler_level") for s in sources)):
        out.append(("profiler level", ", ".join(f"{v} ({n} ranks)" for v, n in levels.items())))
    nw = summary.get("not_written") or {}
    if nw:
        out.append(("not written", "; ".join(f"{k}: {v}" for k, v in nw.items())))
    nr: dict[str, list] = {}
    for rank, files in rank_map(summary.get("not_read")).items():
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
    return "-" if v is None else str(v)


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
    """'pp (ranks 0, 2)' for one group of a name; '32 pp groups of 4' for many (sizes
    listed when they differ)."""
    by: dict[str, list] = {}
    for g in groups or []:
        if isinstance(g, dict):
            by.setdefault(str(g.get("name") or g.get("id") or "?"), []).append(
                g.get("global_ranks") or [])
        else:
            by.setdefault(str(g), []).append([])
    out = []
    for name, rs in by.items():
        if len(rs) == 1:
            out.append(f"{name} (ranks {rank_ranges(rs[0], 4)})" if rs[0] else name)
        else:
            sizes = sorted({len(r) for r in rs})
            of = (f" of {sizes[0]}" if len(sizes) == 1 else
                  f" of {'/'.join(map(str, sizes))}") if sizes != [0] else ""
            out.append(f"{len(rs)} {name} groups{of}")
    return "; ".join(out)


def _head_words(*words) -> str:
    """Header words without repeats ('stage · stage' -> 'stage')."""
    return " · ".join(dict.fromkeys(str(w) for w in words if w))


def verdict_html(v: dict, extra: str = "", evidence: bool = True) -> Markup:
    sev = str(v.get("severity", "info"))
    head = (f"<span class='badge {escape(sev)}'>{escape(sev)}</span>"
            + str(escape(_head_words(v.get("category", ""), v.get("scope", "")))))
    if v.get("ranks"):
        rs = v["ranks"]
        head += str(escape(f" · rank{'s' if len(rs) > 1 else ''} {rank_ranges(rs, 6)}"))
    if v.get("groups"):
        head += f" · groups {escape(_groups_text(v['groups']))}"
    parts = [f"<div class='verdict {escape(sev)}' data-verdict='{escape(v.get('id', ''))}'>",
             f"<div class='head'>{head}</div>",
             f"<p class='cause'><b>Cause:</b> {escape(v.get('message', ''))}</p>"]
    if v.get("next_step"):
        parts.append(f"<div class='next'><b>Next step:</b> {escape(v['next_step'])}</div>")
    syms = v.get("symptoms") or []
    if syms:
        items = "".join(f"<li>{escape(s.get('message', ''))}</li>"
                        for s in syms[:OPEN_SYMPTOMS])
        more = ""
        if len(syms) > OPEN_SYMPTOMS:
            more = (f"<details><summary>{len(syms) - OPEN_SYMPTOMS} more symptoms</summary>"
                    "<ul class='symptoms'>" + "".join(
                        f"<li>{escape(s.get('message', ''))}</li>"
                        for s in syms[OPEN_SYMPTOMS:]) + "</ul></details>")
        parts.append(f"<b>Symptoms</b> (consequences of this cause):<ul class='symptoms'>{items}"
                     f"</ul>{more}")
    if extra:
        parts.append(extra)
    ev = _flatten(v.get("evidence")) if evidence else []
    th = _flatten(v.get("threshold")) if evidence else []
    if not evidence:
        parts.append("<p class='note'>Evidence: this verdict in verdicts.json.</p>")
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
        at = f" · at stake {a['impact_us_per_step'] / 1000:,.1f} ms per step"
        if a.get("share_of_step_pct") is not None:
            at += f" ({a['share_of_step_pct']:.1f}% of the step)"
    head = (f"<span class='badge {escape(sev)}' title='severity: how sure and how serious; "
            f"the time at stake is the size'>{escape(sev)}</span>"
            + str(escape(_head_words(a.get("area", ""), a.get("title", a.get("id", ""))))))
    if a.get("ranks"):
        rs = a["ranks"]
        head += str(escape(f" · rank{'s' if len(rs) > 1 else ''} {rank_ranges(rs, 6)}"))
    items = "".join(f"<li>{escape(x)}</li>" for x in a.get("advice") or [])
    ev = _flatten(a.get("evidence"))
    return Markup(
        f"<div class='verdict {escape(sev)}' data-advice='{escape(a.get('id', ''))}'>"
        f"<div class='head'>{head}{escape(at)}</div><p>{escape(a.get('message', ''))}</p>"
        + (f"<ul>{items}</ul>" if items else "")
        + (f"<details><summary>Evidence (advice.json)</summary>{_kv(ev)}</details>" if ev else "")
        + "</div>")


def headline_html(d) -> Markup:
    """The answer first: step time, its split (a bar with the three parts, each with its
    definition on hover), the cause with its ranks, what to look at next. From summary.json's
    headline (computed from it when an older summary has none)."""
    summary = d.summary or {}
    h = summary.get("headline") or (headline(summary) if summary.get("ranks") is not None
                                    else None)
    if not h:
        return Markup("")
    parts = ["<section class='headline' id='headline'>"]
    if h.get("step_ms") is not None:
        slow = ("" if h.get("slowest_rank") is None or (h.get("ranks") or 0) < 2 else
                f"; slowest rank {h['slowest_rank']}: {h['slowest_step_ms']:,.1f} ms")
        n = h.get("ranks") or 0
        parts.append(f"<div class='step'><span class='def' title='{escape(DEFINITIONS['step'])}'>"
                     f"Step time {h['step_ms']:,.1f} ms</span> <small>mean of {n} rank"
                     f"{'s' if n != 1 else ''}{escape(slow)}</small></div>")
        split = h.get("split") or {}
        if split:
            total = sum(v["ms"] or 0 for v in split.values()) or 1.0
            bar = "".join(
                f"<span style='width:{100 * (v['ms'] or 0) / total:.2f}%;background:"
                f"{COLORS[k]}' title='{escape(k)}: {v['ms']:,.1f} ms ({v['pct']:.1f}%) — "
                f"{escape(DEFINITIONS[k])}'></span>" for k, v in split.items() if v["ms"])
            legend = "".join(
                f"<span class='def' title='{escape(DEFINITIONS[k])}'><i style='background:"
                f"{COLORS[k]}'></i>{escape(k)} <b>{v['ms']:,.1f} ms</b> ({v['pct']:.0f}%)</span>"
                for k, v in split.items() if v["ms"] is not None)
            parts.append(f"<div class='split'>{bar}</div><div class='legend'>{legend}</div>")
    c = h.get("cause") or {}
    if c:
        sev = c.get("severity") or "info"
        who = f" [{escape(c['ranks'])}]" if c.get("ranks") else ""
        parts.append(f"<p class='cause'><span class='badge {escape(sev)}'>{escape(sev)}</span>"
                     f"<b>Cause{who}:</b> {escape(c.get('text', ''))}</p>")
    if h.get("next"):
        parts.append(f"<div class='next'><b>Next:</b> {escape(h['next'])}</div>")
    parts.append("</section>")
    return Markup("".join(parts))


def reconcile_html(v: dict, d) -> str:
    """For a verdict whose symptoms measure a wait in pp ops: that wait per rank next to the
    same ranks' pp ops in cluster_communication.json (Elapse = Transit + Wait + Idle), so the
    two 'wait' numbers can be compared: the verdict measures the wait for the peer on the op
    timeline; the profiler splits the same time into its notify Wait and Idle."""
    tot = d.comm_totals
    if tot is None or not len(tot):
        return ""
    waits: dict[int, float] = {}
    for s in v.get("symptoms") or []:
        ev = s.get("evidence") or {}
        if isinstance(ev.get("wait_ms"), dict) and "pp ops" in s.get("message", ""):
            for r, ms in ev["wait_ms"].items():
                if str(r).isdigit() and isinstance(ms, (int, float)):
                    waits.setdefault(int(r), float(ms))
            break
    if not waits:
        return ""
    pp = tot[tot["Group"].astype(str) == "pp"]
    if not len(pp):
        return ""
    cols = ["Elapse Time(ms)", "Transit Time(ms)", "Wait Time(ms)", "Idle Time(ms)"]
    per = pp.groupby(["Rank", "Step"])[cols].sum().groupby("Rank").mean()
    rows = []
    for r in sorted(waits)[:8]:
        if r not in per.index:
            continue
        x = per.loc[r]
        rows.append(f"<tr><td>{r}</td><td>{waits[r]:,.1f}</td>"
                    + "".join(f"<td>{float(x[c]):,.1f}</td>" for c in cols)
                    + f"<td>{float(x['Wait Time(ms)'] + x['Idle Time(ms)']):,.1f}</td></tr>")
    if not rows:
        return ""
    more = f" (the first 8 of {len(waits)} ranks)" if len(waits) > 8 else ""
    head = ("<tr><th>rank</th><th title='measured by ascendprof on the op timeline: from the "
            "rank entering a pp op until its peer stage arrives'>wait for the peer stage "
            "(this verdict)</th><th title='the pp ops duration on this rank'>Elapse</th>"
            "<th title='data moving'>Transit</th><th title='the profiler&#39;s notify-wait "
            "time'>Wait</th><th title='the rest of the op: neither transit nor notify-wait'>"
            "Idle</th><th>Wait + Idle</th></tr>")
    return ("<details class='reconcile' open><summary>How this wait relates to the "
            "Communication section's Wait (ms per step)</summary>"
            "<p class='note'>The verdict's wait is the time a rank sits in pp ops until its "
            "peer stage arrives, measured on the op timeline. cluster_communication.json "
            "splits the same pp-op time (Elapse) into Transit, the profiler's notify Wait and "
            f"Idle; the verdict's wait compares with Wait + Idle{more}.</p>"
            f"<table class='numbers'><thead>{head}</thead><tbody>{''.join(rows)}</tbody>"
            "</table></details>")


def build(d, ctx) -> Section:
    sec = Section("diagnosis", "Diagnosis")
    vs = (d.verdicts or {}).get("verdicts") if d.verdicts is not None else None
    if vs is None:
        vs = (d.summary or {}).get("verdicts")
    if vs is None:
        sec.markup("<h3>Verdicts</h3><p class='missing'>Not in this analysis: no verdicts.json "
                   "in this output.</p>")
    else:
        vs = sorted(vs, key=lambda v: _SEV_ORDER.get(v.get("severity"), 3))
        cards = [verdict_html(v, reconcile_html(v, d) if i == 0 else "")
                 for i, v in enumerate(vs[:OPEN_VERDICTS])]
        rest = vs[OPEN_VERDICTS:]
        more = ""
        if rest:
            kinds = Counter(f"{v.get('severity')} {v.get('category')}" for v in rest)
            more = (f"<details class='more-verdicts'><summary>{len(rest)} more verdicts: "
                    + str(escape(", ".join(f"{n} {k}" for k, n in kinds.items())))
                    + "</summary>" + "".join(verdict_html(v, evidence=False) for v in rest)
                    + "</details>")
        sec.markup(f"<h3>Verdicts ({len(vs)}): what limits the job, and what to look at next"
                   f"</h3>" + ("".join(cards) + more if vs else
                               "<p>No verdict: nothing stood out against the thresholds.</p>"))
    if d.advice is not None:
        items = d.advice.get("items") or []
        sec.markup(f"<h3>Advice ({len(items)}): what to change</h3>" + (
            "".join(advice_html(a) for a in items[:30]) if items else "<p>No advice fired.</p>")
            + (f"<p class='note'>the first 30 of {len(items)}; all in advice.json</p>"
               if len(items) > 30 else ""))
    rows = "".join(f"<dt>{escape(k)}</dt><dd>{escape(v)}</dd>" for k, v in facts(d))
    sec.markup(f"<h3>The run</h3><dl class='facts'>{rows}</dl>")
    return sec
