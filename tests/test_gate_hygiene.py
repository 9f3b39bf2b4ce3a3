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


def _edit_rank_rows(src, dst, fn):
    import csv

    with open(src, newline="") as f:
        rows = list(csv.DictReader(f))
    head = list(rows[0])
    for r in rows:
        if r["Type"] == "rank":
            fn(r)
    with open(dst, "w", newline="") as f:
        w = csv.DictWriter(f, head, lineterminator="\n")
        w.writeheader()
        w.writerows(rows)


def test_no_rank_in_common_is_no_pass(analyses, tmp_path):
    """Baseline ranks 0-3, current ranks 10-13: before, the cluster checks compared them and
    passed (exit 0); now exit 2, saying why."""
    base = analyses[0] / "cluster_step_trace_time.csv"
    other = tmp_path / "cluster_step_trace_time.csv"
    _edit_rank_rows(base, other, lambda r: r.update(Index=str(int(r["Index"]) + 10)))
    r = cli("gate", base, other)
    assert r.exit_code == 2, r.output
    assert "no rank in common" in r.output and r.output.strip().count("\n") == 0


def test_a_negative_baseline_value_is_refused(analyses, tmp_path):
    """A baseline Computing of -5 let any current value pass; now exit 2 naming the cell."""
    base = tmp_path / "cluster_step_trace_time.csv"
    _edit_rank_rows(analyses[0] / "cluster_step_trace_time.csv", base,
                    lambda r: r.update(Computing="-5") if r["Index"] == "1" else None)
    r = cli("gate", base, analyses[1] / "cluster_step_trace_time.csv")
    assert r.exit_code == 2, r.output
    assert "negative" in r.output and "Computing" in r.output


def test_a_negative_bandwidth_in_a_gate_input_is_refused(analyses, tmp_path):
    """-17.5 GB/s in one op of cluster_communication.json: before, the group's HCCS bandwidth
    moved (15.58 -> 24.42 GB/s in the report); now the input is refused, the op named."""
    import json
    import shutil

    cur = tmp_path / "cur"
    shutil.copytree(analyses[1], cur, ignore=shutil.ignore_patterns("tables", ".ascendprof*"))
    p = cur / "cluster_communication.json"
    doc = json.loads(p.read_text())
    done = []

    def walk(o):
        if isinstance(o, dict):
            for k, v in o.items():
                if done:
                    return
                if k == "HCCS" and isinstance(v, dict) and v.get("Transit Size(MB)"):
                    v["Bandwidth(GB/s)"] = -17.5
                    done.append(k)
                    return
                if not str(k).startswith("Total Op Info"):
                    walk(v)
    walk(doc)
    assert done
    p.write_text(json.dumps(doc))
    r = cli("gate", analyses[0], cur)
    assert r.exit_code == 2, r.output
    assert "Bandwidth(GB/s)" in r.output and "-17.500" in r.output
