"""Verdicts on the real Qwen3 4-rank cluster (TP1 PP2 DP2).

Expected numbers are computed here from the profiler's own files (step_trace_time.csv,
communication.json, profiler_metadata.json) with plain csv/json; the tables handed to the verdicts
are built by tests/_verdict_tables.py, independent of ascendprof's readers.
"""

from __future__ import annotations

import csv
import math

import pyarrow as pa
import pytest

from ascendprof.model import schemas as S
from ascendprof.analyze import verdicts as V

from _verdict_tables import FakeCluster, comm_json, fake_cluster, metadata, rank_dirs


def _csv_steps(root):
    out = {}
    for rank, d in rank_dirs(root).items():
        with open(d / "ASCEND_PROFILER_OUTPUT" / "step_trace_time.csv", newline="") as f:
            (row,) = list(csv.DictReader(f))  # one step (13) collected per rank
        out[rank] = {k: float(v) for k, v in row.items() if k not in ("Step", "Device_id")}
    return out


def _p2p_sums_ms(root):
    """rank -> {"elapse": Σ Elapse Time(ms), "wait": Σ Wait Time(ms)} over p2p ops."""
    out = {}
    for rank, d in comm_json(root).items():
        ops = [v["Communication Time Info"] for k, v in d["step13"]["p2p"].items()
               if not k.startswith("Total")]
        out[rank] = {"elapse": sum(o["Elapse Time(ms)"] for o in ops),
                     "wait": sum(o["Wait Time(ms)"] for o in ops)}
    return out


@pytest.fixture
def qwen_verdicts(qwen3):
    return V.derive(fake_cluster(qwen3), V.thresholds(None))


def test_thresholds_are_the_documented_constants_with_overrides():
    th = V.thresholds(None)
    assert th["compute_spread_pct"] == V.COMPUTE_SPREAD_PCT
    assert th["slow_link_bw_ratio"] == V.SLOW_LINK_BW_RATIO
    assert set(th) >= {"compute_spread_pct", "free_spread_pct", "comm_share_pct", "wait_ratio",
                       "slow_rank_mad_z", "slow_rank_excess_pct", "slow_link_bw_ratio"}
    th2 = V.thresholds({"comm_share_pct": 60, "wait_ratio": None})
    assert th2["comm_share_pct"] == 60.0 and th2["wait_ratio"] == V.WAIT_RATIO
    with pytest.raises(ValueError, match="unknown threshold"):
        V.thresholds({"no_such": 1})
    with pytest.raises(ValueError):
        V.thresholds({"comm_share_pct": -1})
    with pytest.raises(ValueError):
        V.thresholds({"comm_share_pct": "lots"})


def test_group_ids_in_communication_json_are_hashes_of_parallel_group_info_keys(qwen3):
    directory = V.group_directory(metadata(qwen3))
    ids = {k.split("@")[1] for d in comm_json(qwen3).values() for kinds in d.values()
           for ops in kinds.values() for k in ops if "@" in k}
    assert ids and ids <= set(directory)
    # rank 0's pipeline send/receive runs in group_name_19 = pp over global ranks 0 and 2
    (pp_id,) = {k.split("@")[1] for k in comm_json(qwen3)[0]["step13"]["p2p"] if "@" in k}
    assert directory[pp_id] == {"key": "group_name_19", "name": "pp", "global_ranks": [0, 2]}


def test_pipeline_stage_of_each_rank_from_the_pp_groups(qwen3):
    # profiler_metadata.json: pp groups [0, 2] and [1, 3] -> ranks 0,1 first stage, 2,3 second
    assert V.stages(metadata(qwen3)) == {0: 0, 2: 1, 1: 0, 3: 1}


def test_stage_verdict_names_the_heavy_stage_and_the_waiting_stage(qwen3, qwen_verdicts):
    steps, p2p = _csv_steps(qwen3), _p2p_sums_ms(qwen3)
    (v,) = [v for v in qwen_verdicts if v["category"] == "compute" and v["scope"] == "stage"]
    ev = v["evidence"]
    assert v["ranks"] == [2, 3] and ev["slowest_stage"] == 1 and ev["slowest_stage_ranks"] == [2, 3]
    assert ev["waiting_stages"] == [0] and ev["waiting_ranks"] == [0, 1]
    # stage 0 computes ~231 ms, stage 1 ~401 ms per step (Computing column is in us)
    s0 = (steps[0]["Computing"] + steps[1]["Computing"]) / 2 / 1000
    s1 = (steps[2]["Computing"] + steps[3]["Computing"]) / 2 / 1000
    assert ev["stages"]["0"]["computing_ms"] == pytest.approx(s0, abs=1e-3)
    assert ev["stages"]["1"]["computing_ms"] == pytest.approx(s1, abs=1e-3)
    assert 230 < s0 < 232 and 400 < s1 < 402
    # stage 0 sits in batchSendRecv: its Notify_Wait time per rank from communication.json
    w0 = (p2p[0]["wait"] + p2p[1]["wait"]) / 2
    assert ev["stages"]["0"]["p2p_wait_ms"] == pytest.approx(w0, abs=1e-3)
    assert ev["stages"]["0"]["p2p_elapse_ms"] == pytest.approx(
        (p2p[0]["elapse"] + p2p[1]["elapse"]) / 2, abs=1e-3)
    share = {r: 100 * s["Computing"] / (s["Computing"] + s["Communication(Not Overlapped)"]
                                        + s["Free"]) for r, s in steps.items()}
    spread = (share[2] + share[3]) / 2 - (share[0] + share[1]) / 2
    assert ev["computing_spread_pct"] == pytest.approx(spread, abs=0.01)
    assert v["severity"] == "critical"  # 20.9 points >= 2 x 5
    assert "stage 1" in v["message"] and "stage 0" in v["message"]


def test_communication_of_first_stage_is_waiting_for_second_stage(qwen3, qwen_verdicts):
    steps = _csv_steps(qwen3)
    comm = [v for v in qwen_verdicts if v["category"] == "communication"]
    (v0,) = [v for v in comm if v["ranks"] == [0, 1]]
    ev = v0["evidence"]
    assert ev["cause"] == "waiting" and ev["waited_for_stage"] == 1
    assert ev["waited_for_ranks"] == [2, 3]
    for r in (0, 1):
        s = steps[r]
        total = s["Computing"] + s["Communication(Not Overlapped)"] + s["Free"]
        assert ev["comm_not_overlapped_pct"][str(r)] == pytest.approx(
            100 * s["Communication(Not Overlapped)"] / total, abs=0.01)
        assert ev["comm_not_overlapped_ms"][str(r)] == pytest.approx(
            s["Communication(Not Overlapped)"] / 1000, abs=1e-3)
    # pipeline send/receive: 16.78 MB over HCCS in 0.80 ms per rank (Bandwidth Info) ...
    assert ev["by_kind_group"]["p2p:pp"]["transfer_ms"] == pytest.approx(0.80244, abs=1e-3)
    # ... and waiting for the stage-1 peer: the extra elapse of each batchSendRecv over the same
    # op on the pp peer (rank r+2), from communication.json of both ranks
    cj = comm_json(qwen3)
    peer_wait = []
    for r in (0, 1):
        mine, theirs = (
            {k: v["Communication Time Info"]["Elapse Time(ms)"]
             for k, v in cj[x]["step13"]["p2p"].items() if "@" in k} for x in (r, r + 2))
        peer_wait.append(sum(max(0.0, e - theirs[k]) for k, e in mine.items()))
    assert ev["by_kind_group"]["p2p:pp"]["peer_wait_ms"] == pytest.approx(
        sum(peer_wait) / 2, abs=2e-3)
    assert 300 < sum(peer_wait) / 2 < 330
    # the second stage waits in the embedding all-reduce (group embd spans both stages) for
    # the first stage, which arrives last (rank 0/1: ~34.6 ms elapse vs ~121 ms on rank 2/3)
    (v1,) = [v for v in comm if v["ranks"] == [2, 3]]
    assert v1["evidence"]["cause"] == "waiting" and v1["evidence"]["waited_for_ranks"] == [0, 1]
    assert v1["evidence"]["waited_for_stage"] == 0
    assert "embd" in v1["message"]


def test_clean_cluster_has_no_slow_rank_and_no_slow_link(qwen_verdicts):
    cats = [v["category"] for v in qwen_verdicts]
    assert "slow_rank" not in cats and "slow_link" not in cats
    # groups within one stage (dp_cp 0,1 and 2,3) are balanced: no group-scope verdicts
    assert not [v for v in qwen_verdicts if v["scope"] == "group"]
    for v in qwen_verdicts:
        assert list(v) == ["id", "category", "severity", "scope", "ranks", "groups", "message",
                           "evidence", "symptoms", "threshold", "next_step", "caused_by"]
        assert v["severity"] in ("info", "warning", "critical") and v["message"]


def test_links_map_group_local_ranks_to_global(qwen3):
    ca = fake_cluster(qwen3)
    links = V.link_table(ca.concat(S.COMM_LINKS), V.group_directory(ca.metadata))
    dp23 = links[links["group_name"] == "dp_cp"]
    # rank 2's matrix writes the dp_cp link as "0-1" (group-local); globally it is 2 -> 3
    assert {(int(a), int(b)) for a, b in zip(dp23["src_rank"], dp23["dst_rank"])} == {
        (0, 1), (1, 0), (2, 3), (3, 2)}
    row = dp23[(dp23["src_rank"] == 2)].iloc[0]
    assert (int(row["src_local"]), int(row["dst_local"])) == (0, 1)
    # reduce-total + allgather-total of rank 2's '0-1' HCCS link: size / time as the file has it
    m = __import__("_verdict_tables").matrix_json(qwen3)[2]["step13"]["collective"]
    keys = [k for k in m if k.endswith("-total@5862276123280252691")]
    size = sum(m[k]["0-1"]["Transit Size(MB)"] for k in keys)
    time_ms = sum(m[k]["0-1"]["Transit Time(ms)"] for k in keys)
    assert row["size_mb"] == pytest.approx(size) and row["bandwidth_gbps"] == pytest.approx(
        size / time_ms, rel=1e-6)


def test_without_metadata_the_whole_cluster_is_one_group(qwen3):
    ca = fake_cluster(qwen3)
    ca.metadata = {}
    out = V.derive(ca, V.thresholds(None))
    (v,) = [v for v in out if v["category"] == "compute"]
    # ranks 2, 3 compute ~49% of the step, ranks 0, 1 ~29%: a 2-vs-2 split is not one slow rank
    assert v["scope"] == "group" and v["ranks"] == [2, 3]
    assert not [v for v in out if v["category"] == "slow_rank"]


def test_no_stages_and_no_rank_above_the_communication_threshold(qwen3):
    """Without pipeline stages and with no rank's Communication(Not Overlapped) share above
    the threshold (Qwen3's highest is ~52 %), there is no communication verdict (this once
    divided by the empty rank set)."""
    ca = fake_cluster(qwen3)
    ca.metadata = {}
    out = V.derive(ca, V.thresholds({"comm_share_pct": 99}))
    assert out and not [v for v in out if v["category"] == "communication"]


def _clone_rank(table: pa.Table, src: int, new: int) -> pa.Table:
    t = table.filter(pa.compute.equal(table["rank"], src))
    return t.set_column(t.schema.get_field_index("rank"), "rank",
                        pa.array([new] * t.num_rows, pa.int32()))


def test_slow_rank_among_four_equal_peers_uses_the_robust_score(qwen3):
    base = fake_cluster(qwen3).tabs[S.STEP_TRACE]
    # four copies of rank 0's real step; rank 3 gets 60 ms more Computing (7.4 % of the step)
    parts = [_clone_rank(base, 0, r) for r in range(4)]
    comp = parts[3]["computing_ns"].to_pylist()
    parts[3] = parts[3].set_column(parts[3].schema.get_field_index("computing_ns"),
                                   "computing_ns", pa.array([c + 60_000_000 for c in comp],
                                                            pa.int64()))
    ca = FakeCluster({S.STEP_TRACE: pa.concat_tables(parts)}, {})
    out = V.derive(ca, V.thresholds(None))
    (v,) = [v for v in out if v["category"] == "slow_rank"]
    assert v["ranks"] == [3]
    comp_ev = v["evidence"]["parts"]["Computing"]
    assert comp_ev["excess_ms"] == pytest.approx(60.0)
    assert comp_ev["excess_of_step_pct"] == pytest.approx(100 * 60 / 810.02225, abs=0.01)
    # a quieter rank (2 ms more) does not pass
    parts[3] = _clone_rank(base, 0, 3)
    ca2 = FakeCluster({S.STEP_TRACE: pa.concat_tables(parts)}, {})
    assert not [v for v in V.derive(ca2, V.thresholds(None)) if v["category"] == "slow_rank"]


def test_no_data_gives_no_verdicts_and_breakdown_fills_missing_ranks(qwen3):
    assert V.derive(FakeCluster({}, {}), V.thresholds(None)) == []
    tabs = fake_cluster(qwen3).tabs
    st = tabs[S.STEP_TRACE]
    reported = st.filter(pa.compute.not_equal(st["rank"], 3))
    recomputed = st.filter(pa.compute.equal(st["rank"], 3))
    frame = V.step_frame(reported, recomputed)
    assert sorted(frame["rank"]) == [0, 1, 2, 3]
    assert frame.set_index("rank").loc[3, "source"] == "recomputed"
    assert math.isclose(frame.set_index("rank").loc[0, "total_ns"],
                        231290100 + 420174260 + 158558000)


def test_iteration_trace_findings_become_verdicts():
    # hand-made graph-mode iteration trace: 5 ranks, 3 steps; rank 4's forward+backward is twice
    # as long (200 ms against 100 ms), intervals and tails equal
    rows = [{"rank": r, "step": s, "start_ns": 0, "end_ns": 0,
             "iteration_interval_ns": 2_000_000, "fp_bp_ns": (200 if r == 4 else 100) * 10**6,
             "tail_ns": 5_000_000} for r in range(5) for s in (1, 2, 3)]
    ca = FakeCluster({S.ITERATIONS: pa.Table.from_pylist(rows, schema=S.SCHEMAS[S.ITERATIONS])},
                     {})
    out = V.derive(ca, V.thresholds(None))
    (v,) = [v for v in out if v["category"] == "slow_card"]
    assert v["ranks"] == [4] and v["scope"] == "rank"
    assert v["evidence"]["values_ms"]["4"] == pytest.approx(200.0)
    assert v["evidence"]["median_ms"] == pytest.approx(100.0)
