"""One op's record of cluster_communication.json (OPINFO, spec §A.5): its field names, the
ratios msprof-analyze computes, and OPINFOs built from COMM_* table rows when the reader kept
no profiler text (db, PROF_ and raw inputs)."""

from __future__ import annotations

import orjson
import pyarrow as pa

EPS = 1e-15
TIME_INFO = "Communication Time Info"
BANDWIDTH_INFO = "Communication Bandwidth Info"
TOTAL_OP_INFO = "Total Op Info"
TIME_FIELDS = (("Elapse Time(ms)", "elapse_ns"), ("Transit Time(ms)", "transit_ns"),
                ("Wait Time(ms)", "wait_ns"), ("Synchronization Time(ms)", "sync_ns"),
                ("Idle Time(ms)", "idle_ns"))


def ratio(dividend: float, divisor: float) -> float:
    """dividend/divisor rounded to 4 decimals, 0 when the divisor is (almost) 0."""
    if divisor is None or abs(divisor) < EPS:
        return 0
    return round((dividend or 0) / divisor, 4)


def to_ms(ns):
    return None if ns is None else ns / 1e6


def _bandwidth_entry(size, time_ms, bandwidth, large_packet_ratio, dist: dict) -> dict:
    """One transport of an OPINFO's 'Communication Bandwidth Info' (sizes MB, times ms)."""
    entry = {"Transit Size(MB)": size or 0, "Transit Time(ms)": time_ms or 0,
             "Bandwidth(GB/s)": (bandwidth if bandwidth is not None
                                 else ratio(size or 0, time_ms or 0))}
    if large_packet_ratio is not None:
        entry["Large Packet Ratio"] = large_packet_ratio
    entry["Size Distribution"] = dist
    return entry


def time_info(start_ns, times_ms, wait_ratio, sync_ratio) -> dict:
    """An OPINFO's 'Communication Time Info': ``times_ms`` are the five (ms) fields in
    :data:`TIME_FIELDS` order (None when missing); ratios recomputed when missing."""
    t = {}
    if start_ns is not None:
        t["Start Timestamp(us)"] = start_ns / 1000  # exact int division, then one rounding
    for (label, _), v in zip(TIME_FIELDS, times_ms):
        if v is not None:
            t[label] = v
    _, transit, wait, sync, _ = (v or 0 for v in times_ms)
    t["Wait Time Ratio"] = wait_ratio if wait_ratio is not None else ratio(wait, wait + transit)
    t["Synchronization Time Ratio"] = (sync_ratio if sync_ratio is not None
                                       else ratio(sync, sync + transit))
    return t


def _columns(table: pa.Table | None, names) -> dict[str, list]:
    if table is None or table.num_rows == 0:
        return {}
    return {n: (table.column(n).to_pylist() if n in table.column_names else [None] * table.num_rows)
            for n in names}


_OP_COLS = ("rank", "step_key", "kind", "op_name", "group", "start_ns", "elapse_ns", "transit_ns",
            "wait_ns", "sync_ns", "idle_ns", "wait_ratio", "sync_ratio")
_BW_COLS = ("rank", "step_key", "kind", "op_name", "group", "transport", "size_mb", "transit_ns",
            "bandwidth_gbps", "large_packet_ratio")
_DIST_COLS = ("rank", "step_key", "kind", "op_name", "group", "transport", "packet_size_mb",
              "count", "dur_ns")


#: what identifies an op (one OPINFO) in the COMM_* tables
OP_KEY = ("rank", "step_key", "kind", "op_name", "group")


def opinfo_texts(ops: pa.Table, bw: pa.Table | None, dist: pa.Table | None) -> list[bytes]:
    """The OPINFO JSON of every row of ``ops``: the profiler's own text when the reader kept it,
    else built from the COMM_* rows (missing ratios and bandwidths recomputed, spec §7.2)."""
    n = ops.num_rows
    raw = (ops.column("opinfo_json").cast(pa.binary()).to_pylist()
           if "opinfo_json" in ops.column_names else [None] * n)
    missing = [i for i, v in enumerate(raw) if v is None]
    if not missing:
        return raw
    cols = _columns(ops.take(missing), _OP_COLS)
    bandwidth = _bandwidth_infos(bw, dist)
    times = list(zip(*(to_ms_list(cols[col]) for _, col in TIME_FIELDS)))
    for j, i in enumerate(missing):
        k = tuple(cols[c][j] for c in OP_KEY)
        raw[i] = orjson.dumps({
            TIME_INFO: time_info(cols["start_ns"][j], times[j], cols["wait_ratio"][j],
                                  cols["sync_ratio"][j]),
            BANDWIDTH_INFO: bandwidth.get(k) or {}})
    return raw


def to_ms_list(ns: list) -> list:
    return [None if v is None else v / 1e6 for v in ns]


def _bandwidth_infos(comm_bandwidth: pa.Table | None, comm_size_dist: pa.Table | None
                     ) -> dict[tuple, dict]:
    """(rank, step key, kind, op name, group) -> the op's 'Communication Bandwidth Info'
    (transport -> entry, in row order; a later row of the same transport replaces the value)."""
    dist: dict[tuple, dict[str, dict]] = {}
    d = _columns(comm_size_dist, _DIST_COLS)
    if d:
        for k, transport, size, count, dur in zip(
                zip(d["rank"], d["step_key"], d["kind"], d["op_name"], d["group"]),
                d["transport"], d["packet_size_mb"], d["count"], to_ms_list(d["dur_ns"])):
            by_transport = dist.get(k)
            if by_transport is None:
                by_transport = dist[k] = {}
            sizes = by_transport.get(transport)
            if sizes is None:
                sizes = by_transport[transport] = {}
            sizes[size] = [count or 0, dur or 0]
    out: dict[tuple, dict] = {}
    b = _columns(comm_bandwidth, _BW_COLS)
    if not b:
        return out
    for k, transport, size, time_ms, bandwidth, lpr in zip(
            zip(b["rank"], b["step_key"], b["kind"], b["op_name"], b["group"]),
            b["transport"], b["size_mb"], to_ms_list(b["transit_ns"]), b["bandwidth_gbps"],
            b["large_packet_ratio"]):
        info = out.get(k)
        if info is None:
            info = out[k] = {}
        info[transport] = _bandwidth_entry(size, time_ms, bandwidth, lpr,
                                           (dist.get(k) or {}).get(transport, {}))
    return out
