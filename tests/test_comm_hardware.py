"""Communication against the hardware (analyze.comm_hardware): the bus-bandwidth factors by
hand, and collective_bandwidth.csv / link_bandwidth.csv on the shipped Qwen3 sample against its
communication.json read here with the json module."""

from __future__ import annotations

import json
from decimal import Decimal

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from ascendprof.analyze import comm_hardware as ch
from conftest import QWEN3, analysis_of

LINKS = ("HCCS", "PCIE", "SIO", "RDMA")


def test_bus_factors_by_hand():
    # NCCL tests PERFORMANCE.md: allreduce 2(n-1)/n, allgather / reducescatter / alltoall
    # (n-1)/n, broadcast / reduce / p2p 1
    assert ch.bus_factor("hcom_allReduce__1_1", 8) == 2 * 7 / 8 == 1.75
    assert ch.bus_factor("hcom_allGather__1_1", 4) == 3 / 4
    assert ch.bus_factor("hcom_reduceScatter__1_1", 2) == 1 / 2
    assert ch.bus_factor("hcom_allToAll__1_1", 16) == 15 / 16
    assert ch.bus_factor("hcom_broadcast__1_1", 8) == 1.0
    assert ch.bus_factor("hcom_batchSendRecv__1_1", 2) == 1.0
    for tr in ("HCCS", "PCIE", "RDMA", "SIO"):
        assert ch.LINK_REFERENCE_GBPS[tr][1]  # every transport says where its figure is from


def _ops(rank):
    path = QWEN3 / f"rank_{rank}_ascend_pt" / "ASCEND_PROFILER_OUTPUT" / "communication.json"
    doc = json.loads(path.read_text())
    return {name.split("@")[0]: op for step in doc.values() for kind in step.values()
            for name, op in kind.items() if not name.startswith("Total")}


def test_qwen3_instance_and_links():
    files = analysis_of(QWEN3).csv_files
    inst = files["collective_bandwidth.csv"]
    name = "hcom_allReduce__170_1_1"  # the dp gradient all-reduce of ranks 0 and 2
    a, b = _ops(0)[name], _ops(2)[name]
    start = [Decimal(str(o["Communication Time Info"]["Start Timestamp(us)"])) for o in (a, b)]
    end = [s + Decimal(str(o["Communication Time Info"]["Elapse Time(ms)"])) * 1000
           for s, o in zip(start, (a, b))]
    t_ms = float(max(end) - max(start)) / 1000
    sent = max(sum(o["Communication Bandwidth Info"][tr]["Transit Size(MB)"] for tr in LINKS)
               for o in (a, b))
    row = inst[inst["Op Name"] == name].iloc[0]
    assert row["Ranks"] == 2 and row["Bus Factor"] == 1.0
    assert row["Transfer(ms)"] == pytest.approx(t_ms, abs=0.002)
    assert row["Arrival Skew(ms)"] == pytest.approx(float(max(start) - min(start)) / 1000,
                                                    abs=0.002)
    assert row["Bus Bandwidth(GB/s)"] == pytest.approx(sent / t_ms, rel=1e-3)  # MB/ms = GB/s
    # rank 0's HCCS: all its ops' Transit Size over their Transit Time
    ops0 = [o["Communication Bandwidth Info"]["HCCS"] for o in _ops(0).values()]
    size = sum(o["Transit Size(MB)"] for o in ops0)
    ms = sum(o["Transit Time(ms)"] for o in ops0 if o["Transit Size(MB)"] > 0)
    links = files["link_bandwidth.csv"]
    hccs = links[(links["Rank"] == 0) & (links["Transport"] == "HCCS")].iloc[0]
    assert hccs["Bandwidth(GB/s)"] == pytest.approx(size / ms, rel=1e-3)
    assert hccs["Reference(GB/s)"] == 30.0
    assert hccs["Share of Reference(%)"] == pytest.approx(100 * size / ms / 30.0, rel=1e-3)


def _pandas_sent(ops: pa.Table, bw: pa.Table) -> list[float]:
    """The MB each op sent over the links, computed independently with pandas: the link rows'
    (HCCS, PCIE, SIO, RDMA, any case) sizes summed per (step, group, op name) with pandas'
    grouped sum (nulls as keys of their own; a row with no step matches no op), each op given
    its key's sum, 0.0 when it has none."""
    b = bw.select(["step", "group", "op_name", "transport", "size_mb"]).to_pandas()
    b = b[b["transport"].fillna("").str.upper().isin(LINKS) & b["step"].notna()]
    sums = b.groupby(["step", "group", "op_name"], dropna=False)["size_mb"].sum()
    def key(k):
        return tuple(None if v is None or v != v else v for v in k)
    by_key = {key(k): v for k, v in sums.items()}
    o = ops.filter(pc.is_valid(ops["start_ns"]))
    return [by_key.get(key(k), 0.0) for k in zip(o["step"].to_pylist(), o["group"].to_pylist(),
                                                  o["op_name"].to_pylist())]


def _chunked(t: pa.Table, rows: int, dictionary: bool) -> pa.Table:
    """``t`` in chunks of ``rows`` rows, its texts dictionary-encoded one dictionary per chunk
    (as a large rank's table is read back from its Parquet row groups) when ``dictionary``."""
    parts = [t.slice(i, rows) for i in range(0, t.num_rows, rows)]
    if dictionary:
        parts = [pa.table({c: pc.dictionary_encode(p[c]) if pa.types.is_string(p[c].type)
                           else p[c] for c in p.column_names}) for p in parts]
    return pa.concat_tables(parts)


def _odd_rank():
    """A rank's COMM_OPS / COMM_BANDWIDTH with what real files rarely hold: null groups and
    op names (matching each other), null steps and sizes, NaN sizes, lower-case transports,
    link rows of ops not in COMM_OPS, ops without a start, repeated keys."""
    rng = np.random.default_rng(7)
    n_ops, n_bw = 300, 3000
    groups = np.array([None, "g0", "g1", ""], dtype=object)
    names = np.array([None, *(f"hcom_allReduce__{i}_1" for i in range(40))], dtype=object)
    ops = pa.table({
        "step": pa.array(rng.integers(1, 4, n_ops), pa.int32()),
        "group": pa.array(groups[rng.integers(0, 4, n_ops)].tolist(), pa.string()),
        "op_name": pa.array(names[rng.integers(0, 41, n_ops)].tolist(), pa.string()),
        "start_ns": pa.array([None if i % 37 == 0 else 10 * i for i in range(n_ops)],
                             pa.int64()),
        "elapse_ns": pa.array(rng.integers(1, 10**6, n_ops), pa.int64())})
    transports = np.array(["HCCS", "hccs", "PCIE", "SIO", "RDMA", "SDMA", None], dtype=object)
    size = rng.random(n_bw) * 10.0 ** rng.integers(-3, 6, n_bw)
    size[rng.random(n_bw) < 0.03] = np.nan
    bw = pa.table({
        "step": pa.array([None if x == 0 else int(x) for x in rng.integers(0, 5, n_bw)],
                         pa.int32()),
        "group": pa.array(np.array([*groups, "gx"], dtype=object)[
            rng.integers(0, 5, n_bw)].tolist(), pa.string()),
        "op_name": pa.array(np.array([*names, "other"], dtype=object)[
            rng.integers(0, 42, n_bw)].tolist(), pa.string()),
        "transport": pa.array(transports[rng.integers(0, 7, n_bw)].tolist(), pa.string()),
        "size_mb": pa.array([None if i % 41 == 0 else float(v) for i, v in enumerate(size)],
                            pa.float64()),
        "transit_ns": pa.array(rng.integers(0, 10**7, n_bw), pa.int64()),
        "large_packet_ratio": pa.array(rng.random(n_bw), pa.float64())})
    return ops, bw


def _real_ranks():
    from ascendprof.readers import read_source
    from ascendprof.scan import load_sources
    from ascendprof.model import schemas as S

    for src in load_sources(QWEN3):
        d = read_source(src)
        yield d.tables[S.COMM_OPS], d.tables[S.COMM_BANDWIDTH]


@pytest.mark.parametrize("slice_rows", [1, 7, 1 << 18])
def test_link_sent_in_slices_and_chunks_is_pandas_grouped_sum(monkeypatch, slice_rows):
    # the link rows are keyed and summed a slice at a time against the ops' own keys: the
    # same sums, to the bit, as one grouped sum over every row, whatever the slices and the
    # chunks and dictionaries the tables come in
    from ascendprof.model import schemas as S

    monkeypatch.setattr(ch, "_SLICE_ROWS", slice_rows)
    cases = [*_real_ranks(), _odd_rank()]
    matched = 0
    for ops, bw in cases:
        want = _pandas_sent(ops, bw)
        matched += sum(v > 0 for v in want)
        for chunk_rows, dictionary in ((bw.num_rows or 1, False), (97, True), (500, False)):
            got = ch.rank_partial({S.COMM_OPS: _chunked(ops, 61, dictionary),
                                   S.COMM_BANDWIDTH: _chunked(bw, chunk_rows, dictionary)},
                                  0)[ch.OPS]["sent_mb"].to_pylist()
            assert got == want
    assert matched > 100  # the cases do send over the links


def _pandas_instances(ops: pa.Table) -> list[list]:
    """collective_bandwidth.csv's keys and times computed independently with pandas: the ops
    with an elapse time grouped by (step, group, op name), sorted, nulls last; per group the
    distinct ranks, the skew of the starts and latest end minus latest start (ms), the
    largest MB sent; groups of two or more ranks."""
    d = ops.to_pandas()
    d = d[d["elapse_ns"].notna()].copy()
    d["end"] = d["start_ns"] + d["elapse_ns"]
    rows = []
    for (step, grp, name), g in d.groupby(["step", "group", "op_name"], sort=True,
                                          dropna=False):
        if g["rank"].nunique() < 2:
            continue
        rows.append([None if pd.isna(step) else int(step), None if pd.isna(grp) else grp,
                     None if pd.isna(name) else name, g["rank"].nunique(),
                     round((g["start_ns"].max() - g["start_ns"].min()) / 1e6, 3),
                     round(int(g["end"].max() - g["start_ns"].max()) / 1e6, 3),
                     round(float(g["sent_mb"].max()), 4)])
    return rows


def _many_ranks():
    """comm_hw_ops of 6 ranks: repeated and missing instances, null steps, groups and op
    names, ops without an elapse time, NaN MB, times near 2^60 ns."""
    rng = np.random.default_rng(11)
    n = 4000
    names = np.array([None, "", "Ä", *(f"hcom_allReduce__{i}_1" for i in range(60))],
                     dtype=object)
    return pa.table({
        "rank": pa.array(rng.integers(0, 6, n), pa.int32()),
        "step": pa.array([None if x == 0 else int(x) for x in rng.integers(0, 4, n)],
                         pa.int32()),
        "group": pa.array(np.array([None, "g1", "g2", ""], dtype=object)[
            rng.integers(0, 4, n)].tolist(), pa.string()),
        "op_name": pa.array(names[rng.integers(0, len(names), n)].tolist(), pa.string()),
        "start_ns": pa.array((1 << 60) + rng.integers(0, 10**9, n), pa.int64()),
        "elapse_ns": pa.array([None if i % 29 == 0 else int(v) for i, v in
                               enumerate(rng.integers(0, 10**7, n))], pa.int64()),
        "sent_mb": pa.array(np.where(rng.random(n) < 0.05, np.nan, rng.random(n) * 100))})


def test_collective_instances_as_pandas_groups_them():
    # the instances are found on integer codes and numpy, not a frame of every op: the same
    # instances, in pandas' sorted order, with the same values, as its grouped aggregation
    real = analysis_of(QWEN3)
    ops = real.concat(ch.OPS)
    for t in (ops, _many_ranks(), pa.concat_tables([ops.slice(0, 7), ops.slice(7)])):
        got = ch.build(t, None)["collective_bandwidth.csv"]
        want = _pandas_instances(t)
        assert len(want) > 10
        cols = ["Step", "Group", "Op Name", "Ranks", "Arrival Skew(ms)", "Transfer(ms)",
                "Sent per Rank(MB)"]
        have = [[None if pd.isna(v) else v for v in r]
                for r in got[cols].astype(object).itertuples(index=False)]
        assert have == [[None if (isinstance(v, float) and v != v) else v for v in r]
                        for r in want]
    one = ch.build(ops.filter(pc.equal(ops["rank"], 0)), None)["collective_bandwidth.csv"]
    assert list(one.columns) == ch.INSTANCE_COLUMNS and one.empty  # no instance of one rank
    assert str(one["Step"].dtype) == "Int64"
