"""communication.json values that the tolerant reader
(ascendprof.readers.communication.per_value) handles value by value:

- an op whose value is not an object is skipped with a warning that names the file it is in
  (and the rank, the op and the step), read by read_communication_per_value;
- tables_from_json with no ``typed`` argument takes the per-value rules, so a Time Info value
  that is JSON true (which Arrow's converter would take as 1.0) is null: checked through its
  caller that passes none, the gate's cluster_communication.json reader
  (compare.gate.dir_inputs.read_cluster_communication), where a rank's OPINFO is read as its
  own communication.json is.

Expected values are written out by hand from the JSON each test writes.
"""

from __future__ import annotations

import json
import math

from ascendprof.compare.gate import dir_inputs as D
from ascendprof.model import schemas as S
from ascendprof.model.problems import Problems
from ascendprof.readers import communication as C
from test_communication_per_value_seed35 import _op
from test_gate_dir_inputs_by_hand import opinfo, write_json


def test_an_op_that_is_not_an_object_is_skipped_with_a_warning_naming_the_file(tmp_path):
    path = tmp_path / "communication.json"
    path.write_text(json.dumps({"step1": {"collective": {
        "hcom_a__1@g": _op(None, 1000.0), "hcom_b__2@g": 5}}}))
    problems = Problems()
    tables = C.read_communication_per_value(path, 3, problems)
    # the one op that is an object is read: 1000 us = 1_000_000 ns
    (row,) = tables[S.COMM_OPS].to_pylist()
    assert (row["op_name"], row["group"], row["start_ns"]) == ("hcom_a__1", "g", 1_000_000)
    (p,) = problems.items
    assert p.path == str(path)
    assert p.reason == "op 'hcom_b__2@g' in step1 is not an object; skipped"
    assert p.rank == 3
    assert p.severity == "warning"


def test_a_true_time_info_value_in_cluster_communication_is_null_not_one(tmp_path):
    info = opinfo()
    info["Communication Time Info"]["Wait Time Ratio"] = True
    info["Communication Time Info"]["Idle Time(ms)"] = True
    path = write_json(tmp_path / "cluster_communication.json", {"(0, 1)": {"step1": {
        "hcom_allReduce__1_0_1@g1": {"0": info, "1": opinfo()}}}})
    ops, _, _ = D.read_cluster_communication(path)
    assert ops["rank"].tolist() == [0, 1]
    # rank 0: true is not a number, so both fields are left empty (not 1.0 / 1 ms = 1_000_000 ns)
    assert math.isnan(ops["wait_ratio"][0])
    assert ops["idle_ns"].isna()[0]
    # its other fields are read: Elapse 2.0 ms = 2_000_000 ns, Synchronization Time Ratio 0.05
    assert ops["elapse_ns"][0] == 2_000_000
    assert ops["sync_ratio"][0] == 0.05
    # rank 1 as written: Wait Time Ratio 0.25, Idle Time 0.0 ms
    assert ops["wait_ratio"][1] == 0.25
    assert ops["idle_ns"][1] == 0
