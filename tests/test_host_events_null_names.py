"""db launches whose CANN_API call has no name (ascendprof/readers/host_events.py, db side),
read through the public API (``ascendprof.open(dir).table(...)``) on a copy of the real level1
rank 0 torch_npu db export (torch_npu-2rank-levels/db/level1), edited with sqlite3.

A CANN_API row's ``name`` is an id into STRING_IDS. When it is NULL or points at no STRING_IDS
row, the call's name is unknown. The module's design for such a call: HOST_EVENTS leaves it out
(``read_db_host``), and trace_view.json has no nameless CANN call to link a launch to. So the
call is not a launch's host call either: the task takes another named call on its connection
(node level first, else acl), or has no LAUNCHES row, as a task with no call at all. Never a
host_name "Node@None" / "AscendCL@None". The module reports none of the rows it cannot use (no
problem is recorded for them), so none is expected here.

In this export CANN_API's connectionId is its PRIMARY KEY: one call per connection, and a
connection may hold several TASK rows. Expected rows are worked out with sqlite3 from the
export's own tables in each test.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from test_db_reader import _ro, run_sql

import ascendprof
from ascendprof.model import schemas as S

RANK = "torch_npu-2rank-levels/db/level1/rank0_ascend_pt"
DB = Path("ASCEND_PROFILER_OUTPUT") / "ascend_pytorch_profiler_0.db"
NODE, ACL = "node", "acl"


def _copy(shared_data: Path, tmp_path: Path) -> Path:
    """The real rank directory copied under tmp_path/run; its profiler db's path."""
    rank_dir = tmp_path / "run" / "rank0_ascend_pt"
    shutil.copytree(shared_data / RANK, rank_dir)
    return rank_dir / DB


def _launched(db: Path) -> dict[int, tuple[str, list[int]]]:
    """By hand, from the db: each connection with a node or acl call and at least one TASK row
    that is not an HCCL small task -> (the call's level, the TASK start times)."""
    con = _ro(db)
    try:
        rows = con.execute(
            "SELECT t.connectionId, e.name, t.startNs FROM TASK t JOIN CANN_API a "
            "ON a.connectionId = t.connectionId JOIN ENUM_API_TYPE e ON e.id = a.type "
            "WHERE e.name IN ('node', 'acl') AND t.globalTaskId NOT IN "
            "(SELECT globalTaskId FROM COMMUNICATION_TASK_INFO)").fetchall()
    finally:
        con.close()
    out: dict = {}
    for conn, level, start in rows:
        out.setdefault(conn, (level, []))[1].append(start)
    return out


def _first(launched: dict, level: str) -> int:
    """The connection of the earliest task launched by a call of ``level``."""
    return min((min(starts), c) for c, (lv, starts) in launched.items() if lv == level)[1]


def _open(db: Path):
    col = ascendprof.open(db.parents[2], workers=1)
    return col, col.table(S.LAUNCHES).to_pylist(), col.table(S.HOST_EVENTS).to_pylist()


def _pairs(launched: dict, drop=()) -> list[tuple[str, int]]:
    return sorted((str(c), s) for c, (_, starts) in launched.items() if c not in drop
                  for s in starts)


def _no_none_names(launches, host):
    assert not [r["host_name"] for r in launches if "None" in str(r["host_name"])]
    assert not [r["host_name"] for r in launches if r["host_name"] is None]
    assert not [r["name"] for r in host if r["name"].endswith("@None")]


def test_node_call_with_null_name_launches_nothing(shared_data, tmp_path):
    """The node call of the earliest node-launched task gets name NULL. It is that connection's
    only call, so its tasks have no launch row; every other launched task keeps its row
    (same connection ids and device starts as worked out from the db), and no host name is
    'Node@None'. HOST_EVENTS leaves the call out too, as it always did."""
    db = _copy(shared_data, tmp_path)
    launched = _launched(db)
    conn = _first(launched, NODE)
    run_sql(db, [f"UPDATE CANN_API SET name = NULL WHERE connectionId = {conn}"])
    col, launches, host = _open(db)
    got = sorted((r["conn_id"], r["device_start_ns"]) for r in launches)
    assert got == _pairs(launched, drop={conn})
    assert str(conn) not in {r["conn_id"] for r in launches}
    _no_none_names(launches, host)
    assert not list(col.problems), [p.line() for p in col.problems]


def test_acl_call_with_name_not_in_string_ids_launches_nothing(shared_data, tmp_path):
    """The acl call of the earliest acl-launched task gets a name id one past STRING_IDS' largest
    (so no string): that connection's tasks have no launch row, the others keep theirs, and no
    host name is 'AscendCL@None'."""
    db = _copy(shared_data, tmp_path)
    launched = _launched(db)
    conn = _first(launched, ACL)
    run_sql(db, [f"UPDATE CANN_API SET name = (SELECT MAX(id) + 1 FROM STRING_IDS) "
                 f"WHERE connectionId = {conn}"])
    col, launches, host = _open(db)
    assert sorted((r["conn_id"], r["device_start_ns"]) for r in launches) == \
        _pairs(launched, drop={conn})
    _no_none_names(launches, host)
    assert not list(col.problems), [p.line() for p in col.problems]


def test_nameless_node_call_gives_way_to_the_named_acl_call(shared_data, tmp_path):
    """CANN_API rebuilt without its PRIMARY KEY (so a connection can hold two calls); on the
    connection of the earliest node-launched task the node call's name is set NULL and an acl
    call named 'aclopCompileAndExecute' is added around it (100 ns before to 100 ns after, same
    thread). The node call would be preferred, but its name is unknown: the launch names the
    acl call (AscendCL@aclopCompileAndExecute, its thread, start and duration = node's + 200)."""
    db = _copy(shared_data, tmp_path)
    launched = _launched(db)
    conn = _first(launched, NODE)
    con = _ro(db)
    try:
        start, end, tid = con.execute("SELECT startNs, endNs, globalTid FROM CANN_API "
                                      "WHERE connectionId = ?", (conn,)).fetchone()
        (acl_type,) = con.execute("SELECT id FROM ENUM_API_TYPE WHERE name = 'acl'").fetchone()
        (new_id,) = con.execute("SELECT MAX(id) + 1 FROM STRING_IDS").fetchone()
    finally:
        con.close()
    run_sql(db, [
        "CREATE TABLE CANN_API_COPY AS SELECT * FROM CANN_API", "DROP TABLE CANN_API",
        "ALTER TABLE CANN_API_COPY RENAME TO CANN_API",
        f"UPDATE CANN_API SET name = NULL WHERE connectionId = {conn}",
        f"INSERT INTO STRING_IDS (id, value) VALUES ({new_id}, 'aclopCompileAndExecute')",
        f"INSERT INTO CANN_API (startNs, endNs, type, globalTid, connectionId, name, depth) "
        f"VALUES ({start - 100}, {end + 100}, {acl_type}, {tid}, {conn}, {new_id}, 0)"])
    col, launches, host = _open(db)
    mine = [r for r in launches if r["conn_id"] == str(conn)]
    assert sorted(r["device_start_ns"] for r in mine) == sorted(launched[conn][1])
    assert {(r["host_name"], r["host_tid"], r["host_start_ns"], r["host_dur_ns"])
            for r in mine} == {("AscendCL@aclopCompileAndExecute", tid, start - 100,
                                end - start + 200)}
    assert sorted((r["conn_id"], r["device_start_ns"]) for r in launches) == _pairs(launched)
    _no_none_names(launches, host)
