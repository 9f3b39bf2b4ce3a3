"""The gate on ascendprof's own output of a rank whose step breakdown was recomputed from its
kernels (a legacy MindSpore single-card run: no step_trace_time of the profiler, so Preparing is
not known and its column is empty in every row). The gate must take that output as an input,
and still find a change in the columns that hold numbers.

Before: `gate OUT OUT` and `diff OUT OUT` refused it ("column 'Preparing': '' is not a number").
"""
from __future__ import annotations

import csv
import json
import shutil

from click.testing import CliRunner

from ascendprof.cli.main import main

RUN = ("mindspore-legacy", "run_2", "normal_run", "profiler")


def _analyse(shared_data, tmp_path):
    src = tmp_path / "in" / "profiler"
    shutil.copytree(shared_data.joinpath(*RUN), src)
    out = tmp_path / "out"
    r = CliRunner().invoke(main, ["analyse", str(src.parent), "-o", str(out), "-q", "--no-html",
                                  "--no-cache", "--workers", "1"])
    assert r.exit_code == 0, r.output
    return out


def _gate(a, b):
    r = CliRunner().invoke(main, ["gate", str(a), str(b), "--format", "json", "--workers", "1"])
    return r, json.loads(r.output[r.output.index("{"):])


def test_gate_takes_an_output_whose_preparing_was_not_collected(shared_data, tmp_path):
    out = _analyse(shared_data, tmp_path)
    with open(out / "cluster_step_trace_time.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    ranks = [r for r in rows if r["Type"] == "rank"]
    # the premise: Preparing empty in every rank row, Computing a number
    assert ranks and all(r["Preparing"] == "" for r in ranks)
    assert all(float(r["Computing"]) > 0 for r in ranks)
    r, doc = _gate(out, out)
    assert r.exit_code == 0, r.output
    assert doc["regression"] is False

    # the same output with the rank's Computing 20 % longer: the gate still judges it
    slow = tmp_path / "slow"
    shutil.copytree(out, slow)
    for row in ranks:
        row["Computing"] = f"{float(row['Computing']) * 1.2:.2f}"
    with open(slow / "cluster_step_trace_time.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    r, doc = _gate(out, slow)
    assert doc["regression"] is True, r.output
    failed = {(c["metric"], c["scope"]) for c in doc["checks"] if c["verdict"] == "fail"}
    assert {("Computing", "rank"), ("Computing", "cluster")} <= failed, doc["checks"]
    # and in the unchanged comparison Computing was judged (passed), not skipped
    r, doc = _gate(out, out)
    assert {c["verdict"] for c in doc["checks"] if c["metric"] == "Computing"} == {"pass"}
