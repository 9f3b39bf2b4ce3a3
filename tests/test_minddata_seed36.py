"""Minddata parsers (ascendprof/readers/minddata.py), mutation seed 36: MindSpore run_2's legacy
profiler directory (rank 1) copied, with its minddata files removed or rewritten, read through
``read_source``. Checks that the DATASET_QUEUE rows (host and device queue) and the DATASET_OPS
rows from pipeline_profiling_1.json carry the rank; that dataset_iterator_profiling's 4-field
lines (no timestamp) are read; the pipeline summary JSON's empty-frequency and CPU columns; and
that a damaged host queue file, minddata_aicpu file, pipeline_profiling JSON or pipeline summary
JSON is recorded as a problem naming the file, the line and the reason. The same kinds of
checks at other places: the raw CSV's and summary's rank, the host queue's values and capacity,
other line types skipped, the fallback to the iterator file when the host queue file is damaged,
minddata_aicpu rows read back past its header, a children list not of numbers, a raw CSV with a
byte order mark, an op_info entry without op_id, summary lists of the wrong length and -1 values,
and memory_usage_summary's capacity. Expected values are worked out by hand in the docstrings
from the profiler's own files."""

from __future__ import annotations

import json

from ascendprof.model import schemas as S
from test_minddata_seed34 import _read  # run_2 copied, files written over

RUN2 = "mindspore-legacy/run_2/normal_run/profiler"
RAW = "minddata_pipeline_raw_1.csv"
PROF = "pipeline_profiling_1.json"
SUMMARY = "minddata_pipeline_summary_1.json"
HOSTQ = "device_queue_profiling_1.txt"
ITER = "dataset_iterator_profiling_1.txt"
AICPU = "minddata_aicpu_1.txt"


def _problem(data, name):
    got = [p for p in data.problems if p.path.endswith(name)]
    assert len(got) == 1, [p.line() for p in data.problems]
    return got[0]


def _queue(data, queue):
    return [r for r in data.tables[S.DATASET_QUEUE].to_pylist() if r["queue"] == queue]


def test_queue_rows_carry_the_rank(shared_data, tmp_path):
    """run_2's real files: device_queue_profiling_1.txt has 4 lines (push_time, batch_time,
    pipeline_time, size), minddata_aicpu_1.txt 3 GetNext lines; every row is rank 1's. The
    first GetNext starts at 154907895305 us = 154907895305000 ns, queue size 3."""
    data = _read(shared_data, tmp_path, {})
    host, device = _queue(data, "host"), _queue(data, "device")
    assert [r["kind"] for r in host] == ["push_time", "batch_time", "pipeline_time", "size"]
    assert [r["rank"] for r in host] == [1] * 4
    assert [r["rank"] for r in device] == [1] * 3
    assert (device[0]["step"], device[0]["start_ns"], device[0]["size"]) == \
        (1, 154907895305000, 3)


def test_iterator_file_without_timestamp_read(shared_data, tmp_path):
    """device_queue_profiling_1.txt removed: dataset_iterator_profiling_1.txt is read. Its one
    line "1 64 1 3" has no timestamp (4 fields): type 1 = a size, capacity 64, batch 1, size 3;
    no problem recorded."""
    data = _read(shared_data, tmp_path, {HOSTQ: None})
    assert [(r["kind"], r["step"], r["size"], r["capacity"], r["rank"])
            for r in _queue(data, "host")] == [("size", 1, 3, 64, 1)]
    assert not [p for p in data.problems if p.path.endswith(ITER)]


def test_host_queue_bad_batch_number_names_file_and_line(shared_data, tmp_path):
    """The host queue file's third line (a blank line 2 counts) has batch "z": 'not a number:
    'z'' at line 3 of device_queue_profiling_1.txt."""
    text = "0 1 1 4 10\n\n0 2 z 4 10\n1 64 1 0 10\n"
    p = _problem(_read(shared_data, tmp_path, {HOSTQ: text}), HOSTQ)
    assert (p.reason, p.where) == ("not a number: 'z'", "line 3")


def test_host_queue_bad_type_names_the_file(shared_data, tmp_path):
    """The first line's type field "t": 'not a number: 't'' at line 1, naming the file."""
    p = _problem(_read(shared_data, tmp_path, {HOSTQ: "t 1 1 4 10\n"}), HOSTQ)
    assert (p.reason, p.where, p.rank) == ("not a number: 't'", "line 1", 1)


def test_host_queue_bad_time_value_names_file_and_line(shared_data, tmp_path):
    """Line 2 is a push time (type 0, extra 1) whose value is "slow": 'not a number: 'slow''
    at line 2 of the host queue file."""
    text = "1 64 1 0 10\n0 1 1 slow 10\n"
    p = _problem(_read(shared_data, tmp_path, {HOSTQ: text}), HOSTQ)
    assert (p.reason, p.where) == ("not a number: 'slow'", "line 2")


def test_host_queue_short_line_has_its_line(shared_data, tmp_path):
    """Line 2 "0 1 1" has 3 fields (type extra batch, no value): reported at line 2."""
    p = _problem(_read(shared_data, tmp_path, {HOSTQ: "0 1 1 4 10\n0 1 1\n"}), HOSTQ)
    assert p.where == "line 2"
    assert p.reason == "expected 'type extra batch value [timestamp]', got '0 1 1'"


def test_aicpu_short_line_has_its_line(shared_data, tmp_path):
    """minddata_aicpu_1.txt whose second GetNext line lacks the queue size (3 fields):
    reported at line 2 with the line quoted."""
    text = "GetNext_dequeue_wait 100 101 3\nGetNext_dequeue_wait 200 201\n"
    p = _problem(_read(shared_data, tmp_path, {AICPU: text}), AICPU)
    assert p.where == "line 2"
    assert p.reason == \
        "expected 'GetNext... start end queue_size', got 'GetNext_dequeue_wait 200 201'"


def _prof_json(shared_data) -> dict:
    return json.loads((shared_data / RUN2 / PROF).read_text())


def test_pipeline_profiling_rows_carry_the_rank(shared_data, tmp_path):
    """Raw CSV removed: DATASET_OPS from pipeline_profiling_1.json (ops 0-4), every row rank 1."""
    data = _read(shared_data, tmp_path, {RAW: None})
    rows = data.tables[S.DATASET_OPS].to_pylist()
    assert {r["source"] for r in rows} == {PROF}
    assert sorted((r["op_id"], r["rank"]) for r in rows) == [(i, 1) for i in range(5)]


def test_pipeline_profiling_bad_sizes_name_the_op(shared_data, tmp_path):
    """Raw CSV removed and op 2's sampled queue sizes written ["a", 0]: 'op 2: queue sizes are
    not numbers' for pipeline_profiling_1.json; no pipeline table."""
    obj = _prof_json(shared_data)
    op2, = [op for op in obj["op_info"] if op["op_id"] == 2]
    op2["metrics"]["output_queue"]["size"] = ["a", 0]
    data = _read(shared_data, tmp_path, {RAW: None, PROF: json.dumps(obj)})
    p = _problem(data, PROF)
    assert p.reason == "op 2: queue sizes are not numbers"
    assert S.DATASET_OPS not in data.tables


def test_pipeline_summary_without_op_ids_reported(shared_data, tmp_path):
    """A summary JSON with op_names but no op_ids: 'no op_ids list' naming the summary file;
    the pipeline then comes from the raw CSV (ops 0-3)."""
    data = _read(shared_data, tmp_path, {SUMMARY: '{"op_names": ["Batch"]}'})
    p = _problem(data, SUMMARY)
    assert (p.reason, p.rank) == ("no op_ids list", 1)
    assert {r["source"] for r in data.tables[S.DATASET_OPS].to_pylist()} == {RAW}


def test_pipeline_summary_empty_frequency_and_cpu(shared_data, tmp_path):
    """A summary JSON for ops 0 and 1 with queue_empty_freq_pct [10.0, 0.0] and avg_cpu_pct
    [5.0, 7.5]: DATASET_OPS's queue_empty_pct and avg_cpu_pct are those values. run_2's
    minddata_cpu_utilization_1.json gives op 1 mean((10+10), (20+20), (30+30)) = 40.0 %, which
    only fills an op whose summary has no CPU value: the summary's own 7.5 stays."""
    summary = {"op_ids": [0, 1], "op_names": ["Batch", "Map"], "num_workers": [4, 8],
               "queue_average_size": [1.5, 3.0], "queue_utilization_pct": [2.3, 4.7],
               "queue_empty_freq_pct": [10.0, 0.0], "children_ids": [[1], []],
               "parent_id": [-1, 0], "avg_cpu_pct": [5.0, 7.5]}
    data = _read(shared_data, tmp_path, {SUMMARY: json.dumps(summary)})
    ops = {r["op_id"]: r for r in data.tables[S.DATASET_OPS].to_pylist()}
    assert [ops[i]["queue_empty_pct"] for i in (0, 1)] == [10.0, 0.0]
    assert [ops[i]["avg_cpu_pct"] for i in (0, 1)] == [5.0, 7.5]
    assert {r["source"] for r in ops.values()} == {SUMMARY}


# --- the same kinds of gaps at other places of the module ---------------------------------


def test_raw_csv_and_summary_rows_carry_the_rank(shared_data, tmp_path):
    """run_2's real raw CSV (ops 0-3) and, in a second copy, a one-op summary JSON: every
    DATASET_OPS row is rank 1's."""
    rows = _read(shared_data, tmp_path, {}).tables[S.DATASET_OPS].to_pylist()
    assert sorted((r["op_id"], r["rank"], r["source"]) for r in rows) == \
        [(i, 1, RAW) for i in range(4)]
    summary = {"op_ids": [0], "op_names": ["Batch"]}
    rows = _read(shared_data, tmp_path / "b", {SUMMARY: json.dumps(summary)}) \
        .tables[S.DATASET_OPS].to_pylist()
    assert [(r["op_id"], r["rank"], r["op_type"]) for r in rows] == [(0, 1, "Batch")]


def test_host_queue_values_read_back(shared_data, tmp_path):
    """run_2's real device_queue_profiling_1.txt, 'type extra batch value timestamp':
    "0 1 1 4 10" push time 4 ms, "0 2 1 4 10" batch time 4 ms, "0 0 1 0 10" pipeline time 0 ms,
    "1 64 1 0 10" size 0 of capacity 64; all batch 1. Times have no size/capacity, the size row
    no value."""
    host = _queue(_read(shared_data, tmp_path, {}), "host")
    assert [(r["kind"], r["step"], r["value_ms"], r["size"], r["capacity"]) for r in host] == [
        ("push_time", 1, 4.0, None, None), ("batch_time", 1, 4.0, None, None),
        ("pipeline_time", 1, 0.0, None, None), ("size", 1, None, 0, 64)]


def test_host_queue_other_types_skipped(shared_data, tmp_path):
    """A type-2 line (neither a time nor a size) between two size lines is skipped; the size
    lines after it (batch 2, size 7 of 32) are still read, with no problem."""
    text = "1 32 1 5 10\n2 0 1 9 10\n1 32 2 7 20\n"
    data = _read(shared_data, tmp_path, {HOSTQ: text})
    assert [(r["step"], r["size"], r["capacity"]) for r in _queue(data, "host")] == \
        [(1, 5, 32), (2, 7, 32)]
    assert not [p for p in data.problems if p.path.endswith(HOSTQ)]


def test_damaged_host_queue_falls_back_to_the_iterator_file(shared_data, tmp_path):
    """device_queue_profiling_1.txt damaged (batch "q" on line 1): reported, and the host queue
    then comes from dataset_iterator_profiling_1.txt ("1 64 1 3": size 3 of 64, batch 1)."""
    data = _read(shared_data, tmp_path, {HOSTQ: "1 64 q 0 10\n"})
    assert _problem(data, HOSTQ).reason == "not a number: 'q'"
    assert [(r["step"], r["size"], r["capacity"]) for r in _queue(data, "host")] == [(1, 3, 64)]


def test_aicpu_rows_read_back_with_header(shared_data, tmp_path):
    """run_2's real minddata_aicpu_1.txt with MindInsight's header line put first: the header
    is skipped; GetNext rows numbered 1, 2, 3 in file order; start / end us * 1000 = ns
    (154907895614 -> 154907895614000, 154907896921 -> 154907896921000); sizes 3, 2, 1."""
    text = "node_name start_time end_time queue_size\n" + \
        (shared_data / RUN2 / AICPU).read_text()
    data = _read(shared_data, tmp_path, {AICPU: text})
    assert [(r["step"], r["start_ns"], r["end_ns"], r["size"], r["kind"])
            for r in _queue(data, "device")] == [
        (1, 154907895305000, 154907895306000, 3, "size"),
        (2, 154907895614000, 154907895614000, 2, "size"),
        (3, 154907896920000, 154907896921000, 1, "size")]
    assert not [p for p in data.problems if p.path.endswith(AICPU)]


def test_raw_csv_children_not_whole_numbers_has_its_line(shared_data, tmp_path):
    """Op 2's children_id (line 4) written "['a']": a list, but not of numbers -> 'not a list
    of numbers' at line 4."""
    lines = (shared_data / RUN2 / RAW).read_text().splitlines(keepends=True)
    assert lines[3].endswith(",1,[3]\n")
    lines[3] = lines[3].replace(",1,[3]", ",1,\"['a']\"")
    p = _problem(_read(shared_data, tmp_path, {RAW: "".join(lines)}), RAW)
    assert (p.reason, p.where) == ("not a list of numbers: \"['a']\"", "line 4")


def test_raw_csv_with_byte_order_mark_read(shared_data, tmp_path):
    """The raw CSV saved with a UTF-8 byte order mark (as Excel writes it): the first column is
    still "op_id", ops 0-3 read, no problem."""
    text = "\ufeff" + (shared_data / RUN2 / RAW).read_text()
    data = _read(shared_data, tmp_path, {RAW: text})
    assert not [p for p in data.problems if p.path.endswith(RAW)]
    assert {r["source"] for r in data.tables[S.DATASET_OPS].to_pylist()} == {RAW}


def test_pipeline_profiling_entry_without_op_id_reported(shared_data, tmp_path):
    """Raw CSV removed and op 4's "op_id" key deleted: 'op_info entry without op_id: ' followed
    by the entry's text (first 60 characters); no pipeline table."""
    obj = _prof_json(shared_data)
    op4, = [op for op in obj["op_info"] if op["op_id"] == 4]
    del op4["op_id"]
    data = _read(shared_data, tmp_path, {RAW: None, PROF: json.dumps(obj)})
    p = _problem(data, PROF)
    assert p.reason == f"op_info entry without op_id: {str(op4)[:60]}"
    assert S.DATASET_OPS not in data.tables


def test_pipeline_summary_missing_and_no_values(shared_data, tmp_path):
    """A summary for ops 0 and 1 whose queue_empty_freq_pct has one entry (not one per op:
    ignored), queue_average_size [-1, 2.0] and avg_cpu_pct [3.0, -1] (-1 = no value): op 0 has
    no average and no empty %; op 1's CPU comes from minddata_cpu_utilization_1.json,
    mean(10+10, 20+20, 30+30) = 40.0 %, op 0 keeps its 3.0."""
    summary = {"op_ids": [0, 1], "op_names": ["Batch", "Map"], "queue_empty_freq_pct": [5.0],
               "queue_average_size": [-1, 2.0], "avg_cpu_pct": [3.0, -1]}
    data = _read(shared_data, tmp_path, {SUMMARY: json.dumps(summary)})
    ops = {r["op_id"]: r for r in data.tables[S.DATASET_OPS].to_pylist()}
    assert [ops[i]["queue_empty_pct"] for i in (0, 1)] == [None, None]
    assert [ops[i]["queue_avg_size"] for i in (0, 1)] == [None, 2.0]
    assert [ops[i]["avg_cpu_pct"] for i in (0, 1)] == [3.0, 40.0]


def test_memory_capacity_not_a_number_reported(shared_data, tmp_path):
    """memory_usage_summary_1.json with capacity "big": 'capacity is not a number: 'big''
    naming the file, affecting the memory analysis; no capacity in the metadata."""
    data = _read(shared_data, tmp_path,
                 {"memory_usage_summary_1.json": '{"capacity": "big"}'})
    p = _problem(data, "memory_usage_summary_1.json")
    assert (p.reason, p.affects) == ("capacity is not a number: 'big'", ("memory",))
    assert "memory_capacity_mb" not in data.meta


def test_memory_capacity_small_and_negative(shared_data, tmp_path):
    """capacity 0.5 GiB -> 0.5 * 1024 = 512 MB; capacity -2 is no capacity (left out)."""
    data = _read(shared_data, tmp_path, {"memory_usage_summary_1.json": '{"capacity": 0.5}'})
    assert data.meta["memory_capacity_mb"] == 512.0
    data = _read(shared_data, tmp_path / "b", {"memory_usage_summary_1.json": '{"capacity": -2}'})
    assert "memory_capacity_mb" not in data.meta
