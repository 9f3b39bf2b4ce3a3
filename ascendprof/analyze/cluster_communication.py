"""Cluster communication files in msprof-analyze's layout, built from the COMM_* tables.

Reproduces what ``msprof-analyze cluster -m all`` (26.2.0, text data) writes
(spec §8; msprof_analyze/cluster_analyse: communication_group/base_communication_group.py,
analysis/communication_analysis.py, analysis/comm_matrix_analysis.py, analysis/base_analysis.py):

- ``communication_group.json``: the rank sets of every collective and p2p communication group,
  plus ``comm_group_parallel_info`` joining each group with ``parallel_group_info`` of
  profiler_metadata.json (§A.13); the profiler names a group by ``double_hash(group id)``.
- ``cluster_communication.json``: ``{"(r0, r1, ...)": {step_key: {"<op>@<group>": {rank: OPINFO},
  "Total Op Info@<group>": {rank: TOTAL}}}}`` — per op the rank's own record (§A.5); per group
  the sums of the time fields, Wait Time Ratio = wait/(wait+transit), Synchronization Time Ratio
  = sync/(sync+transit), per transport summed size/time/size distribution and Bandwidth(GB/s) =
  MB/ms, all ratios rounded to 4 decimals (0 when the denominator is 0).
- ``cluster_communication_matrix.json``: the same group/step nesting, each link summed over the
  ranks and re-keyed from group-local to global ranks; local ranks are mapped through the
  self-links ``"i-i"`` each rank reports in the same step (what msprof-analyze effectively does:
  its parallel_group_info lookup never matches), unmappable links are dropped; per group a
  ``Total Op Info@<group>`` sums the ``-total@`` (and raw per-op) entries.

Group keys are ``str(tuple(set_of_ranks))`` as msprof-analyze writes them. msprof-analyze adds
ranks in the order it finds the rank directories; we add them in ascending rank order, and list
groups, ops and ranks in that order too (same keys and values; list order can differ).
Everything takes tables and returns plain dicts / DataFrames; nothing touches files.
"""

from __future__ import annotations

from array import array
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from itertools import accumulate, chain
from operator import itemgetter

import numpy as np
import orjson
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

EPS = 1e-15
TIME_INFO = "Communication Time Info"
BANDWIDTH_INFO = "Communication Bandwidth Info"
TOTAL_OP_INFO = "Total Op Info"
_TIME_FIELDS = (("Elapse Time(ms)", "elapse_ns"), ("Transit Time(ms)", "transit_ns"),
                ("Wait Time(ms)", "wait_ns"), ("Synchronization Time(ms)", "sync_ns"),
                ("Idle Time(ms)", "idle_ns"))
_MATRIX_TYPE_RE = ("send|reduce|invalid|broadcast|allreduce|receive|allgather|reducescatter|"
                   "scatter|alltoall|alltoallv|alltoallvc|batchsendrecv")


# --- helpers shared by the three files ---------------------------------------------------------

def double_hash(text: str) -> int:
    """The profiler's name for a communication group: two 32-bit polynomial hashes (primes 29 and
    131) of the group id (``"group_name_5"``) joined into one 64-bit number."""
    h0 = h1 = 0
    for ch in text:
        h0 = (h0 * 29 + ord(ch)) & 0xFFFFFFFF
        h1 = (h1 * 131 + ord(ch)) & 0xFFFFFFFF
    return (h0 << 32) | h1


def ratio(dividend: float, divisor: float) -> float:
    """dividend/divisor rounded to 4 decimals, 0 when the divisor is (almost) 0."""
    if divisor is None or abs(divisor) < EPS:
        return 0
    return round((dividend or 0) / divisor, 4)


def parallel_groups(metadata: dict[int, dict]) -> dict[str, dict]:
    """group name as the profiler writes it (``str(double_hash(group id))``) -> ``{"group_id",
    "pg_name", "global_ranks"}`` from every rank's ``parallel_group_info`` (§A.13); the first
    rank (ascending) that lists a group id wins."""
    out: dict[str, dict] = {}
    for rank in sorted(metadata):
        info = (metadata.get(rank) or {}).get("parallel_group_info")
        if not isinstance(info, dict):
            continue
        for gid, g in info.items():
            key = str(double_hash(str(gid)))
            if key in out or not isinstance(g, dict):
                continue
            ranks = g.get("global_ranks")
            out[key] = {"group_id": gid, "pg_name": g.get("group_name", "") or "",
                        "global_ranks": sorted(ranks) if isinstance(ranks, list) else []}
    return out


def _rows(table: pa.Table | None) -> list[dict]:
    if table is None or table.num_rows == 0:
        return []
    return table.to_pylist()


def _membership_rows(table: pa.Table | None, source: int) -> pa.Table | None:
    if table is None or table.num_rows == 0:
        return None
    order = np.arange(table.num_rows, dtype=np.int64) + (source << 40)  # ops before links
    return pa.table({"rank": table.column("rank").cast(pa.int64()),
                     "kind": table.column("kind").cast(pa.string()),
                     "group": table.column("group").cast(pa.string()), "order": order})


def first_memberships(comm_ops: pa.Table | None, comm_links: pa.Table | None = None
                      ) -> pa.Table | None:
    """The first row of every (kind, group, rank) among ``comm_ops`` then ``comm_links``:
    columns ``kind, group, rank, order_min`` (row order, ops before links); None without rows.
    Computed per rank in the workers, it is all :func:`group_membership` needs."""
    parts = [t for t in (_membership_rows(comm_ops, 0), _membership_rows(comm_links, 1))
             if t is not None]
    if not parts:
        return None
    t = pa.concat_tables(parts)
    t = t.filter(pc.is_in(t.column("kind"), pa.array(["collective", "p2p"])))
    return t.group_by(["kind", "group", "rank"], use_threads=False).aggregate([("order", "min")])


def group_membership(comm_ops: pa.Table | None, comm_links: pa.Table | None = None, *,
                     firsts: pa.Table | None = None) -> tuple[dict[str, set], dict[str, set]]:
    """(collective, p2p): group name -> set of global ranks that report an op of it in
    communication.json or a link in communication_matrix.json, in first-seen order (ranks
    ascending, each rank's ops in file order, then its links). ``firsts``: the
    :func:`first_memberships` of every rank concatenated, used instead of the tables."""
    coll: dict[str, set] = {}
    p2p: dict[str, set] = {}
    first = firsts if firsts is not None else first_memberships(comm_ops, comm_links)
    if first is None or first.num_rows == 0:
        return coll, p2p
    # a rank's rows in its own order (the per-rank orders compare within a rank only)
    first = first.sort_by([("rank", "ascending"), ("order_min", "ascending")])
    for rank, kind, group in zip(first.column("rank").to_pylist(),
                                 first.column("kind").to_pylist(),
                                 first.column("group").to_pylist()):
        (coll if kind == "collective" else p2p).setdefault(group, set()).add(rank)
    return coll, p2p


def group_key(ranks) -> str:
    """``"(0, 1)"``: msprof-analyze's key, the tuple of a Python set of ranks."""
    s: set = set()
    for r in sorted(ranks):
        s.add(r)
    return str(tuple(s))


@lru_cache(maxsize=4096)
def _frozen_key(ranks: frozenset) -> str:
    return group_key(ranks)


def _key_for(kind: str, group: str, coll: dict, p2p: dict) -> str:
    return _frozen_key(frozenset((p2p if kind == "p2p" else coll).get(group, ())))


# --- communication_group.json ------------------------------------------------------------------

def build_groups(comm_ops: pa.Table | None, metadata: dict[int, dict],
                 comm_links: pa.Table | None = None, membership=None) -> dict:
    """communication_group.json as msprof-analyze writes it.

    In: COMM_OPS (and optionally COMM_LINKS, which msprof-analyze also reads for membership),
    rank -> profiler_metadata object. Out: ``{"collective": [[ranks]...], "p2p": [[ranks]...],
    "comm_group_parallel_info": [{"type", "rank_set", "group_name", "group_id", "pg_name"}...]}``;
    ``rank_set`` is the group's ``global_ranks`` when parallel_group_info knows the group, else the
    ranks seen. With no communication data all three lists are empty (msprof-analyze still writes
    the file then). ``membership``: :func:`group_membership` of the same tables when the caller
    has it already.
    """
    coll, p2p = membership or group_membership(comm_ops, comm_links)
    pg = parallel_groups(metadata)
    info = []
    for kind, groups in (("collective", coll), ("p2p", p2p)):
        for name, ranks in groups.items():
            known = pg.get(name)
            rank_set = sorted(ranks)
            if known and known["global_ranks"]:
                rank_set = list(known["global_ranks"])
            info.append({"type": kind, "rank_set": rank_set, "group_name": name,
                         "group_id": known["group_id"] if known else "",
                         "pg_name": known["pg_name"] if known else ""})
    return {"collective": [list(_as_set(s)) for s in coll.values()],
            "p2p": [list(_as_set(s)) for s in p2p.values()],
            "comm_group_parallel_info": info}


def _as_set(ranks) -> set:
    s: set = set()
    for r in sorted(ranks):
        s.add(r)
    return s


# --- cluster_communication.json ----------------------------------------------------------------

def _ms(ns):
    return None if ns is None else ns / 1e6


def _bandwidth_entry(size, time_ms, bandwidth, large_packet_ratio, dist: dict) -> dict:
    """One transport of an OPINFO's 'Communication Bandwidth Info' (sizes MB, times ms)."""
    entry = {"Transit Size(MB)": size or 0, "Transit Time(ms)": time_ms or 0,
             "Bandwidth(GB/s)": (bandwidth if bandwidth is not None
                                 else ratio(size or 0, time_ms or 0))}
    if large_packet_ratio is not None:
        entry["Large Packet Ratio"] = large_packet_ratio
    entry["Size Distribution"] = dist
    return entry


def _time_info(start_ns, times_ms, wait_ratio, sync_ratio) -> dict:
    """An OPINFO's 'Communication Time Info': ``times_ms`` are the five (ms) fields in
    :data:`_TIME_FIELDS` order (None when missing); ratios recomputed when missing."""
    t = {}
    if start_ns is not None:
        t["Start Timestamp(us)"] = start_ns / 1000  # exact int division, then one rounding
    for (label, _), v in zip(_TIME_FIELDS, times_ms):
        if v is not None:
            t[label] = v
    _, transit, wait, sync, _ = (v or 0 for v in times_ms)
    t["Wait Time Ratio"] = wait_ratio if wait_ratio is not None else ratio(wait, wait + transit)
    t["Synchronization Time Ratio"] = (sync_ratio if sync_ratio is not None
                                       else ratio(sync, sync + transit))
    return t


def _op_info(op: dict, bandwidth: list[dict], dist: dict[str, dict]) -> dict:
    """One OPINFO from a COMM_OPS row dict, its COMM_BANDWIDTH row dicts and its size
    distributions (transport -> {packet size: [count, ms]})."""
    t = _time_info(op.get("start_ns"), [_ms(op.get(col)) for _, col in _TIME_FIELDS],
                   op.get("wait_ratio"), op.get("sync_ratio"))
    b = {}
    for row in bandwidth:
        b[row["transport"]] = _bandwidth_entry(
            row.get("size_mb"), _ms(row.get("transit_ns")), row.get("bandwidth_gbps"),
            row.get("large_packet_ratio"), dist.get(row["transport"], {}))
    return {TIME_INFO: t, BANDWIDTH_INFO: b}


_NOT_SUMMED = frozenset(("Wait Time Ratio", "Synchronization Time Ratio", "Start Timestamp(us)"))


class _Totals:
    """Running 'Total Op Info' of OPINFOs (CommunicationAnalysis totals): time fields and per
    transport size / time / size distribution summed in the order the OPINFOs are added."""

    __slots__ = ("t", "b")

    def __init__(self):
        self.t: dict[str, float] = {}
        self.b: dict[str, dict] = {}

    def add(self, info: dict) -> None:
        t, b = self.t, self.b
        for label, v in info.get(TIME_INFO, {}).items():
            if label not in _NOT_SUMMED:
                t[label] = t.get(label, 0.0) + v
        for transport, part in info.get(BANDWIDTH_INFO, {}).items():
            tot = b.get(transport)
            if tot is None:
                tot = b[transport] = {"Transit Time(ms)": 0, "Transit Size(MB)": 0,
                                      "Size Distribution": {}}
            tot["Transit Time(ms)"] += part.get("Transit Time(ms)", 0)
            tot["Transit Size(MB)"] += part.get("Transit Size(MB)", 0)
            sizes = tot["Size Distribution"]
            for size, (count, dur) in part.get("Size Distribution", {}).items():
                acc = sizes.get(size)
                if acc is None:
                    acc = sizes[size] = [0, 0]
                acc[0] += count
                acc[1] += dur

    def result(self) -> dict:
        for tot in self.b.values():
            tot["Bandwidth(GB/s)"] = ratio(tot["Transit Size(MB)"], tot["Transit Time(ms)"])
        return {TIME_INFO: _with_ratios(self.t), BANDWIDTH_INFO: self.b}


def _with_ratios(t: dict) -> dict:
    """Summed time fields ``t`` (ms) plus Wait / Synchronization Time Ratio computed from them
    (CommunicationAnalysis totals)."""
    wait, transit, sync = (t.get("Wait Time(ms)", 0), t.get("Transit Time(ms)", 0),
                           t.get("Synchronization Time(ms)", 0))
    t["Wait Time Ratio"] = ratio(wait, wait + transit)
    t["Synchronization Time Ratio"] = ratio(sync, sync + transit)
    return t


#: codec of the OPINFO chunks: LZ4 compresses the bench OPINFOs ~2.5x and decompresses ~3.5x
#: faster than zstd (1970 / 5820 vs 768 / 1686 MB/s), at a ratio of 10 instead of 16; the
#: chunks are parked on disk (spill), so the size hardly matters while the parent's
#: decompression of the whole cluster_communication.json is serial
_CODEC = "lz4_raw"


#: OPINFOs per compressed chunk of an :class:`OpFragments`: the file writer holds one chunk of
#: every member rank at a time (~16 KB per rank) instead of the whole group (54 MB for the
#: 256-rank group of the benchmark cluster)
RECORDS_PER_CHUNK = 16


def _compress(raw: bytes) -> tuple[int, bytes]:
    return len(raw), pa.compress(raw, codec=_CODEC, asbytes=True)


def _decompress(part: tuple[int, bytes]) -> bytes:
    """A (size, compressed) chunk decompressed; the compressed part is bytes or a
    spill.ParkedBytes (read back from the spill file)."""
    blob = part[1] if isinstance(part[1], bytes) else bytes(part[1])
    return pa.decompress(blob, part[0], codec=_CODEC, asbytes=True)


@dataclass
class OpFragments:
    """One rank's communication ops of one (kind, group), serialised for cluster_communication.json.

    ``count`` records in the rank's file order, one per (step key, op key) (first occurrence
    wins, as in msprof-analyze). ``head``: (uncompressed size, compressed bytes, see
    :data:`_CODEC`) of ``lengths | step index | op key JSONs`` with ``lengths`` int32 [count
    OPINFO lengths, count op key lengths] and ``step index`` int32 positions in ``steps`` (the
    step keys' JSON). ``chunks``: (size, compressed bytes) of the OPINFO JSONs of records
    [k i, k i + k), k = :data:`RECORDS_PER_CHUNK`
    (in the cluster step the bytes may be parked on disk: spill.ParkedBytes).
    ``totals``: ``[(step key JSON, "Total Op Info" JSON of this rank)]``. Built by
    :func:`rank_fragments` (in the worker), combined by :class:`CommunicationFile`.
    """

    rank: int
    kind: str
    group: str
    head: tuple
    chunks: list
    totals: list
    count: int = 0
    steps: list = field(default_factory=list)

    @staticmethod
    def pack(rank: int, kind: str, group: str, records: list[tuple[bytes, bytes, bytes]],
             totals: list) -> OpFragments:
        """From ``records`` = [(step key JSON, op key JSON, OPINFO JSON)] in file order."""
        steps: dict[bytes, int] = {}
        index = [steps.setdefault(st, len(steps)) for st, _, _ in records]
        infos = [info for _, _, info in records]
        keys = [key for _, key, _ in records]
        head = np.array([*map(len, infos), *map(len, keys), *index], dtype="<i4").tobytes()
        k = RECORDS_PER_CHUNK
        return OpFragments(rank=rank, kind=kind, group=group,
                           head=_compress(b"".join((head, *keys))),
                           chunks=[_compress(b"".join(infos[i:i + k]))
                                   for i in range(0, len(infos), k)],
                           totals=totals, count=len(records), steps=list(steps))

    @property
    def size(self) -> int:
        """Uncompressed bytes of the records."""
        return self.head[0] + sum(size for size, _ in self.chunks)

    @property
    def compressed_size(self) -> int:
        return len(self.head[1]) + sum(len(blob) for _, blob in self.chunks)

    def unpack_head(self) -> tuple[list[bytes], list[bytes], list[int]]:
        """Step key JSONs and op key JSONs of the records, in order, and the OPINFO lengths."""
        raw = _decompress(self.head)
        n = self.count
        head = np.frombuffer(raw, dtype="<i4", count=3 * n)
        ends = (np.cumsum(head[n:2 * n], dtype=np.int64) + 12 * n).tolist()
        keys = [raw[e - ln:e] for e, ln in zip(ends, head[n:2 * n].tolist())]
        steps = [self.steps[i] for i in head[2 * n:].tolist()]
        return steps, keys, head[:n].tolist()

    def chunk_infos(self, i: int, lengths: list[int]) -> list[memoryview]:
        """The OPINFO JSONs of chunk ``i`` (views of its decompressed buffer, which they keep
        alive); ``lengths`` as from :meth:`unpack_head`."""
        view = memoryview(_decompress(self.chunks[i]))
        ends = list(accumulate(lengths[i * RECORDS_PER_CHUNK:(i + 1) * RECORDS_PER_CHUNK]))
        return [view[a:b] for a, b in zip([0, *ends[:-1]], ends)]

    def all_infos(self, lengths: list[int]) -> list[memoryview]:
        return [v for i in range(len(self.chunks)) for v in self.chunk_infos(i, lengths)]

    def unpack(self) -> tuple[list[bytes], list[bytes], list[memoryview]]:
        """Step key JSONs, op key JSONs and OPINFO JSONs of all records, in order."""
        steps, keys, lengths = self.unpack_head()
        return steps, keys, self.all_infos(lengths)


def _columns(table: pa.Table | None, names) -> dict[str, list]:
    if table is None or table.num_rows == 0:
        return {}
    return {n: (table.column(n).to_pylist() if n in table.column_names else [None] * table.num_rows)
            for n in names}


_OP_COLS = ("rank", "step_key", "kind", "op_name", "group", "start_ns", "elapse_ns", "transit_ns",
            "wait_ns", "sync_ns", "idle_ns", "wait_ratio", "sync_ratio")
_BW_COLS = ("rank", "step_key", "kind", "op_name", "group", "transport", "size_mb", "transit_ns",
            "bandwidth_gbps", "large_packet_ratio")
_DIST_COLS = ("rank", "step_key", "kind", "op_name", "group", "transport", "packet_size_mb",
              "count", "dur_ns")


def rank_fragments(comm_ops: pa.Table | None, comm_bandwidth: pa.Table | None,
                   comm_size_dist: pa.Table | None) -> list[OpFragments]:
    """Serialise the OPINFOs and per-step totals of cluster_communication.json for the ops in
    ``comm_ops`` (normally one rank's COMM_OPS, with its COMM_BANDWIDTH / COMM_SIZE_DIST).

    Out: one :class:`OpFragments` per (rank, kind, group) in order of first appearance (rows
    taken in ascending rank, file order within a rank). An OPINFO is the op's ``opinfo_json``
    (the object exactly as the profiler wrote it, as msprof-analyze copies it) when the reader
    kept one, else built from the table rows (db, PROF_ and raw inputs). Totals are summed from
    the tables (int ns, so no float drift). Only the group key (which needs every rank's group
    membership) is left to :class:`CommunicationFile`. Runs per rank in the workers, so the
    cluster step never holds all ranks' raw rows. A rank's first row of an op wins (as in
    msprof-analyze); so does its first row of an (op, transport) and (op, transport, packet
    size).
    """
    if comm_ops is None or comm_ops.num_rows == 0:
        return []
    ops, bw, dist = comm_ops, comm_bandwidth, comm_size_dist
    if not _from_communication_json(ops):
        # communication.json tables are consistent by construction (one entry per op key, an
        # entry without usable time info skipped whole); other readers' tables are made so
        ops = _first_rows(ops, _KEY)
        bw = _first_rows(_only_ops(bw, ops), _KEY + ("transport",))
        dist = _first_rows(_only_ops(dist, ops), _KEY + ("transport", "packet_size_mb"))
    infos = _opinfo_json(ops, bw, dist)
    totals = _step_totals(ops, bw, dist)
    cols = ops.select(list(_KEY)).to_pydict()
    ranks = cols["rank"]
    order = sorted(range(len(ranks)), key=ranks.__getitem__)  # stable: file order in a rank
    step_json = {k: orjson.dumps(k) for k in set(cols["step_key"])}
    parts: dict[tuple, list] = {}
    dumps = orjson.dumps
    for i in order:
        rank, kind, group = ranks[i], cols["kind"][i], cols["group"][i]
        records = parts.get((rank, kind, group))
        if records is None:
            records = parts[(rank, kind, group)] = []
        records.append((step_json[cols["step_key"][i]],
                        dumps(f"{cols['op_name'][i]}@{group}"), infos[i]))
    return [OpFragments.pack(rank, kind, group, records,
                             [(dumps(step), dumps(total)) for step, total
                              in totals.get((rank, kind, group), {}).items()])
            for (rank, kind, group), records in parts.items()]


#: what identifies an op (one OPINFO) in the COMM_* tables
_KEY = ("rank", "step_key", "kind", "op_name", "group")
_ROW = "__row"


def _from_communication_json(ops: pa.Table) -> bool:
    """True when every row carries the profiler's OPINFO (tables of the communication.json
    reader)."""
    return "opinfo_json" in ops.column_names and ops.column("opinfo_json").null_count == 0


def _first_rows(table: pa.Table | None, keys) -> pa.Table | None:
    """``table`` keeping the first row of every ``keys`` combination (row order kept); the
    table itself when its keys are already unique (always so for communication.json input)."""
    if table is None or table.num_rows == 0:
        return table
    indexed = table.select(list(keys)).append_column(_ROW, pa.array(np.arange(table.num_rows)))
    first = indexed.group_by(list(keys), use_threads=False).aggregate([(_ROW, "min")])
    if first.num_rows == table.num_rows:
        return table
    return table.take(np.sort(first.column(f"{_ROW}_min").to_numpy()))


def _join_keys(table: pa.Table) -> pa.Table:
    """The :data:`_KEY` columns with nulls replaced (a join never matches null keys)."""
    cols = [pc.fill_null(table.column(k), -2**31 if k == "rank" else "\0") for k in _KEY]
    return pa.Table.from_arrays(cols, names=list(_KEY))


def _only_ops(table: pa.Table | None, ops: pa.Table) -> pa.Table | None:
    """Rows of a COMM_BANDWIDTH / COMM_SIZE_DIST ``table`` whose op has a COMM_OPS row (an op
    entry without a usable 'Communication Time Info' has none and is not in the file)."""
    if table is None or table.num_rows == 0:
        return table
    keys = _join_keys(table).append_column(_ROW, pa.array(np.arange(table.num_rows)))
    kept = keys.join(_join_keys(ops), list(_KEY), join_type="left semi", use_threads=False)
    if kept.num_rows == table.num_rows:
        return table
    return table.take(np.sort(kept.column(_ROW).to_numpy()))


def _opinfo_json(ops: pa.Table, bw: pa.Table | None, dist: pa.Table | None) -> list[bytes]:
    """The OPINFO JSON of every row of ``ops``: the profiler's own text when the reader kept it,
    else built from the COMM_* rows (:func:`_op_info`)."""
    n = ops.num_rows
    raw = (ops.column("opinfo_json").cast(pa.binary()).to_pylist()
           if "opinfo_json" in ops.column_names else [None] * n)
    missing = [i for i, v in enumerate(raw) if v is None]
    if not missing:
        return raw
    cols = _columns(ops.take(missing), _OP_COLS)
    bandwidth = _bandwidth_infos(bw, dist)
    times = list(zip(*(_ms_list(cols[col]) for _, col in _TIME_FIELDS)))
    for j, i in enumerate(missing):
        k = tuple(cols[c][j] for c in _KEY)
        raw[i] = orjson.dumps({
            TIME_INFO: _time_info(cols["start_ns"][j], times[j], cols["wait_ratio"][j],
                                  cols["sync_ratio"][j]),
            BANDWIDTH_INFO: bandwidth.get(k) or {}})
    return raw


_GROUP = ["rank", "kind", "group", "step_key"]


def _sums(table: pa.Table, keys: list, columns) -> list[dict]:
    """Rows of ``table`` grouped by ``keys`` (first-appearance order) with ``<col>_sum`` of each
    of ``columns`` (nulls read as 0 when ``columns`` maps to True, else skipped; an all-null
    skipped column sums to null)."""
    fill = {c: pc.fill_null(table.column(c), 0) for c, zero in columns.items() if zero}
    t = table.select(keys + [c for c in columns if c not in fill])
    for c, col in fill.items():
        t = t.append_column(c, col)
    t = t.append_column(_ROW, pa.array(np.arange(t.num_rows)))
    # sorted by first row: Acero's group order is not always the order of appearance
    g = t.group_by(keys, use_threads=False).aggregate([(c, "sum") for c in columns]
                                                      + [(_ROW, "min")])
    return g.sort_by(f"{_ROW}_min").drop_columns([f"{_ROW}_min"]).to_pylist()


def _step_totals(ops: pa.Table, bw: pa.Table | None, dist: pa.Table | None
                 ) -> dict[tuple, dict[str, dict]]:
    """(rank, kind, group) -> step key -> its 'Total Op Info' (CommunicationAnalysis totals):
    time fields summed (a field no op has is left out), ratios from the sums, per transport
    summed Transit Time / Size, Size Distribution and Bandwidth(GB/s) = MB/ms. Times in ms."""
    return _totals_from_sums(_step_sums(ops, bw, dist))


def _step_sums(ops: pa.Table, bw: pa.Table | None, dist: pa.Table | None) -> dict:
    """The sums behind :func:`_step_totals`, which add up over batches of one rank's ops
    (:func:`_add_sums`): ``{"ops": {(rank, kind, group, step key): {col: sum or None}},
    "bw": {(..., transport): [transit ns, size MB]}, "dist": {(..., transport, size):
    [count, dur ns]}}`` in first-appearance order."""
    out: dict = {"ops": {}, "bw": {}, "dist": {}}
    cols = [col for _, col in _TIME_FIELDS]
    for r in _sums(ops, _GROUP, {col: False for col in cols}):
        out["ops"][tuple(r[k] for k in _GROUP)] = {col: r[f"{col}_sum"] for col in cols}
    if bw is not None and bw.num_rows:
        for r in _sums(bw, _GROUP + ["transport"], {"transit_ns": True, "size_mb": True}):
            out["bw"][tuple(r[k] for k in _GROUP + ["transport"])] = \
                [r["transit_ns_sum"], r["size_mb_sum"]]
    if dist is not None and dist.num_rows:
        keys = _GROUP + ["transport", "packet_size_mb"]
        for r in _sums(dist, keys, {"count": True, "dur_ns": True}):
            out["dist"][tuple(r[k] for k in keys)] = [r["count_sum"], r["dur_ns_sum"]]
    return out


def _add_sums(acc: dict, more: dict) -> dict:
    """``more`` (:func:`_step_sums` of a later batch) added into ``acc``."""
    for key, sums in more["ops"].items():
        have = acc["ops"].get(key)
        if have is None:
            acc["ops"][key] = dict(sums)
            continue
        for col, v in sums.items():
            if v is not None:
                have[col] = v if have[col] is None else have[col] + v
    for part in ("bw", "dist"):
        for key, (a, b) in more[part].items():
            have = acc[part].get(key)
            if have is None:
                acc[part][key] = [a, b]
            else:
                have[0] += a
                have[1] += b
    return acc


def _totals_from_sums(sums: dict) -> dict[tuple, dict[str, dict]]:
    out: dict[tuple, dict[str, dict]] = {}
    for (rank, kind, group, step), r in sums["ops"].items():
        t = _with_ratios({label: r[col] / 1e6 for label, col in _TIME_FIELDS
                          if r[col] is not None})
        out.setdefault((rank, kind, group), {})[step] = {TIME_INFO: t, BANDWIDTH_INFO: {}}
    for (rank, kind, group, step, transport), (transit, size) in sums["bw"].items():
        time_ms = transit / 1e6
        out[(rank, kind, group)][step][BANDWIDTH_INFO][transport] = {
            "Transit Time(ms)": time_ms, "Transit Size(MB)": size, "Size Distribution": {},
            "Bandwidth(GB/s)": ratio(size, time_ms)}
    for (rank, kind, group, step, transport, size), (count, dur) in sums["dist"].items():
        entry = out[(rank, kind, group)][step][BANDWIDTH_INFO].get(transport)
        if entry is not None:  # sizes count only under a transport the op reports
            entry["Size Distribution"][size] = [count, dur / 1e6]
    return out


class FragmentsBuilder:
    """:func:`rank_fragments` of one rank's communication.json tables given batch by batch
    (the aligned row groups of a spilled COMM_OPS / COMM_BANDWIDTH / COMM_SIZE_DIST, see
    :mod:`ascendprof.sysio.bigtables`), so a file of 10^6 ops is never held whole: the OPINFOs
    are compressed :data:`RECORDS_PER_CHUNK` at a time as they come, the totals are summed as
    they come. :meth:`result` gives the same fragments as rank_fragments of the whole tables
    (the float sums of Transit Size may differ in the last bits: other summation order)."""

    def __init__(self):
        self._parts: dict[tuple, dict] = {}
        self._sums: dict = {"ops": {}, "bw": {}, "dist": {}}

    def add(self, ops: pa.Table, bw: pa.Table | None, dist: pa.Table | None) -> None:
        if ops is None or ops.num_rows == 0:
            return
        if not _from_communication_json(ops):
            raise ValueError("FragmentsBuilder takes communication.json tables only")
        _add_sums(self._sums, _step_sums(ops, bw, dist))
        keys = ops.select(["rank", "kind", "group"])
        first = keys.slice(0, 1).to_pylist()[0]
        same = all(pc.all(pc.equal(keys.column(c), first[c])).as_py() for c in first) \
            if keys.column("group").null_count == 0 and keys.column("kind").null_count == 0 \
            else False
        if same:
            groups = {(first["rank"], first["kind"], first["group"]): None}
        else:
            groups = {}
            for i, k in enumerate(zip(*(keys.column(c).to_pylist() for c in first))):
                groups.setdefault(k, []).append(i)
        for key, rows in groups.items():
            sub = ops if rows is None else ops.take(pa.array(rows, pa.int64()))
            self._add_group(key, sub)

    def _add_group(self, key: tuple, sub: pa.Table) -> None:
        part = self._parts.get(key)
        if part is None:  # compact: 12 bytes and the key's JSON per op until the end
            part = self._parts[key] = {"steps": {}, "index": array("i"), "keys": bytearray(),
                                       "key_lengths": array("i"), "lengths": array("i"),
                                       "chunks": [], "pending": b"", "pending_n": 0}
        group = key[2]
        names = sub.column("op_name").combine_chunks()
        tail = f'@{group}"'
        if names.null_count == 0 and not pc.any(pc.match_substring_regex(
                names, r'["\\\x00-\x1f]')).as_py() and orjson.dumps(tail[:-1])[1:-1] == \
                tail[:-1].encode():
            # op key JSONs as one Arrow string array: no Python step per op
            joined = pc.binary_join_element_wise(pa.scalar('"'), names, pa.scalar(tail), "")
            off = np.frombuffer(joined.buffers()[1], np.int32, len(joined) + 1,
                                joined.offset * 4)
            data = joined.buffers()[2]
            part["keys"] += memoryview(data)[off[0]:off[-1]]
            part["key_lengths"].extend(np.diff(off).astype(np.int32).tolist())
        else:
            op_keys = [orjson.dumps(f"{n}@{group}") for n in names.to_pylist()]
            part["keys"] += b"".join(op_keys)
            part["key_lengths"].extend(map(len, op_keys))
        codes = pc.dictionary_encode(sub.column("step_key").combine_chunks())
        ids = [part["steps"].setdefault(orjson.dumps(v), len(part["steps"]))
               for v in codes.dictionary.to_pylist()]
        part["index"].extend(np.asarray(ids, np.int32)[codes.indices.to_numpy(
            zero_copy_only=False)].tolist())
        texts = sub.column("opinfo_json").combine_chunks()
        off = np.frombuffer(texts.buffers()[1], np.int32, len(texts) + 1, texts.offset * 4)
        view = memoryview(texts.buffers()[2])
        part["lengths"].extend(np.diff(off).astype(np.int32).tolist())
        k = RECORDS_PER_CHUNK
        i, n = 0, len(texts)
        if part["pending_n"]:  # complete the chunk the last batch left open
            take = min(k - part["pending_n"], n)
            part["pending"] += view[off[0]:off[take]]
            part["pending_n"] += take
            i = take
            if part["pending_n"] == k:
                part["chunks"].append(_compress(part["pending"]))
                part["pending"], part["pending_n"] = b"", 0
        while i + k <= n:
            part["chunks"].append(_compress(view[off[i]:off[i + k]].tobytes()))
            i += k
        if i < n:
            part["pending"] += view[off[i]:off[n]]
            part["pending_n"] += n - i

    def result(self) -> list["OpFragments"]:
        totals = _totals_from_sums(self._sums)
        out = []
        for (rank, kind, group), part in self._parts.items():
            if part["pending_n"]:
                part["chunks"].append(_compress(bytes(part["pending"])))
            head = b"".join(np.frombuffer(part[n], dtype=np.int32).astype("<i4").tobytes()
                            for n in ("lengths", "key_lengths", "index"))
            out.append(OpFragments(
                rank=rank, kind=kind, group=group,
                head=_compress(b"".join((head, bytes(part["keys"])))),
                chunks=part["chunks"],
                totals=[(orjson.dumps(step), orjson.dumps(total)) for step, total
                        in totals.get((rank, kind, group), {}).items()],
                count=len(part["lengths"]), steps=list(part["steps"])))
        self._parts = {}
        return out


def _ms_list(ns: list) -> list:
    return [None if v is None else v / 1e6 for v in ns]


def _bandwidth_infos(comm_bandwidth: pa.Table | None, comm_size_dist: pa.Table | None
                     ) -> dict[tuple, dict]:
    """(rank, step key, kind, op name, group) -> the op's 'Communication Bandwidth Info'
    (transport -> entry, in row order; a later row of the same transport replaces the value)."""
    dist: dict[tuple, dict[str, dict]] = {}
    d = _columns(comm_size_dist, _DIST_COLS)
    if d:
        for k, transport, size, count, dur in zip(
                zip(d["rank"], d["step_key"], d["kind"], d["op_name"], d["group"]),
                d["transport"], d["packet_size_mb"], d["count"], _ms_list(d["dur_ns"])):
            by_transport = dist.get(k)
            if by_transport is None:
                by_transport = dist[k] = {}
            sizes = by_transport.get(transport)
            if sizes is None:
                sizes = by_transport[transport] = {}
            sizes[size] = [count or 0, dur or 0]
    out: dict[tuple, dict] = {}
    b = _columns(comm_bandwidth, _BW_COLS)
    if not b:
        return out
    for k, transport, size, time_ms, bandwidth, lpr in zip(
            zip(b["rank"], b["step_key"], b["kind"], b["op_name"], b["group"]),
            b["transport"], b["size_mb"], _ms_list(b["transit_ns"]), b["bandwidth_gbps"],
            b["large_packet_ratio"]):
        info = out.get(k)
        if info is None:
            info = out[k] = {}
        info[transport] = _bandwidth_entry(size, time_ms, bandwidth, lpr,
                                           (dist.get(k) or {}).get(transport, {}))
    return out


def _merge_totals(totals: list[dict]) -> dict:
    """One 'Total Op Info' from several partial ones (a rank whose ops of one group name come
    in two kinds that share a group key): sums again, ratios and bandwidths recomputed."""
    acc = _Totals()
    for t in totals:
        acc.add(t)
    return acc.result()


class CommunicationFile(Mapping):
    """cluster_communication.json assembled one group key at a time from :class:`OpFragments`.

    A read-only mapping ``{group key: {step key: {...}}}`` equal to what
    :func:`build_communication` returns; :meth:`group_json` gives one group's value as JSON
    bytes without building Python objects, which the report writer streams into the file, so
    at most one group's records are decompressed at once. Group keys are listed in order of
    first appearance (ranks ascending), as msprof-analyze and :func:`build_communication` do.
    """

    def __init__(self, fragments, coll: dict[str, set], p2p: dict[str, set]):
        keys: dict[tuple, str] = {}
        by_key: dict[str, list[OpFragments]] = {}
        for f in sorted(fragments, key=lambda f: f.rank):  # stable
            kg = (f.kind, f.group)
            if kg not in keys:
                keys[kg] = _key_for(f.kind, f.group, coll, p2p)
            by_key.setdefault(keys[kg], []).append(f)
        self._by_key = by_key

    @property
    def opinfo_bytes(self) -> int:
        """The size of all OPINFO JSONs (most of the file's size), known without decompressing."""
        return sum(size for fs in self._by_key.values() for f in fs for size, _ in f.chunks)

    def __getitem__(self, key: str) -> dict:
        return orjson.loads(self.group_json(key))

    def __iter__(self):
        return iter(self._by_key)

    def __len__(self) -> int:
        return len(self._by_key)

    def items_json(self):
        """``(group key, iterable of JSON byte pieces of its value)`` for every group, one group
        at a time (see :meth:`group_pieces`)."""
        for key in self._by_key:
            yield key, self.group_pieces(key)

    def group_json(self, key: str) -> bytes:
        """The value of ``key`` as compact JSON bytes. Raises KeyError for an unknown key."""
        return b"".join(self.group_pieces(key))

    def group_pieces(self, key: str):
        """The value of ``key`` as an iterator of compact JSON byte pieces; the pieces of a
        record flow through itertools (no Python step per record). Holds the group's
        decompressed records (OPINFOs are memoryview slices of them, never copied) until the
        last piece is taken. Raises KeyError for an unknown key."""
        return chain.from_iterable(self._chunks(self._by_key[key]))

    def _chunks(self, frags):
        """Iterables of pieces: one per op, and the step / total framing around them."""
        heads = [f.unpack_head() for f in frags]
        totals: dict[bytes, dict[str, dict[int, list]]] = {}
        for f in frags:
            for step, total in f.totals:
                totals.setdefault(step, {}).setdefault(f.group, {}).setdefault(f.rank, []) \
                    .append(total)
        first = heads[0]
        same = (len({f.rank for f in frags}) == len(frags)
                and all(h[0] == first[0] and h[1] == first[1] for h in heads[1:]))
        steps = self._aligned(frags, heads) if same else self._merged(frags, heads)
        yield (b"{",)
        for i, (step, ops) in enumerate(steps):
            yield ((b"," if i else b"") + step + b":{",)
            for j, (op_key, parts) in enumerate(ops):
                yield ((b"," if j else b"") + op_key + b":{",)
                yield parts
                yield (b"}",)
            for group, ranks in totals.get(step, {}).items():
                vals = [b'"%d":' % r + (t[0] if len(t) == 1 else
                                         orjson.dumps(_merge_totals([orjson.loads(x) for x in t])))
                        for r, t in ranks.items()]
                yield (b"," + orjson.dumps(f"{TOTAL_OP_INFO}@{group}") + b":{" + b",".join(vals)
                       + b"}",)
            yield (b"}",)
        yield (b"}",)

    @staticmethod
    def _aligned(frags, heads):
        """Every rank has the same records in the same order (the usual collective group): the
        output of op j is record j of every rank in turn, gathered without per-record Python.
        Only the chunk of record j is decompressed, for every rank at once (the pieces of an op
        are written before the next op is asked for)."""
        steps, keys, _ = heads[0]
        prefixes = [(b"," if i else b"") + b'"%d":' % f.rank for i, f in enumerate(frags)]
        k = RECORDS_PER_CHUNK
        held = {}  # chunk index -> every rank's OPINFOs of that chunk (one chunk at a time)

        def column(j):  # record j of every rank, in rank order
            c = j // k
            if c not in held:
                held.clear()
                held[c] = [f.chunk_infos(c, h[2]) for f, h in zip(frags, heads)]
            return map(itemgetter(j - c * k), held[c])

        by_step: dict[bytes, list[int]] = {}
        for j, step in enumerate(steps):
            by_step.setdefault(step, []).append(j)
        for step, rows in by_step.items():
            yield step, ((keys[j], chain.from_iterable(zip(prefixes, column(j)))) for j in rows)

    @staticmethod
    def _merged(frags, heads):
        """Ranks with different records: merged op by op (a rank's first record of an op
        wins)."""
        steps: dict[bytes, dict[bytes, list]] = {}
        for f, (st, keys, lengths) in zip(frags, heads):
            prefix = b'"%d":' % f.rank
            for step, op_key, info in zip(st, keys, f.all_infos(lengths)):
                ops = steps.get(step)
                if ops is None:
                    ops = steps[step] = {}
                ranks = ops.get(op_key)
                if ranks is None:
                    ops[op_key] = [f.rank, prefix, info]
                elif ranks[0] != f.rank:
                    ranks[0] = f.rank
                    ranks += (b"," + prefix, info)
        for step, ops in steps.items():
            yield step, ((op_key, ranks[1:]) for op_key, ranks in ops.items())


def build_communication(comm_ops: pa.Table, comm_bandwidth: pa.Table | None,
                        comm_size_dist: pa.Table | None, metadata: dict[int, dict],
                        comm_links: pa.Table | None = None) -> dict:
    """cluster_communication.json as msprof-analyze writes it (see the module docstring).

    In: all ranks' COMM_OPS, COMM_BANDWIDTH, COMM_SIZE_DIST (int ns, MB), optionally COMM_LINKS
    (only for group membership, as msprof-analyze reads both files), rank -> profiler_metadata.
    Out: ``{group key: {step key: {op key: {str(rank): OPINFO}, "Total Op Info@<group>":
    {str(rank): TOTAL}}}}`` with times in ms and Start Timestamp in us, as in the profiler's
    communication.json. A missing ratio or bandwidth (db input) is recomputed as in spec §7.2.
    Returns ``{}`` when there are no ops. Raises nothing for well-formed tables. The pipeline
    uses the same code per rank (:func:`rank_fragments`) and :class:`CommunicationFile`.
    """
    coll, p2p = group_membership(comm_ops, comm_links)
    return dict(CommunicationFile(rank_fragments(comm_ops, comm_bandwidth, comm_size_dist),
                                  coll, p2p))


# --- cluster_communication_matrix.json ---------------------------------------------------------

def _is_raw_op_row(r: dict) -> bool:
    """A flat-CANN matrix record (link_key is the op key itself), not a torch_npu summary."""
    return r.get("op_name") is not None and r["link_key"].rpartition("@")[0] == r["op_name"]


def _matrix_type(op_name: str) -> str:
    import re

    m = re.search(_MATRIX_TYPE_RE, op_name.lower())
    return m.group() if m else op_name.split("__")[0]


def _condense_raw(rows: list[dict]) -> list[dict]:
    """Per rank and step, turn raw per-op link records into the ``<type>-top1/middle/bottom1/
    bottom2/bottom3/total@<group>`` records torch_npu writes (spec §A.6; msprof-analyze's
    MsprofCommunicationMatrixAdapter does the same for PROF_ data)."""
    out, raw = [], defaultdict(list)
    for r in rows:
        if _is_raw_op_row(r):
            raw[(r["rank"], r["step_key"], r["kind"])].append(r)
        else:
            out.append(r)
    for (rank, step_key, kind), recs in raw.items():
        by_link: dict[tuple, list[dict]] = {}
        for r in recs:
            by_link.setdefault((_matrix_type(r["op_name"]), r["group"], r["src_rank"],
                                r["dst_rank"]), []).append(r)
        for (typ, group, src, dst), data in by_link.items():
            data = sorted(data, key=lambda x: x.get("bandwidth_gbps") or 0, reverse=True)
            picks = [("top1", data[0]), ("middle", data[len(data) // 2]), ("bottom1", data[-1])]
            size = sum(x.get("size_mb") or 0 for x in data)
            time_ns = sum(x.get("transit_ns") or 0 for x in data)
            total = dict(data[0], op_name=None, size_mb=size, transit_ns=time_ns,
                         bandwidth_gbps=ratio(size, time_ns / 1e6), large_packet_ratio=None)
            picks.append(("total", total))
            if len(data) >= 2:
                picks.append(("bottom2", data[-2]))
            if len(data) >= 3:
                picks.append(("bottom3", data[-3]))
            for label, rec in picks:
                out.append(dict(rec, link_key=f"{typ}-{label}@{group}"))
    return out


_LINK_FIELDS = ("rank", "kind", "group", "step_key", "link_key", "src_rank", "dst_rank",
                "transport", "size_mb", "transit_ns", "op_name")


def _link_records(comm_links: pa.Table | None):
    """COMM_LINKS as tuples of :data:`_LINK_FIELDS`, ranks ascending (file order within a
    rank), raw flat-CANN records condensed first (:func:`_condense_raw`). Column-wise: no
    dict per row unless there are raw records."""
    if comm_links is None or comm_links.num_rows == 0:
        return []
    if _has_raw_records(comm_links):
        rows = sorted(_condense_raw(_rows(comm_links)), key=lambda r: r["rank"])
        return [tuple(r[f] for f in _LINK_FIELDS) for r in rows]
    t = comm_links.take(pc.sort_indices(comm_links.column("rank")))  # a stable sort
    return zip(*(t.column(f).to_pylist() for f in _LINK_FIELDS))


def _has_raw_records(comm_links: pa.Table) -> bool:
    before_at = pc.replace_substring_regex(comm_links.column("link_key"), "@[^@]*$", "")
    return pc.any(pc.fill_null(pc.equal(before_at, comm_links.column("op_name")), False)).as_py()


def _check_add_op(op_key: str) -> bool:
    """msprof-analyze's filter for matrix totals: skip top/middle/bottom summaries."""
    return not any(s in op_key for s in ("middle", "top", "bottom"))


def _new_link() -> dict:
    return {"Transport Type": "", "Transit Time(ms)": 0, "Transit Size(MB)": 0, "Op Name": ""}


def _add_link(acc: dict, rec: dict) -> None:
    acc["Transport Type"] = rec["Transport Type"]
    acc["Op Name"] = rec.get("Op Name") or ""
    acc["Transit Time(ms)"] += rec.get("Transit Time(ms)", 0)
    acc["Transit Size(MB)"] += rec.get("Transit Size(MB)", 0)


def _merge_step(step_ops: dict[str, dict[int, dict[str, dict]]]) -> dict:
    """One (group key, step) of the matrix: sum each link over ranks, map local -> global ranks
    through the self-links, add per-group totals (CommMatrixAnalysis.compute_total_info)."""
    local_to_global: dict[str, dict[int, int]] = {}
    for op_key, ranks in step_ops.items():
        group = op_key.split("@")[-1]
        for rank, links in ranks.items():
            for (src, dst) in links:
                if src == dst:
                    local_to_global.setdefault(group, {}).setdefault(src, rank)
    merged: dict[str, dict] = {}
    for op_key, ranks in step_ops.items():
        rmap = local_to_global.get(op_key.split("@")[-1], {})
        acc: dict[tuple, dict] = {}
        for links in ranks.values():
            for link, rec in links.items():
                _add_link(acc.setdefault(link, _new_link()), rec)
        glob = {}
        for (src, dst), d in acc.items():
            if src not in rmap or dst not in rmap:
                continue
            d["Bandwidth(GB/s)"] = ratio(d["Transit Size(MB)"], d["Transit Time(ms)"])
            glob[f"{rmap[src]}-{rmap[dst]}"] = d
        merged[op_key] = glob
    totals: dict[str, dict[str, dict]] = {}
    for op_key, links in merged.items():
        if not _check_add_op(op_key):
            continue
        for link, d in links.items():
            _add_link(totals.setdefault(op_key.split("@")[-1], {}).setdefault(link, _new_link()), d)
    for group, links in totals.items():
        for d in links.values():
            d["Bandwidth(GB/s)"] = ratio(d["Transit Size(MB)"], d["Transit Time(ms)"])
        merged[f"{TOTAL_OP_INFO}@{group}"] = links
    return merged


def unmapped_links(comm_links: pa.Table | None) -> list[dict]:
    """The links cluster_communication_matrix.json leaves out because a local rank of theirs
    cannot be mapped to a global rank (no rank of the collection reports its self-link
    ``"i-i"`` in that group and step -- typically the peer on another node whose data is not
    here), as msprof-analyze leaves them out (it warns once per link and op).

    In: all ranks' COMM_LINKS. Out: one dict per (group, step key) with dropped links:
    ``{"group", "step_key", "links": n, "ops": n distinct link keys, "local_ranks": [the
    unmapped local ranks], "example": "<link key> <src>-<dst>"}``, in first-seen order;
    [] when every link maps (or raw flat-CANN records, condensed elsewhere)."""
    if comm_links is None or comm_links.num_rows == 0 or _has_raw_records(comm_links):
        return []
    t = comm_links.select(["kind", "group", "step_key", "link_key", "src_rank", "dst_rank"])
    t = t.filter(pc.and_(pc.is_valid(t["src_rank"]), pc.is_valid(t["dst_rank"])))
    if t.num_rows == 0:
        return []
    df = t.to_pandas()
    key = ["kind", "group", "step_key"]
    for c in key:
        df[c] = df[c].fillna("")
    self_links = df[df["src_rank"] == df["dst_rank"]][key + ["src_rank"]].drop_duplicates()
    mapped = set(map(tuple, self_links.to_numpy().tolist()))
    keys = list(zip(df["kind"], df["group"], df["step_key"]))
    src_ok = [(*k, s) in mapped for k, s in zip(keys, df["src_rank"].tolist())]
    dst_ok = [(*k, d) in mapped for k, d in zip(keys, df["dst_rank"].tolist())]
    src_ok = np.array(src_ok)
    miss = ~(src_ok & np.array(dst_ok))
    bad = df[miss].copy()
    if not len(bad):
        return []
    bad["local"] = np.where(src_ok[miss], bad["dst_rank"], bad["src_rank"])
    # the ranks' records of one link are merged before mapping: one dropped link each
    bad = bad.drop_duplicates(key + ["link_key", "src_rank", "dst_rank"])
    out = []
    for (_, group, step_key), g in bad.groupby(key, sort=False):
        r = g.iloc[0]
        out.append({"group": group, "step_key": step_key, "links": int(len(g)),
                    "ops": int(g["link_key"].nunique()),
                    "local_ranks": sorted({int(x) for x in g["local"]}),
                    "example": f"{r['link_key']} {int(r['src_rank'])}-{int(r['dst_rank'])}"})
    return out


def build_matrix(comm_links: pa.Table, metadata: dict[int, dict],
                 comm_ops: pa.Table | None = None, membership=None) -> dict:
    """cluster_communication_matrix.json as msprof-analyze writes it (see the module docstring).

    In: all ranks' COMM_LINKS (group-local src/dst, int ns, MB), optionally COMM_OPS (group
    membership, as msprof-analyze reads both files), rank -> profiler_metadata (kept for the
    interface; msprof-analyze's lookup of parallel_group_info never matches, so it does not
    change the result). Raw flat-CANN per-op records are first condensed to top1/middle/bottom/
    total like msprof-analyze does for PROF_ data. Out: ``{group key: {step key: {link key:
    {"<global src>-<global dst>": {"Transport Type", "Transit Time(ms)", "Transit Size(MB)",
    "Op Name", "Bandwidth(GB/s)"}}, "Total Op Info@<group>": {...}}}}``; ``{}`` without links.
    Links whose ranks are null (not an int in the input) or cannot be mapped are left out.
    ``membership``: :func:`group_membership` of the same tables when the caller has it already.
    """
    return dict(matrix_groups(comm_links, comm_ops=comm_ops, membership=membership))


def matrix_groups(comm_links: pa.Table | None, comm_ops: pa.Table | None = None,
                  membership=None):
    """The members of cluster_communication_matrix.json (see :func:`build_matrix`) as
    ``(group key, {step key: ...})`` pairs in first-seen order, built one group key at a time
    from that group's rows, so only one group's records are Python objects at once."""
    if comm_links is None or comm_links.num_rows == 0:
        return
    coll, p2p = membership or group_membership(comm_ops, comm_links)
    if _has_raw_records(comm_links):  # PROF_ input: condensed over all rows first
        yield from _matrix_members(_link_records(comm_links), coll, p2p)
        return
    t = comm_links.take(pc.sort_indices(comm_links.column("rank")))  # a stable sort
    pair = pc.binary_join_element_wise(pc.fill_null(t.column("kind"), ""),
                                       pc.fill_null(t.column("group"), ""), "\0")
    codes, pairs = (lambda e: (e.indices.to_numpy(), e.dictionary.to_pylist()))(
        pc.dictionary_encode(pair).combine_chunks())
    keys: dict[str, int] = {}  # group key -> position, first seen first
    key_of_pair = np.array([keys.setdefault(_key_for(*p.split("\0", 1), coll, p2p), len(keys))
                            for p in pairs], dtype=np.int64)
    row_key = key_of_pair[codes]
    order = np.argsort(row_key, kind="stable")  # rows of a group key together, in row order
    bounds = np.flatnonzero(np.r_[True, row_key[order][1:] != row_key[order][:-1], True])
    for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist()):
        sub = t.take(order[a:b])
        yield from _matrix_members(zip(*(sub.column(f).to_pylist() for f in _LINK_FIELDS)),
                                   coll, p2p)


def _matrix_members(records, coll: dict, p2p: dict):
    """(group key, {step key: merged links}) of ``records`` (tuples of :data:`_LINK_FIELDS`),
    group keys in first-seen order."""
    struct: dict = {}
    keys: dict[tuple, str] = {}
    for (rank, kind, group, step_key, link_key, src, dst, transport, size_mb, transit_ns,
         op_name) in records:
        if src is None or dst is None:
            continue
        gk = keys.get((kind, group))
        if gk is None:
            gk = keys[(kind, group)] = _key_for(kind, group, coll, p2p)
        ranks = struct.setdefault(gk, {}).setdefault(step_key, {}).setdefault(link_key, {})
        links = ranks.setdefault(rank, {})
        links.setdefault((src, dst), {
            "Transport Type": transport, "Transit Size(MB)": size_mb or 0,
            "Transit Time(ms)": _ms(transit_ns) or 0, "Op Name": op_name or ""})
    for gk, steps in struct.items():
        yield gk, {step: _merge_step(ops) for step, ops in steps.items()}


# --- per-group table for the verdicts ----------------------------------------------------------

def group_table(comm_ops: pa.Table | None, metadata: dict[int, dict],
                comm_links: pa.Table | None = None) -> pd.DataFrame:
    """One row per (communication group, step, rank) with the rank's summed op times.

    Columns: ``group_key`` (msprof-analyze's ``"(0, 1)"``), ``group`` (the profiler's group name),
    ``global_ranks`` (tuple: parallel_group_info's global ranks when known, else the ranks seen),
    ``group_name`` (parallel group name such as ``"dp_cp"``, ``"pp"``; ``""`` when unknown),
    ``group_id`` (``"group_name_5"`` or ``""``), ``kinds`` (``"collective"``, ``"p2p"`` or
    ``"collective+p2p"``), ``step_key``, ``step``, ``rank``, ``op_count`` and int64 ns sums
    ``elapse_ns``, ``transit_ns``, ``wait_ns``, ``sync_ns``, ``idle_ns``, plus ``wait_ratio`` =
    wait/(wait+transit) and ``sync_ratio`` = sync/(sync+transit) (0 when the sum is 0).
    A high wait ratio means a rank mostly waited for its peers; a low one with long transit
    points at a slow link. Empty frame with these columns when there are no ops.
    """
    cols = ["group_key", "group", "global_ranks", "group_name", "group_id", "kinds", "step_key",
            "step", "rank", "op_count", "elapse_ns", "transit_ns", "wait_ns", "sync_ns", "idle_ns",
            "wait_ratio", "sync_ratio"]
    rows = _rows(comm_ops)
    if not rows:
        return pd.DataFrame(columns=cols)
    coll, p2p = group_membership(comm_ops, comm_links)
    pg = parallel_groups(metadata)
    df = pd.DataFrame(rows)
    for c in ("elapse_ns", "transit_ns", "wait_ns", "sync_ns", "idle_ns"):
        df[c] = df[c].fillna(0).astype("int64")
    df["step"] = df["step"].astype("Int64")
    g = df.groupby(["group", "step_key", "rank"], sort=False, dropna=False)
    out = g.agg(step=("step", "first"), op_count=("op_name", "size"),
                kinds=("kind", lambda s: "+".join(sorted(set(s)))),
                elapse_ns=("elapse_ns", "sum"), transit_ns=("transit_ns", "sum"),
                wait_ns=("wait_ns", "sum"), sync_ns=("sync_ns", "sum"),
                idle_ns=("idle_ns", "sum")).reset_index()

    def key(row):
        kind = "p2p" if row["kinds"] == "p2p" else "collective"
        return _key_for(kind, row["group"], coll, p2p)

    def members(group):
        known = pg.get(group)
        if known and known["global_ranks"]:
            return tuple(known["global_ranks"])
        return tuple(sorted(coll.get(group, set()) | p2p.get(group, set())))

    out["group_key"] = out.apply(key, axis=1)
    out["global_ranks"] = out["group"].map(members)
    out["group_name"] = out["group"].map(lambda g: pg.get(g, {}).get("pg_name", ""))
    out["group_id"] = out["group"].map(lambda g: pg.get(g, {}).get("group_id", ""))
    w, t, s = (out[c].astype("float64") for c in ("wait_ns", "transit_ns", "sync_ns"))
    out["wait_ratio"] = (w / (w + t)).where((w + t) > 0, 0.0)
    out["sync_ratio"] = (s / (s + t)).where((s + t) > 0, 0.0)
    out = out.sort_values(["group_key", "step", "rank"], kind="stable").reset_index(drop=True)
    return out[cols]


__all__ = ["build_communication", "build_matrix", "build_groups", "group_table", "double_hash",
           "parallel_groups", "group_membership", "first_memberships", "group_key",
           "ratio"]
