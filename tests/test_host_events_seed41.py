"""host_events (ascendprof.readers.host_events), mutation testing seed 41, read the way a run
with ``--advice all`` reads a rank (engine.pipeline.read_rank, ReadOptions(advice="all")).

Checked:
- db LAUNCHES come in the order of their device task start (TASK.startNs), not of their
  connection id (the shipped level1 rank 0 db export, expected order read with sqlite3);
- db LAUNCHES take the node-level CANN_API call of a connection that also has an acl call,
  whichever of the two rows the join meets last (a copy of the export whose CANN_API is
  rebuilt without its primary key, so a connection can have two calls);
- text side (the AlexNet level2 rank 0 export with an event appended to trace_view.json): an
  AscendCL@ call whose ts is no number is one advice problem naming trace_view.json, that
  event and the bad ts; a ProfilerStep#N whose end (ts + dur) is past the int64 nanosecond
  range is one advice problem naming trace_view.json, not a reader failure that loses the
  whole rank;
- the same bad ts on the events read only for the links and op names (an hcom_ op, a device
  task, an NPU-side Dequeue@, a HostToDevice flow start): one advice problem naming
  trace_view.json, the event and the ts;
- a db PYTORCH_API ProfilerStep row whose startNs (TEXT) is past int64: one advice problem
  naming the profiler db, the rank still read.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from test_host_events_db_seed34 import FIXTURE, OUT, PROFILER_DB, _copy, _read
from test_host_events_seed35 import PID, _one_problem_naming_trace_view, _with_events
from test_host_events_trace_seed34 import read_all

from ascendprof.model import schemas as S

INT64_MAX = 2**63 - 1


def _ro(db: Path) -> sqlite3.Connection:
    return sqlite3.connect(f"file:{db}?mode=ro&immutable=1", uri=True)


# ----------------------------------------------------------------------------- db LAUNCHES

def test_db_launches_come_in_device_start_order():
    """LAUNCHES rows of the export: one per TASK row (not an HCCL small task) whose
    connectionId has a node or acl CANN_API call, ordered by TASK.startNs. The export's
    connection ids are not in that order, so the order is the device start's own."""
    con = _ro(FIXTURE / OUT / PROFILER_DB)
    try:
        want = con.execute(
            "SELECT t.connectionId, t.startNs FROM TASK t JOIN CANN_API a "
            "ON a.connectionId = t.connectionId JOIN ENUM_API_TYPE e ON e.id = a.type "
            "WHERE e.name IN ('node', 'acl') AND t.globalTaskId NOT IN "
            "(SELECT globalTaskId FROM COMMUNICATION_TASK_INFO) ORDER BY t.startNs").fetchall()
    finally:
        con.close()
    starts = [s for _, s in want]
    assert len(set(starts)) == len(starts)  # no ties: the order is fully determined
    conns = [c for c, _ in want]
    assert conns != sorted(conns)
    got = [(int(r["conn_id"]), r["device_start_ns"])
           for r in _read(FIXTURE).tables[S.LAUNCHES].to_pylist()]
    assert got == want


def test_db_launch_prefers_node_call_of_a_connection_that_also_has_an_acl_call(tmp_path):
    """CANN_API rebuilt without its PRIMARY KEY on connectionId, then an acl call
    (aclopCompileAndExecute) added on the connections of the first and of the last
    node-launched task: on the first one it holds the node call (starts 100 ns before, ends
    100 ns after) and is inserted after it; on the last one it lies inside the node call
    (starts 10 ns after, ends 10 ns before) and the node row is re-inserted after it. So
    whether the join meets a connection's calls in row order or in start order, one of the two
    connections has its acl row last. Both launches still name the node call (Node@<name>,
    its thread, start and duration)."""
    db = FIXTURE / OUT / PROFILER_DB
    con = _ro(db)
    try:
        s = dict(con.execute("SELECT id, value FROM STRING_IDS"))
        node_rows = con.execute(
            "SELECT a.connectionId, a.startNs, a.endNs, a.type, a.globalTid, a.name, a.depth "
            "FROM CANN_API a JOIN TASK t ON t.connectionId = a.connectionId "
            "JOIN ENUM_API_TYPE e ON e.id = a.type WHERE e.name = 'node' AND t.globalTaskId "
            "NOT IN (SELECT globalTaskId FROM COMMUNICATION_TASK_INFO) "
            "ORDER BY t.startNs").fetchall()
        (acl_type,) = con.execute("SELECT id FROM ENUM_API_TYPE WHERE name = 'acl'").fetchone()
    finally:
        con.close()
    first, last = node_rows[0], node_rows[-1]
    assert first[0] != last[0] and last[2] - last[1] > 20
    acl_name = next(k for k, v in s.items() if v == "aclopCompileAndExecute") \
        if "aclopCompileAndExecute" in s.values() else max(s) + 1

    def acl(row, pad):
        return (f"INSERT INTO CANN_API (connectionId, startNs, endNs, type, globalTid, name, "
                f"depth) VALUES ({row[0]}, {row[1] - pad}, {row[2] + pad}, {acl_type}, "
                f"{row[4]}, {acl_name}, 0)")

    def node(row):
        return ("INSERT INTO CANN_API (connectionId, startNs, endNs, type, globalTid, name, "
                "depth) VALUES (" + ", ".join(str(v) for v in row) + ")")

    sql = ["CREATE TABLE CANN_API_COPY AS SELECT * FROM CANN_API", "DROP TABLE CANN_API",
           "ALTER TABLE CANN_API_COPY RENAME TO CANN_API", acl(first, 100),
           acl(last, -10), f"DELETE FROM CANN_API WHERE connectionId = {last[0]} AND type = {last[3]}",
           node(last)]
    if acl_name not in s:
        sql.append(f"INSERT INTO STRING_IDS (id, value) VALUES ({acl_name}, "
                   f"'aclopCompileAndExecute')")
    rank_dir = _copy(tmp_path, sql)
    # both connections now have two calls
    con = _ro(rank_dir / OUT / PROFILER_DB)
    try:
        for row in (first, last):
            assert con.execute("SELECT COUNT(*) FROM CANN_API WHERE connectionId = ?",
                               (row[0],)).fetchone() == (2,)
    finally:
        con.close()
    data = _read(rank_dir)
    assert not list(data.problems), data.problems.brief()
    by_conn = {r["conn_id"]: r for r in data.tables[S.LAUNCHES].to_pylist()}
    for conn, start, end, _, tid, name, _ in (first, last):
        r = by_conn[str(conn)]
        assert (r["host_name"], r["host_tid"], r["host_start_ns"], r["host_dur_ns"]) == \
            (f"Node@{s[name]}", tid, start, end - start)


# ----------------------------------------------------------------------------- trace_view

def test_cann_call_with_bad_ts_names_trace_view(shared_data, tmp_path):
    """An AscendCL@ call (no cat: a CANN event, read for the launch links) whose ts is
    'soon': one advice problem naming trace_view.json, the event and the bad ts."""
    rank = _with_events(shared_data, tmp_path, [
        {"ph": "X", "name": "AscendCL@aclrtSynchronizeStream", "pid": PID, "tid": 1,
         "ts": "soon", "dur": 1.5}])
    reason = _one_problem_naming_trace_view(rank, read_all(rank))
    assert "'AscendCL@aclrtSynchronizeStream'" in reason and "'soon'" in reason, reason


def test_profiler_step_ending_past_int64_is_an_advice_problem(shared_data, tmp_path):
    """A ProfilerStep#99 starting at 9223372036854775.000 us = 9223372036854775000 ns (in
    int64) lasting 10 us ends at 9223372036854785000 ns, past 2**63 - 1: the step window
    cannot be held, which is one advice problem naming trace_view.json; the rank itself is
    still read (its kernels are there)."""
    start_ns = 9223372036854775 * 1000
    assert start_ns <= INT64_MAX < start_ns + 10 * 1000
    rank = _with_events(shared_data, tmp_path, [
        {"ph": "X", "name": "ProfilerStep#99", "cat": "cpu_op", "pid": PID, "tid": 1,
         "ts": "9223372036854775.000", "dur": 10}])
    data = read_all(rank)
    reason = _one_problem_naming_trace_view(rank, data)
    assert "int64" in reason, reason
    assert data.tables[S.KERNELS].num_rows > 0
    assert S.HOST_EVENTS not in data.tables


# ----------------------------------------------------------------------------- other places

@pytest.mark.parametrize("event", [
    # an hcom_ big op (kept for the op name of the HCCL small tasks it holds)
    {"ph": "X", "name": "hcom_allReduce__999_0_1", "pid": PID, "tid": 1, "ts": "soon",
     "dur": 5.0},
    # a device task (args "Task Type": the far end of a HostToDevice flow)
    {"ph": "X", "name": "MyKernel", "pid": PID, "tid": 1, "ts": "soon", "dur": 1.0,
     "args": {"Task Type": "AI_CORE"}},
    # a Dequeue@<op> on the NPU side (no cat)
    {"ph": "X", "name": "Dequeue@MyOp", "pid": PID, "tid": 1, "ts": "soon", "dur": 1.0},
    # the start of a HostToDevice flow
    {"ph": "s", "name": "HostToDevice999", "cat": "HostToDevice", "id": "999", "pid": PID,
     "tid": 1, "ts": "soon"},
], ids=["hcom_op", "device_task", "dequeue", "flow_start"])
def test_linked_event_with_bad_ts_names_trace_view(shared_data, tmp_path, event):
    """Each event kind read for the links and op names (not a host event itself) whose ts is
    'soon': one advice problem naming trace_view.json, the event and the bad ts."""
    rank = _with_events(shared_data, tmp_path, [event])
    reason = _one_problem_naming_trace_view(rank, read_all(rank))
    assert f"{event['name']!r}" in reason and "'soon'" in reason, reason


def test_db_framework_start_past_int64_is_an_advice_problem(tmp_path):
    """A ProfilerStep#N row of PYTORCH_API (times stored as TEXT) whose startNs is
    '99999999999999999999' (> 2**63 - 1): one advice problem naming the profiler db that
    says int64; the rank itself is still read (its kernels are there)."""
    assert 99999999999999999999 > INT64_MAX
    rank_dir = _copy(tmp_path, [
        "UPDATE PYTORCH_API SET startNs = '99999999999999999999' WHERE rowid = "
        "(SELECT MIN(p.rowid) FROM PYTORCH_API p JOIN STRING_IDS s ON s.id = p.name "
        "WHERE s.value LIKE 'ProfilerStep#%')"])
    data = _read(rank_dir)
    probs = list(data.problems)
    assert [(Path(p.path).resolve(), p.affects) for p in probs] == \
        [((rank_dir / OUT / PROFILER_DB).resolve(), ("advice",))], data.problems.brief()
    assert "int64" in probs[0].reason
    assert data.tables[S.KERNELS].num_rows > 0
    assert S.HOST_EVENTS not in data.tables
