"""host_events (readers.host_events), mutation testing seed 35, read the way a run with
``--advice all`` reads a rank (engine.pipeline.read_rank, ReadOptions(advice="all")).

Text side (the real AlexNet 2-rank level2 rank 0 export, copied, with hand-written events
appended to its trace_view.json): a kept framework event, a framework-thread Enqueue or an HCCL
small task whose ``ts`` is no number, and an HCCL small task whose ``size(Byte)`` is beyond
int64, are each one problem naming trace_view.json (affects advice); every HOST_EVENTS row
carries the rank; an HCCL small task is named after the latest-starting ``hcom_*`` op of its
pid holding its start, even when ops starting later ended before it.

db side (fixtures/torch_npu-db-level1-rank0, copied and edited with sqlite3 where needed):
LAUNCHES takes the node-level CANN_API call of a task's connection when there is one, else the
acl call, and names a non-compute task after its task type; HCCL_TASKS name their
COMMUNICATION_OP (through opId); a damaged TASK cell of a launch is a problem naming the db.
Expected values come from json / sqlite3 reads of the profiler's files in the test.
"""

from __future__ import annotations

import sqlite3
from collections import Counter
from pathlib import Path

from _advice_data import OUT, copy_rank, trace_events
from test_host_events_db_seed34 import PROFILER_DB, _copy, _read
from test_host_events_trace_seed34 import ALEX, ns, read_all, table, write_trace

from ascendprof.model import schemas as S

PID = 987654  # a pid the export does not use: the appended events are apart from its own


def _with_events(shared_data, tmp_path, extra: list) -> Path:
    rank = copy_rank(shared_data / ALEX, tmp_path / "rank0_ascend_pt")
    events = trace_events(rank)
    assert not any(e.get("pid") == PID for e in events)
    write_trace(rank, events + extra)
    return rank


def _one_problem_naming_trace_view(rank: Path, data) -> str:
    probs = list(data.problems)
    assert [(Path(p.path).resolve(), p.affects) for p in probs] == \
        [((rank / OUT / "trace_view.json").resolve(), ("advice",))], data.problems.brief()
    return probs[0].reason


# ----------------------------------------------------------------------------- damaged events

def test_kept_framework_event_with_bad_ts_names_trace_view(shared_data, tmp_path):
    """An aten::item (a kept host-synchronising op) whose ts is 'soon'."""
    rank = _with_events(shared_data, tmp_path, [
        {"ph": "X", "name": "aten::item", "cat": "cpu_op", "pid": PID, "tid": 1, "ts": "soon",
         "dur": 1.5}])
    reason = _one_problem_naming_trace_view(rank, read_all(rank))
    assert "'soon'" in reason


def test_framework_enqueue_with_bad_ts_names_trace_view(shared_data, tmp_path):
    """An Enqueue on the framework thread (with a cat) whose ts is 'soon'."""
    rank = _with_events(shared_data, tmp_path, [
        {"ph": "X", "name": "Enqueue", "cat": "cpu_op", "pid": PID, "tid": 1, "ts": "soon",
         "dur": 1.5}])
    reason = _one_problem_naming_trace_view(rank, read_all(rank))
    assert "'soon'" in reason


def test_hccl_task_with_bad_ts_names_trace_view(shared_data, tmp_path):
    """A Memcpy small task (args size(Byte)) whose ts is 'soon'."""
    rank = _with_events(shared_data, tmp_path, [
        {"ph": "X", "name": "Memcpy", "pid": PID, "tid": 1, "ts": "soon", "dur": 1.5,
         "args": {"size(Byte)": 64}}])
    reason = _one_problem_naming_trace_view(rank, read_all(rank))
    assert "'soon'" in reason


def test_hccl_task_size_beyond_int64_names_trace_view(shared_data, tmp_path):
    """size(Byte) 10**30 (> 2**63 - 1) does not fit HCCL_TASKS.size_bytes (int64)."""
    big = 10 ** 30
    assert big > 2 ** 63 - 1
    rank = _with_events(shared_data, tmp_path, [
        {"ph": "X", "name": "Memcpy", "pid": PID, "tid": 1, "ts": "1000.000", "dur": 1.5,
         "args": {"size(Byte)": big}}])
    reason = _one_problem_naming_trace_view(rank, read_all(rank))
    assert "size_bytes" in reason


# ----------------------------------------------------------------------------- rank, op name

def test_host_events_carry_the_rank(shared_data):
    """rank0_ascend_pt is rank 0: every HOST_EVENTS row says so (not null)."""
    data = read_all(shared_data / ALEX)
    rows = table(data, S.HOST_EVENTS)
    assert rows and {r["rank"] for r in rows} == {0}


def test_hccl_task_op_skips_later_ops_that_ended_before_it(shared_data, tmp_path):
    """Four hcom ops of one pid (ts, dur in us): A 1000+10, B 1020+980, C 1030+970, D 1040+10,
    and an RDMA task at 1060. Ops holding 1060: B [1020, 2000] and C [1030, 2000] (A ended at
    1010, D at 1050); the latest-starting is C."""
    def op(name, ts, dur):
        return {"ph": "X", "name": name, "pid": PID, "tid": 1, "ts": ts, "dur": dur}
    rank = _with_events(shared_data, tmp_path, [
        op("hcom_t_A", "1000.000", 10), op("hcom_t_B", "1020.000", 980),
        op("hcom_t_C", "1030.000", 970), op("hcom_t_D", "1040.000", 10),
        {"ph": "X", "name": "RDMA_t_Send", "pid": PID, "tid": 1, "ts": "1060.000", "dur": 1,
         "args": {"size(Byte)": 64}}])
    data = read_all(rank)
    got = [(r["start_ns"], r["op_name"]) for r in table(data, S.HCCL_TASKS)
           if r["task_name"] == "RDMA_t_Send"]
    assert got == [(ns("1060.000"), "hcom_t_C")]


# ----------------------------------------------------------------------------- db side

def _db(rank_dir: Path) -> Path:
    return rank_dir / OUT / PROFILER_DB


def _launches_by_hand(db: Path) -> Counter:
    """(conn_id, host_name, task_name, device_start_ns) of each TASK row not in
    COMMUNICATION_TASK_INFO with a CANN_API call on its connectionId: the node-level call when
    there is one, else the acl one; task name: COMPUTE_TASK_INFO's, else the task type."""
    con = sqlite3.connect(f"file:{db}?mode=ro&immutable=1", uri=True)
    try:
        s = dict(con.execute("SELECT id, value FROM STRING_IDS"))
        level = dict(con.execute("SELECT id, name FROM ENUM_API_TYPE"))
        calls: dict = {}
        for cid, nm, typ in con.execute("SELECT connectionId, name, type FROM CANN_API"):
            calls.setdefault(cid, []).append((level[typ], s[nm]))
        compute = dict(con.execute("SELECT globalTaskId, name FROM COMPUTE_TASK_INFO"))
        hccl = {r[0] for r in con.execute("SELECT globalTaskId FROM COMMUNICATION_TASK_INFO")}
        tasks = con.execute("SELECT globalTaskId, connectionId, taskType, startNs FROM TASK"
                            ).fetchall()
    finally:
        con.close()
    want = Counter()
    for gid, cid, ttype, start in tasks:
        if gid in hccl:
            continue
        c = calls.get(cid, [])
        node = [n for lv, n in c if lv == "node"]
        acl = [n for lv, n in c if lv == "acl"]
        assert len(node) <= 1 and len(acl) <= 1
        if not (node or acl):
            continue
        host = f"Node@{node[0]}" if node else f"AscendCL@{acl[0]}"
        name = s[compute[gid]] if gid in compute else s[ttype]
        want[(str(cid), host, name, start)] += 1
    return want


def test_db_launches_prefer_node_call_and_name_non_compute_tasks_by_type(tmp_path):
    rank_dir = _copy(tmp_path)
    want = _launches_by_hand(_db(rank_dir))
    # the export has both kinds the rule tells apart
    assert any(h.startswith("Node@") for _, h, _, _ in want)
    assert any(n in ("EVENT_RECORD", "MEMCPY_ASYNC") for _, _, n, _ in want)
    data = _read(rank_dir)
    got = Counter((r["conn_id"], r["host_name"], r["task_name"], r["device_start_ns"])
                  for r in data.tables[S.LAUNCHES].to_pylist())
    assert got == want


def test_db_hccl_tasks_name_their_communication_op(tmp_path):
    """op_name of each data-moving HCCL small task = STRING_IDS value of the COMMUNICATION_OP
    row with its opId."""
    rank_dir = _copy(tmp_path)
    con = sqlite3.connect(f"file:{_db(rank_dir)}?mode=ro&immutable=1", uri=True)
    try:
        s = dict(con.execute("SELECT id, value FROM STRING_IDS"))
        ops = {oid: s[nm] for oid, nm in con.execute("SELECT opId, opName FROM COMMUNICATION_OP")}
        start = dict(con.execute("SELECT globalTaskId, startNs FROM TASK"))
        want = Counter()
        for gid, ttype, oid in con.execute(
                "SELECT globalTaskId, taskType, opId FROM COMMUNICATION_TASK_INFO"):
            name = s[ttype]
            if name in ("Memcpy", "Reduce_Inline") or name.startswith("RDMA"):
                want[(name, start[gid], ops.get(oid))] += 1
    finally:
        con.close()
    assert want and all(w[2] for w in want)
    got = Counter((r["task_name"], r["start_ns"], r["op_name"])
                  for r in _read(rank_dir).tables[S.HCCL_TASKS].to_pylist())
    assert got == want


def test_db_bad_launch_stream_names_the_database(tmp_path):
    """streamId 'abc' on an EVENT_RECORD task (a launch, not a kernel): LAUNCHES.stream_id is
    int64, so the advice tables are a problem naming the profiler db."""
    rank_dir = _copy(tmp_path, [
        "UPDATE TASK SET streamId = 'abc' WHERE rowid = (SELECT MIN(t.rowid) FROM TASK t "
        "JOIN CANN_API a ON a.connectionId = t.connectionId "
        "WHERE t.taskType = (SELECT id FROM STRING_IDS WHERE value = 'EVENT_RECORD'))"])
    data = _read(rank_dir)
    probs = list(data.problems)
    assert [(Path(p.path).resolve(), p.affects) for p in probs] == \
        [(_db(rank_dir).resolve(), ("advice",))], data.problems.brief()
    assert "stream_id" in probs[0].reason
