"""Per-rank data parked on disk while the cluster step waits for the other ranks.

The verdicts need every rank's per-op rows (verdicts.OP_ROWS, ~80 bytes per op) only in two
streamed passes at the end, and the file writer needs the compressed OPINFO chunks of
cluster_communication.json only group by group; holding them grew the parent's memory with the
number of ranks. A :class:`ResultSpill` takes both out of each result as it arrives and
appends them to one unlinked temporary file: the table as an Arrow IPC stream (given back one
rank at a time, in the order asked for), the chunks as raw bytes (each replaced by a
:class:`ParkedBytes` that reads itself back). The file disappears when closed (or when the
process ends), so the spill must stay open until the files are written.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


class ResultSpill:
    """The table ``name`` and the OpFragments chunks of per-rank results (pipeline.RankResult),
    kept in an unlinked file in ``directory`` (the system's temporary directory when None).

    :meth:`take` is given to the executors as ``on_result``; :meth:`tables` reads the tables
    back. Creating one raises OSError when the file cannot be made; a failed write later keeps
    that result's data in memory instead (see :meth:`take`).
    """

    def __init__(self, name: str, directory: Path | None = None):
        self.name = name
        self._file = tempfile.TemporaryFile(prefix=".ascendprof-spill-", dir=directory)
        self._where: dict[str, tuple[int, int]] = {}
        self._pending = False  # written since the last flush

    def take(self, result) -> None:
        """Move ``result.tables[name]`` (if any; keyed by the result's source path) and the
        compressed chunks of ``result.comm_fragments`` to the file. On a write error they
        simply stay in the result."""
        import pyarrow as pa

        self._park_fragments(result)
        table = result.tables.get(self.name)
        if table is None:
            return
        if table.num_rows == 0:  # nothing to give back later
            del result.tables[self.name]
            return
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, table.schema) as writer:
            writer.write_table(table)
        data = sink.getvalue()
        try:
            offset = self._file.seek(0, 2)
            self._file.write(data)
            self._pending = True
        except OSError:
            return
        self._where[result.source.path] = (offset, data.size)
        del result.tables[self.name]

    def _park_fragments(self, result) -> None:
        """Move the compressed chunks of the result's OpFragments to the file (one write)."""
        parts = [blob for f in getattr(result, "comm_fragments", ()) for _, blob in f.chunks
                 if isinstance(blob, bytes)]
        if not parts:
            return
        try:
            offset = self._file.seek(0, 2)
            self._file.write(b"".join(parts))
            self._pending = True
        except OSError:
            return
        for f in result.comm_fragments:
            parked = []
            for size, blob in f.chunks:
                if isinstance(blob, bytes):
                    parked.append((size, ParkedBytes(self, offset, len(blob))))
                    offset += len(blob)
                else:
                    parked.append((size, blob))
            f.chunks = parked

    def read(self, offset: int, length: int) -> bytes:
        """``length`` bytes at ``offset`` (one pread: no shared file position; not a memory
        map, whose touched pages would count as this process's resident memory)."""
        if self._pending:
            self._file.flush()
            self._pending = False
        if hasattr(os, "pread"):
            return os.pread(self._file.fileno(), length, offset)
        self._file.seek(offset)  # Windows
        return self._file.read(length)

    def __contains__(self, path: str) -> bool:
        return path in self._where

    def tables(self, paths):
        """The spilled tables of the sources ``paths`` (those that have one), one at a time in
        that order."""
        import pyarrow as pa

        for path in paths:
            where = self._where.get(path)
            if where is None:
                continue
            yield pa.ipc.open_stream(pa.py_buffer(self.read(*where))).read_all()

    def close(self) -> None:
        self._where.clear()
        self._file.close()


class ParkedBytes:
    """Bytes kept in a :class:`ResultSpill`'s file: ``bytes(p)`` reads them back, ``len(p)`` is
    their length. Valid until the spill is closed."""

    __slots__ = ("_spill", "_offset", "_length")

    def __init__(self, spill: ResultSpill, offset: int, length: int):
        self._spill, self._offset, self._length = spill, offset, length

    def __bytes__(self) -> bytes:
        return self._spill.read(self._offset, self._length)

    def __len__(self) -> int:
        return self._length
