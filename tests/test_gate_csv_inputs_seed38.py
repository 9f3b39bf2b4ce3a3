"""`ascendprof gate` on exported CSVs as a spreadsheet saves them, or as a cut-off copy leaves
them (compare.gate.csv_inputs, mutation sample seed 38):

- Excel's "CSV UTF-8" puts a byte-order mark before the first header cell and writes a blank
  row inside the used range as a row of commas; an op_statistics.csv saved so still has its
  ``Rank`` column (a blank row is not a rank row, so its empty cells are not checked);
- a row cut short before the column that says whether it is a rank row (``Type`` of
  cluster_step_trace_time.csv, ``Rank`` of op_statistics.csv) is checked as a data row, and
  its missing cells are refused with exit 2 and one line naming the file, the row and the
  column (not a crash);
- a cell refused is quoted as written (a redacted ``XXX`` stays ``'XXX'``), and the error for
  a negative cell names the file.

Every expected value is read off the rows written here (headers as in
tests/test_gate_csv_inputs.py: the profiler's and ascendprof's own layouts).
"""

from __future__ import annotations

import json

from click.testing import CliRunner

from ascendprof.cli.main import main

STEP_HEAD = ("Device_id,Step,Computing,Communication(Not Overlapped),Overlapped,Communication,"
             "Free,Stage,Bubble,Communication(Not Overlapped and Exclude Receive),Preparing")
CLUSTER_HEAD = ("Step,Type,Index,Computing,Communication(Not Overlapped),Overlapped,"
                "Communication,Free,Stage,Bubble,Communication(Not Overlapped and Exclude "
                "Receive),Preparing,DP Index,PP Index,TP Index")
OPSTATS_HEAD = ("Rank,OP Type,Accelerator Core,Count,Total Time(us),Min Time(us),"
                "Avg Time(us),Max Time(us),Ratio(%)")


def gate(*args):
    return CliRunner().invoke(main, ["gate", *map(str, args)])


def error_line(r) -> str:
    err = r.stderr.strip() if hasattr(r, "stderr") and r.stderr else r.output.strip()
    assert len(err.splitlines()) == 1, err
    return err


def write(path, lines, excel=False):
    """``lines`` as a CSV file; ``excel``: as Excel's "CSV UTF-8" saves it (BOM, CRLF)."""
    if excel:
        path.write_bytes(b"\xef\xbb\xbf" + "".join(x + "\r\n" for x in lines).encode("utf-8"))
    else:
        path.write_text("".join(x + "\n" for x in lines), encoding="utf-8")
    return path


def test_excel_saved_op_statistics_with_a_blank_row_compares_equal_to_the_original(tmp_path):
    rows = ["0,MatMul,AI_CORE,2,10.5,5,5.25,5.5,100",
            "1,MatMul,AI_CORE,2,12,6,6,6,100"]
    base = write(tmp_path / "op_statistics.csv", [OPSTATS_HEAD, *rows])
    # the copy opened in a spreadsheet, a blank line left after the rank rows, saved again
    cur = write(tmp_path / "op_statistics_excel.csv", [OPSTATS_HEAD, *rows, ",,,,,,,,"],
                excel=True)
    r = gate(base, cur, "--format", "json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.output[r.output.index("{"):])
    ops = [c for c in doc["checks"] if c["rule"].startswith("op_time") and c["verdict"] != "skip"]
    # the same rows on both sides: every op-time check passes with no change
    assert ops and all(c["verdict"] == "pass" and c["change"] == 0 for c in ops), ops


def test_a_cluster_step_trace_cut_off_after_the_step_cell_exits_2(tmp_path):
    full = "13,rank,0,10,1,0,1,2,3,0,1,0,0,0,0"
    base = write(tmp_path / "cluster_step_trace_time.csv", [CLUSTER_HEAD, full])
    # a copy cut off after the first cell of its second data row: no Type, so a data row,
    # and its Computing (the first number column) is missing
    (tmp_path / "cut").mkdir()
    cur = write(tmp_path / "cut" / "cluster_step_trace_time.csv", [CLUSTER_HEAD, full, "14"])
    r = gate(base, cur)
    assert r.exit_code == 2, r.output
    assert error_line(r) == (f"ascendprof: error: {cur} at data row 2: column 'Computing': "
                             f"'' is not a number (gate inputs must be complete)")


def test_an_op_statistics_row_cut_off_before_its_rank_exits_2(tmp_path):
    # a spreadsheet user moved OP Type to the front; the copy is cut off after the op type of
    # its second data row
    head = "OP Type,Rank,Accelerator Core,Count,Total Time(us),Min Time(us),Avg Time(us)"
    full = "MatMul,0,AI_CORE,2,10.5,5,5.25"
    base = write(tmp_path / "op_statistics.csv", [head, full], excel=True)
    (tmp_path / "cut").mkdir()
    cur = write(tmp_path / "cut" / "op_statistics.csv", [head, full, "Add"], excel=True)
    assert gate(base, base).exit_code == 0
    r = gate(base, cur)
    assert r.exit_code == 2, r.output
    assert error_line(r) == (f"ascendprof: error: {cur} at data row 2: column 'Count': "
                             f"'' is not a number (gate inputs must be complete)")


def test_a_refused_cell_is_quoted_as_written(tmp_path):
    good = "0,13,1,1,0,1,1,1,0,1,0"
    base = write(tmp_path / "step_trace_time.csv", [STEP_HEAD, good, "0,14,1,1,0,1,1,1,0,1,0"])
    (tmp_path / "cur").mkdir()
    for cell in ("XXX", "12.5X"):  # Computing redacted; a stray letter after a number
        cur = write(tmp_path / "cur" / "step_trace_time.csv",
                    [STEP_HEAD, good, f"0,14,{cell},1,0,1,1,1,0,1,0"], excel=True)
        r = gate(base, cur)
        assert r.exit_code == 2, r.output
        assert error_line(r) == (f"ascendprof: error: {cur} at data row 2: column "
                                 f"'Computing': '{cell}' is not a number (gate inputs must be "
                                 f"complete)")


def test_a_negative_cell_is_refused_naming_the_file(tmp_path):
    good = "0,13,1,1,0,1,1,1,0,1,0"
    base = write(tmp_path / "step_trace_time.csv", [STEP_HEAD, good])
    (tmp_path / "cur").mkdir()
    cur = write(tmp_path / "cur" / "step_trace_time.csv",
                [STEP_HEAD, good, "0,14,1,1,0,1,-5,1,0,1,0"])  # Free, the 7th column
    r = gate(base, cur)
    assert r.exit_code == 2, r.output
    assert error_line(r) == (f"ascendprof: error: {cur} at data row 2: column 'Free': '-5' "
                             f"is negative (a length of time cannot be)")
