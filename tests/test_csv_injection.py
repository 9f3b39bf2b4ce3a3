"""CSV outputs never carry a spreadsheet formula (issue #17 item 7, OWASP "CSV Injection"):
a text cell starting with =, +, -, @, TAB or CR gets a leading ', in every CSV ascendprof
writes; the Parquet tables keep the raw names.

Real data: the Qwen3 sample with kernel names and op types renamed, in its own
kernel_details.csv, to formulas. Expected values: the names the test wrote.
"""

from __future__ import annotations

import csv
import re

import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

import faultgen as FG
from ascendprof.cli.main import main

TYPES = {"MatMulV3": '=HYPERLINK("http://example.com","MatMul")', "Add": "+Add",
         "Mul": "-2+3+cmd|' /C calc'!A0", "Cast": "@SUM(1,1)", "Sub": "\tSub"}
KERNEL = "=cmd|' /C calc'!A0"


@pytest.fixture(scope="module")
def analysed(tmp_path_factory):
    d = tmp_path_factory.mktemp("inj")
    src = FG.copy_base("qwen3", d / "in")
    kd = FG.out_file(src, "qwen3", 0, "kernel_details.csv")
    with open(kd, newline="", encoding="utf-8") as f:
        rows = list(csv.reader(f))
    head = rows[0]
    name, typ = head.index("Name"), head.index("Type")
    renamed = False
    for r in rows[1:]:
        r[typ] = TYPES.get(r[typ], r[typ])
        if r[typ] == TYPES["MatMulV3"] and not renamed:
            old = r[name]
            renamed = True
    for r in rows[1:]:
        if r[name] == old:
            r[name] = KERNEL
    with open(kd, "w", newline="", encoding="utf-8") as f:
        csv.writer(f, lineterminator="\n").writerows(rows)
    out = d / "out"
    r = CliRunner().invoke(main, ["analyse", str(src), "-o", str(out), "-q", "--workers", "1",
                                  "--no-cache"])
    assert r.exit_code == 0, r.output
    return out


def cells(path):
    with open(path, newline="", encoding="utf-8") as f:
        return [c for row in csv.reader(f) for c in row]


NUMBER = re.compile(r"^[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?$|^[+-]$")


def test_no_csv_output_starts_a_cell_with_a_formula(analysed):
    """Before: written verbatim to op_statistics.csv and top_kernels.csv."""
    csvs = sorted(analysed.glob("*.csv"))
    assert {p.name for p in csvs} >= {"op_statistics.csv", "top_kernels.csv", "problems.csv"}
    for p in csvs:
        bad = [c for c in cells(p) if c[:1] in ("=", "+", "-", "@", "\t", "\r")
               and not NUMBER.match(c)]
        assert not bad, (p.name, bad[:5])


def test_names_are_kept_behind_a_quote_and_raw_in_parquet(analysed):
    ops = set(cells(analysed / "op_statistics.csv"))
    for raw in TYPES.values():
        if raw.startswith(("=", "+", "-", "@", "\t")):
            assert "'" + raw in ops, raw
    kernels = set(cells(analysed / "top_kernels.csv"))
    assert "'" + KERNEL in kernels
    table = pq.read_table(analysed / "tables" / "rank0" / "kernels.parquet")
    names = set(table.column("name").to_pylist())
    types = set(table.column("op_type").to_pylist())
    assert KERNEL in names and TYPES["MatMulV3"] in types and TYPES["Add"] in types


def test_numbers_and_plain_text_are_unchanged(analysed):
    """Negative numbers stay numbers; ordinary names are untouched."""
    from ascendprof.sysio.csvsafe import csv_safe

    assert [csv_safe(x) for x in ("-1.5", "+3", "-2e-3", "-", "MatMul", "", 7)] == \
        ["-1.5", "+3", "-2e-3", "-", "MatMul", "", 7]
    assert csv_safe("-x") == "'-x" and csv_safe("\rA") == "'\rA"
    ops = cells(analysed / "op_statistics.csv")
    assert "FlashAttentionScoreGrad" in ops


def test_gate_reads_the_quoted_names_back_as_the_raw_op_types(analysed):
    """The gate compares op_statistics.csv with op types from a profiling directory (raw
    names): the leading quote must not make '+Add' a different op type from +Add."""
    from ascendprof.compare.gate import read_op_statistics

    df = read_op_statistics(analysed / "op_statistics.csv")
    types = set(df["op_type"])
    for raw in TYPES.values():
        assert raw in types, raw
    assert not any(t.startswith("'") for t in types)
