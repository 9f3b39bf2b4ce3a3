"""Rich terminal rendering of scan results and analysis summaries (stderr stays for errors)."""

from __future__ import annotations

import re
import sys

from ascendprof.model.problems import printable

#: C0 and C1 control characters but TAB and LF: an ESC or BEL from a name in the data would
#: otherwise reach the terminal raw (recolour it, set its title, clear the screen)
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def control_safe(text) -> str:
    """``text`` with every control character (ESC, BEL, CR, NUL …) shown as ``\\xNN``."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", str(text))


def term_text(text) -> str:
    """``text`` from the data, safe to give to rich: control characters shown as ``\\xNN``
    (:func:`control_safe`) and rich markup escaped (a name like ``[red]x`` shown as written)."""
    from rich.markup import escape

    return escape(control_safe(text))


def _safe_doc(obj):
    """``obj`` (summary.json's data) with every string made :func:`term_text`."""
    if isinstance(obj, str):
        return term_text(obj)
    if isinstance(obj, dict):
        return {k: _safe_doc(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_safe_doc(v) for v in obj]
    return obj


_SHORT = [("computing_ns", "Comp"), ("comm_not_overlapped_ns", "CommNO"),
          ("overlapped_ns", "Ovlp"), ("communication_ns", "Comm"), ("free_ns", "Free"),
          ("stage_ns", "Stage"), ("bubble_ns", "Bubble"), ("preparing_ns", "Prep")]
_LEGEND = ("Comp Computing, CommNO Communication(Not Overlapped), Ovlp Overlapped, Comm "
           "Communication, Prep Preparing; Src rep = profiler's step_trace_time, re = recomputed")

_SEV_STYLE = {"critical": "bold red", "warning": "yellow", "info": "cyan"}


def _console():
    from rich.console import Console  # deferred: plain scan output needs no rich (60 ms import)

    con = Console(highlight=False, soft_wrap=False)
    if not con.is_terminal:  # piped or captured: rich would assume 80 columns
        con = Console(highlight=False, soft_wrap=False, width=140)
    return con


_SCAN_COLUMNS = ("Rank", "Kind", "Device", "Level", "Versions", "Steps", "Analyses", "Path")
#: Above this many sources, or when stdout is not a terminal, the scan table is plain aligned
#: text: rich lays out a boxed table cell by cell (0.4 s for 256 ranks, more than the scan).
RICH_SCAN_MAX_ROWS = 64


def _scan_row(s) -> tuple[str, ...]:
    vers = " / ".join(v for v in (s.framework_version, s.cann_version) if v) or "-"
    return tuple(control_safe(c) for c in (
        "?" if s.rank is None else str(s.rank), s.label,
        "-" if s.device_id is None else str(s.device_id), s.profiler_level or "-",
        vers, ",".join(map(str, s.steps)) or "-", ", ".join(s.analyses) or "-",
        printable(s.path)))


def print_scan(sources, problems, out=None, runs=None) -> None:
    """One row per source (rank, kind, device, level, versions, steps, analyses, path), then the
    problems. A rich boxed table on a terminal for up to :data:`RICH_SCAN_MAX_ROWS` sources,
    else plain aligned columns, one line per source (fast, and easy to grep). ``out`` (a text
    stream, default stdout) forces the plain form. With several ``runs`` (runs.Run), sources are
    listed run by run with a Run column (the run's number), and the runs are listed after."""
    columns = _SCAN_COLUMNS
    if runs and len(runs) > 1:
        number = {r.name: i for i, r in enumerate(runs, 1)}
        sources = [s for r in runs for s in r.sources]
        rows = [(str(number.get(s.run, "?")),) + _scan_row(s) for s in sources]
        columns = ("Run",) + _SCAN_COLUMNS
    else:
        rows = [_scan_row(s) for s in sources]
    problems = list(problems)
    stream = out or sys.stdout
    _print_sources(sources, rows, columns, problems, out, stream)
    if runs and len(runs) > 1:
        stream.write(f"{len(runs)} runs (different jobs or collections; analyse one at a time: "
                     f"its path, or analyse --run NAME, or --each-run):\n")
        for i, r in enumerate(runs, 1):
            stream.write(f"  {i:>3}  {control_safe(r.describe())}\n")
        stream.flush()


def _print_sources(sources, rows, columns, problems, out, stream) -> None:
    if out is None and len(rows) <= RICH_SCAN_MAX_ROWS and stream.isatty():
        from rich.table import Table

        con = _console()
        t = Table(title=f"{len(sources)} profiling source(s)", show_lines=False)
        for c in columns:
            t.add_column(c, overflow="fold")
        for r in rows:
            t.add_row(*(term_text(c) for c in r))
        con.print(t)
        _print_problems(con, problems)
        return
    stream.write(_plain_table(f"{len(sources)} profiling source(s)", columns, rows))
    if problems:
        stream.write(f"{len(problems)} note(s) on the input:\n")
        for p in problems[:50]:
            stream.write(f"  {p.severity} {control_safe(p.line())}\n")
        if len(problems) > 50:
            stream.write(f"  ... and {len(problems) - 50} more in problems.csv\n")
    stream.flush()


def _plain_table(title: str, header: tuple[str, ...], rows: list[tuple[str, ...]]) -> str:
    """Left-aligned columns two spaces apart; the last column is not padded."""
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(header)]
    lines = [title]
    for r in [header, *rows]:
        cells = [c.ljust(w) for c, w in zip(r[:-1], widths)] + [r[-1]]
        lines.append("  ".join(cells))
    return "\n".join(lines) + "\n"


def _print_problems(con, problems) -> None:
    if not problems:
        return
    con.print(f"[bold]{len(problems)} note(s) on the input:[/bold]")
    for p in problems[:50]:
        style = "yellow" if p.severity == "warning" else "red"
        con.print(f"  [{style}]{p.severity}[/{style}] {term_text(p.line())}")
    if len(problems) > 50:
        con.print(f"  ... and {len(problems) - 50} more in problems.csv")


#: Above this many (rank, step) rows the terminal shows the ones with the longest steps only:
#: a 1000-rank table helps nobody on a screen (and rich takes ~1 ms per row to lay it out);
#: every row is in cluster_step_trace_time.csv and summary.json.
MAX_BREAKDOWN_ROWS = 32


def _step_us(r: dict) -> float:
    """A row's step time: Computing + Communication(Not Overlapped) + Free (us)."""
    return sum(r.get(k) or 0 for k in ("computing_us", "comm_not_overlapped_us", "free_us"))


def _breakdown_rows(rows: list[dict]) -> tuple[list[dict], str]:
    if len(rows) <= MAX_BREAKDOWN_ROWS:
        return rows, "Step breakdown per rank (ms)"
    keep = sorted(rows, key=_step_us, reverse=True)[:MAX_BREAKDOWN_ROWS]
    keep.sort(key=lambda r: (r["rank"], r["step"] is None, r["step"] or 0))
    return keep, (f"Step breakdown per rank (ms): the {len(keep)} longest of {len(rows)} "
                  f"rank-steps (all in cluster_step_trace_time.csv)")


def print_summary(summary: dict, out_dir) -> None:
    from rich.table import Table

    raw, summary = summary, _safe_doc(summary)  # names from the data: no control, no markup
    con = _console()
    con.print(f"[bold]ascendprof {summary['version']}[/bold] - {summary['root']}")
    kinds = {}
    for s in summary["sources"]:
        kinds[s["kind"]] = kinds.get(s["kind"], 0) + 1
    con.print("Sources: " + ", ".join(f"{n} {k}" for k, n in kinds.items()))
    if summary["ranks"]:
        rows, title = _breakdown_rows(summary["ranks"])
        t = Table(title=title, caption=_LEGEND)
        for c in ("Rank", "Step") + tuple(short for _, short in _SHORT):
            t.add_column(c, justify="right")
        t.add_column("Src")
        for r in rows:
            vals = []
            for col, _ in _SHORT:
                v = r.get(col[:-3] + "_us")
                vals.append("-" if v is None else f"{v / 1000:.1f}")
            t.add_row(str(r["rank"]), "-" if r["step"] is None else str(r["step"]), *vals,
                      "rep" if r["origin"] == "reported" else "re")
        con.print(t)
    if summary.get("iterations"):  # graph mode: the profiler's own per-step trace
        t = Table(title="Iteration trace per rank (ms, mean over the steps)")
        for c in ("Rank", "Steps", "Interval", "FP+BP", "Tail", "Total"):
            t.add_column(c, justify="right")
        for r in summary["iterations"]:
            t.add_row(str(r["rank"]), str(r["steps"]), f"{r['iteration_interval_ms']:.3f}",
                      f"{r['fp_bp_ms']:.3f}", f"{r['tail_ms']:.3f}", f"{r['total_ms']:.3f}")
        con.print(t)
    if summary["top_op_types"]:
        t = Table(title="Top op types (cluster)")
        for c in ("OP Type", "Accelerator Core", "Count", "Total (ms)", "Ratio (%)"):
            t.add_column(c, justify="right" if c[0] in "CTR" and c != "OP Type" else "left")
        for o in summary["top_op_types"]:
            t.add_row(o["op_type"], o["accelerator_core"], str(o["count"]),
                      f"{o['total_us'] / 1000:.2f}", f"{o['ratio_pct']:.1f}")
        con.print(t)
    _print_analyses(con, summary.get("analyses") or {})
    not_read: dict[str, list] = {}
    for rank, files in (summary.get("not_read") or {}).items():
        for f in files:
            not_read.setdefault(f, []).append(rank)
    for f, ranks in not_read.items():
        con.print(f"Not read (not needed): {f} of {len(ranks)} rank(s); --timeline reads it")
    vs = summary["verdicts"]
    con.print(f"[bold]Verdicts ({len(vs)})[/bold]")
    for v in vs:
        style = _SEV_STYLE.get(v.get("severity"), "")
        con.print(f"  [{style}]{v.get('severity', ''):8}[/{style}] [{v.get('category')}] "
                  f"{v.get('message', '')}")
        syms = v.get("symptoms") or []
        for sym in syms[:3]:
            con.print(f"           symptom: {sym.get('message', '')}")
        if len(syms) > 3:
            con.print(f"           (+{len(syms) - 3} more symptoms in verdicts.json)")
        if v.get("next_step"):
            con.print(f"           next: {v['next_step']}")
    _print_advice(con, summary.get("advice"))
    from types import SimpleNamespace

    probs = [SimpleNamespace(severity=p["severity"], line=lambda p=p: _pline(p))
             for p in raw["problems"]]  # escaped by _print_problems
    _print_problems(con, probs)
    for name, why in summary.get("not_written", {}).items():
        con.print(f"  [dim]not written:[/dim] {name}: {why}")
    con.print(f"Results written to [bold]{term_text(printable(out_dir))}[/bold]")


def _print_advice(con, adv: dict | None) -> None:
    """The advice items of the summary (the top ones, or all with --advice all)."""
    if not adv:
        return
    more = (f"; the top {adv['shown']} here, all in advice.json / advice.csv"
            if adv["shown"] < adv["count"] else "")
    con.print(f"[bold]Advice ({adv['count']}{more})[/bold]")
    for a in adv["items"]:
        style = _SEV_STYLE.get(a.get("severity"), "")
        con.print(f"  [{style}]{a['severity']:8}[/{style}] [{a['area']}] {a['message']}")
        if a.get("advice"):
            con.print(f"           do: {a['advice']}")


def _pline(p: dict) -> str:
    loc = f" at {p['where']}" if p.get("where") else ""
    who = f"rank {p['rank']}: " if p.get("rank") is not None else ""
    return f"{who}{p['path']}{loc}: {p['reason']}"


def _print_analyses(con, a: dict) -> None:
    """One or a few lines each for the pipeline, memory, data preparation and expert-load
    analyses (their files hold the details)."""
    def ms(v):
        return "-" if v is None else f"{v:.1f} ms"

    for st in a.get("pipeline") or []:
        mb = f", 1F1B with {st['micro_batches']} micro-batches" if st.get("micro_batches") else ""
        pct = "" if st.get("bubble_pct") is None else f" ({st['bubble_pct']:.1f}% of the stage)"
        ranks = str(st["ranks"]).strip("()").rstrip(",")
        con.print(f"Pipeline stage {st['stage']} (ranks {ranks}): compute "
                  f"{ms(st.get('computing_ms'))}, bubble {ms(st.get('bubble_ms'))}{pct}{mb} "
                  f"(pipeline.csv)")
    mem = [m for m in a.get("memory") or [] if m.get("peak_allocated_mb") is not None]
    if mem:
        hi = max(mem, key=lambda m: m["peak_allocated_mb"])
        lo = min(mem, key=lambda m: m["peak_allocated_mb"])
        cap = "" if hi.get("capacity_pct") is None else f", {hi['capacity_pct']:.1f}% of capacity"
        con.print(f"Memory: peak allocated {hi['peak_allocated_mb']:.0f} MB on rank {hi['rank']} "
                  f"({hi['component']}{cap}), lowest {lo['peak_allocated_mb']:.0f} MB on rank "
                  f"{lo['rank']} (memory_summary.csv)")
    dp = [d for d in a.get("data_preparation") or [] if d.get("data_wait_pct") is not None]
    if dp:
        w = max(dp, key=lambda d: d["data_wait_pct"])
        extra = ""
        if w.get("bottleneck_stage") == "none":
            extra = "; the device never waited for a batch"
        elif w.get("bottleneck_stage"):
            extra = f"; bottleneck: {w['bottleneck_stage']}"
        if w.get("bottleneck_operator"):
            extra += f"; slowest dataset operator {w['bottleneck_operator']}"
        con.print(f"Data preparation: up to {w['data_wait_ms']:.2f} ms per step "
                  f"({w['data_wait_pct']:.1f}% of the step, {w['source']}) on rank {w['rank']}"
                  f"{extra} (data_preparation.csv)")
    for g in a.get("moe") or []:
        con.print(f"Expert load, EP group {g['group']}: max / mean tokens "
                  f"{g['max_over_mean']:.2f} (moe_expert_load.csv)")
