"""The SQLite export reader on a numeric column holding something that is not a number of its kind.

SQLite keeps whatever a cell is given, whatever the column's declared type: a damaged or
hand-edited export can hold text ('3x') where the reader expects an integer, or a number no
int64 / int32 column can hold. Each case copies the shipped level1 rank 0 db export, writes one
such cell with sqlite3 and reads it through ``read_source``: the database is then a problem
naming the file, the table, the column and the value (as the text reader names a bad cell),
for the analyses that need that database, and the other database of the rank is still read.
"""

from __future__ import annotations

import csv

import pytest
from click.testing import CliRunner

from ascendprof.cli.main import main
from ascendprof.model import schemas as S
from ascendprof.readers import read_source
from test_db_by_hand import OUT, PROFILER_DB, _copy
from test_db_reader import _source

PROFILER_AFFECTS = ("step_breakdown", "op_statistics")
ANALYSIS_AFFECTS = ("cluster_step_trace", "communication", "communication_matrix")


def _only_problem(data):
    (p,) = list(data.problems)
    return p


# (profiler db edits, analysis.db edits, file, table, expected reason)
CASES = {
    "overlap type text": (
        ["UPDATE OVERLAP_ANALYSIS SET type = '3x'"], [],
        PROFILER_DB, "OVERLAP_ANALYSIS", "column 'type': not an integer: '3x'"),
    "step start text": (
        ["UPDATE STEP_TIME SET startNs = 'x1'"], [],
        PROFILER_DB, "STEP_TIME", "column 'startNs': not an integer: 'x1'"),
    # TASK ⋈ COMPUTE_TASK_INFO: the column is named after the table that has it
    "block dim text": (
        ["UPDATE COMPUTE_TASK_INFO SET blockDim = 'bd'"], [],
        PROFILER_DB, "COMPUTE_TASK_INFO", "column 'blockDim': not an integer: 'bd'"),
    "task stream text": (
        ["UPDATE TASK SET streamId = 'sx'"], [],
        PROFILER_DB, "TASK", "column 'streamId': not an integer: 'sx'"),
    # 1e20 does not fit int64 (SQLite stores it as a REAL)
    "step start beyond int64": (
        ["UPDATE STEP_TIME SET startNs = 100000000000000000000"], [],
        PROFILER_DB, "STEP_TIME", "column 'startNs': out of range: 1e+20"),
    "step start blob": (
        ["UPDATE STEP_TIME SET startNs = x'00ff'"], [],
        PROFILER_DB, "STEP_TIME", "column 'startNs': not an integer: b'\\x00\\xff'"),
    # read row by row (not through a typed query): the sums of ddr + hbm
    "npu_mem ddr text": (
        ["UPDATE NPU_MEM SET ddr = 'dd'"], [],
        PROFILER_DB, "NPU_MEM", "column 'ddr': not a number: 'dd'"),
    # the device of the rank when the source does not name it
    "rank device text": (
        ["UPDATE RANK_DEVICE_MAP SET deviceId = 'rd'"], [],
        PROFILER_DB, "RANK_DEVICE_MAP", "column 'deviceId': not an integer: 'rd'"),
    # 2^40 fits the int64 query but not the int32 device_id of the table
    "module mem device beyond int32": (
        ["UPDATE NPU_MODULE_MEM SET deviceId = 1099511627776"], [],
        PROFILER_DB, "NPU_MODULE_MEM", "column 'deviceId': out of range: 1099511627776"),
    "step trace computing text": (
        [], ["UPDATE StepTraceTime SET computing = 'abc'"],
        "analysis.db", "StepTraceTime", "column 'computing': not a number: 'abc'"),
    # a number as text is read, but 1e300 us is beyond int64 ns
    "step trace free beyond ns": (
        [], ["UPDATE StepTraceTime SET free = '1e300'"],
        "analysis.db", "StepTraceTime", "column 'free': out of range: 1e+300"),
    "comm start beyond ns": (
        [], ["UPDATE CommAnalyzerTime SET start_timestamp = 1e300"],
        "analysis.db", "CommAnalyzerTime", "column 'start_timestamp': out of range: 1e+300"),
    "comm elapse text": (
        [], ["UPDATE CommAnalyzerTime SET elapse_time = 'et'"],
        "analysis.db", "CommAnalyzerTime", "column 'elapse_time': not a number: 'et'"),
    # a packet count of 1.5 (read as a number, not an integer count)
    "bandwidth count fraction": (
        [], ["UPDATE CommAnalyzerBandwidth SET count = '1.5' WHERE count > 0"],
        "analysis.db", "CommAnalyzerBandwidth", "column 'count': not an integer: 1.5"),
    "matrix src rank text": (
        [], ["UPDATE CommAnalyzerMatrix SET src_rank = 'sr'"],
        "analysis.db", "CommAnalyzerMatrix", "column 'src_rank': not an integer: 'sr'"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_bad_number_is_a_problem_naming_file_table_column_and_value(tmp_path, case):
    profiler_sql, analysis_sql, name, table, reason = CASES[case]
    rank_dir = _copy(tmp_path, profiler_sql, analysis_sql)
    data = read_source(_source(rank_dir))
    p = _only_problem(data)
    assert p.path == str(rank_dir / OUT / name)
    assert p.where == f"table {table}"
    assert p.reason == reason
    assert p.severity == "skipped" and p.rank == 0
    assert p.affects == (PROFILER_AFFECTS if name == PROFILER_DB else ANALYSIS_AFFECTS)
    # the other database of the rank is still read
    if name == PROFILER_DB:
        assert S.STEP_TRACE in data.tables
    else:
        assert S.KERNELS in data.tables and S.TIMELINE in data.tables


def test_a_long_text_is_cut_to_keep_the_problem_one_line(tmp_path):
    """200 letters in StepTraceTime.computing: the value shown is its first 56 characters of
    repr ('y' * 56 after the quote) and '...'."""
    rank_dir = _copy(tmp_path, analysis_sql=["UPDATE StepTraceTime SET computing = '"
                                             + "y" * 200 + "'"])
    p = _only_problem(read_source(_source(rank_dir)))
    assert p.reason == "column 'computing': not a number: '" + "y" * 56 + "..."


def test_both_databases_damaged_gives_two_problems(tmp_path):
    """Text in OVERLAP_ANALYSIS.type and in StepTraceTime.computing: one problem per database,
    and the profiler db's tables read before OVERLAP_ANALYSIS (kernels, steps) are kept."""
    rank_dir = _copy(tmp_path, ["UPDATE OVERLAP_ANALYSIS SET type = '3x'"],
                     ["UPDATE StepTraceTime SET computing = 'abc'"])
    data = read_source(_source(rank_dir))
    got = sorted((p.path, p.where, p.reason) for p in data.problems)
    assert got == [
        (str(rank_dir / OUT / "analysis.db"), "table StepTraceTime",
         "column 'computing': not a number: 'abc'"),
        (str(rank_dir / OUT / PROFILER_DB), "table OVERLAP_ANALYSIS",
         "column 'type': not an integer: '3x'")]
    assert S.KERNELS in data.tables and S.STEPS in data.tables
    assert S.STEP_TRACE not in data.tables


def test_analyse_reports_the_bad_number_in_problems_csv(tmp_path):
    """`ascendprof analyse` on the rank with text in StepTraceTime.computing: the run goes on
    (exit 0) with the rest of the rank, and problems.csv has the row naming the file, the table,
    the column and the value, for the analyses of analysis.db."""
    src = tmp_path / "in"
    rank_dir = _copy(src, analysis_sql=["UPDATE StepTraceTime SET computing = 'abc'"])
    out = tmp_path / "out"
    res = CliRunner().invoke(main, ["analyse", str(src), "-o", str(out), "--no-cache",
                                    "--workers", "1", "--no-html", "--no-tables"])
    assert res.exit_code == 0, res.output
    assert "Traceback" not in res.output
    with open(out / "problems.csv", newline="", encoding="utf-8") as f:
        rows = [r for r in csv.DictReader(f) if r["Severity"] == "skipped"]
    assert [(r["Rank"], r["Path"], r["Where"], r["Reason"], r["Affects"]) for r in rows] == [
        ("0", str(rank_dir / OUT / "analysis.db"), "table StepTraceTime",
         "column 'computing': not a number: 'abc'",
         "cluster_step_trace;communication;communication_matrix")]
