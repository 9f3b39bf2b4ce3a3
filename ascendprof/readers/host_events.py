"""Host-side events, HCCL small tasks with their sizes and AI Core frequency samples, for the
advice rules (:mod:`ascendprof.analyze.advice`).

The other readers keep what the step breakdown and the communication files need; the advice
also looks at what the host did (CANN API calls, Python garbage collection, the dataloader,
host-synchronising framework ops), at the byte size of each HCCL copy and at the AI Core
clock. This module reads exactly that:

- from ``trace_view.json`` (spec §A.7) in one extra streaming pass (the largest file of a rank,
  so only when the user asks for every rule: ``analyse --advice all``);
- from a db export (spec §B.1) with a few SQL queries (cheap, so whenever advice is on).

Tables out (:mod:`ascendprof.model.schemas`): HOST_EVENTS, HCCL_TASKS, AICORE_FREQ and, for a
db export, the PMU ratios of TASK_PMU_INFO as ``pmu:<name>`` columns of KERNELS (the text export
has them in kernel_details.csv already). Input files are only read.
"""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

import numpy as np
import pyarrow as pa

from ascendprof.model import schemas as S, source as scan
from ascendprof.model.errors import InputError
from ascendprof.model.units import us_text_to_ns
from ascendprof.readers.trace_view import iter_event_blocks

#: Framework ops that make the host wait for the device (they read a device value on the host).
SYNC_OPS = ("aten::item", "aten::_local_scalar_dense", "aten::is_nonzero", "aten::nonzero",
            "aten::equal", "aten::masked_select")
#: CANN API name prefixes kept (trace_view spelling): the ACL calls (compile, synchronise,
#: malloc/free ...) and the node launches.
CANN_PREFIXES = ("AscendCL@", "Node@launch")
#: HCCL small tasks that move data (the ones with a meaningful size).
DATA_TASKS = ("Memcpy", "Reduce_Inline")
_STEP_RE = re.compile(r"^ProfilerStep#(\d+)$")
#: db CANN_API level (ENUM_API_TYPE name) -> trace_view prefix
_LEVEL_PREFIX = {"acl": "AscendCL", "node": "Node", "runtime": "Runtime", "hccl": "Hccl",
                 "model": "Model"}


def keep_framework(name: str, cat) -> str | None:
    """The HOST_EVENTS ``source`` of a framework event worth keeping, else None."""
    if isinstance(cat, str) and cat.lower() == "gc":
        return "gc"
    if name.startswith("ProfilerStep#") or name.startswith("Optimizer.step#") \
            or name in SYNC_OPS:
        return "framework"
    low = name.lower()
    if "dataloader" in low or low == "syncbatchnorm":
        return "framework"
    return None


# ----------------------------------------------------------------------------- trace_view.json

def read_trace_host(path: Path, rank: int) -> dict[str, pa.Table]:
    """One streaming pass over ``trace_view.json``: ``{HOST_EVENTS, HCCL_TASKS, AICORE_FREQ}``.

    HOST_EVENTS: framework X events (those with a ``cat``) that :func:`keep_framework` keeps, and
    CANN X events whose name starts with one of :data:`CANN_PREFIXES`; ``step`` is the
    ProfilerStep#N window (host side) holding the start. HCCL_TASKS: X events with args
    ``size(Byte)`` named in :data:`DATA_TASKS` or starting with ``RDMA``, with args
    ``transport type`` / ``link type``; op_name = the ``hcom_*`` big op (an X event of the same
    process) whose window holds the task start (the latest-starting one). AICORE_FREQ: the
    ``AI Core Freq`` counter (``ph`` C, args ``MHz``). Times: ``ts`` text in us -> exact int ns,
    ``dur`` float us -> round(dur * 1000). Raises InputError for an unreadable or invalid file
    and for a kept event whose ts is not a number.
    """
    path = Path(path)
    host = {"source": [], "name": [], "tid": [], "start_ns": [], "dur_ns": []}
    tasks = {"pid": [], "task_name": [], "start_ns": [], "dur_ns": [], "size_bytes": [],
             "transport": [], "link_type": []}
    ops: list[tuple[object, int, int, str]] = []  # (pid, start, end, name)
    freq = {"ts_ns": [], "freq_mhz": []}
    links = _Links()
    for block in iter_event_blocks(path):
        for ev in block:
            ph = ev.get("ph")
            name = ev.get("name")
            if not isinstance(name, str):
                continue
            if ph in ("s", "f"):
                links.flow(path, ev)
                continue
            if ph == "X":
                cat = ev.get("cat")
                if cat is not None:
                    if name == "Enqueue" or name.startswith("Dequeue"):
                        links.queue_event(path, ev, name)
                    src = keep_framework(name, cat)
                    if src:
                        _add_host(host, path, ev, src, links.same(name))
                    continue
                if name.startswith(("AscendCL@", "Node@")):
                    links.cann_event(path, ev, name)
                if name.startswith(CANN_PREFIXES):
                    _add_host(host, path, ev, "cann", links.same(name))
                    continue
                if name == "Enqueue" or name.startswith("Dequeue@"):
                    links.queue_event(path, ev, name)
                    continue
                args = ev.get("args")
                if isinstance(args, dict) and "Task Type" in args:
                    links.device_task(path, ev, name, args)
                if name.startswith("hcom_"):
                    start = _ts(path, ev)
                    ops.append((ev.get("pid"), start, start + _dur(ev.get("dur")), name))
                    continue
                args = ev.get("args")
                if isinstance(args, dict) and "size(Byte)" in args and (
                        name in DATA_TASKS or name.startswith("RDMA")):
                    tasks["pid"].append(ev.get("pid"))
                    tasks["task_name"].append(name)
                    tasks["start_ns"].append(_ts(path, ev))
                    tasks["dur_ns"].append(_dur(ev.get("dur")))
                    tasks["size_bytes"].append(_int(args.get("size(Byte)")))
                    tasks["transport"].append(_text(args.get("transport type")))
                    tasks["link_type"].append(_text(args.get("link type")))
            elif ph == "C" and name == "AI Core Freq":
                args = ev.get("args") or {}
                mhz = args.get("MHz") if isinstance(args, dict) else None
                try:
                    mhz = float(mhz)
                except (TypeError, ValueError):
                    continue
                freq["ts_ns"].append(_ts(path, ev))
                freq["freq_mhz"].append(mhz)
    out = {S.HOST_EVENTS: _host_table(host, rank, path),
           S.LAUNCHES: links.launches(rank, path), S.TASK_QUEUE: links.queue(rank, path),
           S.HCCL_TASKS: _task_table(tasks, ops, rank, path),
           S.AICORE_FREQ: S.from_lists(S.AICORE_FREQ, {
               **freq, "rank": [rank] * len(freq["ts_ns"])}, path)}
    return out


class _Links:
    """The trace_view.json events that link a host call to its device task (``HostToDevice``
    flows) and an Enqueue to its Dequeue (``async_task_queue`` flows), collected in the one
    streaming pass and joined at the end (flows point at events by pid, tid and exact ts)."""

    def __init__(self):
        # (cat, id) -> [(pid, tid, ts) of the "s" end or None, (pid, tid, ts) of each "f" end]
        self.flows: dict[tuple, list] = {}
        self.cann: dict = {}                 # tid -> [(start, end, name)]
        self.tasks: dict = {}                # (pid, tid, ts) -> (name, dur, task type, stream)
        self.queue_ev: dict = {}             # (pid, tid, ts) -> (name, dur)
        # one object per distinct text / int of the ids and names kept (each parsed event
        # has its own): ~10^6 launches of a rank kept ~10^7 copies of a few hundred values
        self._texts: dict = {}
        self._ints: dict = {}

    def same(self, v):
        """``v``, as the one object kept for its value (a str or an int; others unchanged)."""
        t = type(v)
        if t is str:
            return self._texts.setdefault(v, v)
        if t is int:
            return self._ints.setdefault(v, v)
        return v

    def _at(self, path, ev):
        return (self.same(ev.get("pid")), self.same(ev.get("tid")), _ts(path, ev))

    def flow(self, path, ev):
        cat = ev.get("cat")
        if cat not in ("HostToDevice", "async_task_queue") or ev.get("id") is None:
            return
        key = self._at(path, ev)
        f = self.flows.setdefault((self.same(cat), str(ev.get("id"))), [None])
        if ev.get("ph") == "s":
            f[0] = key
        else:
            f.append(key)

    def cann_event(self, path, ev, name):
        start = _ts(path, ev)
        self.cann.setdefault(ev.get("tid"), []).append((start, start + _dur(ev.get("dur")),
                                                        self.same(name)))

    def device_task(self, path, ev, name, args):
        self.tasks[self._at(path, ev)] = (
            self.same(name), _dur(ev.get("dur")), self.same(_text(args.get("Task Type"))),
            self.same(_int(ev.get("tid"))))

    def queue_event(self, path, ev, name):
        self.queue_ev[self._at(path, ev)] = (self.same(name), _dur(ev.get("dur")))

    def _host_call(self, tid, t):
        """(start, dur, name) of the CANN call holding ``t`` on ``tid``: the innermost Node@
        event, else the innermost AscendCL@ event (db CANN_API links node launches, else acl
        calls); None when none holds it."""
        evs = self.cann.get(tid)
        if not evs:
            return None
        if not isinstance(evs, tuple):
            evs.sort()
            self.cann[tid] = evs = (evs, np.array([e[0] for e in evs], np.int64))
        lst, starts = evs
        j = int(np.searchsorted(starts, t, side="right")) - 1
        best: dict = {}
        for k in range(j, max(-1, j - 64), -1):
            s, e, nm = lst[k]
            if s <= t <= e:
                lvl = "Node" if nm.startswith("Node@") else "AscendCL"
                if lvl not in best or s >= best[lvl][0]:
                    best[lvl] = (s, e - s, nm)
        return best.get("Node") or best.get("AscendCL")

    def launches(self, rank, path) -> pa.Table:
        cols = {k: [] for k in ("conn_id", "host_name", "host_tid", "host_start_ns",
                                "host_dur_ns", "flow_start_ns", "device_start_ns",
                                "device_dur_ns", "task_name", "task_type", "stream_id")}
        for (cat, fid), fl in self.flows.items():
            if cat != "HostToDevice" or fl[0] is None:
                continue
            _, s_tid, s_ts = fl[0]
            call = self._host_call(s_tid, s_ts)
            for key in fl[1:]:
                task = self.tasks.get(key)
                cols["conn_id"].append(fid)
                cols["host_name"].append(call[2] if call else None)
                cols["host_tid"].append(_int(s_tid))
                cols["host_start_ns"].append(call[0] if call else s_ts)
                cols["host_dur_ns"].append(call[1] if call else None)
                cols["flow_start_ns"].append(s_ts)
                cols["device_start_ns"].append(key[2])
                cols["device_dur_ns"].append(task[1] if task else None)
                cols["task_name"].append(task[0] if task else None)
                cols["task_type"].append(task[2] if task else None)
                cols["stream_id"].append(task[3] if task else _int(key[1]))
        n = len(cols["conn_id"])
        return S.from_lists(S.LAUNCHES, {**cols, "rank": [rank] * n}, path)

    def queue(self, rank, path) -> pa.Table:
        cols = {k: [] for k in ("queue_id", "enqueue_ns", "enqueue_dur_ns", "dequeue_ns",
                                "dequeue_dur_ns", "op_name")}
        for (cat, fid), fl in self.flows.items():
            if cat != "async_task_queue" or fl[0] is None or len(fl) < 2:
                continue
            enq = self.queue_ev.get(fl[0])
            deq = self.queue_ev.get(fl[1])
            cols["queue_id"].append(fid)
            cols["enqueue_ns"].append(fl[0][2])
            cols["enqueue_dur_ns"].append(enq[1] if enq else None)
            cols["dequeue_ns"].append(fl[1][2])
            cols["dequeue_dur_ns"].append(deq[1] if deq else None)
            cols["op_name"].append(deq[0].split("@", 1)[1] if deq and "@" in deq[0] else None)
        n = len(cols["queue_id"])
        return S.from_lists(S.TASK_QUEUE, {**cols, "rank": [rank] * n}, path)


def _ts(path: Path, ev: dict) -> int:
    v = ev.get("ts")
    try:
        ns = us_text_to_ns(v)
    except ValueError:
        ns = None
    if ns is None:
        raise InputError(path, f"event {ev.get('name')!r} has a bad 'ts': {v!r}")
    return ns


def _dur(v) -> int:
    if v is None:
        return 0
    try:
        ns = us_text_to_ns(v)
    except ValueError:
        return 0
    return ns or 0


def _int(v):
    try:
        return int(v)
    except (TypeError, ValueError):
        return None


def _text(v):
    return None if v is None else str(v)


def _add_host(host: dict, path: Path, ev: dict, source: str, name: str) -> None:
    host["source"].append(source)
    host["name"].append(name)
    tid = ev.get("tid")
    host["tid"].append(tid if isinstance(tid, int) else _int(tid))
    host["start_ns"].append(_ts(path, ev))
    host["dur_ns"].append(_dur(ev.get("dur")))


def _host_table(host: dict, rank: int, path) -> pa.Table:
    n = len(host["name"])
    steps = [None] * n
    wins = sorted((int(m.group(1)), s, s + d) for nm, s, d in
                  zip(host["name"], host["start_ns"], host["dur_ns"])
                  if (m := _STEP_RE.match(nm)))
    if wins:
        try:
            starts = np.array([w[1] for w in wins], np.int64)
            ends = np.array([w[2] for w in wins], np.int64)
            ts = np.array(host["start_ns"], np.int64)
        except OverflowError:  # a step's ts + dur (or a db start stored as text) past int64
            raise InputError(path, "a ProfilerStep window or event start is beyond the int64 "
                                   "nanosecond range") from None
        ids = [w[0] for w in wins]
        idx = np.searchsorted(starts, ts, side="right") - 1
        for i, j in enumerate(idx.tolist()):
            if j >= 0 and ts[i] <= ends[j]:
                steps[i] = ids[j]
    return S.from_lists(S.HOST_EVENTS, {**host, "rank": [rank] * n, "step": steps}, path)


def _task_table(tasks: dict, ops: list, rank: int, path) -> pa.Table:
    n = len(tasks["task_name"])
    names = [None] * n
    if ops and n:
        by_pid: dict = {}
        for pid, s, e, nm in sorted(ops, key=lambda o: o[1]):
            by_pid.setdefault(pid, []).append((s, e, nm))
        for pid, lst in by_pid.items():
            starts = np.array([o[0] for o in lst], np.int64)
            for i in range(n):
                if tasks["pid"][i] != pid:
                    continue
                j = int(np.searchsorted(starts, tasks["start_ns"][i], side="right")) - 1
                # the latest-starting op holding the task (ops of two groups may overlap)
                while j >= 0 and lst[j][1] < tasks["start_ns"][i]:
                    j -= 1
                if j >= 0:
                    names[i] = lst[j][2]
    cols = {k: v for k, v in tasks.items() if k != "pid"}
    return S.from_lists(S.HCCL_TASKS, {**cols, "op_name": names, "rank": [rank] * n}, path)


# ----------------------------------------------------------------------------- db export

def _connect(path: Path) -> sqlite3.Connection:
    try:
        con = sqlite3.connect(f"file:{Path(path).resolve().as_posix()}?mode=ro&immutable=1",
                              uri=True)
        con.execute("SELECT name FROM sqlite_master LIMIT 1").fetchall()
        return con
    except sqlite3.Error as e:
        raise InputError(path, f"cannot open as SQLite: {e}") from None


def _tables(con) -> set[str]:
    return {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def _columns(con, table: str) -> set[str]:
    return {r[1] for r in con.execute(f"PRAGMA table_info('{table}')")}


def read_db_host(path: Path, rank: int) -> dict[str, pa.Table]:
    """The advice tables of one ``ascend_pytorch_profiler*.db`` / ``ascend_mindspore_profiler*.db``
    (spec §B.1), each only when its source table exists: HOST_EVENTS from PYTORCH_API (names
    :func:`keep_framework` keeps), CANN_API (level acl / node, renamed ``AscendCL@<name>`` /
    ``Node@<name>`` as trace_view writes them) and GC_RECORD; HCCL_TASKS from
    COMMUNICATION_TASK_INFO + TASK (+ COMMUNICATION_OP for the op name); LAUNCHES from TASK +
    CANN_API (one row per launched task); TASK_QUEUE from PYTORCH_API + CONNECTION_IDS;
    AICORE_FREQ from AICORE_FREQ. Times int ns. A CANN_API call whose name is NULL or not in
    STRING_IDS is left out of HOST_EVENTS and is not the host call of a launch (silently, as
    the other rows this reader cannot use). Raises InputError when the database cannot be read.
    """
    path = Path(path)
    con = _connect(path)
    try:
        return _read_db(con, path, rank)
    except sqlite3.Error as e:
        raise InputError(path, f"SQLite error: {e}") from None
    finally:
        con.close()


def _string(alias: str, col: str) -> str:
    return f"(SELECT value FROM STRING_IDS WHERE id = {alias}.{col})"


def _read_db(con, path: Path, rank: int) -> dict[str, pa.Table]:
    have = _tables(con)
    out: dict[str, pa.Table] = {}
    host = {"source": [], "name": [], "tid": [], "start_ns": [], "dur_ns": []}
    if "PYTORCH_API" in have:
        # keep_framework looks at the name alone: asked once per distinct name (a rank has a
        # few hundred, against thousands of rows), and only the rows it keeps are fetched
        kept = {}
        for nid, name in con.execute("SELECT id, value FROM STRING_IDS WHERE id IN "
                                     "(SELECT DISTINCT name FROM PYTORCH_API)"):
            src = keep_framework(name, None) if isinstance(name, str) and name else None
            if src:
                kept[nid] = (name, src)
        if kept:
            for nid, start, end, tid in con.execute(
                    f"SELECT name, startNs, endNs, globalTid FROM PYTORCH_API "
                    f"WHERE name IN ({','.join(str(int(i)) for i in kept)})"):
                name, src = kept[nid]
                _add_db(host, src, name, tid, start, end)
    if "CANN_API" in have:
        levels = dict(con.execute("SELECT id, name FROM ENUM_API_TYPE").fetchall()) \
            if "ENUM_API_TYPE" in have else {}
        for name, start, end, tid, level in con.execute(
                f"SELECT {_string('a', 'name')}, a.startNs, a.endNs, a.globalTid, a.type "
                f"FROM CANN_API a"):
            prefix = _LEVEL_PREFIX.get(str(levels.get(level, level)))
            if name is None or prefix is None:
                continue
            full = f"{prefix}@{name}"
            if full.startswith(CANN_PREFIXES):
                _add_db(host, "cann", full, tid, start, end)
    if "GC_RECORD" in have:
        cols = _columns(con, "GC_RECORD")
        if {"startNs", "endNs"} <= cols:
            tid = "globalTid" if "globalTid" in cols else "NULL"
            for start, end, t in con.execute(f"SELECT startNs, endNs, {tid} FROM GC_RECORD"):
                _add_db(host, "gc", "GC", t, start, end)
    if {"PYTORCH_API", "CANN_API", "GC_RECORD"} & have:
        out[S.HOST_EVENTS] = _host_table(host, rank, path)
    if {"COMMUNICATION_TASK_INFO", "TASK"} <= have:
        out[S.HCCL_TASKS] = _db_tasks(con, have, rank, path)
    if {"TASK", "CANN_API"} <= have:
        out[S.LAUNCHES] = _db_launches(con, have, rank, path)
    if {"PYTORCH_API", "CONNECTION_IDS"} <= have:
        out[S.TASK_QUEUE] = _db_queue(con, rank, path)
    if "AICORE_FREQ" in have:
        rows = con.execute("SELECT deviceId, timestampNs, freq FROM AICORE_FREQ "
                           "ORDER BY timestampNs").fetchall()
        out[S.AICORE_FREQ] = S.from_lists(S.AICORE_FREQ, {
            "rank": [rank] * len(rows), "device_id": [r[0] for r in rows],
            "ts_ns": [r[1] for r in rows], "freq_mhz": [r[2] for r in rows]}, path)
    return out


def _db_launches(con, have, rank: int, path) -> pa.Table:
    """LAUNCHES from TASK and CANN_API rows of one connectionId: the node-level call (the
    launch) when there is one, else the acl call; HCCL's small tasks
    (COMMUNICATION_TASK_INFO) are left out, as trace_view has no HostToDevice flow to them.
    A call whose name is NULL or not in STRING_IDS is no candidate (HOST_EVENTS leaves such a
    call out and trace_view has no nameless call): the task takes its connection's other call,
    and has no row when none is left, as a task without a call. Task name: COMPUTE_TASK_INFO's
    when the task is a compute task, else its task type."""
    levels = _enum(con, have, "ENUM_API_TYPE")
    node = [k for k, v in levels.items() if v == "node"]
    acl = [k for k, v in levels.items() if v == "acl"]
    rank_of = {t: i for i, t in enumerate(node + acl)}
    name = ("(SELECT value FROM STRING_IDS WHERE id = ci.name)"
            if "COMPUTE_TASK_INFO" in have else "NULL")
    join = ("LEFT JOIN COMPUTE_TASK_INFO ci ON ci.globalTaskId = t.globalTaskId"
            if "COMPUTE_TASK_INFO" in have else "")
    # HCCL's small tasks share their op's connection id: not launches of their own
    hccl = (" WHERE t.globalTaskId NOT IN (SELECT globalTaskId FROM COMMUNICATION_TASK_INFO)"
            if "COMMUNICATION_TASK_INFO" in have else "")
    rows = con.execute(
        f"SELECT t.connectionId, {_string('a', 'name')}, a.type, a.globalTid, a.startNs, "
        f"a.endNs, t.startNs, t.endNs, {name}, {_string('t', 'taskType')}, t.streamId, "
        f"t.globalTaskId FROM TASK t JOIN CANN_API a ON a.connectionId = t.connectionId "
        f"{join}{hccl}").fetchall()
    best: dict = {}
    for r in rows:
        if r[2] not in rank_of or r[1] is None:  # not a launch level, or an unknown name
            continue
        cur = best.get(r[11])
        if cur is None or rank_of[r[2]] < rank_of[cur[2]]:
            best[r[11]] = r
    keep = sorted(best.values(), key=lambda r: r[6])
    prefix = {k: _LEVEL_PREFIX.get(v, v) for k, v in levels.items()}
    return S.from_lists(S.LAUNCHES, {
        "rank": [rank] * len(keep), "conn_id": [str(r[0]) for r in keep],
        "host_name": [f"{prefix.get(r[2], r[2])}@{r[1]}" for r in keep],
        "host_tid": [_int(r[3]) for r in keep], "host_start_ns": [_int(r[4]) for r in keep],
        "host_dur_ns": [_int(r[5]) - _int(r[4]) for r in keep],
        "flow_start_ns": [_int(r[4]) for r in keep], "device_start_ns": [r[6] for r in keep],
        "device_dur_ns": [r[7] - r[6] for r in keep],
        "task_name": [r[8] if r[8] is not None else r[9] for r in keep],
        "task_type": [r[9] for r in keep], "stream_id": [r[10] for r in keep]}, path)


def _db_queue(con, rank: int, path) -> pa.Table:
    """TASK_QUEUE from the PYTORCH_API queue rows (Enqueue, Dequeue@<op>) whose connection ids
    (through CONNECTION_IDS) are the same."""
    rows = con.execute(
        f"SELECT {_string('p', 'name')}, p.startNs, p.endNs, ci.connectionId "
        f"FROM PYTORCH_API p JOIN CONNECTION_IDS ci ON ci.id = p.connectionId").fetchall()
    enq: dict = {}
    deq: dict = {}
    for nm, start, end, cid in rows:
        start, end = _int(start), _int(end)
        if start is None:  # a start that is not a number (the column is TEXT): no queue row,
            continue       # as _add_db leaves such an event out
        if nm == "Enqueue":
            enq[cid] = (start, end)
        elif isinstance(nm, str) and nm.startswith("Dequeue"):
            deq[cid] = (start, end, nm.split("@", 1)[1] if "@" in nm else None)
    ids = sorted(set(enq) & set(deq), key=lambda c: enq[c][0])

    def dur(start, end):
        return None if end is None else end - start

    return S.from_lists(S.TASK_QUEUE, {
        "rank": [rank] * len(ids), "queue_id": [str(c) for c in ids],
        "enqueue_ns": [enq[c][0] for c in ids],
        "enqueue_dur_ns": [dur(*enq[c]) for c in ids],
        "dequeue_ns": [deq[c][0] for c in ids],
        "dequeue_dur_ns": [dur(*deq[c][:2]) for c in ids],
        "op_name": [deq[c][2] for c in ids]}, path)


def _add_db(host: dict, source: str, name: str, tid, start, end) -> None:
    """One db row (times may be stored as text: PYTORCH_API declares them TEXT)."""
    start, end = _int(start), _int(end)
    if start is None:
        return
    host["source"].append(source)
    host["name"].append(name)
    host["tid"].append(_int(tid))
    host["start_ns"].append(start)
    host["dur_ns"].append(0 if end is None else end - start)


def _enum(con, have, table: str) -> dict:
    return dict(con.execute(f"SELECT id, name FROM {table}").fetchall()) if table in have else {}


def _db_tasks(con, have, rank: int, path) -> pa.Table:
    transports = _enum(con, have, "ENUM_HCCL_TRANSPORT_TYPE")
    links = _enum(con, have, "ENUM_HCCL_LINK_TYPE")
    cols = _columns(con, "COMMUNICATION_TASK_INFO")
    op = "NULL"
    if "COMMUNICATION_OP" in have and "opId" in cols and "opId" in _columns(
            con, "COMMUNICATION_OP"):
        op = ("(SELECT (SELECT value FROM STRING_IDS WHERE id = o.opName) "
              "FROM COMMUNICATION_OP o WHERE o.opId = c.opId)")
    sel = ", ".join(f"c.{k}" if k in cols else "NULL"
                    for k in ("transportType", "linkType", "size"))
    rows = con.execute(
        f"SELECT {op}, {_string('c', 'taskType')}, t.startNs, t.endNs, {sel} "
        f"FROM COMMUNICATION_TASK_INFO c JOIN TASK t ON t.globalTaskId = c.globalTaskId "
        f"ORDER BY t.startNs").fetchall()
    keep = [r for r in rows if r[1] in DATA_TASKS or str(r[1] or "").startswith("RDMA")]
    return S.from_lists(S.HCCL_TASKS, {
        "rank": [rank] * len(keep), "op_name": [r[0] for r in keep],
        "task_name": [r[1] for r in keep], "start_ns": [r[2] for r in keep],
        "dur_ns": [r[3] - r[2] for r in keep], "size_bytes": [r[6] for r in keep],
        "transport": [transports.get(r[4], None if r[4] is None else str(r[4])) for r in keep],
        "link_type": [links.get(r[5], None if r[5] is None else str(r[5])) for r in keep],
    }, path)


def db_pmu_columns(path: Path, kernels: pa.Table) -> pa.Table:
    """``kernels`` (KERNELS read from the same db) with the TASK_PMU_INFO ratios (names ending
    in ``_ratio`` or ``_rate``) added as float64 ``pmu:<name>`` columns, matched on the task's
    (start_ns, stream_id, task_id). Unchanged when the db has no TASK_PMU_INFO or the kernels
    already carry PMU columns. Raises InputError when the database cannot be read."""
    if any(c.startswith(S.PMU_PREFIX) for c in kernels.column_names) or kernels.num_rows == 0:
        return kernels
    con = _connect(path)
    try:
        if not {"TASK_PMU_INFO", "TASK"} <= _tables(con):
            return kernels
        # the ratio names, then only their rows, and the task keys apart: SQLite would build
        # an index of TASK by globalTaskId for every query joining them (TASK has none)
        names = {i: v for i, v in con.execute(
            "SELECT id, value FROM STRING_IDS WHERE id IN (SELECT DISTINCT name FROM "
            "TASK_PMU_INFO) AND (substr(value, -6) = '_ratio' OR substr(value, -5) = '_rate')")
            if isinstance(v, str) and (v.endswith("_ratio") or v.endswith("_rate"))}
        tasks: dict = {}  # globalTaskId: [(startNs, streamId, taskId)] in TASK's order
        for gid, *key in con.execute("SELECT globalTaskId, startNs, streamId, taskId FROM TASK"):
            tasks.setdefault(gid, []).append(tuple(key))
        found = con.execute(f"SELECT globalTaskId, name, value FROM TASK_PMU_INFO WHERE name IN "
                            f"({','.join(str(int(i)) for i in names)})").fetchall() \
            if names else []
    except sqlite3.Error as e:
        raise InputError(path, f"SQLite error: {e}") from None
    finally:
        con.close()
    if not found:
        return kernels
    # each row's value goes to the kernels with its task's key (start, stream, task id); a
    # later row of the same name and kernel replaces an earlier one, a NULL value included
    at: dict = {}
    for i, k in enumerate(zip(kernels["start_ns"].to_pylist(), kernels["stream_id"].to_pylist(),
                              kernels["task_id"].to_pylist())):
        at.setdefault(k, []).append(i)
    per: dict[str, dict] = {}  # name: {kernel row: value}
    for gid, nid, value in found:
        keys = tasks.get(gid)
        if not keys:
            continue
        got = per.get(names[nid])
        if got is None:
            got = per[names[nid]] = {}
        for key in keys:
            for i in at.get(key, ()):
                got[i] = value
    n = kernels.num_rows
    for name in sorted(per):
        v, valid = np.zeros(n, np.float64), np.zeros(n, bool)
        for i, value in per[name].items():
            if value is not None:
                v[i], valid[i] = float(value), True
        kernels = kernels.append_column(pa.field(S.PMU_PREFIX + name, pa.float64()),
                                        pa.array(v, pa.float64(), mask=~valid))
    return kernels


# ----------------------------------------------------------------------------- entry point

def extend(data, read_trace: bool) -> None:
    """Add the advice tables to ``data`` (a RankData) in place. db sources: always (SQL is
    cheap). Text sources: trace_view.json only when ``read_trace``; otherwise
    ``meta["advice_not_read"]`` says why. A file that cannot be read is recorded in
    ``data.problems`` (affects: advice) and the rest is kept."""
    src = data.source
    rank = data.rank
    try:
        if src.kind == scan.DB:
            db = next((Path(src.path) / f for f in src.files
                       if re.match(r"^ascend_(pytorch|mindspore)_profiler(_\d+)?\.db$",
                                   Path(f).name)), None)
            if db is None:
                return
            data.tables.update(read_db_host(db, rank))
            if S.KERNELS in data.tables:
                data.tables[S.KERNELS] = db_pmu_columns(db, data.tables[S.KERNELS])
            return
        tv = src.file("trace_view.json") if hasattr(src, "file") else None
        if tv is None:
            return
        if not read_trace:
            data.meta["advice_not_read"] = ("trace_view.json (host events, HCCL task sizes, AI "
                                            "Core frequency, launch links): read with "
                                            "--advice all or --timeline")
            return
        data.tables.update(read_trace_host(tv, rank))
    except InputError as e:
        data.problems.add_error(e, rank=rank, affects=("advice",))


__all__ = ["read_trace_host", "read_db_host", "db_pmu_columns", "extend", "keep_framework"]
