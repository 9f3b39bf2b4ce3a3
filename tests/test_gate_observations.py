"""The gate's observation table (``compare.gate.observe``) from a hand-built side: one row per
metric, rank, step and key, values in ns (MB and ns for bandwidth), worked out by hand below.

The real-data paths (an analyse output, a profiling directory, msprof-analyze's CSV files) are
tested in test_gate.py and test_compare_lineup.py; this file pins each rule of the reduction on
inputs small enough to follow.
"""

from __future__ import annotations

import math

import pandas as pd

from ascendprof.compare.diff import STEP_METRICS, GroupLabel, Side
from ascendprof.compare.gate.observe import OBS_COLUMNS, link_group, observations

NAN = float("nan")


def _rows(obs, metric):
    got = obs[obs["metric"] == metric].drop(columns="metric")
    return sorted(tuple(None if isinstance(v, float) and math.isnan(v) else v for v in r)
                  for r in got.itertuples(index=False))


def _steps(**cols):
    """STEP_TRACE rows: every metric column, unknown (NaN) unless given."""
    n = len(cols["rank"])
    return pd.DataFrame({**{c: [NAN] * n for c in STEP_METRICS.values()}, **cols})


def test_step_metrics_one_row_per_rank_step_and_known_value():
    steps = _steps(rank=[0, 0, 1], step=[1, 2, 1], computing_ns=[100, 200, 300],
                   free_ns=[5, None, 7])
    obs = observations(Side("a", [0, 1], steps=steps))
    assert list(obs.columns) == OBS_COLUMNS
    assert _rows(obs, "Computing") == [(0, "1", "", "", 100.0, None), (0, "2", "", "", 200.0, None),
                                       (1, "1", "", "", 300.0, None)]
    # a missing Free (rank 0, step 2) gives no row rather than 0
    assert _rows(obs, "Free") == [(0, "1", "", "", 5.0, None), (1, "1", "", "", 7.0, None)]
    # a metric unknown on every row gives no row
    assert not len(obs[obs["metric"] == "Bubble"])


def test_op_time_sums_kernels_per_rank_step_and_op_type_leaving_communication_out():
    kernels = pd.DataFrame({
        "rank": [0, 0, 0, 1, 0], "step": [1, 1, 2, 1, 1],
        "name": ["mm1", "mm2", "mm1", "mm1", "hcom_allReduce_"],
        "op_type": ["MatMul", "MatMul", "MatMul", "Add", "hcom_allReduce_"],
        "accelerator_core": ["AI_CORE", "AI_CORE", "AI_CORE", "AI_VECTOR_CORE", "HCCL"],
        "input_shapes": ["", "", "", "", ""], "count": [1, 1, 1, 1, 1],
        "total_ns": [10, 15, 7, 3, 1000]})
    obs = observations(Side("a", [0, 1], kernels=kernels))
    # rank 0 step 1 MatMul 10 + 15; the HCCL row is communication, not an op type
    assert _rows(obs, "op_time") == [(0, "1", "MatMul", "", 25.0, None),
                                     (0, "2", "MatMul", "", 7.0, None),
                                     (1, "1", "Add", "", 3.0, None)]


def test_op_time_from_op_statistic_is_per_step_when_the_step_count_is_known():
    # op_statistic totals cover the whole capture: rank 0 ran 4 steps, so 800 ns -> 200 a step;
    # rank 1 has no step rows: its total is kept as it is
    steps = _steps(rank=[0, 0, 0, 0], step=[1, 2, 3, 4], computing_ns=[1, 1, 1, 1])
    op_stats = pd.DataFrame({"rank": [0, 0, 1, 0],
                             "op_type": ["MatMul", "MatMul", "Add", "allreduce"],
                             "accelerator_core": ["AI_CORE", "MIX_AIC", "AI_CORE", "COMMUNICATION"],
                             "count": [1, 1, 1, 1], "total_ns": [500, 300, 90, 7000]})
    obs = observations(Side("a", [0, 1], steps=steps, op_stats=op_stats))
    assert _rows(obs, "op_time") == [(0, "", "MatMul", "", 200.0, None),
                                     (1, "", "Add", "", 90.0, None)]


def test_kernels_win_over_op_statistic():
    kernels = pd.DataFrame({"rank": [0], "step": [1], "name": ["k"], "op_type": ["Add"],
                            "accelerator_core": ["AI_CORE"], "input_shapes": [""],
                            "count": [1], "total_ns": [4]})
    op_stats = pd.DataFrame({"rank": [0], "op_type": ["MatMul"], "accelerator_core": ["AI_CORE"],
                             "count": [1], "total_ns": [500]})
    obs = observations(Side("a", [0], kernels=kernels, op_stats=op_stats))
    assert _rows(obs, "op_time") == [(0, "1", "Add", "", 4.0, None)]


def test_group_metrics_and_bandwidth_per_group_label():
    groups = {"g1": GroupLabel("g1", "tp", (0, 1))}
    comm_ops = pd.DataFrame({
        "rank": [0, 0, 0, 1], "step_key": ["step1", "step1", "step1", "step1"],
        "group": ["g1", "g1", "g9", "g1"],
        "elapse_ns": [10, 20, 5, 40], "transit_ns": [1, 2, 3, 4], "wait_ns": [0, 0, 0, 0],
        "sync_ns": [None, None, None, None], "idle_ns": [9, 18, 2, 36]})
    comm_bw = pd.DataFrame({
        "rank": [0, 0, 0, 1], "step_key": ["step1"] * 4, "group": ["g1", "g1", "g1", "g1"],
        "transport": ["HCCS", "HCCS", "RDMA", "HCCS"],
        "size_mb": [2.0, 6.0, 0.0, 1.0], "transit_ns": [1000.0, 3000.0, 50.0, 500.0]})
    obs = observations(Side("a", [0, 1], comm_ops=comm_ops, comm_bw=comm_bw, groups=groups))
    # g1 is named by its parallel group and ranks; g9 has no label: its id
    assert _rows(obs, "elapse") == [(0, "step1", "g9", "", 5.0, None),
                                    (0, "step1", "tp (0, 1)", "", 30.0, None),
                                    (1, "step1", "tp (0, 1)", "", 40.0, None)]
    # no synchronization time anywhere: no row (not 0)
    assert not len(obs[obs["metric"] == "synchronization"])
    # bandwidth: value = sum of MB, denom = sum of ns; a transport that moved 0 MB gives no row
    assert _rows(obs, "bandwidth") == [(0, "step1", "tp (0, 1)", "HCCS", 8.0, 4000.0),
                                       (1, "step1", "tp (0, 1)", "HCCS", 1.0, 500.0)]


def test_link_bandwidth_rows_are_named_by_group_and_global_ranks():
    groups = {"g1": GroupLabel("g1", "tp", (0, 1, 2, 3, 8)), "g2": GroupLabel("g2")}
    links = pd.DataFrame({
        "group": ["g1", "g1", "g2"], "step_key": ["step1", "step1", "step2"],
        "src": [2, 3, 5], "dst": [3, 2, 6], "transport": ["HCCS", "HCCS", "RDMA"],
        "size_mb": [4.0, 0.0, 1.5], "transit_ns": [2000.0, 10.0, 750.0]})
    obs = observations(Side("a", [2, 3, 5], links=links, groups=groups))
    # the 3->2 link moved nothing: left out; g2 has neither name nor ranks: its id
    assert _rows(obs, "link bandwidth") == [
        (2, "step1", "tp (0-3, 8) 2->3", "HCCS", 4.0, 2000.0),
        (5, "step2", "g2 5->6", "RDMA", 1.5, 750.0)]


def test_link_group_names():
    assert link_group(GroupLabel("123", "dp", tuple(range(0, 64, 8)))) == \
        "dp (0, 8, 16, 24, 32, 40, 48, 56)"
    assert link_group(GroupLabel("123", "", (4, 5, 6, 7))) == "(4-7)"
    assert link_group(GroupLabel("123")) == "123"


def test_empty_side_gives_the_columns_only():
    obs = observations(Side("a", []))
    assert list(obs.columns) == OBS_COLUMNS and not len(obs)
    empty = pd.DataFrame({"rank": [], "step": []})
    assert not len(observations(Side("a", [], steps=empty, kernels=empty)))
