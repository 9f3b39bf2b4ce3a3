"""Injected problems in a copy of the real Qwen3 cluster: the verdicts must find exactly them.

(a) one rank's Computing × 1.3 (step_trace_time.csv Computing and Stage changed consistently,
    kernel_details.csv durations × 1.3 where the rank has it) -> slow_rank names that rank, and
    the pipeline-stage verdict stays as it was;
(b) one link's bandwidth halved (communication_matrix.json of one rank: Transit Time × 2 and
    Bandwidth(GB/s) ÷ 2 of one src-dst link of one transport in one group) -> slow_link names that
    link and transport.

Each case runs on tables parsed by the test itself (tests/_verdict_tables.py) and through the
whole pipeline (ascendprof.open(...).analysis()).
"""

from __future__ import annotations

import csv
import json
import shutil

import pytest

from conftest import analysis_of
from ascendprof.analyze import verdicts as V

from _verdict_tables import fake_cluster

DP_GROUP_0_1 = "5862276114690318097"  # group_name_5 = dp_cp over global ranks 0, 1


def _verdicts(root, how):
    if how == "tables":
        return V.derive(fake_cluster(root), V.thresholds(None))
    from ascendprof.engine import pipeline

    return analysis_of(root).verdicts


def _copy(qwen3, tmp_path):
    dst = tmp_path / "qwen3"
    shutil.copytree(qwen3, dst)
    return dst


def _rewrite_csv(path, edit):
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    head = rows[0]
    for row in rows[1:]:
        edit(head, row)
    with open(path, "w", newline="") as f:
        csv.writer(f, lineterminator="\n").writerows(rows)


def _slow_compute(root, rank, factor=1.3):
    out = root / f"rank_{rank}_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
    added = {}

    def step_edit(head, row):
        i_c, i_s = head.index("Computing"), head.index("Stage")
        comp = float(row[i_c])
        added["us"] = comp * (factor - 1)
        row[i_c] = repr(comp * factor)
        row[i_s] = repr(float(row[i_s]) + comp * (factor - 1))

    def kernel_edit(head, row):
        i = head.index("Duration(us)")
        row[i] = f"{float(row[i]) * factor:.3f}"

    _rewrite_csv(out / "step_trace_time.csv", step_edit)
    if (out / "kernel_details.csv").exists():
        _rewrite_csv(out / "kernel_details.csv", kernel_edit)
    return added["us"]


def _halve_link(root, rank, group, link, transport="HCCS"):
    path = root / f"rank_{rank}_ascend_pt" / "ASCEND_PROFILER_OUTPUT" / "communication_matrix.json"
    data = json.loads(path.read_text())
    n = 0
    for kinds in data.values():
        for entries in kinds.values():
            for key, links in entries.items():
                lk = links.get(link)
                if key.endswith("@" + group) and lk and lk["Transport Type"] == transport:
                    lk["Transit Time(ms)"] *= 2
                    lk["Bandwidth(GB/s)"] /= 2
                    n += 1
    assert n > 0
    path.write_text(json.dumps(data))


HOW = ["tables", "pipeline"]


@pytest.mark.parametrize("how", HOW)
def test_clean_copy_has_no_slow_rank_or_slow_link(qwen3, how):
    cats = {v["category"] for v in _verdicts(qwen3, how)}
    assert not cats & {"slow_rank", "slow_link"}


@pytest.mark.parametrize("how", HOW)
@pytest.mark.parametrize("rank", [0, 3])  # rank 0 has kernel_details.csv, rank 3 does not
def test_slower_computing_on_one_rank_is_named_and_no_other(qwen3, tmp_path, how, rank):
    root = _copy(qwen3, tmp_path)
    added_us = _slow_compute(root, rank)
    clean = _verdicts(qwen3, how)
    out = _verdicts(root, how)
    slow = [v for v in out if v["category"] == "slow_rank"]
    assert [v["ranks"] for v in slow] == [[rank]]
    ev = slow[0]["evidence"]
    # the peer's Computing is unchanged, so the excess is the injected time plus the real gap
    peer = {0: 1, 3: 2}[rank]
    with open(qwen3 / f"rank_{peer}_ascend_pt/ASCEND_PROFILER_OUTPUT/step_trace_time.csv") as f:
        peer_comp_ms = float(next(csv.DictReader(f))["Computing"]) / 1000
    with open(qwen3 / f"rank_{rank}_ascend_pt/ASCEND_PROFILER_OUTPUT/step_trace_time.csv") as f:
        own_ms = float(next(csv.DictReader(f))["Computing"]) / 1000
    assert ev["part"] == "Computing" and ev["peers"] == sorted([rank, peer])
    assert ev["baseline_ms"] == pytest.approx(peer_comp_ms, abs=1e-3)
    assert ev["computing_ms"][str(rank)] == pytest.approx(own_ms * 1.3, abs=1e-3)
    assert ev["excess_ms"][str(rank)] == pytest.approx(own_ms + added_us / 1000 - peer_comp_ms,
                                                       abs=2e-3)

    def part_ev(v):
        return v["evidence"].get("excess_ms")
    assert part_ev(slow[0]) is not None
    # the pipeline-stage verdict is unchanged (stage 1 stays the heavy stage; the slow rank is
    # left out of its stage's Computing)
    stage = lambda vs: [(v["ranks"], v["evidence"]["heavy_stage"],  # noqa: E731
                         v["evidence"]["stage_ranks_left_out"])
                        for v in vs if v["category"] == "stage"]
    assert stage(clean) == [([2, 3], 1, [])]
    assert stage(out) == [([2, 3], 1, [rank])]
    assert sorted(v["category"] for v in out if v["severity"] != "info") == [
        "slow_rank", "stage"]
    assert not [v for v in out if v["category"] == "slow_link"]


@pytest.mark.parametrize("how", HOW)
def test_halved_link_bandwidth_is_the_only_slow_link(qwen3, tmp_path, how):
    root = _copy(qwen3, tmp_path)
    _halve_link(root, rank=0, group=DP_GROUP_0_1, link="0-1")
    out = _verdicts(root, how)
    links = [v for v in out if v["category"] == "slow_link"]
    assert len(links) == 1
    ev = links[0]["evidence"]
    assert (ev["src_rank"], ev["dst_rank"], ev["transport"]) == (0, 1, "HCCS")
    assert ev["group"] == "dp_cp" and ev["group_id"] == DP_GROUP_0_1
    assert links[0]["ranks"] == [0, 1] and links[0]["scope"] == "link"
    # expected bandwidth from the edited file: size / time of the '-total' entries
    m = json.loads((root / "rank_0_ascend_pt/ASCEND_PROFILER_OUTPUT/communication_matrix.json")
                   .read_text())["step13"]["collective"]
    tot = [v["0-1"] for k, v in m.items() if k.endswith("-total@" + DP_GROUP_0_1)]
    bw = sum(t["Transit Size(MB)"] for t in tot) / sum(t["Transit Time(ms)"] for t in tot)
    assert ev["bandwidth_gbps"] == pytest.approx(bw, abs=1e-4)
    assert ev["bandwidth_ratio"] < V.SLOW_LINK_BW_RATIO
    assert not [v for v in out if v["category"] == "slow_rank"]


def test_seeded_slow_ranks_of_a_generated_64_rank_cluster(tmp_path, shared_data):
    """benchmarks/make_cluster.py clones the real Qwen3 ranks into TP8 x PP2 x DP4 and slows a
    few seeded ranks down by 1.2-1.3x (others 0.95-1.05x); it records them in make_cluster.json.
    The slow_rank verdicts must name exactly those ranks."""
    import subprocess
    import sys
    from pathlib import Path

    from ascendprof.engine import pipeline

    script = Path(__file__).resolve().parents[1] / "benchmarks" / "make_cluster.py"
    if not script.exists():
        pytest.skip("benchmarks/make_cluster.py not present")
    out = tmp_path / "mc"
    subprocess.run([sys.executable, str(script), "64", str(out), "--pp", "2",
                    "--kernels-per-rank", "200", "--seed", "3"], check=True,
                   capture_output=True)
    seeded = sorted(json.loads((out / "make_cluster.json").read_text())["slow_ranks"])
    assert seeded
    verdicts = analysis_of(out).verdicts
    named = sorted(r for v in verdicts if v["category"] == "slow_rank" for r in v["ranks"])
    assert named == seeded
    assert not [v for v in verdicts if v["category"] == "slow_link"]
