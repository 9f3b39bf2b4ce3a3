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
from ascendprof.model.errors import OutputError
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
