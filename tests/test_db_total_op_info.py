"""db input: the 'Total Op Info' bandwidth entries of cluster_communication.json carry the
"Large Packet Ratio" key, as msprof-analyze writes it for db input (0), with the same transit
size, time and bandwidth. Reference: msprof-analyze 26.2.0's cluster_communication_bandwidth.csv
on the shared Level1 db export (tests/reference/torch_npu-2rank-db-level1, see its README).
Text input keeps the key out of the totals (the tool's JSON for text has none: test_cluster_files).
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from ascendprof.cli.main import main

REF = Path(__file__).parent / "reference" / "torch_npu-2rank-db-level1" / \
    "cluster_communication_bandwidth.csv"


def test_total_op_info_large_packet_ratio_as_the_peer(shared_data, tmp_path):
    out = tmp_path / "out"
    r = CliRunner().invoke(main, ["analyse", str(shared_data / "torch_npu-2rank-levels" / "db" /
                                                 "level1"), "-o", str(out), "--quiet",
                                  "--no-cache", "--workers", "1"])
    assert r.exit_code == 0, r.output
    doc = json.loads((out / "cluster_communication.json").read_text())
    ours = {}
    for steps in doc.values():
        for step, ops in steps.items():
            for key, per_rank in ops.items():
                if key.startswith("Total Op Info@"):
                    group = key.split("@", 1)[1]
                    for rank, info in per_rank.items():
                        for tr, e in info["Communication Bandwidth Info"].items():
                            ours[(rank, group, step, tr)] = e
    with open(REF, newline="") as f:
        ref = [x for x in csv.DictReader(f) if x["hccl_op_name"] == "Total Op Info"]
    assert ref
    for x in ref:
        e = ours[(x["rank_id"], x["group_name"], x["step"], x["band_type"])]
        assert e["Large Packet Ratio"] == float(x["large_packet_ratio"]) == 0
        assert e["Transit Size(MB)"] == pytest.approx(float(x["transit_size"]), rel=1e-9)
        assert e["Transit Time(ms)"] == pytest.approx(float(x["transit_time"]), abs=1e-6)
        assert e["Bandwidth(GB/s)"] == pytest.approx(float(x["bandwidth"]), abs=1e-4)
