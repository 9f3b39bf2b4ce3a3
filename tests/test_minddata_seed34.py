"""Minddata parsers (ascendprof/readers/minddata.py), mutation seed 34: MindSpore run_2's legacy
profiler directory (rank 1) copied, with its minddata files removed or rewritten in the layouts
MindSpore writes (see the module docstring), read through ``read_source``. Checks the
DATASET_OPS table built from ``pipeline_profiling_1.json`` (when the raw CSV is absent), from
the raw CSV and from a pipeline summary JSON, the CPU utilization file, the host queue file, and
that a damaged file is reported naming the file, line and reason. Expected values are worked
out by hand from the files in the comments."""

from __future__ import annotations

import csv
import json
import shutil

import pytest

from ascendprof.model import schemas as S
from ascendprof.model.errors import InputError
from ascendprof.model.problems import Problems
from ascendprof.readers import minddata, read_source
from ascendprof.scan import scan

RUN2 = "mindspore-legacy/run_2/normal_run/profiler"
RAW = "minddata_pipeline_raw_1.csv"
PROF = "pipeline_profiling_1.json"


def _read(shared_data, tmp_path, files: dict[str, str | bytes | None]):
    """run_2's profiler directory copied, ``files`` (name -> text or bytes, None = delete)
    applied; the rank's RankData as read_source gives it."""
    d = tmp_path / "run" / "profiler"
    shutil.copytree(shared_data / RUN2, d)
    for name, text in files.items():
        if text is None:
            (d / name).unlink()
        elif isinstance(text, bytes):
            (d / name).write_bytes(text)
        else:
            (d / name).write_text(text, encoding="utf-8")
    source, = scan(d.parent, Problems())
    return read_source(source)


def _ops(data) -> dict[int, dict]:
    return {r["op_id"]: r for r in data.tables[S.DATASET_OPS].to_pylist()}


def _problem(data, name):
    got = [p for p in data.problems if p.path.endswith(name)]
    assert len(got) == 1, [p.line() for p in data.problems]
    return got[0]


def test_pipeline_profiling_json_read_when_raw_csv_absent(shared_data, tmp_path):
    """run_2's real pipeline_profiling_1.json: ops 3 ImageFolderOp (8 workers, no children,
    queue length 128, sizes [0, 0]), 2 MapOp (children [3]), 1 MapOp (children [2]), 0 BatchOp
    (4 workers, children [1], length 64, sizes [0, 2]), 4 EpochCtrlOp (1 worker, children [0],
    metrics null). Parents from the children lists: 3->2, 2->1, 1->0, 0->4, 4 none.
    Op 0: avg (0 + 2) / 2 = 1.0, usage 100 * 1 / 64 = 1.5625 %, empty 1 of 2 = 50 %, 2 samples.
    Op 3: avg 0.0, usage 0 %, empty 100 %. Op 4: no queue at all."""
    data = _read(shared_data, tmp_path, {RAW: None})
    ops = _ops(data)
    assert sorted(ops) == [0, 1, 2, 3, 4]
    assert {i: r["source"] for i, r in ops.items()} == {i: PROF for i in range(5)}
    assert {i: r["op_type"] for i, r in ops.items()} == {
        0: "BatchOp", 1: "MapOp", 2: "MapOp", 3: "ImageFolderOp", 4: "EpochCtrlOp"}
    assert {i: r["num_workers"] for i, r in ops.items()} == {0: 4, 1: 8, 2: 8, 3: 8, 4: 1}
    assert {i: r["parent_id"] for i, r in ops.items()} == {0: 4, 1: 0, 2: 1, 3: 2, 4: None}
    assert {i: r["children"] for i, r in ops.items()} == {0: "1", 1: "2", 2: "3", 3: "", 4: "0"}
    assert {i: r["queue_length"] for i, r in ops.items()} == {0: 64, 1: 128, 2: 128, 3: 128,
                                                               4: None}
    o0, o3, o4 = ops[0], ops[3], ops[4]
    assert (o0["queue_avg_size"], o0["queue_usage_pct"], o0["queue_empty_pct"],
            o0["queue_samples"]) == (1.0, 1.5625, 50.0, 2)
    assert (o3["queue_avg_size"], o3["queue_usage_pct"], o3["queue_empty_pct"],
            o3["queue_samples"]) == (0.0, 0.0, 100.0, 2)
    assert (o4["queue_avg_size"], o4["queue_usage_pct"], o4["queue_samples"]) == (None, None, None)


def test_pipeline_profiling_op_without_op_type_has_empty_type(shared_data, tmp_path):
    """An op_info entry with no "op_type" key gets op_type "" (not the text "None")."""
    obj = json.loads((shared_data / RUN2 / PROF).read_text())
    for op in obj["op_info"]:
        if op["op_id"] == 4:
            del op["op_type"]
    ops = _ops(_read(shared_data, tmp_path, {RAW: None, PROF: json.dumps(obj)}))
    assert ops[4]["op_type"] == "" and ops[0]["op_type"] == "BatchOp"


def test_pipeline_profiling_without_op_info_is_reported(shared_data, tmp_path):
    """pipeline_profiling_1.json holding {"sampling_interval": 10} only: reported as 'no op_info
    list' for that file; no pipeline table, the rest of the rank still read."""
    data = _read(shared_data, tmp_path, {RAW: None, PROF: '{"sampling_interval": 10}'})
    p = _problem(data, PROF)
    assert p.reason == "no op_info list"
    assert S.DATASET_OPS not in data.tables


def test_pipeline_profiling_bad_worker_count_names_the_file(shared_data, tmp_path):
    """num_workers "eight" does not fit the integer column: the problem names the JSON file."""
    obj = json.loads((shared_data / RUN2 / PROF).read_text())
    obj["op_info"][0]["num_workers"] = "eight"
    data = _read(shared_data, tmp_path, {RAW: None, PROF: json.dumps(obj)})
    p = _problem(data, PROF)
    assert "num_workers" in p.reason
    assert S.DATASET_OPS not in data.tables


def test_raw_csv_parents_sizes_and_missing_average(shared_data, tmp_path):
    """run_2's real minddata_pipeline_raw_1.csv: parent_id column '', 0, 1, 2 for ops 0-3;
    op 0's sizes "[0, 2]": 1 of 2 samples empty = 50 %, 2 samples; average 1.0 and usage rate
    0.015625 -> 1.5625 %. With op 0's output_queue_average_size blanked, the average comes from
    the sizes: (0 + 2) / 2 = 1.0."""
    ops = _ops(_read(shared_data, tmp_path, {}))
    assert {i: r["source"] for i, r in ops.items()} == {i: RAW for i in range(4)}
    assert {i: r["parent_id"] for i, r in ops.items()} == {0: None, 1: 0, 2: 1, 3: 2}
    assert (ops[0]["queue_empty_pct"], ops[0]["queue_samples"]) == (50.0, 2)
    assert (ops[0]["queue_avg_size"], ops[0]["queue_usage_pct"]) == (1.0, 1.5625)
    text = (shared_data / RUN2 / RAW).read_text().replace('"[0, 2]",1.0,', '"[0, 2]",,')
    ops = _ops(_read(shared_data, tmp_path / "b", {RAW: text}))
    assert ops[0]["queue_avg_size"] == 1.0


def test_raw_csv_bad_number_reported_with_its_line(shared_data, tmp_path):
    """op_id 'x' on the third line of the CSV (header is line 1): 'not a number' at line 3."""
    lines = (shared_data / RUN2 / RAW).read_text().splitlines(keepends=True)
    lines[2] = "x" + lines[2][1:]
    p = _problem(_read(shared_data, tmp_path, {RAW: "".join(lines)}), RAW)
    assert p.reason == "not a number: 'x'" and p.where == "line 3"


def test_raw_csv_bad_size_list_reported_with_its_line(shared_data, tmp_path):
    """output_queue_size "[0, a]" on line 2: 'not a list of numbers' at line 2."""
    text = (shared_data / RUN2 / RAW).read_text().replace('"[0, 2]"', '"[0, a]"')
    p = _problem(_read(shared_data, tmp_path, {RAW: text}), RAW)
    assert p.reason.startswith("not a list of numbers") and p.where == "line 2"


def test_raw_csv_empty_file_reported(shared_data, tmp_path):
    """A raw CSV of blank lines only: 'empty file'."""
    p = _problem(_read(shared_data, tmp_path, {RAW: "\n \n"}), RAW)
    assert p.reason == "empty file"


def test_raw_csv_field_over_csv_limit_reported(shared_data, tmp_path):
    """A field longer than the csv module's field limit is a csv.Error: 'not readable as CSV'.
    The legacy reader raises the process-wide limit to 1 GiB, so the limit is lowered to 1000
    for this call (and restored) and the parser called directly on the copied real CSV with a
    2000-character field appended."""
    path = tmp_path / RAW
    path.write_text((shared_data / RUN2 / RAW).read_text() + '"' + "9" * 2000 + '"\n')
    old = csv.field_size_limit(1000)
    try:
        with pytest.raises(InputError) as e:
            minddata.read_pipeline_raw(path, 1)
    finally:
        csv.field_size_limit(old)
    assert e.value.reason.startswith("not readable as CSV: field larger than field limit")


def test_pipeline_summary_json_values(shared_data, tmp_path):
    """A minddata_pipeline_summary_1.json (MindSpore >= 1.6 layout) for two ops, preferred over
    the raw CSV: op 0 Batch (4 workers, average 1.5, 2.3 % used, parent -1 = none, children [1]),
    op 1 Map (8 workers, average 3.0, parent 0)."""
    summary = {"op_ids": [0, 1], "op_names": ["Batch", "Map"], "num_workers": [4, 8],
               "queue_average_size": [1.5, 3.0], "queue_utilization_pct": [2.3, 4.7],
               "queue_empty_freq_pct": [10.0, 0.0], "children_ids": [[1], []],
               "parent_id": [-1, 0], "avg_cpu_pct": [5.0, 7.5]}
    ops = _ops(_read(shared_data, tmp_path,
                     {"minddata_pipeline_summary_1.json": json.dumps(summary)}))
    assert sorted(ops) == [0, 1]
    assert [ops[i]["num_workers"] for i in (0, 1)] == [4, 8]
    assert [ops[i]["parent_id"] for i in (0, 1)] == [None, 0]
    assert [ops[i]["queue_avg_size"] for i in (0, 1)] == [1.5, 3.0]
    assert [ops[i]["queue_usage_pct"] for i in (0, 1)] == [2.3, 4.7]


def test_cpu_utilization_not_an_object_reported(shared_data, tmp_path):
    """minddata_cpu_utilization_1.json holding a JSON list: reported as 'no op_info list' naming
    the file; the pipeline table is still there, without CPU values."""
    data = _read(shared_data, tmp_path, {"minddata_cpu_utilization_1.json": "[1, 2]"})
    p = _problem(data, "minddata_cpu_utilization_1.json")
    assert p.reason == "no op_info list"
    assert sorted(_ops(data)) == [0, 1, 2, 3]


def test_cpu_utilization_bad_numbers_name_the_op(shared_data, tmp_path):
    """op 2's user_utilization ["a"]: 'op 2: utilization is not numbers'."""
    obj = {"op_info": [{"op_id": 2, "metrics": {"user_utilization": ["a"],
                                                  "sys_utilization": [1]}}]}
    data = _read(shared_data, tmp_path, {"minddata_cpu_utilization_1.json": json.dumps(obj)})
    assert _problem(data, "minddata_cpu_utilization_1.json").reason == \
        "op 2: utilization is not numbers"


def test_host_queue_unknown_time_kind_skipped_not_ending(shared_data, tmp_path):
    """device_queue_profiling_1.txt: a type-0 line of unknown extra 7 on batch 1 is skipped, and
    the lines after it (batch 1 and 2 sizes 5 and 0 of capacity 64) are still read."""
    text = "0 7 1 3.5 10\n1 64 1 5 10\n1 64 2 0 20\n"
    data = _read(shared_data, tmp_path, {"device_queue_profiling_1.txt": text})
    q = [r for r in data.tables[S.DATASET_QUEUE].to_pylist() if r["queue"] == "host"]
    assert [(r["step"], r["size"], r["capacity"]) for r in q] == [(1, 5, 64), (2, 0, 64)]
