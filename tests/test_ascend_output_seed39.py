"""readers/ascend_output.py seed-39 survivors, through the user's path (``read_source``) on
copies of real ranks changed by hand: the Level1 torch_npu rank of
fixtures/torch_npu-static-graph-mem (rank0_ascend_pt, torch_npu 2025-01) and the Level0 rank 0
of ../shared/data/torch_npu-2rank-levels. Checked: the problem recorded for a Step that is not
an integer or is beyond int64, trace_view.json read when kernel_details.csv holds no
communication but step_trace_time.csv reports some, and the older units of the memory CSVs
(npu_module_mem.csv in KB, static_op_mem.csv in MB) read as the current ones. Expected values
are worked out from the files' text in the comments."""

from __future__ import annotations

import math
import os
import shutil

from ascendprof.model import schemas as S
from ascendprof.model.problems import Problems
from ascendprof.readers import read_source
from ascendprof.scan import scan
from conftest import FIXTURES

RANK0 = FIXTURES / "torch_npu-static-graph-mem" / "rank0_ascend_pt"
OUT = "ASCEND_PROFILER_OUTPUT"


def _copy(tmp_path, src=RANK0):
    rank_dir = tmp_path / src.name
    shutil.copytree(src, rank_dir, copy_function=shutil.copyfile)
    for d, _, _ in os.walk(rank_dir):  # the shared data is read-only: make the copy writable
        os.chmod(d, 0o755)
    return rank_dir


def _read(rank_dir):
    return read_source(next(s for s in scan(rank_dir, Problems()) if s.rank == 0))


def _problems(data, fname):
    return [p for p in data.problems.items if str(p.path).endswith(fname)]


def _set_step(rank_dir, cell):
    # step_trace_time.csv: the header and one data row, whose first cell is its Step, 50
    st = rank_dir / OUT / "step_trace_time.csv"
    header, row = st.read_text(encoding="utf-8").splitlines()
    assert header.split(",")[0] == "Step" and row.split(",")[0] == "50"
    st.write_text(f"{header}\n{cell}{row[2:]}\n", encoding="utf-8")


def test_a_step_with_a_fraction_is_named_not_an_integer(tmp_path):
    # Step 50 written as 50.5: not an integer (an integral 50.0 would be read as 50); the file
    # is refused with the column, the cell and its data row named; the rest of the rank is read
    rank_dir = _copy(tmp_path)
    _set_step(rank_dir, "50.5")
    data = _read(rank_dir)
    assert S.STEP_TRACE not in data.tables and S.KERNELS in data.tables
    (p,) = _problems(data, "step_trace_time.csv")
    assert p.reason == "column 'Step': not an integer: '50.5'"
    assert p.where == "data row 1" and p.rank == 0
    assert set(p.affects) == {"cluster_step_trace", "step_breakdown"}


def test_a_step_beyond_int64_is_named_out_of_range(tmp_path):
    # Step 9223372036854775808 = 2**63, one more than the largest int64: written as digits it
    # is an integer, but none that fits; the file is refused saying so
    assert 2**63 == 9223372036854775808
    rank_dir = _copy(tmp_path)
    _set_step(rank_dir, "9223372036854775808")
    data = _read(rank_dir)
    assert S.STEP_TRACE not in data.tables
    (p,) = _problems(data, "step_trace_time.csv")
    assert p.reason == "column 'Step': integer out of range"
    assert set(p.affects) == {"cluster_step_trace", "step_breakdown"}


def test_trace_view_is_read_when_only_step_trace_time_reports_communication(tmp_path,
                                                                            shared_data):
    # Level0 rank 0: kernel_details.csv with its 4 HCCL rows (hcom_allReduce__868_*, lines 81,
    # 180, 182, 184) left out, as a file listing only compute tasks; no communication.json;
    # step_trace_time.csv reports Communication 85516.889 us and Communication(Not
    # Overlapped) 81515.607 us for step 50. The communication is then in the device timeline
    # only: trace_view.json must be read (TIMELINE present, nothing in meta["not_read"])
    src = shared_data / "torch_npu-2rank-levels" / "text" / "level0" / "rank0_ascend_pt"
    rank_dir = _copy(tmp_path, src)
    kd = rank_dir / OUT / "kernel_details.csv"
    lines = kd.read_text(encoding="utf-8").splitlines(keepends=True)
    kept = [ln for ln in lines if ",HCCL," not in ln]
    assert len(lines) - len(kept) == 4
    kd.write_text("".join(kept), encoding="utf-8")
    assert not (rank_dir / OUT / "communication.json").exists()
    st = (rank_dir / OUT / "step_trace_time.csv").read_text(encoding="utf-8").splitlines()
    row = dict(zip(st[0].split(","), st[1].split(",")))
    assert float(row["Communication"]) == 85516.889
    data = _read(rank_dir)
    names = data.tables[S.KERNELS]["name"].to_pylist()
    assert len(names) == 187 and not any(n.lower().startswith("hcom_") for n in names)
    assert "trace_view.json" not in data.meta.get("not_read", {})
    assert data.tables[S.TIMELINE].num_rows > 0


def test_npu_module_mem_in_kb_reads_as_the_same_file_in_mb(tmp_path):
    # npu_module_mem.csv (Component,Timestamp(us),Total Reserved(MB),Device; 1078 rows) with
    # two cells changed: row 2's Total Reserved 0.0 -> 3.5 MB and row 3's -> ' nan ' (a padded
    # no-value cell a tool could write). The CANN original writes the column in KB: the same
    # file with header Total Reserved(KB) and every value x 1024 (3.5 MB = 3584 KB; x 1024 and
    # / 1024 are exact in binary floats) must give the same table, cell for cell, as the MB file
    rank_dir = _copy(tmp_path)
    mem = rank_dir / OUT / "npu_module_mem.csv"
    lines = mem.read_text(encoding="utf-8").splitlines()
    assert lines[0] == "Component,Timestamp(us),Total Reserved(MB),Device"
    rows = [ln.split(",") for ln in lines[1:]]
    assert len(rows) == 1078 and rows[1][2] == rows[2][2] == "0.0"
    rows[1][2], rows[2][2] = "3.5", " nan "
    mem.write_text("\n".join([lines[0]] + [",".join(r) for r in rows]) + "\n", encoding="utf-8")
    want = _read(rank_dir).tables[S.NPU_MODULE_MEM]
    assert want["total_reserved_mb"][1].as_py() == 3.5

    for r in rows:
        r[2] = r[2] if r[2].strip() == "nan" else repr(float(r[2]) * 1024)
    assert rows[1][2] == "3584.0"
    mem.write_text("\n".join(["Component,Timestamp(us),Total Reserved(KB),Device"]
                             + [",".join(r) for r in rows]) + "\n", encoding="utf-8")
    data = _read(rank_dir)
    assert not _problems(data, "npu_module_mem.csv")
    got = data.tables[S.NPU_MODULE_MEM]
    assert got.schema == want.schema and got.num_rows == 1078
    for c in want.column_names:
        for a, b in zip(want[c].to_pylist(), got[c].to_pylist()):
            assert a == b or (isinstance(a, float) and isinstance(b, float)
                              and math.isnan(a) and math.isnan(b)), (c, a, b)
    assert got["total_reserved_mb"][1].as_py() == 3.5


def test_static_op_mem_in_mb_is_read_in_kb(tmp_path):
    # static_op_mem.csv's Size(KB) column (2343.78125, 1024, ...; 6 rows) written in MB
    # instead, header Size(MB), each value / 1024 (exact in binary floats: 2343.78125 KB =
    # 2.288848876953125 MB): size_kb is the MB value x 1024, the KB values of the original file
    rank_dir = _copy(tmp_path)
    som = rank_dir / OUT / "static_op_mem.csv"
    lines = som.read_text(encoding="utf-8").splitlines()
    header = lines[0].split(",")
    assert header[-1] == "Size(KB)"
    kb = [float(ln.split(",")[-1]) for ln in lines[1:]]
    assert len(kb) == 6 and kb[:2] == [2343.78125, 1024.0]
    header[-1] = "Size(MB)"
    rows = [ln.split(",") for ln in lines[1:]]
    for r in rows:
        r[-1] = repr(float(r[-1]) / 1024)
    assert rows[0][-1] == "2.288848876953125"
    som.write_text("\n".join([",".join(header)] + [",".join(r) for r in rows]) + "\n",
                   encoding="utf-8")
    data = _read(rank_dir)
    assert not _problems(data, "static_op_mem.csv")
    assert data.tables[S.STATIC_OP_MEM]["size_kb"].to_pylist() == kb
