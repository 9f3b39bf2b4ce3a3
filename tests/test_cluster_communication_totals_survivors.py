"""The 'Total Op Info' of cluster_communication.json (analyze/cluster_communication/totals.py)
summed batch by batch, as a rank's worker sums a spilled communication.json's row groups
(fragments.FragmentsBuilder), for the survivors of the module's seed-34 mutation run: the
bandwidth and size sums of a key new to the running sums are kept (every key of the first
batch, and a transport and packet sizes only a later batch brings). Expected values worked out
in the comments from the rows given."""

from __future__ import annotations

import json

import pyarrow as pa

from ascendprof.analyze import cluster_communication as cc
from ascendprof.analyze.cluster_communication.fragments import FragmentsBuilder
from ascendprof.model import schemas as S


def table(name: str, rows: list[dict], **common):
    rows = [{**common, **r} for r in rows]
    return S.from_lists(name, {k: [r.get(k) for r in rows] for k in S.SCHEMAS[name].names})


COMMON = dict(rank=0, step=1, step_key="step1", kind="collective", group="g")


def _batches():
    """Two batches of rank 0's communication.json tables (every op row carries its OPINFO
    text, as the communication.json reader gives them)."""
    ops1 = table(S.COMM_OPS, [dict(op_name="a", elapse_ns=2_000_000, transit_ns=500_000,
                                   wait_ns=0, opinfo_json='{"own":"a"}')], **COMMON)
    bw1 = table(S.COMM_BANDWIDTH, [dict(op_name="a", transport="HCCS", size_mb=1.0,
                                        transit_ns=500_000)], **COMMON)
    d1 = table(S.COMM_SIZE_DIST, [dict(op_name="a", transport="HCCS", packet_size_mb="1",
                                       count=1, dur_ns=500_000)], **COMMON)
    ops2 = table(S.COMM_OPS, [dict(op_name="b", elapse_ns=3_000_000, transit_ns=1_500_000,
                                   wait_ns=0, opinfo_json='{"own":"b"}')], **COMMON)
    bw2 = table(S.COMM_BANDWIDTH, [
        dict(op_name="b", transport="HCCS", size_mb=2.0, transit_ns=1_500_000),
        dict(op_name="b", transport="RDMA", size_mb=4.0, transit_ns=2_000_000)],  # new
        **COMMON)
    d2 = table(S.COMM_SIZE_DIST, [
        dict(op_name="b", transport="HCCS", packet_size_mb="1", count=2, dur_ns=1_500_000),
        dict(op_name="b", transport="HCCS", packet_size_mb="4", count=3, dur_ns=300_000),  # new
        dict(op_name="b", transport="RDMA", packet_size_mb="8", count=1, dur_ns=2_000_000)],
        **COMMON)
    return (ops1, bw1, d1), (ops2, bw2, d2)


def _totals(frags) -> dict:
    ((f,),) = [frags]
    assert (f.rank, f.kind, f.group) == (0, "collective", "g")
    return {json.loads(step): json.loads(total) for step, total in f.totals}


def test_batches_bringing_a_new_transport_and_sizes_sum_to_the_whole():
    first, second = _batches()
    b = FragmentsBuilder()
    b.add(*first)
    b.add(*second)
    got = _totals(b.result())
    # step1: elapse 2 + 3 = 5 ms, transit 0.5 + 1.5 = 2 ms, wait 0; ratios wait 0 / 2 = 0,
    # sync (none) 0 / 2 = 0
    assert got["step1"]["Communication Time Info"] == {
        "Elapse Time(ms)": 5.0, "Transit Time(ms)": 2.0, "Wait Time(ms)": 0.0,
        "Wait Time Ratio": 0, "Synchronization Time Ratio": 0}
    # HCCS: 1 + 2 MB over 0.5 + 1.5 ms = 1.5 GB/s; size "1": 1 + 2 packets, 0.5 + 1.5 ms;
    # size "4" (second batch only): 3 packets, 0.3 ms. RDMA (second batch only): 4 MB over
    # 2 ms = 2 GB/s, size "8": 1 packet, 2 ms
    assert got["step1"]["Communication Bandwidth Info"] == {
        "HCCS": {"Transit Time(ms)": 2.0, "Transit Size(MB)": 3.0,
                 "Size Distribution": {"1": [3, 2.0], "4": [3, 0.3]}, "Bandwidth(GB/s)": 1.5},
        "RDMA": {"Transit Time(ms)": 2.0, "Transit Size(MB)": 4.0,
                 "Size Distribution": {"8": [1, 2.0]}, "Bandwidth(GB/s)": 2.0}}
    # the same totals as rank_fragments of the whole tables at once
    whole = [pa.concat_tables([x, y]) for x, y in zip(first, second)]
    assert _totals(cc.rank_fragments(*whole)) == got
