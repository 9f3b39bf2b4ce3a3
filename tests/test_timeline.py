"""The merged cluster timeline (`ascendprof timeline`), read back and checked against the
profiler's own files.

Expected values come from the input files themselves, parsed here with the standard library:
kernel_details.csv rows (Start Time(us) as an exact decimal), communication.json ops and
profiler_metadata.json's parallel_group_info; the structural properties (nesting per track,
flows joining exactly a group's members, monotonic time per track) are checked on the written
trace. The Perfetto file is parsed back with the perfetto package's own Trace message.
"""

from __future__ import annotations

import csv
import json
from collections import Counter, defaultdict
from decimal import Decimal
from pathlib import Path

import orjson
import pyarrow as pa
import pytest
from click.testing import CliRunner

from ascendprof.analyze import timeline as T
from ascendprof.cli.main import main
from tests.conftest import QWEN3

COMM_CORES = {"COMMUNICATION", "HCCL"}


def _run(*args):
    r = CliRunner().invoke(main, ["timeline", *map(str, args)])
    return r


def _expected_qwen3():
    """From the profiler's files: per rank the device tasks (kernel_details rows that are not
    communication ops) as (name, start ns, dur ns), and the communication ops per group."""
    tasks, ops = {}, {}
    for rank in range(4):
        out = QWEN3 / f"rank_{rank}_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
        kd = out / "kernel_details.csv"
        rows = []
        if kd.exists():
            with kd.open(newline="") as f:
                for row in csv.DictReader(f):
                    if row["Accelerator Core"] in COMM_CORES:
                        continue
                    start = int(Decimal(row["Start Time(us)"].strip()) * 1000)
                    dur = int(Decimal(row["Duration(us)"].strip()) * 1000)
                    rows.append((row["Name"], start, dur))
        tasks[rank] = rows
        comm = json.loads((out / "communication.json").read_text())
        ops[rank] = [(kind, name) for step in comm.values() for kind, d in step.items()
                     for name in d if name != "Total Op Info"]
    return tasks, ops


def _groups():
    meta = json.loads((QWEN3 / "rank_0_ascend_pt" / "profiler_metadata.json").read_text())
    out = {}
    for rank in range(4):
        m = json.loads((QWEN3 / f"rank_{rank}_ascend_pt" / "profiler_metadata.json").read_text())
        for info in m["parallel_group_info"].values():
            out.setdefault(info["group_name"], set()).add(tuple(info["global_ranks"]))
    del meta
    return out


@pytest.fixture(scope="module")
def chrome(tmp_path_factory):
    out = tmp_path_factory.mktemp("tl") / "trace.json"
    r = _run(QWEN3, "-o", out, "-q")
    assert r.exit_code == 0, r.output
    return orjson.loads(out.read_bytes()), r.output


def _slices(doc):
    threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in doc["traceEvents"]
               if e["ph"] == "M" and e["name"] == "thread_name"}
    return [e for e in doc["traceEvents"] if e["ph"] == "X"], threads


def test_chrome_events_are_the_profilers_tasks_and_ops(chrome):
    doc, _ = chrome
    base = doc["otherData"]["ts_base_ns"]
    tasks, ops = _expected_qwen3()
    slices, threads = _slices(doc)
    by_rank = defaultdict(list)
    for e in slices:
        by_rank[e["pid"]].append(e)
    for rank in range(4):
        got_tasks = sorted((e["name"], base + round(Decimal(str(e["ts"])) * 1000),
                            round(Decimal(str(e["dur"])) * 1000))
                           for e in by_rank[rank] if threads[(rank, e["tid"])].startswith("Stream"))
        assert got_tasks == sorted(tasks[rank]), rank
        got_ops = Counter(e["name"] for e in by_rank[rank]
                          if threads[(rank, e["tid"])].startswith("Communication"))
        assert got_ops == Counter(name.split("@")[0] for _, name in ops[rank]), rank


def test_chrome_process_names_carry_stage_and_dp(chrome):
    doc, _ = chrome
    names = {e["pid"]: e["args"]["name"] for e in doc["traceEvents"]
             if e["ph"] == "M" and e["name"] == "process_name"}
    # Megatron layout of TP1 PP2 DP2 (profiler_metadata distributed_args): ranks 0,1 stage 0
    assert names == {0: "rank 0 (stage 0, dp 0)", 1: "rank 1 (stage 0, dp 1)",
                     2: "rank 2 (stage 1, dp 0)", 3: "rank 3 (stage 1, dp 1)"}


def _check_nesting(intervals):
    """intervals: (start, end) of one track in file order; returns violations (partial
    overlaps) and whether starts are monotonic."""
    stack, bad, last = [], 0, None
    monotonic = True
    for s, e in intervals:
        if last is not None and s < last:
            monotonic = False
        last = s
        while stack and stack[-1] <= s:
            stack.pop()
        if stack and e > stack[-1]:
            bad += 1
        stack.append(e)
    return bad, monotonic


def test_chrome_tracks_nest_and_are_monotonic(chrome):
    doc, _ = chrome
    slices, _ = _slices(doc)
    tracks = defaultdict(list)
    for e in slices:
        s = round(Decimal(str(e["ts"])) * 1000)
        tracks[(e["pid"], e["tid"])].append((s, s + round(Decimal(str(e["dur"])) * 1000)))
    assert len(tracks) >= 8
    for key, iv in tracks.items():
        bad, monotonic = _check_nesting(iv)
        assert bad == 0 and monotonic, key


def test_chrome_flows_join_every_member_of_one_collective(chrome):
    doc, _ = chrome
    slices, threads = _slices(doc)
    by_id = defaultdict(list)
    for e in doc["traceEvents"]:
        if e["ph"] in "stf":
            by_id[e["id"]].append(e)
    groups = _groups()
    assert by_id
    for fid, members in by_id.items():
        phases = [m["ph"] for m in members]
        assert phases[0] == "s" and phases[-1] == "f" and set(phases[1:-1]) <= {"t"}
        assert members[-1]["bp"] == "e"
        assert len({m["name"] for m in members}) == 1  # one op instance
        pids = tuple(sorted(m["pid"] for m in members))
        # the members are exactly the global ranks of the op's communication group
        track = threads[(members[0]["pid"], members[0]["tid"])]
        gname = track.removeprefix("Communication ")
        assert pids in groups[gname], (fid, pids, gname)
        for m in members:  # each flow end sits on a slice of the same op on that rank
            assert any(s["pid"] == m["pid"] and s["tid"] == m["tid"] and s["ts"] == m["ts"]
                       and s["name"] == m["name"] for s in slices)


def test_skew_is_stated(chrome):
    doc, output = chrome
    assert "clock skew between ranks" in output
    skew = doc["otherData"]["clock_skew"]
    assert skew["instances"] > 0 and skew["raw_us"]["max"] >= skew["raw_us"]["median"] >= 0


def test_perfetto_reads_back_with_the_same_package(tmp_path):
    from perfetto.protos.perfetto.trace.perfetto_trace_pb2 import Trace, TrackEvent

    out = tmp_path / "t.pftrace"
    r = _run(QWEN3, "-o", out, "--format", "perfetto", "-q")
    assert r.exit_code == 0, r.output
    trace = Trace.FromString(out.read_bytes())
    tasks, ops = _expected_qwen3()
    names, parents = {}, {}
    begins, per_track = Counter(), defaultdict(list)
    flows_out, flows_end = Counter(), Counter()
    for p in trace.packet:
        if p.HasField("track_descriptor"):
            d = p.track_descriptor
            names[d.uuid] = d.thread.thread_name or d.process.process_name
            parents[d.uuid] = d.parent_uuid
        elif p.HasField("track_event"):
            te = p.track_event
            per_track[te.track_uuid].append((te.type, p.timestamp))
            if te.type == TrackEvent.TYPE_SLICE_BEGIN:
                begins[names[te.track_uuid].split(" ")[0]] += 1
                flows_out.update(te.flow_ids)
                flows_end.update(te.terminating_flow_ids)
    n_tasks = sum(len(v) for v in tasks.values())
    n_ops = sum(len(v) for v in ops.values())
    assert begins["Stream"] == n_tasks and begins["Communication"] == n_ops
    for uuid, evs in per_track.items():  # begin/end balanced, nested, time never goes back
        depth, last = 0, 0
        for typ, ts in evs:
            assert ts >= last
            last = ts
            depth += 1 if typ == TrackEvent.TYPE_SLICE_BEGIN else -1
            assert depth >= 0
        assert depth == 0, names[uuid]
    assert flows_end and set(flows_end) == set(flows_out)
    assert all(v == 1 for v in flows_end.values())


def test_ranks_steps_window_and_size_limit(tmp_path):
    out = tmp_path / "t.json"
    r = _run(QWEN3, "-o", out, "--ranks", "0,2", "-q")
    assert r.exit_code == 0, r.output
    doc = orjson.loads(out.read_bytes())
    assert {e["pid"] for e in doc["traceEvents"]} == {0, 2}
    r = _run(QWEN3, "-o", out, "--steps", "999", "-q")
    assert r.exit_code == 3 and "no rank has" in r.output
    # window: the first 100 ms of the collection keep only slices that start before it ends
    r = _run(QWEN3, "-o", out, "--window", "0:100", "-q")
    assert r.exit_code == 0, r.output
    doc = orjson.loads(out.read_bytes())
    slices, _ = _slices(doc)
    first = min(Decimal(str(e["ts"])) for e in slices)
    assert all(Decimal(str(e["ts"])) - first < 100_000 for e in slices)
    r = _run(QWEN3, "-o", out, "--max-size", "10KB", "-q")
    assert r.exit_code == 2 and "--max-size" in r.output
    r = _run(QWEN3, "-o", out, "--window", "5:1", "-q")
    assert r.exit_code == 2
    r = _run(QWEN3, "-o", QWEN3 / "x.json", "-q")
    assert r.exit_code == 2 and not (QWEN3 / "x.json").exists()


def _events(rows):
    """rows: (rank, track, name, start, dur, instance) -> an EVENT_SCHEMA table."""
    cols = list(zip(*rows))
    return pa.table({"rank": pa.array(cols[0], pa.int32()), "track": list(cols[1]),
                     "name": list(cols[2]), "cat": [None] * len(rows),
                     "start_ns": pa.array(cols[3], pa.int64()),
                     "dur_ns": pa.array(cols[4], pa.int64()),
                     "step": pa.nulls(len(rows), pa.int32()), "instance": list(cols[5]),
                     "args": ["{}"] * len(rows)}, schema=T.EVENT_SCHEMA)


def test_clock_skew_hand_case():
    # two all-reduces on ranks 0..2; rank 1's clock runs 490 ns ahead:
    # instance a ends at 100, 590, 100 -> median 100, deviations 0, 490, 0
    # instance b ends at 210, 700, 200 -> median 210, deviations 0, 490, -10
    ev = _events([(0, "c", "a", 0, 100, "g|s|a"), (1, "c", "a", 90, 500, "g|s|a"),
                  (2, "c", "a", 50, 50, "g|s|a"), (0, "c", "b", 200, 10, "g|s|b"),
                  (1, "c", "b", 600, 100, "g|s|b"), (2, "c", "b", 150, 50, "g|s|b")])
    skew = T.clock_skew(ev)
    assert skew["offset_ns"] == {0: 0, 1: 490, 2: -5}
    assert skew["instances"] == 2
    # |d| = 0, 490, 0, 0, 490, 10 -> median 5 ns, max 490 ns
    assert skew["raw_us"]["median"] == 0.005 and skew["raw_us"]["max"] == 0.49
    # after removing offsets: |d - off| = 0, 0, 5, 0, 0, 5 -> max 5 ns
    assert skew["residual_us"]["max"] == 0.005
    shifted = T.shift(ev, skew["offset_ns"])
    assert shifted.column("start_ns").to_pylist() == [0, -400, 55, 200, 110, 155]


def test_lanes_move_partial_overlaps_only():
    # A [0,10) holds C [1,3); B [5,15) overlaps A partially -> second lane; D [20,30) fits back
    ev = _events([(0, "Stream 1", "A", 0, 10, None), (0, "Stream 1", "B", 5, 10, None),
                  (0, "Stream 1", "C", 1, 2, None), (0, "Stream 1", "D", 20, 10, None)])
    got = T.lanes(ev)
    assert dict(zip(got.column("name").to_pylist(), got.column("track").to_pylist())) == {
        "A": "Stream 1", "C": "Stream 1", "B": "Stream 1 #2", "D": "Stream 1"}
    # a parent with the same start as its child comes first (longer first)
    ev = _events([(0, "s", "child", 0, 5, None), (0, "s", "parent", 0, 9, None)])
    assert T.lanes(ev).column("name").to_pylist() == ["parent", "child"]
    assert set(T.lanes(ev).column("track").to_pylist()) == {"s"}


def test_timeline_on_trace_view_and_db_exports(shared_data, tmp_path):
    """Text (kernel_details + communication.json) and db exports of one level give the same
    slices (the profiler exported one run both ways), and each joins its all-reduces."""
    got = {}
    for kind in ("text", "db"):
        out = tmp_path / f"{kind}.json"
        r = _run(shared_data / "torch_npu-2rank-levels" / kind / "level1", "-o", out, "-q")
        assert r.exit_code == 0, r.output
        doc = orjson.loads(out.read_bytes())
        slices, _ = _slices(doc)
        got[kind] = Counter(e["pid"] for e in slices)
        assert sum(1 for e in doc["traceEvents"] if e["ph"] == "s") >= 1
    assert got["text"] == got["db"]


def test_never_replaces_a_file_it_did_not_write(tmp_path):
    """The trace replaces only a trace ascendprof wrote (issue #17's rule for every output):
    a user's file, a symlink and a FIFO are refused with exit 2 before any work."""
    import os

    mine = tmp_path / "notes.json"
    mine.write_text('{"my": "notes"}')
    r = _run(QWEN3, "-o", mine, "-q")
    assert r.exit_code == 2 and "did not write" in r.output
    assert mine.read_text() == '{"my": "notes"}'
    target = tmp_path / "target.json"
    target.write_text("keep")
    link = tmp_path / "link.json"
    link.symlink_to(target)
    assert _run(QWEN3, "-o", link, "-q").exit_code == 2 and target.read_text() == "keep"
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    assert _run(QWEN3, "-o", fifo, "-q").exit_code == 2
    for fmt, name in (("chrome", "t.json"), ("perfetto", "t.pftrace")):  # its own: replaced
        out = tmp_path / name
        assert _run(QWEN3, "-o", out, "--format", fmt, "-q").exit_code == 0
        first = out.stat().st_mtime_ns
        r = _run(QWEN3, "-o", out, "--format", fmt, "--ranks", "0", "-q")
        assert r.exit_code == 0, r.output
        assert out.stat().st_mtime_ns >= first
