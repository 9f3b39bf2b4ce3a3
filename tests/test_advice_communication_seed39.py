"""advice_communication, seed 39: byte alignment lists ops with the same unaligned time in
op-name order (not table order); bandwidth contention counts a transfer with a single ns of
MatMul alongside, and stays silent when the slow overlapped transfers hold under 1 % of the
step; retransmission gives its share of the step. Checked on hand-built tables run as a rank's
worker runs them (analyze.advice.rank_advice), every expected number worked out in comments."""

from __future__ import annotations

import pytest
from test_advice_communication_by_hand import MS, _contention_tables, one, run, step_trace, \
    table, task

from ascendprof.model import schemas as S


def test_byte_alignment_ties_listed_in_op_name_order():
    # hcom_B comes first in the table, hcom_A second; each has one unaligned task
    # (2000 % 512 = 464, 1000 % 512 = 488) of 1000 ns: equal unaligned time, so they are
    # listed by op name (as pandas' groupby by op name, then a stable sort, lists them):
    # hcom_A first, and the message's example is hcom_A's 1000 bytes
    tasks = table(S.HCCL_TASKS, [task("hcom_B", 2000, 1000), task("hcom_A", 1000, 1000)])
    f = one(run(HCCL_TASKS=tasks), "communication.byte_alignment")
    assert [o["op_name"] for o in f["evidence"]["ops"]] == ["hcom_A", "hcom_B"]
    assert [o["example_size_bytes"] for o in f["evidence"]["ops"]] == [1000, 2000]
    assert f["message"] == (
        "2 communication op(s) move SDMA data in pieces that are not a multiple of 512 bytes "
        "(2 task(s), 100% of the judged SDMA task time; e.g. hcom_A, 1000 bytes).")


def test_contention_counts_one_ns_of_matmul_alongside():
    tables = _contention_tables(12.0)
    # op1 now starts 1 ns before the MatMul (busy over [1 ms, 2 ms)) ends: [2 ms - 1 ns,
    # 3 ms - 1 ns) overlaps it by exactly 1 ns, which is still "MatMul alongside"; op2
    # ([5 ms, 6 ms), 12 GB/s) has none
    tables["COMM_OPS"] = table(S.COMM_OPS, [
        {"step_key": "step1", "op_name": "op1", "group": "g", "start_ns": 2 * MS - 1,
         "elapse_ns": 1 * MS},
        {"step_key": "step1", "op_name": "op2", "group": "g", "start_ns": 5 * MS,
         "elapse_ns": 1 * MS},
    ])
    f = one(run(**tables), "communication.bandwidth_contention")
    ev = f["evidence"]
    # op1 at 10 GB/s < 14.4 GB/s, 1 ns beside a MatMul: 0.000001 ms, written 0.0
    assert ev["slow_ops_count"] == 1
    assert ev["slow_ops"] == [{"op_name": "op1", "elapse_ms": 1.0, "size_mb": 2.0,
                               "bandwidth_gbps": 10.0, "matmul_overlap_ms": 0.0}]
    assert ev["median_gbps_overlapped"] == 10.0 and ev["median_gbps_alone"] == 12.0
    # 1 ms of a 20 ms step: 5 %
    assert f["share_of_step_pct"] == 5.0


@pytest.mark.parametrize("step_ms,fired", [(200, False), (100, True)])
def test_contention_silent_under_one_percent_of_the_step(step_ms, fired):
    # the slow overlapped op1 takes 1 ms: 0.5 % of a 200 ms step (under the 1 % floor:
    # silent), 1.0 % of a 100 ms step (at the floor: reported)
    tables = _contention_tables(12.0)
    tables["STEP_TRACE"] = step_trace(step_ms * MS)
    res = run(**tables)
    st = res["status"]["communication.bandwidth_contention"]
    if fired:
        assert one(res, "communication.bandwidth_contention")["share_of_step_pct"] == 1.0
    else:
        assert st[0] == "silent", st
        assert not [f for f in res["findings"] if f["id"] == "communication.bandwidth_contention"]


def test_retransmission_share_of_the_step():
    # 5000 ms of RDMA transit (>= 4000 ms) in a 10000 ms step: 50 % of the step
    bw = table(S.COMM_BANDWIDTH, [
        {"step_key": "step1", "op_name": "op1", "group": "g", "transport": "RDMA",
         "size_mb": 10.0, "transit_ns": 5000 * MS, "bandwidth_gbps": 0.002},
    ])
    f = one(run(COMM_BANDWIDTH=bw, STEP_TRACE=step_trace(10000 * MS)),
            "communication.retransmission")
    assert f["impact_us_per_step"] == 5_000_000.0
    assert f["share_of_step_pct"] == 50.0
