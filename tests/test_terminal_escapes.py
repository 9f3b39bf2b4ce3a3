"""Names from the data reach the terminal as text, never as control sequences or markup: an op
type, a directory name carrying ESC / BEL (recolour, set the window title, clear the screen)
or rich markup (``[red]``) are shown escaped (``\\x1b``) by analyse, scan and diff.

Before: the ESC sequences reached the terminal raw and ``[red]`` was taken as markup.
"""

from __future__ import annotations

import shutil

from click.testing import CliRunner

import faultgen as FG
from ascendprof.cli.main import main

#: a terminal wide enough for the op type column not to wrap the name (the test process's own
#: width depends on how pytest was started: one process or several)
WIDE = CliRunner(env={"COLUMNS": "200"})

EVIL = "Evil\x1b]0;pwned\x07\x1b[2J[red]X[/red]"


def _evil_op(src):
    kd = FG.out_file(src, "qwen3", 0, "kernel_details.csv")
    FG.edit_csv(kd, lambda h, rows: (h, [[EVIL if c == "FlashAttentionScoreGrad" else c
                                          for c in r] for r in rows]))


def _clean(text: str) -> None:
    assert "\x1b" not in text and "\x07" not in text, repr(text[:2000])


def test_analyse_scan_and_diff_escape_names(tmp_path):
    src = FG.copy_base("qwen3", tmp_path / "in")
    _evil_op(src)
    odd = tmp_path / "in" / "job\x1b[2J[bold]x"
    odd.mkdir()
    shutil.move(str(FG.rank_dir(src, "qwen3", 3)), odd / "rank_3_ascend_pt")
    r = WIDE.invoke(main, ["analyse", str(src), "-o", str(tmp_path / "out"),
                           "--workers", "1", "--no-html", "--run", "."])
    out = r.output
    if r.exit_code != 0:  # the moved rank is a run of its own: analyse the main one
        raise AssertionError(out)
    _clean(out)
    assert "Evil\\x1b]0;pwned\\x07\\x1b[2J[red]X[/red]" in out, out
    r = WIDE.invoke(main, ["scan", str(src)])
    _clean(r.output)
    assert "job\\x1b[2J" in r.output.replace("\n", "")
    r = WIDE.invoke(main, ["diff", str(src), "--ranks", "0,2", "--top", "40"])
    assert r.exit_code == 0, r.output
    _clean(r.output)
    assert "Evil\\x1b]0;pwned\\x07" in r.output
