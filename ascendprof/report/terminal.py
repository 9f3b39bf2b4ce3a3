"""Rich terminal rendering of scan results and analysis summaries (stderr stays for errors)."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table


_SHORT = [("computing_ns", "Comp"), ("comm_not_overlapped_ns", "CommNO"),
          ("overlapped_ns", "Ovlp"), ("communication_ns", "Comm"), ("free_ns", "Free"),
          ("stage_ns", "Stage"), ("bubble_ns", "Bubble"), ("preparing_ns", "Prep")]
_LEGEND = ("Comp Computing, CommNO Communication(Not Overlapped), Ovlp Overlapped, Comm "
           "Communication, Prep Preparing; Src rep = profiler's step_trace_time, re = recomputed")

_SEV_STYLE = {"critical": "bold red", "warning": "yellow", "info": "cyan"}


def _console() -> Console:
    con = Console(highlight=False, soft_wrap=False)
    if not con.is_terminal:  # piped or captured: rich would assume 80 columns
        con = Console(highlight=False, soft_wrap=False, width=140)
    return con


def print_scan(sources, problems) -> None:
    con = _console()
    t = Table(title=f"{len(sources)} profiling source(s)", show_lines=False)
    for c in ("Rank", "Kind", "Device", "Level", "Versions", "Steps", "Analyses", "Path"):
        t.add_column(c, overflow="fold")
    for s in sources:
        vers = " / ".join(v for v in (s.framework_version, s.cann_version) if v) or "-"
        t.add_row("?" if s.rank is None else str(s.rank), s.label,
                  "-" if s.device_id is None else str(s.device_id), s.profiler_level or "-",
                  vers, ",".join(map(str, s.steps)) or "-", ", ".join(s.analyses) or "-", s.path)
    con.print(t)
    _print_problems(con, list(problems))


def _print_problems(con, problems) -> None:
    if not problems:
        return
    con.print(f"[bold]{len(problems)} note(s) on the input:[/bold]")
    for p in problems[:50]:
        style = "yellow" if p.severity == "warning" else "red"
        con.print(f"  [{style}]{p.severity}[/{style}] {p.line()}")
    if len(problems) > 50:
        con.print(f"  ... and {len(problems) - 50} more in problems.csv")


def print_summary(summary: dict, out_dir) -> None:
    con = _console()
    con.print(f"[bold]ascendprof {summary['version']}[/bold] - {summary['root']}")
    kinds = {}
    for s in summary["sources"]:
        kinds[s["kind"]] = kinds.get(s["kind"], 0) + 1
    con.print("Sources: " + ", ".join(f"{n} {k}" for k, n in kinds.items()))
    if summary["ranks"]:
        t = Table(title="Step breakdown per rank (ms)", caption=_LEGEND)
        for c in ("Rank", "Step") + tuple(short for _, short in _SHORT):
            t.add_column(c, justify="right")
        t.add_column("Src")
        for r in summary["ranks"]:
            vals = []
            for col, _ in _SHORT:
                v = r.get(col[:-3] + "_us")
                vals.append("-" if v is None else f"{v / 1000:.1f}")
            t.add_row(str(r["rank"]), "-" if r["step"] is None else str(r["step"]), *vals,
                      "rep" if r["origin"] == "reported" else "re")
        con.print(t)
    if summary["top_op_types"]:
        t = Table(title="Top op types (cluster)")
        for c in ("OP Type", "Accelerator Core", "Count", "Total (ms)", "Ratio (%)"):
            t.add_column(c, justify="right" if c[0] in "CTR" and c != "OP Type" else "left")
        for o in summary["top_op_types"]:
            t.add_row(o["op_type"], o["accelerator_core"], str(o["count"]),
                      f"{o['total_us'] / 1000:.2f}", f"{o['ratio_pct']:.1f}")
        con.print(t)
    vs = summary["verdicts"]
    con.print(f"[bold]Verdicts ({len(vs)})[/bold]")
    for v in vs:
        style = _SEV_STYLE.get(v.get("severity"), "")
        con.print(f"  [{style}]{v.get('severity', ''):8}[/{style}] [{v.get('category')}] "
                  f"{v.get('message', '')}")
        if v.get("next_step"):
            con.print(f"           next: {v['next_step']}")
    from types import SimpleNamespace

    probs = [SimpleNamespace(severity=p["severity"], line=lambda p=p: _pline(p))
             for p in summary["problems"]]
    _print_problems(con, probs)
    for name, why in summary.get("not_written", {}).items():
        con.print(f"  [dim]not written:[/dim] {name}: {why}")
    con.print(f"Results written to [bold]{out_dir}[/bold]")


def _pline(p: dict) -> str:
    loc = f" at {p['where']}" if p.get("where") else ""
    who = f"rank {p['rank']}: " if p.get("rank") is not None else ""
    return f"{who}{p['path']}{loc}: {p['reason']}"
