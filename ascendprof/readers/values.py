"""Values no profiler writes on purpose, caught once for every reader's tables.

A negative duration, a negative step metric or an empty cell where a number belongs is damage (a
clock mix-up, a hand edit, a broken conversion, a crash), not a measurement: left in, it flows
into the outputs and the verdicts ("rank 0 computes -289.4 ms", a Data Wait of -17.9 ms).
:func:`check` runs on every :class:`~ascendprof.model.rankdata.RankData` a reader returns
(:func:`ascendprof.readers.read_source`) and, per table:

- KERNELS, TIMELINE: a row with a negative or empty / NaN ``dur_ns`` is left out (its interval
  means nothing); KERNELS: a row with a negative Start Time too, and a negative Wait Time or
  Block Dim / Mix Block Dim becomes null (the rest of the row stays);
- STEP_TRACE: a negative value of any step metric (Computing, Communication(Not Overlapped),
  Overlapped, Communication, Free, Stage, Bubble, Communication(Not Overlapped and Exclude
  Receive), Preparing) becomes null -- the rest of the step row stays; an empty / NaN cell of
  Computing, Communication(Not Overlapped), Overlapped, Communication or Free (columns every
  profiler writes) is reported; a step listed twice keeps its first row (the later ones are
  left out, so cluster files and the gate see one row per rank and step);
- COMM_OPS: a negative elapse / transit / wait / synchronization time becomes null;
- COMM_BANDWIDTH: a negative or NaN Transit Size, Transit Time or Bandwidth becomes null.

Each kind of fix is one problem (file, the first row and column, how many, an example value),
so problems.csv says what was left out. Non-numeric communication.json fields are handled by
that reader (the op is left out there, :mod:`ascendprof.readers.communication`).
"""

from __future__ import annotations

import os
import re

import pyarrow as pa
import pyarrow.compute as pc

from ascendprof.model import schemas as S

#: STEP_TRACE columns (every step metric is a length of time), with their CSV names.
STEP_TIME_COLUMNS = tuple(S.STEP_METRICS)
#: STEP_TRACE columns every profiler writes: an empty cell there is damage, not an old version
STEP_ALWAYS = ("computing_ns", "comm_not_overlapped_ns", "overlapped_ns", "communication_ns",
               "free_ns")
#: COMM_OPS columns that are lengths of time, with the communication.json names.
COMM_TIME_COLUMNS = (("Elapse Time(ms)", "elapse_ns"), ("Transit Time(ms)", "transit_ns"),
                     ("Wait Time(ms)", "wait_ns"), ("Synchronization Time(ms)", "sync_ns"))
#: COMM_BANDWIDTH columns that can be neither negative nor NaN, with the communication.json names
BANDWIDTH_COLUMNS = (("Transit Size(MB)", "size_mb", "MB", 1.0),
                     ("Transit Time(ms)", "transit_ns", "ms", 1e6),
                     ("Bandwidth(GB/s)", "bandwidth_gbps", "GB/s", 1.0))
#: KERNELS columns whose negative value becomes null: (CSV name, column, unit, divisor)
KERNEL_NONNEGATIVE = (("Wait Time(us)", "wait_ns", "us", 1e3),
                      ("Block Dim", "block_num", "", 1),
                      ("Mix Block Dim", "mix_block_num", "", 1))
#: The input files each table comes from, by name pattern, for the problem's path.
_FILE_OF = {S.KERNELS: r"kernel_details\.csv$|op_summary.*\.csv$|_profiler(_\d+)?\.db$|msprof_.*\.db$",
            S.TIMELINE: r"trace_view\.json$|msprof_.*\.json$|_profiler(_\d+)?\.db$",
            S.STEP_TRACE: r"step_trace_time\.csv$|analysis\.db$|ascend_cluster_analyse_.*\.csv$",
            S.COMM_OPS: r"communication\.json$|analysis\.db$|hccl_raw_.*\.csv$",
            S.COMM_BANDWIDTH: r"communication\.json$|analysis\.db$|hccl_raw_.*\.csv$"}
_KERNEL_AFFECTS = ("step_breakdown", "op_statistics")


def _count(mask) -> int:
    return pc.sum(mask.cast(pa.int64())).as_py() or 0


def _first(t: pa.Table, mask) -> tuple[int, dict]:
    i = pc.index(mask, True).as_py()
    return i, t.slice(i, 1).to_pylist()[0]


def _where(i: int, column: str, row: dict, table: str) -> str:
    """'row 6, column Duration(us), step 13' (row: 1-based data row of the table as read)."""
    parts = [f"row {i + 1}", f"column {column}"]
    if table == S.COMM_OPS or table == S.COMM_BANDWIDTH:
        if row.get("op_name"):
            parts.append(f"op {row['op_name']}@{row.get('group')}")
    if row.get("step") is not None:
        parts.append(f"step {row['step']}")
    return ", ".join(parts)


def _is_bad(col, nan_too: bool):
    """Mask of negative (and, with ``nan_too``, NaN) values; nulls are not bad here."""
    bad = pc.less(col, 0)
    if nan_too and pa.types.is_floating(col.type):
        bad = pc.or_(bad, pc.is_nan(col))
    return pc.fill_null(bad, False)


#: Rows of KERNELS / TIMELINE left out, in order: (column, shown as, bad when, problem text with
#: the count ``n``, the first row's ``name`` and value in ``us``); ``start_ns`` for KERNELS only.
_ROW_CHECKS = (
    ("dur_ns", "Duration(us)", "negative",
     "{n} row(s) with a negative duration left out (e.g. {name!r}: {us:.3f} us)"),
    ("dur_ns", "Duration(us)", "empty", "{n} row(s) with an empty or NaN duration left out (e.g. "
                                        "{name!r}); a task without a duration cannot be counted"),
    ("start_ns", "Start Time(us)", "negative",
     "{n} row(s) with a negative Start Time left out (e.g. {name!r}: {us:.3f} us)"),
)
#: The COMM_OPS / COMM_BANDWIDTH values made null: (table, (label, column, unit, divisor), NaN too)
_COMM_CHECKS = ((S.COMM_OPS, [(label, col, "ms", 1e6) for label, col in COMM_TIME_COLUMNS], False),
                (S.COMM_BANDWIDTH, BANDWIDTH_COLUMNS, True))
_COMM_AFFECTS = ("communication", "verdicts")


def check(data) -> None:
    """Fix ``data.tables`` in place as the module doc says and record one problem per fix in
    ``data.problems`` (severity ``skipped``: a value or row was left out)."""
    spilled = data.spilled  # fixed batch by batch by their reader
    for name in (S.KERNELS, S.TIMELINE):
        t = data.tables.get(name)
        if name in spilled or t is None or not t.num_rows or "dur_ns" not in t.column_names:
            continue
        for col, label, which, message in _ROW_CHECKS:
            if col not in t.column_names or (col == "start_ns" and name != S.KERNELS):
                continue
            bad = (pc.is_null(t[col]) if which == "empty"
                   else pc.fill_null(pc.less(t[col], 0), False))
            n = _count(bad)
            if n:
                i, ex = _first(t, bad)
                t = t.filter(pc.invert(bad))
                _report(data, name, _row_text(message, n, ex, col), _KERNEL_AFFECTS,
                        _where(i, label, ex, name))
        if name == S.KERNELS:
            t = _null_bad(data, name, t, KERNEL_NONNEGATIVE, _KERNEL_AFFECTS, nan_too=False)
        data.tables[name] = t
    t = data.tables.get(S.STEP_TRACE)
    if t is not None and t.num_rows and S.STEP_TRACE not in spilled:
        t = _dedupe_steps(data, t)
        t = _null_bad(data, S.STEP_TRACE, t,
                      [(label, col, "us", 1e3) for label, col in STEP_TIME_COLUMNS],
                      ("step_breakdown", "verdicts"), nan_too=False)
        _report_empty_steps(data, t)
        data.tables[S.STEP_TRACE] = t
    for name, cols, nan_too in _COMM_CHECKS:
        t = data.tables.get(name)
        if t is not None and t.num_rows and name not in spilled:
            data.tables[name] = _null_bad(data, name, t, cols, _COMM_AFFECTS, nan_too=nan_too)


def _row_text(message: str, n: int, row: dict, col: str) -> str:
    us = None if row[col] is None else row[col] / 1000
    return message.format(n=n, name=row.get("name"), us=us)


def _shown(v, unit: str, div) -> str:
    """A bad value as a problem shows it: ``NaN`` or ``-1.500 ms``."""
    return "NaN" if v != v else f"{v / div:.3f}{(' ' + unit) if unit else ''}"


def first_odd_comm_value(tables: dict) -> str | None:
    """The first value :func:`check` would leave out of the COMM_OPS / COMM_BANDWIDTH tables
    ``tables`` (a negative time, a negative or NaN size / time / bandwidth), described in
    words with its op and step; None when there is none. For inputs that must be complete
    (the gate): they are refused instead of corrected."""
    for name, cols, nan_too in _COMM_CHECKS:
        t = tables.get(name)
        if t is not None and t.num_rows:
            for label, _, _, n, shown, where in _bad_values(name, t, cols, nan_too):
                return f"{n} {label} value(s) that cannot be (e.g. {shown}; {where})"
    return None


def _bad_values(name: str, t: pa.Table, cols, nan_too: bool):
    """Per column of ``cols`` ((label, column, unit, divisor)) with negative (and NaN,
    ``nan_too``) values in ``t``: (label, column, mask, count, the first value shown, where
    it is)."""
    for label, col, unit, div in cols:
        if col in t.column_names:
            bad = _is_bad(t[col], nan_too)
            n = _count(bad)
            if n:
                i, row = _first(t, bad)
                yield label, col, bad, n, _shown(row[col], unit, div), _where(i, label, row, name)


def _null_bad(data, name: str, t: pa.Table, cols, affects, *, nan_too: bool) -> pa.Table:
    """``t`` with the negative (and NaN, ``nan_too``) values of ``cols`` ((label, column, unit,
    divisor)) made null, one problem per column."""
    what = "negative or NaN" if nan_too else "negative"
    for label, col, bad, n, shown, where in list(_bad_values(name, t, cols, nan_too)):
        t = t.set_column(t.schema.get_field_index(col), t.schema.field(col),
                         pc.if_else(bad, pa.scalar(None, t.schema.field(col).type), t[col]))
        _report(data, name, f"{n} {what} {label} value(s) left out (e.g. {shown}); this value "
                            f"cannot be negative", affects, where)
    return t


def _report_empty_steps(data, t: pa.Table) -> None:
    for label, col in STEP_TIME_COLUMNS:
        if col not in t.column_names:
            continue
        empty = pc.is_null(t[col])
        n = _count(empty)
        if not n or (col not in STEP_ALWAYS and n == t.num_rows):  # a column of newer versions
            continue
        i, row = _first(t, empty)
        _report(data, S.STEP_TRACE, f"{n} empty or NaN {label} value(s); left out of the sums "
                                    f"and medians of that metric", ("step_breakdown", "verdicts"),
                _where(i, label, row, S.STEP_TRACE))


def _dedupe_steps(data, t: pa.Table) -> pa.Table:
    """``t`` with one row per step: the first row of a step listed more than once (a file
    concatenated twice, a step written again after a restart) is kept, the rest left out."""
    if "step" not in t.column_names:
        return t
    steps = t["step"].to_pylist()
    seen: set = set()
    keep, dups, first_dup = [], 0, None
    for i, s in enumerate(steps):
        if s is not None and s in seen:
            keep.append(False)
            dups += 1
            if first_dup is None:
                first_dup = (i, s)
            continue
        seen.add(s)
        keep.append(True)
    if not dups:
        return t
    i, s = first_dup
    _report(data, S.STEP_TRACE, f"{dups} duplicated step row(s) left out (e.g. step {s} listed "
                                f"{steps.count(s)} times); the first row of each step is kept",
            ("step_breakdown", "verdicts"), f"row {i + 1}, column Step, step {s}")
    return t.filter(pa.array(keep))


def report_negative_durations(data, name: str, count: int, example: dict) -> None:
    """The problem :func:`check` records for ``count`` rows of ``name`` with a negative
    duration (``example``: the first, as a row dict), for a reader that left them out itself."""
    _report(data, name, _row_text(_ROW_CHECKS[0][3], count, example, "dur_ns"), _KERNEL_AFFECTS,
            "column Duration(us)")


def _report(data, table: str, reason: str, affects, where: str = "") -> None:
    hits = []  # the pattern's alternatives in order: the text file before a database
    for alt in _FILE_OF.get(table, "$^").split("|"):
        rx = re.compile(alt)
        hits = [f for f in sorted(data.source.files) if rx.search(f)]
        if hits:
            break
    path = os.path.join(data.source.path, hits[0]) if hits else data.source.path
    data.problems.add(path, reason, rank=data.rank, where=where, severity="skipped",
                      affects=affects)
