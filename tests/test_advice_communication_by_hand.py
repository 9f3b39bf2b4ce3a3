"""The communication advice rules on small hand-built tables, run as a rank's worker runs them
(analyze.advice.rank_advice): every number of a finding worked out by hand in the comments.
The real exports and edited copies of them are in test_advice_communication.py."""

from __future__ import annotations

import warnings

import pyarrow as pa
import pytest

from ascendprof.analyze import advice
from ascendprof.model import schemas as S


def table(name, rows):
    """Table ``name`` with its schema's columns (those not given: null)."""
    return S.conform(name, pa.Table.from_pylist(rows))


def step_trace(stage_ns):
    """One step (step 1) whose Stage is ``stage_ns``: the step time the shares are taken of."""
    return table(S.STEP_TRACE, [{"step": 1, "stage_ns": stage_ns}])


def run(**tables):
    return advice.rank_advice({getattr(S, k): v for k, v in tables.items()}, {}, 0)


def one(res, rule_id):
    st = res["status"][rule_id]
    assert st[0] == "fired", st
    (f,) = [f for f in res["findings"] if f["id"] == rule_id]
    return f


# ---------------------------------------------------------------------------- byte alignment

def task(op, size, dur, transport="SDMA", link="HCCS"):
    return {"rank": 0, "step": 1, "op_name": op, "task_name": "Memcpy", "start_ns": 0,
            "dur_ns": dur, "size_bytes": size, "transport": transport, "link_type": link}


def test_byte_alignment_by_hand():
    tasks = table(S.HCCL_TASKS, [
        task("hcom_A", 1024, 1000),      # judged, aligned (2 x 512)
        task("hcom_A", 1000, 3000),      # judged, unaligned (1000 % 512 = 488)
        task("hcom_A", 700, 1000),       # judged, unaligned
        task(None, 2000, 1000),          # judged, unaligned, no op: shown as "?"
        task("hcom_A", 1001, 50000, link="ON_CHIP"),  # on-chip copies are not judged
        task("hcom_A", 1001, 50000, transport="RDMA"),  # nor RDMA
        task("hcom_A", 512, 50000),      # nor 512 bytes or less
        task("hcom_A", 100, 50000),
    ])
    f = one(run(HCCL_TASKS=tasks), "communication.byte_alignment")
    ev = f["evidence"]
    # 4 judged tasks, 3 unaligned; unaligned time 3000 + 1000 + 1000 = 5000 of 6000 ns
    assert ev["judged_tasks"] == 4 and ev["unaligned_tasks"] == 3
    assert ev["unaligned_time_ratio"] == 0.8333
    assert f["severity"] == "critical"  # 0.83 >= 0.7
    # one step (none known): 5000 ns = 5 us per step at stake
    assert f["impact_us_per_step"] == 5.0
    # per op, most unaligned time first: hcom_A 4000 ns, "?" 1000 ns
    assert ev["ops"] == [
        # 1024 + 1000 + 700 = 2724 bytes in 5000 ns: 0.5448 GB/s; its first unaligned
        # task (in table order) moved 1000 bytes
        {"op_name": "hcom_A", "total_size_bytes": 2724, "duration_us": 5.0,
         "unaligned_duration_us": 4.0, "unaligned_tasks": 2, "example_size_bytes": 1000,
         "bandwidth_gbps": 0.5448},
        {"op_name": "?", "total_size_bytes": 2000, "duration_us": 1.0,
         "unaligned_duration_us": 1.0, "unaligned_tasks": 1, "example_size_bytes": 2000,
         "bandwidth_gbps": 2.0},
    ]
    assert f["message"] == (
        "2 communication op(s) move SDMA data in pieces that are not a multiple of 512 bytes "
        "(3 task(s), 83% of the judged SDMA task time; e.g. hcom_A, 1000 bytes).")
    assert any("ask the HCCL team if the sizes come from the library" in a for a in f["advice"])


@pytest.mark.parametrize("bad_ns,want", [(1000, "info"), (2500, "warning"), (7000, "critical")])
def test_byte_alignment_severity_bands(bad_ns, want):
    # unaligned share of 10000 ns judged: 0.1 -> info, 0.25 -> warning (>= 0.2),
    # 0.7 -> critical (>= 0.7)
    tasks = table(S.HCCL_TASKS, [task("hcom_A", 1024, 10000 - bad_ns),
                                 task("hcom_A", 1000, bad_ns)])
    f = one(run(HCCL_TASKS=tasks), "communication.byte_alignment")
    assert f["evidence"]["unaligned_time_ratio"] == bad_ns / 10000
    assert f["severity"] == want


def test_byte_alignment_silent_when_only_on_chip_copies_are_unaligned():
    tasks = table(S.HCCL_TASKS, [task("hcom_A", 1024, 1000),
                                 task("hcom_A", 1000, 1000, link="ON_CHIP")])
    assert run(HCCL_TASKS=tasks)["status"]["communication.byte_alignment"] == ["silent", ""]


# ---------------------------------------------------------------------- bandwidth contention

MS = 1_000_000  # ns


def _contention_tables(alone_gbps):
    kernels = table(S.KERNELS, [
        # a MatMul busy over [1 ms, 2 ms); an Add that is not one
        {"name": "MatMul_1", "op_type": "MatMul", "accelerator_core": "AI_CORE",
         "start_ns": 1 * MS, "dur_ns": 1 * MS},
        {"name": "Add_1", "op_type": "Add", "accelerator_core": "AI_VECTOR_CORE",
         "start_ns": 5 * MS, "dur_ns": 1 * MS},
    ])
    ops = table(S.COMM_OPS, [
        # op1 [1.5 ms, 2.5 ms): 0.5 ms beside the MatMul; op2 [5 ms, 6 ms): beside none
        {"step_key": "step1", "op_name": "op1", "group": "g", "start_ns": 1_500_000,
         "elapse_ns": 1 * MS},
        {"step_key": "step1", "op_name": "op2", "group": "g", "start_ns": 5 * MS,
         "elapse_ns": 1 * MS},
    ])
    bw = table(S.COMM_BANDWIDTH, [
        {"step_key": "step1", "op_name": "op1", "group": "g", "transport": "SDMA",
         "size_mb": 2.0, "transit_ns": 1 * MS, "bandwidth_gbps": 10.0},
        {"step_key": "step1", "op_name": "op2", "group": "g", "transport": "SDMA",
         "size_mb": 2.0, "transit_ns": 1 * MS, "bandwidth_gbps": alone_gbps},
    ])
    return dict(KERNELS=kernels, COMM_OPS=ops, COMM_BANDWIDTH=bw, STEP_TRACE=step_trace(20 * MS))


def test_contention_by_hand():
    f = one(run(**_contention_tables(12.34567)), "communication.bandwidth_contention")
    ev = f["evidence"]
    # limit 0.8 x 18 = 14.4 GB/s: op1 (10 GB/s, 0.5 ms beside a MatMul) is slow; op2 (12.35
    # GB/s) is slow too but has no MatMul alongside
    assert ev["threshold_gbps"] == 14.4 and ev["slow_ops_count"] == 1
    assert ev["slow_ops"] == [{"op_name": "op1", "elapse_ms": 1.0, "size_mb": 2.0,
                               "bandwidth_gbps": 10.0, "matmul_overlap_ms": 0.5}]
    # medians kept to 3 decimals: 12.34567 -> 12.346
    assert ev["median_gbps_overlapped"] == 10.0 and ev["median_gbps_alone"] == 12.346
    # op1's 1 ms of a 20 ms step: 5 % -> warning (1 % to 10 %)
    assert f["impact_us_per_step"] == 1000.0 and f["share_of_step_pct"] == 5.0
    assert f["severity"] == "warning"
    assert f["message"] == (
        "1 SDMA transfer(s) of 1 MB or more run at under 14.4 GB/s while MatMul kernels run "
        "alongside (median 10.0 GB/s vs 12.3 GB/s for transfers with no MatMul alongside); "
        "they take 1.0 ms per step.")
    text = " ".join(f["advice"])
    assert ("Compare a run with the communication/computation overlap turned off (or "
            "differently scheduled) to see whether the overlap gains more than the bandwidth "
            "it costs.") in text


# --------------------------------------------------------------------------- retransmission

def test_retransmission_by_hand():
    ops = table(S.COMM_OPS, [
        {"step_key": "step1", "op_name": "op1", "group": "g", "start_ns": 0,
         "elapse_ns": 6000 * MS},
    ])
    bw = table(S.COMM_BANDWIDTH, [
        # 5000 ms of RDMA transit (>= 4000 ms: retransmission); 3000 ms is not
        {"step_key": "step1", "op_name": "op1", "group": "g", "transport": "RDMA",
         "size_mb": 10.0, "transit_ns": 5000 * MS, "bandwidth_gbps": 0.002},
        {"step_key": "step1", "op_name": "op2", "group": "g", "transport": "RDMA",
         "size_mb": 10.0, "transit_ns": 3000 * MS, "bandwidth_gbps": 0.003},
    ])
    f = one(run(COMM_OPS=ops, COMM_BANDWIDTH=bw), "communication.retransmission")
    # the op's elapse (6000 ms) from the ops table, beside its RDMA transit
    assert f["evidence"]["ops"] == [{"op_name": "op1", "group": "g", "step": "step1",
                                     "rdma_transit_ms": 5000.0, "rdma_mb": 10.0,
                                     "elapse_ms": 6000.0}]
    assert f["severity"] == "critical" and f["impact_us_per_step"] == 5_000_000.0
    assert f["message"] == ("1 RDMA transfer(s) took 4 s or more (longest 5.0 s): likely "
                            "retransmission.")
    (a,) = f["advice"]
    assert a.startswith("Check the RoCE network: switch and NIC configuration (PFC/ECN), "
                        "link errors (hccn_tool -i <dev> -stat), and that HCCL_RDMA_TC / "
                        "HCCL_RDMA_SL match the switch's priority settings.")


# ---------------------------------------------------------------------------- small packets

def test_small_packets_by_hand():
    def tr(op, group, size_mb, transit_ns, transport="SDMA"):
        return {"step_key": "step1", "op_name": op, "group": group, "transport": transport,
                "size_mb": size_mb, "transit_ns": transit_ns}

    bw = table(S.COMM_BANDWIDTH, [
        tr("a", "g1", 1.0, 3 * MS),
        tr("b", "g1", 2.0, 1 * MS),
        tr("e", "g1", 0.1, None),        # small, transit unknown: not counted in the group
        tr("c", "g2", 0.5, 5 * MS),
        tr("d", "g3", 20.0, 1 * MS),     # 16 MB or more: not small
        tr("f", "g1", 0.0, 9 * MS),      # moved nothing: not a transfer
        tr("h", "g1", 0.5, 9 * MS, transport="HCCS"),  # not SDMA / RDMA
    ])
    f = one(run(COMM_BANDWIDTH=bw, STEP_TRACE=step_trace(100 * MS)),
            "communication.small_packets")
    ev = f["evidence"]
    # SDMA: 5 transfers, 4 under 16 MB (a, b, e, c): ratio 0.8 > 0.2; their known transit
    # 3 + 1 + 5 = 9 ms of a 100 ms step: 9 % -> warning (1 % to 10 %)
    assert f["key"] == "communication.small_packets:SDMA"
    assert {k: ev[k] for k in ("transport", "ops", "small_ops", "small_ratio",
                               "small_transit_ms_per_step")} == {
        "transport": "SDMA", "ops": 5, "small_ops": 4, "small_ratio": 0.8,
        "small_transit_ms_per_step": 9.0}
    # median of 1.0, 2.0, 0.1, 0.5 MB: (0.5 + 1.0) / 2
    assert ev["small_mb_median"] == 0.75
    # per group, slowest first: g2 5 ms (1 op), g1 4 ms (2 ops with a known transit time)
    assert ev["groups"] == [{"group": "g2", "ops": 1, "transit_ms_per_step": 5.0},
                            {"group": "g1", "ops": 2, "transit_ms_per_step": 4.0}]
    assert f["share_of_step_pct"] == 9.0 and f["severity"] == "warning"
    assert f["message"] == ("4 of 5 SDMA transfers (80%) move less than 16 MB; their transit "
                            "time is 9.00 ms per step (9.0% of the step).")
    assert any("so each collective moves more data." in a for a in f["advice"])


def test_small_packets_over_rdma_alone_top_five_groups_by_hand():
    """No SDMA transfer at all (RDMA is still judged), a transfer without a group (left out
    of the groups, not ending them), six groups (five listed), the ratio to four decimals."""
    def tr(op, group, size_mb, transit_ns):
        return {"step_key": "step1", "op_name": op, "group": group, "transport": "RDMA",
                "size_mb": size_mb, "transit_ns": transit_ns}

    bw = table(S.COMM_BANDWIDTH, [
        tr("z", None, 0.5, 1 * MS),           # small, no group
        tr("a", "g1", 0.5, 1_000_500),        # 1.0005 ms: shown as 1.0 (1.000501 would be 1.001)
        tr("b", "g2", 0.5, 6 * MS),
        tr("c", "g3", 0.5, 5 * MS),
        tr("d", "g4", 0.5, 4 * MS),
        tr("e", "g5", 0.5, 3 * MS),
        tr("f", "g6", 0.5, 2 * MS),
        tr("g", "g7", 2.0, 1 * MS),           # 1 MB or more: not small
        tr("h", "g8", 3.0, 1 * MS),
    ])
    f = one(run(COMM_BANDWIDTH=bw, STEP_TRACE=step_trace(100 * MS)),
            "communication.small_packets")
    ev = f["evidence"]
    # 9 RDMA transfers, 7 under 1 MB: 7 / 9 = 0.77777... -> 0.7778
    assert f["key"] == "communication.small_packets:RDMA"
    assert (ev["ops"], ev["small_ops"], ev["small_ratio"]) == (9, 7, 0.7778)
    # small transit 1 + 1.0005 + 6 + 5 + 4 + 3 + 2 = 22.0005 ms of a 100 ms step
    assert ev["small_transit_ms_per_step"] == round(22_000_500 / 1e6, 3)
    # groups slowest first, five of the six: g2 6, g3 5, g4 4, g5 3, g6 2 (g1's 1.0005 left out)
    assert [g["group"] for g in ev["groups"]] == ["g2", "g3", "g4", "g5", "g6"]
    assert [g["transit_ms_per_step"] for g in ev["groups"]] == [6.0, 5.0, 4.0, 3.0, 2.0]


def test_small_packets_group_sum_is_exact():
    # one group with 1.0005 ms of small transfers: written 1.0 ms (a sum off by one ns,
    # 1.000501 ms, would be written 1.001)
    def tr(op, size_mb, transit_ns):
        return {"step_key": "step1", "op_name": op, "group": "g1", "transport": "RDMA",
                "size_mb": size_mb, "transit_ns": transit_ns}

    bw = table(S.COMM_BANDWIDTH, [tr("a", 0.5, 1_000_500), tr("b", 2.0, 1 * MS)])
    f = one(run(COMM_BANDWIDTH=bw, STEP_TRACE=step_trace(10 * MS)),
            "communication.small_packets")
    assert f["evidence"]["groups"] == [{"group": "g1", "ops": 1, "transit_ms_per_step": 1.0}]


# ------------------------------------------- survivors of the seed-34 run (byte alignment, ...)

def test_byte_alignment_lists_the_ten_ops_with_most_unaligned_time():
    # eleven ops, each one unaligned task of 1000 bytes (1000 % 512 = 488) taking k us,
    # k = 1 .. 11: all eleven are counted, the evidence lists ten, most unaligned time first
    # (op11 11 us .. op02 2 us); op01 (1 us, the least) is left out
    tasks = table(S.HCCL_TASKS, [task(f"op{k:02d}", 1000, k * 1000) for k in range(1, 12)])
    f = one(run(HCCL_TASKS=tasks), "communication.byte_alignment")
    ev = f["evidence"]
    assert ev["unaligned_tasks"] == 11 and ev["judged_tasks"] == 11
    assert [o["op_name"] for o in ev["ops"]] == [f"op{k:02d}" for k in range(11, 1, -1)]
    assert [o["unaligned_duration_us"] for o in ev["ops"]] == [float(k) for k in range(11, 1, -1)]
    # all the judged time is unaligned: 100 %
    assert f["message"] == (
        "11 communication op(s) move SDMA data in pieces that are not a multiple of 512 bytes "
        "(11 task(s), 100% of the judged SDMA task time; e.g. op11, 1000 bytes).")


def test_byte_alignment_op_without_time_has_no_bandwidth():
    # hcom_A: 1000 unaligned bytes in 2000 ns: 1000 / 2000 = 0.5 bytes/ns = 0.5 GB/s;
    # hcom_B: 1000 unaligned bytes in a task recorded with 0 ns: no bandwidth (None), and no
    # division by zero on the way (numpy's "divide by zero" RuntimeWarning would be printed on
    # the user's terminal; made an error here, it fails the rule)
    tasks = table(S.HCCL_TASKS, [task("hcom_A", 1000, 2000), task("hcom_B", 1000, 0)])
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        f = one(run(HCCL_TASKS=tasks), "communication.byte_alignment")
    by_op = {o["op_name"]: o for o in f["evidence"]["ops"]}
    assert by_op["hcom_A"]["bandwidth_gbps"] == 0.5
    assert by_op["hcom_B"]["duration_us"] == 0.0
    assert by_op["hcom_B"]["bandwidth_gbps"] is None


def test_byte_alignment_advice_text():
    tasks = table(S.HCCL_TASKS, [task("hcom_A", 1000, 1000)])
    f = one(run(HCCL_TASKS=tasks), "communication.byte_alignment")
    assert f["advice"] == [
        "Pad the tensors the collective moves (gradient buckets, parameter shards) so their "
        "size in bytes is a multiple of 512 (e.g. round element counts up to a multiple of 256 "
        "for bf16/fp16, 128 for fp32).",
        "For framework-made buckets, choose bucket sizes that are multiples of 512 bytes; ask "
        "the HCCL team if the sizes come from the library."]


def test_contention_advice_text():
    f = one(run(**_contention_tables(12.0)), "communication.bandwidth_contention")
    assert f["advice"] == [
        "Compare a run with the communication/computation overlap turned off (or differently "
        "scheduled) to see whether the overlap gains more than the bandwidth it costs.",
        "Schedule the bandwidth-heavy collectives next to vector rather than MatMul work, or "
        "split them so they meet fewer MatMuls."]


def test_retransmission_size_kept_to_three_decimals():
    # 12.3456 MB moved in 4500 ms of RDMA transit (>= 4000 ms): shown as 12.346 MB; no ops
    # table row for it, so no elapse
    bw = table(S.COMM_BANDWIDTH, [
        {"step_key": "step1", "op_name": "op1", "group": "g", "transport": "RDMA",
         "size_mb": 12.3456, "transit_ns": 4500 * MS, "bandwidth_gbps": 0.003},
    ])
    f = one(run(COMM_BANDWIDTH=bw), "communication.retransmission")
    assert f["evidence"]["ops"] == [{"op_name": "op1", "group": "g", "step": "step1",
                                     "rdma_transit_ms": 4500.0, "rdma_mb": 12.346,
                                     "elapse_ms": None}]
