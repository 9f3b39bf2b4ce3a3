"""trace_view.json reader (spec §A.7): streaming, metadata after events, exact ns, errors."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pyarrow.compute as pc
import pytest

from ascendprof.model import schemas as S
from ascendprof.model.errors import InputError
from ascendprof.readers.trace_view import iter_events, read_trace_view

LEVELS = "torch_npu-2rank-levels/text/level{}/rank{}_ascend_pt/ASCEND_PROFILER_OUTPUT"


def _write(tmp_path: Path, events, *, wrap=False) -> Path:
    p = tmp_path / "trace_view.json"
    p.write_text(json.dumps({"traceEvents": events} if wrap else events))
    return p


def _synthetic():
    """Hardware / overlap X events come before their M metadata (as the reader must allow)."""
    hw, ov, py = 1000 << 10 | 3, 2000 << 10 | 3, 77
    return [
        {"ph": "X", "name": "ProfilerStep#7", "pid": py, "tid": 1, "ts": "100.000", "dur": 50.0,
         "cat": "cpu_op", "args": {}},
        {"ph": "X", "name": "aten::mm", "pid": py, "tid": 1, "ts": "101.000", "dur": 2.0,
         "cat": "cpu_op"},
        {"ph": "X", "name": "MatMul", "pid": hw, "tid": 2, "ts": "1736412474714258.999",
         "dur": 3.25, "args": {"Task Type": "AI_CORE"}},
        {"ph": "X", "name": "Computing", "pid": ov, "tid": 0, "ts": "110.500", "dur": 1.25},
        {"ph": "X", "name": "x", "pid": 5555, "tid": 0, "ts": "1.000", "dur": 1.0},
        {"ph": "M", "name": "process_name", "pid": hw, "tid": 0, "args": {"name": "Ascend Hardware"}},
        {"ph": "M", "name": "process_labels", "pid": hw, "tid": 0, "args": {"labels": "NPU 3"}},
        {"ph": "M", "name": "thread_name", "pid": hw, "tid": 2, "args": {"name": "Stream 2"}},
        {"ph": "M", "name": "process_name", "pid": ov, "tid": 0, "args": {"name": "Overlap Analysis"}},
        {"ph": "M", "name": "thread_name", "pid": ov, "tid": 0, "args": {"name": "Computing"}},
        {"ph": "M", "name": "process_name", "pid": 5555, "tid": 0, "args": {"name": "HBM"}},
    ]


@pytest.mark.parametrize("wrap", [False, True])
def test_metadata_after_events_and_exact_ns(tmp_path, wrap):
    out = read_trace_view(_write(tmp_path, _synthetic(), wrap=wrap), rank=4)
    tl = out[S.TIMELINE]
    rows = {r["track"]: r for r in tl.to_pylist()}
    assert set(rows) == {"hardware", "overlap", "step"}  # HBM and aten::mm dropped
    hw = rows["hardware"]
    assert (hw["process"], hw["thread"], hw["task_type"], hw["rank"]) == (
        "Ascend Hardware", "Stream 2", "AI_CORE", 4)
    assert hw["start_ns"] == 1736412474714258999  # exact, not via float
    assert hw["dur_ns"] == 3250  # 3.25 us
    assert rows["overlap"]["thread"] == "Computing" and rows["overlap"]["start_ns"] == 110_500
    assert rows["overlap"]["step"] == 7  # 100 us <= 110.5 us < 150 us
    assert rows["step"]["name"] == "ProfilerStep#7" and rows["step"]["step"] == 7
    assert json.loads(tl.schema.metadata[b"device_ids"]) == [3]
    steps = out[S.STEPS].to_pylist()
    assert [(s["step"], s["start_ns"], s["end_ns"]) for s in steps] == [(7, 100_000, 150_000)]
    assert tl.schema.remove_metadata().equals(S.SCHEMAS[S.TIMELINE].remove_metadata())


def test_truncated_json_reports_file_size(tmp_path):
    p = tmp_path / "trace_view.json"
    full = json.dumps(_synthetic()).encode()
    p.write_bytes(full[:200])
    with pytest.raises(InputError) as e:
        read_trace_view(p, 0)
    assert e.value.where == 200 and "truncated" in e.value.reason
    assert str(p) in str(e.value)


def test_invalid_json_exact_offset_and_streaming(tmp_path):
    good = b'[{"ph": "M", "name": "process_name", "pid": 1, "tid": 0, "args": {"name": "HCCL"}}, '
    p = tmp_path / "trace_view.json"
    p.write_bytes(good + b'{"ph": X}]')
    it = iter_events(p)
    assert next(it)["name"] == "process_name"  # yielded before the bad part is parsed
    with pytest.raises(InputError) as e:
        list(it)
    assert e.value.where == len(good) + len(b'{"ph": ')  # the 'X' that is not a JSON value


def test_not_json(tmp_path):
    p = tmp_path / "trace_view.json"
    p.write_bytes(b"hello")
    with pytest.raises(InputError):
        read_trace_view(p, 0)
    p.write_bytes(b"")
    with pytest.raises(InputError):
        read_trace_view(p, 0)


@pytest.mark.parametrize("level", [0, 2])
def test_real_trace_view_against_stdlib_parse(shared_data, level):
    """Row counts per track and the ProfilerStep window, checked against an independent parse."""
    path = shared_data / LEVELS.format(level, 0) / "trace_view.json"
    events = json.loads(path.read_text())
    pname = {e["pid"]: e["args"]["name"] for e in events
             if e.get("ph") == "M" and e["name"] == "process_name"}
    want = {"overlap": "Overlap Analysis", "communication": "HCCL", "hardware": "Ascend Hardware"}
    tl = read_trace_view(path, 0)[S.TIMELINE]
    for track, proc in want.items():
        n = sum(1 for e in events if e.get("ph") == "X" and pname.get(e["pid"]) == proc)
        assert tl.filter(pc.equal(tl["track"], track)).num_rows == n, track
    step = [e for e in events if e.get("ph") == "X" and e["name"].startswith("ProfilerStep#")]
    assert len(step) == 1
    st = tl.filter(pc.equal(tl["track"], "step")).to_pylist()[0]
    whole, frac = step[0]["ts"].split(".")
    assert st["start_ns"] == int(whole) * 1000 + int(frac)
    assert st["step"] == 50


def test_real_overlap_sums_equal_step_trace_time(shared_data):
    """The reader's overlap rows summed == the profiler's own step_trace_time.csv (level 2, rank 1)."""
    d = shared_data / LEVELS.format(2, 1)
    tl = read_trace_view(d / "trace_view.json", 1)[S.TIMELINE]
    with open(d / "step_trace_time.csv", newline="") as f:
        rep = next(csv.DictReader(f))
    for name in ("Computing", "Communication(Not Overlapped)", "Free", "Communication"):
        rows = tl.filter(pc.and_(pc.equal(tl["track"], "overlap"), pc.equal(tl["thread"], name)))
        got_us = pc.sum(rows["dur_ns"]).as_py() / 1000
        assert got_us == pytest.approx(float(rep[name]), abs=0.5), name  # per-event us rounding


def _many_blocks(monkeypatch):
    """Blocks of ~200 bytes: every few events end a block, so kept events of one process are
    held in several chunks (converted a block at a time) before their metadata arrives."""
    from ascendprof.readers import trace_view

    monkeypatch.setattr(trace_view, "_BLOCK", 200)


def test_events_kept_across_blocks_before_their_metadata(tmp_path, monkeypatch):
    _many_blocks(monkeypatch)
    hw, ov, hbm = 11, 22, 33
    events = []
    for i in range(6):  # interleaved: 6 hardware tasks, overlap rows on two threads, HBM noise
        events.append({"ph": "X", "name": f"k{i}", "pid": hw, "tid": 2, "ts": f"{1000 + i}.5",
                       "dur": 0.25})
        events.append({"ph": "X", "name": "Computing", "pid": ov, "tid": 0 if i % 2 else 9,
                       "ts": f"{2000 + i}.000", "dur": 1.0})
        events.append({"ph": "X", "name": "bad", "pid": hbm, "tid": 0, "ts": "not a time",
                       "dur": 1.0})
    # a dur given as text: the per-value conversion, as exact as the vectorised one
    events.append({"ph": "X", "name": "k6", "pid": hw, "tid": 2, "ts": "1006.5", "dur": "2.5"})
    events += [
        {"ph": "M", "name": "process_name", "pid": hw, "args": {"name": "Ascend Hardware"}},
        {"ph": "M", "name": "process_name", "pid": ov, "args": {"name": "Overlap Analysis"}},
        {"ph": "M", "name": "thread_name", "pid": ov, "tid": 0, "args": {"name": "Computing"}},
        {"ph": "M", "name": "thread_name", "pid": ov, "tid": 9, "args": {"name": "Overlap x"}},
        {"ph": "M", "name": "process_name", "pid": hbm, "args": {"name": "HBM"}},
    ]
    tl = read_trace_view(_write(tmp_path, events), 0)[S.TIMELINE].to_pylist()
    hw_rows = [(r["name"], r["start_ns"], r["dur_ns"]) for r in tl if r["track"] == "hardware"]
    # ts "1000.5" us = 1_000_500 ns; dur 0.25 us = 250 ns; "2.5" us = 2500 ns
    assert hw_rows == [(f"k{i}", 1_000_500 + 1000 * i, 250) for i in range(6)] + [
        ("k6", 1_006_500, 2500)]
    # only thread 0 ("Computing") of Overlap Analysis: events 1, 3, 5 (odd i)
    ov_rows = [(r["thread"], r["start_ns"]) for r in tl if r["track"] == "overlap"]
    assert ov_rows == [("Computing", 2_000_000 + 1000 * i) for i in (1, 3, 5)]
    # the HBM events' unreadable ts is no error: they are not device rows


def test_bad_ts_of_a_kept_event_named_before_a_bad_dur(tmp_path, monkeypatch):
    _many_blocks(monkeypatch)
    hw, comm = 11, 22
    events = [{"ph": "X", "name": "first", "pid": hw, "tid": 1, "ts": "5.0", "dur": [1]}]
    events += [{"ph": "X", "name": f"k{i}", "pid": hw, "tid": 1, "ts": "6.0", "dur": 1.0}
               for i in range(5)]
    events += [{"ph": "X", "name": "late", "pid": comm, "tid": 1, "ts": "soon", "dur": 1.0},
               {"ph": "M", "name": "process_name", "pid": hw, "args": {"name": "Ascend Hardware"}},
               {"ph": "M", "name": "process_name", "pid": comm, "args": {"name": "HCCL"}}]
    p = _write(tmp_path, events)
    with pytest.raises(InputError) as e:
        read_trace_view(p, 0)
    # the ts error of event 'late' wins over the earlier event's list-valued dur
    assert "'late'" in e.value.reason and "'ts'" in e.value.reason and "soon" in e.value.reason
    events[-3]["ts"] = "7.0"  # with the ts mended, the dur of 'first' is the error
    with pytest.raises(InputError) as e:
        read_trace_view(_write(tmp_path, events), 0)
    assert "'late'" not in str(e.value)
