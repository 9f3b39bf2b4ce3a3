"""host_events (readers.host_events), mutation testing seed 39, read the way a run with
``--advice all`` reads a rank (engine.pipeline.read_rank, ReadOptions(advice="all")).

db side:
- a db export without COMPUTE_TASK_INFO (fixtures/torch_npu-db-level1-rank0 copied, that table
  dropped) still has its LAUNCHES, with no problem: every launch, each task named by its task
  type (there is no compute task name to give);
- the HOST_EVENTS rows of a db export carry the rank of the export (the shared rank 1 level1
  db export: rank 1 on every row, not null).

Text side (the real AlexNet 2-rank level2 rank 0 export, copied, with hand-written events
appended to its trace_view.json): a kept host event without a ``dur`` lasts 0 ns.

The same kinds at other places: every other advice table (db and trace_view) carries the
rank of the export (the shared rank 1 exports); a GC_RECORD without globalTid gives gc rows
with a null thread; COMMUNICATION_TASK_INFO without linkType gives a null link type; a db
without COMMUNICATION_TASK_INFO launches every task with a call; a ``dur`` that is no number,
a missing-value text or null lasts 0 ns.

Expected values come from sqlite3 reads of the db in the test or from the hand-written events.
"""

from __future__ import annotations

import sqlite3
from collections import Counter
from pathlib import Path

from test_host_events_db_seed34 import _copy, _read
from test_host_events_seed35 import PID, _db, _with_events
from test_host_events_trace_seed34 import ns, read_all, table

from ascendprof.model import schemas as S

LEVELS = "torch_npu-2rank-levels"  # the shared 2-rank export, text and db, levels 0-2


def _ro(db: Path) -> sqlite3.Connection:
    return sqlite3.connect(f"file:{db}?mode=ro&immutable=1", uri=True)


# ----------------------------------------------------------------------------- db: LAUNCHES

def _launches_named_by_type(db: Path) -> Counter:
    """(conn_id, host_name, task_name, task_type, device_start_ns) of each TASK row not in
    COMMUNICATION_TASK_INFO with a CANN_API call of level node or acl on its connectionId (the
    node call preferred); with no COMPUTE_TASK_INFO the task name is the task type."""
    con = _ro(db)
    try:
        s = dict(con.execute("SELECT id, value FROM STRING_IDS"))
        level = dict(con.execute("SELECT id, name FROM ENUM_API_TYPE"))
        calls: dict = {}
        for cid, nm, typ in con.execute("SELECT connectionId, name, type FROM CANN_API"):
            calls.setdefault(cid, {})[level[typ]] = s[nm]
        hccl = {r[0] for r in con.execute("SELECT globalTaskId FROM COMMUNICATION_TASK_INFO")}
        tasks = con.execute("SELECT globalTaskId, connectionId, taskType, startNs FROM TASK"
                            ).fetchall()
    finally:
        con.close()
    want = Counter()
    for gid, cid, ttype, start in tasks:
        c = calls.get(cid, {})
        if gid in hccl or not ("node" in c or "acl" in c):
            continue
        host = f"Node@{c['node']}" if "node" in c else f"AscendCL@{c['acl']}"
        want[(str(cid), host, s[ttype], s[ttype], start)] += 1
    return want


def test_db_without_compute_task_info_still_has_its_launches(tmp_path):
    """COMPUTE_TASK_INFO dropped: the LAUNCHES query has no compute task name to join, yet it
    is the same launches (254 in this export, as the full export has), named by task type,
    and reading the db is no problem."""
    rank_dir = _copy(tmp_path, ["DROP TABLE COMPUTE_TASK_INFO"])
    want = _launches_named_by_type(_db(rank_dir))
    assert sum(want.values()) == 254
    # kernels among them (named by their type now), not only memcpy / event records
    assert any(w[2].startswith("KERNEL_") for w in want)
    data = _read(rank_dir)
    assert [p for p in data.problems if "advice" in p.affects] == [], data.problems.brief()
    assert S.LAUNCHES in data.tables, data.problems.brief()
    got = Counter((r["conn_id"], r["host_name"], r["task_name"], r["task_type"],
                   r["device_start_ns"]) for r in data.tables[S.LAUNCHES].to_pylist())
    assert got == want


# ----------------------------------------------------------------------------- db: rank

def test_db_host_events_carry_the_rank_of_the_export(shared_data):
    """rank1_ascend_pt of the 2-rank level1 db export is rank 1 (its profiler db is
    ascend_pytorch_profiler_1.db): every HOST_EVENTS row says 1, as many rows as the db has
    kept events (at least its ProfilerStep# rows)."""
    rank_dir = shared_data / LEVELS / "db" / "level1" / "rank1_ascend_pt"
    db = rank_dir / "ASCEND_PROFILER_OUTPUT" / "ascend_pytorch_profiler_1.db"
    con = _ro(db)
    try:
        (steps,) = con.execute(
            "SELECT COUNT(*) FROM PYTORCH_API p JOIN STRING_IDS s ON s.id = p.name "
            "WHERE s.value LIKE 'ProfilerStep#%'").fetchone()
    finally:
        con.close()
    assert steps > 0
    data = _read(rank_dir)
    assert data.rank == 1
    rows = data.tables[S.HOST_EVENTS].to_pylist()
    assert sum(r["name"].startswith("ProfilerStep#") for r in rows) == steps
    assert {r["rank"] for r in rows} == {1}


# ----------------------------------------------------------------------------- text: dur

def test_kept_host_events_without_dur_last_zero_ns(shared_data, tmp_path):
    """A DataLoader framework event and an AscendCL@ CANN call, both without ``dur`` (and, to
    compare, one with dur 2.5 us = 2500 ns): kept as HOST_EVENTS rows of duration 0 ns."""
    rank = _with_events(shared_data, tmp_path, [
        {"ph": "X", "name": "DataLoader.__next__", "cat": "python_function", "pid": PID,
         "tid": 3, "ts": "1000.000"},
        {"ph": "X", "name": "AscendCL@aclrtSynchronizeStreamT39", "pid": PID, "tid": 3,
         "ts": "1001.000"},
        {"ph": "X", "name": "DataLoader.__next__", "cat": "python_function", "pid": PID,
         "tid": 3, "ts": "1002.000", "dur": 2.5}])
    rows = table(read_all(rank), S.HOST_EVENTS)
    got = sorted((r["source"], r["name"], r["start_ns"], r["dur_ns"]) for r in rows
                 if r["start_ns"] in (ns("1000.000"), ns("1001.000"), ns("1002.000"))
                 and r["tid"] == 3)
    assert got == [("cann", "AscendCL@aclrtSynchronizeStreamT39", 1001000, 0),
                   ("framework", "DataLoader.__next__", 1000000, 0),
                   ("framework", "DataLoader.__next__", 1002000, 2500)]


# ============================================================================= other places
# The same kinds of gap elsewhere in the module: the rank column of the other advice tables,
# the branches for a table or column an export may lack, and durations the reader cannot use.


def test_every_db_advice_table_carries_the_rank_of_the_export(shared_data):
    """The rank 1 level1 db export: LAUNCHES, TASK_QUEUE, HCCL_TASKS and AICORE_FREQ (all
    non-empty in it) say rank 1 on every row."""
    rank_dir = shared_data / LEVELS / "db" / "level1" / "rank1_ascend_pt"
    data = _read(rank_dir)
    assert data.rank == 1
    for t in (S.LAUNCHES, S.TASK_QUEUE, S.HCCL_TASKS, S.AICORE_FREQ):
        rows = data.tables[t].to_pylist()
        assert rows and {r["rank"] for r in rows} == {1}, t


def test_every_trace_view_advice_table_carries_the_rank_of_the_export(shared_data):
    """The rank 1 level2 text export read with --advice all: HOST_EVENTS, LAUNCHES,
    TASK_QUEUE, HCCL_TASKS and AICORE_FREQ (all non-empty in it) say rank 1 on every row."""
    data = read_all(shared_data / LEVELS / "text" / "level2" / "rank1_ascend_pt")
    assert data.rank == 1
    for t in (S.HOST_EVENTS, S.LAUNCHES, S.TASK_QUEUE, S.HCCL_TASKS, S.AICORE_FREQ):
        rows = table(data, t)
        assert rows and {r["rank"] for r in rows} == {1}, t


def test_db_gc_record_without_thread_column_has_null_tid(tmp_path):
    """A GC_RECORD with startNs / endNs but no globalTid column: its rows are still gc
    HOST_EVENTS (start, endNs - startNs), with no thread."""
    rank_dir = _copy(tmp_path, [
        "CREATE TABLE GC_RECORD (startNs INTEGER, endNs INTEGER)",
        "INSERT INTO GC_RECORD VALUES (1736410576400000000, 1736410576400250000)"])
    data = _read(rank_dir)
    assert [p for p in data.problems if "advice" in p.affects] == [], data.problems.brief()
    got = [(r["name"], r["start_ns"], r["dur_ns"], r["tid"])
           for r in data.tables[S.HOST_EVENTS].to_pylist() if r["source"] == "gc"]
    # 250000 = ...400250000 - ...400000000
    assert got == [("GC", 1736410576400000000, 250000, None)]


def test_db_hccl_tasks_without_link_type_column_have_null_link_type(tmp_path):
    """COMMUNICATION_TASK_INFO without its linkType column: the same 72 data-moving tasks, with
    their transport (named by ENUM_HCCL_TRANSPORT_TYPE) and size, and a null link type."""
    rank_dir = _copy(tmp_path, ["ALTER TABLE COMMUNICATION_TASK_INFO DROP COLUMN linkType"])
    con = _ro(_db(rank_dir))
    try:
        want = Counter(con.execute(
            """SELECT tt.value, t.startNs, ci.size, tr.name, NULL
               FROM COMMUNICATION_TASK_INFO ci JOIN TASK t ON t.globalTaskId = ci.globalTaskId
               JOIN STRING_IDS tt ON tt.id = ci.taskType
               LEFT JOIN ENUM_HCCL_TRANSPORT_TYPE tr ON tr.id = ci.transportType
               WHERE tt.value IN ('Memcpy', 'Reduce_Inline') OR tt.value LIKE 'RDMA%'"""))
    finally:
        con.close()
    assert sum(want.values()) == 72 and all(w[3] for w in want)
    data = _read(rank_dir)
    assert [p for p in data.problems if "advice" in p.affects] == [], data.problems.brief()
    got = Counter((r["task_name"], r["start_ns"], r["size_bytes"], r["transport"], r["link_type"])
                  for r in data.tables[S.HCCL_TASKS].to_pylist())
    assert got == want


def test_db_without_communication_task_info_launches_every_task_with_a_call(tmp_path):
    """COMMUNICATION_TASK_INFO dropped: nothing says which tasks are HCCL's small tasks, so
    LAUNCHES has every TASK row with a node / acl call on its connection (node preferred), and
    there is no HCCL_TASKS table."""
    rank_dir = _copy(tmp_path, ["DROP TABLE COMMUNICATION_TASK_INFO"])
    con = _ro(_db(rank_dir))
    try:
        s = dict(con.execute("SELECT id, value FROM STRING_IDS"))
        level = dict(con.execute("SELECT id, name FROM ENUM_API_TYPE"))
        calls: dict = {}
        for cid, nm, typ in con.execute("SELECT connectionId, name, type FROM CANN_API"):
            calls.setdefault(cid, {})[level[typ]] = s[nm]
        tasks = con.execute("SELECT connectionId, startNs FROM TASK").fetchall()
    finally:
        con.close()
    want = Counter()
    for cid, start in tasks:
        c = calls.get(cid, {})
        if "node" in c or "acl" in c:
            host = f"Node@{c['node']}" if "node" in c else f"AscendCL@{c['acl']}"
            want[(str(cid), host, start)] += 1
    # more than the 254 launches of the full export: its HCCL small tasks are in now
    assert sum(want.values()) > 254
    data = _read(rank_dir)
    assert [p for p in data.problems if "advice" in p.affects] == [], data.problems.brief()
    assert S.HCCL_TASKS not in data.tables
    got = Counter((r["conn_id"], r["host_name"], r["device_start_ns"])
                  for r in data.tables[S.LAUNCHES].to_pylist())
    assert got == want


def test_kept_host_events_with_unusable_dur_last_zero_ns(shared_data, tmp_path):
    """DataLoader events whose ``dur`` is no number ("abc"), a missing-value text ("N/A") or
    JSON null: kept as HOST_EVENTS rows of duration 0 ns, like an event without dur."""
    rank = _with_events(shared_data, tmp_path, [
        {"ph": "X", "name": "DataLoader.__next__", "cat": "python_function", "pid": PID,
         "tid": 5, "ts": ts, "dur": dur}
        for ts, dur in (("1000.000", "abc"), ("1001.000", "N/A"), ("1002.000", None))])
    rows = table(read_all(rank), S.HOST_EVENTS)
    got = sorted((r["start_ns"], r["dur_ns"]) for r in rows
                 if r["tid"] == 5 and r["name"] == "DataLoader.__next__"
                 and r["start_ns"] < ns("1003.000"))
    assert got == [(1000000, 0), (1001000, 0), (1002000, 0)]
