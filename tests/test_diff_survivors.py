"""compare.diff on small hand-built sides, for behaviours the other diff tests left open: an
op_statistic row without an Accelerator Core, the kernel table's columns when neither side has
kernels, select_ranks on a side that has only op_statistic totals, and the JSON form's cut of
the communication table to ``top`` rows, communication per step when the step keys carry no
step number.

Expected values are worked out by hand in the comments (ns in the frames, us in the diff
tables; a rank without a step breakdown divides its op_statistic totals by 1)."""

from __future__ import annotations

import pandas as pd

from ascendprof.compare.diff import (KERNEL_DIFF_COLUMNS, GroupLabel, Side, comm_totals,
                                     compare, diff_kernels, op_type_totals, rank_pairs,
                                     select_ranks)
from ascendprof.model import schemas as S
from ascendprof.model.problems import Problems
from ascendprof.readers.communication import tables_from_json


def test_op_statistic_row_without_accelerator_core_is_kept():
    # rank 0, no step breakdown (divisor 1): MatMul on AI_CORE 3000 ns (count 3), and an op type
    # whose core cell is empty, 4000 ns (count 2). The empty core is a value (""), not a reason
    # to drop the op type.
    s = Side("A", [0], op_stats=pd.DataFrame({
        "rank": [0, 0], "op_type": ["MatMul", "Custom"],
        "accelerator_core": ["AI_CORE", None], "count": [3, 2], "total_ns": [3000, 4000]}))
    t = op_type_totals(s).set_index(["op_type", "accelerator_core"])
    assert set(t.index) == {("MatMul", "AI_CORE"), ("Custom", "")}
    assert (t.loc[("Custom", ""), "count"], t.loc[("Custom", ""), "total_ns"]) == (2.0, 4000.0)


def test_kernel_table_keeps_its_columns_when_no_side_has_kernels():
    # neither side has kernels: an empty table, but with the documented columns (the CSV
    # written by -o still has its header)
    d = diff_kernels(Side("A", [0]), Side("B", [0]))
    assert len(d) == 0
    assert list(d.columns) == KERNEL_DIFF_COLUMNS


def test_select_ranks_keeps_the_op_statistic_rows_of_the_ranks():
    # op_statistic totals of ranks 0 and 1; selecting rank 1 keeps its row only (MatMul,
    # 5000 ns, count 5), and its op types still compare: rank 1 has no steps, divisor 1.
    a = Side("A", [0, 1], op_stats=pd.DataFrame({
        "rank": [0, 1], "op_type": ["MatMul", "MatMul"],
        "accelerator_core": ["AI_CORE", "AI_CORE"], "count": [1, 5],
        "total_ns": [1000, 5000]}))
    s = select_ranks(a, [1])
    assert s.op_stats is not None
    assert s.op_stats.to_dict("records") == [
        {"rank": 1, "op_type": "MatMul", "accelerator_core": "AI_CORE", "count": 5,
         "total_ns": 5000}]
    t = op_type_totals(s)
    assert (t["count"].tolist(), t["total_ns"].tolist()) == ([5.0], [5000.0])


def test_json_form_cuts_the_communication_table_to_top_rows():
    # two groups on both sides: g1 elapse 1000 -> 4000 ns (+3 us), g2 2000 -> 2500 ns (+0.5
    # us); with top=1 only the group of the largest |delta_elapse_us| is kept (g1), while
    # the steps table is not cut. Without top both groups are there.
    cols = ["rank", "group", "step_key", "elapse_ns", "transit_ns", "wait_ns", "sync_ns",
            "idle_ns"]
    groups = {"g1": GroupLabel("g1", "dp", (0,)), "g2": GroupLabel("g2", "tp", (0,))}
    a = Side("A", [0], comm_ops=pd.DataFrame([[0, "g1", "step1", 1000, 0, 0, 0, 0],
                                              [0, "g2", "step1", 2000, 0, 0, 0, 0]],
                                             columns=cols), groups=groups)
    b = Side("B", [0], comm_ops=pd.DataFrame([[0, "g1", "step1", 4000, 0, 0, 0, 0],
                                              [0, "g2", "step1", 2500, 0, 0, 0, 0]],
                                             columns=cols), groups=groups)
    r = compare(a, b, rank_pairs(a, b))
    assert len(r.communication) == 2
    doc = r.as_dict(top=1)
    assert [c["group"] for c in doc["communication"]] == ["dp (0,)"]
    assert doc["communication"][0]["delta_elapse_us"] == 3.0
    assert len(doc["steps"]) == len(r.steps) == 9
    assert [c["group"] for c in r.as_dict()["communication"]] == ["dp (0,)", "tp (0,)"]


def _opinfo(elapse_ms: float) -> dict:
    return {"Communication Time Info": {
        "Start Timestamp(us)": 1000.0, "Elapse Time(ms)": elapse_ms, "Transit Time(ms)": 0,
        "Wait Time(ms)": 0, "Synchronization Time(ms)": 0, "Idle Time(ms)": elapse_ms,
        "Wait Time Ratio": 0, "Synchronization Time Ratio": 0},
        "Communication Bandwidth Info": {}}


def test_comm_per_step_on_step_keys_without_a_step_number(tmp_path):
    # communication.json whose step keys are "1", "2", "3" (not "step<n>"): the reader keeps
    # them in step_key and gives no step number. They still name three steps, so communication
    # is per step: one allReduce in group g per step, elapse 1, 2 and 6 ms -> median 2 ms,
    # mean 3 ms (not one capture total 9 ms / 3 steps = 3 ms as median).
    data = {k: {"collective": {f"hcom_allReduce__1_{k}@g": _opinfo(ms)}}
            for k, ms in (("1", 1.0), ("2", 2.0), ("3", 6.0))}
    problems = Problems()
    ops = tables_from_json(data, tmp_path / "communication.json", 0, problems)[S.COMM_OPS]
    ops = ops.drop_columns(["opinfo_json"]).to_pandas()
    assert not len(problems)
    assert ops["step_key"].tolist() == ["1", "2", "3"] and ops["step"].isna().all()
    steps = pd.DataFrame({"rank": [0, 0, 0], "step": [1, 2, 3]})
    s = Side("A", [0], steps=steps, comm_ops=ops, groups={"g": GroupLabel("g", "dp", (0, 1))})
    t = comm_totals(s).set_index("gkey")
    assert list(t.index) == ["dp (0, 1)"]
    assert (t.loc["dp (0, 1)", "count"], t.loc["dp (0, 1)", "elapse_ns"],
            t.loc["dp (0, 1)", "elapse_ns_mean"]) == (1.0, 2_000_000.0, 3_000_000.0)
