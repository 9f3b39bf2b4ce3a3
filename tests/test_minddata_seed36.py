"""Minddata parsers (ascendprof/readers/minddata.py), mutation seed 36: MindSpore run_2's legacy
profiler directory (rank 1) copied, with its minddata files removed or rewritten, read through
``read_source``. Checks that the DATASET_QUEUE rows (host and device queue) and the DATASET_OPS
rows from pipeline_profiling_1.json carry the rank; that dataset_iterator_profiling's 4-field
lines (no timestamp) are read; the pipeline summary JSON's empty-frequency and CPU columns; and
that a damaged host queue file, minddata_aicpu file, pipeline_profiling JSON or pipeline summary
JSON is recorded as a problem naming the file, the line and the reason. Expected values are
worked out by hand in the docstrings from the profiler's own files."""

from __future__ import annotations

import json
import shutil

from ascendprof.model import schemas as S
from ascendprof.model.problems import Problems
from ascendprof.readers import read_source
from ascendprof.scan import scan

RUN2 = "mindspore-legacy/run_2/normal_run/profiler"
RAW = "minddata_pipeline_raw_1.csv"
PROF = "pipeline_profiling_1.json"
SUMMARY = "minddata_pipeline_summary_1.json"
HOSTQ = "device_queue_profiling_1.txt"
ITER = "dataset_iterator_profiling_1.txt"
AICPU = "minddata_aicpu_1.txt"


def _read(shared_data, tmp_path, files: dict[str, str | None]):
    """run_2's profiler directory copied, ``files`` (name -> text, None = delete) applied; the
    rank's RankData as read_source gives it."""
    d = tmp_path / "run" / "profiler"
    shutil.copytree(shared_data / RUN2, d)
    for name, text in files.items():
        if text is None:
            (d / name).unlink()
        else:
            (d / name).write_text(text, encoding="utf-8")
    source, = scan(d.parent, Problems())
    return read_source(source)


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
