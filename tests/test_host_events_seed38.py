"""host_events (readers.host_events), mutation testing seed 38, db side, read the way a run with
``--advice all`` reads a rank (engine.pipeline.read_rank, ReadOptions(advice="all")) on the
shipped level1 rank 0 torch_npu db export (fixtures/torch_npu-db-level1-rank0), copied and
edited where a case needs it.

Checked:
- a profiler db that is not a database is one advice problem naming that file, whose reason is
  "cannot open as SQLite: " followed by SQLite's own message;
- every column of each db LAUNCHES row (host call thread, start and duration, flow start,
  device start and duration, task type, stream) is the CANN_API / TASK row of its connection;
- a query of the advice failing on the db (a renamed column) is one advice problem naming it,
  reason "SQLite error: " followed by SQLite's message;
- db AICORE_FREQ samples come in timestamp order with their device, time and frequency;
- db framework HOST_EVENTS (PYTORCH_API) carry name, start, duration, thread and the
  ProfilerStep#N window holding their start (its end included);
- text side (the AlexNet level2 rank 0 export with an event appended to trace_view.json): the
  problem for a kept event whose ts is no number names that event and the bad ts.

Expected values come from sqlite3 reads of the profiler db in the test.
"""

from __future__ import annotations

import sqlite3
from collections import Counter
from pathlib import Path

from test_host_events_db_seed34 import OUT, PROFILER_DB, _copy, _read
from test_host_events_seed35 import PID, _one_problem_naming_trace_view, _with_events
from test_host_events_trace_seed34 import read_all

from ascendprof.model import schemas as S


def _ro(db: Path) -> sqlite3.Connection:
    return sqlite3.connect(f"file:{db}?mode=ro&immutable=1", uri=True)


# ----------------------------------------------------------------------------- unreadable db

def test_profiler_db_not_a_database_is_an_advice_problem_saying_why(tmp_path):
    """The profiler db overwritten with text: the advice tables cannot be read, which is one
    problem (affects advice) naming the db, reason "cannot open as SQLite: <SQLite's message>"
    (the message as sqlite3 itself gives it for that file)."""
    rank_dir = _copy(tmp_path)
    db = rank_dir / OUT / PROFILER_DB
    db.write_bytes(b"not a database at all" * 10)
    con = _ro(db)
    try:
        con.execute("SELECT name FROM sqlite_master LIMIT 1").fetchall()
        sqlite_says = None
    except sqlite3.DatabaseError as e:
        sqlite_says = str(e)
    finally:
        con.close()
    assert sqlite_says == "file is not a database"
    data = _read(rank_dir)
    advice = [p for p in data.problems if "advice" in p.affects]
    assert [(Path(p.path).resolve(), p.affects) for p in advice] == \
        [(db.resolve(), ("advice",))], data.problems.brief()
    assert advice[0].reason == f"cannot open as SQLite: {sqlite_says}"
    for t in (S.HOST_EVENTS, S.LAUNCHES, S.TASK_QUEUE, S.HCCL_TASKS, S.AICORE_FREQ):
        assert t not in data.tables


# ----------------------------------------------------------------------------- LAUNCHES

def _launch_rows_by_hand(db: Path) -> Counter:
    """Each TASK row not in COMMUNICATION_TASK_INFO with a CANN_API call of level node or acl
    on its connectionId (the node call preferred), as the full LAUNCHES row: host_tid =
    globalTid, host_start_ns = flow_start_ns = the call's startNs, host_dur_ns = its endNs -
    startNs, device_start_ns / device_dur_ns = the task's startNs / endNs - startNs, task_type
    = the STRING_IDS value of taskType, stream_id = streamId."""
    con = _ro(db)
    try:
        s = dict(con.execute("SELECT id, value FROM STRING_IDS"))
        level = dict(con.execute("SELECT id, name FROM ENUM_API_TYPE"))
        calls: dict = {}
        for cid, nm, typ, tid, start, end in con.execute(
                "SELECT connectionId, name, type, globalTid, startNs, endNs FROM CANN_API"):
            calls.setdefault(cid, {})[level[typ]] = (s[nm], tid, start, end)
        compute = dict(con.execute("SELECT globalTaskId, name FROM COMPUTE_TASK_INFO"))
        hccl = {r[0] for r in con.execute("SELECT globalTaskId FROM COMMUNICATION_TASK_INFO")}
        tasks = con.execute("SELECT globalTaskId, connectionId, taskType, startNs, endNs, "
                            "streamId FROM TASK").fetchall()
    finally:
        con.close()
    want = Counter()
    for gid, cid, ttype, start, end, stream in tasks:
        c = calls.get(cid, {})
        if gid in hccl or not ("node" in c or "acl" in c):
            continue
        lv = "node" if "node" in c else "acl"
        name, tid, hs, he = c[lv]
        host = ("Node@" if lv == "node" else "AscendCL@") + name
        task_name = s[compute[gid]] if gid in compute else s[ttype]
        want[(0, None, str(cid), host, tid, hs, he - hs, hs, start, end - start, task_name,
              s[ttype], stream)] += 1
    return want


def test_db_launch_rows_carry_the_call_and_task_times(tmp_path):
    rank_dir = _copy(tmp_path)
    want = _launch_rows_by_hand(rank_dir / OUT / PROFILER_DB)
    # the export has calls that take time and tasks on more than one stream
    assert sum(want.values()) == 254
    assert all(w[6] > 0 for w in want) and len({w[12] for w in want}) > 1
    launches = _read(rank_dir).tables[S.LAUNCHES]
    got = Counter(tuple(r.values()) for r in launches.to_pylist())
    assert launches.column_names == [
        "rank", "step", "conn_id", "host_name", "host_tid", "host_start_ns", "host_dur_ns",
        "flow_start_ns", "device_start_ns", "device_dur_ns", "task_name", "task_type",
        "stream_id"]
    assert got == want


# ----------------------------------------------------------------------------- other places

def test_db_query_failing_is_an_advice_problem_with_sqlite_reason(tmp_path):
    """CANN_API's endNs renamed to stopNs: the advice query of CANN_API (alias ``a``) fails, so
    the advice tables are one problem (affects advice) naming the db, reason "SQLite error: "
    followed by what SQLite says of that column (asked here of the edited db)."""
    rank_dir = _copy(tmp_path, ["ALTER TABLE CANN_API RENAME COLUMN endNs TO stopNs"])
    db = rank_dir / OUT / PROFILER_DB
    con = _ro(db)
    try:
        con.execute("SELECT a.endNs FROM CANN_API a").fetchall()
        sqlite_says = None
    except sqlite3.OperationalError as e:
        sqlite_says = str(e)
    finally:
        con.close()
    assert sqlite_says == "no such column: a.endNs"
    data = _read(rank_dir)
    advice = [p for p in data.problems if "advice" in p.affects]
    assert [(Path(p.path).resolve(), p.affects) for p in advice] == \
        [(db.resolve(), ("advice",))], data.problems.brief()
    assert advice[0].reason == f"SQLite error: {sqlite_says}"
    assert S.HOST_EVENTS not in data.tables and S.LAUNCHES not in data.tables


def test_db_aicore_freq_samples_in_time_order_with_their_device(tmp_path):
    """The export's three AICORE_FREQ rows (device 0, 1800 MHz; its first row is later than
    its second) plus one of device 1 at 1300 MHz between them: AICORE_FREQ is the four samples
    in timestamp order, each with its device, time and frequency, rank 0."""
    rank_dir = _copy(tmp_path, [
        "INSERT INTO AICORE_FREQ (deviceId, timestampNs, freq) "
        "VALUES (1, 1736410576400000000, 1300)"])
    con = _ro(rank_dir / OUT / PROFILER_DB)
    try:
        rows = con.execute("SELECT deviceId, timestampNs, freq FROM AICORE_FREQ "
                           "ORDER BY rowid").fetchall()
    finally:
        con.close()
    # the stored order is not the time order
    assert [r[1] for r in rows] != sorted(r[1] for r in rows)
    want = [(0, d, t, float(f)) for d, t, f in sorted(rows, key=lambda r: r[1])]
    assert len(want) == 4 and (0, 1, 1736410576400000000, 1300.0) in want
    got = [(r["rank"], r["device_id"], r["ts_ns"], r["freq_mhz"])
           for r in _read(rank_dir).tables[S.AICORE_FREQ].to_pylist()]
    assert got == want


_SYNC = {"aten::item", "aten::_local_scalar_dense", "aten::is_nonzero", "aten::nonzero",
         "aten::equal", "aten::masked_select"}


def _framework(name: str) -> bool:
    """The advice's framework events, by name: profiler steps, optimizer steps, the ops that
    read a device value on the host, the dataloader and SyncBatchNorm."""
    return (name.startswith(("ProfilerStep#", "Optimizer.step#")) or name in _SYNC
            or "dataloader" in name.lower() or name.lower() == "syncbatchnorm")


def test_db_framework_host_events_with_times_thread_and_step(tmp_path):
    """Each PYTORCH_API row of a framework event (startNs / endNs stored as TEXT) is a
    HOST_EVENTS "framework" row: its name, start, endNs - startNs, globalTid, and the step N of
    the ProfilerStep#N row whose [start, end] holds its start (null when none does). An
    ``aten::item`` call added at the very end of the last step is still in that step."""
    rank_dir = _copy(tmp_path, [
        "INSERT INTO PYTORCH_API (startNs, endNs, globalTid, name) "
        "SELECT p.endNs, CAST(p.endNs AS INTEGER) + 5, p.globalTid, "
        "(SELECT id FROM STRING_IDS WHERE value = 'aten::item') FROM PYTORCH_API p "
        "JOIN STRING_IDS s ON s.id = p.name WHERE s.value LIKE 'ProfilerStep#%' "
        "ORDER BY CAST(p.startNs AS INTEGER) DESC LIMIT 1"])
    con = _ro(rank_dir / OUT / PROFILER_DB)
    try:
        rows = con.execute("SELECT s.value, p.startNs, p.endNs, p.globalTid FROM PYTORCH_API p "
                           "JOIN STRING_IDS s ON s.id = p.name").fetchall()
    finally:
        con.close()
    kept = [(n, int(s), int(e) - int(s), t) for n, s, e, t in rows if _framework(n)]
    steps = [(int(n.split("#")[1]), s, s + d) for n, s, d, _ in kept
             if n.startswith("ProfilerStep#")]
    assert steps and any(n in _SYNC for n, *_ in kept)

    def step_of(t):
        holding = [st for st in steps if st[1] <= t <= st[2]]
        return max(holding, key=lambda st: st[1])[0] if holding else None

    want = sorted((n, s, d, t, step_of(s)) for n, s, d, t in kept)
    assert any(w[4] is not None for w in want)
    last = max(steps, key=lambda st: st[1])
    assert [w[4] for w in want if w[0] == "aten::item" and w[1] == last[2]] == [last[0]]
    host = _read(rank_dir).tables[S.HOST_EVENTS].to_pylist()
    got = sorted((r["name"], r["start_ns"], r["dur_ns"], r["tid"], r["step"]) for r in host
                 if r["source"] == "framework")
    assert got == want


def test_bad_ts_problem_names_the_event_and_its_ts(shared_data, tmp_path):
    """A DataLoader event (kept as a framework host event) whose ts is "later": one advice
    problem naming trace_view.json whose reason names the event and the ts it has."""
    rank = _with_events(shared_data, tmp_path, [
        {"ph": "X", "name": "DataLoader.__next__", "cat": "python_function", "pid": PID,
         "tid": 3, "ts": "later", "dur": 2.0}])
    reason = _one_problem_naming_trace_view(rank, read_all(rank))
    assert "'DataLoader.__next__'" in reason and "'later'" in reason
