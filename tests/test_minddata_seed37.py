"""Minddata parsers (ascendprof/readers/minddata.py), mutation seed 37: MindSpore run_2's legacy
profiler directory (rank 1) copied, with its minddata files rewritten, read through
``read_source``. Checks that a damaged raw pipeline CSV (a field over the csv module's limit, a
num_workers that is not a number, a children list that cannot be parsed) is recorded as a
problem naming the file, the line and the reason (the quoted text cut at 40 characters); and
that a host queue line whose size is not a number, or whose size does not fit int64, is
recorded naming the host queue file. The same kinds of checks at other places: a raw CSV op_id,
a host queue type and a minddata_aicpu queue size of "nan" (whole numbers expected), a bad
minddata_aicpu start time, and a minddata_aicpu time, summary op_id or pipeline_profiling op_id
beyond int64, each recorded naming its file (and line). Expected values are worked out by hand
in the docstrings from the profiler's own files."""

from __future__ import annotations

import csv

import pytest

from ascendprof.model import schemas as S
from test_minddata_seed34 import _read  # run_2 copied, files written over

RUN2 = "mindspore-legacy/run_2/normal_run/profiler"
RAW = "minddata_pipeline_raw_1.csv"
HOSTQ = "device_queue_profiling_1.txt"


def _problem(data, name):
    got = [p for p in data.problems if str(p.path).endswith(name)]
    assert len(got) == 1, [p.line() for p in data.problems]
    return got[0]


def _raw_lines(shared_data) -> list[str]:
    """run_2's raw CSV: header, then ops 0-3 on lines 2-5."""
    lines = (shared_data / RUN2 / RAW).read_text().splitlines(keepends=True)
    assert lines[2] == "1,MapOp,8,\"[0, 0]\",0.0,128,0.0,10,0,[2]\n"
    return lines


@pytest.fixture
def csv_field_limit_1000(monkeypatch):
    """The legacy reader raises the csv module's field limit to 1 GiB (csv.field_size_limit(1 <<
    30)) before the minddata files are read; a test cannot write such a file in time, so the
    limit it sets is cut to 1000 characters here (and the old limit put back afterwards)."""
    real = csv.field_size_limit
    old = real()
    monkeypatch.setattr(csv, "field_size_limit", lambda *a: real(1000))
    yield
    monkeypatch.undo()
    real(old)


def test_raw_csv_field_over_the_csv_limit_names_the_file(shared_data, tmp_path,
                                                         csv_field_limit_1000):
    """Op 1's op_type (line 3) made 2000 characters long, more than the field limit of 1000:
    'not readable as CSV: field larger than field limit (1000)' naming the raw CSV, rank 1; the
    pipeline then comes from pipeline_profiling_1.json."""
    lines = _raw_lines(shared_data)
    lines[2] = lines[2].replace("MapOp", "M" * 2000)
    data = _read(shared_data, tmp_path, {RAW: "".join(lines)})
    p = _problem(data, RAW)
    assert p.path.endswith(RAW)
    assert (p.reason, p.rank) == ("not readable as CSV: field larger than field limit (1000)", 1)
    assert {r["source"] for r in data.tables[S.DATASET_OPS].to_pylist()} == \
        {"pipeline_profiling_1.json"}


def test_raw_csv_num_workers_nan_has_its_line(shared_data, tmp_path):
    """Op 1's num_workers (line 3) written "nan": a count must be a whole number, 'not a
    number: 'nan'' at line 3 of the raw CSV."""
    lines = _raw_lines(shared_data)
    lines[2] = lines[2].replace("MapOp,8,", "MapOp,nan,")
    p = _problem(_read(shared_data, tmp_path, {RAW: "".join(lines)}), RAW)
    assert (p.reason, p.where) == ("not a number: 'nan'", "line 3")


def test_raw_csv_num_workers_read_as_whole_numbers(shared_data, tmp_path):
    """Op 1's num_workers written "8.0" (as pandas writes an integer column holding a gap):
    still 8 workers, like ops 0, 2, 3 (4, 8, 8 in the file); no problem."""
    lines = _raw_lines(shared_data)
    lines[2] = lines[2].replace("MapOp,8,", "MapOp,8.0,")
    data = _read(shared_data, tmp_path, {RAW: "".join(lines)})
    assert not [p for p in data.problems if str(p.path).endswith(RAW)]
    ops = {r["op_id"]: r["num_workers"] for r in data.tables[S.DATASET_OPS].to_pylist()}
    assert ops == {0: 4, 1: 8, 2: 8, 3: 8}
    assert all(type(v) is int for v in ops.values())


def test_raw_csv_long_bad_children_quoted_to_40_characters(shared_data, tmp_path):
    """Op 1's children_id (line 3) written as an unterminated list
    "[10, 20, 30, 40, 50, 60, 70, 80, 90, 100, 110" (45 characters). The reason quotes its
    first 40: "[10, " is 5 characters, each of "20, " .. "90, " 4 more (8 * 4 = 32, 37 in all),
    then "100" makes 40 -> "[10, 20, 30, 40, 50, 60, 70, 80, 90, 100"."""
    lines = _raw_lines(shared_data)
    bad = "[10, 20, 30, 40, 50, 60, 70, 80, 90, 100, 110"
    lines[2] = lines[2].replace(",0,[2]", f",0,\"{bad}\"")
    p = _problem(_read(shared_data, tmp_path, {RAW: "".join(lines)}), RAW)
    assert (p.reason, p.where) == \
        ("not a list of numbers: '[10, 20, 30, 40, 50, 60, 70, 80, 90, 100'", "line 3")


def test_host_queue_bad_size_names_file_and_line(shared_data, tmp_path):
    """Line 2 of the host queue file is a size line (type 1, capacity 64, batch 1) whose size is
    "x": 'not a number: 'x'' at line 2, naming device_queue_profiling_1.txt."""
    text = "0 1 1 4 10\n1 64 1 x 10\n"
    p = _problem(_read(shared_data, tmp_path, {HOSTQ: text}), HOSTQ)
    assert p.path.endswith(HOSTQ)
    assert (p.reason, p.where, p.rank) == ("not a number: 'x'", "line 2", 1)


def test_host_queue_size_beyond_int64_names_the_file(shared_data, tmp_path):
    """A size line whose size is 9223372036854775808 = 2^63, one more than int64's largest
    value 2^63 - 1 (exact as a double, so read as 2^63): 'column 'size':
    9223372036854775808 is not a valid int64 value' naming device_queue_profiling_1.txt; the
    host queue then comes from dataset_iterator_profiling_1.txt ("1 64 1 3": size 3 of 64)."""
    data = _read(shared_data, tmp_path, {HOSTQ: "1 64 1 9223372036854775808 10\n"})
    p = _problem(data, HOSTQ)
    assert p.path.endswith(HOSTQ)
    assert p.reason == "column 'size': 9223372036854775808 is not a valid int64 value"
    host = [r for r in data.tables[S.DATASET_QUEUE].to_pylist() if r["queue"] == "host"]
    assert [(r["step"], r["size"], r["capacity"]) for r in host] == [(1, 3, 64)]


def test_raw_csv_long_children_not_numbers_quoted_to_40_characters(shared_data, tmp_path):
    """Op 1's children_id (line 3) written "['op_a', 'op_b', 'op_c', 'op_d', 'op_e', 'op_f']": a
    list, but of names. The reason quotes its first 40 characters: "['op_a', " is 9, each of
    "'op_b', " .. "'op_d', " 8 more (33), then "'op_e'," makes 40; that text holds single
    quotes, so Python quotes it with double quotes."""
    lines = _raw_lines(shared_data)
    bad = "['op_a', 'op_b', 'op_c', 'op_d', 'op_e', 'op_f']"
    lines[2] = lines[2].replace(",0,[2]", f",0,\"{bad}\"")
    p = _problem(_read(shared_data, tmp_path, {RAW: "".join(lines)}), RAW)
    assert (p.reason, p.where) == \
        ("not a list of numbers: \"['op_a', 'op_b', 'op_c', 'op_d', 'op_e',\"", "line 3")


# --- the same kinds of gaps at other places of the module ---------------------------------

AICPU = "minddata_aicpu_1.txt"
SUMMARY = "minddata_pipeline_summary_1.json"
PROF = "pipeline_profiling_1.json"


def test_raw_csv_op_id_nan_has_its_line(shared_data, tmp_path):
    """Op 2's op_id (line 4) written "nan": an op id must be a whole number, 'not a number:
    'nan'' at line 4 of the raw CSV."""
    lines = _raw_lines(shared_data)
    assert lines[3].startswith("2,MapOp,")
    lines[3] = "nan" + lines[3][1:]
    p = _problem(_read(shared_data, tmp_path, {RAW: "".join(lines)}), RAW)
    assert (p.reason, p.where) == ("not a number: 'nan'", "line 4")


def test_host_queue_type_nan_has_its_line(shared_data, tmp_path):
    """Line 2 of the host queue file has type "nan": neither skipped as an unknown type nor
    read, but 'not a number: 'nan'' at line 2."""
    p = _problem(_read(shared_data, tmp_path, {HOSTQ: "1 64 1 0 10\nnan 64 2 0 20\n"}), HOSTQ)
    assert (p.reason, p.where) == ("not a number: 'nan'", "line 2")


def test_aicpu_bad_start_time_names_file_and_line(shared_data, tmp_path):
    """minddata_aicpu_1.txt whose second GetNext line has start time "early": 'not a number:
    'early'' at line 2, naming that file."""
    text = "GetNext_dequeue_wait 100 101 3\nGetNext_dequeue_wait early 201 2\n"
    p = _problem(_read(shared_data, tmp_path, {AICPU: text}), AICPU)
    assert p.path.endswith(AICPU)
    assert (p.reason, p.where, p.rank) == ("not a number: 'early'", "line 2", 1)


def test_aicpu_queue_size_nan_has_its_line(shared_data, tmp_path):
    """A GetNext line whose queue size is "nan": a size must be a whole number, 'not a number:
    'nan'' at line 1."""
    text = "GetNext_dequeue_wait 100 101 nan\n"
    p = _problem(_read(shared_data, tmp_path, {AICPU: text}), AICPU)
    assert (p.reason, p.where) == ("not a number: 'nan'", "line 1")


def test_aicpu_time_beyond_int64_names_the_file(shared_data, tmp_path):
    """A GetNext line starting at 1e16 us: * 1000 = 1e19 ns = 10000000000000000000, more than
    int64's largest value 2^63 - 1 = 9223372036854775807: 'column 'start_ns':
    10000000000000000000 is not a valid int64 value' naming minddata_aicpu_1.txt; no device
    queue rows (the host queue is still read)."""
    data = _read(shared_data, tmp_path, {AICPU: "GetNext_dequeue_wait 1e16 1e16 3\n"})
    p = _problem(data, AICPU)
    assert p.path.endswith(AICPU)
    assert p.reason == "column 'start_ns': 10000000000000000000 is not a valid int64 value"
    queues = {r["queue"] for r in data.tables[S.DATASET_QUEUE].to_pylist()}
    assert queues == {"host"}


def test_pipeline_summary_op_id_beyond_int64_names_the_file(shared_data, tmp_path):
    """A summary JSON whose one op_id is 9223372036854775808 = 2^63 (int64 holds up to
    2^63 - 1): 'column 'op_id': 9223372036854775808 is not a valid int64 value' naming the
    summary file; the pipeline then comes from the raw CSV."""
    summary = '{"op_ids": [9223372036854775808], "op_names": ["Batch"]}'
    data = _read(shared_data, tmp_path, {SUMMARY: summary})
    p = _problem(data, SUMMARY)
    assert p.path.endswith(SUMMARY)
    assert p.reason == "column 'op_id': 9223372036854775808 is not a valid int64 value"
    assert {r["source"] for r in data.tables[S.DATASET_OPS].to_pylist()} == {RAW}


def test_pipeline_profiling_op_id_beyond_int64_names_the_file(shared_data, tmp_path):
    """Raw CSV removed and a pipeline_profiling JSON whose one op has op_id 2^63 =
    9223372036854775808: 'column 'op_id': 9223372036854775808 is not a valid int64 value'
    naming pipeline_profiling_1.json; no pipeline table."""
    prof = '{"op_info": [{"op_id": 9223372036854775808, "op_type": "Batch"}]}'
    data = _read(shared_data, tmp_path, {RAW: None, PROF: prof})
    p = _problem(data, PROF)
    assert p.path.endswith(PROF)
    assert p.reason == "column 'op_id': 9223372036854775808 is not a valid int64 value"
    assert S.DATASET_OPS not in data.tables
