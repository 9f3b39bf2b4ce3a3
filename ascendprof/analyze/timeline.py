"""One timeline for the whole collection: every rank's device tasks and communication ops as
trace events, the members of each collective instance joined, and the clock skew that remains.

Tables in, tables out; nothing here reads or writes files (report/trace.py writes them).

Event table (:data:`EVENT_SCHEMA`), one row per slice:
``rank`` int32, ``track`` (the swim-lane inside the rank's process: ``Stream <id>`` for device
tasks, ``Communication <group name>`` for communication ops), ``name``, ``cat`` (Accelerator
Core of a task, ``collective`` / ``p2p`` of an op), ``start_ns`` / ``dur_ns`` int64 (absolute
local wall-clock ns as the readers give them, spec §D.6), ``step`` int32, ``instance`` (the
collective instance key ``group|step key|op name`` of a communication op, null for tasks) and
``args`` (compact JSON text shown with the slice).

Sources: KERNELS (kernel_details.csv §A.2, op_summary §C.1, TASK §B.1) for the device tasks;
when a rank has none, the ``hardware`` track of TIMELINE (trace_view.json §A.7). COMM_OPS
(communication.json §A.5, COMMUNICATION_OP §B.1) for the communication ops; the communication
big-op rows that kernel_details also lists (model.tasks.comm_rows) are left out of the streams
so each op appears once.
"""

from __future__ import annotations

import numpy as np
import orjson
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from ascendprof.analyze.cluster_step_trace import _distributed_args, parallel_index
from ascendprof.analyze.verdicts import stages
from ascendprof.model import schemas as S
from ascendprof.model.tasks import comm_rows

EVENT_SCHEMA = pa.schema([
    ("rank", pa.int32()), ("track", pa.string()), ("name", pa.string()), ("cat", pa.string()),
    ("start_ns", pa.int64()), ("dur_ns", pa.int64()), ("step", pa.int32()),
    ("instance", pa.string()), ("args", pa.string()),
])


def _text(col) -> list:
    return col.cast(pa.string()).to_pylist()


def _args(rows: dict, keys: tuple[tuple[str, str], ...]) -> list[str]:
    """Per row the compact JSON of the non-null values of ``keys`` ((column, label) pairs)."""
    n = len(next(iter(rows.values()))) if rows else 0
    out = []
    for i in range(n):
        d = {label: rows[col][i] for col, label in keys if rows[col][i] is not None}
        out.append(orjson.dumps(d).decode())
    return out


def rank_events(tables: dict[str, pa.Table], rank: int,
                group_names: dict[str, str] | None = None) -> pa.Table:
    """The trace events of one rank (:data:`EVENT_SCHEMA`) from its normalised tables.

    ``group_names`` maps a communication group id (as COMM_OPS writes it) to its parallel-group
    name (pp, dp, tp …, from profiler_metadata.json §A.13); unknown groups keep their id.
    Events with a null start or a negative duration are left out (they cannot be placed).
    """
    parts = [_task_events(tables, rank), _comm_events(tables.get(S.COMM_OPS), rank,
                                                      group_names or {})]
    parts = [p for p in parts if p is not None and p.num_rows]
    if not parts:
        return EVENT_SCHEMA.empty_table()
    t = pa.concat_tables(parts)
    ok = pc.and_(pc.is_valid(t.column("start_ns")),
                 pc.greater_equal(pc.fill_null(t.column("dur_ns"), 0), 0))
    return t.filter(ok)


def _task_events(tables, rank):
    k = tables.get(S.KERNELS)
    if k is not None and k.num_rows:
        k = k.filter(pc.invert(comm_rows(k.column("accelerator_core"), k.column("name"))))
        stream = k.column("stream_id").to_pylist()
        track = [f"Stream {int(s)}" if s is not None else "Device tasks" for s in stream]
        rows = {c: k.column(c).to_pylist() for c in ("op_type", "task_id", "input_shapes",
                                                     "block_num")}
        args = _args(rows, (("op_type", "Type"), ("task_id", "Task ID"),
                            ("input_shapes", "Input Shapes"), ("block_num", "Block Dim")))
        return pa.table({
            "rank": pa.array([rank] * k.num_rows, pa.int32()), "track": track,
            "name": k.column("name"), "cat": k.column("accelerator_core"),
            "start_ns": k.column("start_ns"), "dur_ns": pc.fill_null(k.column("dur_ns"), 0),
            "step": k.column("step"), "instance": pa.nulls(k.num_rows, pa.string()),
            "args": args}, schema=EVENT_SCHEMA)
    tl = tables.get(S.TIMELINE)
    if tl is None or tl.num_rows == 0:
        return None
    hw = tl.filter(pc.equal(tl.column("track"), "hardware"))
    if hw.num_rows == 0:
        return None
    return pa.table({
        "rank": pa.array([rank] * hw.num_rows, pa.int32()),
        "track": pc.fill_null(hw.column("thread"), "Device tasks"), "name": hw.column("name"),
        "cat": hw.column("task_type"), "start_ns": hw.column("start_ns"),
        "dur_ns": pc.fill_null(hw.column("dur_ns"), 0), "step": hw.column("step"),
        "instance": pa.nulls(hw.num_rows, pa.string()),
        "args": pa.array(["{}"] * hw.num_rows, pa.string())}, schema=EVENT_SCHEMA)


def _comm_events(ops, rank, group_names):
    if ops is None or ops.num_rows == 0:
        return None
    names = _text(ops.column("op_name"))
    groups = _text(ops.column("group"))
    keys = _text(ops.column("step_key"))
    op = [(n or "None").split("@", 1)[0] for n in names]
    instance = [f"{g or ''}|{s or ''}|{o}" for g, s, o in zip(groups, keys, op)]
    track = [f"Communication {group_names.get(g or '', g or '?')}" for g in groups]
    ms = {c: [None if v is None else round(v / 1e6, 6) for v in ops.column(c).to_pylist()]
          for c in ("transit_ns", "wait_ns", "sync_ns", "idle_ns")}
    rows = {"group": groups, **ms}
    args = _args(rows, (("group", "group"), ("transit_ns", "Transit Time(ms)"),
                        ("wait_ns", "Wait Time(ms)"), ("sync_ns", "Synchronization Time(ms)"),
                        ("idle_ns", "Idle Time(ms)")))
    return pa.table({
        "rank": pa.array([rank] * ops.num_rows, pa.int32()), "track": track, "name": op,
        "cat": ops.column("kind"), "start_ns": ops.column("start_ns"),
        "dur_ns": pc.fill_null(ops.column("elapse_ns"), 0), "step": ops.column("step"),
        "instance": instance, "args": args}, schema=EVENT_SCHEMA)


# ---------------------------------------------------------------------------------------------
# joining the ranks


def flows(events: pa.Table) -> list[np.ndarray]:
    """Collective instances seen on at least two ranks: for each, the row indices (int64
    array) of its member events in ``events``, ordered by rank (one event per rank: a rank's
    first row of that instance). Instances are ordered by their earliest start."""
    inst = events.column("instance")
    rows = np.flatnonzero(pc.is_valid(inst).to_numpy(zero_copy_only=False))
    if not len(rows):
        return []
    codes = pc.dictionary_encode(inst.take(pa.array(rows))).combine_chunks().indices
    code = codes.to_numpy(zero_copy_only=False).astype(np.int64)
    rank = events.column("rank").to_numpy()[rows].astype(np.int64)
    order = np.lexsort((rows, rank, code))  # by instance, then rank, then row
    code, rank, rows = code[order], rank[order], rows[order]
    first_of_rank = np.r_[True, (code[1:] != code[:-1]) | (rank[1:] != rank[:-1])]
    code, rows = code[first_of_rank], rows[first_of_rank]
    bounds = np.flatnonzero(np.r_[True, code[1:] != code[:-1], True])
    groups = [rows[a:b] for a, b in zip(bounds[:-1], bounds[1:]) if b - a > 1]
    start = events.column("start_ns").to_numpy()
    groups.sort(key=lambda m: int(start[m].min()))
    return groups


def clock_skew(events: pa.Table, joined: list | None = None) -> dict:
    """How far the ranks' clocks disagree, measured on collective instances.

    All members of one collective leave it together (the last arrival releases everyone), so
    on perfectly aligned clocks their end times (start + elapse) agree up to the completion
    notification latency. Per instance and member: ``d = end − median end of the members``.
    Returns ``{"offset_ns": {rank: median d over its instances}, "residual_us": {"median",
    "p95", "max"} of |d − offset| over all members (what remains after removing each rank's
    offset), "raw_us": the same of |d| (before), "instances": count}``. p2p instances are
    used too (send and receive of one batchSendRecv end together). Empty figures when no
    instance has two members.
    """
    joined = flows(events) if joined is None else joined
    if not joined:
        return {"offset_ns": {}, "residual_us": {}, "raw_us": {}, "instances": 0}
    rows = np.concatenate(joined)
    inst = np.repeat(np.arange(len(joined)), [len(m) for m in joined])
    start = events.column("start_ns").to_numpy()[rows]
    end = start + pc.fill_null(events.column("dur_ns"), 0).to_numpy()[rows]
    df = pd.DataFrame({"inst": inst, "rank": events.column("rank").to_numpy()[rows],
                       "end": end.astype(np.float64)})
    d = df["end"] - df.groupby("inst")["end"].transform("median")
    offset = d.groupby(df["rank"]).median().round().astype(np.int64)
    res = (d - df["rank"].map(offset)).abs().to_numpy()

    def stats(a):
        return {"median": round(float(np.median(a)) / 1e3, 3),
                "p95": round(float(np.percentile(a, 95)) / 1e3, 3),
                "max": round(float(a.max()) / 1e3, 3)}

    return {"offset_ns": {int(r): int(o) for r, o in offset.items()},
            "residual_us": stats(res), "raw_us": stats(d.abs().to_numpy()),
            "instances": len(joined)}


def shift(events: pa.Table, offset_ns: dict[int, int]) -> pa.Table:
    """``events`` with each rank's ``start_ns`` moved by −offset (see :func:`clock_skew`)."""
    if not offset_ns:
        return events
    rank = events.column("rank").to_numpy()
    off = np.zeros(len(rank), dtype=np.int64)
    for r, o in offset_ns.items():
        off[rank == r] = o
    start = events.column("start_ns").to_numpy() - off
    return events.set_column(events.schema.get_field_index("start_ns"), "start_ns",
                             pa.array(start, pa.int64()))


def lanes(events: pa.Table) -> pa.Table:
    """``events`` with ``track`` renamed so that on every track slices either nest or are
    disjoint, sorted by rank, track, start and longest first (each track contiguous).

    A trace viewer draws one track as a stack: a slice that starts inside another but ends
    after it cannot be drawn and is misplaced (the ~20 % of mis-nested NPU kernels seen in
    torch_npu's own trace_view.json). Such a slice goes to the first of ``<track> #2``,
    ``#3`` … where it fits. Longer slices come first at equal starts, so a parent precedes its
    children."""
    if events.num_rows == 0:
        return events
    keys = [("rank", "ascending"), ("track", "ascending"), ("start_ns", "ascending"),
            ("dur_ns", "descending")]
    ev = events.take(pc.sort_indices(events, sort_keys=keys))
    track = pc.dictionary_encode(ev.column("track")).combine_chunks()
    group = (ev.column("rank").to_numpy().astype(np.int64) * (len(track.dictionary) + 1)
             + track.indices.to_numpy(zero_copy_only=False))
    start = ev.column("start_ns").to_numpy()
    end = start + ev.column("dur_ns").to_numpy()
    # a slice that starts before its predecessor on the track ends may need another lane;
    # tracks without any such slice (most device streams) need no look at all
    same = group[1:] == group[:-1]
    suspects = np.unique(group[1:][same & (start[1:] < end[:-1])])
    if not len(suspects):
        return ev
    lane = np.zeros(ev.num_rows, dtype=np.int64)
    for g in suspects.tolist():
        idx = np.flatnonzero(group == g)
        stacks: list[list[int]] = []
        for i, s, e in zip(idx.tolist(), start[idx].tolist(), end[idx].tolist()):
            for n, stack in enumerate(stacks):
                while stack and stack[-1] <= s:
                    stack.pop()
                if not stack or e <= stack[-1]:
                    stack.append(e)
                    break
            else:
                n = len(stacks)
                stacks.append([e])
            lane[i] = n
    moved = lane > 0
    names = ev.column("track").to_numpy(zero_copy_only=False).astype(object)
    names[moved] = [f"{a} #{b + 1}" for a, b in zip(names[moved], lane[moved].tolist())]
    ev = ev.set_column(ev.schema.get_field_index("track"), "track",
                       pa.array(names, pa.string()))
    return ev.take(pc.sort_indices(ev, sort_keys=keys))


def process_names(metadata: dict[int, dict], ranks) -> dict[int, str]:
    """rank -> ``"rank N (stage s, dp d)"``: the pipeline stage and data-parallel index from
    profiler_metadata.json (``distributed_args``, Megatron layout, as msprof-analyze places
    ranks; §A.13), else the position in the ``pp`` group; plain ``"rank N"`` when unknown."""
    index = None
    args = _distributed_args(metadata)
    if args:
        index = parallel_index(args)
    stage_of = stages(metadata)
    out = {}
    for r in ranks:
        parts = []
        if index is not None and 0 <= r < len(index) and index[r] is not None:
            dp, pp, tp = index[r]
            parts = [f"stage {pp}", f"dp {dp}"] + ([f"tp {tp}"] if tp else [])
        elif r in stage_of:
            parts = [f"stage {stage_of[r]}"]
        out[r] = f"rank {r}" + (f" ({', '.join(parts)})" if parts else "")
    return out


__all__ = ["EVENT_SCHEMA", "rank_events", "flows", "clock_skew", "shift", "lanes",
           "process_names"]
