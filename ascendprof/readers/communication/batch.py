"""One batch of communication.json op entries on the fast way: the entries as cut from the
file (:class:`Entries`), their shared COMM_* columns (:func:`batch_columns`) and what the
batches found, said once the file is read (:class:`BatchProblems`)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ascendprof.readers.communication.columns import rank_column
from ascendprof.readers.communication.layout import (REQUIRED_TIMES, report_bad_times,
                                                     step_number)

#: numbers from here on are not exact as float64: the per-value rules take them
EXACT = 2.0 ** 53
#: (JSON key, struct field) of the REQUIRED_TIMES
REQUIRED = tuple(zip(REQUIRED_TIMES, ("elapse", "transit", "wait", "sync")))


class Irregular(Exception):
    """The file is not of the shape the fast way handles: the per-value reader reads it."""


class Entries:
    """One batch of op entries in file order: step key, kind, op key (Arrow string arrays or
    lists), the op objects' texts (binary array) and either the decoded ops or the JSON array
    text to decode them from; ``offsets``: each text's offset in the file (streaming only);
    ``shape``: what the scanner counted in the ops' texts (streaming only)."""

    def __init__(self, steps, kinds, keys, texts, ops=None, doc=None, offsets=None):
        self.steps, self.kinds, self.keys, self.texts = steps, kinds, keys, texts
        self.ops, self.doc, self.offsets = ops, doc, offsets
        self.shape = None

    def __len__(self):
        return len(self.texts)


class BatchProblems:
    """What the batches found, recorded once at the end of the file: the ops left out for a
    time that is not a non-negative number (one problem for the file, worded as the
    per-value reader does) and the entries skipped because they are not objects."""

    def __init__(self):
        self.bad: list = []  # (count, step key, field, value, name, group) of each batch
        self.warnings: list[tuple[int, str]] = []  # (offset in the file, warning)

    def flush(self, problems, path, rank):
        if problems is None:
            return
        for _, w in sorted(self.warnings, key=lambda w: w[0]):
            problems.warn(path, w, rank=rank)
        if self.bad:
            n = sum(b[0] for b in self.bad)
            _, step_key, key, v, name, group = self.bad[0]
            report_bad_times(problems, path, rank, n, step_key, key, v, name, group)


def _split_keys(keys) -> tuple[pa.Array, pa.Array]:
    """Op name and group of each op key (group: after the last '@', '' without one)."""
    keys = keys if isinstance(keys, pa.Array) else pa.array(keys, pa.string())
    parts = pc.extract_regex(keys, r"^(?P<name>.*)@(?P<group>[^@]*)$")
    if parts.null_count == 0:
        return parts.field("name"), parts.field("group")
    name, group = parts.flatten()  # (field() would drop the nulls of keys without a match)
    return pc.coalesce(name, keys), pc.coalesce(group, pa.scalar("", pa.string()))


def batch_columns(entries: Entries, keep, rank, path) -> dict:
    """The entry columns of COMM_* (rank, step, step_key, kind, op_name, group) of the entries
    at ``keep`` (None: all)."""
    steps, kinds, keys = entries.steps, entries.kinds, entries.keys
    if isinstance(steps, list):
        steps, kinds = pa.array(steps, pa.string()), pa.array(kinds, pa.string())
    keys = keys if isinstance(keys, pa.Array) else pa.array(keys, pa.string())
    if keep is not None:
        index = pa.array(keep, pa.int64())
        steps, kinds, keys = steps.take(index), kinds.take(index), keys.take(index)
    names, groups = _split_keys(keys)
    uniq = pc.unique(steps)
    numbers = pa.array([step_number(k) for k in uniq.to_pylist()], pa.int32())
    step = numbers.take(pc.index_in(steps, uniq))
    return {"rank": rank_column(rank, len(steps), path),
            "step": step, "step_key": steps, "kind": kinds, "op_name": names, "group": groups}


def first_bad(entries: Entries, first: int, count: int, key: str, value, sink: BatchProblems):
    """Record in ``sink`` the ``count`` ops of a batch left out for their times, the first
    (entry ``first``) with ``key`` = ``value``."""
    op_key = entries.keys[first] if isinstance(entries.keys, list) \
        else entries.keys[first].as_py()
    step_key = entries.steps[first] if isinstance(entries.steps, list) \
        else entries.steps[first].as_py()
    name, at, group = op_key.rpartition("@")
    sink.bad.append((count, step_key, key, value, name if at else op_key, group if at else ""))


def binary_array(pieces: list, typ: pa.DataType) -> pa.Array:
    """A binary (or, for valid UTF-8, string) array of the byte strings ``pieces`` (bytes or
    buffers: memoryview slices of a file's text), built from one joined buffer and their
    offsets (int32: the pieces of one batch total < 2 GiB). pyarrow (26.0) never releases the
    buffer of a memoryview that ``pa.array`` converts, so views must not go through it: each
    would keep the text it views alive."""
    offsets = np.zeros(len(pieces) + 1, np.int64)
    np.cumsum(np.fromiter(map(len, pieces), np.int64, len(pieces)), out=offsets[1:])
    return pa.Array.from_buffers(typ, len(pieces), [None, pa.py_buffer(offsets.astype(np.int32)),
                                                    pa.py_buffer(b"".join(pieces))])
