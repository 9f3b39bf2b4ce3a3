"""Pipeline stages, bubbles and the 1F1B schedule (analyze.pipeline_stages) on the Qwen3 PP2xDP2
sample, with expected values from the profiler's files read here with the csv module, from
msprof-analyze's cluster_step_trace_time.csv (tests/reference) and hand calculations."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pyarrow as pa
import pytest

from ascendprof.analyze import pipeline_stages as ps
from conftest import QWEN3, ROOT, analysis_of

OUT = "ASCEND_PROFILER_OUTPUT"
REF = ROOT / "tests" / "reference" / "qwen3-4rank-pp2dp2" / "cluster_step_trace_time.csv"


def _csv(path: Path) -> list[dict]:
    with open(path, newline="", encoding="utf-8-sig") as f:
        return list(csv.DictReader(f))


def _us(text: str) -> float:
    return float(text.strip())


@pytest.fixture(scope="module")
def analysed():
    ca = analysis_of(QWEN3)
    return ca


def _p2p_rows(rank: int) -> list[dict]:
    rows = _csv(QWEN3 / f"rank_{rank}_ascend_pt" / OUT / "kernel_details.csv")
    return [r for r in rows if "SendRecv" in r["Name"]]


def _compute_union(rank: int) -> list[tuple[float, float]]:
    """Compute kernels of kernel_details.csv merged by a plain sort-and-sweep (us)."""
    rows = _csv(QWEN3 / f"rank_{rank}_ascend_pt" / OUT / "kernel_details.csv")
    iv = sorted((_us(r["Start Time(us)"]), _us(r["Start Time(us)"]) + float(r["Duration(us)"]))
                for r in rows if r["Accelerator Core"] != "COMMUNICATION")
    merged: list[list[float]] = []
    for s, e in iv:
        if merged and s <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], e)
        else:
            merged.append([s, e])
    return [tuple(m) for m in merged]


def _covered(union, s, e) -> float:
    return sum(max(0.0, min(e, b) - max(s, a)) for a, b in union)


def test_pipelines_from_metadata():
    meta = {r: json.loads((QWEN3 / f"rank_{r}_ascend_pt" / "profiler_metadata.json").read_text())
            for r in range(4)}
    # pp groups of parallel_group_info: [0, 2] (group_name_19) and [1, 3]
    assert ps.pipelines(meta, None) == [[0, 2], [1, 3]]


def test_pipeline_csv_on_qwen3(analysed):
    pipe = analysed.csv_files["pipeline.csv"]
    assert list(pipe.columns) == ps.PIPELINE_COLUMNS
    assert len(pipe) == 12  # 3 batchSendRecv ops on each of 4 ranks
    for rank in (0, 2):  # ranks with kernel_details: start, duration, exposed from that file
        got = pipe[pipe["Rank"] == rank].sort_values("Seq")
        want = _p2p_rows(rank)
        union = _compute_union(rank)
        assert list(got["Op Name"]) == [r["Name"] for r in want]
        assert list(got["Start(us)"]) == [r["Start Time(us)"].strip() for r in want]
        assert list(got["Duration(us)"]) == pytest.approx([float(r["Duration(us)"]) for r in want])
        exposed = [float(r["Duration(us)"]) - _covered(union, _us(r["Start Time(us)"]),
                                                       _us(r["Start Time(us)"])
                                                       + float(r["Duration(us)"])) for r in want]
        assert list(got["Exposed(us)"]) == pytest.approx(exposed, abs=0.01)
    # ranks 1, 3 have only communication.json: Elapse Time as duration, and Overlapped = 0 in
    # their step_trace_time.csv makes every op wholly exposed
    comm = json.loads((QWEN3 / "rank_1_ascend_pt" / OUT / "communication.json").read_text())
    p2p = comm["step13"]["p2p"]
    want = sorted((v["Communication Time Info"]["Start Timestamp(us)"],
                   v["Communication Time Info"]["Elapse Time(ms)"] * 1000)
                  for k, v in p2p.items() if k.startswith("hcom_"))
    got = pipe[pipe["Rank"] == 1].sort_values("Seq")
    assert [float(x) for x in got["Start(us)"]] == pytest.approx([w[0] for w in want])
    assert list(got["Duration(us)"]) == pytest.approx([w[1] for w in want])
    assert list(got["Exposed(us)"]) == pytest.approx([w[1] for w in want])


def test_1f1b_labels_on_qwen3(analysed):
    """PP2 with 3 batchSendRecv ops per stage is 1F1B with 2 micro-batches (hand-derived):
    stage 0 sends F0; sends F1 + receives B0; receives B1. Stage 1 receives F0; sends B0 +
    receives F1; sends B1."""
    pipe = analysed.csv_files["pipeline.csv"]
    for rank, send, recv in ((0, ["F0", "F1", ""], ["", "B0", "B1"]),
                             (1, ["F0", "F1", ""], ["", "B0", "B1"]),
                             (2, ["", "B0", "B1"], ["F0", "F1", ""]),
                             (3, ["", "B0", "B1"], ["F0", "F1", ""])):
        got = pipe[pipe["Rank"] == rank].sort_values("Seq")
        assert list(got["Send"]) == send, rank
        assert list(got["Recv"]) == recv, rank
    stages = analysed.csv_files["pipeline_stages.csv"]
    assert list(stages["Micro-batches"]) == [2, 2]
    assert list(stages["Schedule"]) == ["1F1B", "1F1B"]


def test_stage_rows_on_qwen3(analysed):
    stages = analysed.csv_files["pipeline_stages.csv"].set_index("Stage")
    assert list(stages.columns) == ps.STAGE_COLUMNS[:1] + ps.STAGE_COLUMNS[2:]
    # Stage / Bubble as msprof-analyze writes them for the stage rows
    ref = {r["Index"]: r for r in _csv(REF) if r["Type"] == "stage"}
    for stage, key in ((0, "(0, 1)"), (1, "(2, 3)")):
        assert stages.loc[stage, "Ranks"] == key
        assert stages.loc[stage, "Stage(us)"] == pytest.approx(float(ref[key]["Stage"]))
        assert stages.loc[stage, "Bubble Reported(us)"] == pytest.approx(float(ref[key]["Bubble"]))
        # the profiler's formula (hcom_receive* ops only) recomputed: 0 for batchSendRecv too
        assert stages.loc[stage, "Bubble Recomputed(us)"] == pytest.approx(float(ref[key]["Bubble"]))
    # hand calculation of the bubble: mean over the stage's ranks of the exposed p2p time.
    # stage 0: rank 0 (kernel_details) 436.14 + 158553.28 + 154888.38 = 313877.80;
    #          rank 1 (communication.json) 435.18 + 164096.54 + 158448.84 = 322980.56
    #          -> (313877.80 + 322980.56) / 2 = 318429.18
    # stage 1: rank 2 71424.68 + 804.12 + 434.86 = 72663.66; rank 3 73750.88 + 801.68 + 434.18
    #          = 74986.74 -> 73825.20
    assert stages.loc[0, "Bubble(us)"] == pytest.approx(318429.18, abs=0.01)
    assert stages.loc[1, "Bubble(us)"] == pytest.approx(73825.20, abs=0.01)
    assert stages.loc[0, "Bubble(%)"] == pytest.approx(318429.18 / 810022.25 * 100, abs=0.01)
    # Computing: mean of the ranks' step_trace_time.csv Computing
    comp = {r: float(_csv(QWEN3 / f"rank_{r}_ascend_pt" / OUT / "step_trace_time.csv")[0]
                     ["Computing"]) for r in range(4)}
    assert stages.loc[0, "Computing(us)"] == pytest.approx((comp[0] + comp[1]) / 2, abs=0.01)
    assert stages.loc[1, "Computing(us)"] == pytest.approx((comp[2] + comp[3]) / 2, abs=0.01)
    # recomputed Stage only where kernel_details exists (ranks 0, 2), compared on those ranks
    rep = {r: float(_csv(QWEN3 / f"rank_{r}_ascend_pt" / OUT / "step_trace_time.csv")[0]["Stage"])
           for r in (0, 2)}
    assert stages.loc[0, "Stage Recomputed(us)"] == pytest.approx(rep[0], rel=1e-6)
    assert stages.loc[1, "Stage Recomputed(us)"] == pytest.approx(rep[2], rel=1e-6)
    assert abs(stages.loc[1, "Stage Deviation(%)"]) < 1e-3


# --------------------------------------------------------------------------- the schedule


@pytest.mark.parametrize("P,M", [(2, 1), (2, 2), (2, 5), (3, 4), (4, 2), (4, 6), (8, 16)])
def test_schedule_is_consistent_between_neighbours(P, M):
    """What stage s sends forward, stage s+1 receives, in the same order; gradients the other
    way; each stage handles every micro-batch once in each direction it talks to."""
    lines = {s: ps.one_f_one_b(P, s, M) for s in range(P)}

    def seq(s, kind, prefix):
        return [ln[kind] for ln in lines[s] if ln[kind] and ln[kind].startswith(prefix)]

    for s in range(P - 1):
        assert seq(s, "send", "F") == seq(s + 1, "recv", "F") == [f"F{i}" for i in range(M)]
        assert seq(s + 1, "send", "B") == seq(s, "recv", "B") == [f"B{i}" for i in range(M)]
    assert not seq(0, "recv", "F") and not seq(0, "send", "B")
    assert not seq(P - 1, "send", "F") and not seq(P - 1, "recv", "B")


def test_schedule_stage1_of_4_by_hand():
    """Megatron 1F1B, P=4, s=1, M=6: warm-up 2 micro-batches, written out by hand."""
    got = [(ln["send"], ln["recv"]) for ln in ps.one_f_one_b(4, 1, 6)]
    assert got == [(None, "F0"), ("F0", None), (None, "F1"), ("F1", None), (None, "F2"),
                   ("F2", "B0"), ("B0", "F3"), ("F3", "B1"), ("B1", "F4"), ("F4", "B2"),
                   ("B2", "F5"), ("F5", "B3"), ("B3", None), (None, "B4"), ("B4", None),
                   (None, "B5"), ("B5", None)]


def test_infer_separate_send_recv_either_order():
    """Separate hcom_send / hcom_receive ops: the two parts of one line may come in either
    order; M is recovered from the counts."""
    P, M = 3, 4
    kinds = {}
    for s in range(P):
        out = []
        for i, ln in enumerate(ps.one_f_one_b(P, s, M)):
            parts = [k for k in ("send", "recv") if ln[k]]
            out += parts[::-1] if i % 2 else parts
        kinds[s] = out
    got_m, labels = ps.infer_1f1b(kinds, P)
    assert got_m == M
    # stage 1 of 3 (one warm-up micro-batch): recv F0, send F0, recv F1, then the first steady
    # line "send F1 + recv B0" which this test issued in reverse order (line index 3 is odd)
    mid = labels[1]
    assert [(x["send"], x["recv"]) for x in mid][:5] == [
        (None, "F0"), ("F0", None), (None, "F1"), (None, "B0"), ("F1", None)]


def test_no_labels_when_sequence_does_not_fit():
    kinds = {0: ["send_recv"] * 3, 1: ["send_recv"] * 4}  # 3 ops fit M=2, 4 ops fit M=3
    assert ps.infer_1f1b(kinds, 2) == (None, {})
    p2p = pa.table({"rank": pa.array([0] * 3 + [2] * 4, pa.int32()),
                    "step": pa.array([1] * 7, pa.int32()),
                    "seq": pa.array([0, 1, 2, 0, 1, 2, 3], pa.int32()),
                    "op_name": ["hcom_batchSendRecv__1"] * 7, "group": ["g"] * 7,
                    "kind": ["send_recv"] * 7,
                    "start_ns": pa.array([0, 10, 20, 0, 5, 10, 15], pa.int64()),
                    "dur_ns": pa.array([1] * 7, pa.int64()),
                    "wait_ns": pa.nulls(7, pa.int64()), "exposed_ns": pa.array([1] * 7, pa.int64()),
                    "source": ["test"] * 7}, schema=ps.P2P_SCHEMA)
    pipe, stages = ps.build(p2p, [[0, 2]])
    assert set(pipe["Send"]) == {""} and set(pipe["Recv"]) == {""}
    assert list(stages["Schedule"]) == ["", ""]


def test_no_pipeline_outputs_without_p2p(shared_data):
    """Data parallel only (2-rank levels): no pipeline, no pipeline files."""
    ca = analysis_of(shared_data / "torch_npu-2rank-levels" / "text" / "level1")
    assert "pipeline.csv" not in ca.csv_files
    assert "pipeline_stages.csv" not in ca.csv_files


def test_p2p_kind():
    assert ps.p2p_kind("hcom_batchSendRecv__128_3_1") == "send_recv"
    assert ps.p2p_kind("hcom_send__12_1") == "send"
    assert ps.p2p_kind("hcom_receive__3_1") == "recv"
    assert ps.p2p_kind("Default/Receive-op3") == "recv"
    assert ps.p2p_kind("hcom_allReduce__1") == "p2p"


def test_exposed_time_excludes_compute_overlap():
    """A p2p op [1000, 3000) ns with compute kernels [500, 1500) and [2500, 2600): exposed
    = 2000 - 500 - 100 = 1400 ns (hand calculation). Built from kernel_details columns."""
    from ascendprof.model import schemas as S

    k = S.from_lists(S.KERNELS, {
        "rank": [0, 0, 0], "step": [1, 1, 1],
        "name": ["MatMul", "hcom_send__1_1", "Add"],
        "accelerator_core": ["AI_CORE", "COMMUNICATION", "AI_VECTOR_CORE"],
        "start_ns": [500, 1000, 2500], "dur_ns": [1000, 2000, 100]})
    t = ps.rank_p2p_ops({S.KERNELS: k}, 0)
    assert t.num_rows == 1
    row = t.to_pylist()[0]
    assert (row["kind"], row["dur_ns"], row["exposed_ns"]) == ("send", 2000, 1400)


def test_cli_writes_files_and_summary(tmp_path):
    """`ascendprof analyse` writes the pipeline / memory / data preparation files and prints one
    line per stage; summary.json carries the same figures as pipeline_stages.csv."""
    import subprocess
    import sys

    out = tmp_path / "out"
    res = subprocess.run([sys.executable, "-m", "ascendprof", "analyse", str(QWEN3), "-o",
                          str(out), "--no-cache"], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    for name in ("pipeline.csv", "pipeline_stages.csv", "memory_summary.csv",
                 "memory_top_ops.csv", "memory_modules.csv", "data_preparation.csv"):
        assert (out / name).is_file(), name
    assert "Pipeline stage 0 (ranks 0-1)" in res.stdout
    summary = json.loads((out / "summary.json").read_text())
    stages = _csv(out / "pipeline_stages.csv")
    got = {s["stage"]: s for s in summary["analyses"]["pipeline"]}
    for row in stages:
        assert got[int(row["Stage"])]["bubble_ms"] == pytest.approx(float(row["Bubble(us)"]) / 1000,
                                                                    abs=1e-3)


def test_one_rank_alone(tmp_path):
    """Only rank 0 copied: its pipeline is still known from its metadata ([0, 2]); its 3 ops
    fit stage 0 of 1F1B with 2 micro-batches alone; no row for the stage nobody collected."""
    import shutil

    shutil.copytree(QWEN3 / "rank_0_ascend_pt", tmp_path / "rank_0_ascend_pt")
    ca = analysis_of(tmp_path)
    pipe = ca.csv_files["pipeline.csv"]
    assert list(pipe["Rank"]) == [0, 0, 0]
    assert list(pipe["Send"]) == ["F0", "F1", ""] and list(pipe["Recv"]) == ["", "B0", "B1"]
    stages = ca.csv_files["pipeline_stages.csv"]
    # rank 0 knows only its own pp group [0, 2]: stage 0 is rank 0 as far as the input tells
    assert list(stages["Stage"]) == [0] and list(stages["Ranks"]) == ["(0,)"]
