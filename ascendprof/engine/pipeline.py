"""scan -> read -> per-rank analysis -> cluster combine. No file parsing and no output here.

:func:`process_rank` is a pure function of one :class:`~ascendprof.scan.Source` (paths in,
small tables and partial aggregates out), so it can run in a process pool or on a distributed
engine. Large tables (kernels, timeline) never leave the worker except as Parquet files when an
output directory is given. :func:`gather` and :func:`conclude` build the cluster results from
the per-rank partials.
"""

from __future__ import annotations

import gc
import os
import tempfile
from collections.abc import Mapping
from functools import partial
from importlib import import_module
from pathlib import Path

import numpy as np
import pyarrow as pa

from ascendprof.analyze import (advice as advice_rules, cluster_communication, cluster_step_trace,
                                iteration_trace, op_stats, registry, step_breakdown, verdicts)
from ascendprof.analyze.advice.base import READ_COLUMNS
from ascendprof.engine import cache
from ascendprof.engine.executors import local_map, release_free_heap
from ascendprof.model import schemas as S
from ascendprof.model.errors import AscendProfError, InputError, NothingAnalysable
from ascendprof.model.options import ReadOptions
from ascendprof.model.problems import Problems
from ascendprof.model.ranks import rank_ranges
from ascendprof.model.results import (ClusterAnalysis, RankResult,  # noqa: F401 - re-exported
                                      SMALL_TABLES, concat_batches, concat_parts, shared,
                                      unpark)
from ascendprof.model.source import Source
from ascendprof.readers import host_events, read_source, reader_module
from ascendprof.sysio import bigtables
from ascendprof.sysio.atomic import ensure_dir, write_parquet
from ascendprof.sysio.jsonstream import SpilledJsonMembers
from ascendprof.sysio.parking import write_ipc


#: spilled tables no advice rule reads (analyze.advice: none names them)
_ADVICE_UNREAD = (S.COMM_SIZE_DIST,)
#: the columns the advice rules read of a spilled table advice.READ_COLUMNS does not list
#: (analyze.advice.communication: small packets, bandwidth contention, retransmission); read
#: back with their texts dictionary-encoded (the rules compare, filter and convert them as
#: they do plain texts: same findings, checked on real ranks with each rule fired)
_ADVICE_COLUMNS = {S.COMM_BANDWIDTH: ("step_key", "op_name", "group", "transport", "size_mb",
                                      "transit_ns", "bandwidth_gbps")}
#: the rows the advice rules read of such a table (analyze.advice.communication: SDMA / RDMA
#: transfers of a positive size, and the first row), chosen a row group at a time
_ADVICE_ROWS = {S.COMM_BANDWIDTH: advice_rules.communication.bandwidth_rows}


def _advice_tables(data) -> tuple[dict, dict]:
    """``(tables, spilled)`` for the advice rules (analyze.advice.rank_advice) from ``data``
    (model.rankdata.RankData). A spilled kernels table stays as its slim in-memory part, the
    rules reading any other column from its Parquet file one at a time; another spilled table
    (bigtables: a large communication.json) is limited to the columns the rules read
    (advice.READ_COLUMNS, :data:`_ADVICE_COLUMNS`): taken from its slim in-memory part when
    that holds them (COMM_OPS), else read back (COMM_BANDWIDTH: its texts dictionary-encoded,
    ~4 M rows of group, op and transport names at 10^6 ops). A table no rule needs
    (COMM_SIZE_DIST) is left out. So a large rank gets the same advice as a small one, in
    memory that grows with a few columns of the kernels, not with all of them."""
    if not data.spilled:
        return data.tables, {}
    tables, spilled = dict(data.tables), {}
    for name, st in data.spilled.items():
        if name == S.KERNELS and name in tables:
            spilled[name] = st
            continue
        if name in _ADVICE_UNREAD:
            tables.pop(name, None)
            continue
        want = READ_COLUMNS.get(name, _ADVICE_COLUMNS.get(name))
        tables[name] = _spilled_columns(tables.get(name), st,
                                        None if want is None else
                                        [c for c in st.schema.names if c in want],
                                        dictionary=name in _ADVICE_COLUMNS,
                                        rows=_ADVICE_ROWS.get(name))
    return tables, spilled


def _spilled_columns(slim, st, cols, dictionary: bool = False, rows=None,
                     split=()) -> pa.Table:
    """Columns ``cols`` (all when None) of a spilled table ``st``: from ``slim``, its
    in-memory part, when that holds them all (no copy), else read from its file a row group
    at a time (with ``dictionary``: text columns dictionary-encoded, one dictionary per
    column; with ``rows``: only the rows ``rows(row_group, first)`` keeps, see
    bigtables.SpilledTable.read; the slim part is taken whole). The dictionaries of the
    columns in ``split`` stay one per row group."""
    if slim is not None and cols is not None and all(c in slim.column_names for c in cols):
        return slim.select(cols)
    if not dictionary:
        return st.read(columns=cols, rows=rows)
    t = st.read(columns=cols, dictionary=True, rows=rows)
    # one dictionary per column (as Table.unify_dictionaries gives), a column at a time: all
    # at once holds every text column's codes twice
    for i, f in enumerate(t.schema):
        if pa.types.is_dictionary(f.type) and f.name not in split:
            col = pa.table({f.name: t.column(i)}).unify_dictionaries().column(0)
            t = t.set_column(i, f, col)
            del col
    return t


def _registry_tables(data):
    """``(tables, kernels)`` for the registry's analyses (idle time, launches, late arrivals,
    efficiency ...: registry.rank_partials): a spilled kernels table stays its slim in-memory
    columns, ``kernels(columns)`` adding the other columns an analysis reads from its Parquet
    file while that analysis runs (not all of its columns: the PMU ratios alone are ~25 float
    columns); another spilled table has only the columns the analyses read of it
    (registry.READ_COLUMNS: a communication.json of 10^6 ops is ~1.4 GB whole, its OPINFO
    texts 740 MB of it), from its slim in-memory part when that holds them, else read back
    with its texts dictionary-encoded (group, op and transport names repeat); one no analysis
    reads is left out. A large rank gives the same files as a small one. A spilled table
    only a few analyses read (registry.READ_LATER: COMM_BANDWIDTH, ~0.25 GB of 5 M rows at a
    1 GB communication.json) is not read here: ``later`` {name: :class:`_LaterColumns`}
    reads the columns an analysis asks for while it runs (whole, or a row group at a time),
    so the table is not held through the other analyses. Returns ``(tables, kernels,
    later)``; ``kernels`` is None when nothing is spilled."""
    if not data.spilled:
        return data.tables, None, {}
    tables, kernels, later = dict(data.tables), None, {}
    for name, st in data.spilled.items():
        if name == S.KERNELS and name in tables:
            kernels = partial(_with_columns, tables[name], st)
            continue
        want = registry.READ_COLUMNS.get(name)
        cols = None if want is None else [c for c in st.schema.names if c in want]
        if cols == []:
            tables.pop(name, None)
            continue
        read = _LaterColumns(tables.pop(name, None), st, cols,
                             _ROW_GROUP_DICTIONARIES.get(name, ()))
        if name in registry.READ_LATER:
            later[name] = read
        else:
            tables[name] = read.read()
        del read
    return tables, kernels, later


class _LaterColumns:
    """Columns of a spilled table, read when an analysis asks for them (registry
    rank_partials' ``later``): :meth:`read` the table (as :func:`_spilled_columns` reads
    it: texts dictionary-encoded, one dictionary per column but those of ``split``),
    :meth:`row_groups` its row groups one at a time (each text column with its row group's
    dictionary). ``columns`` None: all of ``cols`` (the columns the registry reads)."""

    def __init__(self, slim, st, cols, split=()):
        self.slim, self.st, self.cols, self.split = slim, st, cols, split

    def _want(self, columns):
        if columns is None:
            return self.cols
        return [c for c in (self.cols or self.st.schema.names) if c in columns]

    def read(self, columns=None) -> pa.Table:
        return _spilled_columns(self.slim, self.st, self._want(columns), dictionary=True,
                                split=self.split)

    def row_groups(self, columns=None):
        cols = self._want(columns)
        if self.slim is not None and cols is not None and \
                all(c in self.slim.column_names for c in cols):
            yield self.slim.select(cols)
            return
        import pyarrow.parquet as pq  # (as sysio.bigtables: not at start-up)

        texts = [f.name for f in self.st.schema if pa.types.is_string(f.type)
                 and (cols is None or f.name in cols)]
        f = pq.ParquetFile(self.st.path, read_dictionary=texts or None, pre_buffer=False)
        for i in range(f.num_row_groups):
            yield f.read_row_group(i, columns=cols, use_threads=False)


#: text columns of a spilled table the registry's analyses get with one dictionary per row
#: group, not unified: COMM_BANDWIDTH's op names (each row group's are its own ops', ~17 k;
#: unified, every op name of the rank: ~0.14 GB to build at 1.35 M ops), read only by
#: analyze.comm_hardware, which looks each row group's dictionary up on its own
_ROW_GROUP_DICTIONARIES = {S.COMM_BANDWIDTH: ("op_name",)}


#: the KERNELS columns the step breakdown reads (analyze.step_breakdown)
_BREAKDOWN_KERNELS = ("rank", "step", "device_id", "start_ns", "dur_ns", "name",
                      "accelerator_core")


def _plain_kernels(data, columns) -> dict:
    """``data``'s tables; of a spilled rank, its slim kernels as ``columns`` in plain text
    (the slim table keeps its texts dictionary-encoded: only the columns one step reads are
    expanded, for that step)."""
    k = data.tables.get(S.KERNELS)
    if S.KERNELS not in data.spilled or k is None:
        return data.tables
    return {**data.tables, S.KERNELS: bigtables.plain(k, columns)}


def _with_columns(slim: pa.Table, spilled, cols) -> pa.Table:
    """The kernels with columns ``cols`` (those they have, in that order): from the slim
    in-memory table, the others read from the spilled file, text ones dictionary-encoded
    (data types and output shapes repeat: codes, not millions of texts)."""
    t = bigtables.plain(slim, cols)
    extra = [c for c in cols if c not in slim.column_names and c in spilled.schema.names]
    more = spilled.read(columns=extra, dictionary=True) if extra else None
    for c in extra:
        t = t.append_column(c, more[c])
    return t.select([c for c in cols if c in t.column_names])


def process_rank(source: Source, tables_dir: Path | None = None,
                 cache_dir: Path | None = None, read: ReadOptions = ReadOptions(),
                 partials: bool = True) -> RankResult:
    """Read one source (as ``read`` says: model.options.ReadOptions) and reduce it to a
    :class:`RankResult`.

    When ``tables_dir`` is given, every normalised table of the rank is written there as
    ``rank<r>/<table>.parquet`` (atomically). With ``cache_dir`` the normalised tables come from
    (or go to) the Parquet cache (see :mod:`ascendprof.engine.cache`). ``partials=False``
    leaves out the analyses' per-rank parts (analyze.registry: the gate, which does not compare
    them, reads a rank several times faster without them); such a result is never cached. Never
    raises for bad input: an unreadable rank comes back with no tables and its problem recorded
    (an unexpected exception of a reader too, so one rank cannot end the whole run).
    """
    # The readers build ~10^5 short-lived acyclic containers per rank (parsed JSON, OPINFO
    # dicts): reference counting frees them, and the cyclic collector's passes over them were
    # ~20% of a rank's time. It runs again as soon as the rank is done.
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        return _process_rank(source, tables_dir, cache_dir, read, partials)
    finally:
        if was_enabled:
            gc.enable()


def read_rank(source: Source, read: ReadOptions = ReadOptions(), cache_dir: Path | None = None):
    """The worker's reading step, shared by every job (analyse, timeline, gate, the API): the
    rank's RankData from the cache when its entry is fresh, else read now
    (readers.read_source), with the advice's host tables unless ``read.advice`` is "off".
    Returns ``(data, fresh)``, fresh when it was read now. Raises InputError when nothing of
    the rank can be read."""
    data = cache.load(source, cache_dir, read) if cache_dir is not None else None
    if data is not None:
        return data, False
    data = read_source(source, read)
    if read.advice != "off":
        host_events.extend(data, read_trace=read.advice == "all" or read.timeline)
    return data, True


def _process_rank(source: Source, tables_dir: Path | None, cache_dir: Path | None,
                  read: ReadOptions, partials: bool = True) -> RankResult:
    hit = cache.load_result(source, cache_dir, read)
    if hit is not None:  # inputs and code unchanged since the last run: nothing to recompute
        if tables_dir is None or cache.link_tables(Path(cache_dir) / cache.entry_key(source),
                                                   hit.table_rows,
                                                   Path(tables_dir) / f"rank{hit.rank}"):
            return hit
    res = RankResult(source=source, rank=source.rank)
    scratch = cache_dir if cache_dir is not None else tables_dir
    try:
        if scratch is not None:
            Path(scratch).mkdir(parents=True, exist_ok=True)
        with bigtables.spilling(scratch):  # a file too large to hold is read in batches
            data, fresh = read_rank(source, read, cache_dir)
    except InputError as e:
        res.problems.add_error(e, rank=source.rank, affects=("all",))
        return res
    except Exception as e:  # noqa: BLE001 - a reader defect loses this rank, not the run
        res.problems.add(source.path, f"reader failed ({type(e).__name__}: {e}); rank not "
                                      f"analysed - please report this", rank=source.rank,
                         affects=("all",))
        return res
    res.meta, res.missing = data.meta, data.missing
    res.problems.extend(data.problems)
    res.tables = {k: v for k, v in data.tables.items() if k in SMALL_TABLES}
    if data.spilled:  # a large file was read in batches: give its garbage back now
        release_free_heap()
    if S.COMM_OPS in data.spilled:
        res.comm_fragments, res.tables[verdicts.OP_ROWS] = _spilled_comm(data)
        release_free_heap()  # the builder's garbage, freed on return (~60 MB at 10^6 ops)
    elif data.has(S.COMM_OPS):
        ops, bw = data.tables[S.COMM_OPS], data.tables.get(S.COMM_BANDWIDTH)
        res.comm_fragments = cluster_communication.rank_fragments(
            ops, bw, data.tables.get(S.COMM_SIZE_DIST))
        res.tables[verdicts.OP_ROWS] = verdicts.op_rows(ops, bw)
    res.memberships = cluster_communication.first_memberships(data.tables.get(S.COMM_OPS),
                                                              data.tables.get(S.COMM_LINKS))
    res.table_rows = {k: data.num_rows(k) for k in data.names()}
    # a spilled rank's steps each build and drop hundreds of MB: the heap's free pages go
    # back between them, or one step's garbage adds to the next one's peak
    trim = release_free_heap if data.spilled else (lambda: None)
    if read.advice != "off":
        tables, spilled = _advice_tables(data)
        res.advice = advice_rules.rank_advice(tables, data.meta, data.rank, read.advice, spilled)
        del tables, spilled
        trim()
    res.breakdown, res.breakdown_method = step_breakdown.recompute(
        _plain_kernels(data, _BREAKDOWN_KERNELS), data.rank)
    trim()
    if partials:  # the analyses' per-rank parts (analyze.registry), for their output files
        tables, kernels, later = _registry_tables(data)
        res.tables.update(registry.rank_partials(tables, data.rank, res.problems, data.meta,
                                                 between=trim, kernels=kernels, later=later))
        del tables, kernels, later
        trim()
    if data.has(S.KERNELS):
        res.op_partial = op_stats.rank_partial(
            _plain_kernels(data, op_stats.RANK_COLUMNS)[S.KERNELS])
        trim()
        res.kernel_partial = op_stats.kernel_partial(
            _plain_kernels(data, op_stats.KERNEL_COLUMNS)[S.KERNELS])
        trim()
    entry = None
    if cache_dir is not None and partials:  # tables, entry and result in one directory write
        entry = (cache.store(data, cache_dir, result=res, read=read) if fresh
                 else cache.store_result(res, cache_dir, read))
    if tables_dir is not None:
        dest = Path(tables_dir) / f"rank{data.rank}"
        # the cache entry holds the same Parquet bytes: link rather than encode twice
        if entry is None or not cache.link_tables(entry, data.names(), dest):
            for name, t in data.tables.items():
                if name not in data.spilled:
                    write_parquet(dest / f"{name}.parquet", t)
            for name, sp in data.spilled.items():  # the whole table, already on disk
                ensure_dir(dest)
                sp.move_to(dest / f"{name}.parquet")
    for sp in data.spilled.values():
        sp.release()
    if data.spilled:  # the rank's tables are garbage now: their free pages go back before
        del data      # the result is parked or sent
        release_free_heap()
    return res


def _spilled_comm(data):
    """rank_fragments and op_rows of a rank whose communication tables are spilled: one
    aligned row group of COMM_OPS / COMM_BANDWIDTH / COMM_SIZE_DIST at a time."""

    frags = cluster_communication.FragmentsBuilder()
    rows = []
    names = (S.COMM_OPS, S.COMM_BANDWIDTH, S.COMM_SIZE_DIST)
    for b in bigtables.aligned_batches({n: data.spilled.get(n) for n in names}):
        ops = b.get(S.COMM_OPS)
        if ops is None or ops.num_rows == 0:
            continue
        frags.add(ops, b.get(S.COMM_BANDWIDTH), b.get(S.COMM_SIZE_DIST))
        rows.append(verdicts.op_rows(ops, b.get(S.COMM_BANDWIDTH)))
    op_rows = (pa.concat_tables(rows).unify_dictionaries().combine_chunks() if rows
               else verdicts.op_rows(data.tables[S.COMM_OPS].slice(0, 0)))

    result = frags.result()
    release_free_heap()
    return result, op_rows


def run_ranks(sources: list[Source], tables_dir: Path | None = None, *, workers: int | None = None,
              progress=None, cache_dir: Path | None = None, on_result=None,
              read: ReadOptions = ReadOptions(), partials: bool = True) -> list[RankResult]:
    """Run :func:`process_rank` over ``sources`` with the local executor (see executors);
    ``on_result`` sees each result as it arrives (e.g. sysio.parking.ParkingFile.take)."""

    preload(sources)
    return local_map(process_rank, sources, tables_dir=tables_dir, workers=workers,
                     progress=progress, cache_dir=cache_dir, on_result=on_result, read=read,
                     partials=partials)


def preload(sources) -> None:
    """Import what :func:`process_rank` needs for ``sources`` before the pool forks: their
    readers (the per-rank analyses and pandas come with this module's own imports). The
    workers then start with it loaded and share those pages instead of each importing it
    again (~0.5 s and ~40 MB per worker); the cluster step needs most of it afterwards anyway."""
    for kind in sorted({s.kind for s in sources}):
        import_module(reader_module(kind))


def gather(root: str, sources: list[Source], results: list[RankResult],
           problems: Problems) -> ClusterAnalysis:
    """The cluster results that do not depend on the verdicts (step trace, step check,
    communication groups and file, op statistics, iteration trace), from per-rank partials.
    ``verdicts`` and ``communication_matrix`` stay empty until :func:`conclude`. Raises
    NothingAnalysable when no rank produced any table."""

    for r in results:
        problems.extend(r.problems)
    problems.dedupe()
    usable = [r for r in results if r.tables or r.op_partial is not None]
    if not usable:
        raise NothingAnalysable(f"{root}: no rank could be read: {problems.brief()}")
    ca = ClusterAnalysis(root=str(root), sources=sources, ranks=usable, problems=problems)
    ca.step_trace = ca.concat(S.STEP_TRACE)
    _share_rows(ca, S.STEP_TRACE, ca.step_trace)
    ca.breakdown = concat_parts(r.breakdown for r in usable
                                if r.breakdown is not None and r.breakdown.num_rows)
    ca.step_trace_check = step_breakdown.check_table(_RankTables(usable))
    for rank, n in ca.step_trace_check.attrs.get("summarised", {}).items():
        problems.warn(next((r.source.path for r in usable if r.rank == rank), str(root)),
                      f"step_trace_check.csv: {n} steps without a recomputed value summarised "
                      f"in one row per metric (more than {step_breakdown.MAX_UNCHECKED_STEPS})",
                      rank=rank)
    ca.breakdown_check = step_breakdown.rank_checks(ca.step_trace_check)
    where = {r.rank: r.source.path for r in usable}
    for c in ca.breakdown_check:
        if c["reason"]:  # a deviation, or values nothing could check: say so, with the reason
            problems.add(where.get(c["rank"], root), c["reason"], rank=c["rank"],
                         where=f"rank {c['rank']} step breakdown", severity="warning",
                         affects=("step_breakdown", "verdicts"))
    release_free_heap()  # the step check's frames, before the links are read back
    links = ca.concat(S.COMM_LINKS)
    for d in cluster_communication.unmapped_links(links):
        problems.add(root, f"cluster_communication_matrix.json: {d['links']} link(s) of "
                           f"{d['ops']} op(s) in group {d['group']} left out: local rank(s) "
                           f"{', '.join(map(str, d['local_ranks']))} cannot be mapped to a global "
                           f"rank (no rank of this collection reports them: their ranks, e.g. on "
                           f"another node, were not collected or copied), e.g. {d['example']}",
                     where=d["step_key"], severity="warning", affects=("communication_matrix",))
    has_comm = any(r.tables[verdicts.OP_ROWS].num_rows for r in usable  # parked ones too
                   if verdicts.OP_ROWS in r.tables)
    # not held until the matrix (~50 MB of Arrow at 4096 ranks beside every later step): the
    # verdicts and the matrix concatenate the ranks' links again when they get to them
    del links
    release_free_heap()
    # msprof-analyze takes group membership (and so pipeline stages) from both comm files
    firsts = [unpark(r.memberships) for r in usable if r.memberships is not None]
    membership = cluster_communication.group_membership(
        None, firsts=pa.concat_tables(firsts) if firsts else None)
    groups = cluster_communication.build_groups(None, ca.metadata, membership=membership)
    rows = _step_rows(ca, problems)
    if rows is not None and rows.num_rows:
        ca.cluster_step_trace = cluster_step_trace.table(rows, ca.metadata, groups)
    ca.communication_group = groups
    if has_comm:
        ca.communication = cluster_communication.CommunicationFile(
            [f for r in usable for f in r.comm_fragments], *membership)
    if any(r.op_partial is not None for r in usable):  # read back a batch of ranks at a time
        ca.op_statistics = op_stats.combine(r.op_partial for r in usable
                                            if r.op_partial is not None)
        ca.top_kernels = op_stats.top_kernels(r.kernel_partial for r in usable
                                              if r.kernel_partial is not None)
        release_free_heap()
    iterations = ca.concat(S.ITERATIONS)
    if iterations is not None and iterations.num_rows:
        ca.iteration_trace = iteration_trace.per_rank(iterations)
    ca.membership = membership
    release_free_heap()

    ca.csv_files = registry.cluster_files(ca, between=release_free_heap)
    return ca


def verdict_thresholds(overrides: dict | None = None) -> dict:
    """Every verdict threshold in force, {lower-case name: value}: the built-in ones and the
    analyses' (analyze.registry), updated by ``overrides``. Raises ValueError for an unknown
    name or a value that is not a finite number >= 0."""
    return verdicts.thresholds(overrides, extra=registry.thresholds())


def conclude(ca: ClusterAnalysis, thresholds: dict | None = None,
             advice: str = "summary", scratch: Path | None = None) -> ClusterAnalysis:
    """Complete ``ca`` (from :func:`gather`): the communication matrix (its text in an
    unlinked scratch file in ``scratch``, the system's temporary directory when None), then the
    verdicts (``thresholds`` override the defaults, see verdicts.thresholds) and the advice
    (analyze.advice, in the mode ``advice``; none when "off"). Drops the ranks' per-op rows once
    the verdicts hold what they need; returns ``ca``."""

    # what gather built and dropped is still the process's (~0.2 GB at 10^6 steps): hand it
    # back before the matrix and the verdicts' step frame are made
    release_free_heap()
    # the matrix first: its largest group's arrays are not added to what the verdicts and the
    # advice leave in the heap (it reads nothing they make, and they do not read it)
    _matrix(ca, scratch)
    release_free_heap()
    ca.thresholds = verdict_thresholds(thresholds)
    ca.verdicts = verdicts.derive(ca, ca.thresholds, registry.verdict_rules())
    release_free_heap()  # the verdicts' frames, before the advice reads the ranks' findings
    mode = advice if ca.sources else "off"
    if mode != "off":
        seen: dict = {}  # the ranks' findings and rule status, equal parts held once
        ca.advice = advice_rules.cluster_advice(
            {r.rank: shared(unpark(r.advice), seen) for r in ca.ranks if r.advice},
            {rank: {"profiler_metadata": md} for rank, md in ca.metadata.items()}, mode)
        del seen
    # every rank's op rows are in the verdicts now: free them before the files are written
    for r in ca.ranks:
        r.tables.pop(verdicts.OP_ROWS, None)
    ca.links = None
    release_free_heap()
    return ca


def _matrix(ca: ClusterAnalysis, scratch: Path | None) -> None:
    """``ca.communication_matrix``: written to a scratch file group by group (an all-to-all
    group's n x n links per op are never held as one text), when any rank has links."""
    if ca.links is not None:  # a caller's links, held already
        if ca.links.num_rows:
            ca.communication_matrix = SpilledJsonMembers(cluster_communication.matrix_json(
                ca.links, membership=ca.membership), directory=scratch)
    elif any(r.tables[S.COMM_LINKS].num_rows for r in ca.ranks if S.COMM_LINKS in r.tables):
        # the ranks' links read back a batch of ranks at a time (in rank order, as the matrix
        # writes them), split by group into a scratch file, then merged one group at a time:
        # never all links at once (~50 MB of Arrow at 4096 ranks beside the largest group)
        ranks = sorted(ca.ranks, key=lambda r: r.rank)
        with _ScratchTables(scratch) as parked:
            ca.communication_matrix = SpilledJsonMembers(
                cluster_communication.matrix_json_batches(
                    lambda: concat_batches((r.tables[S.COMM_LINKS] for r in ranks
                                            if S.COMM_LINKS in r.tables), "permissive"),
                    ca.membership, park=parked.park), directory=scratch)


class _ScratchTables:
    """Arrow tables put aside in an unlinked temporary file (in ``directory``, the system's
    temporary directory when None) until read back: :meth:`park` returns a handle whose
    ``load()`` reads its table back (one pread, not a memory map, whose touched pages would
    count as this process's resident memory). The file goes when the ``with`` block ends."""

    def __init__(self, directory: Path | None = None):
        self._file = tempfile.TemporaryFile(prefix=".ascendprof-scratch-", dir=directory)

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self._file.close()

    def park(self, table: pa.Table):
        start = self._file.seek(0, 2)
        write_ipc(self._file, table)
        self._file.flush()
        return _Scratched(self._file, start, self._file.tell() - start)


class _Scratched:
    __slots__ = ("_file", "_offset", "_length")

    def __init__(self, file, offset: int, length: int):
        self._file, self._offset, self._length = file, offset, length

    def load(self) -> pa.Table:
        data = os.pread(self._file.fileno(), self._length, self._offset)
        return pa.ipc.open_stream(pa.py_buffer(data)).read_all()


__all__ = ["RankResult", "ClusterAnalysis", "process_rank", "run_ranks", "gather",
           "conclude", "AscendProfError"]


def _step_rows(ca, problems):
    """The rows of cluster_step_trace_time.csv: the profiler's step breakdown, and for the
    (rank, step) it lacks (PROF_, legacy and raw collections have none) ascendprof's
    recomputed one, as the terminal shows them (a warning names the recomputed ranks)."""
    st, bd = ca.step_trace, ca.breakdown
    if bd is None or not bd.num_rows:
        return st
    # (rank, step) as one int64 code each: a set of Python tuples was ~130 MB at 10^6 steps,
    # and its memory stayed with the process
    have = S.pair_codes(st) if st is not None and st.num_rows else np.zeros(0, np.int64)
    keep = np.flatnonzero(~np.isin(S.pair_codes(bd), have))
    if not len(keep):
        return st
    extra = bd.take(pa.array(keep)).select(st.column_names if st is not None and st.num_rows
                                           else bd.column_names)
    ranks = sorted(set(extra.column("rank").to_pylist()))

    problems.add(ca.root, f"cluster_step_trace_time.csv: the rows of rank(s) "
                          f"{rank_ranges(ranks)} are recomputed by ascendprof from the kernels "
                          f"and communication ops (their collection has no step breakdown of "
                          f"the profiler's)", severity="warning", affects=("step_breakdown",))
    if st is None or not st.num_rows:
        return extra
    return pa.concat_tables([st, extra.cast(st.schema)])


#: a rank's table of at least this many rows becomes a slice of the concatenation
#: (:func:`_share_rows`); a smaller one stays as it is (parked)
SHARE_MIN_ROWS = 4096


def _share_rows(ca: ClusterAnalysis, name: str, whole: pa.Table | None) -> None:
    """Each rank's table ``name`` of :data:`SHARE_MIN_ROWS` rows or more, in memory or parked
    on disk, becomes its slice of ``whole`` (their concatenation in rank order), sharing its
    memory: at 10^6 steps a rank the parked tables read back beside the concatenation were
    ~170 MB. A smaller one stays parked: a slice is a table object of its own (~14 KB each,
    ~60 MB at 4096 ranks of one step each). Only when ``whole`` has the table's one schema
    (every reader conforms to it), so a slice is the table it replaces."""
    if whole is None or not whole.schema.equals(S.SCHEMAS[name]):
        return
    at = 0
    for r in ca.ranks:
        if name in r.tables:
            n = r.tables[name].num_rows
            if n >= SHARE_MIN_ROWS:
                r.tables[name] = whole.slice(at, n)
            at += n


class _RankTables(Mapping):
    """rank -> (reported STEP_TRACE, recomputed breakdown, method) of ``ranks`` for
    step_breakdown.check_table, read back from the parking file when asked for (one rank's
    tables at a time, not all ranks' at once: ~30 MB at 4096 ranks)."""

    def __init__(self, ranks):
        self._by_rank = {r.rank: r for r in ranks}

    def __getitem__(self, rank):
        r = self._by_rank[rank]
        return unpark(r.tables.get(S.STEP_TRACE)), unpark(r.breakdown), r.breakdown_method

    def __iter__(self):
        return iter(self._by_rank)

    def __len__(self) -> int:
        return len(self._by_rank)
