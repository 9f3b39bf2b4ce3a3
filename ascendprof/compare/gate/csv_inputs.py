"""Gate inputs that are one exported CSV (the five the package docstring lists): which CSV it is
(from its header), checks that every number cell is a number and no row repeats, and the CSV
read into a :class:`~ascendprof.compare.diff.Side`. Errors: GateInputError (exit 2).
"""

from __future__ import annotations

import codecs
import csv
import math
from pathlib import Path

import pandas as pd

from ascendprof.compare.diff import STEP_METRICS, Side, aggregate_kernels
from ascendprof.compare.gate.errors import GateInputError
from ascendprof.readers import ascend_output as ao
from ascendprof.report.readback import cluster_step_trace as read_cluster_step_trace
from ascendprof.report.readback import op_statistics as read_op_statistics

CLUSTER_STEP_TRACE = "cluster_step_trace_time"
STEP_TRACE_TIME = "step_trace_time"
KERNEL_DETAILS = "kernel_details"
OP_STATISTIC = "op_statistic"        # the profiler's op_statistic.csv
OP_STATISTICS = "op_statistics"      # ascendprof analyse's op_statistics.csv


def csv_kind(path: Path) -> str:
    """Which exported CSV ``path`` is, from its header row only (:data:`CLUSTER_STEP_TRACE`,
    :data:`STEP_TRACE_TIME`, :data:`KERNEL_DETAILS`, :data:`OP_STATISTIC`,
    :data:`OP_STATISTICS`). Raises GateInputError when the file cannot be read or is none of
    them."""
    path = Path(path)
    try:
        with open(path, newline="", encoding="utf-8-sig") as f:
            head = [h.strip() for h in next(csv.reader(f), [])]
    except OSError as e:
        raise GateInputError(path, f"cannot read: {e.strerror or e}") from None
    except UnicodeDecodeError:
        raise _not_utf8(path) from None
    except csv.Error as e:
        raise GateInputError(path, f"malformed CSV: {e}") from None
    h = set(head)
    if {"Type", "Index", "Computing"} <= h:
        return CLUSTER_STEP_TRACE
    if {"Step", "Computing"} <= h:
        return STEP_TRACE_TIME
    if "Duration(us)" in h and ("Accelerator Core" in h or "Task Type" in h):
        return KERNEL_DETAILS
    if "Total Time(us)" in h and ("OP Type" in h):
        return OP_STATISTICS if "Rank" in h else OP_STATISTIC
    raise GateInputError(path, "not a CSV the gate reads (expected cluster_step_trace_time, "
                               "step_trace_time, kernel_details, op_statistic or op_statistics)")


#: The numeric columns of each gate CSV that must hold a number in every (rank) row.
_NUMERIC = {CLUSTER_STEP_TRACE: tuple(STEP_METRICS), STEP_TRACE_TIME: tuple(STEP_METRICS),
            KERNEL_DETAILS: ("Duration(us)",), OP_STATISTIC: ("Count", "Total Time(us)"),
            OP_STATISTICS: ("Count", "Total Time(us)")}


def _not_utf8(path: Path) -> GateInputError:
    """The error for a file that is not UTF-8 text, at the file offset of its first byte that is
    not (a decode error's own offset counts from its chunk, after the BOM)."""
    dec = codecs.getincrementaldecoder("utf-8")()
    where = None
    with open(path, "rb") as f:  # a block at a time: the file may be gigabytes
        head = f.read(len(codecs.BOM_UTF8))
        skip = len(head) if head == codecs.BOM_UTF8 else 0
        pos, block = skip, head[skip:] or f.read(1 << 20)  # pos: file offset of block
        while block:
            pending = len(dec.getstate()[0])  # bytes of a character cut at the last block
            try:
                dec.decode(block)
            except UnicodeDecodeError as e:  # e.start counts from the pending bytes
                where = pos - pending + e.start
                break
            pos += len(block)
            block = f.read(1 << 20)
        else:
            pending = len(dec.getstate()[0])
            try:
                dec.decode(b"", final=True)
            except UnicodeDecodeError as e:  # a character cut by the end of the file
                where = pos - pending + e.start
    return GateInputError(path, "not UTF-8 text", where=where)


def check_csv_cells(path: Path, kind: str) -> None:
    """Every cell of the :data:`_NUMERIC` columns ``path`` has is a finite number, not negative
    (rank rows only in a cluster_step_trace_time.csv; op_statistics.csv: per-rank rows). Raises
    GateInputError naming the column, the data row and the cell: an empty or ``nan`` cell would
    otherwise drop out of one side only and look like a change."""
    try:  # csv_kind decoded only the first 8 KiB: a byte that is not UTF-8 may come later
        with open(path, newline="", encoding="utf-8-sig") as f:
            rd = csv.reader(f)
            head = [h.strip() for h in next(rd, [])]
            typ = head.index("Type") if kind == CLUSTER_STEP_TRACE and "Type" in head else None
            rk = head.index("Rank") if kind == OP_STATISTICS and "Rank" in head else None
            rows = []
            for n, row in enumerate(rd, start=1):
                if not row or (typ is not None and typ < len(row)
                               and row[typ].strip().lower() != "rank"):
                    continue
                if rk is not None and rk < len(row) and not row[rk].strip().isdigit():
                    continue
                rows.append((n, row))
    except UnicodeDecodeError:
        raise _not_utf8(path) from None
    # a column empty in every row is a value the profiler did not collect (Preparing of a
    # breakdown recomputed from kernels, Overlapped of MindSpore's cluster file): that metric
    # has no data on this side, which the rules report as skipped; a column empty in some
    # rows only is an incomplete input
    cols = [(head.index(c), c) for c in _NUMERIC[kind] if c in head]
    cols = [(i, c) for i, c in cols
            if any(i < len(row) and row[i].strip().strip("\t") for _, row in rows)]
    for n, row in rows:
        for i, c in cols:
            cell = row[i].strip().strip("\t") if i < len(row) else ""
            try:
                v = float(cell)
                ok = math.isfinite(v)
            except ValueError:
                ok = False
            if not ok:
                raise GateInputError(path, f"column {c!r}: {cell!r} is not a number "
                                           f"(gate inputs must be complete)",
                                     where=f"data row {n}")
            if v < 0:  # a baseline of -5 ms would let any current value pass
                raise GateInputError(path, f"column {c!r}: {cell!r} is negative (a length "
                                           f"of time cannot be)", where=f"data row {n}")


def check_duplicates(side: Side, path) -> None:
    """Raise GateInputError when a (rank, step) of the step breakdown, or a (rank, op type,
    core) of op statistics, appears twice: summed, it would read as a +100 % change."""
    for frame, keys, what in ((side.steps, ["rank", "step"], "rank {} step {}"),
                              (side.op_stats, ["rank", "op_type", "accelerator_core"],
                               "rank {} op type {} ({})")):
        if frame is None or not len(frame):
            continue
        dup = frame[frame.duplicated(keys, keep=False)]
        if len(dup):
            first = dup.iloc[0]
            n = int((frame[keys] == first[keys]).all(axis=1).sum())
            raise GateInputError(path, "duplicated rows: " + what.format(
                *[("-" if pd.isna(first[k]) else first[k]) for k in keys]) + f" appears {n} times")


def load_csv(path: Path) -> Side:
    """One exported CSV -> Side (only the frames that file has). The rank of a single-rank file
    (step_trace_time, kernel_details, op_statistic) is its ``Device_id`` when it has one value,
    else 0. Raises GateInputError (also for a cell that is not a number, or duplicated rows)."""
    path = Path(path)
    kind = csv_kind(path)
    check_csv_cells(path, kind)
    side = Side(label=str(path), ranks=[])
    if kind == CLUSTER_STEP_TRACE:
        side.steps = read_cluster_step_trace(path)
    elif kind == STEP_TRACE_TIME:
        t = ao.read_step_trace_time(path, 0).to_pandas()
        side.steps = _rank_from_device(t)
    elif kind == KERNEL_DETAILS:
        t = ao.read_kernel_details(path, 0)
        cols = ["rank", "step", "device_id", "name", "op_type", "accelerator_core",
                "input_shapes", "dur_ns"]
        side.kernels = aggregate_kernels(_rank_from_device(t.select(cols).to_pandas()))
    elif kind == OP_STATISTIC:
        t = _rank_from_device(ao.read_op_statistic(path, 0).to_pandas())
        side.op_stats = t.rename(columns={"core_type": "accelerator_core"})[
            ["rank", "op_type", "accelerator_core", "count", "total_ns"]]
    else:
        side.op_stats = read_op_statistics(path)
    check_duplicates(side, path)
    side.ranks = ranks_of(side)
    if not side.ranks:
        raise GateInputError(path, "no data rows")
    return side


def _rank_from_device(df: pd.DataFrame) -> pd.DataFrame:
    dev = df["device_id"].dropna().unique() if "device_id" in df.columns else []
    df = df.copy()
    df["rank"] = int(dev[0]) if len(dev) == 1 else 0
    return df


def ranks_of(side: Side) -> list[int]:
    """The ranks any frame of ``side`` has, sorted."""
    rs: set[int] = set()
    for f in (side.steps, side.kernels, side.op_stats, side.comm_ops):
        if f is not None and len(f):
            rs.update(int(r) for r in f["rank"].dropna().unique())
    return sorted(rs)
