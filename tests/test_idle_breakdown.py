"""Idle time by cause (analyze.idle, idle_breakdown.csv).

The Free of each step is recomputed from the device tasks and split by cause; on the shipped
Qwen3 sample it must add up to the profiler's own Free (step_trace_time.csv, read here with the
csv module) within 1 %, and on the shared 2-rank Level2 exports the host causes appear once the
host data is read. The classification of single gaps is checked against a hand calculation."""

from __future__ import annotations

import csv

import numpy as np
import pytest

import ascendprof
from ascendprof.analyze import idle
from ascendprof.analyze import intervals as iv
from conftest import QWEN3, SHARED, SHARED_MISSING, analysis_of

CAUSE_COLS = ["Short Gaps(us)", "Synchronisation(us)", "Data Loader(us)", "Host Launch(us)",
              "Other(us)"]


def _free_us(rank_dir):
    with open(rank_dir / "ASCEND_PROFILER_OUTPUT" / "step_trace_time.csv", newline="") as f:
        return {int(r["Step"]): float(r["Free"]) for r in csv.DictReader(f)}


def test_qwen3_ranks_0_and_2_add_up_to_their_free():
    ib = analysis_of(QWEN3).csv_files["idle_breakdown.csv"]
    for rank in (0, 2):
        free = _free_us(QWEN3 / f"rank_{rank}_ascend_pt")
        row = ib[ib["Rank"] == rank].iloc[0]
        causes = sum(row[c] for c in CAUSE_COLS)
        assert causes == pytest.approx(row["Free(us)"], abs=0.01)
        # 158558.0 us (rank 0) and 131705.28 us (rank 2) in step_trace_time.csv
        assert causes - row["Edge Idle(us)"] == pytest.approx(free[int(row["Step"])], rel=0.01)
        # kernel_details.csv only: no host data, so no host cause can be seen
        assert row["Host Data"] == "none"
        assert row["Synchronisation(us)"] == row["Host Launch(us)"] == row["Data Loader(us)"] == 0
        assert row["Short Gaps(us)"] > 0
    assert set(ib["Rank"]) == {0, 2}  # ranks 1 and 3 have no device tasks in the sample


def test_gap_classification_by_hand():
    sync = iv.make([1_000_000], [1_040_000])     # a synchronize 1.000-1.040 ms
    loader = iv.make([1_030_000], [1_100_000])   # a DataLoader span 1.030-1.100 ms
    # next task starts at 1.200 ms, launched at 1.150 ms (after the gap began at 1.000 ms)
    launches = (np.array([1_200_000], np.int64), np.array([1_150_000], np.int64))
    # 20 us gap: short
    assert idle.classify(500_000, 520_000, sync, loader, launches) == {"short": 20_000}
    # gap 1.000-1.200 ms: 40 us sync, then 60 us of loader not under sync (1.040-1.100),
    # the remaining 100 us host launch
    got = idle.classify(1_000_000, 1_200_000, sync, loader, launches)
    assert got == {"sync": 40_000, "data_loader": 60_000, "host_launch": 100_000}
    # the same gap when the next task had been launched before it began: other
    early = (np.array([1_200_000], np.int64), np.array([900_000], np.int64))
    assert idle.classify(1_000_000, 1_200_000, sync, loader, early)["other"] == 100_000
    # no launch links: other
    assert idle.classify(1_000_000, 1_200_000, iv.empty(), iv.empty(), None) == {
        "sync": 0, "data_loader": 0, "other": 200_000}


@pytest.mark.skipif(SHARED is None, reason=SHARED_MISSING)
def test_level2_db_host_causes():
    root = SHARED / "torch_npu-2rank-levels" / "db" / "level2"
    ib = ascendprof.open(root).analysis().csv_files["idle_breakdown.csv"]
    assert list(ib["Rank"]) == [0, 1]
    for _, row in ib.iterrows():
        assert row["Host Data"] == "host events + launch links"
        assert sum(row[c] for c in CAUSE_COLS) == pytest.approx(row["Free(us)"], abs=0.01)
        # the db's STEP_TIME window is the host step: Free inside the device tasks' span is
        # the profiler's Free (25238.587 / 25228.138 us in STEP_TRACE / step_trace_time)
        assert row["Free(us)"] - row["Edge Idle(us)"] == pytest.approx(
            row["Free Reported(us)"], rel=0.01)
        assert row["Host Launch(us)"] > 0 and row["Synchronisation(us)"] > 0
