"""The SQLite export reader (ascendprof.readers.db): what the seed-41 mutation sample found
untested.

- the all-zero COMM_BANDWIDTH rows added for transports an op did not use (as
  communication.json lists all five) are added only for those: an op of CommAnalyzerTime whose
  name cell is a blob, or whose step is a number (a table without column types), is the same op
  as the text of CommAnalyzerBandwidth, so its own transports keep their one real row;
- MEMORY_RECORD rows of the db's MEMORY_RECORD table carry their component (PTA / GE / PTA+GE,
  as memory_record.csv of the text export of the same job counts them);
- NPU_MODULE_MEM carries each row's totalReserved in MB (the text export's npu_module_mem.csv
  of the same job holds the same multiset of Total Reserved(MB));
- OPERATOR_MEMORY carries each allocation's time, alloc_ns = OP_MEMORY.allocationTime.

Inputs are the shipped level1 rank 0 db export (fixtures/torch_npu-db-level1-rank0, the same
files as shared data torch_npu-2rank-levels/db/level1/rank0), copied and edited with sqlite3
where a case needs it (helpers of tests/test_db_by_hand.py), and the text export of the same
job (shared data torch_npu-2rank-levels/text/level1/rank0: a second run of the same job, so
only values that do not depend on the run's clock are compared). Expected values are read back
from the files with sqlite3 / csv and worked out in the tests.
"""

from __future__ import annotations

import csv
from collections import Counter

import pytest


from ascendprof.model import schemas as S
from ascendprof.readers import db as dbreader
from ascendprof.readers import read_source
from test_db_by_hand import FIXTURE, OUT, PROFILER_DB, _copy
from test_db_reader import _ro, _source

ANALYSIS_DB = "analysis.db"
_TIME_COLS = ("hccl_op_name, group_name, start_timestamp, elapse_time, transit_time, wait_time, "
              "synchronization_time, idle_time")


def _text_csv(shared_data, name):
    path = shared_data / "torch_npu-2rank-levels" / "text" / "level1" / "rank0_ascend_pt" / OUT
    with open(path / name, newline="", encoding="utf-8-sig") as f:
        return list(csv.DictReader(f))


# ----------------------------------------------------------------------------- bandwidth padding

@pytest.mark.parametrize("edit", ("none", "blob op name", "number step"))
def test_transports_an_op_did_not_use_are_padded_once(tmp_path, edit):
    """The fixture's CommAnalyzerBandwidth (read with sqlite3) has, for each of its 4 ops of
    step 'step50', rows for HCCS (twice: packet sizes) and SDMA with that op's transit_size;
    communication.json lists all five transports per op, so COMM_BANDWIDTH has exactly one row
    per (op, transport): 4 x 5 = 20 rows, HCCS and SDMA with the op's size, RDMA / PCIE / SIO
    0 MB. Edited copies of CommAnalyzerTime must give the same rows:
    - 'blob op name': its hccl_op_name cells stored as blobs of the same bytes;
    - 'number step': the table rebuilt without column types, step the integer 50, and
      CommAnalyzerBandwidth's step the text '50' (step key '50', step number 50)."""
    sql = {"none": [],
           "blob op name": ["UPDATE CommAnalyzerTime SET hccl_op_name = CAST(hccl_op_name AS BLOB)"],
           "number step": [
               "ALTER TABLE CommAnalyzerTime RENAME TO t_old",
               f"CREATE TABLE CommAnalyzerTime ({_TIME_COLS}, step, type)",
               f"INSERT INTO CommAnalyzerTime SELECT {_TIME_COLS}, 50, type FROM t_old",
               "DROP TABLE t_old",
               "UPDATE CommAnalyzerBandwidth SET step = '50'"]}[edit]
    rank_dir = _copy(tmp_path, analysis_sql=sql)
    with _ro(rank_dir / OUT / ANALYSIS_DB) as c:
        used = dict(((op, tr), size) for op, tr, size in c.execute(
            "SELECT hccl_op_name, transport_type, transit_size FROM CommAnalyzerBandwidth"))
        ops = sorted({op for op, _ in used})
        time_ops = c.execute("SELECT hccl_op_name, typeof(hccl_op_name), step, typeof(step) "
                             "FROM CommAnalyzerTime").fetchall()
    assert len(ops) == 4 and {tr for _, tr in used} == {"HCCS", "SDMA"}
    assert sorted(r[0] if isinstance(r[0], str) else r[0].decode() for r in time_ops) == ops
    if edit == "blob op name":
        assert {r[1] for r in time_ops} == {"blob"}
    if edit == "number step":
        assert {(r[2], r[3]) for r in time_ops} == {(50, "integer")}
    step_key, step = ("50", 50) if edit == "number step" else ("step50", 50)
    want = sorted((step_key, step, op, tr, used.get((op, tr), 0.0))
                  for op in ops for tr in dbreader.JSON_TRANSPORTS)
    assert len(want) == 20

    data = read_source(_source(rank_dir))
    assert not list(data.problems)
    got = sorted((r["step_key"], r["step"], r["op_name"], r["transport"], r["size_mb"])
                 for r in data.tables[S.COMM_BANDWIDTH].to_pylist())
    assert got == want  # size_mb is transit_size itself, not computed


# ----------------------------------------------------------------------------- memory tables

def test_memory_records_carry_their_component(shared_data):
    """MEMORY_RECORD.component is a STRING_IDS id: per component text the fixture's table holds
    GE 114, PTA 381 and PTA+GE 495 rows (sqlite3 join), the same counts memory_record.csv of the
    text export of the job gives (its other rows are APP, from NPU_MEM). The reader's
    MEMORY_RECORD rows other than APP carry those components, row for row (with each row's
    time and Total Reserved bytes / 2^20)."""
    with _ro(FIXTURE / OUT / PROFILER_DB) as c:
        rows = c.execute("""SELECT s.value, m.timestamp, m.totalReserved FROM MEMORY_RECORD m
                            JOIN STRING_IDS s ON s.id = m.component""").fetchall()
    counts = Counter(comp for comp, _, _ in rows)
    assert counts == {"GE": 114, "PTA": 381, "PTA+GE": 495}
    text = Counter(r["Component"] for r in _text_csv(shared_data, "memory_record.csv"))
    assert text - Counter({"APP": text["APP"]}) == counts and text["APP"] > 0

    rec = read_source(_source(FIXTURE)).tables[S.MEMORY_RECORD].to_pylist()
    got = sorted((r["component"], r["ts_ns"], r["total_reserved_mb"]) for r in rec
                 if r["component"] != "APP")
    assert got == sorted((comp, ts, r / 2**20) for comp, ts, r in rows)


def test_npu_module_mem_carries_the_reserved_megabytes(shared_data):
    """NPU_MODULE_MEM: each row's totalReserved bytes / 2^20 (sqlite3; one row per module and
    timestamp, 1078 rows, 7 distinct values). The text export of the job writes the same
    multiset of Total Reserved(MB) values in npu_module_mem.csv (the module of one row is named
    differently by the two exports, see test_db_by_hand, so only the values are compared)."""
    with _ro(FIXTURE / OUT / PROFILER_DB) as c:
        rows = c.execute("""SELECT e.name, m.timestampNs, m.totalReserved FROM NPU_MODULE_MEM m
                            JOIN ENUM_MODULE e ON e.id = m.moduleId""").fetchall()
    want = sorted((name, ts, r / 2**20) for name, ts, r in rows)
    assert len(want) == 1078 and len({v for *_, v in want}) == 7
    text = Counter(float(r["Total Reserved(MB)"])
                   for r in _text_csv(shared_data, "npu_module_mem.csv"))
    assert text == Counter(v for *_, v in want)

    got = sorted((r["component"], r["ts_ns"], r["total_reserved_mb"]) for r in
                 read_source(_source(FIXTURE)).tables[S.NPU_MODULE_MEM].to_pylist())
    assert got == want


def test_operator_memory_carries_the_allocation_time():
    """OPERATOR_MEMORY: each row's alloc_ns is OP_MEMORY.allocationTime (184 rows, 184
    distinct integer times, sqlite3), with its release time (NULL for the 24 blocks not
    released in the window) and duration."""
    with _ro(FIXTURE / OUT / PROFILER_DB) as c:
        rows = c.execute("SELECT size, allocationTime, releaseTime, duration FROM OP_MEMORY"
                         ).fetchall()
    assert len(rows) == len({a for _, a, _, _ in rows}) == 184
    assert sum(r is None for _, _, r, _ in rows) == 24
    om = read_source(_source(FIXTURE)).tables[S.OPERATOR_MEMORY].to_pylist()
    got = sorted((r["alloc_ns"], r["size_kb"], r["release_ns"] or -1, r["dur_ns"] or -1)
                 for r in om)
    assert got == sorted((a, size / 1024, rel or -1, d or -1) for size, a, rel, d in rows)
