"""readers/ascend_output.py: the survivors of mutation seed 43, through the user's path
(``read_source``) on copies of a real Level1 rank (fixtures/torch_npu-static-graph-mem/
rank0_ascend_pt, torch_npu 2025-01): a large kernel_details.csv read in batches keeps every row
even when a batch before the last holds a single row (a batch of one row is not the end of the
file), and a CSV with a header but no data rows is kept as an empty table with a warning that
says so. Expected values are worked out from the files' text, never taken from the code's
output."""

from __future__ import annotations

import csv

import pyarrow as pa

from ascendprof.model import schemas as S
from ascendprof.sysio import bigtables, textio
from test_ascend_output_seed42 import OUT, _copy, _problems, _read


def test_a_one_row_batch_before_the_last_does_not_end_a_large_kernel_details(
        tmp_path, monkeypatch):
    # Every kernel_details.csv counted as large (read in batches, spilled), each batch ~2000
    # bytes of text. The fixture's rows are 244..1353 bytes long, so near the end a batch holds
    # a single row (a long row followed by one that no longer fits) while rows still follow.
    # Every one of the file's 191 data rows is kept, in the file's order.
    monkeypatch.setattr(bigtables, "SPILL_BYTES", 1)
    monkeypatch.setattr(textio, "STREAM_BLOCK_BYTES", 2000)
    rank_dir = _copy(tmp_path)
    kd = rank_dir / OUT / "kernel_details.csv"
    with open(kd, encoding="utf-8", newline="") as f:
        rows = list(csv.reader(f))
    want = [r[rows[0].index("Name")] for r in rows[1:]]
    assert len(want) == 191
    # the premise: some batch other than the last has exactly one row
    header = textio.csv_header(kd)
    sizes = [t.num_rows for t in textio.open_csv_stream(kd, {h: pa.string() for h in header},
                                                        None, None, False)]
    assert sum(sizes) == 191 and 1 in sizes[:-1], sizes
    with bigtables.spilling(tmp_path / "scratch"):
        (tmp_path / "scratch").mkdir()
        data = _read(rank_dir)
        assert S.KERNELS in data.spilled  # the large-file path
        assert data.spilled[S.KERNELS].read(["name"])["name"].to_pylist() == want
        assert data.tables[S.KERNELS]["name"].to_pylist() == want
    assert _problems(data, "kernel_details.csv") == []


def test_a_csv_with_only_its_header_is_an_empty_table_and_a_warning(tmp_path):
    # op_statistic.csv cut to its header line: the table is kept (the file exists) with no
    # rows, and one warning names the file and says it has no data rows
    rank_dir = _copy(tmp_path)
    ops = rank_dir / OUT / "op_statistic.csv"
    header = ops.read_text(encoding="utf-8").splitlines()[0]
    assert header.split(",")[:3] == ["OP Type", "Core Type", "Count"]
    ops.write_text(header + "\n", encoding="utf-8")
    data = _read(rank_dir)
    assert data.tables[S.OP_STATISTIC].num_rows == 0
    (p,) = _problems(data, "op_statistic.csv")
    assert p.path == str(ops)
    assert p.reason == "header only, no data rows"
    assert p.severity == "warning"
    assert p.rank == 0
