"""Communication against the hardware: per communication instance its arrival skew, algorithm
and bus bandwidth; per rank and transport the achieved link bandwidth against a reference.

Input: COMM_OPS (communication.json Communication Time Info, db COMMUNICATION_OP) and
COMM_BANDWIDTH (Communication Bandwidth Info per transport; spec §A.5, §B.3).

**Instance** (one op name of one group in one step, as in analyze.late_arrivals): ``n`` = the
ranks that have it; arrival skew = latest start − earliest start; transfer time ``t`` = latest
end − latest start (the part after everyone arrived); bytes sent ``B`` = the largest over the
ranks of the Transit Size over the links between ranks (HCCS, PCIE, SIO, RDMA — SDMA is the sum
of the on-node ones and is not added again). Bus bandwidth = B / t. Algorithm bandwidth = bus
bandwidth / f with the factor of the standard ring algorithms (NCCL tests' PERFORMANCE.md):
allreduce 2(n−1)/n; allgather, reducescatter, alltoall (n−1)/n; broadcast, reduce, send, receive,
batchSendRecv 1 — so the algorithm bandwidth is the message size over ``t`` when the algorithm
moved the standard volume (the export has no message size for text input).

**Links**: per rank and transport, Transit Size / Transit Time summed over the rank's ops (MB/ms
= GB/s, as the profiler computes its Bandwidth(GB/s)), against :data:`LINK_REFERENCE_GBPS`, so a
link that is uniformly slow on every rank is still seen (the slow-link verdict compares links with
each other).
"""

from __future__ import annotations

import pandas as pd
import pyarrow as pa

from ascendprof.model import schemas as S

OPS = "comm_hw_ops"
LINKS = "comm_hw_links"
LINK_TRANSPORTS = ("HCCS", "PCIE", "SIO", "RDMA")

#: reference bandwidth per transport (GB/s, one direction, per link or port), with its source;
#: None where no public figure was found
LINK_REFERENCE_GBPS = {
    "HCCS": (30.0, "Ascend 910: HCCS 240 Gbps per link (Hot Chips 31, 2019; besthub.dev "
                   "'How Huawei Ascend 910 Redefines AI Training Performance')"),
    "PCIE": (31.5, "PCIe 4.0 x16 theoretical 31.5 GB/s, the 910B card-to-host link "
                   "(jishuzhan.net/article/1872432607539499010)"),
    "RDMA": (12.5, "100 GE RoCE per NPU port (Atlas 900: 'HCCS, PCIe 4.0, 100G Ethernet', "
                   "hxnews.com Atlas 900 launch 2019)"),
    "SIO": (None, "no public figure found"),
    "SDMA": (18.0, "msprof-analyze rules bandwidth_contention.yaml sdma_baseline 18 GB/s "
                   "(a practical baseline, not a hardware limit)"),
}

OPS_SCHEMA = pa.schema([
    ("rank", pa.int32()), ("step", pa.int32()), ("group", pa.string()), ("op_name", pa.string()),
    ("start_ns", pa.int64()), ("elapse_ns", pa.int64()), ("sent_mb", pa.float64())])
LINK_SCHEMA = pa.schema([
    ("rank", pa.int32()), ("transport", pa.string()), ("ops", pa.int64()),
    ("size_mb", pa.float64()), ("transit_ns", pa.int64()), ("large_mb", pa.float64())])

INSTANCE_COLUMNS = ["Step", "Group", "Op Name", "Ranks", "Arrival Skew(ms)", "Transfer(ms)",
                    "Sent per Rank(MB)", "Bus Factor", "Bus Bandwidth(GB/s)",
                    "Algorithm Bandwidth(GB/s)"]
LINK_COLUMNS = ["Rank", "Transport", "Ops", "Size(MB)", "Transit(ms)", "Bandwidth(GB/s)",
                "Large Packet Ratio", "Reference(GB/s)", "Share of Reference(%)",
                "Reference Source"]


def bus_factor(op_name: str, n: int) -> float:
    """The ring algorithm's bus-bandwidth factor of an op (module doc) for ``n`` ranks."""
    t = str(op_name).lower()
    if n <= 1:
        return 1.0
    if "allreduce" in t:
        return 2.0 * (n - 1) / n
    if any(k in t for k in ("allgather", "reducescatter", "alltoall")):
        return (n - 1) / n
    return 1.0


def rank_partial(tables: dict, rank: int, meta: dict | None = None) -> dict[str, pa.Table]:
    """{OPS: per communication op its start, elapse and MB sent over the links between ranks;
    LINKS: per transport the rank's total size, transit time and large-packet MB}."""
    ops, bw = tables.get(S.COMM_OPS), tables.get(S.COMM_BANDWIDTH)
    if ops is None or ops.num_rows == 0:
        return {}
    o = ops.select(["step", "group", "op_name", "start_ns", "elapse_ns"]).to_pandas()
    sent = {}
    out = {}
    if bw is not None and bw.num_rows:
        b = bw.select(["step", "group", "op_name", "transport", "size_mb", "transit_ns",
                       "large_packet_ratio"]).to_pandas()
        b["transport"] = b["transport"].fillna("").str.upper()
        ln = b[b["transport"].isin(LINK_TRANSPORTS)]
        sent = ln.groupby(["step", "group", "op_name"], dropna=False)["size_mb"].sum().to_dict()
        rows = []
        for tr, g in b[b["size_mb"].fillna(0) > 0].groupby("transport", sort=True):
            rows.append({"rank": rank, "transport": tr, "ops": len(g),
                         "size_mb": float(g["size_mb"].sum()),
                         "transit_ns": int(g["transit_ns"].fillna(0).sum()),
                         "large_mb": float((g["size_mb"] * g["large_packet_ratio"].fillna(0)).sum())})
        if rows:
            out[LINKS] = pa.Table.from_pylist(rows, schema=LINK_SCHEMA)
    o["sent_mb"] = [sent.get((s, g, n), 0.0) for s, g, n in zip(o["step"], o["group"],
                                                                 o["op_name"])]
    o["rank"] = rank
    o = o[o["start_ns"].notna()]
    out[OPS] = pa.Table.from_pandas(o[[f.name for f in OPS_SCHEMA]], schema=OPS_SCHEMA,
                                    preserve_index=False)
    return out


def build(ops: pa.Table | None, links: pa.Table | None) -> dict[str, pd.DataFrame]:
    """{"collective_bandwidth.csv": per instance of two or more ranks; "link_bandwidth.csv":
    per rank and transport}."""
    out: dict[str, pd.DataFrame] = {}
    if ops is not None and ops.num_rows:
        d = ops.to_pandas()
        d = d[d["elapse_ns"].notna()].copy()
        d["end"] = d["start_ns"] + d["elapse_ns"]
        rows = []
        for (step, grp, name), g in d.groupby(["step", "group", "op_name"], sort=True,
                                              dropna=False):
            n = g["rank"].nunique()
            if n < 2:
                continue
            t = int(g["end"].max() - g["start_ns"].max())
            f = bus_factor(name, n)
            mb = float(g["sent_mb"].max())
            bus = mb / (t / 1e6) if t > 0 and mb > 0 else None  # MB/ms = GB/s
            rows.append([None if pd.isna(step) else int(step), grp, name, n,
                         round((g["start_ns"].max() - g["start_ns"].min()) / 1e6, 3),
                         round(t / 1e6, 3), round(mb, 4), round(f, 4),
                         None if bus is None else round(bus, 3),
                         None if bus is None else round(bus / f, 3)])
        inst = pd.DataFrame(rows, columns=INSTANCE_COLUMNS)
        inst["Step"] = inst["Step"].astype("Int64")
        out["collective_bandwidth.csv"] = inst
    if links is not None and links.num_rows:
        ln = links.to_pandas().groupby(["rank", "transport"], as_index=False).sum()
        rows = []
        for r in ln.itertuples(index=False):
            bw = r.size_mb / (r.transit_ns / 1e6) if r.transit_ns else None
            ref, src = LINK_REFERENCE_GBPS.get(r.transport, (None, "no reference"))
            rows.append([int(r.rank), r.transport, int(r.ops), round(r.size_mb, 4),
                         round(r.transit_ns / 1e6, 3), None if bw is None else round(bw, 3),
                         round(r.large_mb / r.size_mb, 4) if r.size_mb else None, ref,
                         None if bw is None or not ref else round(100 * bw / ref, 2), src])
        out["link_bandwidth.csv"] = pd.DataFrame(rows, columns=LINK_COLUMNS)
    return out
