"""ascendprof.readers.values, the cases the seed-35 mutation sample found untested, for damage
made on a copy of rank 0's step_trace_time.csv of the real Qwen3 fixture and read through
``read_source``:

- a step listed twice in the middle of the file (not only as the last row): every later copy is
  left out, the count and the first duplicate's row are reported, the rows after it stay;
- an empty cell of a newer-version column (Preparing) in one row only is reported where it is,
  also when the always-written columns before it have no empty cell (the scan over the columns
  goes on past a column without empty cells: _report_empty_steps' second ``continue``).

Expected values are computed here from the rows written (csv module) by hand.
"""

from __future__ import annotations

import csv
import shutil
from pathlib import Path

import pytest

from ascendprof.model import schemas as S
from ascendprof.model.problems import Problems
from ascendprof.readers import read_source
from ascendprof.scan import scan
from conftest import QWEN3

OUT = "ASCEND_PROFILER_OUTPUT"
STEP_AFFECTS = ("step_breakdown", "verdicts")


@pytest.fixture
def rank0(tmp_path) -> Path:
    dst = tmp_path / "in" / "rank_0_ascend_pt"
    shutil.copytree(QWEN3 / "rank_0_ascend_pt", dst,
                    ignore=shutil.ignore_patterns("*memory*", "*mem.csv"))
    return dst


def _read(rank_dir: Path):
    (src,) = scan(rank_dir.parent, Problems())
    return read_source(src)


def _step_rows(rank0, make):
    """step_trace_time.csv rewritten with ``make(r13)``'s rows (r13: its one real row)."""
    st = rank0 / OUT / "step_trace_time.csv"
    with open(st, newline="") as f:
        r = csv.DictReader(f)
        head, (r13,) = r.fieldnames, list(r)
    with open(st, "w", newline="") as f:
        w = csv.DictWriter(f, head, lineterminator="\n")
        w.writeheader()
        w.writerows(make(r13))
    return st


def _problems(data, needle):
    return [p for p in data.problems.items if needle in p.reason]


def test_steps_listed_twice_in_the_middle_keep_their_first_rows(rank0):
    # rows 1..5: steps 13, 14, 13, 14, 15 -> rows 3 and 4 left out (2 duplicates), the first
    # duplicate is row 3 (step 13, listed 2 times); step 15 after them stays
    st = _step_rows(rank0, lambda r: [dict(r, Step="13", Free="1"), dict(r, Step="14", Free="2"),
                                      dict(r, Step="13", Free="3"), dict(r, Step="14", Free="4"),
                                      dict(r, Step="15", Free="5")])
    data = _read(rank0)
    (d,) = _problems(data, "duplicated step")
    assert d.reason == ("2 duplicated step row(s) left out (e.g. step 13 listed 2 times); the "
                        "first row of each step is kept")
    assert d.where == "row 3, column Step, step 13"
    assert d.affects == STEP_AFFECTS and d.path == str(st)
    t = data.tables[S.STEP_TRACE].to_pylist()
    assert [r["step"] for r in t] == [13, 14, 15]
    assert [r["free_ns"] for r in t] == [1000, 2000, 5000]  # 1, 2, 5 us: the first rows kept


def test_an_empty_preparing_cell_is_reported_where_it_is(rank0):
    # Preparing (a newer-version column) empty in row 2 only: 1 of 2 rows, so not an absent
    # column; the columns before it are all filled
    st = _step_rows(rank0, lambda r: [dict(r, Step="13"), dict(r, Step="14", Preparing="")])
    data = _read(rank0)
    (e,) = _problems(data, "empty or NaN")
    assert e.reason == ("1 empty or NaN Preparing value(s); left out of the sums and medians of "
                        "that metric")
    assert e.where == "row 2, column Preparing, step 14"
    assert e.affects == STEP_AFFECTS and e.path == str(st)
