"""One rule for every file path a user names (diff --html, diff -o, report -o, timeline -o,
gate --junit / --markdown): never replace a symlink, a FIFO or a device, never replace a file
ascendprof did not write, never write into or over an input — also not through a symlink or a
hard link to an input's file — and write through where a file must stay what it is.

Before: `diff --html PATH` and `report OUT -o PATH` replaced whatever was at PATH (a device
node, a symlink, a user's file, an input file of the diff, report's own input) and exited 0;
a gate report was appended to its own baseline through a linked file.

Expected values: the file type, inode and bytes of each path as the test created them.
"""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

import pytest
from click.testing import CliRunner

import faultgen as FG
from ascendprof.cli.main import main


def cli(*args):
    r = CliRunner().invoke(main, [str(a) for a in args])
    if r.exception is not None and not isinstance(r.exception, SystemExit):
        raise AssertionError(f"uncaught {type(r.exception).__name__}: {r.exception}\n{r.output}")
    return r


def identity(p: Path):
    st = os.lstat(p)
    return stat.S_IFMT(st.st_mode), st.st_ino, st.st_size


@pytest.fixture(scope="module")
def qwen(tmp_path_factory):
    """A copy of the Qwen3 sample (input) and its analysis (report's input)."""
    d = tmp_path_factory.mktemp("rule")
    src = FG.copy_base("qwen3", d / "in")
    r = cli("analyse", src, "-o", d / "out", "-q", "--workers", "1", "--no-cache", "--html")
    assert r.exit_code == 0, r.output
    return src, d / "out"


def _kernel_csv(src: Path) -> Path:
    return FG.out_file(src, "qwen3", 0, "kernel_details.csv")


def _refused(r, *words):
    assert r.exit_code == 2, r.output
    line = r.output.strip()
    assert line.count("\n") == 0 and line.startswith("ascendprof: error:"), line
    for w in words:
        assert w in line, line


def _block_device(where: Path) -> Path | None:
    """A block device node of a loop device number (never opened by the test)."""
    try:
        os.mknod(where, 0o600 | stat.S_IFBLK, os.makedev(7, 255))
    except OSError:
        return None
    return where


def _char_null(where: Path) -> Path | None:
    try:
        os.mknod(where, 0o666 | stat.S_IFCHR, os.makedev(1, 3))  # /dev/null's numbers
        with open(where, "wb"):
            pass
    except OSError:
        return None
    return where


# ------------------------------------------------------------------------- diff --html


def test_diff_html_never_replaces_what_it_did_not_write(qwen, tmp_path):
    src, _ = qwen
    diff = ("diff", src, "--ranks", "0,2", "--format", "json", "--html")
    mine = tmp_path / "notes.html"
    mine.write_text("my notes")
    _refused(cli(*diff, mine), "did not write it")
    assert mine.read_text() == "my notes"
    # a symlink to a user's file: refused, both stay
    link = tmp_path / "link.html"
    link.symlink_to(mine)
    _refused(cli(*diff, link), "did not write it")
    assert os.path.islink(link) and mine.read_text() == "my notes"
    # an input file of the diff, directly, by a symlink and by a hard link
    kd = _kernel_csv(src)
    before = kd.read_bytes()
    _refused(cli(*diff, kd), "inside the input")
    sym = tmp_path / "sym.html"
    sym.symlink_to(kd)
    _refused(cli(*diff, sym), "inside the input")
    hard = tmp_path / "hard.html"
    os.link(kd, hard)
    _refused(cli(*diff, hard), "input file")
    assert kd.read_bytes() == before and os.stat(kd).st_nlink == 2
    # a dangling symlink is not followed (it would create a file where it points)
    dangling = tmp_path / "dangling.html"
    dangling.symlink_to(tmp_path / "nowhere" / "x.html")
    _refused(cli(*diff, dangling), "symbolic link to nothing")
    assert not (tmp_path / "nowhere").exists()
    # a directory
    _refused(cli(*diff, tmp_path), "is a directory")


def test_diff_html_devices_and_its_own_page(qwen, tmp_path):
    src, _ = qwen
    diff = ("diff", src, "--ranks", "0,2", "--format", "json", "--html")
    blk = _block_device(tmp_path / "disk")
    if blk is not None:
        before = identity(blk)
        _refused(cli(*diff, blk), "block device")
        assert identity(blk) == before
    null = _char_null(tmp_path / "null")
    if null is not None:  # written through: still the device
        assert cli(*diff, null).exit_code == 0
        assert stat.S_ISCHR(os.lstat(null).st_mode)
    page = tmp_path / "d.html"
    assert cli(*diff, page).exit_code == 0
    assert cli(*diff, page).exit_code == 0  # its own page: replaced
    # a symlink to its own page is written through, the link stays a link
    link = tmp_path / "l.html"
    link.symlink_to(page)
    ino = os.stat(page).st_ino
    assert cli(*diff, link).exit_code == 0
    assert os.path.islink(link) and os.stat(page).st_ino == ino


def test_diff_tables_follow_the_rule(qwen, tmp_path):
    """diff -o DIR: a symlink named like a table that points into the input is refused."""
    src, _ = qwen
    out = tmp_path / "d"
    out.mkdir()
    kd = _kernel_csv(src)
    before = kd.read_bytes()
    (out / "kernels.csv").symlink_to(kd)
    _refused(cli("diff", src, "--ranks", "0,2", "-o", out, "--format", "json"),
             "inside the input")
    assert kd.read_bytes() == before


# ------------------------------------------------------------------------- report -o


def test_report_o_never_writes_into_its_input_or_over_others(qwen, tmp_path):
    _, out = qwen
    summary = out / "summary.json"
    before = summary.read_bytes()
    _refused(cli("report", out, "-o", summary), "inside the input")
    _refused(cli("report", out, "-o", out / "tables" / "new.html"), "inside the input")
    hard = tmp_path / "hard.html"
    os.link(summary, hard)
    _refused(cli("report", out, "-o", hard), "input file")
    assert summary.read_bytes() == before
    mine = tmp_path / "mine.html"
    mine.write_text("<p>mine</p>")
    _refused(cli("report", out, "-o", mine), "did not write it")
    assert mine.read_text() == "<p>mine</p>"
    blk = _block_device(tmp_path / "disk")
    if blk is not None:
        before_blk = identity(blk)
        _refused(cli("report", out, "-o", blk), "block device")
        assert identity(blk) == before_blk
    page = tmp_path / "page.html"
    assert cli("report", out, "-o", page).exit_code == 0
    assert cli("report", out, "-o", page).exit_code == 0  # its own: replaced


def test_report_default_path_never_replaces_a_symlink(qwen, tmp_path):
    _, out = qwen
    copy = tmp_path / "out"
    shutil.copytree(out, copy)
    page = copy / "report.html"
    target = tmp_path / "elsewhere.html"
    shutil.copy(page, target)  # a page of ours, behind a link
    page.unlink()
    page.symlink_to(target)
    _refused(cli("report", copy), "symbolic link")
    assert os.path.islink(page)


# ------------------------------------------------------------------------- timeline -o


def test_timeline_o_never_writes_over_an_input_file(qwen, tmp_path):
    src, _ = qwen
    kd = _kernel_csv(src)
    before = kd.read_bytes()
    hard = tmp_path / "trace.json"
    os.link(kd, hard)
    _refused(cli("timeline", src, "-o", hard, "-q"), "input file")
    assert kd.read_bytes() == before
    blk = _block_device(tmp_path / "disk")
    if blk is not None:
        _refused(cli("timeline", src, "-o", blk, "-q"), "block device")


# ------------------------------------------------------------------------- gate reports


def test_gate_report_never_lands_in_its_baseline_through_a_link(qwen, tmp_path):
    """Before: `--markdown shared/op_statistics.csv`, where the baseline's op_statistics.csv
    links there, appended the report to the baseline (exit 0; the next gate: malformed CSV)."""
    _, out = qwen
    shared = tmp_path / "shared"
    shared.mkdir()
    for how in ("symlink", "hardlink"):
        base = tmp_path / f"base-{how}"
        shutil.copytree(out, base, ignore=shutil.ignore_patterns("tables", ".ascendprof*"))
        kept = shared / f"op_statistics-{how}.csv"
        shutil.copy(base / "op_statistics.csv", kept)
        (base / "op_statistics.csv").unlink()
        if how == "symlink":
            (base / "op_statistics.csv").symlink_to(kept)
        else:
            os.link(kept, base / "op_statistics.csv")
        before = kept.read_bytes()
        for opt in ("--markdown", "--junit"):
            _refused(cli("gate", base, out, opt, kept), "input file")
        assert kept.read_bytes() == before
