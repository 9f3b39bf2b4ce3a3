"""The command boundary: exit codes, one-line errors, input untouched, outputs complete."""

import json
import shutil
import subprocess
import sys

import pytest
from click.testing import CliRunner

from ascendprof.cli.main import main
from treehash import tree_fingerprint


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def test_help_lists_commands():
    r = run("--help")
    assert r.exit_code == 0
    for cmd in ("scan", "analyse"):
        assert cmd in r.output


def test_missing_path_is_usage_error(tmp_path):
    r = run("analyse", tmp_path / "nope", "-o", tmp_path / "out")
    assert r.exit_code == 2
    assert "no such file or directory" in r.output
    assert "Traceback" not in r.output


def test_empty_directory_is_nothing_analysable(tmp_path):
    (tmp_path / "empty").mkdir()
    r = run("analyse", tmp_path / "empty", "-o", tmp_path / "out")
    assert r.exit_code == 3
    assert "no profiling data found" in r.output


def test_output_inside_a_rank_refused(qwen3, tmp_path):
    """Beside the ranks (msprof-analyze's habit) is allowed; inside a rank's folder is not."""
    src = tmp_path / "in"
    shutil.copytree(qwen3, src)
    r = run("analyse", src, "-o", src / "rank_0_ascend_pt" / "out")
    assert r.exit_code == 2 and "inside the profiling directory" in r.output
    assert not (src / "rank_0_ascend_pt" / "out").exists()
    r = run("analyse", src, "-o", src)
    assert r.exit_code == 2 and "inside the input" in r.output


def test_scan_json(qwen3):
    r = run("scan", qwen3, "--format", "json")
    assert r.exit_code == 0
    doc = json.loads(r.output)
    assert sorted(s["rank"] for s in doc["sources"]) == [0, 1, 2, 3]


def test_scan_as_a_subprocess_has_no_traceback(tmp_path):
    p = subprocess.run([sys.executable, "-m", "ascendprof", "scan", str(tmp_path / "x")],
                       capture_output=True, text=True)
    assert p.returncode == 2
    assert p.stderr.strip().count("\n") == 0 and "no such file" in p.stderr


@pytest.mark.slow
def test_analyse_qwen3_writes_everything_and_leaves_input_untouched(qwen3, tmp_path):
    src = tmp_path / "in"
    shutil.copytree(qwen3, src)
    before = tree_fingerprint(src)
    out = tmp_path / "out"
    r = run("analyse", src, "-o", out, "--quiet")
    assert r.exit_code == 0, r.output
    assert tree_fingerprint(src) == before
    for f in ("cluster_step_trace_time.csv", "cluster_communication.json",
              "cluster_communication_matrix.json", "op_statistics.csv", "top_kernels.csv",
              "step_trace_check.csv", "verdicts.json", "problems.csv", "summary.json"):
        assert (out / f).is_file(), f
    assert (out / "tables" / "rank0" / "kernels.parquet").is_file()
    # a second run to the same OUT replaces cleanly (no temp files left behind)
    r = run("analyse", src, "-o", out, "--quiet", "--format", "json")
    assert r.exit_code == 0
    assert json.loads(r.output)["sources"]
    assert not [p for p in out.rglob("*") if p.name.endswith(".tmp") or ".partial" in p.name]


def test_unknown_threshold_is_a_usage_error(qwen3, tmp_path):
    r = run("analyse", qwen3, "-o", tmp_path / "out", "--threshold", "foo=1")
    assert r.exit_code == 2
    assert "unknown threshold 'foo'" in r.output and "comm_share_pct" in r.output
    assert not (tmp_path / "out").exists()


def test_terminal_breakdown_keeps_the_longest_steps_of_a_large_cluster():
    """Above MAX_BREAKDOWN_ROWS rank-steps the terminal table lists the TOP_RANKS longest steps
    (Computing + Communication(Not Overlapped) + Free), longest first, then min / median / max
    of each column over all rows, and says so."""
    from rich.console import Console

    from ascendprof.report.terminal import MAX_BREAKDOWN_ROWS, TOP_RANKS, _breakdown_table

    # rank r: 10 + r us of compute, 5 of CNO, r % 3 of free -> longest = highest ranks
    n = MAX_BREAKDOWN_ROWS + 8
    rows = [{"rank": r, "step": 1, "computing_us": 1000.0 * (10 + r),
             "comm_not_overlapped_us": 5000.0, "free_us": 1000.0 * (r % 3),
             "origin": "reported"} for r in range(n)]
    con = Console(width=80, record=True)
    con.print(_breakdown_table(rows))
    lines = con.export_text().splitlines()
    assert f"{TOP_RANKS} longest of {n} rank-steps" in lines[0]
    body = [ln.split() for ln in lines[3:3 + TOP_RANKS]]
    totals = {r: 10 + r + 5 + r % 3 for r in range(n)}
    want = sorted(totals, key=lambda r: -totals[r])[:TOP_RANKS]
    assert [int(b[0]) for b in body] == want
    spread = {ln.split()[0]: ln.split() for ln in lines[3 + TOP_RANKS:6 + TOP_RANKS]}
    assert spread["max"][1] == f"{max(totals.values()):.1f}"
    assert spread["min"][1] == f"{min(totals.values()):.1f}"
    con = Console(width=80, record=True)
    con.print(_breakdown_table(rows[:5]))
    assert "Step breakdown per rank (ms, the profiler's)" in con.export_text()


def test_openblas_kept_to_one_thread_unless_the_user_chose(tmp_path, monkeypatch):
    """numpy's OpenBLAS would start a spinning thread per core in the parent; the CLI asks for
    one before numpy is imported, and leaves a value the user set alone."""
    import os

    monkeypatch.delenv("OPENBLAS_NUM_THREADS", raising=False)
    run("scan", tmp_path)
    assert os.environ["OPENBLAS_NUM_THREADS"] == "1"
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "4")
    run("scan", tmp_path)
    assert os.environ["OPENBLAS_NUM_THREADS"] == "4"
