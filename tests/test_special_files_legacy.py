"""A FIFO named like a legacy MindSpore profiler file never hangs `analyse`: it is reported in
problems.csv as not a regular file, and the rank's other files are still analysed.

Copies of the real legacy single-card run; `analyse` runs as a real process with a time
limit, so a hang fails the test instead of the suite.
"""
from __future__ import annotations

import csv
import os
import shutil
import subprocess
import sys

import pytest

LIMIT_S = 120
RUN = ("mindspore-legacy", "run_2", "normal_run", "profiler")


def _analyse(src, out):
    try:
        return subprocess.run([sys.executable, "-m", "ascendprof", "analyse", str(src), "-o",
                               str(out), "-q", "--no-html", "--no-cache", "--workers", "1"],
                              capture_output=True, text=True, timeout=LIMIT_S)
    except subprocess.TimeoutExpired:
        pytest.fail(f"analyse hung for {LIMIT_S} s")


@pytest.mark.parametrize("name", ["minddata_pipeline_raw_1.csv", "device_queue_profiling_1.txt"])
def test_a_fifo_legacy_minddata_file_is_reported_not_opened(shared_data, tmp_path, name):
    src = tmp_path / "profiler"
    shutil.copytree(shared_data.joinpath(*RUN), src)
    assert (src / name).is_file()
    (src / name).unlink()
    os.mkfifo(src / name)
    r = _analyse(tmp_path, tmp_path / "out")
    assert r.returncode == 0, r.stderr
    with open(tmp_path / "out" / "problems.csv", newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    named = [p for p in rows if p["Path"].endswith(name)]
    assert named and "not a regular file (FIFO)" in named[0]["Reason"], rows
    # the rank's step breakdown (from its other files) is still written
    with open(tmp_path / "out" / "cluster_step_trace_time.csv", newline="") as f:
        assert [r["Index"] for r in csv.DictReader(f) if r["Type"] == "rank"] == ["1"]
