"""Memory (analyze.memory), the seed-39 sample's survivors: an operator_memory.csv row whose
size is ``inf`` (a number the reader accepts: its number pattern takes inf) and which is released
the moment it is allocated has no size x lifetime (inf MB x 0 ms is undefined), so its rank by
size x lifetime is left empty instead of costing the memory analysis its files. Through the
user's path (``ascendprof.open(...).analysis()``) on a copy of the torch_npu level0 rank 0."""

from __future__ import annotations

import math
import shutil

import pandas as pd

from conftest import analysis_of

_ROW = ("aten::inf_block,inf,1736405443871300.000,1736405443871300.000,1736405443871300.000,"
        "0.000,0.000,954.3701171875,1452.0,954.3701171875,954.3701171875,1452.0,"
        "954.3701171875,1431569360,NPU:0\n")


def _rank0_with_an_infinite_block(shared_data, dst):
    """Rank 0 of the 2-rank torch_npu job (level0 text): its metadata, step_trace_time.csv,
    memory_record.csv and operator_memory.csv, the latter with one more row (``_ROW``): Size(KB) inf, allocated and
    released at the same instant, Duration 0 us."""
    src = shared_data / "torch_npu-2rank-levels" / "text" / "level0" / "rank0_ascend_pt"
    out = dst / "rank0_ascend_pt"
    (out / "ASCEND_PROFILER_OUTPUT").mkdir(parents=True)
    for f in ("profiler_info_0.json", "profiler_metadata.json",
              "ASCEND_PROFILER_OUTPUT/step_trace_time.csv",
              "ASCEND_PROFILER_OUTPUT/memory_record.csv",
              "ASCEND_PROFILER_OUTPUT/operator_memory.csv"):
        shutil.copy(src / f, out / f)
    ops = out / "ASCEND_PROFILER_OUTPUT" / "operator_memory.csv"
    text = ops.read_text()
    assert "inf_block" not in text and text.endswith("\n")
    ops.write_text(text + _ROW)
    return src / "ASCEND_PROFILER_OUTPUT" / "operator_memory.csv"


def test_an_infinite_block_released_at_once_has_no_rank_by_size_x_lifetime(shared_data, tmp_path):
    """The added block: total and largest inf MB (inf KB / 1024), so first by size (rank 1);
    size x lifetime inf MB x 0 ms = undefined (NaN), so no rank by size x lifetime (empty).
    The memory files are all there and no problem is recorded; every other operator keeps a
    rank by size x lifetime, 1 .. n-1 in decreasing size x lifetime."""
    src_ops = _rank0_with_an_infinite_block(shared_data, tmp_path)
    names = set(pd.read_csv(src_ops)["Name"])
    assert "aten::inf_block" not in names  # the profiler's own operators
    ca = analysis_of(tmp_path, workers=1)
    assert not [p for p in ca.problems if "memory" in p.affects], ca.problems
    assert "memory_summary.csv" in ca.csv_files
    top = ca.csv_files["memory_top_ops.csv"]
    (row,) = top[top["Name"] == "aten::inf_block"].to_dict("records")
    assert row["Total Allocated(MB)"] == math.inf and row["Largest(MB)"] == math.inf
    assert math.isnan(row["Size x Lifetime(MB*ms)"])
    assert row["Rank By Size"] == 1
    assert pd.isna(row["Rank By Size x Lifetime"])
    rest = top[top["Name"] != "aten::inf_block"]
    assert len(rest) and set(rest["Name"]) <= names
    assert rest["Rank By Size x Lifetime"].notna().all()
    by_life = rest.sort_values("Rank By Size x Lifetime")
    assert list(by_life["Rank By Size x Lifetime"]) == list(range(1, len(rest) + 1))
    assert by_life["Size x Lifetime(MB*ms)"].is_monotonic_decreasing
