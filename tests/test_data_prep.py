"""Data preparation (analyze.data_prep, readers.minddata) on MindSpore run_2 and the torch_npu
2-rank levels, with variants derived from those real files. Expected values are read from the
files here (csv module / plain parsing) or calculated by hand below."""

from __future__ import annotations

import csv
import json
import shutil
import sqlite3
from pathlib import Path

import pandas as pd
import pytest

from conftest import analysis_of
from ascendprof.analyze import data_prep
from ascendprof.analyze.verdicts import make_verdict
from ascendprof.readers import minddata

RUN2 = "mindspore-legacy/run_2/normal_run/profiler"
LEVELS = "torch_npu-2rank-levels"


def _data_verdicts(ca):
    return [v for v in ca.verdicts if v["category"] == "data"]


@pytest.fixture(scope="module")
def run2(request):
    from conftest import SHARED

    if SHARED is None:
        pytest.skip("../shared/data not present")
    return SHARED / RUN2


def test_run2_pipeline_and_queues(run2):
    ca = analysis_of(run2.parents[1])
    prep = ca.csv_files["data_preparation.csv"]
    ops = ca.csv_files["dataset_pipeline.csv"]
    assert list(prep.columns) == data_prep.PREP_COLUMNS
    assert list(ops.columns) == data_prep.OPS_COLUMNS
    # operators and their output-queue usage as minddata_pipeline_raw_1.csv has them (rate x 100)
    with open(run2 / "minddata_pipeline_raw_1.csv", newline="") as f:
        raw = {int(r["op_id"]): r for r in csv.DictReader(f)}
    got = ops.set_index("Op Id")
    for op_id, r in raw.items():
        assert got.loc[op_id, "Op Type"] == r["op_type"]
        assert got.loc[op_id, "Queue Usage(%)"] == pytest.approx(
            float(r["output_queue_usage_rate"]) * 100, abs=0.01)
        assert got.loc[op_id, "Queue Capacity"] == int(r["output_queue_length"])
    # minddata_cpu_utilization_1.json: op 1 user [10,20,30] + sys [10,20,30] -> mean 40 %;
    # 8 workers -> 5 % per worker
    assert got.loc[1, "CPU(%)"] == 40.0 and got.loc[1, "CPU per Worker(%)"] == 5.0
    # seed 004: the source operator (ImageFolderOp, id 3, no children) has an output queue used
    # 0 % while no operator shows a full input queue over an empty output: it is the bottleneck
    assert list(got.index[got["Bottleneck"] == "yes"]) == [3]
    row = prep.iloc[0]
    assert row["Bottleneck Operator"] == "ImageFolderOp(id=3)"
    # device queue sizes at GetNext (minddata_aicpu_1.txt): 3, 2, 1 -> never empty: the device
    # never waited, no stage is the bottleneck
    sizes = [int(line.split()[3]) for line in (run2 / "minddata_aicpu_1.txt").read_text()
             .splitlines() if line.startswith("GetNext")]
    assert sizes == [3, 2, 1]
    assert row["Device Queue Batches"] == 3 and row["Device Queue Empty(%)"] == 0.0
    assert row["Bottleneck Stage"] == "none"
    # host queue (device_queue_profiling_1.txt "1 64 1 0 10": batch 1, size 0 of 64) -> 100 % empty
    assert row["Host Queue Batches"] == 1 and row["Host Queue Empty(%)"] == 100.0
    # push / batch time records of batch 1: 4 ms each, pipeline time 0
    assert (row["Push Time(ms)"], row["Batch Time(ms)"], row["Pipeline Time(ms)"]) == (4, 4, 0)
    # iteration gap from step_trace_raw_1_detail_time.csv (HWTS ticks of 10 ns): step 1
    # interval 0; step = 0 + 2366808 + 4097 ticks = 23.70905 ms
    assert row["Wait Source"] == "iteration gap"
    assert row["Step(ms)"] == pytest.approx(23.709, abs=1e-3)
    assert row["Data Wait(ms)"] == 0.0
    assert _data_verdicts(ca) == []


def _variant_run2(run2: Path, tmp: Path, *, gap_ticks: int, device_sizes, host_sizes) -> Path:
    """run_2 copied with a longer iteration gap over 3 steps, and device / host queue records
    rewritten (same formats as the real files)."""
    d = tmp / "run" / "profiler"
    shutil.copytree(run2, d)
    rows = ["step_num,start_point,end_point,total,fp_point,bp_point,iteration_interval,"
            "fp_and_bp,tail"]
    t = 15490789606875
    for step in (1, 2, 3):
        rows.append(f"{step},{t},{t + 2370905},2370905,{t},{t + 2366808},{gap_ticks},2366808,4097")
        t += 2370905 + gap_ticks
    rows.append("-,0,0,0,0,0,0,0,0")
    (d / "step_trace_raw_1_detail_time.csv").write_text("\n".join(rows) + "\n")
    (d / "minddata_aicpu_1.txt").write_text("".join(
        f"GetNext_dequeue_wait {100 + i * 10} {101 + i * 10} {s}\n"
        for i, s in enumerate(device_sizes)))
    (d / "device_queue_profiling_1.txt").write_text("".join(
        f"1 64 {i + 1} {s} {10 * i}\n" for i, s in enumerate(host_sizes)))
    for name in ("dataset_iterator_profiling_1.txt",):
        (d / name).unlink()
    return d.parent


def test_run2_variant_data_bound_host_pipeline(run2, tmp_path):
    """Iteration gap 1e6 ticks (10 ms) per step against fp_bp + tail 2370905 ticks: the gap is
    10 / (10 + 23.70905) = 29.67 % of the step -> data-bound (>= 10 %, critical from 20 %).
    Device queue empty at 2 of the GetNexts after the first; host queue empty in 4 of the 5
    batches after the first (80 % > 70 %) -> the host pipeline is the bottleneck, and its slowest
    operator is ImageFolderOp (id 3)."""
    root = _variant_run2(run2, tmp_path, gap_ticks=1_000_000, device_sizes=[1, 0, 0, 2],
                         host_sizes=[5, 0, 0, 0, 3, 0])
    ca = analysis_of(root)
    row = ca.csv_files["data_preparation.csv"].iloc[0]
    assert row["Data Wait(%)"] == pytest.approx(29.67, abs=0.01)
    assert row["Host Queue Empty(%)"] == 80.0 and row["Device Queue Empty(%)"] == pytest.approx(
        200 / 3, abs=0.01)
    assert row["Bottleneck Stage"] == "host pipeline"
    v = _data_verdicts(ca)
    assert len(v) == 1 and v[0]["ranks"] == [1] and v[0]["severity"] == "critical"
    assert v[0]["evidence"]["bottleneck_stage"] == "host pipeline"
    assert v[0]["evidence"]["bottleneck_operator"] == "ImageFolderOp(id=3)"
    assert "ImageFolderOp(id=3)" in v[0]["message"]


def test_run2_variant_transfer(run2, tmp_path):
    """Device queue empty although the host queue holds batches (host empty 0 %): the transfer to
    the device is the bottleneck. Gap 3e5 ticks = 3 ms of 26.71 ms = 11.2 % -> warning."""
    root = _variant_run2(run2, tmp_path, gap_ticks=300_000, device_sizes=[1, 0, 1, 0],
                         host_sizes=[5, 6, 7, 8])
    ca = analysis_of(root)
    row = ca.csv_files["data_preparation.csv"].iloc[0]
    assert row["Bottleneck Stage"] == "host to device transfer"
    v = _data_verdicts(ca)
    assert [x["severity"] for x in v] == ["warning"]


@pytest.mark.parametrize("kind", ["text", "db"])
def test_torch_levels_not_data_bound(shared_data, kind):
    """2-rank levels: Preparing 17.9-20.4 ms of ~150 ms steps (step_trace_time.csv); the data
    loader span (trace_view.json / PYTORCH_API enumerate(DataLoader)#...) is ~3.5 ms of it. Not
    data-bound: no verdict."""
    root = shared_data / LEVELS / kind / "level1"
    ca = analysis_of(root)
    prep = ca.csv_files["data_preparation.csv"].set_index("Rank")
    for rank in (0, 1):
        out = root / f"rank{rank}_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
        if kind == "text":
            with open(out / "step_trace_time.csv", newline="") as f:
                st = next(csv.DictReader(f))
            prep_ms = float(st["Preparing"]) / 1000
            assert prep.loc[rank, "Preparing(ms)"] == pytest.approx(prep_ms, abs=1e-3)
            assert prep.loc[rank, "Step(ms)"] == pytest.approx(
                (float(st["Stage"]) + float(st["Preparing"])) / 1000, abs=1e-3)
        else:
            c = sqlite3.connect(out / f"ascend_pytorch_profiler_{rank}.db")
            (a, b), = c.execute("""SELECT CAST(p.startNs AS INTEGER), CAST(p.endNs AS INTEGER)
                                   FROM PYTORCH_API p JOIN STRING_IDS s ON s.id = p.name
                                   WHERE s.value LIKE 'enumerate(DataLoader)%'""").fetchall()
            assert prep.loc[rank, "Dataloader(ms)"] == pytest.approx((b - a) / 1e6, abs=1e-3)
            assert prep.loc[rank, "Wait Source"] == "dataloader spans"
    assert _data_verdicts(ca) == []


def test_trace_view_dataloader_span(shared_data):
    """With --timeline the text export's trace_view.json gives the data loader span too (the
    'enumerate(DataLoader)#...' X event), the same as reading it with json here."""
    import ascendprof

    root = shared_data / LEVELS / "text" / "level1"
    prep = ascendprof.open(root, workers=1, timeline=True).frame(
        "data_preparation.csv").set_index("Rank")
    for rank in (0, 1):
        ev = json.loads((root / f"rank{rank}_ascend_pt" / "ASCEND_PROFILER_OUTPUT" /
                         "trace_view.json").read_text())
        dur = [float(e["dur"]) for e in ev if str(e.get("name", "")).startswith(
            "enumerate(DataLoader)")]
        assert prep.loc[rank, "Dataloader(ms)"] == pytest.approx(sum(dur) / 1000, abs=1e-3)


def test_db_variant_slow_dataloader(shared_data, tmp_path):
    """db level1 copied with rank 1's data loader span stretched to 40 ms (PYTORCH_API endNs):
    40 ms of a ~150 ms step is >= 10 % -> data-bound on rank 1 only, critical (>= 20 %)."""
    src = shared_data / LEVELS / "db" / "level1"
    root = tmp_path / "level1"
    shutil.copytree(src, root)
    db = root / "rank1_ascend_pt" / "ASCEND_PROFILER_OUTPUT" / "ascend_pytorch_profiler_1.db"
    db.chmod(0o644)
    c = sqlite3.connect(db)
    c.execute("""UPDATE PYTORCH_API SET endNs = CAST(startNs AS INTEGER) + 40000000
                 WHERE name IN (SELECT id FROM STRING_IDS WHERE value LIKE 'enumerate(DataLoader)%')""")
    c.commit()
    c.close()
    ca = analysis_of(root)
    row = ca.csv_files["data_preparation.csv"].set_index("Rank").loc[1]
    assert row["Dataloader(ms)"] == pytest.approx(40.0)
    v = _data_verdicts(ca)
    assert len(v) == 1 and v[0]["ranks"] == [1]
    assert v[0]["severity"] == ("critical" if row["Data Wait(%)"] >= 20 else "warning")


def test_preparing_only_threshold():
    """Only Preparing known: 25 % of the step needed (it also holds host launch time)."""
    def frame(pct):
        return pd.DataFrame([{"Rank": 0, "Step(ms)": 100.0, "Data Wait(ms)": pct,
                              "Data Wait(%)": pct, "Wait Source": "Preparing",
                              "Bottleneck Stage": "", "Bottleneck Operator": "",
                              "Evidence": ""}])
    assert data_prep.verdicts(frame(24.9), make_verdict) == []
    assert [v["severity"] for v in data_prep.verdicts(frame(30.0), make_verdict)] == ["warning"]


def test_operator_rule_full_input_low_output():
    """Seed 002 / 004: Leaf(out 90 %) -> Map(out 5 %) -> Batch(out 60 %): Map's input queue is 90 %
    used and its own 5 %: 85 points >= 50 -> Map is the bottleneck (not the leaf, whose queue is
    full)."""
    ops = pd.DataFrame({"op_id": [0, 1, 2], "op_type": ["Batch", "Map", "Leaf"],
                        "children": ["1", "2", ""], "queue_usage_pct": [60.0, 5.0, 90.0]})
    got = data_prep.flag_operators(ops).set_index("op_id")
    assert list(got.index[got["bottleneck"]]) == [1]
    assert got.loc[1, "input_usage_pct"] == 90.0 and got.loc[0, "input_usage_pct"] == 5.0


def test_pipeline_summary_json(tmp_path):
    """minddata_pipeline_summary_{rank}.json (MindSpore >= 1.6, written to
    ASCEND_PROFILER_OUTPUT): no public sample; built from the keys MindSpore's
    MinddataProfilingAnalyzer writes (-1 = no value)."""
    p = tmp_path / "minddata_pipeline_summary_0.json"
    p.write_text(json.dumps({
        "pipeline_ops": ["Batch(id=0)", "Map(id=1)", "ImageFolder(id=2)"],
        "op_names": ["Batch", "Map", "ImageFolder"], "op_ids": [0, 1, 2],
        "num_workers": [4, 8, 8], "queue_average_size": [2.0, 60.0, -1],
        "queue_utilization_pct": [3.13, 93.75, -1], "queue_empty_freq_pct": [40.0, 0.0, -1],
        "children_ids": [[1], [2], []], "parent_id": [-1, 0, 1], "avg_cpu_pct": [10.0, 80.0, 5.0]}))
    t = minddata.read_pipeline_summary(p, 0).to_pandas().set_index("op_id")
    assert t.loc[1, "queue_usage_pct"] == 93.75 and pd.isna(t.loc[2, "queue_usage_pct"])
    assert pd.isna(t.loc[0, "parent_id"]) and t.loc[0, "children"] == "1"
    flagged = data_prep.flag_operators(t.reset_index()).set_index("op_id")
    # Batch: input (Map) 93.75 % vs own 3.13 % -> 90.6 points: Batch is the bottleneck
    assert list(flagged.index[flagged["bottleneck"]]) == [0]


def test_minddata_files_in_ascend_profiler_output(shared_data, run2, tmp_path):
    """MindSpore 2.x writes minddata_pipeline_raw_{rank}.csv into ASCEND_PROFILER_OUTPUT (seed
    000's directory listing). No public *_ascend_ms export has one: run_2's rank-1 file is put,
    renamed to rank 0, into a copy of a real ASCEND_PROFILER_OUTPUT; the shared text reader
    must pick it up like the legacy reader does."""
    src = shared_data / LEVELS / "text" / "level1" / "rank0_ascend_pt"
    dst = tmp_path / "rank0_ascend_pt"
    shutil.copytree(src, dst)
    shutil.copy(run2 / "minddata_pipeline_raw_1.csv",
                dst / "ASCEND_PROFILER_OUTPUT" / "minddata_pipeline_raw_0.csv")
    ca = analysis_of(tmp_path)
    ops = ca.csv_files["dataset_pipeline.csv"]
    assert list(ops["Op Type"]) == ["BatchOp", "MapOp", "MapOp", "ImageFolderOp"]
    assert list(ops["Rank"]) == [0, 0, 0, 0]
    assert ca.csv_files["data_preparation.csv"].iloc[0]["Bottleneck Operator"] == \
        "ImageFolderOp(id=3)"
