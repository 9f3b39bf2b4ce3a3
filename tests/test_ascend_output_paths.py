"""ASCEND_PROFILER_OUTPUT reading through the user's path (``read_source``) on a copy of a real
Level1 rank (fixtures/torch_npu-static-graph-mem/rank0_ascend_pt) changed the way other
profiler versions write it: CANN's npu_module_mem.csv in KB, two profiler_info files, metadata
that is not a JSON object. Expected values are worked out by hand from what each test writes."""

from __future__ import annotations

import json
import shutil

import pytest

from ascendprof.model import schemas as S
from ascendprof.model.problems import Problems
from ascendprof.readers import read_source
from ascendprof.readers.ascend_output import read_metadata
from ascendprof.scan import scan
from conftest import FIXTURES

RANK0 = FIXTURES / "torch_npu-static-graph-mem" / "rank0_ascend_pt"
OUT = "ASCEND_PROFILER_OUTPUT"


def _copy(tmp_path):
    rank_dir = tmp_path / "rank0_ascend_pt"
    shutil.copytree(RANK0, rank_dir)
    return rank_dir


def _read(rank_dir):
    return read_source(next(s for s in scan(rank_dir, Problems()) if s.rank == 0))


def test_npu_module_mem_in_kb_is_divided_by_1024(tmp_path):
    rank_dir = _copy(tmp_path)
    (rank_dir / OUT / "npu_module_mem.csv").write_text(
        "Component,Timestamp(us),Total Reserved(KB),Device\n"
        "APP,1736408883657086.220\t,2048,NPU:0\n"
        "HCCL,1736408883677036.730\t,1536.0,NPU:0\n", encoding="utf-8")
    rows = _read(rank_dir).tables[S.NPU_MODULE_MEM].to_pylist()
    # 2048 KB = 2 MB; 1536 KB = 1.5 MB (binary units)
    assert [(r["component"], r["ts_ns"], r["total_reserved_mb"]) for r in rows] == [
        ("APP", 1736408883657086220, 2.0), ("HCCL", 1736408883677036730, 1.5)]


def test_profiler_info_of_the_rank_is_preferred_over_the_plain_one(tmp_path):
    rank_dir = _copy(tmp_path)
    mine = json.loads((rank_dir / "profiler_info_0.json").read_text(encoding="utf-8"))
    (rank_dir / "profiler_info.json").write_text(json.dumps({"plain": True}), encoding="utf-8")
    assert read_metadata(rank_dir)["profiler_info"] == mine
    (rank_dir / "profiler_info_0.json").unlink()
    assert read_metadata(rank_dir)["profiler_info"] == {"plain": True}


def test_metadata_not_an_object_is_a_problem_and_the_other_file_still_read(tmp_path):
    rank_dir = _copy(tmp_path)
    meta = json.loads((rank_dir / "profiler_metadata.json").read_text(encoding="utf-8"))
    (rank_dir / "profiler_info_0.json").write_text("[1, 2]", encoding="utf-8")
    problems = Problems()
    got = read_metadata(rank_dir, problems, rank=0)
    assert got == {"profiler_metadata": meta}
    assert [(p.path, p.reason, p.rank, p.affects) for p in problems.items] == [
        (str(rank_dir / "profiler_info_0.json"), "not a JSON object", 0, ("metadata",))]
    with pytest.raises(Exception, match="not a JSON object"):
        read_metadata(rank_dir)


@pytest.mark.parametrize("n_bad, lines", [
    (2, "3, 5"),
    (7, "3, 5, 7, 9, 11 ..."),  # the first five, then '...'
])
def test_rows_of_the_wrong_width_are_left_out_naming_their_lines(tmp_path, n_bad, lines):
    """op_statistic.csv with rows cut short (3 fields where the header has 8) after every good
    row: line 1 is the header, good rows on lines 2, 4, 6 ..., bad rows on 3, 5, 7 ..."""
    rank_dir = _copy(tmp_path)
    path = rank_dir / OUT / "op_statistic.csv"
    header, *rows = path.read_text(encoding="utf-8").splitlines()
    out = [header]
    for i in range(n_bad):
        out += [rows[i], "Cut,AI_CORE,1"]
    path.write_text("\n".join(out) + "\n", encoding="utf-8")
    data = _read(rank_dir)
    assert data.tables[S.OP_STATISTIC].num_rows == n_bad
    probs = [p for p in data.problems.items if p.path == str(path)]
    assert [(p.reason, p.where, p.severity) for p in probs] == [(
        f"{n_bad} row(s) left out: 3 field(s) where the header has 8 (a row cut off, e.g. by an "
        f"interrupted copy, or a stray separator); lines {lines}", "line 3", "skipped")]
