"""Pipeline stages (analyze.pipeline_stages) function by function: one Qwen3 rank read through
``read_source`` and its p2p ops taken in this process, and small hand-built tables whose
expected values are worked out in the comments. Each test calls the module itself (no shared
fixture computes through it), so mutation testing sees which test reaches which function."""

from __future__ import annotations

import csv
import json
import warnings

import pyarrow as pa
import pytest

from ascendprof.analyze import pipeline_stages as ps
from ascendprof.model import schemas as S
from ascendprof.model.problems import Problems
from ascendprof.readers import read_source
from ascendprof.scan import scan
from conftest import QWEN3

OUT = "ASCEND_PROFILER_OUTPUT"


@pytest.fixture(scope="module")
def qwen3_tables():
    """rank -> the tables read_source gives for that Qwen3 rank (reading only: nothing of
    pipeline_stages runs here)."""
    sources = {s.rank: s for s in scan(QWEN3, Problems())}
    return {r: read_source(sources[r]).tables for r in (0, 1)}


def _p2p_of_json(rank: int) -> list[tuple[str, str, int, int, int]]:
    """(op name, group, start ns, elapse ns, wait ns) of communication.json's step13 p2p ops in
    start order, read here with json (the key is '<op name>@<group>'; times in us / ms)."""
    comm = json.loads((QWEN3 / f"rank_{rank}_ascend_pt" / OUT / "communication.json").read_text())
    rows = []
    for key, v in comm["step13"]["p2p"].items():
        if "@" not in key:  # "Total Op Info"
            continue
        name, group = key.split("@")
        info = v["Communication Time Info"]
        rows.append((name, group, round(info["Start Timestamp(us)"] * 1000),
                     round(info["Elapse Time(ms)"] * 1e6), round(info["Wait Time(ms)"] * 1e6)))
    return sorted(rows, key=lambda r: r[2])


def test_rank_with_only_communication_json(qwen3_tables):
    """Qwen3 rank 1 kept only communication.json and step_trace_time.csv: its p2p ops come from
    communication.json (Elapse Time as duration, its Wait Time), numbered 0, 1, 2 in start
    order, and, since step 13's Overlapped is 0 in step_trace_time.csv, every op is wholly
    exposed (exposed = duration)."""
    with open(QWEN3 / "rank_1_ascend_pt" / OUT / "step_trace_time.csv", newline="",
              encoding="utf-8-sig") as f:
        st = next(csv.DictReader(f))
    assert (st["Step"], float(st["Overlapped"])) == ("13", 0.0)
    want = _p2p_of_json(1)
    assert len(want) == 3
    got = ps.rank_p2p_ops(qwen3_tables[1], 1).to_pylist()
    assert [r["source"] for r in got] == ["communication.json"] * 3
    assert [r["seq"] for r in got] == [0, 1, 2]
    assert [r["step"] for r in got] == [13, 13, 13]
    assert [(r["op_name"], r["group"]) for r in got] == [(w[0], w[1]) for w in want]
    assert [r["dur_ns"] for r in got] == [w[3] for w in want]
    assert [r["wait_ns"] for r in got] == [w[4] for w in want]
    assert [r["exposed_ns"] for r in got] == [w[3] for w in want]


def test_rank_with_kernels_takes_group_and_wait_from_communication_json(qwen3_tables):
    """Qwen3 rank 0 has kernel_details.csv: the ops come from there, and the group and Wait
    Time of the same op name come from its communication.json (kernel_details has neither)."""
    want = _p2p_of_json(0)
    got = ps.rank_p2p_ops(qwen3_tables[0], 0).to_pylist()
    assert [r["source"] for r in got] == ["kernel_details"] * 3
    assert [r["seq"] for r in got] == [0, 1, 2]
    assert [r["op_name"] for r in got] == [w[0] for w in want]
    assert [r["group"] for r in got] == [w[1] for w in want]
    assert [r["wait_ns"] for r in got] == [w[4] for w in want]


def _comm_ops(steps, starts, elapses, names):
    n = len(steps)
    return S.from_lists(S.COMM_OPS, {
        "rank": [0] * n, "step": steps, "kind": ["p2p"] * n, "op_name": names,
        "group": ["g1"] * n, "start_ns": starts, "elapse_ns": elapses, "wait_ns": [0] * n})


def test_exposed_is_unknown_in_a_step_with_overlap_and_no_kernels():
    """No kernels: the exposed time is known only in a step whose reported Overlapped is 0.
    Step 1 (Overlapped 0): the 300 ns op is wholly exposed; step 2 (Overlapped 250 ns): the
    400 ns op's exposed part is unknown (null)."""
    tables = {S.COMM_OPS: _comm_ops([1, 2], [1000, 5000], [300, 400],
                                    ["hcom_send__1_1", "hcom_receive__2_1"]),
              S.STEP_TRACE: S.from_lists(S.STEP_TRACE, {
                  "rank": [0, 0], "step": [1, 2], "overlapped_ns": [0, 250]})}
    got = ps.rank_p2p_ops(tables, 0).to_pylist()
    assert [(r["step"], r["kind"], r["dur_ns"], r["exposed_ns"]) for r in got] == [
        (1, "send", 300, 300), (2, "recv", 400, None)]


def test_p2p_ops_from_the_timeline_communication_track():
    """Only a timeline: the p2p big ops are the send/receive events of the 'communication'
    track's 'Group ... Communication' threads. Left out: the allReduce of the same thread (not
    p2p), a send on a plane thread (a small task, not the big op) and a send on the overlap
    track. Two ops remain, numbered in start order (the receive at 3000 ns after the send at
    1000 ns although listed first)."""
    tl = S.from_lists(S.TIMELINE, {
        "rank": [0] * 5, "step": [3] * 5,
        "track": ["communication", "communication", "communication", "communication", "overlap"],
        "thread": ["Group 77 Communication", "Group 77 Communication", "Group 77 Communication",
                   "Plane 0", "Communication"],
        "name": ["hcom_receive__9_1", "hcom_send__8_1", "hcom_allReduce__7_1", "hcom_send__8_1",
                 "hcom_send__8_1"],
        "start_ns": [3000, 1000, 2000, 1000, 1000], "dur_ns": [200, 500, 100, 400, 500]})
    got = ps.rank_p2p_ops({S.TIMELINE: tl}, 0).to_pylist()
    assert [(r["seq"], r["op_name"], r["kind"], r["start_ns"], r["dur_ns"], r["source"])
            for r in got] == [(0, "hcom_send__8_1", "send", 1000, 500, "trace_view"),
                              (1, "hcom_receive__9_1", "recv", 3000, 200, "trace_view")]
    # neither kernels nor a step breakdown: exposed unknown; no communication.json: no wait
    assert [r["exposed_ns"] for r in got] == [None, None]
    assert [r["wait_ns"] for r in got] == [None, None]


# --------------------------------------------------------------------------- the stage rows


def _p2p(rows):
    """P2P_SCHEMA table from (rank, seq, start, dur, exposed) rows of step 5, batchSendRecv."""
    n = len(rows)
    return pa.table({
        "rank": pa.array([r[0] for r in rows], pa.int32()), "step": pa.array([5] * n, pa.int32()),
        "seq": pa.array([r[1] for r in rows], pa.int32()),
        "op_name": ["hcom_batchSendRecv__1"] * n, "group": ["g"] * n,
        "kind": ["send_recv"] * n, "start_ns": pa.array([r[2] for r in rows], pa.int64()),
        "dur_ns": pa.array([r[3] for r in rows], pa.int64()),
        "wait_ns": pa.nulls(n, pa.int64()),
        "exposed_ns": pa.array([r[4] for r in rows], pa.int64()),
        "source": ["test"] * n}, schema=ps.P2P_SCHEMA)


#: two pipelines [0, 1] and [2, 3] (PP2 x DP2): stage 0 = ranks 0, 2; stage 1 = ranks 1, 3.
#: p2p ns per rank: rank 0 dur 100+200+300 = 600, exposed 50+150+300 = 500;
#: rank 1 dur 3 x 400 = 1200, exposed 400+0+100 = 500; rank 2 dur 3 x 200 = 600, exposed
#: 3 x 100 = 300; rank 3 dur 3 x 100 = 300, exposed 0.
P2P_ROWS = [(0, 0, 1000, 100, 50), (0, 1, 2000, 200, 150), (0, 2, 3000, 300, 300),
            (1, 0, 1100, 400, 400), (1, 1, 2100, 400, 0), (1, 2, 3100, 400, 100),
            (2, 0, 1000, 200, 100), (2, 1, 2000, 200, 100), (2, 2, 3000, 200, 100),
            (3, 0, 1100, 100, 0), (3, 1, 2100, 100, 0), (3, 2, 3100, 100, 0)]


def test_stage_rows_by_hand():
    """Reported breakdown (step_trace) for every rank, recomputed only for rank 0.

    Stage 0 (ranks 0, 2): P2P mean (600 + 600) / 2 = 600 ns = 0.6 us; Bubble mean
    (500 + 300) / 2 = 400 ns = 0.4 us; Computing mean (4000 + 5000) / 2 = 4.5 us; Stage = max
    of the reported (10000, 11000) = 11.0 us; Bubble(%) = 400 / 11000 = 3.64 %; Bubble Reported
    max(700, 600) = 0.7 us; recomputed on rank 0 only: Stage 10.5 us against its reported 10.0
    -> +5 %; Bubble Recomputed 0.8 us.
    Stage 1 (ranks 1, 3): P2P (1200 + 300) / 2 = 0.75 us; Bubble (500 + 0) / 2 = 0.25 us;
    Computing (6000 + 8000) / 2 = 7.0 us; Stage max(12000, 9000) = 12.0 us; Bubble(%) 250 /
    12000 = 2.08 %; Bubble Reported max(900, 1000) = 1.0 us; no recomputed rank: empty.
    Three batched ops per stage of 2 is 1F1B with 2 micro-batches (test_pipeline_stages)."""
    rep = S.from_lists(S.STEP_TRACE, {
        "rank": [0, 1, 2, 3], "step": [5] * 4, "computing_ns": [4000, 6000, 5000, 8000],
        "stage_ns": [10000, 12000, 11000, 9000], "bubble_ns": [700, 900, 600, 1000]})
    rec = S.from_lists(S.STEP_TRACE, {
        "rank": [0], "step": [5], "computing_ns": [4100], "stage_ns": [10500],
        "bubble_ns": [800]})
    _, stages = ps.build(_p2p(P2P_ROWS), [[0, 1], [2, 3]], rep, rec)
    assert list(stages.columns) == ps.STAGE_COLUMNS
    got = stages.set_index("Stage")
    assert list(got["Step"]) == [5, 5]
    assert list(got["Ranks"]) == ["(0, 2)", "(1, 3)"]
    assert list(got["P2P(us)"]) == pytest.approx([0.6, 0.75])
    assert list(got["Bubble(us)"]) == pytest.approx([0.4, 0.25])
    assert list(got["Computing(us)"]) == pytest.approx([4.5, 7.0])
    assert list(got["Stage(us)"]) == pytest.approx([11.0, 12.0])
    assert list(got["Bubble(%)"]) == pytest.approx([3.64, 2.08])
    assert list(got["Bubble Reported(us)"]) == pytest.approx([0.7, 1.0])
    assert got.loc[0, "Stage Recomputed(us)"] == pytest.approx(10.5)
    assert got.loc[0, "Stage Deviation(%)"] == pytest.approx(5.0)
    assert got.loc[0, "Bubble Recomputed(us)"] == pytest.approx(0.8)
    for col in ("Stage Recomputed(us)", "Stage Deviation(%)", "Bubble Recomputed(us)"):
        assert got[col].isna()[1], col
    assert list(got["Micro-batches"]) == [2, 2]
    assert list(got["Schedule"]) == ["1F1B", "1F1B"]


def test_stage_rows_without_any_step_breakdown_are_empty_and_quiet():
    """No step breakdown at all: Computing, Stage and the reported / recomputed columns are
    empty, P2P and Bubble still come from the ops (stage 0: 0.6 / 0.4 us as above), and no
    warning (numpy's 'Mean of empty slice') reaches the user's terminal."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _, stages = ps.build(_p2p(P2P_ROWS), [[0, 1], [2, 3]])
    got = stages.set_index("Stage")
    assert list(got["P2P(us)"]) == pytest.approx([0.6, 0.75])
    assert list(got["Bubble(us)"]) == pytest.approx([0.4, 0.25])
    for col in ("Computing(us)", "Stage(us)", "Bubble(%)", "Bubble Reported(us)"):
        assert got[col].isna().all(), col


# --------------------------------------------------------------------------- schedule, groups


def test_schedule_phases_stage1_of_4_by_hand():
    """P=4, s=1, M=6 (the lines of test_schedule_stage1_of_4_by_hand): w = min(4-1-1, 6) = 2
    warm-up micro-batches -> recv F0, send F0, recv F1, send F1 and the last warm-up line recv
    F2 (5 lines); steady state for i < M - w = 4: two lines each (8 lines, the last one send B3
    alone); cool-down for the w = 2 last micro-batches: recv B4, send B4, recv B5, send B5."""
    got = [ln["phase"] for ln in ps.one_f_one_b(4, 1, 6)]
    assert got == ["warmup"] * 5 + ["steady"] * 8 + ["cooldown"] * 4


def test_a_stage_without_ops_fits_no_schedule():
    """Every schedule of two stages has at least one line per stage (M >= 1 micro-batch): stages
    that issued no op fit none (no 'zero micro-batches' answer)."""
    assert ps.infer_1f1b({0: [], 1: []}, 2) == (None, {})


#: communication_group.json as ascendprof writes it for the Qwen3 PP2 x DP2 sample
#: (comm_group_parallel_info entries; p2p groups named "pp")
GROUPS = {"comm_group_parallel_info": [
    {"type": "collective", "rank_set": [0, 1], "pg_name": "dp_cp"},
    {"type": "collective", "rank_set": [0, 2], "pg_name": "embd"},
    {"type": "p2p", "rank_set": [2, 0], "pg_name": "pp"},
    {"type": "p2p", "rank_set": [1, 3], "pg_name": "pp"},
    {"type": "p2p", "rank_set": [4, 5], "pg_name": "other"}]}


def test_pipelines_from_communication_groups_without_metadata():
    """No pp group in profiler_metadata.json (here: metadata without parallel_group_info): the
    pipelines are the p2p groups named pp (ranks ascending); the p2p group named 'other' is not
    one while named ones exist; collective groups never are."""
    assert ps.pipelines({0: {}, 1: {}}, GROUPS) == [[0, 2], [1, 3]]
    assert ps.pipelines(None, GROUPS) == [[0, 2], [1, 3]]
    unnamed = {"comm_group_parallel_info": [
        {"type": "collective", "rank_set": [0, 1]}, {"type": "p2p", "rank_set": [1, 0]}]}
    # no group named pp: every p2p group of more than one rank
    assert ps.pipelines(None, unnamed) == [[0, 1]]
