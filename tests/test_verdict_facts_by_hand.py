"""What the verdict rules read (verdicts/facts.py), on small tables worked out by hand and on
the real Qwen3 4-rank sample.

The other verdict tests check the verdicts these facts lead to; this file pins the facts
themselves: the group directory and pipeline stages from profiler_metadata.json, the step
values and their means, the link table, group sizes, the group texts, and each query of
:class:`Facts` (who waits for whom, lateness, nodes, thresholds, which operators). Every
expected value is worked out in the comments from the rows written here, or from the
profiler's own files read with csv/json.
"""

from __future__ import annotations

import math
from types import SimpleNamespace

import pandas as pd
import pyarrow as pa
import pytest

from ascendprof.analyze.verdicts import facts as F
from ascendprof.analyze.verdicts import opsplit
from ascendprof.model import schemas as S

from _verdict_tables import FakeCluster, fake_cluster, metadata

MS = 1_000_000


def _hash(text: str) -> str:
    """The profiler's group id of a parallel_group_info key: two 32-bit polynomial hashes
    (29, 131) of its characters, the first in the high word (as tests/test_verdicts.py)."""
    a = b = 0
    for ch in text:
        a = (a * 29 + ord(ch)) % 2**32
        b = (b * 131 + ord(ch)) % 2**32
    return str(a * 2**32 + b)


def _steps(values: dict, schema=S.STEP_TRACE) -> pa.Table:
    """STEP_TRACE rows from {rank: [(step, computing, cno, free, overlapped, bubble) ms]}."""
    rows = []
    for r, steps in values.items():
        for step, c, n, f, o, b in steps:
            rows.append({"rank": r, "step": step, "computing_ns": _ns(c),
                         "comm_not_overlapped_ns": _ns(n), "overlapped_ns": _ns(o),
                         "communication_ns": _ns(n), "free_ns": _ns(f), "stage_ns": 0,
                         "bubble_ns": _ns(b), "preparing_ns": 0})
    return pa.Table.from_pylist(rows, schema=S.SCHEMAS[schema])


def _ns(ms):
    return None if ms is None else round(ms * MS)


def _op(rank, group, op, elapse_ms, kind="collective", step_key="step1", transit_ms=0, wait=0):
    return dict(rank=rank, step=1, step_key=step_key, kind=kind, op_name=f"{op}@{group}",
                group=group, elapse_ns=_ns(elapse_ms), transit_ns=_ns(transit_ms), wait_ns=wait,
                sync_ns=0, idle_ns=0)


def _link(rank, key, group, src, dst, transport, size_mb, transit_ms, step_key="step1"):
    return dict(rank=rank, step=1, step_key=step_key, kind="collective", link_key=key,
                op_name=key.split("@")[0], group=group, src_rank=src, dst_rank=dst,
                transport=transport, size_mb=size_mb, transit_ns=_ns(transit_ms))


def _table(name, rows):
    return pa.Table.from_pylist(rows, schema=S.SCHEMAS[name])


def _pgi(**groups) -> dict:
    """parallel_group_info: key -> (group_name, global_ranks)."""
    return {"parallel_group_info": {k: {"group_name": n, "global_ranks": list(r)}
                                    for k, (n, r) in groups.items()}}


TH = {"comm_share_pct": 30.0, "excess_of_step_pct": 5.0, "min_excess_ms": 1.0}


# -- group directory and stages ----------------------------------------------------------------

def test_group_directory_lists_each_group_by_id_and_key_first_rank_wins():
    meta = {
        0: {"parallel_group_info": {
            "group_name_19": {"group_name": "pp", "global_ranks": [0, 2]},
            "k2": {"global_ranks": ["1", "3"]},  # no group_name: named by its key
            "k3": {"group_name": "dp"},  # no global_ranks: none
            "bad": "not a group"}},
        1: {"parallel_group_info": {"group_name_19": {"group_name": "other", "global_ranks": [9]}}},
        2: None,
        3: {"parallel_group_info": ["not", "a", "dict"]},
    }
    d = F.group_directory(meta)
    pp = {"key": "group_name_19", "name": "pp", "global_ranks": [0, 2]}
    k2 = {"key": "k2", "name": "k2", "global_ranks": [1, 3]}
    k3 = {"key": "k3", "name": "dp", "global_ranks": []}
    # group_name_19 -> 3985310405473756128 (checked on the Qwen3 sample by tests/test_verdicts.py)
    assert _hash("group_name_19") == "3985310405473756128"
    assert d == {"3985310405473756128": pp, "group_name_19": pp, _hash("k2"): k2, "k2": k2,
                 _hash("k3"): k3, "k3": k3}
    assert F.group_directory({}) == {}


@pytest.mark.parametrize("name", ["pp", "PP", "pipeline", "Pipeline_Parallel",
                                  "pipeline_model_parallel"])
def test_stage_is_the_position_in_a_pipeline_group(name):
    meta = {0: {"parallel_group_info": {
        "a": {"group_name": name, "global_ranks": [4, 0]},  # rank 4 first: stage 0
        "b": {"group_name": name, "global_ranks": ["5", "1"]},
        "c": {"group_name": "tp", "global_ranks": [6, 7]},  # not a pipeline group
        "d": {"group_name": name, "global_ranks": [8]},  # one rank: no pipeline
    }}, 1: {"parallel_group_info": {
        "e": {"group_name": name, "global_ranks": [1, 5]}}}}  # rank 1 already has stage 1
    assert F.stages(meta) == {4: 0, 0: 1, 5: 0, 1: 1}
    assert F.stages({0: {"parallel_group_info": {"c": {"global_ranks": [0, 1]}}}}) == {}


def test_qwen3_directory_and_stages(qwen3):
    # profiler_metadata.json of the sample: pp groups [0, 2] (group_name_19) and [1, 3]
    meta = metadata(qwen3)
    d = F.group_directory(meta)
    assert d[_hash("group_name_19")]["global_ranks"] == [0, 2]
    assert d[_hash("group_name_19")]["name"] == "pp"
    assert F.stages(meta) == {0: 0, 2: 1, 1: 0, 3: 1}


# -- step values --------------------------------------------------------------------------------

def test_step_frame_reported_first_breakdown_for_the_other_ranks():
    reported = _steps({0: [(1, 10, 2, 3, 4, 5), (2, 20, 1, 1, 0, 0)],
                       1: [(None, None, 2, 3, None, 0)]})
    breakdown = _steps({1: [(1, 99, 99, 99, 0, 0)],  # rank 1 is reported: not used
                        2: [(7, 5, 1, 0.5, 0, 0)]})
    f = F.step_frame(reported, breakdown)
    assert list(f.columns) == ["rank", "step", "computing_ns", "cno_ns", "overlapped_ns",
                               "free_ns", "bubble_ns", "total_ns", "source"]
    assert f.index.tolist() == [0, 1, 2, 3]
    # total = Computing + Communication(Not Overlapped) + Free (not Overlapped, not Bubble);
    # a missing step reads -1, a missing value 0
    assert f.values.tolist() == [
        [0, 1, 10 * MS, 2 * MS, 4 * MS, 3 * MS, 5 * MS, 15 * MS, "reported"],
        [0, 2, 20 * MS, 1 * MS, 0, 1 * MS, 0, 22 * MS, "reported"],
        [1, -1, 0, 2 * MS, 0, 3 * MS, 0, 5 * MS, "reported"],
        [2, 7, 5 * MS, 1 * MS, 0, MS // 2, 0, 6.5 * MS, "recomputed"]]
    assert all(str(f[c].dtype) == "int64" for c in f.columns[:-1])
    # the breakdown alone: every rank recomputed
    only = F.step_frame(None, breakdown)
    assert only["source"].tolist() == ["recomputed", "recomputed"]
    assert only["rank"].tolist() == [1, 2]
    # a breakdown of reported ranks only adds nothing
    f2 = F.step_frame(reported, _steps({0: [(1, 1, 1, 1, 0, 0)]}))
    assert f2["source"].tolist() == ["reported"] * 3 and f2.index.tolist() == [0, 1, 2]
    # nothing: an empty frame with the columns
    for st, bd in ((None, None), (reported.slice(0, 0), breakdown.slice(0, 0))):
        e = F.step_frame(st, bd)
        assert e.empty and list(e.columns) == list(f.columns)


def test_rank_means_per_step_and_shares():
    steps = F.step_frame(_steps({0: [(1, 10, 2, 3, 4, 5), (2, 20, 1, 1, 0, 0)],
                                 1: [(1, 0, 0, 0, 0, 0)]}),
                         _steps({2: [(1, 30, 10, 10, 0, 0)]}))
    m = F.rank_means(steps)
    # rank 0: means of (10, 20) = 15, (2, 1) = 1.5, (3, 1) = 2, overlapped (4, 0) = 2,
    # bubble (5, 0) = 2.5, total (15, 22) = 18.5; shares of 18.5: 15 -> 81.08 %,
    # free 2 -> 10.81 %, cno 1.5 -> 8.11 %
    r0 = m.loc[0]
    assert [r0[c] / MS for c in ("computing_ns", "cno_ns", "overlapped_ns", "free_ns",
                                 "bubble_ns", "total_ns")] == [15, 1.5, 2, 2, 2.5, 18.5]
    assert r0["n_steps"] == 2 and r0["source"] == "reported"
    assert r0["computing_pct"] == pytest.approx(100 * 15 / 18.5)
    assert r0["free_pct"] == pytest.approx(100 * 2 / 18.5)
    assert r0["cno_pct"] == pytest.approx(100 * 1.5 / 18.5)
    # rank 1: a zero step has no shares: 0, not NaN
    assert [m.loc[1, c] for c in ("computing_pct", "free_pct", "cno_pct")] == [0.0, 0.0, 0.0]
    # rank 2 (recomputed): 30 / 50 = 60 %, 10 / 50 = 20 % each
    assert m.loc[2, "source"] == "recomputed" and m.loc[2, "n_steps"] == 1
    assert [m.loc[2, c] for c in ("computing_pct", "free_pct", "cno_pct")] == pytest.approx(
        [60.0, 20.0, 20.0])
    assert m.index.tolist() == [0, 1, 2]
    # any positive step has shares, however short: a 1 ns step of 1 ns Computing is 100 %
    tiny = F.rank_means(pd.DataFrame({"rank": [7], "step": [1], "computing_ns": [1],
                                      "cno_ns": [0], "overlapped_ns": [0], "free_ns": [0],
                                      "bubble_ns": [0], "total_ns": [1], "source": ["x"]}))
    assert tiny.loc[7, "computing_pct"] == 100.0 and tiny.loc[7, "free_pct"] == 0.0


# -- links ---------------------------------------------------------------------------------------

def _links_table():
    return _table(S.COMM_LINKS, [
        # rank 4 / step1 / G / allreduce has a total entry: its per-op entry is not counted
        _link(4, "allreduce-top1@G", "G", 0, 1, "hccs", 2.0, 1.0),
        _link(4, "allreduce-total@G", "G", 0, 1, "HCCS", 10.0, 2.0),
        _link(4, "allreduce-total@G", "G", 0, 1, "HCCS", 6.0, 2.0, step_key="step2"),
        # allgather has no total on rank 4 / step1: every entry counts
        _link(4, "allgather-top1@G", "G", 0, 1, "HCCS", 4.0, 1.0),
        _link(4, "allgather-bottom1@G", "G", 0, 1, "HCCS", 2.0, 1.0),
        # on-chip copies: not links between ranks
        _link(4, "x-total@G", "G", 0, 0, "HCCS", 50.0, 1.0),
        _link(4, "y-total@G", "G", 0, 1, "local", 50.0, 1.0),
        # rank 6: no transit time -> no bandwidth; a group-local rank beyond the group
        _link(6, "allreduce-total@G", "G", 1, 0, "HCCS", 8.0, 0.0),
        _link(6, "allreduce-total@G", "G", 1, 5, "HCCS", 1.0, 1.0),
        # group U is not in the directory: local numbers, not known
        _link(4, "send-total@U", "U", 0, 3, "RDMA", 5.0, 1.0),
        # a row without group counts in no group size
        _link(4, "z-total@", None, 0, 9, "RDMA", 1.0, 1.0),
    ])


def test_link_table_by_hand():
    directory = {"G": {"key": "k", "name": "dp", "global_ranks": [4, 6]}}
    t = F.link_table(_links_table(), directory)
    assert list(t.columns) == ["group", "group_name", "src_local", "dst_local", "src_rank",
                               "dst_rank", "transport", "reported_by", "size_mb",
                               "transit_ns", "bandwidth_gbps", "ranks_known"]
    # rank 4 has 2 step keys (step1, step2), rank 6 one; per (group, src, dst, transport, rank):
    #   G 0->1 HCCS by 4: (10 + 6 + 4 + 2) MB / 2 = 11 MB, (2 + 2 + 1 + 1) ms / 2 = 3 ms,
    #       11 MB / 3 ms = 3.667 GB/s; global 4 -> 6
    #   G 1->0 HCCS by 6: 8 MB in 0 ms: no bandwidth; global 6 -> 4
    #   G 1->5 HCCS by 6: 1 MB / 1 ms = 1 GB/s; local 5 is beyond the group's 2 ranks: 6 -> 5
    #   U 0->3 RDMA by 4: 5 MB / 2, 1 ms / 2 -> 5 GB/s; U unknown: 0 -> 3, not known
    #   (no group) 0->9 RDMA by 4: 1 / 2 MB, 1 / 2 ms -> 2 GB/s
    rows = t.drop(columns=["size_mb", "transit_ns", "bandwidth_gbps"]).values.tolist()
    assert rows == [
        ["", "", 0, 9, 0, 9, "RDMA", 4, False],
        ["G", "dp", 0, 1, 4, 6, "HCCS", 4, True],
        ["G", "dp", 1, 0, 6, 4, "HCCS", 6, True],
        ["G", "dp", 1, 5, 6, 5, "HCCS", 6, True],
        ["U", "U", 0, 3, 0, 3, "RDMA", 4, False]]
    assert t["size_mb"].tolist() == [0.5, 11.0, 8.0, 1.0, 2.5]
    assert t["transit_ns"].tolist() == [0.5 * MS, 3 * MS, 0, 1 * MS, 0.5 * MS]
    bw = t["bandwidth_gbps"].tolist()
    assert bw[0] == pytest.approx(1.0) and bw[1] == pytest.approx(11 / 3)
    assert math.isnan(bw[2]) and bw[3] == pytest.approx(1.0) and bw[4] == pytest.approx(5.0)


def test_link_table_without_links():
    cols = ["group", "group_name", "src_local", "dst_local", "src_rank", "dst_rank",
            "transport", "reported_by", "size_mb", "transit_ns", "bandwidth_gbps",
            "ranks_known"]
    for links in (None, _table(S.COMM_LINKS, []),
                  _table(S.COMM_LINKS, [_link(0, "a-total@G", "G", 0, 0, "HCCS", 1.0, 1.0),
                                        _link(0, "a-total@G", "G", 0, 1, "LOCAL", 1.0, 1.0)])):
        t = F.link_table(links, {})
        assert t.empty and list(t.columns) == cols


def test_group_sizes_from_links_are_the_highest_local_rank_plus_one():
    # G: local ranks up to 5 -> at least 6 members; U: up to 3 -> 4; the row without group
    # is no group
    assert F.group_sizes_from_links(_links_table()) == {"G": 6, "U": 4}
    assert F.group_sizes_from_links(None) == {}
    assert F.group_sizes_from_links(_table(S.COMM_LINKS, [])) == {}


# -- groups and their texts ----------------------------------------------------------------------

def test_ranks_text():
    assert F.ranks_text([]) == "no ranks"
    assert F.ranks_text([3]) == "rank 3"
    assert F.ranks_text([3, 3]) == "rank 3"
    assert F.ranks_text([1, 0]) == "ranks 0, 1"
    assert F.ranks_text([0, 1, 2]) == "ranks 0–2"
    assert F.ranks_text(["10", 8, 7, 5, 3, 2, 1, 0]) == "ranks 0–3, 5, 7, 8, 10"
    assert F.ranks_text([0, 2, 3, 4, 6]) == "ranks 0, 2–4, 6"


def test_group_info_known_members():
    g = F.GroupInfo("123", "dp", "k", [4, 5, 6], 3, [4, 6])
    assert g.label == "dp"
    assert g.absent == [5] and g.n_absent == 1
    assert g.ref() == {"name": "dp", "id": "123", "global_ranks": [4, 5, 6]}
    assert g.text() == "dp (ranks 4–6)"
    # all collected
    full = F.GroupInfo("1", "pp", None, [0, 2], 2, [0, 2])
    assert full.absent == [] and full.n_absent == 0 and full.text() == "pp (ranks 0, 2)"


def test_group_info_unknown_members():
    g = F.GroupInfo("175", size=8, collected=[0, 1])
    assert g.label == "group 175"
    assert g.absent == []  # which ranks: unknown
    assert g.n_absent == 6  # 8 members, 2 collected
    assert g.ref() == {"name": "group 175", "id": "175", "global_ranks": [0, 1]}
    assert g.text() == "group 175 (at least 8 members; collected: ranks 0, 1)"
    # size unknown: nothing absent that can be counted, no size in the text
    g = F.GroupInfo("9", collected=[3])
    assert g.n_absent == 0 and g.text() == "group 9 (collected: rank 3)"
    # fewer members than collected cannot be absent
    assert F.GroupInfo("9", size=1, collected=[1, 2]).n_absent == 0
    # global ranks known but empty: nothing absent
    assert F.GroupInfo("9", "x", None, [], None, []).n_absent == 0


# -- Facts: what is collected ------------------------------------------------------------------

def _rank(rank, missing=(), level="Level1", kind="torch_npu", op_partial=None,
          kernel_partial=None):
    """What Facts reads of a rank result (engine RankResult)."""
    return SimpleNamespace(rank=rank, missing=list(missing), op_partial=op_partial,
                           kernel_partial=kernel_partial,
                           source=SimpleNamespace(profiler_level=level, kind=kind))


def _cluster(steps=None, ops=(), links=(), meta=None, ranks=None, sources=None,
             breakdown=None):
    tabs = {}
    if steps is not None:
        tabs[S.STEP_TRACE] = _steps(steps)
    if ops:
        tabs[S.COMM_OPS] = _table(S.COMM_OPS, list(ops))
    if links:
        tabs[S.COMM_LINKS] = _table(S.COMM_LINKS, list(links))
    ca = FakeCluster(tabs, meta or {}, breakdown=breakdown)
    if ranks is not None:
        ca.ranks = ranks
    if sources is not None:
        ca.sources = sources
    return ca


def _even(ranks, c=60, n=30, f=10):
    return {r: [(1, c, n, f, 0, 0)] for r in ranks}


def test_collected_unreadable_missing_levels_kinds_world_size_absent():
    meta = {0: {"distributed_args": {"world_size": "4"}, **_pgi(k1=("dp", [0, 1, 7]))},
            1: {"distributed_args": {"world_size": 6}}, 2: {}, 3: None}
    ranks = [_rank(1, ["kernel_details.csv"], "Level0", "db"), _rank(0), _rank(3, kind="prof")]
    sources = [SimpleNamespace(rank=r) for r in (0, 1, 2, 3, 5)] + [SimpleNamespace(rank=None),
                                                                   SimpleNamespace()]
    fa = F.Facts(_cluster(_even([0, 1, 2, 3]), meta=meta, ranks=ranks, sources=sources), TH)
    # the ranks with a result, whatever the step values say
    assert fa.collected == [0, 1, 3]
    assert fa.unreadable == [2, 5]  # found, no result
    assert fa.missing_files == {1: ["kernel_details.csv"], 0: [], 3: []}
    assert fa.levels == {1: "Level0", 0: "Level1", 3: "Level1"}
    assert fa.kinds == {1: "db", 0: "torch_npu", 3: "prof"}
    assert fa.world_size == 6  # the largest any rank names
    # expected: 0..5 and group k1's 0, 1, 7; collected 0, 1, 3
    assert fa.absent == [2, 4, 5, 7]


def test_without_rank_results_the_ranks_with_step_values_are_collected():
    fa = F.Facts(_cluster(_even([2, 0]), sources=[SimpleNamespace(rank=5)]), TH)
    assert fa.collected == [0, 2]
    assert fa.unreadable == [] and fa.missing_files == {} and fa.levels == {}
    assert fa.world_size is None and fa.absent == []
    empty = F.Facts(_cluster(), TH)
    assert empty.collected == [] and empty.means is None and empty.steps.empty
    assert empty.ranks_with_steps() == [] and empty.same_work_sets() == {}
    assert empty.step_sources([0]) == {} and empty.lateness(0) == 0.0
    assert not empty.has_peer_data(0) and empty.node_of() == {}
    assert empty.op_excess.ranks() == set() and empty.flagged == {}


def test_comm_flagged_ranks_at_or_above_the_share_per_stage():
    # Communication(Not Overlapped) shares: rank 0 30 / 100 = 30 % (exactly the threshold:
    # flagged), rank 1 29 / 100, rank 2 40 / 100, rank 3 10 / 100; stages from pp [0, 2], [1, 3]
    steps = {0: [(1, 60, 30, 10, 0, 0)], 1: [(1, 61, 29, 10, 0, 0)],
             2: [(1, 50, 40, 10, 0, 0)], 3: [(1, 80, 10, 10, 0, 0)]}
    meta = {0: _pgi(a=("pp", [0, 2]), b=("pp", [1, 3]))}
    assert F.Facts(_cluster(steps, meta=meta), TH).flagged == {0: [0], 1: [2]}
    assert F.Facts(_cluster(steps), TH).flagged == {None: [0, 2]}
    assert F.Facts(_cluster(steps), {**TH, "comm_share_pct": 40.0}).flagged == {None: [2]}


# -- Facts: a 4-rank cluster with two pipeline stages ----------------------------------------

DP_A, DP_B, PP_A, PP_B = _hash("k_dp_a"), _hash("k_dp_b"), _hash("k_pp_a"), _hash("k_pp_b")
META4 = {0: _pgi(k_pp_a=("pp", [0, 2]), k_pp_b=("pp", [1, 3]), k_dp_a=("dp", [0, 1]),
                 k_dp_b=("dp", [2, 3]))}
# One step. Op instances (the waits by the op-time split: the member with the shortest elapse
# arrived last, the others waited their extra elapse for it; 'late' = median of the others'
# elapse - own elapse, at least 0):
#   ar@dp_a: rank 0 10 ms, rank 1 4 ms -> 0 waits 6 for 1; 1 is 6 late
#   send@pp_a (p2p): rank 0 20, rank 2 2 -> 0 waits 18 for 2; 2 is 18 late
#   send@pp_b (p2p): rank 1 3, rank 3 9 -> 3 waits 6 for 1; 1 is 6 late
#   ar2@W (group W, not in the directory, ranks 0-3): 7, 3, 3, 3 -> rank 1's row is the first
#       of the shortest: 0 waits 4 for 1; nobody late (the others' median is 3 for 1, 2, 3)
# (no op in dp_b)
OPS4 = [_op(0, DP_A, "ar", 10), _op(1, DP_A, "ar", 4),
        _op(0, PP_A, "send", 20, kind="p2p"), _op(2, PP_A, "send", 2, kind="p2p"),
        _op(1, PP_B, "send", 3, kind="p2p"), _op(3, PP_B, "send", 9, kind="p2p"),
        _op(0, "W", "ar2", 7), _op(1, "W", "ar2", 3), _op(2, "W", "ar2", 3),
        _op(3, "W", "ar2", 3)]
# step totals 100, 100, 200, 220 ms (rank 3 recomputed)
STEPS4 = {0: [(1, 60, 30, 10, 0, 0)], 1: [(1, 70, 20, 10, 0, 0)], 2: [(1, 150, 30, 20, 0, 0)]}
BREAKDOWN4 = _steps({3: [(1, 170, 30, 20, 0, 0)]})
LINKS4 = [_link(0, "ar-total@" + DP_A, DP_A, 0, 1, "HCCS", 10.0, 1.0),
          _link(3, "ar-total@" + DP_B, DP_B, 1, 0, "HCCS", 10.0, 1.0),  # global 3 -> 2
          _link(0, "send-total@" + PP_A, PP_A, 0, 1, "RDMA", 10.0, 1.0),  # 0 -> 2, not HCCS
          _link(0, "x-total@W", "W", 0, 3, "HCCS", 10.0, 1.0)]  # W: global ranks unknown


@pytest.fixture
def four():
    return F.Facts(_cluster(STEPS4, OPS4, LINKS4, META4, breakdown=BREAKDOWN4), TH)


def test_groups_from_the_directory_and_from_the_ops(four):
    assert four.stage_of == {0: 0, 2: 1, 1: 0, 3: 1}
    assert set(four.groups) == {DP_A, DP_B, PP_A, PP_B, "W"}  # listed once, by id
    dp_a = four.groups[DP_A]
    assert (dp_a.id, dp_a.name, dp_a.key, dp_a.global_ranks, dp_a.size, dp_a.collected) == (
        DP_A, "dp", "k_dp_a", [0, 1], 2, [0, 1])
    assert dp_a.ref() == {"name": "dp", "id": DP_A, "global_ranks": [0, 1]}
    # W: not in the directory: its members are the ranks with its ops; its size from the
    # links (local rank 3 -> at least 4)
    w = four.groups["W"]
    assert (w.id, w.name, w.global_ranks, w.size, w.collected) == (
        "W", None, None, 4, [0, 1, 2, 3])
    # the components carry the group names
    names = dict(zip(four.comp["group"], four.comp["group_name"]))
    assert names == {DP_A: "dp", PP_A: "pp", PP_B: "pp", "W": "group W"}
    assert four.absent == [] and four.world_size is None


def test_wait_for_graph_queries(four):
    b = four.blame
    assert list(b.columns) == ["waiter", "waited_for", "group", "peer_wait_ns", "group_name"]
    # sorted by waiter, waited-for rank, group id (dp_a's id is digits: before 'W'); one step
    assert b.values.tolist() == [[0, 1, DP_A, 6 * MS, "dp"], [0, 1, "W", 4 * MS, "group W"],
                                 [0, 2, PP_A, 18 * MS, "pp"], [3, 1, PP_B, 6 * MS, "pp"]]
    w = four.waits_for({1})
    assert sorted(zip(w["waiter"], w["group"], w["peer_wait_ns"])) == [
        (0, DP_A, 6 * MS), (0, "W", 4 * MS), (3, PP_B, 6 * MS)]
    assert sorted(four.waits_for({1}, waiters={3})["waiter"]) == [3]
    # a waiter in the late set is not counted: 0 waits for 1, but 0 is late itself here
    assert sorted(zip(*[four.waits_for({0, 1})[c] for c in ("waiter", "waited_for")])) == [
        (3, 1)]
    # the most one rank waits for rank 1, over all groups: rank 0 6 + 4 = 10 ms (rank 3: 6)
    assert four.max_wait_for(1) == 10 * MS
    assert four.max_wait_for(2) == 18 * MS
    assert four.max_wait_for(3) == 0.0


def test_lateness_counts_the_groups_within_the_stage(four):
    # rank 1 has an op group within its stage (dp_a: ranks 0, 1 both stage 0): only those
    # count: 6 ms (not + 6 of pp_b, which crosses stages)
    assert four.lateness(1) == 6 * MS
    # rank 2 has none (pp_a and W cross stages; dp_b has no op): all of its ops: 18 + 0
    assert four.lateness(2) == 18 * MS
    assert four.lateness(0) == 0.0 and four.lateness(3) == 0.0 and four.lateness(9) == 0.0
    assert four.crosses_stages(PP_A) and four.crosses_stages("W")
    assert not four.crosses_stages(DP_A) and not four.crosses_stages("nope")


def test_lateness_without_stages_counts_every_group():
    fa = F.Facts(_cluster(STEPS4, OPS4), TH)
    # no stage: no group crosses; every group has 2+ collected members: rank 1: 6 + 6 + 0
    assert fa.lateness(1) == 12 * MS and fa.lateness(2) == 18 * MS
    assert fa.same_work_sets() == {None: [0, 1, 2]}


def test_nodes_are_joined_by_hccs_links_of_known_ranks(four):
    # dp_a 0 -> 1 (HCCS): node 0; dp_b local 1 -> 0 = global 3 -> 2 (HCCS): node 2 (the
    # smaller); pp_a is RDMA; W's ranks are not known
    assert four.node_of() == {0: 0, 1: 0, 3: 2, 2: 2}
    assert four.node_of() is four.node_of()
    # a chain 5 - 4 - 3 (HCCS), written highest first: one node named by rank 3
    g = {"key": "c", "name": "c", "global_ranks": [3, 4, 5]}
    links = [_link(5, "a-total@C", "C", 2, 1, "HCCS", 1.0, 1.0),
             _link(4, "a-total@C", "C", 1, 0, "HCCS", 1.0, 1.0)]
    fa = F.Facts(_cluster(_even([3]), links=links), TH)
    fa.links = F.link_table(_table(S.COMM_LINKS, links), {"C": g})
    assert fa.node_of() == {5: 3, 4: 3, 3: 3}


def test_peer_data_and_group_of(four):
    assert all(four.has_peer_data(r) for r in range(4))
    assert not four.has_peer_data(9)
    # rank 5 whose only op is alone in its group: no peer whose wait could be seen
    fa = F.Facts(_cluster(_even([0, 1, 5]), [_op(0, "g", "ar", 5), _op(1, "g", "ar", 4),
                                            _op(5, "solo", "ar", 5)]), TH)
    assert fa.has_peer_data(0) and not fa.has_peer_data(5)
    g = four.group_of("unknown")
    assert (g.id, g.label, g.collected) == ("unknown", "group unknown", [])
    assert four.group_of(DP_A) is four.groups[DP_A]


def test_step_queries(four):
    assert four.ranks_with_steps() == [0, 1, 2, 3]
    assert four.same_work_sets() == {0: [0, 1], 1: [2, 3]}
    # steps 100, 100, 200, 220 ms: median 150 ms; of ranks 2, 3: 210 ms
    assert four.median_step_ns() == 150 * MS
    assert four.median_step_ns([3, 2]) == 210 * MS
    # 5 % of the median, at least 1 ms: 7.5 ms; of ranks 0, 1 (100 ms): 5 ms
    assert four.excess_threshold_ns() == pytest.approx(7.5 * MS)
    assert four.excess_threshold_ns([0, 1]) == pytest.approx(5 * MS)
    th = F.Facts(_cluster(STEPS4, meta=META4, breakdown=BREAKDOWN4),
                 {**TH, "min_excess_ms": 6.0})
    assert th.excess_threshold_ns([0, 1]) == pytest.approx(6 * MS)
    assert th.excess_threshold_ns() == pytest.approx(7.5 * MS)
    assert four.step_sources([3, 0, 0, 9]) == {"0": "reported", "3": "recomputed"}


def test_same_work_sets_puts_ranks_without_stage_apart():
    meta = {0: _pgi(a=("pp", [0, 2]))}
    fa = F.Facts(_cluster(_even([0, 1, 2]), meta=meta), TH)
    assert fa.same_work_sets() == {0: [0], None: [1], 1: [2]}


def test_qwen3_facts_from_the_profilers_files(qwen3):
    fa = F.Facts(fake_cluster(qwen3), TH)
    assert fa.collected == [0, 1, 2, 3] and fa.world_size == 4 and fa.absent == []
    # Communication(Not Overlapped) shares (step_trace_time.csv): ~52, 55, 34, 32 %: all
    # above 30 %; stage 0 = ranks 0, 1
    assert fa.flagged == {0: [0, 1], 1: [2, 3]}
    assert F.Facts(fake_cluster(qwen3), {**TH, "comm_share_pct": 40.0}).flagged == {0: [0, 1]}
    pp = fa.groups[_hash("group_name_19")]
    assert (pp.name, pp.global_ranks, pp.collected) == ("pp", [0, 2], [0, 2])
    assert fa.crosses_stages(_hash("group_name_19"))
    # the four ranks' HCCS links join them into one node
    assert fa.node_of() == {0: 0, 1: 0, 2: 0, 3: 0}


# -- where the op rows come from --------------------------------------------------------------

def test_op_rows_of_the_workers_are_preferred():
    # the workers' rows say rank 0 waits 6 for rank 1; the full tables say nothing of that
    mine = [opsplit.op_rows(_table(S.COMM_OPS, [_op(0, "g", "ar", 10)])),
            opsplit.op_rows(_table(S.COMM_OPS, [_op(1, "g", "ar", 4)]))]
    ca = _cluster(_even([0, 1]), [_op(0, "g", "ar", 3), _op(1, "g", "ar", 3)])
    ca.op_row_batches = lambda: iter(mine)
    fa = F.Facts(ca, TH)
    assert fa.totals.blame == {(0, 1, "g"): 6 * MS}
    # no worker rows: the full tables are split (equal elapses: nobody waits)
    ca.op_row_batches = lambda: iter([])
    fa = F.Facts(ca, TH)
    assert fa.totals.blame == {} and sorted(fa.comp["rank"]) == [0, 1]


# -- which operators -------------------------------------------------------------------------

class _Parked:
    """A table parked on disk by the engine: ``load()`` gives it back."""

    def __init__(self, t):
        self.t = t

    def load(self):
        return self.t


def _op_partial(rank, rows):
    return pa.Table.from_pylist([{"rank": rank, "op_type": o, "accelerator_core": c,
                                  "count": n, "total_ns": t} for o, c, n, t in rows])


def _kernel_partial(rank, rows):
    return pa.Table.from_pylist([{"rank": rank, "name": k, "input_shapes": s, "op_type": o,
                                  "count": n, "total_ns": t} for k, s, o, n, t in rows])


def _excess_cluster():
    # rank 0: 2 steps; ranks 1 and 3: 1 step; rank 2 has no kernel data
    ranks = [
        _rank(0, op_partial=_op_partial(0, [("MatMul", "AI_CORE", 4, 8 * MS),
                                            ("Add", "AI_VECTOR_CORE", 2, 2 * MS)]),
              kernel_partial=_Parked(_kernel_partial(0, [("mm", "1,2", "MatMul", 4, 8 * MS),
                                                         ("ad", None, "Add", 2, 2 * MS)]))),
        _rank(1, op_partial=_Parked(_op_partial(1, [("MatMul", "AI_CORE", 2, 3 * MS),
                                                    ("Add", "AI_VECTOR_CORE", 2, 2 * MS),
                                                    ("Cast", "AI_CORE", 1, 1 * MS)]))),
        _rank(2),
        _rank(3, op_partial=_op_partial(3, [("MatMul", "AI_CORE", 1, 1_234_567)]),
              kernel_partial=_kernel_partial(3, [])),
    ]
    steps = {0: [(1, 60, 30, 10, 0, 0), (2, 60, 30, 10, 0, 0)], 1: [(1, 60, 30, 10, 0, 0)],
             2: [(1, 60, 30, 10, 0, 0)], 3: [(1, 60, 30, 10, 0, 0)]}
    return F.Facts(_cluster(steps, ranks=ranks), TH)


def test_op_excess_per_step_largest_first():
    fa = _excess_cluster()
    ex = fa.op_excess
    assert ex is fa.op_excess and ex.ranks() == {0, 1, 3}
    # per step: rank 0 MatMul 8 / 2 = 4 ms (count 2), Add 1 ms (count 1); rank 1 MatMul 3 ms
    # (2), Add 2 ms (2), Cast 1 ms (1); rank 3 MatMul 1.234567 ms (1)
    # ranks [0] against [1] (rank 2 has no kernel data): MatMul 4 - 3 = 1 ms more; Add and
    # Cast less: not listed; rank 0's kernels against none of rank 1: no kernel list
    got = ex.excess([0], [1, 2])
    assert got["ranks_compared"] == [0] and got["peers_compared"] == [1]
    assert got["op_types"] == [{"op_type": "MatMul", "accelerator_core": "AI_CORE",
                                "excess_ms": 1.0, "ms": 4.0, "peer_ms": 3.0, "count": 2.0,
                                "peer_count": 2.0}]
    # [1] against [0]: Add 2 - 1 = 1 ms and Cast 1 - 0 = 1 ms (equal: in key order);
    # MatMul less; top 1 keeps Add
    got = ex.excess([1], [0])
    assert [(r["op_type"], r["excess_ms"], r["count"], r["peer_count"])
            for r in got["op_types"]] == [("Add", 1.0, 2.0, 1.0), ("Cast", 1.0, 1.0, 0.0)]
    assert [r["op_type"] for r in ex.excess([1], [0], top=1)["op_types"]] == ["Add"]
    # [0, 1] (medians of the two) against [3]: MatMul median(4, 3) = 3.5 - 1.234567 =
    # 2.265 ms (3 decimals), Add median(1, 2) = 1.5, Cast median(0, 1) = 0.5; counts
    # median(2, 2) = 2 vs 1, median(1, 2) = 1.5 vs 0, median(0, 1) = 0.5 vs 0
    got = ex.excess([1, 0], [3, 0])
    assert got["ranks_compared"] == [0, 1] and got["peers_compared"] == [3]
    assert [(r["op_type"], r["excess_ms"], r["ms"], r["peer_ms"], r["count"], r["peer_count"])
            for r in got["op_types"]] == [("MatMul", 2.265, 3.5, 1.235, 2.0, 1.0),
                                          ("Add", 1.5, 1.5, 0.0, 1.5, 0.0),
                                          ("Cast", 0.5, 0.5, 0.0, 0.5, 0.0)]
    # kernels: rank 0 only has kernel rows (rank 3's table is empty): median over [0, 1]
    # of mm (4, 0) = 2 ms, ad (missing shapes read '') (1, 0) = 0.5 ms
    assert [(k["kernel"], k["input_shapes"], k["op_type"], k["excess_ms"], k["count"])
            for k in got["kernels"]] == [("mm", "1,2", "MatMul", 2.0, 1.0),
                                         ("ad", "", "Add", 0.5, 0.5)]
    # a rank with kernel data but no step values counts its totals as one step: rank 4's
    # MatMul 3 ms against rank 1's 3 ms per step: no excess; its Cast 2 ms against 1 ms
    ca = _cluster(_even([1]), ranks=[
        _rank(1, op_partial=_op_partial(1, [("MatMul", "AI_CORE", 2, 3 * MS),
                                            ("Cast", "AI_CORE", 1, 1 * MS)])),
        _rank(4, op_partial=_op_partial(4, [("MatMul", "AI_CORE", 3, 3 * MS),
                                            ("Cast", "AI_CORE", 3, 2 * MS)]))])
    got = F.Facts(ca, TH).op_excess.excess([4], [1])
    assert [(r["op_type"], r["excess_ms"], r["count"]) for r in got["op_types"]] == [
        ("Cast", 1.0, 3.0)]
    # a side without kernel data: nothing
    assert ex.excess([0], [0]) == {} and ex.excess([2], [1]) == {} and ex.excess([0], []) == {}


def test_op_excess_ties_keep_key_order_and_ms_are_exact():
    # one step each. rank 0: Abs 1 ms (rank 1 has none), Mul 1001 ms; rank 1: Mul 1000 ms.
    # Both exceed by exactly 1 ms: equal excesses keep the key order (Abs before Mul); a key
    # the peers lack counts 0 for them; 1001 ms is 1001.0 ms
    ca = _cluster(_even([0, 1]), ranks=[
        _rank(0, op_partial=_op_partial(0, [("Abs", "AI_CORE", 1, 1 * MS),
                                            ("Mul", "AI_CORE", 1, 1001 * MS)])),
        _rank(1, op_partial=_op_partial(1, [("Mul", "AI_CORE", 1, 1000 * MS)]))])
    got = F.Facts(ca, TH).op_excess.excess([0], [1])
    assert [(r["op_type"], r["excess_ms"], r["ms"], r["peer_ms"]) for r in got["op_types"]] == [
        ("Abs", 1.0, 1.0, 0.0), ("Mul", 1.0, 1001.0, 1000.0)]
