"""advice_communication, seed 41: bandwidth contention leaves out an op with no start or no
elapse time (it is neither slowed nor alone), passes over an op with no SDMA bandwidth row of
1 MB or more, and lists only the ten slowest transfers beside a MatMul. Checked on hand-built
tables run as a rank's worker runs them (analyze.advice.rank_advice), every expected number
worked out in comments."""

from __future__ import annotations

import pytest

from test_advice_communication_by_hand import MS, _contention_tables, one, run, table

from ascendprof.model import schemas as S


def _op(name, start_ns, elapse_ns):
    return {"step_key": "step1", "op_name": name, "group": "g", "start_ns": start_ns,
            "elapse_ns": elapse_ns}


def _sdma(name, gbps, size_mb=2.0, transport="SDMA"):
    return {"step_key": "step1", "op_name": name, "group": "g", "transport": transport,
            "size_mb": size_mb, "transit_ns": 1 * MS, "bandwidth_gbps": gbps}


@pytest.mark.parametrize("untimed", ["start_ns", "elapse_ns"])
def test_contention_leaves_out_an_op_without_a_time(untimed):
    # op1 [1.5 ms, 2.5 ms) at 10 GB/s, 0.5 ms beside the MatMul over [1 ms, 2 ms): slow;
    # op2 [5 ms, 6 ms) at 16 GB/s: beside no MatMul; op3 at 5 GB/s has no start (or no elapse),
    # so it is dropped like pandas' dropna: it is neither a slow op nor one of the transfers
    # alone, whose median stays op2's 16 GB/s (with op3 it would be (16 + 5) / 2 = 10.5)
    op3 = _op("op3", 1_200_000, 1 * MS)
    op3[untimed] = None
    tables = _contention_tables(16.0)
    tables["COMM_OPS"] = table(S.COMM_OPS, [_op("op1", 1_500_000, 1 * MS),
                                            _op("op2", 5 * MS, 1 * MS), op3])
    tables["COMM_BANDWIDTH"] = table(S.COMM_BANDWIDTH, [
        _sdma("op1", 10.0), _sdma("op2", 16.0), _sdma("op3", 5.0)])
    f = one(run(**tables), "communication.bandwidth_contention")
    ev = f["evidence"]
    assert ev["slow_ops_count"] == 1
    assert [r["op_name"] for r in ev["slow_ops"]] == ["op1"]
    assert ev["median_gbps_overlapped"] == 10.0
    assert ev["median_gbps_alone"] == 16.0
    # op1's 1 ms of the 20 ms step
    assert f["message"] == (
        "1 SDMA transfer(s) of 1 MB or more run at under 14.4 GB/s while MatMul kernels run "
        "alongside (median 10.0 GB/s vs 16.0 GB/s for transfers with no MatMul alongside); "
        "they take 1.0 ms per step.")


def test_contention_passes_over_ops_without_a_judged_bandwidth_row():
    # op1 (slow, beside the MatMul) and op2 (alone) as in _contention_tables; beside the
    # MatMul too: op3, whose only row is RDMA, op4, whose SDMA row is 0.5 MB (under 1 MB),
    # and op5 with no bandwidth row at all. None of the three is judged: the finding is op1's
    # alone, 1 ms of the 20 ms step (5 %)
    tables = _contention_tables(16.0)
    tables["COMM_OPS"] = table(S.COMM_OPS, [
        _op("op1", 1_500_000, 1 * MS), _op("op2", 5 * MS, 1 * MS),
        _op("op3", 1_200_000, 1 * MS), _op("op4", 1_200_000, 1 * MS),
        _op("op5", 1_200_000, 1 * MS)])
    tables["COMM_BANDWIDTH"] = table(S.COMM_BANDWIDTH, [
        _sdma("op1", 10.0), _sdma("op2", 16.0), _sdma("op3", 5.0, transport="RDMA"),
        _sdma("op4", 5.0, size_mb=0.5)])
    f = one(run(**tables), "communication.bandwidth_contention")
    ev = f["evidence"]
    assert ev["slow_ops_count"] == 1
    assert ev["slow_ops"] == [{"op_name": "op1", "elapse_ms": 1.0, "size_mb": 2.0,
                               "bandwidth_gbps": 10.0, "matmul_overlap_ms": 0.5}]
    assert ev["median_gbps_alone"] == 16.0
    assert f["impact_us_per_step"] == 1000.0 and f["share_of_step_pct"] == 5.0


def test_contention_lists_the_ten_slowest_of_eleven_or_more():
    # twelve SDMA transfers over [1.5 ms, 2.5 ms), each 0.5 ms beside the MatMul over
    # [1 ms, 2 ms): op0 at 12 GB/s, op1 at 11, ..., op11 at 1 (12 - i GB/s, all under 14.4).
    # All twelve are counted; the list holds the ten slowest, slowest first: op11 (1 GB/s)
    # to op2 (10 GB/s), leaving off op1 (11) and op0 (12)
    tables = _contention_tables(16.0)
    tables["COMM_OPS"] = table(S.COMM_OPS, [_op(f"op{i}", 1_500_000, 1 * MS)
                                            for i in range(12)])
    tables["COMM_BANDWIDTH"] = table(S.COMM_BANDWIDTH, [_sdma(f"op{i}", float(12 - i))
                                                        for i in range(12)])
    f = one(run(**tables), "communication.bandwidth_contention")
    ev = f["evidence"]
    assert ev["slow_ops_count"] == 12
    assert ev["slow_ops"] == [{"op_name": f"op{i}", "elapse_ms": 1.0, "size_mb": 2.0,
                               "bandwidth_gbps": float(12 - i), "matmul_overlap_ms": 0.5}
                              for i in range(11, 1, -1)]
    # median of 1..12 GB/s: (6 + 7) / 2 = 6.5; none runs alone
    assert ev["median_gbps_overlapped"] == 6.5 and ev["median_gbps_alone"] is None
    # 12 x 1 ms of the 20 ms step: 60 % -> critical (10 % or more)
    assert f["impact_us_per_step"] == 12000.0 and f["share_of_step_pct"] == 60.0
    assert f["severity"] == "critical"
