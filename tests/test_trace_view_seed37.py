"""trace_view.json (spec §A.7) read by ``read_trace_view``: the cases the seed-37 mutation
sample of readers/trace_view.py found untested (a dur past int64 ns, the lower-case
``task type`` key, a Task Type that is no text, the names of a step / loader row whose process
or thread has no name, the origin of windows without flows). Small traces written by hand with
the helpers of test_trace_view_by_hand.py; expected rows worked out in the comments.
"""

from __future__ import annotations

import pytest

from ascendprof.model import schemas as S
from ascendprof.model.errors import InputError
from ascendprof.readers.trace_view import read_trace_view
from test_trace_view_by_hand import HW, _meta, _rows, _write


def test_a_dur_past_int64_ns_is_an_error_not_a_wrapped_number(tmp_path):
    """dur 1e16 us = 1e19 ns, past int64 (2^63 - 1 = 9.22e18): the file is refused naming it,
    not read with a wrapped (negative) duration. dur 1e15 us = 1e18 ns still fits."""
    ok = [*_meta(HW, "Ascend Hardware"),
          {"ph": "X", "name": "k", "pid": HW, "tid": 1, "ts": "1.000", "dur": 1e15}]
    assert [r["dur_ns"] for r in _rows(_write(tmp_path, ok), "hardware")] == [10 ** 18]
    bad = [*_meta(HW, "Ascend Hardware"),
           {"ph": "X", "name": "k", "pid": HW, "tid": 1, "ts": "1.000", "dur": 1e16}]
    with pytest.raises(InputError) as e:
        read_trace_view(_write(tmp_path, bad), 0)
    assert e.value.path.endswith("trace_view.json")


def test_task_type_is_also_read_from_the_lower_case_key(tmp_path):
    """Some exports write args "task type": the same task type column as "Task Type"."""
    events = [*_meta(HW, "Ascend Hardware"),
              {"ph": "X", "name": "a", "pid": HW, "tid": 1, "ts": "1.000", "dur": 1.0,
               "args": {"task type": "AI_VECTOR_CORE"}},
              {"ph": "X", "name": "b", "pid": HW, "tid": 1, "ts": "2.000", "dur": 1.0,
               "args": {"Task Type": "AI_CORE"}}]
    assert [(r["name"], r["task_type"]) for r in _rows(_write(tmp_path, events), "hardware")] == [
        ("a", "AI_VECTOR_CORE"), ("b", "AI_CORE")]


def test_a_task_type_that_is_no_text_is_kept_as_its_text(tmp_path):
    """A Task Type written as a JSON list or number is not refused: its text is the task type."""
    events = [*_meta(HW, "Ascend Hardware"),
              {"ph": "X", "name": "a", "pid": HW, "tid": 1, "ts": "1.000", "dur": 1.0,
               "args": {"Task Type": ["AI_CORE"]}},
              {"ph": "X", "name": "b", "pid": HW, "tid": 1, "ts": "2.000", "dur": 1.0,
               "args": {"Task Type": 3}}]
    assert [(r["name"], r["task_type"]) for r in _rows(_write(tmp_path, events), "hardware")] == [
        ("a", "['AI_CORE']"), ("b", "3")]


def test_step_and_loader_rows_of_unnamed_processes_and_threads(tmp_path):
    """ProfilerStep#1 and a data-loader span on pid 7 / tid 8, for which no process_name or
    thread_name metadata exists: their rows name them "Process 7" / "Thread 8". Without any
    async_npu flow the step's window is from the tasks starting in it, and its origin says so."""
    events = [*_meta(HW, "Ascend Hardware"),
              {"ph": "X", "name": "ProfilerStep#1", "cat": "python_function", "pid": 7, "tid": 8,
               "ts": "0.000", "dur": 10.0},
              {"ph": "X", "name": "enumerate(DataLoader)#_next_data", "cat": "python_function",
               "pid": 7, "tid": 8, "ts": "1.000", "dur": 1.0},
              {"ph": "X", "name": "k", "pid": HW, "tid": 1, "ts": "2.000", "dur": 1.0}]
    out = read_trace_view(_write(tmp_path, events), 0)
    rows = [(r["track"], r["process"], r["thread"], r["step"])
            for r in out[S.TIMELINE].to_pylist() if r["track"] in ("step", "dataloader")]
    assert rows == [("step", "Process 7", "Thread 8", 1), ("dataloader", "Process 7", "Thread 8", 1)]
    assert out[S.STEPS].column("origin").to_pylist() == [
        "trace_view ProfilerStep# (no async_npu flows: tasks starting in the step)"]
