"""The cluster combine from per-rank partials and the streamed cluster files.

cluster_communication.json is written one group key at a time from compressed per-rank
fragments (cluster_communication.rank_fragments / CommunicationFile). Expected values: the
in-memory build over all ranks' concatenated tables (:func:`_in_memory_communication`, a
different path: one call over every row, no per-rank partials, no streaming, a second path),
msprof-analyze 26.2.0's reference files for the Qwen3 sample and an 8-rank cluster cloned from it, each rank's own communication.json
as the profiler wrote it, and sums written out here.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pytest

from _verdict_tables import split_op_time
from ascendprof.scan import load_sources
from ascendprof.engine import pipeline
from ascendprof.model import schemas as S
from ascendprof.analyze import cluster_communication as cc
from ascendprof.model.problems import Problems
from ascendprof.report.files import write_outputs
from ascendprof.report.summary import build_summary

ROOT = Path(__file__).resolve().parents[1]
REFERENCE = Path(__file__).parent / "reference"
#: msprof-analyze rounds these to 4 decimals from ms values (see test_cluster_files.py)
ROUNDED = {"Bandwidth(GB/s)", "Wait Time Ratio", "Synchronization Time Ratio",
           "Large Packet Ratio"}


@pytest.fixture(scope="module")
def cluster8(generated_cluster):
    return generated_cluster(8, "--comm-ops-per-rank", "120", "--kernels-per-rank", "500")


def _analyse(root: Path, out: Path):
    """The analyse flow: per-rank partials (two worker processes), combine, streamed files."""
    problems = Problems()
    sources = load_sources(root, problems)
    results = pipeline.run_ranks(sources, None, workers=2)
    ca = pipeline.conclude(pipeline.gather(str(root), sources, results, problems))
    write_outputs(ca, out, build_summary(ca))
    return ca, results


def _all_tables(root: Path) -> tuple[dict, dict]:
    """Every rank's full COMM_* tables read again (nothing dropped), concatenated."""
    from ascendprof.readers import read_source

    parts: dict[str, list] = {}
    meta = {}
    for src in load_sources(root, Problems()):
        data = read_source(src)
        meta[data.rank] = (data.meta or {}).get("profiler_metadata") or {}
        for name in (S.COMM_OPS, S.COMM_BANDWIDTH, S.COMM_SIZE_DIST, S.COMM_LINKS):
            if data.has(name):
                parts.setdefault(name, []).append(data.tables[name])
    return {n: pa.concat_tables(v) for n, v in parts.items()}, meta


def _in_memory_communication(ops, bw, dist, links=None) -> dict:
    """cluster_communication.json built in one call over all ranks' COMM_* tables (whatever
    ranks they hold): the fragments of every row at once, membership from ``ops`` (and
    ``links``), materialised as a dict."""
    coll, p2p = cc.group_membership(ops, links)
    return dict(cc.CommunicationFile(cc.rank_fragments(ops, bw, dist), coll, p2p))


def _close(ours, ref, key="", rel=1e-9, abs_=1e-12) -> list[str]:
    if isinstance(ref, dict):
        if not isinstance(ours, dict) or set(ours) != set(ref):
            return [f"{key}: keys differ"]
        return [d for k in ref for d in _close(ours[k], ref[k], k, rel, abs_)]
    if isinstance(ref, list):
        if not isinstance(ours, list) or len(ours) != len(ref):
            return [f"{key}: list differs"]
        return [d for a, b in zip(ours, ref) for d in _close(a, b, key, rel, abs_)]
    if isinstance(ref, (int, float)) and not isinstance(ref, bool):
        tol = 1.5e-4 if key in ROUNDED else abs_
        ok = isinstance(ours, (int, float)) and math.isclose(ours, ref, rel_tol=rel, abs_tol=tol)
        return [] if ok else [f"{key}: {ours!r} vs {ref!r}"]
    return [] if ours == ref else [f"{key}: {ours!r} vs {ref!r}"]


@pytest.fixture(params=["qwen3", "cluster8"])
def analysed(request, tmp_path):
    root = request.getfixturevalue(request.param)
    ca, results = _analyse(root, tmp_path / "out")
    return request.param, root, tmp_path / "out", ca, results


def test_streamed_file_equals_in_memory_build(analysed):
    """The file written group by group from per-rank partials is the dict the in-memory build
    makes from all ranks' rows at once: same keys at every level, same numbers."""
    _, root, out, ca, _ = analysed
    t, _ = _all_tables(root)
    expected = _in_memory_communication(t[S.COMM_OPS], t.get(S.COMM_BANDWIDTH),
                                        t.get(S.COMM_SIZE_DIST), t.get(S.COMM_LINKS))
    streamed = json.loads((out / "cluster_communication.json").read_text())
    assert expected and streamed == json.loads(json.dumps(expected))
    # the mapping the pipeline keeps gives the same groups, and each group on demand
    assert list(ca.communication) == list(expected)
    first = next(iter(expected))
    assert ca.communication[first] == json.loads(json.dumps(expected[first]))
    matrix = json.loads((out / "cluster_communication_matrix.json").read_text())
    assert matrix == json.loads(json.dumps(dict(cc.matrix_groups(t[S.COMM_LINKS],
                                                                 comm_ops=t[S.COMM_OPS]))))


@pytest.fixture(scope="module")
def generated8(generated_cluster):
    """benchmarks/make_cluster.py 8 OUT with its defaults: the input of
    tests/reference/generated-8rank (TP2 x PP2 x DP2 cloned from the Qwen3 fixture)."""
    return generated_cluster(8)


def _csv_rows(path: Path) -> dict:
    import csv

    with open(path, newline="", encoding="utf-8-sig") as f:
        rows = list(csv.DictReader(f))
    def num(v):
        try:
            return float(v)
        except ValueError:
            return v  # 'NA', ''

    return {(r["Step"], r["Type"], r["Index"]): {k: num(v) for k, v in r.items()
                                                 if k not in ("Step", "Type", "Index")}
            for r in rows}


@pytest.mark.parametrize("name, ref", [("qwen3", "qwen3-4rank-pp2dp2"),
                                       ("generated8", "generated-8rank")])
def test_streamed_files_match_msprof_analyze(request, tmp_path, name, ref):
    """The files the pipeline streams equal msprof-analyze 26.2.0's (tests/reference/<ref>):
    cluster_communication.json, the matrix and cluster_step_trace_time.csv, on the shipped
    sample and on an 8-rank TP/PP/DP cluster cloned from it."""
    _analyse(request.getfixturevalue(name), tmp_path)
    for f in ("cluster_communication.json", "cluster_communication_matrix.json"):
        ours = json.loads((tmp_path / f).read_text())
        want = json.loads((REFERENCE / ref / f).read_text())
        assert _close(ours, want, rel=1e-3) == [], f
    ours, want = (_csv_rows(d / "cluster_step_trace_time.csv") for d in (tmp_path, REFERENCE / ref))
    assert set(ours) == set(want)
    for key, row in want.items():
        assert set(ours[key]) == set(row), key
        for col, v in row.items():
            if isinstance(v, str):
                assert ours[key][col] == v, (key, col)
            else:
                assert ours[key][col] == pytest.approx(v, rel=1e-6, abs=1e-3), (key, col)


def test_cluster_files_are_compact_json(qwen3, tmp_path):
    """Written without indentation, like msprof-analyze's (one line)."""
    _analyse(qwen3, tmp_path)
    for name in ("cluster_communication.json", "cluster_communication_matrix.json"):
        text = (tmp_path / name).read_text()
        assert "\n" not in text.strip() and json.loads(text)


def _own_records(root: Path) -> dict:
    """(rank, step, op key) -> that rank's own OPINFO in its communication.json."""
    out = {}
    for d in sorted(root.glob("rank_*_ascend_pt")):
        rank = int(next(d.glob("profiler_info_*.json")).stem.rsplit("_", 1)[1])
        doc = json.loads((d / "ASCEND_PROFILER_OUTPUT" / "communication.json").read_text())
        for step, kinds in doc.items():
            for kind in ("collective", "p2p"):
                for op_key, info in (kinds.get(kind) or {}).items():
                    if not op_key.startswith("Total Op Info"):
                        out[(rank, step, op_key)] = info
    return out


def test_every_opinfo_is_the_ranks_own_record(cluster8, tmp_path):
    """Each rank's entry under an op in the cluster file is the record the profiler wrote in
    that rank's communication.json, exactly (msprof-analyze copies it as it is: same keys in
    the same order, same numbers), and every record is there once."""
    _analyse(cluster8, tmp_path)
    cluster = json.loads((tmp_path / "cluster_communication.json").read_text())
    own = _own_records(cluster8)
    seen = set()
    for steps in cluster.values():
        for step, ops in steps.items():
            for op_key, ranks in ops.items():
                if op_key.startswith("Total Op Info"):
                    continue
                for rank, info in ranks.items():
                    k = (int(rank), step, op_key)
                    assert k not in seen and info == own[k], k
                    assert list(info["Communication Time Info"]) == \
                        list(own[k]["Communication Time Info"]), k
                    seen.add(k)
    assert seen == set(own)


def test_total_op_info_sums_the_ranks_ops(cluster8, tmp_path):
    """'Total Op Info@<group>' of a rank: its ops' Elapse / Transit / Wait times of that group
    and step added up (here from the profiler's own records), Wait Time Ratio =
    wait / (wait + transit) rounded to 4 decimals."""
    _analyse(cluster8, tmp_path)
    cluster = json.loads((tmp_path / "cluster_communication.json").read_text())
    own = _own_records(cluster8)
    checked = 0
    for steps in cluster.values():
        for step, ops in steps.items():
            for key, ranks in ops.items():
                if not key.startswith("Total Op Info@"):
                    continue
                group = key.split("@", 1)[1]
                for rank, total in ranks.items():
                    recs = [v for (r, s, k), v in own.items()
                            if r == int(rank) and s == step and k.endswith("@" + group)]
                    t = total["Communication Time Info"]
                    for label in ("Elapse Time(ms)", "Transit Time(ms)", "Wait Time(ms)"):
                        want = sum(v["Communication Time Info"][label] for v in recs)
                        assert math.isclose(t[label], want, rel_tol=1e-9, abs_tol=1e-9)
                    w, tr = t["Wait Time(ms)"], t["Transit Time(ms)"]
                    assert t["Wait Time Ratio"] == (round(w / (w + tr), 4) if w + tr else 0)
                    checked += 1
    assert checked >= 8


def test_rank_results_carry_no_bandwidth_rows(qwen3):
    """What a worker sends back: the verdicts' per-op rows (transfer settled from the op's
    RDMA+SDMA transit) and compressed OPINFO fragments, not COMM_OPS nor the per-transport
    bandwidth / size-distribution rows."""
    from ascendprof.analyze import verdicts as V

    results = pipeline.run_ranks(load_sources(qwen3, Problems()), None, workers=1)
    with_comm = [r for r in results if V.OP_ROWS in r.tables]
    assert len(with_comm) == 4
    from _verdict_tables import comm_json

    own_files = comm_json(qwen3)  # the profiler's files, parsed here with the json module
    for r in with_comm:
        assert not {S.COMM_OPS, S.COMM_BANDWIDTH, S.COMM_SIZE_DIST} & set(r.tables)
        rows = r.tables[V.OP_ROWS]
        assert rows.column_names == ["rank", "step_key", "kind", "op", "group", "elapse_ns",
                                     "wait_ns", "idle_ns", "transfer_ns"]
        # one row per op of the rank's communication.json, in file order, elapse ms -> ns
        want = [(op.split("@")[0], round(info["Communication Time Info"]["Elapse Time(ms)"] * 1e6))
                for kinds in own_files[r.rank].values() for ops in kinds.values()
                for op, info in ops.items() if not op.startswith("Total")]
        assert list(zip(rows.column("op").to_pylist(),
                        rows.column("elapse_ns").to_pylist())) == want
        assert r.comm_fragments and all(f.compressed_size < f.size for f in r.comm_fragments)


def test_verdicts_same_from_partials_as_from_full_tables(qwen3):
    """The op split of the per-rank op rows the workers send, concatenated, equals the split of
    all ranks' COMM_OPS and COMM_BANDWIDTH at once."""
    from ascendprof.analyze import verdicts as V

    t, _ = _all_tables(qwen3)
    full = split_op_time(V.op_rows(t[S.COMM_OPS], t[S.COMM_BANDWIDTH]))
    cols = ["rank", "step_key", "op", "group", "transfer_ns", "peer_wait_ns", "waited_for",
            "other_ns"]
    per_rank = pa.concat_tables(
        V.op_rows(t[S.COMM_OPS].filter(pa.compute.equal(t[S.COMM_OPS].column("rank"), r)),
                  t[S.COMM_BANDWIDTH]) for r in range(4))
    pd.testing.assert_frame_equal(split_op_time(per_rank)[cols], full[cols])


def _comm_tables(ops: list[dict], bw: list[dict], dist: list[dict]):
    key = {"rank": 0, "step": 1, "step_key": "step1", "kind": "collective", "group": "g"}
    return (S.from_lists(S.COMM_OPS, {k: [{**key, **r}.get(k) for r in ops]
                                      for k in S.SCHEMAS[S.COMM_OPS].names}),
            S.from_lists(S.COMM_BANDWIDTH, {k: [{**key, **r}.get(k) for r in bw]
                                            for k in S.SCHEMAS[S.COMM_BANDWIDTH].names}),
            S.from_lists(S.COMM_SIZE_DIST, {k: [{**key, **r}.get(k) for r in dist]
                                            for k in S.SCHEMAS[S.COMM_SIZE_DIST].names}))


def test_tables_without_opinfo_text_first_row_wins():
    """Tables of a reader without communication.json text (db, PROF_): OPINFOs are built from
    the rows; a repeated op keeps its first row (and that op's first row per transport and
    packet size), a bandwidth row of an op that has no COMM_OPS row is not counted. Totals by
    hand: a (2 ms elapse, 0.5 ms transit, 1 ms wait) + b (3, 1.5, 0) -> 5 / 2 / 1 ms, wait ratio
    1 / (1 + 2) = 0.3333; HCCS 10 MB + 30 MB over 1 + 3 ms -> 40 MB / 4 ms = 10 GB/s."""
    ops, bw, dist = _comm_tables(
        [dict(op_name="a", start_ns=1_000_000, elapse_ns=2_000_000, transit_ns=500_000,
              wait_ns=1_000_000),
         dict(op_name="b", start_ns=5_000_000, elapse_ns=3_000_000, transit_ns=1_500_000,
              wait_ns=0),
         dict(op_name="a", start_ns=9_000_000, elapse_ns=7_000_000, transit_ns=7_000_000,
              wait_ns=7_000_000)],  # the repeat: ignored
        [dict(op_name="a", transport="HCCS", size_mb=10.0, transit_ns=1_000_000),
         dict(op_name="a", transport="HCCS", size_mb=99.0, transit_ns=9_000_000),  # repeat
         dict(op_name="b", transport="HCCS", size_mb=30.0, transit_ns=3_000_000),
         dict(op_name="c", transport="HCCS", size_mb=50.0, transit_ns=5_000_000)],  # no op row
        [dict(op_name="a", transport="HCCS", packet_size_mb="1", count=2, dur_ns=400_000),
         dict(op_name="b", transport="HCCS", packet_size_mb="1", count=3, dur_ns=600_000),
         dict(op_name="c", transport="HCCS", packet_size_mb="1", count=9, dur_ns=900_000)])
    got = _in_memory_communication(ops, bw, dist)
    (step,) = got.values()
    ops_out = step["step1"]
    assert set(ops_out) == {"a@g", "b@g", "Total Op Info@g"}
    a = ops_out["a@g"]["0"]
    assert a["Communication Time Info"]["Elapse Time(ms)"] == 2.0
    assert a["Communication Bandwidth Info"]["HCCS"]["Transit Size(MB)"] == 10.0
    total = ops_out["Total Op Info@g"]["0"]
    t = total["Communication Time Info"]
    assert (t["Elapse Time(ms)"], t["Transit Time(ms)"], t["Wait Time(ms)"]) == (5.0, 2.0, 1.0)
    assert t["Wait Time Ratio"] == 0.3333
    hccs = total["Communication Bandwidth Info"]["HCCS"]
    assert (hccs["Transit Size(MB)"], hccs["Transit Time(ms)"], hccs["Bandwidth(GB/s)"]) == \
        (40.0, 4.0, 10.0)
    assert hccs["Size Distribution"] == {"1": [5, 1.0]}


@pytest.mark.parametrize("n_records", [1, cc.RECORDS_PER_CHUNK, 2 * cc.RECORDS_PER_CHUNK + 5])
@pytest.mark.parametrize("aligned", [True, False])
def test_group_json_across_chunks(n_records, aligned):
    """A group's JSON from chunked fragments equals the object written out directly: op by op,
    every member rank's OPINFO, step framing kept (two steps), whatever the chunk boundaries;
    when ranks differ (rank 2 misses every third op) ops are merged in first-appearance order."""
    ranks = [0, 1, 2]

    def info(rank, j):
        return {"Communication Time Info": {"Elapse Time(ms)": rank + j / 1000},
                "pad": "x" * (j % 7)}

    def steps_of(j):
        return "step1" if j < n_records // 2 else "step2"

    frags, expected, counts = [], {}, {}
    for r in ranks:
        recs = [(_compact(steps_of(j)), _compact(f"op_{j}@g"), _compact(info(r, j)))
                for j in range(n_records) if aligned or r != 2 or j % 3]
        counts[r] = len(recs)
        frags.append(cc.OpFragments.pack(r, "collective", "g", recs, []))
        for st, key, inf in recs:
            expected.setdefault(json.loads(st), {}).setdefault(json.loads(key), {})[str(r)] = \
                json.loads(inf)
    f = cc.CommunicationFile(frags, {"g": set(ranks)}, {})
    (key,) = list(f)
    got = json.loads(f.group_json(key))
    assert json.dumps(got) == json.dumps(expected)  # same content and order
    for fr in frags:
        assert len(fr.chunks) == math.ceil(counts[fr.rank] / cc.RECORDS_PER_CHUNK)


def _compact(v) -> bytes:
    return json.dumps(v, separators=(",", ":")).encode()
