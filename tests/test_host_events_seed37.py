"""host_events (readers.host_events), mutation testing seed 37, read the way a run with
``--advice all`` reads a rank (engine.pipeline.read_rank, ReadOptions(advice="all")).

db side (fixtures/torch_npu-db-level1-rank0, copied and edited with sqlite3):
- TASK_QUEUE rows follow their Enqueue's start, not their connection id (the earliest Enqueue
  and its Dequeue given the largest connection id stay first);
- an Enqueue time beyond int64 is one problem naming the profiler db (affects advice);
- a CANN_API row of a level the advice does not keep (``op``) is skipped and the calls after
  it are still HOST_EVENTS "cann" rows;
- a db with GC_RECORD but neither PYTORCH_API nor CANN_API still has HOST_EVENTS (its gc rows).

Text side (the real AlexNet 2-rank level2 rank 0 export, copied, with hand-written events
appended to its trace_view.json): a HostToDevice flow ends at a device task identified by pid,
tid and ts; another task at the same tid and ts in another process is not it.

Expected values come from sqlite3 reads of the edited db or from the hand-written events.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from test_host_events_db_seed34 import FIXTURE, _copy, _read
from test_host_events_seed35 import PID, _db, _with_events
from test_host_events_trace_seed34 import ns, read_all, table

from ascendprof.model import schemas as S


def _ro(db: Path) -> sqlite3.Connection:
    return sqlite3.connect(f"file:{db}?mode=ro&immutable=1", uri=True)


def _first_enqueue_conn(con) -> int:
    """CONNECTION_IDS.connectionId of the Enqueue that starts first."""
    ((cid,),) = con.execute(
        "SELECT ci.connectionId FROM PYTORCH_API p JOIN STRING_IDS s ON s.id = p.name "
        "JOIN CONNECTION_IDS ci ON ci.id = p.connectionId WHERE s.value = 'Enqueue' "
        "ORDER BY CAST(p.startNs AS INTEGER) LIMIT 1").fetchall()
    return cid


# ----------------------------------------------------------------------------- TASK_QUEUE

def test_db_task_queue_follows_enqueue_start_not_connection_id(tmp_path):
    """The earliest Enqueue and its Dequeue re-linked through a connection id larger than all
    others (CONNECTION_IDS rows of both edited): its TASK_QUEUE row is still the first, the
    rest follow in Enqueue start order."""
    with _ro(_db(FIXTURE)) as con:
        first = _first_enqueue_conn(con)
        (big,) = con.execute("SELECT MAX(connectionId) + 1000 FROM CONNECTION_IDS").fetchone()
    rank_dir = _copy(tmp_path, [
        f"UPDATE CONNECTION_IDS SET connectionId = {big} WHERE connectionId = {first}"])
    with _ro(_db(rank_dir)) as con:
        rows = con.execute(
            "SELECT s.value, CAST(p.startNs AS INTEGER), ci.connectionId "
            "FROM PYTORCH_API p JOIN STRING_IDS s ON s.id = p.name "
            "JOIN CONNECTION_IDS ci ON ci.id = p.connectionId").fetchall()
    enq = {c: s for nm, s, c in rows if nm == "Enqueue"}
    deq = {c for nm, s, c in rows if nm.startswith("Dequeue")}
    want = [str(c) for s, c in sorted((s, c) for c, s in enq.items() if c in deq)]
    # the edit did what it says: the first row by start is the one with the largest id
    assert len(want) > 2 and want[0] == str(big)
    assert want != [str(c) for c in sorted(int(w) for w in want)]
    got = [r["queue_id"] for r in _read(rank_dir).tables[S.TASK_QUEUE].to_pylist()]
    assert got == want


def test_db_enqueue_time_beyond_int64_names_the_database(tmp_path):
    """The first Enqueue's startNs / endNs (TEXT in PYTORCH_API) set to 2**63 and 2**63 + 10:
    TASK_QUEUE.enqueue_ns is int64, so the advice tables are one problem naming the db."""
    rank_dir = _copy(tmp_path, [
        "UPDATE PYTORCH_API SET startNs = '9223372036854775808', endNs = '9223372036854775818' "
        "WHERE rowid = (SELECT p.rowid FROM PYTORCH_API p JOIN STRING_IDS s ON s.id = p.name "
        "WHERE s.value = 'Enqueue' ORDER BY CAST(p.startNs AS INTEGER) LIMIT 1)"])
    data = _read(rank_dir)
    probs = list(data.problems)
    assert [(Path(p.path).resolve(), p.affects) for p in probs] == \
        [(_db(rank_dir).resolve(), ("advice",))], data.problems.brief()
    assert "enqueue_ns" in probs[0].reason


# ----------------------------------------------------------------------------- HOST_EVENTS

def test_db_cann_call_of_unkept_level_is_skipped_and_later_calls_kept(tmp_path):
    """The first CANN_API row (by rowid, the order SQLite reads the table in) made an ``op``
    level call (a level of ENUM_API_TYPE without a trace_view prefix): it is no HOST_EVENTS row,
    and every acl / node call after it still is (AscendCL@<name>, and Node@<name> when the
    name starts with "launch")."""
    rank_dir = _copy(tmp_path, [
        "UPDATE CANN_API SET type = (SELECT id FROM ENUM_API_TYPE WHERE name = 'op') "
        "WHERE rowid = (SELECT MIN(rowid) FROM CANN_API)"])
    with _ro(_db(rank_dir)) as con:
        levels = dict(con.execute("SELECT id, name FROM ENUM_API_TYPE"))
        strings = dict(con.execute("SELECT id, value FROM STRING_IDS"))
        rows = con.execute("SELECT type, name, startNs, endNs, globalTid FROM CANN_API "
                           "ORDER BY rowid").fetchall()
    assert levels[rows[0][0]] == "op"
    prefix = {"acl": "AscendCL@", "node": "Node@"}
    want = sorted((prefix[levels[t]] + strings[n], s, e - s, tid) for t, n, s, e, tid in rows
                  if levels[t] == "acl" or (levels[t] == "node"
                                            and strings[n].startswith("launch")))
    assert len(want) > 500
    host = _read(rank_dir).tables[S.HOST_EVENTS].to_pylist()
    got = sorted((r["name"], r["start_ns"], r["dur_ns"], r["tid"]) for r in host
                 if r["source"] == "cann")
    assert got == want


def test_db_with_gc_record_alone_has_host_events(tmp_path):
    """No PYTORCH_API and no CANN_API, only a GC_RECORD (two collections): HOST_EVENTS is
    there, with exactly the two gc rows (start, endNs - startNs, thread)."""
    rank_dir = _copy(tmp_path, [
        "DROP TABLE PYTORCH_API", "DROP TABLE CANN_API",
        "CREATE TABLE GC_RECORD (startNs INTEGER, endNs INTEGER, globalTid INTEGER)",
        "INSERT INTO GC_RECORD VALUES (1736410576400000000, 1736410576400250000, 4026531841)",
        "INSERT INTO GC_RECORD VALUES (1736410576500000000, 1736410576500001500, 4026531907)",
    ])
    data = _read(rank_dir)
    assert S.HOST_EVENTS in data.tables, data.problems.brief()
    got = [(r["source"], r["name"], r["start_ns"], r["dur_ns"], r["tid"])
           for r in data.tables[S.HOST_EVENTS].to_pylist()]
    # 250000 = ...400250000 - ...400000000; 1500 = ...500001500 - ...500000000
    assert sorted(got) == [("gc", "GC", 1736410576400000000, 250000, 4026531841),
                           ("gc", "GC", 1736410576500000000, 1500, 4026531907)]


# ----------------------------------------------------------------------------- LAUNCHES (text)

def test_launch_device_task_is_matched_on_pid_too(shared_data, tmp_path):
    """A Node@launch call on a thread of process PID starts HostToDevice flow "seed37"; the
    flow ends at (PID + 1, stream 7, ts 5000000.5), where task "KernelA" (AI_CORE) runs. A task
    "KernelB" (AI_CPU) at the same stream and ts but in process PID + 2, written after it, is
    not the launched task."""
    ts = "5000000.5"
    rank = _with_events(shared_data, tmp_path, [
        {"ph": "X", "name": "Node@launch", "pid": PID, "tid": 424242, "ts": "4999990.0",
         "dur": 5.0},
        {"ph": "s", "cat": "HostToDevice", "name": "HostToDevice", "id": "seed37", "pid": PID,
         "tid": 424242, "ts": "4999992.0"},
        {"ph": "f", "cat": "HostToDevice", "name": "HostToDevice", "id": "seed37", "bp": "e",
         "pid": PID + 1, "tid": 7, "ts": ts},
        {"ph": "X", "name": "KernelA", "pid": PID + 1, "tid": 7, "ts": ts, "dur": 2.25,
         "args": {"Task Type": "AI_CORE"}},
        {"ph": "X", "name": "KernelB", "pid": PID + 2, "tid": 7, "ts": ts, "dur": 9.0,
         "args": {"Task Type": "AI_CPU"}},
    ])
    (row,) = [r for r in table(read_all(rank), S.LAUNCHES) if r["conn_id"] == "seed37"]
    assert (row["host_name"], row["host_tid"], row["host_start_ns"], row["host_dur_ns"],
            row["flow_start_ns"]) == ("Node@launch", 424242, ns("4999990.0"), 5000,
                                      ns("4999992.0"))
    # 5000000.5 us = 5000000500 ns; 2.25 us = 2250 ns
    assert (row["device_start_ns"], row["device_dur_ns"], row["task_name"], row["task_type"],
            row["stream_id"]) == (5000000500, 2250, "KernelA", "AI_CORE", 7)
