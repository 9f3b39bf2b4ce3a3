"""readers/ascend_output.py through the user's path (``read_source``) on copies of a real Level1
rank (fixtures/torch_npu-static-graph-mem/rank0_ascend_pt, torch_npu 2025-01) and a real Level0
rank of the shared data, each changed the way a damaged, spreadsheet-edited or very large file
would be. Expected values are worked out by hand from the file's text in the comments, never
taken from the code's output."""

from __future__ import annotations

import math
import shutil

import pytest

from ascendprof.model import schemas as S
from ascendprof.model.options import ReadOptions
from ascendprof.model.problems import Problems
from ascendprof.readers import ascend_output as AO
from ascendprof.readers import read_source
from ascendprof.scan import scan
from ascendprof.sysio import bigtables, textio
from conftest import FIXTURES

RANK0 = FIXTURES / "torch_npu-static-graph-mem" / "rank0_ascend_pt"
OUT = "ASCEND_PROFILER_OUTPUT"


def _copy(tmp_path, src=RANK0, name="rank0_ascend_pt"):
    rank_dir = tmp_path / name
    shutil.copytree(src, rank_dir)
    return rank_dir


def _read(rank_dir, options=None):
    return read_source(next(s for s in scan(rank_dir, Problems()) if s.rank == 0), options)


def _lines(path):
    return path.read_bytes().split(b"\n")


def _problems(data, fname):
    return [p for p in data.problems.items if str(p.path).endswith(fname)]


@pytest.fixture
def spill_all(monkeypatch, tmp_path):
    """Spilling on (as the engine opens it for a run), every input file counted as large."""
    monkeypatch.setattr(bigtables, "SPILL_BYTES", 1)
    monkeypatch.setattr(textio, "STREAM_BLOCK_BYTES", 16 << 10)
    with bigtables.spilling(tmp_path / "scratch"):
        (tmp_path / "scratch").mkdir()
        yield


def test_a_shape_that_is_only_the_wrapping_quotes_is_an_empty_shape(tmp_path):
    # kernel_details.csv line 63 (Task ID 11112, aclnnMuls_MulAiCore_Mul, a tensor times a
    # scalar): Input Shapes is written """;""" and Output Shapes """""" . As CSV (doubled
    # quotes) the cells are  ";"  and  ""  : torch_npu's wrapping quotes around the shapes
    # ";" (two inputs, the second a scalar) and "" (a scalar output, no dimensions).
    # Unwrapped: ";" and the empty text.
    data = _read(RANK0)
    k = data.tables[S.KERNELS]
    (row,) = [r for r in k.select(["task_id", "name", "input_shapes", "output_shapes"])
              .to_pylist() if r["task_id"] == 11112]
    assert row["name"] == "aclnnMuls_MulAiCore_Mul"
    assert row["input_shapes"] == ";"
    assert row["output_shapes"] == ""
    # line 2, the first kernel: """32,3,224,224""" -> 32,3,224,224
    assert k["input_shapes"][0].as_py() == "32,3,224,224"


# pyarrow cannot decode the broken row to hand it to the bad-row handler and reports that as an
# unraisable exception; the reader records the problem all the same (what this test checks)
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_a_cut_row_of_broken_text_in_a_large_kernel_details_is_a_recorded_problem(
        tmp_path, spill_all):
    # a kernel_details.csv read in batches (a file too large to hold) whose line 6 was cut
    # short and ends in bytes that are not UTF-8 (a copy interrupted mid-character): the
    # file is reported as damaged, the rank's other files are still read, nothing raises
    rank_dir = _copy(tmp_path)
    kd = rank_dir / OUT / "kernel_details.csv"
    lines = _lines(kd)
    # line 6 cut after "50,4294967295,11055,2,aclnnInplaceRelu_Relu_Relu,Relu,dynamic," (7 of
    # 46 fields) and the first two bytes of a three-byte character (an 8th field)
    lines[5] = lines[5][:lines[5].index(b"dynamic,") + 8] + b"\xe7\xae"
    kd.write_bytes(b"\n".join(lines))
    data = _read(rank_dir)
    (p,) = _problems(data, "kernel_details.csv")
    # the file is left out (not read: "skipped"), with the analyses it feeds
    assert p.severity == "skipped" and "op_statistics" in p.affects
    assert S.KERNELS not in data.tables
    # the other files of the rank: step_trace_time.csv has its one step, 50
    assert data.tables[S.STEP_TRACE]["step"].to_pylist() == [50]


def test_spreadsheet_times_in_a_step_trace_read_in_batches_are_reported(tmp_path, monkeypatch):
    # step_trace_time.csv read in batches (SPILL_BYTES 0: every simple table counts as large)
    # with its Computing cell 8873.756000000001 rewritten by a spreadsheet as 8.87376E+03:
    # one warning naming the column, the value read as written: 8873.76 us = 8 873 760 ns
    monkeypatch.setattr(bigtables, "SPILL_BYTES", 0)
    rank_dir = _copy(tmp_path)
    st = rank_dir / OUT / "step_trace_time.csv"
    st.write_text(st.read_text(encoding="utf-8").replace("8873.756000000001", "8.87376E+03"),
                  encoding="utf-8")
    data = _read(rank_dir)
    assert data.tables[S.STEP_TRACE]["computing_ns"].to_pylist() == [8_873_760]
    (p,) = _problems(data, "step_trace_time.csv")
    assert p.severity == "warning"
    assert "'Computing'" in p.reason and "1 value(s) in E-notation" in p.reason
    assert "8.87376E+03" in p.reason


def test_a_metric_column_starting_with_infinity_is_kept_as_a_number(tmp_path, spill_all):
    # aic_mac_ratio of the first kernel (line 2) written "Infinity" (how Java and JavaScript
    # print a ratio over a zero time; Python's float() reads it as inf): the column is a
    # metric, a number in every row, and stays one -- as the reading in batches keeps it
    rank_dir = _copy(tmp_path)
    kd = rank_dir / OUT / "kernel_details.csv"
    lines = _lines(kd)
    head = lines[0].decode().split(",")
    col = head.index("aic_mac_ratio")
    cells = lines[1].decode().split(",")
    # line 2's cells split on commas: the quoted shapes hold commas too, so the PMU column is
    # found counting from the end of the line (no quoted cell follows the shapes)
    from_end = len(head) - col
    second = float(lines[2].decode().split(",")[-from_end])
    cells[-from_end] = "Infinity"
    lines[1] = ",".join(cells).encode()
    kd.write_bytes(b"\n".join(lines))
    whole = AO.read_kernel_details(kd, 0)
    got = whole["pmu:aic_mac_ratio"].to_pylist()
    assert math.isinf(got[0]) and got[0] > 0 and got[1] == second
    # the same file read in batches (read_source: spilling on) agrees
    data = _read(rank_dir)
    assert data.spilled[S.KERNELS].read()["pmu:aic_mac_ratio"].to_pylist()[:2] == got[:2]


def test_a_cut_row_of_npu_module_mem_is_left_out_and_the_rest_read(tmp_path):
    # npu_module_mem.csv: header and then rows "SLOG,<us>\t,0.0,NPU:0" ...; data row 3 (line 4)
    # cut after its first field: that row is left out and reported (skipped), every other row
    # is read
    rank_dir = _copy(tmp_path)
    f = rank_dir / OUT / "npu_module_mem.csv"
    lines = f.read_text(encoding="utf-8").splitlines()
    n_rows = len(lines) - 1
    lines[3] = lines[3].split(",")[0]
    f.write_text("\n".join(lines) + "\n", encoding="utf-8")
    data = _read(rank_dir)
    t = data.tables[S.NPU_MODULE_MEM]
    assert t.num_rows == n_rows - 1
    # the first row as written: SLOG,1736408883657086.220\t,0.0,NPU:0
    assert t.slice(0, 1).select(["component", "ts_ns", "total_reserved_mb"]).to_pylist() == [
        {"component": "SLOG", "ts_ns": 1736408883657086220, "total_reserved_mb": 0.0}]
    (p,) = _problems(data, "npu_module_mem.csv")
    assert p.severity == "skipped" and "1 row(s) left out" in p.reason
    assert "1 field(s) where the header has 4" in p.reason and p.where == "line 4"


def test_large_kernels_without_step_id_get_their_steps_from_the_timeline_on_disk_too(
        tmp_path, shared_data, spill_all):
    # a real Level0 rank (torch_npu, step 50 collected) whose kernel_details.csv lost its Step Id
    # column (as releases without a schedule write it), read with the timeline and spilled: the
    # kernels inside trace_view.json's ProfilerStep#50 window get step 50 in the table kept in
    # memory and in the spilled file alike. The profiler's own Step Id column, dropped here,
    # says 50 on all 191 rows (`cut -d, -f1 kernel_details.csv | sort | uniq -c`).
    src = shared_data / "torch_npu-2rank-levels" / "text" / "level0" / "rank0_ascend_pt"
    rank_dir = tmp_path / "rank0_ascend_pt"
    (rank_dir / OUT).mkdir(parents=True)
    for f in src.iterdir():
        if f.is_file():
            shutil.copy(f, rank_dir)
    for name in ("trace_view.json", "step_trace_time.csv"):
        shutil.copy(src / OUT / name, rank_dir / OUT)
    rows = (src / OUT / "kernel_details.csv").read_text(encoding="utf-8").splitlines()
    assert rows[0].startswith("Step Id,") and {r.split(",", 1)[0] for r in rows[1:]} == {"50"}
    (rank_dir / OUT / "kernel_details.csv").write_text(
        "\n".join(r.split(",", 1)[1] for r in rows) + "\n", encoding="utf-8")
    data = _read(rank_dir, ReadOptions(timeline=True))
    assert S.KERNELS in data.spilled
    assert 50 in data.tables[S.STEPS]["step"].to_pylist()
    on_disk = data.spilled[S.KERNELS].read()
    assert on_disk.num_rows == len(rows) - 1 == 191
    assert on_disk["step"].to_pylist() == [50] * 191
    assert data.tables[S.KERNELS]["step"].to_pylist() == [50] * 191
