"""trace_view.json read by hand-written files: the cases the seed-39 mutation sample of
readers/trace_view.py found untested (overlapping step windows, a device process that is never
named standing before a named one, an Overlap Analysis block with no kept thread next to
exact large timestamps, ProfilerStep numbers out of time order, a data-loader span outside
every step). Values worked out in the comments (ts in us as text, start_ns = ts * 1000).
"""

from __future__ import annotations

from ascendprof.model import schemas as S
from ascendprof.readers.trace_view import read_trace_view
from test_trace_view_by_hand import HW, PY, _meta, _rows, _write

LOADER = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"


def _step(n, ts, dur):
    return {"ph": "X", "name": f"ProfilerStep#{n}", "pid": PY, "tid": 7, "ts": ts, "dur": dur,
            "cat": "cpu_op"}


def _hw(name, ts, dur=1.0, pid=HW):
    return {"ph": "X", "name": name, "pid": pid, "tid": 1, "ts": ts, "dur": dur,
            "args": {"Task Type": "AI_CORE"}}


def test_where_windows_overlap_the_earlier_starting_one_wins(tmp_path):
    """No async_npu flows: a step's tasks are the device tasks starting inside its event.
    ProfilerStep#1 [0, 100] us holds tasks a (5 us) and b (20 us): window [5, 100) us.
    ProfilerStep#2 [10, 50] us (nested in #1) holds b only: window [20, 50) us.
    Task b (20 us) is in both windows; the earlier-starting one (#1, from 5 us) wins, although
    #2 ends first. Task a is in #1 only."""
    events = [_step(1, "0.000", 100.0), _step(2, "10.000", 40.0),
              _hw("a", "5.000"), _hw("b", "20.000"),
              *_meta(HW, "Ascend Hardware"), *_meta(PY, "Python")]
    p = _write(tmp_path, events)
    steps = read_trace_view(p, 0)[S.STEPS].to_pylist()
    assert [(r["step"], r["start_ns"], r["end_ns"]) for r in steps] == [
        (1, 5_000, 100_000), (2, 20_000, 50_000)]
    assert {r["name"]: r["step"] for r in _rows(p, "hardware")} == {"a": 1, "b": 1}


def test_an_unnamed_device_process_before_a_named_one_drops_only_its_own_rows(tmp_path):
    """Device events of pid 99 come first, and no process_name ever names pid 99 (so it is no
    TIMELINE track); then the Ascend Hardware task k. Only pid 99's row is dropped: k stays."""
    events = [_hw("ghost", "1.000", pid=99), _hw("k", "2.000"), *_meta(HW, "Ascend Hardware")]
    rows = read_trace_view(_write(tmp_path, events), 0)[S.TIMELINE].to_pylist()
    assert [(r["track"], r["name"], r["start_ns"]) for r in rows] == [("hardware", "k", 2_000)]


def test_an_overlap_block_without_kept_threads_keeps_exact_large_starts(tmp_path):
    """The Overlap Analysis process has one event, on a thread that is not one of the four
    overlap threads, with a numeric ts (so it goes the one-by-one conversion path and then
    is dropped: an empty column). The hardware task k starts at 1700000000000000.001 us =
    1700000000000000001 ns: it stays exact (an int64; through float64 it would become a
    multiple of 256 ns, 1700000000000000000)."""
    events = [{"ph": "X", "name": "x", "pid": 2, "tid": 9, "ts": 1.0, "dur": 1.0},
              *_meta(2, "Overlap Analysis", [(9, "Other")]),
              _hw("k", "1700000000000000.001"), *_meta(HW, "Ascend Hardware")]
    t = read_trace_view(_write(tmp_path, events), 0)[S.TIMELINE]
    assert [(r["track"], r["name"], r["start_ns"]) for r in t.to_pylist()] == [
        ("hardware", "k", 1700000000000000001)]


def test_steps_are_listed_in_time_order_not_by_number(tmp_path):
    """ProfilerStep#5 starts at 0 us, ProfilerStep#4 at 100 us (numbers out of time order, e.g.
    a restarted step counter). STEPS lists the windows in time order: #5 [0, 10), then #4
    [100, 110) (no device tasks: the windows are the ProfilerStep events)."""
    events = [_step(5, "0.000", 10.0), _step(4, "100.000", 10.0), *_meta(PY, "Python")]
    steps = read_trace_view(_write(tmp_path, events), 0)[S.STEPS].to_pylist()
    assert [(r["step"], r["start_ns"], r["end_ns"]) for r in steps] == [
        (5, 0, 10_000), (4, 100_000, 110_000)]


def test_a_loader_span_outside_every_step_has_no_step(tmp_path):
    """ProfilerStep#1 covers [100, 150) us; one loader span starts at 10 us (before it), one
    at 120 us (inside). The first has a null step, the second step 1."""
    events = [_step(1, "100.000", 50.0),
              {"ph": "X", "name": LOADER, "pid": PY, "tid": 7, "ts": "10.000", "dur": 1.0,
               "cat": "cpu_op"},
              {"ph": "X", "name": LOADER, "pid": PY, "tid": 7, "ts": "120.000", "dur": 1.0,
               "cat": "cpu_op"},
              *_meta(PY, "Python")]
    loaders = _rows(_write(tmp_path, events), "dataloader")
    assert [(r["start_ns"], r["step"]) for r in loaders] == [(10_000, None), (120_000, 1)]
