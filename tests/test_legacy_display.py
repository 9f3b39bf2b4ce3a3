"""Legacy single-card MindSpore output shows its real numbers, and no source without a torch_npu
profiler level is told about levels (issue #16).

Expected values come from the profiler's own step_trace_raw_1_detail_time.csv, read here with the
csv module (HWTS ticks of 10 ns; the last row is the average, step '-').
"""

from __future__ import annotations

import csv
import json

import pytest
from click.testing import CliRunner

from ascendprof.cli.main import main

LEGACY = "mindspore-legacy/run_1/normal_run/profiler"


def _analyse(src, out):
    r = CliRunner().invoke(main, ["analyse", str(src), "-o", str(out)])
    assert r.exit_code == 0, r.output
    return r.output, json.loads((out / "summary.json").read_text())


def test_legacy_single_card_shows_its_322_steps(shared_data, tmp_path):
    src = shared_data / LEGACY
    with open(src / "step_trace_raw_1_detail_time.csv", newline="") as f:
        steps = [r for r in csv.DictReader(f) if r["step_num"].strip().isdigit()]
    assert len(steps) == 322
    want = {k: sum(int(r[k]) for r in steps) * 10 / len(steps) / 1e6
            for k in ("iteration_interval", "fp_and_bp", "tail")}
    text, summary = _analyse(src, tmp_path / "out")
    (it,) = summary["iterations"]
    assert (it["rank"], it["steps"]) == (1, 322)
    assert it["fp_bp_ms"] == pytest.approx(want["fp_and_bp"], rel=1e-9)
    assert it["tail_ms"] == pytest.approx(want["tail"], rel=1e-9)
    assert it["iteration_interval_ms"] == pytest.approx(want["iteration_interval"], rel=1e-9)
    assert "Iteration trace" in text and "322" in text and f"{want['fp_and_bp']:.3f}" in text
    # the recomputed breakdown (kernels of output_timeline_data, on the step trace's clock)
    # holds real time, not zeros
    rows = summary["ranks"]
    assert rows and all(r["origin"] == "recomputed" for r in rows)
    assert sum(r["computing_us"] > 0 for r in rows) >= len(rows) - 1
    assert "Level" not in json.dumps(summary["not_written"])


@pytest.mark.parametrize("rel", ["mindspore-legacy/JOB3", "mindspore-legacy/cluster_propose",
                                 LEGACY])
def test_no_level_wording_without_a_profiler_level(shared_data, tmp_path, rel):
    text, summary = _analyse(shared_data / rel, tmp_path / "out")
    assert "Level0" not in text and "Level0" not in json.dumps(summary["not_written"])


def test_level0_wording_kept_for_torch_npu_level0(shared_data, tmp_path):
    _, summary = _analyse(shared_data / "torch_npu-2rank-levels" / "text" / "level0",
                          tmp_path / "out")
    assert "Level0 does not collect it" in summary["not_written"]["cluster_communication.json"]
