"""Communication against the hardware (analyze.comm_hardware): the bus-bandwidth factors by
hand, and collective_bandwidth.csv / link_bandwidth.csv on the shipped Qwen3 sample against its
communication.json read here with the json module."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest

from ascendprof.analyze import comm_hardware as ch
from conftest import QWEN3, analysis_of

LINKS = ("HCCS", "PCIE", "SIO", "RDMA")


def test_bus_factors_by_hand():
    # NCCL tests PERFORMANCE.md: allreduce 2(n-1)/n, allgather / reducescatter / alltoall
    # (n-1)/n, broadcast / reduce / p2p 1
    assert ch.bus_factor("hcom_allReduce__1_1", 8) == 2 * 7 / 8 == 1.75
    assert ch.bus_factor("hcom_allGather__1_1", 4) == 3 / 4
    assert ch.bus_factor("hcom_reduceScatter__1_1", 2) == 1 / 2
    assert ch.bus_factor("hcom_allToAll__1_1", 16) == 15 / 16
    assert ch.bus_factor("hcom_broadcast__1_1", 8) == 1.0
    assert ch.bus_factor("hcom_batchSendRecv__1_1", 2) == 1.0
    for tr in ("HCCS", "PCIE", "RDMA", "SIO"):
        assert ch.LINK_REFERENCE_GBPS[tr][1]  # every transport says where its figure is from


def _ops(rank):
    path = QWEN3 / f"rank_{rank}_ascend_pt" / "ASCEND_PROFILER_OUTPUT" / "communication.json"
    doc = json.loads(path.read_text())
    return {name.split("@")[0]: op for step in doc.values() for kind in step.values()
            for name, op in kind.items() if not name.startswith("Total")}


def test_qwen3_instance_and_links():
    files = analysis_of(QWEN3).csv_files
    inst = files["collective_bandwidth.csv"]
    name = "hcom_allReduce__170_1_1"  # the dp gradient all-reduce of ranks 0 and 2
    a, b = _ops(0)[name], _ops(2)[name]
    start = [Decimal(str(o["Communication Time Info"]["Start Timestamp(us)"])) for o in (a, b)]
    end = [s + Decimal(str(o["Communication Time Info"]["Elapse Time(ms)"])) * 1000
           for s, o in zip(start, (a, b))]
    t_ms = float(max(end) - max(start)) / 1000
    sent = max(sum(o["Communication Bandwidth Info"][tr]["Transit Size(MB)"] for tr in LINKS)
               for o in (a, b))
    row = inst[inst["Op Name"] == name].iloc[0]
    assert row["Ranks"] == 2 and row["Bus Factor"] == 1.0
    assert row["Transfer(ms)"] == pytest.approx(t_ms, abs=0.002)
    assert row["Arrival Skew(ms)"] == pytest.approx(float(max(start) - min(start)) / 1000,
                                                    abs=0.002)
    assert row["Bus Bandwidth(GB/s)"] == pytest.approx(sent / t_ms, rel=1e-3)  # MB/ms = GB/s
    # rank 0's HCCS: all its ops' Transit Size over their Transit Time
    ops0 = [o["Communication Bandwidth Info"]["HCCS"] for o in _ops(0).values()]
    size = sum(o["Transit Size(MB)"] for o in ops0)
    ms = sum(o["Transit Time(ms)"] for o in ops0 if o["Transit Size(MB)"] > 0)
    links = files["link_bandwidth.csv"]
    hccs = links[(links["Rank"] == 0) & (links["Transport"] == "HCCS")].iloc[0]
    assert hccs["Bandwidth(GB/s)"] == pytest.approx(size / ms, rel=1e-3)
    assert hccs["Reference(GB/s)"] == 30.0
    assert hccs["Share of Reference(%)"] == pytest.approx(100 * size / ms / 30.0, rel=1e-3)
