"""Reader for the SQLite exports (``export_type=db``, spec §B).

A ``*_ascend_pt`` / ``*_ascend_ms`` directory whose ``ASCEND_PROFILER_OUTPUT`` holds
``ascend_pytorch_profiler[_{rank}].db`` / ``ascend_mindspore_profiler[_{rank}].db`` /
``msprof_*.db`` (the *profiler db*, §B.1-B.2) and/or ``analysis.db`` (§B.3).

Every database is opened read-only and immutable (``file:...?mode=ro&immutable=1``), so SQLite
never creates a ``-journal``/``-wal`` file in the input tree. Rows are fetched in batches.
String columns of the CANN tables are ids into ``STRING_IDS``; they are resolved in SQL.

Tables produced (all follow :mod:`ascendprof.model.schemas`):

- ``kernels``: TASK ⋈ COMPUTE_TASK_INFO (one row per compute task; ``accelerator_core`` is
  COMPUTE_TASK_INFO.taskType, as kernel_details' "Accelerator Core") plus one row per
  COMMUNICATION_OP big op (``op_type`` = its opType, ``accelerator_core`` = :data:`COMM_CORE`), as
  kernel_details lists them; ``step`` from the STEP_TIME windows.
- ``steps``: STEP_TIME (id = step number, [startNs, endNs]).
- ``timeline``: tracks 'overlap' (OVERLAP_ANALYSIS), 'communication' (COMMUNICATION_OP, process
  :data:`COMM_PROCESS`, thread ``Group <groupName> Communication``), 'hardware' (every TASK row, thread ``Stream <id>``,
  name = the compute op name or else the TASK taskType, as trace_view's Ascend Hardware
  process names them, §A.7; ``task_type`` = COMPUTE_TASK_INFO.taskType for compute tasks
  (AI_CORE, AI_VECTOR_CORE, MIX_AIV …), else the TASK taskType (EVENT_RECORD, MEMCPY_ASYNC,
  Notify Wait, SDMA, or ``Other`` in older releases); ``category`` = compute / communication /
  other by the task's links (:func:`_hardware_track`), so a compute kernel is exactly a task in
  COMPUTE_TASK_INFO, as §7.1.b counts it) and 'step' (``ProfilerStep#<id>`` from STEP_TIME).
  HCCL small tasks ("Plane <k>" threads of trace_view) are not emitted; per HCCL op the extent
  of its tasks (TASK ⋈ COMMUNICATION_TASK_INFO) is, as a 'communication' row on thread
  ``Group <g> Communication tasks`` with ``category`` 'communication' (:func:`_hccl_task_extents`).
- ``step_trace``: analysis.db StepTraceTime (us -> ns).
- ``comm_ops`` / ``comm_bandwidth`` / ``comm_size_dist`` / ``comm_links``: analysis.db
  CommAnalyzerTime / CommAnalyzerBandwidth / CommAnalyzerMatrix (ms -> ns, MB kept).
- ``api_statistic``: CANN_API grouped by (type, name).
- ``memory_record`` / ``operator_memory``: MEMORY_RECORD / OP_MEMORY (bytes -> binary MB / KB).

Differences between the real databases and the spec, found on torch_npu 2.x data:

- COMPUTE_TASK_INFO has ``blockDim``/``mixBlockDim`` (spec: blockNum/mixBlockNum) and no
  opState/hf32Eligible; both spellings are accepted, absent columns become null.
- analysis.db StepTraceTime may lack ``deviceId``; the device then comes from RANK_DEVICE_MAP.
- analysis.db CommAnalyzerTime has no wait/synchronization ratios; they are derived as
  communication.json does (§7.2: wait/(wait+transit), 4 dp, 0 when the denominator is 0).
- CommAnalyzerBandwidth has one row per (op, transport, packet size): transport totals repeat on
  every row and rows with ``count`` 0 carry no size distribution. It lists only transports that
  carried data, while communication.json lists all five with zeros.
- CommAnalyzerMatrix has no Large Packet Ratio (null here); ``group_name`` is the numeric group
  hash used in the JSON keys, whereas COMMUNICATION_OP.groupName is the HCCL group name.
- OVERLAP_ANALYSIS is not written by torch_npu itself (absent from the Level0/Level2 samples);
  when absent the 'overlap' track is missing and recorded in ``missing``.
- COMPUTE_TASK_INFO ``waitNs`` (seen only in a file post-processed by MindStudio Insight) feeds
  ``wait_ns`` when present; otherwise ``wait_ns`` is null.
"""

from __future__ import annotations

import json
import math
import os
import re
import sqlite3
from pathlib import Path
from urllib.parse import quote

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ascendprof.model import schemas as S
from ascendprof.model.errors import InputError
from ascendprof.model.rankdata import RankData
from ascendprof.model.source import Source
from ascendprof.readers.communication.columns import abs_us_column
from ascendprof.sysio.textio import METADATA_MAX_BYTES, open_regular, read_json

#: Accelerator Core given to COMMUNICATION_OP big-op rows of ``kernels`` (torch_npu writes
#: ``HCCL`` in older and ``COMMUNICATION`` in newer kernel_details.csv; analyses accept both).
COMM_CORE = "HCCL"
#: Process of the 'communication' TIMELINE rows: trace_view.json of the same torch_npu job
#: (text export) names the process of the HCCL ops "HCCL", so the db rows are named so too and a
#: timeline reads alike from both exports. Its threads stay ``Group <HCCL group name>
#: Communication``: trace_view numbers the groups ("Group 0 Communication") by an index the db
#: does not record.
COMM_PROCESS = "HCCL"
#: Rows fetched per batch.
BATCH = 50_000
#: CANN's invalid-value marker (§B.1 ``DB_INVALID_VALUE``).
DB_INVALID = 4294967295
#: OVERLAP_ANALYSIS.type -> Overlap Analysis thread / event name (§B.1, §A.7).
OVERLAP_NAMES = {0: "Computing", 1: "Communication", 2: "Communication(Not Overlapped)",
                 3: "Free"}

_PROFILER_DB_RE = re.compile(
    r"^(ascend_pytorch_profiler|ascend_mindspore_profiler)(_\d+)?\.db$|^msprof_[\w.-]*\.db$")
_ANALYSIS_DB_RE = re.compile(r"^(analysis|communication_analyzer)\.db$")
#: analyses that lose input when one database is unreadable (names as in scan.ANALYSES)
_DB_AFFECTS = {"profiler .db": ("step_breakdown", "op_statistics"),
               "analysis.db": ("cluster_step_trace", "communication", "communication_matrix")}
_MB = 1 << 20
_KB = 1 << 10


# ----------------------------------------------------------------------------- database access

class _Db:
    """One read-only SQLite file; every sqlite3 error becomes an InputError naming it."""

    def __init__(self, path: Path):
        self.path = Path(path)
        uri = f"file:{quote(str(self.path.resolve()))}?mode=ro&immutable=1"

        open_regular(self.path).close()  # a FIFO or device would block or feed SQLite forever
        try:
            self.conn = sqlite3.connect(uri, uri=True)
            rows = self.conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
        except sqlite3.Error as e:
            raise InputError(self.path, f"not a readable SQLite database ({e})") from None
        self.tables = {r[0] for r in rows}
        self._cols: dict[str, list[str]] = {}
        self._numeric: set[tuple[str, str]] = set()  # (table, column) checked by numbers()

    def close(self):
        self.conn.close()

    def has(self, table: str) -> bool:
        return table in self.tables

    def columns(self, table: str) -> list[str]:
        if table not in self._cols:
            self._cols[table] = [r[1] for r in self._run(f"PRAGMA table_info('{table}')")]
        return self._cols[table]

    def _run(self, sql: str, params=()):
        try:
            return self.conn.execute(sql, params).fetchall()
        except sqlite3.Error as e:
            raise InputError(self.path, f"cannot read ({e})", where=sql.split()[-1]) from None

    def query(self, sql: str, columns: dict[str, pa.DataType],
              tables: str | tuple[str, ...]) -> pa.Table:
        """Run ``sql`` and return its rows as a table of ``columns`` (name -> Arrow type, in the
        SELECT's order), fetched in batches of :data:`BATCH`. ``tables``: the table(s) the
        SELECT reads, to name the one holding a cell that is not a number (:meth:`array`)."""
        schema = pa.schema(list(columns.items()))
        batches = []
        try:
            cur = self.conn.execute(sql)
            names = [d[0] for d in cur.description]
            while True:
                rows = cur.fetchmany(BATCH)
                if not rows:
                    break
                cols = list(zip(*rows))
                batches.append(pa.record_batch(
                    [self.array(c, f.type, tables, n) for c, f, n in zip(cols, schema, names)],
                    schema=schema))
        except sqlite3.Error as e:
            raise InputError(self.path, f"cannot read ({e})") from None
        return pa.Table.from_batches(batches, schema=schema)

    def array(self, values, typ: pa.DataType, tables: str | tuple[str, ...],
              column: str) -> pa.Array:
        """``values`` of result column ``column`` as a ``typ`` array. SQLite keeps whatever a
        cell holds, so a numeric column may hold text ('3x') or a number beyond ``typ``: that is
        an InputError naming this file, the table, the column and the value (the reader then
        handles it as any other damage of the database), not a bare ValueError. The table is
        the first of ``tables`` that has ``column`` (a plain column of the SELECT is named by
        SQLite after the table's column)."""
        try:
            return _to_array(values, typ)
        except (ValueError, TypeError, OverflowError, pa.ArrowException):
            pass
        tables = (tables,) if isinstance(tables, str) else tables
        table = next((t for t in tables if column in self.columns(t)), tables[0])
        for v in values:
            try:
                _to_array([v], typ)
            except (ValueError, TypeError, OverflowError, pa.ArrowException):
                what = ("out of range" if isinstance(v, int) or (
                            isinstance(v, float) and (v.is_integer() or not math.isfinite(v)
                                                      or not pa.types.is_integer(typ)))
                        else "not an integer" if pa.types.is_integer(typ) else "not a number")
                raise _cell_error(self.path, table, column, v, what) from None
        raise InputError(self.path, f"column {column!r}: cannot read as {typ}",
                         where=f"table {table}")

    def numbers(self, table: str, *columns: str) -> None:
        """Check integer ``columns`` of ``table`` (ns times) before SQL arithmetic reads them.
        SQL converts a text or blob operand silently ('12a' is 12, 'abc' and '' are 0), so the
        text and blob cells of ``columns`` are fetched here and each must be an integer by the
        rule of every other cell (:meth:`array`) that SQLite reads as that same number ('1_0' is
        10 to Python but 1 to SQLite). Raises InputError naming this file, the table, the
        column and the first such value otherwise (``column 'endNs': not an integer: '12a'`` at
        ``table TASK``), as :meth:`array` does. A column ``table`` lacks is skipped; each
        (table, column) is checked once. A clean table costs one scan of the cells' types and
        fetches no row."""
        todo = [c for c in columns if (table, c) not in self._numeric and c in self.columns(table)]
        if not todo:
            return
        odd = " OR ".join(f"typeof({c}) IN ('text', 'blob')" for c in todo)
        rows = self._run(f"SELECT {', '.join(f'typeof({c}), {c}, {c} + 0' for c in todo)} "
                         f"FROM {table} WHERE {odd}")
        for i, c in enumerate(todo):
            cells = [r[3 * i + 1:3 * i + 3] for r in rows if r[3 * i] in ("text", "blob")]
            if cells:
                read = self.array([v for v, _ in cells], pa.int64(), table, c).to_pylist()
                for (v, by_sql), mine in zip(cells, read):
                    if by_sql != mine:
                        raise _cell_error(self.path, table, c, v, "not an integer")
            self._numeric.add((table, c))

    def string(self, alias: str, col: str) -> str:
        """SQL expression resolving id column ``alias.col`` through STRING_IDS (the raw id as
        text when STRING_IDS is absent)."""
        if self.has("STRING_IDS"):
            return f"(SELECT value FROM STRING_IDS WHERE id = {alias}.{col})"
        return f"CAST({alias}.{col} AS TEXT)"

    def col_or_null(self, table: str, alias: str, *names: str) -> str:
        """``alias.<first of names that table has>`` or ``NULL``."""
        have = self.columns(table)
        for n in names:
            if n in have:
                return f"{alias}.{n}"
        return "NULL"


class _BadCell(Exception):
    """A value a conversion after the query cannot take (:func:`_cast`); the caller, which
    knows the table, turns it into :func:`_cell_error`."""

    def __init__(self, column: str, value, what: str):
        super().__init__(column, value, what)
        self.column, self.value, self.what = column, value, what


def _cell_error(path: Path, table: str, column: str, value, what: str) -> InputError:
    """``<db> at table T: column 'c': <what>: <value>``, as the text reader names a bad cell."""
    shown = repr(value)
    if len(shown) > 60:  # one line, however long the text in the cell
        shown = shown[:57] + "..."
    return InputError(path, f"column {column!r}: {what}: {shown}", where=f"table {table}")


def _cast(col, typ: pa.DataType, column: str, what: str, orig=None) -> pa.Array:
    """``col.cast(typ)``; a value that does not fit raises :class:`_BadCell` with the value of
    ``orig`` (what the database held, when ``col`` was computed from it) or of ``col``."""
    try:
        return col.cast(typ)
    except pa.ArrowInvalid:
        for i, v in enumerate(col.to_pylist()):
            try:
                pa.array([v], col.type).cast(typ)
            except pa.ArrowInvalid:
                raise _BadCell(column, (col if orig is None else orig)[i].as_py(),
                               what) from None
        raise


def _to_array(values, typ: pa.DataType) -> pa.Array:
    """SQLite result ``values`` (one column) as a ``typ`` array; numbers as text are read as
    numbers. Raises ValueError / TypeError / OverflowError / ArrowException for a value that is
    not one of ``typ``: text that is not a number, a number out of range, and for an integer
    ``typ`` a REAL with a fraction (pyarrow would cut 1.5 to 1 without a word)."""
    try:  # the common case: SQLite already returned values of the right kind
        if pa.types.is_integer(typ):  # inferred, then a safe cast: 1.5 is refused, 3.0 is 3
            return pa.array(values).cast(typ)
        return pa.array(values, typ)
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, TypeError,
            ValueError):
        pass
    if pa.types.is_string(typ):
        return pa.array([None if v is None else str(v) for v in values], typ)
    if pa.types.is_integer(typ):
        return pa.array([None if v is None or v == "" else _integer(v) for v in values], typ)
    return pa.array([None if v is None or v == "" else float(v) for v in values], typ)


def _integer(v) -> int:
    """An integer cell's value: ``int(v)``, but a float with a fraction (a REAL 1.5 in an
    INTEGER column) raises ValueError instead of being cut to 1."""
    if isinstance(v, float) and not v.is_integer():
        raise ValueError(f"not an integer: {v!r}")
    return int(v)


# ----------------------------------------------------------------------------- entry point

def read(source: Source, options=None) -> RankData:  # noqa: ARG001 - one signature for all readers
    """Read one db-export source into a :class:`RankData` (see the module docstring for tables).

    Raises :class:`InputError` (naming the file) when no database of the source can be opened;
    a damaged database next to a readable one is recorded in ``RankData.problems`` and the
    tables that need it are absent. Tables a database lacks are listed in ``RankData.missing``
    as ``"<file>:<TABLE>"``. The input files are never modified (read-only, immutable open).
    """
    rank = source.rank if source.rank is not None else -1
    data = RankData(source=source, rank=rank)
    profiler_path = analysis_path = None
    for f in source.files:
        base = os.path.basename(f)
        if _PROFILER_DB_RE.match(base) and profiler_path is None:
            profiler_path = Path(source.path) / f
        elif _ANALYSIS_DB_RE.match(base) and analysis_path is None:
            analysis_path = Path(source.path) / f
    if profiler_path is None and analysis_path is None:
        raise InputError(source.path, "no .db export found (ascend_pytorch_profiler*.db, "
                                      "ascend_mindspore_profiler*.db, msprof_*.db, analysis.db)")
    _read_json_meta(source, data)
    errors: list[tuple[InputError, tuple[str, ...]]] = []
    opened = 0
    for path, label, fill in ((profiler_path, "profiler .db", _fill_from_profiler_db),
                              (analysis_path, "analysis.db", _fill_from_analysis_db)):
        if path is None:
            data.missing.append(label)
            continue
        affects = _DB_AFFECTS[label]
        try:
            db = _Db(path)
        except InputError as e:
            errors.append((e, affects))
            continue
        opened += 1
        try:
            fill(db, data)
        except InputError as e:
            errors.append((e, affects))
        finally:
            db.close()
    if not opened and errors:
        raise errors[0][0]
    for e, affects in errors:
        data.problems.add_error(e, rank=data.rank, affects=affects)
    return data


def _read_json_meta(source: Source, data: RankData) -> None:
    for f in source.files:
        base = os.path.basename(f)
        key = ("profiler_info" if re.match(r"^profiler_info(_\d+)?\.json$", base)
               else "profiler_metadata" if base == "profiler_metadata.json" else None)
        if key and key not in data.meta and os.sep not in f.strip(os.sep):
            try:
                data.meta[key] = read_json(Path(source.path) / f, METADATA_MAX_BYTES)
            except InputError as e:
                data.problems.add_error(e, rank=data.rank, affects=("metadata",))


# ----------------------------------------------------------------------------- profiler db

def _fill_from_profiler_db(db: _Db, data: RankData) -> None:
    name = db.path.name

    def need(table: str) -> bool:
        if db.has(table):
            return True
        data.missing.append(f"{name}:{table}")
        return False

    if db.has("META_DATA"):
        meta = {}
        for k, v in db._run("SELECT name, value FROM META_DATA"):
            try:
                meta[k] = json.loads(v)
            except (TypeError, ValueError):
                meta[k] = v
        data.meta.setdefault("profiler_metadata", {})
        for k, v in meta.items():
            data.meta["profiler_metadata"].setdefault(k, v)
    device_id = data.source.device_id
    if device_id is None and db.has("RANK_DEVICE_MAP"):
        rows = db._run("SELECT rankId, deviceId FROM RANK_DEVICE_MAP")
        match = [d for r, d in rows if r == data.rank] or [d for _, d in rows]
        device_id = match[0] if match else None
        if device_id is not None:  # text here would fail later as a bare Arrow error
            device_id = db.array([device_id], pa.int32(), "RANK_DEVICE_MAP", "deviceId")[0].as_py()
    data.meta["device_id"] = device_id

    steps = _steps(db) if need("STEP_TIME") else None
    if steps is not None:
        data.tables[S.STEPS] = S.conform(S.STEPS, steps.append_column(
            "rank", pa.array([data.rank] * steps.num_rows, pa.int32())).append_column(
            "origin", pa.array(["db STEP_TIME"] * steps.num_rows, pa.string())))
    windows = steps if steps is not None else S.empty(S.STEPS)

    timeline_parts = []
    if need("TASK"):
        if need("COMPUTE_TASK_INFO"):
            k = _kernels(db, windows, data.rank, device_id)
            data.tables[S.KERNELS] = k
        timeline_parts.append(_hardware_track(db))
        if db.has("COMMUNICATION_TASK_INFO"):
            timeline_parts.append(_hccl_task_extents(db))
    if need("COMMUNICATION_OP"):
        comm = _comm_big_ops(db)
        if S.KERNELS in data.tables:
            data.tables[S.KERNELS] = _append_comm_kernels(data.tables[S.KERNELS], comm, windows,
                                                          data.rank, device_id)
        timeline_parts.append(comm)
    if need("OVERLAP_ANALYSIS"):
        timeline_parts.append(_overlap_track(db))
    if db.has("PYTORCH_API"):
        loader = _dataloader_track(db)
        if loader.num_rows:
            timeline_parts.append(loader)
    if steps is not None and steps.num_rows:
        timeline_parts.append(_on_track(pa.table({
            "name": pc.binary_join_element_wise("ProfilerStep#", steps["step"].cast(pa.string()),
                                                ""),
            "start_ns": steps["start_ns"],
            "dur_ns": pc.subtract(steps["end_ns"], steps["start_ns"])}), "step", "Python",
            thread="Step"))
    if timeline_parts:
        cols = ["track", "process", "thread", "name", "start_ns", "dur_ns", "task_type",
                "category"]
        tl = pa.concat_tables([_with_task_type(p).select(cols) for p in timeline_parts])
        tl = tl.append_column("step", _step_of(tl["start_ns"], windows))
        tl = tl.append_column("rank", pa.array(np.full(tl.num_rows, data.rank, np.int32)))
        data.tables[S.TIMELINE] = S.conform(S.TIMELINE, tl)

    if db.has("CANN_API"):
        data.tables[S.API_STATISTIC] = _api_statistic(db, data.rank)
    if db.has("MEMORY_RECORD"):
        data.tables[S.MEMORY_RECORD] = _memory_record(db, data.rank)
    if db.has("OP_MEMORY"):
        data.tables[S.OPERATOR_MEMORY] = _operator_memory(db, data.rank)
    if db.has("NPU_MEM"):
        app = _npu_mem_app(db, data.rank)
        if app is not None and app.num_rows:
            have = data.tables.get(S.MEMORY_RECORD)
            data.tables[S.MEMORY_RECORD] = app if have is None else pa.concat_tables([app, have])
    if db.has("NPU_MODULE_MEM"):
        data.tables[S.NPU_MODULE_MEM] = _npu_module_mem(db, data.rank, device_id)


def _with_task_type(part: pa.Table) -> pa.Table:
    for col in ("task_type", "category"):
        if col not in part.column_names:
            part = part.append_column(col, pa.nulls(part.num_rows, pa.string()))
    return part


def _steps(db: _Db) -> pa.Table:
    return db.query("SELECT id, startNs, endNs FROM STEP_TIME ORDER BY startNs",
                    {"step": pa.int32(), "start_ns": pa.int64(), "end_ns": pa.int64()},
                    "STEP_TIME")


def _step_of(ts: pa.ChunkedArray | pa.Array, windows: pa.Table) -> pa.Array:
    """Step whose [start_ns, end_ns] holds each timestamp (null outside every window);
    windows are taken as non-overlapping, the earliest-starting one wins a tie (§A.2)."""
    t = np.asarray(pc.fill_null(ts, -1).to_numpy(zero_copy_only=False), dtype=np.int64)
    if windows.num_rows == 0:
        return pa.nulls(len(t), pa.int32())
    order = np.argsort(windows["start_ns"].to_numpy(), kind="stable")
    starts = windows["start_ns"].to_numpy()[order]
    ends = windows["end_ns"].to_numpy()[order]
    ids = windows["step"].to_numpy()[order]
    idx = np.searchsorted(starts, t, side="right") - 1
    ok = (idx >= 0) & (t <= ends[np.clip(idx, 0, None)])
    return pa.array(np.where(ok, ids[np.clip(idx, 0, None)], 0).astype(np.int32), pa.int32(),
                    mask=~ok)


def _kernels(db: _Db, windows: pa.Table, rank: int, device_id) -> pa.Table:
    s, c = db.string, "COMPUTE_TASK_INFO"
    col = db.col_or_null
    sql = f"""
        SELECT t.deviceId, t.modelId, t.taskId, t.streamId, t.contextId,
               {s('c', 'name')}, {s('c', 'opType')}, {_str_or_id(db, c, 'opState')},
               {s('c', 'taskType')}, t.startNs, t.endNs - t.startNs,
               {col(c, 'c', 'waitNs')},
               {col(c, 'c', 'blockNum', 'blockDim')}, {col(c, 'c', 'mixBlockNum', 'mixBlockDim')},
               {_str_or_id(db, c, 'hf32Eligible')},
               {s('c', 'inputShapes')}, {s('c', 'inputDataTypes')}, {s('c', 'inputFormats')},
               {s('c', 'outputShapes')}, {s('c', 'outputDataTypes')}, {s('c', 'outputFormats')}
        FROM TASK t JOIN COMPUTE_TASK_INFO c ON t.globalTaskId = c.globalTaskId
        ORDER BY t.startNs"""
    db.numbers("TASK", "startNs", "endNs")  # t.endNs - t.startNs
    names = ["device_id", "model_id", "task_id", "stream_id", "context_id", "name", "op_type",
             "op_state", "accelerator_core", "start_ns", "dur_ns", "wait_ns", "block_num",
             "mix_block_num", "hf32_eligible", "input_shapes", "input_dtypes", "input_formats",
             "output_shapes", "output_dtypes", "output_formats"]
    t = db.query(sql, {n: S.SCHEMAS[S.KERNELS].field(n).type for n in names},
                 ("TASK", "COMPUTE_TASK_INFO"))
    t = _as_text_export(t)
    # kernel_details writes an invalid context id as N/A
    ctx = t["context_id"]
    t = t.set_column(t.schema.get_field_index("context_id"), "context_id",
                     pc.if_else(pc.equal(ctx, DB_INVALID), pa.scalar(None, pa.int64()), ctx))
    if device_id is not None:
        t = t.set_column(0, "device_id", pc.fill_null(t["device_id"], device_id))
    t = t.append_column("step", _step_of(t["start_ns"], windows))
    t = t.append_column("rank", pa.array(np.full(t.num_rows, rank, np.int32)))
    return S.conform(S.KERNELS, t)


#: KERNELS text columns whose STRING_IDS values torch_npu writes as "N/A" when unknown (every
#: type at Level0), and the shape columns it wraps in double quotes.
_NA_COLUMNS = ("op_type", "accelerator_core", "input_dtypes", "input_formats", "output_dtypes",
               "output_formats", "input_shapes", "output_shapes")
_SHAPE_COLUMNS = ("input_shapes", "output_shapes")


def _as_text_export(t: pa.Table) -> pa.Table:
    """Kernel labels as the text reader gives them from kernel_details.csv, which holds the same
    values: "N/A" -> null and shapes without their wrapping quotes. Otherwise the analyses that
    group by these labels differ between the two exports of one job (a Level0 db rank's launches
    all fell into one op type "N/A" where the text export's fall back to the kernel names)."""
    for c in _NA_COLUMNS:
        col = t[c]
        col = pc.if_else(pc.equal(col, "N/A"), pa.scalar(None, pa.string()), col)
        if c in _SHAPE_COLUMNS:
            quoted = pc.and_(pc.and_(pc.starts_with(col, '"'), pc.ends_with(col, '"')),
                             pc.greater_equal(pc.utf8_length(col), 2))
            col = pc.if_else(quoted, pc.utf8_slice_codeunits(col, 1, -1), col)
        t = t.set_column(t.schema.get_field_index(c), c, col)
    return t


def _str_or_id(db: _Db, table: str, col: str) -> str:
    """opState / hf32Eligible: a STRING_IDS id in CANN tables; NULL when the column is absent."""
    return db.string("c", col) if col in db.columns(table) else "NULL"


def _comm_big_ops(db: _Db) -> pa.Table:
    s = db.string
    dev = db.col_or_null("COMMUNICATION_OP", "o", "deviceId")
    op_type = s("o", "opType") if "opType" in db.columns("COMMUNICATION_OP") else "NULL"
    db.numbers("COMMUNICATION_OP", "startNs", "endNs")  # o.endNs - o.startNs
    t = db.query(
        f"SELECT {s('o', 'opName')}, {s('o', 'groupName')}, {op_type}, {dev}, o.startNs, "
        f"o.endNs - o.startNs FROM COMMUNICATION_OP o ORDER BY o.startNs",
        {"name": pa.string(), "group": pa.string(), "op_type": pa.string(),
         "device_id": pa.int32(), "start_ns": pa.int64(), "dur_ns": pa.int64()},
        "COMMUNICATION_OP")
    thread = pc.binary_join_element_wise("Group ", pc.fill_null(t["group"], ""), " Communication",
                                         "")
    return _on_track(t.append_column("thread", thread), "communication", COMM_PROCESS)


def _append_comm_kernels(kernels: pa.Table, comm: pa.Table, windows: pa.Table, rank: int,
                         device_id) -> pa.Table:
    n = comm.num_rows
    dev = comm["device_id"]
    if device_id is not None:
        dev = pc.fill_null(dev, device_id)
    rows = pa.table({
        "rank": pa.array(np.full(n, rank, np.int32)),
        "step": _step_of(comm["start_ns"], windows),
        "device_id": dev,
        "name": comm["name"],  # opType "N/A" (Level0) is null, as kernel_details' is read
        "op_type": pc.if_else(pc.equal(comm["op_type"], "N/A"), pa.scalar(None, pa.string()),
                              comm["op_type"]),
        "accelerator_core": pa.array([COMM_CORE] * n, pa.string()),
        "start_ns": comm["start_ns"], "dur_ns": comm["dur_ns"],
    })
    out = pa.concat_tables([kernels, S.conform(S.KERNELS, rows)])
    return out.take(pc.sort_indices(out, [("start_ns", "ascending")]))


def _hardware_track(db: _Db) -> pa.Table:
    """Every TASK row as a 'hardware' timeline row, classified by what it is linked to (§7.1.b,
    §B.1), never by its taskType label alone (older releases type HCCL tasks, copies and
    helper tasks alike as ``Other``):

    - ``compute``: the task has a COMPUTE_TASK_INFO row (joined on globalTaskId) -- exactly the
      tasks CANN's overlap analysis counts as compute; name and task_type come from there;
    - ``communication``: else, the task is in COMMUNICATION_TASK_INFO or shares its connectionId
      with a COMMUNICATION_OP big op (e.g. the task that carries a whole HCCL op, typed AI_CORE);
    - ``other``: neither (event records, memory copies, untyped helper tasks ...).
    """
    s = db.string
    comm_links = []
    if db.has("COMMUNICATION_TASK_INFO"):
        comm_links.append("t.globalTaskId IN (SELECT globalTaskId FROM COMMUNICATION_TASK_INFO)")
    if db.has("COMMUNICATION_OP") and "connectionId" in db.columns("COMMUNICATION_OP"):
        comm_links.append("t.connectionId IN (SELECT connectionId FROM COMMUNICATION_OP)")
    comm = " OR ".join(comm_links) or "0"
    if db.has("COMPUTE_TASK_INFO"):
        name = f"COALESCE({s('c', 'name')}, {s('t', 'taskType')})"
        task_type = f"COALESCE({s('c', 'taskType')}, {s('t', 'taskType')})"
        category = (f"CASE WHEN c.globalTaskId IS NOT NULL THEN 'compute' "
                    f"WHEN {comm} THEN 'communication' ELSE 'other' END")
        join = "LEFT JOIN COMPUTE_TASK_INFO c ON t.globalTaskId = c.globalTaskId"
    else:  # no compute-op info at all: only the communication link is known
        name = s("t", "taskType")
        task_type = s("t", "taskType")
        category = f"CASE WHEN {comm} THEN 'communication' END"
        join = ""
    db.numbers("TASK", "startNs", "endNs")  # t.endNs - t.startNs
    t = db.query(
        f"SELECT 'Stream ' || t.streamId, {name}, {task_type}, {category}, t.startNs, "
        f"t.endNs - t.startNs FROM TASK t {join} ORDER BY t.startNs",
        {"thread": pa.string(), "name": pa.string(), "task_type": pa.string(),
         "category": pa.string(), "start_ns": pa.int64(), "dur_ns": pa.int64()}, "TASK")
    return _on_track(t, "hardware", "Ascend Hardware")


def _on_track(t: pa.Table, track: str, process: str, **texts: str) -> pa.Table:
    """``t`` with the constant text columns track, process and ``texts`` (timeline rows)."""
    for k, v in {"track": track, "process": process, **texts}.items():
        t = t.append_column(k, pa.array([v] * t.num_rows, pa.string()))
    return t


#: Where an HCCL op's communication section came from (the task_type of its 'communication'
#: rows, :func:`_hccl_task_extents`).
FROM_TASKS, FROM_OP_SPAN = "HCCL tasks", "op span (no tasks)"


def _hccl_task_extents(db: _Db) -> pa.Table:
    """Per HCCL op its communication section: the extent of its tasks (TASK ⋈
    COMMUNICATION_TASK_INFO on globalTaskId, grouped by opId, else by op name), [first task start,
    last task end], task_type :data:`FROM_TASKS`; for a COMMUNICATION_OP without any task its
    own span, task_type :data:`FROM_OP_SPAN`. One 'communication' timeline row per op on thread
    ``Group <group> Communication tasks``, name = the op name, category ``communication``.

    Their union is the profiler's communication section: equal to the COMMUNICATION_OP spans in
    the 2025 exports, narrower where an older release (2024) wrote op spans wider than their
    tasks. The step breakdown's recompute uses them."""
    s = db.string
    cti = db.columns("COMMUNICATION_TASK_INFO")
    ops = db.has("COMMUNICATION_OP")
    by_id = "opId" in cti and (not ops or "opId" in db.columns("COMMUNICATION_OP"))
    c_key, o_key = ("c.opId", "o.opId") if by_id else ("c.name", "o.opName")
    group = "c.groupName" if "groupName" in cti else "NULL"
    ext = (f"SELECT {c_key} AS op, MIN(c.name) AS name, MIN({group}) AS grp, "
           f"MIN(t.startNs) AS s, MAX(t.endNs) AS e FROM COMMUNICATION_TASK_INFO c "
           f"JOIN TASK t ON t.globalTaskId = c.globalTaskId GROUP BY {c_key}")
    if ops:
        sql = (f"WITH x AS ({ext}) "
               f"SELECT {s('o', 'opName')}, {s('o', 'groupName')}, "
               f"COALESCE(x.s, o.startNs) AS startNs, "
               f"COALESCE(x.e, o.endNs) - COALESCE(x.s, o.startNs), "
               f"CASE WHEN x.op IS NULL THEN '{FROM_OP_SPAN}' ELSE '{FROM_TASKS}' END "
               f"FROM COMMUNICATION_OP o LEFT JOIN x ON x.op = {o_key} "
               f"UNION ALL SELECT {s('x', 'name')}, {s('x', 'grp')}, x.s, x.e - x.s, "
               f"'{FROM_TASKS}' FROM x WHERE x.op NOT IN "
               f"(SELECT {o_key} FROM COMMUNICATION_OP o WHERE {o_key} IS NOT NULL) "
               f"ORDER BY 3")
    else:
        sql = (f"WITH x AS ({ext}) SELECT {s('x', 'name')}, {s('x', 'grp')}, x.s, x.e - x.s, "
               f"'{FROM_TASKS}' FROM x ORDER BY 3")
    # the times the MIN / MAX and differences above read (a text cell is larger than every
    # number to MIN / MAX, and 12 or 0 to a difference)
    db.numbers("TASK", "startNs", "endNs")
    if ops:
        db.numbers("COMMUNICATION_OP", "startNs", "endNs")
    t = db.query(sql, {"name": pa.string(), "group": pa.string(), "start_ns": pa.int64(),
                       "dur_ns": pa.int64(), "task_type": pa.string()},
                 ("COMMUNICATION_OP", "TASK"))
    thread = pc.binary_join_element_wise(
        "Group ", pc.fill_null(t["group"], ""), " Communication tasks", "")
    return _on_track(t.drop_columns(["group"]).append_column("thread", thread), "communication",
                     COMM_PROCESS, category="communication")


def _overlap_track(db: _Db) -> pa.Table:
    db.numbers("OVERLAP_ANALYSIS", "startNs", "endNs")  # endNs - startNs
    t = db.query("SELECT type, startNs, endNs - startNs FROM OVERLAP_ANALYSIS ORDER BY startNs",
                 {"type": pa.int64(), "start_ns": pa.int64(), "dur_ns": pa.int64()},
                 "OVERLAP_ANALYSIS")
    keys = pa.array(list(OVERLAP_NAMES), pa.int64())
    vals = pa.array(list(OVERLAP_NAMES.values()), pa.string())
    name = pc.take(vals, pc.index_in(t["type"], keys))
    return _on_track(pa.table({"thread": name, "name": name, "start_ns": t["start_ns"],
                               "dur_ns": t["dur_ns"]}), "overlap", "Overlap Analysis").filter(
        pc.is_valid(name))


def _api_statistic(db: _Db, rank: int) -> pa.Table:
    """CANN_API grouped by (level, name) as api_statistic.csv does (§A.4); variance in us^2
    (population variance)."""
    level = ("(SELECT name FROM ENUM_API_TYPE WHERE id = a.type)" if db.has("ENUM_API_TYPE")
             else "CAST(a.type AS TEXT)")
    db.numbers("CANN_API", "startNs", "endNs")  # summed as a.endNs - a.startNs
    t = db.query(
        f"""SELECT {level}, {db.string('a', 'name')}, SUM(a.endNs - a.startNs), COUNT(*),
                   MIN(a.endNs - a.startNs), MAX(a.endNs - a.startNs),
                   SUM(CAST(a.endNs - a.startNs AS REAL) * (a.endNs - a.startNs))
            FROM CANN_API a GROUP BY a.type, a.name ORDER BY 3 DESC""",
        {"level": pa.string(), "api_name": pa.string(), "total_ns": pa.int64(),
         "count": pa.int64(), "min_ns": pa.int64(), "max_ns": pa.int64(), "sumsq": pa.float64()},
        "CANN_API")
    total = t["total_ns"].to_numpy().astype(float)
    cnt = t["count"].to_numpy().astype(float)
    mean_ns = total / np.maximum(cnt, 1)
    var_us2 = np.maximum(t["sumsq"].to_numpy() / np.maximum(cnt, 1) - mean_ns ** 2, 0) / 1e6
    # a mean that rounds (in float64) to 2^63 does not fit int64: take the exact integer mean
    avg = np.round(mean_ns)
    big = avg >= 2.0 ** 63
    avg_ns = np.where(big, 0, avg).astype(np.int64)
    avg_ns[big] = t["total_ns"].to_numpy()[big] // t["count"].to_numpy()[big]
    t = t.drop_columns(["sumsq"]).append_column(
        "avg_ns", pa.array(avg_ns)).append_column(
        "variance", pa.array(var_us2)).append_column(
        "rank", pa.array(np.full(t.num_rows, rank, np.int32)))
    return S.conform(S.API_STATISTIC, t)


def _device_type(col: pa.ChunkedArray) -> pa.Array:
    return pc.binary_join_element_wise("NPU:", col.cast(pa.string()), "")


def _memory_record(db: _Db, rank: int) -> pa.Table:
    """MEMORY_RECORD: bytes -> MB (2^20), as memory_record.csv (§A.8, §B.2)."""
    t = db.query(
        f"""SELECT {db.string('m', 'component')}, m.timestamp, m.totalAllocated,
                   m.totalReserved, m.totalActive, m.streamPtr, m.deviceId
            FROM MEMORY_RECORD m ORDER BY m.timestamp""",
        {"component": pa.string(), "ts_ns": pa.int64(), "a": pa.float64(), "r": pa.float64(),
         "act": pa.float64(), "stream_ptr": pa.string(), "dev": pa.int64()}, "MEMORY_RECORD")
    return S.conform(S.MEMORY_RECORD, pa.table({
        "rank": pa.array(np.full(t.num_rows, rank, np.int32)),
        "component": t["component"], "ts_ns": t["ts_ns"],
        "total_allocated_mb": pc.divide(t["a"], _MB), "total_reserved_mb": pc.divide(t["r"], _MB),
        "total_active_mb": pc.divide(t["act"], _MB), "stream_ptr": t["stream_ptr"],
        "device_type": _device_type(t["dev"])}))


#: torch_npu's string ids for memory records start at 2<<28 (§B.2); a smaller name id is a
#: CANN (GE) string, i.e. a GE operator's allocation.
_FRAMEWORK_MEMORY_IDS = 2 << 28


def _operator_memory(db: _Db, rank: int) -> pa.Table:
    """OP_MEMORY: size bytes -> KB (2^10), totals bytes -> MB (2^20) (§A.8, §B.2).

    GE operator rows (name id below :data:`_FRAMEWORK_MEMORY_IDS`) are named ``cann::<name>``
    as operator_memory.csv names them; the db stores the bare name."""
    t = db.query(
        f"""SELECT CASE WHEN m.name < {_FRAMEWORK_MEMORY_IDS} THEN 'cann::' ELSE '' END
                   || {db.string('m', 'name')}, m.size, m.allocationTime, m.releaseTime, m.duration,
                   m.allocationTotalAllocated, m.allocationTotalReserved,
                   m.releaseTotalAllocated, m.releaseTotalReserved, m.deviceId
            FROM OP_MEMORY m ORDER BY m.allocationTime""",
        {"name": pa.string(), "size": pa.float64(), "alloc_ns": pa.int64(),
         "release_ns": pa.int64(), "dur_ns": pa.int64(), "aa": pa.float64(),
         "ar": pa.float64(), "ra": pa.float64(), "rr": pa.float64(), "dev": pa.int64()},
        "OP_MEMORY")
    return S.conform(S.OPERATOR_MEMORY, pa.table({
        "rank": pa.array(np.full(t.num_rows, rank, np.int32)), "name": t["name"],
        "size_kb": pc.divide(t["size"], _KB), "alloc_ns": t["alloc_ns"],
        "release_ns": t["release_ns"], "dur_ns": t["dur_ns"],
        "alloc_total_allocated_mb": pc.divide(t["aa"], _MB),
        "alloc_total_reserved_mb": pc.divide(t["ar"], _MB),
        "release_total_allocated_mb": pc.divide(t["ra"], _MB),
        "release_total_reserved_mb": pc.divide(t["rr"], _MB),
        "device_type": _device_type(t["dev"])}))


def _npu_mem_app(db: _Db, rank: int) -> pa.Table | None:
    """NPU_MEM (§B.1) ``APP`` rows -> MEMORY_RECORD rows of component ``APP`` (Total Reserved =
    ddr + hbm, bytes -> MB 2^20), as torch_npu writes them into memory_record.csv from CANN's
    npu_mem (§A.8). ``type`` is a STRING_IDS id of ``APP`` / ``Device``; where STRING_IDS does
    not resolve it (torch_npu's merged STRING_IDS reuse the ids), the type whose largest value is
    the smaller is APP: the device total includes the application's memory. None without
    two-type data to tell them apart."""
    rows = db._run("SELECT type, ddr, hbm, timestampNs FROM NPU_MEM ORDER BY timestampNs")
    if not rows:
        return None
    # the numbers as numbers: a text cell would fail the sums below as a bare TypeError
    nums = [db.array([r[i] for r in rows], typ, "NPU_MEM", c).to_pylist()
            for i, c, typ in ((1, "ddr", pa.float64()), (2, "hbm", pa.float64()),
                              (3, "timestampNs", pa.int64()))]
    rows = list(zip([r[0] for r in rows], *nums))
    names = {}
    if db.has("STRING_IDS"):
        ids = sorted({r[0] for r in rows if isinstance(r[0], int)})
        if ids:
            q = ",".join("?" * len(ids))
            names = dict(db._run(f"SELECT id, value FROM STRING_IDS WHERE id IN ({q})", ids))
    app = [t for t, v in names.items() if str(v).strip().upper() == "APP"]
    if app:
        app_type = app[0]
    else:
        peak: dict = {}
        for t, ddr, hbm, _ in rows:
            peak[t] = max(peak.get(t, 0), (ddr or 0) + (hbm or 0))
        if len(peak) != 2:
            return None
        app_type = min(peak, key=peak.get)
    sel = [r for r in rows if r[0] == app_type]
    n = len(sel)
    return S.conform(S.MEMORY_RECORD, pa.table({
        "rank": pa.array(np.full(n, rank, np.int32)),
        "component": pa.array(["APP"] * n, pa.string()),
        "ts_ns": pa.array([r[3] for r in sel], pa.int64()),
        "total_reserved_mb": pa.array([((r[1] or 0) + (r[2] or 0)) / _MB for r in sel],
                                      pa.float64())}))


def _npu_module_mem(db: _Db, rank: int, device_id) -> pa.Table:
    """NPU_MODULE_MEM (§B.1): moduleId -> ENUM_MODULE name, totalReserved bytes -> MB (2^20),
    as npu_module_mem.csv (§A.9)."""
    name = ("(SELECT name FROM ENUM_MODULE e WHERE e.id = m.moduleId)" if db.has("ENUM_MODULE")
            else "CAST(m.moduleId AS TEXT)")
    t = db.query(f"""SELECT {name}, m.timestampNs, m.totalReserved, m.deviceId
                     FROM NPU_MODULE_MEM m ORDER BY m.timestampNs""",
                 {"component": pa.string(), "ts_ns": pa.int64(), "r": pa.float64(),
                  "dev": pa.int32()},  # int32 as device_id: a larger deviceId is named here
                 "NPU_MODULE_MEM")
    return S.conform(S.NPU_MODULE_MEM, pa.table({
        "rank": pa.array(np.full(t.num_rows, rank, np.int32)),
        "device_id": t["dev"], "component": t["component"],
        "ts_ns": t["ts_ns"], "total_reserved_mb": pc.divide(t["r"], _MB),
        "device": _device_type(t["dev"])}))


#: PYTORCH_API names of the data loader's iterator (torch's record_function around
#: ``next(iter(DataLoader))``), the dataloader spans of the step (§B.2)
_DATALOADER_LIKE = "enumerate(DataLoader)%"


def _dataloader_track(db: _Db) -> pa.Table:
    """TIMELINE rows (track ``dataloader``) for the data loader spans of PYTORCH_API."""
    if not db.has("STRING_IDS"):
        return pa.table({"track": pa.array([], pa.string())})
    # torch_npu declares these times TEXT: read as cells (not CAST in SQL, which takes '12a'
    # as 12 and '' as 0), so one that is not an integer is named as any bad cell
    t = db.query(f"""SELECT s.value, p.startNs, p.endNs
                     FROM PYTORCH_API p JOIN STRING_IDS s ON s.id = p.name
                     WHERE s.value LIKE '{_DATALOADER_LIKE}'""",
                 {"name": pa.string(), "start_ns": pa.int64(), "end_ns": pa.int64()},
                 "PYTORCH_API").sort_by("start_ns")
    return _on_track(pa.table({"name": t["name"], "start_ns": t["start_ns"],
                               "dur_ns": pc.subtract(t["end_ns"], t["start_ns"])}),
                     "dataloader", "Python", thread="DataLoader")


# ----------------------------------------------------------------------------- analysis.db

def _fill_from_analysis_db(db: _Db, data: RankData) -> None:
    name = db.path.name
    readers = (("StepTraceTime", S.STEP_TRACE, _step_trace),
               ("CommAnalyzerTime", S.COMM_OPS, _comm_ops),
               ("CommAnalyzerBandwidth", None, _comm_bandwidth),
               ("CommAnalyzerMatrix", S.COMM_LINKS, _comm_links))
    for table, out, fn in readers:
        if not db.has(table):
            data.missing.append(f"{name}:{table}")
            continue
        try:
            result = fn(db, data)
        except _BadCell as e:
            raise _cell_error(db.path, table, e.column, e.value, e.what) from None
        if out is None:
            data.tables.update(result)
        else:
            data.tables[out] = result


def _int_step(step_text: pa.ChunkedArray) -> pa.Array:
    """'step13' / '13' -> 13; '' / 'step' / None -> null."""
    digits = pc.extract_regex(pc.fill_null(step_text.cast(pa.string()), ""), r"^(?:step)?(?P<n>\d+)$")
    n = pc.struct_field(digits, "n")
    return pc.if_else(pc.is_valid(digits), n, pa.scalar(None, pa.string())).cast(pa.int32())


def _rank_col(n: int, rank: int) -> pa.Array:
    return pa.array(np.full(n, rank, np.int32))


def _us_to_ns(col, column: str) -> pa.Array:
    """us -> whole ns; a value beyond int64 ns (1e300, 'inf' in the db) names ``column``."""
    return _cast(pc.round(pc.multiply(col.cast(pa.float64()), 1000)), pa.int64(), column,
                 "out of range", orig=col)


def _ms_to_ns(col, column: str) -> pa.Array:
    """ms -> whole ns, as :func:`_us_to_ns`."""
    return _cast(pc.round(pc.multiply(col.cast(pa.float64()), 1_000_000)), pa.int64(), column,
                 "out of range", orig=col)


_STEP_TRACE_COLS = (("computing", "computing_ns"),
                    ("communication_not_overlapped", "comm_not_overlapped_ns"),
                    ("overlapped", "overlapped_ns"), ("communication", "communication_ns"),
                    ("free", "free_ns"), ("stage", "stage_ns"), ("bubble", "bubble_ns"),
                    ("communication_not_overlapped_and_exclude_receive",
                     "comm_not_overlapped_excl_receive_ns"),
                    ("preparing", "preparing_ns"))


def _step_trace(db: _Db, data: RankData) -> pa.Table:
    """StepTraceTime (§B.3): values in us -> whole ns; rows ordered by step number."""
    have = db.columns("StepTraceTime")
    src = [c for c, _ in _STEP_TRACE_COLS]
    sel = ", ".join(f'"{c}"' if c in have else "NULL" for c in src)
    dev = '"deviceId"' if "deviceId" in have else "NULL"
    t = db.query(f"SELECT {dev}, step, {sel} FROM StepTraceTime",
                 {"device_id": pa.int64(), "step": pa.string(), **{c: pa.float64() for c in src}},
                 "StepTraceTime")
    dev_col = t["device_id"]
    fallback = data.meta.get("device_id", data.source.device_id)
    if fallback is not None:
        dev_col = pc.fill_null(dev_col, fallback)
    out = {"rank": _rank_col(t.num_rows, data.rank), "step": _int_step(t["step"]),
           "device_id": dev_col}
    for c, dst in _STEP_TRACE_COLS:
        out[dst] = _us_to_ns(t[c], c)
    res = S.conform(S.STEP_TRACE, pa.table(out))
    return res.take(pc.sort_indices(res, [("step", "ascending")]))


def _comm_ops(db: _Db, data: RankData) -> pa.Table:
    """CommAnalyzerTime (§B.3) in the COMM_OPS schema: ms -> ns, start us -> ns."""
    t = db.query(
        """SELECT step, type, hccl_op_name, group_name, start_timestamp, elapse_time,
                  transit_time, wait_time, synchronization_time, idle_time
           FROM CommAnalyzerTime ORDER BY start_timestamp""",
        {"step_key": pa.string(), "kind": pa.string(), "op_name": pa.string(),
         "group": pa.string(), **{c: pa.float64() for c in
                                  ("start", "elapse", "transit", "wait", "sync", "idle")}},
        "CommAnalyzerTime")
    transit = t["transit"].to_numpy(zero_copy_only=False)
    wait = t["wait"].to_numpy(zero_copy_only=False)
    sync = t["sync"].to_numpy(zero_copy_only=False)
    out = {"rank": _rank_col(t.num_rows, data.rank), "step": _int_step(t["step_key"]),
           "step_key": t["step_key"], "kind": t["kind"], "op_name": t["op_name"],
           "group": t["group"], "start_ns": _abs_us(t["start"]),
           "elapse_ns": _ms_to_ns(t["elapse"], "elapse_time"),
           "transit_ns": _ms_to_ns(t["transit"], "transit_time"),
           "wait_ns": _ms_to_ns(t["wait"], "wait_time"),
           "sync_ns": _ms_to_ns(t["sync"], "synchronization_time"),
           "idle_ns": _ms_to_ns(t["idle"], "idle_time"),
           "wait_ratio": pa.array(_ratio(wait, transit)),
           "sync_ratio": pa.array(_ratio(sync, transit))}
    return S.conform(S.COMM_OPS, pa.table(out))


def _abs_us(start: pa.ChunkedArray) -> pa.Array:
    """start_timestamp (absolute us) -> ns; a value beyond int64 ns names the column."""
    values = start.to_pylist()
    try:
        return abs_us_column(values)
    except ValueError:
        for v in values:
            try:
                abs_us_column([v])
            except ValueError:
                raise _BadCell("start_timestamp", v, "out of range") from None
        raise


def _ratio(part: np.ndarray, transit: np.ndarray) -> np.ndarray:
    """§7.2: part / (part + transit), 4 dp, 0 when the denominator is 0."""
    den = part + transit
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.where(den != 0, part / np.where(den != 0, den, 1), 0.0)
    return np.round(r, 4)


def _comm_bandwidth(db: _Db, data: RankData) -> dict[str, pa.Table]:
    """CommAnalyzerBandwidth (§B.3) -> COMM_BANDWIDTH (one row per op and transport) and
    COMM_SIZE_DIST (rows with a packet count > 0; packet size key as Python writes the float,
    like the JSON key)."""
    t = db.query(
        """SELECT step, type, hccl_op_name, group_name, transport_type, transit_size,
                  transit_time, bandwidth, large_packet_ratio, package_size, count,
                  total_duration
           FROM CommAnalyzerBandwidth""",
        {"step_key": pa.string(), "kind": pa.string(), "op_name": pa.string(),
         "group": pa.string(), "transport": pa.string(), "size_mb": pa.float64(),
         "transit_ms": pa.float64(), "bandwidth_gbps": pa.float64(),
         "large_packet_ratio": pa.float64(), "packet": pa.float64(), "count": pa.float64(),
         "dur_ms": pa.float64()}, "CommAnalyzerBandwidth")
    keys = ["step_key", "kind", "op_name", "group", "transport"]
    first = t.group_by(keys, use_threads=False).aggregate(
        [(c, "first") for c in ("size_mb", "transit_ms", "bandwidth_gbps",
                                "large_packet_ratio")])
    first = first.rename_columns([c.removesuffix("_first") for c in first.column_names])
    bw = {"rank": _rank_col(first.num_rows, data.rank), "step": _int_step(first["step_key"]),
          **{k: first[k] for k in keys}, "size_mb": first["size_mb"],
          "transit_ns": _ms_to_ns(first["transit_ms"], "transit_time"),
          "bandwidth_gbps": first["bandwidth_gbps"],
          "large_packet_ratio": first["large_packet_ratio"]}
    bw = _pad_transports(db, bw, data.rank)
    dist = t.filter(pc.greater(pc.fill_null(t["count"], 0), 0))
    packet = pa.array([None if v is None else repr(float(v)) for v in dist["packet"].to_pylist()],
                      pa.string())
    sd = {"rank": _rank_col(dist.num_rows, data.rank), "step": _int_step(dist["step_key"]),
          **{k: dist[k] for k in keys}, "packet_size_mb": packet,
          "count": _cast(dist["count"], pa.int64(), "count", "not an integer"),
          "dur_ns": _ms_to_ns(dist["dur_ms"], "total_duration")}
    return {S.COMM_BANDWIDTH: S.conform(S.COMM_BANDWIDTH, pa.table(bw)),
            S.COMM_SIZE_DIST: S.conform(S.COMM_SIZE_DIST, pa.table(sd))}


#: Transport types communication.json lists for every op, zeros included (§A.5).
JSON_TRANSPORTS = ("RDMA", "HCCS", "PCIE", "SDMA", "SIO")


def _pad_transports(db: _Db, bw: dict, rank: int) -> dict:
    """Add the all-zero rows communication.json writes for transports that carried nothing
    (the db leaves them out), for every op of CommAnalyzerTime, so both inputs give the same
    COMM_BANDWIDTH rows."""
    if not db.has("CommAnalyzerTime"):
        return bw
    # read as text as the CommAnalyzerBandwidth keys are (a blob or number cell is its text),
    # so an op's own transports are found in ``have`` and never padded twice
    t = db.query("SELECT DISTINCT step, type, hccl_op_name, group_name FROM CommAnalyzerTime",
                 dict.fromkeys(("step", "type", "hccl_op_name", "group_name"), pa.string()),
                 "CommAnalyzerTime")
    ops = list(dict.fromkeys(zip(*(t[c].to_pylist() for c in t.column_names))))
    have = set(zip(*(bw[k].to_pylist() for k in ("step_key", "kind", "op_name", "group",
                                                 "transport"))))
    extra = [(*op, tr) for op in ops for tr in JSON_TRANSPORTS if (*op, tr) not in have]
    if not extra:
        return bw
    keys = ("step_key", "kind", "op_name", "group", "transport")
    cols = {k: pa.array([e[i] for e in extra], pa.string()) for i, k in enumerate(keys)}
    n = len(extra)
    pad = {"rank": _rank_col(n, rank),
           "step": _int_step(cols["step_key"]), **cols,
           "size_mb": pa.array(np.zeros(n)), "transit_ns": pa.array(np.zeros(n, np.int64)),
           "bandwidth_gbps": pa.array(np.zeros(n)), "large_packet_ratio": pa.array(np.zeros(n))}
    return {k: pa.concat_arrays([_arr(bw[k]), _arr(pad[k]).cast(_arr(bw[k]).type)])
            for k in bw}


def _arr(col) -> pa.Array:
    return col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col


def _comm_links(db: _Db, data: RankData) -> pa.Table:
    """CommAnalyzerMatrix (§B.3) -> COMM_LINKS; link_key '<hccl_op_name>@<group_name>' as the
    communication_matrix.json key; Large Packet Ratio is not in the table (null)."""
    have = db.columns("CommAnalyzerMatrix")
    op = "op_name" if "op_name" in have else "NULL"
    t = db.query(
        f"""SELECT step, type, hccl_op_name, {op}, group_name, src_rank, dst_rank,
                   transport_type, transit_size, transit_time, bandwidth
            FROM CommAnalyzerMatrix""",
        {"step_key": pa.string(), "kind": pa.string(), "link_op": pa.string(),
         "op_name": pa.string(), "group": pa.string(), "src": pa.int32(), "dst": pa.int32(),
         "transport": pa.string(), "size_mb": pa.float64(), "transit_ms": pa.float64(),
         "bandwidth_gbps": pa.float64()}, "CommAnalyzerMatrix")
    out = {"rank": _rank_col(t.num_rows, data.rank), "step": _int_step(t["step_key"]),
           "step_key": t["step_key"], "kind": t["kind"],
           "link_key": pc.binary_join_element_wise(t["link_op"], t["group"], "@"),
           # '-total' links have no single op: '' in the db, no "Op Name" in the JSON
           "op_name": pc.if_else(pc.equal(t["op_name"], ""), pa.scalar(None, pa.string()),
                                 t["op_name"]),
           "group": t["group"], "src_rank": t["src"],
           "dst_rank": t["dst"], "transport": t["transport"], "size_mb": t["size_mb"],
           "transit_ns": _ms_to_ns(t["transit_ms"], "transit_time"),
           "bandwidth_gbps": t["bandwidth_gbps"]}
    return S.conform(S.COMM_LINKS, pa.table(out))
