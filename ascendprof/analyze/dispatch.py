"""Dispatch: how the host fed the device — host API time, task-queue wait, launch delay and the
device idle time attributable to launch, per rank, step and op type.

Input (readers.host_events): LAUNCHES (each device task with the host call that launched it),
TASK_QUEUE (each Enqueue with its Dequeue), KERNELS for the op type of a task (matched on its
start time) and STEPS; tasks go to the step whose window holds their device start, queue entries
by their enqueue time. Definitions and what cannot be seen: docs/analyses.md, "Dispatch".
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from ascendprof.analyze import idle
from ascendprof.analyze import intervals as iv
from ascendprof.model import schemas as S

DISPATCH = "dispatch_ops"
DISPATCH_STEPS = "dispatch_steps"

OPS_SCHEMA = pa.schema([
    ("rank", pa.int32()), ("step", pa.int32()), ("op_type", pa.string()),
    ("launches", pa.int64()), ("host_api_ns", pa.int64()), ("delay_sum_ns", pa.int64()),
    ("delay_p50_ns", pa.int64()), ("delay_max_ns", pa.int64()), ("idle_before_ns", pa.int64()),
    ("source", pa.string())])
STEPS_SCHEMA = pa.schema([
    ("rank", pa.int32()), ("step", pa.int32()), ("launches", pa.int64()),
    ("host_api_ns", pa.int64()), ("delay_mean_ns", pa.int64()), ("delay_p50_ns", pa.int64()),
    ("delay_p95_ns", pa.int64()), ("delay_max_ns", pa.int64()), ("queue_entries", pa.int64()),
    ("queue_wait_mean_ns", pa.int64()), ("queue_wait_max_ns", pa.int64()),
    ("queue_len_max", pa.int64()), ("queue_len_mean", pa.float64()),
    ("enqueue_ns", pa.int64()), ("idle_launch_ns", pa.int64()), ("source", pa.string())])


def _place(ts: np.ndarray, wins: list) -> np.ndarray:
    """Step of each timestamp (-1 outside every window)."""
    out = np.full(len(ts), -1, np.int64)
    for step, lo, hi in wins:
        out[(ts >= lo) & (ts <= hi)] = -2 if step is None else step
    return out


def _values(t: pa.Table, col: str) -> np.ndarray:
    """Column ``col`` of ``t`` as ``t.to_pandas()`` holds it: an integer column with nulls as
    float64 with NaN, texts as objects (None for null)."""
    return t[col].to_numpy(zero_copy_only=False)


def _fill0(v: np.ndarray) -> np.ndarray:
    """pandas' ``fillna(0)`` of a numeric column."""
    return np.where(np.isnan(v), 0.0, v) if v.dtype.kind == "f" else v


def launches_columns(tables: dict) -> dict | None:
    """The LAUNCHES rows with a device and a host start as numpy columns (``dev``, ``host``,
    ``flow``, ``host_dur``, ``host_name``, ``delay`` = dev - host, ``op_type``: KERNELS' type of
    the task starting at the same ns, else the task name, else "(unknown)"), typed as pandas
    types them (an integer column with nulls is float); None when there are none."""
    la = tables.get(S.LAUNCHES)
    if la is None or la.num_rows == 0:
        return None
    dev, host = _values(la, "device_start_ns"), _values(la, "host_start_ns")
    ok = ~(pd.isna(dev) | pd.isna(host))
    d = {"dev": dev[ok], "host": host[ok], "flow": _values(la, "flow_start_ns")[ok],
         "host_dur": _fill0(_values(la, "host_dur_ns")[ok]),
         "host_name": _values(la, "host_name")[ok]}
    d["delay"] = d["dev"] - d["host"]
    k = tables.get(S.KERNELS)
    types = {}
    if k is not None and k.num_rows and len(d["dev"]):
        k = k.select(["start_ns", "op_type"])  # only the launched tasks' starts, of millions
        k = k.filter(pc.is_in(k["start_ns"], value_set=pa.array(
            pd.unique(d["dev"].astype("int64")), pa.int64())))
        kk = k.to_pandas().dropna()
        types = dict(zip(kk["start_ns"].astype("int64"), kk["op_type"]))
    names = [types.get(int(s), n) for s, n in zip(d["dev"].tolist(),
                                                  _values(la, "task_name")[ok].tolist())]
    d["op_type"] = np.array(["(unknown)" if n is None else n for n in names], dtype=object)
    return d


def rank_partial(tables: dict, rank: int, meta: dict | None = None) -> dict[str, pa.Table]:
    """{DISPATCH: per step and op type; DISPATCH_STEPS: per step} when the rank has launch
    links (module doc)."""
    d = launches_columns(tables)
    if d is None or not len(d["dev"]):
        return {}
    wins = idle.step_windows(tables)
    src = ("db connection ids" if (d["host"] == d["flow"]).all()
           and pd.notna(d["host_name"]).all() else "trace_view flows")
    step_of = _place(d["dev"].astype(np.int64), wins)
    inside = step_of != -1
    d = {c: v[inside] for c, v in d.items()}
    step_of = step_of[inside]
    idle_by_task = _idle_before(tables, wins, d)
    idle_ns = np.array([idle_by_task.get(s, 0) for s in d["dev"].astype(np.int64).tolist()],
                       dtype=np.int64)
    # one stable sort by (step, op type) instead of a pandas groupby: the same groups in the
    # same order, each group's rows in their original order
    delay, host_dur = d["delay"], d["host_dur"]
    op_codes, op_names = pd.factorize(d["op_type"], sort=True)
    order = np.lexsort((op_codes, step_of))
    ks, kc = step_of[order], op_codes[order]
    cut = np.flatnonzero((ks[1:] != ks[:-1]) | (kc[1:] != kc[:-1])) + 1
    ops, steps = [], []
    bounds = zip(np.concatenate([[0], cut]).tolist(), np.concatenate([cut, [len(order)]]).tolist())
    for lo_i, hi_i in (bounds if len(order) else ()):  # no launch inside a step: no group
        rows = order[lo_i:hi_i]
        step, dl = int(ks[lo_i]), delay[rows]
        ops.append({"rank": rank, "step": None if step < 0 else step,
                    "op_type": op_names[kc[lo_i]], "launches": len(rows),
                    "host_api_ns": int(host_dur[rows].sum()), "delay_sum_ns": int(dl.sum()),
                    "delay_p50_ns": int(np.median(dl)), "delay_max_ns": int(dl.max()),
                    "idle_before_ns": int(idle_ns[rows].sum()), "source": src})
    q = tables.get(S.TASK_QUEUE)
    qd = ({c: _values(q, c) for c in ("enqueue_ns", "dequeue_ns", "enqueue_dur_ns")}
          if q is not None and q.num_rows else None)
    for step, lo, hi in wins:
        rows = np.flatnonzero(step_of == (-2 if step is None else step))
        if not len(rows):
            continue
        dl = delay[rows]
        row = {"rank": rank, "step": step, "launches": len(rows),
               "host_api_ns": int(host_dur[rows].sum()),
               "delay_mean_ns": int(dl.mean()), "delay_p50_ns": int(np.median(dl)),
               "delay_p95_ns": int(np.percentile(dl, 95)), "delay_max_ns": int(dl.max()),
               "idle_launch_ns": int(idle_ns[rows].sum()), "source": src}
        row.update(_queue(qd, lo, hi))
        steps.append(row)
    return {DISPATCH: pa.Table.from_pylist(ops, schema=OPS_SCHEMA),
            DISPATCH_STEPS: pa.Table.from_pylist(steps, schema=STEPS_SCHEMA)}


def _idle_before(tables: dict, wins: list, d: dict) -> dict[int, int]:
    """{device start of a task: ns of the host-launch-bound gap that ended with it}."""
    busy = idle.busy_intervals(tables)
    dev = d["dev"].astype(np.int64)
    starts = np.sort(dev)
    by_start = dict(zip(dev.tolist(), d["host"].astype(np.int64).tolist()))
    out: dict[int, int] = {}
    for _, lo, hi in wins:
        gaps = iv.difference(iv.make([lo], [hi]), iv.clip(busy, lo, hi))
        for a, b in zip(gaps[0].tolist(), gaps[1].tolist()):
            if b - a < idle.SHORT_GAP_NS:
                continue
            j = int(np.searchsorted(starts, b, side="left"))
            if j < len(starts) and by_start[int(starts[j])] > a:
                out[int(starts[j])] = out.get(int(starts[j]), 0) + (b - a)
    return out


def _queue(qd: dict | None, lo: int, hi: int) -> dict:
    none = {"queue_entries": 0, "queue_wait_mean_ns": None, "queue_wait_max_ns": None,
            "queue_len_max": None, "queue_len_mean": None, "enqueue_ns": None}
    if qd is None:
        return none
    enq, deq = qd["enqueue_ns"], qd["dequeue_ns"]
    m = (enq >= lo) & (enq <= hi) & ~pd.isna(deq)
    if not m.any():
        return none
    enq, deq = enq[m], deq[m]
    wait = deq - enq
    # queue length: +1 at each enqueue, -1 at each dequeue, over [lo, hi]
    ev = np.concatenate([enq, deq])
    step = np.concatenate([np.ones(len(enq), np.int64), -np.ones(len(enq), np.int64)])
    order = np.lexsort((step, ev))  # a dequeue at the same ns before an enqueue
    ev, level = ev[order], np.cumsum(step[order])
    span = np.diff(np.append(ev, max(hi, ev[-1])))
    mean = float((level * span).sum() / span.sum()) if span.sum() else None
    return {"queue_entries": len(enq), "queue_wait_mean_ns": int(wait.mean()),
            "queue_wait_max_ns": int(wait.max()), "queue_len_max": int(level.max()),
            "queue_len_mean": None if mean is None else round(mean, 3),
            "enqueue_ns": int(_fill0(qd["enqueue_dur_ns"][m]).sum())}


def build(ops: pa.Table | None, steps: pa.Table | None) -> dict[str, pd.DataFrame]:
    """{"dispatch.csv": per rank, step and op type, slowest launch first;
    "dispatch_steps.csv": per rank and step} in microseconds; {} without launch links."""
    if ops is None or ops.num_rows == 0:
        return {}
    o = ops.to_pandas()
    us = lambda s: (s / 1e3).round(3)  # noqa: E731
    a = pd.DataFrame({
        "Rank": o["rank"].astype(int), "Step": o["step"].astype("Int64"), "Op Type": o["op_type"],
        "Launches": o["launches"].astype(int), "Host API Total(us)": us(o["host_api_ns"]),
        "Host API Avg(us)": us(o["host_api_ns"] / o["launches"]),
        "Launch Delay Avg(us)": us(o["delay_sum_ns"] / o["launches"]),
        "Launch Delay P50(us)": us(o["delay_p50_ns"]), "Launch Delay Max(us)": us(o["delay_max_ns"]),
        "Idle Before Launch(us)": us(o["idle_before_ns"]), "Source": o["source"]})
    a = a.sort_values(["Rank", "Step", "Idle Before Launch(us)", "Launch Delay Avg(us)"],
                      ascending=[True, True, False, False], kind="stable").reset_index(drop=True)
    out = {"dispatch.csv": a}
    if steps is not None and steps.num_rows:
        s = steps.to_pandas()
        out["dispatch_steps.csv"] = pd.DataFrame({
            "Rank": s["rank"].astype(int), "Step": s["step"].astype("Int64"),
            "Launches": s["launches"].astype(int), "Host API Total(us)": us(s["host_api_ns"]),
            "Launch Delay Avg(us)": us(s["delay_mean_ns"]),
            "Launch Delay P50(us)": us(s["delay_p50_ns"]),
            "Launch Delay P95(us)": us(s["delay_p95_ns"]),
            "Launch Delay Max(us)": us(s["delay_max_ns"]),
            "Queue Entries": s["queue_entries"].astype("Int64"),
            "Queue Wait Avg(us)": us(s["queue_wait_mean_ns"]),
            "Queue Wait Max(us)": us(s["queue_wait_max_ns"]),
            "Queue Length Max": s["queue_len_max"].astype("Int64"),
            "Queue Length Mean": s["queue_len_mean"], "Enqueue Total(us)": us(s["enqueue_ns"]),
            "Idle Before Launch(us)": us(s["idle_launch_ns"]), "Source": s["source"]})
    return out
