"""Reader for legacy MindSpore 1.x / 2.0 profiler output (kind ``legacy_mindspore``).

One legacy ``profiler/`` directory holds the files of every rank side by side, each name carrying
the rank (``step_trace_raw_{rank}_detail_time.csv``); the scanner gives one
:class:`~ascendprof.scan.Source` per rank whose ``files`` list that rank's files only.

Files and the tables they feed (spec §0 "legacy", seeds 002-004; layouts checked against the
MindInsight readers of the same files):

- ``step_trace_raw_{rank}_detail_time.csv`` -> ITERATIONS. Columns ``step_num, start_point,
  end_point, total, fp_point, bp_point, iteration_interval, fp_and_bp, tail`` (+ per-stream
  reduce columns). Values are device cycle counts of the 100 MHz HWTS clock (1 tick = 10 ns;
  MindInsight divides by 1e5 to get ms). The last row is the average over all steps (its
  ``step_num`` is ``-`` or ``0``) and is dropped.
- ``ascend_cluster_analyse_{mode}_{stages}_{rank_size}_{rank}.csv`` -> STEP_TRACE. Data row *i*
  is step *i*, the last row is the average (dropped when there is one row more than steps).
  Columns (ms): ``computation_time`` -> Computing, ``communication_alone_time`` ->
  Communication(Not Overlapped), ``stage_time`` -> Stage, ``receive_alone_time`` -> Bubble,
  ``collective_communication_alone_time`` -> Communication(Not Overlapped and Exclude Receive).
- ``hccl_raw_{rank}.csv`` -> COMM_OPS: per step, ``communication_operator_cost`` maps each comm
  op to ``[step, communication cost ms, wait cost ms, link info]`` -> transit / wait time.
- ``output_timeline_data_{rank}.txt`` (``op_name, stream_id, start_time(ms), duration(ms)``,
  device clock) -> KERNELS, op type from the op name (``.../MatMul-op12`` -> ``MatMul``).
- ``aicore_intermediate_{rank}_detail.csv`` alone (no timeline data) -> KERNELS with one row per
  op holding its total execution time (ms) and no start time.
- ``ascend_timeline_display_{rank}.json`` / ``timeline_display_{rank}.json`` -> TIMELINE
  (track ``hardware``).
- ``profiler_info_{rank}.json`` -> ``meta["profiler_info"]``.
- the data preparation (minddata) files -> DATASET_OPS / DATASET_QUEUE
  (:mod:`ascendprof.readers.minddata`); ``memory_usage_summary_{rank}.json`` ->
  ``meta["memory_capacity_mb"]``.

Timestamps here are on the device clock (no wall-clock anchor survives in these files), so they
are comparable within one job but not to other jobs.
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
from decimal import Decimal
from pathlib import Path

import numpy as np
import pyarrow as pa

from ascendprof.model import schemas as S
from ascendprof.model.errors import InputError, shielded
from ascendprof.model.numtext import int_text
from ascendprof.model.rankdata import RankData
from ascendprof.readers import minddata
from ascendprof.sysio.textio import METADATA_MAX_BYTES, read_json, read_regular

#: One HWTS cycle of the legacy step trace in ns (100 MHz; MindInsight: value / 1e5 = ms).
TICK_NS = 10

_OP_TYPE_RE = re.compile(r"([^/]+?)(?:-op\d+)?$")
_P2P_RE = re.compile(r"(send|receive|recv)", re.I)


def read(source, options=None) -> RankData:  # noqa: ARG001 - one signature for all readers
    """Read one legacy rank (``source.kind == "legacy_mindspore"``) into a :class:`RankData`.

    Each file is optional; a malformed file is recorded in ``problems`` and only its tables are
    missing. Raises :class:`InputError` when none of the rank's files could be read.
    """
    base = Path(source.path)
    rank = source.rank
    data = RankData(source=source, rank=rank)
    names = {os.path.basename(f): base / f for f in source.files}

    def pick(pattern: str) -> Path | None:
        rx = re.compile(pattern)
        hits = sorted(n for n in names if rx.match(n))
        return names[hits[0]] if hits else None

    def attempt(affects: str, reader, *args):
        """``reader(*args)``, or None with its InputError recorded (affecting ``affects``)."""
        try:
            return reader(*args)
        except InputError as e:
            data.problems.add_error(e, rank=rank, affects=(affects,))
            return None

    def put(name: str, table) -> None:
        if table is not None:
            data.tables[name] = table

    r = re.escape(str(rank))
    steps_n = None
    path = pick(rf"^step_trace_raw_{r}_detail_time\.csv$")
    if path:
        put(S.ITERATIONS, attempt("cluster_step_trace", read_step_trace_raw, path, rank))
        if S.ITERATIONS in data.tables:
            steps_n = data.tables[S.ITERATIONS].num_rows
    else:
        data.missing.append(f"step_trace_raw_{rank}_detail_time.csv")
    # the data-parallel variant holds only iteration_interval, fp_and_bp, tail (no breakdown)
    path = pick(rf"^ascend_cluster_analyse_(?!data-parallel).+_{r}\.csv$")
    if path:
        put(S.STEP_TRACE, attempt("cluster_step_trace", read_cluster_analyse, path, rank,
                                  source.device_id, steps_n))
    path = pick(rf"^hccl_raw_{r}\.csv$")
    if path:
        put(S.COMM_OPS, attempt("communication", read_hccl_raw, path, rank))
    timeline = pick(rf"^output_timeline_data_{r}\.txt$")
    detail = pick(rf"^aicore_intermediate_{r}_detail\.csv$")
    if timeline:
        put(S.KERNELS, attempt("op_statistics", read_timeline_data, timeline, rank,
                               source.device_id, data.tables.get(S.ITERATIONS)))
    elif detail:
        put(S.KERNELS, attempt("op_statistics", read_aicore_detail, detail, rank,
                               source.device_id))
    path = pick(rf"^(ascend_)?timeline_display_{r}\.json$")
    if path:
        put(S.TIMELINE, attempt("timeline", read_timeline_display, path, rank))

    data.tables.update(minddata.read_all(names, rank, data.problems))
    path = pick(rf"^memory_usage_summary_{r}\.json$")
    if path:
        cap = attempt("memory", minddata.memory_capacity_mb, path)
        if cap:
            data.meta["memory_capacity_mb"] = cap
    path = pick(rf"^profiler_info_{r}\.json$")
    if path:
        info = attempt("metadata", read_json, path, METADATA_MAX_BYTES)
        if info is not None:
            data.meta["profiler_info"] = info
    if not data.tables:
        raise InputError(source.path, f"no readable legacy MindSpore file for rank {rank}")
    return data


# --- file parsers (each returns a conformed table) -------------------------------------------

def _rows(path: Path) -> tuple[list[str], list[list[str]]]:
    try:
        text = read_regular(path).decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise InputError(path, "not UTF-8 text", where=e.start) from None
    # the csv module's field limit is one per process: raised for these files only and put
    # back, so that a worker that read a legacy rank parses the next rank's CSV headers
    # (sysio/textio) as any other worker does
    limit = csv.field_size_limit(1 << 30)
    try:
        # newline="": the csv module splits rows itself, so a file saved with CR line endings
        # (a spreadsheet's "CSV (Macintosh)") reads as rows, as the text readers' files do
        rows = [r for r in csv.reader(io.StringIO(text, newline=""))
                if r and any(c.strip() for c in r)]
    except csv.Error as e:  # e.g. a field over the 1 GiB limit
        raise InputError(path, f"not readable as CSV: {e}") from None
    finally:
        csv.field_size_limit(limit)
    if not rows:
        raise InputError(path, "empty file")
    return [h.strip() for h in rows[0]], rows[1:]


def _int(path, text: str, line: int) -> int:
    try:
        return int(Decimal(text.strip()))
    except (ArithmeticError, ValueError):  # InvalidOperation, Infinity -> OverflowError
        raise InputError(path, f"not a number: {text!r}", where=f"line {line}") from None


def _ms_to_ns(path, text: str, line: int) -> int:
    try:
        return int((Decimal(text.strip()) * 1_000_000).to_integral_value())
    except (ArithmeticError, ValueError):  # InvalidOperation, Infinity -> OverflowError
        raise InputError(path, f"not a number: {text!r}", where=f"line {line}") from None


def _step_of(text: str) -> int | None:
    t = text.strip()
    n = int_text(t)
    return n if n is not None and n > 0 else None


def read_step_trace_raw(path: Path, rank: int) -> pa.Table:
    """``step_trace_raw_{rank}_detail_time.csv`` -> ITERATIONS (one row per step, ns).

    start/end = ``start_point``/``end_point``; interval/fp_bp/tail as written; ticks x 10 ns.
    The average row (``step_num`` ``-`` or ``0``) is dropped. Raises :class:`InputError` when a
    needed column is missing or a value is not a number.
    """
    head, rows = _rows(path)
    need = ("step_num", "start_point", "end_point", "iteration_interval", "fp_and_bp", "tail")
    missing = [c for c in need if c not in head]
    if missing:
        raise InputError(path, f"missing column(s) {', '.join(missing)}")
    ix = {c: head.index(c) for c in need}
    out = {k: [] for k in ("step", "start_ns", "end_ns", "iteration_interval_ns", "fp_bp_ns",
                           "tail_ns")}
    for n, row in enumerate(rows, start=2):
        if len(row) < len(head):
            raise InputError(path, f"row has {len(row)} fields, header has {len(head)}",
                             where=f"line {n}")
        step = _step_of(row[ix["step_num"]])
        if step is None:
            continue
        out["step"].append(step)
        for col, key in (("start_point", "start_ns"), ("end_point", "end_ns"),
                         ("iteration_interval", "iteration_interval_ns"),
                         ("fp_and_bp", "fp_bp_ns"), ("tail", "tail_ns")):
            out[key].append(_int(path, row[ix[col]], n) * TICK_NS)
    out["rank"] = [rank] * len(out["step"])
    return S.from_lists(S.ITERATIONS, out, path)


_CLUSTER_COLS = {
    "computation_time": "computing_ns", "computation": "computing_ns",
    "communication_alone_time": "comm_not_overlapped_ns",
    "stage_time": "stage_ns",
    "receive_alone_time": "bubble_ns",
    "collective_communication_alone_time": "comm_not_overlapped_excl_receive_ns",
    "collective_communication_time": "comm_not_overlapped_excl_receive_ns",
}


def read_cluster_analyse(path: Path, rank: int, device_id: int | None,
                         steps_n: int | None = None) -> pa.Table:
    """``ascend_cluster_analyse_{mode}_{stages}_{size}_{rank}.csv`` -> STEP_TRACE (ns).

    MindSpore writes one row per step then an average row; ``steps_n`` (the number of steps of
    the rank's step trace) says how many rows are steps. Without it, a single row is step 1 and
    otherwise the last row is taken as the average. Files without any known column (the
    data-parallel variant holds only ``iteration_interval, fp_and_bp, tail``) raise
    :class:`InputError`.
    """
    head, rows = _rows(path)
    cols = {i: _CLUSTER_COLS[h] for i, h in enumerate(head) if h in _CLUSTER_COLS}
    if not cols:
        raise InputError(path, "no step breakdown column (computation_time, stage_time, ...)")
    if steps_n is None:
        steps_n = 1 if len(rows) == 1 else len(rows) - 1
    out = {v: [] for v in set(cols.values())}
    out["step"] = []
    for n, row in enumerate(rows[:steps_n], start=2):
        out["step"].append(n - 1)
        for i, key in cols.items():
            out[key].append(_ms_to_ns(path, row[i], n) if i < len(row) else None)
    k = len(out["step"])
    out["rank"] = [rank] * k
    out["device_id"] = [device_id if device_id is not None else rank] * k
    return S.from_lists(S.STEP_TRACE, out, path)


def read_hccl_raw(path: Path, rank: int) -> pa.Table:
    """``hccl_raw_{rank}.csv`` -> COMM_OPS: one row per (step, communication op).

    ``communication_operator_cost`` is a JSON object ``{op: [step, comm_ms, wait_ms, links]}``;
    comm cost -> ``transit_ns``, wait cost -> ``wait_ns``, ``wait_ratio`` = wait/(wait+transit).
    Ops named like Send/Receive are ``p2p``, the rest ``collective``. The average row is dropped.
    """
    head, rows = _rows(path)
    if "step_num" not in head or "communication_operator_cost" not in head:
        raise InputError(path, "missing column(s) step_num / communication_operator_cost")
    i_step, i_ops = head.index("step_num"), head.index("communication_operator_cost")
    cols = {k: [] for k in ("step", "step_key", "kind", "op_name", "transit_ns", "wait_ns",
                            "wait_ratio")}
    for n, row in enumerate(rows, start=2):
        step = _step_of(row[i_step]) if len(row) > i_step else None
        if step is None:
            continue
        try:
            ops = json.loads(row[i_ops])
        except (json.JSONDecodeError, IndexError, RecursionError):
            raise InputError(path, "communication_operator_cost is not JSON",
                             where=f"line {n}") from None
        if not isinstance(ops, dict):
            raise InputError(path, "communication_operator_cost is not a JSON object",
                             where=f"line {n}")
        for op, val in ops.items():
            if not isinstance(val, list) or len(val) < 3:
                raise InputError(path, f"unexpected value for {op}", where=f"line {n}")
            try:
                transit = round(float(val[1]) * 1_000_000)
                wait = round(float(val[2]) * 1_000_000)
            except (TypeError, ValueError, OverflowError):
                raise InputError(path, f"cost of {op} is not a number: {val[1:3]!r}",
                                 where=f"line {n}") from None
            cols["step"].append(step)
            cols["step_key"].append(f"step{step}")
            cols["kind"].append("p2p" if _P2P_RE.search(op.rsplit("_", 1)[-1]) else "collective")
            cols["op_name"].append(op)
            cols["transit_ns"].append(transit)
            cols["wait_ns"].append(wait)
            cols["wait_ratio"].append(round(wait / (wait + transit), 4) if wait + transit else 0.0)
    cols["rank"] = [rank] * len(cols["step"])
    return S.from_lists(S.COMM_OPS, cols, path)


def op_type_of(name: str) -> str:
    """``Default/net/MatMul-op12`` -> ``MatMul`` (MindSpore full op name to op type)."""
    m = _OP_TYPE_RE.search(name)
    return m.group(1) if m else name


def _assign_steps(start_ns: list[int], iterations: pa.Table | None) -> list[int | None]:
    if iterations is None or iterations.num_rows == 0:
        return [None] * len(start_ns)
    it = iterations.sort_by("start_ns")
    lo = np.asarray(it.column("start_ns").to_numpy(zero_copy_only=False), dtype=np.int64)
    hi = np.asarray(it.column("end_ns").to_numpy(zero_copy_only=False), dtype=np.int64)
    st = it.column("step").to_pylist()
    ts = np.asarray(start_ns, dtype=np.int64)
    pos = np.searchsorted(lo, ts, side="right") - 1
    out = []
    for t, p in zip(ts, pos):
        out.append(st[p] if p >= 0 and t <= hi[p] else None)
    return out


def read_timeline_data(path: Path, rank: int, device_id: int | None,
                       iterations: pa.Table | None = None) -> pa.Table:
    """``output_timeline_data_{rank}.txt`` -> KERNELS (device clock ns).

    Columns ``op_name, stream_id, start_time(ms), duration(ms)``; the ms values are the HWTS
    cycle count / 1e5, so ``start_ns`` shares the clock of the step trace and each kernel gets
    the step whose [start, end] holds its start. Accelerator Core is unknown in this file (null).
    """
    head, rows = _rows(path)
    if len(head) < 4:
        raise InputError(path, "expected columns op_name, stream_id, start_time(ms), duration(ms)")
    cols = {k: [] for k in ("name", "op_type", "stream_id", "start_ns", "dur_ns")}
    for n, row in enumerate(rows, start=2):
        if len(row) < 4:
            raise InputError(path, f"row has {len(row)} fields, expected 4", where=f"line {n}")
        cols["name"].append(row[0].strip())
        cols["op_type"].append(op_type_of(row[0].strip()))
        cols["stream_id"].append(_int(path, row[1], n))
        start = _ms_to_ns(path, row[2], n)
        if not -2**63 <= start < 2**63:  # else the step lookup's int64 array overflows
            raise InputError(path, f"start_time(ms) beyond the int64 ns range: {row[2].strip()!r}",
                             where=f"line {n}")
        cols["start_ns"].append(start)
        cols["dur_ns"].append(_ms_to_ns(path, row[3], n))
    k = len(cols["name"])
    cols["step"] = _assign_steps(cols["start_ns"], iterations)
    cols["rank"] = [rank] * k
    cols["device_id"] = [device_id if device_id is not None else rank] * k
    return S.from_lists(S.KERNELS, cols, path)


def read_aicore_detail(path: Path, rank: int, device_id: int | None) -> pa.Table:
    """``aicore_intermediate_{rank}_detail.csv`` (``full_op_name|full_kernel_name,
    execution_time`` [, ``execution_frequency``]) -> KERNELS with one row per op: ``dur_ns`` is
    the op's execution time (ms) as written, no start time, Accelerator Core ``AI_CORE``."""
    head, rows = _rows(path)
    if "execution_time" not in head:
        raise InputError(path, "missing column execution_time")
    # the name column is full_op_name, full_kernel_name or (MindSpore 1.x typo) full_kernel_time
    name_col = next((h for h in ("full_op_name", "full_kernel_name") if h in head), head[0])
    i_name, i_time = head.index(name_col), head.index("execution_time")
    cols = {k: [] for k in ("name", "op_type", "dur_ns")}
    for n, row in enumerate(rows, start=2):
        if len(row) <= max(i_name, i_time):
            raise InputError(path, f"row has {len(row)} fields, header has {len(head)}",
                             where=f"line {n}")
        cols["name"].append(row[i_name])
        cols["op_type"].append(op_type_of(row[i_name]))
        cols["dur_ns"].append(_ms_to_ns(path, row[i_time], n))
    k = len(cols["name"])
    cols["rank"] = [rank] * k
    cols["device_id"] = [device_id if device_id is not None else rank] * k
    cols["accelerator_core"] = ["AI_CORE"] * k
    return S.from_lists(S.KERNELS, cols, path)


@shielded("trace event")
def read_timeline_display(path: Path, rank: int) -> pa.Table:
    """``ascend_timeline_display_{rank}.json`` -> TIMELINE rows for its complete ('X') events.

    ``ts``/``dur`` are us relative to the job's first task; they are kept as ns on that base.
    ``track`` is ``hardware`` (device ops on a stream), ``process``/``thread`` the pid/tid.
    """
    events = read_json(path)
    if not isinstance(events, list):
        raise InputError(path, "expected a JSON array of trace events")
    cols = {k: [] for k in ("track", "process", "thread", "name", "start_ns", "dur_ns")}
    for e in events:
        if not isinstance(e, dict) or e.get("ph") != "X":
            continue
        try:
            ts = round(float(e["ts"]) * 1000)
            dur = round(float(e.get("dur", 0)) * 1000)
        except (KeyError, TypeError, ValueError, OverflowError):
            raise InputError(path, f"event without numeric ts/dur: {str(e)[:80]}") from None
        cols["track"].append("hardware")
        cols["process"].append(str(e.get("pid", "")))
        cols["thread"].append(str(e.get("tid", "")))
        cols["name"].append(str(e.get("name", "")))
        cols["start_ns"].append(ts)
        cols["dur_ns"].append(dur)
    cols["rank"] = [rank] * len(cols["name"])
    return S.from_lists(S.TIMELINE, cols, path)
