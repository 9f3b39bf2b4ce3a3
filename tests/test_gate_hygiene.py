"""The gate's reports hold any name from the data safely: JUnit stays well-formed XML with a
control character in an op type, the Markdown step summary shows ``<script>`` / ``<img
onerror>`` as text, the terminal shows ESC sequences escaped; ``--junit X --markdown X`` (one
file for both) is refused.

Before: a control character made invalid XML; the Markdown embedded raw HTML; the same file
for both reports gave exit 0 and an invalid file.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest
from click.testing import CliRunner

import faultgen as FG
from ascendprof.cli.main import main

EVIL = "Op\x01\x1b[2J<script>alert(1)</script><img src=x onerror=alert(2)>|`x`"


def cli(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


@pytest.fixture(scope="module")
def analyses(tmp_path_factory):
    d = tmp_path_factory.mktemp("hyg")
    src = FG.copy_base("qwen3", d / "in")
    for r in (0, 2):
        kd = FG.out_file(src, "qwen3", r, "kernel_details.csv")
        FG.edit_csv(kd, lambda h, rows: (h, [[EVIL if c == "FlashAttentionScoreGrad" else c
                                              for c in row] for row in rows]))
    outs = []
    for name in ("base", "cur"):
        r = cli("analyse", src, "-o", d / name, "-q", "--workers", "1", "--no-html")
        assert r.exit_code == 0, r.output
        outs.append(d / name)
    return outs


def test_reports_hold_any_name(analyses, tmp_path):
    junit, md = tmp_path / "gate.xml", tmp_path / "gate.md"
    r = cli("gate", *analyses, "--junit", junit, "--markdown", md)
    assert r.exit_code == 0, r.output
    root = ET.parse(junit).getroot()  # well-formed
    names = [tc.get("name") for tc in root.iter("testcase")]
    assert any("<script>" in n and "\\x01" in n for n in names), names
    text = md.read_text(encoding="utf-8")
    assert "Op\\\\x01" in text  # shown as Op\\x01 (the backslash escaped for Markdown)
    for raw in ("<script>", "<img", "\x01", "\x1b"):
        assert raw not in text, raw
    assert "&lt;script&gt;" in text
    assert "\x1b" not in r.output and "\x01" not in r.output


def test_one_file_for_both_reports_is_refused(analyses, tmp_path):
    same = tmp_path / "report.out"
    r = cli("gate", *analyses, "--junit", same, "--markdown", same)
    assert r.exit_code == 2, r.output
    assert "one file" in r.output and r.output.strip().count("\n") == 0
    assert not same.exists()
    link = tmp_path / "link.out"
    link.symlink_to(same)
    r = cli("gate", *analyses, "--junit", same, "--markdown", link)
    assert r.exit_code == 2, r.output
