"""The advice on a kernels table too large to hold (sysio.bigtables: spilled to Parquet, only
its slim columns in memory) is the advice on the whole table, and it reads the file a few
columns at a time, never whole.

Oracle: the same rank analysed with the whole table in memory (no spilling), the path every
other advice test pins against the profiler's own files. Spilling is forced on the small real
files by lowering SPILL_BYTES (and the batch size, so the file has several row groups).
"""

from __future__ import annotations

import pytest

from _advice_data import copy_rank, edit_csv, found, rows
from ascendprof.engine.pipeline import process_rank
from ascendprof.model import schemas as S
from ascendprof.model.options import ReadOptions
from ascendprof.scan import load_sources
from ascendprof.sysio import bigtables, textio
from conftest import QWEN3

ALEX = "torch_npu-2rank-levels/text/level2/rank0_ascend_pt"


def _advice(rank_dir, mode):
    (src,) = load_sources(rank_dir)
    res = process_rank(src, read=ReadOptions(advice=mode))
    assert res.advice is not None, res.problems.brief()
    return res.advice


def _spilled_advice(monkeypatch, rank_dir, mode):
    """The advice with the rank's kernel_details.csv spilled; also every column list the
    kernels' Parquet file was read with."""
    reads = []
    real_read = bigtables.SpilledTable.read

    def read(self, columns=None, **kw):
        if self.path.name.startswith(f".{S.KERNELS}."):
            reads.append(columns)
        return real_read(self, columns, **kw)

    with monkeypatch.context() as m:
        m.setattr(bigtables, "SPILL_BYTES", 1)
        m.setattr(textio, "STREAM_BLOCK_BYTES", 64 << 10)
        m.setattr(bigtables.SpilledTable, "read", read)
        return _advice(rank_dir, mode), reads


def _fired(res, rule_id):
    return res["status"][rule_id][0] == "fired"


@pytest.fixture
def alex_aicpu(shared_data, tmp_path):
    """The AlexNet level-2 export with two op types moved to AI CPU (one with float64 inputs),
    so the AI CPU rule fires on columns the slim table does not hold (data types)."""
    rank = copy_rank(shared_data / ALEX, tmp_path / "rank0_ascend_pt")

    def to_aicpu(rs):
        for r in rs:
            if r["Type"] in ("MaxPoolGradWithArgmaxV1", "ForeachMulScalar"):
                r["Accelerator Core"] = "AI_CPU"
            if r["Type"] == "ForeachMulScalar":
                r["Input Data Types"] = "DOUBLE;DOUBLE"
    edit_csv(rank, "kernel_details.csv", to_aicpu)
    assert sum(r["Accelerator Core"] == "AI_CPU" for r in rows(rank, "kernel_details.csv")) == 4
    return rank


@pytest.mark.parametrize("mode", ["summary", "all"])
def test_spilled_kernels_give_the_same_advice_alexnet(monkeypatch, alex_aicpu, mode):
    whole = _advice(alex_aicpu, mode)
    got, reads = _spilled_advice(monkeypatch, alex_aicpu, mode)
    # rules that read columns outside the slim table fired on the whole table ...
    assert _fired(whole, "computation.aicpu") and _fired(whole, "computation.op_compile")
    (f,) = found(whole, "computation.aicpu")
    assert f["evidence"]["aicpu_tasks"] == 4
    assert any("float64" in a for a in f["advice"])  # Input Data Types, read from the file
    # ... and the spilled rank gets exactly the same findings and rule status
    assert got == whole
    # the kernels' file was read (so the rank did spill) one column at a time, never whole
    assert reads and all(cols is not None and len(cols) <= 3 for cols in reads), reads


def test_spilled_kernels_give_the_same_advice_pmu_rules(monkeypatch):
    rank = QWEN3 / "rank_0_ascend_pt"
    whole = _advice(rank, "summary")
    got, reads = _spilled_advice(monkeypatch, rank, "summary")
    assert _fired(whole, "computation.pipe_bound")  # from the PMU ratio columns
    assert whole["status"]["computation.block_dim"][0] == "silent"  # ran, found nothing
    assert got == whole
    assert reads and all(cols is not None and len(cols) <= 3 for cols in reads), reads
