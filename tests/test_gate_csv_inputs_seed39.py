"""`ascendprof gate` on exported CSVs that are damaged or are not gate inputs at all
(compare.gate.csv_inputs, mutation sample seed 39): the one-line error (exit 2) says exactly
what is wrong, word for word:

- a number cell holding a line break (two values pasted into one cell, as a Windows clipboard
  gives them: CR LF, so the cell is quoted) is refused quoted as written, its carriage return
  kept (the file is read with ``newline=""``, not with newline translation);
- a CSV saved in a legacy code page (GBK, as a Chinese-locale spreadsheet saves "CSV") is
  refused as "not UTF-8 text" at the byte offset in the file of the first byte that is not
  UTF-8: a BOM before it counted, and also when that byte comes after the first 8 KiB (which
  is all the header check decodes; it was an internal error, exit 3);
- a CSV that is none of the gate's five names the five, spelt as the files are named.

Every expected value is read off the bytes written here (headers as in
tests/test_gate_csv_inputs.py: the profiler's own layouts).
"""

from __future__ import annotations

from test_gate_csv_inputs_seed38 import error_line, gate, STEP_HEAD

OPSTAT_HEAD = ("Device_id,OP Type,Core Type,Count,Total Time(us),Min Time(us),Avg Time(us),"
               "Max Time(us),Ratio(%)")


def test_a_number_cell_with_a_pasted_line_break_is_quoted_with_its_carriage_return(tmp_path):
    good = "0,13,1,1,0,1,1,1,0,1,0"
    base = tmp_path / "step_trace_time.csv"
    base.write_text(f"{STEP_HEAD}\n{good}\n0,14,1,1,0,1,1,1,0,1,0\n", encoding="utf-8")
    (tmp_path / "cur").mkdir()
    cur = tmp_path / "cur" / "step_trace_time.csv"
    # Computing of step 14: "12.5" and "13" pasted into one cell with a CR LF between them;
    # a CSV writer quotes a cell holding a line break
    cur.write_bytes(f"{STEP_HEAD}\r\n{good}\r\n".encode() +
                    b'0,14,"12.5\r\n13",1,0,1,1,1,0,1,0\r\n')
    r = gate(base, cur)
    assert r.exit_code == 2, r.output
    # the cell as written: 1 2 . 5 CR LF 1 3, shown with Python's escapes
    assert error_line(r) == (f"ascendprof: error: {cur} at data row 2: column 'Computing': "
                             "'12.5\\r\\n13' is not a number (gate inputs must be complete)")


def test_a_csv_saved_in_gbk_is_refused_as_not_utf8_at_its_first_foreign_byte(tmp_path):
    base = tmp_path / "op_statistic.csv"
    base.write_text(f"{OPSTAT_HEAD}\n0,MatMul,AI_CORE,2,10.5,5,5.25,5.5,100\n",
                    encoding="utf-8")
    (tmp_path / "cur").mkdir()
    cur = tmp_path / "cur" / "op_statistic.csv"
    # an op type renamed in Chinese ("矩阵乘", matrix multiply) and saved in GBK
    data = (f"{OPSTAT_HEAD}\n0,".encode() + "矩阵乘".encode("gbk") +
            b",AI_CORE,2,10.5,5,5.25,5.5,100\n")
    cur.write_bytes(data)
    # the header (ASCII), a line feed, then "0," : the first GBK byte follows
    offset = len(OPSTAT_HEAD) + 1 + 2
    assert data[offset] >= 0x80 and data[:offset].isascii()
    r = gate(base, cur)
    assert r.exit_code == 2, r.output
    assert error_line(r) == f"ascendprof: error: {cur} at byte {offset}: not UTF-8 text"


def test_a_csv_that_is_no_gate_input_names_the_five_files(tmp_path):
    base = tmp_path / "op_statistic.csv"
    base.write_text(f"{OPSTAT_HEAD}\n0,MatMul,AI_CORE,2,10.5,5,5.25,5.5,100\n",
                    encoding="utf-8")
    # the profiler's api_statistic.csv given by mistake
    other = tmp_path / "api_statistic.csv"
    other.write_text("Device_id,Level,API Name,Time(us),Count,Avg(us),Min(us),Max(us),Variance\n"
                     "host,ACL_OP,aclopCompileAndExecute,10,2,5,4,6,1\n", encoding="utf-8")
    r = gate(base, other)
    assert r.exit_code == 2, r.output
    assert error_line(r) == (
        f"ascendprof: error: {other}: not a CSV the gate reads (expected "
        "cluster_step_trace_time, step_trace_time, kernel_details, op_statistic or "
        "op_statistics)")


def test_a_foreign_byte_past_the_first_8_kib_is_refused_not_a_crash(tmp_path):
    # a long step_trace_time.csv whose last row was edited in a legacy code page (a Latin-1
    # "µ" after a number): the header and the first 8 KiB are UTF-8, so the file is known as a
    # step_trace_time.csv, and the foreign byte is met only when every cell is read
    rows = "".join(f"0,{s},1,1,0,1,1,1,0,1,0\n" for s in range(1, 1001))
    base = tmp_path / "step_trace_time.csv"
    base.write_text(f"{STEP_HEAD}\n{rows}", encoding="utf-8")
    (tmp_path / "cur").mkdir()
    cur = tmp_path / "cur" / "step_trace_time.csv"
    data = f"{STEP_HEAD}\n{rows}".encode() + "0,1001,1\xb5,1,0,1,1,1,0,1,0\n".encode("latin-1")
    cur.write_bytes(data)
    offset = data.index(b"\xb5")  # the only byte >= 0x80 of the file
    assert offset > 8192 and data[:offset].isascii()
    r = gate(base, cur)
    assert r.exit_code == 2, r.output  # was an internal error, exit 3
    assert error_line(r) == f"ascendprof: error: {cur} at byte {offset}: not UTF-8 text"


def test_the_offset_of_a_foreign_byte_counts_the_byte_order_mark(tmp_path):
    base = tmp_path / "op_statistic.csv"
    base.write_text(f"{OPSTAT_HEAD}\n0,MatMul,AI_CORE,2,10.5,5,5.25,5.5,100\n",
                    encoding="utf-8")
    (tmp_path / "cur").mkdir()
    cur = tmp_path / "cur" / "op_statistic.csv"
    # saved with a BOM, then an op type written in GBK
    data = (b"\xef\xbb\xbf" + f"{OPSTAT_HEAD}\r\n0,".encode() + "矩阵乘".encode("gbk") +
            b",AI_CORE,2,10.5,5,5.25,5.5,100\r\n")
    cur.write_bytes(data)
    offset = 3 + len(OPSTAT_HEAD) + 2 + 2  # BOM, header, CR LF, "0,"
    assert data[offset] >= 0x80 and data[3:offset].isascii()
    r = gate(base, cur)
    assert r.exit_code == 2, r.output
    assert error_line(r) == f"ascendprof: error: {cur} at byte {offset}: not UTF-8 text"
