"""`ascendprof gate` (ascendprof/compare/gate/evaluate.py) through the CLI: the mean of the side
that has a rank in that rank's skipped check, a limit between 0 and +1 %, the warning naming
every rank whose metric one side lacks however many there are, and no such warning for a rank
the other input lacks altogether (that one is named by the rank-set warning already) -- the
survivors of mutation sample seed 39.

Then the same kinds of gaps at other places: every value column of a skipped rank's row (both
sides' median, min, max, mean, n), the unit, limit, floor and note of a rule no input has the
metric of (communication groups, links, op times), ranks one-sided each way named in one
sentence, a metric of two rules named once, and the note of an op type both new and below
the noise floor.

Inputs: hand-written step_trace_time.csv, cluster_step_trace_time.csv and op_statistic.csv
files (the profilers' headers, in us; the gate shows ms), copies of the Qwen3 fixture (ranks
0-3), and a generated 16-rank cluster (tests/synth_cluster.py). Each expected value is worked
out in the comments or read from the profiler's own files.
"""

from __future__ import annotations

import csv
import json
import shutil

import pytest
from click.testing import CliRunner

import synth_cluster as sc
from ascendprof.cli.main import main
from test_gate_csv_inputs import CLUSTER_HEAD, OPSTAT_HEAD
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


# --- the same kinds of gaps at other places ---------------------------------------------

def _cluster_csv(path, stages_us: dict):
    """A cluster_step_trace_time.csv (msprof-analyze's layout) under the new directory
    ``path``: per rank, one row per step (1, 2, ...) with Computing = Stage = the given us and
    every other column 0."""
    path.mkdir()
    rows = [f"{step},rank,{rank},{us},0,0,0,0,{us},0,0,0,0,0,0"
            for rank, stages in stages_us.items() for step, us in enumerate(stages, start=1)]
    f = path / "cluster_step_trace_time.csv"
    f.write_text("\n".join([CLUSTER_HEAD, *rows]) + "\n", encoding="utf-8")
    return f


def test_a_skipped_rank_row_reports_the_median_spread_and_mean_of_the_side_that_has_it(tmp_path):
    # Baseline ranks 0 and 2, current ranks 0 and 1 (Stage per step, in ms):
    #   rank 0: 10, 10, 10 on both sides            -> pass
    #   rank 1: current only, 10, 20, 60            -> skip "not in baseline": median 20,
    #           min 10, max 60, mean (10+20+60)/3 = 30, n 3; the baseline side empty
    #   rank 2: baseline only, 30, 50, 100          -> skip "not in current": median 50,
    #           min 30, max 100, mean (30+50+100)/3 = 60, n 3; the current side empty
    base = _cluster_csv(tmp_path / "base", {0: [10_000] * 3, 2: [30_000, 50_000, 100_000]})
    cur = _cluster_csv(tmp_path / "cur", {0: [10_000] * 3, 1: [10_000, 20_000, 60_000]})
    code, doc = _gate(base, cur, "--no-defaults", "--rule", "Stage@rank=+5%")
    assert code == 0
    by_key = {c["key"]: c for c in doc["checks"]}
    assert list(by_key) == ["rank 0", "rank 1", "rank 2"]
    r1, r2 = by_key["rank 1"], by_key["rank 2"]
    assert (r1["verdict"], r1["note"]) == ("skip", "skipped: not in baseline")
    assert (r1["current"], r1["current_min"], r1["current_max"], r1["current_mean"],
            r1["current_n"]) == (20.0, 10.0, 60.0, 30.0, 3)
    assert (r1["baseline"], r1["baseline_min"], r1["baseline_max"], r1["baseline_mean"],
            r1["baseline_n"]) == (None, None, None, None, 0)
    assert r1["change"] is None and r1["change_pct"] is None
    assert (r2["verdict"], r2["note"]) == ("skip", "skipped: not in current")
    assert (r2["baseline"], r2["baseline_min"], r2["baseline_max"], r2["baseline_mean"],
            r2["baseline_n"]) == (50.0, 30.0, 100.0, 60.0, 3)
    assert (r2["current"], r2["current_min"], r2["current_max"], r2["current_mean"],
            r2["current_n"]) == (None, None, None, None, 0)
    # the rule's own settings are on the skipped rows too
    assert (r2["unit"], r2["limit_pct"], r2["floor"]) == ("ms", 5.0, 0.0)


def test_a_rule_whose_metric_neither_input_has_is_one_row_with_its_settings_and_source(tmp_path):
    # Step CSVs only: no communication data, no links, no op times. Each such rule is one
    # skip row, key "-", with its unit, limit and floor as given, no values (n 0 on both
    # sides), and a note saying what is missing and where it comes from.
    base = _cluster_csv(tmp_path / "base", {0: [10_000]})
    cur = _cluster_csv(tmp_path / "cur", {0: [10_000]})
    code, doc = _gate(base, cur, "--no-defaults", "--rule", "Stage@cluster=+5%",
                      "--rule", "bandwidth@group=-10%,floor=0.2",
                      "--rule", "bandwidth@link=-15%",
                      "--rule", "op_time@op_type=+20%,floor=1ms")
    assert code == 0
    want = {
        "bandwidth@group": ("GB/s", -10.0, 0.2,
                            "skipped: neither input has bandwidth per communication group; it "
                            "comes from communication data (communication.json / analysis.db "
                            "in a profiling directory, or a cluster_communication.json beside "
                            "the CSVs)"),
        "bandwidth@link": ("GB/s", -15.0, 0.0,
                           "skipped: neither input has src -> dst links; it comes from the "
                           "links of communication_matrix.json in a profiling directory, or a "
                           "cluster_communication_matrix.json beside the CSVs"),
        "op_time@op_type": ("ms", 20.0, 1.0,
                            "skipped: neither input has op times; it comes from op times "
                            "(kernel_details.csv, op_statistic.csv, ascendprof's "
                            "op_statistics.csv or a profiling directory)"),
    }
    for rule, (unit, limit, floor, note) in want.items():
        c = _check(doc, rule)
        assert (c["key"], c["verdict"]) == ("-", "skip"), c
        assert (c["unit"], c["limit_pct"], c["floor"], c["note"]) == (unit, limit, floor, note)
        assert (c["baseline_n"], c["current_n"]) == (0, 0)
        assert all(c[k] is None for k in ("baseline", "current", "change", "change_pct",
                                          "baseline_min", "baseline_max", "current_min",
                                          "current_max", "baseline_mean", "current_mean")), c


def test_ranks_one_sided_each_way_are_both_named_in_one_sentence(tmp_path):
    # Copies of the Qwen3 fixture: rank 3's step_trace_time.csv damaged in the baseline, rank
    # 1's in the current one (neither rank has kernel_details.csv to rebuild the steps from).
    # The four step metrics of the default cluster rules are compared on ranks 0 and 2, and
    # one sentence names both ranks, the baseline's first.
    base, cur = tmp_path / "base", tmp_path / "cur"
    for d, r in ((base, 3), (cur, 1)):
        shutil.copytree(QWEN, d)
        (d / f"rank_{r}_ascend_pt" / OUT / "step_trace_time.csv").write_text(
            "Step,Computing\nx,y\n", encoding="utf-8")
    code, doc = _gate(base, cur)
    assert code == 0
    (w,) = [w for w in doc["warnings"] if "only in the" in w]
    assert w == ("Stage, Computing, Communication(Not Overlapped), Free: rank(s) 1 only in the "
                 "baseline, rank(s) 3 only in the current input; compared on the 2 rank(s) "
                 "with values on both sides")


def test_a_metric_of_two_rules_is_named_once_in_the_one_sided_warning(tmp_path):
    # Rank 1 of the current Qwen3 copy has no communication data at all (communication.json,
    # communication_matrix.json and analysis.db removed): both bandwidth@group and
    # bandwidth@link of the default rules leave rank 1 out, and the warning names the metric
    # once.
    cur = tmp_path / "cur"
    shutil.copytree(QWEN, cur)
    for f in ("communication.json", "communication_matrix.json", "analysis.db"):
        (cur / "rank_1_ascend_pt" / OUT / f).unlink()
    code, doc = _gate(QWEN, cur)
    assert code == 0
    assert [w for w in doc["warnings"] if "only in the" in w] == [
        "bandwidth: rank(s) 1 only in the baseline; compared on the 3 rank(s) with values on "
        "both sides"]


def test_an_op_type_new_in_current_below_the_floor_says_both(tmp_path):
    # op_statistic.csv (the profiler's layout, times in us): MatMul 4 ms on both sides;
    # Softmax only in the current input, 500 us = 0.5 ms. Baseline 0, change +0.5 ms: a rise
    # (no relative change from 0, so beyond +20 %) but not above the 1 ms floor -> pass, and
    # the note says both: "new in current; below noise floor".
    (tmp_path / "base").mkdir()
    (tmp_path / "cur").mkdir()
    base = tmp_path / "base" / "op_statistic.csv"
    base.write_text(f"{OPSTAT_HEAD}\n0,MatMul,AI_CORE,2,4000,2000,2000,2000,100\n",
                    encoding="utf-8")
    cur = tmp_path / "cur" / "op_statistic.csv"
    cur.write_text(f"{OPSTAT_HEAD}\n0,MatMul,AI_CORE,2,4000,2000,2000,2000,88.9\n"
                   f"0,Softmax,AI_CORE,1,500,500,500,500,11.1\n", encoding="utf-8")
    code, doc = _gate(base, cur, "--no-defaults", "--rule", "op_time@op_type=+20%,floor=1ms")
    assert code == 0
    (s,) = [c for c in doc["checks"] if c["key"] == "Softmax"]
    assert (s["baseline"], s["current"], s["change"], s["change_pct"]) == (0.0, 0.5, 0.5, None)
    assert (s["verdict"], s["note"]) == ("pass", "new in current; below noise floor")
