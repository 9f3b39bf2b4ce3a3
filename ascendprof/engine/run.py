"""The ``analyse`` command's flow: check paths, run the pipeline with progress, write outputs."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import orjson

from ascendprof.model.errors import EXIT_NOTHING, EXIT_OK, UsageError
from ascendprof.engine.outdir import check_output_dir
from ascendprof.model.problems import Problems, printable


#: how to pick one run when a directory holds several (the analyse command's options)
PICK_RUN = ("Analyse one: give its path, or --run NAME (or its number); --each-run analyses "
            "each into its own folder under --output.")


def html_default() -> bool:
    """Whether analyse writes report.html when not told: yes, unless $ASCENDPROF_HTML is 0 /
    false / no / off (for scripted runs that never look at the page; it costs a few seconds)."""
    return os.environ.get("ASCENDPROF_HTML", "1").strip().lower() not in ("0", "false", "no",
                                                                          "off")


def run_analyse(directory: Path, out: Path, *, fmt="text", workers=None, executor="local",
                scheduler=None, tables=True, cache=True, thresholds=None, strict=False,
                timeline=False, progress=True, run: str | None = None,
                advice="summary", html: bool | None = None) -> int:
    """Run the whole analysis of ``directory`` into ``out``; returns the exit code.

    The outputs are written into a staging directory inside ``out`` and put in place together
    at the end, under a lock, replacing only what the last run listed in its manifest
    (:mod:`ascendprof.engine.outdir`): an interrupted or failed run leaves the previous set.
    With the cache on, a run whose inputs, code, options and output directory are unchanged
    since the last run restores that run's outputs (see :func:`ascendprof.engine.cache.run_key`)
    instead of recomputing them (before Arrow or pandas is even imported). ``timeline``: read
    trace_view.json even when not needed; ``advice``: off / summary / all (analyze.advice;
    "all" also reads trace_view.json's host events); ``html``: write report.html, built from
    the staged files as ``ascendprof report`` builds it (None: :func:`html_default`). Raises
    UsageError for a missing input or an output inside the input (or an input under the
    output's own files), OutputError (exit 2) when the output cannot be written,
    NothingAnalysable when no rank can be read, scan.MultipleRuns (exit 2) when ``directory``
    holds several runs and ``run`` does not pick one.
    """
    from ascendprof.engine.outdir import OutputDir
    from ascendprof.model.outputs import OUTPUT_FILES
    from ascendprof.scan import load_sources

    directory = Path(directory)
    if not directory.exists():
        raise UsageError(f"{directory}: no such file or directory")
    html = html_default() if html is None else bool(html)
    out = check_output_dir(out, [directory], OUTPUT_FILES)
    problems = Problems()
    sources = load_sources(directory, problems, run=run, hint=PICK_RUN)
    if timeline or advice != "summary":
        from dataclasses import replace

        sources = [replace(s, read_timeline=s.read_timeline or timeline, advice=advice)
                   for s in sources]
    with OutputDir(out, OUTPUT_FILES, tables=tables) as target:
        summary, skipped = _analyse_into(target, directory, out, sources, problems, workers,
                                         executor, scheduler, tables, cache, thresholds,
                                         progress, advice, html)
    from ascendprof.sysio.lifetime import stdout_may_close

    with stdout_may_close():
        _show(summary, out, fmt, out / "report.html" if html else None)
    return EXIT_NOTHING if strict and skipped else EXIT_OK


def _analyse_into(target, directory, out, sources, problems, workers, executor, scheduler,
                  tables, cache, thresholds, progress, advice, html=True):
    """Write the whole output set into ``target.staging`` and commit it; returns (summary,
    whether anything was skipped)."""
    from ascendprof.engine import cache as run_cache

    stage = target.staging
    cache_dir = run_cache.cache_dir_for(out, [directory]) if cache else None
    key = cache_dir and run_cache.run_key(
        sources, out, {"thresholds": thresholds or {}, "tables": tables, "advice": advice,
                       "html": html},
        [orjson.dumps(p.as_dict()) for p in problems])
    restored = run_cache.restore_run(cache_dir, key, stage)
    if restored is not None:  # inputs, code and options unchanged: the outputs are the same
        summary = orjson.loads((stage / "summary.json").read_bytes())
        if html and not (stage / "report.html").is_file():
            _html(out, stage)
        _commit(target)
        return summary, bool(restored.get("skipped"))
    target.clear_staging()  # what a restore that failed half-way placed there
    from ascendprof.engine import pipeline
    from ascendprof.report.files import EarlyWrite, write_outputs
    from ascendprof.sysio.atomic import write_json
    from ascendprof.report.summary import build_summary

    _release_freed_memory()
    spill = _spill(stage)  # read back until the files are written
    early = None
    try:
        results = _run(sources, stage / "tables" if tables else None, workers, executor,
                       scheduler, progress, cache_dir, spill.take if spill else None)
        ca = pipeline.gather(str(directory), sources, results, problems)
        if spill:
            spill.flush()
        early = EarlyWrite(ca, stage)  # the largest file, written while the verdicts are derived
        pipeline.conclude(ca, thresholds)
        summary = build_summary(ca)
        written = _output_side(out, write_outputs, ca, stage, summary, early)
        early = None
    finally:
        if early is not None:
            early.cancel()
        if spill:
            spill.close()
    table_dir = stage / "tables"
    summary["outputs"] = [printable(out / p.relative_to(stage)) for p in written] + (
        [printable(out / "tables")] if tables else []) + (
        [printable(out / "report.html")] if html else [])
    written.append(_output_side(out, write_json, stage / "summary.json", summary))
    if html:  # from the files just staged, as `ascendprof report` builds it
        written.append(_html(out, stage))
    if tables and table_dir.exists():
        written += [p for p in sorted(table_dir.rglob("*")) if p.is_file()]
    run_cache.store_run(cache_dir, key, stage, written, {"skipped": bool(ca.problems.skipped)})
    _commit(target)
    return summary, bool(ca.problems.skipped)


def _commit(target) -> None:
    _output_side(target.out, target.commit)


def _output_side(out: Path, fn, *args):
    """``fn(*args)``, an OSError (full disk, no permission) becoming an OutputError naming the
    file (exit 2): the output, not the input, is at fault."""
    from ascendprof.model.errors import OutputError

    try:
        return fn(*args)
    except OSError as e:
        where = printable(e.filename or out)
        raise OutputError(f"{where}: cannot write the output: {e.strerror or e}") from None


def _html(out: Path, stage: Path) -> Path:
    from ascendprof.report.html import write_report

    return _output_side(out, write_report, stage)


def _show(summary: dict, out: Path, fmt: str, page: Path | None = None) -> None:
    if fmt == "json":
        sys.stdout.write(orjson.dumps(summary, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS
                                      | orjson.OPT_SERIALIZE_NUMPY).decode() + "\n")
    else:
        from ascendprof.report.terminal import print_summary

        print_summary(summary, out)
        if page is not None:  # the last line: where to look
            sys.stdout.write(f"HTML report: {printable(page)} (open it in a browser; no "
                             f"network needed)\n")


def _release_freed_memory() -> None:
    """Let Arrow allocate through the C library's malloc instead of its bundled mimalloc,
    unless the user chose a pool ($ARROW_DEFAULT_MEMORY_POOL). The cluster step builds and drops
    large transient tables; mimalloc keeps the freed pages, which counted as ~50 MB of peak RSS
    at 256 ranks. Measured: same speed per rank either way."""
    import os

    if not os.environ.get("ARROW_DEFAULT_MEMORY_POOL"):
        import pyarrow as pa

        pa.set_memory_pool(pa.system_memory_pool())


def _spill(out: Path):
    """A spill.ResultSpill parking the ranks' results in ``out`` (an unlinked file), or None
    when it cannot be created (they are then kept in memory)."""
    from ascendprof.engine.spill import ResultSpill

    try:
        return ResultSpill(out)
    except OSError:
        return None


def _run(sources, tables_dir, workers, executor, scheduler, progress, cache, on_result=None):
    from ascendprof.engine import pipeline

    cache_dir = cache  # a directory, or None with --no-cache

    if executor == "dask":
        try:
            from ascendprof.engine.executors import dask_map
        except ImportError as e:
            raise UsageError(f"--executor dask needs the optional extra: pip install "
                             f"'ascendprof[dask]' ({e})") from None
        return dask_map(pipeline.process_rank, sources, tables_dir=tables_dir,
                        scheduler=scheduler, cache_dir=cache_dir, on_result=on_result)
    if not progress or not sys.stdout.isatty():  # a bar is for a terminal (and a pipe may close)
        return pipeline.run_ranks(sources, tables_dir, workers=workers, cache_dir=cache_dir,
                                  on_result=on_result)
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    with Progress(TextColumn("Reading ranks"), BarColumn(), MofNCompleteColumn(),
                  transient=True) as bar:
        task = bar.add_task("ranks", total=len(sources))
        return pipeline.run_ranks(sources, tables_dir, workers=workers, cache_dir=cache_dir,
                                  progress=lambda: bar.advance(task), on_result=on_result)
