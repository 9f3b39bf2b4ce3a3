"""The causal story (verdicts/story.py): Communication(Not Overlapped) that cannot be split, in
an even pipeline and on a rank without communication ops beside one with them. Hand-built
clusters (tests/_hand_cluster.py: ms per step, the same in both steps)."""

from __future__ import annotations

from _hand_cluster import by_id, cluster, derive


def test_even_pipeline_without_op_data_is_unknown_per_stage():
    # pp groups (0, 2), (1, 3): ranks 0, 1 stage 0; 2, 3 stage 1. Every rank computes 100 ms
    # with 50 ms Communication(Not Overlapped): 50 / 150 = 33.3 % >= 30 % on every rank, the
    # stages are even (no stage cause), and there are no communication ops to split the time:
    # one "cannot be told" communication verdict per stage, none attached to a stage cause.
    ca = cluster({0: (100, 50, 0), 1: (100, 50, 0), 2: (100, 50, 0), 3: (100, 50, 0)},
                 groups={"g_pp0": ("pp", [0, 2]), "g_pp1": ("pp", [1, 3])})
    out = by_id(derive(ca))
    assert sorted(k for k in out if k.startswith("communication")) == [
        "communication:0", "communication:1"]
    v = out["communication:1"]
    assert (v["scope"], v["ranks"]) == ("stage", [2, 3])
    assert v["message"] == (
        "Communication(Not Overlapped) takes 33.3% of the step on stage 1 (ranks 2, 3); whether "
        "it is waiting for a slower rank or data transfer cannot be told: there are no per-op "
        "communication times.")
    assert v["evidence"]["cause"] == "unknown"


def test_a_rank_without_ops_beside_one_with_ops_is_unknown():
    # No pipeline. Rank 0: 50 / 150 = 33.3 % Communication(Not Overlapped), and no
    # communication op of its own; rank 1: 10 / 150 = 6.7 % (not examined), one all-reduce of
    # 10 ms (5 ms transit) in dp. Rank 0's time cannot be split: a "cannot be told" verdict.
    ca = cluster({0: (100, 50, 0), 1: (100, 10, 40)}, groups={"g_dp": ("dp", [0, 1])},
                 ops=[("hcom_allReduce_1", "g_dp", "collective", {1: (10, 5)})])
    out = by_id(derive(ca))
    v = out["communication:None"]
    assert (v["scope"], v["ranks"]) == ("rank", [0])
    assert v["message"] == (
        "Communication(Not Overlapped) takes 33.3% of the step on rank 0; whether it is waiting "
        "for a slower rank or data transfer cannot be told: there are no per-op communication "
        "times.")
