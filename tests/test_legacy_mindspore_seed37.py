"""Legacy MindSpore profiler files through ``read_source``: the cases the seed-37 mutation sample
of readers/legacy_mindspore.py found untested (the rank and affected analyses of each damaged
file's problem, a CSV field over the csv module's limit, the cluster analyse without a step
trace, values beyond int64, the p2p kind of an op inside a scope, the ids a kernel carries).
Small files written by hand in the layout of the real ones (helpers of
test_legacy_mindspore_by_hand.py); expected values worked out in the comments.
"""

from __future__ import annotations

import csv

import pytest

from ascendprof.model import schemas as S
from test_legacy_mindspore_by_hand import HCCL_HEAD, _dir, _problem, _read

CLUSTER = "ascend_cluster_analyse_pipeline-parallel_2_4_{}.csv"


@pytest.fixture
def csv_field_limit_64(monkeypatch):
    """The reader allows fields of up to 1 GiB (csv.field_size_limit(1 << 30)); a test cannot
    write such a file in time, so the limit it sets is cut to 64 characters here (and the
    module's limit is put back afterwards)."""
    real = csv.field_size_limit
    old = real()
    monkeypatch.setattr(csv, "field_size_limit", lambda *a: real(64))
    yield
    monkeypatch.undo()
    real(old)


def test_a_csv_field_over_the_limit_is_a_problem_of_the_file_and_rank(tmp_path,
                                                                       csv_field_limit_64):
    """hccl_raw_2.csv holds an op-cost cell of more than 64 characters: the csv module refuses
    it; that is one problem naming the file (rank 2, communication), and the step trace (whose
    fields are short) is still read: one step."""
    ops = '"{""stream_4_0_AllReduce-op1"": [""1"", 0.5, 0.25, {}], ""x"": [""1"", 1, 1]}"'
    assert len(ops) > 64
    data = _dir(tmp_path, {"hccl_raw_2.csv": HCCL_HEAD + f"1,0,0,{{}},{ops}\n"}, rank=2)
    p = _problem(data, "hccl_raw_2.csv")
    assert p.reason.startswith("not readable as CSV: field larger than field limit (64)")
    assert (p.rank, p.affects) == (2, ("communication",))
    assert data.tables[S.ITERATIONS].column("step").to_pylist() == [1]


# ------------------------------------------------------------------ which analyses a problem hits

def test_a_damaged_cluster_analyse_affects_the_cluster_step_trace(tmp_path):
    data = _dir(tmp_path, {CLUSTER.format(1): "computation_time,stage_time\nabc,1\n"}, rank=1)
    p = _problem(data, CLUSTER.format(1))
    assert (p.reason, p.where, p.rank, p.affects) == (
        "not a number: 'abc'", "line 2", 1, ("cluster_step_trace",))


def test_a_damaged_timeline_display_affects_the_timeline(tmp_path):
    data = _dir(tmp_path, {"timeline_display_0.json": '[{"ph": "X", "name": "a", "ts": "x"}]'})
    p = _problem(data, "timeline_display_0.json")
    assert p.affects == ("timeline",) and p.reason.startswith("event without numeric ts/dur")
    assert S.TIMELINE not in data.tables


def test_a_damaged_profiler_info_affects_the_metadata(tmp_path):
    data = _dir(tmp_path, {"profiler_info_0.json": '{"rank_id": '})
    p = _problem(data, "profiler_info_0.json")
    assert p.affects == ("metadata",) and "profiler_info" not in data.meta


def test_a_cluster_analyse_value_beyond_int64_names_the_file(tmp_path):
    """computation_time 1e20 ms = 1e26 ns, past int64 (about 9.2e18): the file's problem, named."""
    data = _dir(tmp_path, {CLUSTER.format(0): "computation_time,stage_time\n1e20,1\n"})
    p = _problem(data, CLUSTER.format(0))
    assert p.reason.startswith("column 'computing_ns'") and "int64" in p.reason
    assert S.STEP_TRACE not in data.tables


# ------------------------------------------------------------------ tables

def test_a_cluster_analyse_without_step_trace_takes_all_rows_but_the_average(tmp_path):
    """No step_trace_raw: of 3 rows the last is the average, so rows 1-2 are steps 1-2
    (computation_time ms -> ns)."""
    data = _dir(tmp_path, {CLUSTER.format(0): "computation_time,stage_time\n1.5,2\n2.5,3\n2,2.5\n"},
                step_trace=False)
    rows = data.tables[S.STEP_TRACE].to_pylist()
    assert [(r["step"], r["computing_ns"], r["stage_ns"]) for r in rows] == [
        (1, 1_500_000, 2_000_000), (2, 2_500_000, 3_000_000)]


def test_an_aicore_detail_alone_gives_kernels_of_the_rank(tmp_path):
    """Rank 3 on device 6, aicore detail only: its one kernel is rank 3's, device 6's."""
    data = _read(tmp_path, {"aicore_intermediate_3_detail.csv":
                            "full_op_name,execution_time\nDefault/Add-op1,0.002\n"},
                 rank=3, device_id=6)
    (k,) = data.tables[S.KERNELS].to_pylist()
    assert (k["rank"], k["device_id"], k["name"], k["dur_ns"]) == (3, 6, "Default/Add-op1", 2000)


def test_timeline_kernels_carry_their_stream_id(tmp_path):
    data = _dir(tmp_path, {"output_timeline_data_0.txt":
                           "op_name, stream_id, start_time(ms), duration(ms)\n"
                           "Default/Add-op1,5,0.001,0.001\nDefault/Mul-op2, 12,0.003,0.001\n"})
    k = data.tables[S.KERNELS].to_pylist()
    assert [(r["name"], r["stream_id"]) for r in k] == [("Default/Add-op1", 5),
                                                         ("Default/Mul-op2", 12)]


def test_an_op_is_p2p_by_its_own_name_not_its_scope(tmp_path):
    """hccl_raw keys are ``stream_<id>_<index>_<op>``: the kind comes from the op after the
    last '_'. An AllReduce inside a cell scope named "sender" / "recv" is collective; a
    Receive is p2p."""
    ops = ('"{""stream_4_0_Default/sender_cell/AllReduce-op1"": [""1"", 0.5, 0.25], '
           '""stream_4_1_Default/recv_net/AllReduce-op2"": [""1"", 0.5, 0.25], '
           '""stream_5_0_Receive-op3"": [""1"", 0.5, 0.25]}"')
    data = _dir(tmp_path, {"hccl_raw_0.csv": HCCL_HEAD + f"1,0,0,{{}},{ops}\n"})
    c = data.tables[S.COMM_OPS].to_pylist()
    assert sorted((r["op_name"], r["kind"]) for r in c) == [
        ("stream_4_0_Default/sender_cell/AllReduce-op1", "collective"),
        ("stream_4_1_Default/recv_net/AllReduce-op2", "collective"),
        ("stream_5_0_Receive-op3", "p2p")]
