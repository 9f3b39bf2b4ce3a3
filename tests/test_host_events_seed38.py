"""host_events (readers.host_events), mutation testing seed 38, db side, read the way a run with
``--advice all`` reads a rank (engine.pipeline.read_rank, ReadOptions(advice="all")) on the
shipped level1 rank 0 torch_npu db export (fixtures/torch_npu-db-level1-rank0), copied and
edited where a case needs it.

Checked:
- a profiler db that is not a database is one advice problem naming that file, whose reason is
  "cannot open as SQLite: " followed by SQLite's own message;
- every column of each db LAUNCHES row (host call thread, start and duration, flow start,
  device start and duration, task type, stream) is the CANN_API / TASK row of its connection.

Expected values come from sqlite3 reads of the profiler db in the test.
"""

from __future__ import annotations

import sqlite3
from collections import Counter
from pathlib import Path

from test_host_events_db_seed34 import OUT, PROFILER_DB, _copy, _read

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
