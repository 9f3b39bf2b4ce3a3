"""Tables too large to hold: kept in a Parquet file, read back in row groups.

A reader that meets an input file of :data:`SPILL_BYTES` or more (a 1 GB kernel_details.csv or
communication.json) while the engine has opened a spill directory (:func:`spilling`) reads it
in batches, writes every batch as one row group of a Parquet file there (a
:class:`SpilledTable`) and keeps in memory only a *slim* table: the columns the per-rank
analyses read (:data:`SLIM_COLUMNS`). Peak memory then grows with the slim columns, not with the
file. Tables read from one file in the same batches have aligned row groups
(:func:`aligned_batches`: row group i of each holds the rows of the same ops), so a per-op
reduction can run batch by batch. Outside :func:`spilling` (library use, the gate, the timeline)
nothing is spilled and every table is whole in memory, as before.
"""

from __future__ import annotations

import os
import tempfile
import weakref
from contextlib import contextmanager
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from ascendprof.model import schemas as S
from ascendprof.sysio.parquet import PARQUET_OPTIONS

#: an input file of this size or more is read in batches and its table kept on disk
SPILL_BYTES = 64 << 20
#: the columns of a spilled table that stay in memory (what the per-rank analyses read);
#: a table not named here keeps none (only batch-wise consumers read it)
SLIM_COLUMNS = {
    S.KERNELS: ("rank", "step", "device_id", "start_ns", "dur_ns", "name", "op_type",
                "accelerator_core", "input_shapes"),
    S.COMM_OPS: tuple(f.name for f in S.SCHEMAS[S.COMM_OPS] if f.name != "opinfo_json"),
}

#: text columns of a slim table kept dictionary-encoded (kernel names, op types, cores and
#: shapes repeat: ~4 bytes per row instead of the text, ~200 MB of a 1 GB kernel_details.csv);
#: :func:`plain` gives them back as text to the code that reads them
SLIM_DICTIONARY = {S.KERNELS: ("name", "op_type", "accelerator_core", "input_shapes")}

_dir: list[Path | None] = [None]


@contextmanager
def spilling(directory: Path | None):
    """Let readers spill large tables into ``directory`` (None: a temporary directory) for
    the duration of the block."""
    before = _dir[0]
    _dir[0] = Path(directory) if directory is not None else Path(tempfile.gettempdir())
    try:
        yield
    finally:
        _dir[0] = before


def spill_dir() -> Path | None:
    """Where readers may spill now (None: keep every table in memory)."""
    return _dir[0]


def should_spill(path: Path) -> bool:
    """Whether the input file ``path`` is large enough to spill its table, and spilling is on."""
    if _dir[0] is None:
        return False
    try:
        big = os.stat(path).st_size >= SPILL_BYTES
    except OSError:
        return False
    if big:
        _large_blocks_mapped()
    return big


def slim(name: str, table: pa.Table) -> pa.Table | None:
    """The in-memory part of a spilled ``table`` (None when the table keeps no columns)."""
    cols = SLIM_COLUMNS.get(name)
    if not cols:
        return None
    t = table.select([c for c in cols if c in table.column_names])
    for c in SLIM_DICTIONARY.get(name, ()):
        if c in t.column_names and pa.types.is_string(t.schema.field(c).type):
            t = t.set_column(t.schema.get_field_index(c), c, pc.dictionary_encode(t[c]))
    return t


def plain(table: pa.Table, columns=None) -> pa.Table:
    """``table`` (only ``columns``, those it has, when given) with its dictionary-encoded
    columns as plain values (a slim table as the analyses read it); unchanged otherwise."""
    if columns is not None:
        table = table.select([c for c in columns if c in table.column_names])
    for i, f in enumerate(table.schema):
        if pa.types.is_dictionary(f.type):
            table = table.set_column(i, f.name, table[f.name].cast(f.type.value_type))
    return table


def combine_slim(parts: list[pa.Table]) -> pa.Table:
    """The slim tables of a spilled table's batches as one table of one chunk per column.
    Empties ``parts`` and combines a column at a time, dropping each column's batch chunks
    once it is combined: combining all at once (``Table.combine_chunks``) held every column
    twice, ~300 MB of the peak for a 1 GB kernel_details.csv."""
    if len(parts) == 1:
        return parts.pop()
    t = pa.concat_tables(parts)
    parts.clear()
    schema, cols = t.schema, []
    for _ in schema.names:
        cols.append(t.column(0).combine_chunks())
        t = t.remove_column(0)
    return pa.Table.from_arrays(cols, schema=schema)


class SpilledTable:
    """A table in a Parquet file, one row group per written batch.

    ``path`` is the file; while ``owned`` the file is a temporary one and is removed when this
    object is collected (or :meth:`release` is called), unless it was moved away with
    :meth:`move_to`."""

    def __init__(self, path: Path, schema: pa.Schema, num_rows: int, owned: bool):
        self.path, self.schema, self.num_rows = Path(path), schema, num_rows
        self._finalizer = weakref.finalize(self, _remove, str(path)) if owned else None

    @classmethod
    def open(cls, path: Path) -> "SpilledTable":
        """A Parquet file kept elsewhere (e.g. a cache entry), not removed by this object."""
        import pyarrow.parquet as pq

        _large_blocks_mapped()
        meta = pq.read_metadata(path)
        return cls(path, meta.schema.to_arrow_schema(), meta.num_rows, owned=False)

    @property
    def num_row_groups(self) -> int:
        import pyarrow.parquet as pq

        return pq.read_metadata(self.path).num_row_groups

    def iter_batches(self, columns=None):
        """The table's row groups in order, as tables (all columns unless ``columns``)."""
        import pyarrow.parquet as pq

        f = pq.ParquetFile(self.path)
        for i in range(f.num_row_groups):
            yield f.read_row_group(i, columns=columns)

    def read(self, columns=None, dictionary: bool = False, rows=None) -> pa.Table:
        """The table (all columns unless ``columns``); with ``dictionary`` its text columns
        dictionary-encoded (a few bytes per row instead of the text; one dictionary per row
        group); with ``rows`` only the rows it keeps: ``rows(batch, first)`` gives a bool per
        row of each row group (``first``: whether it is the table's first).

        Read a row group at a time without a thread pool or pre-buffering: reading the whole
        file at once held every column's pages and decoded chunks at the same moment (a 1 GB
        communication.json's bandwidth rows: ~0.35 GB above the table)."""
        import pyarrow.parquet as pq

        texts = [f.name for f in self.schema if pa.types.is_string(f.type)
                 and (columns is None or f.name in columns)] if dictionary else None
        f = pq.ParquetFile(self.path, read_dictionary=texts or None, pre_buffer=False)
        parts = []
        for i in range(f.num_row_groups):
            t = f.read_row_group(i, columns=columns, use_threads=False)
            if rows is not None:
                t = t.filter(pa.array(rows(t, i == 0), pa.bool_()))
            parts.append(t)
        if not parts:
            return f.schema_arrow.empty_table() if columns is None else \
                f.schema_arrow.empty_table().select(columns)
        return pa.concat_tables(parts)

    def move_to(self, dest: Path) -> None:
        """Put the file at ``dest`` (renamed when on the same file system, else copied); it is
        no longer temporary."""
        dest = Path(dest)
        try:
            os.replace(self.path, dest)
        except OSError:
            import shutil

            shutil.copyfile(self.path, dest)
            self.release()
        if self._finalizer is not None:
            self._finalizer.detach()
            self._finalizer = None
        self.path = dest

    def release(self) -> None:
        if self._finalizer is not None:
            self._finalizer()

    def __getstate__(self):  # a temporary file belongs to the process that wrote it
        return {"path": str(self.path), "schema": self.schema, "num_rows": self.num_rows}

    def __setstate__(self, state):
        self.path, self.schema = Path(state["path"]), state["schema"]
        self.num_rows, self._finalizer = state["num_rows"], None


def _remove(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def _large_blocks_mapped() -> None:
    """Have glibc serve every allocation of 256 KB or more with its own mapping, returned to
    the system when freed. By default the threshold grows with the largest block freed, so
    the many-MB batches of a spilled file end up in the heap, which keeps their pages after
    they are freed (measured: ~300 MB of a 1 GB communication.json's peak). Only a process
    that reads a file this large pays the extra mappings."""
    import sys

    if _mapped[0] or not sys.platform.startswith("linux"):
        return
    _mapped[0] = True
    try:
        import ctypes

        ctypes.CDLL(None).mallopt(-3, 256 << 10)  # M_MMAP_THRESHOLD
    except (OSError, AttributeError):
        pass


_mapped = [False]


class SpillWriter:
    """Writes one table batch by batch (one row group each) to a temporary Parquet file in
    the spill directory; :meth:`close` returns the :class:`SpilledTable`."""

    def __init__(self, name: str, schema: pa.Schema):
        import pyarrow.parquet as pq

        _large_blocks_mapped()
        d = spill_dir() or Path(tempfile.gettempdir())
        fd, path = tempfile.mkstemp(prefix=f".{name}.", suffix=".parquet.spill", dir=d)
        os.close(fd)
        self.path, self.schema, self.rows = Path(path), schema, 0
        self._finalizer = weakref.finalize(self, _remove, path)
        self._writer = pq.ParquetWriter(path, schema, **PARQUET_OPTIONS)

    def write(self, table: pa.Table) -> None:
        self._writer.write_table(table.cast(self.schema) if table.schema != self.schema
                                 else table, row_group_size=max(1, table.num_rows))
        self.rows += table.num_rows

    def close(self) -> SpilledTable:
        self._writer.close()
        self._finalizer.detach()
        return SpilledTable(self.path, self.schema, self.rows, owned=True)

    def abort(self) -> None:
        try:
            self._writer.close()
        finally:
            self._finalizer()


def aligned_batches(tables: dict[str, "SpilledTable | pa.Table | None"], columns=None):
    """Row group i of every table in ``tables`` (written from the same batches), as
    ``{name: table}`` per i; a table that is not spilled comes whole, once. ``columns``:
    ``{name: [columns]}`` to read only those."""
    columns = columns or {}
    iters = {}
    whole = {}
    for name, t in tables.items():
        if isinstance(t, SpilledTable):
            iters[name] = t.iter_batches(columns.get(name))
        elif t is not None:
            whole[name] = t
    if not iters:
        if whole:
            yield whole
        return
    while True:
        batch = {}
        for name, it in iters.items():
            nxt = next(it, None)
            if nxt is not None:
                batch[name] = nxt
        if not batch:
            return
        yield batch
