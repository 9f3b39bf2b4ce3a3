"""Memory (analyze.memory): behaviour the seed-38 mutation sample showed untested — the operator
"before" a peak, the device capacity a rank's metadata carries (the share of it, the verdict's
severity, scope and advice), the peers verdict's evidence through ``ascendprof.open()`` on a job
cloned from real ranks, and memory_modules.csv's order when the input comes in several chunks.
Expected values are worked out by hand in the comments or from the profiler's own CSVs."""

from __future__ import annotations

import csv
import shutil

import pandas as pd
import pyarrow as pa
import pytest

from ascendprof.analyze import memory
from ascendprof.analyze.verdicts import make_verdict
from ascendprof.model import schemas as S
from conftest import analysis_of


# --------------------------------------------------------------------------- the peak's operator


def test_a_peak_between_allocations_names_the_last_one_before_it():
    """PTA allocates 5 MB at 100 ns, 9 MB at 250 ns (the peak), 7 MB at 300 ns; operators
    allocate at 100 ("a"), 200 ("b") and 300 ns ("c"). No operator allocates at 250 ns: the last
    before it, "b" (200 ns), is named and marked "(before)"; the 300 ns row is not the peak."""
    rec = S.from_lists(S.MEMORY_RECORD, {"rank": [0, 0, 0], "component": ["PTA"] * 3,
                                         "ts_ns": [100, 250, 300],
                                         "total_allocated_mb": [5.0, 9.0, 7.0]})
    ops = S.from_lists(S.OPERATOR_MEMORY, {"rank": [0, 0, 0], "name": ["a", "b", "c"],
                                           "size_kb": [1024.0, 1024.0, 1024.0],
                                           "alloc_ns": [100, 200, 300],
                                           "release_ns": [150, 400, 400],
                                           "dur_ns": [50, 200, 100]})
    parts = memory.rank_memory({S.MEMORY_RECORD: rec, S.OPERATOR_MEMORY: ops}, 0)
    (row,) = memory.build(parts[memory.MEMORY_PEAKS], None, None)["memory_summary.csv"] \
        .to_dict("records")
    assert row["Peak Allocated(MB)"] == 9.0
    assert row["Peak Allocated Operator"] == "b (before)"


# --------------------------------------------------------------------------- the device capacity


def _rank_with_capacity(reserved_mb: float, capacity_mb) -> pd.DataFrame:
    """memory_summary.csv of one rank (0) whose PTA+GE allocates 900 MB and reserves
    ``reserved_mb`` at most, its metadata carrying ``capacity_mb``, through rank_memory as the
    worker runs it (registry.rank_partials passes the rank's meta). Hand-built: today only the
    legacy MindSpore reader sets meta["memory_capacity_mb"] (memory_usage_summary_{rank}.json),
    and it gives no memory records, so no real input reaches this through ``analyse``."""
    rec = S.from_lists(S.MEMORY_RECORD, {"rank": [0, 0], "component": ["PTA+GE"] * 2,
                                         "ts_ns": [1_000, 2_000],
                                         "total_allocated_mb": [500.0, 900.0],
                                         "total_reserved_mb": [600.0, reserved_mb]})
    parts = memory.rank_memory({S.MEMORY_RECORD: rec}, 0, {"memory_capacity_mb": capacity_mb})
    return memory.build(parts[memory.MEMORY_PEAKS], None, None)["memory_summary.csv"]


def test_the_capacity_in_the_rank_metadata_gives_the_reserved_share():
    """Capacity 1000 MB in the metadata: reserved 950 MB is 95.0 % of it; without a capacity
    (none, or 0 = unknown) both columns stay empty."""
    (row,) = _rank_with_capacity(950.0, 1000.0).to_dict("records")
    assert row["Capacity(MB)"] == 1000.0
    assert row["Peak Reserved/Capacity(%)"] == 95.0
    for cap in (None, 0):
        (row,) = _rank_with_capacity(950.0, cap).to_dict("records")
        assert pd.isna(row["Capacity(MB)"]) and pd.isna(row["Peak Reserved/Capacity(%)"])


def test_near_capacity_verdict_from_the_rank_metadata():
    """Reserved 950 of 1000 MB = 95.0 % (>= 90, < 97): a warning on rank 0, scope "rank", with
    the advice where to look; 980 of 1000 MB = 98.0 % (>= 97): critical."""
    (v,) = memory.verdicts(_rank_with_capacity(950.0, 1000.0), make_verdict)
    assert (v["id"], v["category"], v["scope"], v["ranks"], v["severity"]) == \
        ("memory:capacity:0", "memory", "rank", [0], "warning")
    assert v["message"] == ("Rank 0 peaks at 950 MB of device memory, 95.0% of the 1000 MB "
                            "capacity: little headroom before out-of-memory.")
    assert v["next_step"] == ("Look at memory_top_ops.csv for the operators holding most memory "
                              "at the peak (activation recomputation, smaller micro-batches, or "
                              "offloading free it).")
    assert v["evidence"] == {"peak_mb": 950.0, "capacity_mb": 1000.0, "peak_pct": 95.0,
                             "component": "PTA+GE"}
    (v,) = memory.verdicts(_rank_with_capacity(980.0, 1000.0), make_verdict)
    assert v["severity"] == "critical" and v["evidence"]["peak_pct"] == 98.0
    # the same rank without a capacity: nothing to judge against
    assert memory.verdicts(_rank_with_capacity(980.0, None), make_verdict) == []


# --------------------------------------------------------------------------- peers, user's path


def _clone_with_extra_allocation(level0, dst, extra_mb: float):
    """The 2-rank data-parallel torch_npu job (level0 text), its memory_record.csv,
    step_trace_time.csv and metadata copied; rank 1's PTA+GE and PTA rows allocate and reserve
    ``extra_mb`` more (every other field, the timestamps' text included, kept as written)."""
    for r in (0, 1):
        src, out = level0 / f"rank{r}_ascend_pt", dst / f"rank{r}_ascend_pt"
        (out / "ASCEND_PROFILER_OUTPUT").mkdir(parents=True)
        for f in (f"profiler_info_{r}.json", "profiler_metadata.json",
                  "ASCEND_PROFILER_OUTPUT/step_trace_time.csv"):
            shutil.copy(src / f, out / f)
        with open(src / "ASCEND_PROFILER_OUTPUT" / "memory_record.csv", newline="") as f:
            rows = list(csv.reader(f))
        if r == 1:
            head = rows[0]
            cols = [head.index("Total Allocated(MB)"), head.index("Total Reserved(MB)")]
            for row in rows[1:]:
                if row[head.index("Component")] in ("PTA+GE", "PTA"):
                    for c in cols:
                        if row[c].strip():
                            row[c] = repr(float(row[c]) + extra_mb)
        with open(out / "ASCEND_PROFILER_OUTPUT" / "memory_record.csv", "w", newline="") as f:
            csv.writer(f).writerows(rows)


def test_rank_far_above_its_peer_through_open(shared_data, tmp_path):
    """Both ranks of the job peak at the same PTA+GE allocation (memory_record.csv's maximum,
    1188.1064453125 MB). Rank 1 allocating 700 MB more everywhere peaks at 1888.1064453125 MB:
    700 MB = 700 / 1188.1064453125 = 58.92 % over the median of its one peer (rank 0),
    >= 512 MB and >= 2 x 15 % -> critical; the evidence names the peak, the median, the excess
    and the peer."""
    level0 = shared_data / "torch_npu-2rank-levels" / "text" / "level0"
    peak = {}
    for r in (0, 1):
        rec = pd.read_csv(level0 / f"rank{r}_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
                          / "memory_record.csv")
        peak[r] = rec.loc[rec["Component"] == "PTA+GE", "Total Allocated(MB)"].max()
    assert peak == {0: 1188.1064453125, 1: 1188.1064453125}  # the profiler's numbers
    peak0 = peak[0]
    _clone_with_extra_allocation(level0, tmp_path, 700.0)
    ca = analysis_of(tmp_path, workers=1)
    (v,) = [v for v in ca.verdicts if v["category"] == "memory"]
    assert (v["id"], v["scope"], v["ranks"], v["severity"]) == \
        ("memory:peers:1", "rank", [1], "critical")
    assert v["evidence"] == {"peak_allocated_mb": round(peak0 + 700, 3),
                             "peer_median_mb": round(peak0, 3),
                             "excess_pct": round(700 / peak0 * 100, 2), "peers": [0],
                             "component": "PTA+GE"}
    assert v["evidence"]["excess_pct"] == 58.92
    summary = ca.csv_files["memory_summary.csv"]
    main = summary[summary["Component"] == "PTA+GE"].set_index("Rank")
    assert main.loc[1, "Peak Allocated(MB)"] == pytest.approx(peak0 + 700)
    assert main.loc[1, "Peers Median Allocated(MB)"] == pytest.approx(peak0)


# --------------------------------------------------------------------------- modules, chunked


def test_modules_of_equal_peak_keep_the_profiler_order_when_read_in_chunks():
    """npu_module_mem rows as a reader gives a large file: in 10 chunks of 100 rows, chunk i
    holding module "m{i}" only, every module peaking at 2 MB (mean (2 + 99 x 1) / 100 = 1.01).
    memory_modules.csv orders by peak, and ties keep the order the profiler first wrote the
    modules in — m0 .. m9 — on every run (built 20 times: the same file each time)."""
    n, k = 1000, 10
    rows = {"rank": [0] * n, "component": [f"m{i // 100}" for i in range(n)],
            "ts_ns": list(range(n)),
            "total_reserved_mb": [2.0 if i % 100 == 0 else 1.0 for i in range(n)]}
    t = S.from_lists(S.NPU_MODULE_MEM, rows)
    t = pa.concat_tables([t.slice(i, 100) for i in range(0, n, 100)])
    assert t["component"].num_chunks == k
    for _ in range(20):
        mods = memory.build(None, None, memory.modules(t))["memory_modules.csv"]
        assert list(mods["Module"]) == [f"m{i}" for i in range(k)]
        assert list(mods["Peak Reserved(MB)"]) == [2.0] * k
        assert list(mods["Mean Reserved(MB)"]) == [1.01] * k
        # each module's peak is its chunk's first row: ts 0, 100, ... ns = 0.000, 0.100 us ...
        assert list(mods["Peak Time(us)"]) == [f"0.{i * 100:03d}" for i in range(k)]
