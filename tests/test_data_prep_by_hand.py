"""Data preparation (analyze.data_prep) function by function: MindSpore run_2 copied with its
queue files rewritten (same formats as the real ones), read through ``read_source`` and
analysed in this process, and small hand-built tables with the expected values worked out in
the comments. Each test calls the module itself (no shared fixture computes through it), so
mutation testing sees which test reaches which function."""

from __future__ import annotations

import json
import shutil

import pandas as pd

from ascendprof.analyze import data_prep
from ascendprof.analyze.verdicts import make_verdict
from ascendprof.model import schemas as S
from ascendprof.model.problems import Problems
from ascendprof.readers import read_source
from ascendprof.scan import scan

RUN2 = "mindspore-legacy/run_2/normal_run/profiler"


def _run2_copy(shared_data, tmp_path, files: dict[str, str]):
    """run_2's profiler directory copied with ``files`` (name -> text) written into it; the
    rank's tables as read_source gives them, and the rank."""
    d = tmp_path / "run" / "profiler"
    shutil.copytree(shared_data / RUN2, d)
    for name, text in files.items():
        (d / name).write_text(text, encoding="utf-8")
    source, = scan(d.parent, Problems())
    return read_source(source).tables, source.rank


def test_run2_queues_first_getnext_left_out_and_host_full(shared_data, tmp_path):
    """Host queue (device_queue_profiling_1.txt, 'type capacity batch size time'): batches 1-4
    of capacity 64 hold 64, 64, 0, 10; batch 1 is left out when there are later ones ->
    64, 0, 10: empty in 1 of 3 = 33.33 %, full (size = capacity) in 1 of 3 = 33.33 %.
    Device queue (minddata_aicpu_1.txt): two GetNexts finding 0 then 3 batches; the first is left
    out -> never empty (0 %), so no stage starved the device; each GetNext took 1 us = 0.001 ms
    of the 23.709 ms step (< 10 %): 'none'. Wait from the iteration gap: measured."""
    tables, rank = _run2_copy(shared_data, tmp_path, {
        "device_queue_profiling_1.txt": "".join(f"1 64 {b} {s} 10\n"
                                                for b, s in enumerate([64, 64, 0, 10], 1)),
        "minddata_aicpu_1.txt": "GetNext_dequeue_wait 100 101 0\nGetNext_dequeue_wait 200 201 3\n"})
    parts = data_prep.rank_data_prep(tables, rank)
    row, = parts[data_prep.DATA_PREP].to_pylist()
    assert (row["wait_source"], row["measured"]) == ("iteration gap", True)
    assert (row["device_batches"], row["device_empty_pct"]) == (2, 0.0)
    assert row["stage"] == "none"
    out = data_prep.build(parts[data_prep.DATA_PREP], parts[data_prep.DATASET_OPS_FLAGGED])
    prep = out["data_preparation.csv"].iloc[0]
    assert prep["Host Queue Batches"] == 3
    assert prep["Host Queue Empty(%)"] == 33.33
    assert prep["Host Queue Full(%)"] == 33.33
    assert prep["Device Queue Batches"] == 2 and prep["Device Queue Empty(%)"] == 0.0
    assert prep["Bottleneck Stage"] == "none"
    # run_2's pipeline (minddata_pipeline_raw_1.csv): no operator's input queue is 50 points
    # fuller than its output, so the source operator ImageFolderOp (id 3, output queue 0 % used,
    # under 50 %) is flagged, with the reason written for a source operator
    ops = out["dataset_pipeline.csv"].set_index("Op Id")
    assert list(ops.index[ops["Bottleneck"] == "yes"]) == [3]
    assert ops.loc[3, "Reason"] == ("source operator whose output queue is only 0.0% used: "
                                    "the operators after it wait for its data")
    assert set(ops.loc[[0, 1, 2], "Reason"]) == {""}


def test_run2_pipeline_summary_without_queue_capacity(shared_data, tmp_path):
    """minddata_pipeline_summary_1.json (MindSpore >= 1.6; taken before the raw CSV) has no
    queue length: Queue Capacity is empty for every operator, the usage is the file's
    queue_utilization_pct (-1 = no value). Keys as MindSpore's MinddataProfilingAnalyzer
    writes them (no public sample)."""
    summary = {"pipeline_ops": ["Batch(id=0)", "Map(id=1)", "ImageFolder(id=2)"],
               "op_names": ["Batch", "Map", "ImageFolder"], "op_ids": [0, 1, 2],
               "num_workers": [4, 8, 8], "queue_average_size": [2.0, 60.0, -1],
               "queue_utilization_pct": [3.13, 93.75, -1], "queue_empty_freq_pct": [40.0, 0.0, -1],
               "children_ids": [[1], [2], []], "parent_id": [-1, 0, 1],
               "avg_cpu_pct": [10.0, 80.0, 5.0]}
    tables, rank = _run2_copy(shared_data, tmp_path,
                              {"minddata_pipeline_summary_1.json": json.dumps(summary)})
    parts = data_prep.rank_data_prep(tables, rank)
    ops = data_prep.build(None, parts[data_prep.DATASET_OPS_FLAGGED])["dataset_pipeline.csv"]
    assert list(ops["Op Type"]) == ["Batch", "Map", "ImageFolder"]
    assert ops["Queue Capacity"].isna().all()
    assert list(ops["Queue Usage(%)"][:2]) == [3.13, 93.75] and pd.isna(ops["Queue Usage(%)"][2])
    # Batch: input (Map) 93.75 % against its own 3.13 %: 90.62 points >= 50 -> the bottleneck
    assert list(ops["Bottleneck"]) == ["yes", "", ""]


def test_source_operator_at_exactly_fifty_percent_is_not_flagged():
    """A source operator is flagged when its output queue is used less than 50 %: at exactly 50 %
    it is not (Batch -> Leaf, Batch's input 50 % against its own 40 %: 10 points, no hit)."""
    ops = pd.DataFrame({"op_id": [0, 1], "op_type": ["Batch", "Leaf"], "children": ["1", ""],
                        "queue_usage_pct": [40.0, 50.0]})
    got = data_prep.flag_operators(ops)
    assert not got["bottleneck"].any()
    assert set(got["reason"]) == {""}
    # just under 50 %: flagged, with its reason
    got = data_prep.flag_operators(ops.assign(queue_usage_pct=[40.0, 49.9]))
    assert list(got["bottleneck"]) == [False, True]
    assert got["reason"][1].startswith("source operator whose output queue is only 49.9% used")


def test_no_data_no_row():
    """A rank without steps, queues or dataset operators has no data preparation row."""
    assert data_prep.rank_data_prep({}, 0) == {}
    assert data_prep.rank_data_prep({S.STEP_TRACE: S.empty(S.STEP_TRACE)}, 0) == {}


def test_preparing_only_is_not_measured_and_names_no_stage():
    """Only step_trace's Preparing: the wait is Preparing (2 ms), not a measured data wait, and
    without queue records no bottleneck stage is named. Step = Stage 8 ms + Preparing 2 ms =
    10 ms."""
    st = S.from_lists(S.STEP_TRACE, {"rank": [0], "step": [1], "stage_ns": [8_000_000],
                                     "preparing_ns": [2_000_000]})
    row, = data_prep.rank_data_prep({S.STEP_TRACE: st}, 0)[data_prep.DATA_PREP].to_pylist()
    assert (row["steps"], row["step_ms"], row["wait_ms"]) == (1, 10.0, 2.0)
    assert (row["wait_source"], row["measured"]) == ("Preparing", False)
    assert (row["stage"], row["evidence"]) == ("", "")
    assert data_prep.bottleneck_stage({}, 10.0) == ("", "")


def test_iteration_gap_is_measured():
    """Legacy iteration trace: the gap is a measured wait. Step = 1 + 8 + 1 = 10 ms, gap 1 ms."""
    its = S.from_lists(S.ITERATIONS, {"rank": [0], "step": [1],
                                      "iteration_interval_ns": [1_000_000],
                                      "fp_bp_ns": [8_000_000], "tail_ns": [1_000_000]})
    row, = data_prep.rank_data_prep({S.ITERATIONS: its}, 0)[data_prep.DATA_PREP].to_pylist()
    assert (row["step_ms"], row["wait_ms"], row["wait_source"], row["measured"]) == (
        10.0, 1.0, "iteration gap", True)


def _prep_row(rank, pct, source):
    return {"Rank": rank, "Step(ms)": 100.0, "Data Wait(ms)": pct, "Data Wait(%)": pct,
            "Wait Source": source, "Bottleneck Stage": "", "Bottleneck Operator": "",
            "Evidence": ""}


def test_verdict_speaks_of_the_worst_rank_against_its_own_limit():
    """Rank 0 waits 15 % in its data loader (limit 10 %: 1.5 times it), rank 1 50 % in
    Preparing (limit 25 %: 2 times it): one verdict for both, about rank 1 (the larger
    multiple), critical (50 >= 2 x 25). Without queue data the advice is the data loader's,
    after the advice to measure it with --timeline (Preparing)."""
    frame = pd.DataFrame([_prep_row(0, 15.0, "dataloader spans"), _prep_row(1, 50.0, "Preparing")])
    v, = data_prep.verdicts(frame, make_verdict)
    assert v["ranks"] == [0, 1] and v["severity"] == "critical"
    assert v["message"].startswith("Data-bound: rank 1 waits 50.00 ms per step between the step "
                                   "start and its first device task")
    assert "(2 ranks at or above 10%)" in v["message"]
    assert v["next_step"] == (
        "Analyse again with --timeline to read the data loader spans of trace_view.json and "
        "measure the loader's own wait. Give the data loader more workers (num_workers), pin "
        "memory and prefetch, or move preprocessing off the training process; compare "
        "data_preparation.csv across ranks.")
    # the ranks swapped: the worst is found by its multiple of the limit, not by its order
    v2, = data_prep.verdicts(frame.iloc[::-1].reset_index(drop=True), make_verdict)
    assert v2["message"] == v["message"]
