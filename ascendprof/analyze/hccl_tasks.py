"""Communication tables from HCCL small tasks (spec §7.2, §7.3).

The profiler's communication.json / communication_matrix.json are derived from the HCCL small
tasks of each communication big op (Memcpy, Reduce_Inline, Notify_Wait, Notify_Record, RDMASend
...). Any reader that has those small tasks — raw PROF_ data (hccl_info + device logs, §D.2), or
the db's COMMUNICATION_TASK_INFO + TASK (§B.1) — can turn them into the same COMM_* tables the
text readers take from the JSON files. This module holds that algorithm and nothing else: a
small-task table in, COMM_OPS / COMM_BANDWIDTH / COMM_SIZE_DIST / COMM_LINKS out.

Small-task table (pandas DataFrame or pyarrow Table), one row per task of one rank:

====================  =========================================================================
``op_name``           big op name (``hcom_allReduce__210_0_1``)
``group``             communication group as the profiler keys it (the group-name hash, decimal)
``start_ns``          task start, local wall clock ns; ``dur_ns`` its duration in ns
``plane_id``          HCCL plane (stream) of the task
``is_master``         1 for tasks of the HCCL master thread (§D.2 HCCL API type ``master``)
``task_name``         small task name: ``Memcpy``, ``Reduce_Inline``, ``Notify_Wait`` ...
``transport``         ``SDMA`` / ``RDMA`` / ``LOCAL``; ``link_type`` ``ON_CHIP`` / ``HCCS`` /
                      ``PCIE`` / ``ROCE`` / ``SIO`` / ``HCCS_SW`` ...; ``rdma_type``
                      (``RDMA_SEND_PAYLOAD`` ...) or null
``size_bytes``        bytes moved by the task
``local_rank``        group-local rank of this device; ``remote_rank`` of the peer
                      (0xFFFFFFFF = none: a local copy)
optional              ``op_start_ns`` / ``op_end_ns`` (the big op's window, for elapse="op"),
                      ``step`` / ``step_key`` (default null / ``"step"``, the flat CANN layout)
====================  =========================================================================

Op instances are keyed by (op_name, group, op_start_ns when given). Within an op, tasks are taken
per plane in start-time order (stable: equal starts keep the input order).

Where the profiler's code and the spec text differ, the code wins and it is said here:
- Start Timestamp is the earliest task of the op over all planes (CANN ``parse_ops`` takes
  ``min(events)`` over all events, not only the master plane's).
- Elapse: the spec (and CANN ≤ 8.0's ``op_time_parser``) spans the master plane's tasks
  (``elapse="master"``, the default). The CANN analyzer that wrote the public torch_npu db exports
  uses the whole big op's window instead (``elapse="op"``: ``op_end_ns - op_start_ns`` when given,
  else the span of all the op's tasks); transit / wait / synchronization are the same in both.
"""

from __future__ import annotations

from collections import defaultdict

import pandas as pd
import pyarrow as pa

from ascendprof.model import schemas as S
from ascendprof.model.tasks import op_kind

NS_PER_MS = 1_000_000
BYTES_PER_MB = 1_000_000
#: trailing tasks after an RDMA payload run: send/receive ops (no barrier) and the others (§7.2)
RDMA_NO_BARRIER_TASK_NUM, RDMA_WITH_BARRIER_TASK_NUM = 3, 5
#: large-packet thresholds in MB per transport key; others (LOCAL, SDMA) use 0 (§7.2, §7.3)
LARGE_PACKET_MB = {"RDMA": 0.5, "HCCS": 32, "PCIE": 32, "SIO": 32}
#: transport keys of "Communication Bandwidth Info", in the profiler's order
BANDWIDTH_TYPES = ("RDMA", "HCCS", "PCIE", "SDMA", "SIO")
SDMA_TRANSIT_TASKS = ("Memcpy", "Reduce_Inline")
NOTIFY_WAIT = "Notify_Wait"
RDMA_SEND_PAYLOAD = "RDMA_SEND_PAYLOAD"
INVALID_RANK = 0xFFFFFFFF
FLAT_STEP_KEY = "step"

REQUIRED = ("op_name", "group", "start_ns", "dur_ns", "plane_id", "is_master", "task_name",
            "transport", "link_type", "rdma_type", "size_bytes", "local_rank", "remote_rank")


# ----------------------------------------------------------------------------- task predicates

def _is_sdma_transit(t: dict) -> bool:
    """Memcpy / Reduce_Inline over SDMA leaving the chip (a local ON_CHIP copy is no transit)."""
    return (t["task_name"] in SDMA_TRANSIT_TASKS and t["transport"] == "SDMA"
            and t["link_type"] != "ON_CHIP")


def _rdma_tail(op_name: str) -> int:
    """N of §7.2: 3 trailing tasks for send/receive ops, 5 for the others."""
    low = op_name.lower()
    return RDMA_NO_BARRIER_TASK_NUM if ("send" in low or "receive" in low) else \
        RDMA_WITH_BARRIER_TASK_NUM


def _payload_run(tasks: list[dict], i: int, tail: int):
    """(p, size_mb, time_ns) of the RDMA_SEND_PAYLOAD run starting at i, time = end of task
    i+p+tail-2 minus start of task i; size_mb None when the trailing tasks are missing."""
    p = 0
    while i + p < len(tasks) and tasks[i + p]["rdma_type"] == RDMA_SEND_PAYLOAD:
        p += 1
    last = i + p + tail - 2
    if last >= len(tasks):
        return p, None, None
    size_mb = sum(tasks[k]["size_bytes"] for k in range(i, i + p)) / BYTES_PER_MB
    end = tasks[last]["start_ns"] + tasks[last]["dur_ns"]
    return p, size_mb, end - tasks[i]["start_ns"]


def _div4(a: float, b: float) -> float:
    return round(a / b, 4) if b else 0.0


# ----------------------------------------------------------------------------- per op

def op_time_info(tasks: list[dict], op_name: str, elapse: str = "master",
                 op_window: tuple[int, int] | None = None) -> dict:
    """'Communication Time Info' of one op instance (§7.2) from its tasks (dicts with the
    small-task columns, all planes). Returns ns ints ``start_ns, elapse_ns, transit_ns,
    wait_ns, sync_ns, idle_ns`` and ``wait_ratio`` / ``sync_ratio`` (4 dp, 0 when the
    denominator is 0). The master plane is the plane of the first task (in time order) with
    is_master == 1; without one, every time field but start_ns is None."""
    ordered = sorted(tasks, key=lambda t: t["start_ns"])
    start = op_window[0] if (elapse == "op" and op_window) else \
        min(t["start_ns"] for t in ordered)
    out = {"start_ns": start, "elapse_ns": None, "transit_ns": None, "wait_ns": None,
           "sync_ns": None, "idle_ns": None, "wait_ratio": None, "sync_ratio": None}
    plane = next((t["plane_id"] for t in ordered if t["is_master"] == 1), None)
    if plane is None:
        return out
    master = [t for t in ordered if t["plane_id"] == plane]
    tail = _rdma_tail(op_name)
    transit = wait = sync = 0
    before_transit = True
    i = 0
    while i < len(master):
        t = master[i]
        if _is_sdma_transit(t):
            transit += t["dur_ns"]
            before_transit = False
        if t["rdma_type"] == RDMA_SEND_PAYLOAD:
            p, size_mb, time_ns = _payload_run(master, i, tail)
            if size_mb is None:
                i += p
                continue
            transit += time_ns
            before_transit = False
            i += tail + p - 1
            continue
        if t["task_name"] == NOTIFY_WAIT:
            wait += t["dur_ns"]
            if before_transit:
                sync += t["dur_ns"]
        i += 1
    if elapse == "op":
        lo, hi = op_window if op_window else (
            min(t["start_ns"] for t in ordered),
            max(t["start_ns"] + t["dur_ns"] for t in ordered))
        elapsed = hi - lo
    else:
        elapsed = max(t["start_ns"] + t["dur_ns"] for t in master) - \
            min(t["start_ns"] for t in master)
    out.update(elapse_ns=elapsed, transit_ns=transit, wait_ns=wait, sync_ns=sync,
               idle_ns=elapsed - transit - wait, wait_ratio=_div4(wait, wait + transit),
               sync_ratio=_div4(sync, sync + transit))
    return out


def _bandwidth_key(link_type: str) -> str:
    """Bandwidth Info key of an SDMA transit task: HCCS_SW counts as HCCS; PCIE/HCCS/SIO as is;
    anything else (RESERVED, invalid) as SDMA (§7.2)."""
    if link_type == "HCCS_SW":
        return "HCCS"
    return link_type if link_type in ("PCIE", "HCCS", "SIO") else "SDMA"


def _planes(tasks: list[dict]) -> list[list[dict]]:
    """Tasks split per plane (planes in order of first appearance), each in time order."""
    by_plane: dict = defaultdict(list)
    for t in sorted(tasks, key=lambda t: t["start_ns"]):
        by_plane[t["plane_id"]].append(t)
    return list(by_plane.values())


def op_bandwidth_info(tasks: list[dict], op_name: str) -> dict[str, dict]:
    """'Communication Bandwidth Info' of one op instance over all planes (§7.2).

    Returns ``{transport: {"size_mb", "transit_ns", "bandwidth_gbps", "large_packet_ratio",
    "dist": {packet size MB (float): [count, dur_ns]}}}`` for RDMA, HCCS, PCIE, SDMA, SIO.
    SDMA's size and time include HCCS+PCIE+SIO (its own distribution and large-packet ratio do
    not, as in the profiler); bandwidth = (MB/1000)/(ms/1000), 4 dp, 0 without time."""
    acc = {k: {"size_mb": 0.0, "transit_ns": 0, "dist": defaultdict(lambda: [0, 0])}
           for k in BANDWIDTH_TYPES}

    def add(key: str, size_mb: float, dur_ns: int) -> None:
        a = acc.setdefault(key, {"size_mb": 0.0, "transit_ns": 0,
                                 "dist": defaultdict(lambda: [0, 0])})
        a["size_mb"] += size_mb
        a["transit_ns"] += dur_ns
        a["dist"][size_mb][0] += 1
        a["dist"][size_mb][1] += dur_ns

    tail = _rdma_tail(op_name)
    for plane in _planes(tasks):
        i = 0
        while i < len(plane):
            t = plane[i]
            if _is_sdma_transit(t):
                add(_bandwidth_key(t["link_type"]), t["size_bytes"] / BYTES_PER_MB, t["dur_ns"])
            if t["rdma_type"] == RDMA_SEND_PAYLOAD:
                p, size_mb, time_ns = _payload_run(plane, i, tail)
                if size_mb is None:
                    i += p
                    continue
                add(t["transport"], size_mb, time_ns)
                i += tail + p - 1
                continue
            i += 1
    sdma = acc["SDMA"]
    for k in ("HCCS", "PCIE", "SIO"):
        sdma["size_mb"] += acc[k]["size_mb"]
        sdma["transit_ns"] += acc[k]["transit_ns"]
    for k, a in acc.items():
        ms = a["transit_ns"] / NS_PER_MS
        a["bandwidth_gbps"] = _div4(a["size_mb"] / 1000, ms / 1000)
        packets = sum(c for c, _ in a["dist"].values())
        large = sum(c for size, (c, _) in a["dist"].items()
                    if size > LARGE_PACKET_MB.get(k, 0))
        a["large_packet_ratio"] = _div4(large, packets) if k != "SDMA" else 0.0
        a["dist"] = dict(a["dist"])
    return acc


def _matrix_transport(link_type: str) -> str:
    """Transport Type of an SDMA link in communication_matrix.json (§7.3)."""
    if link_type == "ON_CHIP":
        return "LOCAL"
    return "HCCS" if link_type == "HCCS_SW" else link_type


def op_links(tasks: list[dict], op_name: str) -> dict[tuple[int, int], dict]:
    """Per-link records of one op instance (§7.3): ``{(local, remote): {"transport", "size_mb",
    "transit_ns", "bandwidth_gbps", "large_packet_ratio"}}``. Only tasks with a valid local
    rank and a remote rank count; remote 0xFFFFFFFF means the local rank. Bandwidth = MB/ms
    (4 dp), large packets against the threshold of the link's transport (0 for LOCAL)."""
    links: dict = {}
    tail = _rdma_tail(op_name)

    def add(t, transport: str, mb: float, dur_ns: int) -> None:
        local, remote = int(t["local_rank"]), int(t["remote_rank"])
        rec = links.setdefault((local, local if remote == INVALID_RANK else remote),
                               {"transport": None, "size_mb": 0.0, "transit_ns": 0,
                                "packets": 0, "large": 0})
        rec["transport"] = transport
        rec["size_mb"] += mb
        rec["transit_ns"] += dur_ns
        rec["packets"] += 1
        rec["large"] += mb > LARGE_PACKET_MB.get(transport, 0)

    for plane in _planes(tasks):
        i = 0
        while i < len(plane):
            t = plane[i]
            if (t["local_rank"] is None or t["local_rank"] == INVALID_RANK
                    or t["remote_rank"] is None):
                i += 1
                continue
            if t["transport"] == "SDMA" and t["task_name"] in SDMA_TRANSIT_TASKS:
                add(t, _matrix_transport(t["link_type"]), t["size_bytes"] / BYTES_PER_MB,
                    t["dur_ns"])
            if t["rdma_type"] == RDMA_SEND_PAYLOAD:
                p, size_mb, time_ns = _payload_run(plane, i, tail)
                if size_mb is None:
                    i += p
                    continue
                add(t, t["transport"], size_mb, time_ns)
                i += tail + p - 1
                continue
            i += 1
    out = {}
    for key, r in links.items():
        ms = r["transit_ns"] / NS_PER_MS
        out[key] = {"transport": r["transport"], "size_mb": r["size_mb"],
                    "transit_ns": r["transit_ns"], "bandwidth_gbps": _div4(r["size_mb"], ms),
                    "large_packet_ratio": _div4(r["large"], r["packets"])}
    return out


# ----------------------------------------------------------------------------- tables

def _records(tasks) -> list[dict]:
    df = tasks.to_pandas() if isinstance(tasks, pa.Table) else pd.DataFrame(tasks)
    missing = [c for c in REQUIRED if c not in df.columns]
    if missing:
        raise ValueError(f"small-task table lacks columns {missing}")
    df = df.astype({"start_ns": "int64", "dur_ns": "int64"})
    df["size_bytes"] = df["size_bytes"].fillna(0)
    df["is_master"] = df["is_master"].fillna(0).astype("int64")
    df = df.astype(object).where(df.notna(), None)
    return df.to_dict("records")


def comm_tables(tasks, rank: int, elapse: str = "master") -> dict[str, pa.Table]:
    """COMM_OPS, COMM_BANDWIDTH, COMM_SIZE_DIST and COMM_LINKS of one rank from its HCCL small
    tasks (columns in the module docstring; pandas DataFrame or pyarrow Table).

    One COMM_OPS row per op instance; COMM_BANDWIDTH rows for all five transports (zeros
    included, as communication.json has them); COMM_SIZE_DIST rows per packet size with the key
    written as Python writes the float (``"2.064384"``); COMM_LINKS raw per-op links with
    ``link_key = "<op>@<group>"`` like the flat CANN communication_matrix.json (the cluster
    builder condenses them). ``elapse`` is "master" (spec §7.2) or "op" (see module docstring).
    Raises ValueError when a required column is missing or ``elapse`` is unknown.
    """
    if elapse not in ("master", "op"):
        raise ValueError(f"elapse must be 'master' or 'op', not {elapse!r}")
    recs = _records(tasks)
    ops: dict[tuple, list[dict]] = {}
    for t in recs:
        ops.setdefault((t["op_name"], t["group"], t.get("op_start_ns")), []).append(t)
    cols = {name: {f.name: [] for f in S.SCHEMAS[name]}
            for name in (S.COMM_OPS, S.COMM_BANDWIDTH, S.COMM_SIZE_DIST, S.COMM_LINKS)}

    def emit(name: str, row: dict) -> None:
        for k, v in cols[name].items():
            v.append(row.get(k))

    for (op_name, group, _), op_tasks in sorted(ops.items(),
                                               key=lambda kv: min(t["start_ns"] for t in kv[1])):
        first = op_tasks[0]
        step_key = first.get("step_key") or FLAT_STEP_KEY
        common = {"rank": rank, "step": first.get("step"), "step_key": step_key,
                  "kind": op_kind(op_name), "op_name": op_name, "group": group}
        window = None
        if first.get("op_start_ns") is not None and first.get("op_end_ns") is not None:
            window = (int(first["op_start_ns"]), int(first["op_end_ns"]))
        emit(S.COMM_OPS, {**common, **op_time_info(op_tasks, op_name, elapse, window)})
        for transport, b in op_bandwidth_info(op_tasks, op_name).items():
            emit(S.COMM_BANDWIDTH, {**common, "transport": transport, **b})
            for size_mb, (count, dur) in b["dist"].items():
                emit(S.COMM_SIZE_DIST, {**common, "transport": transport,
                                        "packet_size_mb": repr(float(size_mb)),
                                        "count": count, "dur_ns": dur})
        for (src, dst), ln in op_links(op_tasks, op_name).items():
            emit(S.COMM_LINKS, {**common, "link_key": f"{op_name}@{group}", "src_rank": src,
                                "dst_rank": dst, "transport": ln["transport"],
                                "size_mb": ln["size_mb"], "transit_ns": ln["transit_ns"],
                                "bandwidth_gbps": ln["bandwidth_gbps"],
                                "large_packet_ratio": ln["large_packet_ratio"]})
    return {name: S.from_lists(name, c) for name, c in cols.items()}


__all__ = ["comm_tables", "op_time_info", "op_bandwidth_info", "op_links", "op_kind",
           "REQUIRED"]
