"""db reader, mutation seed 49: what the survivors of that sample showed untested.

- a CommAnalyzerTime synchronization_time beyond int64 ns is a problem of analysis.db naming
  the table, the column 'synchronization_time' and the value;
- text in NPU_MEM's hbm (read row by row for the ddr + hbm sums) is a problem of the profiler
  db naming the table, the column 'hbm' and the value.

Inputs: a copy of the level1 rank 0 db fixture, edited with sqlite3 per case. Expected values:
the value written, read back from the database with sqlite3.
"""

from __future__ import annotations

from ascendprof.model import schemas as S
from ascendprof.readers import read_source
from test_db_bad_numbers import ANALYSIS_AFFECTS, PROFILER_AFFECTS
from test_db_by_hand import OUT, PROFILER_DB, _copy
from test_db_reader import _source
from test_db_seed47 import _query
from test_db_text_in_numbers import _first_row, _value


def test_synchronization_time_beyond_int64_ns_is_a_problem_naming_it(tmp_path):
    """Every CommAnalyzerTime row gets synchronization_time 1e300 ms (1e306 ns, far beyond
    int64): a problem of analysis.db naming the table, the column 'synchronization_time' and
    the value (kills _comm_ops_112, which named no column: None); the profiler db is still
    read."""
    rank_dir = _copy(tmp_path, analysis_sql=[
        "UPDATE CommAnalyzerTime SET synchronization_time = 1e300"])
    ((n, sync),) = _query(rank_dir, "analysis.db",
                          "SELECT COUNT(*), MIN(synchronization_time) FROM CommAnalyzerTime")
    assert n > 0 and sync == 1e300
    data = read_source(_source(rank_dir))
    (p,) = list(data.problems)
    assert p.path == str(rank_dir / OUT / "analysis.db")
    assert p.where == "table CommAnalyzerTime"
    assert p.reason == f"column 'synchronization_time': out of range: {sync!r}"
    assert p.severity == "skipped" and p.affects == ANALYSIS_AFFECTS
    assert S.KERNELS in data.tables and S.TIMELINE in data.tables


def test_text_in_npu_mem_hbm_is_a_problem_naming_it(tmp_path):
    """NPU_MEM's first hbm cell becomes 'hb': NPU_MEM is read row by row (not through a typed
    query), and the text is a problem of the profiler db naming NPU_MEM, the column 'hbm' and
    the value (kills _npu_mem_app_23, which named the column 'HBM'); analysis.db is still
    read."""
    rank_dir = _copy(tmp_path, [f"UPDATE NPU_MEM SET hbm = 'hb' WHERE {_first_row('NPU_MEM')}"])
    written = _value(rank_dir, f"SELECT hbm FROM NPU_MEM WHERE {_first_row('NPU_MEM')}")
    assert written == "hb"
    data = read_source(_source(rank_dir))
    (p,) = list(data.problems)
    assert p.path == str(rank_dir / OUT / PROFILER_DB)
    assert p.where == "table NPU_MEM"
    assert p.reason == f"column 'hbm': not a number: {written!r}"
    assert p.severity == "skipped" and p.affects == PROFILER_AFFECTS
    assert S.STEP_TRACE in data.tables
