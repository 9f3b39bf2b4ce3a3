"""trace_view.json (spec §A.7) by hand: the process and thread of ProfilerStep rows, the step of
device rows in later step windows, step windows through async_npu flows, exact int64 durations,
the reasons of errors, and a many-block file read without the slow parser.

ts is text in us (start_ns = ts * 1000 exactly), dur a number in us (dur_ns = round(dur * 1000));
the expected rows are worked out in the comments.
"""

from __future__ import annotations

import pytest

from ascendprof.model import schemas as S
from ascendprof.model.errors import InputError
from ascendprof.readers import trace_view
from ascendprof.readers.trace_view import read_trace_view
from test_trace_view_by_hand import HW, PY, _meta, _write


def _step(n, ts, dur):
    return {"ph": "X", "name": f"ProfilerStep#{n}", "pid": PY, "tid": 7, "ts": ts, "dur": dur,
            "cat": "cpu_op"}


def _task(name, ts, dur, tid=1):
    return {"ph": "X", "name": name, "pid": HW, "tid": tid, "ts": ts, "dur": dur,
            "args": {"Task Type": "AI_CORE"}}


def test_a_step_row_names_the_process_and_thread_of_its_event(tmp_path):
    events = [_step(3, "100.000", 50.0),
              *_meta(PY, "Python", [(7, "Thread 7 main")])]
    out = read_trace_view(_write(tmp_path, events), 0)[S.TIMELINE].to_pylist()
    (row,) = [r for r in out if r["track"] == "step"]
    assert (row["process"], row["thread"], row["name"]) == ("Python", "Thread 7 main",
                                                            "ProfilerStep#3")


def test_device_rows_of_each_step_window_get_that_step(tmp_path):
    """No flows: ProfilerStep#1 [0, 10) us and #2 [10, 20) us; task a starts at 2 us, task b at
    12 us, task c at 25 us (after both). A window starts at its first task and ends at the later
    of the step's end and its tasks' ends: #1 [2000, 10000], #2 [12000, 20000] ns, so a is in
    step 1, b in step 2, c in none."""
    events = [_step(1, "0.000", 10.0), _step(2, "10.000", 10.0),
              _task("a", "2.000", 1.0), _task("b", "12.000", 1.0), _task("c", "25.000", 1.0),
              *_meta(HW, "Ascend Hardware"), *_meta(PY, "Python")]
    out = read_trace_view(_write(tmp_path, events), 0)
    rows = {r["name"]: r["step"] for r in out[S.TIMELINE].to_pylist() if r["track"] == "hardware"}
    assert rows == {"a": 1, "b": 2, "c": None}
    steps = [(s["step"], s["start_ns"], s["end_ns"]) for s in out[S.STEPS].to_pylist()]
    assert steps == [(1, 2_000, 10_000), (2, 12_000, 20_000)]


def test_a_task_linked_by_its_flow_stretches_its_step_window(tmp_path):
    """ProfilerStep#1 [0, 10] us. Task k runs on the device [15, 17] us, after the step event,
    but its async_npu flow starts on the host at 5 us, inside the step: with flows the window is
    [min start of linked tasks, max(step end, their end)] = [15000, 17000] ns and k is in it;
    without the flows it would be [0, 10000] with k outside."""
    events = [_step(1, "0.000", 10.0), _task("k", "15.000", 2.0),
              {"ph": "s", "cat": "async_npu", "id": 1, "pid": PY, "tid": 7, "ts": "5.000",
               "name": "launch"},
              {"ph": "f", "cat": "async_npu", "id": 1, "pid": HW, "tid": 1, "ts": "15.000",
               "name": "launch", "bp": "e"},
              *_meta(HW, "Ascend Hardware"), *_meta(PY, "Python")]
    out = read_trace_view(_write(tmp_path, events), 0)
    (s,) = out[S.STEPS].to_pylist()
    assert (s["step"], s["start_ns"], s["end_ns"]) == (1, 15_000, 17_000)
    assert s["origin"] == "trace_view ProfilerStep# + async_npu flows"
    (k,) = [r for r in out[S.TIMELINE].to_pylist() if r["track"] == "hardware"]
    assert k["step"] == 1


def test_durations_stay_exact_int64_beyond_float_precision(tmp_path):
    """A task of dur "9007199254741.001" us = 9007199254741001 ns: above 2**53, where a float64
    holds only even integers, so the row must keep the exact odd value (no step events)."""
    events = [_task("long", "1.000", "9007199254741.001"), *_meta(HW, "Ascend Hardware")]
    (row,) = read_trace_view(_write(tmp_path, events), 0)[S.TIMELINE].to_pylist()
    assert 9007199254741001 > 2**53
    assert row["dur_ns"] == 9007199254741001


def test_invalid_json_is_not_called_truncated(tmp_path):
    p = tmp_path / "trace_view.json"
    p.write_bytes(b'[{"ph": X}]')
    with pytest.raises(InputError) as e:
        read_trace_view(p, 0)
    assert e.value.reason.startswith("invalid JSON: ") and "truncated" not in e.value.reason


def test_a_file_that_is_no_json_trace_says_so(tmp_path):
    p = tmp_path / "trace_view.json"
    p.write_bytes(b"hello")
    with pytest.raises(InputError) as e:
        read_trace_view(p, 0)
    assert e.value.reason == "not a JSON trace (expected '[' or '{')" and e.value.where == 0
    p.write_bytes(b"")
    with pytest.raises(InputError) as e:
        read_trace_view(p, 0)
    assert e.value.reason == "empty file" and e.value.where == 0


def test_a_many_block_trace_is_cut_at_event_boundaries_without_the_slow_parser(tmp_path,
                                                                                 monkeypatch):
    """60 plain events (~100 bytes each) with blocks of 200 bytes and a buffer limit of 2000:
    every block is cut at an event boundary and parsed by orjson; ijson (the exact reader for
    damaged files) is never needed, and every task is read once in file order."""
    def slow(*a, **k):
        raise AssertionError("ijson used for a plain trace")

    monkeypatch.setattr(trace_view, "_BLOCK", 200)
    monkeypatch.setattr(trace_view, "_MAX_BUFFER", 2000)
    monkeypatch.setattr(trace_view, "_ijson_events", slow)
    events = [_task(f"k{i}", f"{i}.000", 1.0) for i in range(60)] + _meta(HW, "Ascend Hardware")
    p = _write(tmp_path, events)
    assert p.stat().st_size > 3 * 2000
    rows = read_trace_view(p, 0)[S.TIMELINE].to_pylist()
    assert [(r["name"], r["start_ns"]) for r in rows] == [(f"k{i}", i * 1000) for i in range(60)]
