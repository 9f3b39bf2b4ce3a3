"""Memory peaks, top operators, modules and memory verdicts (analyze.memory).

Expected values come from the profiler's files read here directly (pandas on the CSVs, sqlite3
on the db exports) — never from the code under test."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pytest

from ascendprof.scan import load_sources
from ascendprof.analyze import memory
from ascendprof.analyze.verdicts import make_verdict
from ascendprof.engine import pipeline
from ascendprof.model import schemas as S
from conftest import QWEN3, analysis_of

OUT = "ASCEND_PROFILER_OUTPUT"
MB = 1 << 20


def _text_us(s: str) -> str:
    return str(s).strip()


@pytest.fixture(scope="module")
def qwen3_ca():
    return analysis_of(QWEN3)


def _record(rank: int) -> pd.DataFrame:
    d = pd.read_csv(QWEN3 / f"rank_{rank}_ascend_pt" / OUT / "memory_record.csv", dtype=str)
    for c in ("Total Allocated(MB)", "Total Reserved(MB)", "Total Active(MB)"):
        d[c] = pd.to_numeric(d[c])
    d["Timestamp(us)"] = d["Timestamp(us)"].str.strip()
    return d


@pytest.mark.parametrize("rank", [0, 2])
def test_peaks_on_qwen3(qwen3_ca, rank):
    summary = qwen3_ca.csv_files["memory_summary.csv"]
    assert list(summary.columns) == memory.SUMMARY_COLUMNS
    rec = _record(rank)
    ops = pd.read_csv(QWEN3 / f"rank_{rank}_ascend_pt" / OUT / "operator_memory.csv", dtype=str)
    ops["Allocation Time(us)"] = ops["Allocation Time(us)"].str.strip()
    for comp in ("PTA+GE", "PTA", "APP"):
        c = rec[rec["Component"] == comp]
        row = summary[(summary["Rank"] == rank) & (summary["Component"] == comp)].iloc[0]
        for col, out_v, out_t in (("Total Allocated(MB)", "Peak Allocated(MB)",
                                   "Peak Allocated Time(us)"),
                                  ("Total Reserved(MB)", "Peak Reserved(MB)",
                                   "Peak Reserved Time(us)"),
                                  ("Total Active(MB)", "Peak Active(MB)", "Peak Active Time(us)")):
            if c[col].isna().all():
                assert pd.isna(row[out_v])
                continue
            peak = c[col].max()
            assert row[out_v] == peak
            # first time the peak is reached, the timestamp text as the profiler wrote it
            assert row[out_t] == c.loc[c[col] == peak, "Timestamp(us)"].iloc[0]
        if comp != "APP":
            t = row["Peak Allocated Time(us)"]
            want = ops.loc[ops["Allocation Time(us)"] == t, "Name"]
            assert len(want) == 1 and row["Peak Allocated Operator"] == want.iloc[0]
            assert row["Peak Allocated Step"] == 13  # the one collected step
    assert set(summary["Rank"]) == {0, 2}  # ranks 1, 3 have no memory files
    assert dict(zip(summary["Rank"], summary["Stage"])) == {0: 0, 2: 1}
    # each rank is alone with memory data in its stage: no peers to compare with
    assert summary["Peers Median Allocated(MB)"].isna().all()


def test_top_operators_on_qwen3(qwen3_ca):
    top = qwen3_ca.csv_files["memory_top_ops.csv"]
    assert list(top.columns) == memory.TOP_OPS_COLUMNS
    d = pd.read_csv(QWEN3 / "rank_0_ascend_pt" / OUT / "operator_memory.csv")
    d = d[d["Size(KB)"] > 0]
    total = (d.groupby("Name")["Size(KB)"].sum() / 1024).sort_values(ascending=False)
    got = top[top["Rank"] == 0].set_index("Name")
    # the top 20 by total allocation are all listed, with pandas' totals; ranked by them
    # (operators with equal totals may come in either order)
    for name, mb in total.head(20).items():
        assert got.loc[name, "Total Allocated(MB)"] == pytest.approx(mb)
        assert got.loc[name, "Allocations"] == (d["Name"] == name).sum()
        above, ties = (total > mb + 1e-9).sum(), (abs(total - mb) <= 1e-9).sum()
        assert above + 1 <= got.loc[name, "Rank By Size"] <= above + ties
    by_rank = got.sort_values("Rank By Size")["Total Allocated(MB)"].tolist()
    assert by_rank == sorted(by_rank, reverse=True)
    # size x lifetime of released blocks: sum of Size(MB) x Duration(ms)
    rel = d[d["Duration(us)"].notna()]
    mm = rel[rel["Name"] == "aten::matmul"]
    assert (mm["Duration(us)"].notna()).all() and len(mm) == got.loc["aten::matmul", "Allocations"]
    want = (mm["Size(KB)"] / 1024 * pd.to_numeric(mm["Duration(us)"].astype(str).str.strip())
            / 1000).sum()
    assert got.loc["aten::matmul", "Size x Lifetime(MB*ms)"] == pytest.approx(want)


def test_modules_on_qwen3(qwen3_ca):
    mods = qwen3_ca.csv_files["memory_modules.csv"]
    d = pd.read_csv(QWEN3 / "rank_2_ascend_pt" / OUT / "npu_module_mem.csv")
    peak = d.groupby("Component")["Total Reserved(MB)"].max()
    peak = peak[peak > 0]
    got = mods[mods["Rank"] == 2].set_index("Module")["Peak Reserved(MB)"]
    assert got.to_dict() == pytest.approx(peak.to_dict())


# --------------------------------------------------------------------- text vs db, 2-rank levels

def _db_peaks(db: Path) -> dict:
    """Per component: max totalAllocated / totalReserved / totalActive in MB, by sqlite3."""
    c = sqlite3.connect(db)
    rows = c.execute("""SELECT s.value, MAX(m.totalAllocated), MAX(m.totalReserved),
                               MAX(m.totalActive)
                        FROM MEMORY_RECORD m JOIN STRING_IDS s ON s.id = m.component
                        GROUP BY s.value""").fetchall()
    c.close()
    return {comp: tuple(v / MB for v in vals) for comp, *vals in rows}


def _text_peaks(csv: Path) -> dict:
    d = pd.read_csv(csv)
    g = d.groupby("Component")[["Total Allocated(MB)", "Total Reserved(MB)", "Total Active(MB)"]]
    return {k: tuple(v) for k, v in g.max().iterrows()}


@pytest.mark.parametrize("level", [0, 1, 2])
def test_text_and_db_give_the_same_peaks(shared_data, level):
    """The text and db exports of one level are two collections of the same job (their
    timestamps are ~1600 s apart, so not the very same run). The framework allocator's peaks
    (PTA) and the graph engine's (GE) are deterministic and must agree to the byte between
    text and db, and ascendprof must report each side's own peaks (checked against pandas /
    sqlite3). PTA+GE interleaves two allocators, so its peak depends on the run's timing: equal
    where the two runs interleaved alike (levels 0 and 2), not asserted otherwise."""
    base = shared_data / "torch_npu-2rank-levels"
    got = {}
    for kind in ("text", "db"):
        ca = analysis_of(base / kind / f"level{level}")
        got[kind] = ca.csv_files["memory_summary.csv"]
    for rank in (0, 1):
        text_src = _text_peaks(base / "text" / f"level{level}" / f"rank{rank}_ascend_pt" / OUT
                               / "memory_record.csv")
        db_src = _db_peaks(base / "db" / f"level{level}" / f"rank{rank}_ascend_pt" / OUT
                           / f"ascend_pytorch_profiler_{rank}.db")
        for kind, src in (("text", text_src), ("db", db_src)):
            s = got[kind]
            for comp in ("PTA", "GE", "PTA+GE"):
                row = s[(s["Rank"] == rank) & (s["Component"] == comp)].iloc[0]
                a, r, act = src[comp]
                assert row["Peak Allocated(MB)"] == pytest.approx(a)
                assert row["Peak Reserved(MB)"] == pytest.approx(r)
                if pd.notna(act) and act > 0:
                    assert row["Peak Active(MB)"] == pytest.approx(act)
        # the two ranks do the same work (data parallel): each compared with the other
        s = got["text"]
        other = s[(s["Rank"] == 1 - rank) & (s["Component"] == "PTA")]["Peak Allocated(MB)"].iloc[0]
        mine = s[(s["Rank"] == rank) & (s["Component"] == "PTA")].iloc[0]
        assert mine["Peers Median Allocated(MB)"] == other
        assert mine["Allocated vs Peers(%)"] == round(
            (mine["Peak Allocated(MB)"] - other) / other * 100, 2)
        for comp in ("PTA", "GE") + (("PTA+GE",) if level != 1 else ()):
            t = got["text"][(got["text"]["Rank"] == rank) & (got["text"]["Component"] == comp)]
            d = got["db"][(got["db"]["Rank"] == rank) & (got["db"]["Component"] == comp)]
            assert t["Peak Allocated(MB)"].iloc[0] == d["Peak Allocated(MB)"].iloc[0], comp
            assert t["Peak Reserved(MB)"].iloc[0] == d["Peak Reserved(MB)"].iloc[0], comp
        # APP (whole process, CANN npu_mem): text memory_record.csv APP rows vs db NPU_MEM
        app_db = sqlite3.connect(base / "db" / f"level{level}" / f"rank{rank}_ascend_pt" / OUT
                                 / f"ascend_pytorch_profiler_{rank}.db").execute(
            "SELECT type, MAX(ddr + hbm) FROM NPU_MEM GROUP BY type").fetchall()
        want = min(v for _, v in app_db) / MB  # the application's series is the smaller one
        row = got["db"][(got["db"]["Rank"] == rank) & (got["db"]["Component"] == "APP")].iloc[0]
        assert row["Peak Reserved(MB)"] == pytest.approx(want)
        row = got["text"][(got["text"]["Rank"] == rank) & (got["text"]["Component"] == "APP")]
        assert row["Peak Reserved(MB)"].iloc[0] == pytest.approx(text_src["APP"][1])


def test_db_modules_match_text_layout(shared_data):
    """db NPU_MODULE_MEM -> memory_modules.csv with module names from ENUM_MODULE and MB."""
    base = shared_data / "torch_npu-2rank-levels" / "db" / "level0"
    ca = analysis_of(base)
    mods = ca.csv_files["memory_modules.csv"]
    c = sqlite3.connect(base / "rank0_ascend_pt" / OUT / "ascend_pytorch_profiler_0.db")
    want = dict(c.execute("""SELECT e.name, MAX(m.totalReserved) FROM NPU_MODULE_MEM m
                             JOIN ENUM_MODULE e ON e.id = m.moduleId GROUP BY e.name
                             HAVING MAX(m.totalReserved) > 0""").fetchall())
    got = mods[mods["Rank"] == 0].set_index("Module")["Peak Reserved(MB)"].to_dict()
    assert got == pytest.approx({k: v / MB for k, v in want.items()})


# ------------------------------------------------------------------------------- verdicts

def _mem_verdicts(ca):
    return [v for v in ca.verdicts if v["category"] == "memory"]


def test_no_memory_verdict_on_healthy_data(qwen3_ca, shared_data):
    assert _mem_verdicts(pipeline.conclude(pipeline.gather(*_args(QWEN3)))) == []
    for kind in ("text", "db"):
        ca = analysis_of(shared_data / "torch_npu-2rank-levels" / kind / "level1")
        assert _mem_verdicts(ca) == []


def _args(root):
    from ascendprof.model.problems import Problems

    probs = Problems()
    sources = load_sources(root, probs)
    return str(root), sources, pipeline.run_ranks(sources, workers=1), probs


def _summary(peaks: dict[int, float], stage=None, capacity=None) -> pd.DataFrame:
    rows = []
    for r, mb in peaks.items():
        rows.append({"Rank": r, "Stage": "" if stage is None else stage[r], "Component": "PTA+GE",
                     "Peak Allocated(MB)": mb, "Peak Reserved(MB)": mb + 100,
                     "Capacity(MB)": capacity})
    return pd.DataFrame(rows, columns=memory.SUMMARY_COLUMNS)


def test_rank_far_above_peers():
    """4 ranks of one stage at 10000 MB, one at 12000 MB: 2000 MB = 20% above the median
    10000 of its peers (>= 15% and >= 512 MB) -> warning on that rank only."""
    v = memory.verdicts(_summary({0: 10000, 1: 10000, 2: 12000, 3: 10000}), make_verdict)
    assert [(x["ranks"], x["severity"]) for x in v] == [([2], "warning")]
    assert v[0]["evidence"]["peer_median_mb"] == 10000
    assert v[0]["evidence"]["excess_pct"] == 20.0
    # 10% above: silent; 20% above but only 400 MB: silent
    assert memory.verdicts(_summary({0: 10000, 1: 10000, 2: 11000}), make_verdict) == []
    assert memory.verdicts(_summary({0: 2000, 1: 2000, 2: 2400}), make_verdict) == []
    # different stages do different work: compared only within a stage
    assert memory.verdicts(_summary({0: 10000, 1: 10000, 2: 14000, 3: 14000},
                                    stage={0: 0, 1: 0, 2: 1, 3: 1}), make_verdict) == []


def test_near_capacity():
    """Capacity 32768 MB (e.g. from MindSpore's memory_usage_summary): a reserved peak of
    30100 MB is 91.9% -> warning; 32000 MB (97.7%) -> critical; 20000 MB (61%) silent."""
    s = _summary({0: 30000, 1: 29900}, capacity=32768.0)  # reserved = allocated + 100
    v = memory.verdicts(s, make_verdict)
    assert [(x["ranks"], x["severity"]) for x in v] == [([0], "warning"), ([1], "warning")]
    assert v[0]["evidence"]["peak_pct"] == round(30100 / 32768 * 100, 2)
    v = memory.verdicts(_summary({0: 31900}, capacity=32768.0), make_verdict)
    assert v[0]["severity"] == "critical"
    assert memory.verdicts(_summary({0: 19900, 1: 19900}, capacity=32768.0), make_verdict) == []


def test_static_op_mem_top_ops():
    """static_op_mem.csv has no public sample: rows built from its columns (Device_id, Op Name,
    Model Name, Graph ID, Node Index Start, Node Index End, Size(KB)). Hand calculation: op A
    2048 KB over nodes 3..6 (4 nodes) = 2 MB x 4 = 8 MB*nodes; op B 1024 KB x 10 nodes = 10."""
    static = pa.table({"rank": pa.array([0, 0], pa.int32()), "name": ["A", "B"],
                       "node_start": pa.array([3, 0], pa.int64()),
                       "node_end": pa.array([6, 9], pa.int64()),
                       "size_kb": [2048.0, 1024.0]})
    t = memory.top_operators(None, S.conform(S.STATIC_OP_MEM, static)).to_pandas()
    got = t.set_index("name")
    assert got.loc["A", "size_nodes_mb"] == 8.0 and got.loc["B", "size_nodes_mb"] == 10.0
    assert got.loc["A", "total_mb"] == 2.0 and set(t["source"]) == {"static_op_mem"}


def test_unreleased_block_lives_to_end():
    """A block never released (no Release Time / Duration) counts until the last memory
    record: 1024 KB allocated at 1 ms, collection ends at 5 ms -> 1 MB x 4 ms = 4 MB*ms."""
    ops = S.from_lists(S.OPERATOR_MEMORY, {"rank": [0, 0], "name": ["x", "x"],
                                           "size_kb": [1024.0, 2048.0],
                                           "alloc_ns": [1_000_000, 2_000_000],
                                           "release_ns": [None, 3_000_000],
                                           "dur_ns": [None, 1_000_000]})
    t = memory.top_operators(ops, None, end_ns=5_000_000).to_pylist()[0]
    assert t["size_time_mb_ms"] == pytest.approx(1 * 4 + 2 * 1)
    assert t["unreleased_mb"] == 1.0
