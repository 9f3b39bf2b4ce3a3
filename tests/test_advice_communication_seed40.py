"""advice_communication, seed 40: bandwidth contention's message leaves out the comparison with
transfers that have no MatMul alongside when there are none, and keeps the median overlapped
bandwidth to three decimals; small packets' advice text in full, and the median small size
kept to three decimals. Checked on hand-built tables run as a rank's worker runs them
(analyze.advice.rank_advice), every expected number worked out in comments."""

from __future__ import annotations

from test_advice_communication_by_hand import MS, _contention_tables, one, run, step_trace, \
    table

from ascendprof.model import schemas as S


def test_contention_without_transfers_alone_names_no_alone_median():
    # only op1: 2 MB at 10 GB/s over [1.5 ms, 2.5 ms), 0.5 ms of it beside the MatMul over
    # [1 ms, 2 ms); no transfer runs without a MatMul alongside, so the message compares with
    # nothing (no "vs ... GB/s for transfers with no MatMul alongside")
    tables = _contention_tables(12.0)
    tables["COMM_OPS"] = table(S.COMM_OPS, [
        {"step_key": "step1", "op_name": "op1", "group": "g", "start_ns": 1_500_000,
         "elapse_ns": 1 * MS}])
    tables["COMM_BANDWIDTH"] = table(S.COMM_BANDWIDTH, [
        {"step_key": "step1", "op_name": "op1", "group": "g", "transport": "SDMA",
         "size_mb": 2.0, "transit_ns": 1 * MS, "bandwidth_gbps": 10.0}])
    f = one(run(**tables), "communication.bandwidth_contention")
    assert f["message"] == (
        "1 SDMA transfer(s) of 1 MB or more run at under 14.4 GB/s while MatMul kernels run "
        "alongside (median 10.0 GB/s); they take 1.0 ms per step.")
    assert f["evidence"]["median_gbps_overlapped"] == 10.0
    assert f["evidence"]["median_gbps_alone"] is None


def test_contention_median_overlapped_bandwidth_kept_to_three_decimals():
    # two slow transfers beside the MatMul over [1 ms, 2 ms): op1 [1.5 ms, 2.5 ms) at
    # 10.1234 GB/s and op3 [0.5 ms, 1.5 ms) at 12.5 GB/s (both under 14.4 GB/s, 0.5 ms each
    # alongside); op2 [5 ms, 6 ms) at 16 GB/s has none.
    # median of 10.1234 and 12.5: 22.6234 / 2 = 11.3117 -> 11.312 (not 11, nor 11.3117)
    tables = _contention_tables(16.0)
    tables["COMM_OPS"] = table(S.COMM_OPS, [
        {"step_key": "step1", "op_name": "op1", "group": "g", "start_ns": 1_500_000,
         "elapse_ns": 1 * MS},
        {"step_key": "step1", "op_name": "op2", "group": "g", "start_ns": 5 * MS,
         "elapse_ns": 1 * MS},
        {"step_key": "step1", "op_name": "op3", "group": "g", "start_ns": 500_000,
         "elapse_ns": 1 * MS},
    ])
    tables["COMM_BANDWIDTH"] = table(S.COMM_BANDWIDTH, [
        {"step_key": "step1", "op_name": name, "group": "g", "transport": "SDMA",
         "size_mb": 2.0, "transit_ns": 1 * MS, "bandwidth_gbps": gbps}
        for name, gbps in (("op1", 10.1234), ("op2", 16.0), ("op3", 12.5))])
    f = one(run(**tables), "communication.bandwidth_contention")
    ev = f["evidence"]
    assert ev["slow_ops_count"] == 2
    assert ev["median_gbps_overlapped"] == 11.312
    assert ev["median_gbps_alone"] == 16.0
    # 2 ms of a 20 ms step
    assert f["message"] == (
        "2 SDMA transfer(s) of 1 MB or more run at under 14.4 GB/s while MatMul kernels run "
        "alongside (median 11.3 GB/s vs 16.0 GB/s for transfers with no MatMul alongside); "
        "they take 2.0 ms per step.")


def _small_sdma(sizes_mb):
    """SDMA transfers of ``sizes_mb``, 1 ms of transit each, in group g1."""
    return table(S.COMM_BANDWIDTH, [
        {"step_key": "step1", "op_name": f"op{i}", "group": "g1", "transport": "SDMA",
         "size_mb": z, "transit_ns": 1 * MS} for i, z in enumerate(sizes_mb)])


def test_small_packets_advice_text():
    # 2 of 3 SDMA transfers under 16 MB (ratio 0.67 > 0.2), 2 ms of a 100 ms step (2 %)
    f = one(run(COMM_BANDWIDTH=_small_sdma([0.5, 1.0, 20.0]), STEP_TRACE=step_trace(100 * MS)),
            "communication.small_packets")
    assert f["advice"] == [
        "In data parallelism: larger batches or more gradient accumulation steps, and larger "
        "gradient buckets (DDP bucket_cap_mb), so each collective moves more data.",
        "With ZeRO-3, consider ZeRO-2/ZeRO-1 if memory allows.",
        "Use fused optimizers / fused operators that issue fewer collectives."]


def test_small_packets_median_size_kept_to_three_decimals():
    # small SDMA transfers of 0.1234 and 0.5678 MB (20 MB is not small): median
    # (0.1234 + 0.5678) / 2 = 0.3456 -> 0.346 (not 0.3456)
    f = one(run(COMM_BANDWIDTH=_small_sdma([0.1234, 0.5678, 20.0]),
                STEP_TRACE=step_trace(100 * MS)),
            "communication.small_packets")
    assert (f["evidence"]["small_ops"], f["evidence"]["ops"]) == (2, 3)
    assert f["evidence"]["small_mb_median"] == 0.346
