"""Minddata parsers (ascendprof/readers/minddata.py), mutation seed 40: list fields of the raw
pipeline CSV (children_id, output_queue_size) written as a bare number instead of a bracketed
list. MindSpore run_2's legacy profiler directory (rank 1) is copied, one row edited, and read
through ``read_source`` (helpers of tests/test_minddata_seed34.py). A bare number is a list of
one item: read as that item, no problem reported. Expected values are worked out by hand from
run_2's raw CSV (header on line 1; op 0 on line 2:
``0,BatchOp,4,"[0, 2]",1.0,64,0.015625,10,,[1]``)."""

from __future__ import annotations

from test_minddata_seed34 import RAW, RUN2, _ops, _read

OP0 = '0,BatchOp,4,"[0, 2]",1.0,64,0.015625,10,,[1]'


def _with_op0(shared_data, row: str) -> str:
    lines = (shared_data / RUN2 / RAW).read_text().splitlines()
    assert lines[1] == OP0
    lines[1] = row
    return "\n".join(lines) + "\n"


def test_raw_csv_bare_child_id_is_a_list_of_one(shared_data, tmp_path):
    """Op 0's children_id written 1 instead of [1]: op 0 still has the one child 1 (children
    "1"), the raw CSV is read without a problem, ops 0-3 all from it."""
    text = _with_op0(shared_data, OP0[:-len("[1]")] + "1")
    data = _read(shared_data, tmp_path, {RAW: text})
    assert not [p.line() for p in data.problems if p.path.endswith(RAW)]
    ops = _ops(data)
    assert sorted(ops) == [0, 1, 2, 3] and {r["source"] for r in ops.values()} == {RAW}
    assert ops[0]["children"] == "1"


def test_raw_csv_bare_queue_size_is_one_sample(shared_data, tmp_path):
    """Op 0's output_queue_size written 2 instead of "[0, 2]": one sample of size 2, so
    queue_samples 1 and empty 0 of 1 = 0 %; the average (1.0) and usage (0.015625 * 100 =
    1.5625 %) still come from their own columns. No problem for the raw CSV."""
    text = _with_op0(shared_data, OP0.replace('"[0, 2]"', "2"))
    data = _read(shared_data, tmp_path, {RAW: text})
    assert not [p.line() for p in data.problems if p.path.endswith(RAW)]
    o0 = _ops(data)[0]
    assert (o0["source"], o0["queue_samples"], o0["queue_empty_pct"]) == (RAW, 1, 0.0)
    assert (o0["queue_avg_size"], o0["queue_usage_pct"]) == (1.0, 1.5625)
