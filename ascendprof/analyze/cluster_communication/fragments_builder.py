"""The fragments of a rank whose communication.json is read batch by batch (spilled tables)."""

from __future__ import annotations

from array import array

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc

from ascendprof.sysio.lz4chunk import compress
from ascendprof.analyze.cluster_communication.fragments import (RECORDS_PER_CHUNK, OpFragments,
                                                                from_communication_json)
from ascendprof.analyze.cluster_communication.totals import add_sums, step_sums, totals_from_sums


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
