"""The output directory's guards (ascendprof.engine.outdir) case by case: what a run refuses,
what it says, and what a failed commit leaves for the next run.

Each test builds the directory by hand (files named in the registry, a manifest written by an
earlier OutputDir run) and states the expected outcome from the module's contract: a name the
manifest lists may be replaced only while it is still the kind of file ascendprof wrote, a file
under tables/ the manifest does not list stops the run, a busy directory names the holder, and a
commit that fails half-way leaves its journal for the next run to complete.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
from pathlib import Path

import pytest

from _outdir_runs import run_once
from ascendprof.engine import outdir
from ascendprof.model.errors import OutputError, UsageError
from ascendprof.model.outputs import OUTPUT_FILES


def _listing(out: Path) -> dict:
    return {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*"))
            if p.is_file() and p.name not in (outdir.LOCK, outdir.MANIFEST)}


# ------------------------------------------------------------------ tables/ ownership

def test_a_file_at_the_top_of_tables_listed_in_the_manifest_is_ours(tmp_path):
    """The manifest lists tables/ files by their path relative to tables/ ("top.parquet", not
    "./top.parquet"): a second run into the directory replaces them without a conflict."""
    out = tmp_path / "out"
    run_once(out, {"summary.json": b"1"}, {"top.parquet": b"t1", "rank0/k.parquet": b"k1"})
    assert json.loads((out / outdir.MANIFEST).read_text())["tables"] == [
        "top.parquet", "rank0/k.parquet"]
    run_once(out, {"summary.json": b"2"}, {"top.parquet": b"t2"})
    assert _listing(out) == {"summary.json": b"2", "tables/top.parquet": b"t2"}


def test_a_users_file_in_a_tables_subfolder_is_found_whatever_the_current_directory(
        tmp_path, monkeypatch):
    """tables/sub/mine.csv (not in the manifest) stops the run, also when the current
    directory happens to hold a symbolic link named like that subfolder: whether a folder of
    tables/ is a link is asked of tables/sub, not of ./sub."""
    out = tmp_path / "out"
    run_once(out, {"summary.json": b"1"}, {"sub/k.parquet": b"k"})
    (out / "tables" / "sub" / "mine.csv").write_text("mine\n")
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    (cwd / "sub").symlink_to(tmp_path)
    monkeypatch.chdir(cwd)
    with pytest.raises(outdir.OutputConflict, match="mine.csv"):
        with outdir.OutputDir(out, OUTPUT_FILES):
            pass
    assert (out / "tables" / "sub" / "mine.csv").read_text() == "mine\n"


# ------------------------------------------------------------------ a listed name replaced

def test_a_listed_file_the_user_replaced_by_a_directory_is_refused(tmp_path):
    """summary.json was ascendprof's file; now it is the user's directory: the run refuses it
    (it would otherwise move the user's folder to the trash)."""
    out = tmp_path / "out"
    run_once(out, {"summary.json": b"1"})
    (out / "summary.json").unlink()
    (out / "summary.json").mkdir()
    (out / "summary.json" / "keep.txt").write_text("x")
    with pytest.raises(outdir.OutputConflict, match=r"replaced since ascendprof wrote it "
                                                     r"\(now a directory\)"):
        with outdir.OutputDir(out, OUTPUT_FILES):
            pass
    assert (out / "summary.json" / "keep.txt").read_text() == "x"


def test_a_listed_file_replaced_by_a_symbolic_link_is_named_so(tmp_path):
    out = tmp_path / "out"
    run_once(out, {"summary.json": b"1"})
    (out / "summary.json").unlink()
    (tmp_path / "elsewhere.json").write_text("{}")
    (out / "summary.json").symlink_to(tmp_path / "elsewhere.json")
    with pytest.raises(outdir.OutputConflict, match=r"\(now a symbolic link\)"):
        with outdir.OutputDir(out, OUTPUT_FILES):
            pass


def test_a_listed_tables_folder_replaced_by_a_file_is_refused(tmp_path):
    out = tmp_path / "out"
    run_once(out, {"summary.json": b"1"}, {"rank0/k.parquet": b"k"})
    import shutil

    shutil.rmtree(out / "tables")
    (out / "tables").write_text("the user's file\n")
    with pytest.raises(outdir.OutputConflict, match=r"\(now a regular file\)"):
        with outdir.OutputDir(out, OUTPUT_FILES):
            pass
    assert (out / "tables").read_text() == "the user's file\n"


# ------------------------------------------------------------------ lock

def test_a_second_run_into_a_busy_directory_names_the_holders_pid(tmp_path):
    out = tmp_path / "out"
    with outdir.OutputDir(out, OUTPUT_FILES):
        # the lock file holds this process's pid, written when the lock was taken
        with pytest.raises(outdir.OutputBusy, match=rf"another ascendprof run \(pid "
                                                    rf"{os.getpid()}\) is writing"):
            with outdir.OutputDir(out, OUTPUT_FILES):
                pass


def test_a_lock_held_without_a_pid_says_unknown(tmp_path):
    """A holder that has not written its pid yet (the lock file is empty): 'pid unknown'."""
    out = tmp_path / "out"
    out.mkdir()
    fd = os.open(out / outdir.LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        with pytest.raises(outdir.OutputBusy, match=r"\(pid unknown\)"):
            with outdir.OutputDir(out, OUTPUT_FILES):
                pass
    finally:
        os.close(fd)


# ------------------------------------------------------------------ commit

def test_an_output_name_created_during_the_run_stops_the_commit(tmp_path):
    """A user writes summary.json into the (empty) output directory while the run works: the
    commit refuses to replace it and names it."""
    out = tmp_path / "out"
    with outdir.OutputDir(out, OUTPUT_FILES) as od:
        (od.staging / "summary.json").write_bytes(b"ours")
        (out / "summary.json").write_bytes(b"theirs")
        with pytest.raises(outdir.OutputConflict,
                           match=rf"{out / 'summary.json'} exists and ascendprof did not"):
            od.commit()
    assert (out / "summary.json").read_bytes() == b"theirs"


def test_a_full_disk_while_writing_the_manifest_is_an_output_error(tmp_path, monkeypatch):
    out = tmp_path / "out"
    with outdir.OutputDir(out, OUTPUT_FILES) as od:
        (od.staging / "summary.json").write_bytes(b"ours")

        def full(path, mode="r", *a, **k):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))

        monkeypatch.setattr(outdir, "open", full, raising=False)
        with pytest.raises(OutputError) as ei:
            od.commit()
    # the message names the file that could not be written and the reason
    assert outdir.MANIFEST in str(ei.value) and os.strerror(errno.ENOSPC) in str(ei.value)
    assert not (out / "summary.json").exists()


def test_a_commit_that_fails_half_way_is_completed_by_the_nextrun_once(tmp_path, monkeypatch):
    """An OSError at the second rename of a commit (the run leaves through its context manager
    as usual): the journal stays in the staging directory and the next run into the directory
    completes the new set."""
    out = tmp_path / "out"
    run_once(out, {"summary.json": b"old", "verdicts.json": b"old v"})
    real, calls = os.replace, [0]

    def fails(src, dst):
        calls[0] += 1
        if calls[0] == 2:
            raise OSError(errno.EIO, os.strerror(errno.EIO), str(src))
        return real(src, dst)

    with pytest.raises(OSError):
        with outdir.OutputDir(out, OUTPUT_FILES, tables=False) as od:
            for name, data in {"summary.json": b"new", "verdicts.json": b"new v",
                               "problems.csv": b"p"}.items():
                (od.staging / name).write_bytes(data)
            monkeypatch.setattr(os, "replace", fails)
            od.commit()
    monkeypatch.setattr(os, "replace", real)
    # half-way: problems.csv (first in the journal) moved in, the rest old, no manifest;
    # the journal waits
    assert not (out / outdir.MANIFEST).exists()
    assert (od.staging / outdir.JOURNAL).is_file()
    with outdir.OutputDir(out, OUTPUT_FILES):
        assert _listing(out) == {"problems.csv": b"p", "summary.json": b"new",
                                 "verdicts.json": b"new v"}
        assert json.loads((out / outdir.MANIFEST).read_text())["files"] == [
            "problems.csv", "summary.json", "verdicts.json"]


# ------------------------------------------------------------------ adopt

def test_adopt_adds_a_name_to_the_manifest_in_order(tmp_path):
    out = tmp_path / "out"
    run_once(out, {"summary.json": b"1", "verdicts.json": b"v"})
    (out / "report.html").write_text("<html></html>")
    outdir.adopt(out, "report.html")
    doc = json.loads((out / outdir.MANIFEST).read_text())
    # sorted: "report.html" < "summary.json" < "verdicts.json"
    assert doc["files"] == ["report.html", "summary.json", "verdicts.json"]
    outdir.adopt(out, "report.html")  # already listed: unchanged
    assert json.loads((out / outdir.MANIFEST).read_text())["files"] == doc["files"]
    # the next run may now remove it (it writes no report.html)
    run_once(out, {"summary.json": b"2"})
    assert not (out / "report.html").exists()


def test_adopt_without_a_manifest_writes_none(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    outdir.adopt(out, "report.html")
    assert not (out / outdir.MANIFEST).exists()


# ------------------------------------------------------------------ more of the contract

def test_a_listed_file_replaced_by_a_fifo_is_named_a_special_file(tmp_path):
    out = tmp_path / "out"
    run_once(out, {"summary.json": b"1"})
    (out / "summary.json").unlink()
    os.mkfifo(out / "summary.json")
    with pytest.raises(outdir.OutputConflict, match=r"\(now a special file\)"):
        with outdir.OutputDir(out, OUTPUT_FILES):
            pass


def test_an_output_path_that_is_a_file_is_refused_saying_so(tmp_path):
    f = tmp_path / "out.txt"
    f.write_text("x")
    with pytest.raises(UsageError) as ei:
        outdir.check_output_dir(f, [tmp_path / "in"])
    assert str(ei.value) == f"{f}: exists and is not a directory; choose another --output"


def test_foreign_files_under_tables_named_with_how_many_more(tmp_path):
    """Two files under tables/ that the manifest does not list: the first is named, "(and 1
    more under .../tables)"."""
    out = tmp_path / "out"
    run_once(out, {"summary.json": b"1"}, {"k.parquet": b"k"})
    (out / "tables" / "a_mine.csv").write_text("a")
    (out / "tables" / "b_mine.csv").write_text("b")
    with pytest.raises(outdir.OutputConflict) as ei:
        with outdir.OutputDir(out, OUTPUT_FILES):
            pass
    assert str(ei.value).startswith(
        f"{out / 'tables' / 'a_mine.csv'} was not written by ascendprof (and 1 more under "
        f"{out / 'tables'}); ascendprof replaces")


def test_recover_removes_what_dead_runs_left_and_names_it(tmp_path):
    """A trash folder, a staging folder without a journal and an atomic write's temporary file
    of summary.json are removed and returned (in name order); the user's file stays."""
    out = tmp_path / "out"
    (out / ".ascendprof-trash-99").mkdir(parents=True)
    (out / ".ascendprof-trash-99" / "summary.json").write_text("old")
    (out / ".ascendprof-staging-98").mkdir()
    (out / ".ascendprof-staging-98" / "verdicts.json").write_text("half")
    (out / ".summary.json.x1y2.tmp").write_text("t")
    (out / "notes.txt").write_text("mine")
    got = outdir.recover(out, OUTPUT_FILES)
    assert got == [".ascendprof-staging-98", ".ascendprof-trash-99", ".summary.json.x1y2.tmp"]
    assert sorted(os.listdir(out)) == ["notes.txt"]


def test_a_staging_folder_that_cannot_be_removed_does_not_fail_the_committed_run(
        tmp_path, monkeypatch):
    """After the renames the emptied staging folder is removed; when that fails (a busy
    .nfs file on NFS, say) the run has still written its set: no error."""
    real = os.rmdir

    def busy(path, *a, **k):
        if os.path.basename(str(path)).startswith(".ascendprof-staging-"):
            raise OSError(errno.EBUSY, os.strerror(errno.EBUSY), str(path))
        return real(path, *a, **k)

    monkeypatch.setattr(os, "rmdir", busy)
    out = tmp_path / "out"
    run_once(out, {"summary.json": b"1"})
    assert (out / "summary.json").read_bytes() == b"1"
    assert json.loads((out / outdir.MANIFEST).read_text())["files"] == ["summary.json"]


def test_a_staging_name_taken_by_a_file_is_an_output_error_naming_it(tmp_path):
    """A regular file where the run's staging folder goes (not a dead run's folder, so not
    removed): entering fails with an OutputError naming that path, not a crash."""
    out = tmp_path / "out"
    out.mkdir()
    (out / outdir.LOCK).write_text("")
    taken = out / f".ascendprof-staging-{os.getpid()}"
    taken.write_text("x")
    with pytest.raises(OutputError) as ei:
        with outdir.OutputDir(out, OUTPUT_FILES):
            pass
    assert str(ei.value) == f"{taken}: {os.strerror(errno.EEXIST)}"


def test_the_manifest_is_indented_json(tmp_path):
    """The manifest is for people too: JSON indented by two spaces, the keys in the order
    tool, format, files, tables."""
    out = tmp_path / "out"
    run_once(out, {"summary.json": b"1"})
    assert (out / outdir.MANIFEST).read_text() == (
        '{\n  "tool": "ascendprof",\n  "format": 1,\n  "files": [\n    "summary.json"\n  ],\n'
        '  "tables": []\n}')
