"""The output directory of ``analyse`` (issue #17 items 1 and 5): ascendprof removes or replaces
only what it wrote itself (the manifest of its last run), refuses an input that lies under its
own output names, and puts a run's whole set in place at once.

Expected values: the file listings and bytes of the user's files written by the test itself
before the run (they must come back byte for byte), and the output set of one clean run into
an empty directory. Nothing here pastes an output of the code under test.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

import faultgen as FG
from _outdir_runs import staged
from ascendprof.cli.main import main
from ascendprof.report.files import OUTPUT_FILES
from treehash import tree_fingerprint

MANIFEST = ".ascendprof-manifest.json"


class _Lazy:
    """ascendprof.engine.outdir, imported when first used (the black-box tests above it also
    run against older code, which has no such module)."""

    def __getattr__(self, name):
        from ascendprof.engine import outdir as mod

        return getattr(mod, name)


outdir = _Lazy()


def invoke(*args):
    r = CliRunner().invoke(main, [str(a) for a in args])
    if r.exception is not None and not isinstance(r.exception, SystemExit):
        raise AssertionError(f"uncaught {type(r.exception).__name__}: {r.exception}\n{r.output}")
    return r


def analyse(src, out, *extra):
    return invoke("analyse", src, "-o", out, "--quiet", "--workers", "1", *extra)


@pytest.fixture(scope="module")
def qwen(tmp_path_factory):
    return FG.copy_base("qwen3", tmp_path_factory.mktemp("q") / "in")


def user_tree(root: Path) -> dict:
    """A user's folder named tables/ (and other files) as they would leave them."""
    (root / "tables" / "sub").mkdir(parents=True)
    (root / "tables" / "my_results.parquet").write_bytes(b"PAR1 mine")
    (root / "tables" / "sub" / "notes.txt").write_text("keep me\n")
    (root / "notes.md").write_text("# my notes\n")
    return tree_fingerprint(root)


def snapshot(d: Path, skip=(".ascendprof-cache", ".ascendprof.lock")) -> dict:
    """Every file under ``d`` -> sha256 of its bytes, inode and mtime (the cache left out):
    equal snapshots mean the very same files, not rewritten ones of the same content."""
    out = {}
    for p in sorted(d.rglob("*")):
        rel = p.relative_to(d)
        if rel.parts[0] in skip or not p.is_file():
            continue
        st = p.stat()
        out[str(rel)] = (hashlib.sha256(p.read_bytes()).hexdigest(), st.st_ino, st.st_mtime_ns)
    return out


# ------------------------------------------------------------------- item 1: never delete

@pytest.mark.parametrize("extra", [(), ("--no-tables",)])
def test_a_user_folder_named_tables_in_the_output_survives(qwen, tmp_path, extra):
    """Before: every run removed OUT/tables outright, also with --no-tables."""
    out = tmp_path / "out"
    out.mkdir()
    before = user_tree(out)
    r = analyse(qwen, out, *extra)
    if extra:  # no tables written: nothing collides, the run completes beside the user's files
        assert r.exit_code == 0, r.output
        assert (out / "summary.json").is_file()
    else:
        assert r.exit_code == 2, r.output
        assert "did not write it" in r.output and "tables" in r.output
        assert r.output.strip().count("\n") == 0  # one line
    after = tree_fingerprint(out)
    assert {k: v for k, v in after.items() if k in before} == before


def test_an_input_under_the_outputs_tables_is_refused(qwen, tmp_path):
    """Before: `analyse /x/tables -o /x` deleted the input and replaced it by Parquet."""
    import shutil

    x = tmp_path / "x"
    shutil.copytree(qwen, x / "tables")
    before = tree_fingerprint(x)
    r = analyse(x / "tables", x)
    assert r.exit_code == 2, r.output
    assert "writes as an output" in r.output
    assert tree_fingerprint(x) == before
    for name in (".ascendprof-cache", "summary.json"):  # any of its names
        shutil.copytree(qwen, x / name)
        assert analyse(x / name, x).exit_code == 2


def test_the_default_output_never_deletes_the_current_directorys_tables(qwen, tmp_path,
                                                                     monkeypatch):
    """Before: `-o ""` (the current directory) deleted its tables/."""
    cwd = tmp_path / "work"
    cwd.mkdir()
    before = user_tree(cwd)
    monkeypatch.chdir(cwd)
    r = analyse(qwen, "")
    assert r.exit_code == 2, r.output
    assert tree_fingerprint(cwd) == before  # not even a lock file was left


def test_only_files_of_the_manifest_are_replaced_or_removed(qwen, tmp_path):
    """A user's files beside the outputs stay; an output the next run does not produce is
    removed because the manifest lists it; a file the user adds to tables/ stops the run."""
    out = tmp_path / "out"
    out.mkdir()
    (out / "my_script.py").write_text("print('mine')\n")
    (out / "plots").mkdir()
    (out / "plots" / "a.png").write_bytes(b"\x89PNG")
    mine = {k: v for k, v in tree_fingerprint(out).items()}
    assert analyse(qwen, out).exit_code == 0
    manifest = json.loads((out / outdir.MANIFEST).read_text())
    listed = set(manifest["files"])
    on_disk = {p.name for p in out.iterdir()} - {"my_script.py", "plots", outdir.MANIFEST,
                                                  outdir.LOCK, ".ascendprof-cache"}
    assert listed == on_disk and "tables" in listed
    assert set(manifest["tables"]) == {str(p.relative_to(out / "tables"))
                                       for p in (out / "tables").rglob("*") if p.is_file()}
    # the next run has no communication: the old cluster_communication.json (ours) goes
    comm = tmp_path / "nocomm"
    import shutil

    shutil.copytree(qwen, comm)
    for r in range(4):
        for n in ("communication.json", "communication_matrix.json"):
            FG.out_file(comm, "qwen3", r, n).unlink()
    assert analyse(comm, out).exit_code == 0
    assert not (out / "cluster_communication.json").exists()
    assert {k: v for k, v in tree_fingerprint(out).items() if k in mine} == mine
    # a file the user puts into tables/ is not ours: the run stops before touching anything
    (out / "tables" / "rank0" / "mine.csv").write_text("x\n")
    before = tree_fingerprint(out)
    r = analyse(qwen, out)
    assert r.exit_code == 2 and "mine.csv" in r.output, r.output
    assert tree_fingerprint(out) == before


@pytest.mark.parametrize("name", ["summary.json", "op_statistics.csv", "tables"])
def test_an_output_name_the_user_owns_is_never_replaced(qwen, tmp_path, name):
    out = tmp_path / "out"
    (out / name if name == "tables" else out).mkdir(parents=True)
    if name != "tables":
        (out / name).write_text("the user's own\n")
    before = tree_fingerprint(out)
    r = analyse(qwen, out)
    assert r.exit_code == 2 and name in r.output, r.output
    assert tree_fingerprint(out) == before


def test_every_registered_name_is_checked():
    """The registry (report.files.OUTPUT_FILES) drives the check: every name an analysis
    writes must be in it, so a user's file of that name is protected."""
    from ascendprof.sysio.ownership import managed_names

    assert set(OUTPUT_FILES) <= managed_names(OUTPUT_FILES)
    for name in ("cluster_step_trace_time.csv", "cluster_communication.json", "verdicts.json",
                 "problems.csv", "summary.json", "top_kernels.csv"):
        assert name in OUTPUT_FILES


def test_the_written_set_is_the_registry(qwen, tmp_path):
    """Every file a run writes at the top level is a registered name (so no output escapes the
    manifest's protection)."""
    out = tmp_path / "out"
    assert analyse(qwen, out).exit_code == 0
    written = {p.name for p in out.iterdir()} - {outdir.MANIFEST, outdir.LOCK,
                                                  ".ascendprof-cache", "tables"}
    assert written <= set(OUTPUT_FILES), written - set(OUTPUT_FILES)


# ------------------------------------------------------- commit, recovery, leftovers of dead runs

def _listing(out: Path) -> dict:
    return {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*"))
            if p.is_file() and p.name not in (outdir.LOCK, outdir.MANIFEST)}


class _Crash(BaseException):
    """Stands for SIGKILL at one rename: nothing after it runs."""


@pytest.mark.parametrize("crash_at", range(1, 7))
def test_a_commit_killed_at_any_rename_is_completed_by_the_next_run(tmp_path, monkeypatch,
                                                                    crash_at):
    """A set is old or new once a run got through: the journal of a commit that died at the
    k-th rename is rolled forward by the next run into the directory; until then there is no
    manifest (the set is visibly incomplete)."""
    out = tmp_path / "out"
    old = {"summary.json": b"old", "verdicts.json": b"old v", "cluster_communication.json": b"c"}
    od = staged(out, old, {"rank0/kernels.parquet": b"old k"})
    od.commit()
    od.__exit__(None, None, None)
    new = {"summary.json": b"new", "verdicts.json": b"new v", "problems.csv": b"p"}
    od = staged(out, new, {"rank0/kernels.parquet": b"new k", "rank1/kernels.parquet": b"k1"})
    calls, real = [0], os.replace

    def dies(src, dst):
        calls[0] += 1
        if calls[0] == crash_at:
            raise _Crash()
        return real(src, dst)

    monkeypatch.setattr(os, "replace", dies)
    try:
        od.commit()
    except _Crash:
        crashed = True
        assert not (out / outdir.MANIFEST).exists()
    else:
        crashed = False
    monkeypatch.setattr(os, "replace", real)
    od._unlock()  # the process is gone: its lock with it
    want = {**{k: v for k, v in new.items()}, "tables/rank0/kernels.parquet": b"new k",
            "tables/rank1/kernels.parquet": b"k1"}
    with outdir.OutputDir(out, OUTPUT_FILES):  # the next run recovers on entry
        assert _listing(out) == want, crashed
        assert json.loads((out / outdir.MANIFEST).read_text())["files"] == sorted(
            [*new, "tables"])
    assert _listing(out) == want


def test_leftovers_of_dead_runs_are_removed(tmp_path):
    """Staging directories without a journal, trash, and the temporary files of writes that
    died (.cluster_communication.json.<pid>.early, .<output>.*.tmp) are removed by the next
    run; a user's hidden file is not, nor a name ascendprof never writes (.tables.partial)."""
    out = tmp_path / "out"
    out.mkdir()
    (out / f"{outdir.STAGING_PREFIX}99999" / "tables").mkdir(parents=True)
    (out / f"{outdir.STAGING_PREFIX}99999" / "summary.json").write_bytes(b"half")
    (out / f"{outdir.TRASH_PREFIX}99999").mkdir()
    (out / ".cluster_communication.json.4242.early").write_bytes(b"x" * 1000)
    (out / ".tables.partial" / "rank0").mkdir(parents=True)
    (out / ".summary.json.ab_cd12.tmp").write_bytes(b"{")
    (out / ".my_hidden_config").write_text("mine")
    (out / "notes.early").write_text("mine too")
    with outdir.OutputDir(out, OUTPUT_FILES) as od:
        assert sorted(p.name for p in out.iterdir()) == sorted(
            [".my_hidden_config", "notes.early", ".tables.partial", outdir.LOCK,
             od.staging.name])
    assert sorted(p.name for p in out.iterdir()) == sorted([".my_hidden_config", outdir.LOCK,
                                                            "notes.early", ".tables.partial"])


@pytest.mark.parametrize("at", [1, 3, 6])
def test_an_interrupted_run_leaves_the_previous_set(qwen, tmp_path, monkeypatch, at):
    """Ctrl-C while the output files are written (at the ``at``-th of them): the previous set
    stays as it was, nothing staged is left. Before: the files written so far were new, the
    rest old."""
    out = tmp_path / "out"
    assert analyse(qwen, out, "--no-cache").exit_code == 0
    before = snapshot(out)
    from ascendprof.sysio import atomic as output

    real, n = output.write_pieces, [0]

    def interrupted(path, pieces):
        if Path(path).name in OUTPUT_FILES:
            n[0] += 1
            if n[0] == at:
                raise KeyboardInterrupt
        return real(path, pieces)

    monkeypatch.setattr(output, "write_pieces", interrupted)
    r = analyse(qwen, out, "--no-cache", "--threshold", "comm_share_pct=90")
    assert r.exit_code == 130, r.output
    assert snapshot(out) == before
    assert not [p for p in out.iterdir() if p.name.startswith(".ascendprof-staging-")]
