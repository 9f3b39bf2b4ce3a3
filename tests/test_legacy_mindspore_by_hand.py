"""Legacy MindSpore 1.x / 2.0 profiler files through ``read_source``: the optional files of a rank
(timeline display, aicore detail alone, memory summary, profiler_info, minddata) and each
damaged file as one problem naming the file, the line or byte, and the analyses it affects.

Real files come from mindspore-legacy/ in the shared data (copied where a test needs a
variant); the small files below are written by hand in the layout of the real ones (the column
names of step_trace_raw / hccl_raw / ascend_cluster_analyse as MindInsight reads them), with the
expected values worked out in the comments.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import shutil
from decimal import Decimal
from pathlib import Path

import pytest

from ascendprof.model import schemas as S
from ascendprof.model.problems import Problems
from ascendprof.readers import read_source
from ascendprof.scan import LEGACY_MS, scan

STEP_TRACE = ("step_num,start_point,end_point,total,fp_point,bp_point,iteration_interval,"
              "fp_and_bp,tail\n1,100,200,100,110,190,10,80,10\n-,100,200,100,110,190,10,80,10\n")
HCCL_HEAD = "step_num,communication_cost,wait_cost,link_info,communication_operator_cost\n"


def _rank(root: Path, rank: int):
    srcs = [s for s in scan(root, Problems()) if s.kind == LEGACY_MS and s.rank == rank]
    assert len(srcs) == 1
    return srcs[0]


def _dir(tmp_path: Path, files: dict[str, str | bytes], rank: int = 0, step_trace=True):
    """A legacy profiler/ folder of ``rank`` with a valid step trace and ``files``."""
    d = tmp_path / "profiler"
    d.mkdir()
    if step_trace:
        (d / f"step_trace_raw_{rank}_detail_time.csv").write_text(STEP_TRACE)
    for name, text in files.items():
        (d / name).write_bytes(text if isinstance(text, bytes) else text.encode())
    return read_source(_rank(d, rank))


def _problem(data, name: str):
    got = [p for p in data.problems if p.path.endswith(name)]
    assert len(got) == 1, [p.line() for p in data.problems]
    return got[0]


# ------------------------------------------------------------------ optional files of a rank

def test_timeline_display_gives_one_hardware_row_per_x_event(shared_data):
    """run_1 rank 1: timeline_display_1.json holds 6359 X events (us from the first task)."""
    d = shared_data / "mindspore-legacy" / "run_1" / "normal_run" / "profiler"
    events = json.loads((d / "timeline_display_1.json").read_text())
    x = [e for e in events if e.get("ph") == "X"]
    tl = read_source(_rank(d, 1)).tables[S.TIMELINE]
    assert tl.num_rows == len(x) == 6359
    assert set(tl.column("track").to_pylist()) == {"hardware"}
    first = tl.to_pylist()[1]  # Mul-op29 at ts 2.7700000209733844 us, dur 2.15 us
    assert (first["name"], first["start_ns"], first["dur_ns"]) == ("Mul-op29", 2770, 2150)


def test_aicore_detail_alone_gives_one_kernel_per_op(shared_data, tmp_path):
    """Without output_timeline_data, aicore_intermediate_<rank>_detail.csv (full_kernel_name,
    execution_time ms) gives the kernels: dur = execution time, no start, AI_CORE."""
    src = shared_data / "mindspore-legacy/run_1/normal_run/profiler/aicore_intermediate_1_detail.csv"
    d = tmp_path / "p"
    d.mkdir()
    shutil.copy(src, d / src.name)
    rows = list(csv.DictReader(open(src)))
    data = read_source(_rank(d, 1))
    k = data.tables[S.KERNELS]
    assert k.column("name").to_pylist() == [r["full_kernel_name"] for r in rows]
    # ms -> ns, to the nearest ns (0.005296666666666667 ms -> 5297 ns)
    assert k.column("dur_ns").to_pylist() == [round(Decimal(r["execution_time"]) * 1_000_000)
                                              for r in rows]
    # Default/GetNext-op6 -> GetNext (the op type is the last path part before -op<N>)
    assert k.column("op_type").to_pylist()[0] == "GetNext"
    assert set(k.column("accelerator_core").to_pylist()) == {"AI_CORE"}
    assert set(k.column("device_id").to_pylist()) == {1}
    assert k.column("start_ns").null_count == k.num_rows


def test_aicore_detail_without_execution_time_is_a_problem(tmp_path):
    data = _dir(tmp_path, {"aicore_intermediate_0_detail.csv": "full_kernel_name,x\nA-op1,1\n"})
    p = _problem(data, "aicore_intermediate_0_detail.csv")
    assert p.reason == "missing column execution_time" and p.affects == ("op_statistics",)


def test_memory_summary_gives_the_capacity_in_mb(tmp_path):
    """capacity 31.5 (GiB, as MindSpore writes it) -> 31.5 * 1024 = 32256 MB."""
    data = _dir(tmp_path, {"memory_usage_summary_0.json": json.dumps({"capacity": 31.5})})
    assert data.meta["memory_capacity_mb"] == 32256.0


def test_profiler_info_is_kept_as_metadata(shared_data, tmp_path):
    real = shared_data / "mindspore-legacy" / "parallel_strategy" / "profiler_info_0.json"
    data = _dir(tmp_path, {"profiler_info_0.json": real.read_text()})
    assert data.meta["profiler_info"] == json.loads(real.read_text())
    assert data.meta["profiler_info"]["parallel_mode"] == "auto_parallel"


def test_a_damaged_minddata_file_is_a_problem_of_data_preparation(shared_data, tmp_path):
    real = shared_data / "mindspore-legacy" / "profiler" / "minddata_pipeline_raw_0.csv"
    cut = real.read_text().splitlines()[0].split(",")[:2]  # only op_id,op_type
    data = _dir(tmp_path, {"minddata_pipeline_raw_0.csv": ",".join(cut) + "\n0,Batch\n"})
    assert S.DATASET_OPS not in data.tables
    assert _problem(data, "minddata_pipeline_raw_0.csv").affects == ("data_preparation",)


# ------------------------------------------------------------------ device id

def test_step_trace_and_kernels_carry_the_sources_device_id(shared_data):
    """A rank whose device id differs from its rank (rank 2 on device 6): the cluster
    analyse rows name device 6."""
    d = shared_data / "mindspore-legacy" / "cluster_propose"
    src = dataclasses.replace(_rank(d, 2), device_id=6)
    data = read_source(src)
    assert set(data.tables[S.STEP_TRACE].column("device_id").to_pylist()) == {6}


# ------------------------------------------------------------------ damaged files

def test_a_step_trace_that_is_not_utf8_names_the_byte(tmp_path):
    """The 0xFF byte stands at offset 5 ("step_" is 5 bytes)."""
    data = _dir(tmp_path, {"step_trace_raw_0_detail_time.csv": b"step_\xffnum\n",
                           "hccl_raw_0.csv": HCCL_HEAD + '1,0,0,{},"{}"\n'}, step_trace=False)
    p = _problem(data, "step_trace_raw_0_detail_time.csv")
    assert (p.reason, p.where) == ("not UTF-8 text", "byte 5")


def test_a_short_step_trace_row_names_the_file(tmp_path):
    data = _dir(tmp_path, {"step_trace_raw_0_detail_time.csv": STEP_TRACE.splitlines()[0]
                           + "\n1,100,200\n",
                           "hccl_raw_0.csv": HCCL_HEAD + '1,0,0,{},"{}"\n'}, step_trace=False)
    p = _problem(data, "step_trace_raw_0_detail_time.csv")
    assert (p.reason, p.where) == ("row has 3 fields, header has 9", "line 2")


def test_a_short_timeline_data_row_names_the_file(tmp_path):
    data = _dir(tmp_path, {"output_timeline_data_0.txt":
                           "op_name, stream_id, start_time(ms), duration(ms)\nDefault/Add-op1,5\n"})
    p = _problem(data, "output_timeline_data_0.txt")
    assert (p.reason, p.where) == ("row has 2 fields, expected 4", "line 2")


def test_a_cluster_analyse_without_breakdown_columns_is_a_problem(tmp_path):
    data = _dir(tmp_path, {"ascend_cluster_analyse_pipeline-parallel_2_4_0.csv":
                           "step,something\n1,2\n"})
    p = _problem(data, "ascend_cluster_analyse_pipeline-parallel_2_4_0.csv")
    assert p.reason == "no step breakdown column (computation_time, stage_time, ...)"


def test_an_op_cost_of_three_values_without_link_info_is_read(tmp_path):
    """[step, communication ms, wait ms] is all the reader needs; the link info is optional:
    1.5 ms transit, 0.5 ms wait -> wait ratio 0.5 / 2.0 = 0.25."""
    cost = json.dumps({"stream_41_0_AllReduce-op4582": ["1", 1.5, 0.5]}).replace('"', '""')
    data = _dir(tmp_path, {"hccl_raw_0.csv": HCCL_HEAD + f'1,1.5,0.5,{{}},"{cost}"\n'})
    rows = data.tables[S.COMM_OPS].to_pylist()
    assert [(r["op_name"], r["transit_ns"], r["wait_ns"], r["wait_ratio"]) for r in rows] == [
        ("stream_41_0_AllReduce-op4582", 1_500_000, 500_000, 0.25)]


@pytest.mark.parametrize("cell, reason", [
    ('{""op_a"": [""1"", 1.5]}', "unexpected value for op_a"),
    ('{""op_a"": [""1"", ""x"", 0.5]}', "cost of op_a is not a number: ['x', 0.5]"),
    ("not json", "communication_operator_cost is not JSON"),
], ids=["two-values", "not-a-number", "not-json"])
def test_a_bad_op_cost_names_the_line_and_affects_communication(tmp_path, cell, reason):
    data = _dir(tmp_path, {"hccl_raw_0.csv": HCCL_HEAD + '1,0,0,{},"{}"\n'
                           + f'2,0,0,{{}},"{cell}"\n'})
    p = _problem(data, "hccl_raw_0.csv")
    assert (p.reason, p.where, p.affects) == (reason, "line 3", ("communication",))


def test_an_hccl_raw_without_its_columns_names_the_file(tmp_path):
    data = _dir(tmp_path, {"hccl_raw_0.csv": "step_num,communication_cost\n1,2\n"})
    p = _problem(data, "hccl_raw_0.csv")
    assert p.reason == "missing column(s) step_num / communication_operator_cost"


# ------------------------------------------------------------------ steps, ranks and columns

STEP_TRACE_2 = ("step_num,start_point,end_point,total,fp_point,bp_point,iteration_interval,"
                "fp_and_bp,tail\n1,100,200,100,110,190,10,80,10\n2,300,400,100,310,390,10,80,10\n"
                "-,200,300,100,210,290,10,80,10\n")


def _read(tmp_path: Path, files: dict[str, str], rank: int, device_id: int | None = None):
    d = tmp_path / "profiler"
    d.mkdir()
    for name, text in files.items():
        (d / name).write_text(text)
    return read_source(dataclasses.replace(_rank(d, rank), device_id=device_id))


def test_timeline_kernels_get_the_rank_device_and_step_of_their_start(tmp_path):
    """Rank 3 on device 6, one step [100, 200] ticks = [1000, 2000] ns. Add starts at
    0.0015 ms = 1500 ns: step 1; Mul at 0.003 ms = 3000 ns, after the step's end: no step."""
    data = _read(tmp_path, {
        "step_trace_raw_3_detail_time.csv": STEP_TRACE,
        "output_timeline_data_3.txt": "op_name, stream_id, start_time(ms), duration(ms)\n"
                                      "Default/Add-op1,5,0.0015,0.0001\n"
                                      "Default/Mul-op2,5,0.003,0.0001\n"}, rank=3, device_id=6)
    k = data.tables[S.KERNELS].to_pylist()
    assert [(r["name"], r["start_ns"], r["step"]) for r in k] == [
        ("Default/Add-op1", 1500, 1), ("Default/Mul-op2", 3000, None)]
    assert {(r["rank"], r["device_id"]) for r in k} == {(3, 6)}


def test_cluster_analyse_rows_are_as_many_as_the_step_traces_steps(tmp_path):
    """The step trace has 2 steps, the cluster analyse 2 rows and no average row: both rows
    are steps. The 2nd row lacks stage_time: null there, the rest read (ms -> ns)."""
    data = _read(tmp_path, {
        "step_trace_raw_0_detail_time.csv": STEP_TRACE_2,
        "ascend_cluster_analyse_pipeline-parallel_2_4_0.csv":
            "computation_time,communication_alone_time,stage_time\n1.5,0.5,2.5\n1.0,0.25\n"},
        rank=0)
    rows = data.tables[S.STEP_TRACE].to_pylist()
    assert [(r["step"], r["computing_ns"], r["comm_not_overlapped_ns"], r["stage_ns"])
            for r in rows] == [(1, 1_500_000, 500_000, 2_500_000), (2, 1_000_000, 250_000, None)]


def test_a_damaged_step_trace_affects_the_cluster_step_trace(tmp_path):
    data = _dir(tmp_path, {"step_trace_raw_0_detail_time.csv": "step_num,start_point\n1,x\n",
                           "hccl_raw_0.csv": HCCL_HEAD + '1,0,0,{},"{}"\n'}, step_trace=False)
    p = _problem(data, "step_trace_raw_0_detail_time.csv")
    assert p.affects == ("cluster_step_trace",)


def test_an_empty_hccl_raw_is_a_problem_saying_so(tmp_path):
    p = _problem(_dir(tmp_path, {"hccl_raw_0.csv": ""}), "hccl_raw_0.csv")
    assert (p.reason, p.affects) == ("empty file", ("communication",))


def test_an_op_cost_that_is_a_list_names_the_file_and_line(tmp_path):
    data = _dir(tmp_path, {"hccl_raw_0.csv": HCCL_HEAD + '1,0,0,{},"[1, 2]"\n'})
    p = _problem(data, "hccl_raw_0.csv")
    assert (p.reason, p.where) == ("communication_operator_cost is not a JSON object", "line 2")


def test_a_timeline_start_that_is_no_number_names_the_file_and_line(tmp_path):
    data = _dir(tmp_path, {"output_timeline_data_0.txt":
                           "op_name, stream_id, start_time(ms), duration(ms)\n"
                           "Default/Add-op1,5,0.001,0.001\nDefault/Add-op2,5,abc,0.001\n"})
    p = _problem(data, "output_timeline_data_0.txt")
    assert (p.reason, p.where) == ("not a number: 'abc'", "line 3")


@pytest.mark.parametrize("text, name", [
    # full_op_name wins over full_kernel_name, wherever the columns stand
    ("full_kernel_name,execution_time,full_op_name\nk1,0.002,Default/Add-op1\n",
     "Default/Add-op1"),
    # full_kernel_name, not the first column
    ("execution_time,full_kernel_name\n0.002,Default/Add-op1\n", "Default/Add-op1"),
], ids=["full-op-name", "full-kernel-name-second"])
def test_aicore_detail_takes_the_op_name_column(tmp_path, text, name):
    data = _dir(tmp_path, {"aicore_intermediate_0_detail.csv": text})
    (k,) = data.tables[S.KERNELS].to_pylist()
    # 0.002 ms = 2000 ns; Default/Add-op1 -> op type Add
    assert (k["name"], k["op_type"], k["dur_ns"]) == (name, "Add", 2000)
