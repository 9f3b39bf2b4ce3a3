"""Communication advice rules on the real exports and on copies of their communication.json,
trace_view.json or kernel_details.csv edited to carry the problem. Expected findings are
computed here from the edited JSON / CSV."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest

from _advice_data import OUT, advise, advise_real, copy_rank, edit_json, found, rows, stage_us, status, \
    trace_events

ALEX = "torch_npu-2rank-levels/text/level2/rank0_ascend_pt"


@pytest.fixture
def qrank(qwen3, tmp_path):
    return copy_rank(qwen3 / "rank_0_ascend_pt", tmp_path / "rank_0_ascend_pt")


def ops_of(comm: dict):
    """(op name, op dict) of every op of communication.json (all steps, both kinds)."""
    for step in comm.values():
        for kind in ("collective", "p2p"):
            for name, op in (step.get(kind) or {}).items():
                if name != "Total Op Info":
                    yield name, op


def comm_json(rank_dir) -> dict:
    return json.loads((rank_dir / OUT / "communication.json").read_text())


# ---------------------------------------------------------------------------- small packets

def _sdma(rank_dir):
    return [(n, op["Communication Bandwidth Info"]["SDMA"]) for n, op in ops_of(comm_json(rank_dir))
            if op["Communication Bandwidth Info"]["SDMA"]["Transit Size(MB)"] > 0]


def test_small_packets_silent_when_they_cost_a_tenth_of_a_percent(qrank):
    sd = _sdma(qrank)
    small = [b for _, b in sd if b["Transit Size(MB)"] < 16]
    assert len(small) / len(sd) > 0.2  # msprof-analyze reports this rank
    share = 100 * sum(b["Transit Time(ms)"] for b in small) * 1000 / stage_us(qrank)
    assert share < 1
    assert status(advise(qrank), "communication.small_packets") == "silent"


def test_small_packets_reported_when_their_transit_time_matters(qrank):
    def shrink(comm):
        for _, op in ops_of(comm):
            op["Communication Bandwidth Info"]["SDMA"]["Transit Size(MB)"] *= 0.01
    edit_json(qrank / OUT / "communication.json", shrink)
    sd = _sdma(qrank)
    t_ms = sum(b["Transit Time(ms)"] for _, b in sd)
    (f,) = found(advise(qrank), "communication.small_packets")
    ev = f["evidence"]
    assert ev["transport"] == "SDMA" and ev["small_ops"] == ev["ops"] == len(sd)
    assert ev["small_transit_ms_per_step"] == pytest.approx(t_ms, abs=0.001)
    assert f["share_of_step_pct"] == pytest.approx(100 * t_ms * 1000 / stage_us(qrank), abs=0.01)


# ---------------------------------------------------------------------------- byte alignment

def _unaligned_by_hand(rank_dir):
    ev = trace_events(rank_dir)
    hccl = {e["pid"] for e in ev if e.get("ph") == "M" and e.get("name") == "process_name"
            and e["args"]["name"] in ("HCCL", "Communication")}
    tasks = [e for e in ev if e.get("ph") == "X" and e.get("pid") in hccl
             and e["name"] in ("Memcpy", "Reduce_Inline")
             and e["args"].get("transport type") == "SDMA"
             and e["args"].get("link type") != "ON_CHIP" and e["args"]["size(Byte)"] > 512]
    return tasks, [t for t in tasks if t["args"]["size(Byte)"] % 512]


def test_byte_alignment_on_the_real_export_matches_the_two_ops_of_the_peer(shared_data):
    rank = shared_data / ALEX
    judged, bad = _unaligned_by_hand(rank)
    assert bad
    (f,) = found(advise_real(rank, "all"), "communication.byte_alignment")
    ev = f["evidence"]
    assert ev["unaligned_tasks"] == len(bad) and ev["judged_tasks"] == len(judged)
    # msprof-analyze advisor all on this export: hcom_allReduce__271_0_1 and __271_3_1
    assert {o["op_name"] for o in ev["ops"]} == {"hcom_allReduce__271_0_1",
                                                  "hcom_allReduce__271_3_1"}
    ratio = sum(t["dur"] for t in bad) / sum(t["dur"] for t in judged)
    assert ev["unaligned_time_ratio"] == pytest.approx(ratio, abs=1e-4)
    assert f["severity"] == "info"  # below the peer's 0.2 'low priority' band


def test_byte_alignment_silent_when_sizes_are_multiples_of_512(shared_data, tmp_path):
    rank = copy_rank(shared_data / ALEX, tmp_path / "rank0_ascend_pt")
    events = trace_events(rank)
    for e in events:
        a = e.get("args") or {}
        if isinstance(a, dict) and "size(Byte)" in a and a["size(Byte)"] % 512:
            a["size(Byte)"] += 512 - a["size(Byte)"] % 512
    (rank / OUT / "trace_view.json").write_text(json.dumps(events))
    assert not _unaligned_by_hand(rank)[1]
    assert status(advise(rank, "all"), "communication.byte_alignment") == "silent"


# ---------------------------------------------------------------------- bandwidth contention

def _overlapping_ops(rank_dir, min_mb=1.0):
    ks = [(Decimal(r["Start Time(us)"].strip()), Decimal(r["Duration(us)"]))
          for r in rows(rank_dir, "kernel_details.csv")
          if "matmul" in (r["Name"] + r["Type"]).lower()]
    out = set()
    for name, op in ops_of(comm_json(rank_dir)):
        b = op["Communication Bandwidth Info"]["SDMA"]
        t = op["Communication Time Info"]
        lo = Decimal(str(t["Start Timestamp(us)"]))
        hi = lo + Decimal(str(t["Elapse Time(ms)"])) * 1000
        if b["Transit Size(MB)"] >= min_mb and any(s < hi and s + d > lo for s, d in ks):
            out.add(name)
    return out


def test_contention_silent_on_the_real_export(qrank):
    bws = [op["Communication Bandwidth Info"]["SDMA"]["Bandwidth(GB/s)"]
           for n, op in ops_of(comm_json(qrank)) if n in _overlapping_ops(qrank)]
    assert all(b >= 14.4 for b in bws)
    assert status(advise(qrank), "communication.bandwidth_contention") == "silent"


def test_contention_when_sdma_slows_beside_matmul(shared_data, tmp_path):
    # the AlexNet all-reduces of the gradients overlap the backward MatMuls
    rank = copy_rank(shared_data / ALEX, tmp_path / "rank0_ascend_pt", skip=("trace_view.json",))

    def slow(comm):
        for _, op in ops_of(comm):
            op["Communication Bandwidth Info"]["SDMA"]["Bandwidth(GB/s)"] = 10.0
    edit_json(rank / OUT / "communication.json", slow)
    expected = {n.split("@")[0] for n in _overlapping_ops(rank)}
    assert expected
    (f,) = found(advise(rank), "communication.bandwidth_contention")
    assert f["evidence"]["slow_ops_count"] == len(expected)
    assert {o["op_name"] for o in f["evidence"]["slow_ops"]} <= expected
    assert f["evidence"]["median_gbps_overlapped"] == 10.0


# --------------------------------------------------------------------------- retransmission

def test_retransmission_silent_on_the_real_export(qrank):
    assert status(advise(qrank), "communication.retransmission") == "silent"


def test_retransmission_when_an_rdma_transfer_takes_seconds(qrank):
    def stall(comm):
        name, op = next(iter(ops_of(comm)))
        op["Communication Bandwidth Info"]["RDMA"].update(
            {"Transit Size(MB)": 10.0, "Transit Time(ms)": 5000.0, "Bandwidth(GB/s)": 0.002})
        stall.name = name
    edit_json(qrank / OUT / "communication.json", stall)
    (f,) = found(advise(qrank), "communication.retransmission")
    assert f["severity"] == "critical"
    # ascendprof keeps the group apart: op "name@group" -> op_name, group
    assert [o["op_name"] for o in f["evidence"]["ops"]] == [stall.name.split("@")[0]]
    assert f["evidence"]["ops"][0]["rdma_transit_ms"] == 5000.0
