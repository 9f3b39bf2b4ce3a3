"""The reader of torch_npu (``*_ascend_pt``) and MindSpore 2.3+ (``*_ascend_ms``) text output:
the files in ``ASCEND_PROFILER_OUTPUT`` (spec §0, §A); :func:`read` for both kinds.

MindSpore writes the same files as torch_npu with small differences the parsers accept:
step_trace_time.csv has no ``Device_id`` (§A.1), kernel_details.csv has no ``Device_id``, may
call the step column ``Step ID`` and may carry a ``Model Name`` column; with ``with_stack`` the
stack is joined into ``Name``.

One function per file, each ``(path, rank) -> pa.Table`` conformed to a schema of
:mod:`ascendprof.model.schemas`. :func:`ascendprof.sysio.textio.read_csv` parses the columns into
their types while reading; a column with a cell that does not parse comes back as text and is
converted here (which names the bad cell). Absolute times and durations in microseconds become
exact int64 nanoseconds (:func:`ascendprof.model.units.us_column_to_ns`), counts become int64,
everything else float64 or text; ``N/A``, empty cells and ``None`` become null.

Every parser raises :class:`~ascendprof.model.errors.InputError` naming the file when it cannot be
read, lacks a required column, or a numeric column holds a non-numeric cell (then the column and
the 1-based data row are named too). Given a ``bad_rows`` list, a parser leaves out rows of the
wrong width (a row cut off) and lists them there instead of failing the file
(:func:`~ascendprof.sysio.textio.read_csv`). :func:`read_output_dir` reads a whole source and turns such
errors into recorded problems instead.

The communication (§A.5-6) and trace_view (§A.7) parsers live in their own modules and are only
called from here.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ascendprof.model import schemas as S
from ascendprof.model.errors import InputError
from ascendprof.model.problems import Problems
from ascendprof.model.rankdata import RankData
from ascendprof.model.tasks import comm_rows
from ascendprof.model.units import us_column_to_ns
from ascendprof.readers import minddata
from ascendprof.readers.communication import (iter_tables, read_communication,
                                              read_communication_per_value, read_matrix, Reread)
from ascendprof.readers.trace_view import read_trace_view
from ascendprof.readers.values import report_negative_durations
from ascendprof.sysio import bigtables
from ascendprof.sysio.textio import (_COLUMN_RE, csv_header, decimals_as_text,
                                     holds_e_notation, METADATA_MAX_BYTES, open_csv_stream,
                                     read_csv, read_json)

OUTPUT_DIR = "ASCEND_PROFILER_OUTPUT"

KERNEL_DETAILS = "kernel_details.csv"
STEP_TRACE_TIME = "step_trace_time.csv"
OP_STATISTIC = "op_statistic.csv"
API_STATISTIC = "api_statistic.csv"
MEMORY_RECORD = "memory_record.csv"
OPERATOR_MEMORY = "operator_memory.csv"
NPU_MODULE_MEM = "npu_module_mem.csv"
STATIC_OP_MEM = "static_op_mem.csv"
TRACE_VIEW = "trace_view.json"
COMMUNICATION = "communication.json"
COMMUNICATION_MATRIX = "communication_matrix.json"

#: Files an analysis needs; each one absent is listed in ``RankData.missing``.
ANALYSIS_INPUTS = (TRACE_VIEW, KERNEL_DETAILS, STEP_TRACE_TIME, COMMUNICATION,
                   COMMUNICATION_MATRIX, OP_STATISTIC)

#: Which analyses lose input when a file is missing or damaged (names as in scan.ANALYSES).
AFFECTS = {
    KERNEL_DETAILS: ("op_statistics", "step_breakdown"),
    STEP_TRACE_TIME: ("cluster_step_trace", "step_breakdown"),
    OP_STATISTIC: ("op_statistics",),
    API_STATISTIC: ("api_statistics",),
    MEMORY_RECORD: ("memory",),
    OPERATOR_MEMORY: ("memory",),
    NPU_MODULE_MEM: ("memory",),
    STATIC_OP_MEM: ("memory",),
    TRACE_VIEW: ("step_breakdown",),
    COMMUNICATION: ("communication",),
    COMMUNICATION_MATRIX: ("communication_matrix",),
}

# Cell texts that mean "no value" (read_csv already nulls "" and "N/A").
_MISSING = ["", "N/A", "NA", "None", "none", "null", "nan", "NaN", "-"]
_INT_RE = r"^[+-]?\d+(\.0*)?$"
_NUM_RE = r"(?i)^[+-]?(\d+\.?\d*|\.\d+)(e[+-]?\d+)?$|^[+-]?(inf|nan)$"

# Conversion kinds of one CSV column.
INT, NS, FLOAT, STR, SHAPE = "int", "ns", "float", "str", "shape"

# The type read_csv parses each kind into while reading (us with 3 decimals -> exact decimal).
_READ_TYPE = {INT: pa.int64(), NS: pa.decimal128(22, 3), FLOAT: pa.float64(), STR: pa.string(),
              SHAPE: pa.string()}


def _read_types(columns: dict[str, tuple[str, str]]) -> dict[str, pa.DataType]:
    """read_csv ``types`` for a ``columns`` map (csv name -> (schema column, kind))."""
    return {name: _READ_TYPE[kind] for name, (_, kind) in columns.items()}


# ----------------------------------------------------------------------------- cell conversion

def _clean(col: pa.ChunkedArray | pa.Array) -> pa.Array:
    """Text column trimmed of spaces and TABs, with the 'no value' spellings as null."""
    if isinstance(col, pa.ChunkedArray):
        col = col.combine_chunks()
    s = pc.utf8_trim_whitespace(col.cast(pa.string()))
    return pc.if_else(pc.is_in(s, pa.array(_MISSING)), pa.scalar(None, pa.string()), s)


def _check(path: Path, name: str, s: pa.Array, pattern: str, what: str, row0: int = 0) -> None:
    bad = pc.and_(pc.is_valid(s), pc.invert(pc.match_substring_regex(s, pattern)))
    if pc.any(bad).as_py():
        i = pc.index(bad, True).as_py()
        raise InputError(path, f"column {name!r}: {what}: {s[i].as_py()!r}",
                         where=f"data row {row0 + i + 1}")


def _typed(col: pa.Array, kind: str) -> pa.Array | None:
    """A column read_csv already parsed (int64 / float64 / decimal / all-null) in its final form;
    None when it has to go through the text conversion instead."""
    t = col.type
    if pa.types.is_null(t):
        return pa.nulls(len(col), {INT: pa.int64(), NS: pa.int64(), FLOAT: pa.float64()}
                        .get(kind, pa.string()))
    if kind == INT and t == pa.int64() or kind == FLOAT and t == pa.float64():
        return col
    if kind == FLOAT and pa.types.is_integer(t):
        return col.cast(pa.float64())
    if kind == NS and pa.types.is_decimal(t):
        try:
            return us_column_to_ns(col)
        except ValueError:
            return None
    return None


#: A time cell a spreadsheet rewrote in E-notation (``1.69512E+15``: 6 significant digits).
_SCI_RE = r"^[+-]?(\d+\.?\d*|\.\d+)[eE][+-]?\d+$"
#: A time of at least this many us is an absolute timestamp (us since 1970: ~1.7e15): E-notation
#: puts it hours off, so it is left empty. A smaller value is a duration, read as written
#: (its relative error stays ~1e-6).
ABSOLUTE_US = 1e12


def _e_notation(name: str, s: pa.Array, lossy: list | None) -> pa.Array:
    """``s`` (trimmed text of a time column) with its absolute times in E-notation nulled; each
    column with E-notation cells appends ``(column, cells, absolute cells nulled, example)`` to
    ``lossy``."""
    sci = pc.fill_null(pc.match_substring_regex(s, _SCI_RE), False)
    n = pc.sum(sci.cast(pa.int64())).as_py() or 0
    if not n:
        return s
    values = pc.if_else(sci, s, "0").cast(pa.float64())
    absolute = pc.and_(sci, pc.greater_equal(pc.abs(values), ABSOLUTE_US))
    n_abs = pc.sum(absolute.cast(pa.int64())).as_py() or 0
    if lossy is not None:
        lossy.append((name, n, n_abs, s.filter(sci)[0].as_py()))
    return pc.if_else(absolute, pa.scalar(None, pa.string()), s)


def report_lossy(problems: Problems, path: Path, lossy: list, rank, affects=()) -> None:
    """One warning per time column of ``path`` that held values in E-notation (``lossy`` as
    :func:`_e_notation` fills it): how many, which were left empty, an example."""
    for name, n, n_abs, example in lossy:
        if n_abs:
            what = (f"{n_abs} absolute time(s) left empty (6 significant digits put them hours "
                    f"off)" + (f", {n - n_abs} duration(s) read as written" if n > n_abs else ""))
        else:
            what = "read as written (about 6 significant digits)"
        problems.add(path, f"column {name!r}: {n} value(s) in E-notation (e.g. {example}), "
                           f"precision lost (the file went through a spreadsheet): {what}",
                     rank=rank, severity="warning", affects=tuple(affects) if n_abs else ())


def _convert(path: Path, name: str, col, kind: str, row0: int = 0,
             lossy: list | None = None) -> pa.Array:
    """One CSV column (text, or already typed by read_csv) -> typed Arrow array (see module doc).
    Raises InputError naming the column and the data row of a bad cell (``row0``: the data
    rows before this column's first, when the file is read in batches). Time cells in
    E-notation: see :func:`_e_notation` (``lossy``)."""
    if isinstance(col, pa.ChunkedArray):
        col = col.combine_chunks()
    if not pa.types.is_string(col.type):
        done = _typed(col, kind)
        if done is not None:
            return done
        col = col.cast(pa.string())  # the text conversion below names what is wrong
    if kind == STR:
        s = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
        return pc.if_else(pc.is_in(s, pa.array(_MISSING)), pa.scalar(None, pa.string()), s)
    s = _clean(col)
    if kind == SHAPE:  # torch_npu wraps shapes in quotes so spreadsheets keep them as text
        quoted = pc.and_(pc.and_(pc.starts_with(s, '"'), pc.ends_with(s, '"')),
                         pc.greater_equal(pc.utf8_length(s), 2))  # 8x faster than a regex
        return pc.if_else(quoted, pc.utf8_slice_codeunits(s, 1, -1), s)
    # Fast path: Arrow's own cast; the regex pass that names the bad row runs only on failure.
    if kind == INT:
        try:
            return s.cast(pa.int64())
        except pa.ArrowInvalid:
            pass
        _check(path, name, s, _INT_RE, "not an integer", row0)
        try:  # integral values written with decimals ("40.0")
            return pc.replace_substring_regex(s, r"\.0*$", "").cast(pa.int64())
        except (pa.ArrowInvalid, OverflowError):
            raise InputError(path, f"column {name!r}: integer out of range") from None
    if kind == FLOAT:
        try:
            return s.cast(pa.float64())
        except pa.ArrowInvalid:
            _check(path, name, s, _NUM_RE, "not a number", row0)
            raise InputError(path, f"column {name!r}: not a number") from None
    if kind == NS:
        s = _e_notation(name, s, lossy)
        try:
            return us_column_to_ns(s)
        except (ValueError, pa.ArrowInvalid) as e:
            _check(path, name, s, _NUM_RE, "not a number", row0)
            raise InputError(path, f"column {name!r}: {e}") from None
    raise ValueError(f"unknown kind {kind!r}")


def _build(path: Path, raw: pa.Table, rank: int, columns: dict[str, tuple[str, str]],
           table: str, extra: dict[str, pa.Array] | None = None, row0: int = 0,
           lossy: list | None = None) -> pa.Table:
    """Convert the ``columns`` (csv name -> (schema column, kind)) present in ``raw`` and conform
    (``lossy``: see :func:`_e_notation`)."""
    arrays = {"rank": pa.array(np.full(raw.num_rows, rank, dtype=np.int32))}
    present = set(raw.column_names)  # column_names builds a new list on every access
    for csv_name, (out, kind) in columns.items():
        if csv_name in present:
            arrays[out] = _convert(path, csv_name, raw.column(csv_name), kind, row0, lossy)
    arrays.update(extra or {})
    return S.conform(table, pa.table(arrays) if arrays else pa.table({}))


def _read_table(path: Path, rank: int, columns: dict[str, tuple[str, str]], table: str,
                required: tuple, bad_rows: list | None, lossy: list | None) -> pa.Table:
    """A CSV whose ``columns`` all convert as they are, ``required`` ones present -> ``table``
    (the simple parsers below). Raises InputError."""
    path = Path(path)
    try:
        big = os.stat(path).st_size >= bigtables.SPILL_BYTES
    except OSError:
        big = False  # read_csv names the problem
    done = _read_table_batched(path, rank, columns, table, required, bad_rows, lossy) \
        if big else None
    if done is not None:
        return done
    raw = read_csv(path, bad_rows=bad_rows, required=required, types=_read_types(columns))
    return _build(path, raw, rank, columns, table, lossy=lossy)


def _stream_header(path: Path, required: tuple, aliases: dict | None = None):
    """(header as written, names stripped and with ``aliases`` applied) of a CSV about to be
    read in batches; None when a name repeats (the whole-file read handles that). Raises
    InputError when the header cannot be read or a ``required`` column is missing."""
    header = csv_header(path)
    names = [(aliases or {}).get(n.strip(), n.strip()) for n in header]
    if len(set(names)) != len(names) or len(set(header)) != len(header):
        return None
    missing = [c for c in required if c not in names]
    if missing:
        raise InputError(path, f"missing column(s) {', '.join(missing)}")
    return header, names


def _is_utf8_error(msg: str) -> bool:
    return "invalid UTF8" in msg or "UTF-8" in msg


def _stream_error(path: Path, msg: str) -> InputError:
    """The InputError for Arrow's error ``msg`` (its first line) while a CSV is read in batches."""
    return InputError(path, "not UTF-8 text" if _is_utf8_error(msg) else f"malformed CSV: {msg}")


#: text read at a time by :func:`_read_table_batched` (Arrow reads ahead several such blocks)
_BATCH_BYTES = 4 << 20


def _read_table_batched(path: Path, rank: int, columns: dict[str, tuple[str, str]], table: str,
                        required: tuple, bad_rows: list | None, lossy: list | None):
    """:func:`_read_table` for a file of :data:`~ascendprof.sysio.bigtables.SPILL_BYTES` or
    more: its ``columns`` read as text a few MB at a time, each batch converted as the whole file
    would be (the whole file's bytes and its text table were ~0.5 GB at 10^6 steps of
    step_trace_time.csv). The same table; None when the file needs the whole-file read
    (duplicated headers). Raises InputError as :func:`_read_table` does."""
    named = _stream_header(path, required)
    if named is None:
        return None
    header, names = named
    keep = [h for h, n in zip(header, names) if n in columns]
    rename = dict(zip(header, names))
    if bad_rows is not None:
        bad_rows.clear()
    parts, row0, seen = [], 0, []
    try:  # one thread: a row of the wrong width is reported with its line number
        reader = open_csv_stream(path, {h: pa.string() for h in keep}, bad_rows, keep,
                                 threads=False, block_bytes=_BATCH_BYTES)
        for batch in reader:
            raw = batch.rename_columns([rename[c] for c in batch.schema.names])
            parts.append(_build(path, raw, rank, columns, table, row0=row0, lossy=seen))
            row0 += raw.num_rows
    except (pa.ArrowInvalid, ValueError) as e:
        raise _stream_error(path, str(e).splitlines()[0]) from None
    if lossy is not None:
        _merge_lossy(seen, list(columns), lossy)
    return pa.concat_tables(parts) if parts else None


def _merge_lossy(seen: list, order: list, lossy: list) -> None:
    """Append to ``lossy`` the batches' E-notation entries ``seen`` (see :func:`_e_notation`)
    merged into one per column, in the file's column ``order``, as one read of the whole file
    gives them: the counts summed, the first batch's example."""
    merged: dict[str, list] = {}
    for name, n, n_abs, example in seen:
        m = merged.setdefault(name, [name, 0, 0, example])
        m[1] += n
        m[2] += n_abs
    lossy.extend(tuple(m) for m in sorted(merged.values(), key=lambda m: order.index(m[0])))


# ----------------------------------------------------------------------------- kernel_details

#: Older CANN / MindSpore spellings -> kernel_details names (spec §A.2, §C.1). The op_summary
#: names are accepted too, so an op_summary_*.csv parses with the same function.
KERNEL_ALIASES = {
    "Block Dim": "Block Num", "Mix Block Dim": "Mix Block Num", "Step ID": "Step Id",
    "Op Name": "Name", "OP Type": "Type", "Task Type": "Accelerator Core",
    "Task Start Time(us)": "Start Time(us)", "Task Duration(us)": "Duration(us)",
    "Task Wait Time(us)": "Wait Time(us)",
}
#: Older torch_npu releases (2024) write no Type column: op_type is then null, as Level0's N/A.
KERNEL_REQUIRED = ("Name", "Accelerator Core", "Start Time(us)", "Duration(us)")
KERNEL_COLUMNS = {
    "Step Id": ("step", INT), "Device_id": ("device_id", INT), "Model ID": ("model_id", INT),
    "Task ID": ("task_id", INT), "Stream ID": ("stream_id", INT),
    "Name": ("name", STR), "Type": ("op_type", STR), "OP State": ("op_state", STR),
    "Accelerator Core": ("accelerator_core", STR),
    "Start Time(us)": ("start_ns", NS), "Duration(us)": ("dur_ns", NS),
    "Wait Time(us)": ("wait_ns", NS),
    "Block Num": ("block_num", INT), "Mix Block Num": ("mix_block_num", INT),
    "HF32 Eligible": ("hf32_eligible", STR),
    "Input Shapes": ("input_shapes", SHAPE), "Input Data Types": ("input_dtypes", STR),
    "Input Formats": ("input_formats", STR), "Output Shapes": ("output_shapes", SHAPE),
    "Output Data Types": ("output_dtypes", STR), "Output Formats": ("output_formats", STR),
    "Context ID": ("context_id", INT),
}
#: Known text columns that the KERNELS schema does not carry (MindSpore graph mode).
KERNEL_IGNORED = ("Model Name",)
_KERNEL_TYPES = _read_types(KERNEL_COLUMNS)


def read_kernel_details(path: Path, rank: int, bad_rows: list | None = None,
                        lossy: list | None = None) -> pa.Table:
    """kernel_details.csv (spec §A.2) -> :data:`~ascendprof.model.schemas.KERNELS`.

    Accepts the Level0 set (``[Step Id,] [Device_id,] Name, [Type,] Accelerator Core,
    Start Time(us), Duration(us), Wait Time(us), Block Num`` [+ shapes]) and the Level1/2 set (all
    op_summary columns), with ``Block Dim``/``Mix Block Dim`` and MindSpore's ``Step ID`` as aliases.
    ``Step Id`` -> ``step``; times (us, absolute start with trailing TAB) -> exact int ns; shapes
    lose the quotes torch_npu wraps them in. Every other column (the PMU metrics, e.g.
    ``aicore_time(us)``, ``aic_mac_ratio``, ``cube_utilization(%)``) becomes float64
    ``pmu:<name>``. An unknown column whose first value is not a number is text some other
    tool added (no metric), so it is left out rather than failing the file. 'N/A' -> null.
    Raises InputError (missing required column, non-numeric cell in a numeric column).
    """
    path = Path(path)
    raw = read_csv(path, bad_rows=bad_rows, required=KERNEL_REQUIRED, aliases=KERNEL_ALIASES,
                   types={**_KERNEL_TYPES, **{n: pa.string() for n in KERNEL_IGNORED}},
                   other=pa.float64())  # the PMU metrics
    pmu = {}
    for name in raw.column_names:
        if name not in KERNEL_COLUMNS and name not in KERNEL_IGNORED and not name.endswith(".dup"):
            if _is_text_column(raw.column(name)):
                continue
            pmu[S.PMU_PREFIX + name] = _convert(path, name, raw.column(name), FLOAT)
    return _build(path, raw, rank, KERNEL_COLUMNS, S.KERNELS, pmu, lossy=lossy)


class _Again(Exception):
    """Read the file again with other column types (see read_kernel_details_spilled)."""


def read_kernel_details_spilled(path: Path, rank: int, bad_rows: list | None = None,
                                negative: list | None = None, lossy: list | None = None):
    """:func:`read_kernel_details` for a file too large to hold: read in batches of
    ~16 MB of text, each converted as the whole file would be and written as one row group of
    a spilled Parquet file (:mod:`ascendprof.sysio.bigtables`). Returns ``(slim KERNELS,
    SpilledTable)``, or None when the file needs the whole-file read (duplicated headers).

    Same tables as the whole-file read: a column whose cells turn out not to be numbers is
    read again as text (the whole-file read demotes it the same way), an unknown column whose
    first cell is text is left out. Rows with a negative duration are left out as
    :func:`ascendprof.readers.values.check` does; ``negative`` gets ``[count, example row]``
    for its report; ``lossy`` the time columns' E-notation cells, one entry per column as the
    whole-file read gives (see :func:`_e_notation`). Raises InputError as read_kernel_details
    does."""
    path = Path(path)
    named = _stream_header(path, KERNEL_REQUIRED, KERNEL_ALIASES)
    if named is None:
        return None
    header, names = named
    types = {**_KERNEL_TYPES, **{n: pa.string() for n in KERNEL_IGNORED}}
    if holds_e_notation(path):  # as read_csv does for the whole file: the times as text, so
        # an absolute time a spreadsheet put hours off is left empty and said, not read as is
        types = decimals_as_text(types)
    col_types = {raw: types.get(fin, pa.float64()) for raw, fin in zip(header, names)}
    dropped: set[str] = set()
    decided: set[str] = set()  # unknown columns whose first value was seen to be a number
    threads = [True]  # parse on Arrow's threads until a row cut short needs its line number
    for _ in range(2 * len(header) + 3):
        writer = None
        try:
            seen: list = []  # the E-notation cells of this attempt's batches
            slim, writer = _kernel_batches(path, rank, header, names, col_types, dropped,
                                           decided, bad_rows, negative, open_csv_stream,
                                           threads, seen)
            if lossy is not None:
                _merge_lossy(seen, list(KERNEL_COLUMNS), lossy)
            return slim, writer.close()
        except _Again:
            if writer is not None:
                writer.abort()
            continue
        except BaseException:
            if writer is not None:
                writer.abort()
            raise
    raise InputError(path, "malformed CSV: column types do not settle")


def _kernel_batches(path, rank, header, names, col_types, dropped, decided, bad_rows,
                    negative, open_csv_stream, threads, seen=None):
    if bad_rows is not None:
        bad_rows.clear()
    if negative is not None:
        negative[:] = [0, None]
    keep = [h for h, n in zip(header, names) if n not in dropped]
    rename = {h: n for h, n in zip(header, names)}
    reader = None
    writer, parts, row0 = None, [], 0
    state = [writer]
    try:
        while True:
            try:
                if reader is None:  # (opening reads and converts the first block)
                    reader = open_csv_stream(path, {h: col_types[h] for h in keep}, bad_rows,
                                             keep, threads[0])
                try:
                    batch = reader.read_next()
                except StopIteration:
                    if writer is not None:
                        break
                    batch = reader.schema.empty_table()  # header only: the columns, no rows
                if threads[0] and bad_rows:  # their line numbers: read without threads
                    threads[0] = False
                    raise _Again
            except (pa.ArrowInvalid, ValueError) as e:
                m = _COLUMN_RE.search(str(e))
                msg = str(e).splitlines()[0]
                if not _is_utf8_error(msg) and m and int(m.group(1)) < len(keep) \
                        and col_types[keep[int(m.group(1))]] != pa.string():
                    col_types[keep[int(m.group(1))]] = pa.string()
                    raise _Again from None
                raise _stream_error(path, msg) from None
            raw = batch.rename_columns([rename[c] for c in batch.schema.names])
            pmu = {}
            for name in raw.column_names:
                if name in KERNEL_COLUMNS or name in KERNEL_IGNORED:
                    continue
                col = raw.column(name)
                if name not in decided and pa.types.is_string(col.type):
                    cells = _clean(col).drop_null()
                    if len(cells):
                        if not pc.match_substring_regex(cells[:1], _NUM_RE)[0].as_py():
                            if row0:  # batches with this column were written: start again
                                dropped.add(name)
                                raise _Again
                            dropped.add(name)
                            continue
                        decided.add(name)
                elif name not in decided and pc.count(col).as_py():
                    decided.add(name)
                if name in dropped:
                    continue
                pmu[S.PMU_PREFIX + name] = _convert(path, name, col, FLOAT, row0)
            kernels = _build(path, raw, rank, KERNEL_COLUMNS, S.KERNELS, pmu, row0, lossy=seen)
            row0 += raw.num_rows
            neg = pc.fill_null(pc.less(kernels["dur_ns"], 0), False)
            n = pc.sum(neg.cast(pa.int64())).as_py() or 0
            if n:
                if negative is not None:
                    if negative[1] is None:
                        negative[1] = kernels.filter(neg).slice(0, 1).to_pylist()[0]
                    negative[0] += n
                kernels = kernels.filter(pc.invert(neg))
            if writer is None:
                writer = state[0] = bigtables.SpillWriter(S.KERNELS, kernels.schema)
            elif kernels.schema != writer.schema:
                raise _Again  # a column's type changed between batches: read it all again
            writer.write(kernels)
            parts.append(bigtables.slim(S.KERNELS, kernels))
            if batch.num_rows == 0:
                break
    except BaseException:
        if state[0] is not None:
            state[0].abort()
        raise
    return bigtables.combine_slim(parts), writer


def _is_text_column(col) -> bool:
    """True when the first non-missing cell of ``col`` is not a number."""
    if not pa.types.is_string(col.type):
        return False  # read_csv parsed it as numbers
    s = _clean(col).drop_null()
    return len(s) > 0 and not pc.match_substring_regex(s[:1], _NUM_RE)[0].as_py()


# ----------------------------------------------------------------------------- step_trace_time

STEP_TRACE_REQUIRED = ("Step", "Computing", "Communication(Not Overlapped)", "Free")
STEP_TRACE_COLUMNS = {
    "Device_id": ("device_id", INT), "Step": ("step", INT),
    "Computing": ("computing_ns", NS),
    "Communication(Not Overlapped)": ("comm_not_overlapped_ns", NS),
    "Overlapped": ("overlapped_ns", NS), "Communication": ("communication_ns", NS),
    "Free": ("free_ns", NS), "Stage": ("stage_ns", NS), "Bubble": ("bubble_ns", NS),
    "Communication(Not Overlapped and Exclude Receive)": ("comm_not_overlapped_excl_receive_ns", NS),
    "Preparing": ("preparing_ns", NS),
}


def read_step_trace_time(path: Path, rank: int, bad_rows: list | None = None,
                         lossy: list | None = None) -> pa.Table:
    """step_trace_time.csv (spec §A.1) -> :data:`~ascendprof.model.schemas.STEP_TRACE`.

    torch_npu writes ``Device_id`` first, MindSpore does not (device_id then null). Values in us
    become int ns rounded half-up at the 4th decimal (``231290.09999999995`` -> 231290100); an
    empty / ``None`` Step is null. Columns newer than the required ones (Stage, Bubble, …,
    Preparing) may be absent and are then null. Raises InputError.
    """
    return _read_table(path, rank, STEP_TRACE_COLUMNS, S.STEP_TRACE, STEP_TRACE_REQUIRED,
                       bad_rows, lossy)


# ----------------------------------------------------------------------------- statistics

OP_STATISTIC_COLUMNS = {
    "Device_id": ("device_id", INT), "OP Type": ("op_type", STR), "Core Type": ("core_type", STR),
    "Count": ("count", INT), "Total Time(us)": ("total_ns", NS), "Min Time(us)": ("min_ns", NS),
    "Avg Time(us)": ("avg_ns", NS), "Max Time(us)": ("max_ns", NS), "Ratio(%)": ("ratio_pct", FLOAT),
}


def read_op_statistic(path: Path, rank: int, bad_rows: list | None = None,
                      lossy: list | None = None) -> pa.Table:
    """op_statistic.csv (spec §A.3) -> :data:`~ascendprof.model.schemas.OP_STATISTIC`, as reported.

    ``Device_id`` is optional (older torch_npu omits it). Raises InputError.
    """
    req = tuple(c for c in OP_STATISTIC_COLUMNS if c != "Device_id")
    return _read_table(path, rank, OP_STATISTIC_COLUMNS, S.OP_STATISTIC, req, bad_rows, lossy)


API_STATISTIC_COLUMNS = {
    "Level": ("level", STR), "API Name": ("api_name", STR), "Time(us)": ("total_ns", NS),
    "Count": ("count", INT), "Avg(us)": ("avg_ns", NS), "Min(us)": ("min_ns", NS),
    "Max(us)": ("max_ns", NS), "Variance": ("variance", FLOAT),
}


def read_api_statistic(path: Path, rank: int, bad_rows: list | None = None,
                       lossy: list | None = None) -> pa.Table:
    """api_statistic.csv (spec §A.4) -> :data:`~ascendprof.model.schemas.API_STATISTIC`.

    The ``Device_id`` column (literally ``host``) is dropped; Variance stays in us². Raises
    InputError.
    """
    return _read_table(path, rank, API_STATISTIC_COLUMNS, S.API_STATISTIC,
                       ("Level", "API Name", "Time(us)", "Count"), bad_rows, lossy)


# ----------------------------------------------------------------------------- memory

MEMORY_RECORD_COLUMNS = {
    "Component": ("component", STR), "Timestamp(us)": ("ts_ns", NS),
    "Total Allocated(MB)": ("total_allocated_mb", FLOAT),
    "Total Reserved(MB)": ("total_reserved_mb", FLOAT),
    "Total Active(MB)": ("total_active_mb", FLOAT),
    "Stream Ptr": ("stream_ptr", STR), "Device Type": ("device_type", STR),
}


def read_memory_record(path: Path, rank: int, bad_rows: list | None = None,
                       lossy: list | None = None) -> pa.Table:
    """memory_record.csv (spec §A.8) -> :data:`~ascendprof.model.schemas.MEMORY_RECORD` (MB = 2^20 B).

    Raises InputError."""
    return _read_table(path, rank, MEMORY_RECORD_COLUMNS, S.MEMORY_RECORD,
                       ("Component", "Timestamp(us)"), bad_rows, lossy)


OPERATOR_MEMORY_COLUMNS = {
    "Name": ("name", STR), "Size(KB)": ("size_kb", FLOAT),
    "Allocation Time(us)": ("alloc_ns", NS), "Release Time(us)": ("release_ns", NS),
    "Duration(us)": ("dur_ns", NS),
    "Allocation Total Allocated(MB)": ("alloc_total_allocated_mb", FLOAT),
    "Allocation Total Reserved(MB)": ("alloc_total_reserved_mb", FLOAT),
    "Release Total Allocated(MB)": ("release_total_allocated_mb", FLOAT),
    "Release Total Reserved(MB)": ("release_total_reserved_mb", FLOAT),
    "Device Type": ("device_type", STR),
}


def read_operator_memory(path: Path, rank: int, bad_rows: list | None = None,
                         lossy: list | None = None) -> pa.Table:
    """operator_memory.csv (spec §A.8) -> :data:`~ascendprof.model.schemas.OPERATOR_MEMORY`.

    Release time / duration are null for blocks not released inside the collection. Raises
    InputError."""
    return _read_table(path, rank, OPERATOR_MEMORY_COLUMNS, S.OPERATOR_MEMORY,
                       ("Name", "Size(KB)", "Allocation Time(us)"), bad_rows, lossy)


NPU_MODULE_MEM_COLUMNS = {
    "Device_id": ("device_id", INT), "Component": ("component", STR),
    "Timestamp(us)": ("ts_ns", NS), "Total Reserved(MB)": ("total_reserved_mb", FLOAT),
    "Device": ("device", STR),
}


def read_npu_module_mem(path: Path, rank: int, bad_rows: list | None = None,
                        lossy: list | None = None) -> pa.Table:
    """npu_module_mem.csv (spec §A.9) -> :data:`~ascendprof.model.schemas.NPU_MODULE_MEM`.

    torch_npu writes ``Total Reserved(MB)``; the CANN original ``Total Reserved(KB)`` is accepted
    and divided by 1024. ``Device_id`` is optional. Raises InputError."""
    path = Path(path)
    raw = read_csv(path, bad_rows=bad_rows, required=("Component", "Timestamp(us)"),
                   types={**_read_types(NPU_MODULE_MEM_COLUMNS),
                          "Total Reserved(KB)": pa.float64()})
    extra = _in_other_unit(path, raw, "Total Reserved(MB)", "total_reserved_mb",
                           "Total Reserved(KB)", 1 / 1024)
    return _build(path, raw, rank, NPU_MODULE_MEM_COLUMNS, S.NPU_MODULE_MEM, extra, lossy=lossy)


STATIC_OP_MEM_COLUMNS = {
    "Op Name": ("name", STR), "Model Name": ("model_name", STR),
    "Graph ID": ("graph_id", STR), "Node Index Start": ("node_start", INT),
    "Node Index End": ("node_end", INT), "Size(KB)": ("size_kb", FLOAT),
}


def _in_other_unit(path: Path, raw: pa.Table, column: str, out: str, other: str,
                   scale: float) -> dict[str, pa.Array]:
    """``{out: column other x scale}`` when ``raw`` has the quantity of ``column`` in the
    other unit of an older version (column ``other``) instead, else ``{}``. Raises InputError
    when it has neither."""
    if column in raw.column_names:
        return {}
    if other not in raw.column_names:
        raise InputError(path, f"missing column(s) {column}")
    return {out: pc.multiply(_convert(path, other, raw.column(other), FLOAT), scale)}


def _device_numbers(col) -> pa.Array:
    """A ``Device_id`` column that may hold ``host`` or ``NPU:<n>`` besides device numbers ->
    int32 device number, null where the cell names no device (``host``)."""
    s = _clean(col)
    num = pc.extract_regex(s, r"^(?:NPU:)?(?P<n>\d+)$")
    return pc.struct_field(num, "n").cast(pa.int32()) if len(s) else pa.nulls(0, pa.int32())


def read_static_op_mem(path: Path, rank: int, bad_rows: list | None = None,
                       lossy: list | None = None) -> pa.Table:
    """static_op_mem.csv (torch_npu / CANN, static graphs) ->
    :data:`~ascendprof.model.schemas.STATIC_OP_MEM`.

    Columns ``Device_id, Op Name, Model Name, Graph ID, Node Index Start, Node Index End,
    Size(KB)``; ``Device_id`` is ``host`` (device_id null), a device number or ``NPU:<n>``. The
    row named ``TOTAL`` is the graph's total (msprof names op 0 so) and is kept as written. A
    ``Size(MB)`` column instead of ``Size(KB)`` is accepted (x 1024). Rows of the wrong width go
    to ``bad_rows`` as in the other parsers. Raises InputError."""
    path = Path(path)
    raw = read_csv(path, bad_rows=bad_rows, required=("Op Name",),
                   types={**_read_types(STATIC_OP_MEM_COLUMNS), "Device_id": pa.string(),
                          "Size(MB)": pa.float64()})
    extra = _in_other_unit(path, raw, "Size(KB)", "size_kb", "Size(MB)", 1024.0)
    if "Device_id" in raw.column_names:
        extra["device_id"] = _device_numbers(raw.column("Device_id"))
    return _build(path, raw, rank, STATIC_OP_MEM_COLUMNS, S.STATIC_OP_MEM, extra, lossy=lossy)


#: file name -> (table name, parser) for the CSVs of ASCEND_PROFILER_OUTPUT.
CSV_PARSERS = {
    KERNEL_DETAILS: (S.KERNELS, read_kernel_details),
    STEP_TRACE_TIME: (S.STEP_TRACE, read_step_trace_time),
    OP_STATISTIC: (S.OP_STATISTIC, read_op_statistic),
    API_STATISTIC: (S.API_STATISTIC, read_api_statistic),
    MEMORY_RECORD: (S.MEMORY_RECORD, read_memory_record),
    OPERATOR_MEMORY: (S.OPERATOR_MEMORY, read_operator_memory),
    NPU_MODULE_MEM: (S.NPU_MODULE_MEM, read_npu_module_mem),
    STATIC_OP_MEM: (S.STATIC_OP_MEM, read_static_op_mem),
}


# ----------------------------------------------------------------------------- metadata

_INFO_RE = re.compile(r"^profiler_info(?:_(\d+))?\.json$")


def read_metadata(directory: Path, problems: Problems | None = None, rank: int | None = None) -> dict:
    """The JSON metadata beside ``ASCEND_PROFILER_OUTPUT`` (spec §A.12, §A.13).

    Returns ``{"profiler_info": {...}, "profiler_metadata": {...}}`` with only the keys whose
    file exists (``profiler_info_<N>.json`` preferred over ``profiler_info.json``; the first by
    name if several). An invalid JSON file raises InputError, or, when ``problems`` is given, is
    recorded there and left out.
    """
    directory = Path(directory)
    out: dict = {}
    try:
        names = sorted(p.name for p in directory.iterdir() if p.is_file())
    except OSError as e:
        raise InputError(directory, f"cannot list: {e.strerror or e}") from None
    infos = sorted((n for n in names if _INFO_RE.match(n)), key=lambda n: (n == "profiler_info.json", n))
    wanted = [("profiler_info", infos[0])] if infos else []
    if "profiler_metadata.json" in names:
        wanted.append(("profiler_metadata", "profiler_metadata.json"))
    for key, name in wanted:
        try:
            obj = read_json(directory / name, METADATA_MAX_BYTES)
        except InputError as e:
            if problems is None:
                raise
            problems.add_error(e, rank=rank, affects=("metadata",))
            continue
        if not isinstance(obj, dict):
            err = InputError(directory / name, "not a JSON object")
            if problems is None:
                raise err
            problems.add_error(err, rank=rank, affects=("metadata",))
            continue
        out[key] = obj
    return out


# ----------------------------------------------------------------------------- whole source

def steps_from_kernels(kernels: pa.Table, rank: int) -> pa.Table:
    """STEPS from the kernels' ``step`` column: per step min start and max end (start + dur), origin
    ``"kernel Step Id span"``. Empty when no kernel has a step. Used when trace_view.json (the
    ProfilerStep# windows, §7.1.a) is not available."""
    k = kernels.select(["step", "start_ns", "dur_ns"]).filter(pc.is_valid(kernels["step"]))
    k = k.filter(pc.and_(pc.is_valid(k["start_ns"]), pc.is_valid(k["dur_ns"])))
    if k.num_rows == 0:
        return S.empty(S.STEPS)
    k = k.append_column("end_ns", pc.add(k["start_ns"], k["dur_ns"]))
    g = k.group_by("step").aggregate([("start_ns", "min"), ("end_ns", "max")]).sort_by("step")
    n = g.num_rows
    return S.conform(S.STEPS, pa.table({
        "rank": pa.array(np.full(n, rank, dtype=np.int32)), "step": g["step"],
        "start_ns": g["start_ns_min"], "end_ns": g["end_ns_max"],
        "origin": pa.array(["kernel Step Id span"] * n, pa.string())}))


def assign_steps(kernels: pa.Table, steps: pa.Table) -> pa.Table:
    """Fill a null ``step`` of KERNELS from STEPS windows: a kernel belongs to step S when
    ``S.start_ns <= start_ns <= S.end_ns`` (spec §A.2 Step Id rule, compared numerically). Kernels
    that already have a step keep it; kernels outside every window stay null."""
    if steps is None or steps.num_rows == 0 or kernels.num_rows == 0:
        return kernels
    st = steps.filter(pc.and_(pc.is_valid(steps["step"]), pc.is_valid(steps["start_ns"]))
                      ).sort_by("start_ns")
    if st.num_rows == 0:
        return kernels
    starts = st["start_ns"].to_numpy()
    ends = st["end_ns"].fill_null(np.iinfo(np.int64).max).to_numpy() if st["end_ns"].null_count \
        else st["end_ns"].to_numpy()
    ids = st["step"].to_numpy()
    ks = kernels["start_ns"].fill_null(np.iinfo(np.int64).min).to_numpy()
    idx = np.searchsorted(starts, ks, side="right") - 1
    ok = idx >= 0
    safe = np.where(ok, idx, 0)
    ok &= ks <= ends[safe]
    found = pa.array(np.where(ok, ids[safe], 0).astype(np.int32), mask=~ok)
    step = pc.coalesce(kernels["step"], found)
    return kernels.set_column(kernels.schema.get_field_index("step"), "step", step)


def _read_or_record(problems: Problems, rank: int, path: Path, read, *args):
    """``read(path, rank, *args)`` (the communication or trace_view reader); None, and the
    problem recorded with the analyses it affects, when the file is damaged."""
    try:
        return read(path, rank, *args)
    except InputError as e:
        problems.add_error(e, rank=rank, affects=AFFECTS.get(path.name, ()))
        return None


def report_bad_rows(problems: Problems, path: Path, bad: list, rank, affects=()) -> None:
    """One problem for the rows :func:`ascendprof.sysio.textio.read_csv` left out of ``path``
    (``bad``: (line, fields, expected) each): how many, the first lines and their widths."""
    lines = [b for b in bad if b[0] is not None]
    first = lines[0] if lines else bad[0]
    shown = ", ".join(str(b[0]) for b in lines[:5]) + (" ..." if len(lines) > 5 else "")
    problems.add(path, f"{len(bad)} row(s) left out: {first[1]} field(s) where the header has "
                       f"{first[2]} (a row cut off, e.g. by an interrupted copy, or a stray "
                       f"separator){'; lines ' + shown if shown else ''}",
                 rank=rank, where=f"line {first[0]}" if first[0] is not None else "",
                 severity="skipped", affects=affects)


def _timeline_not_needed(data) -> str | None:
    """Why trace_view.json need not be read for ``data`` (the CSV / JSON tables read so far), or
    None when it must be: the step breakdown is recomputed from kernel_details compute rows and
    communication big ops (kernel_details COMMUNICATION rows, else communication.json), step
    windows from the kernels' Step Id; only when kernels, or communication the profiler reports,
    are missing does the device timeline add facts. On the torch_npu level0-2 data both ways agree
    with step_trace_time.csv within 30 ns."""
    kernels = data.tables.get(S.KERNELS)
    if kernels is None or kernels.num_rows == 0:
        return None

    if pc.any(comm_rows(kernels.column("accelerator_core"), kernels.column("name"))).as_py():
        return "kernel_details.csv has the compute and communication tasks (--timeline reads it)"
    if data.has(S.COMM_OPS):
        return ("kernel_details.csv and communication.json have the compute tasks and "
                "communication ops (--timeline reads it)")
    st = data.tables.get(S.STEP_TRACE)
    if st is not None and st.num_rows and all(
            not v for c in ("communication_ns", "comm_not_overlapped_ns")
            if c in st.column_names for v in st.column(c).to_pylist()):
        return ("kernel_details.csv has the compute tasks and step_trace_time.csv reports no "
                "communication (--timeline reads it)")
    return None


def read_output_dir(source, options=None) -> RankData:
    """Read every known file of a torch_npu or MindSpore text source (spec §0, §A) into a RankData.

    ``source`` is a :class:`~ascendprof.scan.Source` of kind torch_npu or mindspore. Tables:
    KERNELS (kernel_details.csv), STEP_TRACE, OP_STATISTIC, API_STATISTIC, MEMORY_RECORD,
    OPERATOR_MEMORY, NPU_MODULE_MEM, STATIC_OP_MEM, COMM_* (communication*.json), TIMELINE and
    STEPS (trace_view.json), each present only when its file is; ``meta`` holds profiler_info /
    profiler_metadata. Each CSV parser above fills its table; communication.json / communication_matrix.json go to
    :mod:`ascendprof.readers.communication`, trace_view.json to
    :mod:`ascendprof.readers.trace_view`. A file that raises InputError is recorded in
    ``problems`` (with the analyses it affects) and the rest is read; every absent
    :data:`ANALYSIS_INPUTS` file is listed in ``missing``. When trace_view gives no STEPS, STEPS
    come from the kernels' Step Id span; kernels without Step Id get their step from STEPS.

    trace_view.json, the largest file by far, is read only when the other files lack facts the
    analyses need (:func:`_timeline_not_needed`) or ``options.timeline`` (model.options.ReadOptions)
    asks for it; when skipped, ``meta["not_read"]`` says why.

    Raises InputError only when the rank is unknown or ``ASCEND_PROFILER_OUTPUT`` is not a
    directory (nothing of the rank is readable).
    """
    base = Path(source.path)
    if source.rank is None:
        raise InputError(base, "rank unknown; not read")
    rank = int(source.rank)
    out = base / OUTPUT_DIR
    if not out.is_dir():
        raise InputError(base, f"no {OUTPUT_DIR} directory")
    data = RankData(source=source, rank=rank)
    data.meta = read_metadata(base, data.problems, rank)
    present = {p.name for p in out.iterdir() if p.is_file()}
    data.missing = [f for f in ANALYSIS_INPUTS if f not in present]

    for fname, (table, parse) in CSV_PARSERS.items():
        if fname not in present:
            continue
        bad: list = []
        lossy: list = []
        try:
            if fname == KERNEL_DETAILS and bigtables.should_spill(out / fname):
                negative: list = [0, None]
                got = read_kernel_details_spilled(out / fname, rank, bad, negative, lossy)
                if got is not None:
                    data.tables[table], data.spilled[table] = got
                    if negative[0]:
                        report_negative_durations(data, table, *negative)
                    continue
            data.tables[table] = parse(out / fname, rank, bad_rows=bad, lossy=lossy)
        except InputError as e:
            data.problems.add_error(e, rank=rank, affects=AFFECTS[fname])
            continue
        finally:
            if bad:
                report_bad_rows(data.problems, out / fname, bad, rank, AFFECTS[fname])
            if lossy:
                report_lossy(data.problems, out / fname, lossy, rank, AFFECTS[fname])
        if data.tables[table].num_rows == 0:  # kept (the file exists), but say it is empty
            data.problems.warn(out / fname, "header only, no data rows", rank=rank)

    if COMMUNICATION in present:
        spill = bigtables.should_spill(out / COMMUNICATION)
        got = _read_or_record(data.problems, rank, out / COMMUNICATION,
                              read_communication_spilled if spill else read_communication,
                              data.problems)
        if spill and got is not None:
            tables, spilled = got
            data.tables.update(tables)
            data.spilled.update(spilled)
        elif not spill:
            data.tables.update(got or {})
    if COMMUNICATION_MATRIX in present:
        got = _read_or_record(data.problems, rank, out / COMMUNICATION_MATRIX, read_matrix,
                              data.problems)
        if got is not None:
            data.tables[S.COMM_LINKS] = got
    if TRACE_VIEW in present:
        why_not = None if options is not None and options.timeline else _timeline_not_needed(data)
        if why_not:
            data.meta.setdefault("not_read", {})[TRACE_VIEW] = why_not
        else:
            data.tables.update(_read_or_record(data.problems, rank, out / TRACE_VIEW,
                                               read_trace_view) or {})

    if any(n.startswith(("minddata_", "pipeline_profiling_", "device_queue_profiling_",
                         "dataset_iterator_profiling_")) for n in present):
        data.tables.update(minddata.read_all({n: out / n for n in present}, rank, data.problems))

    kernels = data.tables.get(S.KERNELS)
    if kernels is not None:
        if not data.has(S.STEPS):
            steps = steps_from_kernels(kernels, rank)
            if steps.num_rows:
                data.tables[S.STEPS] = steps
        elif kernels["step"].null_count == kernels.num_rows:
            data.tables[S.KERNELS] = assign_steps(kernels, data.tables[S.STEPS])
            if S.KERNELS in data.spilled:  # the file on disk gets the same steps
                data.spilled[S.KERNELS] = _respill(
                    data.spilled[S.KERNELS], lambda t: assign_steps(t, data.tables[S.STEPS]))
    return data


#: the reader of both kinds (torch_npu, mindspore) as :func:`ascendprof.readers.read_source`
#: calls it
read = read_output_dir


def _respill(spilled, fn):
    """A spilled table with ``fn`` applied to each of its row groups (a new file)."""
    writer = None
    try:
        for batch in spilled.iter_batches():
            batch = fn(batch)
            if writer is None:
                writer = bigtables.SpillWriter(S.KERNELS, batch.schema)
            writer.write(batch)
    except BaseException:
        if writer is not None:
            writer.abort()
        raise
    if writer is None:
        return spilled
    spilled.release()
    return writer.close()


def read_communication_spilled(path: Path, rank: int, problems: Problems | None = None):
    """communication.json too large to hold, read in batches (communication.iter_tables) into
    spilled COMM_OPS / COMM_BANDWIDTH / COMM_SIZE_DIST with aligned row groups
    (:mod:`ascendprof.sysio.bigtables`). Returns ``({COMM_OPS: slim table}, {name:
    SpilledTable})``; a file the streaming reader hands back (communication.Reread) is read whole
    and returned as ``(tables, {})``. Raises InputError."""
    writers: dict = {}
    parts = []
    try:
        for batch in iter_tables(path, rank, problems, whole_file_bytes=0):
            for name, t in batch.items():
                if name not in writers:
                    writers[name] = bigtables.SpillWriter(name, t.schema)
                writers[name].write(t)
            parts.append(bigtables.slim(S.COMM_OPS, batch[S.COMM_OPS]))
    except Reread:
        for w in writers.values():
            w.abort()
        return read_communication_per_value(path, rank, problems), {}
    except BaseException:
        for w in writers.values():
            w.abort()
        raise
    slim = pa.concat_tables(parts).combine_chunks() if len(parts) > 1 else parts[0]
    return {S.COMM_OPS: slim}, {name: w.close() for name, w in writers.items()}
