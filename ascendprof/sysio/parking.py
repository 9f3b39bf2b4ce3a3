"""Per-rank data parked on disk while the cluster step waits for the other ranks.

A rank's result (model.results.RankResult) is small, but the parent holds one per rank until the
cluster step: its Arrow tables (per-op rows of the verdicts, ~80 bytes per op; step tables,
partials, links: a few KB each, with Arrow's per-table overhead), the compressed OPINFO
chunks of cluster_communication.json and its plain-Python parts grew the parent's memory with
the number of ranks. Unpickled, the plain parts were the larger share: ~60 KB of small objects
per rank (profiler_info and profiler_metadata, whose group lists name every rank of the world;
the advice findings and rule status), nothing shared between ranks. A :class:`ParkingFile`
moves them, as each result arrives, to one unlinked temporary file: every table as an Arrow IPC
stream, replaced in the result by a :class:`ParkedTable` (:func:`unpark` reads it back), every
chunk (and the head of every OpFragments) as raw bytes, replaced by a :class:`ParkedBytes`,
``meta`` and ``advice`` pickled, replaced by a :class:`ParkedDict` (a read-only mapping read
back on each use), the OpFragments' totals by a :class:`ParkedValue` (iterable). A result's
source becomes the equal :class:`~ascendprof.model.source.Source` the parent already holds.
The cluster step reads each back when it needs it, one rank or one group at a time. The file
disappears when closed (or when the process ends), so the parking file must stay open until the
files are written.
"""

from __future__ import annotations

import os
import pickle
import tempfile
from collections.abc import Mapping
from pathlib import Path

import pyarrow as pa

# unpark (a ParkedTable read back, anything else as it is) is defined with the result contract
from ascendprof.model.results import unpark  # noqa: F401 - re-exported

#: RankResult attributes holding one Arrow table (besides the ``tables`` dict)
TABLE_FIELDS = ("breakdown", "op_partial", "kernel_partial", "memberships")


class ParkingFile:
    """Parks the Arrow tables and OpFragments chunks of per-rank results in an unlinked file
    in ``directory`` (the system's temporary directory when None).

    :meth:`take` is given to the executors as ``on_result``. Creating one raises OSError when
    the file cannot be made; a failed write later keeps that result's data in memory.
    """

    def __init__(self, directory: Path | None = None, sources=()):
        self._file = tempfile.TemporaryFile(prefix=".ascendprof-parked-", dir=directory)
        self._pending = False  # written since the last flush
        #: the parent's sources by path: a result's (unpickled) copy is replaced by its equal
        self._sources = {s.path: s for s in sources}
        self._keys: dict[tuple, tuple] = {}  # the key tuples of the ParkedDicts
        self._same: dict = {}  # texts and small containers shared between results

    def take(self, result) -> None:
        """Replace the tables of ``result`` (its ``tables`` dict and :data:`TABLE_FIELDS`) by
        :class:`ParkedTable`, the compressed chunks and heads of ``result.comm_fragments`` by
        :class:`ParkedBytes`, their totals by a :class:`ParkedValue`, ``meta`` and ``advice``
        (dicts) by :class:`ParkedDict`, with one write to the file; ``result.source`` by the
        equal source given to the constructor."""
        known = self._sources.get(getattr(result.source, "path", None))
        if known is not None and known is not result.source and known == result.source:
            result.source = known
        self._share_small(result)
        # each part written as it is made (a table's IPC stream straight into the file): the
        # result's parts are never all copied at once (at 10^6 ops they are ~0.2 GB)
        parts, places = [], []  # how to write each part; how to put its parked object in place
        for name, table in list(result.tables.items()):
            if isinstance(table, pa.Table):
                parts.append(table)
                places.append((result.tables.__setitem__, name, self._table(table.num_rows)))
        for name in TABLE_FIELDS:
            table = getattr(result, name, None)
            if isinstance(table, pa.Table):
                parts.append(table)
                places.append((_setter(result), name, self._table(table.num_rows)))
        for name in ("meta", "advice"):
            value = getattr(result, name, None)
            if type(value) is dict and value:
                parts.append(pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL))
                keys = tuple(value)
                keys = self._keys.setdefault(keys, keys)  # one tuple for all ranks
                places.append((_setter(result), name,
                               lambda at, n, keys=keys: ParkedDict(self, at, n, keys)))
        for f in getattr(result, "comm_fragments", ()):
            if isinstance(f.head[1], bytes):
                parts.append(f.head[1])
                places.append((_setter(f), "head", self._chunk(f.head[0])))
            for i, (size, blob) in enumerate(f.chunks):
                if isinstance(blob, bytes):
                    parts.append(blob)
                    places.append((f.chunks.__setitem__, i, self._chunk(size)))
            if type(f.totals) is list and f.totals:
                parts.append(pickle.dumps(f.totals, protocol=pickle.HIGHEST_PROTOCOL))
                places.append((_setter(f), "totals", lambda at, n: ParkedValue(self, at, n)))
        if not parts:
            return
        spans = []  # (offset, length) of each part
        try:
            offset = self._file.seek(0, 2)
            for part in parts:
                self._pending = True
                if isinstance(part, pa.Table):
                    write_ipc(self._file, part)
                else:
                    self._file.write(part)
                end = self._file.tell()
                spans.append((offset, end - offset))
                offset = end
        except OSError:
            return
        for (at, length), (put, name, make) in zip(spans, places):
            put(name, make(at, length))

    def _share_small(self, result) -> None:
        """The small plain parts most ranks have alike (table names, the missing files, row
        counts, the fragments' kind, group and step texts), one object for all ranks instead of
        one per rank (~3 KB a rank once unpickled)."""
        same = self._same
        if isinstance(result.tables, dict):
            result.tables = {same.setdefault(k, k): v for k, v in result.tables.items()}
        if type(getattr(result, "missing", None)) is list:
            key = ("missing", *result.missing)
            result.missing = same.setdefault(key, result.missing)
        if type(getattr(result, "table_rows", None)) is dict:
            key = ("rows", *(x for kv in result.table_rows.items() for x in kv))
            result.table_rows = same.setdefault(key, result.table_rows)
        if isinstance(getattr(result, "breakdown_method", None), str):
            result.breakdown_method = same.setdefault(result.breakdown_method,
                                                      result.breakdown_method)
        for f in getattr(result, "comm_fragments", ()):
            f.kind, f.group = same.setdefault(f.kind, f.kind), same.setdefault(f.group, f.group)
            if type(f.steps) is list:
                f.steps = [same.setdefault(st, st) for st in f.steps]

    def _table(self, rows: int):
        return lambda offset, length: ParkedTable(self, offset, length, rows)

    def _chunk(self, size: int):
        """A parked lz4chunk part: ``(size, ParkedBytes)``."""
        return lambda offset, length: (size, ParkedBytes(self, offset, length))

    def flush(self) -> None:
        """Write out what :meth:`take` buffered (before forking: a child that read through the
        shared file would otherwise write the same buffer again)."""
        if self._pending:
            self._file.flush()
            self._pending = False

    def read(self, offset: int, length: int) -> bytes:
        """``length`` bytes at ``offset`` (one pread: no shared file position; not a memory
        map, whose touched pages would count as this process's resident memory)."""
        self.flush()
        if hasattr(os, "pread"):
            return os.pread(self._file.fileno(), length, offset)
        self._file.seek(offset)  # Windows
        return self._file.read(length)

    def close(self) -> None:
        self._file.close()


def write_ipc(file, table) -> None:
    """``table`` as an Arrow IPC stream written at ``file``'s position (batch by batch, no
    copy of the whole stream in memory); ``file`` is any binary file object with ``write``
    (the parking file; the cache's result file through its hashing writer)."""
    sink = pa.PythonFile(file, mode="w")
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)


def _setter(obj):
    return lambda name, value: setattr(obj, name, value)


class ParkedBytes:
    """Bytes kept in a :class:`ParkingFile`'s file: ``bytes(p)`` reads them back, ``len(p)`` is
    their length. Valid until the parking file is closed."""

    __slots__ = ("_parking", "_offset", "_length")

    def __init__(self, parking: ParkingFile, offset: int, length: int):
        self._parking, self._offset, self._length = parking, offset, length

    def __bytes__(self) -> bytes:
        return self._parking.read(self._offset, self._length)

    def __len__(self) -> int:
        return self._length


class ParkedTable(ParkedBytes):
    """An Arrow table kept in a :class:`ParkingFile`'s file; ``num_rows`` is known without
    reading it, :meth:`load` reads it back. Valid until the parking file is closed."""

    __slots__ = ("num_rows",)

    def __init__(self, parking: ParkingFile, offset: int, length: int, num_rows: int):
        super().__init__(parking, offset, length)
        self.num_rows = num_rows

    def load(self):
        return pa.ipc.open_stream(pa.py_buffer(bytes(self))).read_all()


class ParkedValue(ParkedBytes):
    """A plain Python value (pickled) kept in a :class:`ParkingFile`'s file: :meth:`load`
    reads it back (a new copy each time); iterating iterates over it (the OpFragments' totals).
    Valid until the parking file is closed."""

    __slots__ = ()

    def load(self):
        return pickle.loads(bytes(self))

    def __iter__(self):
        return iter(self.load())


class ParkedDict(ParkedValue, Mapping):
    """A dict kept in a :class:`ParkingFile`'s file (a result's ``meta`` or ``advice``), read
    back on each use as a read-only mapping; :meth:`load` gives the dict itself, for a caller
    that reads it several times. Its keys stay in memory: asking for one it lacks, or for its
    length, reads nothing."""

    __slots__ = ("_keys",)

    def __init__(self, parking: ParkingFile, offset: int, length: int, keys: tuple):
        super().__init__(parking, offset, length)
        self._keys = keys

    def __getitem__(self, key):
        if key not in self._keys:
            raise KeyError(key)
        return self.load()[key]

    def get(self, key, default=None):
        return self.load()[key] if key in self._keys else default

    def __contains__(self, key) -> bool:
        return key in self._keys

    def __iter__(self):
        return iter(self._keys)

    def __len__(self) -> int:
        return len(self._keys)
