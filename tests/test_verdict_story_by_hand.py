"""The causal story (verdicts/story.py) on small hand-built clusters: which cause each wait and
each communication observation is attached to, and what the communication verdicts no cause
explains say. Every expected number is worked out below from the injected step values and op
times (tests/_hand_cluster.py: ms per step, the same in both steps)."""

from __future__ import annotations

from types import SimpleNamespace

from ascendprof.analyze import verdicts as V
from ascendprof.analyze.verdicts import make_verdict

from _hand_cluster import by_id, cluster, derive, gid

DP = ("dp", [0, 1, 2, 3])


def _slow_rank_3(excess=30.0, world_size=None):
    # ranks 0-2 compute 100 ms, rank 3 100 + excess; every step 150 ms (0-2: 100 + 50 comm,
    # 3: 130 + 20). One all-reduce over dp (ranks 0-3) per step: ranks 0-2 in it 40.3 ms,
    # rank 3 (the last to arrive) 10 ms, transit 5 ms on every rank.
    return cluster({0: (100, 50, 0), 1: (100, 50, 0), 2: (100, 50, 0),
                    3: (100 + excess, 50 - excess, 0)},
                   groups={"g_dp": DP},
                   ops=[("hcom_allReduce_1", "g_dp", "collective",
                         {0: (40.3, 5), 1: (40.3, 5), 2: (40.3, 5), 3: (10, 5)})],
                   world_size=world_size)


def test_waits_for_a_slow_rank_are_its_symptoms():
    # Threshold: 5 % of the 150 ms median step = 7.5 ms. Rank 3 computes 30 ms more than the
    # median of 0-2 (MAD 0: an outlier) -> slow_rank:3, critical (30 >= 2 x 7.5).
    # Op split of ranks 0-2: elapse 40.3 = transfer 5 + waiting for rank 3 (40.3 - 10 = 30.3)
    # + other 5. Their Communication(Not Overlapped) share 50/150 = 33.3 % >= 30 %: examined;
    # waiting 30.3 >= 0.5 x 40.3 and all of it is for rank 3 -> attached to slow_rank:3.
    out = derive(_slow_rank_3())
    assert [v["id"] for v in out] == ["slow_rank:3"]
    (v,) = out
    assert v["severity"] == "critical"
    obs, waits = v["symptoms"]
    assert obs["id"] == "slow_rank:3/communication:0,1,2"
    assert obs["category"] == "communication" and obs["scope"] == "rank"
    assert obs["caused_by"] == "slow_rank:3"
    assert obs["message"] == (
        "Communication(Not Overlapped) takes 33.3% of the step on ranks 0–2: 75% of the time in "
        "communication ops is waiting (30.3 of 40.3 ms per step): 30.3 ms for rank 3 (slow "
        "rank).")
    ev = obs["evidence"]
    assert ev["explained_ms"] == 30.3
    assert ev["comm_not_overlapped_ms"] == {"0": 50.0, "1": 50.0, "2": 50.0}
    assert ev["comm_not_overlapped_pct"] == {"0": 33.33, "1": 33.33, "2": 33.33}
    assert (ev["op_elapse_ms"], ev["transfer_ms"], ev["peer_wait_ms"], ev["other_ms"],
            ev["wait_on_absent_ms"], ev["unattributed_ms"]) == (40.3, 5.0, 30.3, 5.0, 0.0, 0.0)
    assert ev["waited_for_ms"] == {"3": 30.3}
    assert ev["by_group"] == {"dp": {"elapse_ms": 40.3, "transfer_ms": 5.0, "peer_wait_ms": 30.3,
                                     "absent_wait_ms": 0.0, "other_ms": 5.0,
                                     "unattributed_ms": 0.0}}
    dp_ref = {"name": "dp", "id": gid("g_dp"), "global_ranks": [0, 1, 2, 3]}
    assert obs["groups"] == [dp_ref]
    # the wait-for graph: each of 0-2 waits 30.3 ms per step for rank 3 in dp ops
    assert waits["id"] == "slow_rank:3/communication:0,1,2"
    assert waits["caused_by"] == "slow_rank:3"
    assert waits["message"] == "Ranks 0–2 wait 30.3 ms per step (up to 30.3) for rank 3 in dp ops."
    assert waits["groups"] == [dp_ref]
    assert waits["evidence"] == {"wait_ms": {"0": 30.3, "1": 30.3, "2": 30.3},
                                 "mean_wait_ms": 30.3, "waited_for_ranks": [3],
                                 "pipeline_fill_drain": False}
    # 3 x 30.3 = 90.9 ms per step explained, to the µs
    assert v["evidence"]["peer_wait_explained_ms"] == 90.9


def test_causes_of_one_severity_ordered_by_share_spread():
    # Rank 3 computes 10 ms more (7.5 <= 10 < 15: a warning); rank 4 of a world of 5 is not
    # collected: the collection warning, ranked 0. The slow rank's Computing share spread
    # (110/150 - 100/150 = 6.7 %) ranks it first.
    out = derive(_slow_rank_3(excess=10.0, world_size=5))
    assert [(v["id"], v["severity"]) for v in out] == [("slow_rank:3", "warning"),
                                                       ("collection", "warning")]


def _pp2dp2(steps, ops=(), links=()):
    # pipeline stages: pp groups (0, 2) and (1, 3) -> ranks 0, 1 stage 0 and 2, 3 stage 1;
    # dp groups (0, 1) and (2, 3) within the stages
    return cluster(steps, groups={"g_pp0": ("pp", [0, 2]), "g_pp1": ("pp", [1, 3]),
                                  "g_dp0": ("dp", [0, 1]), "g_dp1": ("dp", [2, 3])},
                   ops=list(ops), links=list(links))


def test_communication_without_op_data_behind_a_heavier_stage():
    # Stage 1 (ranks 2, 3) computes 130 ms, stage 0 100 ms: a 30 ms gap >= 7.5 ms (5 % of the
    # 150 ms median step) -> stage:1. Stage 0's Communication(Not Overlapped) 50/150 = 33.3 %
    # is examined, but there are no communication ops to split it: attached to the stage.
    ca = _pp2dp2({0: (100, 50, 0), 1: (100, 50, 0), 2: (130, 20, 0), 3: (130, 20, 0)})
    out = derive(ca)
    assert [v["id"] for v in out] == ["stage:1"]
    (s,) = out[0]["symptoms"]
    assert s["id"] == "stage:1/communication:0,1" and s["scope"] == "stage"
    assert s["message"] == (
        "Communication(Not Overlapped) takes 33.3% of the step on stage 0 (ranks 0, 1); without "
        "per-op communication data it cannot be split, but in a pipeline with a heavier stage "
        "the other stages waiting for it (and the pipeline draining) is the expected part of "
        "it.")
    assert s["evidence"]["explained_ms"] == 0.0 and s["evidence"]["stage"] == 0


def test_waiting_within_a_stage_for_a_rank_without_cause_is_unexplained():
    # stage:1 as above. Within stage 0, rank 1 waits 30 ms per step for rank 0 in their dp
    # all-reduce (40 vs 10 ms, no transit): rank 0 has no cause, and the wait does not cross
    # stages, so the stage verdict does not explain it either. Stage 0's op time: elapse
    # (10 + 40) / 2 = 25 ms, waiting 30 / 2 = 15 ms >= 0.5 x 25 -> an info verdict.
    ca = _pp2dp2({0: (100, 50, 0), 1: (100, 50, 0), 2: (130, 20, 0), 3: (130, 20, 0)},
                 ops=[("hcom_allReduce_1", "g_dp0", "collective", {0: (10, 0), 1: (40, 0)})])
    out = by_id(derive(ca))
    assert sorted(out) == ["communication:0", "stage:1"]
    v = out["communication:0"]
    assert (v["severity"], v["scope"], v["ranks"]) == ("info", "stage", [0, 1])
    assert v["message"] == (
        "Communication(Not Overlapped) takes 33.3% of the step on stage 0 (ranks 0, 1): 60% of "
        "the time in communication ops is waiting (15.0 of 25.0 ms per step), mostly for rank "
        "0; but its own Computing and Free are not above those of the ranks doing the same "
        "work, so no rank's work explains it (ranks that start their step at different times, "
        "or a delay the profile does not show).")
    assert v["evidence"]["waited_for_ranks"] == [0]
    assert v["evidence"]["cause"] == "waiting, unexplained"
    assert v["threshold"] == {"comm_share_pct": 30.0, "wait_ratio": 0.5}
    assert out["stage:1"]["symptoms"] == []


def test_even_pipeline_bubble_is_not_reported():
    # Two even stages (100 ms Computing each). Ranks 0, 1 wait 30 ms per step for ranks 2, 3
    # in their pp send/recv (40 vs 10 ms, 5 ms transit): Communication(Not Overlapped) 50/150
    # = 33.3 % passes 30 %, but without the waiting across stages it is (50 - 30) / 150 =
    # 13.3 %: the pipeline bubble, nothing to report.
    ca = _pp2dp2({0: (100, 50, 0), 1: (100, 50, 0), 2: (100, 20, 30), 3: (100, 20, 30)},
                 ops=[("hcom_send_1", "g_pp0", "p2p", {0: (40, 5), 2: (10, 5)}),
                      ("hcom_send_1", "g_pp1", "p2p", {1: (40, 5), 3: (10, 5)})])
    out = derive(ca)
    assert [v["id"] for v in out] == ["balanced"]


def _one_absent(rank1_elapse, transit):
    # group "tp" of ranks 0, 1, 2; rank 2 is not collected (world size 3). Rank 0 spends
    # 100 ms per step in the tp op, rank 1 (last present arrival) ``rank1_elapse``. Rank 0's
    # Communication(Not Overlapped) 100 of 200 ms = 50 %; rank 1's 20 of 120 ms is not examined.
    return cluster({0: (100, 100, 0), 1: (100, 20, 0)}, groups={"g_tp": ("tp", [0, 1, 2])},
                   ops=[("hcom_allGather_1", "g_tp", "collective",
                         {0: (100, transit), 1: (rank1_elapse, transit)})],
                   world_size=3)


def test_time_no_present_rank_explains_goes_to_the_collection():
    # Rank 0: transfer 20, waiting for rank 1 100 - 70 = 30, the rest 50 cannot be attributed
    # (the group misses rank 2; the profiler's Wait Time is 0, so none is "waiting on absent").
    # Waiting 30 < 0.5 x 100; unattributed 50 >= max(transfer 20, other 0, peer wait 30) ->
    # attached to the collection verdict.
    out = by_id(derive(_one_absent(70, 20)))
    assert sorted(out) == ["collection"]
    (s,) = out["collection"]["symptoms"]
    assert s["message"] == (
        "Communication(Not Overlapped) takes 50.0% of the step on rank 0: 50.0 of 100.0 ms per "
        "step inside the communication ops cannot be attributed: their groups have members "
        "not in this collection (it may be waiting on them); 20.0 ms is transfer, 30.0 ms "
        "waiting for collected peers.")
    assert s["evidence"]["explained_ms"] == 50.0
    assert s["evidence"]["unattributed_ms"] == 50.0


def test_waiting_for_a_present_peer_outweighs_the_unattributed_part():
    # Rank 0: transfer 30, waiting for rank 1 100 - 64 = 36, unattributed 34. Waiting 36 <
    # 50 (not "waiting"); unattributed 34 < peer wait 36, so it is not the collection's: a
    # communication verdict of its own, about the tp group. (Its text calls the 34 ms "neither
    # transfer nor waiting" and every member of tp collected, which rank 2 is not: not pinned.)
    out = by_id(derive(_one_absent(64, 30)))
    assert sorted(out) == ["collection", "communication:None"]
    assert out["collection"]["symptoms"] == []
    v = out["communication:None"]
    assert v["severity"] == "warning"  # 50 % >= 30 %, < 60 %
    assert v["threshold"] == {"comm_share_pct": 30.0, "wait_ratio": 0.5}
    assert v["groups"] == [{"name": "tp", "id": gid("g_tp"), "global_ranks": [0, 1, 2]}]
    assert v["evidence"]["unattributed_ms"] == 34.0 and v["evidence"]["peer_wait_ms"] == 36.0
    assert v["scope"] == "rank" and v["ranks"] == [0]
    assert v["next_step"] == (
        "Open these ops on the timeline of all ranks: time common to every member usually means "
        "all ranks waited for the same thing (host-side launch of the op's tasks, a "
        "synchronisation, the first op of the step absorbing setup).")


def test_transfer_with_no_slow_link_is_the_volume():
    # Ranks 0, 1 (dp) spend 40.002 and 40 ms per step in the all-reduce, 30 of it transit:
    # rank 0 waits 2 µs for rank 1, transfer 30 >= other 10. The link 0->1 and 1->0 move 12.3456 MB in
    # 2 ms each (6.1728 GB/s), alike: no slow link. Both ranks 50/150 = 33.3 % -> a
    # communication verdict "transfer": HCCS, 24.6912 MB / 4 ms = 6.1728 GB/s, 12.3456 MB per
    # rank (median of the reporting ranks' sums).
    ca = cluster({0: (100, 50, 0), 1: (100, 50, 0)}, groups={"g_dp": ("dp", [0, 1])},
                 ops=[("hcom_allReduce_1", "g_dp", "collective",
                       {0: (40.002, 30), 1: (40, 30)})],
                 links=[("g_dp", 0, 1, "HCCS", 12.3456, 2, 0),
                        ("g_dp", 1, 0, "HCCS", 12.3456, 2, 1)])
    out = by_id(derive(ca))
    assert sorted(out) == ["communication:None"]
    v = out["communication:None"]
    ev = v["evidence"]
    assert ev["cause"] == "transfer" and ev["group"] == "dp"
    assert ev["transport"] == "HCCS"
    assert ev["bandwidth_gbps"] == 6.1728
    assert ev["size_mb_per_rank"] == 12.346
    # rank 0 arrives 2 µs before rank 1: 2 / 2 ranks = 1 µs per rank, just enough to be listed
    assert ev["waited_for_ms"] == {"1": 0.001}
    assert v["message"] == (
        "Communication(Not Overlapped) takes 33.3% of the step on ranks 0, 1: most of it is data "
        "transfer (30.0 of 40.0 ms per step), mostly in dp (ranks 0, 1) over HCCS at 6.17 GB/s "
        "(12.3 MB per rank and step); no link or group is slower than comparable ones, so the "
        "volume is the cost.")
    assert v["threshold"] == {"comm_share_pct": 30.0, "wait_ratio": 0.5}
    assert (v["scope"], v["ranks"], v["severity"]) == ("rank", [0, 1], "warning")
    assert v["groups"] == [{"name": "dp", "id": gid("g_dp"), "global_ranks": [0, 1]}]
    assert v["next_step"] == (
        "Overlap the communication of dp with computation (bucketed / overlapped gradient "
        "reduction) or reduce its volume (fewer, larger all-reduces; a different parallel "
        "split).")


def _with_results(ca, kind, level, missing):
    # what the engine's rank results tell the verdicts: the files the rank lacks, the profiler
    # level and the kind of source
    ca.ranks = [SimpleNamespace(rank=r, missing=list(missing),
                                source=SimpleNamespace(kind=kind, profiler_level=level))
                for r in (0, 1)]
    return ca


def test_unsplittable_communication_names_the_missing_files():
    # two ranks at 50/150 = 33.3 % Communication(Not Overlapped), no op data: the files the
    # profiler did not write are named; torch_npu without a known level: collect at level 1
    ca = _with_results(cluster({0: (100, 50, 0), 1: (100, 50, 0)}), "torch_npu", None,
                       ["communication.json", "communication_matrix.json", "kernel_details.csv"])
    (v,) = derive(ca)
    assert v["id"] == "communication:None" and v["evidence"]["cause"] == "unknown"
    assert v["message"] == (
        "Communication(Not Overlapped) takes 33.3% of the step on ranks 0, 1; whether it is "
        "waiting for a slower rank or data transfer cannot be told: communication.json, "
        "communication_matrix.json were not collected.")
    assert v["next_step"] == (
        "Collect with communication analysis on (profiler level 1 or higher: communication.json) "
        "to split this time into transfer and waiting; meanwhile compare the communication ops "
        "of all ranks on the timeline.")
    assert (v["scope"], v["ranks"], v["severity"]) == ("rank", [0, 1], "warning")
    assert v["evidence"]["missing_files"] == ["communication.json", "communication_matrix.json"]


def test_waits_across_stages_go_to_the_stage_or_the_slow_rank_they_are_for():
    # Stage 1 (ranks 2, 3) computes more: rank 2 130 ms, rank 3 150 ms; stage 0 (0, 1) 100 ms;
    # every step 150 ms. Rank 3 is 20 ms above its pair partner (>= 7.5 ms): slow_rank:3.
    # Without it stage 1 computes 130 ms, 30 ms more than stage 0: stage:1 (its Computing
    # share spread 86.7 - 66.7 = 20 % ranks it before slow_rank:3's 100 - 86.7 = 13.3 %).
    # pp send/recv per step: rank 0 waits 32 ms for rank 2, rank 1 30 ms for rank 3 (elapse
    # 42 / 40 vs 10, 5 ms transit); then the pipeline drains: ranks 2 and 3 wait 2 ms for
    # ranks 0 and 1 (12 vs 10 ms).
    ca = _pp2dp2({0: (100, 50, 0), 1: (100, 50, 0), 2: (130, 20, 0), 3: (150, 0, 0)},
                 ops=[("hcom_send_1", "g_pp0", "p2p", {0: (42, 5), 2: (10, 5)}),
                      ("hcom_send_1", "g_pp1", "p2p", {1: (40, 5), 3: (10, 5)}),
                      ("hcom_recv_2", "g_pp0", "p2p", {0: (10, 5), 2: (12, 5)}),
                      ("hcom_recv_2", "g_pp1", "p2p", {1: (10, 5), 3: (12, 5)})])
    out = derive(ca)
    assert [v["id"] for v in out] == ["stage:1", "slow_rank:3"]
    stage, slow = out
    # rank 0 waits for rank 2 (the stage's); rank 1 for rank 3 (the slow rank's, though it
    # crosses stages); ranks 2, 3 waiting for stage 0 is the drain behind the heavier stage.
    # Stage 0's op time: elapse (52 + 50) / 2 = 51 ms, waiting (32 + 30) / 2 = 31 ms >= 25.5:
    # 16 ms for rank 2 (the stage), 15 ms for rank 3 (the slow rank) -> the stage's.
    assert [s["message"] for s in stage["symptoms"]] == [
        "Stage 0 (rank 0) waits 32.0 ms per step (up to 32.0) for stage 1 (rank 2) in pp ops.",
        "Communication(Not Overlapped) takes 33.3% of the step on stage 0 (ranks 0, 1): 61% of "
        "the time in communication ops is waiting (31.0 of 51.0 ms per step): 16.0 ms for the "
        "heavier pipeline stage (ranks 2, 3) and its fill/drain, 15.0 ms for rank 3 (slow "
        "rank).",
        "Stage 1 (ranks 2, 3) waits 2.0 ms per step (up to 2.0) for stage 0 (ranks 0, 1) in pp "
        "ops: the pipeline fills and drains behind the heavier stage, a consequence of the "
        "imbalance, not a second cause."]
    assert [s["evidence"].get("pipeline_fill_drain") for s in stage["symptoms"]] == [
        False, None, True]
    assert stage["evidence"]["peer_wait_explained_ms"] == 36.0  # 32 + 2 + 2
    assert [s["message"] for s in slow["symptoms"]] == [
        "Stage 0 (rank 1) waits 30.0 ms per step (up to 30.0) for rank 3 in pp ops."]
    assert slow["evidence"]["peer_wait_explained_ms"] == 30.0


def test_a_rank_late_only_because_it_waited_passes_the_wait_on():
    # Rank 0 computes 130 ms, ranks 1-3 100 ms (every step 150 ms): slow_rank:0. In tp (0, 1)
    # rank 1 waits 30 ms for rank 0 (40 vs 10 ms, 5 ms transit) and rank 0 waits 1 ms for
    # rank 1 in a broadcast (3 vs 2 ms); in dp (1, 2) rank 2 waits 25 ms for rank 1 (35 vs 10
    # ms): rank 1 was late only because it waited for rank 0, so that wait is rank 0's too.
    ca = cluster({0: (130, 20, 0), 1: (100, 50, 0), 2: (100, 50, 0), 3: (100, 50, 0)},
                 groups={"g_a": ("tp", [0, 1]), "g_b": ("dp", [1, 2])},
                 ops=[("hcom_allReduce_1", "g_a", "collective", {0: (10, 5), 1: (40, 5)}),
                      ("hcom_broadcast_2", "g_a", "collective", {0: (3, 0), 1: (2, 0)}),
                      ("hcom_allReduce_3", "g_b", "collective", {1: (10, 5), 2: (35, 5)})])
    (v,) = derive(ca)
    assert v["id"] == "slow_rank:0"
    # ranks 1-3 pass 30 % (50 / 150): op time (52 + 35 + 0) / 3 = 29 ms, waiting (30 + 25) / 3
    # = 18.33 ms (63 %), all of it for rank 0 directly or through rank 1
    assert [s["message"] for s in v["symptoms"]] == [
        "Rank 1 waits 30.0 ms per step (up to 30.0) for rank 0 in tp ops.",
        "Rank 2 waits 25.0 ms per step (up to 25.0) for rank 1 in dp ops.",
        "Communication(Not Overlapped) takes 33.3% of the step on ranks 1–3: 63% of the time in "
        "communication ops is waiting (18.3 of 29.0 ms per step): 18.3 ms for rank 0 (slow "
        "rank)."]
    assert v["evidence"]["peer_wait_explained_ms"] == 55.0


def test_a_contributed_cross_stage_cause_takes_the_pipeline_waits():
    # The even pipeline of test_even_pipeline_bubble_is_not_reported, plus a contributed cause
    # on stage 1 that explains waiting across stages (``_cross_stage``) without naming late
    # ranks: ranks 0, 1 waiting 30 ms for stage 1 is its symptom, as fill / drain.
    ca = _pp2dp2({0: (100, 50, 0), 1: (100, 50, 0), 2: (100, 20, 30), 3: (100, 20, 30)},
                 ops=[("hcom_send_1", "g_pp0", "p2p", {0: (40, 5), 2: (10, 5)}),
                      ("hcom_send_1", "g_pp1", "p2p", {1: (40, 5), 3: (10, 5)})])

    def data_rule(ca, th):
        v = make_verdict("data", "stage", [2, 3], "warning", "Stage 1 waits for its data.",
                         "Look at the data loader.", id="data:1")
        v["_cross_stage"] = True
        return [v]

    out = V.derive(ca, V.thresholds(None), contributed={"data": data_rule})
    (v,) = out
    assert v["id"] == "data:1"
    msgs = [s["message"] for s in v["symptoms"]]
    assert ("Stage 0 (ranks 0, 1) waits 30.0 ms per step (up to 30.0) for stage 1 (ranks 2, 3) "
            "in pp ops: the pipeline fills and drains behind the heavier stage, a consequence of "
            "the imbalance, not a second cause.") in msgs


def test_waiting_on_ranks_not_collected_is_the_collections():
    # tp = ranks 0, 1, 2; rank 2 is not collected. Rank 1 arrives last of the present ones
    # (90 vs 100 ms) and its profiler Wait Time says it waited 60 ms (for rank 2). Split,
    # rank 0: transfer 10, waiting for rank 1 10, waiting on rank 2 60, unattributed 20;
    # rank 1: 10, 0, 60, 20. Shares 100/200 = 50 % and 90/190 = 47.4 %: both examined.
    # Waiting (5 + 60) / 95 = 68 % of their op time; rank 1 has no cause, the 60 ms on rank 2
    # are the collection's (>= half of 65).
    ca = cluster({0: (100, 100, 0), 1: (100, 90, 0)}, groups={"g_tp": ("tp", [0, 1, 2])},
                 ops=[("hcom_allGather_1", "g_tp", "collective",
                       {0: (100, 10, 0), 1: (90, 10, 60)})], world_size=3)
    (v,) = derive(ca)
    assert v["id"] == "collection"
    assert v["evidence"]["wait_on_absent_ms"] == {"0": 60.0, "1": 60.0}
    assert v["evidence"]["unattributed_ms"] == {"0": 20.0, "1": 20.0}
    (s,) = v["symptoms"]
    assert s["message"] == (
        "Communication(Not Overlapped) takes 47.4–50.0% of the step on ranks 0, 1: 68% of the "
        "time in communication ops is waiting (65.0 of 95.0 ms per step): 60.0 ms on ranks not "
        "in this collection.")
    assert s["evidence"]["explained_ms"] == 60.0
    assert s["evidence"]["waited_for_ms"] == {"1": 5.0}


def test_transfer_slowed_by_a_slow_link_is_its_symptom():
    # dp ring 0->1->2->3->0 over RDMA, 10 MB per step: 0->1 in 5 ms (2 GB/s), the others in
    # 0.5 ms (20 GB/s) -> 0->1 at 10 % of the median: slow_link, critical. In the dp
    # all-reduce every rank spends 40 ms, 30 of it transit, nobody waits; 50/150 = 33.3 % is
    # examined: transfer 30 + the rest 10 of dp, which the slow link is in -> its symptom.
    links = [("g_dp", s, (s + 1) % 4, "RDMA", 10, 5 if s == 0 else 0.5, s) for s in range(4)]
    ca = cluster({r: (100, 50, 0) for r in range(4)}, groups={"g_dp": DP},
                 ops=[("hcom_allReduce_1", "g_dp", "collective",
                       {r: (40, 30) for r in range(4)})], links=links)
    (v,) = derive(ca)
    assert v["id"] == "slow_link:RDMA:0->1" and v["severity"] == "critical"
    (s,) = v["symptoms"]
    assert s["message"] == (
        "Communication(Not Overlapped) takes 33.3% of the step on ranks 0–3: most of the time in "
        "communication ops is transfer and time spent inside the ops of dp (40.0 of 40.0 ms per "
        "step), slowed by the slow link (dp).")
    assert s["evidence"]["explained_ms"] == 40.0


def test_slow_rank_symptoms_are_capped_and_tiny_waits_left_out():
    # Rank 0 computes 130 ms, ranks 1-10 100 ms: slow_rank:0. Rank i (1-9) waits 30 - i ms
    # for rank 0 in group n<i> (ranks 0, i); rank 10 waits 0.04 ms in n10. Ranks 1-10 pass
    # 30 % (50 / 150): their waiting (225.04 / 10 = 22.5 ms per rank) is attached first; then
    # at most 8 symptoms in all: the 7 largest waits (ranks 1-7), listed before it (the
    # largest first). The explained total counts every wait: 29 + ... + 21 + 0.04 = 225.04.
    groups = {f"g{i}": (f"n{i}", [0, i]) for i in range(1, 11)}
    ops = [("hcom_allReduce_1", f"g{i}", "collective",
            {0: (10, 5), i: (10 + (30 - i if i < 10 else 0.04), 5)}) for i in range(1, 11)]
    steps = {r: (100, 50, 0) for r in range(1, 11)}
    steps[0] = (130, 20, 0)
    (v,) = derive(cluster(steps, groups=groups, ops=ops))
    assert v["id"] == "slow_rank:0"
    assert len(v["symptoms"]) == 8
    assert [s["ranks"] for s in v["symptoms"]] == [[i] for i in range(1, 8)] + [
        list(range(1, 11))]
    assert v["symptoms"][7]["evidence"]["explained_ms"] == 22.504
    assert v["symptoms"][0]["message"] == (
        "Rank 1 waits 29.0 ms per step (up to 29.0) for rank 0 in n1 ops.")
    assert v["evidence"]["peer_wait_explained_ms"] == 225.04


def test_tiny_waits_are_not_symptoms():
    # the slow rank 3 of test_waits_for_a_slow_rank_are_its_symptoms; in two more groups rank
    # 0 waits 0.06 ms (tp, ranks 0, 3) and rank 1 0.04 ms (ep, ranks 1, 3) for rank 3: the
    # first is listed, the second (< 0.05 ms) is not, but counted: 90.9 + 0.06 + 0.04 = 91.0
    ca = cluster({0: (100, 50, 0), 1: (100, 50, 0), 2: (100, 50, 0), 3: (130, 20, 0)},
                 groups={"g_dp": DP, "g_tp": ("tp", [0, 3]), "g_ep": ("ep", [1, 3])},
                 ops=[("hcom_allReduce_1", "g_dp", "collective",
                       {0: (40.3, 5), 1: (40.3, 5), 2: (40.3, 5), 3: (10, 5)}),
                      ("hcom_allReduce_2", "g_tp", "collective", {0: (1.06, 0.5), 3: (1, 0.5)}),
                      ("hcom_allReduce_3", "g_ep", "collective", {1: (1.04, 0.5), 3: (1, 0.5)})])
    (v,) = derive(ca)
    assert [s["message"] for s in v["symptoms"][1:]] == [
        "Ranks 0–2 wait 30.3 ms per step (up to 30.3) for rank 3 in dp ops.",
        "Rank 0 waits 0.1 ms per step (up to 0.1) for rank 3 in tp ops."]
    assert v["evidence"]["peer_wait_explained_ms"] == 91.0


def _no_op_data(kind, level, missing):
    return _with_results(cluster({0: (100, 50, 0), 1: (100, 50, 0)}), kind, level, missing)


def test_unsplittable_communication_what_to_collect_depends_on_the_source():
    # torch_npu at Level0: level 1 is needed (and the level is named)
    (v,) = derive(_no_op_data("torch_npu", "Level0", ["communication.json"]))
    assert v["message"].endswith(": communication.json was not collected (profiler level "
                                 "Level0).")
    assert v["evidence"]["profiler_levels"] == ["Level0"]
    assert v["next_step"].startswith("Collect with communication analysis on")
    # legacy CANN data: no profiler level to raise
    (v,) = derive(_no_op_data("raw_cann", None, []))
    assert v["message"].endswith(": there are no per-op communication times.")
    assert v["next_step"] == (
        "Collect the communication (HCCL) data of every rank to split this time into transfer "
        "and waiting; meanwhile compare the communication ops of all ranks on the timeline.")
    # torch_npu at Level1 whose communication files are missing: copy them
    (v,) = derive(_no_op_data("torch_npu", "Level1", ["communication.json"]))
    assert v["next_step"] == (
        "Copy the communication.json the profiler wrote for ranks 0, 1 (or re-export them) to "
        "split this time into transfer and waiting.")
    (v,) = derive(_no_op_data("db", "Level1", []))
    assert v["next_step"].startswith("Copy the communication files the profiler wrote for ranks "
                                     "0, 1")


def test_the_heavier_stage_waiting_for_the_lighter_one_is_the_drain():
    # Stage 1 (ranks 2, 3) computes 130 ms, stage 0 100 ms (steps of 190 ms: gap 30 >= 9.5).
    # Ranks 2, 3 wait 30 ms per step for ranks 0, 1 in their pp recv (40 vs 10 ms, 5 ms
    # transit); ranks 0, 1 wait for nobody, so they have no cause. Stage 1's 60/190 = 31.6 %
    # is examined: 30 of its 40 ms of op time waiting across stages for ranks without a
    # cause -> the stage verdict's, as the pipeline draining.
    ca = _pp2dp2({0: (100, 20, 70), 1: (100, 20, 70), 2: (130, 60, 0), 3: (130, 60, 0)},
                 ops=[("hcom_recv_1", "g_pp0", "p2p", {0: (10, 5), 2: (40, 5)}),
                      ("hcom_recv_1", "g_pp1", "p2p", {1: (10, 5), 3: (40, 5)})])
    v = by_id(derive(ca))["stage:1"]
    assert [s["message"] for s in v["symptoms"]] == [
        "Communication(Not Overlapped) takes 31.6% of the step on stage 1 (ranks 2, 3): 75% of "
        "the time in communication ops is waiting (30.0 of 40.0 ms per step): 30.0 ms for the "
        "heavier pipeline stage (ranks 2, 3) and its fill/drain.",
        "Stage 1 (ranks 2, 3) waits 30.0 ms per step (up to 30.0) for stage 0 (ranks 0, 1) in pp "
        "ops: the pipeline fills and drains behind the heavier stage, a consequence of the "
        "imbalance, not a second cause."]


def test_unexplained_waiting_names_the_ranks_waited_for_most():
    # No cause anywhere (every step 150 ms; ranks 1-3 idle 30 ms, as much as the median).
    # Rank 0 (50 / 150 = 33.3 %) waits 20 ms for rank 1, 6 for rank 2 and 4 for rank 3 in
    # three pair groups (elapse 25, 11, 9 vs 5 ms, no transit): 30 of 45 ms waiting (67 %).
    # Named: the ranks waited for at least a quarter of the most (20 / 4 = 5): ranks 1, 2.
    ca = cluster({0: (100, 50, 0), 1: (100, 20, 30), 2: (100, 20, 30), 3: (100, 20, 30)},
                 groups={f"g{i}": (f"p{i}", [0, i]) for i in (1, 2, 3)},
                 ops=[("hcom_allReduce_1", "g1", "collective", {0: (25, 0), 1: (5, 0)}),
                      ("hcom_allReduce_2", "g2", "collective", {0: (11, 0), 2: (5, 0)}),
                      ("hcom_allReduce_3", "g3", "collective", {0: (9, 0), 3: (5, 0)})])
    out = by_id(derive(ca))
    assert sorted(out) == ["balanced", "communication:None"]  # a note only: "balanced" too
    v = out["communication:None"]
    assert v["severity"] == "info"
    assert v["message"] == (
        "Communication(Not Overlapped) takes 33.3% of the step on rank 0: 67% of the time in "
        "communication ops is waiting (30.0 of 45.0 ms per step), mostly for ranks 1, 2; but "
        "their own Computing and Free are not above those of the ranks doing the same work, so "
        "no rank's work explains it (ranks that start their step at different times, or a delay "
        "the profile does not show).")
    assert v["next_step"].startswith("Open ranks 1, 2 and rank 0 on the timeline")
    assert v["evidence"]["waited_for_ranks"] == [1, 2]
    assert v["evidence"]["waited_for_ms"] == {"1": 20.0, "2": 6.0, "3": 4.0}


def test_lateness_is_followed_through_four_ranks_at_most():
    # Rank 5 computes 130 ms, ranks 0-4 and 6 100 ms: slow_rank:5. A chain of pair groups c<i>
    # = (i, i + 1): rank i waits 10 ms for rank i + 1 (15 vs 5 ms), and in c6 = (6, 0) rank 6
    # waits 10 ms for rank 0. Ranks 4, 3, 2, 1 are late only because they waited: followed
    # back four links from rank 5, so the waits for them (and rank 0's for rank 1) are rank
    # 5's; rank 0, five links away, is not followed: rank 6's wait for it is not attributed.
    # Ranks 0-4, 6 (50 / 150) are examined: op time (5 x 20 + 15) / 6 = 19.17 ms, waiting 10
    # (52 %), 5 x 10 / 6 = 8.33 ms of it for ranks with rank 5's cause.
    groups = {f"g{i}": (f"c{i}", [i, i + 1]) for i in range(5)}
    groups["g6"] = ("c6", [6, 0])
    ops = [("hcom_allReduce_1", f"g{i}", "collective", {i: (15, 0), i + 1: (5, 0)})
           for i in range(5)]
    ops.append(("hcom_allReduce_1", "g6", "collective", {6: (15, 0), 0: (5, 0)}))
    steps = {r: (100, 50, 0) for r in (0, 1, 2, 3, 4, 6)}
    steps[5] = (130, 20, 0)
    (v,) = derive(cluster(steps, groups=groups, ops=ops))
    assert v["id"] == "slow_rank:5"
    assert [s["message"] for s in v["symptoms"]] == [
        "Rank 0 waits 10.0 ms per step (up to 10.0) for rank 1 in c0 ops.",
        "Rank 1 waits 10.0 ms per step (up to 10.0) for rank 2 in c1 ops.",
        "Rank 2 waits 10.0 ms per step (up to 10.0) for rank 3 in c2 ops.",
        "Rank 3 waits 10.0 ms per step (up to 10.0) for rank 4 in c3 ops.",
        "Rank 4 waits 10.0 ms per step (up to 10.0) for rank 5 in c4 ops.",
        "Communication(Not Overlapped) takes 33.3% of the step on ranks 0–4, 6: 52% of the time "
        "in communication ops is waiting (10.0 of 19.2 ms per step): 8.3 ms for rank 5 (slow "
        "rank)."]


def test_communication_goes_to_the_slow_link_of_the_group_it_is_spent_in():
    # Two groups over ranks 0-3, each with an RDMA ring of 10 MB per step and one slow link
    # (2 vs 20 GB/s: 10 % of its group name's median): dp's 0->1, ep's 2->3. Every rank spends
    # 30 ms per step in the dp all-reduce (25 transit) and 10 in the ep one (8 transit);
    # nobody waits. Of the 40 ms, dp holds 30 (>= half): the dp link's symptom; none for ep's.
    links = [(key, s, (s + 1) % 4, "RDMA", 10, 5 if s == slow else 0.5, s)
             for key, slow in (("g_dp", 0), ("g_ep", 2)) for s in range(4)]
    ca = cluster({r: (100, 50, 0) for r in range(4)},
                 groups={"g_dp": DP, "g_ep": ("ep", [0, 1, 2, 3])},
                 ops=[("hcom_allReduce_1", "g_dp", "collective", {r: (30, 25) for r in range(4)}),
                      ("hcom_allReduce_2", "g_ep", "collective", {r: (10, 8) for r in range(4)})],
                 links=links)
    out = by_id(derive(ca))
    assert sorted(out) == ["slow_link:RDMA:0->1", "slow_link:RDMA:2->3"]
    assert out["slow_link:RDMA:2->3"]["symptoms"] == []
    (s,) = out["slow_link:RDMA:0->1"]["symptoms"]
    assert s["message"] == (
        "Communication(Not Overlapped) takes 33.3% of the step on ranks 0–3: most of the time in "
        "communication ops is transfer and time spent inside the ops of dp (30.0 of 40.0 ms per "
        "step), slowed by the slow link (dp).")
    assert s["evidence"]["explained_ms"] == 30.0


def test_communication_beyond_the_bubble_on_one_rank_is_examined():
    # The even pipeline of test_even_pipeline_bubble_is_not_reported, but rank 1 also waits
    # 25 ms per step for rank 0 in their dp all-reduce (30 vs 5 ms) and spends 100 ms per
    # step in communication (200 ms steps): without the 30 ms across stages still
    # (100 - 30) / 200 = 35 % >= 30 %, so stage 0 is examined: waiting (30 + 55) / 2 = 42.5
    # of (45 + 70) / 2 = 57.5 ms, for ranks without a cause -> an info verdict.
    ca = _pp2dp2({0: (100, 50, 0), 1: (100, 100, 0), 2: (100, 20, 30), 3: (100, 20, 30)},
                 ops=[("hcom_send_1", "g_pp0", "p2p", {0: (40, 5), 2: (10, 5)}),
                      ("hcom_send_1", "g_pp1", "p2p", {1: (40, 5), 3: (10, 5)}),
                      ("hcom_allReduce_2", "g_dp0", "collective", {0: (5, 0), 1: (30, 0)})])
    out = by_id(derive(ca))
    assert sorted(out) == ["balanced", "communication:0"]
    assert out["communication:0"]["message"].startswith(
        "Communication(Not Overlapped) takes 33.3–50.0% of the step on stage 0 (ranks 0, 1): 74% "
        "of the time in communication ops is waiting (42.5 of 57.5 ms per step), mostly for "
        "ranks 0, 2, 3;")


def test_bubble_share_compared_exactly_with_the_threshold():
    # Even stages, 500 ms steps (321 ms Computing everywhere). Ranks 0, 1: 179 ms
    # Communication(Not Overlapped) (35.8 %), 30 of it waiting across stages for ranks 2, 3
    # (40 vs 10 ms pp sends): without it (179 - 30) / 500 = 29.8 % < 30 %: the bubble only.
    ca = _pp2dp2({0: (321, 179, 0), 1: (321, 179, 0), 2: (321, 149, 30), 3: (321, 149, 30)},
                 ops=[("hcom_send_1", "g_pp0", "p2p", {0: (40, 5), 2: (10, 5)}),
                      ("hcom_send_1", "g_pp1", "p2p", {1: (40, 5), 3: (10, 5)})])
    assert [v["id"] for v in derive(ca)] == ["balanced"]
