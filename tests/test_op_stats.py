"""Op statistics from kernels (spec §A.3, §7.4) against the profiler's own op_statistic.csv.

Expected values come from the profiler's op_statistic.csv / kernel_details.csv text (csv and
decimal modules) or from hand calculations written out here.
"""

from __future__ import annotations

import csv
from collections import defaultdict
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pytest

from ascendprof.analyze import op_stats
from ascendprof.readers.ascend_output import read_kernel_details

OUT = "ASCEND_PROFILER_OUTPUT"


def _rows(path: Path) -> list[dict]:
    with open(path, newline="", encoding="utf-8-sig") as f:
        return list(csv.DictReader(f))


def _profiler_op_statistic(out: Path) -> dict:
    return {(r["OP Type"], r["Core Type"]): r for r in _rows(out / "op_statistic.csv")}


def _assert_reproduces(out: Path, rank: int, got=None):
    """``rank``'s rows of ``got`` (default: the op statistics of that rank alone) equal its
    op_statistic.csv: every column, Ratio(%) included (the rank's own total as 100 %)."""
    kernels = read_kernel_details(out / "kernel_details.csv", rank)
    if got is None:
        got = op_stats.combine([op_stats.rank_partial(kernels)])
    mine = got[got["Rank"].astype(str) == str(rank)]
    expected = _profiler_op_statistic(out)
    assert set(zip(mine["OP Type"], mine["Accelerator Core"])) == set(expected)
    for _, r in mine.iterrows():
        e = expected[(r["OP Type"], r["Accelerator Core"])]
        assert r["Count"] == int(e["Count"])
        for col, ecol in [("Total Time(us)", "Total Time(us)"), ("Min Time(us)", "Min Time(us)"),
                          ("Max Time(us)", "Max Time(us)"), ("Avg Time(us)", "Avg Time(us)")]:
            assert abs(r[col] - float(e[ecol])) <= 0.01, (r["OP Type"], col)
        assert abs(r["Ratio(%)"] - float(e["Ratio(%)"])) <= 0.01, r["OP Type"]
    # same order as the profiler (Total desc) wherever totals are not within rounding of each other
    totals = list(mine["Total Time(us)"])
    assert all(a >= b - 0.01 for a, b in zip(totals, totals[1:]))
    return kernels, mine


def test_reproduces_qwen3_rank0_op_statistic(qwen3):
    out = qwen3 / "rank_0_ascend_pt" / OUT
    kernels, mine = _assert_reproduces(out, 0)
    # The profiler leaves the 15 COMMUNICATION rows of kernel_details out (spec §A.3):
    # 2463 kernels - 15 = 2448 = the sum of its op_statistic Count column.
    assert sum(int(r["Count"]) for r in _rows(out / "op_statistic.csv")) == 2463 - 15
    assert mine["Count"].sum() == 2448


def test_reproduces_torch_npu_level1_rank0_op_statistic(shared_data):
    out = shared_data / "torch_npu-2rank-levels/text/level1/rank0_ascend_pt" / OUT
    _assert_reproduces(out, 0)
    # 191 kernels, 4 of them HCCL comm ops (not counted by the profiler)
    assert sum(int(r["Count"]) for r in _rows(out / "op_statistic.csv")) == 191 - 4


def test_level0_has_no_op_types(shared_data):
    # At Level0 kernel_details has Type 'N/A' for every row and CANN writes no op_statistic
    # (spec §1); the per-kernel aggregate still covers the 187 non-communication kernels.
    out = shared_data / "torch_npu-2rank-levels/text/level0/rank0_ascend_pt" / OUT
    assert not (out / "op_statistic.csv").exists()
    k = read_kernel_details(out / "kernel_details.csv", 0)
    assert op_stats.rank_partial(k).num_rows == 0
    assert list(op_stats.combine([op_stats.rank_partial(k)]).columns) == op_stats.OP_STATISTICS_COLUMNS
    kp = op_stats.kernel_partial(k)
    assert sum(kp["count"].to_pylist()) == 187


def test_each_ranks_rows_of_a_cluster_match_its_own_op_statistic(qwen3):
    """With several ranks combined, each rank's rows still reproduce that rank's op_statistic.csv
    (Ratio(%) relative to the rank's own total, not the cluster's)."""
    outs = {r: qwen3 / f"rank_{r}_ascend_pt" / OUT for r in (0, 2)}
    got = op_stats.combine([op_stats.rank_partial(read_kernel_details(o / "kernel_details.csv", r))
                            for r, o in outs.items()])
    for r, o in outs.items():
        _assert_reproduces(o, r, got)
    # the two ranks' totals differ (stage 1 computes more), so a cluster-wide denominator
    # would show here: MatMulV3 on AI_CORE, from the two files
    ratio = {r: float(_profiler_op_statistic(o)[("MatMulV3", "AI_CORE")]["Ratio(%)"])
             for r, o in outs.items()}
    assert abs(ratio[0] - ratio[2]) > 1


def test_each_torch_npu_rank_of_a_cluster_matches_its_op_statistic(shared_data):
    base = shared_data / "torch_npu-2rank-levels/text/level1"
    outs = {r: base / f"rank{r}_ascend_pt" / OUT for r in (0, 1)}
    got = op_stats.combine([op_stats.rank_partial(read_kernel_details(o / "kernel_details.csv", r))
                            for r, o in outs.items()])
    for r, o in outs.items():
        _assert_reproduces(o, r, got)


def test_cluster_rows_sum_the_ranks(qwen3):
    outs = {r: qwen3 / f"rank_{r}_ascend_pt" / OUT for r in (0, 2)}
    partials = [op_stats.rank_partial(read_kernel_details(o / "kernel_details.csv", r))
                for r, o in outs.items()]
    got = op_stats.combine(partials)
    assert list(got.columns) == op_stats.OP_STATISTICS_COLUMNS
    assert list(dict.fromkeys(got["Rank"].astype(str))) == ["0", "2", "cluster"]
    cluster = got[got["Rank"].astype(str) == "cluster"]
    # expected: the two profiler op_statistic.csv files added up
    count, total = defaultdict(int), defaultdict(Decimal)
    for o in outs.values():
        for key, r in _profiler_op_statistic(o).items():
            count[key] += int(r["Count"])
            total[key] += Decimal(r["Total Time(us)"])
    assert set(zip(cluster["OP Type"], cluster["Accelerator Core"])) == set(count)
    grand = sum(total.values())
    for _, r in cluster.iterrows():
        key = (r["OP Type"], r["Accelerator Core"])
        assert r["Count"] == count[key]
        assert abs(Decimal(str(r["Total Time(us)"])) - total[key]) <= Decimal("0.02")
        assert abs(Decimal(str(r["Ratio(%)"])) - total[key] / grand * 100) <= Decimal("0.01")
    assert abs(cluster["Ratio(%)"].sum() - 100) < 0.05
    assert list(cluster["Total Time(us)"]) == sorted(cluster["Total Time(us)"], reverse=True)


def test_partials_of_one_rank_merge(qwen3):
    # combine works from partials only; two partials of one rank give the same as one
    k = read_kernel_details(qwen3 / "rank_0_ascend_pt" / OUT / "kernel_details.csv", 0)
    whole = op_stats.combine([op_stats.rank_partial(k)])
    halves = op_stats.combine([op_stats.rank_partial(k.slice(0, 1000)),
                               op_stats.rank_partial(k.slice(1000))])
    assert whole.equals(halves)


def test_top_kernels(qwen3):
    outs = {r: qwen3 / f"rank_{r}_ascend_pt" / OUT for r in (0, 2)}
    parts = [op_stats.kernel_partial(read_kernel_details(o / "kernel_details.csv", r))
             for r, o in outs.items()]
    top = op_stats.top_kernels(parts, n=5)
    assert list(top.columns) == op_stats.TOP_KERNELS_COLUMNS and len(top) == 5
    # expected: kernel_details text grouped by (Name, Input Shapes, Type, Accelerator Core)
    agg = defaultdict(lambda: [0, Decimal(0), Decimal(0), set()])
    for r, o in outs.items():
        for row in _rows(o / "kernel_details.csv"):
            if row["Accelerator Core"] in ("COMMUNICATION", "HCCL"):
                continue
            key = (row["Name"], row["Input Shapes"].strip('"'), row["Type"], row["Accelerator Core"])
            a, d = agg[key], Decimal(row["Duration(us)"])
            a[0] += 1
            a[1] += d
            a[2] = max(a[2], d)
            a[3].add(r)
    best = sorted(agg.items(), key=lambda kv: -kv[1][1])[:5]
    for (_, row), (key, (cnt, tot, mx, ranks)) in zip(top.iterrows(), best):
        assert (row["Name"], row["Input Shapes"], row["OP Type"], row["Accelerator Core"]) == key
        assert row["Count"] == cnt and Decimal(str(row["Total Time(us)"])) == tot
        assert Decimal(str(row["Max Time(us)"])) == mx
        assert row["Ranks"] == ",".join(str(x) for x in sorted(ranks))
    # FlashAttentionScoreGrad: 28 calls on each of ranks 0 and 2
    assert top.iloc[0]["OP Type"] == "FlashAttentionScoreGrad" and top.iloc[0]["Count"] == 56
    assert top.iloc[0]["Ranks"] == "0,2"


@pytest.mark.parametrize("ranks,text", [([3, 0, 1, 2, 8], "0-3,8"), ([5], "5"), ([], ""),
                                        ([1, 1, 3, 4, 6, 7, 8, 10], "1,3-4,6-8,10")])
def test_compact_ranks(ranks, text):
    assert op_stats.compact_ranks(ranks) == text


def test_empty_inputs():
    empty_partial = op_stats.kernel_partial(_kernels([(0, "Add", "HCCL", 5, "h")]))
    assert empty_partial.num_rows == 0
    for parts in ([], [None, empty_partial]):
        top = op_stats.top_kernels(parts)
        assert top.empty and list(top.columns) == op_stats.TOP_KERNELS_COLUMNS
    assert op_stats.combine([None]).empty
    empty = pa.table({"rank": pa.array([], pa.int32())})
    assert op_stats.combine([empty]).empty


def test_top_kernels_ties_missing_keys_and_ranks_by_hand():
    # kernel "b" (ranks 0 and 1: 5 + 5 = 10 ns) ties with kernel "a" (rank 2: 10 ns): names
    # break the tie; a missing op type is written 'N/A' and forms its own kernel
    def part(rank, rows):
        return pa.table({"rank": pa.array([rank] * len(rows), pa.int32()),
                         "name": [r[0] for r in rows], "input_shapes": ["1,2"] * len(rows),
                         "op_type": [r[1] for r in rows], "accelerator_core": ["AI_CORE"] * len(rows),
                         "count": [r[2] for r in rows], "total_ns": [r[3] for r in rows],
                         "min_ns": [r[3] for r in rows], "max_ns": [r[3] for r in rows]})
    top = op_stats.top_kernels([part(0, [("b", "Add", 1, 5000), ("c", None, 2, 3000)]),
                                part(1, [("b", "Add", 1, 5000)]),
                                part(2, [("a", "Add", 1, 10000), ("c", "Mul", 1, 1000)])])
    assert top[["Name", "OP Type", "Count", "Ranks"]].values.tolist() == [
        ["a", "Add", 1, "2"], ["b", "Add", 2, "0-1"], ["c", "N/A", 2, "0"], ["c", "Mul", 1, "2"]]
    assert top["Total Time(us)"].tolist() == [10.0, 10.0, 3.0, 1.0]
    assert top["Avg Time(us)"].tolist() == [10.0, 5.0, 1.5, 1.0]
    assert top["Max Time(us)"].tolist() == [10.0, 5.0, 3.0, 1.0]


def _kernels(rows: list[tuple]) -> pa.Table:
    """KERNELS rows (rank, op_type, accelerator_core, dur_ns, name)."""
    from ascendprof.model import schemas as S

    cols = ("rank", "op_type", "accelerator_core", "dur_ns", "name")
    return S.from_lists(S.KERNELS, {c: [r[i] for r in rows] for i, c in enumerate(cols)})


def test_op_statistics_rules_by_hand():
    """Which rows count (spec §A.3: not communication, not WRITE_BACK / INVALID, a real op
    type), the 3-decimal rounding of the profiler's op_statistic.csv, ratios of each rank's own
    total, and the order: rank, then Total desc, then OP Type and Accelerator Core ascending."""
    k = _kernels([
        (0, "Add", "AI_CORE", 1000, "a"), (0, "Add", "AI_CORE", 1000, "a"),
        (0, "Add", "AI_CORE", 1001, "a"),            # Add: 3 calls, 3001 ns
        (0, "Mul", "AI_CORE", 3001, "m"),            # ties with Add: OP Type decides
        (0, "Mul", "AI_VECTOR_CORE", 3001, "m"),     # ... then the core
        (0, "Cast", None, 998, "c"),                 # no core: still an op
        (0, "N/A", "AI_CORE", 50, "x"),              # no op type (Level0 text): left out
        (0, None, "AI_CORE", 50, "x"),
        (0, "Wb", "WRITE_BACK", 50, "w"), (0, "Inv", "INVALID", 50, "i"),
        (0, "hcom_allReduce_", "COMMUNICATION", 50, "h"), (0, "x", "HCCL", 50, "h"),
        (1, "Add", "AI_CORE", 5000, "a"),            # rank 1: one op = 100 %; larger than
                                                     # rank 0's, still listed after rank 0
        (2, "Add", "AI_CORE", 0, "a"),               # rank 2: total 0 ns -> ratio 0, not NaN
        (3, "Mul", "AI_CORE", 1, "m"),               # rank 3: 1 ns in all, 100 %
    ])
    got = op_stats.combine([op_stats.rank_partial(k)])
    ranks = got[got["Rank"] != "cluster"]
    rows = ranks[["Rank", "OP Type", "Accelerator Core", "Count", "Total Time(us)",
                  "Min Time(us)", "Avg Time(us)", "Max Time(us)", "Ratio(%)"]]
    rows = rows.astype(object).where(rows.notna(), None).values.tolist()
    total0 = 3001 * 3 + 998  # ns of rank 0's counted ops
    assert rows == [
        [0, "Add", "AI_CORE", 3, 3.001, 1.0, 1.0, 1.001, round(3001 / total0 * 100, 3)],
        [0, "Mul", "AI_CORE", 1, 3.001, 3.001, 3.001, 3.001, round(3001 / total0 * 100, 3)],
        [0, "Mul", "AI_VECTOR_CORE", 1, 3.001, 3.001, 3.001, 3.001,
         round(3001 / total0 * 100, 3)],
        [0, "Cast", None, 1, 0.998, 0.998, 0.998, 0.998, round(998 / total0 * 100, 3)],
        [1, "Add", "AI_CORE", 1, 5.0, 5.0, 5.0, 5.0, 100.0],
        [2, "Add", "AI_CORE", 1, 0.0, 0.0, 0.0, 0.0, 0.0],
        [3, "Mul", "AI_CORE", 1, 0.001, 0.001, 0.001, 0.001, 100.0]]
    assert total0 == 10001 and round(3001 / total0 * 100, 3) == 30.007  # 3 decimals
    assert ranks["Count"].dtype.kind == "i"
    # Avg of Add on rank 0: 3001 ns / 3 = 1000.333 ns -> 1.0 us at 3 decimals (not 1.0003)
    cluster = got[got["Rank"] == "cluster"].set_index(["OP Type", "Accelerator Core"])
    assert cluster.loc[("Add", "AI_CORE"), "Count"] == 5
    assert cluster.loc[("Add", "AI_CORE"), "Avg Time(us)"] == round(8001 / 5 / 1000, 3)
    assert cluster.loc[("Add", "AI_CORE"), "Ratio(%)"] == round(8001 / (total0 + 5001) * 100, 3)


def test_top_kernels_default_count_and_rounding():
    # 25 kernels k00..k24 of 3 calls each, k<i> taking 3 * (1000 + i) ns: the default is the
    # top 20 (k24 .. k05); averages keep 3 decimals: (3*1000+3*i+1) / 3 ns
    rows = [(0, "Add", "AI_CORE", 1000 + i + (1 if j == 0 else 0), f"k{i:02d}")
            for i in range(25) for j in range(3)]
    top = op_stats.top_kernels([op_stats.kernel_partial(_kernels(rows))])
    assert top["Name"].tolist() == [f"k{i:02d}" for i in range(24, 4, -1)]
    assert top["Avg Time(us)"].iloc[0] == round((3 * 1024 + 1) / 3 / 1000, 3) == 1.024
    assert top["Total Time(us)"].iloc[0] == 3.073
    assert len(op_stats.top_kernels([op_stats.kernel_partial(_kernels(rows))], n=3)) == 3
