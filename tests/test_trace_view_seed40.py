"""trace_view.json read by hand-written files: the cases the seed-40 mutation sample of
readers/trace_view.py found untested (a ProfilerStep without dur, a dur whose ns value is
exactly 2**63, a file that starts with a blank line, odd args on an event of a process that is
no device track). Values worked out in the comments (ts in us, start_ns = ts * 1000).
"""

from __future__ import annotations

import pytest

from ascendprof.model import schemas as S
from ascendprof.model.errors import InputError
from ascendprof.readers.trace_view import read_trace_view
from test_trace_view_by_hand import HW, PY, _meta, _rows, _write


def _hw(name, ts, dur=1.0):
    return {"ph": "X", "name": name, "pid": HW, "tid": 1, "ts": ts, "dur": dur,
            "args": {"Task Type": "AI_CORE"}}


def test_a_profiler_step_without_dur_lasts_zero_ns(tmp_path):
    """ProfilerStep#3 at 10 us has no "dur": missing dur -> 0 ns, so its step row is
    (start 10_000 ns, dur 0)."""
    events = [{"ph": "X", "name": "ProfilerStep#3", "pid": PY, "tid": 7, "ts": "10.000",
               "cat": "cpu_op"}, *_meta(PY, "Python")]
    assert [(r["name"], r["start_ns"], r["dur_ns"]) for r in _rows(_write(tmp_path, events), "step")
            ] == [("ProfilerStep#3", 10_000, 0)]


def test_a_dur_of_exactly_2_63_ns_is_refused_not_wrapped(tmp_path):
    """dur 9223372036854776.0 us (the float nearest 2**63 / 1000): * 1000 rounds to exactly
    2**63 ns, one past the int64 range. It must not come back as a wrapped (negative) int64
    duration: the reader refuses it (InputError, not a row)."""
    events = [_hw("k", "1.000", 9223372036854776.0), *_meta(HW, "Ascend Hardware")]
    with pytest.raises(InputError, match="unexpected trace event"):
        _rows(_write(tmp_path, events), "hardware")


def test_a_trace_starting_with_blank_lines_is_read(tmp_path):
    """A BOM and blank lines before the '[' are no error: the array form is recognised and the
    one task k (2 us) is read."""
    p = _write(tmp_path, [_hw("k", "2.000"), *_meta(HW, "Ascend Hardware")])
    p.write_bytes(b"\xef\xbb\xbf\n  \n" + p.read_bytes())
    assert [(r["name"], r["start_ns"]) for r in _rows(p, "hardware")] == [("k", 2_000)]


def test_events_of_a_named_host_process_are_not_looked_into(tmp_path):
    """pid 30 is named "Python" (no device track) before its X event without "cat", whose args
    is a string (not an object). Events of a process already known to be no device track are
    skipped without reading their args: no error, and the hardware task k is read."""
    events = [*_meta(PY, "Python"),
              {"ph": "X", "name": "odd", "pid": PY, "tid": 1, "ts": "1.000", "dur": 1.0,
               "args": "not an object"},
              _hw("k", "2.000"), *_meta(HW, "Ascend Hardware")]
    rows = read_trace_view(_write(tmp_path, events), 0)[S.TIMELINE].to_pylist()
    assert [(r["track"], r["name"]) for r in rows] == [("hardware", "k")]
