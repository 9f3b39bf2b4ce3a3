"""Streaming reader of trace_view.json (Chrome trace events, spec §A.7; msprof_*.json §C.8).

The file can be hundreds of MB, so it is never loaded whole: it is cut at event boundaries into
blocks of a few MB that orjson parses (:func:`iter_events`; ijson, 5x slower, takes over when a
block is not plain JSON or the file is damaged, so errors still carry the byte offset), and only
the rows kept for the TIMELINE table (plus the async_npu flow ends needed for step
windows) stay in memory. Framework events (those with a ``cat``) are dropped at once unless they
are ``ProfilerStep#N``; device events whose process is not yet known (``M`` metadata may come after
the ``X`` events) are buffered per pid as compact tuples and resolved at the end, and the pids of
processes we do not keep are then dropped.
"""

from __future__ import annotations

import gc
import json
import re
from collections import defaultdict
from pathlib import Path
from typing import Iterator

import ijson
import numpy as np
import orjson
import pyarrow as pa

from ascendprof.model import schemas as S
from ascendprof.model.errors import InputError, malformed
from ascendprof.sysio.textio import open_regular
from ascendprof.model.units import us_column_to_ns, us_text_to_ns

#: process name -> TIMELINE track (spec §A.7). "Communication" is the newer CANN name of "HCCL".
TRACK_OF_PROCESS = {
    "Overlap Analysis": "overlap",
    "HCCL": "communication",
    "Communication": "communication",
    "Ascend Hardware": "hardware",
}
OVERLAP_THREADS = ("Computing", "Communication", "Communication(Not Overlapped)", "Free")
_STEP_RE = re.compile(r"^ProfilerStep#(\d+)$")
#: framework events of the data loader's iterator (torch's record_function around next(iter)),
#: kept as TIMELINE track "dataloader" for the data preparation analysis
_LOADER_PREFIX = "enumerate(DataLoader)"
_NPU_LABEL = re.compile(r"^NPU(?:\s+(\d+))?$")
_CHUNK = 1 << 16
_BLOCK = 1 << 20  # bytes per orjson block: bounds memory to a few blocks of parsed events
_ARRAY_START = re.compile(rb'\s*\[')
_OBJECT_START = re.compile(rb'\s*\{\s*"traceEvents"\s*:\s*\[')
_MAX_CUT_TRIES = 6
_MAX_BUFFER = 1 << 24  # an event bigger than this (or damage) hands the file to ijson


class _Fallback(Exception):
    """The orjson block reader cannot go on; ijson re-reads the file (exact errors, odd files)."""


class _CountingReader:
    """File wrapper counting the bytes handed to the parser (for error positions)."""

    def __init__(self, f):
        self._f = f
        self.consumed = 0

    def read(self, n=-1):
        b = self._f.read(n)
        self.consumed += len(b)
        return b


def _items_prefix(path: Path) -> str:
    """'item' for a bare event array, 'traceEvents.item' for the object form."""
    with open_regular(path) as f:
        head = f.read(4096).lstrip(b"\xef\xbb\xbf \t\r\n")
    if head.startswith(b"["):
        return "item"
    if head.startswith(b"{"):
        return "traceEvents.item"
    if not head:
        raise InputError(path, "empty file", 0)
    raise InputError(path, "not a JSON trace (expected '[' or '{')", 0)


def _error_offset(path: Path) -> int:
    """Exact byte offset where the JSON first becomes invalid (re-parses; error path only)."""
    def fresh():
        sink = ijson.sendable_list()
        return ijson.basic_parse_coro(sink), sink

    coro, sink = fresh()
    good = 0
    with open_regular(path) as f:
        while chunk := f.read(_CHUNK):
            try:
                coro.send(chunk)
                sink.clear()
                good += len(chunk)
                continue
            except ijson.JSONError:
                pass
            # Replay the good prefix, then feed the failing chunk byte by byte.
            coro, sink = fresh()
            f.seek(0)
            left = good
            while left:
                coro.send(f.read(min(left, _CHUNK)))
                sink.clear()
                left = max(0, left - _CHUNK)
            for i in range(len(chunk)):
                try:
                    coro.send(chunk[i:i + 1])
                    sink.clear()
                except ijson.JSONError:
                    return good + i
            return good + len(chunk)
    return good  # premature end of file


def iter_events(path: Path) -> Iterator[dict]:
    """Yield each trace event (a dict) of ``path`` in file order, streaming.

    Accepts a JSON array of events or ``{"traceEvents": [...]}``. Raises :class:`InputError`
    ``(path, reason, byte offset)`` when the file cannot be read or is not valid JSON (including a
    truncated file, whose offset is its size); events yielded before the error stay valid.

    Fast path: :func:`_orjson_blocks`. Whenever it gives up (invalid or truncated JSON, numbers
    orjson does not take, an object form with other keys after the events) ijson re-reads the file
    from the start, skipping the events already yielded, so the result and the error offset are
    exactly those of the ijson reader.
    """
    for block in iter_event_blocks(path, ijson_block=1):  # ijson: one event at a time
        yield from block


def iter_event_blocks(path: Path, ijson_block: int = 4096) -> Iterator[list[dict]]:
    """:func:`iter_events` in lists of consecutive events (one per orjson block; ``ijson_block``
    events each when ijson reads), which spares a generator step per event. Same errors."""
    path = Path(path)
    try:
        prefix = _items_prefix(path)
    except OSError as e:
        raise InputError(path, f"cannot read: {e.strerror or e}") from None
    done = 0  # array items yielded by the fast path
    try:
        for block in _orjson_blocks(path):
            done += len(block)
            yield [ev for ev in block if type(ev) is dict]
        return
    except _Fallback:
        pass
    except OSError as e:
        raise InputError(path, f"cannot read: {e.strerror or e}") from None
    block = []
    for ev in _ijson_events(path, prefix, skip=done):
        block.append(ev)
        if len(block) >= ijson_block:
            yield block
            block = []
    if block:
        yield block


def _orjson_blocks(path: Path) -> Iterator[list]:
    """The items of the trace event array in blocks of about :data:`_BLOCK` bytes, each parsed
    by orjson. A block ends at a ``}`` followed by ``,``; the cut is at an event boundary
    exactly when ``[`` + block + ``]`` parses (inside a string or a nested value it leaves a
    string or bracket open), so candidates are tried from the end of the buffer; when none
    parses (an event longer than the buffer) the buffer grows up to :data:`_MAX_BUFFER`.
    Raises :class:`_Fallback` when still no cut parses or the array is not closed properly."""
    with open_regular(path) as f:
        buf = f.read(_BLOCK)
        if buf.startswith(b"\xef\xbb\xbf"):
            buf = buf[3:]
        m = _ARRAY_START.match(buf)
        wrapped = m is None
        if wrapped:
            m = _OBJECT_START.match(buf)
            if m is None:
                raise _Fallback
        buf = buf[m.end():]
        eof = False
        want = 2 * _BLOCK
        while True:
            while not eof and len(buf) < want:
                more = f.read(_BLOCK)
                eof = not more
                buf += more
            if eof:
                yield _last_block(buf, wrapped)
                return
            got = _cut_block(buf)
            if got is None:
                if len(buf) >= _MAX_BUFFER:
                    raise _Fallback
                want = 2 * len(buf)
                continue
            want = 2 * _BLOCK
            yield got[0]
            buf = got[1]


def _cut_block(buf: bytes) -> tuple[list, bytes] | None:
    """(items of the longest parseable leading run of events in ``buf``, the bytes after it and
    its separating comma), or None when none of the last few candidate cuts parses."""
    end = len(buf)
    for _ in range(_MAX_CUT_TRIES):
        cut = buf.rfind(b"},", 0, end)
        if cut < 0:
            break
        try:
            items = orjson.loads(b"[" + buf[:cut + 1] + b"]")
        except orjson.JSONDecodeError:
            end = cut
            continue
        return items, buf[cut + 2:]
    return None


def _last_block(buf: bytes, wrapped: bool) -> list:
    tail = buf.rstrip()
    if wrapped:
        if not tail.endswith(b"}"):
            raise _Fallback
        tail = tail[:-1].rstrip()
    if not tail.endswith(b"]"):
        raise _Fallback
    try:
        return orjson.loads(b"[" + tail)
    except orjson.JSONDecodeError:
        raise _Fallback from None


def _ijson_events(path: Path, prefix: str, skip: int = 0) -> Iterator[dict]:
    """iter_events by ijson (the exact reader): the dict items after the first ``skip`` items."""
    try:
        f = open_regular(path)
    except OSError as e:
        raise InputError(path, f"cannot read: {e.strerror or e}") from None
    with f:
        reader = _CountingReader(f)
        try:
            for i, ev in enumerate(ijson.items(reader, prefix, use_float=True, buf_size=_CHUNK)):
                if i >= skip and isinstance(ev, dict):
                    yield ev
        except ijson.JSONError as e:
            msg = str(e).splitlines()[0] if str(e) else "invalid JSON"
            reason = ("truncated JSON (premature end of file)" if "premature EOF" in msg
                      else f"invalid JSON: {msg}")
            raise InputError(path, reason, _error_offset(path)) from None
        except UnicodeDecodeError:
            raise InputError(path, "not UTF-8 text", reader.consumed) from None


def _ns(path: Path, ev: dict, key: str) -> int:
    v = ev.get(key)
    try:
        ns = us_text_to_ns(v)
    except ValueError:
        ns = None
    if ns is None:
        raise InputError(path, f"event {ev.get('name')!r} has a bad '{key}': {v!r}",
                         f"event {ev.get('name')!r} pid {ev.get('pid')}")
    return ns


def _starts_fast(ts) -> np.ndarray | None:
    """The ``ts`` values as exact int64 ns in one vectorised pass when all are text numbers
    (:func:`us_column_to_ns`); None when any is not (then :func:`_starts_ns` decides)."""
    if all(type(v) is str for v in ts):
        try:
            col = us_column_to_ns(pa.array(ts, pa.string()))
        except ValueError:
            return None
        if col.null_count == 0:
            return col.to_numpy()
    return None


def _starts_ns(path: Path, ts, names, pid) -> np.ndarray:
    """The ``ts`` values of kept device events (of process ``pid``) that :func:`_starts_fast`
    did not take, one by one like :func:`_ns`. Raises InputError naming the first event whose
    ts is not a number."""
    return np.array([_ns(path, {"ts": v, "name": name, "pid": pid}, "ts")
                     for v, name in zip(ts, names)], np.int64)


def _durs_fast(durs) -> np.ndarray | None:
    """:func:`_dur_ns` of each value, vectorised; None unless all are finite plain numbers."""
    if all(type(v) is float or type(v) is int for v in durs):
        us = np.asarray(durs, np.float64)
        ns = np.round(us * 1000)  # half to even, as round() in _dur_ns
        if np.isfinite(ns).all() and (np.abs(ns) < 2.0**63).all():
            return ns.astype(np.int64)
    return None


def _durs_ns(durs) -> np.ndarray:
    """:func:`_dur_ns` of each value, one by one (the values :func:`_durs_fast` did not take)."""
    return np.array([_dur_ns(v) for v in durs], np.int64)


def _dur_ns(v) -> int:
    """``dur`` is a float in us (or text); rounded to whole ns, missing -> 0."""
    if v is None:
        return 0
    if isinstance(v, str):
        return us_text_to_ns(v) or 0
    return round(float(v) * 1000)


def read_trace_view(path: Path, rank: int) -> dict[str, pa.Table]:
    """Read one rank's trace_view.json into ``{TIMELINE: ..., STEPS: ...}`` (schemas.py).

    TIMELINE rows: the X events of process "Overlap Analysis" (track ``overlap``, threads
    Computing / Communication / Communication(Not Overlapped) / Free), "HCCL" or "Communication"
    (track ``communication``: big ops on threads "Group <g> Communication", small tasks on
    "Plane <k>"), "Ascend Hardware" (track ``hardware``, ``task_type`` = args "Task Type",
    ``category`` = 'communication' for a task linked to an HCCL op, see :func:`_categories`) and the
    framework ``ProfilerStep#N`` events (track ``step``, step = N). ``start_ns`` is the exact
    conversion of the ``ts`` text (us, 3 decimals); ``dur_ns`` = round(dur * 1000). ``step`` of a
    device row = the step window containing its start (``start <= ts < end``, spec §7.1.c).

    STEPS (spec §7.1.a, simplified): per ProfilerStep#N, the device tasks linked to it are the
    hardware / HCCL tasks whose ``async_npu`` flow (torch_to_npu) starts inside the ProfilerStep
    event. Window = [min start of linked tasks (else the ProfilerStep start), max(ProfilerStep end,
    max end of linked tasks)]. Without any flows (e.g. flows not exported), linked tasks = device
    tasks starting inside the ProfilerStep event. ``origin`` says which was used. torch_npu links
    via the enqueue/dequeue correlation ids instead; the flow start is the dequeue-side launch, which
    can differ for a task launched right at a step boundary.

    The table metadata key ``device_ids`` holds a JSON list of the devices named by the
    ``"NPU <n>"`` process labels (bare ``"NPU"`` -> -1).

    Raises :class:`InputError` (path, reason, byte offset) for unreadable / invalid / truncated
    JSON, for an event whose ``ts`` is not a number and for events of an unexpected shape (e.g. a
    list where an id or ``dur`` belongs).
    """
    path = Path(path)
    # The millions of parsed events form no reference cycles; without this the cyclic collector
    # re-walks the growing kept rows again and again (about half the reading time).
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        with malformed(path, "trace event"):
            return _read_events(path, rank)
    finally:
        if was_enabled:
            gc.enable()


def _read_events(path: Path, rank: int) -> dict[str, pa.Table]:
    proc_name: dict[int, str] = {}
    proc_label: dict[int, str] = {}
    thread_name: dict[tuple[int, int], str] = {}
    # pid -> this block's [(tid, name, ts, dur, task_type, link)], ts / dur as in the file (link:
    # args connection_id, else the HCCL small task's stream id); at the end
    # of each block moved to ``kept`` as columns, so memory holds ~40 bytes per kept event
    pending: dict[int, list] = defaultdict(list)
    kept: dict[int, list] = {}  # pid -> [_Chunk], in order of the pid's first event
    steps: list[tuple[int, int, int, str, str]] = []  # (N, start, dur, process pid, tid)
    loaders: list[tuple[str, int, int, str, str]] = []  # (name, start, dur, pid, tid)
    flow_start: dict = {}  # async_npu id -> host ts
    flow_end: dict = {}  # async_npu id -> (pid, tid, ts)
    same: dict = {}  # one str object per distinct kernel name / task type (memory)

    for block in iter_event_blocks(path):  # blocks: no generator step per event
        for ev in block:
            ph = ev.get("ph")
            if ph == "X":
                name = ev.get("name") or ""
                if "cat" in ev:  # framework (CPU) event: only ProfilerStep#N is kept
                    m = _STEP_RE.match(name)
                    if m:
                        steps.append((int(m.group(1)), _ns(path, ev, "ts"), _dur_ns(ev.get("dur")),
                                      ev.get("pid"), ev.get("tid")))
                    elif type(name) is str and name.startswith(_LOADER_PREFIX):
                        loaders.append((name, _ns(path, ev, "ts"), _dur_ns(ev.get("dur")),
                                        ev.get("pid"), ev.get("tid")))
                    continue
                pid = ev.get("pid")
                known = proc_name.get(pid)
                if known is not None and known not in TRACK_OF_PROCESS:
                    continue
                args = ev.get("args") or {}
                tt = args.get("Task Type") or args.get("task type")
                link = args.get("connection_id")
                if link is None:
                    link = args.get("stream id")
                if type(name) is str:
                    name = same.setdefault(name, name)
                if type(tt) is str:
                    tt = same.setdefault(tt, tt)
                pending[pid].append((ev.get("tid"), name, ev.get("ts"), ev.get("dur"), tt, link))
            elif ph == "M":
                pid, args = ev.get("pid"), ev.get("args") or {}
                what = ev.get("name")
                if what == "process_name":
                    proc_name[pid] = str(args.get("name"))
                    if proc_name[pid] not in TRACK_OF_PROCESS:
                        pending.pop(pid, None)
                        kept.pop(pid, None)
                elif what == "process_labels":
                    proc_label[pid] = str(args.get("labels"))
                elif what == "thread_name":
                    thread_name[(pid, ev.get("tid"))] = str(args.get("name"))
            elif ph in ("s", "f") and ev.get("cat") == "async_npu":
                if ph == "s":
                    flow_start[ev.get("id")] = _ns(path, ev, "ts")
                else:
                    flow_end[ev.get("id")] = (ev.get("pid"), ev.get("tid"), _ns(path, ev, "ts"))
        _compact(pending, kept)

    rows = _resolve(path, kept, proc_name, thread_name)
    kept.clear()  # the rows hold what is kept
    steps_table, windows = _step_windows(rank, steps, rows, flow_start, flow_end)
    timeline = _timeline_table(rank, rows, steps, proc_name, thread_name, windows, loaders)
    devices = sorted({_device(lbl) for pid, lbl in proc_label.items()
                      if proc_name.get(pid) in TRACK_OF_PROCESS and _NPU_LABEL.match(lbl.strip())})
    timeline = timeline.replace_schema_metadata(
        {**(timeline.schema.metadata or {}), b"device_ids": json.dumps(devices).encode()})
    return {S.TIMELINE: timeline, S.STEPS: steps_table}


def _device(label: str) -> int:
    m = _NPU_LABEL.match(label.strip())
    return int(m.group(1)) if m and m.group(1) else -1


class _Chunk:
    """One block's kept events of one process, as columns: ``tids``, ``names``, ``tts`` (tuples of
    shared objects), ``starts`` / ``durs`` as int64 ns arrays, or the file's raw values where the
    vectorised conversion did not take them (converted, or refused, once the event is known to
    be kept: :func:`_resolve`)."""

    __slots__ = ("tids", "names", "tts", "starts", "durs", "links")

    def __init__(self, tids, names, tts, starts, durs, links):
        self.tids, self.names, self.tts, self.starts, self.durs = tids, names, tts, starts, durs
        self.links = links

    def select(self, keep: list[bool]) -> _Chunk:
        """The rows where ``keep`` is true."""
        def pick(col):
            if isinstance(col, np.ndarray):
                return col[np.array(keep, bool)]
            return tuple(v for v, k in zip(col, keep) if k)

        return _Chunk(*(pick(c) for c in (self.tids, self.names, self.tts, self.starts,
                                          self.durs, self.links)))


def _compact(pending: dict[int, list], kept: dict[int, list]) -> None:
    """Move the block's raw event tuples of ``pending`` into ``kept`` as :class:`_Chunk` columns
    (ts / dur converted to int64 ns where that is exact in one pass); empties ``pending``."""
    for pid, evs in pending.items():
        tids, names, ts, durs, tts, links = zip(*evs)
        starts, dns = _starts_fast(ts), _durs_fast(durs)
        kept.setdefault(pid, []).append(_Chunk(tids, names, tts,
                                               ts if starts is None else starts,
                                               durs if dns is None else dns, links))
    pending.clear()


def _resolve(path: Path, kept: dict[int, list], proc_name, thread_name) -> dict:
    """Columns of the kept device rows: track, process, thread, name, task_type, pid, tid as
    lists; start_ns, dur_ns as int64 arrays. Rows of processes that turned out not to be device
    tracks, and Overlap Analysis rows of other threads, are dropped. Raises InputError for the
    first kept event (process by process) whose ts is not a number, before any dur error."""
    cols: dict[str, list] = {k: [] for k in
                             ("track", "process", "thread", "name", "task_type", "pid", "tid",
                              "link")}
    chosen: list[tuple[int, _Chunk]] = []
    for pid, chunks in kept.items():
        pname = proc_name.get(pid)
        track = TRACK_OF_PROCESS.get(pname)
        if track is None:
            continue
        for c in chunks:
            threads = [thread_name.get((pid, tid), f"Thread {tid}") for tid in c.tids]
            if track == "overlap":
                keep = [t in OVERLAP_THREADS for t in threads]
                if not all(keep):
                    c = c.select(keep)
                    threads = [t for t, k in zip(threads, keep) if k]
            n = len(c.tids)
            cols["track"] += [track] * n
            cols["process"] += [pname] * n
            cols["thread"] += threads
            cols["name"] += c.names
            cols["task_type"] += [None if tt is None else str(tt) for tt in c.tts]
            cols["pid"] += [pid] * n
            cols["tid"] += c.tids
            cols["link"] += c.links
            chosen.append((pid, c))
    # all start times first: a bad ts is reported before a bad dur, wherever they stand
    starts = [c.starts if isinstance(c.starts, np.ndarray) else _starts_ns(path, c.starts,
                                                                            c.names, pid)
              for pid, c in chosen]
    durs = [c.durs if isinstance(c.durs, np.ndarray) else _durs_ns(c.durs) for _, c in chosen]
    rows: dict = dict(cols)
    rows["start_ns"] = np.concatenate(starts) if starts else np.zeros(0, np.int64)
    rows["dur_ns"] = np.concatenate(durs) if durs else np.zeros(0, np.int64)
    rows["category"] = _categories(rows)
    return rows


_BIG_OP_THREAD = re.compile(r"^Group .* Communication$")


def _categories(rows: dict) -> list:
    """TIMELINE ``category`` of each kept row: 'communication' for an Ascend Hardware task that
    belongs to an HCCL op -- its connection_id is that of a big op ("Group <g> Communication"
    thread), or it runs on a stream that carries HCCL small tasks ("stream id" of the "Plane"
    threads) -- else null. Older releases type these tasks "Other" rather than with an HCCL
    task type, so the link, not the label, says what they are (§A.7)."""
    big_links, hccl_streams = set(), set()
    for track, thread, link in zip(rows["track"], rows["thread"], rows["link"]):
        if track != "communication" or link is None:
            continue
        if _BIG_OP_THREAD.match(thread):
            big_links.add(_key(link))
        else:
            hccl_streams.add(_key(link))
    out = [None] * len(rows["track"])
    if not big_links and not hccl_streams:
        return out
    for i, (track, link, tid) in enumerate(zip(rows["track"], rows["link"], rows["tid"])):
        if track == "hardware" and (_key(link) in big_links or _key(tid) in hccl_streams):
            out[i] = "communication"
    return out


def _key(v):
    """A link value comparable across events: ints and integral texts alike."""
    if type(v) is int:
        return v
    text = str(v).strip()  # any JSON value, hashable as text
    try:
        return int(text)
    except ValueError:
        return text


def _step_windows(rank, steps, rows, flow_start, flow_end):
    """STEPS table and the sorted (N, start, end) windows (see read_trace_view)."""
    if not steps:
        return S.empty(S.STEPS), []
    is_task = np.array([t in ("hardware", "communication") for t in rows["track"]], bool)
    t_start = rows["start_ns"]
    t_end = t_start + rows["dur_ns"]
    # Host launch time of each device task, through its async_npu flow (pid, tid, ts) -> host ts.
    host_of = {v: flow_start[k] for k, v in flow_end.items() if k in flow_start}
    host = np.array([host_of.get((p, t, s), -1) for p, t, s in
                     zip(rows["pid"], rows["tid"], t_start.tolist())], np.int64)
    linked = is_task & (host >= 0)
    use_flows = bool(linked.any())
    origin = ("trace_view ProfilerStep# + async_npu flows" if use_flows
              else "trace_view ProfilerStep# (no async_npu flows: tasks starting in the step)")
    out = {"rank": [], "step": [], "start_ns": [], "end_ns": [], "origin": []}
    windows = []
    for n, s0, dur, _, _ in sorted(steps, key=lambda x: x[1]):
        s1 = s0 + dur
        if use_flows:
            mine = linked & (host >= s0) & (host <= s1)
        else:
            mine = is_task & (t_start >= s0) & (t_start <= s1)
        start = int(t_start[mine].min()) if mine.any() else s0
        end = max(s1, int(t_end[mine].max())) if mine.any() else s1
        windows.append((n, start, end))
        for k, v in (("rank", rank), ("step", n), ("start_ns", start), ("end_ns", end),
                     ("origin", origin)):
            out[k].append(v)
    return S.conform(S.STEPS, pa.table(out)), windows


def _timeline_table(rank, rows, steps, proc_name, thread_name, windows, loaders=()) -> pa.Table:
    """TIMELINE: the device rows (``rows``, start/dur as int64 arrays), then one 'step' row per
    ProfilerStep#N, then one 'dataloader' row per data loader span (its step: the ProfilerStep#N
    event that holds its start)."""
    step_ids, has_step = _assign_steps(rows["start_ns"], windows)
    cols = {k: rows[k] + [] for k in ("track", "process", "thread", "name", "task_type",
                                       "category")}
    for n, s0, dur, pid, tid in steps:
        cols["track"].append("step")
        cols["process"].append(proc_name.get(pid, f"Process {pid}"))
        cols["thread"].append(thread_name.get((pid, tid), f"Thread {tid}"))
        cols["name"].append(f"ProfilerStep#{n}")
        cols["task_type"].append(None)
        cols["category"].append(None)
    loader_step = []
    for name, s0, dur, pid, tid in loaders:
        cols["track"].append("dataloader")
        cols["process"].append(proc_name.get(pid, f"Process {pid}"))
        cols["thread"].append(thread_name.get((pid, tid), f"Thread {tid}"))
        cols["name"].append(name)
        cols["task_type"].append(None)
        cols["category"].append(None)
        loader_step.append(next((n for n, a, d, *_ in steps if a <= s0 < a + d), None))
    starts = np.concatenate([rows["start_ns"], np.array([x[1] for x in steps], np.int64),
                             np.array([x[1] for x in loaders], np.int64)])
    durs = np.concatenate([rows["dur_ns"], np.array([x[2] for x in steps], np.int64),
                           np.array([x[2] for x in loaders], np.int64)])
    step = np.concatenate([step_ids, np.array([x[0] for x in steps], np.int64),
                           np.array([-1 if n is None else n for n in loader_step], np.int64)])
    valid = np.concatenate([has_step, np.ones(len(steps), bool),
                            np.array([n is not None for n in loader_step], bool)])
    t = pa.table({
        "rank": pa.array(np.full(starts.size, rank, np.int32)),
        "step": pa.array(step, pa.int64(), mask=~valid).cast(pa.int32()),
        **{k: pa.array(v, pa.string()) for k, v in cols.items()},
        "start_ns": pa.array(starts, pa.int64()),
        "dur_ns": pa.array(durs, pa.int64()),
    })
    return S.conform(S.TIMELINE, t)


def _assign_steps(ts: np.ndarray, windows) -> tuple[np.ndarray, np.ndarray]:
    """Step of each start: the first window with ``start <= ts < end`` (spec §7.1.c). Returns
    (step ids, found mask); ids are 0 where not found."""
    out = np.zeros(ts.size, np.int64)
    found = np.zeros(ts.size, bool)
    if not windows or ts.size == 0:
        return out, found
    w = sorted(windows, key=lambda x: x[1])
    for n, lo, hi in reversed(w):  # earlier windows win where windows overlap
        inside = (ts >= lo) & (ts < hi)
        out[inside] = n
        found |= inside
    return out, found
