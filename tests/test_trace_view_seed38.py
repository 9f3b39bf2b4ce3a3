"""trace_view.json read by hand-written files: the cases the seed-38 mutation sample of
readers/trace_view.py found untested (a data-loader span starting exactly at its step's start,
a trace with steps but no device rows, the file named by a bad ProfilerStep ts, the wording of
an unexpected event shape, the byte position of a non-UTF-8 error, the fast reader's bounded
reads). Values worked out in the comments.
"""

from __future__ import annotations

import pytest

from ascendprof.model import schemas as S
from ascendprof.model.errors import InputError
from ascendprof.readers import trace_view
from ascendprof.readers.trace_view import read_trace_view
from test_trace_view_by_hand import PY, _meta, _rows, _write

LOADER = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"


def test_a_loader_span_starting_at_its_steps_start_belongs_to_that_step(tmp_path):
    """ProfilerStep#3 covers [100, 150.5) us, ProfilerStep#4 [150.5, 200) us. One loader span
    starts at 100.000 us (exactly the start of #3: in it, start <= ts), another at 150.500 us
    (the end of #3 = the start of #4: in #4 only, the window is half-open)."""
    events = [
        {"ph": "X", "name": "ProfilerStep#3", "pid": PY, "tid": 7, "ts": "100.000", "dur": 50.5,
         "cat": "cpu_op"},
        {"ph": "X", "name": "ProfilerStep#4", "pid": PY, "tid": 7, "ts": "150.500", "dur": 49.5,
         "cat": "cpu_op"},
        {"ph": "X", "name": LOADER, "pid": PY, "tid": 7, "ts": "100.000", "dur": 2.0,
         "cat": "cpu_op"},
        {"ph": "X", "name": LOADER, "pid": PY, "tid": 7, "ts": "150.500", "dur": 1.0,
         "cat": "cpu_op"},
        *_meta(PY, "Python", [(7, "Thread 7 main")]),
    ]
    loaders = _rows(_write(tmp_path, events), "dataloader")
    assert [(r["start_ns"], r["step"]) for r in loaders] == [(100_000, 3), (150_500, 4)]


def test_steps_without_device_rows_keep_their_exact_start(tmp_path):
    """Only a ProfilerStep#1 (no device process at all) at ts 1700000000000000.001 us: its row
    starts at exactly 1700000000000000001 ns (an int64; as a float64 it would be rounded to a
    multiple of 256 ns there), lasts 1 us = 1000 ns; and the one loader span too."""
    events = [
        {"ph": "X", "name": "ProfilerStep#1", "pid": PY, "tid": 7,
         "ts": "1700000000000000.001", "dur": 1.0, "cat": "cpu_op"},
        {"ph": "X", "name": LOADER, "pid": PY, "tid": 7, "ts": "1700000000000000.003",
         "dur": 0.5, "cat": "cpu_op"},
    ]
    t = read_trace_view(_write(tmp_path, events), 0)[S.TIMELINE]
    assert t.schema.field("start_ns").type == "int64"
    assert [(r["track"], r["start_ns"], r["dur_ns"], r["step"]) for r in t.to_pylist()] == [
        ("step", 1700000000000000001, 1000, 1),
        ("dataloader", 1700000000000000003, 500, 1)]


def test_a_bad_profiler_step_ts_names_the_file(tmp_path):
    """ProfilerStep#1 with ts "later": the error names the trace_view.json it is in."""
    p = _write(tmp_path, [{"ph": "X", "name": "ProfilerStep#1", "pid": PY, "tid": 7,
                           "ts": "later", "dur": 1.0, "cat": "cpu_op"}])
    with pytest.raises(InputError) as e:
        read_trace_view(p, 0)
    assert e.value.path == str(p)
    assert "later" in e.value.reason


def test_an_event_of_unexpected_shape_says_trace_event(tmp_path):
    """A device event whose pid is a list (unhashable as a process key): one InputError naming
    the file, its reason says what was unexpected: a trace event, with the built-in error."""
    p = _write(tmp_path, [{"ph": "X", "name": "k", "pid": [1], "tid": 1, "ts": "1.000",
                           "dur": 1.0}])
    with pytest.raises(InputError) as e:
        read_trace_view(p, 0)
    assert e.value.path == str(p)
    assert e.value.reason.startswith("unexpected trace event (TypeError: ")


def test_a_non_utf8_name_is_an_error_at_a_byte_inside_the_file(tmp_path):
    """A name holding the bytes ED A0 80 (a UTF-16 surrogate encoded as UTF-8: the JSON lexer
    lets it through, the text decoder refuses it). The exact reader reads in 64 KiB chunks, so
    for this small file the error position (bytes handed to the parser) is the file's size;
    in any case a byte between the bad bytes and the end, never a negative number."""
    p = tmp_path / "trace_view.json"
    head = b'[{"ph": "X", "name": "a'
    body = head + b'\xed\xa0\x80b", "pid": 1, "tid": 1, "ts": "1.000", "dur": 1.0}]'
    p.write_bytes(body)
    with pytest.raises(InputError) as e:
        read_trace_view(p, 0)
    assert e.value.reason == "not UTF-8 text"
    assert len(head) <= e.value.where <= len(body)
    assert e.value.where == len(body)


def test_the_fast_reader_reads_in_bounded_blocks(tmp_path, monkeypatch):
    """The fast reader bounds its memory by reading the file _BLOCK (1 MiB) bytes at a time
    (trace_view's module doc): every read it asks of the file is for a positive count of at
    most _BLOCK bytes, never 'the whole rest' (read() / read(None) / read(-1))."""
    asked = []

    class Spy:
        def __init__(self, f):
            self._f = f

        def read(self, n=-1):
            asked.append(n)
            return self._f.read(n)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self._f.close()
            return False

    real = trace_view.open_regular
    monkeypatch.setattr(trace_view, "open_regular", lambda path: Spy(real(path)))
    p = _write(tmp_path, [{"ph": "X", "name": f"k{i}", "pid": 1, "tid": 1, "ts": f"{i}.000",
                           "dur": 1.0} for i in range(3)] + _meta(1, "Ascend Hardware"))
    assert [r["name"] for r in _rows(p, "hardware")] == ["k0", "k1", "k2"]
    assert asked and all(type(n) is int and 0 < n <= trace_view._BLOCK for n in asked)
