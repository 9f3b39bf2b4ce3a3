"""The advice tables of a db export (ascendprof.readers.host_events, db side), read the way a
run reads them: ``pipeline.read_rank`` with ``ReadOptions(advice="all")`` on the shipped level1
rank 0 torch_npu db export (fixtures/torch_npu-db-level1-rank0), copied and edited with sqlite3
where a case needs rows the export does not hold.

Checked: GC_RECORD rows become HOST_EVENTS "gc" rows (start, duration, thread); the
Dequeue@<op> name of TASK_QUEUE keeps everything after the first "@"; HCCL_TASKS carry the link
type and transport of COMMUNICATION_TASK_INFO through their enum tables; KERNELS get the
TASK_PMU_INFO ratios (``_ratio`` and ``_rate`` names) of their own task, null where the task has
none; a value the tables cannot hold is a problem naming the database file. And, text side, the
HCCL small tasks of trace_view.json carry the hcom op holding them. Expected values are read
with sqlite3 / json from the profiler's files in the test.
"""

from __future__ import annotations

import json
import shutil
from collections import Counter
from decimal import Decimal
from pathlib import Path

from ascendprof.engine.pipeline import read_rank
from ascendprof.model import schemas as S
from ascendprof.model.options import ReadOptions
from ascendprof.model.problems import Problems
from ascendprof.scan import scan
from test_db_reader import _ro, _source, run_sql

OUT = "ASCEND_PROFILER_OUTPUT"
FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "torch_npu-db-level1-rank0" / \
    "rank0_ascend_pt"
PROFILER_DB = "ascend_pytorch_profiler_0.db"
ALL = ReadOptions(advice="all")


def _copy(tmp_path: Path, sql=()) -> Path:
    """The fixture rank directory copied, with ``sql`` run on its profiler db."""
    rank_dir = tmp_path / "rank0_ascend_pt"
    shutil.copytree(FIXTURE, rank_dir)
    if sql:
        run_sql(rank_dir / OUT / PROFILER_DB, sql)
    return rank_dir


def _read(rank_dir: Path):
    data, _ = read_rank(_source(rank_dir), ALL)
    return data


# ----------------------------------------------------------------------------- GC_RECORD

def test_gc_record_rows_are_host_events_with_their_times_and_thread(tmp_path):
    """The export has no GC_RECORD (no gc collection in that run); one as torch_npu writes it
    (startNs, endNs, globalTid) with three collections gives three HOST_EVENTS rows: source
    "gc", name "GC", start = startNs, dur = endNs - startNs, tid = globalTid."""
    rank_dir = _copy(tmp_path, [
        "CREATE TABLE GC_RECORD (startNs INTEGER, endNs INTEGER, globalTid INTEGER)",
        "INSERT INTO GC_RECORD VALUES (1736410576400000000, 1736410576400250000, 4026531841)",
        "INSERT INTO GC_RECORD VALUES (1736410576500000000, 1736410576500001500, 4026531841)",
        "INSERT INTO GC_RECORD VALUES (1736410576600000000, 1736410576600000700, 4026531907)",
    ])
    with _ro(rank_dir / OUT / PROFILER_DB) as c:
        want = sorted((s, e - s, t) for s, e, t in
                      c.execute("SELECT startNs, endNs, globalTid FROM GC_RECORD"))
    assert want == [(1736410576400000000, 250000, 4026531841),
                    (1736410576500000000, 1500, 4026531841),
                    (1736410576600000000, 700, 4026531907)]
    host = _read(rank_dir).tables[S.HOST_EVENTS].to_pylist()
    gc = [r for r in host if r["source"] == "gc"]
    assert {r["name"] for r in gc} == {"GC"}
    assert sorted((r["start_ns"], r["dur_ns"], r["tid"]) for r in gc) == want
    # the other host events are still there (framework + cann rows of the export)
    assert len(host) - len(gc) == 770


# ----------------------------------------------------------------------------- TASK_QUEUE

def test_dequeue_op_name_is_everything_after_the_first_at(tmp_path):
    """trace_view and the db name a dequeue ``Dequeue@<op>``: the op is the text after the
    first "@", even when the op's own name holds one. Here the export's 'Dequeue@Conv2D' rows
    are renamed 'Dequeue@Conv2D@x'; the TASK_QUEUE of each Enqueue/Dequeue pair (same
    connection id through CONNECTION_IDS) is worked out with sqlite3."""
    rank_dir = _copy(tmp_path, [
        "UPDATE STRING_IDS SET value = 'Dequeue@Conv2D@x' WHERE value = 'Dequeue@Conv2D'"])
    with _ro(rank_dir / OUT / PROFILER_DB) as c:
        rows = c.execute(
            """SELECT s.value, p.startNs, p.endNs, ci.connectionId FROM PYTORCH_API p
               JOIN STRING_IDS s ON s.id = p.name
               JOIN CONNECTION_IDS ci ON ci.id = p.connectionId
               WHERE s.value = 'Enqueue' OR s.value LIKE 'Dequeue%'""").fetchall()
    enq = {cid: (int(s), int(e)) for v, s, e, cid in rows if v == "Enqueue"}
    deq = {cid: (int(s), int(e), v.partition("@")[2]) for v, s, e, cid in rows
           if v != "Enqueue"}
    want = sorted((str(cid), enq[cid][0], enq[cid][1] - enq[cid][0], deq[cid][0],
                   deq[cid][1] - deq[cid][0], deq[cid][2]) for cid in set(enq) & set(deq))
    assert sum(1 for w in want if w[5] == "Conv2D@x") == 5  # the five Conv2D dequeues
    got = sorted((r["queue_id"], r["enqueue_ns"], r["enqueue_dur_ns"], r["dequeue_ns"],
                  r["dequeue_dur_ns"], r["op_name"])
                 for r in _read(rank_dir).tables[S.TASK_QUEUE].to_pylist())
    assert got == want


# ----------------------------------------------------------------------------- HCCL_TASKS

def test_hccl_tasks_carry_link_type_and_transport_from_the_enums():
    """HCCL_TASKS of the export: the data-moving small tasks (Memcpy, Reduce_Inline, RDMA*) of
    COMMUNICATION_TASK_INFO with their TASK times, size, and transport / link type named by
    ENUM_HCCL_TRANSPORT_TYPE / ENUM_HCCL_LINK_TYPE (the export holds ON_CHIP, HCCS and the
    invalid type 65535 as link types)."""
    with _ro(FIXTURE / OUT / PROFILER_DB) as c:
        want = Counter(c.execute(
            """SELECT tt.value, t.startNs, t.endNs - t.startNs, ci.size, tr.name, lk.name
               FROM COMMUNICATION_TASK_INFO ci JOIN TASK t ON t.globalTaskId = ci.globalTaskId
               JOIN STRING_IDS tt ON tt.id = ci.taskType
               LEFT JOIN ENUM_HCCL_TRANSPORT_TYPE tr ON tr.id = ci.transportType
               LEFT JOIN ENUM_HCCL_LINK_TYPE lk ON lk.id = ci.linkType
               WHERE tt.value IN ('Memcpy', 'Reduce_Inline') OR tt.value LIKE 'RDMA%'"""))
    assert sum(want.values()) == 72
    assert {w[5] for w in want} >= {"ON_CHIP", "HCCS"}
    got = Counter((r["task_name"], r["start_ns"], r["dur_ns"], r["size_bytes"], r["transport"],
                   r["link_type"]) for r in _read(FIXTURE).tables[S.HCCL_TASKS].to_pylist())
    assert got == want


# ----------------------------------------------------------------------------- PMU columns

def test_kernels_get_the_pmu_ratios_of_their_own_task():
    """KERNELS of the export get one float ``pmu:<name>`` column per TASK_PMU_INFO name ending
    in _ratio or _rate (the export has aic/aiv_icache_miss_rate besides the ratios); each
    kernel's value is the one of the TASK row with its (start, stream, task id); a kernel with
    no such row (six in the export) has null, not 0."""
    with _ro(FIXTURE / OUT / PROFILER_DB) as c:
        rows = c.execute(
            """SELECT t.startNs, t.streamId, t.taskId, s.value, p.value FROM TASK_PMU_INFO p
               JOIN TASK t ON t.globalTaskId = p.globalTaskId
               JOIN STRING_IDS s ON s.id = p.name""").fetchall()
    names = {r[3] for r in rows if r[3].endswith("_ratio") or r[3].endswith("_rate")}
    assert {"aic_icache_miss_rate", "aiv_icache_miss_rate"} <= names and len(names) == 13
    pmu = {(s, st, t, n): v for s, st, t, n, v in rows if n in names}
    kernels = _read(FIXTURE).tables[S.KERNELS]
    assert sorted(c for c in kernels.column_names if c.startswith(S.PMU_PREFIX)) == \
        sorted(S.PMU_PREFIX + n for n in names)
    missing = 0
    for k in kernels.to_pylist():
        key = (k["start_ns"], k["stream_id"], k["task_id"])
        missing += (key + ("aic_mac_ratio",)) not in pmu
        for n in names:
            assert k[S.PMU_PREFIX + n] == pmu.get(key + (n,)), (key, n)
    assert missing == 6


# ----------------------------------------------------------------------------- problems

def test_a_value_the_table_cannot_hold_is_a_problem_naming_the_database(tmp_path):
    """An AICORE_FREQ frequency stored as text that is no number: the advice tables of the db
    are not read, and the problem names the profiler db (the rest of the rank is kept)."""
    rank_dir = _copy(tmp_path, [
        "UPDATE AICORE_FREQ SET freq = 'fast' WHERE rowid = (SELECT MIN(rowid) FROM AICORE_FREQ)"])
    data = _read(rank_dir)
    assert [(Path(p.path).resolve(), p.affects) for p in data.problems] == \
        [((rank_dir / OUT / PROFILER_DB).resolve(), ("advice",))]
    assert "freq_mhz" in data.problems.items[0].reason
    assert S.AICORE_FREQ not in data.tables and data.tables[S.KERNELS].num_rows == 191


# ----------------------------------------------------------------------------- trace_view

def test_trace_view_hccl_tasks_name_the_hcom_op_holding_them(shared_data):
    """Text export (level1, rank 0): each data-moving HCCL small task of trace_view.json (X
    event with args size(Byte), named Memcpy / Reduce_Inline / RDMA*) is named after the
    latest-starting ``hcom_*`` X event of the same pid whose window [ts, ts + dur] holds the
    task's start; worked out here from the json (ts: exact text us, dur: float us)."""
    rank_dir = shared_data / "torch_npu-2rank-levels" / "text" / "level1" / "rank0_ascend_pt"
    with open(rank_dir / OUT / "trace_view.json", encoding="utf-8") as f:
        events = json.load(f)

    def ns(ev):
        return int(Decimal(str(ev["ts"])) * 1000)

    xs = [e for e in events if e.get("ph") == "X" and isinstance(e.get("name"), str)]
    ops = [(e.get("pid"), ns(e), ns(e) + round(float(e.get("dur", 0)) * 1000), e["name"])
           for e in xs if e["name"].startswith("hcom_")]
    want = Counter()
    for e in xs:
        a = e.get("args")
        if not (isinstance(a, dict) and "size(Byte)" in a and (
                e["name"] in ("Memcpy", "Reduce_Inline") or e["name"].startswith("RDMA"))):
            continue
        t = ns(e)
        holding = [o for o in ops if o[0] == e.get("pid") and o[1] <= t <= o[2]]
        want[(e["name"], t, max(holding, key=lambda o: o[1])[3] if holding else None)] += 1
    assert sum(want.values()) > 0 and all(w[2] for w in want)
    found = scan(rank_dir, Problems())
    assert len(found) == 1
    data, _ = read_rank(found[0], ALL)
    got = Counter((r["task_name"], r["start_ns"], r["op_name"])
                  for r in data.tables[S.HCCL_TASKS].to_pylist())
    assert got == want

