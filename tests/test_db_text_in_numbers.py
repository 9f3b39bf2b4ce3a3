"""The SQLite export reader on a time the reader computes with in SQL (``endNs - startNs``, sums
of them, the MIN / MAX of an HCCL op's tasks; the data loader's times, converted in SQL by a
CAST) holding text.

SQL converts a text operand silently: '12a' is 12, 'abc' and '' are 0, and a timestamp with a
unit after it ('...ns') is the timestamp. The durations computed from such a cell were wrong
numbers in the tables, with no problem saying so (or only a "negative duration" that did not say
why). Such a cell is now what any other cell that is not a number is
(tests/test_db_bad_numbers.py): the database is a problem naming the file, the table, the column
and the value, for the analyses that need it, and the rank's other database is still read.

Inputs: a copy of the level1 rank 0 db export of the shared data (torch_npu-2rank-levels), one
cell changed with sqlite3 per case. The expected reason is the column and the value written.
"""

from __future__ import annotations

import shutil
import sqlite3
from contextlib import closing

import pytest

from ascendprof.model import schemas as S
from ascendprof.readers import read_source
from test_db_bad_numbers import PROFILER_AFFECTS
from test_db_by_hand import OUT, PROFILER_DB
from test_db_reader import _source, run_sql

LEVEL1_RANK0 = ("torch_npu-2rank-levels", "db", "level1", "rank0_ascend_pt")


def _rank_copy(shared_data, tmp_path, profiler_sql=()):
    """The shared level1 rank 0 db export copied (writable; the profiler's -shm / -wal leftovers,
    0-byte WAL, not copied) with ``profiler_sql`` run on its profiler db."""
    src = shared_data.joinpath(*LEVEL1_RANK0)
    rank_dir = tmp_path / src.name
    shutil.copytree(src, rank_dir, ignore=shutil.ignore_patterns("*.db-shm", "*.db-wal"))
    for p in [rank_dir, *rank_dir.rglob("*")]:  # the shared data is read-only
        p.chmod(0o755 if p.is_dir() else 0o644)
    if profiler_sql:
        run_sql(rank_dir / OUT / PROFILER_DB, profiler_sql)
    return rank_dir


def _first_row(table: str) -> str:
    return f"rowid = (SELECT MIN(rowid) FROM {table})"


def _value(rank_dir, sql: str):
    with closing(sqlite3.connect(rank_dir / OUT / PROFILER_DB)) as c:
        return c.execute(sql).fetchone()[0]


# (table, column, SQL expression of the new value of the first row's cell); the text written is
# read back from the database for the expected reason
CASES = {
    # the brief's examples: '12a' (12 to SQL) and '' (0 to SQL) as an end time
    "task end 12a": ("TASK", "endNs", "'12a'"),
    "task end empty": ("TASK", "endNs", "''"),
    # a timestamp with its unit typed after it: SQL reads the timestamp, a plausible end
    "task end with unit": ("TASK", "endNs", "endNs || 'ns'"),
    # digits Python reads as 10 (int('1_0')) but SQL as 1: neither rule can be trusted
    "task end 1_0": ("TASK", "endNs", "'1_0'"),
    "comm op end text": ("COMMUNICATION_OP", "endNs", "'abc'"),
    "overlap end with unit": ("OVERLAP_ANALYSIS", "endNs", "endNs || 'ns'"),
    # CANN_API is only summed in SQL (api_statistic): no row of it reaches the tables as such
    "cann api end with unit": ("CANN_API", "endNs", "endNs || 'ns'"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_text_in_a_time_computed_in_sql_is_a_problem(shared_data, tmp_path, case):
    table, column, value = CASES[case]
    rank_dir = _rank_copy(shared_data, tmp_path,
                          [f"UPDATE {table} SET {column} = {value} WHERE {_first_row(table)}"])
    written = _value(rank_dir, f"SELECT {column} FROM {table} WHERE {_first_row(table)}")
    assert isinstance(written, str)  # SQLite kept it as text (the column's INTEGER affinity
    # converts only text that is a plain number)

    data = read_source(_source(rank_dir))
    (p,) = list(data.problems)
    assert p.path == str(rank_dir / OUT / PROFILER_DB)
    assert p.where == f"table {table}"
    assert p.reason == f"column {column!r}: not an integer: {written!r}"
    assert p.severity == "skipped" and p.rank == 0 and p.affects == PROFILER_AFFECTS
    assert S.STEP_TRACE in data.tables  # analysis.db is still read


def test_text_in_a_data_loader_time_is_a_problem(shared_data, tmp_path):
    """PYTORCH_API times are TEXT in torch_npu's schema (numbers as text, read as numbers); the
    data loader spans were read through CAST(... AS INTEGER), which takes '<start>x' as the
    start. Every data loader span of the rank gets an 'x' after its start: the problem names
    one of those texts."""
    dataloader = ("name IN (SELECT id FROM STRING_IDS "
                  "WHERE value LIKE 'enumerate(DataLoader)%')")
    rank_dir = _rank_copy(shared_data, tmp_path,
                          [f"UPDATE PYTORCH_API SET startNs = startNs || 'x' WHERE {dataloader}"])
    with closing(sqlite3.connect(rank_dir / OUT / PROFILER_DB)) as c:
        written = [v for (v,) in c.execute(f"SELECT startNs FROM PYTORCH_API WHERE {dataloader}")]
    assert written and all(v.endswith("x") for v in written)
    (p,) = list(read_source(_source(rank_dir)).problems)
    assert (p.path, p.where) == (str(rank_dir / OUT / PROFILER_DB), "table PYTORCH_API")
    assert p.reason in {f"column 'startNs': not an integer: {v!r}" for v in written}
    assert p.affects == PROFILER_AFFECTS


# (table, column) of an integer cell read as it is (not computed with in SQL) given a fraction:
# SQLite stores 0.5 more than the cell as a REAL, which pyarrow would cut back to the integer
FRACTIONS = {
    "rank device": ("RANK_DEVICE_MAP", "deviceId"),
    "block dim": ("COMPUTE_TASK_INFO", "blockDim"),
}


@pytest.mark.parametrize("case", list(FRACTIONS))
def test_a_fraction_in_an_integer_cell_is_a_problem(shared_data, tmp_path, case):
    """A REAL with a fraction in an integer column is not an integer: the problem names it, as
    it names text there, instead of the value cut to the integer below it."""
    table, column = FRACTIONS[case]
    rank_dir = _rank_copy(shared_data, tmp_path,
                          [f"UPDATE {table} SET {column} = {column} + 0.5 "
                           f"WHERE {_first_row(table)}"])
    written = _value(rank_dir, f"SELECT {column} FROM {table} WHERE {_first_row(table)}")
    assert isinstance(written, float) and written % 1 == 0.5  # SQLite keeps the REAL
    data = read_source(_source(rank_dir))
    (p,) = list(data.problems)
    assert (p.path, p.where) == (str(rank_dir / OUT / PROFILER_DB), f"table {table}")
    assert p.reason == f"column {column!r}: not an integer: {written!r}"
    assert p.affects == PROFILER_AFFECTS
    assert S.STEP_TRACE in data.tables  # analysis.db is still read

