"""gate: a rank whose step values one side lacks (its step_trace_time.csv damaged in the
current run) is left out of the cluster checks of those metrics, with a warning, instead of
its absence moving the cluster median into a false regression; --same-shape refuses it.

Through the CLI on copies of the Qwen3 fixture (ranks 0-3, torch_npu text). The expected
values: ranks 0, 2 and 3 are byte-identical on both sides, so each cluster check of the
compared ranks has equal medians (change 0) on both sides."""

from __future__ import annotations

import json
import shutil

from click.testing import CliRunner

from ascendprof.cli.main import main
from conftest import FIXTURES

QWEN = FIXTURES / "qwen3-4rank-pp2dp2"
STEP_METRICS = ("Computing", "Communication(Not Overlapped)", "Free", "Stage")


def _damaged(tmp_path):
    cur = tmp_path / "current"
    shutil.copytree(QWEN, cur)
    (cur / "rank_1_ascend_pt" / "ASCEND_PROFILER_OUTPUT" / "step_trace_time.csv").write_text(
        "Step,Computing\nx,y\n", encoding="utf-8")
    return cur


def test_a_rank_without_step_values_in_the_current_run_is_no_regression(tmp_path):
    cur = _damaged(tmp_path)
    r = CliRunner().invoke(main, ["gate", str(QWEN), str(cur), "--format", "json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    cluster = [c for c in out["checks"] if c["scope"] == "cluster"
               and c["metric"] in STEP_METRICS]
    assert {c["metric"] for c in cluster} == set(STEP_METRICS)
    for c in cluster:
        assert c["verdict"] == "pass", c
        assert c["baseline"] == c["current"] and c["change"] == 0, c
        assert c["baseline_n"] == c["current_n"], c  # the same ranks' steps on both sides
    (w,) = [w for w in out["warnings"] if "only in the baseline" in w]
    assert set(w.split(": ")[0].split(", ")) == set(STEP_METRICS)
    assert "rank(s) 1 only in the baseline; compared on the 3 rank(s) with values on both " \
           "sides" in w
    # rank 1's own checks: on one side only, skipped
    rank1 = [c for c in out["checks"] if c["scope"] == "rank" and c["key"] == "rank 1"
             and c["metric"] in STEP_METRICS]
    assert rank1 and all(c["verdict"] == "skip" for c in rank1)


def test_same_shape_refuses_a_rank_without_step_values(tmp_path):
    cur = _damaged(tmp_path)
    r = CliRunner().invoke(main, ["gate", "--same-shape", str(QWEN), str(cur)])
    assert r.exit_code == 2, r.output
    assert "not the same shape as" in r.output and "rank(s) 1 only in the baseline" in r.output
