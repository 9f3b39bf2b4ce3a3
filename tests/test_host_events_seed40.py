"""host_events (readers.host_events), mutation testing seed 40, read the way a run with
``--advice all`` reads a rank (engine.pipeline.read_rank, ReadOptions(advice="all")), on the
shipped level1 rank 0 torch_npu db export (fixtures/torch_npu-db-level1-rank0), copied and
edited with sqlite3 where a case needs rows the export does not hold.

Checked:
- HCCL_TASKS keeps the small tasks whose task type starts with ``RDMA`` (the export has none:
  its Notify_Record type is renamed RDMASend), with their times, size, transport and link type;
- a transport / link type code that its enum table does not name is kept as the code's text
  (not dropped to null);
- a PYTORCH_API name whose STRING_IDS value is NULL is skipped: the advice tables are read
  with no problem and HOST_EVENTS is the same as that of the unedited export (the name is not
  one of the framework names kept).

The same kinds at other places: COMMUNICATION_TASK_INFO without its transportType column gives a
null transport (not the text "None"); a CANN_API call whose name string is NULL is no HOST_EVENTS
row (not "AscendCL@None"); a Dequeue row whose name string is NULL is no TASK_QUEUE row, the
other queue rows are kept.

Expected values come from sqlite3 reads of the edited db in the test.
"""

from __future__ import annotations

import sqlite3
from collections import Counter
from pathlib import Path

from test_host_events_db_seed34 import _copy, _read
from test_host_events_seed35 import _db

from ascendprof.model import schemas as S


def _ro(db: Path) -> sqlite3.Connection:
    return sqlite3.connect(f"file:{db}?mode=ro&immutable=1", uri=True)


def _advice_problems(data) -> list:
    return [p for p in data.problems if "advice" in p.affects]


_TASKS = """SELECT tt.value, t.startNs, t.endNs - t.startNs, ci.size, {transport}, {link}
            FROM COMMUNICATION_TASK_INFO ci JOIN TASK t ON t.globalTaskId = ci.globalTaskId
            JOIN STRING_IDS tt ON tt.id = ci.taskType
            LEFT JOIN ENUM_HCCL_TRANSPORT_TYPE tr ON tr.id = ci.transportType
            LEFT JOIN ENUM_HCCL_LINK_TYPE lk ON lk.id = ci.linkType
            WHERE tt.value IN ('Memcpy', 'Reduce_Inline') OR tt.value LIKE 'RDMA%'"""


def _got_tasks(data) -> Counter:
    return Counter((r["task_name"], r["start_ns"], r["dur_ns"], r["size_bytes"], r["transport"],
                    r["link_type"]) for r in data.tables[S.HCCL_TASKS].to_pylist())


def test_db_rdma_tasks_are_hccl_tasks(tmp_path):
    """Task type Notify_Record renamed RDMASend: its 112 small tasks are HCCL_TASKS rows too,
    next to the 36 Memcpy and 36 Reduce_Inline ones (184 rows)."""
    rank_dir = _copy(tmp_path, ["UPDATE STRING_IDS SET value = 'RDMASend' "
                                "WHERE value = 'Notify_Record'"])
    with _ro(_db(rank_dir)) as con:
        want = Counter(con.execute(_TASKS.format(transport="tr.name", link="lk.name")))
    n_rdma = sum(c for w, c in want.items() if w[0] == "RDMASend")
    assert n_rdma == 112 and sum(want.values()) == 36 + 36 + 112
    data = _read(rank_dir)
    assert _advice_problems(data) == [], data.problems.brief()
    assert _got_tasks(data) == want


def test_db_transport_and_link_codes_without_enum_name_are_kept_as_text(tmp_path):
    """ENUM rows of transport 0 (SDMA) and link type 1 (HCCS) deleted: the data-moving tasks
    with those codes carry "0" / "1" (the code as text), the others their enum name."""
    rank_dir = _copy(tmp_path, ["DELETE FROM ENUM_HCCL_TRANSPORT_TYPE WHERE id = 0",
                                "DELETE FROM ENUM_HCCL_LINK_TYPE WHERE id = 1"])
    with _ro(_db(rank_dir)) as con:
        want = Counter(con.execute(_TASKS.format(
            transport="COALESCE(tr.name, CAST(ci.transportType AS TEXT))",
            link="COALESCE(lk.name, CAST(ci.linkType AS TEXT))")))
    # the edit did what it says: all 72 data-moving tasks have transport 0, 56 link type 1
    assert sum(want.values()) == 72
    assert sum(c for w, c in want.items() if w[4] == "0") == 72
    assert sum(c for w, c in want.items() if w[5] == "1") == 56
    data = _read(rank_dir)
    assert _advice_problems(data) == [], data.problems.brief()
    assert _got_tasks(data) == want


def test_db_pytorch_api_name_with_null_string_is_skipped(tmp_path):
    """The STRING_IDS value of '<built-in function len>' (a PYTORCH_API name, not a framework
    name kept) set to NULL: no problem, and HOST_EVENTS the same as the unedited export's."""
    plain = _read(_copy(tmp_path / "plain")).tables[S.HOST_EVENTS]
    rank_dir = _copy(tmp_path / "edited", ["UPDATE STRING_IDS SET value = NULL "
                                           "WHERE value = '<built-in function len>'"])
    with _ro(_db(rank_dir)) as con:
        (n,) = con.execute("SELECT COUNT(*) FROM PYTORCH_API p JOIN STRING_IDS s "
                           "ON s.id = p.name WHERE s.value IS NULL").fetchone()
    assert n == 71
    data = _read(rank_dir)
    assert _advice_problems(data) == [], data.problems.brief()
    got = data.tables[S.HOST_EVENTS]
    assert plain.num_rows > 0 and got.equals(plain)


# ----------------------------------------------------------------------------- other places

def test_db_hccl_tasks_without_transport_column_have_null_transport(tmp_path):
    """COMMUNICATION_TASK_INFO without its transportType column: the same 72 data-moving tasks,
    with their link type (named by ENUM_HCCL_LINK_TYPE) and a null transport."""
    rank_dir = _copy(tmp_path, ["ALTER TABLE COMMUNICATION_TASK_INFO DROP COLUMN transportType"])
    with _ro(_db(rank_dir)) as con:
        want = Counter(con.execute(_TASKS.replace(
            "LEFT JOIN ENUM_HCCL_TRANSPORT_TYPE tr ON tr.id = ci.transportType", "").format(
            transport="NULL", link="lk.name")))
    assert sum(want.values()) == 72 and all(w[5] for w in want)
    data = _read(rank_dir)
    assert _advice_problems(data) == [], data.problems.brief()
    assert _got_tasks(data) == want


def test_db_cann_call_with_null_name_string_is_no_host_event(tmp_path):
    """The STRING_IDS value of 'aclCreateTensorDesc' (71 acl calls) set to NULL: those calls are
    left out; HOST_EVENTS' cann rows are the other acl calls as AscendCL@<name> and the node
    launch calls as Node@launch..., with their times and thread."""
    rank_dir = _copy(tmp_path, ["UPDATE STRING_IDS SET value = NULL "
                                "WHERE value = 'aclCreateTensorDesc'"])
    with _ro(_db(rank_dir)) as con:
        rows = con.execute(
            "SELECT e.name, s.value, a.startNs, a.endNs, a.globalTid FROM CANN_API a "
            "JOIN STRING_IDS s ON s.id = a.name JOIN ENUM_API_TYPE e ON e.id = a.type "
            "WHERE e.name IN ('acl', 'node')").fetchall()
    assert sum(1 for lv, nm, *_ in rows if lv == "acl" and nm is None) == 71
    want = Counter((("AscendCL@" if lv == "acl" else "Node@") + nm, s, e - s, tid)
                   for lv, nm, s, e, tid in rows
                   if nm is not None and (lv == "acl" or nm.startswith("launch")))
    assert sum(want.values()) > 0
    data = _read(rank_dir)
    assert _advice_problems(data) == [], data.problems.brief()
    got = Counter((r["name"], r["start_ns"], r["dur_ns"], r["tid"])
                  for r in data.tables[S.HOST_EVENTS].to_pylist() if r["source"] == "cann")
    assert got == want


def test_db_dequeue_with_null_name_string_is_no_queue_row(tmp_path):
    """The STRING_IDS value of 'Dequeue@aclnnMuls' (18 dequeues) set to NULL: those connection
    ids have no TASK_QUEUE row; every other Enqueue / Dequeue@<op> pair is kept."""
    rank_dir = _copy(tmp_path, ["UPDATE STRING_IDS SET value = NULL "
                                "WHERE value = 'Dequeue@aclnnMuls'"])
    with _ro(_db(rank_dir)) as con:
        rows = con.execute(
            "SELECT s.value, CAST(p.startNs AS INTEGER), ci.connectionId FROM PYTORCH_API p "
            "JOIN STRING_IDS s ON s.id = p.name "
            "JOIN CONNECTION_IDS ci ON ci.id = p.connectionId").fetchall()
    assert sum(1 for nm, *_ in rows if nm is None) == 18
    enq = {c: s for nm, s, c in rows if nm == "Enqueue"}
    deq = {c: (s, nm[len("Dequeue@"):]) for nm, s, c in rows
           if nm is not None and nm.startswith("Dequeue@")}
    want = sorted((enq[c], str(c), deq[c][0], deq[c][1]) for c in enq if c in deq)
    assert len(want) > 18
    data = _read(rank_dir)
    assert _advice_problems(data) == [], data.problems.brief()
    got = [(r["enqueue_ns"], r["queue_id"], r["dequeue_ns"], r["op_name"])
           for r in data.tables[S.TASK_QUEUE].to_pylist()]
    assert got == want
