"""The SQLite export reader (ascendprof.readers.db): what the seed-43 mutation sample found
untested.

- a cell that is not a number in COMMUNICATION_OP (startNs) or CommAnalyzerBandwidth
  (transit_size) is a problem naming the table as the database spells it, as the bad cells of
  tests/test_db_bad_numbers.py are;
- a COMMUNICATION_OP without an opType column (older exports) still reads: one kernel per
  COMMUNICATION_OP row next to the compute kernels, no problem;
- a profiler db without STEP_TIME still gives its kernels, each with no step, and the missing
  table is listed;
- a query of the reader's row-by-row reads (META_DATA) failing is a problem at the table it
  reads (the last word of its SELECT).

Inputs are the shipped level1 rank 0 db export (fixtures/torch_npu-db-level1-rank0), copied and
edited with sqlite3 where a case needs it (helpers of tests/test_db_by_hand.py); expected counts
are read from the databases with sqlite3.
"""

from __future__ import annotations

import sqlite3

import pytest

from ascendprof.model import schemas as S
from ascendprof.readers import read_source
from test_db_bad_numbers import ANALYSIS_AFFECTS, PROFILER_AFFECTS
from test_db_by_hand import OUT, PROFILER_DB, _copy
from test_db_reader import _source

# (profiler db edits, analysis.db edits, file, table, expected reason)
CASES = {
    "comm op start text": (
        ["UPDATE COMMUNICATION_OP SET startNs = 'x1'"], [],
        PROFILER_DB, "COMMUNICATION_OP", "column 'startNs': not an integer: 'x1'"),
    "bandwidth transit size text": (
        [], ["UPDATE CommAnalyzerBandwidth SET transit_size = 'abc'"],
        "analysis.db", "CommAnalyzerBandwidth", "column 'transit_size': not a number: 'abc'"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_bad_cell_names_the_table_as_the_database_spells_it(tmp_path, case):
    profiler_sql, analysis_sql, name, table, reason = CASES[case]
    rank_dir = _copy(tmp_path, profiler_sql, analysis_sql)
    (p,) = list(read_source(_source(rank_dir)).problems)
    assert p.path == str(rank_dir / OUT / name)
    assert p.where == f"table {table}"
    assert p.reason == reason
    assert p.affects == (PROFILER_AFFECTS if name == PROFILER_DB else ANALYSIS_AFFECTS)


def _count(path, sql):
    with sqlite3.connect(path) as c:
        return c.execute(sql).fetchone()[0]


def _compute_kernels(rank_dir):
    return _count(rank_dir / OUT / PROFILER_DB,
                  "SELECT COUNT(*) FROM TASK t JOIN COMPUTE_TASK_INFO c "
                  "ON t.globalTaskId = c.globalTaskId")


def test_communication_op_without_op_type_still_reads(tmp_path):
    """opType dropped from COMMUNICATION_OP: no problem, and the kernels are one per TASK row
    joined to COMPUTE_TASK_INFO plus one per COMMUNICATION_OP row (each op is kept)."""
    rank_dir = _copy(tmp_path, ["ALTER TABLE COMMUNICATION_OP DROP COLUMN opType"])
    n_ops = _count(rank_dir / OUT / PROFILER_DB, "SELECT COUNT(*) FROM COMMUNICATION_OP")
    assert n_ops > 0
    data = read_source(_source(rank_dir))
    assert list(data.problems) == []
    assert data.tables[S.KERNELS].num_rows == _compute_kernels(rank_dir) + n_ops


def test_profiler_db_without_step_time_keeps_its_kernels_without_steps(tmp_path):
    """STEP_TIME dropped: no problem, STEP_TIME is listed missing, and the kernels (one per
    TASK row joined to COMPUTE_TASK_INFO, plus one per COMMUNICATION_OP row) are all read,
    each with a null step."""
    rank_dir = _copy(tmp_path, ["DROP TABLE STEP_TIME"])
    db = rank_dir / OUT / PROFILER_DB
    n = _compute_kernels(rank_dir) + _count(db, "SELECT COUNT(*) FROM COMMUNICATION_OP")
    data = read_source(_source(rank_dir))
    assert list(data.problems) == []
    assert f"{PROFILER_DB}:STEP_TIME" in data.missing
    k = data.tables[S.KERNELS]
    assert k.num_rows == n > 0
    assert set(k["step"].to_pylist()) == {None}


def test_a_failing_meta_data_read_is_a_problem_at_meta_data(tmp_path):
    """META_DATA's column value renamed: 'SELECT name, value FROM META_DATA' fails in SQLite;
    the problem is at META_DATA (the table read), with SQLite's reason."""
    rank_dir = _copy(tmp_path, ["ALTER TABLE META_DATA RENAME COLUMN value TO val"])
    (p,) = list(read_source(_source(rank_dir)).problems)
    assert p.path == str(rank_dir / OUT / PROFILER_DB)
    assert p.where == "META_DATA"
    assert p.reason == "cannot read (no such column: value)"
    assert p.affects == PROFILER_AFFECTS
