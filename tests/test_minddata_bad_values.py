"""Minddata parsers (ascendprof/readers/minddata.py): ids, sizes and the memory capacity that
are present but unusable. MindSpore run_2's legacy profiler directory (rank 1) is copied, one
file edited, and read through ``read_source`` as a user's run reads it.

The module's way with a bad value: the parser raises InputError naming the file and the line,
``read_all`` records it in the rank's problems and skips the file (the next pipeline file is
tried instead). An op id or child id with a fraction ("1.5") is such a bad value: cutting it to
1 would put the damaged row on op 1. Expected values are worked out by hand from run_2's files
(its raw CSV: header on line 1, ops 0-3 on lines 2-5; its pipeline_profiling_1.json: ops 0-4).
"""

from __future__ import annotations

import json

from test_minddata_seed34 import PROF, RAW, RUN2, _ops, _problem, _read

from ascendprof.model import schemas as S

MEM = "memory_usage_summary_1.json"


def _raw_lines(shared_data) -> list[str]:
    lines = (shared_data / RUN2 / RAW).read_text().splitlines()
    assert lines[3] == '2,MapOp,8,"[0, 0]",0.0,128,0.0,10,1,[3]'  # op 2, line 4
    assert lines[1] == '0,BatchOp,4,"[0, 2]",1.0,64,0.015625,10,,[1]'  # op 0, line 2
    return lines


def test_raw_csv_op_id_with_a_fraction_is_reported_not_cut_to_op_1(shared_data, tmp_path):
    """Op 2's row (line 4) with its op_id written 1.5. Cut to an int it would be a second op 1;
    instead the raw CSV is reported: 'not an integer: '1.5'' at line 4, naming the file. As for
    any damaged raw CSV, the pipeline then comes from pipeline_profiling_1.json: its five ops
    0-4, each once, op 2 among them (source the JSON file)."""
    lines = _raw_lines(shared_data)
    lines[3] = "1.5" + lines[3][1:]
    data = _read(shared_data, tmp_path, {RAW: "\n".join(lines) + "\n"})
    p = _problem(data, RAW)
    assert (p.reason, p.where, p.rank) == ("not an integer: '1.5'", "line 4", 1)
    rows = data.tables[S.DATASET_OPS].to_pylist()
    assert sorted(r["op_id"] for r in rows) == [0, 1, 2, 3, 4]
    assert {r["source"] for r in rows} == {PROF}


def test_raw_csv_whole_number_written_with_a_point_is_still_read(shared_data, tmp_path):
    """Op 2's op_id written 2.0 (a whole number, as a writer going through floats may write
    it): still op 2 of the raw CSV, no problem; ops 0-3 all from the raw CSV."""
    lines = _raw_lines(shared_data)
    lines[3] = "2.0" + lines[3][1:]
    data = _read(shared_data, tmp_path, {RAW: "\n".join(lines) + "\n"})
    assert not [p for p in data.problems if p.path.endswith(RAW)]
    ops = _ops(data)
    assert sorted(ops) == [0, 1, 2, 3] and {r["source"] for r in ops.values()} == {RAW}
    assert ops[2]["op_type"] == "MapOp" and ops[2]["parent_id"] == 1


def test_raw_csv_child_id_with_a_fraction_is_reported(shared_data, tmp_path):
    """Op 0's children_id (line 2) written [1.5] instead of [1]: 'not a list of integers:
    '[1.5]'' at line 2 (read as [1] it would make op 1 op 0's child)."""
    lines = _raw_lines(shared_data)
    assert lines[1].endswith(",[1]")
    lines[1] = lines[1][:-len("[1]")] + "[1.5]"
    data = _read(shared_data, tmp_path, {RAW: "\n".join(lines) + "\n"})
    p = _problem(data, RAW)
    assert (p.reason, p.where) == ("not a list of integers: '[1.5]'", "line 2")


def test_pipeline_profiling_op_id_with_a_fraction_is_reported(shared_data, tmp_path):
    """Without the raw CSV, pipeline_profiling_1.json is read; op 2's entry with op_id 1.5 would
    be a second op 1 when cut. Reported instead: 'op_id is not an integer: 1.5' naming the JSON
    file, and no pipeline table (no other pipeline file is left for rank 1)."""
    obj = json.loads((shared_data / RUN2 / PROF).read_text())
    entry, = [op for op in obj["op_info"] if op["op_id"] == 2]
    entry["op_id"] = 1.5
    data = _read(shared_data, tmp_path, {RAW: None, PROF: json.dumps(obj)})
    p = _problem(data, PROF)
    assert p.reason == "op_id is not an integer: 1.5"
    assert S.DATASET_OPS not in data.tables


def test_pipeline_profiling_queue_size_with_a_fraction_is_reported(shared_data, tmp_path):
    """Op 0's sampled sizes in pipeline_profiling_1.json ([0, 2]) written [0, 2.5]: cut to
    [0, 2] they would pass for the real samples; reported instead, 'op 0: queue sizes are not
    integers' naming the JSON file, and no pipeline table."""
    obj = json.loads((shared_data / RUN2 / PROF).read_text())
    op0, = [op for op in obj["op_info"] if op["op_id"] == 0]
    assert op0["metrics"]["output_queue"]["size"] == [0, 2]
    op0["metrics"]["output_queue"]["size"] = [0, 2.5]
    data = _read(shared_data, tmp_path, {RAW: None, PROF: json.dumps(obj)})
    assert _problem(data, PROF).reason == "op 0: queue sizes are not integers"
    assert S.DATASET_OPS not in data.tables


def test_memory_capacity_missing_says_missing(shared_data, tmp_path):
    """memory_usage_summary_1.json without a capacity key ({"peak_mem": 10}): the problem says
    the capacity is missing (not 'not a number: None'), names the file, affects the memory
    analysis; no capacity in the metadata."""
    data = _read(shared_data, tmp_path, {MEM: '{"peak_mem": 10}'})
    p = _problem(data, MEM)
    assert (p.reason, p.affects) == ("capacity is missing", ("memory",))
    assert "memory_capacity_mb" not in data.meta


def test_memory_capacity_null_says_null(shared_data, tmp_path):
    """capacity written null: 'capacity is null' naming the file."""
    data = _read(shared_data, tmp_path, {MEM: '{"capacity": null}'})
    assert _problem(data, MEM).reason == "capacity is null"
    assert "memory_capacity_mb" not in data.meta
