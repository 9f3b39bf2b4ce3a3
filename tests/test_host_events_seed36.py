"""host_events (readers.host_events), mutation testing seed 36, read the way a run with
``--advice all`` reads a rank (engine.pipeline.read_rank, ReadOptions(advice="all")).

db side (fixtures/torch_npu-db-level1-rank0, copied and edited with sqlite3 where needed):
TASK_QUEUE rows come in the order of their Enqueue's start (not its end, even when an Enqueue
lasts past later ones); HCCL_TASKS op_name is null when the db has no COMMUNICATION_OP table; a
TASK_PMU_INFO that SQLite cannot query is one problem naming the db (affects advice).

Text side (the real AlexNet 2-rank level2 rank 0 export, copied, with hand-written events
appended to its trace_view.json): an Enqueue without a ``cat`` is joined to its Dequeue through
its async_task_queue flow, with its own duration; an ``AI Core Freq`` counter sample whose ts is
no number is one problem naming trace_view.json.
Expected values come from sqlite3 reads of the profiler's db or from the hand-written events.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from test_host_events_db_seed34 import _copy, _read
from test_host_events_seed35 import PID, _db, _one_problem_naming_trace_view, _with_events
from test_host_events_trace_seed34 import ns, read_all, table

from ascendprof.model import schemas as S


def _ro(db: Path) -> sqlite3.Connection:
    return sqlite3.connect(f"file:{db}?mode=ro&immutable=1", uri=True)


# ----------------------------------------------------------------------------- db side

# the first Enqueue (by start) made to end after every other PYTORCH_API row
_LONG_ENQUEUE = [
    "UPDATE PYTORCH_API SET endNs = CAST((SELECT MAX(CAST(endNs AS INTEGER)) FROM PYTORCH_API) "
    "+ 1000 AS TEXT) WHERE rowid = (SELECT p.rowid FROM PYTORCH_API p JOIN STRING_IDS s "
    "ON s.id = p.name WHERE s.value = 'Enqueue' ORDER BY CAST(p.startNs AS INTEGER) LIMIT 1)"]


def test_db_task_queue_in_enqueue_start_order_even_for_a_long_enqueue(tmp_path):
    """TASK_QUEUE: one row per connection id with an Enqueue and a Dequeue, ordered by the
    Enqueue's start; the earliest Enqueue, lasting past all the others, stays first."""
    rank_dir = _copy(tmp_path, _LONG_ENQUEUE)
    with _ro(_db(rank_dir)) as con:
        rows = con.execute(
            "SELECT s.value, CAST(p.startNs AS INTEGER), CAST(p.endNs AS INTEGER), "
            "ci.connectionId FROM PYTORCH_API p JOIN STRING_IDS s ON s.id = p.name "
            "JOIN CONNECTION_IDS ci ON ci.id = p.connectionId").fetchall()
    enq = {c: (s, e) for nm, s, e, c in rows if nm == "Enqueue"}
    deq = {c: s for nm, s, e, c in rows if nm.startswith("Dequeue")}
    want = sorted((s, e - s, str(c)) for c, (s, e) in enq.items() if c in deq)
    assert len(want) > 2
    # the edit did what it says: the first Enqueue now ends after every other one
    assert want[0][0] + want[0][1] > max(s + d for s, d, _ in want[1:])
    got = [(r["enqueue_ns"], r["enqueue_dur_ns"], r["queue_id"])
           for r in _read(rank_dir).tables[S.TASK_QUEUE].to_pylist()]
    assert got == want


def test_db_hccl_tasks_without_communication_op_have_null_op(tmp_path):
    """No COMMUNICATION_OP table: the data-moving HCCL small tasks are all kept, op_name null."""
    rank_dir = _copy(tmp_path, ["DROP TABLE COMMUNICATION_OP"])
    with _ro(_db(rank_dir)) as con:
        s = dict(con.execute("SELECT id, value FROM STRING_IDS"))
        names = [s[t] for (t,) in con.execute("SELECT taskType FROM COMMUNICATION_TASK_INFO")]
    n = sum(1 for nm in names if nm in ("Memcpy", "Reduce_Inline") or nm.startswith("RDMA"))
    assert n > 0
    rows = _read(rank_dir).tables[S.HCCL_TASKS].to_pylist()
    assert len(rows) == n
    assert [r["op_name"] for r in rows] == [None] * n


def test_db_unqueryable_pmu_table_is_a_problem_naming_the_database(tmp_path):
    """TASK_PMU_INFO without its ``name`` column: SQLite cannot select the ratio names, so the
    advice tables are one problem naming the profiler db; the kernels are still read."""
    rank_dir = _copy(tmp_path, [
        "DROP TABLE TASK_PMU_INFO",
        "CREATE TABLE TASK_PMU_INFO (globalTaskId INTEGER, value NUMERIC)"])
    data = _read(rank_dir)
    probs = list(data.problems)
    assert [(Path(p.path).resolve(), p.affects) for p in probs] == \
        [(_db(rank_dir).resolve(), ("advice",))], data.problems.brief()
    assert "SQLite error" in probs[0].reason and "name" in probs[0].reason
    assert data.tables[S.KERNELS].num_rows > 0


# ----------------------------------------------------------------------------- text side

def test_enqueue_without_cat_joins_its_dequeue(shared_data, tmp_path):
    """An Enqueue and a Dequeue@MyOp with no ``cat`` (another thread of a new pid), joined by an
    async_task_queue flow: one TASK_QUEUE row with both durations (2.5 us, 1.25 us)."""
    rank = _with_events(shared_data, tmp_path, [
        {"ph": "X", "name": "Enqueue", "pid": PID, "tid": 1, "ts": "100.000", "dur": 2.5},
        {"ph": "X", "name": "Dequeue@MyOp", "pid": PID, "tid": 2, "ts": "105.000",
         "dur": 1.25},
        {"ph": "s", "name": "q", "cat": "async_task_queue", "id": "surv36", "pid": PID,
         "tid": 1, "ts": "100.000"},
        {"ph": "f", "name": "q", "cat": "async_task_queue", "id": "surv36", "pid": PID,
         "tid": 2, "ts": "105.000", "bp": "e"}])
    data = read_all(rank)
    assert not list(data.problems), data.problems.brief()
    got = [(r["enqueue_ns"], r["enqueue_dur_ns"], r["dequeue_ns"], r["dequeue_dur_ns"],
            r["op_name"]) for r in table(data, S.TASK_QUEUE) if r["queue_id"] == "surv36"]
    # 100 us = 100 000 ns, 2.5 us = 2 500 ns, 105 us = 105 000 ns, 1.25 us = 1 250 ns
    assert got == [(100_000, 2_500, 105_000, 1_250, "MyOp")]
    assert ns("100.000") == 100_000


def test_aicore_freq_sample_with_bad_ts_names_trace_view(shared_data, tmp_path):
    """An AI Core Freq counter sample (a valid MHz) whose ts is 'soon'."""
    rank = _with_events(shared_data, tmp_path, [
        {"ph": "C", "name": "AI Core Freq", "pid": PID, "tid": 1, "ts": "soon",
         "args": {"MHz": 1800}}])
    reason = _one_problem_naming_trace_view(rank, read_all(rank))
    assert "'soon'" in reason
