"""Hostile sizes and depths cost bounded work: a NUL-filled kernel_details.csv (what a crash or
an interrupted copy leaves) is refused in seconds at any size, a directory chain deeper than
Python's recursion limit beside a rank does not end the run.

Before: the CSV header search grew its buffer quadratically (100 MB: 96 s; 300 MB did not
finish); a ~1,100-deep folder chain beside a rank: RecursionError, exit 3, nothing analysed.
"""

from __future__ import annotations

import csv
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

import faultgen as FG


def analyse(src: Path, out: Path, timeout: float = 300):
    t0 = time.monotonic()
    p = subprocess.run([sys.executable, "-m", "ascendprof", "analyse", str(src), "-o", str(out),
                        "-q", "--workers", "1", "--no-html", "--no-cache"],
                       capture_output=True, text=True, timeout=timeout)
    return p, time.monotonic() - t0


def problems(out: Path) -> list[dict]:
    with open(out / "problems.csv", newline="") as f:
        return list(csv.DictReader(f))


@pytest.mark.parametrize("size", [8 << 20, 2 << 30])
def test_a_nul_filled_kernel_details_is_refused_in_seconds(tmp_path, size):
    """8 MB (read whole) and 2 GB (sparse; read as a stream): the rank's kernels are reported
    as not read, the other ranks and the rank's other files are analysed."""
    src = FG.copy_base("qwen3", tmp_path / "in")
    kd = FG.out_file(src, "qwen3", 2, "kernel_details.csv")
    kd.unlink()
    with open(kd, "wb") as f:
        f.truncate(size)  # all NUL bytes, no line end
    p, secs = analyse(src, tmp_path / "out")
    assert p.returncode == 0, p.stderr
    assert secs < 60, secs
    rows = [r for r in problems(tmp_path / "out") if "kernel_details.csv" in r["Path"]]
    assert rows and any("NUL" in r["Reason"] or "line end" in r["Reason"] for r in rows), rows
    with open(tmp_path / "out" / "cluster_step_trace_time.csv", newline="") as f:
        ranks = {r["Index"] for r in csv.DictReader(f) if r["Type"] == "rank"}
    assert ranks == {"0", "1", "2", "3"}


def test_a_folder_chain_deeper_than_the_recursion_limit_costs_nothing(tmp_path):
    """1,100 nested folders beside the ranks: every rank is analysed, exit 0."""
    src = FG.copy_base("qwen3", tmp_path / "in")
    deep = src / "deep"
    deep.mkdir()
    fd = os.open(deep, os.O_RDONLY)
    try:  # created relative to an open directory: no path grows beyond the system's limit
        for _ in range(1100):
            os.mkdir("d", dir_fd=fd)
            nxt = os.open("d", os.O_RDONLY, dir_fd=fd)
            os.close(fd)
            fd = nxt
    finally:
        os.close(fd)
    try:
        p, _ = analyse(src, tmp_path / "out")
    finally:
        _remove_chain(deep)  # pytest's own clean-up (shutil.rmtree) recurses
    assert p.returncode == 0, p.stderr
    with open(tmp_path / "out" / "cluster_step_trace_time.csv", newline="") as f:
        ranks = {r["Index"] for r in csv.DictReader(f) if r["Type"] == "rank"}
    assert ranks == {"0", "1", "2", "3"}


def _remove_chain(top: Path) -> None:
    """Remove the chain of empty folders ``d/d/...`` under ``top`` without recursion."""
    subprocess.run(["find", str(top), "-mindepth", "1", "-depth", "-delete"], check=False)


def test_many_steps_give_a_bounded_step_trace_check(tmp_path):
    """5,000 steps in each rank's step_trace_time.csv beside kernels of one step: before, one
    step_trace_check.csv row per step and metric, each saying "step not found" (at 10^6
    steps: 4.1 GB); now one row per metric for them, said in problems.csv. Every step stays in
    cluster_step_trace_time.csv (counted from the files)."""
    src = FG.copy_base("qwen3", tmp_path / "in")
    n = 5000
    for r in (0, 1, 2, 3):
        st = FG.out_file(src, "qwen3", r, "step_trace_time.csv")
        FG.edit_csv(st, lambda h, rows: (h, [[str(s) if c == h.index("Step") else v
                                              for c, v in enumerate(rows[0])]
                                             for s in range(1, n + 1)]))
    p, _ = analyse(src, tmp_path / "out")
    assert p.returncode == 0, p.stderr
    out = tmp_path / "out"
    with open(out / "cluster_step_trace_time.csv", newline="") as f:
        ranks = [r for r in csv.DictReader(f) if r["Type"] == "rank"]
    assert len(ranks) == 4 * n
    with open(out / "step_trace_check.csv", newline="") as f:
        check = list(csv.DictReader(f))
    assert len(check) <= 4 * 9 * 2, len(check)  # per rank: the kernels' step + one summary row
    summary_rows = [c for c in check if c["Step"] == "" and "summarised" in c["Note"]]
    assert summary_rows and all(f"{n - 1} steps" in c["Note"] or f"{n} steps" in c["Note"]
                                for c in summary_rows), summary_rows[:2]
    notes = [p for p in problems(out) if "step_trace_check.csv" in p["Reason"]]
    assert len(notes) == 4, notes
