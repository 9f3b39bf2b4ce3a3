"""The cause rules (verdicts/rules.py) on small hand-built clusters with one injected cause each:
a slow rank, a slow node, an uneven split, a rank idling, many slow links, missing ranks, a
legacy iteration trace. Expected verdicts are worked out below from what was injected
(tests/_hand_cluster.py: ms per step, the same in both steps unless a list gives each step)."""

from __future__ import annotations

from types import SimpleNamespace

import pyarrow as pa
import pytest

from ascendprof.analyze import verdicts as V
from ascendprof.analyze.verdicts import rules

from _hand_cluster import MS, by_id, cluster, derive, gid

PP2DP2 = {"g_pp0": ("pp", [0, 2]), "g_pp1": ("pp", [1, 3]), "g_dp0": ("dp", [0, 1]),
          "g_dp1": ("dp", [2, 3])}


def _ref(key):
    name, ranks = PP2DP2[key]
    return {"name": name, "id": gid(key), "global_ranks": ranks}


def _slow_rank_3_of_stage_1():
    # stages from pp (0, 2), (1, 3): stage 0 = ranks 0, 1, stage 1 = ranks 2, 3. Every step
    # 120 ms; rank 3 computes 120 ms (no communication), the others 100 ms + 20 ms.
    return cluster({0: (100, 20, 0), 1: (100, 20, 0), 2: (100, 20, 0), 3: (120, 0, 0)},
                   groups=PP2DP2)


def test_slow_rank_of_a_pair_in_a_stage():
    # Stage 1 is a pair: rank 3's baseline is rank 2 (100 ms), excess 20 ms >= 6 ms (5 % of
    # 120 ms) -> slow_rank:3, critical (20 >= 2 x 6). Robust z over the pair: median 110, MAD
    # 10 -> 0.6745 x 10 / 10 = 0.67 (a pair needs none). Left out of its stage's Computing,
    # the stages compute alike (100 ms): no stage verdict.
    out = derive(_slow_rank_3_of_stage_1())
    assert [v["id"] for v in out] == ["slow_rank:3"]
    v = out[0]
    assert (v["category"], v["scope"], v["severity"], v["ranks"]) == (
        "slow_rank", "rank", "critical", [3])
    ev = v["evidence"]
    assert ev["stage"] == 1 and ev["part"] == "Computing" and ev["n_peers"] == 2
    assert ev["peers"] == [2, 3]
    assert ev["computing_ms"] == {"2": 100.0, "3": 120.0}
    assert ev["baseline_ms"] == 100.0 and ev["excess_ms"] == {"3": 20.0}
    assert ev["excess_of_step_pct"] == {"3": 16.67}
    assert ev["robust_z"] == {"3": 0.67}
    assert ev["arrives_late_ms"] == {"3": 0.0}
    assert ev["max_peer_wait_for_it_ms"] == {"3": 0.0}
    assert ev["peer_waits_visible"] == {"3": False}
    assert ev["steps_slow"] == [1, 2] and ev["persistent"] is True
    assert ev["by_step"] == {s: {"computing_ms": 120.0, "baseline_ms": 100.0, "excess_ms": 20.0}
                             for s in ("1", "2")}
    assert ev["threshold_ms"] == 6.0 and ev["median_step_ms"] == 120.0
    # shares of the 120 ms step: 100 / 120 = 83.33 %, 120 / 120 = 100 %; spread 16.67
    assert ev["computing_share_pct"] == {"2": 83.33, "3": 100.0}
    assert ev["peers_median_ms"] == 110.0 and ev["share_spread_pct"] == 16.67
    assert ev["step_values"] == {"3": "reported"}
    assert v["next_step"] == (
        "Compare the kernels and op statistics of rank 3 with rank 2 (`ascendprof diff DIR "
        "--ranks 2,3`): the same ops slower point at the device (AI Core frequency, "
        "temperature); more ops or larger shapes at more work assigned there.")
    assert v["threshold"] == {"excess_of_step_pct": 5.0, "min_excess_ms": 1.0,
                              "slow_rank_mad_z": 3.5}
    # the groups holding rank 3 and another collected rank, named ones by name: dp, then pp
    assert v["groups"] == [_ref("g_dp1"), _ref("g_pp1")]
    assert v["message"] == (
        "Rank 3 computes 120.0 ms per step, 20.0 ms (16.7% of the step) more than the stage 1 "
        "ranks doing the same work (rank 2: 100.0 ms) (groups dp (ranks 2, 3), pp (ranks 1, 3)); "
        "they wait for it in the next collective. It is slower in every step (2).")


def _partials(rank, matmul_ms, cast_ms):
    # the op statistics and kernels of one rank over its 2 steps
    ops = pa.Table.from_pylist([
        {"rank": rank, "op_type": "MatMulV3", "accelerator_core": "AI_CORE",
         "total_ns": round(2 * matmul_ms * MS), "count": 4},
        {"rank": rank, "op_type": "Cast", "accelerator_core": "AI_VECTOR_CORE",
         "total_ns": round(2 * cast_ms * MS), "count": 8}])
    kernels = pa.Table.from_pylist([
        {"rank": rank, "name": "aclnnMatmul", "input_shapes": "4096,4096",
         "op_type": "MatMulV3", "total_ns": round(2 * matmul_ms * MS), "count": 4}])
    return ops, kernels


def _with_kernels(ca, per_rank, ranks=(0, 1, 2, 3)):
    res = []
    for r in ranks:
        ops, kernels = _partials(r, *per_rank[r]) if r in per_rank else (None, None)
        res.append(SimpleNamespace(rank=r, missing=[], op_partial=ops, kernel_partial=kernels))
    ca.ranks = res
    return ca


def test_slow_rank_names_the_ops_it_spends_the_excess_in():
    # rank 3: MatMulV3 40 ms and Cast 10 ms per step; rank 2: 30 and 5 -> +10.0 and +5.0 ms
    ca = _with_kernels(_slow_rank_3_of_stage_1(), {2: (30, 5), 3: (40, 10)})
    (v,) = derive(ca)
    assert v["message"].endswith(
        "It is slower in every step (2). Its excess over its peers, per step: op types MatMulV3 "
        "+10.0 ms, Cast +5.0 ms; kernels aclnnMatmul [4096,4096] +10.0 ms.")
    assert [d["op_type"] for d in v["evidence"]["which_ops"]["op_types"]] == ["MatMulV3", "Cast"]


def test_ops_text():
    assert rules._ops_text({}) == ""
    assert rules._ops_text({"op_types": []}) == ""
    # an op type on two kinds of core is told apart by the core; at most n (3) entries; no
    # kernels: no kernel part
    ex = {"op_types": [
        {"op_type": "Cast", "accelerator_core": "AI_CORE", "excess_ms": 2.0},
        {"op_type": "MatMul", "accelerator_core": "AI_CORE", "excess_ms": 1.5},
        {"op_type": "Cast", "accelerator_core": "AI_VECTOR_CORE", "excess_ms": 1.04},
        {"op_type": "Add", "accelerator_core": "AI_VECTOR_CORE", "excess_ms": 0.5}]}
    assert rules._ops_text(ex) == ("op types Cast (AI_CORE) +2.0 ms, MatMul +1.5 ms, "
                                   "Cast (AI_VECTOR_CORE) +1.0 ms")
    assert rules._ops_text(ex, 1) == "op types Cast (AI_CORE) +2.0 ms"


def _two_nodes(comp_0_1):
    # 8 ranks, no stages; ranks 0-3 are one server (HCCS links 0-1, 1-2, 2-3 of tp group
    # g_a), ranks 4-7 another (g_b). Every rank 10 ms communication; ranks 2-7 compute 100 ms.
    steps = {r: (100, 10, 0) for r in range(2, 8)}
    steps.update({r: [(c, 10, 0) for c in comp_0_1] for r in (0, 1)})
    links = [(key, s, s + 1, "HCCS", 10, 1, s) for key in ("g_a", "g_b") for s in (0, 1, 2)]
    return cluster(steps, groups={"g_a": ("tp", [0, 1, 2, 3]), "g_b": ("tp", [4, 5, 6, 7])},
                   links=links)


def test_slow_ranks_of_one_node_are_one_cause():
    # Ranks 0, 1 compute 160 ms in step 1 and 100 in step 2 (mean 130): +30 ms over the median
    # of 8 (100, MAD 0: outliers); half of node 0-3 is slow -> one cause for the node. Median
    # step 110 ms -> threshold 5.5 ms; 30 >= 11: critical. Step by step they stand out in
    # step 1 only (60 ms over 100).
    out = derive(_two_nodes([160, 100]))
    assert [v["id"] for v in out] == ["slow_rank:0,1"]
    v = out[0]
    assert (v["scope"], v["severity"], v["ranks"]) == ("node", "critical", [0, 1])
    assert v["evidence"]["scope_kind"] == "node"
    assert v["evidence"]["steps_slow"] == [1] and v["evidence"]["persistent"] is False
    assert v["message"] == (
        "Ranks 0, 1 (one node, joined by HCCS) compute 130.0–130.0 ms per step, 30.0 ms (27.3% "
        "of the step) more than the ranks doing the same work (ranks 2–7: 100.0 ms) (groups tp "
        "(ranks 0–3)); they wait for them in the next collective. They stand out in 1 of 2 "
        "steps (1).")
    assert v["next_step"].startswith("Compare the kernels and op statistics of ranks 0, 1 with "
                                     "rank 2 (`ascendprof diff DIR --ranks 2,0`)")
    assert "the devices of that node" in v["next_step"]


def test_an_uneven_split_is_one_compute_verdict():
    # 4 ranks computing 100, 100, 130, 131 ms (+10 ms communication): median 115, threshold
    # 5 % of the 125 ms median step = 6.25 ms -> ranks 2, 3 above it, but with MAD 15 their z
    # is 0.67 and 0.72 (< 3.5): not outliers, an uneven split of the set. Baseline: the
    # median of ranks 0, 1 (100 ms); excess 30 and 31 ms, critical (31 >= 12.5).
    ca = cluster({0: (100, 10, 0), 1: (100, 10, 0), 2: (130, 10, 0), 3: (131, 10, 0)})
    out = derive(ca)
    assert [v["id"] for v in out] == ["compute:2,3"]
    v = out[0]
    assert (v["category"], v["scope"], v["severity"]) == ("compute", "group", "critical")
    assert v["evidence"]["excess_ms"] == {"2": 30.0, "3": 31.0}
    assert v["message"] == (
        "Ranks 2, 3 compute 130.0–131.0 ms per step, 30.0 ms or more above the other ranks "
        "doing the same work (ranks 0, 1: 100.0 ms): the work is not split evenly.")
    assert v["next_step"] == (
        "Compare the op statistics of ranks 2, 3 with ranks 0, 1: uneven batch or sequence "
        "lengths, or more layers / experts on these ranks.")


def test_idle_rank_among_many_peers():
    # 18 ranks: 100 ms computing, 10 ms communication; rank 17 also idles 30 ms per step.
    # Threshold 5 % of 110 = 5.5 ms; 30 >= 11: critical. No communication data: whether its
    # peers wait for it cannot be seen. 17 other ranks are counted, not listed.
    steps = {r: (100, 10, 0) for r in range(17)}
    steps[17] = (100, 10, 30)
    out = derive(cluster(steps))
    assert [v["id"] for v in out] == ["schedule:17"]
    v = out[0]
    assert v["severity"] == "critical" and v["scope"] == "rank"
    assert v["message"] == (
        "Rank 17 is idle (Free) 30.0 ms per step, 30.0 ms (27.3% of the step) more than the "
        "ranks doing the same work (17 ranks: 0.0 ms), and whether its peers wait for it cannot "
        "be seen (no communication data with them): the host does not keep the device busy.")
    assert v["next_step"] == (
        "Open the timeline of rank 17 next to rank 0: vertical host-to-device launch lines mean "
        "the device outruns the host (dispatch-bound); look at host-side work, data loading and "
        "synchronisation there.")
    assert v["evidence"]["peer_waits_visible"] == {"17": False}
    assert v["threshold"] == {"excess_of_step_pct": 5.0, "min_excess_ms": 1.0,
                              "slow_rank_mad_z": 3.5, "blame_ratio": 0.5}


def test_longer_step_nobody_waits_for_is_a_note():
    # 4 ranks in one dp all-reduce of 10 ms each (5 ms transit: nobody waits); rank 3 idles
    # 30 ms more per step. Its peers' ops show it arrives 0 ms late < 0.5 x 30: a note.
    ca = cluster({0: (100, 10, 0), 1: (100, 10, 0), 2: (100, 10, 0), 3: (100, 10, 30)},
                 groups={"g_dp": ("dp", [0, 1, 2, 3])},
                 ops=[("hcom_allReduce_1", "g_dp", "collective",
                       {r: (10, 5) for r in range(4)})])
    out = by_id(derive(ca))
    assert sorted(out) == ["balanced", "long_step:3"]
    v = out["long_step:3"]
    assert (v["severity"], v["scope"], v["ranks"], v["groups"]) == ("info", "rank", [3], [])
    # Free shares: 0 and 30 / 140 = 21.43 %; median step 110 ms (threshold 5.5 ms); the
    # others' steps 110 ms
    assert v["evidence"] == {
        "part": "Free", "n_peers": 4, "stage": None,
        "free_ms": {"0": 0.0, "1": 0.0, "2": 0.0, "3": 30.0},
        "free_share_pct": {"0": 0.0, "1": 0.0, "2": 0.0, "3": 21.43},
        "peers_median_ms": 0.0, "share_spread_pct": 21.43, "median_step_ms": 110.0,
        "threshold_ms": 5.5, "step_values": {"3": "reported"}, "peers": [0, 1, 2, 3],
        "ranks": [3], "extra_free_ms": 30.0, "extra_free_ms_by_rank": {"3": 30.0},
        "arrives_late_ms": {"3": 0.0}, "max_peer_wait_for_it_ms": {"3": 0.0},
        "step_ms": {"3": 140.0}, "peers_step_median_ms": 110.0}
    assert v["threshold"] == {"excess_of_step_pct": 5.0, "min_excess_ms": 1.0,
                              "slow_rank_mad_z": 3.5, "blame_ratio": 0.5}
    assert v["message"] == (
        "Rank 3's step is longer than its peers' but nobody waits for it: its device idles "
        "(Free) 30.0 ms per step, 30.0 ms more than the ranks doing the same work, while at the "
        "collectives it arrives only 0.0 ms later than the others (the most any rank waits for "
        "it: 0.0 ms per step). So either its step window in step_trace_time.csv starts earlier "
        "or ends later than theirs (idle time outside the work they share), or its step values "
        "and communication data disagree. No rank is slowed by it.")
    assert v["next_step"] == (
        "Open the timeline of rank 3 next to rank 0 and compare where their steps begin and "
        "end; nothing needs a fix unless the idle time is inside the step's work.")


def _ring(slow: dict):
    # 12 ranks in one dp group (global = group-local ranks); RDMA links moving 10 MB per step:
    # 6->7, 7->8, 8->9, 9->10, 10->11, 11->6 at 20 GB/s (0.5 ms), and 0->d at slow[d] GB/s.
    links = [("g_dp", s, 6 + (s - 5) % 6, "RDMA", 10, 0.5, s) for s in range(6, 12)]
    links += [("g_dp", 0, d, "RDMA", 10, 10 / bw, 0) for d, bw in slow.items()]
    return cluster({r: (100, 10, 0) for r in range(12)},
                   groups={"g_dp": ("dp", list(range(12)))}, links=links)


def test_one_slow_link():
    # link 0->1 at 2 GB/s among six at 20: 10 % of the median 20 GB/s < 60 %, critical
    # (<= 30 %)
    (v,) = derive(_ring({1: 2}))
    assert v["id"] == "slow_link:RDMA:0->1"
    assert (v["category"], v["scope"], v["severity"], v["ranks"]) == (
        "slow_link", "link", "critical", [0, 1])
    # compared with the 7 links of its group name (>= 3): median 20 GB/s
    assert v["evidence"] == {
        "transport": "RDMA", "group": "dp", "group_id": gid("g_dp"), "groups": ["dp"],
        "src_rank": 0, "dst_rank": 1, "src_group_rank": 0, "dst_group_rank": 1,
        "reported_by_rank": 0, "bandwidth_gbps": 2.0, "baseline_median_gbps": 20.0,
        "baseline": "group name", "bandwidth_ratio": 0.1, "size_mb": 10.0, "transit_ms": 5.0,
        "global_ranks_known": True, "link": "0→1", "directions_gbps": {"0→1": 2.0}}
    assert v["message"] == (
        "Slow RDMA link 0→1 in dp (ranks 0–11): 2.00 GB/s, 10% of the median 20.00 GB/s of "
        "comparable RDMA links; the transfer itself is slow, whatever the waiting.")
    assert v["next_step"] == (
        "Check the RDMA path between ranks 0 and 1: link health and error counters, lane "
        "degradation, and for RDMA the NIC, switch port and retransmissions; rerun a bandwidth "
        "test between these two devices.")
    assert v["groups"] == [{"name": "dp", "id": gid("g_dp"), "global_ranks": list(range(12))}]
    assert v["threshold"] == {"slow_link_bw_ratio": 0.6, "slow_link_min_mb": 1.0}


def test_many_slow_links_are_one_finding_about_their_distribution():
    # 5 slow links (> max_separate_verdicts 4), all from rank 0: 2, 4, 5, 8, 10 GB/s of the
    # median 20 of the 11 judged links -> ratios 0.1, 0.2, 0.25, 0.4, 0.5; rank 0 is an end of
    # all 5 (>= 3): named first. Critical: 0.1 <= 0.6 / 2.
    (v,) = derive(_ring({1: 2, 2: 4, 3: 5, 4: 8, 5: 10}))
    assert v["id"] == "slow_link:RDMA:distribution"
    assert (v["category"], v["scope"], v["severity"], v["ranks"]) == (
        "slow_link", "transport", "critical", [0])
    ev = v["evidence"]
    assert ev["transport"] == "RDMA" and ev["n_slow_links"] == 5 and ev["n_links_judged"] == 11
    assert (ev["bandwidth_ratio_min"], ev["bandwidth_ratio_median"],
            ev["bandwidth_ratio_max"]) == (0.1, 0.25, 0.5)
    assert [w["ranks"] for w in ev["worst"]] == [[0, 1], [0, 2], [0, 3], [0, 4], [0, 5]]
    assert ev["worst"][0] == {"id": "slow_link:RDMA:0->1", "ranks": [0, 1],
                              "bandwidth_gbps": 2.0, "bandwidth_ratio": 0.1,
                              "baseline_gbps": 20.0, "group": "dp"}
    assert ev["shared_rank"] == 0 and ev["ranks_at_most_slow_links"]["0"] == 5
    assert v["message"] == (
        "5 of 11 RDMA links are below 60% of the median bandwidth of comparable links: 10%–50% "
        "of it (median 25%); the worst: 0→1 10%, 0→2 20%, 0→3 25%, 0→4 40%, 0→5 50%; rank 0 is "
        "an end of 5 of them: look at it first. Link speeds spread widely across the cluster "
        "rather than one link being slow.")
    assert v["next_step"] == (
        "Run a bandwidth test over the RDMA fabric (the worst links first) and compare the link "
        "configuration of the slow ones with the fast ones (lanes, speed, firmware, switch "
        "ports).")


def _missing_rank_2():
    # world size 4, ranks 0, 1, 3 collected. tp = ranks 0, 1, 2 misses rank 2: in its all-gather
    # rank 0 takes 100 ms, rank 1 70 ms, 20 ms transit each -> rank 0 waits 30 for rank 1, the
    # rest 50 ms of each cannot be attributed. pp = ranks 1, 3 is complete (10 ms ops, 5 ms
    # transit, 5 ms other on both): rank 3 has nothing unattributed.
    return cluster({0: (100, 20, 0), 1: (100, 20, 0), 3: (100, 20, 0)},
                   groups={"g_tp": ("tp", [0, 1, 2]), "g_pp": ("pp", [1, 3])},
                   ops=[("hcom_allGather_1", "g_tp", "collective", {0: (100, 20), 1: (70, 20)}),
                        ("hcom_send_1", "g_pp", "p2p", {1: (10, 5), 3: (10, 5)})],
                   world_size=4)


def test_missing_rank_is_one_collection_verdict():
    out = derive(_missing_rank_2())
    assert [v["id"] for v in out] == ["collection"]
    v = out[0]
    assert (v["category"], v["scope"], v["severity"], v["ranks"]) == (
        "collection", "collection", "warning", [2])
    assert v["message"] == (
        "Rank 2 is not in this collection (world size 4). Groups with members missing: tp "
        "(ranks 0–2). Waiting on them cannot be attributed to a collected rank: it is reported "
        "as waiting on ranks not in this collection.")
    assert v["next_step"] == (
        "Copy the profiling directories of rank 2 beside the others and analyse again; until "
        "then time spent waiting on them is shown as 'ranks not in this collection'.")
    ev = v["evidence"]
    assert ev["groups"] == {"tp": {"id": gid("g_tp"), "members": 3, "members_exact": True,
                                   "global_ranks": [0, 1, 2], "collected": [0, 1],
                                   "absent": [2], "n_absent": 1}}
    assert ev["unattributed_ms"] == {"0": 50.0, "1": 50.0}
    assert ev["wait_on_absent_ms"] == {}
    assert (ev["world_size"], ev["collected_ranks"], ev["absent_ranks"],
            ev["unreadable_ranks"], ev["groups_with_one_collected_rank"]) == (
        4, [0, 1, 3], [2], [], [])
    assert ev["step_values"] == {"0": "reported", "1": "reported", "3": "reported"}
    assert v["groups"] == [{"name": "tp", "id": gid("g_tp"), "global_ranks": [0, 1, 2]}]


def test_unreadable_rank_is_named_with_what_to_fix():
    # ranks 0, 1 analysed, rank 2 found but not readable; nothing else expected
    ca = cluster({0: (100, 10, 0), 1: (100, 10, 0)})
    ca.ranks = [SimpleNamespace(rank=r, missing=[]) for r in (0, 1)]
    ca.sources = [SimpleNamespace(rank=r) for r in (0, 1, 2)]
    out = by_id(derive(ca))
    v = out["collection"]
    assert v["ranks"] == [] and v["evidence"]["unreadable_ranks"] == [2]
    assert v["message"].startswith("rank 2 could not be read (problems.csv says why). Waiting")
    assert v["next_step"] == "Fix what problems.csv reports for rank 2 and analyse again."


def _iterations(fp_bp_ms):
    return [{"rank": r, "step": s, "start_ns": 0, "end_ns": 0,
             "iteration_interval_ns": 5 * MS, "fp_bp_ns": round(fp * MS), "tail_ns": 10 * MS}
            for r, fp in enumerate(fp_bp_ms) for s in (1, 2)]


def test_legacy_iteration_trace_slow_card():
    # forward+backward 100, 100, 150 ms: median 100, MAD 0 -> rank 2 an outlier, 150 > 110
    ca = cluster({r: (100, 10, 0) for r in range(3)}, iterations=_iterations([100, 100, 150]))
    (v,) = derive(ca)
    assert (v["category"], v["severity"], v["ranks"]) == ("slow_card", "warning", [2])
    assert v["evidence"] == {"values_ms": {"0": 100.0, "1": 100.0, "2": 150.0},
                             "median_ms": 100.0, "source": "iteration trace"}
    assert v["next_step"].startswith("Compare these ranks' kernels and op statistics")
    assert not list(ca.problems)


def test_no_iteration_trace_no_problem():
    ca = cluster({r: (100, 10, 0) for r in range(3)})
    assert [v["id"] for v in derive(ca)] == ["balanced"]
    assert not list(ca.problems)
    ca = cluster({r: (100, 10, 0) for r in range(3)}, iterations=[])
    assert [v["id"] for v in derive(ca)] == ["balanced"]
    assert not list(ca.problems)


def test_balanced_names_the_longest_step_deviation():
    # rank 1 spends 25 ms in communication (20 %, not examined), rank 0 10 ms: steps of 125 and
    # 110 ms, median 117.5; rank 1's step 1 is 7.5 ms above it, >= 5.875 (5 % of 117.5)
    ca = cluster({0: (100, 10, 0), 1: (100, 25, 0)})
    (v,) = derive(ca)
    assert v["id"] == "balanced"
    assert v["evidence"]["longest_step_deviation"] == {
        "rank": 1, "step": 1, "step_ms": 125.0, "median_ms": 117.5, "excess_ms": 7.5,
        "threshold_ms": 5.875}
    assert "step lengths still differ: rank 1's step 1 takes 125.0 ms, 7.5 ms more than the " \
           "median of the ranks doing the same work (117.5 ms)." in v["message"]


def test_heavier_stage_names_the_pipeline_groups():
    # stage 1 (ranks 2, 3) computes 130 ms, stage 0 100 ms: gap 30 >= 7.5 ms (5 % of 150)
    ca = cluster({0: (100, 20, 30), 1: (100, 20, 30), 2: (130, 20, 0), 3: (130, 20, 0)},
                 groups=PP2DP2)
    out = derive(ca)
    v = by_id(out)["stage:1"]
    assert v["groups"] == [_ref("g_pp0"), _ref("g_pp1")]
    assert v["ranks"] == [2, 3] and v["severity"] == "critical"
    assert v["evidence"]["computing_gap_ms"] == 30.0


def test_slow_node_names_the_ops_of_its_ranks():
    # the slow node above; ranks 0, 1 spend MatMulV3 40 ms and Cast 10 ms per step, ranks 2-7
    # 30 and 5: +10.0 and +5.0 ms (medians over each side)
    ca = _with_kernels(_two_nodes([160, 100]),
                       {r: (40, 10) if r < 2 else (30, 5) for r in range(8)}, ranks=range(8))
    (v,) = derive(ca)
    assert v["message"].endswith(
        "They stand out in 1 of 2 steps (1). Their excess over their peers, per step (median "
        "over them): op types MatMulV3 +10.0 ms, Cast +5.0 ms; kernels aclnnMatmul [4096,4096] "
        "+10.0 ms.")


def test_transient_straggler():
    # 4 ranks computing 100 ms (+10 ms communication); rank 3 computes 112 ms in step 4 only:
    # a mean of 103 ms, 3 ms over the others, under the 5.5 ms threshold (5 % of the 110 ms
    # median step); in step 4 it is 12 ms over the median of that step (100, MAD 0) >= 5.5:
    # a transient straggler, critical (12 >= 11)
    steps = {r: (100, 10, 0) for r in range(3)}
    steps[3] = [(100, 10, 0), (100, 10, 0), (100, 10, 0), (112, 10, 0)]
    (v,) = derive(cluster(steps, n_steps=4))
    assert v["id"] == "slow_rank:3:transient"
    assert (v["category"], v["scope"], v["severity"], v["groups"]) == (
        "slow_rank", "rank", "critical", [])
    assert v["message"] == (
        "Rank 3 is a transient straggler: it computes 112.0 ms in step 4, 12.0 ms (12%) more "
        "than the ranks doing the same work in that step (100.0 ms); it stands out in 1 of 4 "
        "steps (4) and is in line with them in the others (mean excess 3.0 ms per step).")
    # shares: 100 / 110 = 90.91 %, 103 / 113 = 91.15 %; median step 110 ms
    assert v["evidence"] == {
        "part": "Computing", "n_peers": 4, "stage": None,
        "computing_ms": {"0": 100.0, "1": 100.0, "2": 100.0, "3": 103.0},
        "computing_share_pct": {"0": 90.91, "1": 90.91, "2": 90.91, "3": 91.15},
        "peers_median_ms": 100.0, "share_spread_pct": 0.24, "median_step_ms": 110.0,
        "threshold_ms": 5.5, "step_values": {"3": "reported"}, "peers": [0, 1, 2, 3],
        "ranks": [3], "persistent": False, "steps_slow": [4], "n_steps": 4,
        "by_step": {"4": {"computing_ms": 112.0, "baseline_ms": 100.0, "excess_ms": 12.0}},
        "excess_ms": {"3": 3.0}, "worst_step": 4, "worst_step_excess_ms": 12.0}
    assert v["next_step"] == (
        "Open step 4 of rank 3 on the timeline next to rank 0: a one-off slowdown (a host or "
        "device hiccup, frequency drop, another process) rather than more work; check whether "
        "it repeats in a longer capture.")
    assert v["threshold"] == {"excess_of_step_pct": 5.0, "min_excess_ms": 1.0,
                              "slow_rank_mad_z": 3.5}


def test_slow_group_is_one_verdict_for_its_path():
    # three dp groups of 3 ranks (0-2, 3-5, 6-8), each with 3 RDMA links of 10 MB per step;
    # those of 0-2 at 4 GB/s, the others at 20: 4 / 20 = 20 % of its siblings' median < 60 %,
    # even its fastest link: a slow group, critical (<= 30 %); its links are not judged again.
    keys = {"g1": [0, 1, 2], "g2": [3, 4, 5], "g3": [6, 7, 8]}
    links = [(k, s, (s + 1) % 3, "RDMA", 10, 2.5 if k == "g1" else 0.5, ranks[s])
             for k, ranks in keys.items() for s in range(3)]
    ca = cluster({r: (100, 10, 0) for r in range(9)},
                 groups={k: ("dp", ranks) for k, ranks in keys.items()}, links=links)
    (v,) = derive(ca)
    assert v["id"] == f"slow_group:dp:{gid('g1')}"
    assert (v["category"], v["scope"], v["severity"], v["ranks"]) == (
        "slow_group", "group", "critical", [0, 1, 2])
    assert v["evidence"] == {
        "group": "dp", "group_id": gid("g1"), "group_ranks": [0, 1, 2], "transport": "RDMA",
        "bandwidth_gbps": 4.0, "sibling_groups_median_gbps": 20.0, "bandwidth_ratio": 0.2,
        "by_transport": {"RDMA": {
            "bandwidth_gbps": 4.0, "sibling_groups_median_gbps": 20.0, "bandwidth_ratio": 0.2,
            "n_sibling_groups": 2, "links": {"0->1": 4.0, "1->2": 4.0, "2->0": 4.0},
            "size_mb_per_step": 30.0}}}
    assert v["groups"] == [{"name": "dp", "id": gid("g1"), "global_ranks": [0, 1, 2]}]
    assert v["threshold"] == {"slow_link_bw_ratio": 0.6, "slow_link_min_mb": 1.0}
    assert v["next_step"] == (
        "Check the RDMA path the ranks of dp (ranks 0–2) share: switch ports and their error "
        "counters, NIC / HCCS configuration (HCCL_RDMA_TC, HCCL_RDMA_SL, link degradation), and "
        "run a bandwidth test between two of its ranks.")
    assert v["message"] == (
        "Slow group: dp (ranks 0–2) moves data over RDMA at 4.00 GB/s (median of its 3 links), "
        "20% of the 20.00 GB/s of the other 2 dp groups: the whole group's path is slow, not "
        "one link.")
    assert "HCCL_RDMA_TC, HCCL_RDMA_SL, link degradation" in v["next_step"]


def test_group_known_only_from_the_links_is_a_lower_bound():
    # no profiler_metadata.json: group g_x is seen in the ops of ranks 0, 1 and its
    # communication_matrix.json names group-local ranks up to 3 -> at least 4 members, 2 of
    # them collected: at least 2 not in this collection
    links = [("g_x", s, s + 1, "RDMA", 10, 1, 0) for s in range(3)]
    ca = cluster({0: (100, 10, 0), 1: (100, 10, 0)},
                 ops=[("hcom_allReduce_1", "g_x", "collective", {0: (10, 5), 1: (10, 5)})],
                 links=links)
    out = by_id(derive(ca))
    v = out["collection"]
    g = gid("g_x")
    assert v["ranks"] == []
    assert v["message"] == (
        f"group {g} has at least 4 members (group-local ranks up to 3 in "
        f"communication_matrix.json; without profiler_metadata.json the exact size is unknown) "
        f"but only ranks 0, 1 were collected: at least 2 members are not in this collection. "
        f"Groups with members missing: group {g} (at least 4 members; collected: ranks 0, 1). "
        f"Waiting on them cannot be attributed to a collected rank: it is reported as waiting on "
        f"ranks not in this collection.")
    assert v["next_step"].startswith(
        f"Copy the profiling directories of the other members of group {g} (at least 2) beside "
        f"the others and analyse again")
    assert v["evidence"]["groups"] == {g: {"id": g, "members": 4, "members_exact": False,
                                           "global_ranks": None, "collected": [0, 1],
                                           "absent": None, "n_absent": 2}}


def test_groups_holding_one_collected_rank_are_named():
    # world size 4, ranks 0, 1 collected: tp (0-3) misses 2, 3; pp (1, 3) holds rank 1 only
    ca = cluster({0: (100, 10, 0), 1: (100, 10, 0)},
                 groups={"g_tp": ("tp", [0, 1, 2, 3]), "g_pp": ("pp", [1, 3])}, world_size=4)
    (v,) = derive(ca)
    assert v["ranks"] == [2, 3]
    assert v["message"] == (
        "Ranks 2, 3 are not in this collection (world size 4). Groups with members missing: pp "
        "(ranks 1, 3), tp (ranks 0–3); pp holds only one collected rank. Waiting on them cannot "
        "be attributed to a collected rank: it is reported as waiting on ranks not in this "
        "collection.")
    assert v["evidence"]["groups_with_one_collected_rank"] == ["pp"]
    assert v["evidence"]["step_values"] == {"0": "reported", "1": "reported"}
    assert [g["name"] for g in v["groups"]] == ["tp", "pp"]


def test_many_incomplete_groups_are_counted():
    # world size 16, ranks 0-7 collected; dp groups (i, i + 8): 8 groups, each with one
    # collected rank; the first 6 are listed, "and 2 more"
    ca = cluster({r: (100, 10, 0) for r in range(8)},
                 groups={f"g{i}": ("dp", [i, i + 8]) for i in range(8)}, world_size=16)
    (v,) = derive(ca)
    assert v["message"].startswith("Ranks 8–15 are not in this collection (world size 16). "
                                   "Groups with members missing: dp (ranks ")
    assert v["message"].count("dp (ranks") == 6
    assert (" and 2 more; dp, dp, dp, dp, dp, dp, dp, dp hold only one collected rank. "
            "Waiting") in v["message"]


def test_slow_link_of_a_group_without_global_ranks():
    # no metadata: the links of g_x are known by group-local ranks only; 0->1 and 1->0 move
    # 10 MB in 5 ms (2 GB/s), 1->2, 2->3 in 0.5 ms (20 GB/s); 3->0 moves 0.5 MB (< 1 MB: not
    # judged, however slow). Median of the 4 judged: (2 + 20) / 2 = 11 GB/s; 2 / 11 = 18 %.
    # (The ranks' ops in g_x, alike, make them its collected members.)
    links = [("g_x", 0, 1, "RDMA", 10, 5, 0), ("g_x", 1, 0, "RDMA", 10, 5, 1),
             ("g_x", 1, 2, "RDMA", 10, 0.5, 1), ("g_x", 2, 3, "RDMA", 10, 0.5, 2),
             ("g_x", 3, 0, "RDMA", 0.5, 5, 3)]
    ca = cluster({r: (100, 10, 0) for r in range(4)}, links=links,
                 ops=[("hcom_allReduce_1", "g_x", "collective", {r: (5, 2) for r in range(4)})])
    slow = [v for v in derive(ca) if v["category"] == "slow_link"]
    (v,) = slow
    g = gid("g_x")
    assert v["id"] == f"slow_link:RDMA:0->1@{g}"
    assert v["ranks"] == [] and v["scope"] == "link" and v["severity"] == "critical"
    ev = v["evidence"]
    assert ev["global_ranks_known"] is False and ev["link"] == "0↔1"
    assert ev["directions_gbps"] == {"0→1": 2.0, "1→0": 2.0}
    assert ev["baseline_median_gbps"] == 11.0 and ev["bandwidth_ratio"] == 0.182
    assert ev["baseline"] == "transport"  # an unnamed group: compared with every RDMA link
    assert v["message"].startswith(
        f"Slow RDMA link 0↔1 (group-local rank numbers) in group {g} (at least 4 members; "
        f"collected: ranks 0–3) "
        f"(both directions: 0→1 2.00 GB/s, 1→0 2.00 GB/s), 18% of the median 11.00 GB/s of "
        f"comparable RDMA links")
    assert v["threshold"] == {"slow_link_bw_ratio": 0.6, "slow_link_min_mb": 1.0}


def test_heavier_stage_says_who_waits_for_it():
    # stage 1 (ranks 2, 3) computes 130 ms, stage 0 100 ms; ranks 0, 1 wait 30 ms per step for
    # ranks 2, 3 in their pp send (40 vs 10 ms, 5 ms transit)
    ca = cluster({0: (100, 50, 0), 1: (100, 50, 0), 2: (130, 20, 0), 3: (130, 20, 0)},
                 groups=PP2DP2,
                 ops=[("hcom_send_1", "g_pp0", "p2p", {0: (40, 5), 2: (10, 5)}),
                      ("hcom_send_1", "g_pp1", "p2p", {1: (40, 5), 3: (10, 5)})])
    v = by_id(derive(ca))["stage:1"]
    assert v["message"] == (
        "Pipeline stages are unbalanced: stage 1 (ranks 2, 3) computes 130.0 ms per step, stage "
        "0 (ranks 0, 1) 100.0 ms (30.0 ms more; Computing share 86.7% vs 66.7%); stage 0 (ranks "
        "0, 1) waits 30.0 ms per step for it in pp ops.")
    ev = v["evidence"]
    assert (ev["heavy_stage"], ev["light_stage"], ev["heavy_stage_ranks"]) == (1, 0, [2, 3])
    assert ev["computing_share_spread_pct"] == 20.0 and ev["threshold_ms"] == 7.5
    assert ev["stage_ranks_left_out"] == []
    assert ev["stages"]["1"] == {"ranks": [2, 3], "computing_ms": 130.0, "computing_pct": 86.67,
                                 "free_ms": 0.0, "comm_not_overlapped_ms": 20.0,
                                 "step_ms": 150.0}
    assert v["threshold"] == {"excess_of_step_pct": 5.0, "min_excess_ms": 1.0}
    assert v["next_step"].startswith("Move layers from stage 1 to the lighter stages")


def test_idle_rank_its_peers_wait_for_is_a_schedule_cause():
    # rank 3 idles 30 ms per step more than ranks 0-2 and arrives 30 ms late at the dp
    # all-reduce (10 vs 40 ms: the others' median 40 - 10 = 30 >= 0.5 x 30)
    ca = cluster({0: (100, 50, 0), 1: (100, 50, 0), 2: (100, 50, 0), 3: (100, 20, 30)},
                 groups={"g_dp": ("dp", [0, 1, 2, 3])},
                 ops=[("hcom_allReduce_1", "g_dp", "collective",
                       {0: (40, 5), 1: (40, 5), 2: (40, 5), 3: (10, 5)})])
    v = by_id(derive(ca))["schedule:3"]
    assert v["severity"] == "critical"
    assert v["message"] == (
        "Rank 3 is idle (Free) 30.0 ms per step, 30.0 ms (20.0% of the step) more than the ranks "
        "doing the same work (ranks 0–2: 0.0 ms) (groups dp (ranks 0–3)), and it arrives 30.0 "
        "ms per step later than its peers at the communication ops of its stage, which wait "
        "for it: the host does not keep the device busy.")
    assert v["evidence"]["arrives_late_ms"] == {"3": 30.0}
    assert v["evidence"]["max_peer_wait_for_it_ms"] == {"3": 30.0}
    assert v["evidence"]["peer_waits_visible"] == {"3": True}


def test_slow_ranks_of_one_tp_group_are_one_cause():
    # the 8 ranks of _two_nodes without links: tp groups 0-3 and 4-7; ranks 0, 1 compute 130
    # ms (half of their tp group): one cause naming the group
    steps = {r: (100, 10, 0) for r in range(2, 8)}
    steps.update({0: (130, 10, 0), 1: (130, 10, 0)})
    ca = cluster(steps, groups={"g_a": ("tp", [0, 1, 2, 3]), "g_b": ("tp", [4, 5, 6, 7])})
    (v,) = derive(ca)
    assert (v["id"], v["scope"]) == ("slow_rank:0,1", "group")
    assert v["evidence"]["scope_kind"] == "tp"
    assert v["message"].startswith(
        "The tp group of ranks 0, 1 computes 130.0–130.0 ms per step, 30.0 ms (27.3% of the "
        "step) more than the ranks doing the same work (ranks 2–7: 100.0 ms) (groups tp (ranks "
        "0–3)); they wait for them in the next collective. They are slower in every step (2).")


def test_more_slow_ranks_than_separate_verdicts_are_one():
    # 20 ranks, ranks 0-4 compute 130 ms (no groups, no links): 5 separate causes > 4 -> one;
    # the 15 others (<= 16) are listed
    steps = {r: (130 if r < 5 else 100, 10, 0) for r in range(20)}
    (v,) = derive(cluster(steps))
    assert (v["id"], v["scope"], v["ranks"]) == ("slow_rank:0,1,2,3,4", "group", [0, 1, 2, 3, 4])
    assert v["evidence"]["scope_kind"] == "many"
    assert v["message"].startswith(
        "5 ranks of the set (ranks 0–4) compute 130.0–130.0 ms per step, 30.0 ms (27.3% of the "
        "step) more than the ranks doing the same work (ranks 5–19: 100.0 ms); they wait for "
        "them")


def test_more_transient_stragglers_than_separate_verdicts_are_one():
    # 20 ranks computing 100 ms; ranks 0-4 compute 112 ms in step 4 of 4 only (mean 103, under
    # the 5.5 ms threshold): 5 transient stragglers > 4 -> one verdict
    steps = {r: (100, 10, 0) for r in range(5, 20)}
    steps.update({r: [(100, 10, 0)] * 3 + [(112, 10, 0)] for r in range(5)})
    (v,) = derive(cluster(steps, n_steps=4))
    assert (v["id"], v["scope"]) == ("slow_rank:0,1,2,3,4:transient", "group")
    assert v["message"] == (
        "5 ranks are transient stragglers (ranks 0–4): each computes more than the ranks doing "
        "the same work in some steps only; the worst, rank 0, 12.0 ms more in step 4.")


def test_one_rank_within_the_spread_of_its_set_is_not_a_cause():
    # 4 ranks computing 100, 110, 120, 131 ms (+10 ms communication): rank 3 is 16 ms over the
    # median 115, beyond the 6.25 ms threshold (5 % of the 125 ms median step), but the MAD is
    # 10: robust z 0.6745 x 16 / 10 = 1.08 < 3.5, and it is the only one: no cause
    ca = cluster({0: (100, 10, 0), 1: (110, 10, 0), 2: (120, 10, 0), 3: (131, 10, 0)})
    assert [v["category"] for v in derive(ca)] == ["balanced"]


def test_many_slow_ranks_among_many_peers():
    # 70 ranks, ranks 0-16 compute 130 ms, 53 compute 100 (+10 ms communication): 17 causes
    # > 4 -> one; more than 64 peers: only the 17 are shown; more than 16 ranks: the id
    # names them as a range; the 53 others are counted
    steps = {r: (130 if r < 17 else 100, 10, 0) for r in range(70)}
    (v,) = derive(cluster(steps))
    assert v["id"] == "slow_rank:0–16"
    ev = v["evidence"]
    assert ev["n_peers"] == 70 and "peers" not in ev
    assert sorted(ev["computing_ms"], key=int) == [str(r) for r in range(17)]
    assert v["message"].startswith(
        "17 ranks of the set (ranks 0–16) compute 130.0–130.0 ms per step, 30.0 ms (27.3% of "
        "the step) more than the ranks doing the same work (53 ranks: 100.0 ms); they wait")


def test_many_slow_groups_are_one_finding():
    # 11 dp groups of 3 ranks (3i, 3i+1, 3i+2), 3 RDMA links each of 10 MB per step; groups
    # 0-4 at 4 GB/s, 5-10 at 20: each slow group at 4 / 20 = 20 % of its siblings' median
    # (the other 10: six at 20, four at 4). 5 slow groups > 4 -> one verdict; they share no
    # rank (15 ranks, each its own node without HCCS links).
    groups = {f"g{i}": ("dp", [3 * i, 3 * i + 1, 3 * i + 2]) for i in range(11)}
    links = [(f"g{i}", s, (s + 1) % 3, "RDMA", 10, 2.5 if i < 5 else 0.5, 3 * i + s)
             for i in range(11) for s in range(3)]
    (v,) = derive(cluster({r: (100, 10, 0) for r in range(33)}, groups=groups, links=links))
    assert (v["id"], v["scope"], v["ranks"]) == ("slow_group:RDMA:distribution", "transport", [])
    ev = v["evidence"]
    assert ev["n_slow_groups"] == 5 and ev["n_groups_judged"] is None
    assert ev["shared_rank"] is None and ev["n_ranks"] == 15 and ev["n_nodes"] == 15
    assert ev["by_group_name"] == {"dp": 5}
    assert v["message"].startswith(
        "5 RDMA groups are below 60% of the median bandwidth of comparable groups: 20%–20% of "
        "it (median 20%); the worst: dp (ranks 0–2) 20%, dp (ranks 3–5) 20%")
    assert v["message"].endswith(
        "; they involve 15 ranks on 15 nodes, no rank, node or group holds most of them. Link "
        "speeds spread widely across the cluster rather than one group being slow.")


def test_heavier_stage_names_the_ops_it_spends_the_gap_in():
    # stage 1 (ranks 2, 3) computes 130 ms, stage 0 100 ms; ranks 2, 3 spend MatMulV3 40 ms and
    # Cast 10 ms per step, ranks 0, 1 30 and 5: +10.0 and +5.0 ms (rank 2 vs rank 0 named)
    ca = _with_kernels(cluster({0: (100, 20, 30), 1: (100, 20, 30), 2: (130, 20, 0),
                                3: (130, 20, 0)}, groups=PP2DP2),
                       {0: (30, 5), 1: (30, 5), 2: (40, 10), 3: (40, 10)})
    v = by_id(derive(ca))["stage:1"]
    assert v["message"].endswith(
        " Stage 1's excess over stage 0, per step and rank (rank 2 vs rank 0): op types "
        "MatMulV3 +10.0 ms, Cast +5.0 ms; kernels aclnnMatmul [4096,4096] +10.0 ms.")
    assert v["evidence"]["which_ops"]["ranks_compared"] == [2, 3]
    assert v["evidence"]["which_ops"]["peers_compared"] == [0, 1]


def test_transient_straggler_names_the_ops_over_the_capture():
    # the transient straggler rank 3 of test_transient_straggler, with kernel data: rank 3
    # MatMulV3 40 ms per step, the others 30
    steps = {r: (100, 10, 0) for r in range(3)}
    steps[3] = [(100, 10, 0), (100, 10, 0), (100, 10, 0), (112, 10, 0)]
    ca = _with_kernels(cluster(steps, n_steps=4), {0: (30, 5), 1: (30, 5), 2: (30, 5),
                                                   3: (40, 5)})
    (v,) = derive(ca)
    assert v["id"] == "slow_rank:3:transient"
    assert v["evidence"]["which_ops_note"] == (
        "over the whole capture (kernel data is not split by step here)")
    # _partials gives the totals of 2 steps: over 4 steps, 20 vs 15 ms per step
    assert v["evidence"]["which_ops"]["op_types"][0]["excess_ms"] == 5.0


def test_balanced_names_the_largest_deviation_over_the_stages():
    # even stages (100 ms Computing); stage 0: rank 1's steps 125 ms vs rank 0's 110 (median
    # 117.5, +7.5 >= 5.875); stage 1: rank 3's 130 vs rank 2's 110 (median 120, +10 >= 6):
    # the larger, rank 3's step 1, is named
    ca = cluster({0: (100, 10, 0), 1: (100, 25, 0), 2: (100, 10, 0), 3: (100, 30, 0)},
                 groups=PP2DP2)
    (v,) = derive(ca)
    assert v["evidence"]["longest_step_deviation"] == {
        "rank": 3, "step": 1, "step_ms": 130.0, "median_ms": 120.0, "excess_ms": 10.0,
        "threshold_ms": 6.0}


def test_three_stages_each_waiting_for_the_heaviest():
    # pp groups (0, 1, 2) and (3, 4, 5): stages 0 = ranks 0, 3; 1 = 1, 4; 2 = 2, 5. Stage 2
    # computes 130 ms, the others 100 (lightest: stage 0, the first of the two). In the pp
    # ops ranks of stages 0 and 1 wait 30 ms for stage 2 (40 vs 10 ms); rank 0 also waits
    # 1 ms for rank 5 in ep (0, 5), under 10 % of stage 0's waiting: only pp is named.
    ca = cluster({r: (130, 20, 0) if r in (2, 5) else (100, 50, 0) for r in range(6)},
                 groups={"g_pp0": ("pp", [0, 1, 2]), "g_pp1": ("pp", [3, 4, 5]),
                         "g_ep": ("ep", [0, 5])},
                 ops=[("hcom_send_1", "g_pp0", "collective", {0: (40, 5), 1: (40, 5), 2: (10, 5)}),
                      ("hcom_send_1", "g_pp1", "collective", {3: (40, 5), 4: (40, 5), 5: (10, 5)}),
                      ("hcom_allReduce_2", "g_ep", "collective", {0: (2, 0), 5: (1, 0)})])
    v = by_id(derive(ca))["stage:2"]
    assert v["message"] == (
        "Pipeline stages are unbalanced: stage 2 (ranks 2, 5) computes 130.0 ms per step, stage "
        "0 (ranks 0, 3) 100.0 ms (30.0 ms more; Computing share 86.7% vs 66.7%); stage 0 (ranks "
        "0, 3) waits 30.0 ms per step for it in pp ops; stage 1 (ranks 1, 4) waits 30.0 ms per "
        "step for it in pp ops.")
    assert sorted(v["evidence"]["stages"]) == ["0", "1", "2"]
    assert [g["id"] for g in v["groups"]] == [gid("g_pp0"), gid("g_pp1")]


def test_less_than_half_of_a_node_are_separate_causes():
    # two servers of 5 ranks (HCCS chains 0-4, 5-9); ranks 0, 1 compute 130 ms, the others
    # 100: 2 of 5 is less than half of the node -> two slow ranks, not the node
    steps = {r: (130 if r < 2 else 100, 10, 0) for r in range(10)}
    links = [(key, s, s + 1, "HCCS", 10, 1, s) for key in ("g_a", "g_b") for s in range(4)]
    ca = cluster(steps, groups={"g_a": ("tp", [0, 1, 2, 3, 4]), "g_b": ("tp", [5, 6, 7, 8, 9])},
                 links=links)
    assert sorted(v["id"] for v in derive(ca)) == ["slow_rank:0", "slow_rank:1"]


def test_slow_ranks_of_one_group_with_different_excess():
    # tp groups 0-3 and 4-7 (no links); ranks 0, 1 compute 130 and 131 ms, ranks 2-7 100:
    # excess 30 and 31 ms, the larger 31 / 110 = 28.2 % of the median step
    steps = {r: (100, 10, 0) for r in range(2, 8)}
    steps.update({0: (130, 10, 0), 1: (131, 10, 0)})
    ca = cluster(steps, groups={"g_a": ("tp", [0, 1, 2, 3]), "g_b": ("tp", [4, 5, 6, 7])})
    (v,) = derive(ca)
    assert v["message"].startswith(
        "The tp group of ranks 0, 1 computes 130.0–131.0 ms per step, 30.0–31.0 ms (28.2% of "
        "the step) more than the ranks doing the same work (ranks 2–7: 100.0 ms)")
    assert v["evidence"]["excess_ms"] == {"0": 30.0, "1": 31.0}


def _pairs(bw_of_first, size=10):
    # three dp groups of two ranks (0, 1), (2, 3), (4, 5); each link moves ``size`` MB per
    # step both ways; the first group's at ``bw_of_first`` GB/s, the others at 20
    keys = {"p0": [0, 1], "p1": [2, 3], "p2": [4, 5]}
    links = [(k, s, 1 - s, "RDMA", size, size / (bw_of_first if k == "p0" else 20), ranks[s])
             for k, ranks in keys.items() for s in (0, 1)]
    return cluster({r: (100, 10, 0) for r in range(6)},
                   groups={k: ("dp", ranks) for k, ranks in keys.items()}, links=links)


def test_a_slow_pair_is_a_slow_link_not_a_slow_group():
    # a group of two ranks has one physical link: 0<->1 at 2 GB/s (10 % of the median 20 of
    # the 6 dp links) is one slow link, both directions
    (v,) = derive(_pairs(2))
    assert v["id"] == "slow_link:RDMA:0->1" and v["evidence"]["link"] == "0↔1"
    assert v["evidence"]["baseline"] == "group name"


def test_a_link_of_one_mb_is_judged():
    # the slow pair moving exactly 1 MB per step (slow_link_min_mb) is still judged
    (v,) = derive(_pairs(2, size=1.0))
    assert v["id"] == "slow_link:RDMA:0->1"


def test_a_group_with_one_fast_link_is_not_a_slow_group():
    # dp groups of 3 ranks; group 0-2's links at 4, 4 and 20 GB/s: its median 4 is 20 % of its
    # siblings' 20, but its fastest link is not slow: a spread of links, judged one by one
    # (the two at 4 GB/s are 20 % of the median 20 of the 9 dp links)
    keys = {"g1": [0, 1, 2], "g2": [3, 4, 5], "g3": [6, 7, 8]}
    links = [(k, s, (s + 1) % 3, "RDMA", 10, 2.5 if (k == "g1" and s < 2) else 0.5, ranks[s])
             for k, ranks in keys.items() for s in range(3)]
    ca = cluster({r: (100, 10, 0) for r in range(9)},
                 groups={k: ("dp", ranks) for k, ranks in keys.items()}, links=links)
    assert sorted(v["id"] for v in derive(ca)) == ["slow_link:RDMA:0->1", "slow_link:RDMA:1->2"]


def test_missing_rank_of_a_group_without_world_size():
    # no world size: rank 2 is expected because tp (ranks 0, 1, 2) names it
    ca = cluster({0: (100, 10, 0), 1: (100, 10, 0)}, groups={"g_tp": ("tp", [0, 1, 2])})
    (v,) = derive(ca)
    assert v["message"].startswith("Rank 2 is not in this collection. Groups with members "
                                   "missing: tp (ranks 0–2). Waiting")
    assert v["evidence"]["world_size"] is None


def test_unreadable_and_missing_ranks_together():
    # world size 4: rank 2 found but unreadable, rank 3 not found at all
    ca = cluster({0: (100, 10, 0), 1: (100, 10, 0)}, world_size=4)
    ca.ranks = [SimpleNamespace(rank=r, missing=[]) for r in (0, 1)]
    ca.sources = [SimpleNamespace(rank=r) for r in (0, 1, 2)]
    v = by_id(derive(ca))["collection"]
    assert v["ranks"] == [2, 3]
    assert v["message"].startswith("Ranks 2, 3 are not in this collection (world size 4); rank 2 "
                                   "could not be read (problems.csv says why). Waiting")
    assert v["next_step"].startswith("Copy the profiling directories of ranks 2, 3 beside")


def _slow_in(steps_slow, n):
    # 4 ranks computing 100 ms (+10 ms communication); rank 3 computes 130 ms in the steps
    # ``steps_slow`` of 1..n
    steps = {r: (100, 10, 0) for r in range(3)}
    steps[3] = [(130 if s in steps_slow else 100, 10, 0) for s in range(1, n + 1)]
    (v,) = derive(cluster(steps, n_steps=n))
    return v


def test_slow_in_three_of_four_steps_is_persistent():
    # 3 of 4 steps: at least n - n // 4 = 3 -> persistent; mean 122.5 ms, 22.5 over the others
    v = _slow_in({1, 2, 3}, 4)
    assert v["id"] == "slow_rank:3"
    assert v["evidence"]["persistent"] is True and v["evidence"]["steps_slow"] == [1, 2, 3]
    assert v["message"].endswith(" It stands out in 3 of 4 steps (1, 2, 3).")
    # 2 of 4 steps: not persistent (mean 115 ms, still 15 over the others)
    v = _slow_in({1, 2}, 4)
    assert v["evidence"]["persistent"] is False
    assert v["message"].endswith(" It stands out in 2 of 4 steps (1, 2).")


def test_many_slow_steps_are_listed_in_part():
    # slow in steps 1-18 of 20: the text lists the first 8, the evidence the first 16 steps
    v = _slow_in(set(range(1, 19)), 20)
    assert v["message"].endswith(" It stands out in 18 of 20 steps (1, 2, 3, 4, 5, 6, 7, 8).")
    assert list(v["evidence"]["by_step"]) == [str(s) for s in range(1, 17)]
    assert v["evidence"]["steps_slow"] == list(range(1, 19))
    assert v["evidence"]["persistent"] is True  # 18 >= 20 - 5


@pytest.mark.parametrize("name", ["pipeline", "pipeline_parallel", "pipeline_model_parallel",
                                  "PP"])
def test_pipeline_groups_by_any_of_their_names(name):
    # the heavier stage 1 of test_heavier_stage_names_the_pipeline_groups, its pipeline groups
    # named ``name``: they make the stages and are the verdict's groups; dp is not
    groups = {"g_pp0": (name, [0, 2]), "g_pp1": (name, [1, 3]), "g_dp0": ("dp", [0, 1]),
              "g_dp1": ("dp", [2, 3])}
    ca = cluster({0: (100, 20, 30), 1: (100, 20, 30), 2: (130, 20, 0), 3: (130, 20, 0)},
                 groups=groups)
    v = by_id(derive(ca))["stage:1"]
    assert [g["id"] for g in v["groups"]] == [gid("g_pp0"), gid("g_pp1")]


def test_two_ranks_longer_steps_nobody_waits_for():
    # ranks 2, 3 idle 30 ms per step more than ranks 0, 1 (all in one dp all-reduce of 10 ms,
    # nobody waits): median Free 15, threshold 6.25 ms (5 % of 125); against ranks 0, 1 each
    # has 30 ms extra Free, and arrives 0 ms late: one note for both
    ca = cluster({0: (100, 10, 0), 1: (100, 10, 0), 2: (100, 10, 30), 3: (100, 10, 30)},
                 groups={"g_dp": ("dp", [0, 1, 2, 3])},
                 ops=[("hcom_allReduce_1", "g_dp", "collective", {r: (10, 5) for r in range(4)})])
    v = by_id(derive(ca))["long_step:2,3"]
    assert (v["scope"], v["ranks"]) == ("group", [2, 3])
    assert v["evidence"]["extra_free_ms_by_rank"] == {"2": 30.0, "3": 30.0}
    assert v["message"].startswith("Ranks 2, 3's step is longer than its peers' but nobody "
                                   "waits for it")


def test_slow_links_ordered_by_how_slow_and_bandwidth_to_four_decimals():
    # 0->1 at 10 / 3 = 3.3333 GB/s (17 % of 20), 0->2 at 2 GB/s (10 %): both critical; the
    # slower link first
    out = derive(_ring({1: 10 / 3, 2: 2}))
    assert [v["id"] for v in out] == ["slow_link:RDMA:0->2", "slow_link:RDMA:0->1"]
    assert out[1]["evidence"]["bandwidth_gbps"] == 3.3333
    assert out[1]["evidence"]["bandwidth_ratio"] == 0.167


def test_a_slower_link_comes_before_a_slow_group():
    # the slow dp group 0-2 of test_slow_group_is_one_verdict_for_its_path (20 % of its
    # siblings) and, in a tp ring of ranks 9-12 over HCCS, link 9->10 at 1 GB/s of 10 (10 %):
    # both critical, the link further below its baseline first
    keys = {"g1": [0, 1, 2], "g2": [3, 4, 5], "g3": [6, 7, 8]}
    links = [(k, s, (s + 1) % 3, "RDMA", 10, 2.5 if k == "g1" else 0.5, ranks[s])
             for k, ranks in keys.items() for s in range(3)]
    links += [("g_tp", s, (s + 1) % 4, "HCCS", 10, 10 if s == 0 else 1, 9 + s) for s in range(4)]
    groups = {k: ("dp", ranks) for k, ranks in keys.items()}
    groups["g_tp"] = ("tp", [9, 10, 11, 12])
    ca = cluster({r: (100, 10, 0) for r in range(13)}, groups=groups, links=links)
    assert [v["id"] for v in derive(ca)] == ["slow_link:HCCS:9->10",
                                             f"slow_group:dp:{gid('g1')}"]


def test_a_note_about_a_long_step_ranks_after_ranked_notes():
    # the long step of rank 3 (test_longer_step_nobody_waits_for_is_a_note) is a note ranked
    # 0; a contributed note ranked 0.5 (``_rank_key``) comes first; "balanced" last
    ca = cluster({0: (100, 10, 0), 1: (100, 10, 0), 2: (100, 10, 0), 3: (100, 10, 30)},
                 groups={"g_dp": ("dp", [0, 1, 2, 3])},
                 ops=[("hcom_allReduce_1", "g_dp", "collective",
                       {r: (10, 5) for r in range(4)})])

    def note(ca, th):
        v = V.make_verdict("data", "rank", [1], "info", "Rank 1's data loader is slow at times.",
                           "Look at the data loader of rank 1.", id="data:1")
        v["_rank_key"] = 0.5
        return [v]

    out = V.derive(ca, V.thresholds(None), contributed={"data": note})
    assert [v["id"] for v in out] == ["data:1", "long_step:3", "balanced"]


def test_heavier_stage_names_every_op_group_its_waiters_wait_in():
    # as above (stage 1 = ranks 2, 3 computes 130 ms, stage 0 = ranks 0, 1 100 ms), and all
    # four ranks also meet in an all-reduce of a world group, which crosses the stages: ranks
    # 0, 1 spend 30 ms in it, ranks 2, 3 10 ms (5 ms transit each), so 0 and 1 wait 30 - 10 =
    # 20 ms for stage 1 there, beside the 30 ms in their pp send. Both groups carry >= 10 % of
    # the wait, so both are named ("pp/world", in name order) and a waiter waits 30 + 20 = 50 ms
    # per step.
    groups = dict(PP2DP2, g_world=("world", [0, 1, 2, 3]))
    ca = cluster({0: (100, 50, 0), 1: (100, 50, 0), 2: (130, 20, 0), 3: (130, 20, 0)},
                 groups=groups,
                 ops=[("hcom_send_1", "g_pp0", "p2p", {0: (40, 5), 2: (10, 5)}),
                      ("hcom_send_1", "g_pp1", "p2p", {1: (40, 5), 3: (10, 5)}),
                      ("hcom_allReduce_1", "g_world", "collective",
                       {0: (30, 5), 1: (30, 5), 2: (10, 5), 3: (10, 5)})])
    v = by_id(derive(ca))["stage:1"]
    assert v["message"].endswith(
        "stage 0 (ranks 0, 1) waits 50.0 ms per step for it in pp/world ops.")


def test_one_slow_rank_among_equal_peers_needs_no_division_by_a_zero_spread():
    # ranks 0-2 compute 100 ms, rank 3 130 ms (one dp group, no stages): the median is 100 ms
    # and the median absolute deviation 0 (three of four deviations are 0), so the robust
    # z-score is unbounded for rank 3 (shown as None) and not computed at all: nothing may be
    # divided by the zero spread (numpy would warn "divide by zero" and, for the ranks on the
    # median, "invalid value": 0 / 0)
    import warnings

    ca = cluster({0: (100, 20, 0), 1: (100, 20, 0), 2: (100, 20, 0), 3: (130, 20, 0)},
                 groups={"g_dp": ("dp", [0, 1, 2, 3])})
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        out = derive(ca)
    (v,) = [v for v in out if v["category"] == "slow_rank"]
    assert v["ranks"] == [3]
    assert v["evidence"]["robust_z"] == {"3": None}
