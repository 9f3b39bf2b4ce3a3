"""readers/ascend_output.py: the survivors of mutation seed 42, and the same gaps elsewhere,
through the user's path (``read_source``) on copies of a real Level1 rank
(fixtures/torch_npu-static-graph-mem/rank0_ascend_pt, torch_npu 2025-01): a large
kernel_details.csv (read in batches, spilled) with negative durations gets the same "left out"
problem as a whole-file read; a damaged npu_module_mem.csv or static_op_mem.csv is a problem
that names that file; a large step_trace_time.csv is read a few MB at a time, never held whole
in memory, and when read in many batches names the data row of a bad cell counting the earlier
batches and sums its E-notation cells into one warning. Expected values are worked out by hand
from the file's text in the comments, never taken from the code's output."""

from __future__ import annotations

import tracemalloc

import pytest

from ascendprof.model import schemas as S
from ascendprof.readers import ascend_output as AO
from ascendprof.sysio import bigtables, textio
from test_ascend_output_paths import OUT, RANK0, _copy, _read
from test_ascend_output_seed38 import _problems


@pytest.fixture
def spill_all(monkeypatch, tmp_path):
    """Spilling on (as the engine opens it for a run), every input file counted as large."""
    monkeypatch.setattr(bigtables, "SPILL_BYTES", 1)
    monkeypatch.setattr(textio, "STREAM_BLOCK_BYTES", 16 << 10)
    with bigtables.spilling(tmp_path / "scratch"):
        (tmp_path / "scratch").mkdir()
        yield


def test_negative_durations_in_a_large_kernel_details_are_left_out_and_reported(
        tmp_path, spill_all):
    # kernel_details.csv: 192 lines, header + 191 kernels. Line 2 (trans_TransData_0) has
    # Duration(us) 53.741 and line 4 (Conv2D1) 313.886, each the only such cell in the file;
    # both written negative. Read in batches (spilled), the two rows are left out (189 kept)
    # and one problem says so, naming the first: -53.741 us.
    rank_dir = _copy(tmp_path)
    kd = rank_dir / OUT / "kernel_details.csv"
    text = kd.read_text(encoding="utf-8")
    assert text.count("\n") == 192 and text.count(",53.741,") == 1 \
        and text.count(",313.886,") == 1
    kd.write_text(text.replace(",53.741,", ",-53.741,").replace(",313.886,", ",-313.886,"),
                  encoding="utf-8")
    data = _read(rank_dir)
    assert S.KERNELS in data.spilled  # the large-file path
    assert data.tables[S.KERNELS].num_rows == 191 - 2
    assert data.spilled[S.KERNELS].num_rows == 191 - 2
    (p,) = _problems(data, "kernel_details.csv")
    assert p.reason == ("2 row(s) with a negative duration left out "
                        "(e.g. 'trans_TransData_0': -53.741 us)")
    assert p.severity == "skipped"
    assert p.where == "column Duration(us)"
    assert p.rank == 0


def test_npu_module_mem_without_total_reserved_is_a_problem_of_that_file(tmp_path):
    # npu_module_mem.csv with neither Total Reserved(MB) (torch_npu) nor Total Reserved(KB)
    # (CANN): the file is refused, and the problem names it and the missing column
    rank_dir = _copy(tmp_path)
    (rank_dir / OUT / "npu_module_mem.csv").write_text(
        "Component,Timestamp(us),Device\n"
        "APP,1736408883657086.220\t,NPU:0\n", encoding="utf-8")
    data = _read(rank_dir)
    assert S.NPU_MODULE_MEM not in data.tables
    (p,) = _problems(data, "npu_module_mem.csv")
    assert p.path == str(rank_dir / OUT / "npu_module_mem.csv")
    assert p.reason == "missing column(s) Total Reserved(MB)"


def test_text_in_a_total_reserved_kb_cell_is_a_problem_of_that_file(tmp_path):
    # the CANN spelling Total Reserved(KB); data row 2's value written 'lots' (not a number):
    # the file is refused with a problem naming it, the column, the cell and data row 2
    rank_dir = _copy(tmp_path)
    (rank_dir / OUT / "npu_module_mem.csv").write_text(
        "Component,Timestamp(us),Total Reserved(KB),Device\n"
        "APP,1736408883657086.220\t,2048,NPU:0\n"
        "HCCL,1736408883677036.730\t,lots,NPU:0\n", encoding="utf-8")
    data = _read(rank_dir)
    assert S.NPU_MODULE_MEM not in data.tables
    (p,) = _problems(data, "npu_module_mem.csv")
    assert p.path == str(rank_dir / OUT / "npu_module_mem.csv")
    assert "'Total Reserved(KB)'" in p.reason and "'lots'" in p.reason
    assert p.where == "data row 2"


def test_a_large_step_trace_time_is_never_held_whole_in_memory(tmp_path, monkeypatch):
    # a step_trace_time.csv of ~24 MB (the real file's header, its one data row repeated
    # with Step 1..n) with the large-file threshold at 1 MB: it is read a few MB at a time
    # (4 MB batches, by Arrow outside Python's heap), so the Python heap never holds the
    # file's bytes: its peak stays well under the file size. Whole, it would be >= 24 MB.
    monkeypatch.setattr(bigtables, "SPILL_BYTES", 1 << 20)
    src = (RANK0 / OUT / "step_trace_time.csv").read_text(encoding="utf-8").splitlines()
    assert src[1].startswith("50,8873.756000000001,")
    rest = src[1][len("50"):]
    n = 24_000_000 // len(src[1])
    path = tmp_path / "step_trace_time.csv"
    with open(path, "w", encoding="utf-8") as f:
        f.write(src[0] + "\n")
        f.writelines(f"{i}{rest}\n" for i in range(1, n + 1))
    size = path.stat().st_size
    assert size >= 24_000_000 - len(src[1])
    tracemalloc.start()
    try:
        got = AO.read_step_trace_time(path, 0)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < size // 3, (peak, size)
    assert got.num_rows == n
    # every row's Computing 8873.756000000001 us -> 8873756 ns; Step 1..n
    assert got["step"][0].as_py() == 1 and got["step"][n - 1].as_py() == n
    assert got["computing_ns"].unique().to_pylist() == [8_873_756]


# ---- the same kinds of gaps at other places: another file's "neither unit" problem, and the
# data row / E-notation count of a large simple table read in several batches


def test_static_op_mem_without_a_size_column_is_a_problem_of_that_file(tmp_path):
    # static_op_mem.csv with neither Size(KB) (torch_npu) nor Size(MB): refused, the problem
    # names the file and the missing column
    rank_dir = _copy(tmp_path)
    (rank_dir / OUT / "static_op_mem.csv").write_text(
        "Device_id,Op Name,Model Name,Graph ID,Node Index Start,Node Index End\n"
        "host,sqrt_01,0,0,31,32\n", encoding="utf-8")
    data = _read(rank_dir)
    assert S.STATIC_OP_MEM not in data.tables
    (p,) = _problems(data, "static_op_mem.csv")
    assert p.path == str(rank_dir / OUT / "static_op_mem.csv")
    assert p.reason == "missing column(s) Size(KB)"


def _many_steps(rank_dir, computing: dict[int, str], n: int = 200):
    """step_trace_time.csv of the real header and data row, the row repeated as Steps 1..n,
    data row i's Computing written ``computing[i]`` where given."""
    st = rank_dir / OUT / "step_trace_time.csv"
    head, row = st.read_text(encoding="utf-8").splitlines()[:2]
    assert row.startswith("50,8873.756000000001,")
    rest = row[len("50,8873.756000000001"):]
    st.write_text(head + "\n" + "".join(
        f"{i},{computing.get(i, '8873.756000000001')}{rest}\n" for i in range(1, n + 1)),
        encoding="utf-8")
    return st


@pytest.fixture
def small_batches(monkeypatch):
    """Every simple table read in batches (SPILL_BYTES 1), each batch ~1 KB of text (about 7
    of these ~140-byte rows), so 200 rows are read in some 30 batches."""
    monkeypatch.setattr(bigtables, "SPILL_BYTES", 1)
    monkeypatch.setattr(AO, "_BATCH_BYTES", 1 << 10)


def test_text_late_in_a_large_step_trace_time_names_its_data_row(tmp_path, small_batches):
    # data row 150's Computing written 'lots': the problem counts the rows of the batches
    # before it, naming data row 150 (file line 151)
    rank_dir = _copy(tmp_path)
    _many_steps(rank_dir, {150: "lots"})
    data = _read(rank_dir)
    assert S.STEP_TRACE not in data.tables
    (p,) = _problems(data, "step_trace_time.csv")
    assert p.path == str(rank_dir / OUT / "step_trace_time.csv")
    assert "'Computing'" in p.reason and "'lots'" in p.reason
    assert p.where == "data row 150"


def test_e_notation_in_several_batches_of_a_step_trace_time_is_one_warning(tmp_path,
                                                                           small_batches):
    # data rows 30 and 150 (different batches) hold Computing in E-notation, 8.87375E+03 and
    # 8.87377E+03 us: one warning for the column counting both, the first as example; the
    # values read as written: 8873.75 us = 8873750 ns, 8873.77 us = 8873770 ns
    rank_dir = _copy(tmp_path)
    _many_steps(rank_dir, {30: "8.87375E+03", 150: "8.87377E+03"})
    data = _read(rank_dir)
    comp = data.tables[S.STEP_TRACE]["computing_ns"].to_pylist()
    assert len(comp) == 200
    assert comp[29] == 8_873_750 and comp[149] == 8_873_770
    assert set(comp[:29] + comp[30:149] + comp[150:]) == {8_873_756}
    (p,) = _problems(data, "step_trace_time.csv")
    assert p.severity == "warning"
    assert p.reason.startswith("column 'Computing': 2 value(s) in E-notation "
                               "(e.g. 8.87375E+03), precision lost")
