"""A large step_trace_time.csv, op_statistic.csv, api_statistic.csv, memory_record.csv or
operator_memory.csv is read a few MB at a time: at 10^6 steps the whole file's bytes and its
text table were ~0.5 GB of a worker's ~1 GB. Expected values come from the whole-file read of
the same file, which parses it another way (typed columns at once, text only as a fallback),
and from row numbers worked out by hand. The batch size is made small here so that files of
a few KB span many batches; the size at which a file is read in batches is set to 0."""

from __future__ import annotations

import glob
import os
from pathlib import Path

import pytest

from ascendprof.model import schemas as S
from ascendprof.model.errors import InputError
from ascendprof.model.problems import Problems
from ascendprof.readers import ascend_output as A
from ascendprof.readers import read_source
from ascendprof.scan import scan
from ascendprof.sysio import bigtables
from conftest import FIXTURES, QWEN3, SHARED

READERS = {"step_trace_time.csv": A.read_step_trace_time, "op_statistic.csv": A.read_op_statistic,
           "api_statistic.csv": A.read_api_statistic, "memory_record.csv": A.read_memory_record,
           "operator_memory.csv": A.read_operator_memory}


def _files() -> list[str]:
    roots = [str(FIXTURES)] + ([str(SHARED)] if SHARED is not None else [])
    return sorted(p for root in roots for p in glob.glob(f"{root}/**/*.csv", recursive=True)
                  if os.path.basename(p) in READERS)


def _read(path: Path, batched: bool, monkeypatch):
    """(table or the error's text, bad rows, lossy) of one file, read whole or in batches."""
    monkeypatch.setattr(bigtables, "SPILL_BYTES", 0 if batched else 1 << 50)
    monkeypatch.setattr(A, "_BATCH_BYTES", 4096)
    bad, lossy = [], []
    try:
        table = READERS[path.name](path, 5, bad, lossy)
    except InputError as e:
        table = str(e)
    return table, bad, lossy


def test_every_real_file_reads_the_same_in_batches(monkeypatch):
    files = _files()
    assert len(files) >= 10
    multi = 0
    for f in files:
        whole, batched = _read(Path(f), False, monkeypatch), _read(Path(f), True, monkeypatch)
        assert isinstance(whole[0], str) or whole[0].num_rows, f
        assert (whole[0] == batched[0] if isinstance(whole[0], str)
                else whole[0].equals(batched[0])), f
        assert whole[1:] == batched[1:], f
        multi += os.path.getsize(f) > 3 * 4096
    assert multi >= 3  # files of several batches among them


def _step_trace(tmp_path, rows: int, change) -> Path:
    """qwen3 rank 0's step_trace_time.csv with its one data row repeated ``rows`` times, steps
    1..rows, ``change(i, cells)`` applied to data row i (0-based)."""
    src = (QWEN3 / "rank_0_ascend_pt" / "ASCEND_PROFILER_OUTPUT" / "step_trace_time.csv")
    head, first = src.read_text(encoding="utf-8").splitlines()[:2]
    lines = [head]
    for i in range(rows):
        cells = first.split(",")
        cells[1] = str(i + 1)
        lines.append(",".join(change(i, cells) or cells))
    path = tmp_path / "step_trace_time.csv"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_spreadsheet_values_in_later_batches_are_counted_once_per_column(tmp_path, monkeypatch):
    def change(i, cells):
        if i in (3, 2500, 2999):  # Computing written by a spreadsheet, in three batches
            cells[2] = "2.3129E+05"
        if i == 2700:
            cells[3] = "4.2E+05"

    path = _step_trace(tmp_path, 3000, change)
    whole, batched = _read(path, False, monkeypatch), _read(path, True, monkeypatch)
    assert os.path.getsize(path) > 20 * 4096
    assert whole[0].equals(batched[0])
    # one entry per column, in the file's column order, the first example
    assert batched[2] == whole[2] == [("Computing", 3, 0, "2.3129E+05"),
                                      ("Communication(Not Overlapped)", 1, 0, "4.2E+05")]
    assert batched[0]["computing_ns"][2500].as_py() == 231_290_000  # 2.3129E+05 us


def test_a_bad_cell_in_a_later_batch_names_its_data_row(tmp_path, monkeypatch):
    path = _step_trace(tmp_path, 3000, lambda i, c: c[:4] + ["abc"] + c[5:] if i == 2899 else c)
    whole, batched = _read(path, False, monkeypatch), _read(path, True, monkeypatch)
    assert isinstance(batched[0], str) and batched[0] == whole[0]
    assert "'Overlapped'" in batched[0] and "data row 2900" in batched[0]  # i = 2899 is row 2900


def test_rows_of_the_wrong_width_are_left_out_with_their_line(tmp_path, monkeypatch):
    def change(i, cells):
        if i == 9:
            return cells[:2]
        if i == 2599:
            return cells + ["7"]

    path = _step_trace(tmp_path, 3000, change)
    table, bad, _ = _read(path, True, monkeypatch)
    assert table.num_rows == 2998
    # data row i is line i + 2 (the header is line 1); (line, fields, expected)
    assert bad == [(11, 2, 11), (2601, 12, 11)]
    assert 10 not in table["step"].to_pylist() and 2600 not in table["step"].to_pylist()


def test_read_source_gives_the_same_tables_when_the_step_trace_is_read_in_batches(
        tmp_path, monkeypatch):
    rank = tmp_path / "rank_0_ascend_pt"
    out = rank / "ASCEND_PROFILER_OUTPUT"
    out.mkdir(parents=True)
    for f in (QWEN3 / "rank_0_ascend_pt").rglob("*"):
        if f.is_file():
            dest = rank / f.relative_to(QWEN3 / "rank_0_ascend_pt")
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_bytes(f.read_bytes())
    _step_trace(tmp_path, 5000, lambda i, c: None).replace(out / "step_trace_time.csv")

    def tables(batched: bool):
        monkeypatch.setattr(bigtables, "SPILL_BYTES", 0 if batched else 1 << 50)
        monkeypatch.setattr(A, "_BATCH_BYTES", 8192)
        return read_source(next(s for s in scan(tmp_path, Problems()))).tables

    whole, batched = tables(False), tables(True)
    assert batched[S.STEP_TRACE].num_rows == 5000
    assert batched[S.STEP_TRACE].equals(whole[S.STEP_TRACE])
    assert batched[S.STEP_TRACE]["step"].to_pylist() == list(range(1, 5001))


@pytest.mark.parametrize("batched", [False, True])
def test_a_missing_required_column_is_named(tmp_path, monkeypatch, batched):
    path = _step_trace(tmp_path, 100, lambda i, c: None)
    lines = path.read_text(encoding="utf-8").splitlines()
    path.write_text("\n".join(",".join(x for j, x in enumerate(line.split(",")) if j != 2)
                              for line in lines) + "\n", encoding="utf-8")
    text = _read(path, batched, monkeypatch)[0]
    assert isinstance(text, str) and "missing column(s) Computing" in text
