"""Several runs under one root are never one cluster (issue #15 finding 4).

`analyse ../shared/data` used to merge ranks 0-1 of one job with ranks 2-3 of another and report
"pipeline stages are unbalanced" with exit 0. Now scan groups the sources by run, analyse exits
2 with one line naming the runs (unless --run picks one or --each-run asks for all), and diff /
gate refuse a mixed directory the same way. The expected runs are written from the data's
directory layout and metadata (../shared/data/README.md), not from the scanner's output.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from ascendprof.cli.main import main
from ascendprof.model.errors import UsageError
from ascendprof.scan import MultipleRuns, load_sources, runs_of

import synth_cluster as sc

LEVELS = [f"torch_npu-2rank-levels/{e}/level{n}" for e in ("db", "text") for n in (0, 1, 2)]
LEGACY = ["mindspore-legacy/JOB3", "mindspore-legacy/cluster_propose",
          "mindspore-legacy/profiler"] + [f"mindspore-legacy/run_{n}/normal_run/profiler"
                                          for n in (1, 2, 3, 4)]
SHARED_RUNS = sorted(LEGACY + ["qwen3-4rank-pp2dp2"] + LEVELS)


def _cli(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ascendprof", *map(str, args)],
                          capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("sub,names", [(".", SHARED_RUNS),
                                       ("mindspore-legacy",
                                        [n.split("/", 1)[1] for n in LEGACY])])
def test_analyse_of_several_runs_exits_2_naming_them(shared_data, tmp_path, sub, names):
    p = _cli("analyse", shared_data / sub, "-o", tmp_path / "out", "-q")
    assert p.returncode == 2, p.stdout + p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and p.stdout == ""
    line = lines[0]
    assert f"holds {len(names)} separate runs" in line
    for n in names:
        assert f" {n} (" in line
    assert "--run NAME" in line and "give its path" in line
    assert not (tmp_path / "out" / "verdicts.json").exists()


def test_scan_groups_sources_by_run(shared_data):
    r = CliRunner().invoke(main, ["scan", str(shared_data), "--format", "json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.output)
    assert sorted(x["name"] for x in doc["runs"]) == SHARED_RUNS
    for s in doc["sources"]:  # each source sits in the run of its own folder
        rel = s["path"].split(str(shared_data) + "/")[1]
        assert rel == s["run"] or rel.startswith(s["run"] + "/"), (rel, s["run"])
    by = {x["name"]: x for x in doc["runs"]}
    assert by["qwen3-4rank-pp2dp2"]["ranks"] == [0, 1, 2, 3]
    assert by["qwen3-4rank-pp2dp2"]["steps"] == [13]
    assert by["torch_npu-2rank-levels/text/level1"]["profiler_levels"] == ["Level1"]
    # profiler/ holds legacy ranks 0, 1, 10 and the PROF_ directories of devices 0 and 1
    assert by["mindspore-legacy/profiler"]["ranks"] == [0, 1, 10]
    # the terminal form lists the runs too
    r = CliRunner().invoke(main, ["scan", str(shared_data)])
    assert "14 runs (different jobs or collections" in r.output


@pytest.mark.parametrize("sub", SHARED_RUNS)
def test_each_run_folder_is_one_run(shared_data, sub):
    sources = load_sources(shared_data / sub)
    assert sources and {s.run for s in sources} == {"."}


def test_fixture_is_one_run(qwen3):
    assert [s.rank for s in load_sources(qwen3)] == [0, 1, 2, 3]
    assert [s.rank for s in load_sources(qwen3 / "rank_2_ascend_pt")] == [2]


def test_run_option_picks_one_and_each_run_analyses_all(shared_data, tmp_path):
    root = shared_data / "torch_npu-2rank-levels" / "text"
    r = CliRunner().invoke(main, ["analyse", str(root), "--run", "level1", "-q",
                                  "-o", str(tmp_path / "one"), "--format", "json"])
    assert r.exit_code == 0, r.output
    assert {Path(s["path"]).parent.name for s in json.loads(r.output)["sources"]} == {"level1"}
    r = CliRunner().invoke(main, ["analyse", str(root), "--run", "level9", "-q",
                                  "-o", str(tmp_path / "x")])
    assert r.exit_code == 2 and "no run 'level9'" in r.output
    r = CliRunner().invoke(main, ["analyse", str(root), "--each-run", "-q",
                                  "-o", str(tmp_path / "all")])
    assert r.exit_code == 0, r.output
    for n in (0, 1, 2):
        doc = json.loads((tmp_path / "all" / f"level{n}" / "summary.json").read_text())
        assert {Path(s["path"]).parent.name for s in doc["sources"]} == {f"level{n}"}


def test_diff_and_gate_refuse_a_mixed_directory_the_same_way(shared_data, tmp_path):
    root = shared_data / "torch_npu-2rank-levels" / "text"
    one = root / "level1"
    for args in (("diff", root, one), ("gate", root, one)):
        p = _cli(*args)
        assert p.returncode == 2, (args, p.stdout, p.stderr)
        (line,) = p.stderr.strip().splitlines()
        assert "holds 3 separate runs" in line and "level0 (" in line
        assert "Give the path of one of them." in line


def _move_into(src: Path, dst: Path) -> None:
    dst.mkdir(parents=True, exist_ok=True)
    for d in src.iterdir():
        shutil.move(str(d), dst / d.name)


def test_two_jobs_in_one_folder_are_two_runs(tmp_path):
    """Two generated 8-rank jobs written into one folder, an hour apart: split by time."""
    sc.write(sc.Spec(sc.Shape(2, 2, 2)), tmp_path / "a")
    sc.write(sc.Spec(sc.Shape(2, 2, 2), epoch_ns=3600 * 10**9), tmp_path / "b")
    _move_into(tmp_path / "a", tmp_path / "mix")
    _move_into(tmp_path / "b", tmp_path / "mix")
    _, runs = runs_of(tmp_path / "mix")
    assert [r.ranks for r in runs] == [list(range(8))] * 2
    assert [r.name for r in runs] == [".", ".#2"]
    with pytest.raises(MultipleRuns):
        load_sources(tmp_path / "mix")
    assert len(load_sources(tmp_path / "mix", run=".#2")) == 8


def test_two_step_windows_of_one_job_are_two_runs(tmp_path):
    """A dynamic profiler's two windows (steps 2-3, then 8-9 a minute later) in one folder."""
    sc.write(sc.Spec(sc.Shape(1, 1, 4), steps=(2, 3)), tmp_path / "a")
    sc.write(sc.Spec(sc.Shape(1, 1, 4), steps=(8, 9), epoch_ns=60 * 10**9), tmp_path / "b")
    _move_into(tmp_path / "a", tmp_path / "mix")
    _move_into(tmp_path / "b", tmp_path / "mix")
    _, runs = runs_of(tmp_path / "mix")
    assert sorted(r.as_dict()["steps"] for r in runs) == [[2, 3], [8, 9]]


def test_one_job_copied_per_host_is_one_run(tmp_path):
    """A 16-rank job whose ranks were copied from each host into node0/ and node1/."""
    sc.write(sc.Spec(sc.Shape(1, 1, 16)), tmp_path / "gen")
    for d in sorted((tmp_path / "gen").iterdir()):
        rank = int(d.name.split("_")[1]) - 40000
        dst = tmp_path / "job" / f"node{rank // 8}"
        dst.mkdir(parents=True, exist_ok=True)
        shutil.move(str(d), dst / d.name)
    _, runs = runs_of(tmp_path / "job")
    assert [(r.name, r.ranks) for r in runs] == [(".", list(range(16)))]
    assert {h for h in runs[0].as_dict()["hosts"]} == {"node00", "node01"}


def test_unknown_run_name_is_a_usage_error(qwen3):
    with pytest.raises(UsageError, match="no run"):
        load_sources(qwen3, run="nope")


def test_each_run_folders_are_unique(shared_data, tmp_path):
    """Before: runs `in/a/b/` and `in/a_b/` both went to `out/a_b`, the second replacing the
    first without a word. Each run now has its own folder, holding that run's ranks."""
    lv = shared_data / "torch_npu-2rank-levels" / "text"
    root = tmp_path / "in"
    shutil.copytree(lv / "level0", root / "a" / "b")
    shutil.copytree(lv / "level1", root / "a_b")
    r = CliRunner().invoke(main, ["analyse", str(root), "--each-run", "-q", "--no-html",
                                  "-o", str(tmp_path / "out")])
    assert r.exit_code == 0, r.output
    folders = sorted(p for p in (tmp_path / "out").iterdir())
    assert len(folders) == 2, folders
    got = {}
    for f in folders:
        doc = json.loads((f / "summary.json").read_text())
        got[f.name] = {str(Path(s["path"]).parent.relative_to(root)) for s in doc["sources"]}
    assert sorted(map(sorted, got.values())) == [["a/b"], ["a_b"]]
    assert all(name.startswith("a_b-") for name in got)
