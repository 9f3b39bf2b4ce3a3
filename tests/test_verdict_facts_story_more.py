"""More hand-built cases for verdicts/facts.py and verdicts/story.py: the op transfer read from
the bandwidth table, shares of a step whose parts cancel, keys one rank lacks in the operator
excess, and the communication verdicts at the edges of their tests (exactly the share
threshold, a wait cause explaining less than half, a slow link owning less than half of the
transfer and the rest, the "other" verdict naming the longest ops). Every expected value is
worked out by hand in the comments (tests/_hand_cluster.py: ms per step, the same in both
steps)."""

from __future__ import annotations

from types import SimpleNamespace

import pyarrow as pa

from ascendprof.analyze.verdicts import facts as F
from ascendprof.model import schemas as S

from _hand_cluster import by_id, cluster, derive, gid
from _verdict_tables import FakeCluster

MS = 1_000_000
TH = {"comm_share_pct": 30.0, "excess_of_step_pct": 5.0, "min_excess_ms": 1.0}


def _steps(values: dict) -> pa.Table:
    """STEP_TRACE rows from {rank: (computing, cno, free) ms}, one step each."""
    return pa.Table.from_pylist(
        [{"rank": r, "step": 1, "computing_ns": round(c * MS),
          "comm_not_overlapped_ns": round(n * MS), "overlapped_ns": 0,
          "communication_ns": round(n * MS), "free_ns": round(f * MS), "stage_ns": 0,
          "bubble_ns": 0, "preparing_ns": 0} for r, (c, n, f) in values.items()],
        schema=S.SCHEMAS[S.STEP_TRACE])


# -- facts -------------------------------------------------------------------------------------

def test_transfer_without_transit_is_read_from_the_bandwidth_table():
    # One all-reduce "ar" in group g on ranks 0 and 1, 10 ms each, Transit Time 0 (no master
    # plane transit). Its Communication Bandwidth Info: rank 0 RDMA 4 ms (+ HCCS 3 ms, already
    # inside SDMA, not counted), rank 1 SDMA 2 ms. No cluster worker rows (no
    # op_row_batches): the full COMM_OPS / COMM_BANDWIDTH tables are split, so the transfer is
    # rank 0: 4 ms, rank 1: 2 ms (equal elapses: nobody waits).
    ops = [dict(rank=r, step=1, step_key="step1", kind="collective", op_name="ar@g", group="g",
                elapse_ns=10 * MS, transit_ns=0, wait_ns=0, sync_ns=0, idle_ns=0)
           for r in (0, 1)]
    bw = [dict(rank=r, step=1, step_key="step1", kind="collective", op_name="ar", group="g",
               transport=tr, size_mb=1.0, transit_ns=t * MS, bandwidth_gbps=1.0)
          for r, tr, t in ((0, "RDMA", 4), (0, "HCCS", 3), (1, "SDMA", 2))]
    ca = FakeCluster({S.STEP_TRACE: _steps({0: (60, 30, 10), 1: (60, 30, 10)}),
                      S.COMM_OPS: pa.Table.from_pylist(ops, schema=S.SCHEMAS[S.COMM_OPS]),
                      S.COMM_BANDWIDTH: pa.Table.from_pylist(
                          bw, schema=S.SCHEMAS[S.COMM_BANDWIDTH])}, {})
    fa = F.Facts(ca, TH)
    got = fa.comp.groupby("rank")["transfer_ns"].sum()
    assert got.to_dict() == {0: 4 * MS, 1: 2 * MS}


def test_rank_means_a_step_whose_parts_cancel_has_no_shares():
    # Rank 5's step: Computing 5 ms, Communication(Not Overlapped) 0, Free -5 ms (a negative
    # Free as the profiler may write it): total 5 + 0 - 5 = 0 ms. A zero total has no shares
    # (0 %, not 5 / 0 = inf). Rank 6 (10, 0, 10): 50 % Computing, 50 % Free.
    m = F.rank_means(F.step_frame(_steps({5: (5, 0, -5), 6: (10, 0, 10)}), None))
    assert m.loc[5, "total_ns"] == 0
    assert [m.loc[5, c] for c in ("computing_pct", "free_pct", "cno_pct")] == [0.0, 0.0, 0.0]
    assert [m.loc[6, c] for c in ("computing_pct", "free_pct", "cno_pct")] == [50.0, 50.0, 0.0]


def _op_partial(rank, rows):
    return pa.Table.from_pylist([{"rank": rank, "op_type": o, "accelerator_core": c,
                                  "count": n, "total_ns": t} for o, c, n, t in rows])


def test_op_excess_a_key_a_rank_lacks_counts_zero_exactly():
    # One step each. Ranks 0, 1 against rank 2:
    #   A: rank 0 1 ms, rank 1 1 ms -> median 1 ms; rank 2 none -> excess 1 ms
    #   B: rank 0 2 ms, rank 1 none (0) -> median (2 + 0) / 2 = 1 ms; rank 2 none -> 1 ms
    #   D: rank 0 2 ms, rank 1 none (0) -> median 1 ms; rank 2 1 ms -> excess exactly 0:
    #      not listed
    #   C: rank 2 only (1 ms) -> negative, not listed
    # A and B exceed by exactly 1 ms: equal, so in key order A, B. (Counting a lacking key as
    # anything above 0 would put B first and list D.)
    def rank(r, rows):
        return SimpleNamespace(rank=r, missing=[], op_partial=_op_partial(r, rows),
                               kernel_partial=None,
                               source=SimpleNamespace(profiler_level="Level1", kind="torch_npu"))
    ranks = [rank(0, [("A", "AI_CORE", 1, 1 * MS), ("B", "AI_CORE", 1, 2 * MS),
                      ("D", "AI_CORE", 1, 2 * MS)]),
             rank(1, [("A", "AI_CORE", 1, 1 * MS)]),
             rank(2, [("C", "AI_CORE", 1, 1 * MS), ("D", "AI_CORE", 1, 1 * MS)])]
    ca = FakeCluster({S.STEP_TRACE: _steps({r: (60, 30, 10) for r in range(3)})}, {})
    ca.ranks = ranks
    got = F.Facts(ca, TH).op_excess.excess([0, 1], [2])
    assert [(r["op_type"], r["excess_ms"], r["ms"], r["peer_ms"]) for r in got["op_types"]] == [
        ("A", 1.0, 1.0, 0.0), ("B", 1.0, 1.0, 0.0)]


# -- story -------------------------------------------------------------------------------------

def test_other_time_names_the_three_longest_ops():
    # dp = ranks 0, 1 (both collected). Every step each rank spends 20, 5, 15 and 10 ms in the
    # all-reduces a, b, c, d, no transit, equal on both ranks: nobody waits, all 50 ms are
    # "other". Communication(Not Overlapped) 50 / 150 = 33.3 % >= 30 %: examined; no cause,
    # transfer 0 < other 50 -> a communication verdict of its own about the other time,
    # naming the longest three ops: a (20), c (15), d (10).
    ops = [(name, "g_dp", "collective", {0: (el, 0), 1: (el, 0)})
           for name, el in (("a", 20), ("b", 5), ("c", 15), ("d", 10))]
    ca = cluster({0: (100, 50, 0), 1: (100, 50, 0)}, groups={"g_dp": ("dp", [0, 1])}, ops=ops)
    v = by_id(derive(ca))["communication:None"]
    assert v["evidence"]["cause"] == "other"
    assert list(v["evidence"]["longest_ops_ms"]) == ["a", "c", "d"]
    assert v["message"] == (
        "Communication(Not Overlapped) takes 33.3% of the step on ranks 0, 1: 50.0 of 50.0 ms "
        "per step inside the communication ops is neither transfer nor waiting for a peer; "
        "every member of dp (ranks 0, 1) is collected and spends it alike (longest: a, c, d).")
    assert v["groups"] == [{"name": "dp", "id": gid("g_dp"), "global_ranks": [0, 1]}]


def _pp2dp2(steps, ops=()):
    # pp groups (0, 2) and (1, 3) -> ranks 0, 1 stage 0 and 2, 3 stage 1; dp (0, 1), (2, 3)
    return cluster(steps, groups={"g_pp0": ("pp", [0, 2]), "g_pp1": ("pp", [1, 3]),
                                  "g_dp0": ("dp", [0, 1]), "g_dp1": ("dp", [2, 3])},
                   ops=list(ops))


def test_share_exactly_at_the_threshold_without_cross_stage_waits_is_examined():
    # Two even stages, every rank 50 ms Computing + 50 ms Communication(Not Overlapped):
    # exactly 50 % with comm_share_pct 50 -> flagged. The only ops are the dp all-reduces
    # within each stage (50 ms on both members, no transit): no wait across stages, so
    # without it the share is still (50 - 0) / 100 = 50 %, not below 50 %: not the bubble,
    # each stage is examined -> communication:0 and communication:1 (all other time).
    ca = _pp2dp2({r: (50, 50, 0) for r in range(4)},
                 ops=[("hcom_allReduce_1", "g_dp0", "collective", {0: (50, 0), 1: (50, 0)}),
                      ("hcom_allReduce_1", "g_dp1", "collective", {2: (50, 0), 3: (50, 0)})])
    out = by_id(derive(ca, comm_share_pct=50.0))
    assert {"communication:0", "communication:1"} <= set(out)
    assert out["communication:0"]["evidence"]["cause"] == "other"
    assert out["communication:0"]["ranks"] == [0, 1]


def test_a_cause_explaining_less_than_half_of_the_waiting_does_not_take_it():
    # tp = ranks 0, 1, 2; rank 2 is not collected (world size 3). In the tp all-gather rank 0
    # spends 100 ms (10 transit), rank 1 40 ms (10 transit) with a profiler Wait Time of 10 ms.
    # Rank 0: room 100 - 10 = 90, waiting for rank 1 100 - 40 = 60, rest 30 of which 10 is
    # waiting on rank 2 (rank 1's Wait Time), unattributed 20. Rank 0's share 100 / 200 = 50 %
    # (examined); rank 1's 40 / 140 = 28.6 % (not). Rank 0 waits 60 + 10 = 70 >= 0.5 x 100;
    # rank 1 has no cause; the collection explains 10 < 0.5 x 70 -> not the collection's
    # symptom: an info verdict, the waiting unexplained.
    ca = cluster({0: (100, 100, 0), 1: (100, 40, 0)}, groups={"g_tp": ("tp", [0, 1, 2])},
                 ops=[("hcom_allGather_1", "g_tp", "collective",
                       {0: (100, 10, 0), 1: (40, 10, 10)})], world_size=3)
    out = by_id(derive(ca))
    assert sorted(out) == ["collection", "communication:None"]
    assert out["collection"]["symptoms"] == []
    v = out["communication:None"]
    assert v["severity"] == "info" and v["evidence"]["cause"] == "waiting, unexplained"
    assert v["message"].startswith(
        "Communication(Not Overlapped) takes 50.0% of the step on rank 0: 70% of the time in "
        "communication ops is waiting (70.0 of 100.0 ms per step), mostly for rank 1;")


def test_a_slow_link_owning_less_than_half_of_transfer_and_rest_does_not_take_it():
    # dp and ep over ranks 0-3. dp: RDMA ring of 10 MB per step, 0->1 in 5 ms (2 GB/s), the
    # others 0.5 ms (20 GB/s) -> slow_link:RDMA:0->1. ep: no links. Every rank spends 10 ms in
    # the dp all-reduce (all transit) and 30 ms in the ep one (no transit); nobody waits.
    # Share 50 / 150 = 33.3 %: examined. Transfer 10, rest 30 (other); the slow link's group
    # dp holds 10 + 0 = 10 < 0.5 x (10 + 30) = 20 -> not its symptom; no collection verdict:
    # a communication verdict of its own, the other time (30 > 10 transfer) in ep.
    links = [("g_dp", s, (s + 1) % 4, "RDMA", 10, 5 if s == 0 else 0.5, s) for s in range(4)]
    ca = cluster({r: (100, 50, 0) for r in range(4)},
                 groups={"g_dp": ("dp", [0, 1, 2, 3]), "g_ep": ("ep", [0, 1, 2, 3])},
                 ops=[("hcom_allReduce_1", "g_dp", "collective", {r: (10, 10) for r in range(4)}),
                      ("hcom_allReduce_2", "g_ep", "collective", {r: (30, 0) for r in range(4)})],
                 links=links)
    out = by_id(derive(ca))
    assert sorted(out) == ["communication:None", "slow_link:RDMA:0->1"]
    assert out["slow_link:RDMA:0->1"]["symptoms"] == []
    v = out["communication:None"]
    assert v["evidence"]["cause"] == "other"
    assert v["groups"] == [{"name": "ep", "id": gid("g_ep"), "global_ranks": [0, 1, 2, 3]}]

