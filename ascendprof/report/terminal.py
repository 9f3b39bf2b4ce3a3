"""Rich terminal rendering of scan results and analysis summaries (stderr stays for errors)."""

from __future__ import annotations

import os
import re
import sys

from ascendprof.model.problems import printable
from ascendprof.model.ranks import rank_ranges, ranks_phrase
from ascendprof.report.bounded import is_bounded, items, rank_map, total
from ascendprof.report.headline import first_sentence, group_problems, headline, headline_lines

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


#: the step breakdown columns the terminal shows (all nine are in cluster_step_trace_time.csv);
#: a column that is 0 or missing on every row is left out
_SHORT = [("computing_ns", "Comp"), ("comm_not_overlapped_ns", "CommNO"), ("free_ns", "Free"),
          ("overlapped_ns", "Ovlp"), ("bubble_ns", "Bubble"), ("preparing_ns", "Prep")]
_LEGEND = {"Comp": "Computing", "CommNO": "Communication(Not Overlapped)",
           "Free": "Free (device idle)", "Ovlp": "communication overlapped by compute",
           "Bubble": "the profiler's Bubble column (the pipeline bubble below is recomputed)",
           "Prep": "Preparing", "Step": "Comp + CommNO + Free"}

_SEV_STYLE = {"critical": "bold red", "warning": "yellow", "info": "cyan"}


def _console():
    from rich.console import Console  # deferred: plain scan output needs no rich (60 ms import)

    con = Console(highlight=False, soft_wrap=False)
    if not con.is_terminal and not os.environ.get("COLUMNS", "").isdigit():
        # piped or captured without COLUMNS: rich would assume 80 columns
        con = Console(highlight=False, soft_wrap=False, width=140)
    return con


_SCAN_COLUMNS = ("Rank", "Kind", "Dev", "Level", "Versions", "Steps", "Analyses", "Path")
#: every analysis a source may allow (scan.walk.ANALYSES); a row lists only what it lacks
_ALL_ANALYSES = ("step_breakdown", "cluster_step_trace", "communication", "communication_matrix",
                 "op_statistics", "verdicts")


def _analyses_text(analyses) -> str:
    """'all', 'all but op_statistics', or the list when fewer than half are there."""
    have = [a for a in analyses]
    missing = [a for a in _ALL_ANALYSES if a not in have]
    if not missing:
        return "all"
    if len(missing) <= 2:
        return "no " + ", ".join(missing)
    return ", ".join(have) or "-"

#: Above this many sources, or when stdout is not a terminal, the scan table is plain aligned
#: text: rich lays out a boxed table cell by cell (0.4 s for 256 ranks, more than the scan).
RICH_SCAN_MAX_ROWS = 64


def _scan_row(s) -> tuple[str, ...]:
    vers = "/".join(v for v in (s.framework_version, s.cann_version) if v) or "-"

    steps = rank_ranges(s.steps, 3) if s.steps and all(
        isinstance(x, int) for x in s.steps) else ",".join(map(str, s.steps))
    return tuple(control_safe(c) for c in (
        "?" if s.rank is None else str(s.rank), s.label,
        "-" if s.device_id is None else str(s.device_id), s.profiler_level or "-",
        vers, steps or "-", _analyses_text(s.analyses), printable(s.path)))


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
        from rich import box

        t = Table(title=f"{len(sources)} profiling source(s); Analyses: what the files allow "
                        f"(all: {', '.join(_ALL_ANALYSES)})", show_lines=False,
                  box=box.SIMPLE_HEAD, padding=(0, 1), pad_edge=False, title_justify="left")
        for c in columns:
            t.add_column(c, overflow="fold", no_wrap=c not in ("Path", "Analyses"))
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


#: Up to this many ranks the step breakdown shows every (rank, step) row; above it, the
#: :data:`TOP_RANKS` longest steps and the distribution of each column over all ranks (every
#: row is in cluster_step_trace_time.csv and summary.json).
MAX_BREAKDOWN_ROWS = 16
TOP_RANKS = 5
#: verdicts listed one by one up to this many; beyond, one line per category
MAX_VERDICT_LINES = 4
#: pipeline stages listed one per line
MAX_STAGE_LINES = 4
#: note kinds listed (each kind is one line with its rank ranges)
MAX_NOTE_KINDS = 6


def _step_us(r: dict) -> float:
    """A row's step time: Computing + Communication(Not Overlapped) + Free (us)."""
    return sum(r.get(k) or 0 for k in ("computing_us", "comm_not_overlapped_us", "free_us"))


def _ms(v) -> str:
    return "-" if v is None else f"{v / 1000:,.1f}"


def _percentile(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    i = (len(xs) - 1) * q
    lo = int(i)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (i - lo)


def _breakdown_table(ranks):
    """The step breakdown: every row up to MAX_BREAKDOWN_ROWS, else the TOP_RANKS longest
    steps then min / median / max of each column over all rows (summary.json's spread when
    its rows are bounded). Numbers are never cut: each column is as wide as its widest
    number."""
    from rich import box
    from rich.table import Table

    rows, n = items(ranks), total(ranks)
    spread = ranks.get("spread") or {} if is_bounded(ranks) else None
    def shown(col):
        sp = (spread or {}).get(col) or {}
        return any(r.get(col) for r in rows) or bool(sp.get("max") or sp.get("min"))

    cols = [(c[:-3] + "_us", short) for c, short in _SHORT if shown(c[:-3] + "_us")]
    big = n > MAX_BREAKDOWN_ROWS
    if big:
        keep = sorted(rows, key=_step_us, reverse=True)[:TOP_RANKS]
        title = f"Step breakdown (ms): {len(keep)} longest of {n:,} rank-steps, spread"
    else:
        keep = rows
        title = "Step breakdown per rank (ms)"
    body = []
    for r in keep:
        body.append([str(r["rank"]), "-" if r["step"] is None else str(r["step"]),
                     _ms(_step_us(r))] + [_ms(r.get(c)) for c, _ in cols]
                    + ["rep" if r["origin"] == "reported" else "re"])
    dist = []
    if spread is not None:  # over every row, as summary.json gives it
        for name in ("min", "median", "max"):
            vals = [(spread.get("step_us") or {}).get(name)]
            for c, _ in cols:
                vals.append((spread.get(c) or {}).get(name))
            dist.append([name, "", *[_ms(v) for v in vals], ""])
    elif big:
        for name, q in (("min", 0.0), ("median", 0.5), ("max", 1.0)):
            vals = [_percentile([_step_us(r) for r in rows], q)]
            for c, _ in cols:
                xs = [r.get(c) for r in rows if r.get(c) is not None]
                vals.append(_percentile(xs, q) if xs else None)
            dist.append([name, "", *[_ms(v) for v in vals], ""])
    mixed = len({r["origin"] for r in rows}) > 1
    header = ["Rank", "Step", "Total"] + [short for _, short in cols] + ["Src"]
    if not mixed:
        header.pop()
        body = [b[:-1] for b in body]
        dist = [d[:-1] for d in dist]
        title = title.replace("(ms", "(ms, " + ("the profiler's" if rows[0]["origin"] ==
                                                "reported" else "recomputed"), 1)
        src = ""
    else:
        src = "; Src: rep the profiler's, re recomputed"
    legend = "; ".join(f"{h} = {_LEGEND['Step' if h == 'Total' else h]}"
                       for h in header[2:] if h not in ("Comp", "Free", "Prep", "Src"))
    from rich.console import Group
    from rich.text import Text

    t = Table(box=box.SIMPLE_HEAD, show_edge=False, padding=(0, 1))
    for i, h in enumerate(header):
        width = max([len(h)] + [len(b[i]) for b in body + dist])
        t.add_column(h, justify="left" if h == "Src" else "right", min_width=width,
                     no_wrap=True)
    for b in body:
        t.add_row(*b)
    for d in dist:
        t.add_row(*d, style="dim")
    return Group(Text(title, style="bold"), t, Text(legend + src, style="dim"))


def print_summary(summary: dict, out_dir) -> None:
    """The analysis in a few screens at most, answer first: the headline (step time, its
    split, the cause with its ranks, what to look at next), the verdicts (one line per
    category beyond a few), the step breakdown (top ranks and the spread beyond a few dozen
    rank-steps), top op types, the other analyses, advice, the notes on the input grouped by
    kind with their rank ranges, where the results are."""
    con = _console()
    kinds = {}
    if is_bounded(summary["sources"]):  # more sources than summary.json lists: their counts
        kinds = dict(summary["sources"].get("counts", {}).get("kind") or {})
    for s in items(summary["sources"]) if not kinds else []:
        kinds[s["kind"]] = kinds.get(s["kind"], 0) + 1
    head = (f"ascendprof {summary['version']}: "
            + ", ".join(f"{n} {k}" for k, n in kinds.items()) + " in ")
    root = printable(summary["root"])
    room = max(20, con.width - len(head))
    if len(root) > room:  # keep the end of the path (the job's own directory names)
        root = "…" + root[-(room - 1):]
    con.print(_bold(head) + _esc(root))
    h = summary.get("headline") or headline(summary)
    for i, line in enumerate(headline_lines(h)):
        con.print(_bold(line) if i == 0 else _esc(line))
    compact = total(summary["sources"]) > MAX_BREAKDOWN_ROWS
    _print_verdicts(con, summary.get("verdicts") or [], h, compact)
    if items(summary["ranks"]):
        con.print(_breakdown_table(summary["ranks"]))
    if summary.get("iterations"):  # graph mode: the profiler's own per-step trace
        from rich import box
        from rich.table import Table

        t = Table(title="Iteration trace per rank (ms, mean over the steps)",
                  box=box.SIMPLE_HEAD, show_edge=False)
        for c in ("Rank", "Steps", "Interval", "FP+BP", "Tail", "Total"):
            t.add_column(c, justify="right", no_wrap=True)
        its = items(summary["iterations"])  # bounded: the longest ones
        if len(its) > MAX_BREAKDOWN_ROWS or is_bounded(summary["iterations"]):
            its = sorted(its, key=lambda r: -r["total_ms"])[:TOP_RANKS]
        for r in its:
            t.add_row(str(r["rank"]), str(r["steps"]), f"{r['iteration_interval_ms']:.3f}",
                      f"{r['fp_bp_ms']:.3f}", f"{r['tail_ms']:.3f}", f"{r['total_ms']:.3f}")
        con.print(t)
    if summary["top_op_types"] and compact:
        con.print(_esc("Top op types: " + ", ".join(
            f"{o['op_type']} {o['ratio_pct']:.1f}%" for o in summary["top_op_types"][:3])
            + " of op time"))
    elif summary["top_op_types"]:
        from rich import box
        from rich.table import Table

        t = Table(title="Top op types (cluster, all ranks and steps)", box=box.SIMPLE_HEAD,
                  show_edge=False)
        t.add_column("OP Type", overflow="fold")
        t.add_column("Core", overflow="fold")
        for c in ("Count", "Total ms", "% of ops"):
            t.add_column(c, justify="right", no_wrap=True)
        for o in summary["top_op_types"][:3 if compact else 5]:
            t.add_row(_esc(o["op_type"]), _esc(o["accelerator_core"]), str(o["count"]),
                      f"{o['total_us'] / 1000:,.2f}", f"{o['ratio_pct']:.1f}")
        con.print(t)
    _print_analyses(con, summary.get("analyses") or {}, compact)
    not_read: dict[str, list] = {}
    for rank, files in rank_map(summary.get("not_read")).items():
        for f in files:
            not_read.setdefault(f, []).append(int(rank))
    for f, ranks in not_read.items():
        con.print(_esc(f"Not read (not needed): {f} of {len(ranks)} rank(s); "
                       f"--timeline reads it"))
    _print_advice(con, summary.get("advice"), 5, compact)
    notes = summary.get("notes")
    if notes is None:
        notes = group_problems(items(summary["problems"]))
    _print_notes(con, notes, total(summary["problems"]), rank_ranges, compact)
    for name, why in summary.get("not_written", {}).items():
        con.print(f"  [dim]not written:[/dim] {_esc(name)}: {_esc(why)}")
    con.print(f"Results written to [bold]{_esc(printable(out_dir))}[/bold]")


_esc = term_text  # text from the data, safe for rich: control characters shown, markup escaped


def _bold(text: str) -> str:
    return f"[bold]{_esc(text)}[/bold]"


def _print_verdicts(con, vs: list[dict], h: dict, compact: bool = False) -> None:
    """Verdicts one by one (message, up to two symptoms for the first, next step) up to
    MAX_VERDICT_LINES; beyond, the first in full and one line per category with its count,
    severity and ranks."""
    if not vs:
        con.print("[bold]Verdicts (0)[/bold]: nothing found beyond the thresholds")
        return
    shown = vs if len(vs) <= MAX_VERDICT_LINES else vs[:1]
    cause = h.get("cause") or {}
    if len(shown) < len(vs) and vs[0].get("id") == cause.get("verdict"):
        con.print(f"[bold]Verdicts ({len(vs)}, all in verdicts.json)[/bold]: the cause above, "
                  f"then by kind:")
        shown = []
    else:
        con.print(f"[bold]Verdicts ({len(vs)})[/bold]" + (
            "" if len(vs) <= MAX_VERDICT_LINES else "; by kind, all in verdicts.json"))
    for i, v in enumerate(shown):
        style = _SEV_STYLE.get(v.get("severity"), "")
        sev = v.get("severity", "")
        is_cause = bool(v.get("id")) and v.get("id") == cause.get("verdict")
        text = ("the cause above" if is_cause
                else first_sentence(v.get("message", ""), 56 if compact else 400))
        con.print(f"  [{style}]{sev:8}[/{style}] \\[{_esc(v.get('category'))}] " + _esc(text))
        syms = v.get("symptoms") or []
        if i == 0:
            n = 0 if compact else 2
            for sym in syms[:n]:
                con.print("           symptom: " + _esc(first_sentence(
                    sym.get("message", ""), 150 if compact else 240)))
            if len(syms) > n and not compact:
                con.print(f"           (+{len(syms) - n} more symptoms in verdicts.json)")
        if v.get("next_step") and not is_cause and not compact:
            con.print("           next: " + _esc(first_sentence(v["next_step"], 300)))
    if len(vs) > len(shown):
        cats: dict[tuple, list] = {}
        for v in vs[1:]:
            cats.setdefault((v.get("severity"), v.get("category")), []).append(v)
        for (sev, cat), group in list(cats.items())[:MAX_VERDICT_LINES]:
            style = _SEV_STYLE.get(sev, "")
            ranks = sorted({r for v in group for r in v.get("ranks") or []})
            con.print(f"  [{style}]{sev:8}[/{style}] \\[{_esc(cat)}] {len(group)} verdict"
                      f"{'s' if len(group) > 1 else ''}"
                      + (f", ranks {rank_ranges(ranks, 4)}" if ranks else ""))
        if len(cats) > MAX_VERDICT_LINES:
            rest = sum(len(g) for g in list(cats.values())[MAX_VERDICT_LINES:])
            con.print(f"           (+{rest} more in {len(cats) - MAX_VERDICT_LINES} "
                      f"categories)")


def _print_notes(con, notes: list[dict], total: int, rank_ranges, compact=False) -> None:
    """The notes on the input, one line per kind with the ranks it covers."""
    if not notes:
        return
    con.print(f"[bold]{total} note(s) on the input[/bold]"
              + (f", {len(notes)} kind(s)" if len(notes) < total else "")
              + "; all in problems.csv")
    for k in notes[:MAX_NOTE_KINDS]:
        style = "yellow" if k["severity"] == "warning" else "red"
        if k["count"] == 1:  # one note: as problems.csv has it (rank, file, place, reason)
            loc = f" at {k['where']}" if k.get("where") else ""
            rk = f"rank {k['ranks'][0]}: " if k["ranks"] else ""
            con.print(f"  [{style}]{k['severity']}[/{style}] "
                      + _esc(f"{rk}{k.get('path') or ''}{loc}: {k['reason']}"))
            continue
        who = (f"ranks {rank_ranges(k['ranks'], 4)}" if len(set(k["ranks"])) > 1 else
               f"rank {k['ranks'][0]}" if k["ranks"] else _esc(k.get("path") or ""))
        where = f"{k['where']}: " if k.get("where") else ""

        if k["same"]:
            reason = first_sentence(k["reason"], 160) if compact else k["reason"]
        else:
            if compact:
                m = re.search(r"\s\S*\d", k["reason"])
                reason = (k["reason"][:m.start()] if m else k["reason"]) + " …"
            else:
                reason = (first_sentence(k["reason"], 160)
                          + f" (rank {k['example_rank']}; each rank's own in problems.csv)")
        count = (f" ({k['count']})" if compact else f" ({k['count']} notes)"
                 ) if k["count"] > 1 else ""
        con.print(f"  [{style}]{k['severity']}[/{style}] {who}{count}: {_esc(where + reason)}")
    if len(notes) > MAX_NOTE_KINDS:
        rest = sum(k["count"] for k in notes[MAX_NOTE_KINDS:])
        con.print(f"  ... and {rest} more note(s) of {len(notes) - MAX_NOTE_KINDS} other "
                  f"kind(s) in problems.csv")


def _print_advice(con, adv: dict | None, top: int = 5, compact: bool = False) -> None:
    """The advice items of the summary (the top ``top``, or all with --advice all); compact:
    one line each (severity, area, title, ranks)."""
    if not adv:
        return
    items = adv["items"] if adv.get("mode") == "all" else adv["items"][:top]
    more = (f"; the top {len(items)} here, all in advice.json / advice.csv"
            if len(items) < adv["count"] else "")
    con.print(f"[bold]Advice ({adv['count']}{more})[/bold]")
    for a in items:
        style = _SEV_STYLE.get(a.get("severity"), "")
        if compact and a.get("title"):
            rs = a.get("ranks") or []
            who = (f" ({ranks_phrase(rs, 2)})" if len(rs) <= 3 else
                   f" ({len(rs)} ranks: {rs[0]}, {rs[1]} …)")
            con.print(f"  [{style}]{a['severity']:8}[/{style}] " + _esc(a["title"] + who))
            continue
        con.print(f"  [{style}]{a['severity']:8}[/{style}] \\[{_esc(a['area'])}] "
                  + _esc(a["message"]))
        if a.get("advice"):
            con.print("           do: " + _esc(a["advice"]))


def _print_analyses(con, a: dict, compact: bool = False) -> None:
    """One or a few lines each for the pipeline, memory, data preparation and expert-load
    analyses (their files hold the details)."""
    def ms(v):
        return "-" if v is None else f"{v:.1f} ms"

    stages, n_stages = items(a.get("pipeline")), total(a.get("pipeline"))
    for st in stages[:MAX_STAGE_LINES]:
        mb = f", 1F1B with {st['micro_batches']} micro-batches" if st.get("micro_batches") else ""
        pct = "" if st.get("bubble_pct") is None else f", {st['bubble_pct']:.1f}% of the stage"
        ranks = rank_ranges(int(x) for x in re.findall(r"\d+", str(st["ranks"])))
        if compact:
            bp = "" if st.get("bubble_pct") is None else f" ({st['bubble_pct']:.1f}%)"
            con.print(_esc(f"Pipeline stage {st['stage']} (ranks {ranks}): compute "
                           f"{ms(st.get('computing_ms'))}, bubble {ms(st.get('bubble_ms'))}{bp}"))
            continue
        con.print(_esc(f"Pipeline stage {st['stage']} (ranks {ranks}): compute "
                       f"{ms(st.get('computing_ms'))}, pipeline bubble "
                       f"{ms(st.get('bubble_ms'))} (recomputed{pct}){mb} (pipeline.csv)"))
    if n_stages > MAX_STAGE_LINES:
        con.print(f"  ... and {n_stages - MAX_STAGE_LINES} more stages in pipeline.csv")
    # a bounded list (summary.json) holds its highest and its lowest row: max / min hold
    mem = [m for m in items(a.get("memory")) if m.get("peak_allocated_mb") is not None]
    if mem:
        hi = max(mem, key=lambda m: m["peak_allocated_mb"])
        lo = min(mem, key=lambda m: m["peak_allocated_mb"])
        cap = "" if hi.get("capacity_pct") is None else f", {hi['capacity_pct']:.1f}% of capacity"
        con.print(f"Memory: peak allocated {hi['peak_allocated_mb']:.0f} MB on rank {hi['rank']} "
                  f"({hi['component']}{cap}), lowest {lo['peak_allocated_mb']:.0f} MB on rank "
                  f"{lo['rank']} (memory_summary.csv)")
    dp = [d for d in items(a.get("data_preparation")) if d.get("data_wait_pct") is not None]
    if dp:
        w = max(dp, key=lambda d: d["data_wait_pct"])
        extra = ""
        if w.get("bottleneck_stage") == "none":
            extra = "; the device never waited for a batch"
        elif w.get("bottleneck_stage"):
            extra = f"; bottleneck: {w['bottleneck_stage']}"
        if w.get("bottleneck_operator"):
            extra += f"; slowest dataset operator {w['bottleneck_operator']}"
        if compact and w["data_wait_pct"] < 1:  # nothing to see on one screen
            _print_moe(con, a, compact)
            return
        if compact:
            con.print(f"Data preparation: up to {w['data_wait_ms']:.2f} ms per step "
                      f"({w['data_wait_pct']:.1f}% of the step) on rank {w['rank']}")
            _print_moe(con, a, compact)
            return
        con.print(f"Data preparation: up to {w['data_wait_ms']:.2f} ms per step "
                  f"({w['data_wait_pct']:.1f}% of the step, {w['source']}) on rank {w['rank']}"
                  f"{extra} (data_preparation.csv)")
    _print_moe(con, a, compact)


def _print_moe(con, a: dict, compact: bool = False) -> None:
    groups = items(a.get("moe"))
    if compact and total(a.get("moe")) > 2 or is_bounded(a.get("moe")):
        worst = max(groups, key=lambda g: g["max_over_mean"])
        con.print(f"Expert load: {total(a.get('moe'))} EP groups, max / mean tokens up to "
                  f"{worst['max_over_mean']:.2f} (group {_esc(worst['group'])})")
        return
    for g in groups:
        con.print(f"Expert load, EP group {g['group']}: max / mean tokens "
                  f"{g['max_over_mean']:.2f} (moe_expert_load.csv)")
