"""One odd name or one unreadable folder costs at most its rank (issue #17 item 4): names that
are not UTF-8 (in a rank, as a rank directory, as -o), rank numbers beyond any integer type,
symlinked rank directories, unreadable rank directories and ASCEND_PROFILER_OUTPUT folders,
paths longer than the system allows. Each is listed in problems.csv and `--strict` exits 3 when
data was left out; the other ranks give exactly the rows of a clean run.

Real copies of the Qwen3 sample; an unreadable folder is unreadable for real (mode 000, read as
the unprivileged user ``nobody`` in a forked child when the tests run as root). Expected values:
the clean run's rows for the untouched ranks.
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest
from click.testing import CliRunner

import faultgen as FG
from ascendprof.cli.main import main

OUT = "ASCEND_PROFILER_OUTPUT"


def invoke(*args):
    r = CliRunner().invoke(main, [a if isinstance(a, (str, bytes)) else str(a) for a in args])
    if r.exception is not None and not isinstance(r.exception, SystemExit):
        raise AssertionError(f"uncaught {type(r.exception).__name__}: {r.exception}\n{r.output}")
    return r


def analyse(src, out, *extra):
    return invoke("analyse", os.fsdecode(src), "-o", os.fsdecode(out), "--quiet", "--workers",
                  "1", *extra)


def rows(out: Path, name: str) -> list[dict]:
    with open(out / name, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def rank_rows(out: Path, ranks) -> list[dict]:
    return [r for r in rows(out, "cluster_step_trace_time.csv")
            if r["Type"] == "rank" and int(r["Index"]) in ranks]


def skipped(out: Path) -> list[dict]:
    return [p for p in rows(out, "problems.csv") if p["Severity"] == "skipped"]


@pytest.fixture(scope="module")
def clean(tmp_path_factory):
    d = tmp_path_factory.mktemp("clean")
    src = FG.copy_base("qwen3", d / "in")
    assert analyse(src, d / "out").exit_code == 0
    return d / "out"


@pytest.fixture
def sample(tmp_path):
    return FG.copy_base("qwen3", tmp_path / "in")


def test_non_utf8_names_inside_a_rank(sample, tmp_path, clean):
    """Before: "internal error" and no output at all."""
    d = os.fsencode(sample / "rank_1_ascend_pt" / OUT)
    os.mkdir(d + b"/x\xff")
    with open(d + b"/\xfe.csv", "w") as f:
        f.write("a\n1\n")
    out = tmp_path / "out"
    r = analyse(sample, out)
    assert r.exit_code == 0, r.output
    assert rank_rows(out, {0, 1, 2, 3}) == rank_rows(clean, {0, 1, 2, 3})
    odd = [p for p in skipped(out) if "\\xfe.csv" in p["Path"] or "x\\xff" in p["Path"]]
    assert len(odd) == 2 and all("not valid UTF-8" in p["Reason"] for p in odd), skipped(out)
    assert analyse(sample, out, "--strict").exit_code == 3


def test_non_utf8_rank_directory_and_output_directory(sample, tmp_path, clean):
    """A rank directory and -o whose names are not UTF-8: analysed and written, the names
    shown with \\x escapes in summary.json and problems.csv."""
    old = os.fsencode(sample / "rank_1_ascend_pt")
    new = os.fsencode(sample) + b"/rank\xff_1_ascend_pt"
    os.rename(old, new)
    out = os.fsencode(tmp_path) + b"/out\xfe"
    r = analyse(sample, out)
    assert r.exit_code == 0, r.output
    outp = Path(os.fsdecode(out))
    assert rank_rows(outp, {0, 1, 2, 3}) == rank_rows(clean, {0, 1, 2, 3})
    summary = json.loads((outp / "summary.json").read_bytes())
    assert any(s["path"].endswith("rank\\xff_1_ascend_pt") for s in summary["sources"])
    assert all(p.endswith(tuple(os.listdir(outp)) + ("tables",)) and "out\\xfe" in p
               for p in summary["outputs"])
    warned = [p for p in rows(outp, "problems.csv") if "rank\\xff_1" in p["Path"]]
    assert warned and warned[0]["Severity"] == "warning"
    assert invoke("scan", os.fsdecode(sample), "--format", "json").exit_code == 0


def test_rank_number_beyond_any_integer(sample, tmp_path, clean):
    """Before: a rank directory number above 2**64 ended the run ("Integer exceeds 64-bit
    range"). It is no rank: that directory is skipped, the others are analysed."""
    huge = sample / "rank_99999999999999999999999_ascend_pt"
    shutil.copytree(sample / "rank_0_ascend_pt", huge)
    for n in ("profiler_info_0.json", "profiler_metadata.json"):
        (huge / n).unlink()
    out = tmp_path / "out"
    r = analyse(sample, out)
    assert r.exit_code == 0, r.output
    assert rank_rows(out, {0, 1, 2, 3}) == rank_rows(clean, {0, 1, 2, 3})
    named = [p for p in skipped(out) if huge.name in p["Path"]]
    assert named and "is no rank" in named[0]["Reason"]
    assert analyse(sample, out, "--strict").exit_code == 3


def test_symlinked_rank_directory_is_listed(sample, tmp_path, clean):
    """Before: dropped silently (exit 0 even with --strict)."""
    elsewhere = tmp_path / "elsewhere"
    shutil.move(sample / "rank_3_ascend_pt", elsewhere)
    os.symlink(elsewhere, sample / "rank_3_ascend_pt")
    out = tmp_path / "out"
    r = analyse(sample, out)
    assert r.exit_code == 0, r.output
    assert rank_rows(out, {0, 1, 2}) == rank_rows(clean, {0, 1, 2})
    named = [p for p in skipped(out) if p["Path"].endswith("rank_3_ascend_pt")]
    assert named and "symbolic link" in named[0]["Reason"]
    assert analyse(sample, out, "--strict").exit_code == 3


def _deep(parent: Path, depth: int) -> int:
    """A chain of ``depth`` directories of 200-character names under ``parent``; returns an
    fd of the deepest (created through dir_fd: its full path is longer than PATH_MAX)."""
    fd = os.open(parent, os.O_RDONLY)
    for i in range(depth):
        name = f"{i:03d}" + "d" * 197
        os.mkdir(name, dir_fd=fd)
        nfd = os.open(name, os.O_RDONLY, dir_fd=fd)
        os.close(fd)
        fd = nfd
    return fd


def _copy_into(src: Path, fd: int) -> None:
    """Copy the directory tree ``src`` into the directory open as ``fd``."""
    for entry in sorted(src.iterdir()):
        if entry.is_dir():
            os.mkdir(entry.name, dir_fd=fd)
            sub = os.open(entry.name, os.O_RDONLY, dir_fd=fd)
            try:
                _copy_into(entry, sub)
            finally:
                os.close(sub)
        else:
            out = os.open(entry.name, os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd)
            with os.fdopen(out, "wb") as f:
                f.write(entry.read_bytes())


def test_over_long_paths_are_listed(sample, tmp_path, clean):
    """A rank directory whose path is longer than the system allows (PATH_MAX 4096). Before:
    dropped silently, exit 0 even with --strict."""
    rank3 = tmp_path / "rank3"
    shutil.move(sample / "rank_3_ascend_pt", rank3)
    fd = _deep(sample, 21)  # 21 x 201 characters > 4096
    try:
        os.mkdir("rank_3_ascend_pt", dir_fd=fd)
        sub = os.open("rank_3_ascend_pt", os.O_RDONLY, dir_fd=fd)
        _copy_into(rank3, sub)
        os.close(sub)
    finally:
        os.close(fd)
    out = tmp_path / "out"
    r = analyse(sample, out)
    assert r.exit_code == 0, r.output
    assert rank_rows(out, {0, 1, 2}) == rank_rows(clean, {0, 1, 2})
    long_ones = [p for p in skipped(out) if "File name too long" in p["Reason"]]
    # the first directory the system refuses: its path has at least PATH_MAX (4096) bytes
    assert len(long_ones) == 1 and len(long_ones[0]["Path"]) >= 4096, skipped(out)
    assert analyse(sample, out, "--strict").exit_code == 3


# ------------------------------------------------------------------ unreadable folders, for real

def as_nobody(fn):
    """``fn()`` (returning JSON-able data) as the user ``nobody`` in a forked child when this
    process is root (mode 000 does not stop root); directly otherwise."""
    if os.geteuid() != 0:
        return fn()
    import pwd

    try:
        nobody = pwd.getpwnam("nobody")
    except KeyError:
        pytest.skip("no user 'nobody' to drop privileges to")
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        code = 1
        try:
            os.close(r)
            os.setgroups([])
            os.setgid(nobody.pw_gid)
            os.setuid(nobody.pw_uid)
            data = json.dumps({"ok": fn()}).encode()
            code = 0
        except BaseException as e:  # noqa: BLE001 - reported to the parent
            data = json.dumps({"error": f"{type(e).__name__}: {e}"}).encode()
        finally:
            try:
                os.write(w, data)
            finally:
                os._exit(code)
    os.close(w)
    chunks = []
    while chunk := os.read(r, 1 << 16):
        chunks.append(chunk)
    os.close(r)
    os.waitpid(pid, 0)
    got = json.loads(b"".join(chunks) or b'{"error": "no answer"}')
    if "error" in got:
        raise AssertionError(got["error"])
    return got["ok"]


@pytest.fixture
def public_sample():
    """A copy of the sample that the user nobody can read (pytest's tmp_path is 0700)."""
    base = Path(tempfile.mkdtemp(prefix="ascendprof-odd-", dir="/tmp"))
    os.chmod(base, 0o755)
    src = FG.copy_base("qwen3", base / "in")
    (base / "out").mkdir()
    os.chmod(base / "out", 0o777)
    yield src, base / "out"
    for dirpath, dirnames, _ in os.walk(base):
        for d in dirnames:
            os.chmod(os.path.join(dirpath, d), 0o755)
    shutil.rmtree(base)


def test_unreadable_rank_folders_cost_their_rank_only(public_sample, clean):
    """Before: an unreadable ASCEND_PROFILER_OUTPUT (mode 000) ended the whole run; an
    unreadable rank directory was dropped silently (exit 0 even with --strict)."""
    from ascendprof.engine.run import run_analyse

    src, out = public_sample
    run_analyse(src, out / "warm", workers=1, cache=False, progress=False, fmt="json")
    shutil.rmtree(out / "warm")  # (every module the child needs is now imported)
    os.chmod(src / "rank_1_ascend_pt" / OUT, 0)
    os.chmod(src / "rank_2_ascend_pt", 0)

    def child():
        import contextlib
        import io

        with contextlib.redirect_stdout(io.StringIO()):
            return [run_analyse(src, out / "a", workers=1, cache=False, progress=False,
                                fmt="json", strict=s) for s in (False, True)]

    codes = as_nobody(child)
    assert codes == [0, 3]
    assert rank_rows(out / "a", {0, 3}) == rank_rows(clean, {0, 3})
    assert {int(r["Index"]) for r in rank_rows(out / "a", range(8))} == {0, 3}
    why = {Path(p["Path"]).name: p["Reason"] for p in skipped(out / "a")}
    assert "Permission denied" in why[OUT] and "Permission denied" in why["rank_2_ascend_pt"]
