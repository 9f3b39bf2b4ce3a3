"""cluster_communication.json assembled one group key at a time from the ranks' fragments."""

from __future__ import annotations

from collections.abc import Mapping
from itertools import chain
from operator import itemgetter

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc

from ascendprof.analyze.cluster_communication.fragments import RECORDS_PER_CHUNK, OpFragments
from ascendprof.analyze.cluster_communication.groups import key_for
from ascendprof.analyze.cluster_communication.opinfo import TOTAL_OP_INFO
from ascendprof.analyze.cluster_communication.totals import merge_totals
from ascendprof.analyze.codes import group_codes
from ascendprof.sysio.lz4chunk import decompress


class CommunicationFile(Mapping):
    """cluster_communication.json assembled one group key at a time from :class:`OpFragments`.

    A read-only mapping ``{group key: {step key: {op key: {str(rank): OPINFO},
    "Total Op Info@<group>": {str(rank): TOTAL}}}}`` with times in ms and Start Timestamp in us,
    as in the profiler's communication.json (``coll``, ``p2p``: :func:`group_membership` of all
    ranks). :meth:`group_json` gives one group's value as JSON bytes without building Python
    objects, which the report writer streams into the file, so at most one group's records are
    decompressed at once. Group keys are listed in order of first appearance (ranks
    ascending), as msprof-analyze does.
    """

    def __init__(self, fragments, coll: dict[str, set], p2p: dict[str, set]):
        keys: dict[tuple, str] = {}
        by_key: dict[str, list[OpFragments]] = {}
        for f in sorted(fragments, key=lambda f: f.rank):  # stable
            kg = (f.kind, f.group)
            if kg not in keys:
                keys[kg] = key_for(f.kind, f.group, coll, p2p)
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
        totals: dict[bytes, dict[str, dict[int, list]]] = {}
        for f in frags:
            for step, total in f.totals:
                totals.setdefault(step, {}).setdefault(f.group, {}).setdefault(f.rank, []) \
                    .append(total)
        heads = [f.unpack_head() for f in frags] if len({f.rank for f in frags}) == len(frags) \
            else None
        same = heads is not None and all(h[0] == heads[0][0] and h[1] == heads[0][1]
                                         for h in heads[1:])
        if not same:
            heads = None
        steps = self._aligned(frags, heads) if same else self._merged(frags)
        yield (b"{",)
        for i, (step, ops) in enumerate(steps):
            yield ((b"," if i else b"") + step + b":{",)
            for j, (op_key, parts) in enumerate(ops):
                yield ((b"," if j else b"") + op_key + b":{",)
                yield parts
                yield (b"}",)
            for group, ranks in totals.get(step, {}).items():
                vals = [b'"%d":' % r + (t[0] if len(t) == 1 else
                                         orjson.dumps(merge_totals([orjson.loads(x) for x in t])))
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
    def _merged(frags):
        """Ranks with different records: merged op by op (a rank's first record of an op
        wins); steps and the ops of a step in order of first appearance, an op's ranks in
        order. Found on integer codes of the records' step and op key, made from the
        fragments' heads without a Python object per record; an OPINFO is decompressed when
        its op is written, one chunk per fragment at a time (holding them all was the whole
        group's records: ~0.7 GB for one rank of 10^6 ops)."""
        step_code: dict[bytes, int] = {}
        keys, steps, lengths = [], [], []
        for f in frags:
            raw = decompress(f.head)
            n = f.count
            head = np.frombuffer(raw, dtype="<i4", count=3 * n)
            ends = np.cumsum(head[n:2 * n], dtype=np.int64) + 12 * n
            offsets = np.concatenate([[12 * n], ends]).astype(np.int64)
            keys.append(pa.LargeBinaryArray.from_buffers(
                pa.large_binary(), n, [None, pa.py_buffer(offsets), pa.py_buffer(raw)]))
            local = np.array([step_code.setdefault(st, len(step_code)) for st in f.steps],
                             np.int64)
            steps.append(local[head[2 * n:]] if n else np.zeros(0, np.int64))
            lengths.append(head[:n])
        enc = pa.table({"k": pc.dictionary_encode(pa.chunked_array(keys, pa.large_binary()))}) \
            .unify_dictionaries()["k"]
        key = np.concatenate([np.zeros(0, np.int64)]
                             + [c.indices.to_numpy(zero_copy_only=False) for c in enc.chunks])
        del enc
        step = np.concatenate([np.zeros(0, np.int64), *steps])
        if not len(step):
            return
        counts = [f.count for f in frags]
        frag = np.repeat(np.arange(len(frags)), counts)
        record = np.concatenate([np.arange(n) for n in counts])
        _, op = group_codes(step, np.asarray(key, np.int64))
        _, rank = np.unique(np.repeat([f.rank for f in frags], counts), return_inverse=True)
        rank = rank.reshape(-1)
        # a rank's first record of each op (ranks ascend with the fragments)
        kept = np.sort(np.unique(op * (int(rank.max()) + 1) + rank, return_index=True)[1])
        kept = kept[np.lexsort((kept, op[kept], step[kept]))]
        step_keys = list(step_code)
        prefixes = [b'"%d":' % f.rank for f in frags]
        k = RECORDS_PER_CHUNK
        held: dict[int, tuple] = {}  # fragment -> (chunk index, its OPINFOs)

        def info(fi: int, j: int):
            c = j // k
            got = held.get(fi)
            if got is None or got[0] != c:
                got = held[fi] = (c, frags[fi].chunk_infos(c, lengths[fi]))
            return got[1][j - c * k]

        def key_of(fi: int, j: int) -> bytes:
            return keys[fi][j].as_py()

        ops_of = op[kept]
        op_start = np.flatnonzero(np.r_[True, ops_of[1:] != ops_of[:-1]])
        op_end = np.r_[op_start[1:], len(kept)]
        st = step[kept][op_start]
        step_start = np.flatnonzero(np.r_[True, st[1:] != st[:-1]])
        step_end = np.r_[step_start[1:], len(op_start)]
        fr, rec = frag[kept].tolist(), record[kept].tolist()

        def ops(a: int, b: int):
            for o in range(a, b):
                lo, hi = int(op_start[o]), int(op_end[o])
                parts = []
                for i in range(lo, hi):
                    fi = fr[i]
                    parts += ((b"," if i > lo else b"") + prefixes[fi], info(fi, rec[i]))
                yield key_of(fr[lo], rec[lo]), parts

        for a, b in zip(step_start.tolist(), step_end.tolist()):
            yield step_keys[int(st[a])], ops(a, b)
