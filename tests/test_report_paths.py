"""gate --junit / --markdown write the path they are given without destroying it (issue #17
item 2): a symlink, a device, a FIFO or an append file such as $GITHUB_STEP_SUMMARY is
written through, never replaced; the gate's own inputs are refused; only a file ascendprof
wrote itself is replaced atomically.

Expected values: the file type, inode and earlier bytes of each path as the test created them,
and the report text as the report module renders it for the same result.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from click.testing import CliRunner

import faultgen as FG
from ascendprof.cli.main import main


@pytest.fixture(scope="module")
def csvs(tmp_path_factory):
    """A baseline and a current cluster_step_trace_time.csv (the Qwen3 sample analysed)."""
    d = tmp_path_factory.mktemp("gate")
    src = FG.copy_base("qwen3", d / "in")
    r = CliRunner().invoke(main, ["analyse", str(src), "-o", str(d / "out"), "-q", "--workers",
                                  "1", "--no-cache"])
    assert r.exit_code == 0, r.output
    (d / "base").mkdir()
    shutil.copy(d / "out" / "cluster_step_trace_time.csv", d / "base" / "baseline.csv")
    shutil.copy(d / "out" / "cluster_step_trace_time.csv", d / "current.csv")
    return d / "base" / "baseline.csv", d / "current.csv"


def gate(csvs, *extra):
    r = CliRunner().invoke(main, ["gate", str(csvs[0]), str(csvs[1]), *map(str, extra)])
    if r.exception is not None and not isinstance(r.exception, SystemExit):
        raise AssertionError(f"uncaught {type(r.exception).__name__}: {r.exception}\n{r.output}")
    return r


def identity(p: Path):
    st = os.lstat(p)
    return stat.S_IFMT(st.st_mode), st.st_ino


def test_a_symlink_to_stdout_is_written_through(csvs, tmp_path):
    """Before: `--junit out` with out -> /proc/self/fd/1 replaced the link by a file."""
    link = tmp_path / "out"
    os.symlink("/proc/self/fd/1", link)
    r = subprocess.run([sys.executable, "-m", "ascendprof", "gate", str(csvs[0]), str(csvs[1]),
                        "--junit", str(link), "--format", "json"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert os.path.islink(link) and os.readlink(link) == "/proc/self/fd/1"
    assert '<testsuites name="ascendprof gate"' in r.stdout


def test_a_device_is_never_replaced(csvs, tmp_path):
    """Before: `--markdown /dev/full` as root turned the device into a regular file. The test
    makes its own /dev/full (same device numbers) so that it never touches the real one."""
    dev = tmp_path / "full"
    try:
        os.mknod(dev, 0o666 | stat.S_IFCHR, os.makedev(1, 7))
        with open(dev, "wb") as f:  # a node that cannot be opened is no use here
            pass
    except (PermissionError, OSError) as e:
        pytest.skip(f"cannot create a character device here ({e})")
    before = identity(dev)
    r = gate(csvs, "--markdown", dev)
    assert r.exit_code == 2, r.output
    assert "No space left on device" in r.output and r.output.strip().count("\n") == 0
    assert identity(dev) == before
    null = tmp_path / "null"
    os.mknod(null, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    assert gate(csvs, "--junit", null).exit_code == 0
    assert stat.S_ISCHR(os.lstat(null).st_mode)


def test_the_gates_own_inputs_are_refused(csvs, tmp_path):
    """Before: `--junit BASELINE` replaced the baseline by the report."""
    base = csvs[0]
    data = base.read_bytes()
    for opt in ("--junit", "--markdown"):
        r = gate(csvs, opt, base)
        assert r.exit_code == 2 and "one of the inputs" in r.output, r.output
        # into the baseline's directory (an input is never written to)
        r = gate((base.parent, csvs[1]), opt, base.parent / "report.out")
        assert r.exit_code == 2 and "inside the input" in r.output, r.output
    assert base.read_bytes() == data
    assert sorted(p.name for p in base.parent.iterdir()) == ["baseline.csv"]
    link = tmp_path / "link.csv"
    os.symlink(base, link)
    assert gate(csvs, "--junit", link).exit_code == 2
    assert base.read_bytes() == data


def test_github_step_summary_is_appended_to(csvs, tmp_path, monkeypatch):
    """$GITHUB_STEP_SUMMARY, the README's recipe, is an append file: what earlier commands
    of the step wrote stays, in the same file (before: replaced by a new file)."""
    summary = tmp_path / "step_summary_abc"
    summary.write_text("## Tests\n\nall green\n")
    before = identity(summary)
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    r = gate(csvs, "--markdown", os.environ["GITHUB_STEP_SUMMARY"])
    assert r.exit_code == 0, r.output
    text = summary.read_text()
    assert text.startswith("## Tests\n\nall green\n") and "## ascendprof gate:" in text
    assert identity(summary) == before
    empty = tmp_path / "empty_summary"
    empty.write_text("")
    before = identity(empty)
    assert gate(csvs, "--markdown", empty).exit_code == 0
    assert empty.read_text().startswith("## ascendprof gate:") and identity(empty) == before


def test_a_file_of_someone_else_is_not_replaced_but_ours_is(csvs, tmp_path):
    mine = tmp_path / "results.xml"
    mine.write_text("<my-own-report/>\n")
    r = gate(csvs, "--junit", mine)
    assert r.exit_code == 2 and "did not write it" in r.output, r.output
    assert mine.read_text() == "<my-own-report/>\n"
    ours = tmp_path / "gate-junit.xml"
    assert gate(csvs, "--junit", ours).exit_code == 0
    first = ours.read_bytes()
    assert gate(csvs, "--junit", ours).exit_code == 0  # a re-run replaces its own report
    assert ours.read_bytes() == first
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_a_fifo_is_written_through_and_never_blocks(csvs, tmp_path):
    fifo = tmp_path / "report.fifo"
    os.mkfifo(fifo)
    got = []
    reader = threading.Thread(target=lambda: got.append(open(fifo, "rb").read()), daemon=True)
    reader.start()
    r = gate(csvs, "--junit", fifo)
    reader.join(timeout=30)
    assert r.exit_code == 0, r.output
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert got and got[0].startswith(b'<?xml version="1.0" encoding="UTF-8"?>\n<testsuites')
    # nobody reading: exit 2 at once instead of waiting forever
    r = gate(csvs, "--markdown", fifo)
    assert r.exit_code == 2 and "nobody reads" in r.output, r.output
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
