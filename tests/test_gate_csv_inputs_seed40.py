"""`ascendprof gate` on exported CSVs and output directories that are damaged
(compare.gate.csv_inputs, mutation sample seed 40): the one-line error (exit 2) says exactly
what is wrong, word for word:

- a CSV saved as UTF-16 (a spreadsheet's "Unicode text") is refused as "not UTF-8 text" at
  byte 0, its byte-order mark FF FE being the first byte that is not UTF-8 (it is not the
  UTF-8 BOM, so nothing is skipped before the offset is counted);
- a CSV cut off in the middle of a multi-byte character (a truncated copy) is refused at the
  offset of that character's first byte, though every block decodes until the end of file;
- an analyse output directory whose cluster_step_trace_time.csv is empty (0 bytes, a run
  interrupted while writing it) is refused as an empty file (exit 2), not an internal error;
- an op_statistics.csv with a blank row (a row of commas, as a spreadsheet saves one) between
  its rank rows still has the rank rows after it checked: a bad cell there is refused;
- a step of step_trace_time.csv listed twice with different values is refused as a duplicated
  row (the key is rank and step, not the whole row).

The same kinds of gap at other places: a stage row of cluster_step_trace_time.csv or a blank
line before a bad row does not end the cell check either; an op type of op_statistic.csv
listed twice with different values is a duplicated row; an output directory's empty
op_statistics.csv exits 2; a foreign byte cut from the byte after it by a block of the offset
search is named at its own offset.

Every expected value is read off the bytes written here (headers as in
tests/test_gate_csv_inputs.py: the profiler's and ascendprof's own layouts).
"""

from __future__ import annotations

from test_gate_csv_inputs_seed38 import OPSTATS_HEAD, STEP_HEAD, error_line, gate, write

OPSTAT_HEAD = ("Device_id,OP Type,Core Type,Count,Total Time(us),Min Time(us),Avg Time(us),"
               "Max Time(us),Ratio(%)")


def _good_step_trace(tmp_path):
    return write(tmp_path / "step_trace_time.csv",
                 [STEP_HEAD, "0,1,1,1,0,1,1,1,0,1,0", "0,2,1,1,0,1,1,1,0,1,0"])


def test_a_csv_saved_as_utf16_is_refused_at_byte_0(tmp_path):
    base = _good_step_trace(tmp_path)
    (tmp_path / "cur").mkdir()
    cur = tmp_path / "cur" / "step_trace_time.csv"
    # UTF-16 LE with its BOM FF FE: 0xFF can never be in UTF-8, and it is byte 0
    data = f"{STEP_HEAD}\r\n0,1,1,1,0,1,1,1,0,1,0\r\n".encode("utf-16")
    assert data[:2] == b"\xff\xfe"
    cur.write_bytes(data)
    r = gate(base, cur)
    assert r.exit_code == 2, r.output
    assert error_line(r) == f"ascendprof: error: {cur} at byte 0: not UTF-8 text"


def test_a_csv_cut_in_the_middle_of_a_character_is_refused_at_that_character(tmp_path):
    base = tmp_path / "op_statistic.csv"
    base.write_text(f"{OPSTAT_HEAD}\n0,MatMul,AI_CORE,2,10.5,5,5.25,5.5,100\n",
                    encoding="utf-8")
    (tmp_path / "cur").mkdir()
    cur = tmp_path / "cur" / "op_statistic.csv"
    # a copy cut off after two of the three UTF-8 bytes of "矩" (E7 9F A9) in the last row
    head = f"{OPSTAT_HEAD}\n0,MatMul,AI_CORE,2,10.5,5,5.25,5.5,100\n0,".encode()
    data = head + "矩".encode("utf-8")[:2]
    cur.write_bytes(data)
    offset = len(head)  # the header, the first row, "0,": all ASCII; then E7 9F, the end
    assert data[offset:] == b"\xe7\x9f" and head.isascii()
    r = gate(base, cur)
    assert r.exit_code == 2, r.output
    assert error_line(r) == f"ascendprof: error: {cur} at byte {offset}: not UTF-8 text"


def test_an_output_dir_with_an_empty_cluster_step_trace_is_refused_not_a_crash(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "cluster_step_trace_time.csv").write_bytes(b"")
    write(out / "op_statistics.csv", [OPSTATS_HEAD, "0,MatMul,AI_CORE,2,10.5,5,5.25,5.5,100"])
    r = gate(out, out)
    assert r.exit_code == 2, r.output
    assert error_line(r) == f"ascendprof: error: {out / 'cluster_step_trace_time.csv'}: empty file"


def test_a_blank_row_between_rank_rows_does_not_end_the_cell_check(tmp_path):
    rows = ["0,MatMul,AI_CORE,2,10.5,5,5.25,5.5,100", "1,MatMul,AI_CORE,2,12,6,6,6,100"]
    base = write(tmp_path / "op_statistics.csv", [OPSTATS_HEAD, *rows])
    (tmp_path / "cur").mkdir()
    # a blank row of commas (data row 2), then rank 1 with its count redacted (data row 3)
    cur = write(tmp_path / "cur" / "op_statistics.csv",
                [OPSTATS_HEAD, rows[0], ",,,,,,,,", "1,MatMul,AI_CORE,XXX,12,6,6,6,100"],
                excel=True)
    r = gate(base, cur)
    assert r.exit_code == 2, r.output
    assert error_line(r) == (f"ascendprof: error: {cur} at data row 3: column 'Count': 'XXX' "
                             "is not a number (gate inputs must be complete)")


def test_a_step_listed_twice_with_different_values_is_a_duplicated_row(tmp_path):
    base = _good_step_trace(tmp_path)
    (tmp_path / "cur").mkdir()
    # step 1 of device 0 twice (two runs appended), Computing 1 and 2: the rows differ
    cur = write(tmp_path / "cur" / "step_trace_time.csv",
                [STEP_HEAD, "0,1,1,1,0,1,1,1,0,1,0", "0,1,2,1,0,1,1,1,0,1,0",
                 "0,2,1,1,0,1,1,1,0,1,0"])
    r = gate(base, cur)
    assert r.exit_code == 2, r.output
    assert error_line(r) == (f"ascendprof: error: {cur}: duplicated rows: rank 0 step 1 "
                             "appears 2 times")


# --- the same kinds of gap at other places -------------------------------------------------

CLUSTER_ROW = "13,rank,{},10,1,0,1,2,3,0,1,0,0,0,0"


def test_a_stage_row_before_the_rank_rows_does_not_end_the_cell_check(tmp_path):
    from test_gate_csv_inputs_seed38 import CLUSTER_HEAD
    base = write(tmp_path / "cluster_step_trace_time.csv",
                 [CLUSTER_HEAD, CLUSTER_ROW.format(0), CLUSTER_ROW.format(1)])
    (tmp_path / "cur").mkdir()
    # a stage row first (its cells may be empty: not a gate input), then rank 0, then rank 1
    # with its Computing redacted: data row 3
    cur = write(tmp_path / "cur" / "cluster_step_trace_time.csv",
                [CLUSTER_HEAD, "13,stage,0,,,,,,,,,,,,", CLUSTER_ROW.format(0),
                 "13,rank,1,XXX,1,0,1,2,3,0,1,0,0,0,0"])
    r = gate(base, cur)
    assert r.exit_code == 2, r.output
    assert error_line(r) == (f"ascendprof: error: {cur} at data row 3: column 'Computing': "
                             "'XXX' is not a number (gate inputs must be complete)")


def test_a_blank_line_does_not_end_the_cell_check(tmp_path):
    base = _good_step_trace(tmp_path)
    (tmp_path / "cur").mkdir()
    # step 1, a blank line (data row 2), step 2 with a negative Free (data row 3)
    cur = write(tmp_path / "cur" / "step_trace_time.csv",
                [STEP_HEAD, "0,1,1,1,0,1,1,1,0,1,0", "", "0,2,1,1,0,1,-5,1,0,1,0"])
    r = gate(base, cur)
    assert r.exit_code == 2, r.output
    assert error_line(r) == (f"ascendprof: error: {cur} at data row 3: column 'Free': '-5' is "
                             "negative (a length of time cannot be)")


def test_an_op_type_listed_twice_with_different_values_is_a_duplicated_row(tmp_path):
    base = tmp_path / "op_statistic.csv"
    base.write_text(f"{OPSTAT_HEAD}\n0,MatMul,AI_CORE,2,10.5,5,5.25,5.5,100\n",
                    encoding="utf-8")
    (tmp_path / "cur").mkdir()
    cur = tmp_path / "cur" / "op_statistic.csv"
    # MatMul on AI_CORE of device 0 twice, once with 2 calls and once with 3: the rows differ
    cur.write_text(f"{OPSTAT_HEAD}\n0,MatMul,AI_CORE,2,10.5,5,5.25,5.5,60\n"
                   "0,MatMul,AI_CORE,3,15,5,5,5,40\n", encoding="utf-8")
    r = gate(base, cur)
    assert r.exit_code == 2, r.output
    assert error_line(r) == (f"ascendprof: error: {cur}: duplicated rows: rank 0 op type "
                             "MatMul (AI_CORE) appears 2 times")


def test_an_output_dir_with_an_empty_op_statistics_is_refused_not_a_crash(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "op_statistics.csv").write_bytes(b"")
    r = gate(out, out)
    assert r.exit_code == 2, r.output
    assert error_line(r) == f"ascendprof: error: {out / 'op_statistics.csv'}: empty file"


def test_a_foreign_byte_cut_by_a_block_boundary_is_named_at_its_own_offset(tmp_path):
    # a step_trace_time.csv over 1 MiB: the offset is searched in blocks, the first 3 bytes
    # (where a BOM would be) then 1 MiB at a time, so a block ends at byte 3 + 1 MiB - 1. A
    # Latin-1 "é" there (E9, a UTF-8 lead byte) waits for the next block, whose first byte,
    # an ASCII ",", makes it invalid: the offset is that of the E9 byte, not of the ","
    base = _good_step_trace(tmp_path)
    (tmp_path / "cur").mkdir()
    cur = tmp_path / "cur" / "step_trace_time.csv"
    n = 40000
    prefix = (f"{STEP_HEAD}\n" + "".join(f"0,{s},1,1,0,1,1,1,0,1,0\n"
                                         for s in range(1, n + 1))).encode()
    lead = f"0,{n + 1},1.".encode()
    zeros = 3 + (1 << 20) - 1 - len(prefix) - len(lead)  # "1.000…0" fills up to the boundary
    assert zeros > 0
    data = prefix + lead + b"0" * zeros + b"\xe9,1,0,1,1,1,0,1,0\n"
    cur.write_bytes(data)
    offset = 3 + (1 << 20) - 1
    assert data.index(b"\xe9") == offset and data[:offset].isascii()
    r = gate(base, cur)
    assert r.exit_code == 2, r.output
    assert error_line(r) == f"ascendprof: error: {cur} at byte {offset}: not UTF-8 text"
