"""Profiler CSVs a spreadsheet saved again. With a lone CR ending each row ("CSV (Macintosh)")
they give the same analysis as the files the profiler wrote.

The real two-rank torch_npu Level1 text export, every CSV rewritten with CR line endings; both
trees analysed through the CLI; every CSV output compared byte for byte (problems.csv aside,
which names the input paths). Before: each such file was skipped as "malformed CSV: header
row: new-line character seen in unquoted field".
"""
from __future__ import annotations

import csv
import filecmp
import shutil

from click.testing import CliRunner

from ascendprof.cli.main import main

TREE = ("torch_npu-2rank-levels", "text", "level1")


def _analyse(src, out):
    r = CliRunner().invoke(main, ["analyse", str(src), "-o", str(out), "-q", "--no-html",
                                  "--no-cache", "--workers", "1"])
    assert r.exit_code == 0, r.output
    return out


def test_every_csv_with_cr_line_endings_gives_the_same_outputs(shared_data, tmp_path):
    src = shared_data.joinpath(*TREE)
    mac = tmp_path / "mac"
    shutil.copytree(src, mac)
    changed = []
    for p in mac.rglob("*.csv"):
        data = p.read_bytes()
        if b"\n" in data:
            p.write_bytes(data.replace(b"\r\n", b"\n").replace(b"\n", b"\r"))
            changed.append(p.name)
    # the premise: the files the analysis reads from were rewritten
    assert {"kernel_details.csv", "step_trace_time.csv", "op_statistic.csv"} <= set(changed)
    want = _analyse(src, tmp_path / "want")
    got = _analyse(mac, tmp_path / "got")
    outs = sorted(p.relative_to(want) for p in want.rglob("*.csv") if p.name != "problems.csv")
    assert "cluster_step_trace_time.csv" in {o.name for o in outs}
    for rel in outs:
        assert filecmp.cmp(want / rel, got / rel, shallow=False), rel
    with open(got / "problems.csv", newline="") as f:
        about_inputs = [r for r in csv.DictReader(f) if r["Path"].endswith(".csv")]
    assert about_inputs == []


def test_a_csv_saved_as_utf16_unicode_text_is_named_so(shared_data, tmp_path):
    """A spreadsheet's "Unicode Text" export is UTF-16 (with a byte-order mark) and TAB
    separated: not read, and the problem says what the file is instead of calling its NUL
    bytes damage; the rank's other files are still analysed."""
    src = tmp_path / "in"
    shutil.copytree(shared_data.joinpath(*TREE), src)
    kd = sorted(src.rglob("kernel_details.csv"))[0]
    kd.write_text(kd.read_text(encoding="utf-8").replace(",", "\t"), encoding="utf-16")
    assert kd.read_bytes()[:2] in (b"\xff\xfe", b"\xfe\xff")
    out = _analyse(src, tmp_path / "out")
    with open(out / "problems.csv", newline="") as f:
        named = [r for r in csv.DictReader(f) if r["Path"] == str(kd)]
    assert len(named) == 1 and "UTF-16" in named[0]["Reason"], named
    assert "NUL" not in named[0]["Reason"]
    with open(out / "cluster_step_trace_time.csv", newline="") as f:
        assert sorted(r["Index"] for r in csv.DictReader(f) if r["Type"] == "rank") == ["0", "1"]
