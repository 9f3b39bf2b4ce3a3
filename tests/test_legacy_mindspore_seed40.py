"""Legacy MindSpore profiler files through ``read_source``: the cases the seed-40 mutation
sample of readers/legacy_mindspore.py found untested (an average row numbered ``0``, an op
name with nothing after its last ``/``, a start time between 2**63 and 2**64 ns). Each starts
from a copy of a real legacy tree in /work/shared/data/mindspore-legacy with one value edited
by hand (see tests/test_legacy_mindspore_seed38.py); expected values are worked out in the
comments."""

from __future__ import annotations

from ascendprof.model import schemas as S
from ascendprof.readers import read_source
from test_legacy_mindspore_by_hand import _problem, _rank
from test_legacy_mindspore_seed38 import STEPS, TIMELINE, _copy
from test_legacy_mindspore_seed39 import _break


def test_an_average_row_numbered_0_is_dropped_from_the_steps(shared_data, tmp_path):
    # run_1 rank 1: the step trace has 323 data rows, steps 1..322 (lines 2..323) then the
    # average row "-,47120523118,..." at line 324. MindSpore versions write the average as
    # step_num 0 too (the reader's doc: "-" or "0" is dropped): made "0,47120523118,", the
    # iterations are still the 322 steps 1..322, no step 0
    d = _copy(shared_data, tmp_path, [STEPS])
    _break(d / STEPS, 324, "-,47120523118,", "0,47120523118,")
    data = read_source(_rank(d, 1))
    steps = data.tables[S.ITERATIONS].column("step").to_pylist()
    assert len(steps) == 322
    assert sorted(steps) == list(range(1, 323))


def test_an_op_name_ending_in_a_slash_keeps_the_name_as_its_op_type(shared_data, tmp_path):
    # output_timeline_data_1.txt line 3 is "Default/network-TrainStepWrap/optimizer_d-Adam/
    # Mul-op29,519,...": its name cut to "Default/network-TrainStepWrap/" has no op type after
    # the last "/" (the op-type pattern needs one character there), so the op type is the name
    # itself; the 4 other kernels keep theirs (line 2 AssignAdd-op414 -> AssignAdd, line 4
    # Assign-op30 -> Assign)
    d = _copy(shared_data, tmp_path, [STEPS, TIMELINE])
    _break(d / TIMELINE, 3, "optimizer_d-Adam/Mul-op29,", ",")
    data = read_source(_rank(d, 1))
    assert not [p for p in data.problems if p.path.endswith(TIMELINE)]
    k = data.tables[S.KERNELS]
    names = k.column("name").to_pylist()
    types = k.column("op_type").to_pylist()
    assert names[1] == "Default/network-TrainStepWrap/"
    assert types[:3] == ["AssignAdd", "Default/network-TrainStepWrap/", "Assign"]


def test_a_timeline_start_between_2_63_and_2_64_ns_is_a_problem(shared_data, tmp_path):
    # line 3's start 438068.41869 ms made 1e13 ms = 1e19 ns: beyond int64 (2**63 = 9.22e18)
    # though below 2**64 (1.84e19), so it is out of the int64 ns range: a problem at line 3
    # naming the value, no kernels, the step trace still read
    d = _copy(shared_data, tmp_path, [STEPS, TIMELINE])
    _break(d / TIMELINE, 3, "438068.41869", "1e13")
    data = read_source(_rank(d, 1))
    p = _problem(data, TIMELINE)
    assert p.where == "line 3" and "1e13" in p.reason
    assert S.KERNELS not in data.tables
    assert S.ITERATIONS in data.tables
