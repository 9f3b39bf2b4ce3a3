"""advice_communication, seed 38: the bandwidth-contention finding keeps each slow transfer's
bandwidth to three decimals (neither a whole number nor four decimals), checked on hand-built
tables run as a rank's worker runs them (analyze.advice.rank_advice)."""

from __future__ import annotations

from test_advice_communication_by_hand import MS, _contention_tables, one, run, table

from ascendprof.model import schemas as S


def test_contention_slow_op_bandwidth_kept_to_three_decimals():
    tables = _contention_tables(16.0)
    # op1: 2 MB at 12.3456 GB/s (under 0.8 x 18 = 14.4 GB/s) over [1.5 ms, 2.5 ms), 0.5 ms of
    # it beside the MatMul over [1 ms, 2 ms): slow and overlapped; op2 at 16 GB/s is not slow
    tables["COMM_BANDWIDTH"] = table(S.COMM_BANDWIDTH, [
        {"step_key": "step1", "op_name": "op1", "group": "g", "transport": "SDMA",
         "size_mb": 2.0, "transit_ns": 1 * MS, "bandwidth_gbps": 12.3456},
        {"step_key": "step1", "op_name": "op2", "group": "g", "transport": "SDMA",
         "size_mb": 2.0, "transit_ns": 1 * MS, "bandwidth_gbps": 16.0},
    ])
    f = one(run(**tables), "communication.bandwidth_contention")
    # 12.3456 to three decimals: 12.346 (not 12, nor 12.3456)
    assert f["evidence"]["slow_ops"] == [{"op_name": "op1", "elapse_ms": 1.0, "size_mb": 2.0,
                                          "bandwidth_gbps": 12.346, "matmul_overlap_ms": 0.5}]
