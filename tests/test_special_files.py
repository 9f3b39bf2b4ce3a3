"""Special files never hang a command nor fill memory (issue #17 item 3): a FIFO named like a
profiler file, a symlink to /dev/zero, a metadata file of absurd size. Each is reported in
problems.csv and costs only what depends on it.

Real FIFOs (os.mkfifo) and device links in copies of the real Qwen3 sample; every command
runs as a real process with a time limit, so a hang fails the test instead of the suite.
Expected values: the clean sample's ranks (what must still be analysed) and the problem
wording the scanner documents.
"""

from __future__ import annotations

import csv
import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

import faultgen as FG

OUT = "ASCEND_PROFILER_OUTPUT"
LIMIT_S = 120


def run(*args, memory_mb: int | None = None):
    def limit():
        if memory_mb:
            resource.setrlimit(resource.RLIMIT_AS, (memory_mb << 20, memory_mb << 20))

    try:
        return subprocess.run([sys.executable, "-m", "ascendprof", *map(str, args)],
                              capture_output=True, text=True, timeout=LIMIT_S,
                              preexec_fn=limit)
    except subprocess.TimeoutExpired:
        pytest.fail(f"ascendprof {' '.join(map(str, args[:1]))} hung for {LIMIT_S} s")


def problems(out: Path) -> list[dict]:
    with open(out / "problems.csv", newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def ranks_in(out: Path) -> set[int]:
    with open(out / "cluster_step_trace_time.csv", newline="", encoding="utf-8") as f:
        return {int(r["Index"]) for r in csv.DictReader(f) if r["Type"] == "rank"}


@pytest.fixture
def sample(tmp_path):
    return FG.copy_base("qwen3", tmp_path / "in")


def rank_dir(root: Path, r: int) -> Path:
    return root / f"rank_{r}_ascend_pt"


@pytest.mark.parametrize("where", [f"{OUT}/step_trace_time.csv", "profiler_info_1.json",
                                   f"{OUT}/kernel_details.csv", f"{OUT}/communication.json"])
def test_a_fifo_never_blocks_scan_or_analyse(sample, tmp_path, where):
    """Before: a FIFO named step_trace_time.csv or profiler_info_N.json blocked `scan` and
    `analyse` forever in open()."""
    target = rank_dir(sample, 1) / where
    if target.exists():
        target.unlink()
    os.mkfifo(target)
    r = run("scan", sample, "--format", "json")
    assert r.returncode == 0, r.stderr
    assert "FIFO" in r.stdout
    out = tmp_path / "out"
    r = run("analyse", sample, "-o", out, "-q", "--workers", "1")
    assert r.returncode == 0, r.stderr
    named = [p for p in problems(out) if p["Path"].endswith(where.split("/")[-1])]
    assert named and "not a regular file (FIFO)" in named[0]["Reason"], problems(out)
    assert {0, 2, 3} <= ranks_in(out)
    if where.endswith("step_trace_time.csv"):
        assert run("analyse", sample, "-o", out, "-q", "--workers", "1",
                   "--strict").returncode == 3


def test_a_fifo_db_never_blocks(sample, tmp_path):
    """A rank whose only data is a database file that is a FIFO."""
    d = rank_dir(sample, 3) / OUT
    for p in d.iterdir():
        p.unlink()
    os.mkfifo(d / "analysis.db")
    out = tmp_path / "out"
    r = run("analyse", sample, "-o", out, "-q", "--workers", "1")
    assert r.returncode == 0, r.stderr
    assert any(p["Path"].endswith("analysis.db") and "FIFO" in p["Reason"]
               for p in problems(out)), problems(out)
    assert ranks_in(out) == {0, 1, 2}


@pytest.mark.parametrize("name", [f"{OUT}/kernel_details.csv", f"{OUT}/trace_view.json",
                                  "profiler_info_2.json"])
def test_a_link_to_dev_zero_is_not_read(sample, tmp_path, name):
    """Before: a symlink to /dev/zero grew to ~6 GB, then MemoryError. Run under a 3 GB
    address-space limit (the analysis itself needs well under 1 GB)."""
    target = rank_dir(sample, 2) / name
    target.unlink(missing_ok=True)
    os.symlink("/dev/zero", target)
    out = tmp_path / "out"
    r = run("analyse", sample, "-o", out, "-q", "--workers", "1", memory_mb=3072)
    assert r.returncode == 0, r.stderr
    named = [p for p in problems(out) if p["Path"].endswith(name.split("/")[-1])]
    assert named and "character device" in named[0]["Reason"], problems(out)
    assert {0, 1, 3} <= ranks_in(out)


def test_an_oversized_metadata_file_is_reported_not_read(sample, tmp_path):
    """profiler_info_N.json and profiler_metadata.json are a few KB; one of 17 MB (sparse)
    is not read, the rank falls back to the number in its directory name."""
    info = rank_dir(sample, 1) / "profiler_info_1.json"
    with open(info, "r+b") as f:
        f.truncate(17 << 20)
    meta = rank_dir(sample, 1) / "profiler_metadata.json"
    with open(meta, "r+b") as f:
        f.truncate(17 << 20)
    out = tmp_path / "out"
    r = run("analyse", sample, "-o", out, "-q", "--workers", "1")
    assert r.returncode == 0, r.stderr
    why = {Path(p["Path"]).name: p["Reason"] for p in problems(out)}
    assert "more than the 16 MB" in why["profiler_info_1.json"]
    assert "more than the 16 MB" in why["profiler_metadata.json"]
    assert ranks_in(out) == {0, 1, 2, 3}


def test_reading_helpers_refuse_special_files(tmp_path):
    """The helpers every reader goes through check the opened file, not the name."""
    from ascendprof.model.errors import InputError
    from ascendprof.sysio.textio import read_json, read_payload, read_regular

    fifo = tmp_path / "x.json"
    os.mkfifo(fifo)
    for fn in (read_json, read_payload, read_regular):
        with pytest.raises(InputError, match="FIFO"):
            fn(fifo)
    with pytest.raises(InputError, match="character device"):
        read_regular(Path("/dev/zero"))
    big = tmp_path / "big.json"
    big.write_bytes(b"{}" + b" " * 100)
    assert read_json(big, max_bytes=102) == {}
    with pytest.raises(InputError, match="more than"):
        read_json(big, max_bytes=101)
