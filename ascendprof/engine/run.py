"""The ``analyse`` command's flow: check paths, run the pipeline with progress, write outputs."""

from __future__ import annotations

import os
import sys
from dataclasses import replace
from pathlib import Path

import orjson

from ascendprof.engine import cache as run_cache
from ascendprof.engine.executors import dask_map, release_free_heap
from ascendprof.engine.outdir import check_not_in_sources, check_output_dir, OutputDir
from ascendprof.model.errors import EXIT_NOTHING, EXIT_OK, OutputError, UsageError
from ascendprof.model.options import RunOptions
from ascendprof.model.outputs import OUTPUT_FILES, REPORT_FILE, SUMMARY_FILE
from ascendprof.model.problems import printable, Problems
from ascendprof.report.files import EarlyWrite, write_outputs
from ascendprof.report.html import write_report
from ascendprof.report.terminal import print_summary
from ascendprof.scan import load_sources
from ascendprof.sysio.atomic import write_json
from ascendprof.sysio.lifetime import stdout_may_close

#: how to pick one run when a directory holds several (the analyse command's options)
PICK_RUN = ("Analyse one: give its path, or --run NAME (or its number); --each-run analyses "
            "each into its own folder under --output.")


def html_default() -> bool:
    """Whether analyse writes report.html when not told: yes, unless $ASCENDPROF_HTML is 0 /
    false / no / off (for scripted runs that never look at the page; it costs a few seconds)."""
    return os.environ.get("ASCENDPROF_HTML", "1").strip().lower() not in ("0", "false", "no",
                                                                          "off")


def run_analyse(directory: Path, out: Path, options: RunOptions | None = None, **kw) -> int:
    """Run the whole analysis of ``directory`` into ``out`` as ``options`` say (a
    model.options.RunOptions, or its keyword options: :meth:`RunOptions.of`); returns the exit
    code.

    The outputs are written into a staging directory inside ``out`` and put in place together
    at the end, under a lock, replacing only what the last run listed in its manifest
    (:mod:`ascendprof.engine.outdir`): an interrupted or failed run leaves the previous set.
    With the cache on, a run whose inputs, code, options and output directory are unchanged
    since the last run restores that run's outputs (see :func:`ascendprof.engine.cache.run_key`)
    instead of recomputing them (before Arrow or pandas is even imported). report.html is built
    from the staged files as ``ascendprof report`` builds it. Raises
    UsageError for a missing input or an output inside the input (or an input under the
    output's own files), OutputError (exit 2) when the output cannot be written,
    NothingAnalysable when no rank can be read, scan.MultipleRuns (exit 2) when ``directory``
    holds several runs and ``run`` does not pick one.
    """
    o = options if options is not None else RunOptions.of(**kw)
    o = replace(o, html=html_default() if o.html is None else bool(o.html))
    directory = Path(directory)
    if not directory.exists():
        raise UsageError(f"{directory}: no such file or directory")
    given = Path(out)  # shown as the user wrote it (a relative -o stays short on screen)
    out = check_output_dir(out, [directory], OUTPUT_FILES, inside_ok=True)
    problems = Problems()
    sources = load_sources(directory, problems, run=o.run, hint=PICK_RUN)
    check_not_in_sources(out, sources)
    with OutputDir(out, OUTPUT_FILES, tables=o.tables) as target:
        summary, skipped = _analyse_into(target, directory, out, sources, problems, o)
    with stdout_may_close():
        _show(summary, given, o.fmt, given / REPORT_FILE if o.html else None)
    return EXIT_NOTHING if o.strict and skipped else EXIT_OK


def _analyse_into(target, directory: Path, out: Path, sources, problems: Problems,
                  o: RunOptions):
    """Write the whole output set into ``target.staging`` and commit it; returns (summary,
    whether anything was skipped)."""
    stage = target.staging
    cache_dir = run_cache.cache_dir_for(out, [directory]) if o.cache else None
    key = cache_dir and run_cache.run_key(
        sources, out, {"thresholds": o.thresholds or {}, "tables": o.tables,
                       "advice": o.read.advice, "html": o.html},
        [orjson.dumps(p.as_dict()) for p in problems], o.read)
    restored = run_cache.restore_run(cache_dir, key, stage)
    if restored is not None:  # inputs, code and options unchanged: the outputs are the same
        summary = orjson.loads((stage / SUMMARY_FILE).read_bytes())
        if o.html and not (stage / REPORT_FILE).is_file():
            _html(out, stage)
        _commit(target)
        return summary, bool(restored.get("skipped"))
    target.clear_staging()  # what a restore that failed half-way placed there
    _release_freed_memory()  # before the imports below load pyarrow
    from ascendprof.engine import pipeline
    from ascendprof.report.summary import build_summary

    parking = _parking(stage, sources)  # read back until the files are written
    early = None
    try:
        # a write that fails in the per-rank phase (full disk, quota, read-only file system)
        # is the output's fault: exit 2 naming the file, not an internal error
        results = _output_side(out, _run, sources, stage / "tables" if o.tables else None, o,
                               cache_dir, parking.take if parking else None)
        ca = pipeline.gather(str(directory), sources, results, problems)
        if parking:
            parking.flush()
        early = EarlyWrite(ca, stage)  # the largest file, written while the verdicts are derived
        # the matrix's scratch file beside the outputs (the system's temporary directory may
        # be a small RAM disk)
        pipeline.conclude(ca, o.thresholds, o.read.advice, scratch=stage)
        summary = build_summary(ca)
        written = _output_side(out, write_outputs, ca, stage, summary, early)
        early = None
    finally:
        if early is not None:
            early.cancel()
        if parking:
            parking.close()
    skipped = bool(ca.problems.skipped)
    # the page is built from the files just written: the analysis and the ranks' tables can
    # go first (at 10^6 steps they were ~0.3 GB of the run's peak, beside the page's reading)
    del ca, results
    release_free_heap()
    table_dir = stage / "tables"
    summary["outputs"] = [printable(out / p.relative_to(stage)) for p in written] + (
        [printable(out / "tables")] if o.tables else []) + (
        [printable(out / REPORT_FILE)] if o.html else [])
    written.append(_output_side(out, write_json, stage / SUMMARY_FILE, summary))
    if o.html:  # from the files just staged, as `ascendprof report` builds it
        written.append(_html(out, stage))
    if o.tables and table_dir.exists():
        written += [p for p in sorted(table_dir.rglob("*")) if p.is_file()]
    run_cache.store_run(cache_dir, key, stage, written, {"skipped": skipped})
    _commit(target)
    return summary, skipped


def _commit(target) -> None:
    _output_side(target.out, target.commit)


def _output_side(out: Path, fn, *args):
    """``fn(*args)``, an OSError (full disk, no permission) becoming an OutputError naming the
    file (exit 2): the output, not the input, is at fault."""
    try:
        return fn(*args)
    except OSError as e:
        where = printable(e.filename or out)
        raise OutputError(f"{where}: cannot write the output: {e.strerror or e}") from None


def _html(out: Path, stage: Path) -> Path:
    return _output_side(out, write_report, stage)


def _show(summary: dict, out: Path, fmt: str, page: Path | None = None) -> None:
    if fmt == "json":
        sys.stdout.write(orjson.dumps(summary, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS
                                      | orjson.OPT_SERIALIZE_NUMPY).decode() + "\n")
    else:
        print_summary(summary, out)
        if page is not None:  # the last line: where to look
            sys.stdout.write(f"HTML report: {printable(page)} (open it in a browser; no "
                             f"network needed)\n")


def _release_freed_memory() -> None:
    """Let Arrow allocate through the C library's malloc instead of its bundled mimalloc,
    unless the user chose a pool ($ARROW_DEFAULT_MEMORY_POOL). The cluster step builds and drops
    large transient tables; mimalloc keeps the freed pages, which counted as ~50 MB of peak RSS
    at 256 ranks. Measured: same speed per rank either way.

    Before pyarrow is loaded this sets $ARROW_DEFAULT_MEMORY_POOL (inherited by the worker
    processes): Arrow's C++ code (Parquet reading, IPC, compute internals) allocates from the
    process-wide pool that variable picks when pyarrow loads, which ``pa.set_memory_pool``
    does not change; that pool's mimalloc kept what it freed (0.13 GB of a 230 MB
    communication.json's rank after the rank was done, ~0.3 GB at 1 GB)."""
    if os.environ.get("ARROW_DEFAULT_MEMORY_POOL"):
        return
    if "pyarrow" not in sys.modules:
        os.environ["ARROW_DEFAULT_MEMORY_POOL"] = "system"
        return
    import pyarrow as pa

    pa.set_memory_pool(pa.system_memory_pool())


def _parking(out: Path, sources=()):
    """A sysio.parking.ParkingFile parking the ranks' results in ``out`` (an unlinked file), or
    None when it cannot be created (they are then kept in memory)."""
    # lazy: an unchanged re-run restores its outputs before Arrow is imported
    from ascendprof.sysio.parking import ParkingFile

    try:
        return ParkingFile(out, sources)
    except OSError:
        return None


def _run(sources, tables_dir, o: RunOptions, cache_dir, on_result=None):
    """The per-rank worker over ``sources`` on the executor ``o`` names, with a progress bar
    on a terminal; ``cache_dir`` is None with --no-cache."""
    from ascendprof.engine import pipeline

    if o.executor == "dask":
        from importlib.util import find_spec

        if find_spec("distributed") is None:  # dask_map imports it when called
            raise UsageError("--executor dask needs the optional extra: pip install "
                             "'ascendprof[dask]' (no module named 'distributed')")

        return dask_map(pipeline.process_rank, sources, tables_dir=tables_dir,
                        scheduler=o.scheduler, cache_dir=cache_dir, on_result=on_result,
                        read=o.read)
    if not o.progress or not sys.stdout.isatty():  # a bar is for a terminal (and a pipe may close)
        return pipeline.run_ranks(sources, tables_dir, workers=o.workers, cache_dir=cache_dir,
                                  on_result=on_result, read=o.read)
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    with Progress(TextColumn("Reading ranks"), BarColumn(), MofNCompleteColumn(),
                  transient=True) as bar:
        task = bar.add_task("ranks", total=len(sources))
        return pipeline.run_ranks(sources, tables_dir, workers=o.workers, cache_dir=cache_dir,
                                  progress=lambda: bar.advance(task), on_result=on_result,
                                  read=o.read)
