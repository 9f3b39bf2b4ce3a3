"""The output directory (ascendprof.engine.outdir): a trash or staging folder that cannot be
removed, one foreign file under tables/, a lock file holding bytes that are not ASCII."""

from __future__ import annotations

import errno
import fcntl
import os

import pytest

from _outdir_runs import run_once
from ascendprof.engine import outdir
from ascendprof.model.outputs import OUTPUT_FILES


def _busy_rmdir(monkeypatch, prefix):
    """os.rmdir fails with EBUSY (a busy .nfs file on NFS, say) on folders named prefix*."""
    real = os.rmdir

    def busy(path, *a, **k):
        if os.path.basename(str(path)).startswith(prefix):
            raise OSError(errno.EBUSY, os.strerror(errno.EBUSY), str(path))
        return real(path, *a, **k)

    monkeypatch.setattr(os, "rmdir", busy)


def test_a_trash_folder_that_cannot_be_removed_does_not_stop_recovery(tmp_path, monkeypatch):
    # A dead run's trash folder whose removal fails: recover() still handles it (names it)
    # and goes on to the next entry, a temporary file of summary.json, which it removes.
    out = tmp_path / "out"
    (out / ".ascendprof-trash-99").mkdir(parents=True)
    (out / ".ascendprof-trash-99" / "summary.json").write_text("old")
    (out / ".summary.json.x1y2.tmp").write_text("t")
    _busy_rmdir(monkeypatch, ".ascendprof-trash-")
    assert outdir.recover(out, OUTPUT_FILES) == [".ascendprof-trash-99", ".summary.json.x1y2.tmp"]
    assert not (out / ".summary.json.x1y2.tmp").exists()


def test_a_failed_run_whose_staging_cannot_be_removed_raises_its_own_error(tmp_path,
                                                                            monkeypatch):
    # The run fails before its commit (RuntimeError); leaving removes the staging folder, and
    # that fails too: the error the caller sees is still the run's own, and the previous set
    # stays as it was.
    out = tmp_path / "out"
    run_once(out, {"summary.json": b"1"})
    _busy_rmdir(monkeypatch, ".ascendprof-staging-")
    with pytest.raises(RuntimeError, match="the analysis failed"):
        with outdir.OutputDir(out, OUTPUT_FILES, tables=False) as od:
            (od.staging / "summary.json").write_bytes(b"2")
            raise RuntimeError("the analysis failed")
    assert (out / "summary.json").read_bytes() == b"1"


def test_one_foreign_file_under_tables_is_named_without_more(tmp_path):
    # One file under tables/ that the manifest does not list: it is named, and no
    # "(and N more ...)" follows (that is for two or more).
    out = tmp_path / "out"
    run_once(out, {"summary.json": b"1"}, {"k.parquet": b"k"})
    (out / "tables" / "mine.csv").write_text("a")
    with pytest.raises(outdir.OutputConflict) as ei:
        with outdir.OutputDir(out, OUTPUT_FILES):
            pass
    assert str(ei.value) == (
        f"{out / 'tables' / 'mine.csv'} was not written by ascendprof; ascendprof replaces "
        f"{out / 'tables'} as a whole: move it away or choose another --output")


def test_a_lock_file_holding_bytes_that_are_not_ascii_is_still_reported_busy(tmp_path):
    # The holder's lock file holds b"\xff42" (not what ascendprof writes): the second run is
    # refused as busy, the byte that is not ASCII shown as U+FFFD, not a decoding crash.
    out = tmp_path / "out"
    out.mkdir()
    fd = os.open(out / outdir.LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        os.write(fd, b"\xff42\n")
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        with pytest.raises(outdir.OutputBusy, match="\\(pid \ufffd42\\)"):
            with outdir.OutputDir(out, OUTPUT_FILES):
                pass
    finally:
        os.close(fd)
