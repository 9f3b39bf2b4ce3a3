"""Legacy MindSpore profiler files through ``read_source``: the cases the seed-41 mutation
sample of readers/legacy_mindspore.py found untested (an ascend_cluster_analyse file of exactly
one row with no step trace to count the steps, and an hccl_raw row that ends before the
step_num column), then the same kinds of gaps at other places of the module: rows or values of
hccl_raw / step_trace_raw / timeline_display that must be a problem naming the file and line
rather than a crash or a silent wrong table (a row ending before its op costs, op costs nested
too deep, a string or an infinite cost, a timeline that is no array or has an infinite ts, a
step trace row one field short), and two defaults (wait ratio 0 when there is no time at all,
an X event without dur lasting 0 ns). The small files are written by hand in the layout of
the real ones (see tests/test_legacy_mindspore_by_hand.py); expected values are worked out
in the comments."""

from __future__ import annotations

from ascendprof.model import schemas as S
from test_legacy_mindspore_by_hand import HCCL_HEAD, STEP_TRACE, _dir, _problem

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


# ------------------------------------------------------------------ the same gaps elsewhere

HCCL = "hccl_raw_0.csv"


def _hccl_cost(tmp_path, cell: str):
    """hccl_raw with line 2 of step 1 whose communication_operator_cost cell is ``cell``."""
    return _dir(tmp_path, {HCCL: HCCL_HEAD + f'1,0,0,{{}},"{cell}"\n'})


def test_an_hccl_raw_row_ending_before_its_op_costs_names_the_line(tmp_path):
    # line 3 "2,0,0" has the step (2) but ends before link_info and communication_operator_cost
    # (5 columns): no op costs to read there, a problem at line 3 affecting communication
    data = _dir(tmp_path, {HCCL: HCCL_HEAD + '1,0,0,{},"{}"\n2,0,0\n'})
    p = _problem(data, HCCL)
    assert (p.reason, p.where, p.affects) == ("communication_operator_cost is not JSON",
                                              "line 3", ("communication",))


def test_op_costs_nested_beyond_the_json_parsers_depth_name_the_line(tmp_path):
    # 100000 nested "[": deeper than Python's json parser recurses, so not readable as JSON
    p = _problem(_hccl_cost(tmp_path, "[" * 100_000), HCCL)
    assert (p.reason, p.where) == ("communication_operator_cost is not JSON", "line 2")


def test_an_op_cost_that_is_a_string_is_an_unexpected_value(tmp_path):
    # {"op_a": "abc"}: a string of 3 characters, not the list [step, comm ms, wait ms, ...]
    p = _problem(_hccl_cost(tmp_path, '{""op_a"": ""abc""}'), HCCL)
    assert (p.reason, p.where) == ("unexpected value for op_a", "line 2")


def test_an_op_cost_beyond_the_float_range_is_not_a_number(tmp_path):
    # 1e400 ms reads as float infinity, which has no ns value: [inf, 0.5] named at line 2
    p = _problem(_hccl_cost(tmp_path, '{""op_a"": [""1"", 1e400, 0.5]}'), HCCL)
    assert (p.reason, p.where) == ("cost of op_a is not a number: [inf, 0.5]", "line 2")


def test_an_op_without_communication_or_wait_time_has_wait_ratio_0(tmp_path):
    # 0 ms transit, 0 ms wait: wait / (wait + transit) is 0 / 0, taken as 0.0 (no waiting)
    data = _hccl_cost(tmp_path, '{""stream_4_0_AllReduce-op1"": [""1"", 0, 0]}')
    (r,) = data.tables[S.COMM_OPS].to_pylist()
    assert (r["transit_ns"], r["wait_ns"], r["wait_ratio"]) == (0, 0, 0.0)


def test_a_timeline_display_that_is_no_array_names_the_file(tmp_path):
    # a JSON object where the array of trace events belongs: a problem, not an empty timeline
    data = _dir(tmp_path, {"timeline_display_0.json": '{"ph": "X", "name": "a", "ts": 1}'})
    p = _problem(data, "timeline_display_0.json")
    assert (p.reason, p.affects) == ("expected a JSON array of trace events", ("timeline",))
    assert S.TIMELINE not in data.tables


def test_a_timeline_display_ts_beyond_the_float_range_names_the_event(tmp_path):
    # ts "1e400" (a string; the JSON reader refuses the bare number) reads as float infinity,
    # which has no ns value
    data = _dir(tmp_path, {"timeline_display_0.json":
                           '[{"ph": "X", "name": "a", "ts": "1e400"}]'})
    p = _problem(data, "timeline_display_0.json")
    assert p.reason.startswith("event without numeric ts/dur: {'ph': 'X', 'name': 'a'")


def test_a_timeline_display_event_without_dur_lasts_0_ns(tmp_path):
    # X event at ts 2.5 us without "dur": start 2500 ns, duration 0 ns
    data = _dir(tmp_path, {"timeline_display_0.json": '[{"ph": "X", "name": "a", "ts": 2.5}]'})
    (r,) = data.tables[S.TIMELINE].to_pylist()
    assert (r["name"], r["start_ns"], r["dur_ns"]) == ("a", 2500, 0)


def test_a_step_trace_row_one_field_short_names_the_line(tmp_path):
    # the 9-column header, line 2 without its last field (tail): 8 fields
    head, row = STEP_TRACE.splitlines()[:2]
    data = _dir(tmp_path, {"step_trace_raw_0_detail_time.csv": f"{head}\n{row.rsplit(',', 1)[0]}\n",
                           HCCL: HCCL_HEAD + '1,0,0,{},"{}"\n'}, step_trace=False)
    p = _problem(data, "step_trace_raw_0_detail_time.csv")
    assert (p.reason, p.where) == ("row has 8 fields, header has 9", "line 2")
