"""Minddata parsers (ascendprof/readers/minddata.py), mutation seed 35: MindSpore run_2's legacy
profiler directory (rank 1) copied, with its minddata files rewritten, read through
``read_source``. Checks that the raw CSV's usage rate column is what DATASET_OPS reports, and
that a damaged raw CSV or minddata_aicpu file (not UTF-8, a missing column, a value that is not a
whole number, a number beyond int64) is recorded as a problem naming the file, the place (byte
or line) and the reason. Expected values are worked out by hand in the docstrings."""

from __future__ import annotations


from ascendprof.model import schemas as S
from test_minddata_seed34 import _read  # run_2 copied, files written over

RUN2 = "mindspore-legacy/run_2/normal_run/profiler"
RAW = "minddata_pipeline_raw_1.csv"
AICPU = "minddata_aicpu_1.txt"


def _problem(data, name):
    got = [p for p in data.problems if p.path.endswith(name)]
    assert len(got) == 1, [p.line() for p in data.problems]
    return got[0]


def _raw_lines(shared_data) -> list[str]:
    return (shared_data / RUN2 / RAW).read_text().splitlines(keepends=True)


def test_raw_csv_usage_comes_from_the_rate_column(shared_data, tmp_path):
    """Op 1's line (3) rewritten with no sizes and no average, usage rate 0.25 of 128: the file's
    only queue figure is the rate, so usage = 0.25 * 100 = 25.0 %, average and sample count
    empty."""
    lines = _raw_lines(shared_data)
    assert lines[2] == '1,MapOp,8,"[0, 0]",0.0,128,0.0,10,0,[2]\n'
    lines[2] = "1,MapOp,8,,,128,0.25,10,0,[2]\n"
    data = _read(shared_data, tmp_path, {RAW: "".join(lines)})
    ops = {r["op_id"]: r for r in data.tables[S.DATASET_OPS].to_pylist()}
    assert (ops[1]["queue_usage_pct"], ops[1]["queue_avg_size"], ops[1]["queue_samples"]) == \
        (25.0, None, None)
    assert ops[1]["queue_length"] == 128


def test_raw_csv_not_utf8_reported_at_its_byte(shared_data, tmp_path):
    """Byte 0xff put in place of the 'B' of "BatchOp" on line 2 (lines written ending in LF):
    the header's ten names are 5 + 7 + 11 + 17 + 25 + 19 + 23 + 15 + 9 + 11 = 142 characters,
    + 9 commas + LF = 152 bytes; line 2 starts "0," -> the bad byte is at offset 152 + 2 = 154.
    Reported as 'not UTF-8 text' at byte 154."""
    lines = _raw_lines(shared_data)
    assert len(lines[0].encode()) == 152 and lines[1].startswith("0,BatchOp,")
    raw = "".join(lines).encode().replace(b"0,BatchOp,", b"0,\xffatchOp,")
    p = _problem(_read(shared_data, tmp_path, {RAW: raw}), RAW)
    assert (p.reason, p.where) == ("not UTF-8 text", "byte 154")


def test_raw_csv_missing_column_named(shared_data, tmp_path):
    """The output_queue_length column renamed in the header: 'missing column(s)
    output_queue_length'; no pipeline from the raw CSV (run_2's pipeline_profiling_1.json is
    used instead)."""
    lines = _raw_lines(shared_data)
    lines[0] = lines[0].replace("output_queue_length", "queue_len")
    data = _read(shared_data, tmp_path, {RAW: "".join(lines)})
    p = _problem(data, RAW)
    assert p.reason == "missing column(s) output_queue_length"
    assert {r["source"] for r in data.tables[S.DATASET_OPS].to_pylist()} == \
        {"pipeline_profiling_1.json"}


def test_raw_csv_queue_length_not_a_number_has_its_line(shared_data, tmp_path):
    """Op 1's output_queue_length (line 3) written "inf": no whole number -> 'not a number:
    'inf'' at line 3."""
    lines = _raw_lines(shared_data)
    lines[2] = lines[2].replace(",128,", ",inf,")
    p = _problem(_read(shared_data, tmp_path, {RAW: "".join(lines)}), RAW)
    assert (p.reason, p.where) == ("not a number: 'inf'", "line 3")


def test_raw_csv_parent_id_not_a_number_has_its_line(shared_data, tmp_path):
    """Op 2's parent_id (line 4, "...,10,1,[3]") written "nan": 'not a number: 'nan'' at
    line 4."""
    lines = _raw_lines(shared_data)
    assert lines[3].endswith(",10,1,[3]\n")
    lines[3] = lines[3].replace(",10,1,[3]", ",10,nan,[3]")
    p = _problem(_read(shared_data, tmp_path, {RAW: "".join(lines)}), RAW)
    assert (p.reason, p.where) == ("not a number: 'nan'", "line 4")


def test_raw_csv_op_id_beyond_int64_names_the_file(shared_data, tmp_path):
    """Op 3's op_id written 1e20 (> 2**63 - 1 = 9.22e18): it does not fit DATASET_OPS's int64
    op_id column; the problem names the raw CSV and the column."""
    lines = _raw_lines(shared_data)
    lines[4] = "1e20" + lines[4][1:]
    data = _read(shared_data, tmp_path, {RAW: "".join(lines)})
    p = _problem(data, RAW)
    assert p.reason.startswith("column 'op_id'")


def test_aicpu_bad_end_time_names_the_file(shared_data, tmp_path):
    """minddata_aicpu_1.txt with an end time "x" on line 2: 'not a number: 'x'' at line 2 of
    that file."""
    text = "GetNext_dequeue_wait 100 101 3\nGetNext_dequeue_wait 200 x 2\n"
    p = _problem(_read(shared_data, tmp_path, {AICPU: text}), AICPU)
    assert (p.reason, p.where) == ("not a number: 'x'", "line 2")


def test_aicpu_bad_queue_size_names_the_file(shared_data, tmp_path):
    """minddata_aicpu_1.txt with a queue size "three" on line 1: 'not a number: 'three'' at
    line 1 of that file."""
    text = "GetNext_dequeue_wait 100 101 three\n"
    p = _problem(_read(shared_data, tmp_path, {AICPU: text}), AICPU)
    assert (p.reason, p.where) == ("not a number: 'three'", "line 1")
