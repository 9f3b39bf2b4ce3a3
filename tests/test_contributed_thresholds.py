"""Thresholds of contributed verdict rules (data, memory, MoE) are thresholds like the built-in
ones: listed in verdicts.json and overridable with --threshold (before, the command line
rejected them as unknown). Expected: the Qwen3 sample's Preparing share per rank, read here from
each rank's step_trace_time.csv."""

from __future__ import annotations

import csv
import json

from click.testing import CliRunner

from ascendprof.cli.main import main
from tests.conftest import QWEN3


def _preparing_pct() -> dict[int, float]:
    out = {}
    for r in range(4):
        with open(QWEN3 / f"rank_{r}_ascend_pt" / "ASCEND_PROFILER_OUTPUT" /
                  "step_trace_time.csv", newline="") as f:
            row = next(csv.DictReader(f))
        out[r] = 100 * float(row["Preparing"]) / float(row["Stage"])
    return out


def _verdicts(tmp_path, *extra) -> dict:
    out = tmp_path / "out"
    r = CliRunner().invoke(main, ["analyse", str(QWEN3), "-o", str(out), "-q", "--no-cache",
                                  *extra])
    assert r.exit_code == 0, r.output
    return json.loads((out / "verdicts.json").read_text())


def test_contributed_thresholds_are_listed_and_overridable(tmp_path):
    pct = _preparing_pct()
    assert all(0.01 < p < 1 for p in pct.values()), pct  # ~0.03 % of an 810 ms step
    doc = _verdicts(tmp_path / "default")
    for name in ("data_bound_pct", "preparing_bound_pct", "memory_near_capacity_pct",
                 "memory_peer_excess_pct", "memory_peer_excess_min_mb", "ep_imbalance_ratio"):
        assert name in doc["thresholds"], name
    assert not [v for v in doc["verdicts"] if v["category"] == "data"]
    doc = _verdicts(tmp_path / "low", "--threshold", "preparing_bound_pct=0.01")
    assert doc["thresholds"]["preparing_bound_pct"] == 0.01
    (data,) = [v for v in doc["verdicts"] if v["category"] == "data"]
    assert sorted(data["ranks"]) == sorted(r for r, p in pct.items() if p >= 0.01)


def test_unknown_threshold_is_still_refused(tmp_path):
    r = CliRunner().invoke(main, ["analyse", str(QWEN3), "-o", str(tmp_path / "o"),
                                  "--threshold", "no_such_threshold=1"])
    assert r.exit_code == 2 and "unknown threshold" in r.output


def test_missing_communication_advice_names_levels_only_for_framework_profilers(monkeypatch):
    # issue #16: "Level0 does not collect it" wording on sources that have no torch_npu level
    from types import SimpleNamespace

    from ascendprof.analyze.verdicts import story

    monkeypatch.setattr(story, "_split_ev", lambda f, obs: {})
    obs = {"ranks": [0, 1], "stage": None}

    def next_step(kind, level):
        f = SimpleNamespace(missing_files={0: ["communication.json"], 1: []},
                            levels={0: level, 1: level}, kinds={0: kind, 1: kind})
        return story._unknown(f, obs, "Communication takes 40% of the step", "warning",
                              {})["next_step"]

    for kind in ("prof", "raw_cann", "legacy_mindspore"):
        assert "level" not in next_step(kind, None).lower(), kind
    assert "profiler level 1 or higher" in next_step("torch_npu", "Level0")
    assert "profiler level 1 or higher" in next_step("torch_npu", None)
    assert next_step("torch_npu", "Level1").startswith("Copy the communication.json")
