"""Legacy MindSpore profiler files through ``read_source``: the cases the seed-39 mutation
sample of readers/legacy_mindspore.py found untested (which line / file a problem names, the
step key of HCCL raw ops, the device id fallback, a start time beyond int64). Each starts from
a copy of a real legacy tree in /work/shared/data/mindspore-legacy with one value broken by hand
(see tests/test_legacy_mindspore_seed38.py); expected values are worked out in the comments."""

from __future__ import annotations

from ascendprof.model import schemas as S
from ascendprof.readers import legacy_mindspore as L
from ascendprof.readers import read_source
from test_legacy_mindspore_by_hand import _problem, _rank
from test_legacy_mindspore_seed38 import DETAIL, STEPS, TIMELINE, _copy

PROPOSE = "mindspore-legacy/cluster_propose"


def _break(path, line, old, new):
    """Replace ``old`` by ``new`` in 1-based ``line`` of ``path`` (it must be there)."""
    lines = path.read_text().splitlines(keepends=True)
    assert old in lines[line - 1]
    lines[line - 1] = lines[line - 1].replace(old, new, 1)
    path.write_text("".join(lines))


def test_a_step_trace_value_that_is_no_number_names_its_line(shared_data, tmp_path):
    # run_1 rank 1: line 3 of the step trace (step 2) starts "2,43835277665,": its start_point
    # made "4383x": the problem names line 3 (header is line 1, step 1 line 2). The aicore
    # detail is there so the rank still has a table (else read_source refuses the rank)
    d = _copy(shared_data, tmp_path, [STEPS, DETAIL])
    _break(d / STEPS, 3, "2,43835277665,", "2,4383x,")
    data = read_source(_rank(d, 1))
    p = _problem(data, STEPS)
    assert (p.reason, p.where, p.rank) == ("not a number: '4383x'", "line 3", 1)


def test_a_timeline_duration_that_is_no_number_names_its_line(shared_data, tmp_path):
    # output_timeline_data_1.txt line 4 is "...Assign-op30,519,438068.42095,0.0015": its
    # duration made "n/a": one problem at line 4, affecting the op statistics; no kernels
    d = _copy(shared_data, tmp_path, [STEPS, TIMELINE])
    _break(d / TIMELINE, 4, "438068.42095,0.0015", "438068.42095,n/a")
    data = read_source(_rank(d, 1))
    p = _problem(data, TIMELINE)
    assert (p.reason, p.where, p.affects) == ("not a number: 'n/a'", "line 4", ("op_statistics",))
    assert S.KERNELS not in data.tables


def test_a_timeline_start_beyond_int64_ns_is_a_problem_not_a_crash(shared_data, tmp_path):
    # line 3's start 438068.41869 ms made 1e20 ms = 1e26 ns, beyond int64 (9.2e18): with the
    # step trace present each kernel is looked up in the steps; that must give a problem at
    # line 3 (it raised OverflowError out of read_source before)
    d = _copy(shared_data, tmp_path, [STEPS, TIMELINE])
    _break(d / TIMELINE, 3, "438068.41869", "1e20")
    data = read_source(_rank(d, 1))
    p = _problem(data, TIMELINE)
    assert p.where == "line 3" and "1e20" in p.reason
    assert S.KERNELS not in data.tables
    assert S.ITERATIONS in data.tables


def test_an_aicore_detail_time_beyond_int64_names_the_detail_file(shared_data, tmp_path):
    # aicore_intermediate_1_detail.csv line 2 "Default/GetNext-op6,5e-05,3": its time made
    # 1e20 ms = 1e26 ns, beyond int64: the problem names that file (the user must know which)
    d = _copy(shared_data, tmp_path, [STEPS, DETAIL])
    _break(d / DETAIL, 2, "Default/GetNext-op6,5e-05,", "Default/GetNext-op6,1e20,")
    data = read_source(_rank(d, 1))
    p = _problem(data, DETAIL)
    assert p.path == str(d / DETAIL) and "dur_ns" in p.reason


def test_hccl_raw_ops_carry_the_step_key_of_their_step(shared_data):
    # cluster_propose hccl_raw_2.csv: rows for step_num 1 and 2, then the average ('-'):
    # each op row's step_key is "step<step>", as the other readers name steps
    data = read_source(_rank(shared_data / PROPOSE, 2))
    t = data.tables[S.COMM_OPS]
    pairs = set(zip(t.column("step").to_pylist(), t.column("step_key").to_pylist()))
    assert pairs == {(1, "step1"), (2, "step2")}


def test_cluster_analyse_without_a_device_id_uses_the_rank(shared_data):
    # ascend_cluster_analyse_pipeline-parallel_2_4_2.csv: 6 data rows, the last the average,
    # so 5 steps; no device id given: the rank (2) stands for it, never null
    path = shared_data / PROPOSE / "ascend_cluster_analyse_pipeline-parallel_2_4_2.csv"
    t = L.read_cluster_analyse(path, 2, None)
    assert t.column("step").to_pylist() == [1, 2, 3, 4, 5]
    assert t.column("device_id").to_pylist() == [2] * 5
    # a device id given is kept
    assert L.read_cluster_analyse(path, 2, 6).column("device_id").to_pylist() == [6] * 5
