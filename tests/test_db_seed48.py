"""db reader, mutation seed 48: what the survivors of that sample showed untested.

- a bad cell whose repr is exactly 60 characters is shown whole in the problem (only a longer
  one is cut to 57 + '...');
- text in TASK's end time is a problem also where only the hardware timeline reads TASK (no
  COMPUTE_TASK_INFO / COMMUNICATION_TASK_INFO);
- NPU_MEM types that STRING_IDS does not resolve: the type whose largest value is the smaller
  is APP, whatever the order of the two type ids;
- without ENUM_MODULE, NPU_MODULE_MEM's component is the moduleId as text;
- OP_MEMORY's allocationTotalAllocated is read back in MB (bytes / 2^20);
- a CommAnalyzerTime op whose wait + transit is exactly 1 ms has wait / sync ratios
  part / 1, not 0.

Inputs: a copy of the level1 rank 0 db fixture, edited with sqlite3 per case. Expected values:
the value written, read back from the database, or computed from the database with sqlite3.
"""

from __future__ import annotations

import pytest

from ascendprof.model import schemas as S
from ascendprof.readers import read_source
from test_db_bad_numbers import PROFILER_AFFECTS
from test_db_by_hand import OUT, PROFILER_DB, _copy
from test_db_reader import _source
from test_db_seed47 import _query
from test_db_text_in_numbers import _first_row, _value

MB = 2 ** 20


def _problem_only(rank_dir, table, column, written):
    data = read_source(_source(rank_dir))
    (p,) = list(data.problems)
    assert p.path == str(rank_dir / OUT / PROFILER_DB)
    assert p.where == f"table {table}"
    assert p.reason == f"column {column!r}: not an integer: {written!r}"
    assert p.severity == "skipped" and p.affects == PROFILER_AFFECTS
    assert S.STEP_TRACE in data.tables  # analysis.db is still read


def test_a_bad_cell_of_60_characters_is_shown_whole(tmp_path):
    """TASK's first end time becomes 58 x's: its repr, quotes included, is 60 characters, which
    fit the one-line limit (60), so the problem shows it whole, not cut to 57 + '...' (kills
    _cell_error_3, which cut a repr of 60 too)."""
    rank_dir = _copy(tmp_path, [f"UPDATE TASK SET endNs = '{'x' * 58}' "
                                f"WHERE {_first_row('TASK')}"])
    written = _value(rank_dir, f"SELECT endNs FROM TASK WHERE {_first_row('TASK')}")
    assert written == "x" * 58 and len(repr(written)) == 60
    _problem_only(rank_dir, "TASK", "endNs", written)


def test_empty_task_end_read_by_the_hardware_timeline_alone_is_a_problem(tmp_path):
    """Without COMPUTE_TASK_INFO and COMMUNICATION_TASK_INFO only the hardware timeline reads
    TASK; its first end time '' (0 to SQL, a negative duration) is a problem naming TASK's
    endNs (kills _hardware_track_112, which checked a column 'ENDNS' TASK does not have, so
    endNs went unchecked)."""
    rank_dir = _copy(tmp_path, ["DROP TABLE COMPUTE_TASK_INFO",
                                "DROP TABLE COMMUNICATION_TASK_INFO",
                                f"UPDATE TASK SET endNs = '' WHERE {_first_row('TASK')}"])
    assert _value(rank_dir, f"SELECT endNs FROM TASK WHERE {_first_row('TASK')}") == ""
    _problem_only(rank_dir, "TASK", "endNs", "")


def test_unresolved_npu_mem_types_app_is_the_smaller_peak_with_the_larger_id(tmp_path):
    """NPU_MEM's two types get ids STRING_IDS does not hold, the application's (the smaller
    peak: the device total includes it) the LARGER id: its rows are the APP memory record,
    ts and (ddr + hbm) / 2^20 MB (kills _npu_mem_app_82, which took the smaller id, the
    device's rows). MEMORY_RECORD is dropped so the rows come from NPU_MEM alone."""
    rank_dir = _copy(tmp_path, [
        "UPDATE NPU_MEM SET type = CASE WHEN type = (SELECT id FROM STRING_IDS "
        "WHERE value = 'app') THEN 900000002 ELSE 900000001 END",
        "DROP TABLE MEMORY_RECORD"])
    peaks = dict(_query(rank_dir, PROFILER_DB,
                        "SELECT type, MAX(ddr + hbm) FROM NPU_MEM GROUP BY type"))
    assert set(peaks) == {900000001, 900000002} and peaks[900000002] < peaks[900000001]
    assert _query(rank_dir, PROFILER_DB,
                  "SELECT COUNT(*) FROM STRING_IDS WHERE id > 900000000") == [(0,)]
    expected = [(ts, total / MB) for ts, total in _query(
        rank_dir, PROFILER_DB,
        "SELECT timestampNs, ddr + hbm FROM NPU_MEM WHERE type = 900000002 ORDER BY 1")]
    assert len(expected) == 14
    data = read_source(_source(rank_dir))
    assert list(data.problems) == []
    rows = data.tables[S.MEMORY_RECORD].to_pylist()
    assert {r["component"] for r in rows} == {"APP"}
    assert [(r["ts_ns"], r["total_reserved_mb"]) for r in rows] == expected


def test_without_enum_module_the_component_is_the_module_id(tmp_path):
    """ENUM_MODULE dropped: each NPU_MODULE_MEM row's component is its moduleId as text, in
    timestamp order (kills _npu_module_mem_10, whose broken CAST was an SQL error that lost the
    profiler db)."""
    rank_dir = _copy(tmp_path, ["DROP TABLE ENUM_MODULE"])
    expected = _query(rank_dir, PROFILER_DB,
                      "SELECT timestampNs, moduleId FROM NPU_MODULE_MEM ORDER BY timestampNs")
    assert len({m for _, m in expected}) == 77
    data = read_source(_source(rank_dir))
    assert list(data.problems) == []
    rows = data.tables[S.NPU_MODULE_MEM].to_pylist()
    assert sorted((r["ts_ns"], r["component"]) for r in rows) == sorted(
        (ts, str(m)) for ts, m in expected)


def test_operator_memory_total_allocated_in_mb(tmp_path):
    """Every OP_MEMORY row's alloc_total_allocated_mb is its allocationTotalAllocated bytes
    / 2^20 (kills _operator_memory_79, which divided by None: all null)."""
    rank_dir = _copy(tmp_path)
    expected = [(a, b / MB) for a, b in _query(
        rank_dir, PROFILER_DB,
        "SELECT allocationTime, allocationTotalAllocated FROM OP_MEMORY")]
    assert len(expected) == 184 and all(v > 0 for _, v in expected)
    data = read_source(_source(rank_dir))
    rows = data.tables[S.OPERATOR_MEMORY].to_pylist()
    assert sorted((r["alloc_ns"], r["alloc_total_allocated_mb"]) for r in rows) == sorted(
        expected)


@pytest.mark.parametrize("column,ratio", [("wait_time", "wait_ratio"),
                                          ("synchronization_time", "sync_ratio")])
def test_a_ratio_over_exactly_one_ms(tmp_path, column, ratio):
    """One CommAnalyzerTime op gets transit 0.25 ms and wait (sync) 0.75 ms: the
    denominator is exactly 1, and the ratio 0.75 / (0.75 + 0.25) = 0.75 by hand (kills
    _ratio_19, which gave 0 wherever the denominator was 1)."""
    op = "hcom_allReduce__210_1_1"
    rank_dir = _copy(tmp_path, analysis_sql=[
        f"UPDATE CommAnalyzerTime SET transit_time = 0.25, {column} = 0.75 "
        f"WHERE hccl_op_name = '{op}'"])
    assert _query(rank_dir, "analysis.db",
                  f"SELECT transit_time + {column} FROM CommAnalyzerTime "
                  f"WHERE hccl_op_name = '{op}'") == [(1.0,)]
    data = read_source(_source(rank_dir))
    assert list(data.problems) == []
    (row,) = [r for r in data.tables[S.COMM_OPS].to_pylist() if r["op_name"] == op]
    assert row[ratio] == 0.75
