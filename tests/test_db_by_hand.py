"""The SQLite export reader (ascendprof.readers.db) on edge cases of the db files themselves.

Each case copies the shipped level1 rank 0 db export (fixtures/torch_npu-db-level1-rank0, a
real torch_npu export) into tmp_path, changes a few rows or a table with sqlite3 the way another
export (or a damaged file) could differ, and reads it through ``read_source``. The expected values
are read back with sqlite3 from the files, or worked out in the comments; the device text is
checked against the text export of the same job in the shared data.
"""

from __future__ import annotations

import csv
import shutil
from collections import Counter
from pathlib import Path

import pytest

from ascendprof.model import schemas as S
from ascendprof.model.errors import InputError
from ascendprof.readers import db as dbreader
from ascendprof.readers import read_source
from ascendprof.scan import DB, Source
from test_db_reader import _ro, _source, run_sql

OUT = "ASCEND_PROFILER_OUTPUT"
FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "torch_npu-db-level1-rank0" / \
    "rank0_ascend_pt"
PROFILER_DB = "ascend_pytorch_profiler_0.db"


def _copy(tmp_path: Path, profiler_sql=(), analysis_sql=()) -> Path:
    """The fixture rank directory copied, with ``profiler_sql`` run on its profiler db and
    ``analysis_sql`` on its analysis.db."""
    rank_dir = tmp_path / "rank0_ascend_pt"
    shutil.copytree(FIXTURE, rank_dir)
    for name, sql in ((PROFILER_DB, profiler_sql), ("analysis.db", analysis_sql)):
        if not sql:
            continue
        run_sql(rank_dir / OUT / name, sql)
    return rank_dir


# ----------------------------------------------------------------------------- device text

def test_memory_tables_name_the_device_as_the_text_export_does(shared_data):
    """memory_record.csv, operator_memory.csv and npu_module_mem.csv of the text export of the
    same job (level1, rank 0, device 0) write the device as 'NPU:0'; the db export's
    MEMORY_RECORD / OP_MEMORY / NPU_MODULE_MEM hold only deviceId 0, read as the same text."""
    text = shared_data / "torch_npu-2rank-levels" / "text" / "level1" / "rank0_ascend_pt" / OUT

    def col(name, column):
        with open(text / name, newline="", encoding="utf-8-sig") as f:
            return {r[column] for r in csv.DictReader(f)}
    assert col("memory_record.csv", "Device Type") == {"NPU:0"}
    assert col("operator_memory.csv", "Device Type") == {"NPU:0"}
    assert col("npu_module_mem.csv", "Device") == {"NPU:0"}

    data = read_source(_source(FIXTURE))
    rec = data.tables[S.MEMORY_RECORD].to_pylist()
    # the APP rows come from NPU_MEM, which has no device column (no device text there)
    assert {r["device_type"] for r in rec if r["component"] != "APP"} == {"NPU:0"}
    assert {r["device_type"] for r in data.tables[S.OPERATOR_MEMORY].to_pylist()} == {"NPU:0"}
    assert {r["device"] for r in data.tables[S.NPU_MODULE_MEM].to_pylist()} == {"NPU:0"}


def test_npu_module_mem_components_are_the_module_names(shared_data):
    """NPU_MODULE_MEM.moduleId resolved through ENUM_MODULE: per component the row count of the
    table itself (sqlite3 join); the 77 names are those npu_module_mem.csv of the text export of
    the job lists, but for module 74, which this db's own ENUM_MODULE names 'AMP' where the text
    export wrote 'AML' (the profiler's two exports differ; the reader follows the db's enum)."""
    with _ro(FIXTURE / OUT / PROFILER_DB) as c:
        want = Counter(dict(c.execute(
            """SELECT e.name, COUNT(*) FROM NPU_MODULE_MEM m JOIN ENUM_MODULE e
               ON e.id = m.moduleId GROUP BY e.name""")))
    text = shared_data / "torch_npu-2rank-levels" / "text" / "level1" / "rank0_ascend_pt" / OUT
    with open(text / "npu_module_mem.csv", newline="", encoding="utf-8-sig") as f:
        text_components = {r["Component"] for r in csv.DictReader(f)}
    assert len(text_components) == 77
    assert set(want) - {"AMP"} == text_components - {"AML"} and "AMP" in want

    got = Counter(r["component"] for r in
                  read_source(_source(FIXTURE)).tables[S.NPU_MODULE_MEM].to_pylist())
    assert got == want


# ----------------------------------------------------------------------------- timeline edge cases

def test_hardware_track_without_compute_task_info_names_tasks_by_task_type(tmp_path):
    """A profiler db without COMPUTE_TASK_INFO (dropped here): no kernels (the table is recorded
    missing), but every TASK row is still a 'hardware' timeline row, named and typed by its TASK
    taskType text; a task in COMMUNICATION_TASK_INFO or sharing its connectionId with a
    COMMUNICATION_OP is 'communication', any other has no category (nothing says it is not
    compute)."""
    rank_dir = _copy(tmp_path, ["DROP TABLE COMPUTE_TASK_INFO"])
    with _ro(rank_dir / OUT / PROFILER_DB) as c:
        want = c.execute(
            """SELECT s.value, t.startNs,
                      t.globalTaskId IN (SELECT globalTaskId FROM COMMUNICATION_TASK_INFO)
                      OR t.connectionId IN (SELECT connectionId FROM COMMUNICATION_OP)
               FROM TASK t JOIN STRING_IDS s ON s.id = t.taskType""").fetchall()
    assert len(want) == 552  # every TASK row has a taskType text
    data = read_source(_source(rank_dir))
    assert S.KERNELS not in data.tables
    assert f"{PROFILER_DB}:COMPUTE_TASK_INFO" in data.missing
    hw = [r for r in data.tables[S.TIMELINE].to_pylist() if r["track"] == "hardware"]
    assert sorted((r["name"], r["task_type"], r["start_ns"], r["category"]) for r in hw) == \
        sorted((name, name, start, "communication" if comm else None)
               for name, start, comm in want)
    # 296 COMMUNICATION_TASK_INFO tasks + the 4 tasks carrying a whole op (same connectionId)
    assert sum(r["category"] == "communication" for r in hw) == 300


def test_an_op_without_tasks_keeps_its_own_span(tmp_path):
    """The HCCL op of opId 1 loses its 74 COMMUNICATION_TASK_INFO rows: its communication section
    is then its COMMUNICATION_OP span [startNs, endNs], marked 'op span (no tasks)'; the other
    three ops keep the extent of their tasks, 'HCCL tasks'. Four rows, one per op."""
    rank_dir = _copy(tmp_path, ["DELETE FROM COMMUNICATION_TASK_INFO WHERE opId = 1"])
    with _ro(rank_dir / OUT / PROFILER_DB) as c:
        (op1,) = c.execute("SELECT startNs, endNs - startNs FROM COMMUNICATION_OP "
                           "WHERE opId = 1").fetchall()
        others = c.execute("""SELECT MIN(t.startNs), MAX(t.endNs) - MIN(t.startNs)
                              FROM COMMUNICATION_TASK_INFO ci JOIN TASK t
                                ON t.globalTaskId = ci.globalTaskId
                              GROUP BY ci.opId""").fetchall()
    assert len(others) == 3
    want = sorted([(*op1, dbreader.FROM_OP_SPAN)] +
                  [(s, d, dbreader.FROM_TASKS) for s, d in others])
    tl = read_source(_source(rank_dir)).tables[S.TIMELINE].to_pylist()
    got = sorted((r["start_ns"], r["dur_ns"], r["task_type"]) for r in tl
                 if r["track"] == "communication" and r["thread"].endswith("Communication tasks"))
    assert got == want


def test_a_rank_without_collectives_reads_with_empty_communication(tmp_path):
    """COMMUNICATION_OP and COMMUNICATION_TASK_INFO present but empty (a rank that ran no
    collective): the db reads; no 'communication' timeline rows, the 552 TASK rows on the
    hardware track, of which the 187 COMPUTE_TASK_INFO ones are compute and the rest (no
    communication link left) 'other'; the kernels are the 187 compute tasks alone."""
    rank_dir = _copy(tmp_path, ["DELETE FROM COMMUNICATION_OP",
                                "DELETE FROM COMMUNICATION_TASK_INFO"])
    data = read_source(_source(rank_dir))
    tl = data.tables[S.TIMELINE].to_pylist()
    assert not [r for r in tl if r["track"] == "communication"]
    hw = Counter(r["category"] for r in tl if r["track"] == "hardware")
    assert hw == {"compute": 187, "other": 552 - 187}
    assert data.tables[S.KERNELS].num_rows == 187
    assert not list(data.problems)


# ----------------------------------------------------------------------------- stored value types

def test_a_name_stored_as_a_blob_is_read_as_its_text(tmp_path):
    """SQLite lets any column hold any type: here the STRING_IDS values of the compute op names
    are stored as BLOBs of their UTF-8 text. The kernel names are still that text (the Counter
    of names is the one of the unchanged db), not a Python bytes literal such as "b'...'"."""
    with _ro(FIXTURE / OUT / PROFILER_DB) as c:
        want = Counter(n for (n,) in c.execute(
            """SELECT s.value FROM COMPUTE_TASK_INFO ci JOIN STRING_IDS s ON s.id = ci.name"""))
    rank_dir = _copy(tmp_path, ["UPDATE STRING_IDS SET value = CAST(value AS BLOB) "
                                "WHERE id IN (SELECT name FROM COMPUTE_TASK_INFO)"])
    with _ro(rank_dir / OUT / PROFILER_DB) as c:  # the change took: blobs now
        assert {t for (t,) in c.execute("""SELECT DISTINCT typeof(s.value) FROM COMPUTE_TASK_INFO
                   ci JOIN STRING_IDS s ON s.id = ci.name""")} == {"blob"}
    k = read_source(_source(rank_dir)).tables[S.KERNELS].to_pylist()
    got = Counter(r["name"] for r in k if r["accelerator_core"] != dbreader.COMM_CORE)
    assert got == want and sum(want.values()) == 187


def test_an_empty_text_cell_in_a_number_column_is_missing(tmp_path):
    """analysis.db StepTraceTime with bubble = '' (an empty text cell, as a table filled from
    the CSV export's empty cells holds) and preparing = NULL: both are null in step_trace; the
    other columns are still us -> ns, e.g. computing 8903.431 us -> 8903431 ns and free
    25258.144 us -> 25258144 ns."""
    rank_dir = _copy(tmp_path, analysis_sql=["UPDATE StepTraceTime SET bubble = '', "
                                             "preparing = NULL"])
    data = read_source(_source(rank_dir))
    (row,) = data.tables[S.STEP_TRACE].to_pylist()
    assert row["bubble_ns"] is None and row["preparing_ns"] is None
    assert (row["step"], row["computing_ns"], row["free_ns"]) == (50, 8903431, 25258144)
    assert not list(data.problems)


# ----------------------------------------------------------------------------- errors

def test_no_database_in_the_source_names_the_files_looked_for(tmp_path):
    """A source whose files hold no profiler db or analysis.db: the error names the directory
    and lists the four file names a db export is read from."""
    rank_dir = tmp_path / "rank0_ascend_pt"
    (rank_dir / OUT).mkdir(parents=True)
    (rank_dir / OUT / "other.db").write_bytes(b"")
    src = Source(path=str(rank_dir), kind=DB, rank=0, files=[f"{OUT}/other.db"])
    with pytest.raises(InputError) as err:
        dbreader.read(src)
    assert err.value.path == str(rank_dir)
    assert err.value.reason == ("no .db export found (ascend_pytorch_profiler*.db, "
                                "ascend_mindspore_profiler*.db, msprof_*.db, analysis.db)")


def test_unreadable_profiler_db_still_reads_analysis_db(tmp_path):
    """The profiler db is not a database (overwritten with text), analysis.db is intact: the
    rank is still read from analysis.db (its StepTraceTime: step 50, computing 8903.431 us),
    and the damaged file is a problem naming it, for the analyses that need it."""
    rank_dir = _copy(tmp_path)
    bad = rank_dir / OUT / PROFILER_DB
    bad.write_bytes(b"not a database at all" * 10)
    data = read_source(_source(rank_dir))
    (row,) = data.tables[S.STEP_TRACE].to_pylist()
    assert (row["step"], row["computing_ns"]) == (50, 8903431)
    assert S.KERNELS not in data.tables and S.TIMELINE not in data.tables
    (p,) = list(data.problems)
    assert p.path == str(bad)


def test_a_query_failing_mid_read_is_a_problem_naming_the_database(tmp_path):
    """STEP_TIME's endNs renamed (a column the reader selects): the STEP_TIME query fails inside
    the profiler db, which is then a problem naming that file and the missing column; analysis.db
    is still read."""
    rank_dir = _copy(tmp_path, ["ALTER TABLE STEP_TIME RENAME COLUMN endNs TO stopNs"])
    data = read_source(_source(rank_dir))
    assert S.STEP_TRACE in data.tables and S.STEPS not in data.tables
    (p,) = list(data.problems)
    assert p.path == str(rank_dir / OUT / PROFILER_DB)
    assert "endNs" in p.reason
