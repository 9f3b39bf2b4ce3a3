"""trace_view.json (spec §A.7) read by ``read_trace_view``, case by case on small traces written
by hand: which hardware tasks are communication, the ProfilerStep and data-loader rows, the
error of a bad ``ts`` and of a file that cannot be re-read, the exact offset of an error past
the first chunks, and the fast reader taking the ``{"traceEvents": [...]}`` form.

Values are chosen here and the expected rows worked out in the comments (ts in us as text,
start_ns = ts * 1000 exactly, dur_ns = round(dur * 1000)).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ascendprof.model import schemas as S
from ascendprof.model.errors import InputError
from ascendprof.readers import trace_view
from ascendprof.readers.trace_view import iter_events, read_trace_view

HW, HCCL, PY = 10, 20, 30


def _write(tmp_path: Path, events, *, wrap=False) -> Path:
    p = tmp_path / "trace_view.json"
    p.write_text(json.dumps({"traceEvents": events} if wrap else events))
    return p


def _meta(pid, name, threads=()):
    out = [{"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": name}}]
    out += [{"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": t}}
            for tid, t in threads]
    return out


def _rows(path, track):
    return [r for r in read_trace_view(path, 0)[S.TIMELINE].to_pylist() if r["track"] == track]


# ------------------------------------------------------------------ communication tasks

def test_hardware_tasks_of_hccl_ops_are_communication(tmp_path):
    """Hardware events come first in the file (as in torch_npu's export). Task 'a' shares
    connection_id 5 with the big op on "Group g Communication"; task 'b' runs on stream 9,
    which carries the HCCL small task of "Plane 0"; task 'c' is neither."""
    events = [
        {"ph": "X", "name": "a", "pid": HW, "tid": 3, "ts": "1.000", "dur": 1.0,
         "args": {"Task Type": "Other", "connection_id": 5}},
        {"ph": "X", "name": "b", "pid": HW, "tid": 9, "ts": "2.000", "dur": 1.0,
         "args": {"Task Type": "Other"}},
        {"ph": "X", "name": "c", "pid": HW, "tid": 4, "ts": "3.000", "dur": 1.0,
         "args": {"Task Type": "AI_CORE", "connection_id": 6}},
        {"ph": "X", "name": "hcom_allReduce_1", "pid": HCCL, "tid": 1, "ts": "1.000", "dur": 3.0,
         "args": {"connection_id": 5}},
        {"ph": "X", "name": "Notify_Wait", "pid": HCCL, "tid": 2, "ts": "2.000", "dur": 1.0,
         "args": {"stream id": 9}},
        *_meta(HW, "Ascend Hardware"),
        *_meta(HCCL, "HCCL", [(1, "Group g Communication"), (2, "Plane 0")]),
    ]
    got = {r["name"]: r["category"] for r in _rows(_write(tmp_path, events), "hardware")}
    assert got == {"a": "communication", "b": "communication", "c": None}


# ------------------------------------------------------------------ step and data-loader rows

def test_profiler_step_and_data_loader_rows(tmp_path):
    """ProfilerStep#3 [100, 150.5) us of the python thread; the loader span starts inside it,
    so its step is 3; both rows name the process and thread of their events."""
    events = [
        {"ph": "X", "name": "ProfilerStep#3", "pid": PY, "tid": 7, "ts": "100.000", "dur": 50.5,
         "cat": "cpu_op"},
        {"ph": "X", "name": "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__",
         "pid": PY, "tid": 7, "ts": "101.000", "dur": 2.25, "cat": "cpu_op"},
        *_meta(PY, "Python", [(7, "Thread 7 main")]),
    ]
    p = _write(tmp_path, events)
    (step,) = _rows(p, "step")
    assert (step["name"], step["step"], step["start_ns"], step["dur_ns"]) == (
        "ProfilerStep#3", 3, 100_000, 50_500)
    (loader,) = _rows(p, "dataloader")
    assert (loader["process"], loader["thread"], loader["step"], loader["dur_ns"]) == (
        "Python", "Thread 7 main", 3, 2250)


# ------------------------------------------------------------------ errors

def test_a_bad_ts_names_the_event_and_its_process(tmp_path):
    events = [{"ph": "X", "name": "ProfilerStep#1", "pid": PY, "tid": 7, "ts": "later",
               "dur": 1.0, "cat": "cpu_op"}]
    with pytest.raises(InputError) as e:
        read_trace_view(_write(tmp_path, events), 0)
    assert e.value.where == f"event 'ProfilerStep#1' pid {PY}"


def test_an_empty_ts_among_text_ts_is_an_error(tmp_path):
    """One kept device event has ts "" (all others are text numbers): no number, an error
    naming that event, not a row at some time."""
    events = [{"ph": "X", "name": f"k{i}", "pid": HW, "tid": 1, "ts": f"{i}.000", "dur": 1.0}
              for i in range(3)]
    events.append({"ph": "X", "name": "empty", "pid": HW, "tid": 1, "ts": "", "dur": 1.0})
    events += _meta(HW, "Ascend Hardware")
    with pytest.raises(InputError) as e:
        read_trace_view(_write(tmp_path, events), 0)
    assert "'empty'" in e.value.reason and "'ts'" in e.value.reason


def _gone_after(monkeypatch, n):
    """open_regular fails (the file was removed) from its ``n``-th call on."""
    real, calls = trace_view.open_regular, [0]

    def opener(path, *a, **k):
        calls[0] += 1
        if calls[0] >= n:
            raise FileNotFoundError(2, "No such file or directory", str(path))
        return real(path, *a, **k)

    monkeypatch.setattr(trace_view, "open_regular", opener)


@pytest.mark.parametrize("n", [1, 2])
def test_a_file_removed_before_the_fast_read_is_named(tmp_path, monkeypatch, n):
    """n=1: gone before the first look at its start; n=2: the first look works, the block
    reader's open does not."""
    p = _write(tmp_path, _meta(HW, "Ascend Hardware"))
    _gone_after(monkeypatch, n)
    with pytest.raises(InputError) as e:
        read_trace_view(p, 0)
    assert e.value.path == str(p) and e.value.reason.startswith("cannot read")


def test_a_file_removed_before_the_exact_reader_rereads_it_is_named(tmp_path, monkeypatch):
    """A 1e999 ts (orjson refuses it) hands the file to ijson, which opens it again."""
    p = tmp_path / "trace_view.json"
    p.write_text('[{"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": 1e999, "dur": 1}]')
    _gone_after(monkeypatch, 3)
    with pytest.raises(InputError) as e:
        read_trace_view(p, 0)
    assert e.value.path == str(p) and e.value.reason.startswith("cannot read")


def test_invalid_json_past_the_first_chunks_has_its_exact_offset(tmp_path):
    """About 3.5 chunks (64 KiB each) of valid events, then a bare X: the offset is that of
    the X, found by re-feeding the whole good prefix."""
    ev = b'{"ph": "M", "name": "process_name", "pid": 1, "tid": 0, "args": {"name": "HCCL"}}, '
    good = b"[" + ev * (230_000 // len(ev))
    assert len(good) > 3 * trace_view._CHUNK
    p = tmp_path / "trace_view.json"
    p.write_bytes(good + b'{"ph": X}]')
    with pytest.raises(InputError) as e:
        list(iter_events(p))
    assert e.value.where == len(good) + len(b'{"ph": ')


# ------------------------------------------------------------------ the fast reader

def test_the_object_form_is_read_without_the_slow_parser(tmp_path, monkeypatch):
    """{"traceEvents": [...]} is cut into blocks by the orjson reader like a bare array: ijson
    (5x slower, for damaged or odd files only) is not needed."""
    def slow(*a, **k):
        raise AssertionError("ijson used for a plain object-form trace")

    monkeypatch.setattr(trace_view, "_ijson_events", slow)
    events = [{"ph": "X", "name": "k", "pid": HW, "tid": 1, "ts": "1.000", "dur": 1.0},
              *_meta(HW, "Ascend Hardware")]
    rows = _rows(_write(tmp_path, events, wrap=True), "hardware")
    assert [(r["name"], r["start_ns"]) for r in rows] == [("k", 1000)]
