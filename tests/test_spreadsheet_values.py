"""A rank whose memory files went through a spreadsheet: memory_record.csv with ``Timestamp(us)``
in E-notation (``1.73641E+15``) and operator_memory.csv with a TAB after every number, quoted, with
a BOM and CRLF. Through ``ascendprof analyse``: exit 0, problems.csv lists what lost precision
(file, column, count), the peaks are still there (their times are not), and every other analysis
of the rank is the same as on the untouched files.

Input: the real Level1 rank of fixtures/torch_npu-static-graph-mem, mangled by tests/faultgen.py.
Expected values: counted in the mangled file and computed from the original file with the csv
module here, and the output of a run on the untouched copy (for the analyses the damage must not
change).
"""

from __future__ import annotations

import re
import shutil


import faultgen as FG
from conftest import analyse_quietly, csv_rows
from conftest import FIXTURES

RANK = FIXTURES / "torch_npu-static-graph-mem" / "rank0_ascend_pt"
OUT = "ASCEND_PROFILER_OUTPUT"


_analyse, _rows = analyse_quietly, csv_rows


def test_e_notation_timestamps_and_tabs(tmp_path):
    clean = shutil.copytree(RANK, tmp_path / "clean" / "rank0_ascend_pt")
    src = shutil.copytree(RANK, tmp_path / "in" / "rank0_ascend_pt")
    mr, om = src / OUT / "memory_record.csv", src / OUT / "operator_memory.csv"
    FG.e_notation(mr, ("Timestamp(us)",))
    FG.trailing_tabs(om)
    FG.quote_all(om)
    FG.spreadsheet(mr)
    FG.spreadsheet(om)
    assert mr.read_bytes().startswith(b"\xef\xbb\xbf") and b'\t"' in om.read_bytes()
    # what the spreadsheet did, counted in the mangled file itself
    sci = [r["Timestamp(us)"] for r in _rows(mr)
           if re.fullmatch(r"\d\.\d*E\+\d+", r["Timestamp(us)"])]
    assert len(sci) > 1000 and sci[0].startswith("1.7364")

    assert _analyse(clean.parent, tmp_path / "clean_out").exit_code == 0
    r = _analyse(src.parent, tmp_path / "out")
    assert r.exit_code == 0, r.output
    out, ref = tmp_path / "out", tmp_path / "clean_out"

    probs = [p for p in _rows(out / "problems.csv") if "memory" in p["Path"]]
    assert len(probs) == 1, probs  # operator_memory.csv's tabs and quotes lose nothing
    p = probs[0]
    assert p["Path"].endswith("memory_record.csv") and p["Severity"] == "warning"
    assert f"'Timestamp(us)': {len(sci)} value(s) in E-notation" in p["Reason"]
    assert "precision lost" in p["Reason"] and sci[0] in p["Reason"] and p["Affects"] == "memory"

    # peaks from the original file (values are exact; the spreadsheet kept them)
    orig = _rows(RANK / OUT / "memory_record.csv")
    summary = {s["Component"]: s for s in _rows(out / "memory_summary.csv")}
    for comp in ("PTA+GE", "PTA", "GE", "APP"):
        res = [float(x["Total Reserved(MB)"]) for x in orig
               if x["Component"] == comp and x["Total Reserved(MB)"]]
        assert float(summary[comp]["Peak Reserved(MB)"]) == max(res)
        assert summary[comp]["Peak Reserved Time(us)"] == ""  # not known to the us any more
        if comp != "APP":
            alloc = [float(x["Total Allocated(MB)"]) for x in orig
                     if x["Component"] == comp and x["Total Allocated(MB)"]]
            assert float(summary[comp]["Peak Allocated(MB)"]) == max(alloc)
            assert summary[comp]["Peak Allocated Operator"] == ""
    # the top operators: the same, except that a block never released lives until the end of
    # the collection, which was memory_record's last timestamp (now unknown: operator_memory's)
    got, want = _rows(out / "memory_top_ops.csv"), _rows(ref / "memory_top_ops.csv")
    # (the top by size is kept; the top by size x lifetime may take other operators in)
    by_size = lambda rows: [r["Name"] for r in rows if int(r["Rank By Size"]) <= 20]  # noqa: E731
    assert by_size(got) == by_size(want) and len(by_size(want)) == 20
    fixed = ("Rank", "Name", "Source", "Allocations", "Total Allocated(MB)", "Largest(MB)",
             "Unreleased(MB)", "Rank By Size")
    life = ("Size x Lifetime(MB*ms)", "Mean Lifetime(ms)")  # the end matters for open blocks
    got_by_name = {g["Name"]: g for g in got}
    compared = 0
    for w in want:
        g = got_by_name.get(w["Name"])
        if g is None:
            continue
        cols = fixed + (life if float(w["Unreleased(MB)"] or 0) == 0 else ())
        assert {k: g[k] for k in cols} == {k: w[k] for k in cols}
        compared += 1
    assert compared >= 20
    # the rank's other analyses are those of the untouched files
    for name in ("memory_modules.csv", "step_trace_check.csv",
                 "op_statistics.csv", "cluster_step_trace_time.csv"):
        assert _rows(out / name) == _rows(ref / name), name


def test_excel_general_spelling():
    """The mangling itself: a spreadsheet's General format (11 characters, 6 significant digits)."""
    assert FG.excel_general("1736408883573957.920\t") == "1.73641E+15"
    assert FG.excel_general("1695120000000000") == "1.69512E+15"
    assert FG.excel_general("1700000000000000") == "1.7E+15"
    assert FG.excel_general("34058.240\t") == "34058.240"
