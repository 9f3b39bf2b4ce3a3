"""Legacy MindSpore CSV files whose line endings a spreadsheet changed, read through ``read_source``.

A spreadsheet saving "CSV (Macintosh)" ends rows with a lone CR, and a cell edited in one can
hold a lone CR: the rank must still be read (the file as rows, or the damaged row named as a
problem), never fail as a whole with a reader error.
"""
from __future__ import annotations

import csv
import shutil

from ascendprof.model import schemas as S
from ascendprof.model.problems import Problems
from ascendprof.readers import read_source
from ascendprof.scan import LEGACY_MS, scan

CLUSTER = ("mindspore-legacy", "cluster_propose")
RANK = 1
NAME = f"step_trace_raw_{RANK}_detail_time.csv"


def _copy(shared_data, tmp_path):
    """The real rank 1 of the legacy cluster (its files only), copied to change one file."""
    src = shared_data.joinpath(*CLUSTER)
    for p in src.iterdir():
        if p.is_file() and f"_{RANK}" in p.name or p.name == "step_trace_point_info.json":
            shutil.copy(p, tmp_path / p.name)
    return src


def _rank(tmp_path):
    srcs = [s for s in scan(tmp_path, Problems()) if s.kind == LEGACY_MS and s.rank == RANK]
    assert len(srcs) == 1
    return read_source(srcs[0])


def _expected_steps(path):
    # independent of the reader: the csv module over the original file (its average row '-'
    # is not a step); step_num and start_point (10 ns ticks) as written
    rows = list(csv.DictReader(open(path, newline="")))
    return [(int(r["step_num"]), int(r["start_point"]) * 10) for r in rows if r["step_num"].isdigit()]


def _steps(data):
    it = data.tables[S.ITERATIONS]
    return list(zip(it.column("step").to_pylist(), it.column("start_ns").to_pylist()))


def test_step_trace_saved_with_cr_line_endings_reads_as_the_original(shared_data, tmp_path):
    src = _copy(shared_data, tmp_path)
    text = (src / NAME).read_bytes()
    assert b"\r" not in text and text.count(b"\n") > 2
    (tmp_path / NAME).write_bytes(text.replace(b"\n", b"\r"))
    data = _rank(tmp_path)
    assert _steps(data) == _expected_steps(src / NAME)
    assert not [p for p in data.problems.items if NAME in str(p.path)]


def test_lone_cr_inside_a_row_names_the_row_and_keeps_the_rank(shared_data, tmp_path):
    src = _copy(shared_data, tmp_path)
    lines = (src / NAME).read_bytes().split(b"\n")
    # the first step's row is cut after its first field: "1,\r<rest>" is two short rows
    lines[1] = lines[1].replace(b",", b",\r", 1)
    (tmp_path / NAME).write_bytes(b"\n".join(lines))
    data = _rank(tmp_path)
    mine = [p for p in data.problems.items if NAME in str(p.path)]
    assert len(mine) == 1 and "fields" in mine[0].reason and mine[0].where == "line 2"
    # the damaged file is skipped as a whole; the rank's other files are still read
    assert S.ITERATIONS not in data.tables
    whole = [s for s in scan(src, Problems()) if s.kind == LEGACY_MS and s.rank == RANK]
    untouched = read_source(whole[0])
    assert untouched.tables[S.COMM_OPS].num_rows > 0
    assert data.tables[S.COMM_OPS].equals(untouched.tables[S.COMM_OPS])
