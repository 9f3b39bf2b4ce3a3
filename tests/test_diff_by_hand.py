"""compare.diff on small hand-built sides: group labels, kernel aggregation, op types from
kernels and from op_statistic totals, communication and bandwidth per group, step rows per
pair of ranks, the explanation's sentences, and the result's tables / JSON form.

Every expected value is worked out by hand in the comments (ns in the frames, us in the
diff tables: 1 us = 1000 ns; values per step per rank are the median over the rank-steps in
which the key occurs, the whole-capture totals of op_statistic divided by the rank's steps)."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from ascendprof.compare.diff import (BANDWIDTH_DIFF_COLUMNS, COMM_DIFF_COLUMNS,
                                     KERNEL_DIFF_COLUMNS, OP_DIFF_COLUMNS, STEP_DIFF_COLUMNS,
                                     GroupLabel, Side, aggregate_kernels, bandwidth_totals,
                                     compare, comm_totals, diff_bandwidth, diff_comm,
                                     diff_kernels, diff_op_types, diff_steps, explain,
                                     group_hash, group_labels, op_type_totals, rank_pairs,
                                     select_ranks, unmatched_groups)

STEP_COLS = ["computing_ns", "comm_not_overlapped_ns", "overlapped_ns", "communication_ns",
             "free_ns", "stage_ns", "bubble_ns", "comm_not_overlapped_excl_receive_ns",
             "preparing_ns"]
KCOLS = ["rank", "step", "name", "op_type", "accelerator_core", "input_shapes", "count",
         "total_ns"]


def steps(rows) -> pd.DataFrame:
    """rows: (rank, step, {column: ns}); the other metrics 0."""
    out = []
    for rank, step, vals in rows:
        out.append({"rank": rank, "step": step, **{c: vals.get(c, 0) for c in STEP_COLS}})
    return pd.DataFrame(out)


# ------------------------------------------------------------------ group labels

def test_group_label_text_key_and_role():
    assert GroupLabel("123", "dp", (0, 1)).text == "dp (0, 1)"
    assert GroupLabel("123", "", (3,)).text == "(3,)"      # a one-rank tuple keeps its comma
    assert GroupLabel("123", "", (2, 3)).text == "(2, 3)"
    assert GroupLabel("123", "pp").text == "pp"
    assert GroupLabel("123").text == "123"                 # nothing known: the group name
    assert GroupLabel("123", "dp", (0, 1)).key == "dp (0, 1)"
    assert GroupLabel("123", "dp", (0, 1)).role == "dp"
    assert GroupLabel("123", "", (0, 1)).role == "(0, 1)"


def test_group_labels_from_metadata_known_labels_and_ranks_seen():
    h = str(group_hash("group_name_1"))  # how the profiler names the group of that id
    meta = {0: {"parallel_group_info": {
        "group_name_1": {"group_name": "dp", "global_ranks": [1, 0]},
        "group_name_9": "not a dict"}},
        1: None}
    ops = pd.DataFrame({"rank": [0, 1, 2, 0, 0], "group": [h, h, "other", "other", None]})
    known = {h: GroupLabel(h, "stale", ()), "kept": GroupLabel("kept", "tp", (4, 5))}
    got = group_labels(ops, meta, known)
    # the metadata's name and sorted global ranks win over a known label
    assert got[h] == GroupLabel(h, "dp", (0, 1))
    # a group the metadata does not name: the ranks that have ops in it here, sorted
    assert got["other"] == GroupLabel("other", "", (0, 2))
    assert got["kept"] == GroupLabel("kept", "tp", (4, 5))
    assert set(got) == {h, "other", "kept"}  # the null group is no group
    # a metadata group without a name: its ranks alone
    meta2 = {0: {"parallel_group_info": {"group_name_1": {"global_ranks": [3, 2]}}}}
    assert group_labels(ops, meta2)[h].text == "(2, 3)"
    # no ops: only the known labels
    assert group_labels(None, meta, known) == known
    assert group_labels(ops.iloc[0:0], meta) == {}


# ------------------------------------------------------------------ kernels

def test_aggregate_kernels_per_kernel_and_step():
    k = pd.DataFrame({
        "rank": [0, 0, 0, 0], "step": [1, 1, None, 2],
        "name": ["mm", "mm", "add", "mm"], "op_type": ["MatMul", "MatMul", "Add", "MatMul"],
        "accelerator_core": ["AI_CORE", "AI_CORE", "AI_VECTOR_CORE", "AI_CORE"],
        "input_shapes": ["8,8", "8,8", None, "8,8"], "dur_ns": [100, 50, 30, 70]})
    g = aggregate_kernels(k)
    assert list(g.columns) == KCOLS
    # in order of first appearance: mm of step 1 twice (100 + 50), add with no step (-1) and
    # no shapes (""), mm of step 2 once
    assert g.values.tolist() == [
        [0, 1, "mm", "MatMul", "AI_CORE", "8,8", 2, 150],
        [0, -1, "add", "Add", "AI_VECTOR_CORE", "", 1, 30],
        [0, 2, "mm", "MatMul", "AI_CORE", "8,8", 1, 70]]
    assert list(aggregate_kernels(None).columns) == KCOLS


def kside(rows, step_rows, ranks=(0,), label="x"):
    return Side(label, list(ranks), steps=steps(step_rows),
                kernels=pd.DataFrame(rows, columns=KCOLS))


def test_kernels_fall_back_to_op_type_and_shapes_with_counts():
    # A (2 steps): mm 2 runs of 2000 ns in each step; addA 1 run of 1000 ns in step 1.
    # B (1 step): mm 3 runs, 6000 ns; addB 2 runs, 3000 ns; a communication row (left out).
    a = kside([[0, 1, "mm", "MatMul", "AI_CORE", "8,8", 2, 4000],
               [0, 2, "mm", "MatMul", "AI_CORE", "8,8", 2, 4000],
               [0, 1, "addA", "Add", "AI_VECTOR_CORE", "4", 1, 1000]],
              [(0, 1, {}), (0, 2, {})])
    b = kside([[0, 5, "mm", "MatMul", "AI_CORE", "8,8", 3, 6000],
               [0, 5, "addB", "Add", "AI_VECTOR_CORE", "4", 2, 3000],
               [0, 5, "hcom_allReduce_1", "hcom_allReduce", "COMMUNICATION", "", 1, 9000]],
              [(0, 5, {})])
    d = diff_kernels(a, b)
    assert list(d.columns) == KERNEL_DIFF_COLUMNS
    by = {r["match"]: r for r in d.to_dict("records")}
    assert set(by) == {"name+shapes", "op_type+shapes"}  # the HCCL row is compared per group
    mm = by["name+shapes"]  # 4 us per step in A (median of 4, 4), 6 us in B
    assert (mm["name_a"], mm["op_type"], mm["a_count"], mm["b_count"], mm["count_delta"],
            mm["a_us"], mm["b_us"], mm["delta_us"], mm["ratio"]) == (
        "mm", "MatMul", 2.0, 3.0, 1.0, 4.0, 6.0, 2.0, 1.5)
    add = by["op_type+shapes"]  # addA 1 run, 1 us; addB 2 runs, 3 us
    assert (add["name_a"], add["name_b"], add["op_type"], add["accelerator_core"],
            add["input_shapes"], add["a_count"], add["b_count"], add["a_us"], add["b_us"],
            add["delta_us"]) == ("addA", "addB", "Add", "AI_VECTOR_CORE", "4", 1.0, 2.0,
                                 1.0, 3.0, 2.0)


def test_kernels_only_on_one_side():
    a = kside([[0, 1, "old", "Gone", "AI_CPU", "", 1, 500]], [(0, 1, {})])
    b = kside([[0, 1, "new", "Fresh", "AI_CORE", "2", 4, 800],
               [0, 1, "new2", "Fresh", "AI_CORE", "2", 1, 200]], [(0, 1, {})])
    d = diff_kernels(a, b)
    by = {r["match"]: r for r in d.to_dict("records")}
    assert set(by) == {"only_a", "only_b"}
    # B's two kernels of one op type + shapes: one row, names joined, counts and times summed
    fresh = by["only_b"]
    assert (fresh["name_b"], fresh["op_type"], fresh["accelerator_core"], fresh["b_count"],
            fresh["b_us"], fresh["a_us"], fresh["a_count"]) == (
        "new; new2", "Fresh", "AI_CORE", 5.0, 1.0, 0.0, 0.0)
    gone = by["only_a"]
    assert (gone["name_a"], gone["a_us"], gone["b_us"], gone["delta_us"]) == (
        "old", 0.5, 0.0, -0.5)
    assert math.isnan(fresh["ratio"]) and gone["ratio"] == 0.0
    # sorted by |delta_us|: 1.0 before 0.5
    assert d["match"].tolist() == ["only_b", "only_a"]
    assert diff_kernels(Side("a", [0]), Side("b", [0])).empty


# ------------------------------------------------------------------ op types

def test_op_types_from_op_statistic_are_divided_by_each_ranks_steps():
    # A: op_statistic totals over the capture. Rank 0 has 2 steps, rank 1 one, rank 2 four.
    # MatMul: rank 0 8000 ns / 2 = 4000 (count 4 / 2 = 2), rank 1 3000 / 1 (count 3),
    #         rank 2 4000 / 4 = 1000 (count 8 / 4 = 2) -> median 3000 ns, count 2
    # Cast:   rank 0 only, 600 / 2 = 300 ns, count 2 / 2 = 1
    a = Side("A", [0, 1, 2], steps=steps(
        [(0, 1, {}), (0, 2, {}), (1, 1, {}), (2, 1, {}), (2, 2, {}), (2, 3, {}), (2, 4, {})]),
        op_stats=pd.DataFrame({
            "rank": [0, 1, 2, 0, 0],
            "op_type": ["MatMul", "MatMul", "MatMul", "Cast", "hcom_allReduce"],
            "accelerator_core": ["AI_CORE"] * 3 + ["AI_VECTOR_CORE", "HCCL"],
            "count": [4, 3, 8, 2, 5], "total_ns": [8000, 3000, 4000, 600, 99000]}))
    t = op_type_totals(a).set_index(["op_type", "accelerator_core"])
    assert set(t.index) == {("MatMul", "AI_CORE"), ("Cast", "AI_VECTOR_CORE")}  # HCCL left out
    assert t.loc[("MatMul", "AI_CORE"), "total_ns"] == 3000.0
    assert t.loc[("MatMul", "AI_CORE"), "total_ns_mean"] == pytest.approx(8000 / 3)
    assert t.loc[("MatMul", "AI_CORE"), "count"] == 2.0
    assert t.loc[("Cast", "AI_VECTOR_CORE"), "total_ns"] == 300.0
    # B: kernels per step. MatMul 5000, 7000, 9000 ns in steps 1..3 (median 7000, 1 run each);
    # Add 2 runs, 2000 ns in step 1 only; a COMMUNICATION row left out.
    b = kside([[0, 1, "mm", "MatMul", "AI_CORE", "", 1, 5000],
               [0, 2, "mm", "MatMul", "AI_CORE", "", 1, 7000],
               [0, 3, "mm", "MatMul", "AI_CORE", "", 1, 9000],
               [0, 1, "add", "Add", "AI_VECTOR_CORE", "", 2, 2000],
               [0, 1, "hcom_x", "hcom_x", "COMMUNICATION", "", 1, 1_000_000]],
              [(0, 1, {}), (0, 2, {}), (0, 3, {})], label="B")
    d = diff_op_types(a, b)
    assert list(d.columns) == OP_DIFF_COLUMNS
    rows = d.to_dict("records")
    # by |delta_us|: MatMul 3 -> 7 us (+4), Add new 2 us (+2), Cast 0.3 us gone (-0.3)
    assert [(r["op_type"], r["presence"]) for r in rows] == [
        ("MatMul", "both"), ("Add", "only_b"), ("Cast", "only_a")]
    mm, add, cast = rows
    assert (mm["a_count"], mm["b_count"], mm["count_delta"], mm["a_us"], mm["b_us"],
            mm["delta_us"]) == (2.0, 1.0, -1.0, 3.0, 7.0, 4.0)
    assert mm["ratio"] == pytest.approx(7 / 3)
    assert (add["a_count"], add["b_count"], add["a_us"], add["b_us"]) == (0.0, 2.0, 0.0, 2.0)
    assert math.isnan(add["ratio"])  # nothing in A to divide by
    assert (cast["a_count"], cast["b_count"], cast["a_us"], cast["b_us"], cast["delta_us"],
            cast["ratio"]) == (1.0, 0.0, 0.3, 0.0, -0.3, 0.0)


def test_rank_without_steps_or_real_step_values_counts_its_totals_once():
    # rank 0 has no step breakdown: divisor 1. Steps '-1', '', 'step' and null are no steps:
    # the rows of rank 1 are one whole-capture value 100 + 200 + 300 + 400 = 1000 ns over its
    # 2 steps = 500 ns; rank 0: 50 ns. Median of (50, 500) = 275 ns.
    k = pd.DataFrame([[0, None, "a", "A", "AI_CORE", "", 1, 50],
                      [1, "-1", "a", "A", "AI_CORE", "", 1, 100],
                      [1, "", "a", "A", "AI_CORE", "", 1, 200],
                      [1, "step", "a", "A", "AI_CORE", "", 1, 300],
                      [1, None, "a", "A", "AI_CORE", "", 1, 400]], columns=KCOLS)
    s = Side("A", [0, 1], steps=steps([(1, 7, {}), (1, 8, {})]), kernels=k)
    t = op_type_totals(s)
    assert t["total_ns"].tolist() == [275.0]
    assert t["count"].tolist() == [(1 + 4 / 2) / 2]


# ------------------------------------------------------------------ communication

H = str(group_hash("group_name_1"))
DP01 = GroupLabel(H, "dp", (0, 1))


def comm_side(label, ranks, ops, groups, bw=None):
    cols = ["rank", "group", "step_key", "elapse_ns", "transit_ns", "wait_ns", "sync_ns",
            "idle_ns"]
    bcols = ["rank", "group", "step_key", "transport", "size_mb", "transit_ns"]
    return Side(label, ranks, comm_ops=pd.DataFrame(ops, columns=cols),
                comm_bw=None if bw is None else pd.DataFrame(bw, columns=bcols), groups=groups)


def _ab():
    # A, group dp (0, 1): rank 0 in step1 two ops (elapse 1000 + 3000, wait 400 + 100,
    # transit 500 + 1500, sync 50 + null, idle 10 + 20); rank 1 one op (elapse 2000, wait 1500,
    # transit 1000, sync 150, idle 30).
    # per rank-step: count 2 / 1, elapse 4000 / 2000, wait 500 / 1500, transit 2000 / 1000,
    # sync 50 / 150, idle 30 / 30 -> medians (two values: their mean): count 1.5, elapse 3000,
    # wait 1000, transit 1500, sync 100, idle 30.
    a = comm_side("A", [0, 1], [
        [0, H, "step1", 1000, 500, 400, 50, 10],
        [0, H, "step1", 3000, 1500, 100, None, 20],
        [1, H, "step1", 2000, 1000, 1500, 150, 30]], {H: DP01})
    # B: the same group, rank 0 one op (elapse 5000, wait 2000, transit 4000, sync 0, idle 5);
    # and a group "solo" without a label (its name stands for it): elapse 800.
    b = comm_side("B", [0, 1], [
        [0, H, "step1", 5000, 4000, 2000, 0, 5],
        [0, "solo", "step1", 800, 700, 0, 0, 0]], {H: DP01})
    return a, b


def test_comm_totals_per_group_key():
    a, _ = _ab()
    t = comm_totals(a).set_index("gkey")
    assert list(t.index) == ["dp (0, 1)"]
    r = t.loc["dp (0, 1)"]
    assert (r["label"], r["count"], r["elapse_ns"], r["wait_ns"], r["transit_ns"], r["sync_ns"],
            r["idle_ns"]) == ("dp (0, 1)", 1.5, 3000.0, 1000.0, 1500.0, 100.0, 30.0)
    assert list(comm_totals(Side("e", [0])).columns) == [
        "gkey", "label", "count", "elapse_ns", "transit_ns", "wait_ns", "sync_ns", "idle_ns"]


def test_diff_comm_matches_groups_by_label_and_names_the_unmatched():
    a, b = _ab()
    d = diff_comm(a, b)
    assert list(d.columns) == COMM_DIFF_COLUMNS
    rows = d.to_dict("records")
    # by |delta_elapse_us|: dp 3 -> 5 us (+2), solo 0 -> 0.8 us
    assert [(r["group"], r["presence"]) for r in rows] == [("dp (0, 1)", "both"),
                                                            ("solo", "only_b")]
    dp, solo = rows
    assert (dp["group_a"], dp["group_b"], dp["a_count"], dp["b_count"]) == (
        "dp (0, 1)", "dp (0, 1)", 1.5, 1.0)
    assert (dp["a_elapse_us"], dp["b_elapse_us"], dp["delta_elapse_us"]) == (3.0, 5.0, 2.0)
    assert (dp["a_wait_us"], dp["b_wait_us"], dp["delta_wait_us"]) == (1.0, 2.0, 1.0)
    assert (dp["a_transit_us"], dp["b_transit_us"], dp["delta_transit_us"]) == (1.5, 4.0, 2.5)
    assert (dp["a_synchronization_us"], dp["b_synchronization_us"]) == (0.1, 0.0)
    assert (dp["a_idle_us"], dp["b_idle_us"], dp["delta_idle_us"]) == (0.03, 0.005, 0.005 - 0.03)
    assert (solo["group_b"], solo["a_count"], solo["b_count"], solo["a_elapse_us"],
            solo["b_elapse_us"]) == ("solo", 0.0, 1.0, 0.0, 0.8)
    assert not isinstance(solo["group_a"], str)  # no group of A
    assert unmatched_groups(d) == [
        "group solo of B has no match in A (no group with the same parallel-group name and "
        "ranks)"]
    back = diff_comm(b, a)
    assert unmatched_groups(back) == [
        "group solo of A has no match in B (no group with the same parallel-group name and "
        "ranks)"]


def test_diff_comm_with_one_side_without_communication():
    _, b = _ab()
    d = diff_comm(Side("A", [0, 1]), b)
    assert d["presence"].tolist() == ["only_b", "only_b"]
    assert d["group"].tolist() == ["dp (0, 1)", "solo"]  # by |delta_elapse|: 5 us, 0.8 us
    assert d["a_elapse_us"].tolist() == [0.0, 0.0] and d["b_elapse_us"].tolist() == [5.0, 0.8]
    assert diff_comm(Side("A", [0]), Side("B", [0])).empty


def test_two_rank_sets_meet_by_parallel_group_name():
    h2 = str(group_hash("group_name_7"))
    a = comm_side("A", [0], [[0, H, "step1", 1000, 0, 0, 0, 0]], {H: DP01})
    b = comm_side("B", [2], [[2, h2, "step1", 3000, 0, 0, 0, 0]],
                  {h2: GroupLabel(h2, "dp", (2, 3))})
    d = diff_comm(a, b, by_role=True)
    assert d[["group", "group_a", "group_b", "presence"]].values.tolist() == [
        ["dp", "dp (0, 1)", "dp (2, 3)", "both"]]
    assert d["delta_elapse_us"].tolist() == [2.0]
    # by what they are (the default): two different groups
    d = diff_comm(a, b)
    assert sorted(d["presence"]) == ["only_a", "only_b"]
    # compare() of two single different ranks matches by role
    r = compare(a, b, [(0, 2)])
    assert r.communication["presence"].tolist() == ["both"] and r.unmatched == []


def _bw_sides():
    # A, dp (0, 1), HCCS: rank 0 in step1 10 MB in 1 ms + 20 MB in 1 ms = 30 MB / 2 ms = 15 GB/s;
    # rank 1 10 MB in 2 ms = 5 GB/s; its RDMA moved nothing (left out); a null size counts 0.
    # Medians: size (30 + 10) / 2 = 20 MB, bandwidth (15 + 5) / 2 = 10 GB/s. Rank 0 RDMA:
    # 8 MB in 4 ms = 2 GB/s.
    a = comm_side("A", [0, 1], [[0, H, "step1", 1, 0, 0, 0, 0]], {H: DP01}, bw=[
        [0, H, "step1", "HCCS", 10.0, 1_000_000],
        [0, H, "step1", "HCCS", 20.0, 1_000_000],
        [0, H, "step1", "HCCS", None, 0],
        [1, H, "step1", "HCCS", 10.0, 2_000_000],
        [1, H, "step1", "RDMA", 0.0, 0],
        [0, H, "step1", "RDMA", 8.0, 4_000_000]])
    # B: rank 0 HCCS 40 MB in 2 ms = 20 GB/s; SIO moved 5 MB in no time (left out)
    b = comm_side("B", [0, 1], [[0, H, "step1", 1, 0, 0, 0, 0]], {H: DP01}, bw=[
        [0, H, "step1", "HCCS", 40.0, 2_000_000],
        [0, H, "step1", "SIO", 5.0, 0]])
    return a, b


def test_bandwidth_totals_and_diff():
    a, b = _bw_sides()
    t = bandwidth_totals(a)
    assert list(t.columns) == ["gkey", "transport", "size_mb", "transit_ns", "gbps", "label"]
    t = t.set_index("transport")
    # transit per rank-step: 2 ms on both ranks
    assert (t.loc["HCCS", "size_mb"], t.loc["HCCS", "transit_ns"], t.loc["HCCS", "gbps"],
            t.loc["HCCS", "label"]) == (20.0, 2_000_000.0, 10.0, "dp (0, 1)")
    assert (t.loc["RDMA", "size_mb"], t.loc["RDMA", "gbps"]) == (8.0, 2.0)
    d = diff_bandwidth(a, b)
    assert list(d.columns) == BANDWIDTH_DIFF_COLUMNS
    rows = d.to_dict("records")
    assert [(r["group"], r["transport"]) for r in rows] == [("dp (0, 1)", "HCCS"),
                                                             ("dp (0, 1)", "RDMA")]
    hccs, rdma = rows
    assert (hccs["group_a"], hccs["group_b"], hccs["a_size_mb"], hccs["b_size_mb"],
            hccs["a_gbps"], hccs["b_gbps"], hccs["delta_gbps"], hccs["ratio"]) == (
        "dp (0, 1)", "dp (0, 1)", 20.0, 40.0, 10.0, 20.0, 10.0, 2.0)
    assert (rdma["a_size_mb"], rdma["b_size_mb"], rdma["a_gbps"]) == (8.0, 0.0, 2.0)
    assert math.isnan(rdma["b_gbps"]) and math.isnan(rdma["delta_gbps"])
    # only B: A's columns 0 / null
    d = diff_bandwidth(Side("A", [0]), b)
    assert d[["transport", "a_size_mb", "b_size_mb", "b_gbps"]].values.tolist() == [
        ["HCCS", 0.0, 40.0, 20.0]]
    assert diff_bandwidth(Side("A", [0]), Side("B", [0])).empty


# ------------------------------------------------------------------ steps and explanation

def test_diff_steps_median_mean_delta_and_ratio():
    # A: Computing 1000, 2000, 6000 ns over three rank-steps -> median 2 us, mean 3 us
    a = steps([(0, 1, {"computing_ns": 1000}), (0, 2, {"computing_ns": 2000}),
               (1, 1, {"computing_ns": 6000})])
    b = steps([(0, 1, {"computing_ns": 3000})])
    d = diff_steps(a, b, "cluster")
    assert list(d.columns) == STEP_DIFF_COLUMNS
    assert d["metric"].tolist()[:3] == ["Computing", "Communication(Not Overlapped)",
                                        "Overlapped"]
    comp = d.set_index("metric").loc["Computing"]
    assert (comp["scope"], comp["a_us"], comp["b_us"], comp["delta_us"], comp["ratio"],
            comp["a_mean_us"], comp["b_mean_us"]) == ("cluster", 2.0, 3.0, 1.0, 1.5, 3.0, 3.0)
    assert pd.isna(d.set_index("metric").loc["Free", "ratio"])  # 0 in A
    none = diff_steps(None, b, "x").set_index("metric").loc["Computing"]
    assert math.isnan(none["a_us"]) and none["b_us"] == 3.0


MS = 1_000_000  # ns


def _steps_ab(b_stage_ms, b_comp_ms=60, b_free_ms=20, b_cno_ms=20):
    a = steps([(0, 1, {"stage_ns": 100 * MS, "computing_ns": 60 * MS, "free_ns": 20 * MS,
                       "comm_not_overlapped_ns": 20 * MS})])
    b = steps([(0, 1, {"stage_ns": round(b_stage_ms * MS), "computing_ns": round(b_comp_ms * MS),
                       "free_ns": round(b_free_ms * MS), "comm_not_overlapped_ns":
                       round(b_cno_ms * MS)})])
    return diff_steps(a, b, "s")


NO_OPS = pd.DataFrame(columns=OP_DIFF_COLUMNS)
NO_COMM = pd.DataFrame(columns=COMM_DIFF_COLUMNS)
EMPTY_STEPS = pd.DataFrame(columns=STEP_DIFF_COLUMNS)


def test_explain_slower_and_the_buckets_that_changed():
    # Stage 100 -> 110 ms: 10 ms slower (+10 %). A bucket is named from 1 % of A's Stage
    # (1 ms): Computing +10 ms (60 -> 70, +17 %), Free -1 ms exactly (20 -> 19, -5 %);
    # Communication(Not Overlapped) +0.9 ms is below it.
    st = _steps_ab(110, b_comp_ms=70, b_free_ms=19, b_cno_ms=20.9)
    text = explain(st, NO_OPS, NO_COMM, a_name="base", b_name="new")
    assert text == ("new is 10.0 ms slower per step than base (Stage 100.0 ms -> 110.0 ms, "
                    "+10 %); new spends +10.0 ms Computing (+17 %), -1.0 ms Free (-5 %).")


def test_explain_faster_and_the_same_time():
    text = explain(_steps_ab(90), NO_OPS, NO_COMM)
    assert text == "B is 10.0 ms faster per step than A (Stage 100.0 ms -> 90.0 ms, -10 %)."
    # 0.4 ms of 100 ms is below 0.5 %: the same time; the buckets did not move
    text = explain(_steps_ab(100.4), NO_OPS, NO_COMM)
    assert text == "B and A take the same time per step (100.0 ms vs 100.4 ms Stage)."
    # 0.6 ms is beyond it
    assert explain(_steps_ab(100.6), NO_OPS, NO_COMM).startswith("B is 0.6 ms slower")
    # nothing at all to say
    assert explain(_steps_ab(100.0).iloc[0:0], NO_OPS, NO_COMM) == ""


def test_explain_names_three_op_types_from_fifty_us():
    ops = pd.DataFrame([
        # op_type, core, a_us, b_us, delta_us (sorted by |delta| as diff_op_types gives them)
        ["MatMul", "AI_CORE", 1000.0, 3000.0, 2000.0],
        ["Cast", "", 0.0, 1500.0, 1500.0],            # new in B, no core named
        ["Add", "AI_VECTOR_CORE", 2000.0, 1000.0, -1000.0],
        ["Mul", "AI_VECTOR_CORE", 500.0, 900.0, 400.0],  # the fourth: not named
        ["Tiny", "AI_CORE", 10.0, 59.9, 49.9]], columns=["op_type", "accelerator_core", "a_us",
                                                          "b_us", "delta_us"])
    text = explain(EMPTY_STEPS, ops, NO_COMM)
    assert text == ("largest op-type changes: +2.0 ms MatMul on AI_CORE (+200 %), +1.5 ms Cast "
                    "(new), -1.0 ms Add on AI_VECTOR_CORE (-50 %).")
    # below 50 us per step nothing is named
    assert explain(EMPTY_STEPS, ops.tail(1), NO_COMM) == ""


def test_explain_names_the_group_whose_wait_changed_most():
    a, b = _ab()
    comm = diff_comm(a, b)  # dp: wait 1 -> 2 us, +1 us exactly (the smallest change named)
    empty_steps = EMPTY_STEPS
    assert explain(empty_steps, NO_OPS, comm[comm["presence"] == "both"]) == (
        "B waits 0.0 ms more in group dp (0, 1) (wait 0.0 ms -> 0.0 ms).")
    back = diff_comm(b, a)
    assert explain(empty_steps, NO_OPS, back[back["presence"] == "both"]) == (
        "B waits 0.0 ms less in group dp (0, 1) (wait 0.0 ms -> 0.0 ms).")
    # larger waits: 3 ms -> 1 ms in group pp (the largest |change| of the two)
    comm = pd.DataFrame([["dp", "dp", 10.0, 900.0, 890.0], ["pp", "pp", 3000.0, 1000.0, -2000.0]],
                        columns=["group_a", "group_b", "a_wait_us", "b_wait_us",
                                 "delta_wait_us"])
    assert explain(empty_steps, NO_OPS, comm) == (
        "B waits 2.0 ms less in group pp (wait 3.0 ms -> 1.0 ms).")
    # below 1 us: nothing
    assert explain(empty_steps, NO_OPS, comm.assign(delta_wait_us=[0.5, -0.9])) == ""


# ------------------------------------------------------------------ compare and the result

def _two_rank_sides(a_steps=True):
    a_rows = [(0, 1, {"stage_ns": 1000, "computing_ns": 400}),
              (1, 1, {"stage_ns": 3000, "computing_ns": 800})]
    b_rows = [(0, 1, {"stage_ns": 2000, "computing_ns": 500}),
              (1, 1, {"stage_ns": 8000, "computing_ns": 900})]
    ka = pd.DataFrame([[0, 1, "mm", "MatMul", "AI_CORE", "", 1, 3000]], columns=KCOLS)
    kb = pd.DataFrame([[0, 1, "mm", "MatMul", "AI_CORE", "", 1, 5000]], columns=KCOLS)
    a = Side("runA", [0, 1], steps=steps(a_rows) if a_steps else None, kernels=ka)
    b = Side("runB", [0, 1], steps=steps(b_rows), kernels=kb)
    return a, b


def test_compare_cluster_and_per_pair_step_rows():
    a, b = _two_rank_sides()
    pairs = rank_pairs(a, b)
    assert pairs == [(0, 0), (1, 1)]
    r = compare(a, b, pairs + [(0, 1)])
    st = r.steps.set_index(["scope", "metric"])
    assert list(dict.fromkeys(r.steps["scope"])) == ["cluster", "rank 0", "rank 1",
                                                     "rank 0 vs rank 1"]
    # cluster: medians of two values (their mean): A (1000 + 3000) / 2 ns, B (2000 + 8000) / 2
    assert (st.loc[("cluster", "Stage"), "a_us"], st.loc[("cluster", "Stage"), "b_us"]) == (2.0,
                                                                                          5.0)
    assert (st.loc[("rank 1", "Stage"), "a_us"], st.loc[("rank 1", "Stage"), "b_us"]) == (3.0,
                                                                                        8.0)
    assert (st.loc[("rank 0", "Computing"), "a_us"],
            st.loc[("rank 0", "Computing"), "b_us"]) == (0.4, 0.5)
    assert (st.loc[("rank 0 vs rank 1", "Stage"), "a_us"],
            st.loc[("rank 0 vs rank 1", "Stage"), "b_us"]) == (1.0, 8.0)
    # the op types and kernels of the two runs: MatMul 3 -> 5 us
    assert r.op_types[["op_type", "a_us", "b_us"]].values.tolist() == [["MatMul", 3.0, 5.0]]
    assert r.kernels[["match", "a_us", "b_us"]].values.tolist() == [["name+shapes", 3.0, 5.0]]
    assert (r.a, r.b, r.pairs) == ("runA", "runB", [(0, 0), (1, 1), (0, 1)])
    # Stage 2 -> 5 us per step: a change of 3 us, beyond max(0.5 % of 2 us, 1 us); the
    # explanation calls the sides A and B
    assert r.explanation == "B is 0.0 ms slower per step than A (Stage 0.0 ms -> 0.0 ms, +150 %)."
    assert "largest op-type changes" not in r.explanation  # +2 us is below 50 us


def test_compare_with_a_side_without_step_data():
    a, b = _two_rank_sides(a_steps=False)
    r = compare(a, b, rank_pairs(a, b))
    st = r.steps.set_index(["scope", "metric"])
    assert list(dict.fromkeys(r.steps["scope"])) == ["cluster", "rank 0", "rank 1"]
    assert math.isnan(st.loc[("rank 1", "Stage"), "a_us"])
    assert st.loc[("rank 1", "Stage"), "b_us"] == 8.0
    assert r.explanation == ""  # no Stage delta, op change below 50 us, no communication


def test_compare_single_ranks_scope():
    a, b = _two_rank_sides()
    r = compare(select_ranks(a, [1]), select_ranks(b, [0]))
    assert set(r.steps["scope"]) == {"rank 1 vs rank 0"}
    st = r.steps.set_index("metric")
    assert (st.loc["Stage", "a_us"], st.loc["Stage", "b_us"]) == (3.0, 2.0)
    r = compare(select_ranks(a, [1]), select_ranks(b, [1]))
    assert set(r.steps["scope"]) == {"rank 1"}
    assert rank_pairs(select_ranks(a, [1]), select_ranks(b, [0])) == [(1, 0)]
    assert rank_pairs(a, select_ranks(b, [1])) == [(1, 1)]


def test_select_ranks_filters_and_names_missing_ranks():
    a, _ = _two_rank_sides()
    s = select_ranks(a, [1], label="A1")
    assert (s.label, s.ranks, s.steps["rank"].tolist(), len(s.kernels)) == ("A1", [1], [1], 0)
    assert select_ranks(a, [1, 0]).ranks == [0, 1] and select_ranks(a, [0]).label == "runA"
    with pytest.raises(ValueError, match=r"^rank\(s\) 7, 9 not in runA \(ranks there: 0, 1\)$"):
        select_ranks(a, [7, 0, 9])
    with pytest.raises(ValueError, match=r"\(ranks there: none\)"):
        select_ranks(Side("e", []), [0])


def test_result_tables_and_json_form():
    a, b = _ab()
    a.kernels = pd.DataFrame([[0, 1, f"k{i}", f"T{i}", "AI_CORE", "", 1, 1000 * i]
                              for i in range(1, 5)], columns=KCOLS)
    b.kernels = a.kernels.assign(total_ns=a.kernels["total_ns"] * 2)
    r = compare(a, b, rank_pairs(a, b))
    assert list(r.tables()) == ["steps", "op_types", "kernels", "communication", "bandwidth"]
    assert r.tables()["op_types"] is r.op_types and r.tables()["bandwidth"] is r.bandwidth
    doc = r.as_dict(top=2)
    assert list(doc) == ["a", "b", "pairs", "statistic", "explanation", "unmatched_groups",
                         "steps", "op_types", "kernels", "communication", "bandwidth"]
    assert (doc["a"], doc["b"], doc["pairs"], doc["statistic"]) == ("A", "B", [[0, 0], [1, 1]],
                                                                    "median")
    assert doc["unmatched_groups"] == r.unmatched and len(r.unmatched) == 1
    # op types T4 .. T1 by |delta|: 4, 3, 2, 1 us; cut to 2 rows, as kernels and communication
    assert [o["op_type"] for o in doc["op_types"]] == ["T4", "T3"]
    assert len(doc["kernels"]) == 2 and len(doc["communication"]) == 2
    assert len(doc["steps"]) == len(r.steps) == 9 * 3  # not cut
    # no steps in these sides: NaN becomes null
    assert doc["steps"][0]["a_us"] is None
    assert r.as_dict()["op_types"][3]["op_type"] == "T1"
