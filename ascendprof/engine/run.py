"""The ``analyse`` command's flow: check paths, run the pipeline with progress, write outputs."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import orjson

from ascendprof.model.errors import EXIT_NOTHING, EXIT_OK, UsageError
from ascendprof.report.output import check_output_dir
from ascendprof.model.problems import Problems


def run_analyse(directory: Path, out: Path, *, fmt="text", workers=None, executor="local",
                scheduler=None, tables=True, cache=True, thresholds=None, strict=False,
                timeline=False, progress=True) -> int:
    """Run the whole analysis of ``directory`` into ``out``; returns the exit code.

    With the cache on, a run whose inputs, code, options and output directory are unchanged
    since the last run restores that run's outputs (see :func:`ascendprof.engine.cache.run_key`)
    instead of recomputing them (before Arrow or pandas is even imported). ``timeline``: read
    trace_view.json even when not needed. Raises UsageError for a missing input or an output
    inside the input, NothingAnalysable when no rank can be read.
    """
    from ascendprof.scan import load_sources

    directory = Path(directory)
    if not directory.exists():
        raise UsageError(f"{directory}: no such file or directory")
    out = check_output_dir(out, [directory])
    problems = Problems()
    sources = load_sources(directory, problems)
    if timeline:
        from dataclasses import replace

        sources = [replace(s, read_timeline=True) for s in sources]
    out.mkdir(parents=True, exist_ok=True)
    tables_tmp, final_tables = out / ".tables.partial", out / "tables"
    if tables_tmp.exists():
        shutil.rmtree(tables_tmp)
    from ascendprof.engine import cache as run_cache

    cache_dir = run_cache.cache_dir_for(out, [directory]) if cache else None
    key = cache_dir and run_cache.run_key(
        sources, out, {"thresholds": thresholds or {}, "tables": tables},
        [orjson.dumps(p.as_dict()) for p in problems])

    def dest(rel: str) -> Path:  # tables/ is rebuilt beside the old one and swapped in
        return tables_tmp / rel[len("tables/"):] if rel.startswith("tables/") else out / rel

    restored = run_cache.restore_run(cache_dir, key, out, dest)
    if restored is not None:  # inputs, code and options unchanged: the outputs are the same
        _swap_tables(tables_tmp, final_tables, tables)
        summary = orjson.loads((out / "summary.json").read_bytes())
        _show(summary, out, fmt)
        return EXIT_NOTHING if strict and restored.get("skipped") else EXIT_OK
    from ascendprof.engine import pipeline
    from ascendprof.report.files import EarlyWrite, write_outputs
    from ascendprof.report.summary import build_summary

    _release_freed_memory()
    spill = _spill(out)  # read back until the files are written
    early = None
    try:
        results = _run(sources, tables_tmp if tables else None, workers, executor, scheduler,
                       progress, cache_dir, spill.take if spill else None)
        ca = pipeline.gather(str(directory), sources, results, problems)
        if spill:
            spill.flush()
        early = EarlyWrite(ca, out)  # the largest file, written while the verdicts are derived
        pipeline.conclude(ca, thresholds)
        _swap_tables(tables_tmp, final_tables, tables)
        summary = build_summary(ca)
        written = write_outputs(ca, out, summary, early)
        early = None
    finally:
        if early is not None:
            early.cancel()
        if spill:
            spill.close()
    summary["outputs"] = [str(p) for p in written] + ([str(final_tables)] if tables else [])
    from ascendprof.report.output import write_json

    written.append(write_json(out / "summary.json", summary))
    if tables and final_tables.exists():
        written += [p for p in sorted(final_tables.rglob("*")) if p.is_file()]
    run_cache.store_run(cache_dir, key, out, written, {"skipped": bool(ca.problems.skipped)})
    _show(summary, out, fmt)
    if strict and ca.problems.skipped:
        return EXIT_NOTHING
    return EXIT_OK


def _swap_tables(tables_tmp: Path, final_tables: Path, tables: bool) -> None:
    """Replace tables/ by the freshly written ``.tables.partial`` (tables/ is removed when the
    run writes none, so it never holds another run's tables)."""
    if final_tables.exists():
        shutil.rmtree(final_tables)
    if tables and tables_tmp.exists():
        tables_tmp.rename(final_tables)


def _show(summary: dict, out: Path, fmt: str) -> None:
    if fmt == "json":
        sys.stdout.write(orjson.dumps(summary, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS
                                      | orjson.OPT_SERIALIZE_NUMPY).decode() + "\n")
    else:
        from ascendprof.report.terminal import print_summary

        print_summary(summary, out)


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
    if not progress:
        return pipeline.run_ranks(sources, tables_dir, workers=workers, cache_dir=cache_dir,
                                  on_result=on_result)
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    with Progress(TextColumn("Reading ranks"), BarColumn(), MofNCompleteColumn(),
                  transient=True) as bar:
        task = bar.add_task("ranks", total=len(sources))
        return pipeline.run_ranks(sources, tables_dir, workers=workers, cache_dir=cache_dir,
                                  progress=lambda: bar.advance(task), on_result=on_result)
