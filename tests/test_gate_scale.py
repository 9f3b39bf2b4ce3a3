"""`ascendprof gate` on generated clusters (tests/synth_cluster.py, TP8 x DP2: 16 ranks on two
nodes, tensor-parallel groups of 8): one slow link or one slow rank among many must fail by
default, named, while 0.5 % noise everywhere passes.

A group's bandwidth is compared by its median over ranks, which one link of eight does not
move; so the defaults judge each link and each rank too. The expected link and rank come from
what each test injects into the generator (``link_scale``, ``compute_scale``), and the expected
names are written out here by hand from the layout (global rank = tp + 8 * dp; the tp group of
dp index 1 is ranks 8-15; the default group is all 16 ranks in one ring).
"""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

import synth_cluster as sc
from ascendprof.cli.main import main

SHAPE = sc.Shape(tp=8, pp=1, dp=2)
NOISE = 0.005  # +-0.5 % on every kernel and every link, drawn anew for each cluster


def gate(*args):
    return CliRunner().invoke(main, ["gate", *map(str, args), "--workers", "1"])


def as_json(result) -> dict:
    return json.loads(result.output[result.output.index("{"):])


def failed(doc: dict, rule: str | None = None) -> set[str]:
    return {c["key"] for c in doc["checks"]
            if c["verdict"] == "fail" and (rule is None or c["rule"] == rule)}


@pytest.fixture(scope="module")
def clusters(tmp_path_factory):
    root = tmp_path_factory.mktemp("gate_scale")
    made = {}

    def make(name: str, **kw) -> "Path":  # noqa: F821
        if name not in made:
            sc.write(sc.Spec(SHAPE, noise=NOISE, **kw), root / name)
            made[name] = root / name
        return made[name]
    return make


def test_one_slow_link_of_an_eight_rank_group_fails_naming_the_link(clusters):
    base = clusters("base", seed=1)
    cur = clusters("link", seed=2, link_scale={(10, 11): 0.7})  # 30 % less bandwidth
    r = gate(base, cur)
    assert r.exit_code == 1, r.output
    assert "10->11" in r.output and "REGRESSION" in r.output
    doc = as_json(gate(base, cur, "--format", "json"))
    # the link 10 -> 11 carries the ring of tp group 8-15 and of the default group 0-15
    assert failed(doc, "bandwidth@link") == {"tp (8-15) 10->11 HCCS",
                                              "default_group (0-15) 10->11 HCCS"}
    bad = [c for c in doc["checks"] if c["verdict"] == "fail" and c["rule"] == "bandwidth@link"]
    assert all(c["change_pct"] == pytest.approx(-30.0, abs=1.5) for c in bad)
    # the sender's own bandwidth per transport names the same rank, nothing else
    assert {k.split()[1] for k in failed(doc, "bandwidth@rank")} == {"10"}
    # what the median over the group's ranks sees: the group's bandwidth passes
    tp = next(c for c in doc["checks"] if c["rule"] == "bandwidth@group"
              and c["key"].startswith("tp (8, 9, 10") and c["key"].endswith("HCCS"))
    assert tp["verdict"] == "pass" and abs(tp["change_pct"]) < 2
    assert not failed(doc, "Computing@rank")


def test_half_percent_noise_everywhere_passes_and_prints_little(clusters):
    base = clusters("base", seed=1)
    cur = clusters("noise", seed=2)
    r = gate(base, cur)
    assert r.exit_code == 0, r.output
    assert "no regression" in r.output
    assert len(r.output.strip().splitlines()) <= 3, r.output  # title and the counts
    doc = as_json(gate(base, cur, "--format", "json"))
    rules = {c["rule"] for c in doc["checks"] if c["verdict"] == "pass"}
    assert {"bandwidth@link", "bandwidth@rank", "Computing@rank"} <= rules
    # every link of every ring and p2p pair was compared: 16 in the default group, 8 in each
    # tp group, 2 in each of the 8 dp groups of two ranks
    links = [c for c in doc["checks"] if c["rule"] == "bandwidth@link"]
    assert len(links) == 16 + 2 * 8 + 8 * 2
    assert max(abs(c["change_pct"]) for c in links) < 2


def test_one_rank_computing_regresses_fails_naming_the_rank(clusters):
    base = clusters("base", seed=1)
    cur = clusters("slow13", seed=2, compute_scale={13: 1.3})
    r = gate(base, cur)
    assert r.exit_code == 1, r.output
    assert "Computing" in r.output and "rank 13" in r.output
    doc = as_json(gate(base, cur, "--format", "json"))
    assert failed(doc, "Computing@rank") == {"rank 13"}
    bad = next(c for c in doc["checks"] if c["verdict"] == "fail" and c["rule"] == "Computing@rank")
    assert bad["change_pct"] == pytest.approx(30.0, abs=1.5)
    assert not failed(doc, "bandwidth@link")


def test_all_checks_lists_every_check(clusters):
    base = clusters("base", seed=1)
    cur = clusters("noise", seed=2)
    brief = gate(base, cur).output
    full = gate(base, cur, "--all-checks").output
    assert "PASS" not in brief and full.count("PASS") >= 40
    assert gate(base, cur, "--all").output == full  # the short name


def test_links_of_an_output_cluster_matrix():
    """An analyse output without per-rank tables gives the gate its links from
    cluster_communication_matrix.json: each group's 'Total Op Info@<group>' links in global
    ranks, self-links (on-chip copies) and other ops left out, ms -> ns, values as written."""
    from ascendprof.compare.gate.links import LINK_COLUMNS, from_matrix
    from ascendprof.report.readback import matrix_links

    doc = {"(8, 9)": {"step3": {
        "Total Op Info@g8": {
            "8-9": {"Transport Type": "HCCS", "Transit Size(MB)": 64.0, "Transit Time(ms)": 2.5,
                    "Bandwidth(GB/s)": 25.6},
            "9-8": {"Transport Type": "RDMA", "Transit Size(MB)": 32, "Transit Time(ms)": 1},
            "9-9": {"Transport Type": "LOCAL", "Transit Size(MB)": 1, "Transit Time(ms)": 0.1},
            "8-x": {"Transport Type": "HCCS", "Transit Size(MB)": 1, "Transit Time(ms)": 1}},
        "allreduce-top1@g8": {"8-9": {"Transport Type": "HCCS", "Transit Size(MB)": 1,
                                      "Transit Time(ms)": 1}},
    }}}
    got = from_matrix(matrix_links(doc))
    assert list(got.columns) == LINK_COLUMNS
    assert got.to_dict("records") == [
        {"group": "g8", "step_key": "step3", "src": 8, "dst": 9, "transport": "HCCS",
         "size_mb": 64.0, "transit_ns": 2_500_000.0},
        {"group": "g8", "step_key": "step3", "src": 9, "dst": 8, "transport": "RDMA",
         "size_mb": 32.0, "transit_ns": 1_000_000.0},
    ]
    assert from_matrix(matrix_links({})) is None
    only_self = {"g": {"step1": {"Total Op Info@g": {"3-3": {"Transit Size(MB)": 1,
                                                             "Transit Time(ms)": 1}}}}}
    assert from_matrix(matrix_links(only_self)) is None
