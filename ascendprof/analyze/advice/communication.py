"""Communication advice: how the collectives and p2p ops move their data.

Rules: small transfers (``communication.small_packets``), SDMA transfers whose size is not
512-byte aligned (``communication.byte_alignment``), SDMA bandwidth lost while MatMul runs
alongside (``communication.bandwidth_contention``) and RDMA transfers long enough to mean
retransmission (``communication.retransmission``). Slow ranks and slow links are verdicts
(verdicts.json), not advice.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

import pyarrow as pa

from ascendprof.analyze import intervals as I
from ascendprof.analyze.advice.base import (Rule, Skip, finding, ms, severity_by_share, text_mask,
                                            us)
from ascendprof.model import schemas as S

#: the transports whose COMM_BANDWIDTH rows a rule reads (each rule keeps only rows of these of
#: a positive size before anything else)
READ_TRANSPORTS = ("SDMA", "RDMA")


def bandwidth_rows(t: pa.Table, first: bool) -> np.ndarray:
    """Of rows ``t`` of COMM_BANDWIDTH (a row group of a large rank's table, ``first`` when it
    is the table's first), those the rules of this module can read: an SDMA or RDMA transfer
    (those exact names) of a positive size; and the table's first row, so that a rank has the
    table exactly when it has any row (Context.has). Every rule filters on these first, so
    they find the same on these rows as on all of them (a 1 GB communication.json: ~1 in 5
    of its ~5 M bandwidth rows)."""
    import pyarrow.compute as pc

    tr = t["transport"]
    if pa.types.is_dictionary(tr.type):
        tr = tr.cast(tr.type.value_type)
    keep = pc.and_(pc.is_in(tr, value_set=pa.array(READ_TRANSPORTS, tr.type)),
                   pc.greater(t["size_mb"], 0.0))
    keep = np.asarray(pc.fill_null(keep, False).to_numpy(zero_copy_only=False), bool)
    if first and len(keep):
        keep[0] = True
    return keep


# ---------------------------------------------------------------------------- small packets

#: An op moving less than this over SDMA / RDMA is a small transfer (msprof-analyze
#: rules/en/packet.yaml min_sdma_size 16 MB, min_rdma_size 1 MB) ...
SMALL_MB = {"SDMA": 16.0, "RDMA": 1.0}
#: ... and small transfers are a problem above this share of the transport's ops
#: (packet.yaml min_sdma_ratio / min_rdma_ratio 0.2) ...
SMALL_RATIO = 0.2
#: ... when their transit time is at least this share of the step (ascendprof: the peer reports
#: any share, e.g. 0.8 ms of a 810 ms step).
SMALL_MIN_PCT = 1.0


def _small_packets(ctx):
    import pyarrow.compute as pc

    t = ctx.tables[S.COMM_BANDWIDTH]
    # numpy over the columns, no DataFrame: a rank holds a few dozen transfers, where pandas'
    # per-call cost (frames, masks, groupby) was most of this rule's time
    tr = t["transport"]
    if pa.types.is_dictionary(tr.type):
        tr = tr.cast(tr.type.value_type)
    size = np.asarray(t["size_mb"].to_numpy(), np.float64)  # null: NaN, never > 0
    pos = size > 0
    is_small_tr = {k: pc.fill_null(pc.equal(tr, k), False).to_numpy(zero_copy_only=False)
                   for k in SMALL_MB}
    # the sums' type as pandas had it: float when a transit time of these transfers is null
    has_null = bool(t["transit_ns"].null_count) and not pc.all(pc.is_valid(
        t["transit_ns"].filter(pa.array(pos & (is_small_tr["SDMA"] | is_small_tr["RDMA"]))))
    ).as_py()
    out = []
    for transport, limit in SMALL_MB.items():
        b = pos & is_small_tr[transport]
        n = int(b.sum())
        if not n:
            continue
        idx = np.flatnonzero(b & (size < limit))
        ratio = len(idx) / n
        if ratio <= SMALL_RATIO:
            continue
        transit = t["transit_ns"].take(pa.array(idx))
        valid = pc.is_valid(transit).to_numpy(zero_copy_only=False)
        transit = np.asarray(pc.fill_null(transit, 0).to_numpy(zero_copy_only=False), np.int64)
        ns = ctx.per_step(int(transit.sum()))
        share = ctx.share(ns)
        if share is None or share < SMALL_MIN_PCT:
            continue
        # per group (null groups left out) the count of known transit times and their sum,
        # slowest first; ties keep the groups' sorted order, as pandas' descending sort does
        count: dict = {}
        total: dict = {}
        for g, v, ok in zip(t["group"].take(pa.array(idx)).to_pylist(), transit.tolist(),
                            valid.tolist()):
            if g is None:
                continue
            count[g] = count.get(g, 0) + ok
            total[g] = total.get(g, 0) + v
        names = sorted(total)
        sums = np.array([total[g] for g in names],
                        np.float64 if has_null else np.int64)
        order = np.arange(len(names))[::-1][sums[::-1].argsort(kind="quicksort")][::-1]
        groups = [{"group": names[i], "ops": count[names[i]],
                   "transit_ms_per_step": ms(ctx.per_step(sums[i]))} for i in order[:5]]
        out.append(finding(
            RULES[0], [ctx.rank], key=f"{RULES[0].id}:{transport}",
            severity=severity_by_share(share, SMALL_MIN_PCT, 10.0),
            message=(f"{len(idx)} of {n} {transport} transfers ({ratio:.0%}) move less "
                     f"than {limit:g} MB; their transit time is {ms(ns):.2f} ms per step "
                     f"({share:.1f}% of the step)."),
            advice=["In data parallelism: larger batches or more gradient accumulation steps, "
                    "and larger gradient buckets (DDP bucket_cap_mb), so each collective moves "
                    "more data.",
                    "With ZeRO-3, consider ZeRO-2/ZeRO-1 if memory allows.",
                    "Use fused optimizers / fused operators that issue fewer collectives."],
            evidence={"transport": transport, "ops": n, "small_ops": len(idx),
                      "small_ratio": round(ratio, 4), "small_transit_ms_per_step": ms(ns),
                      "small_mb_median": round(float(np.median(size[idx])), 3),
                      "groups": groups},
            impact_ns=ns, step_ns=ctx.step_ns))
    return out or None


# ---------------------------------------------------------------------------- byte alignment

#: SDMA tasks larger than this whose size is not a multiple of it are unaligned
#: (msprof-analyze byte_alignment_checker.py _BASE_SIZE / rules/en/byte_alignment.yaml
#: min_size 512 bytes; on-chip copies are not judged).
ALIGN_BYTES = 512
#: Severity bands on the unaligned share of the judged SDMA task time (the peer's priority:
#: < 0.2 low, >= 0.7 high).
ALIGN_WARNING, ALIGN_CRITICAL = 0.2, 0.7


def _byte_alignment(ctx):
    # numpy columns of the pandas frame (the same values, types and row order as its filters
    # and groupby by op name gave; nan-skipping sums as pandas')
    h = ctx.df(S.HCCL_TASKS)
    size = h["size_bytes"].to_numpy()
    sel = ((h["transport"].to_numpy() == "SDMA") & (h["link_type"].to_numpy() != "ON_CHIP")
           & (size > ALIGN_BYTES))
    if not sel.any():
        return None
    size, dur = size[sel], h["dur_ns"].to_numpy()[sel]
    unaligned = size % ALIGN_BYTES != 0
    n_bad = int(unaligned.sum())
    if not n_bad:
        return None
    judged_ns, bad_ns = np.nansum(dur), np.nansum(dur[unaligned])
    ratio = float(bad_ns / judged_ns) if judged_ns else 0.0
    ops = []
    codes, names = pd.factorize(h["op_name"].fillna("?").to_numpy()[sel], sort=True)
    for gi, name in enumerate(names):
        rows = codes == gi
        b = rows & unaligned
        if not b.any():
            continue
        d, total = np.nansum(dur[rows]), np.nansum(size[rows])
        ops.append({"op_name": name, "total_size_bytes": int(total),
                    "duration_us": us(d), "unaligned_duration_us": us(np.nansum(dur[b])),
                    "unaligned_tasks": int(b.sum()),
                    "example_size_bytes": int(size[b][0]),
                    "bandwidth_gbps": round(total / d, 4) if d else None})
    ops.sort(key=lambda o: -o["unaligned_duration_us"])
    ns = ctx.per_step(bad_ns)
    sev = "critical" if ratio >= ALIGN_CRITICAL else "warning" if ratio >= ALIGN_WARNING \
        else "info"
    return finding(
        RULES[1], [ctx.rank], severity=sev,
        message=(f"{len(ops)} communication op(s) move SDMA data in pieces that are not a "
                 f"multiple of {ALIGN_BYTES} bytes ({n_bad} task(s), {ratio:.0%} of the "
                 f"judged SDMA task time; e.g. {ops[0]['op_name']}, "
                 f"{ops[0]['example_size_bytes']} bytes)."),
        advice=["Pad the tensors the collective moves (gradient buckets, parameter shards) so "
                "their size in bytes is a multiple of 512 (e.g. round element counts up to a "
                "multiple of 256 for bf16/fp16, 128 for fp32).",
                "For framework-made buckets, choose bucket sizes that are multiples of 512 "
                "bytes; ask the HCCL team if the sizes come from the library."],
        evidence={"unaligned_tasks": n_bad, "judged_tasks": int(sel.sum()),
                  "unaligned_time_ratio": round(ratio, 4), "ops": ops[:10]},
        impact_ns=ns, step_ns=ctx.step_ns)


# ----------------------------------------------------------------------- bandwidth contention

#: SDMA bandwidth below threshold x baseline while a MatMul runs alongside means contention
#: (msprof-analyze rules/en/bandwidth_contention.yaml: sdma_baseline 18 GB/s, threshold 0.8).
CONTENTION_BASELINE_GBPS, CONTENTION_FRACTION = 18.0, 0.8
#: Transfers below this size are latency-bound: their bandwidth says nothing (ascendprof, the
#: same floor as the slow-link verdict).
CONTENTION_MIN_MB = 1.0
#: Report when the slow overlapped ops hold this share of the step (ascendprof).
CONTENTION_MIN_PCT = 1.0


def _contention(ctx):
    import pyarrow.compute as pc

    t = ctx.tables[S.COMM_BANDWIDTH]
    limit = CONTENTION_BASELINE_GBPS * CONTENTION_FRACTION
    t = t.filter(pc.and_(pc.equal(t["transport"], "SDMA"),
                         pc.greater_equal(t["size_mb"], CONTENTION_MIN_MB)))
    if t.num_rows == 0 or not pc.any(pc.less(t["bandwidth_gbps"], limit)).as_py():
        return None  # no slow transfer at all: nothing can be contention
    sd = t.select(["step_key", "op_name", "group", "size_mb", "bandwidth_gbps"]).to_pandas()

    a = ctx.karr()
    matmul = lambda x: pc.match_substring(x, "matmul", ignore_case=True)  # noqa: E731
    mm = text_mask(a["codes"]["name"], matmul) | text_mask(a["codes"]["op_type"], matmul)
    if not mm.any():
        raise Skip("no MatMul kernels")
    ops = ctx.df(S.COMM_OPS)
    # pandas' inner merge of ops with the filtered bandwidth rows on (step_key, op_name,
    # group), as row numbers: each op in order with its matching rows in theirs (a missing key
    # matches a missing key, as in pandas), then its dropna of the ops without a time
    keys = ("step_key", "op_name", "group")
    na = lambda v: None if v is None or v != v else v  # noqa: E731
    match: dict = {}
    for j, k in enumerate(zip(*(sd[c].tolist() for c in keys))):
        match.setdefault(tuple(map(na, k)), []).append(j)
    start, elapse = ops["start_ns"].to_numpy(), ops["elapse_ns"].to_numpy()
    timed = ~(pd.isna(start) | pd.isna(elapse))
    li, ri = [], []
    for i, k in enumerate(zip(*(ops[c].tolist() for c in keys))):
        for j in match.get(tuple(map(na, k)), ()):
            if timed[i]:
                li.append(i)
                ri.append(j)
    if not li:
        return None
    li, ri = np.array(li, np.int64), np.array(ri, np.int64)
    start, elapse = start[li], elapse[li]
    bw = sd["bandwidth_gbps"].to_numpy()[ri]
    busy = I.union(I.from_durations(a["start"][mm], a["dur"][mm].astype(np.int64)))
    over = I.length_in_windows(busy, start, start + elapse)
    sel = (over > 0) & (bw < limit)
    if not sel.any():
        return None
    ns = ctx.per_step(elapse[sel].sum())
    share = ctx.share(ns)
    if share is None or share < CONTENTION_MIN_PCT:
        return None
    slow_bw, alone = pd.Series(bw[sel]), pd.Series(bw[over == 0])
    n_slow = int(sel.sum())
    names = ops["op_name"].to_numpy()[li]
    size = sd["size_mb"].to_numpy()[ri]
    idx = np.flatnonzero(sel)
    top = idx[bw[idx].argsort(kind="quicksort")][:10]  # sort_values("bandwidth_gbps").head(10)
    rows = [{"op_name": n, "elapse_ms": ms(e), "size_mb": round(z, 3),
             "bandwidth_gbps": round(b, 3), "matmul_overlap_ms": ms(v)}
            for n, e, z, b, v in zip(names[top].tolist(), elapse[top].tolist(),
                                     size[top].tolist(), bw[top].tolist(),
                                     over[top].tolist())]
    return finding(
        RULES[2], [ctx.rank], severity=severity_by_share(share, CONTENTION_MIN_PCT, 10.0),
        message=(f"{n_slow} SDMA transfer(s) of {CONTENTION_MIN_MB:g} MB or more run at "
                 f"under {limit:.1f} GB/s while MatMul kernels run alongside (median "
                 f"{slow_bw.median():.1f} GB/s"
                 + (f" vs {alone.median():.1f} GB/s for transfers with no MatMul alongside"
                    if len(alone) else "")
                 + f"); they take {ms(ns):.1f} ms per step."),
        advice=["Compare a run with the communication/computation overlap turned off (or "
                "differently scheduled) to see whether the overlap gains more than the "
                "bandwidth it costs.",
                "Schedule the bandwidth-heavy collectives next to vector rather than MatMul "
                "work, or split them so they meet fewer MatMuls."],
        evidence={"threshold_gbps": limit, "slow_ops_count": n_slow, "slow_ops": rows,
                  "median_gbps_overlapped": round(float(slow_bw.median()), 3),
                  "median_gbps_alone": None if alone.empty else round(float(alone.median()), 3)},
        impact_ns=ns, step_ns=ctx.step_ns)


# -------------------------------------------------------------------------- retransmission

#: A single RDMA transfer longer than this suggests retransmission (msprof-analyze
#: rules/en/rdma_analysis.yaml min_retransmission_time 4000 ms).
RETRANSMISSION_MS = 4000.0


def _retransmission(ctx):
    import pyarrow.compute as pc

    t = ctx.tables[S.COMM_BANDWIDTH]
    t = t.filter(pc.and_(pc.and_(pc.equal(t["transport"], "RDMA"), pc.greater(t["size_mb"], 0)),
                         pc.greater_equal(t["transit_ns"], int(RETRANSMISSION_MS * 1e6))))
    if t.num_rows == 0:
        return None
    r = t.to_pandas()
    ops = ctx.df(S.COMM_OPS)
    el = ops.set_index(["step_key", "op_name", "group"])["elapse_ns"] if len(ops) else None
    rows = []
    for x in r.itertuples():
        e = el.get((x.step_key, x.op_name, x.group)) if el is not None else None
        rows.append({"op_name": x.op_name, "group": x.group, "step": x.step_key,
                     "rdma_transit_ms": ms(x.transit_ns), "rdma_mb": round(x.size_mb, 3),
                     "elapse_ms": None if e is None or pd.isna(e) else ms(e)})
    ns = ctx.per_step(r["transit_ns"].sum())
    return finding(
        RULES[3], [ctx.rank], severity="critical",
        message=(f"{len(r)} RDMA transfer(s) took {RETRANSMISSION_MS / 1000:g} s or more "
                 f"(longest {ms(r['transit_ns'].max()) / 1000:.1f} s): likely retransmission."),
        advice=["Check the RoCE network: switch and NIC configuration (PFC/ECN), link errors "
                "(hccn_tool -i <dev> -stat), and that HCCL_RDMA_TC / HCCL_RDMA_SL match the "
                "switch's priority settings."],
        evidence={"ops": rows[:10]}, impact_ns=ns, step_ns=ctx.step_ns)


RULES = [
    Rule("communication.small_packets", "communication", "Small communication transfers",
         needs=((S.COMM_BANDWIDTH,),),
         threshold={"sdma_small_mb": SMALL_MB["SDMA"], "rdma_small_mb": SMALL_MB["RDMA"],
                    "small_op_ratio": SMALL_RATIO, "min_share_of_step_pct": SMALL_MIN_PCT},
         source="sizes and ratio: msprof-analyze rules/en/packet.yaml; share floor: ascendprof",
         check=_small_packets),
    Rule("communication.byte_alignment", "communication", "SDMA transfers not 512-byte aligned",
         needs=((S.HCCL_TASKS,),),
         threshold={"alignment_bytes": ALIGN_BYTES, "warning_ratio": ALIGN_WARNING,
                    "critical_ratio": ALIGN_CRITICAL},
         source="msprof-analyze byte_alignment_checker.py and rules/en/byte_alignment.yaml",
         check=_byte_alignment),
    Rule("communication.bandwidth_contention", "communication",
         "SDMA bandwidth lost to concurrent MatMul",
         needs=((S.COMM_OPS,), (S.COMM_BANDWIDTH,), (S.KERNELS,)),
         threshold={"bandwidth_gbps": CONTENTION_BASELINE_GBPS * CONTENTION_FRACTION,
                    "min_transfer_mb": CONTENTION_MIN_MB,
                    "min_share_of_step_pct": CONTENTION_MIN_PCT},
         source="bandwidth: msprof-analyze rules/en/bandwidth_contention.yaml (0.8 x 18 GB/s); "
                "size and share floors: ascendprof",
         check=_contention),
    Rule("communication.retransmission", "communication", "RDMA retransmission",
         needs=((S.COMM_BANDWIDTH,),),
         threshold={"rdma_transit_ms": RETRANSMISSION_MS},
         source="msprof-analyze rules/en/rdma_analysis.yaml min_retransmission_time",
         check=_retransmission),
]
