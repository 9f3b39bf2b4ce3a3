"""Write the merged cluster timeline (analyze/timeline.py events) as a trace file.

Two formats:

- **Chrome trace JSON** (``{"traceEvents": [...]}``, read by chrome://tracing and the Perfetto UI):
  one process per rank (``pid`` = rank, named ``rank N (stage s, dp d)``),
  one thread per track, complete events (``ph: "X"``) and flow events (``s``/``t``/``f``)
  joining the members of each collective instance. JSON timestamps are microseconds in a
  double; absolute epoch microseconds with nanosecond digits need 19 significant digits, more
  than a double holds (the cause of mis-nested slices in viewers of the profiler's own
  trace_view.json). So ``ts`` counts from ``otherData.ts_base_ns`` (the collection's first
  event, floored to a whole second): exact to the nanosecond for collections shorter than ~100
  days.
- **Perfetto protobuf** (``--format perfetto``), built with the ``perfetto`` package's
  TracePacket classes: track descriptors per rank (process) and track (thread), slice
  begin/end pairs with absolute nanosecond timestamps (uint64, exact), and flow ids on the
  members of each collective.

Events are written in the order given (analyze.timeline.lanes sorts them); the file is written
under the rule of every report path (sysio.atomic.write_report_pieces).
"""

from __future__ import annotations

from pathlib import Path

import orjson
import pyarrow as pa
import pyarrow.compute as pc

from ascendprof.sysio.atomic import check_report_path, write_report_pieces

#: how a Chrome trace this module wrote begins (the producer is the first otherData key)
CHROME_SIGNATURE = b'{"displayTimeUnit":"ns","otherData":{"producer":"ascendprof '
#: process track uuids start here (rank r -> PROCESS_UUID + r)
PROCESS_UUID = 1_000_000

#: approximate bytes one slice takes in each format (measured on the Qwen3 sample; args and
#: names vary), for the size estimate before writing
BYTES_PER_EVENT = {"chrome": 260, "perfetto": 150}


def estimate_bytes(n_events: int, n_flows_members: int, fmt: str) -> int:
    """Rough size of the file for ``n_events`` slices and flows over ``n_flows_members`` slice
    ends (bytes)."""
    return n_events * BYTES_PER_EVENT[fmt] + n_flows_members * 80


_COLS = ("rank", "track", "name", "cat", "start_ns", "dur_ns", "step", "args")
#: rows converted to Python objects at a time (bounds the writer's memory, not the table's)
CHUNK_ROWS = 1 << 16


def _chunks(events: pa.Table):
    """(first row index, {column: list}) for consecutive slices of ``events``."""
    for lo in range(0, events.num_rows, CHUNK_ROWS):
        part = events.slice(lo, CHUNK_ROWS)
        yield lo, {c: part.column(c).to_pylist() for c in _COLS}


def _tracks(events: pa.Table) -> list[tuple[int, str]]:
    """Distinct (rank, track) pairs in table order (events come sorted by rank and track)."""
    keys = events.select(["rank", "track"]).group_by(["rank", "track"], use_threads=False) \
        .aggregate([])
    pairs = list(zip(keys.column("rank").to_pylist(), keys.column("track").to_pylist()))
    return sorted(pairs)


def _flow_roles(joined: list[list[int]]) -> tuple[dict[int, int], dict[int, int]]:
    """row -> flow id for rows that start/continue a flow, and for rows that end one."""
    out, end = {}, {}
    for fid, members in enumerate(joined, start=1):
        for i in members[:-1]:
            out[i] = fid
        end[members[-1]] = fid
    return out, end


def chrome_pieces(events: pa.Table, joined: list[list[int]], names: dict[int, str],
                  other: dict, base_ns: int):
    """The Chrome trace JSON of ``events`` as byte pieces (see the module doc)."""
    yield b'{"displayTimeUnit":"ns","otherData":' + orjson.dumps(
        {**other, "ts_base_ns": base_ns}) + b',"traceEvents":[\n'
    meta = []
    tracks = _tracks(events)
    for r in sorted({r for r, _ in tracks}):
        meta.append({"ph": "M", "name": "process_name", "pid": r, "tid": 0,
                     "args": {"name": names.get(r, f"rank {r}")}})
        meta.append({"ph": "M", "name": "process_sort_index", "pid": r, "tid": 0,
                     "args": {"sort_index": r}})
    tid = {}
    for n, (r, t) in enumerate(tracks, start=1):
        tid[(r, t)] = n
        meta.append({"ph": "M", "name": "thread_name", "pid": r, "tid": n, "args": {"name": t}})
        meta.append({"ph": "M", "name": "thread_sort_index", "pid": r, "tid": n,
                     "args": {"sort_index": _track_order(t)}})
    yield b",\n".join(orjson.dumps(m) for m in meta)
    flow_ph: dict[int, tuple] = {}
    for fid, members in enumerate(joined, start=1):
        last = len(members) - 1
        for j, i in enumerate(members):
            flow_ph[i] = (fid, "s" if j == 0 else ("f" if j == last else "t"))

    def us(ns: int) -> float:
        return (ns - base_ns) / 1000

    for lo, cols in _chunks(events):
        out = []
        for k in range(len(cols["rank"])):
            r, track = cols["rank"][k], cols["track"][k]
            args = cols["args"][k] or "{}"
            if cols["step"][k] is not None:
                args = _with_step(args, cols["step"][k])
            ts = us(cols["start_ns"][k])
            ev = {"ph": "X", "name": cols["name"][k], "cat": cols["cat"][k] or "task",
                  "pid": r, "tid": tid[(r, track)], "ts": ts, "dur": cols["dur_ns"][k] / 1000,
                  "args": orjson.Fragment(args)}
            out.append(orjson.dumps(ev))
            role = flow_ph.get(lo + k)
            if role is not None:
                fid, ph = role
                fl = {"ph": ph, "id": fid, "name": cols["name"][k], "cat": "collective",
                      "pid": r, "tid": tid[(r, track)], "ts": ts}
                if ph == "f":
                    fl["bp"] = "e"
                out.append(orjson.dumps(fl))
        yield b",\n" + b",\n".join(out)
    yield b"\n]}\n"


def _with_step(args: str, step: int) -> bytes:
    return args[:-1].encode() + (b"," if args != "{}" else b"") + b'"Step":' + \
        str(step).encode() + b"}"


def _track_order(track: str) -> int:
    """Streams first (by id), then communication tracks, then the rest."""
    if track.startswith("Stream "):
        head = track[7:].split(" ", 1)[0]
        return int(head) if head.isdigit() else 10_000
    return 20_000 if track.startswith("Communication") else 30_000


def written_by_us(path: Path) -> bool:
    """Whether the regular file ``path`` is a trace this module wrote: a Chrome trace starting
    with :data:`CHROME_SIGNATURE`, or a Perfetto trace whose first packet describes a rank's
    process track (uuid from :data:`PROCESS_UUID`, name ``rank N…``)."""
    try:
        with open(path, "rb") as f:
            head = f.read(4096)
    except OSError:
        return False
    if head.startswith(CHROME_SIGNATURE):
        return True
    # a serialised Trace: field 1 (packet), length-delimited: 0x0a, varint length, packet
    if not head.startswith(b"\x0a"):
        return False
    n, shift, i = 0, 0, 1
    while i < len(head) and i < 6:
        n |= (head[i] & 0x7F) << shift
        shift += 7
        i += 1
        if not head[i - 1] & 0x80:
            break
    if i + n > len(head):
        return False
    try:
        from perfetto.protos.perfetto.trace.perfetto_trace_pb2 import TracePacket

        pk = TracePacket.FromString(head[i:i + n])
    except Exception:  # noqa: BLE001 - anything unparsable is not ours
        return False
    d = pk.track_descriptor
    return (pk.HasField("track_descriptor") and d.uuid >= PROCESS_UUID
            and d.process.process_name.startswith("rank "))


def check_target(path: Path, inputs=()) -> None:
    """Refuse (OutputError, exit 2) before any work a trace path ascendprof must not write,
    under the rule of every report path (:func:`ascendprof.sysio.atomic.check_report_path`): a
    directory, a block device, a symlink to nothing, an existing file ascendprof did not write,
    one of the ``inputs``, a path inside an input directory or a file of an input tree."""
    check_report_path(Path(path), inputs, ours=written_by_us)


def write_chrome(path: Path, events: pa.Table, joined, names, other: dict, inputs=()) -> Path:
    """Write ``events`` (analyze.timeline.lanes order) as Chrome trace JSON to ``path``
    (atomically). ``joined``: analyze.timeline.flows of the same table; ``names``: rank ->
    process name; ``other``: metadata stored under ``otherData``."""
    base = 0
    if events.num_rows:
        base = int(pc.min(events.column("start_ns")).as_py()) // 10**9 * 10**9
    return write_report_pieces(path, chrome_pieces(events, joined, names, other, base),
                               ours=written_by_us, inputs=inputs)


def perfetto_pieces(events: pa.Table, joined: list[list[int]], names: dict[int, str]):
    """The Perfetto protobuf trace of ``events`` as byte pieces: one serialised ``Trace``
    message per packet (concatenated Trace messages are one valid Trace)."""
    from perfetto.protos.perfetto.trace.perfetto_trace_pb2 import Trace, TrackEvent

    def packet_bytes(fill) -> bytes:
        tr = Trace()
        p = tr.packet.add()
        p.trusted_packet_sequence_id = 1
        fill(p)
        return tr.SerializeToString()

    tracks = _tracks(events)
    proc_uuid = {r: PROCESS_UUID + r for r in sorted({r for r, _ in tracks})}
    for r, u in proc_uuid.items():
        def fill(p, r=r, u=u):
            p.track_descriptor.uuid = u
            p.track_descriptor.process.pid = r + 1
            p.track_descriptor.process.process_name = names.get(r, f"rank {r}")
        yield packet_bytes(fill)
    track_uuid = {}
    for n, (r, t) in enumerate(tracks):
        track_uuid[(r, t)] = u = 10_000_000 + n

        def fill(p, r=r, t=t, u=u, n=n):
            p.track_descriptor.uuid = u
            p.track_descriptor.parent_uuid = proc_uuid[r]
            p.track_descriptor.thread.pid = r + 1
            p.track_descriptor.thread.tid = n + 1
            p.track_descriptor.thread.thread_name = t
        yield packet_bytes(fill)
    flow_out, flow_end = _flow_roles(joined)
    # rows come track by track in start order; ends are emitted before the next begin they
    # precede, so slices ending at the same nanosecond close child-first (the trace processor
    # keeps packet order on ties)
    current, u, open_ends = None, None, []
    for lo, cols in _chunks(events):
        for k in range(len(cols["rank"])):
            key = (cols["rank"][k], cols["track"][k])
            if key != current:
                while open_ends:
                    yield packet_bytes(_end(u, open_ends.pop(), TrackEvent))
                current, u = key, track_uuid[key]
            start = cols["start_ns"][k]
            while open_ends and open_ends[-1] <= start:
                yield packet_bytes(_end(u, open_ends.pop(), TrackEvent))
            yield packet_bytes(_begin(u, lo + k, k, cols, flow_out, flow_end, TrackEvent))
            open_ends.append(start + cols["dur_ns"][k])
    while open_ends:
        yield packet_bytes(_end(u, open_ends.pop(), TrackEvent))


def _begin(u, row, k, cols, flow_out, flow_end, TrackEvent):
    def fill(p):
        p.timestamp = cols["start_ns"][k]
        te = p.track_event
        te.type = TrackEvent.TYPE_SLICE_BEGIN
        te.track_uuid = u
        te.name = cols["name"][k] or ""
        if cols["cat"][k]:
            te.categories.append(cols["cat"][k])
        if row in flow_out:
            te.flow_ids.append(flow_out[row])
        if row in flow_end:
            te.terminating_flow_ids.append(flow_end[row])
        if cols["step"][k] is not None:
            a = te.debug_annotations.add()
            a.name = "Step"
            a.int_value = cols["step"][k]
    return fill


def _end(u, t, TrackEvent):
    def fill(p):
        p.timestamp = t
        p.track_event.type = TrackEvent.TYPE_SLICE_END
        p.track_event.track_uuid = u
    return fill


def write_perfetto(path: Path, events: pa.Table, joined, names, inputs=()) -> Path:
    """Write ``events`` as a Perfetto protobuf trace to ``path`` (rule of
    :func:`ascendprof.sysio.atomic.write_report_pieces`)."""
    return write_report_pieces(path, perfetto_pieces(events, joined, names),
                               ours=written_by_us, inputs=inputs)


__all__ = ["write_chrome", "write_perfetto", "check_target", "written_by_us", "chrome_pieces", "perfetto_pieces",
           "estimate_bytes", "BYTES_PER_EVENT"]
