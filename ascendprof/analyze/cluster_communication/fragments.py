"""One rank's OPINFOs of one (kind, group), serialised and compressed in the worker
(:class:`OpFragments`, :func:`rank_fragments`; :class:`FragmentsBuilder` when the rank's
communication.json is read batch by batch), so the cluster step never holds all ranks' raw
rows."""

from __future__ import annotations

from array import array
from dataclasses import dataclass, field
from itertools import accumulate

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc

from ascendprof.sysio.lz4chunk import compress, decompress
from ascendprof.analyze.cluster_communication.opinfo import OP_KEY, opinfo_texts
from ascendprof.analyze.cluster_communication.totals import (add_sums, ROW, step_sums,
                                                              step_totals, totals_from_sums)

#: OPINFOs per compressed chunk of an :class:`OpFragments`: the file writer holds one chunk of
#: every member rank at a time (~16 KB per rank) instead of the whole group (54 MB for the
#: 256-rank group of the benchmark cluster)
RECORDS_PER_CHUNK = 16


@dataclass
class OpFragments:
    """One rank's communication ops of one (kind, group), serialised for cluster_communication.json.

    ``count`` records in the rank's file order, one per (step key, op key) (first occurrence
    wins, as in msprof-analyze). ``head``: a :mod:`ascendprof.sysio.lz4chunk` chunk of
    ``lengths | step index | op key JSONs`` with ``lengths`` int32 [count OPINFO lengths, count
    op key lengths] and ``step index`` int32 positions in ``steps`` (the step keys' JSON).
    ``chunks``: chunks of the OPINFO JSONs of records [k i, k i + k), k =
    :data:`RECORDS_PER_CHUNK` (in the cluster step the bytes may be parked on disk:
    engine.spill.ParkedBytes). ``totals``: ``[(step key JSON, "Total Op Info" JSON of this
    rank)]``. Built by
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
                           head=compress(b"".join((head, *keys))),
                           chunks=[compress(b"".join(infos[i:i + k]))
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
        raw = decompress(self.head)
        n = self.count
        head = np.frombuffer(raw, dtype="<i4", count=3 * n)
        ends = (np.cumsum(head[n:2 * n], dtype=np.int64) + 12 * n).tolist()
        keys = [raw[e - ln:e] for e, ln in zip(ends, head[n:2 * n].tolist())]
        steps = [self.steps[i] for i in head[2 * n:].tolist()]
        return steps, keys, head[:n].tolist()

    def chunk_infos(self, i: int, lengths: list[int]) -> list[memoryview]:
        """The OPINFO JSONs of chunk ``i`` (views of its decompressed buffer, which they keep
        alive); ``lengths`` as from :meth:`unpack_head`."""
        view = memoryview(decompress(self.chunks[i]))
        ends = list(accumulate(lengths[i * RECORDS_PER_CHUNK:(i + 1) * RECORDS_PER_CHUNK]))
        return [view[a:b] for a, b in zip([0, *ends[:-1]], ends)]

    def all_infos(self, lengths: list[int]) -> list[memoryview]:
        return [v for i in range(len(self.chunks)) for v in self.chunk_infos(i, lengths)]

    def unpack(self) -> tuple[list[bytes], list[bytes], list[memoryview]]:
        """Step key JSONs, op key JSONs and OPINFO JSONs of all records, in order."""
        steps, keys, lengths = self.unpack_head()
        return steps, keys, self.all_infos(lengths)


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
    if not from_communication_json(ops):
        # communication.json tables are consistent by construction (one entry per op key, an
        # entry without usable time info skipped whole); other readers' tables are made so
        ops = _first_rows(ops, OP_KEY)
        bw = _first_rows(_only_ops(bw, ops), OP_KEY + ("transport",))
        dist = _first_rows(_only_ops(dist, ops), OP_KEY + ("transport", "packet_size_mb"))
    infos = opinfo_texts(ops, bw, dist)
    # db input (its bandwidth rows carry a Large Packet Ratio): msprof-analyze writes 0 in totals
    db_like = (not from_communication_json(ops) and bw is not None
               and "large_packet_ratio" in bw.column_names
               and bw.column("large_packet_ratio").null_count < bw.num_rows)
    totals = step_totals(ops, bw, dist, 0 if db_like else None)
    cols = ops.select(list(OP_KEY)).to_pydict()
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


def from_communication_json(ops: pa.Table) -> bool:
    """True when every row carries the profiler's OPINFO (tables of the communication.json
    reader)."""
    return "opinfo_json" in ops.column_names and ops.column("opinfo_json").null_count == 0


def _first_rows(table: pa.Table | None, keys) -> pa.Table | None:
    """``table`` keeping the first row of every ``keys`` combination (row order kept); the
    table itself when its keys are already unique (always so for communication.json input)."""
    if table is None or table.num_rows == 0:
        return table
    indexed = table.select(list(keys)).append_column(ROW, pa.array(np.arange(table.num_rows)))
    first = indexed.group_by(list(keys), use_threads=False).aggregate([(ROW, "min")])
    if first.num_rows == table.num_rows:
        return table
    return table.take(np.sort(first.column(f"{ROW}_min").to_numpy()))


def _join_keys(table: pa.Table) -> pa.Table:
    """The :data:`OP_KEY` columns with nulls replaced (a join never matches null keys)."""
    cols = [pc.fill_null(table.column(k), -2**31 if k == "rank" else "\0") for k in OP_KEY]
    return pa.Table.from_arrays(cols, names=list(OP_KEY))


def _only_ops(table: pa.Table | None, ops: pa.Table) -> pa.Table | None:
    """Rows of a COMM_BANDWIDTH / COMM_SIZE_DIST ``table`` whose op has a COMM_OPS row (an op
    entry without a usable 'Communication Time Info' has none and is not in the file)."""
    if table is None or table.num_rows == 0:
        return table
    keys = _join_keys(table).append_column(ROW, pa.array(np.arange(table.num_rows)))
    kept = keys.join(_join_keys(ops), list(OP_KEY), join_type="left semi", use_threads=False)
    if kept.num_rows == table.num_rows:
        return table
    return table.take(np.sort(kept.column(ROW).to_numpy()))


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
        if not from_communication_json(ops):
            raise ValueError("FragmentsBuilder takes communication.json tables only")
        add_sums(self._sums, step_sums(ops, bw, dist))
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
                part["chunks"].append(compress(part["pending"]))
                part["pending"], part["pending_n"] = b"", 0
        while i + k <= n:
            part["chunks"].append(compress(view[off[i]:off[i + k]].tobytes()))
            i += k
        if i < n:
            part["pending"] += view[off[i]:off[n]]
            part["pending_n"] += n - i

    def result(self) -> list["OpFragments"]:
        totals = totals_from_sums(self._sums)
        out = []
        for (rank, kind, group), part in self._parts.items():
            if part["pending_n"]:
                part["chunks"].append(compress(bytes(part["pending"])))
            head = b"".join(np.frombuffer(part[n], dtype=np.int32).astype("<i4").tobytes()
                            for n in ("lengths", "key_lengths", "index"))
            out.append(OpFragments(
                rank=rank, kind=kind, group=group,
                head=compress(b"".join((head, bytes(part["keys"])))),
                chunks=part["chunks"],
                totals=[(orjson.dumps(step), orjson.dumps(total)) for step, total
                        in totals.get((rank, kind, group), {}).items()],
                count=len(part["lengths"]), steps=list(part["steps"])))
        self._parts = {}
        return out
