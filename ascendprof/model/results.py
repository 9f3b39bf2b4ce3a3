"""The per-rank result contract: what one rank's worker hands to the cluster step.

The engine's worker fills it, the cache stores it (as data only), the cluster step and the API
read it. It holds only Arrow tables, plain values and :class:`Problems`, so it pickles small
and crosses a process pool or a Dask cluster.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pyarrow as pa

from ascendprof.model import schemas as S
from ascendprof.model.problems import Problems
from ascendprof.model.source import Source

#: Tables small enough to send back from a worker and concatenate over ranks. COMM_OPS,
#: COMM_BANDWIDTH and COMM_SIZE_DIST stay in the worker: what the cluster step needs of them
#: travels as :class:`~ascendprof.analyze.cluster_communication.OpFragments` (the file),
#: ``memberships`` (the groups) and the table :data:`~ascendprof.analyze.verdicts.OP_ROWS`
#: (the verdicts' per-op numbers, see verdicts.op_rows).
SMALL_TABLES = (S.STEP_TRACE, S.STEPS, S.COMM_LINKS, S.OP_STATISTIC, S.ITERATIONS)


@dataclass
class RankResult:
    """What one rank contributes to the cluster analysis (picklable, small).

    ``tables``: the :data:`SMALL_TABLES` the rank had. ``breakdown``: the recomputed step
    breakdown (STEP_TRACE schema) and ``breakdown_method`` how it was obtained (or why not).
    ``op_partial`` / ``kernel_partial``: per-rank aggregates for op statistics.
    ``comm_fragments``: the rank's part of cluster_communication.json, serialised and compressed
    (list of cluster_communication.OpFragments); ``memberships``: its first op / link of every
    communication group (cluster_communication.first_memberships).
    """

    source: Source
    rank: int
    tables: dict[str, pa.Table] = field(default_factory=dict)
    meta: dict = field(default_factory=dict)
    breakdown: pa.Table | None = None
    breakdown_method: str = ""
    op_partial: pa.Table | None = None
    kernel_partial: pa.Table | None = None
    comm_fragments: list = field(default_factory=list)
    memberships: pa.Table | None = None
    problems: Problems = field(default_factory=Problems)
    missing: list[str] = field(default_factory=list)
    table_rows: dict[str, int] = field(default_factory=dict)
    #: the rank's advice findings and rule status (analyze.advice.rank_advice); None when off
    advice: dict | None = None


#: the per-rank table of per-communication-op rows the verdicts read (made by
#: analyze.verdicts.opsplit.op_rows in the worker, released once the verdicts are derived)
OP_ROWS = "comm_op_rows"


def shared(value, seen: dict):
    """``value`` (plain JSON-like data: dict, list, tuple, str, int, float, bool, None) with
    every part equal to one ``seen`` before replaced by that one, so equal lists, dicts and
    texts of many ranks are held once (floats are left as they are: 0.0 == -0.0). ``seen``
    is the table of what was seen (start with {}; drop it when done). The result must be
    treated as read-only."""
    t = type(value)
    if t is str or t is int or t is bytes:
        return seen.setdefault((t, value), value)
    if t is list or t is tuple:
        kids = [shared(x, seen) for x in value]
        return seen.setdefault((t, *map(id, kids)), kids if t is list else tuple(kids))
    if t is dict:
        items = [(shared(k, seen), shared(v, seen)) for k, v in value.items()]
        return seen.setdefault((t, *(id(x) for kv in items for x in kv)), dict(items))
    return value  # None, bool and anything else: as it is


#: per-rank tables read back and combined at a time by :func:`concat_parts`
CONCAT_BATCH = 256


def concat_parts(tables, promote_options: str = "none") -> pa.Table | None:
    """The tables of ``tables`` (each a pa.Table or parked: :func:`unpark`) concatenated in
    order, None when there are none. Read back and combined :data:`CONCAT_BATCH` at a time:
    a table read back is a few KB of objects beside its data, and all ranks' at once were
    ~60 MB at 4096 ranks. Its chunks are those batches."""
    done = list(concat_batches(tables, promote_options))
    if not done:
        return None
    return done[0] if len(done) == 1 else pa.concat_tables(done,
                                                            promote_options=promote_options)


def concat_batches(tables, promote_options: str = "none"):
    """The tables of ``tables`` (each a pa.Table or parked: :func:`unpark`), in order, read
    back and concatenated :data:`CONCAT_BATCH` at a time: one table per batch, each in one
    chunk (a last batch of one table after others: that table as it is)."""
    batch, first = [], True
    for t in tables:
        batch.append(unpark(t))
        if len(batch) == CONCAT_BATCH:
            yield pa.concat_tables(batch, promote_options=promote_options).combine_chunks()
            batch, first = [], False
    if batch:
        yield (pa.concat_tables(batch, promote_options=promote_options).combine_chunks()
               if len(batch) > 1 or first else batch[0])


def unpark(value):
    """``value`` itself, or the table it stands for when the engine parked it on disk to keep
    the parent's memory flat (an object with ``load()``: sysio.parking.ParkedTable)."""
    load = getattr(value, "load", None)
    return load() if callable(load) else value


@dataclass
class ClusterAnalysis:
    """Cluster-level results built from :class:`RankResult` partials (the engine's combine step:
    engine.pipeline.gather / conclude); what the cluster analyses, the report and the API read.

    The ranks' per-op rows (verdicts.OP_ROWS) are released once the verdicts are derived."""

    root: str
    sources: list[Source]
    ranks: list[RankResult]
    problems: Problems
    step_trace: pa.Table | None = None          # reported, all ranks (STEP_TRACE schema)
    breakdown: pa.Table | None = None           # recomputed, all ranks (STEP_TRACE schema)
    step_trace_check: object = None             # pandas DataFrame (step_trace_check.csv)
    #: per rank: does the recomputed breakdown agree with the profiler's, which values are used
    #: (step_breakdown.rank_checks: rank, status, used, metrics with deviation_pct, reason)
    breakdown_check: list = field(default_factory=list)
    cluster_step_trace: object = None           # cluster_step_trace.ClusterStepTrace (frames())
    communication: object = None                # cluster_communication.json: a Mapping
    #                                             (cluster_communication.CommunicationFile)
    communication_matrix: object = None         # cluster_communication_matrix.json: a Mapping
    #                                             (SpilledJsonMembers: texts in a scratch file)
    communication_group: dict | None = None     # communication_group.json
    op_statistics: object = None                # pandas DataFrame (op_statistics.csv)
    top_kernels: object = None                  # pandas DataFrame (top_kernels.csv)
    iteration_trace: object = None              # pandas DataFrame (iteration_trace.csv)
    csv_files: dict = field(default_factory=dict)  # further CSVs: file name -> DataFrame
    #                                             (analyze.registry: pipeline, memory, ...)
    verdicts: list = field(default_factory=list)
    thresholds: dict = field(default_factory=dict)
    advice: dict | None = None                  # advice.json (analyze.advice); None when off
    #: all ranks' COMM_LINKS when a caller holds them already (:meth:`concat` returns them),
    #: else None: gather and conclude concatenate the ranks' links when they need them rather
    #: than hold them in between; and the group membership
    #: (cluster_communication.group_membership), for the matrix
    links: pa.Table | None = None
    membership: tuple | None = None
    _metadata: dict | None = field(default=None, init=False, repr=False, compare=False)

    def concat(self, name: str, *, one_chunk: bool = True,
               by_rank: bool = False) -> pa.Table | None:
        """All ranks' small table ``name`` concatenated (None when no rank has it), in the
        order of :attr:`ranks` (``by_rank``: in ascending rank order, ranks of one number in
        that order). COMM_LINKS is :attr:`links` when set. ``one_chunk=False`` leaves it in
        chunks of :data:`CONCAT_BATCH` ranks: the last copy into one chunk doubles a large
        table for a moment (the links at 4096 ranks: ~50 MB)."""
        if name == S.COMM_LINKS and self.links is not None:
            return self.links
        ranks = sorted(self.ranks, key=lambda r: r.rank) if by_rank else self.ranks
        combined = concat_parts((r.tables[name] for r in ranks if name in r.tables),
                                promote_options="permissive")
        # one chunk: hundreds of small per-rank chunks cost more than their data
        if combined is None or not one_chunk:
            return combined
        return combined.combine_chunks()

    def parts(self, name: str):
        """Each rank's small table ``name``, in rank order, one at a time (read back when parked
        by a sysio.parking.ParkingFile): for a cluster file that needs a few rows of all of them,
        not all of them at once."""
        for r in self.ranks:
            if name in r.tables:
                yield unpark(r.tables[name])

    def op_row_batches(self):
        """The ranks' per-op rows (verdicts.OP_ROWS), one table per rank in rank order (read
        back one at a time when parked by a sysio.parking.ParkingFile)."""
        for r in self.ranks:
            if OP_ROWS in r.tables and r.tables[OP_ROWS].num_rows:
                yield unpark(r.tables[OP_ROWS])

    @property
    def metadata(self) -> dict[int, dict]:
        """rank -> profiler_metadata.json object (empty dict when absent). Built once, equal
        values shared between ranks (:func:`shared`): each rank's group lists name every rank of
        its groups, ~40 KB of small objects per rank at 1024 ranks when each rank has its own.
        Read-only: a value may be every rank's."""
        if self._metadata is None:
            seen: dict = {}
            self._metadata = {r.rank: shared(r.meta.get("profiler_metadata") or {}, seen)
                              for r in self.ranks}
        return self._metadata
