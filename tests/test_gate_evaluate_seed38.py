"""`ascendprof gate BASE CUR --format json` on hand-written step_trace_time.csv files (the
profiler's own header): a metric that did not move at all, and the mean of each side's steps
in the JSON. Each expected value is worked out by hand in the comments (the CSV is in us, the
gate shows ms).
"""

from __future__ import annotations

import json

from click.testing import CliRunner

from ascendprof.cli.main import main

STEP_HEAD = ("Device_id,Step,Computing,Communication(Not Overlapped),Overlapped,Communication,"
             "Free,Stage,Bubble,Communication(Not Overlapped and Exclude Receive),Preparing")


def _step_csv(path, stages_us):
    """One rank (Device_id 0), one row per step: Computing = Stage = the given us, every other
    column 0 (so Bubble is 0 in every step)."""
    path.mkdir()
    rows = [f"0,{i},{s},0,0,0,0,{s},0,0,0" for i, s in enumerate(stages_us, start=1)]
    f = path / "step_trace_time.csv"
    f.write_text("\n".join([STEP_HEAD, *rows]) + "\n", encoding="utf-8")
    return f


def _gate_json(base, cur, *rules):
    args = ["gate", str(base), str(cur), "--no-defaults", "--format", "json"]
    for r in rules:
        args += ["--rule", r]
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 0, res.output
    return json.loads(res.output)


def _check(doc, rule):
    sel = [c for c in doc["checks"] if c["rule"] == rule]
    assert len(sel) == 1, doc["checks"]
    return sel[0]


def test_a_metric_that_is_zero_on_both_sides_passes_with_no_note(tmp_path):
    # Bubble is 0 in every step of both runs: median 0 -> 0, change 0, change_pct null (the
    # baseline is 0). Nothing moved, so nothing went "the rule's way": the check passes with
    # an empty note — not a change judged and let through as "below noise floor" (floor 0).
    base = _step_csv(tmp_path / "base", [10_000, 20_000, 60_000])
    cur = _step_csv(tmp_path / "cur", [10_000, 20_000, 60_000])
    doc = _gate_json(base, cur, "Bubble@rank=+5%,floor=0")
    c = _check(doc, "Bubble@rank")
    assert (c["baseline"], c["current"], c["change"]) == (0.0, 0.0, 0.0)
    assert c["change_pct"] is None
    assert c["verdict"] == "pass"
    assert c["note"] == ""
    assert doc["regression"] is False


def test_the_json_holds_the_mean_of_each_sides_steps(tmp_path):
    # Stage per step: baseline 10, 20, 60 ms -> median 20, mean (10+20+60)/3 = 30;
    # current 10, 20, 90 ms -> median 20, mean (10+20+90)/3 = 40. The medians are equal (pass,
    # change 0) but the JSON still reports each side's own mean.
    base = _step_csv(tmp_path / "base", [10_000, 20_000, 60_000])
    cur = _step_csv(tmp_path / "cur", [10_000, 20_000, 90_000])
    doc = _gate_json(base, cur, "Stage@rank=+5%")
    c = _check(doc, "Stage@rank")
    assert (c["baseline"], c["current"], c["verdict"]) == (20.0, 20.0, "pass")
    assert c["baseline_mean"] == 30.0
    assert c["current_mean"] == 40.0
    assert (c["current_min"], c["current_max"], c["current_n"]) == (10.0, 90.0, 3)
