"""The page's step breakdown of a run whose steps carry no number (raw CANN data of a legacy
MindSpore job: cluster_step_trace_time.csv's Step cell is empty). Its ranks must still be drawn:
the rows of the unnumbered step are selected and labelled as such, under every pandas the
project supports (pandas 3 keeps a missing Step missing in ``astype(str)``, which matched no
row and drew an empty chart; pandas 2 labelled it "nan")."""

from __future__ import annotations

import json
import re

import pytest
from click.testing import CliRunner

from ascendprof.cli.main import main
from conftest import SHARED

JOB3 = SHARED / "mindspore-legacy" / "JOB3"


def _charts(page: str) -> dict:
    m = re.search(r'<script type="application/json" id="ascendprof-charts">(.*?)</script>',
                  page, re.S)
    return json.loads(m.group(1))


@pytest.mark.skipif(not JOB3.is_dir(), reason="needs the shared real data")
def test_a_step_without_a_number_is_drawn(tmp_path):
    out = tmp_path / "o"
    r = CliRunner().invoke(main, ["analyse", str(JOB3), "-o", str(out), "-q", "--no-cache"])
    assert r.exit_code == 0, r.output
    # the input: one rank row, no step number (the profiler's step trace has none)
    lines = (out / "cluster_step_trace_time.csv").read_text().splitlines()
    assert len(lines) == 2 and lines[1].startswith(",rank,1,")
    computing_us = float(lines[1].split(",")[3])  # the file's Computing, in us
    page = (out / "report.html").read_text()
    bars = _charts(page)["steps_bars"]["data"]
    # rank 1's bar, its Computing as the file gives it (1771382.85 us), drawn in ms
    assert bars["rank"] == [1]
    assert bars["computing_us"] == [pytest.approx(computing_us / 1000)]
    assert "Time per rank (no step number)" in page
    assert "Step nan" not in page and "step nan" not in page
