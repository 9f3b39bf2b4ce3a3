"""``ascendprof diff A B`` / ``ascendprof diff DIR --ranks 0,3`` (logic in :mod:`ascendprof.compare.diff`).

Arrow, pandas and rich are imported inside the functions so ``ascendprof --help`` stays fast.
"""

from __future__ import annotations

import math
from pathlib import Path

import click

from ascendprof import api
from ascendprof.engine.outdir import check_output_dir
from ascendprof.report.html import ours
from ascendprof.report.terminal import term_text
from ascendprof.sysio.atomic import check_report_path, write_report
from ascendprof.sysio.csvsafe import csv_safe_frame
from ascendprof.sysio.lifetime import stdout_may_close

TABLES = ("steps", "op_types", "kernels", "communication", "bandwidth")

DIFF_EPILOG = """\b
Output tables (CSV columns, JSON keys; times per step and per rank, in us). Each value is
the median over the (rank, step) values where the key occurs -- the statistic ascendprof gate
judges; the step table shows the mean too:
  steps          scope, metric, a_us, b_us, delta_us, ratio, a_mean_us, b_mean_us
                 (the nine step_trace_time columns)
  op_types       op_type, accelerator_core, presence, a_count, b_count, count_delta,
                 a_us, b_us, delta_us, ratio
  kernels        match, name_a, name_b, op_type, accelerator_core, input_shapes, a_count,
                 b_count, count_delta, a_us, b_us, delta_us, ratio
  communication  group, group_a, group_b, presence, a_count, b_count,
                 a_/b_{elapse,transit,wait,synchronization,idle}_us, delta_<same>_us
  bandwidth      group, group_a, group_b, transport, a_size_mb, b_size_mb, a_gbps, b_gbps, delta_gbps, ratio
delta = B - A, ratio = B / A. presence/match: both, only_a, only_b (kernels: name+shapes,
op_type+shapes). Rows are sorted by the absolute delta. Communication groups are matched by
parallel-group name and global ranks (by the name alone between two different ranks); a
group without a match is named."""


def _parse_ranks(text: str | None) -> list[int] | None:
    if text is None:
        return None
    try:
        ranks = [int(x) for x in text.replace(" ", "").split(",") if x != ""]
    except ValueError:
        raise click.BadParameter(f"{text!r}: expected two rank numbers like 0,3",
                                 param_hint="--ranks") from None
    if len(ranks) != 2:
        raise click.BadParameter(f"{text!r}: expected exactly two ranks (A,B)",
                                 param_hint="--ranks")
    return ranks


@click.command(epilog=DIFF_EPILOG)
@click.argument("a", type=click.Path(path_type=Path))
@click.argument("b", type=click.Path(path_type=Path), required=False)
@click.option("--ranks", "ranks_text", metavar="RA,RB", default=None,
              help="Compare rank RA (of A) with rank RB (of B, or of A when B is not given).")
@click.option("--format", "fmt", type=click.Choice(["text", "json", "csv"]), default="text",
              show_default=True, help="Rich terminal view, JSON on stdout, or one table as CSV.")
@click.option("--table", type=click.Choice(TABLES), default="steps", show_default=True,
              help="With --format csv: which table to print.")
@click.option("--top", type=click.IntRange(min=1), default=15, show_default=True,
              help="Rows of op types, kernels and communication groups to show.")
@click.option("-o", "--output", "out", type=click.Path(path_type=Path), default=None,
              help="Write every table (all rows) as CSV plus diff.json into this directory.")
@click.option("--workers", type=click.IntRange(min=1), default=None,
              help="Worker processes for reading profiling directories.")
@click.option("--html", "html", is_flag=False, flag_value="", default=None, metavar="[FILE]",
              help="Also write the comparison as one self-contained HTML page (charts of the "
                   "tables below; opens offline): FILE, or diff.html in -o's directory (else "
                   "in the current one).")
def command(a, b, ranks_text, fmt, table, top, out, workers, html):
    """Explain the difference between two runs, or between two ranks of one run.

    A and B are rank directories, whole cluster directories (compared rank by rank and for the
    cluster) or `ascendprof analyse` output directories. `ascendprof diff DIR --ranks 0,3`
    compares two ranks of one cluster. Shows the step breakdown side by side, op types and
    kernels sorted by time delta (with ops only in A or only in B and count changes),
    communication per group (elapse, transit, wait, synchronization, bandwidth per transport)
    and a plain-English summary of where the difference lies.
    """
    ranks = _parse_ranks(ranks_text)
    inputs = [p for p in (a, b) if p is not None and p.exists()]
    if out is not None:
        out = check_output_dir(out, inputs)
    page_path = None
    if html is not None:  # refused before the work, not after it
        page_path = Path(html) if html else (out or Path(".")) / "diff.html"
        check_report_path(page_path, inputs, ours=ours)
    result = api.diff(a, b, ranks=tuple(ranks) if ranks else None, workers=workers)

    if out is not None:
        _write_all(out, result, inputs)
    page = None
    if page_path is not None:
        from ascendprof.report.html.diffpage import write_diff_page

        page = write_diff_page(result, page_path, inputs)

    with stdout_may_close():  # `diff … | head -1` exits with the command's own code
        if fmt == "json":
            import orjson

            click.echo(orjson.dumps(result.as_dict(top), option=orjson.OPT_INDENT_2
                                    | orjson.OPT_SERIALIZE_NUMPY).decode())
        elif fmt == "csv":
            df = result.tables()[table]
            if table in ("op_types", "kernels", "communication"):
                df = df.head(top)
            click.echo(df.to_csv(index=False, lineterminator="\n"), nl=False)
        else:
            _print(result, top)
            if out is not None:
                click.echo(f"tables written to {out}")
    if page is not None:
        click.echo(f"HTML diff: {page} (open it in a browser; no network needed)",
                   err=fmt != "text")


def _write_all(out: Path, result, inputs=()) -> None:
    """Every table as CSV plus diff.json into ``out`` under the rule of every report path
    (:func:`ascendprof.sysio.atomic.write_report`): a file of those names is replaced only when
    ascendprof wrote it (same CSV header; a diff.json with its keys), checked for all of them
    before any is written."""
    import orjson

    tables = result.tables()

    def ours_for(name: str):
        def ours(path: Path) -> bool:
            with open(path, "rb") as f:
                head = f.read(1 << 20)
            if name == "diff.json":
                try:
                    doc = orjson.loads(head)
                except orjson.JSONDecodeError:
                    return False
                return isinstance(doc, dict) and {"a", "b", "explanation"} <= set(doc)
            header = ",".join(tables[name[:-4]].columns).encode()
            return head.split(b"\n", 1)[0].rstrip(b"\r") == header
        return ours

    names = [f"{n}.csv" for n in tables] + ["diff.json"]
    for name in names:
        check_report_path(out / name, inputs, ours=ours_for(name))
    for name, df in tables.items():
        data = csv_safe_frame(df).to_csv(index=False, lineterminator="\n").encode("utf-8")
        write_report(out / f"{name}.csv", data, ours=ours_for(f"{name}.csv"), inputs=inputs)
    write_report(out / "diff.json", orjson.dumps(result.as_dict(), option=orjson.OPT_INDENT_2
                                                 | orjson.OPT_SERIALIZE_NUMPY
                                                 | orjson.OPT_NON_STR_KEYS),
                 ours=ours_for("diff.json"), inputs=inputs)


def _missing(v) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v))


def _f(v, digits: int = 3) -> str:
    return "-" if _missing(v) else f"{v:,.{digits}f}"


def _m(us, digits: int = 3) -> str:
    """µs as ms (3 decimals: the files' µs resolution)."""
    return "-" if _missing(us) else _f(us / 1000, digits)


def _dm(us) -> str:
    return "-" if _missing(us) else _d(us / 1000)


def _d(v) -> str:
    if _missing(v):
        return "-"
    style = "red" if v > 0 else "green" if v < 0 else ""
    txt = f"{v:+,.3f}"
    return f"[{style}]{txt}[/]" if style else txt


def _r(v) -> str:
    return "-" if _missing(v) else f"{v:.3f}"


def _print(result, top: int) -> None:
    from rich.console import Console
    from rich.table import Table

    con = Console(highlight=False)
    if not con.is_terminal:
        con = Console(highlight=False, width=160)
    con.print(f"[bold]A[/] = {term_text(result.a)}\n[bold]B[/] = {term_text(result.b)}")
    if result.explanation:
        con.print(f"\n[bold]{term_text(result.explanation)}[/]\n")

    t = Table(title="Step breakdown per step (ms; median over rank-steps, mean for reference)",
              title_justify="left")
    for c, j in (("scope", "left"), ("metric", "left"), ("A", "right"), ("B", "right"),
                 ("B - A", "right"), ("B / A", "right"), ("mean A", "right"),
                 ("mean B", "right")):
        t.add_column(c, justify=j)
    for r in result.steps.itertuples(index=False):
        t.add_row(r.scope, r.metric, _m(r.a_us), _m(r.b_us), _dm(r.delta_us), _r(r.ratio),
                  _m(r.a_mean_us), _m(r.b_mean_us))
    con.print(t)

    if len(result.op_types):
        t = Table(title=f"Op types per step (top {top} by |B - A|, ms)", title_justify="left")
        for c in ("op type", "Accelerator Core", "in", "count A", "count B", "A", "B",
                  "B - A", "B / A"):
            t.add_column(c, justify="left" if c in ("op type", "Accelerator Core", "in")
                         else "right")
        for r in result.op_types.head(top).itertuples(index=False):
            t.add_row(term_text(r.op_type), term_text(r.accelerator_core), r.presence, _f(r.a_count, 1),
                      _f(r.b_count, 1), _m(r.a_us), _m(r.b_us), _dm(r.delta_us), _r(r.ratio))
        con.print(t)

    if len(result.kernels):
        t = Table(title=f"Kernels per step (top {top} by |B - A|, ms)", title_justify="left")
        for c in ("match", "kernel", "input shapes", "count A", "count B", "A", "B", "B - A"):
            t.add_column(c, justify="left" if c in ("match", "kernel", "input shapes")
                         else "right", overflow="fold")
        for r in result.kernels.head(top).itertuples(index=False):
            name = r.name_a if isinstance(r.name_a, str) else r.name_b
            t.add_row(r.match, term_text(name), term_text(str(r.input_shapes)[:60]),
                      _f(r.a_count, 1),
                      _f(r.b_count, 1), _m(r.a_us), _m(r.b_us), _dm(r.delta_us))
        con.print(t)

    if len(result.communication):
        t = Table(title=f"Communication per group, per step (top {top} by |elapse B - A|, ms)",
                  title_justify="left")
        for c in ("group", "ops A/B", "elapse A", "elapse B", "transit B-A", "wait A",
                  "wait B", "wait B-A", "sync B-A"):
            t.add_column(c, justify="left" if c == "group" else "right")
        for r in result.communication.head(top).itertuples(index=False):
            la = r.group_a if isinstance(r.group_a, str) else "-"
            lb = r.group_b if isinstance(r.group_b, str) else "-"
            label = la if la == lb else f"{la} | {lb}"
            t.add_row(term_text(label), f"{_f(r.a_count, 0)}/{_f(r.b_count, 0)}",
                      _m(r.a_elapse_us),
                      _m(r.b_elapse_us), _dm(r.delta_transit_us), _m(r.a_wait_us),
                      _m(r.b_wait_us), _dm(r.delta_wait_us), _dm(r.delta_synchronization_us))
        con.print(t)

    if len(result.bandwidth):
        t = Table(title="Bandwidth per group and transport (GB/s)", title_justify="left")
        for c in ("group", "transport", "MB A", "MB B", "GB/s A", "GB/s B", "B - A"):
            t.add_column(c, justify="left" if c in ("group", "transport") else "right")
        for r in result.bandwidth.itertuples(index=False):
            la = r.group_a if isinstance(r.group_a, str) else "-"
            lb = r.group_b if isinstance(r.group_b, str) else "-"
            t.add_row(term_text(la if la == lb else f"{la} | {lb}"), term_text(r.transport),
                      _f(r.a_size_mb), _f(r.b_size_mb),
                      _f(r.a_gbps), _f(r.b_gbps), _f(r.delta_gbps))
        con.print(t)
    for line in result.unmatched:
        con.print(f"[yellow]no match:[/] {term_text(line)}")
