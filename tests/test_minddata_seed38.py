"""Minddata parsers (ascendprof/readers/minddata.py), mutation seed 38: MindSpore run_2's legacy
profiler directory (rank 1) copied, with its minddata files rewritten, read through
``read_source``. Checks that the raw pipeline CSV's own output_queue_average_size is kept
rather than recomputed from the sampled sizes; that a raw CSV whose lines end in a lone CR (old
Mac line endings) is read like the same file with LF endings; that a memory_usage_summary JSON
which is not an object is recorded as a problem (not a crash); and that the CPU utilization
file's pipeline entry (op_id -1), when it comes first, is skipped without ending the reading of
the ops after it. The same kinds of checks at other places: a pipeline_profiling JSON or
pipeline summary JSON that is not an object reported, odd CPU utilization entries (null, no
op_id, no samples, metrics null) skipped, and blank or other lines in the middle of the host
queue file, minddata_aicpu file and raw CSV skipped without ending the reading. Expected values
are worked out by hand in the docstrings from the profiler's own files."""

from __future__ import annotations

import json

from ascendprof.model import schemas as S
from test_minddata_seed34 import _read  # run_2 copied, files written over

RUN2 = "mindspore-legacy/run_2/normal_run/profiler"
RAW = "minddata_pipeline_raw_1.csv"
CPU = "minddata_cpu_utilization_1.json"
MEM = "memory_usage_summary_1.json"


def _problems(data, name):
    return [p for p in data.problems if str(p.path).endswith(name)]


def _ops(data):
    return {r["op_id"]: r for r in data.tables[S.DATASET_OPS].to_pylist()}


def _raw_lines(shared_data) -> list[str]:
    """run_2's raw CSV: header, then ops 0-3 on lines 2-5 (LF endings)."""
    lines = (shared_data / RUN2 / RAW).read_bytes().decode().splitlines()
    assert lines[1] == "0,BatchOp,4,\"[0, 2]\",1.0,64,0.015625,10,,[1]"
    return lines


def test_raw_csv_average_size_kept_over_the_sampled_sizes(shared_data, tmp_path):
    """Op 0's line rewritten with sizes [0, 2, 2] and output_queue_average_size 1.67 (as a
    profiler rounding to two places writes it; the mean of the three samples is 4/3 = 1.333...):
    the file's 1.67 is the op's average size, not 1.333. The empty percentage, which the file
    does not hold, comes from the samples: 1 zero in 3 = 33.33 %; 3 samples."""
    lines = _raw_lines(shared_data)
    lines[1] = "0,BatchOp,4,\"[0, 2, 2]\",1.67,64,0.015625,10,,[1]"
    data = _read(shared_data, tmp_path, {RAW: "\n".join(lines) + "\n"})
    assert not _problems(data, RAW)
    op0 = _ops(data)[0]
    assert op0["source"] == RAW
    assert op0["queue_avg_size"] == 1.67
    assert op0["queue_samples"] == 3
    assert abs(op0["queue_empty_pct"] - 100.0 / 3) < 1e-9


def test_raw_csv_with_lone_cr_line_endings_read(shared_data, tmp_path):
    """run_2's raw CSV with every line ended by a lone CR: read without a problem, giving the
    same four ops as the file itself: op 0 BatchOp (4 workers, queue length 64, sizes [0, 2] ->
    average 1.0 from the file, usage 0.015625 * 100 = 1.5625 %, child 1), op 3 ImageFolderOp
    with parent 2 and no children."""
    lines = _raw_lines(shared_data)
    data = _read(shared_data, tmp_path, {RAW: ("\r".join(lines) + "\r").encode()})
    assert not _problems(data, RAW)
    ops = _ops(data)
    assert sorted(ops) == [0, 1, 2, 3]
    assert {r["source"] for r in ops.values()} == {RAW}
    op0, op3 = ops[0], ops[3]
    assert (op0["op_type"], op0["num_workers"], op0["queue_length"], op0["queue_avg_size"],
            op0["queue_usage_pct"], op0["children"], op0["parent_id"]) == \
        ("BatchOp", 4, 64, 1.0, 1.5625, "1", None)
    assert (op3["op_type"], op3["parent_id"], op3["children"]) == ("ImageFolderOp", 2, "")
    # the same file with LF endings reads the same
    same = _read(shared_data, tmp_path / "lf", {RAW: "\n".join(lines) + "\n"})
    assert _ops(same) == ops


def test_memory_summary_not_an_object_reported(shared_data, tmp_path):
    """memory_usage_summary_1.json holding a list [31.5] (not an object): 'not a JSON object'
    naming the file, rank 1, affecting the memory analysis; the rest of the rank is still read
    and no capacity is in the metadata."""
    data = _read(shared_data, tmp_path, {MEM: "[31.5]"})
    got = _problems(data, MEM)
    assert len(got) == 1, [p.line() for p in data.problems]
    p = got[0]
    assert (p.reason, p.rank, p.affects) == ("not a JSON object", 1, ("memory",))
    assert "memory_capacity_mb" not in data.meta
    assert S.DATASET_OPS in data.tables


def test_cpu_utilization_pipeline_entry_first_does_not_end_reading(shared_data, tmp_path):
    """minddata_cpu_utilization_1.json with the pipeline's own entry (op_id -1, utilization
    90 + 90) first, then op 1 (user 10, 20, 30; sys 10, 20, 30) and op 2 (user 5, sys 5): the
    -1 entry is left out, op 1's CPU is mean(20, 40, 60) = 40.0 %, op 2's (5 + 5) = 10.0 %; the
    raw CSV has no CPU column, so ops 0 and 3 have none."""
    cpu = {"sampling_interval": 10, "op_info": [
        {"op_id": -1, "metrics": {"user_utilization": [90], "sys_utilization": [90]}},
        {"op_id": 1, "metrics": {"user_utilization": [10, 20, 30],
                                 "sys_utilization": [10, 20, 30]}},
        {"op_id": 2, "metrics": {"user_utilization": [5], "sys_utilization": [5]}}]}
    data = _read(shared_data, tmp_path, {CPU: json.dumps(cpu)})
    assert not _problems(data, CPU)
    ops = _ops(data)
    assert [ops[i]["avg_cpu_pct"] for i in (0, 1, 2, 3)] == [None, 40.0, 10.0, None]


# The same kinds of gaps at other places: a JSON file that is not an object, an entry skipped
# (not ending the reading), blank lines in the middle of a file.

PROF = "pipeline_profiling_1.json"
SUMMARY = "minddata_pipeline_summary_1.json"
HOSTQ = "device_queue_profiling_1.txt"
AICPU = "minddata_aicpu_1.txt"


def test_pipeline_profiling_not_an_object_reported(shared_data, tmp_path):
    """Raw CSV removed, pipeline_profiling_1.json holding the list [1, 2]: 'no op_info list'
    naming that file, rank 1; no pipeline table."""
    data = _read(shared_data, tmp_path, {RAW: None, PROF: "[1, 2]"})
    got = _problems(data, PROF)
    assert [(p.reason, p.rank) for p in got] == [("no op_info list", 1)]
    assert S.DATASET_OPS not in data.tables


def test_pipeline_summary_not_an_object_reported(shared_data, tmp_path):
    """minddata_pipeline_summary_1.json holding the list [0, 1]: 'no op_ids list' naming it,
    rank 1; the pipeline then comes from the raw CSV (ops 0-3)."""
    data = _read(shared_data, tmp_path, {SUMMARY: "[0, 1]"})
    got = _problems(data, SUMMARY)
    assert [(p.reason, p.rank) for p in got] == [("no op_ids list", 1)]
    assert sorted(_ops(data)) == [0, 1, 2, 3]
    assert {r["source"] for r in _ops(data).values()} == {RAW}


def test_cpu_utilization_odd_entries_skipped_not_ending(shared_data, tmp_path):
    """The CPU file's op_info starting with null, an entry without op_id and op 3 with empty
    utilization lists (no samples: no value), then op 1 (user 10, sys 30 -> 40.0 %) and op 2
    with metrics null (no value): no problem; op 1 has 40.0, ops 0, 2 and 3 none."""
    cpu = {"op_info": [
        None,
        {"metrics": {"user_utilization": [50], "sys_utilization": [50]}},
        {"op_id": 3, "metrics": {"user_utilization": [], "sys_utilization": []}},
        {"op_id": 1, "metrics": {"user_utilization": [10], "sys_utilization": [30]}},
        {"op_id": 2, "metrics": None}]}
    data = _read(shared_data, tmp_path, {CPU: json.dumps(cpu)})
    assert not _problems(data, CPU)
    ops = _ops(data)
    assert [ops[i]["avg_cpu_pct"] for i in (0, 1, 2, 3)] == [None, 40.0, None, None]


def test_host_queue_blank_lines_in_the_middle_skipped(shared_data, tmp_path):
    """device_queue_profiling_1.txt with a blank line and a line of spaces between its size
    lines: skipped; batches 1, 2, 3 (sizes 5, 6, 7 of capacity 64) all read, no problem."""
    text = "1 64 1 5 10\n\n1 64 2 6 20\n   \n1 64 3 7 30\n"
    data = _read(shared_data, tmp_path, {HOSTQ: text})
    assert not _problems(data, HOSTQ)
    host = [r for r in data.tables[S.DATASET_QUEUE].to_pylist() if r["queue"] == "host"]
    assert [(r["step"], r["size"], r["capacity"]) for r in host] == \
        [(1, 5, 64), (2, 6, 64), (3, 7, 64)]


def test_aicpu_other_lines_in_the_middle_skipped(shared_data, tmp_path):
    """run_2's minddata_aicpu_1.txt with a blank line after its first GetNext line and a line
    "other_node 1 2 3" after its second: both skipped; the three GetNext lines are still rows
    1, 2, 3 with sizes 3, 2, 1, no problem."""
    lines = (shared_data / RUN2 / AICPU).read_text().splitlines()
    text = "\n".join([lines[0], "", lines[1], "other_node 1 2 3", lines[2]]) + "\n"
    data = _read(shared_data, tmp_path, {AICPU: text})
    assert not _problems(data, AICPU)
    dev = [r for r in data.tables[S.DATASET_QUEUE].to_pylist() if r["queue"] == "device"]
    assert [(r["step"], r["size"]) for r in dev] == [(1, 3), (2, 2), (3, 1)]


def test_raw_csv_blank_rows_in_the_middle_skipped(shared_data, tmp_path):
    """run_2's raw CSV with an empty line after op 0 and a line of commas only after op 2:
    both skipped; ops 0-3 read as in the file (op 3 ImageFolderOp, parent 2), no problem."""
    lines = _raw_lines(shared_data)
    text = "\n".join(lines[:2] + [""] + lines[2:4] + [",,,,,,,,,"] + lines[4:]) + "\n"
    data = _read(shared_data, tmp_path, {RAW: text})
    assert not _problems(data, RAW)
    ops = _ops(data)
    assert sorted(ops) == [0, 1, 2, 3]
    assert (ops[3]["op_type"], ops[3]["parent_id"]) == ("ImageFolderOp", 2)
