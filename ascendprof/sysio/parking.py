"""Per-rank data parked on disk while the cluster step waits for the other ranks.

A rank's result (model.results.RankResult) is small, but the parent holds one per rank until the
cluster step: its Arrow tables (per-op rows of the verdicts, ~80 bytes per op; step tables,
partials, links: a few KB each, with Arrow's per-table overhead) and the compressed OPINFO
chunks of cluster_communication.json grew the parent's memory with the number of ranks. A
:class:`ParkingFile` moves them, as each result arrives, to one unlinked temporary file: every
table as an Arrow IPC stream, replaced in the result by a :class:`ParkedTable`
(:func:`unpark` reads it back), every chunk as raw bytes, replaced by a :class:`ParkedBytes`.
The cluster step reads each back when it needs it, one rank or one group at a time. The file
disappears when closed (or when the process ends), so the parking file must stay open until the
files are written.
"""

from __future__ import annotations

import os
import tempfile
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

    def __init__(self, directory: Path | None = None):
        self._file = tempfile.TemporaryFile(prefix=".ascendprof-parked-", dir=directory)
        self._pending = False  # written since the last flush

    def take(self, result) -> None:
        """Replace the tables of ``result`` (its ``tables`` dict and :data:`TABLE_FIELDS`) by
        :class:`ParkedTable` and the compressed chunks of ``result.comm_fragments`` by
        :class:`ParkedBytes`, with one write to the file."""
        parts, places = [], []  # bytes to write; how to put each parked object in place
        for name, table in list(result.tables.items()):
            if isinstance(table, pa.Table):
                parts.append(_ipc(table))
                places.append((result.tables.__setitem__, name, table.num_rows))
        for name in TABLE_FIELDS:
            table = getattr(result, name, None)
            if isinstance(table, pa.Table):
                parts.append(_ipc(table))
                places.append((_setter(result), name, table.num_rows))
        chunks = [(f, i) for f in getattr(result, "comm_fragments", ())
                  for i, (_, blob) in enumerate(f.chunks) if isinstance(blob, bytes)]
        parts += [f.chunks[i][1] for f, i in chunks]
        if not parts:
            return
        try:
            offset = self._file.seek(0, 2)
            self._file.write(b"".join(parts))
            self._pending = True
        except OSError:
            return
        for part, (put, name, rows) in zip(parts, places):
            put(name, ParkedTable(self, offset, len(part), rows))
            offset += len(part)
        for (f, i), part in zip(chunks, parts[len(places):]):
            f.chunks[i] = (f.chunks[i][0], ParkedBytes(self, offset, len(part)))
            offset += len(part)

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


def _ipc(table) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


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
