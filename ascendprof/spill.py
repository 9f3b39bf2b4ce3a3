"""Per-rank tables parked on disk while the cluster step waits for the other ranks.

The verdicts need every rank's per-op rows (verdicts.OP_ROWS, ~80 bytes per op) but only in
two streamed passes at the end; holding them grew the parent's memory with the number of ranks.
A :class:`TableSpill` takes each rank's table out of its result as the result arrives, appends
it to one unlinked temporary file as an Arrow IPC stream, and gives the tables back one at a
time, in the order asked for. The file disappears when closed (or when the process ends).
"""

from __future__ import annotations

import tempfile
from pathlib import Path


class TableSpill:
    """Tables named ``name`` of per-rank results, kept in an unlinked file in ``directory``
    (the system's temporary directory when None).

    :meth:`take` is given to the executors as ``on_result``; :meth:`tables` reads them back.
    Raises OSError when the file cannot be created or written (a full disk); the caller then
    keeps the tables in memory instead (see :meth:`take`).
    """

    def __init__(self, name: str, directory: Path | None = None):
        self.name = name
        self._file = tempfile.TemporaryFile(prefix=".ascendprof-spill-", dir=directory)
        self._where: dict[str, tuple[int, int]] = {}

    def take(self, result) -> None:
        """Move ``result.tables[name]`` (if any) to the file, keyed by the result's source path.
        On a write error the table simply stays in the result."""
        import pyarrow as pa

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
        except OSError:
            return
        self._where[result.source.path] = (offset, data.size)
        del result.tables[self.name]

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
            self._file.seek(where[0])
            data = self._file.read(where[1])
            yield pa.ipc.open_stream(pa.py_buffer(data)).read_all()

    def close(self) -> None:
        self._file.close()
        self._where.clear()
