"""db reader, mutation seed 44: the cut of a long bad-cell value at exactly 61 characters of
repr, a CommAnalyzerMatrix without op_name, a bad start in a TASK row only the hardware
track reads (named after TASK), and the average of a CANN_API call of 2^63 - 1 ns. Expected
values come from the databases (sqlite3) and from the rule written out in each test."""

from __future__ import annotations

import sqlite3

from ascendprof.model import schemas as S
from ascendprof.readers import read_source
from test_db_bad_numbers import PROFILER_AFFECTS, _only_problem
from test_db_by_hand import OUT, PROFILER_DB, _copy
from test_db_reader import _source


def _count(path, sql):
    with sqlite3.connect(path) as c:
        return c.execute(sql).fetchone()[0]


def test_a_value_of_61_repr_characters_is_cut(tmp_path):
    """59 letters: repr is 61 characters (two quotes), over the 60 allowed, so it is shown as
    its first 57 characters (the quote and 56 letters) and '...'."""
    rank_dir = _copy(tmp_path, analysis_sql=["UPDATE StepTraceTime SET computing = '"
                                             + "y" * 59 + "'"])
    p = _only_problem(read_source(_source(rank_dir)))
    assert len(repr("y" * 59)) == 61
    assert p.reason == "column 'computing': not a number: '" + "y" * 56 + "..."


def test_comm_matrix_without_op_name_reads_with_null_op_names(tmp_path):
    """op_name dropped from CommAnalyzerMatrix: no problem, every link row is still read (as
    many as the table has) and its op_name is null."""
    rank_dir = _copy(tmp_path, analysis_sql=[
        "ALTER TABLE CommAnalyzerMatrix DROP COLUMN op_name"])
    n = _count(rank_dir / OUT / "analysis.db", "SELECT COUNT(*) FROM CommAnalyzerMatrix")
    assert n > 0
    data = read_source(_source(rank_dir))
    assert list(data.problems) == []
    links = data.tables[S.COMM_LINKS]
    assert links.num_rows == n
    assert links["op_name"].null_count == n


def test_bad_start_of_a_non_compute_task_names_table_task(tmp_path):
    """Text start in the TASK rows linked to neither COMPUTE_TASK_INFO nor
    COMMUNICATION_TASK_INFO: only the hardware track reads them, and the problem names TASK."""
    where = ("globalTaskId NOT IN (SELECT globalTaskId FROM COMPUTE_TASK_INFO) AND "
             "globalTaskId NOT IN (SELECT globalTaskId FROM COMMUNICATION_TASK_INFO)")
    rank_dir = _copy(tmp_path, [f"UPDATE TASK SET startNs = 'hx' WHERE {where}"])
    assert _count(rank_dir / OUT / PROFILER_DB, f"SELECT COUNT(*) FROM TASK WHERE {where}") > 0
    p = _only_problem(read_source(_source(rank_dir)))
    assert p.path == str(rank_dir / OUT / PROFILER_DB)
    assert p.where == "table TASK"
    assert p.reason == "column 'startNs': not an integer: 'hx'"
    assert p.affects == PROFILER_AFFECTS



def test_a_call_of_int64_max_ns_averages_to_itself(tmp_path):
    """One CANN_API call alone in its group (a name id no other row has), 0 .. 2^63 - 1 ns: its
    average is its duration, 2^63 - 1, not the wrapped value of float64(2^63 - 1) = 2^63."""
    rank_dir = _copy(tmp_path, ["UPDATE CANN_API SET name = 987654321, startNs = 0, "
                                "endNs = 9223372036854775807 "
                                "WHERE rowid = (SELECT MIN(rowid) FROM CANN_API)"])
    data = read_source(_source(rank_dir))
    assert list(data.problems) == []
    t = data.tables[S.API_STATISTIC]
    (row,) = [r for r in t.to_pylist() if r["max_ns"] == 2 ** 63 - 1]
    assert row["count"] == 1 and row["total_ns"] == 2 ** 63 - 1
    assert row["avg_ns"] == 2 ** 63 - 1
