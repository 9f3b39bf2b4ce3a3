"""db reader, mutation seed 46: what the survivors of that sample showed untested.

- text in a time computed with in SQL is a problem also where only one part of the reader reads
  that table's times: CANN_API's start (summed by api_statistic alone), TASK's start when no
  COMPUTE_TASK_INFO / COMMUNICATION_TASK_INFO is there (the hardware timeline alone reads it) and
  COMMUNICATION_OP's start when there is no COMMUNICATION_TASK_INFO (the communication big ops
  alone read it);
- an OVERLAP_ANALYSIS duration that does not fit int64 is a problem naming the columns it is
  computed from as the database spells them ('endNs - startNs');
- a kernel that starts outside every STEP_TIME window (before the first, or after a window's
  end) has no step;
- without an opId column in COMMUNICATION_TASK_INFO the HCCL tasks are grouped by op name.

Inputs: a copy of the level1 rank 0 db fixture, edited with sqlite3 per case. Expected values:
the value written, read back from the database, or computed from the database with sqlite3.
"""

from __future__ import annotations

import sqlite3
from contextlib import closing

import pytest

from ascendprof.model import schemas as S
from ascendprof.readers import read_source
from ascendprof.readers.db import FROM_TASKS
from test_db_bad_numbers import PROFILER_AFFECTS
from test_db_by_hand import OUT, PROFILER_DB, _copy
from test_db_reader import _source
from test_db_text_in_numbers import _first_row, _value


def _db(rank_dir):
    return closing(sqlite3.connect(rank_dir / OUT / PROFILER_DB))


# (statements run first, table, column): the first row's cell of table.column is set to ''
# (0 to SQL, null to the reader's rule); the statements first drop the tables whose reading
# would check that column before the part under test does
ALONE = {
    # CANN_API is read by api_statistic only (kills _api_statistic_17)
    "cann api start": ((), "CANN_API", "startNs"),
    # without both task-info tables only the hardware timeline reads TASK (_hardware_track_103)
    "task start, no task info": (("DROP TABLE COMPUTE_TASK_INFO",
                                  "DROP TABLE COMMUNICATION_TASK_INFO"), "TASK", "startNs"),
    # without COMMUNICATION_TASK_INFO the HCCL task extents are not read: only the big ops read
    # COMMUNICATION_OP (_comm_big_ops_37)
    "comm op start, no task info": (("DROP TABLE COMMUNICATION_TASK_INFO",),
                                    "COMMUNICATION_OP", "startNs"),
}


@pytest.mark.parametrize("case", list(ALONE))
def test_empty_start_read_by_one_part_alone_is_a_problem(tmp_path, case):
    first, table, column = ALONE[case]
    rank_dir = _copy(tmp_path, [*first,
                                f"UPDATE {table} SET {column} = '' WHERE {_first_row(table)}"])
    assert _value(rank_dir, f"SELECT {column} FROM {table} WHERE {_first_row(table)}") == ""
    data = read_source(_source(rank_dir))
    (p,) = list(data.problems)
    assert p.path == str(rank_dir / OUT / PROFILER_DB)
    assert p.where == f"table {table}"
    assert p.reason == f"column {column!r}: not an integer: ''"
    assert p.severity == "skipped" and p.affects == PROFILER_AFFECTS
    assert S.STEP_TRACE in data.tables  # analysis.db is still read


def test_overlap_duration_out_of_range_is_a_problem_naming_its_columns(tmp_path):
    """An OVERLAP_ANALYSIS span whose start is damaged to -9e18 (an INTEGER cell, so no text
    check applies): its end minus start, about 1.07e19, does not fit int64 (SQLite returns the
    overflowed difference as a REAL). That is a problem naming the table and the duration as
    computed from its columns, spelled as the table spells them ('endNs - startNs'), not a
    wrapped or dropped duration (kills _overlap_track_23, whose lower-case SQL names it
    'endns - startns')."""
    t = "OVERLAP_ANALYSIS"
    start = -9_000_000_000_000_000_000
    rank_dir = _copy(tmp_path, [f"UPDATE {t} SET startNs = {start} WHERE {_first_row(t)}"])
    end = _value(rank_dir, f"SELECT endNs FROM {t} WHERE {_first_row(t)}")
    assert end - start > 2 ** 63 - 1  # the difference does not fit int64
    (p,) = list(read_source(_source(rank_dir)).problems)
    assert (p.path, p.where) == (str(rank_dir / OUT / PROFILER_DB), f"table {t}")
    # SQLite computes an overflowing integer difference in floating point
    assert p.reason == f"column 'endNs - startNs': out of range: {float(end) - float(start)!r}"
    assert p.affects == PROFILER_AFFECTS


def test_kernels_outside_the_step_window_have_no_step(tmp_path):
    """The one STEP_TIME window (step 50) is narrowed to [the 50th, the 120th compute task
    start] (of 187): kernels before it and after its end are in no step (null), those inside
    in step 50 (kills _step_of_50, which took a kernel after the window's start, or before
    its end, for one in it: every kernel got step 50)."""
    starts = ("SELECT t.startNs FROM TASK t JOIN COMPUTE_TASK_INFO c "
              "ON t.globalTaskId = c.globalTaskId ORDER BY t.startNs LIMIT 1 OFFSET {}")
    rank_dir = _copy(tmp_path, [f"UPDATE STEP_TIME SET startNs = ({starts.format(49)}), "
                                f"endNs = ({starts.format(119)})"])
    with _db(rank_dir) as c:
        ((step, lo, hi),) = c.execute("SELECT id, startNs, endNs FROM STEP_TIME").fetchall()
    data = read_source(_source(rank_dir))
    assert list(data.problems) == []
    rows = data.tables[S.KERNELS].select(["start_ns", "step"]).to_pylist()
    expected = [step if lo <= r["start_ns"] <= hi else None for r in rows]
    assert [r["step"] for r in rows] == expected
    assert any(r["start_ns"] < lo for r in rows) and any(r["start_ns"] > hi for r in rows)
    assert expected.count(step) >= 71  # the 50th..120th compute tasks at least


def test_hccl_tasks_without_op_id_are_grouped_by_op_name(tmp_path):
    """COMMUNICATION_TASK_INFO without its opId column (COMMUNICATION_OP keeps its own): the
    tasks are grouped by their name (op name id), joined to COMMUNICATION_OP.opName; each op's
    'Communication tasks' row spans [first task start, last task end] (kills
    _hccl_task_extents_11, which grouped by the missing c.opId: an SQL error)."""
    rank_dir = _copy(tmp_path, ["ALTER TABLE COMMUNICATION_TASK_INFO DROP COLUMN opId"])
    with _db(rank_dir) as c:
        expected = c.execute(
            "SELECT s.value, MIN(t.startNs), MAX(t.endNs) - MIN(t.startNs) "
            "FROM COMMUNICATION_TASK_INFO i JOIN TASK t ON t.globalTaskId = i.globalTaskId "
            "JOIN STRING_IDS s ON s.id = i.name GROUP BY i.name ORDER BY 2").fetchall()
        ops = {v for (v,) in c.execute("SELECT s.value FROM COMMUNICATION_OP o "
                                       "JOIN STRING_IDS s ON s.id = o.opName")}
    assert len(expected) == 4 and {n for n, _, _ in expected} == ops
    data = read_source(_source(rank_dir))
    assert list(data.problems) == []
    tl = data.tables[S.TIMELINE].to_pylist()
    got = [(r["name"], r["start_ns"], r["dur_ns"]) for r in tl
           if r["track"] == "communication" and r["thread"].endswith(" Communication tasks")]
    assert got == expected
    assert {r["task_type"] for r in tl if r["thread"].endswith(" Communication tasks")} == {
        FROM_TASKS}
