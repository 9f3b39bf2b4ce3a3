"""Exit codes of output-side errors and of a closed stdout (issue #17 item 8): an output that
cannot be written is a usage error (exit 2, one line naming it), not "internal error" / exit 3
("nothing analysable"); `ascendprof gate … | head` keeps the gate's verdict as exit code.

Real processes where the pipe matters; expected codes from the documented table (README
"Exit codes", cli/main.py EXIT_CODES_HELP).
"""

from __future__ import annotations

import csv
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

import faultgen as FG
from ascendprof.cli.main import main
from test_odd_names import as_nobody


def invoke(*args):
    r = CliRunner().invoke(main, [str(a) for a in args])
    if r.exception is not None and not isinstance(r.exception, SystemExit):
        raise AssertionError(f"uncaught {type(r.exception).__name__}: {r.exception}\n{r.output}")
    return r


@pytest.fixture(scope="module")
def sample(tmp_path_factory):
    return FG.copy_base("qwen3", tmp_path_factory.mktemp("x") / "in")


@pytest.fixture(scope="module")
def step_csvs(sample, tmp_path_factory):
    """The sample's cluster_step_trace_time.csv, and a copy 50 % slower in Computing/Stage."""
    d = tmp_path_factory.mktemp("csv")
    r = invoke("analyse", sample, "-o", d / "out", "-q", "--workers", "1", "--no-cache")
    assert r.exit_code == 0, r.output
    base = d / "out" / "cluster_step_trace_time.csv"
    with open(base, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    for r in rows:
        for col in ("Computing", "Stage"):
            r[col] = str(float(r[col]) * 1.5)
    slow = d / "slow.csv"
    with open(slow, "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]), lineterminator="\n")
        w.writeheader()
        w.writerows(rows)
    return base, slow


def one_line_error(r, code=2):
    assert r.exit_code == code, r.output
    assert "internal error" not in r.output and "Traceback" not in r.output
    assert r.output.strip().count("\n") == 0 and r.output.startswith("ascendprof: error:")


def test_output_that_is_a_file(sample, tmp_path):
    """Before: internal error, exit 3."""
    f = tmp_path / "out"
    f.write_text("a file\n")
    r = invoke("analyse", sample, "-o", f, "-q", "--workers", "1")
    one_line_error(r)
    assert "not a directory" in r.output and f.read_text() == "a file\n"


def test_gate_junit_into_a_directory(step_csvs, tmp_path):
    """Before: internal error, exit 3, after the whole comparison."""
    r = invoke("gate", *step_csvs, "--junit", tmp_path)
    one_line_error(r)
    assert "is a directory" in r.output


def test_read_only_output_directory(sample, tmp_path):
    """A directory the user may not write (for real: as user nobody when run as root)."""
    import shutil
    import tempfile

    base = Path(tempfile.mkdtemp(prefix="ascendprof-ro-", dir="/tmp"))
    try:
        os.chmod(base, 0o755)
        src = shutil.copytree(sample, base / "in")
        ro = base / "ro"
        ro.mkdir()
        os.chmod(ro, 0o555)
        for dirpath, dirnames, filenames in os.walk(src):
            os.chmod(dirpath, 0o755)
        invoke("analyse", src, "-o", base / "warm", "-q", "--workers", "1", "--no-cache")

        def child():
            got = []
            for out in (ro, ro / "sub"):
                r = CliRunner().invoke(main, ["analyse", str(src), "-o", str(out), "-q",
                                              "--workers", "1", "--no-cache"])
                got.append([r.exit_code, r.output])
            return got

        if os.geteuid() != 0 and os.access(ro, os.W_OK):
            pytest.skip("this user can write a mode 555 directory")
        for code, output in as_nobody(child):
            assert code == 2, output
            assert "Permission denied" in output and output.count("\n") == 1
            assert "internal error" not in output
        assert os.listdir(ro) == []
    finally:
        os.chmod(base / "ro", 0o755)
        shutil.rmtree(base)


@pytest.mark.parametrize("slow", [False, True])
def test_gate_into_a_closed_pipe_keeps_its_verdict(step_csvs, slow):
    """`ascendprof gate … | head`: the reader leaves early. Before: the closed pipe became an
    error exit; now exit 0 or 1 is still the verdict."""
    base, current = step_csvs[0], step_csvs[1] if slow else step_csvs[0]
    p = subprocess.Popen([sys.executable, "-m", "ascendprof", "gate", str(base), str(current)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    p.stdout.close()  # like `head` after its lines: every write now fails with EPIPE
    err = p.stderr.read().decode()
    rc = p.wait(timeout=120)
    assert rc == (1 if slow else 0), err
    assert "Traceback" not in err and "internal error" not in err and "Exception" not in err


def test_analyse_and_scan_into_a_closed_pipe(sample, tmp_path):
    for args in (["scan", str(sample)],
                 ["analyse", str(sample), "-o", str(tmp_path / "o"), "--workers", "1"]):
        p = subprocess.Popen([sys.executable, "-m", "ascendprof", *args],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        p.stdout.close()
        err = p.stderr.read().decode()
        assert p.wait(timeout=120) == 0, err
        assert "Traceback" not in err and "internal error" not in err
    assert (tmp_path / "o" / "summary.json").is_file()


def test_output_side_failures_of_diff_report_and_timeline_exit_2(sample, tmp_path):
    """Before: `diff --html` / `report -o` into an existing directory or a folder that cannot
    be made, `timeline -o` into a folder that cannot be written: internal error, exit 3."""
    out = tmp_path / "analysis"
    assert invoke("analyse", sample, "-o", out, "-q", "--workers", "1", "--no-html").exit_code == 0
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    for path in (tmp_path, blocker / "page.html"):
        one_line_error(invoke("diff", sample, "--ranks", "0,2", "--html", path))
        one_line_error(invoke("report", out, "-o", path))
        one_line_error(invoke("timeline", sample, "-o", path, "-q"))
    assert blocker.read_text() == "x"


def test_a_full_disk_in_the_per_rank_phase_exits_2(sample, tmp_path, monkeypatch):
    """ENOSPC while a rank's tables are written (the per-rank phase): exit 2 naming the file;
    before: internal error, exit 3."""
    import errno

    from ascendprof.engine import pipeline

    def full(path, table):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))

    monkeypatch.setattr(pipeline, "write_parquet", full)
    r = invoke("analyse", sample, "-o", tmp_path / "out", "-q", "--workers", "1", "--no-cache",
               "--no-html")
    one_line_error(r)
    assert "No space left on device" in r.output and ".parquet" in r.output
    assert not (tmp_path / "out" / "summary.json").exists()


def test_diff_into_head_keeps_its_own_exit_code(sample):
    """`ascendprof diff A B | head -1`: before, exit 1 when head left."""
    p = subprocess.Popen([sys.executable, "-m", "ascendprof", "diff", str(sample), "--ranks",
                          "0,2"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    p.stdout.readline()
    p.stdout.close()  # like `head -1` after its line
    err = p.stderr.read().decode()
    assert p.wait(timeout=300) == 0, err
    assert "Traceback" not in err and "internal error" not in err
