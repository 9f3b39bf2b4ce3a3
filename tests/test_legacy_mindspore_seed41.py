"""Legacy MindSpore profiler files through ``read_source``: the cases the seed-41 mutation
sample of readers/legacy_mindspore.py found untested (an ascend_cluster_analyse file of exactly
one row with no step trace to count the steps, and an hccl_raw row that ends before the
step_num column). The small files are written by hand in the layout of the real ones (see
tests/test_legacy_mindspore_by_hand.py); expected values are worked out in the comments."""

from __future__ import annotations

from ascendprof.model import schemas as S
from test_legacy_mindspore_by_hand import _dir

CLUSTER = "ascend_cluster_analyse_pipeline-parallel_2_4_0.csv"


def test_a_one_row_cluster_analyse_without_step_trace_is_step_1(tmp_path):
    # no step_trace_raw, so the reader cannot know how many rows are steps: a file of a single
    # data row has no average row after it, and that row is step 1 (the reader's doc: "a single
    # row is step 1"). computation_time 1.5 ms -> 1_500_000 ns, stage_time 2 ms -> 2_000_000 ns
    data = _dir(tmp_path, {CLUSTER: "computation_time,stage_time\n1.5,2\n"}, step_trace=False)
    rows = data.tables[S.STEP_TRACE].to_pylist()
    assert [(r["step"], r["computing_ns"], r["stage_ns"], r["rank"], r["device_id"])
            for r in rows] == [(1, 1_500_000, 2_000_000, 0, 0)]


def test_an_hccl_raw_row_ending_before_step_num_is_dropped_as_stepless(tmp_path):
    # the reader finds its two columns by name, so step_num need not come first. Here it is the
    # 2nd column; line 3 holds one field only, so it has no step_num and is dropped as a row
    # without a step is (the average row "-"), not read past its end. Line 2 is read: op
    # AllReduce-op1 of step 1, 0.5 ms transit -> 500_000 ns, 0.25 ms wait -> 250_000 ns,
    # wait ratio 0.25 / (0.25 + 0.5) = 0.3333 (4 places)
    op = '"{""stream_4_0_AllReduce-op1"": [""1"", 0.5, 0.25]}"'
    text = f"communication_operator_cost,step_num\n{op},1\n{op}\n"
    data = _dir(tmp_path, {"hccl_raw_0.csv": text})
    assert not [p.line() for p in data.problems if p.path.endswith("hccl_raw_0.csv")]
    rows = data.tables[S.COMM_OPS].to_pylist()
    assert [(r["step"], r["op_name"], r["kind"], r["transit_ns"], r["wait_ns"], r["wait_ratio"])
            for r in rows] == [(1, "stream_4_0_AllReduce-op1", "collective", 500_000, 250_000,
                                0.3333)]
