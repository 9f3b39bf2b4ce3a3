"""The page's pipeline section when pipeline.csv's ops have no step number (pipeline stages of
a run whose p2p ops carry none: pipeline.csv leaves Step empty). Each pipeline's Gantt chart must
still hold its ops: the unnumbered step is a step of its own, labelled as such (with pandas 3,
``astype(str)`` keeps the empty Step missing, which matched no op and drew empty charts)."""

from __future__ import annotations

import csv
import json
import re

from click.testing import CliRunner

from ascendprof.cli.main import main
from conftest import QWEN3


def _charts(page: str) -> dict:
    m = re.search(r'<script type="application/json" id="ascendprof-charts">(.*?)</script>',
                  page, re.S)
    return json.loads(m.group(1))


def test_pipeline_ops_without_a_step_number_are_drawn(tmp_path):
    out = tmp_path / "o"
    r = CliRunner().invoke(main, ["analyse", str(QWEN3), "-o", str(out), "-q", "--no-cache"])
    assert r.exit_code == 0, r.output
    # the ops per pipeline as the file lists them (one step, 13, in the sample: two pipelines,
    # "(0, 2)" and "(1, 3)", of 6 p2p ops each), then the same file with every Step emptied
    path = out / "pipeline.csv"
    with path.open(newline="") as f:
        rows = list(csv.DictReader(f))
    per_pipe = {}
    for row in rows:
        per_pipe[row["Pipeline"]] = per_pipe.get(row["Pipeline"], 0) + 1
    assert {row["Step"] for row in rows} == {"13"} and sorted(per_pipe.values()) == [6, 6]
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows({**row, "Step": ""} for row in rows)
    # pipeline_stages.csv too: one row per stage of the unnumbered step
    stages_path = out / "pipeline_stages.csv"
    with stages_path.open(newline="") as f:
        stage_rows = list(csv.DictReader(f))
    with stages_path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(stage_rows[0]))
        w.writeheader()
        w.writerows({**row, "Step": ""} for row in stage_rows)
    (out / "report.html").unlink()
    assert CliRunner().invoke(main, ["report", str(out)]).exit_code == 0
    page = (out / "report.html").read_text()
    charts = _charts(page)
    gantts = {k: v for k, v in charts.items() if k.startswith("pipeline_gantt")}
    # one chart per pipeline, each with its 6 ops (a bar per op: y names its stage and rank)
    assert sorted(len(g["data"]["y"]) for g in gantts.values()) == [6, 6]
    assert "no step number, pipeline (0, 2)" in page
    # the stage chart: a bar per stage of the unnumbered step
    assert charts["pipeline_stages"]["data"]["x"] == [
        f"no step number · stage {row['Stage']}" for row in stage_rows]
    assert "step nan" not in page.lower()
