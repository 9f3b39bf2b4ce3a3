"""The SQLite export reader (ascendprof.readers.db): what the seed-42 mutation sample found
untested.

- the process of the db reader's 'overlap' timeline rows is the one the profiler's own text
  export gives the same threads (Computing / Communication / Communication(Not Overlapped)):
  read with json from trace_view.json of the text export of the same job (shared data
  torch_npu-2rank-levels, level1 rank 0; only names are compared);
- a CommAnalyzerTime.elapse_time read as a number but beyond int64 once in ns (1e300 ms) is a
  problem naming the file, the table, the column elapse_time and the value, as the other bad
  cells of tests/test_db_bad_numbers.py are.

Inputs are the shipped level1 rank 0 db export (fixtures/torch_npu-db-level1-rank0), copied and
edited with sqlite3 where a case needs it (helpers of tests/test_db_by_hand.py).
"""

from __future__ import annotations

from ascendprof.model import schemas as S
from ascendprof.readers import read_source
from test_db_bad_numbers import ANALYSIS_AFFECTS
from test_db_by_hand import FIXTURE, OUT, _copy
from test_db_reader import _source
from test_db_seed38 import TEXT_TRACE, _trace_names


def test_overlap_rows_carry_the_process_name_of_the_text_export(shared_data):
    """trace_view.json puts the threads Computing, Communication and Communication(Not
    Overlapped) in one process; the db reader's 'overlap' rows must name that process, letter
    for letter."""
    procs, threads, _ = _trace_names(shared_data / TEXT_TRACE)
    overlap_threads = {"Computing", "Communication", "Communication(Not Overlapped)"}
    overlap_procs = {procs[pid] for (pid, _), name in threads.items()
                     if name in overlap_threads}
    assert len(overlap_procs) == 1                   # {"Overlap Analysis"}

    tl = read_source(_source(FIXTURE)).tables[S.TIMELINE].to_pylist()
    rows = [r for r in tl if r["track"] == "overlap"]
    assert rows
    assert {r["process"] for r in rows} == overlap_procs


def test_an_elapse_time_beyond_int64_ns_names_elapse_time(tmp_path):
    """elapse_time = 1e300 ms is a number (the float64 query reads it), but 1e300 * 1e6 =
    1e306 ns is beyond int64 (max about 9.2e18): a problem at table CommAnalyzerTime naming
    the column elapse_time and the value as the db holds it."""
    rank_dir = _copy(tmp_path, analysis_sql=["UPDATE CommAnalyzerTime SET elapse_time = 1e300"])
    data = read_source(_source(rank_dir))
    (p,) = list(data.problems)
    assert p.path == str(rank_dir / OUT / "analysis.db")
    assert p.where == "table CommAnalyzerTime"
    assert p.reason == "column 'elapse_time': out of range: 1e+300"
    assert p.affects == ANALYSIS_AFFECTS
