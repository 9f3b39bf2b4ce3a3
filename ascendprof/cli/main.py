"""Command-line interface: a thin layer over scan, pipeline, report, diff and gate.

Heavy libraries (pyarrow, pandas, rich) are imported inside the commands so that
``ascendprof --help`` and ``ascendprof scan`` start fast.

Exit codes: 0 done (possibly with warnings), 1 regression (gate only), 2 usage error (bad
arguments, missing path, unreadable gate input, an output that cannot be written), 3 nothing
analysable (or any skip with --strict), 130 / 143 interrupted by SIGINT / SIGTERM. A closed
stdout pipe does not change a command's exit code.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from ascendprof import api
from ascendprof._version import __version__
from ascendprof.api import rebuild_report, verdict_thresholds
from ascendprof.cli import diff as diff_cli, gate as gate_cli, timeline as timeline_cli
from ascendprof.model.errors import AscendProfError, EXIT_NOTHING, UsageError
from ascendprof.model.problems import printable, Problems
from ascendprof.report.terminal import print_scan
from ascendprof.scan import runs_of
from ascendprof.scan.runs import folder_names
from ascendprof.sysio.lifetime import (EXIT_BROKEN_PIPE, silence_stdout, stdout_may_close,
                                       terminate_like_interrupt)

EXIT_CODES_HELP = ("Exit codes: 0 done (possibly with warnings), 1 regression (gate only), "
                   "2 usage or data error (also: an output that cannot be written), 3 nothing "
                   "analysable (or any skip with --strict), 130/143 interrupted.")


class _Group(click.Group):
    """Prints the project's errors as one line (no traceback unless --debug)."""

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except AscendProfError as e:
            if ctx.obj and ctx.obj.get("debug"):
                raise
            click.echo(f"ascendprof: error: {e}", err=True)
            sys.exit(e.exit_code)
        except (click.ClickException, click.exceptions.Exit, click.exceptions.Abort, SystemExit):
            raise
        except BrokenPipeError:  # stdout's reader left (`… | head`): not an error of ours
            silence_stdout()
            sys.exit(EXIT_BROKEN_PIPE)
        except KeyboardInterrupt as e:  # Ctrl-C, or SIGTERM (lifetime.Terminated)
            click.echo("ascendprof: terminated" if getattr(e, "exit_code", None)
                       else "ascendprof: interrupted", err=True)
            sys.exit(getattr(e, "exit_code", 130))
        except Exception as e:  # noqa: BLE001 - the boundary: one line, details with --debug
            if ctx.obj and ctx.obj.get("debug"):
                raise
            click.echo(f"ascendprof: internal error: {type(e).__name__}: {e} "
                       f"(rerun with --debug for the traceback)", err=True)
            sys.exit(EXIT_NOTHING)


@click.group(cls=_Group, epilog=EXIT_CODES_HELP,
             context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="ascendprof")
@click.option("--debug", is_flag=True, help="Show tracebacks for errors.")
@click.pass_context
def main(ctx, debug):
    """Offline analyzer for Ascend NPU profiling data.

    Point it at the directories MindSpore Profiler, the Ascend PyTorch Profiler (torch_npu) or
    CANN msprof left behind (*_ascend_ms, *_ascend_pt, PROF_*, any depth) and it tells where each
    step's time goes, which rank or link is slow, and whether the job is compute-, schedule- or
    communication-bound.
    """
    ctx.ensure_object(dict)
    ctx.obj["debug"] = debug
    # Before numpy is imported: its OpenBLAS starts a thread per core that spins while idle
    # (2 % of all CPU in a 64-rank analyse on 2 cores, taken from the workers). Nothing here
    # multiplies matrices; the parallelism is the process pool's.
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

    terminate_like_interrupt()  # a CI timeout's SIGTERM cleans up like Ctrl-C (exit 143)


@main.command()
@click.argument("directory", type=click.Path(path_type=Path))
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table",
              show_default=True, help="Terminal table, or JSON on stdout.")
def scan(directory, fmt):
    """List every profiling source under DIRECTORY (any depth).

    For each: path, kind (torch_npu text, MindSpore text, db export, PROF_, raw CANN, legacy
    MindSpore), rank and where it came from, device id, versions, profiler level, steps, files
    present and the analyses they allow. Nothing is parsed beyond small metadata files.

    Sources are grouped by run: the collections of different jobs (different producers,
    versions, levels, collection times or steps) found under DIRECTORY. 'analyse' takes one run
    at a time (its path, or --run NAME; --each-run for all).
    """
    problems = Problems()
    sources, runs = runs_of(directory, problems)

    with stdout_may_close():
        if fmt == "json":
            import orjson

            doc = {"root": printable(directory), "sources": [s.as_dict() for s in sources],
                   "runs": [r.as_dict() for r in runs],
                   "problems": [p.as_dict() for p in problems]}
            click.echo(orjson.dumps(doc, option=orjson.OPT_INDENT_2).decode())
        else:
            print_scan(sources, problems, runs=runs)
    if not sources:
        sys.exit(EXIT_NOTHING)


def _parse_thresholds(items) -> dict:
    out = {}
    for it in items:
        key, sep, val = it.partition("=")
        if not sep:
            raise click.BadParameter(f"{it!r}: expected NAME=VALUE", param_hint="--threshold")
        try:
            out[key.strip().lower()] = float(val)
        except ValueError:
            raise click.BadParameter(f"{it!r}: VALUE must be a number",
                                     param_hint="--threshold") from None
    if out:  # check names and values now, not after the whole analysis has run
        try:
            verdict_thresholds(out)
        except UsageError as e:
            raise click.BadParameter(str(e), param_hint="--threshold") from None
    return out


@main.command()
@click.argument("directory", type=click.Path(path_type=Path))
@click.option("-o", "--output", "out", type=click.Path(path_type=Path),
              default=Path("ascendprof_output"), show_default=True,
              help="Output directory (must not be inside DIRECTORY).")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
              show_default=True, help="Rich terminal summary, or the summary as JSON on stdout.")
@click.option("--workers", type=click.IntRange(min=1), default=None,
              help="Parallel worker processes for per-rank work (default: number of cores).")
@click.option("--executor", type=click.Choice(["local", "dask"]), default="local",
              show_default=True, help="Where per-rank work runs.")
@click.option("--scheduler", default=None, help="Dask scheduler address (with --executor dask).")
@click.option("--no-tables", is_flag=True, help="Do not write the normalised Parquet tables.")
@click.option("--no-cache", is_flag=True,
              help="Ignore and do not update the cache (per-rank Parquet tables and results; "
                   "the last run's outputs).")
@click.option("--threshold", "thresholds", multiple=True, metavar="NAME=VALUE",
              help="Override a verdict threshold, e.g. comm_share_pct=30 "
                   "(names: see verdicts.json 'thresholds').")
@click.option("--timeline", is_flag=True,
              help="Also read trace_view.json when kernel_details.csv and communication.json "
                   "already carry what the analyses need (slower; the step breakdown is then "
                   "recomputed from the device timeline). Without it trace_view.json is read "
                   "only when those files lack facts, and summary.json 'not_read' says why.")
@click.option("--run", "run", metavar="NAME",
              help="When DIRECTORY holds several runs (different jobs or collections, as "
                   "'ascendprof scan' lists them): analyse this one (its name, path or number).")
@click.option("--each-run", is_flag=True,
              help="When DIRECTORY holds several runs: analyse each into its own folder under "
                   "--output (named after the run).")
@click.option("--advice", "advice", type=click.Choice(["off", "summary", "all"]),
              default="summary", show_default=True,
              help="What to change, with evidence (advice.json / advice.csv, docs/advice.md). "
                   "summary: every rule on the files already read, top 5 in the summary; all: "
                   "also reads trace_view.json's host events (GC, dataloader, "
                   "synchronisation, HCCL task sizes, AI Core clock; an extra pass over the "
                   "largest file) and shows every item; off: no advice files.")
@click.option("--html/--no-html", default=None,
              help="Write report.html, one self-contained page (charts of every section, no "
                   "network needed to view it), built from the output files as `ascendprof "
                   "report OUT` builds it. --no-html skips it (and removes an earlier one). "
                   "Default: on, unless $ASCENDPROF_HTML is 0 (building the page takes a few "
                   "seconds).")
@click.option("--strict", is_flag=True, help="Exit 3 if anything had to be skipped.")
@click.option("--quiet", "-q", is_flag=True, help="No progress bar.")
def analyse(directory, out, fmt, workers, executor, scheduler, no_tables, no_cache, thresholds,
            timeline, run, each_run, advice, html, strict, quiet):
    """Analyse every rank under DIRECTORY and write the cluster results to --output.

    Writes cluster_step_trace_time.csv, cluster_communication.json,
    cluster_communication_matrix.json, communication_group.json (msprof-analyze layout),
    op_statistics.csv, top_kernels.csv, step_trace_check.csv, verdicts.json, advice.json,
    advice.csv, problems.csv, summary.json, report.html (unless --no-html) and the normalised
    tables as Parquet under tables/. The whole set is written aside and put in place at the
    end, so an interrupted run leaves the previous one; only files ascendprof wrote (listed in
    OUT/.ascendprof-manifest.json) are ever replaced or removed, and one run at a time may
    write to OUT. Prints a summary: sources, per-rank step breakdown, top op types, the
    verdicts and the top advice in plain English, and where the HTML report is.

    Ranks of different runs (jobs or collections) are never mixed: when DIRECTORY holds
    several, analyse exits 2 naming them, unless --run picks one or --each-run asks for all.
    """
    kwargs = dict(fmt=fmt, workers=workers, executor=executor, scheduler=scheduler,
                  tables=not no_tables, cache=not no_cache,
                  thresholds=_parse_thresholds(thresholds), strict=strict, timeline=timeline,
                  advice=advice, html=html, progress=not quiet and fmt == "text")
    if run is not None and each_run:
        raise click.BadParameter("--run and --each-run exclude each other", param_hint="--run")
    if not each_run:
        sys.exit(api.analyse(directory, out, run=run, **kwargs))

    if not directory.exists():
        raise UsageError(f"{directory}: no such file or directory")

    _, runs = runs_of(directory)
    folders = folder_names([r.name for r in runs])
    code = 0
    for r in runs:
        sub = out / folders[r.name]
        if fmt == "text":
            click.echo(f"== run {r.describe()} -> {sub}")
        code = max(code, api.analyse(directory, sub, run=r.name, **kwargs))
    sys.exit(code)


@main.command()
@click.argument("out_dir", type=click.Path(path_type=Path))
@click.option("-o", "--output", "dest", type=click.Path(path_type=Path), default=None,
              help="Where to write the page (default: OUT_DIR/report.html).")
def report(out_dir, dest):
    """Rebuild the HTML report of an existing analysis from the files in OUT_DIR.

    OUT_DIR is an `ascendprof analyse` output directory. The page (report.html) is one
    self-contained file: every chart's JavaScript is inside it, so it opens offline, by a double
    click, attached to a ticket or published from CI. Sections: Diagnosis (verdicts, run facts),
    Step breakdown, Pipeline, Communication, Operators, Memory, Problems; a section whose file
    is absent says so. Nothing is recomputed: the page shows the files' numbers.
    """
    page = rebuild_report(out_dir, dest)
    click.echo(f"HTML report: {page} (open it in a browser; no network needed)")


# US spelling as a hidden alias
main.add_command(click.Command("analyze", callback=analyse.callback, params=analyse.params,
                               help=analyse.help, hidden=True))


# diff, gate and timeline live in their own modules
main.add_command(diff_cli.command, name="diff")
main.add_command(gate_cli.command, name="gate")
main.add_command(timeline_cli.command, name="timeline")


def run() -> None:
    """The console entry point: :func:`main`, and when a process pool was stopped mid-run
    (executors.pool_abandoned) the process leaves with its exit code at once, after the
    clean-up ran and the output was flushed, instead of waiting at interpreter exit for a pool
    thread that may never end."""
    try:
        main()
    except SystemExit as e:
        ex = sys.modules.get("ascendprof.engine.executors")
        if ex is not None and ex.pool_abandoned():
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
            for stream in (sys.stdout, sys.stderr):
                try:
                    stream.flush()
                except (OSError, ValueError):
                    pass
            os._exit(code)
        raise


if __name__ == "__main__":
    run()
