"""db reader, mutation seed 47: what the survivors of that sample showed untested.

- a CommAnalyzerBandwidth total_duration (ms) beyond int64 ns is a problem naming that column;
- COMMUNICATION_TASK_INFO without its groupName column (the op's group then comes from
  COMMUNICATION_OP) still gives the HCCL ops' 'Communication tasks' rows;
- a text end time of an HCCL op without tasks, which SQL would read as a number far beyond
  int64, is a problem naming COMMUNICATION_OP's endNs and the text, not the overflowed
  difference computed from it;
- a CANN_API group whose mean rounds to 2^63 in float64 is averaged without a numpy
  RuntimeWarning (which the CLI would print to stderr).

Inputs: a copy of the level1 rank 0 db fixture, edited with sqlite3 per case. Expected values:
the value written, read back from the database, or computed from the database with sqlite3.
"""

from __future__ import annotations

import sqlite3
import warnings
from contextlib import closing

from ascendprof.model import schemas as S
from ascendprof.readers import read_source
from ascendprof.readers.db import FROM_TASKS
from test_db_bad_numbers import ANALYSIS_AFFECTS, PROFILER_AFFECTS
from test_db_by_hand import OUT, PROFILER_DB, _copy
from test_db_reader import _source


def _query(rank_dir, name, sql):
    with closing(sqlite3.connect(rank_dir / OUT / name)) as c:
        return c.execute(sql).fetchall()


def test_total_duration_beyond_int64_ns_is_a_problem_naming_it(tmp_path):
    """Every CommAnalyzerBandwidth row with a packet count > 0 gets total_duration 1e300 ms
    (1e306 ns, far beyond int64): a problem of analysis.db naming the table, the column
    'total_duration' and the value (kills _comm_bandwidth_174, which named it
    'XXtotal_durationXX'); the profiler db is still read."""
    rank_dir = _copy(tmp_path, analysis_sql=[
        "UPDATE CommAnalyzerBandwidth SET total_duration = 1e300 WHERE count > 0"])
    ((n, dur),) = _query(rank_dir, "analysis.db",
                         "SELECT COUNT(*), MIN(total_duration) FROM CommAnalyzerBandwidth "
                         "WHERE count > 0")
    assert n > 0 and dur == 1e300
    data = read_source(_source(rank_dir))
    (p,) = list(data.problems)
    assert p.path == str(rank_dir / OUT / "analysis.db")
    assert p.where == "table CommAnalyzerBandwidth"
    assert p.reason == f"column 'total_duration': out of range: {dur!r}"
    assert p.severity == "skipped" and p.affects == ANALYSIS_AFFECTS
    assert S.KERNELS in data.tables and S.TIMELINE in data.tables


def test_hccl_tasks_without_a_group_column_take_the_ops_group(tmp_path):
    """COMMUNICATION_TASK_INFO without its groupName column: each HCCL op's 'Communication
    tasks' row still spans [first task start, last task end] of its tasks (grouped by opId) on
    thread 'Group <COMMUNICATION_OP.groupName> Communication tasks', with no problem (kills
    _hccl_task_extents_41, which read the missing c.groupName: an SQL error that lost the whole
    profiler db)."""
    rank_dir = _copy(tmp_path, ["ALTER TABLE COMMUNICATION_TASK_INFO DROP COLUMN groupName"])
    expected = _query(rank_dir, PROFILER_DB, """
        SELECT so.value, 'Group ' || sg.value || ' Communication tasks',
               MIN(t.startNs), MAX(t.endNs) - MIN(t.startNs)
        FROM COMMUNICATION_TASK_INFO i JOIN TASK t ON t.globalTaskId = i.globalTaskId
        JOIN COMMUNICATION_OP o ON o.opId = i.opId
        JOIN STRING_IDS so ON so.id = o.opName JOIN STRING_IDS sg ON sg.id = o.groupName
        GROUP BY i.opId ORDER BY 3""")
    assert len(expected) == 4
    assert "groupName" not in [r[1] for r in _query(
        rank_dir, PROFILER_DB, "PRAGMA table_info('COMMUNICATION_TASK_INFO')")]
    data = read_source(_source(rank_dir))
    assert list(data.problems) == []
    tl = data.tables[S.TIMELINE].to_pylist()
    rows = [r for r in tl if r["track"] == "communication"
            and r["thread"].endswith(" Communication tasks")]
    assert [(r["name"], r["thread"], r["start_ns"], r["dur_ns"]) for r in rows] == expected
    assert {r["task_type"] for r in rows} == {FROM_TASKS}


def test_text_end_of_an_op_without_tasks_is_a_problem_naming_end_ns(tmp_path):
    """The HCCL op of opId 1 loses its tasks (its section is then its own span, 'op span (no
    tasks)') and its endNs becomes the text '1e30x'. SQL would read that as 1e30 (as it reads
    '12a' as 12) and compute a duration far beyond int64; the reader refuses the text first: a
    problem naming COMMUNICATION_OP, the column 'endNs' and the text (kills
    _hccl_task_extents_129, which did not check endNs there: the problem then named the
    computed duration 'COALESCE(x.e, o.endNs) - COALESCE(x.s, o.startNs)' and its value)."""
    rank_dir = _copy(tmp_path, ["DELETE FROM COMMUNICATION_TASK_INFO WHERE opId = 1",
                                "UPDATE COMMUNICATION_OP SET endNs = '1e30x' WHERE opId = 1"])
    ((end, kind),) = _query(rank_dir, PROFILER_DB,
                            "SELECT endNs, typeof(endNs) FROM COMMUNICATION_OP WHERE opId = 1")
    assert (end, kind) == ("1e30x", "text")
    data = read_source(_source(rank_dir))
    (p,) = list(data.problems)
    assert p.path == str(rank_dir / OUT / PROFILER_DB)
    assert p.where == "table COMMUNICATION_OP"
    assert p.reason == f"column 'endNs': not an integer: {end!r}"
    assert p.severity == "skipped" and p.affects == PROFILER_AFFECTS
    assert S.STEP_TRACE in data.tables  # analysis.db is still read


def test_a_mean_that_rounds_to_2_63_is_averaged_without_a_runtime_warning(tmp_path):
    """One CANN_API call alone in its group, 0 .. 2^63 - 1 ns: float64 rounds its mean to 2^63,
    which int64 cannot hold; the reader takes the exact integer mean (2^63 - 1, by hand:
    total 2^63 - 1 over 1 call) and never casts 2^63 to int64, so numpy warns nothing (kills
    _api_statistic_101, whose cast of the unmasked 2^63 printed 'RuntimeWarning: invalid value
    encountered in cast' on stderr, though the value was then overwritten)."""
    rank_dir = _copy(tmp_path, ["UPDATE CANN_API SET name = 987654321, startNs = 0, "
                                "endNs = 9223372036854775807 "
                                "WHERE rowid = (SELECT MIN(rowid) FROM CANN_API)"])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        data = read_source(_source(rank_dir))
    assert [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)] == []
    assert list(data.problems) == []
    (row,) = [r for r in data.tables[S.API_STATISTIC].to_pylist() if r["count"] == 1
              and r["max_ns"] == 2 ** 63 - 1]
    assert row["total_ns"] == 2 ** 63 - 1 and row["avg_ns"] == 2 ** 63 - 1
