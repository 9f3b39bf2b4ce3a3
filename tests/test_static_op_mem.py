"""A rank holding static_op_mem.csv (torch_npu graph mode) is read and analysed, through the
user's paths: ``read_source`` and ``ascendprof analyse``, alone and in a cluster.

Fixture: fixtures/torch_npu-static-graph-mem (two real Level1 ranks; rank 0's static_op_mem.csv is
built in the layout torch_npu writes, see its PROVENANCE.md). Expected values are worked out by
hand below from the file's rows, never taken from the code's output.
"""

from __future__ import annotations

import shutil

import pytest

from conftest import analyse_quietly, csv_rows
from ascendprof.model import schemas as S
from ascendprof.model.problems import Problems
from ascendprof.readers import read_source
from ascendprof.scan import scan
from conftest import FIXTURES

JOB = FIXTURES / "torch_npu-static-graph-mem"

# static_op_mem.csv of rank 0, row by row (Device_id, Op Name, ..., Node Index Start/End, Size(KB)):
#   host,sqrt_01,0,0,31,32,2343.78125
#   host,mul_02,0,0,33,40,1024
#   host,sqrt_01,0,0,41,42,2343.78125
#   host,matmul_03,0,1,12,90,8192.5
#   0,add_04,0,1,5,5,256
#   host,TOTAL,0,0,0,4294967295,13903.84375   (the graph's total: not an operator)
# Per operator: allocations, total MB (KB / 1024), largest MB, sum of MB x (end - start + 1) nodes
EXPECTED = {
    "sqrt_01": (2, 2 * 2343.78125 / 1024, 2343.78125 / 1024, 2 * (2343.78125 / 1024 * 2)),
    "mul_02": (1, 1.0, 1.0, 1.0 * 8),
    "matmul_03": (1, 8192.5 / 1024, 8192.5 / 1024, 8192.5 / 1024 * 79),
    "add_04": (1, 0.25, 0.25, 0.25 * 1),
}


_analyse, _rows = analyse_quietly, csv_rows


def test_read_source_reads_static_op_mem():
    src = next(s for s in scan(JOB, Problems()) if s.rank == 0)
    data = read_source(src)
    assert not [p for p in data.problems.items if "static_op_mem" in str(p.path)], \
        data.problems.items
    t = data.tables[S.STATIC_OP_MEM].to_pylist()
    assert [r["name"] for r in t] == ["sqrt_01", "mul_02", "sqrt_01", "matmul_03", "add_04",
                                      "TOTAL"]
    # Device_id 'host' has no device number; a number is kept
    assert [r["device_id"] for r in t] == [None, None, None, None, 0, None]
    assert t[0]["node_start"] == 31 and t[0]["node_end"] == 32 and t[0]["size_kb"] == 2343.78125
    assert t[5]["node_end"] == 4294967295
    assert {r["rank"] for r in t} == {0}
    # the rank's other tables are read as before
    assert data.tables[S.MEMORY_RECORD].num_rows and data.tables[S.KERNELS].num_rows


def _check_static_rows(out, rank=0):
    rows = [r for r in _rows(out / "memory_top_ops.csv")
            if r["Source"] == "static_op_mem" and int(r["Rank"]) == rank]
    got = {r["Name"]: r for r in rows}
    assert set(got) == set(EXPECTED), got.keys()  # TOTAL is not an operator
    for name, (n, total, largest, nodes) in EXPECTED.items():
        r = got[name]
        assert int(r["Allocations"]) == n
        assert float(r["Total Allocated(MB)"]) == pytest.approx(total, rel=1e-12)
        assert float(r["Largest(MB)"]) == pytest.approx(largest, rel=1e-12)
        assert float(r["Size x Lifetime(MB*nodes)"]) == pytest.approx(nodes, rel=1e-12)
        assert r["Size x Lifetime(MB*ms)"] == ""


def test_static_rank_alone_through_the_cli(tmp_path):
    r = _analyse(JOB / "rank0_ascend_pt", tmp_path / "out")
    assert r.exit_code == 0, r.output
    _check_static_rows(tmp_path / "out")
    probs = _rows(tmp_path / "out" / "problems.csv") if (tmp_path / "out" / "problems.csv"
                                                          ).is_file() else []
    assert not [p for p in probs if "static_op_mem" in p["Path"]], probs


def test_static_rank_in_a_cluster_through_the_cli(tmp_path):
    src = shutil.copytree(JOB, tmp_path / "in")
    r = _analyse(src, tmp_path / "out")
    assert r.exit_code == 0, r.output
    out = tmp_path / "out"
    _check_static_rows(out)
    # both ranks are in the cluster files
    ranks = {int(r["Index"]) for r in _rows(out / "cluster_step_trace_time.csv")
             if r["Type"] == "rank"}
    assert ranks == {0, 1}
    # rank 1 has no static_op_mem.csv: only its operator_memory rows
    assert {r["Source"] for r in _rows(out / "memory_top_ops.csv")
            if r["Rank"] == "1"} == {"operator_memory"}
