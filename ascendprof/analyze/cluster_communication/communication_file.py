"""cluster_communication.json assembled one group key at a time from the ranks' fragments."""

from __future__ import annotations

from collections.abc import Mapping
from itertools import chain
from operator import itemgetter

import orjson

from ascendprof.analyze.cluster_communication.fragments import RECORDS_PER_CHUNK, OpFragments
from ascendprof.analyze.cluster_communication.groups import key_for
from ascendprof.analyze.cluster_communication.opinfo import TOTAL_OP_INFO
from ascendprof.analyze.cluster_communication.totals import merge_totals


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
