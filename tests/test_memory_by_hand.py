"""Memory (analyze.memory) function by function: Qwen3 rank 0 read through ``read_source`` and
its partials and files made in this process, with expected values from the profiler's CSVs read
here with pandas, and small hand-built tables worked out in the comments. Each test calls the
module itself (no shared fixture computes through it), so mutation testing sees which test
reaches which function."""

from __future__ import annotations

import pandas as pd
import pyarrow as pa
import pytest

from ascendprof.analyze import memory
from ascendprof.analyze.verdicts import make_verdict
from ascendprof.model import schemas as S
from ascendprof.model.problems import Problems
from ascendprof.readers import read_source
from ascendprof.scan import scan
from conftest import QWEN3

OUT = QWEN3 / "rank_0_ascend_pt" / "ASCEND_PROFILER_OUTPUT"


@pytest.fixture(scope="module")
def rank0():
    """Qwen3 rank 0 as read_source gives it (reading only: nothing of analyze.memory runs)."""
    source = next(s for s in scan(QWEN3, Problems()) if s.rank == 0)
    return read_source(source)


def _record() -> pd.DataFrame:
    d = pd.read_csv(OUT / "memory_record.csv", dtype=str)
    for c in ("Total Allocated(MB)", "Total Reserved(MB)", "Total Active(MB)"):
        d[c] = pd.to_numeric(d[c])
    d["Timestamp(us)"] = d["Timestamp(us)"].str.strip()
    return d


def test_rank0_summary_through_read_source(rank0):
    """memory_summary.csv of rank 0 (stage 0) from its partials: per component the peak of each
    metric is memory_record.csv's maximum, its time the first timestamp text with it; the
    allocated peak's operator is operator_memory.csv's allocation at that very time, its step 13
    (the one collected); APP has no operator."""
    parts = memory.rank_memory(rank0.tables, 0, rank0.meta)
    summary = memory.build(parts.get(memory.MEMORY_PEAKS), None, None, {0: 0})["memory_summary.csv"]
    rec = _record()
    ops = pd.read_csv(OUT / "operator_memory.csv", dtype=str)
    ops["Allocation Time(us)"] = ops["Allocation Time(us)"].str.strip()
    # the listed order: PTA+GE, PTA, GE, WORKSPACE, APP (those present)
    have = set(rec["Component"])
    assert list(summary["Component"]) == [c for c in memory.COMPONENTS if c in have]
    assert set(summary["Rank"]) == {0} and set(summary["Stage"]) == {0}
    for comp in have:
        c = rec[rec["Component"] == comp]
        row = summary[summary["Component"] == comp].iloc[0]
        for col, out_v, out_t in (("Total Allocated(MB)", "Peak Allocated(MB)",
                                   "Peak Allocated Time(us)"),
                                  ("Total Reserved(MB)", "Peak Reserved(MB)",
                                   "Peak Reserved Time(us)"),
                                  ("Total Active(MB)", "Peak Active(MB)", "Peak Active Time(us)")):
            if c[col].isna().all():
                assert pd.isna(row[out_v]) and pd.isna(row[out_t]), (comp, col)
                continue
            peak = c[col].max()
            assert row[out_v] == peak, (comp, col)
            assert row[out_t] == c.loc[c[col] == peak, "Timestamp(us)"].iloc[0], (comp, col)
        if comp == "APP":
            assert pd.isna(row["Peak Allocated Operator"])
        else:
            want = ops.loc[ops["Allocation Time(us)"] == row["Peak Allocated Time(us)"], "Name"]
            assert len(want) == 1 and row["Peak Allocated Operator"] == want.iloc[0]
            assert row["Peak Allocated Step"] == 13
    # one rank alone: no peers
    assert summary["Peers Median Allocated(MB)"].isna().all()
    assert summary["Allocated vs Peers(%)"].isna().all()


def test_rank0_modules_through_read_source(rank0):
    """memory_modules.csv of rank 0: per npu_module_mem.csv component that ever reserves, the
    maximum of Total Reserved(MB), the first timestamp text with it and the mean; ordered by peak,
    largest first."""
    parts = memory.rank_memory(rank0.tables, 0, rank0.meta)
    mods = memory.build(None, None, parts[memory.MEMORY_MODULES])["memory_modules.csv"]
    d = pd.read_csv(OUT / "npu_module_mem.csv", dtype={"Timestamp(us)": str})
    d["Timestamp(us)"] = d["Timestamp(us)"].str.strip()
    g = d.groupby("Component")["Total Reserved(MB)"]
    peak, mean = g.max(), g.mean()
    peak = peak[peak > 0].sort_values(ascending=False, kind="stable")
    assert list(mods["Peak Reserved(MB)"]) == list(peak)
    assert set(mods["Module"]) == set(peak.index)
    got = mods.set_index("Module")
    for comp, mb in peak.items():
        first = d[(d["Component"] == comp) & (d["Total Reserved(MB)"] == mb)]["Timestamp(us)"]
        assert got.loc[comp, "Peak Time(us)"] == first.iloc[0], comp
        assert got.loc[comp, "Mean Reserved(MB)"] == pytest.approx(mean[comp], abs=1e-6), comp
    assert set(mods["Rank"]) == {0}


def test_rank0_top_operators_through_read_source(rank0):
    """memory_top_ops.csv of rank 0: the 20 operators of largest total allocation (pandas'
    group sums of operator_memory.csv's Size(KB) / 1024, zero-size blocks left out) are listed
    with their totals, counts and largest block, ranked by total; aten::matmul's size x lifetime
    is the sum of Size(MB) x Duration(ms) of its blocks (all released)."""
    parts = memory.rank_memory(rank0.tables, 0, rank0.meta)
    top = memory.build(None, parts[memory.MEMORY_OPS], None)["memory_top_ops.csv"]
    assert list(top.columns) == memory.TOP_OPS_COLUMNS
    d = pd.read_csv(OUT / "operator_memory.csv")
    d = d[d["Size(KB)"] > 0]
    total = (d.groupby("Name")["Size(KB)"].sum() / 1024).sort_values(ascending=False)
    largest = d.groupby("Name")["Size(KB)"].max() / 1024
    got = top.set_index("Name")
    assert set(got["Source"]) == {"operator_memory"}
    for name, mb in total.head(20).items():
        assert got.loc[name, "Total Allocated(MB)"] == pytest.approx(mb)
        assert got.loc[name, "Largest(MB)"] == pytest.approx(largest[name])
        assert got.loc[name, "Allocations"] == (d["Name"] == name).sum()
        above, ties = (total > mb + 1e-9).sum(), (abs(total - mb) <= 1e-9).sum()
        assert above + 1 <= got.loc[name, "Rank By Size"] <= above + ties
    # listed largest total first
    assert list(top["Total Allocated(MB)"]) == sorted(top["Total Allocated(MB)"], reverse=True)
    mm = d[d["Name"] == "aten::matmul"]
    assert mm["Duration(us)"].notna().all()
    want = (mm["Size(KB)"] / 1024 * pd.to_numeric(mm["Duration(us)"].astype(str).str.strip())
            / 1000).sum()
    assert got.loc["aten::matmul", "Size x Lifetime(MB*ms)"] == pytest.approx(want)
    assert got.loc["aten::matmul", "Unreleased(MB)"] == 0.0


# --------------------------------------------------------------------------- hand-built tables


def test_unreleased_blocks_live_until_the_last_memory_record():
    """rank_memory ends a never-released block at the rank's last memory record (5 ms), not at the
    last allocation / release of operator_memory (3 ms): block 1 MB allocated at 1 ms, never
    released -> 1 MB x 4 ms; block 2 MB from 2 to 3 ms -> 2 MB x 1 ms; 6 MB*ms in all, 1 MB
    unreleased."""
    rec = S.from_lists(S.MEMORY_RECORD, {"rank": [0, 0], "component": ["PTA", "PTA"],
                                         "ts_ns": [0, 5_000_000],
                                         "total_allocated_mb": [10.0, 12.0]})
    ops = S.from_lists(S.OPERATOR_MEMORY, {"rank": [0, 0], "name": ["x", "x"],
                                           "size_kb": [1024.0, 2048.0],
                                           "alloc_ns": [1_000_000, 2_000_000],
                                           "release_ns": [None, 3_000_000],
                                           "dur_ns": [None, 1_000_000]})
    got = memory.rank_memory({S.MEMORY_RECORD: rec, S.OPERATOR_MEMORY: ops}, 0)
    row, = got[memory.MEMORY_OPS].to_pylist()
    assert row["size_time_mb_ms"] == pytest.approx(1 * 4 + 2 * 1)
    assert row["unreleased_mb"] == 1.0


def test_a_block_with_a_duration_but_no_release_time_was_released():
    """A block whose release time is missing (e.g. lost to E-notation) but whose duration is
    known was released: 1 MB for its 2 ms duration = 2 MB*ms, nothing unreleased (the end of the
    collection, 10 ms, plays no part)."""
    ops = S.from_lists(S.OPERATOR_MEMORY, {"rank": [0], "name": ["y"], "size_kb": [1024.0],
                                           "alloc_ns": [1_000_000], "release_ns": [None],
                                           "dur_ns": [2_000_000]})
    row, = memory.top_operators(ops, None, end_ns=10_000_000).to_pylist()
    assert row["size_time_mb_ms"] == pytest.approx(2.0)
    assert row["unreleased_mb"] == 0.0


def test_a_record_without_a_component_still_counts():
    """A memory record with no component name is not dropped: its peak (9 MB at 2 ns) is
    reported under the empty name, beside PTA's (7 MB at 3 ns), first-seen order."""
    rec = S.from_lists(S.MEMORY_RECORD, {"rank": [0, 0, 0], "component": ["PTA", None, "PTA"],
                                         "ts_ns": [1, 2, 3],
                                         "total_allocated_mb": [5.0, 9.0, 7.0]})
    got = [(r["component"], r["metric"], r["peak_mb"], r["ts_ns"])
           for r in memory.peaks(rec).to_pylist()]
    assert got == [("PTA", "allocated", 7.0, 3), ("", "allocated", 9.0, 2)]


def _summary(peaks: dict[int, float], stage=None, capacity=None) -> pd.DataFrame:
    """memory_summary.csv rows of component PTA+GE: allocated as given, reserved 100 MB more."""
    rows = [{"Rank": r, "Stage": "" if stage is None else stage[r], "Component": "PTA+GE",
             "Peak Allocated(MB)": mb, "Peak Reserved(MB)": mb + 100, "Capacity(MB)": capacity}
            for r, mb in peaks.items()]
    return pd.DataFrame(rows, columns=memory.SUMMARY_COLUMNS)


def test_capacity_verdict_names_its_rule_and_threshold():
    """Reserved 30100 MB of 32768 MB = 91.9 % >= 90 %: one warning, its id says it is the
    capacity rule (a rank can also get the peers rule), with the threshold it was judged by."""
    v, = memory.verdicts(_summary({0: 30000}, capacity=32768.0), make_verdict)
    assert v["id"] == "memory:capacity:0"
    assert v["threshold"] == {"memory_near_capacity_pct": 90.0}
    v, = memory.verdicts(_summary({0: 30000}, capacity=32768.0), make_verdict,
                         {"memory_near_capacity_pct": 80.0})
    assert v["threshold"] == {"memory_near_capacity_pct": 80.0}


def test_peers_verdict_without_stages_speaks_of_the_job():
    """No pipeline stages: rank 2 at 12000 MB against the median 10000 MB of the other three
    ranks of the job: 2000 MB = 20 % more -> a warning whose id says it is the peers rule."""
    v, = memory.verdicts(_summary({0: 10000, 1: 10000, 2: 12000, 3: 10000}), make_verdict)
    assert v["id"] == "memory:peers:2"
    assert v["message"] == ("Rank 2 allocates 12000 MB at its peak, 2000 MB (20.0%) more than "
                            "the median 10000 MB of the other ranks of the job, which do the same "
                            "work.")
    # with stages, the stage is named
    v, = memory.verdicts(_summary({0: 10000, 1: 12000}, stage={0: 1, 1: 1}), make_verdict)
    assert "of the other ranks of pipeline stage 1," in v["message"]


def test_no_peer_comparison_against_ranks_that_allocate_nothing():
    """The other ranks' median is 0 MB (nothing allocated): no excess can be stated in % of it,
    so rank 2's 1000 MB raises no peers verdict (and no division by zero)."""
    assert memory.verdicts(_summary({0: 0.0, 1: 0.0, 2: 1000.0}), make_verdict) == []


# --------------------------------------------------------------------------- steps, capacity, APP


def test_a_peak_gets_the_step_whose_window_holds_it():
    """Steps 1 [0, 100] ns and 2 [101, 200] ns; the allocated peak 9 MB is at 150 ns: step 2
    (not the first window)."""
    rec = S.from_lists(S.MEMORY_RECORD, {"rank": [0, 0, 0], "component": ["PTA"] * 3,
                                         "ts_ns": [50, 150, 190],
                                         "total_allocated_mb": [5.0, 9.0, 7.0]})
    steps = S.from_lists(S.STEPS, {"rank": [0, 0], "step": [1, 2], "start_ns": [0, 101],
                                   "end_ns": [100, 200]})
    (row,) = memory.peaks(rec, None, steps).to_pylist()
    assert (row["peak_mb"], row["ts_ns"], row["step"]) == (9.0, 150, 2)


def test_summary_shows_the_capacity_and_the_reserved_share_of_it():
    """A rank's PTA+GE peaks with the recorded capacity 1000 MB: reserved 250 MB is 25.0 % of
    it."""
    p = pa.Table.from_pylist([
        {"rank": 0, "component": "PTA+GE", "metric": "allocated", "peak_mb": 200.0,
         "ts_ns": 1_500, "step": 1, "operator": "op", "capacity_mb": 1000.0},
        {"rank": 0, "component": "PTA+GE", "metric": "reserved", "peak_mb": 250.0,
         "ts_ns": 2_000, "step": 1, "operator": None, "capacity_mb": 1000.0}],
        schema=memory.PEAKS_SCHEMA)
    (row,) = memory.build(p, None, None)["memory_summary.csv"].to_dict("records")
    assert row["Capacity(MB)"] == 1000.0 and row["Peak Reserved/Capacity(%)"] == 25.0
    # 1500 ns = 1.500 us, as text
    assert row["Peak Allocated Time(us)"] == "1.500"


def test_the_app_reserved_peak_counts_when_it_is_the_larger():
    """PTA+GE reserves 1100 MB at most, the whole process (APP) 9500 MB of the 10000 MB
    capacity: 95 % >= 90 %, a warning on the APP figure."""
    s = _summary({0: 1000}, capacity=10000.0)
    s = pd.concat([s, pd.DataFrame([{"Rank": 0, "Stage": "", "Component": "APP",
                                     "Peak Reserved(MB)": 9500.0, "Capacity(MB)": 10000.0}],
                                   columns=memory.SUMMARY_COLUMNS)], ignore_index=True)
    (v,) = memory.verdicts(s, make_verdict)
    assert v["severity"] == "warning"
    assert v["evidence"] == {"peak_mb": 9500.0, "capacity_mb": 10000.0, "peak_pct": 95.0,
                             "component": "PTA+GE"}


def test_capacity_evidence_rounds_to_three_decimals():
    """Capacity 32768.12345 MB -> 32768.123 in the evidence; reserved 30100 MB of it is
    91.86 %."""
    (v,) = memory.verdicts(_summary({0: 30000}, capacity=32768.12345), make_verdict)
    assert v["evidence"]["capacity_mb"] == 32768.123
    assert v["evidence"]["peak_pct"] == 91.86


def test_peers_excess_of_twice_the_limit_is_critical():
    """Rank 2 at 15000 MB against the median 10000 MB of ranks 0, 1, 3: 5000 MB = 50 % more,
    at least 2 x 15 % -> critical; rank 1 at 11000 (10 % over the median 10000 of 0, 2, 3) is
    under 15 %: nothing."""
    (v,) = memory.verdicts(_summary({0: 10000, 1: 11000, 2: 15000, 3: 10000}), make_verdict)
    assert v["id"] == "memory:peers:2" and v["severity"] == "critical"
    assert v["evidence"]["excess_pct"] == 50.0
