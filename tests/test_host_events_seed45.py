"""host_events (ascendprof.readers.host_events), mutation testing seed 45, read the way a run
with ``--advice all`` reads a rank (engine.pipeline.read_rank, ReadOptions(advice="all")).

db side, on the shipped level1 rank 0 torch_npu db export (fixtures/torch_npu-db-level1-rank0),
copied and edited with sqlite3:
- a db without the ENUM_HCCL_TRANSPORT_TYPE / ENUM_HCCL_LINK_TYPE tables is read with no
  problem: HCCL_TASKS keeps its data-moving tasks, transport and link type the codes as text;
- a PYTORCH_API name whose STRING_IDS value is a BLOB (not text: the value column is TEXT, so
  SQLite keeps a blob as it is) is skipped, as a NULL one is: no problem, HOST_EVENTS the same
  as that of the unedited export;
- a TASK_PMU_INFO row of a task that is no kernel (an HCCL small task) adds nothing: the
  kernels' pmu columns are those of their own tasks, read here with sqlite3.

Text side, on the real AlexNet 2-rank level2 rank 0 text export with hand-written events:
- HCCL_TASKS: of two overlapping hcom ops of one pid (B inside A), a small task in B's window
  is named after B (the latest-starting op holding it), one after B's end after A.

Expected values come from sqlite3 reads of the edited db, or are worked out by hand below.
"""

from __future__ import annotations

from collections import Counter

from test_host_events_db_seed34 import _copy, _read
from test_host_events_seed35 import PID, _db, _with_events
from test_host_events_seed40 import _TASKS, _advice_problems, _got_tasks, _ro
from test_host_events_trace_seed34 import ns, read_all, table

from ascendprof.model import schemas as S


# ----------------------------------------------------------------------------- db side

def test_db_without_hccl_enum_tables_keeps_codes_as_text(tmp_path):
    """ENUM_HCCL_TRANSPORT_TYPE and ENUM_HCCL_LINK_TYPE dropped: the 72 data-moving tasks
    (36 Memcpy, 36 Reduce_Inline) are still HCCL_TASKS rows, their transport and link type the
    code as text (no enum to name them), and the advice tables are read with no problem."""
    rank_dir = _copy(tmp_path, ["DROP TABLE ENUM_HCCL_TRANSPORT_TYPE",
                                "DROP TABLE ENUM_HCCL_LINK_TYPE"])
    with _ro(_db(rank_dir)) as con:
        have = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        assert not {"ENUM_HCCL_TRANSPORT_TYPE", "ENUM_HCCL_LINK_TYPE"} & have
        q = (_TASKS.replace("LEFT JOIN ENUM_HCCL_TRANSPORT_TYPE tr ON tr.id = ci.transportType",
                            "")
             .replace("LEFT JOIN ENUM_HCCL_LINK_TYPE lk ON lk.id = ci.linkType", "")
             .format(transport="CAST(ci.transportType AS TEXT)",
                     link="CAST(ci.linkType AS TEXT)"))
        want = Counter(con.execute(q))
    assert sum(want.values()) == 72
    assert {w[4] for w in want} == {"0"} and "1" in {w[5] for w in want}
    data = _read(rank_dir)
    assert _advice_problems(data) == [], data.problems.brief()
    assert _got_tasks(data) == want


def test_db_pytorch_api_name_stored_as_blob_is_skipped(tmp_path):
    """The STRING_IDS value of '<built-in function len>' (71 PYTORCH_API rows, not a framework
    name kept) rewritten as a BLOB of the same bytes: not a text name, so skipped like a NULL
    one; no problem, HOST_EVENTS the same as the unedited export's."""
    plain = _read(_copy(tmp_path / "plain")).tables[S.HOST_EVENTS]
    rank_dir = _copy(tmp_path / "edited", [
        "UPDATE STRING_IDS SET value = CAST(value AS BLOB) "
        "WHERE value = '<built-in function len>'"])
    with _ro(_db(rank_dir)) as con:
        (n,) = con.execute("SELECT COUNT(*) FROM PYTORCH_API p JOIN STRING_IDS s "
                           "ON s.id = p.name WHERE typeof(s.value) = 'blob'").fetchone()
    assert n == 71
    data = _read(rank_dir)
    assert _advice_problems(data) == [], data.problems.brief()
    got = data.tables[S.HOST_EVENTS]
    assert plain.num_rows > 0 and got.equals(plain)


def test_db_pmu_row_of_a_task_that_is_no_kernel_adds_nothing(tmp_path):
    """A TASK_PMU_INFO row (aic_mac_ratio = 0.5) added for an HCCL small task (a TASK row with
    no kernel): each kernel still has the ratios of the TASK row with its (start, stream, task
    id), null where there is none, and nothing else; no problem."""
    rank_dir = _copy(tmp_path, [
        "INSERT INTO TASK_PMU_INFO (globalTaskId, name, value) SELECT "
        "(SELECT MIN(globalTaskId) FROM COMMUNICATION_TASK_INFO), "
        "(SELECT id FROM STRING_IDS WHERE value = 'aic_mac_ratio'), 0.5"])
    with _ro(_db(rank_dir)) as c:
        rows = c.execute(
            """SELECT t.startNs, t.streamId, t.taskId, s.value, p.value FROM TASK_PMU_INFO p
               JOIN TASK t ON t.globalTaskId = p.globalTaskId
               JOIN STRING_IDS s ON s.id = p.name""").fetchall()
        (added,) = c.execute(
            "SELECT t.startNs, t.streamId, t.taskId FROM TASK t WHERE t.globalTaskId = "
            "(SELECT MIN(globalTaskId) FROM COMMUNICATION_TASK_INFO)").fetchall()
    names = {r[3] for r in rows if r[3].endswith("_ratio") or r[3].endswith("_rate")}
    assert "aic_mac_ratio" in names and len(names) == 13
    pmu = {(s, st, t, n): v for s, st, t, n, v in rows if n in names}
    assert pmu[added + ("aic_mac_ratio",)] == 0.5
    data = _read(rank_dir)
    assert _advice_problems(data) == [], data.problems.brief()
    kernels = data.tables[S.KERNELS]
    keys = {(k["start_ns"], k["stream_id"], k["task_id"]) for k in kernels.to_pylist()}
    assert added not in keys and kernels.num_rows == 191
    assert sorted(c for c in kernels.column_names if c.startswith(S.PMU_PREFIX)) == \
        sorted(S.PMU_PREFIX + n for n in names)
    for k in kernels.to_pylist():
        key = (k["start_ns"], k["stream_id"], k["task_id"])
        for n in names:
            assert k[S.PMU_PREFIX + n] == pmu.get(key + (n,)), (key, n)


# ----------------------------------------------------------------------------- text side

def test_hccl_task_in_nested_hcom_op_is_named_after_the_inner_one(shared_data, tmp_path):
    """hcom op A at 1000.000 us lasting 100 us (to 1100.000), hcom op B at 1010.000 us lasting
    40 us (to 1050.000), same pid: B starts later but ends first. An RDMA task at 1020.000 us
    is held by both (1000 <= 1020 <= 1100, 1010 <= 1020 <= 1050): the latest-starting holder
    is B. One at 1060.000 us is held by A alone (B ended at 1050): A."""
    rank = _with_events(shared_data, tmp_path, [
        {"ph": "X", "name": "hcom_t_A", "pid": PID, "tid": 1, "ts": "1000.000", "dur": 100},
        {"ph": "X", "name": "hcom_t_B", "pid": PID, "tid": 1, "ts": "1010.000", "dur": 40},
        {"ph": "X", "name": "RDMA_t_Send", "pid": PID, "tid": 1, "ts": "1020.000", "dur": 1,
         "args": {"size(Byte)": 64}},
        {"ph": "X", "name": "RDMA_t_Send", "pid": PID, "tid": 1, "ts": "1060.000", "dur": 1,
         "args": {"size(Byte)": 64}}])
    data = read_all(rank)
    got = sorted((r["start_ns"], r["op_name"]) for r in table(data, S.HCCL_TASKS)
                 if r["task_name"] == "RDMA_t_Send")
    assert got == [(ns("1020.000"), "hcom_t_B"), (ns("1060.000"), "hcom_t_A")]
