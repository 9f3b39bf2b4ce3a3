"""Profiler CSVs that a spreadsheet saved with a lone CR ending each row ("CSV (Macintosh)")
give the same analysis as the files the profiler wrote.

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
