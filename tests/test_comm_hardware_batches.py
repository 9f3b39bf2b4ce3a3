"""collective_bandwidth.csv and link_bandwidth.csv from the ranks' comm_hw_ops read back a batch
of ranks at a time and combined as they come (comm_hardware.build_batches, what the analyse
flow runs) are the frames of every rank's ops concatenated at once (comm_hardware.build, a
second path: one table, grouped once).

Generated clusters with several groups per rank (TP, PP and DP) and the batches cut smaller
than the rank count, so that an instance's ranks are spread over several batches; and
synthetic ranks with null steps, groups and names, ops without an elapse or a start time
(the whole table's times become floats) and times near 2^60 ns."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from ascendprof.analyze import comm_hardware as ch
from ascendprof.analyze import registry
from ascendprof.model import results as R
from ascendprof.model.problems import Problems
from ascendprof.readers import read_source
from ascendprof.scan import load_sources


def _csv(frames: dict) -> dict[str, str]:
    return {k: v.to_csv(index=False) for k, v in frames.items()}


def _partials(root):
    """Each rank's comm_hardware partials as the worker makes them, ranks ascending."""
    got = {}
    for src in load_sources(root, Problems()):
        data = read_source(src)
        got[data.rank] = ch.rank_partial(data.tables, data.rank)
    return [got[r] for r in sorted(got)]


def _batched(parts: list[pa.Table], links, batch: int, monkeypatch) -> dict:
    monkeypatch.setattr(R, "CONCAT_BATCH", batch)
    return ch.build_batches(lambda: R.concat_batches(iter(parts), "permissive"), links)


@pytest.mark.parametrize("batch", [3, 7, 256])
def test_batched_build_equals_whole_on_a_generated_cluster(generated_cluster, monkeypatch,
                                                           batch):
    root = generated_cluster(32, "--comm-ops-per-rank", "12", "--kernels-per-rank", "20",
                             "--tp", "4", "--pp", "2")
    partials = _partials(root)
    ops = [p[ch.OPS] for p in partials if ch.OPS in p]
    links = pa.concat_tables([p[ch.LINKS] for p in partials if ch.LINKS in p])
    assert len(ops) == 32
    whole = ch.build(pa.concat_tables(ops), links)
    inst = whole["collective_bandwidth.csv"]
    # instances of the TP 4, PP 2 and DP 4 groups: several of them span the cut batches
    assert len(inst) >= 12 and set(inst["Ranks"]) >= {2, 4}
    assert (inst["Transfer(ms)"] > 0).any()
    got = _batched(ops, links, batch, monkeypatch)
    assert _csv(got) == _csv(whole)


def _synthetic_ranks(start_nulls: bool, elapse_nulls: bool) -> list[pa.Table]:
    """comm_hw_ops of 9 ranks sharing instances: null steps, groups and op names, NaN MB, times
    near 2^60 ns (beyond a float's integers), and optionally ops without a start time (in
    rank 5 only) or without an elapse time (in rank 2 only)."""
    rng = np.random.default_rng(7)
    names = np.array([None, "", "Ä", *(f"hcom_allReduce__{i}_1" for i in range(40))],
                     dtype=object)
    out = []
    for rank in range(9):
        n = 300
        start = [(1 << 60) + int(v) for v in rng.integers(0, 10**9, n)]
        if start_nulls and rank == 5:
            start[::17] = [None] * len(start[::17])
        elapse = [int(v) for v in rng.integers(0, 10**7, n)]
        if elapse_nulls and rank == 2:
            elapse[::13] = [None] * len(elapse[::13])
        out.append(pa.table({
            "rank": pa.array(np.full(n, rank), pa.int32()),
            "step": pa.array([None if x == 0 else int(x) for x in rng.integers(0, 4, n)],
                             pa.int32()),
            "group": pa.array(np.array([None, "g1", "g2", ""], dtype=object)[
                rng.integers(0, 4, n)].tolist(), pa.string()),
            "op_name": pa.array(names[rng.integers(0, len(names), n)].tolist(), pa.string()),
            "start_ns": pa.array(start, pa.int64()),
            "elapse_ns": pa.array(elapse, pa.int64()),
            "sent_mb": pa.array(np.where(rng.random(n) < 0.05, np.nan, rng.random(n) * 100))},
            schema=ch.OPS_SCHEMA))
    return out


@pytest.mark.parametrize("start_nulls,elapse_nulls", [(False, False), (True, False),
                                                      (False, True), (True, True)])
@pytest.mark.parametrize("batch", [1, 2, 4, 9])
def test_batched_build_equals_whole_with_nulls_and_float_times(monkeypatch, start_nulls,
                                                               elapse_nulls, batch):
    parts = _synthetic_ranks(start_nulls, elapse_nulls)
    whole = ch.build(pa.concat_tables(parts), None)
    inst = whole["collective_bandwidth.csv"]
    assert len(inst) > 100 and inst["Group"].isna().any() and inst["Step"].isna().any()
    got = _batched(parts, None, batch, monkeypatch)
    assert _csv(got) == _csv(whole)
    # the same values, not only the same rounded text: a null anywhere makes them floats
    assert got["collective_bandwidth.csv"].equals(inst)


def test_a_rank_number_in_two_batches_is_counted_once(monkeypatch):
    # two results of one rank number (rank 3 again after rank 8): the distinct ranks of an
    # instance are not the batches' counts summed; the whole table decides
    parts = _synthetic_ranks(False, False)
    again = parts[3].slice(0, 120)
    parts = [*parts, again]
    whole = ch.build(pa.concat_tables(parts), None)
    assert whole["collective_bandwidth.csv"]["Ranks"].max() <= 9
    assert _csv(_batched(parts, None, 4, monkeypatch)) == _csv(whole)


def test_no_ops_no_instances():
    assert ch.build_batches(lambda: iter(()), None) == {}
    empty = pa.Table.from_pylist([], schema=ch.OPS_SCHEMA)
    assert ch.build_batches(lambda: iter([empty]), None) == {}
    one = _synthetic_ranks(False, False)[0]
    got = ch.build_batches(lambda: iter([one.slice(0, 50), one.slice(50)]), None)
    frame = got["collective_bandwidth.csv"]
    assert list(frame.columns) == ch.INSTANCE_COLUMNS and frame.empty  # one rank: none
    assert str(frame["Step"].dtype) == "Int64"
    assert _csv(got) == _csv(ch.build(one, None))


class _Ranks:
    """The ClusterAnalysis parts the registry's comm_hardware step reads."""

    def __init__(self, partials):
        self.partials = partials

    def parts(self, name):
        return (p[name] for p in self.partials if name in p)

    def concat(self, name):
        done = [p[name] for p in self.partials if name in p]
        return pa.concat_tables(done) if done else None


def test_registry_builds_in_batches_of_ranks(generated_cluster, monkeypatch):
    root = generated_cluster(32, "--comm-ops-per-rank", "12", "--kernels-per-rank", "20",
                             "--tp", "4", "--pp", "2")
    partials = _partials(root)
    whole = ch.build(_Ranks(partials).concat(ch.OPS), _Ranks(partials).concat(ch.LINKS))
    seen = []
    real = ch.build_batches

    def spy(batches, links):
        sizes = [pc.count_distinct(t["rank"]).as_py() for t in batches()]
        seen.append(sizes)
        return real(batches, links)

    monkeypatch.setattr(ch, "build_batches", spy)
    monkeypatch.setattr(R, "CONCAT_BATCH", 5)
    a = next(a for a in registry.ANALYSES if a.name == "comm_hardware")
    got = a.cluster_files(_Ranks(partials), [])
    assert seen == [[5, 5, 5, 5, 5, 5, 2]]
    assert _csv(got) == _csv(whole) and len(whole["link_bandwidth.csv"]) >= 32
