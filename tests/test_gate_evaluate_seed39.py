"""`ascendprof gate` (ascendprof/compare/gate/evaluate.py) through the CLI: the mean of the side
that has a rank in that rank's skipped check, a limit between 0 and +1 %, the warning naming
every rank whose metric one side lacks however many there are, and no such warning for a rank
the other input lacks altogether (that one is named by the rank-set warning already).

Inputs: hand-written step_trace_time.csv files (the profiler's header, in us; the gate shows
ms), copies of the Qwen3 fixture (ranks 0-3), and a generated 16-rank cluster
(tests/synth_cluster.py). Each expected value is worked out in the comments or read from the
profiler's own files.
"""

from __future__ import annotations

import csv
import json
import shutil

import pytest
from click.testing import CliRunner

import synth_cluster as sc
from ascendprof.cli.main import main
from test_gate_evaluate_seed38 import _check, _step_csv
from test_gate_one_sided_rank import QWEN, _damaged

OUT = "ASCEND_PROFILER_OUTPUT"


def _gate(*args) -> tuple[int, dict]:
    """(exit code, the JSON document) of ``ascendprof gate ARGS --format json``."""
    r = CliRunner().invoke(main, ["gate", *map(str, args), "--format", "json",
                                  "--workers", "1"])
    assert r.exit_code in (0, 1), r.output
    return r.exit_code, json.loads(r.stdout)


# --- a rank on one side only: its skipped check still shows that side's values ----------

def test_a_rank_skipped_for_lacking_in_current_shows_its_baseline_mean(tmp_path):
    # Rank 1's step_trace_time.csv is damaged in the current copy, so Stage@rank for rank 1
    # is skipped ("not in current"); the row still reports the baseline's spread of rank 1:
    # its one step's Stage from the profiler's file (us -> ms), which is also its mean.
    cur = _damaged(tmp_path)
    with open(QWEN / "rank_1_ascend_pt" / OUT / "step_trace_time.csv", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    stages_ms = [float(r["Stage"]) / 1000 for r in rows]
    assert len(stages_ms) == 1
    code, doc = _gate(QWEN, cur, "--no-defaults", "--rule", "Stage@rank=+5%")
    assert code == 0
    (c,) = [c for c in doc["checks"] if c["key"] == "rank 1"]
    assert c["verdict"] == "skip" and c["note"] == "skipped: not in current"
    assert c["baseline"] == pytest.approx(stages_ms[0])
    assert c["baseline_n"] == 1
    assert c["baseline_mean"] == pytest.approx(sum(stages_ms) / len(stages_ms))
    assert c["current"] is None and c["current_mean"] is None and c["current_n"] == 0


# --- a limit below +1 % ------------------------------------------------------------------

def test_a_limit_of_half_a_percent_fails_a_one_percent_rise_and_passes_a_drop(tmp_path):
    # Stage@rank=+0.5%, floor 0. Baseline 10 ms per step (10000 us).
    # Current 10.1 ms: +0.1 ms = +1 % > +0.5 % and 0.1 > 0 -> fail, exit 1.
    # Current 9.9 ms: -1 %, a drop, which a positive limit never counts -> pass, exit 0.
    base = _step_csv(tmp_path / "base", [10_000, 10_000])
    rise = _step_csv(tmp_path / "rise", [10_100, 10_100])
    drop = _step_csv(tmp_path / "drop", [9_900, 9_900])
    rule = ("--no-defaults", "--rule", "Stage@rank=+0.5%,floor=0")
    code, doc = _gate(base, rise, *rule)
    c = _check(doc, "Stage@rank")
    assert c["change_pct"] == pytest.approx(1.0)
    assert (c["verdict"], code, doc["regression"]) == ("fail", 1, True)
    code, doc = _gate(base, drop, *rule)
    c = _check(doc, "Stage@rank")
    assert c["change_pct"] == pytest.approx(-1.0)
    assert (c["verdict"], c["note"], code) == ("pass", "", 0)


def test_a_limit_of_zero_fails_any_rise(tmp_path):
    # Stage@rank=+0%: no rise allowed. 10 ms -> 10.5 ms (+5 %) fails; 10 -> 9.5 ms passes.
    base = _step_csv(tmp_path / "base", [10_000])
    rise = _step_csv(tmp_path / "rise", [10_500])
    drop = _step_csv(tmp_path / "drop", [9_500])
    rule = ("--no-defaults", "--rule", "Stage@rank=+0%,floor=0")
    code, doc = _gate(base, rise, *rule)
    assert (_check(doc, "Stage@rank")["verdict"], code) == ("fail", 1)
    code, doc = _gate(base, drop, *rule)
    assert (_check(doc, "Stage@rank")["verdict"], code) == ("pass", 0)


# --- which ranks the one-sided warning names ---------------------------------------------

def test_the_one_sided_warning_names_all_seven_ranks_of_seven_runs(tmp_path):
    # A 16-rank cluster (TP8 x DP2, steps 7 and 8); in the current copy the odd ranks 1, 3,
    # ..., 13 (seven ranks, seven separate runs) have a damaged step_trace_time.csv and no
    # kernel_details.csv (from which the step breakdown would otherwise be rebuilt), so no
    # Stage values. Stage@cluster compares the 16 - 7 = 9 ranks with values on both sides
    # (9 ranks x 2 steps = 18 values a side), and the warning names every one of the seven
    # ranks (no "… (7 ranks)" shortening: the user has to find each damaged rank).
    base = tmp_path / "base"
    sc.write(sc.Spec(sc.Shape(tp=8, pp=1, dp=2), seed=1), base)
    cur = tmp_path / "cur"
    shutil.copytree(base, cur)
    for r in (1, 3, 5, 7, 9, 11, 13):
        out = cur / sc.rank_dir_name(r) / OUT
        (out / "step_trace_time.csv").write_text("Step,Computing\nx,y\n", encoding="utf-8")
        (out / "kernel_details.csv").unlink()
    code, doc = _gate(base, cur, "--no-defaults", "--rule", "Stage@cluster=+5%")
    (w,) = [w for w in doc["warnings"] if "only in the baseline" in w]
    assert w == ("Stage: rank(s) 1, 3, 5, 7, 9, 11, 13 only in the baseline; compared on the "
                 "9 rank(s) with values on both sides")
    c = _check(doc, "Stage@cluster")
    assert (c["baseline_n"], c["current_n"]) == (18, 18)
    assert c["verdict"] == "pass" and c["change"] == 0 and code == 0


def test_a_rank_the_current_input_lacks_altogether_is_not_called_one_sided(tmp_path):
    # The current input is the Qwen3 fixture without rank 3's directory: the rank sets
    # differ, so the cluster checks use ranks 0-2 (said once, in the rank-set warnings).
    # Within those ranks every metric is on both sides, so no metric gets a "rank(s) 3 only
    # in the baseline" sentence; ranks 0-2 are byte-identical, so every cluster check passes
    # with change 0.
    cur = tmp_path / "current"
    shutil.copytree(QWEN, cur)
    shutil.rmtree(cur / "rank_3_ascend_pt")
    code, doc = _gate(QWEN, cur)
    assert code == 0
    assert any(w.startswith("the ranks differ") for w in doc["warnings"])
    assert any("use the 3 rank(s) both have" in w for w in doc["warnings"])
    assert not [w for w in doc["warnings"] if "only in the" in w], doc["warnings"]
    cluster = [c for c in doc["checks"] if c["scope"] == "cluster"]
    assert cluster
    for c in cluster:
        assert c["verdict"] == "pass" and c["change"] == 0, c
