"""The Python API: one collection of profiling data, its tables and results.

    import ascendprof
    c = ascendprof.open("cluster_dir")          # one rank, or a whole cluster
    c.ranks                                     # [0, 1, 2, 3]
    c.table("kernels", ranks=[0, 2])            # pyarrow.Table (.to_pandas())
    c.step_breakdown()                          # cluster_step_trace_time.csv as a DataFrame
    c.verdicts()                                # what verdicts.json holds

This is the façade the command line uses too (cli -> api -> engine -> readers / analyze):
every method calls the same engine and analysis functions as ``ascendprof analyse``, so the
frames and objects here are the ones the output files are written from. Nothing is read until
it is asked for; the per-rank work then runs once (in a process pool for several ranks) and
its results are kept for the following calls. With a cache directory (``cache_dir=`` or
``$ASCENDPROF_CACHE``) the normalised tables and per-rank results come from, and go to, the
same Parquet cache as the command line's, so a notebook re-run skips parsing.

Errors: :class:`~ascendprof.model.errors.UsageError` for a missing path or unknown table name,
:class:`~ascendprof.model.errors.NothingAnalysable` when no profiling data is found or no rank
can be read; bad input files never raise, they are listed in :attr:`Collection.problems`.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, TYPE_CHECKING

from ascendprof.engine import cache, outdir
from ascendprof.engine.run import run_analyse
from ascendprof.model.errors import InputError, UsageError
from ascendprof.model.options import ReadOptions
from ascendprof.model.problems import Problem, Problems
from ascendprof.model.outputs import REPORT_FILE
from ascendprof.report.html import ours, write_report
from ascendprof.scan import load_sources

if TYPE_CHECKING:  # imported lazily: `import ascendprof` stays light
    import pandas as pd
    import pyarrow as pa

    from ascendprof.compare.diff import DiffResult
    from ascendprof.engine.pipeline import ClusterAnalysis
    from ascendprof.engine.timeline import Timeline
    from ascendprof.model.source import Source


#: how to pick one run when a directory holds several (the API's words for analyse's options)
PICK_RUN = "Open one: give its path, or ascendprof.open(path, run=NAME) (or its number)."


def open(path: str | os.PathLike, *, workers: int | None = None,  # noqa: A001 - the API's verb
         cache_dir: str | os.PathLike | None = None, timeline: bool = False,
         thresholds: dict[str, float] | None = None, run: str | None = None) -> "Collection":
    """Open the profiling data under ``path`` (any depth; one rank or a whole cluster).

    ``workers``: processes for the per-rank work (default: cores, bounded by memory);
    ``cache_dir``: Parquet cache of the normalised tables and per-rank results (default
    ``$ASCENDPROF_CACHE``, else none); ``timeline``: also read trace_view.json when the other
    files suffice (as ``analyse --timeline``); ``thresholds``: verdict threshold overrides
    (names as in verdicts.json ``thresholds``); ``run``: the run to open when ``path`` holds
    several (its name, path or number as ``ascendprof scan`` lists them; as ``analyse --run``).
    Scans at once (small metadata files only). Raises UsageError for a missing path, an unknown
    threshold or run, scan.MultipleRuns (a UsageError naming the runs) when ``path`` holds
    several runs and ``run`` is not given, NothingAnalysable when no profiling data is found.
    """
    root = Path(path)
    if not root.exists():
        raise UsageError(f"{root}: no such file or directory")
    if thresholds:
        verdict_thresholds(thresholds)
    problems = Problems()
    sources = load_sources(root, problems, run=run, hint=PICK_RUN)
    env = os.environ.get("ASCENDPROF_CACHE")
    cache = Path(cache_dir) if cache_dir is not None else (Path(env) if env else None)
    return Collection(root, sources, problems, workers=workers, cache_dir=cache,
                      thresholds=thresholds or {}, run=run, read=ReadOptions(timeline=timeline))


class Collection:
    """One collection of profiling data (the ranks of one run); see :func:`open`."""

    def __init__(self, root: Path, sources: list["Source"], problems: Problems, *,
                 workers: int | None = None, cache_dir: Path | None = None,
                 thresholds: dict[str, float] | None = None, run: str | None = None,
                 read: ReadOptions = ReadOptions()):
        self.root = Path(root)
        #: the run picked under ``root`` (open's ``run``), None when root holds one run
        self.run = run
        self.sources: list[Source] = list(sources)
        self._scan_problems = problems
        self.workers = workers
        self.cache_dir = cache_dir
        self.thresholds = dict(thresholds or {})
        #: how every rank is read (open's ``timeline``)
        self.read = read
        self._analysis: ClusterAnalysis | None = None

    def __repr__(self) -> str:
        return f"<ascendprof.Collection {self.root} ranks={self.ranks}>"

    # --- what is there -----------------------------------------------------------------------

    @property
    def ranks(self) -> list[int]:
        """Global ranks of the collection, ascending (one source per rank)."""
        return sorted(s.rank for s in self.sources)

    @property
    def problems(self) -> list[Problem]:
        """Everything skipped or odd so far (scan, and the analysis once it ran): the rows of
        problems.csv (path, reason, rank, where, severity, affects)."""
        if self._analysis is not None:
            return list(self._analysis.problems)
        return list(self._scan_problems)

    def source(self, rank: int) -> "Source":
        """The source (directory, kind, files) of ``rank``; UsageError when absent."""
        for s in self.sources:
            if s.rank == rank:
                return s
        raise UsageError(f"rank {rank} is not in {self.root} (ranks: {self.ranks})")

    # --- tables --------------------------------------------------------------------------------

    def table(self, name: str, ranks: Iterable[int] | None = None) -> "pa.Table":
        """The normalised table ``name`` (one of :data:`ascendprof.model.schemas.SCHEMAS`:
        kernels, step_trace, steps, comm_ops, comm_bandwidth, comm_links, timeline,
        op_statistic, api_statistic, memory_record, …) of ``ranks`` (default: all),
        concatenated in rank order, with exactly that schema (int64 ns times, unit-named
        columns). A rank without that data contributes no rows. The same
        table ``analyse`` writes as tables/rank<r>/<name>.parquet. Raises UsageError for an
        unknown name or rank."""
        import pyarrow as pa

        from ascendprof.model import schemas as S

        if name not in S.SCHEMAS:
            raise UsageError(f"unknown table {name!r}; known: {', '.join(sorted(S.SCHEMAS))}")
        wanted = self.ranks if ranks is None else sorted({int(r) for r in ranks})
        parts = []
        for r in wanted:
            data = self._rank_data(self.source(r))
            if data is not None and name in data.tables:
                parts.append(data.tables[name])
        return pa.concat_tables(parts, promote_options="permissive") if parts else S.empty(name)

    def _rank_data(self, source: "Source"):
        """One rank's RankData through the worker's reading step (engine.pipeline.read_rank:
        from the cache when it holds it, else read now and stored), so the tables the API
        returns and the cache entries it leaves are the ones ``analyse`` reads and leaves."""
        from ascendprof.engine.pipeline import read_rank

        try:
            data, fresh = read_rank(source, self.read, self.cache_dir)
        except InputError as e:
            self._scan_problems.add_error(e, rank=source.rank, affects=("all",))
            return None
        if fresh and self.cache_dir is not None:
            cache.store(data, self.cache_dir, read=self.read)
        return data

    # --- results (the same objects the output files are written from) --------------------------

    def analysis(self) -> "ClusterAnalysis":
        """The whole cluster analysis (engine.pipeline.ClusterAnalysis): per-rank work once,
        then the cluster step and the verdicts. Raises NothingAnalysable when no rank can be
        read."""
        if self._analysis is None:
            from ascendprof.engine import pipeline

            results = pipeline.run_ranks(self.sources, None, workers=self.workers,
                                         cache_dir=self.cache_dir, read=self.read)
            problems = Problems()
            problems.extend(self._scan_problems)
            ca = pipeline.gather(str(self.root), self.sources, results, problems)
            self._analysis = pipeline.conclude(ca, self.thresholds)
        return self._analysis

    def step_breakdown(self) -> "pd.DataFrame":
        """cluster_step_trace_time.csv: per rank and step (and per pipeline stage) Computing,
        Communication(Not Overlapped), Overlapped, Communication, Free, Stage, Bubble,
        Communication(Not Overlapped and Exclude Receive), Preparing in µs, as the profiler
        reported them, plus DP/PP/TP Index (msprof-analyze layout). Empty frame when no rank
        has a step trace."""
        return _frame(self.analysis().cluster_step_trace)

    def step_check(self) -> "pd.DataFrame":
        """step_trace_check.csv: the step breakdown recomputed by interval arithmetic against
        the profiler's values (Rank, Step, Metric, Reported(us), Recomputed(us), Deviation(%),
        Method, Note)."""
        return _frame(self.analysis().step_trace_check)

    def communication(self) -> Mapping[str, Any]:
        """cluster_communication.json as a read-only mapping {group key: {step: {op: {rank:
        times and bandwidth}}}} (msprof-analyze layout; times in ms as there). Empty when the
        collection has no communication.json / communication tables."""
        return self.analysis().communication or {}

    def communication_matrix(self) -> Mapping[str, Any]:
        """cluster_communication_matrix.json as a read-only mapping (per group, step and op:
        src→dst links with transport, size MB, time ms, bandwidth GB/s)."""
        return self.analysis().communication_matrix or {}

    def communication_groups(self) -> dict:
        """communication_group.json: the communication groups and their global ranks."""
        return self.analysis().communication_group or {}

    def op_statistics(self) -> "pd.DataFrame":
        """op_statistics.csv: per (op type, Accelerator Core) Count, Total/Min/Avg/Max (µs) and
        Ratio(%), per rank and for the cluster."""
        return _frame(self.analysis().op_statistics)

    def top_kernels(self) -> "pd.DataFrame":
        """top_kernels.csv: the kernels (name + input shapes) with most total time."""
        return _frame(self.analysis().top_kernels)

    def frame(self, file_name: str) -> "pd.DataFrame":
        """Any further CSV output by its file name (pipeline.csv, memory_summary.csv,
        data_preparation.csv, iteration_trace.csv …): the frame ``analyse`` writes. Empty
        when the data did not allow it."""
        ca = self.analysis()
        if file_name == "iteration_trace.csv":
            return _frame(ca.iteration_trace)
        return _frame(ca.csv_files.get(file_name))

    def verdicts(self) -> list[dict]:
        """verdicts.json ``verdicts``: compute / schedule / communication bound, slow rank,
        slow link … each with scope, ranks, severity, evidence, threshold, message and next
        step (docs/verdicts.md)."""
        return list(self.analysis().verdicts)

    # --- other jobs ------------------------------------------------------------------------------

    def analyse(self, out: str | os.PathLike, **options) -> int:
        """Write every output file of ``ascendprof analyse`` into ``out`` (see the README's
        "What analyse writes"); ``options`` as the command's (fmt, tables, cache, strict,
        progress …). Returns the exit code the command would return."""
        options.setdefault("progress", False)
        options.setdefault("workers", self.workers)
        options.setdefault("thresholds", self.thresholds)
        options.setdefault("run", self.run)
        return analyse(self.root, out, **options)

    def timeline(self, *, ranks: Iterable[int] | None = None, steps: Iterable[int] | None = None,
                 window: tuple[float, float] | None = None, align: bool = False,
                 progress=None) -> "Timeline":
        """The merged cluster timeline (as ``ascendprof timeline``): events, collective
        flows, process names and the measured clock skew; write it with
        :meth:`write_timeline`. ``window``: (start, end) ms from the first event;
        ``progress``: called after each rank is read. Raises UsageError when none of
        ``ranks`` is in the collection, NothingAnalysable when nothing is left to draw."""
        from ascendprof.engine import timeline as E

        sources = self.sources
        if ranks is not None:
            wanted = set(ranks)
            sources = [s for s in self.sources if s.rank in wanted]
            if not sources:
                raise UsageError(f"none of ranks {sorted(wanted)} is in {self.root} "
                                 f"(ranks: {self.ranks})")
        return E.build(sources, steps=set(steps) if steps else None, window=window,
                       align=align, workers=self.workers, progress=progress,
                       problems=self._scan_problems)

    @staticmethod
    def write_timeline(tl: "Timeline", path: str | os.PathLike, fmt: str = "chrome") -> Path:
        """Write a :meth:`timeline` as Chrome trace JSON (``fmt='chrome'``) or Perfetto
        protobuf (``'perfetto'``)."""
        from ascendprof.engine import timeline as E

        return E.write(tl, Path(path), fmt, "")

    def diff(self, other: "Collection | str | os.PathLike | None" = None, *,
             ranks: tuple[int, int] | None = None) -> "DiffResult":
        """Compare this collection (A) with ``other`` (B), or two ranks ``(ra, rb)`` of this
        collection (or rank ra of A with rank rb of B), exactly as ``ascendprof diff``; see
        :func:`diff`."""
        b = other.root if isinstance(other, Collection) else other
        return diff(self.root, b, ranks=ranks, workers=self.workers)


def verdict_thresholds(overrides: dict[str, float] | None = None) -> dict[str, float]:
    """Every verdict threshold in force (as verdicts.json lists them): {lower-case name:
    value}, the defaults updated by ``overrides`` (names as ``--threshold NAME=VALUE``). Raises
    UsageError for an unknown name or a value that is not a finite number >= 0."""
    from ascendprof.engine.pipeline import verdict_thresholds as in_force

    try:
        return in_force(overrides)
    except ValueError as e:
        raise UsageError(str(e)) from None


def analyse(directory: str | os.PathLike, out: str | os.PathLike, **options) -> int:
    """``ascendprof analyse DIRECTORY -o OUT``: the whole analysis written into ``out`` (every
    file of the README's "What analyse writes", staged and put in place together), the summary
    printed (``fmt`` 'text' or 'json', ``progress``). ``options``: workers, executor,
    scheduler, tables, cache, thresholds, strict, timeline, run, as the command's options. Returns
    the command's exit code; raises the project's errors (UsageError, OutputError,
    NothingAnalysable)."""
    return run_analyse(Path(directory), Path(out), **options)


def diff(a: str | os.PathLike, b: str | os.PathLike | None = None, *,
         ranks: tuple[int, int] | None = None, workers: int | None = None) -> "DiffResult":
    """``ascendprof diff A B`` / ``ascendprof diff A --ranks RA,RB``: each side a profiling
    directory or an ``analyse`` output directory. Returns compare.diff.DiffResult: the step
    breakdown, op types, kernels, communication per group and bandwidth per transport as
    DataFrames (µs per step and rank; delta = B − A) and the plain-English explanation.
    Raises UsageError for a missing path, a missing rank or neither B nor ranks."""
    from ascendprof.compare import diff as D
    from ascendprof.compare.gate import load_run

    a = Path(a)
    b = Path(b) if b is not None else None
    for p in (a, b):
        if p is not None and not p.exists():
            raise UsageError(f"{p}: no such file or directory")
        if p is not None and not p.is_dir():
            raise UsageError(f"{p}: not a directory (diff compares directories)")
    if b is None and ranks is None:
        raise UsageError("diff needs two directories A B, or one directory and two ranks")
    run_a = load_run(a, workers=workers)
    run_b = load_run(b, workers=workers) if b is not None else run_a
    try:
        if ranks is not None:
            same = b is None or a.resolve() == b.resolve()
            la = f"rank {ranks[0]}" if same else f"{a} rank {ranks[0]}"
            lb = f"rank {ranks[1]}" if same else f"{b} rank {ranks[1]}"
            side_a = D.select_ranks(run_a, [ranks[0]], la)
            side_b = D.select_ranks(run_b, [ranks[1]], lb)
        else:
            side_a, side_b = run_a, run_b
    except ValueError as e:
        raise UsageError(str(e)) from None
    return D.compare(side_a, side_b, D.rank_pairs(side_a, side_b))


def rebuild_report(out: str | os.PathLike, dest: str | os.PathLike | None = None) -> Path:
    """``ascendprof report``: write the page of the analysis in ``out`` to ``dest``, by default
    ``out/report.html``. There it becomes one of the analysis' outputs: listed in the output
    directory's manifest (so the next ``analyse`` into ``out`` may replace or remove it), and a
    report.html that ascendprof did not write is refused (OutputConflict, exit 2), as
    ``analyse`` refuses it."""
    out = Path(out)
    if dest is not None:
        return write_report(out, Path(dest))
    page = out / REPORT_FILE
    manifest = outdir.read_manifest(out)
    listed = manifest is not None and REPORT_FILE in manifest["files"]
    if os.path.islink(page) or (os.path.lexists(page) and not _regular(page)):
        raise outdir.OutputConflict(
            f"{page}: a symbolic link, FIFO or device is never replaced; move it away or give "
            f"-o FILE")
    if os.path.lexists(page) and not listed and not (page.is_file() and ours(page)):
        raise outdir.OutputConflict(
            f"{page} exists and ascendprof did not write it; move it away or give -o FILE")
    path = write_report(out)
    if manifest is not None and not listed:
        outdir.adopt(out, REPORT_FILE)
    return path


def _regular(path: Path) -> bool:
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


def _frame(df) -> "pd.DataFrame":
    import pandas as pd

    if hasattr(df, "to_frame") and not isinstance(df, pd.DataFrame):  # made in slices
        return df.to_frame()
    return df.copy() if df is not None else pd.DataFrame()


__all__ = ["open", "analyse", "diff", "Collection"]
