"""ASCEND_PROFILER_OUTPUT text readers (spec §A) on real torch_npu output.

Expected values are the profiler's own text, read here with the csv and decimal modules, or
hand conversions written out below.
"""

from __future__ import annotations

import csv
import json
import shutil
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pytest

from ascendprof.model import schemas as S
from ascendprof.model.errors import InputError
from ascendprof.model.problems import Problems
from ascendprof.readers import ascend_output as AO
from ascendprof.readers.ascend_output import read_output_dir
from ascendprof.scan import MS_TEXT, TORCH_TEXT, one_per_rank, scan

OUT = "ASCEND_PROFILER_OUTPUT"


def _out(root: Path, rank_dir: str) -> Path:
    return root / rank_dir / OUT


def _rows(path: Path) -> list[dict]:
    with open(path, newline="", encoding="utf-8-sig") as f:
        return list(csv.DictReader(f))


def _source(root: Path, rank: int):
    found = one_per_rank(scan(root, Problems()), Problems())
    return next(s for s in found if s.rank == rank)


# ----------------------------------------------------------------------------- kernel_details

def test_qwen3_kernel_details_rows_exact_start_and_total_duration(qwen3):
    path = _out(qwen3, "rank_0_ascend_pt") / "kernel_details.csv"
    t = AO.read_kernel_details(path, 0)
    assert t.num_rows == 2463
    rows = _rows(path)
    # The first data row as the profiler wrote it: 16 integer digits, 3 decimals, trailing TAB.
    assert rows[0]["Start Time(us)"] == "1764246877073569.640\t"
    assert t["start_ns"][0].as_py() == 1_764_246_877_073_569_640
    assert rows[1]["Start Time(us)"] == "1764246877077343.740\t"
    assert t["start_ns"][1].as_py() == 1_764_246_877_077_343_740
    # Total duration: exact decimal sum of the CSV text, in ns.
    total_us = sum(Decimal(r["Duration(us)"].strip()) for r in rows)
    total_ns = total_us * 1000
    assert total_ns == total_ns.to_integral_value()
    assert sum(t["dur_ns"].to_pylist()) == int(total_ns)
    # Wait Time is written with 6 decimals on some rows ("1881.080000").
    assert rows[1]["Wait Time(us)"] == "1881.080000"
    assert t["wait_ns"][1].as_py() == 1_881_080


def test_qwen3_kernel_details_columns(qwen3):
    path = _out(qwen3, "rank_0_ascend_pt") / "kernel_details.csv"
    t = AO.read_kernel_details(path, 0)
    rows = _rows(path)
    assert t.schema.names[:len(S.SCHEMAS[S.KERNELS])] == S.SCHEMAS[S.KERNELS].names
    assert set(t["step"].to_pylist()) == {13}            # Step Id
    assert set(t["device_id"].to_pylist()) == {0}
    assert t["rank"].type == pa.int32() and set(t["rank"].to_pylist()) == {0}
    # 'Block Dim' / 'Mix Block Dim' are this version's names for Block Num / Mix Block Num
    assert "Block Dim" in rows[0] and "Block Num" not in rows[0]
    assert t["block_num"][0].as_py() == 40 and t["mix_block_num"][0].as_py() == 0
    # shapes lose the quotes torch_npu wraps them in ("\"375815680\"" in the text)
    assert rows[0]["Input Shapes"] == '"375815680"'
    assert t["input_shapes"][0].as_py() == "375815680"
    # every column after Context ID is a PMU metric, kept as float64 pmu:<name>
    header = list(rows[0])
    pmu = header[header.index("Context ID") + 1:]
    assert len(pmu) == 25 and "aic_mac_ratio" in pmu and "cube_utilization(%)" in pmu
    assert [c for c in t.column_names if c.startswith("pmu:")] == ["pmu:" + c for c in pmu]
    assert all(t[f"pmu:{c}"].type == pa.float64() for c in pmu)
    assert rows[0]["aiv_time(us)"] == "1883.842"
    assert t["pmu:aiv_time(us)"][0].as_py() == 1883.842
    # communication big ops: Task ID / Stream ID written 'N/A' -> null
    comm = [i for i, r in enumerate(rows) if r["Accelerator Core"] == "COMMUNICATION"]
    assert len(comm) == 15
    assert all(rows[i]["Task ID"] == "N/A" for i in comm)
    assert all(t["task_id"][i].as_py() is None for i in comm)
    assert t["context_id"].null_count == sum(r["Context ID"] == "N/A" for r in rows)


def test_level0_kernel_details(shared_data):
    path = shared_data / "torch_npu-2rank-levels/text/level0/rank0_ascend_pt" / OUT / "kernel_details.csv"
    raw = path.read_bytes()
    assert b"\r\n" in raw  # this real file has CRLF line ends
    rows = _rows(path)
    assert list(rows[0]) == ["Step Id", "Name", "Type", "Accelerator Core", "Start Time(us)",
                             "Duration(us)", "Wait Time(us)", "Block Dim"]
    t = AO.read_kernel_details(path, 0)
    assert t.num_rows == len(rows) == 191
    assert not [c for c in t.column_names if c.startswith("pmu:")]
    assert t["op_type"].null_count == 191                   # Type is 'N/A' at Level0
    cores = t["accelerator_core"].to_pylist()
    assert cores.count("HCCL") == 4 and cores.count(None) == 187
    assert set(t["step"].to_pylist()) == {50}
    assert t["device_id"].null_count == 191                 # no Device_id column
    assert rows[0]["Start Time(us)"] == "1736405443881410.320\t"
    assert t["start_ns"][0].as_py() == 1_736_405_443_881_410_320
    assert rows[1]["Duration(us)"] == "6.28" and t["dur_ns"][1].as_py() == 6_280


@pytest.mark.parametrize("level", ["level1", "level2"])
def test_level1_level2_kernel_details(shared_data, level):
    path = shared_data / f"torch_npu-2rank-levels/text/{level}/rank0_ascend_pt" / OUT / "kernel_details.csv"
    rows = _rows(path)
    header = list(rows[0])
    t = AO.read_kernel_details(path, 0)
    assert t.num_rows == len(rows) == 191
    pmu = header[header.index("Context ID") + 1:]
    assert [c for c in t.column_names if c.startswith("pmu:")] == ["pmu:" + c for c in pmu]
    for i in (0, 100, 190):
        r = rows[i]
        assert t["name"][i].as_py() == r["Name"]
        assert t["op_type"][i].as_py() == (None if r["Type"] == "N/A" else r["Type"])
        assert t["task_id"][i].as_py() == (None if r["Task ID"] == "N/A" else int(r["Task ID"]))
        assert t["dur_ns"][i].as_py() == int(Decimal(r["Duration(us)"]) * 1000)
        whole, frac = r["Start Time(us)"].strip().split(".")
        assert t["start_ns"][i].as_py() == int(whole) * 1000 + int(frac.ljust(3, "0"))
    assert t["accelerator_core"].to_pylist().count("HCCL") == 4


# ----------------------------------------------------------------------------- step_trace_time

def test_step_trace_with_device_id(qwen3):
    # Device_id is the device, not the rank: rank 2 ran on device 4 (rank 3 on 5).
    got = {r: AO.read_step_trace_time(_out(qwen3, f"rank_{r}_ascend_pt") / "step_trace_time.csv", r)
           for r in range(4)}
    assert {r: t["device_id"].to_pylist() for r, t in got.items()} == {0: [0], 1: [1], 2: [4], 3: [5]}
    row = got[0].to_pylist()[0]
    # text: 0,13,231290.09999999995,420174.2600000001,0.0,420174.2600000001,
    #       158558.00000000032,810022.25,0,420174.2600000001,206.25
    assert row == {"rank": 0, "step": 13, "device_id": 0, "computing_ns": 231_290_100,
                   "comm_not_overlapped_ns": 420_174_260, "overlapped_ns": 0,
                   "communication_ns": 420_174_260, "free_ns": 158_558_000, "stage_ns": 810_022_250,
                   "bubble_ns": 0, "comm_not_overlapped_excl_receive_ns": 420_174_260,
                   "preparing_ns": 206_250}
    assert got[2]["computing_ns"][0].as_py() == 400_448_260  # "400448.2599999992"


def test_step_trace_without_device_id(shared_data):
    path = shared_data / "torch_npu-2rank-levels/text/level1/rank0_ascend_pt" / OUT / "step_trace_time.csv"
    assert list(_rows(path)[0])[0] == "Step"
    t = AO.read_step_trace_time(path, 0)
    row = t.to_pylist()[0]
    # text: 50,8873.756000000001,101963.203,4028.6750000000175,105991.87800000001,
    #       25744.050000000003,136581.0,0,101963.203,17902.5
    assert row["device_id"] is None and row["step"] == 50
    assert (row["computing_ns"], row["comm_not_overlapped_ns"], row["overlapped_ns"]) == \
        (8_873_756, 101_963_203, 4_028_675)
    assert (row["communication_ns"], row["free_ns"], row["stage_ns"], row["preparing_ns"]) == \
        (105_991_878, 25_744_050, 136_581_000, 17_902_500)


# ----------------------------------------------------------------------------- other files

def test_statistics_and_memory_files(qwen3, shared_data):
    out = _out(qwen3, "rank_0_ascend_pt")
    op = AO.read_op_statistic(out / "op_statistic.csv", 0).to_pylist()
    # 0,FlashAttentionScoreGrad,MIX_AIC,28,63128.66,2219.14,2254.595,2286.72,27.294
    assert op[0] == {"rank": 0, "device_id": 0, "op_type": "FlashAttentionScoreGrad",
                     "core_type": "MIX_AIC", "count": 28, "total_ns": 63_128_660,
                     "min_ns": 2_219_140, "avg_ns": 2_254_595, "max_ns": 2_286_720,
                     "ratio_pct": 27.294}
    api = AO.read_api_statistic(out / "api_statistic.csv", 0)
    assert api.num_rows == 91
    # host,acl,ApplyAdamWV2_Tiling,666.3,114,5.845,0.25,29.17,34.995
    assert api.to_pylist()[0] == {"rank": 0, "level": "acl", "api_name": "ApplyAdamWV2_Tiling",
                                  "total_ns": 666_300, "count": 114, "avg_ns": 5_845,
                                  "min_ns": 250, "max_ns": 29_170, "variance": 34.995}
    mem = AO.read_memory_record(out / "memory_record.csv", 0)
    assert mem.num_rows == 18659
    # APP,1764246877082702.440\t,,11925.015625,,,NPU:0
    assert mem.to_pylist()[0] == {"rank": 0, "component": "APP", "ts_ns": 1_764_246_877_082_702_440,
                                  "total_allocated_mb": None, "total_reserved_mb": 11925.015625,
                                  "total_active_mb": None, "stream_ptr": None, "device_type": "NPU:0"}
    om = AO.read_operator_memory(out / "operator_memory.csv", 0).to_pylist()
    assert len(om) == 3103
    # aten::empty_strided,0.5,1764246877074330.300\t,1764246877750204.070\t,…,675873.770\t,…
    assert (om[0]["name"], om[0]["size_kb"], om[0]["alloc_ns"], om[0]["release_ns"], om[0]["dur_ns"]) == \
        ("aten::empty_strided", 0.5, 1_764_246_877_074_330_300, 1_764_246_877_750_204_070, 675_873_770)
    nm = AO.read_npu_module_mem(out / "npu_module_mem.csv", 0).to_pylist()
    # 0,SLOG,1764246877076535.790\t,158.65234375,NPU:0
    assert nm[0] == {"rank": 0, "device_id": 0, "component": "SLOG",
                     "ts_ns": 1_764_246_877_076_535_790, "total_reserved_mb": 158.65234375,
                     "device": "NPU:0"}
    # older torch_npu: no Device_id column
    old = shared_data / "torch_npu-2rank-levels/text/level1/rank0_ascend_pt" / OUT / "npu_module_mem.csv"
    t = AO.read_npu_module_mem(old, 0)
    assert t.num_rows == 1078 and t["device_id"].null_count == 1078


def test_read_metadata(qwen3, tmp_path):
    meta = AO.read_metadata(qwen3 / "rank_2_ascend_pt")
    assert meta["profiler_info"]["rank_id"] == "2"  # this torch_npu writes it as a string
    assert meta["profiler_metadata"]["distributed_args"]["world_size"] == 4
    (tmp_path / "profiler_info_0.json").write_text('{"rank_id": 0,')  # truncated
    with pytest.raises(InputError) as e:
        AO.read_metadata(tmp_path)
    assert "profiler_info_0.json" in str(e.value)
    probs = Problems()
    assert AO.read_metadata(tmp_path, probs, rank=0) == {}
    assert len(probs) == 1 and probs.items[0].path.endswith("profiler_info_0.json")


# ----------------------------------------------------------------------------- damaged input

def test_bom_and_crlf_parse_the_same(qwen3, tmp_path):
    src = _out(qwen3, "rank_0_ascend_pt") / "kernel_details.csv"
    text = src.read_bytes()
    assert not text.startswith(b"\xef\xbb\xbf") and b"\r\n" not in text
    dst = tmp_path / "kernel_details.csv"
    dst.write_bytes(b"\xef\xbb\xbf" + text.replace(b"\n", b"\r\n"))
    assert AO.read_kernel_details(dst, 0).equals(AO.read_kernel_details(src, 0))
    st = _out(qwen3, "rank_0_ascend_pt") / "step_trace_time.csv"
    dst2 = tmp_path / "step_trace_time.csv"
    dst2.write_bytes(b"\xef\xbb\xbf" + st.read_bytes().replace(b"\n", b"\r\n"))
    assert AO.read_step_trace_time(dst2, 0).equals(AO.read_step_trace_time(st, 0))


def _drop_column(src: Path, dst: Path, column: str) -> None:
    rows = list(csv.reader(open(src, newline="", encoding="utf-8")))
    i = rows[0].index(column)
    with open(dst, "w", newline="", encoding="utf-8") as f:
        csv.writer(f, lineterminator="\n").writerows([r[:i] + r[i + 1:] for r in rows])


def test_missing_required_column(qwen3, tmp_path):
    out = _out(qwen3, "rank_0_ascend_pt")
    for fname, column, parse in [("kernel_details.csv", "Duration(us)", AO.read_kernel_details),
                                 ("step_trace_time.csv", "Computing", AO.read_step_trace_time),
                                 ("op_statistic.csv", "Count", AO.read_op_statistic)]:
        dst = tmp_path / fname
        _drop_column(out / fname, dst, column)
        with pytest.raises(InputError) as e:
            parse(dst, 0)
        assert str(dst) in str(e.value) and column in str(e.value)


def test_non_numeric_cell_names_file_column_and_row(qwen3, tmp_path):
    src = _out(qwen3, "rank_0_ascend_pt") / "kernel_details.csv"
    rows = list(csv.reader(open(src, newline="", encoding="utf-8")))
    col = rows[0].index("Duration(us)")
    rows[5][col] = "12.5x"   # 5th data row
    dst = tmp_path / "kernel_details.csv"
    with open(dst, "w", newline="", encoding="utf-8") as f:
        csv.writer(f, lineterminator="\n").writerows(rows)
    with pytest.raises(InputError) as e:
        AO.read_kernel_details(dst, 0)
    msg = str(e.value)
    assert str(dst) in msg and "Duration(us)" in msg and "data row 5" in msg and "12.5x" in msg
    # a PMU column is numeric too
    rows[5][col] = "1.0"
    rows[7][rows[0].index("aic_mac_ratio")] = "high"
    with open(dst, "w", newline="", encoding="utf-8") as f:
        csv.writer(f, lineterminator="\n").writerows(rows)
    with pytest.raises(InputError, match=r"data row 7.*aic_mac_ratio|aic_mac_ratio.*high"):
        AO.read_kernel_details(dst, 0)


# ----------------------------------------------------------------------------- whole source

def test_torch_text_read_qwen3_rank0(qwen3):
    src = _source(qwen3, 0)
    assert src.kind == TORCH_TEXT
    data = read_output_dir(src)
    assert data.rank == 0
    for name in (S.KERNELS, S.STEP_TRACE, S.OP_STATISTIC, S.API_STATISTIC, S.MEMORY_RECORD,
                 S.OPERATOR_MEMORY, S.NPU_MODULE_MEM):
        assert data.has(name), name
    assert data.tables[S.KERNELS].num_rows == 2463
    assert data.missing == ["trace_view.json"]     # not published for this rank
    assert data.meta["profiler_info"]["rank_id"] == "0"
    # no trace_view -> STEPS from the kernels' Step Id span, computed here from the CSV text
    rows = _rows(_out(qwen3, "rank_0_ascend_pt") / "kernel_details.csv")
    start = min(Decimal(r["Start Time(us)"].strip()) for r in rows)
    end = max(Decimal(r["Start Time(us)"].strip()) + Decimal(r["Duration(us)"]) for r in rows)
    assert data.tables[S.STEPS].to_pylist() == [
        {"rank": 0, "step": 13, "start_ns": int(start * 1000), "end_ns": int(end * 1000),
         "origin": "kernel Step Id span"}]
    # communication.json: one COMM_OPS row per op of the file (json module), 'Total Op Info'
    # entries left out, and no problem recorded for it
    doc = json.loads((_out(qwen3, "rank_0_ascend_pt") / "communication.json").read_text())
    ops = [(int(step[4:]), key.split("@")[0]) for step, kinds in doc.items()
           for kind in kinds.values() for key in kind if not key.startswith("Total Op Info")]
    got = data.tables[S.COMM_OPS]
    assert list(zip(got["step"].to_pylist(), got["op_name"].to_pylist())) == ops and len(ops) > 10
    assert not [p for p in data.problems if "communication" in p.path]


def test_ranks_without_kernel_details(qwen3):
    data = read_output_dir(_source(qwen3, 1))
    assert data.has(S.STEP_TRACE) and not data.has(S.KERNELS)
    assert data.missing == ["trace_view.json", "kernel_details.csv", "op_statistic.csv"]


def test_damaged_file_is_recorded_and_rest_is_read(qwen3, tmp_path):
    src_dir = qwen3 / "rank_0_ascend_pt"
    d = tmp_path / "rank_0_ascend_pt"
    (d / OUT).mkdir(parents=True)
    shutil.copy(src_dir / "profiler_info_0.json", d)
    shutil.copy(src_dir / OUT / "kernel_details.csv", d / OUT)
    _drop_column(src_dir / OUT / "step_trace_time.csv", d / OUT / "step_trace_time.csv", "Free")
    data = read_output_dir(_source(tmp_path, 0))
    assert data.tables[S.KERNELS].num_rows == 2463
    assert S.STEP_TRACE not in data.tables
    (p,) = [p for p in data.problems if p.path.endswith("step_trace_time.csv")]
    assert "Free" in p.reason and p.rank == 0 and "cluster_step_trace" in p.affects
    assert set(data.missing) == {"trace_view.json", "communication.json",
                                 "communication_matrix.json", "op_statistic.csv"}


def test_assign_steps_when_kernels_have_no_step_id(qwen3, tmp_path):
    dst = tmp_path / "kernel_details.csv"
    _drop_column(_out(qwen3, "rank_0_ascend_pt") / "kernel_details.csv", dst, "Step Id")
    k = AO.read_kernel_details(dst, 0)
    assert k["step"].null_count == k.num_rows
    starts = sorted(k["start_ns"].to_pylist())
    # two hand-made windows: the first 100 kernels are step 1, the rest step 2
    steps = S.conform(S.STEPS, pa.table({
        "rank": pa.array([0, 0], pa.int32()), "step": pa.array([1, 2], pa.int32()),
        "start_ns": [starts[0], starts[100]], "end_ns": [starts[99], starts[-1] + 1]}))
    got = AO.assign_steps(k, steps)["step"].to_pylist()
    assert got.count(1) == 100 and got.count(2) == k.num_rows - 100


def test_mindspore_layout(qwen3, shared_data, tmp_path):
    # No real MindSpore 2.3+ *_ascend_ms output is public (shared/data README). This input is
    # real torch_npu text changed the way MindSpore writes it (spec §A.1: step_trace_time.csv
    # without Device_id; MindSpore's kernel details viewer drops Device_id and names the step
    # column 'Step ID').
    d = tmp_path / "host_1_ascend_ms"
    (d / OUT).mkdir(parents=True)
    (d / "profiler_info_3.json").write_text(json.dumps({"rank_id": 3}))
    shutil.copy(shared_data / "torch_npu-2rank-levels/text/level1/rank0_ascend_pt" / OUT /
                "step_trace_time.csv", d / OUT)
    kd = d / OUT / "kernel_details.csv"
    _drop_column(_out(qwen3, "rank_0_ascend_pt") / "kernel_details.csv", kd, "Device_id")
    kd.write_text(kd.read_text(encoding="utf-8").replace("Step Id,", "Step ID,", 1), encoding="utf-8")
    src = _source(tmp_path, 3)
    assert src.kind == MS_TEXT
    data = read_output_dir(src)
    k = data.tables[S.KERNELS]
    assert k.num_rows == 2463 and set(k["step"].to_pylist()) == {13}
    assert k["device_id"].null_count == 2463 and set(k["rank"].to_pylist()) == {3}
    assert data.tables[S.STEP_TRACE]["device_id"].to_pylist() == [None]
