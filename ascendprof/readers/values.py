"""Values no profiler writes on purpose, caught once for every reader's tables.

A negative duration or a negative step metric is damage (a clock mix-up, a hand edit, a broken
conversion), not a measurement: left in, it flows into the outputs and the verdicts ("rank 0
computes -289.4 ms"). :func:`check` runs on every :class:`~ascendprof.model.rankdata.RankData`
a reader returns (:func:`ascendprof.readers.read_source`) and, per table:

- KERNELS, TIMELINE: a row with a negative ``dur_ns`` is left out (its interval means nothing);
- STEP_TRACE: a negative value of a time metric (Computing, Communication(Not Overlapped),
  Overlapped, Communication, Free, Stage, Bubble, Communication(Not Overlapped and Exclude
  Receive)) becomes null -- the rest of the step row stays; Preparing may be negative (the device
  can start before the framework step is recorded) and is kept;
- COMM_OPS: a negative elapse / transit / wait / synchronization time becomes null.

Each kind of fix is one problem (file, first place, how many, an example value), so
problems.csv says what was left out. Non-numeric communication.json fields are handled by that
reader (the op is left out there, :mod:`ascendprof.readers.communication`).
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from ascendprof.model import schemas as S

#: STEP_TRACE columns that are lengths of time (never negative), with their CSV names.
STEP_TIME_COLUMNS = tuple((name, col) for name, col in S.STEP_METRICS if col != "preparing_ns")
#: COMM_OPS columns that are lengths of time, with the communication.json names.
COMM_TIME_COLUMNS = (("Elapse Time(ms)", "elapse_ns"), ("Transit Time(ms)", "transit_ns"),
                     ("Wait Time(ms)", "wait_ns"), ("Synchronization Time(ms)", "sync_ns"))
#: The input files each table comes from, by name pattern, for the problem's path.
_FILE_OF = {S.KERNELS: r"kernel_details\.csv$|op_summary.*\.csv$|_profiler(_\d+)?\.db$|msprof_.*\.db$",
            S.TIMELINE: r"trace_view\.json$|msprof_.*\.json$|_profiler(_\d+)?\.db$",
            S.STEP_TRACE: r"step_trace_time\.csv$|analysis\.db$|ascend_cluster_analyse_.*\.csv$",
            S.COMM_OPS: r"communication\.json$|analysis\.db$|hccl_raw_.*\.csv$"}


def check(data) -> None:
    """Fix ``data.tables`` in place as the module doc says and record one problem per fix in
    ``data.problems`` (severity ``skipped``: a value or row was left out)."""
    spilled = data.spilled  # fixed batch by batch by their reader
    for name in (S.KERNELS, S.TIMELINE):
        t = data.tables.get(name)
        if name in spilled:
            continue
        if t is not None and t.num_rows and "dur_ns" in t.column_names:
            neg = pc.fill_null(pc.less(t["dur_ns"], 0), False)
            n = pc.sum(neg.cast(pa.int64())).as_py() or 0
            if n:
                i = pc.index(neg, True).as_py()
                ex = t.slice(i, 1).to_pylist()[0]
                data.tables[name] = t.filter(pc.invert(neg))
                _report(data, name, f"{n} row(s) with a negative duration left out (e.g. "
                                    f"{ex.get('name')!r}: {ex['dur_ns'] / 1000:.3f} us)",
                        ("step_breakdown", "op_statistics"))
    for name, cols, unit, div in ((S.STEP_TRACE, STEP_TIME_COLUMNS, "us", 1e3),
                                  (S.COMM_OPS, COMM_TIME_COLUMNS, "ms", 1e6)):
        t = data.tables.get(name)
        if t is None or not t.num_rows or name in spilled:
            continue
        for label, col in cols:
            if col not in t.column_names:
                continue
            neg = pc.fill_null(pc.less(t[col], 0), False)
            n = pc.sum(neg.cast(pa.int64())).as_py() or 0
            if not n:
                continue
            i = pc.index(neg, True).as_py()
            row = t.slice(i, 1).to_pylist()[0]
            where = (f"step {row.get('step')}" if row.get("step") is not None else "")
            if name == S.COMM_OPS and row.get("op_name"):
                where = f"{row['op_name']}@{row.get('group')}" + (f" {where}" if where else "")
            t = t.set_column(t.schema.get_field_index(col), col,
                             pc.if_else(neg, pa.scalar(None, t.schema.field(col).type), t[col]))
            _report(data, name, f"{n} negative {label} value(s) left out (e.g. "
                                f"{row[col] / div:.3f} {unit}); a length of time cannot be "
                                f"negative", ("step_breakdown", "verdicts") if name == S.STEP_TRACE
                    else ("communication", "verdicts"), where)
        data.tables[name] = t


def report_negative_durations(data, name: str, count: int, example: dict) -> None:
    """The problem :func:`check` records for ``count`` rows of ``name`` with a negative
    duration (``example``: the first, as a row dict), for a reader that left them out itself."""
    _report(data, name, f"{count} row(s) with a negative duration left out (e.g. "
                        f"{example.get('name')!r}: {example['dur_ns'] / 1000:.3f} us)",
            ("step_breakdown", "op_statistics"))


def _report(data, table: str, reason: str, affects, where: str = "") -> None:
    import os
    import re

    rx = re.compile(_FILE_OF.get(table, "$^"))
    hits = [f for f in data.source.files if rx.search(f)]
    path = os.path.join(data.source.path, hits[0]) if hits else data.source.path
    data.problems.add(path, reason, rank=data.rank, where=where, severity="skipped",
                      affects=affects)
