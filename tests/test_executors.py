"""Executors: same results for 1 or several workers and on Dask; memory caps the pool."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from ascendprof.engine import executors
from ascendprof.engine.executors import local_map, plan_workers
from ascendprof.engine.pipeline import process_rank
from ascendprof.scan import load_sources
from ascendprof.engine.run import run_analyse
from ascendprof.scan import Source
from test_cache import analysis_outputs, assert_same_outputs

MB = 1 << 20


@pytest.fixture(scope="module")
def cluster(generated_cluster):
    return generated_cluster(8, "--comm-ops-per-rank", "40")


def _source_of_size(tmp_path, name, size) -> Source:
    d = tmp_path / name
    d.mkdir()
    with open(d / "big.bin", "wb") as f:
        f.truncate(size)  # sparse: the size counts, nothing is written
    return Source(path=str(d), kind="torch_npu", rank=0, files=["big.bin"])


def test_plan_workers_by_cores_and_memory(tmp_path, monkeypatch):
    monkeypatch.setattr(os, "cpu_count", lambda: 8)
    srcs = [_source_of_size(tmp_path, f"r{i}", 100 * MB) for i in range(4)]
    # estimate per rank = 150 MB base + 3 x 100 MB input = 450 MB
    assert executors.estimate_peak(srcs[0]) == 450 * MB
    assert plan_workers(srcs, budget=10_000 * MB) == 4           # capped by the 4 sources
    assert plan_workers(srcs, budget=2 * 450 * MB) == 2          # 900 MB / 450 MB
    assert plan_workers(srcs, budget=450 * MB - 1) == 1          # never below one
    assert plan_workers(srcs, workers=3, budget=1) == 3          # an explicit count is obeyed
    monkeypatch.setenv(executors.BUDGET_ENV, "900")
    assert executors.memory_budget() == 900 * MB
    assert plan_workers(srcs) == 2


def _square(x, tables_dir=None, offset=0):
    return x * x + offset


def test_local_map_keeps_order_under_a_tight_budget():
    # a budget below one worker's size lets one rank run at a time, still in input order
    assert local_map(_square, range(7), workers=2, budget=1, offset=1) == [x * x + 1 for x in range(7)]
    assert local_map(_square, range(7), workers=2) == [x * x for x in range(7)]
    done = []
    local_map(_square, range(3), workers=1, progress=lambda: done.append(1))
    assert len(done) == 3


def _assert_same_results(a, b):
    assert [r.rank for r in a] == [r.rank for r in b]
    for x, y in zip(a, b):
        assert sorted(x.tables) == sorted(y.tables)
        for k in x.tables:
            assert x.tables[k].equals(y.tables[k], check_metadata=True), (x.rank, k)
        for attr in ("breakdown", "op_partial", "kernel_partial"):
            tx, ty = getattr(x, attr), getattr(y, attr)
            assert (tx is None) == (ty is None) and (tx is None or tx.equals(ty)), (x.rank, attr)
        assert x.breakdown_method == y.breakdown_method
        assert list(x.problems) == list(y.problems) and x.missing == y.missing
        assert x.table_rows == y.table_rows and x.meta == y.meta


def test_one_and_several_workers_give_identical_outputs(cluster, tmp_path):
    sources = load_sources(cluster)
    one = local_map(process_rank, sources, workers=1)
    two = local_map(process_rank, sources, workers=2)
    _assert_same_results(one, two)
    run_analyse(cluster, tmp_path / "w1", workers=1, cache=False, progress=False, fmt="json")
    run_analyse(cluster, tmp_path / "w2", workers=2, cache=False, progress=False, fmt="json")
    assert_same_outputs(analysis_outputs(tmp_path / "w1"), analysis_outputs(tmp_path / "w2"))


def _held_on_workers(client, at_most: int, seconds: float = 20.0) -> int:
    """How many task results the cluster's workers hold, waited for (the scheduler learns of
    a release asynchronously) until it is ``at_most`` or ``seconds`` have passed."""
    import time

    end = time.monotonic() + seconds
    while True:
        held = sum(len(keys) for keys in client.has_what().values())
        if held <= at_most or time.monotonic() > end:
            return held
        time.sleep(0.05)


def _dask_case(cluster: str, out: str) -> None:
    """The Dask comparison itself; run in a child interpreter by the test below, because a
    process that used Dask keeps its threads (the offload executor) for the rest of its life."""
    import distributed
    from pathlib import Path

    cluster, out = Path(cluster), Path(out)
    sources = load_sources(cluster)
    local = local_map(process_rank, sources, workers=1)
    # worker processes, as a real cluster has (results and tables travel between processes)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  protocol="tcp", host="127.0.0.1",  # loopback only
                                  dashboard_address=None) as lc:
        on_dask = executors.dask_map(process_rank, sources, scheduler=lc.scheduler_address)
        _assert_same_results(local, on_dask)
        with distributed.Client(lc) as client:  # results leave the workers once fetched
            held: list[int] = []
            executors.dask_map(process_rank, sources, scheduler=client, on_result=lambda _: (
                held.append(_held_on_workers(client, len(sources) - len(held) - 1))))
        # after the k-th result, at most the n - k not fetched yet may still be held: the
        # last one leaves nothing on the workers (a list of every future kept all n there)
        assert held == [min(h, len(sources) - k) for k, h in enumerate(held, 1)], held
        assert held[-1] == 0
        run_analyse(cluster, out / "dask", executor="dask", scheduler=lc.scheduler_address,
                    cache=False, progress=False, fmt="json")
    run_analyse(cluster, out / "local", workers=1, cache=False, progress=False, fmt="json")
    assert_same_outputs(analysis_outputs(out / "local"), analysis_outputs(out / "dask"))
    # no scheduler: an in-process cluster of its own
    _assert_same_results(local, executors.dask_map(process_rank, sources[:2]) + local[2:])


def test_dask_executor_matches_local(cluster, tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    pytest.importorskip("distributed")
    code = ("import sys; sys.path[:0] = [sys.argv[1]]; import test_executors as t; "
            "t._dask_case(sys.argv[2], sys.argv[3])")
    # Dask keeps a scratch directory in the temporary directory: the test's own one
    env = dict(os.environ, TMPDIR=str(tmp_path), DASK_TEMPORARY_DIRECTORY=str(tmp_path))
    r = subprocess.run([sys.executable, "-c", code, str(Path(__file__).parent), str(cluster),
                        str(tmp_path)], capture_output=True, text=True, timeout=900, env=env)
    assert r.returncode == 0, (r.stdout + r.stderr)[-4000:]


def test_on_result_sees_every_result_as_it_arrives():
    seen = []
    assert local_map(_square, range(6), workers=2, on_result=seen.append) == \
        [x * x for x in range(6)]
    assert sorted(seen) == [x * x for x in range(6)]
    seen.clear()
    local_map(_square, range(3), workers=1, on_result=seen.append)
    assert seen == [0, 1, 4]


def test_spilled_results_give_the_same_cluster_results(cluster, tmp_path):
    """Tables and OPINFO chunks parked in a ParkingFile as results arrive are read back when
    the cluster step needs them: verdicts, step tables, op statistics and
    cluster_communication.json equal those of results that kept them in memory."""
    from ascendprof.engine import pipeline
    from ascendprof.model import schemas as S
    from ascendprof.analyze.verdicts import OP_ROWS
    from ascendprof.model.problems import Problems
    from ascendprof.sysio.parking import ParkedDict, ParkedTable, ParkingFile, unpark

    sources = load_sources(cluster)
    in_memory = local_map(process_rank, sources, workers=1)
    kept = pipeline.conclude(pipeline.gather(str(cluster), sources,
                                             local_map(process_rank, sources, workers=1),
                                             Problems()))
    spill = ParkingFile(tmp_path, sources)
    results = local_map(process_rank, sources, workers=2, on_result=spill.take)
    for r, m in zip(results, in_memory):  # everything parked, and read back unchanged
        assert all(isinstance(t, ParkedTable) for t in r.tables.values())
        assert isinstance(r.kernel_partial, ParkedTable)
        assert unpark(r.tables[OP_ROWS]).equals(m.tables[OP_ROWS])
        assert unpark(r.breakdown).equals(m.breakdown)
        assert all(not isinstance(blob, bytes) for f in r.comm_fragments for _, blob in f.chunks)
        # the plain-Python parts too: the head and totals of each fragment, meta and advice
        assert all(not isinstance(f.head[1], bytes) for f in r.comm_fragments)
        assert [list(f.totals) for f in r.comm_fragments] == \
            [f.totals for f in m.comm_fragments]
        assert isinstance(r.meta, ParkedDict) and isinstance(r.advice, ParkedDict)
        assert unpark(r.meta) == m.meta and unpark(r.advice) == m.advice
        assert dict(r.meta) == m.meta and list(r.meta) == list(m.meta)
        assert r.meta.get("profiler_metadata") == m.meta.get("profiler_metadata")
        assert r.meta.get("no such key", 7) == 7 and "no such key" not in r.meta
        # the parent's own source object, not the worker's copy of it
        assert r.source is next(s for s in sources if s.path == r.source.path)
    # equal small parts of different ranks are one object (the missing files, row counts)
    first: dict = {}
    for r in results:
        assert first.setdefault(("m", *r.missing), r.missing) is r.missing
        assert first.setdefault(("n", *r.table_rows.items()), r.table_rows) is r.table_rows
    assert len(first) < 2 * len(results)  # some are shared: the test can fail
    spilled = pipeline.conclude(pipeline.gather(str(cluster), sources, results, Problems()))
    # a step table of a few rows stays parked (a slice of the concatenation is larger)
    assert all(isinstance(r.tables[S.STEP_TRACE], ParkedTable) for r in results)
    assert spilled.metadata == kept.metadata
    assert spilled.metadata[sources[0].rank] == json.loads(
        (Path(sources[0].path) / "profiler_metadata.json").read_text())
    assert spilled.advice == kept.advice
    assert spilled.verdicts == kept.verdicts
    assert spilled.step_trace.equals(kept.step_trace)
    assert spilled.concat(S.COMM_LINKS).equals(kept.concat(S.COMM_LINKS))
    assert spilled.op_statistics.equals(kept.op_statistics)
    assert spilled.top_kernels.equals(kept.top_kernels)
    assert list(spilled.communication) == list(kept.communication)
    for key in kept.communication:
        assert spilled.communication.group_json(key) == kept.communication.group_json(key)
    spill.close()
    assert list(tmp_path.iterdir()) == []  # the file was never visible in the directory


def test_parked_tables_concatenate_in_batches(tmp_path, monkeypatch):
    """ClusterAnalysis.concat reads the ranks' parked tables back a batch at a time: the same
    table, rows in rank order, a column one rank lacks filled with nulls (permissive)."""
    import pyarrow as pa

    from ascendprof.model import results
    from ascendprof.model.problems import Problems
    from ascendprof.model.results import ClusterAnalysis, RankResult
    from ascendprof.sysio.parking import ParkedTable, ParkingFile

    monkeypatch.setattr(results, "CONCAT_BATCH", 2)
    park = ParkingFile(tmp_path)
    ranks = []
    for r in range(5):
        cols = {"rank": pa.array([r] * (r + 1), pa.int32()), "v": pa.array(range(r + 1))}
        if r != 3:
            cols["x"] = pa.array([f"r{r}"] * (r + 1))
        res = RankResult(source=Source(path=f"/nowhere/{r}", kind="torch_npu", rank=r), rank=r,
                         tables={"t": pa.table(cols)})
        park.take(res)
        assert isinstance(res.tables["t"], ParkedTable)
        ranks.append(res)
    ca = ClusterAnalysis(root="/nowhere", sources=[], ranks=ranks, problems=Problems())
    got = ca.concat("t")
    assert got.column("rank").to_pylist() == [0, 1, 1, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 4]
    assert got.column("v").to_pylist() == [0, 0, 1, 0, 1, 2, 0, 1, 2, 3, 0, 1, 2, 3, 4]
    assert got.column("x").to_pylist() == ["r0", "r1", "r1", "r2", "r2", "r2", None, None,
                                           None, None, "r4", "r4", "r4", "r4", "r4"]
    assert got.column("x").num_chunks == 1
    assert [t.num_rows for t in ca.parts("t")] == [1, 2, 3, 4, 5]
    assert ca.concat("absent") is None
    park.close()
