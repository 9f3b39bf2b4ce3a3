"""Scanner: kinds, ranks and their origin, on the real data."""

import shutil

import pytest

from ascendprof.model.errors import UsageError
from ascendprof.model.problems import Problems
from ascendprof.scan import DB, TORCH_TEXT, one_per_rank, scan


def test_qwen3_ranks_devices_steps(qwen3):
    srcs = scan(qwen3)
    # rank from profiler_info_{rank}.json; device from step_trace_time.csv Device_id
    # (rank 2 ran on device 4, rank 3 on device 5: see the CSVs)
    got = {(s.rank, s.kind, s.device_id, tuple(s.steps)) for s in srcs}
    assert got == {(0, TORCH_TEXT, 0, (13,)), (1, TORCH_TEXT, 1, (13,)),
                   (2, TORCH_TEXT, 4, (13,)), (3, TORCH_TEXT, 5, (13,))}
    r0 = next(s for s in srcs if s.rank == 0)
    assert r0.profiler_level == "Level2" and r0.cann_version == "8.3.RC1"
    assert r0.framework_version == "2.7.1"
    assert "op_statistics" in r0.analyses
    r1 = next(s for s in srcs if s.rank == 1)  # no kernel_details upstream
    assert "op_statistics" not in r1.analyses


def test_text_and_db_levels(shared_data):
    root = shared_data / "torch_npu-2rank-levels"
    srcs = scan(root)
    kinds = {(s.path.split("/")[-3], s.path.split("/")[-2], s.rank, s.kind) for s in srcs}
    for lvl in ("level0", "level1", "level2"):
        for r in (0, 1):
            assert ("text", lvl, r, TORCH_TEXT) in kinds
            assert ("db", lvl, r, DB) in kinds


def test_rank_from_directory_name_with_warning(qwen3, tmp_path):
    d = tmp_path / "job" / "node7_ascend_pt"
    shutil.copytree(qwen3 / "rank_1_ascend_pt", d)
    (d / "profiler_metadata.json").unlink()  # leave only the directory name
    (d / "profiler_info_1.json").unlink()
    probs = Problems()
    [src] = scan(tmp_path, probs)
    assert src.rank == 7 and src.rank_origin == "directory name"
    assert any("directory name" in p.reason for p in probs)


def test_duplicate_rank_keeps_one_and_says_so(qwen3, tmp_path):
    shutil.copytree(qwen3 / "rank_0_ascend_pt", tmp_path / "a" / "rank_0_ascend_pt")
    shutil.copytree(qwen3 / "rank_0_ascend_pt", tmp_path / "b" / "rank_0_ascend_pt")
    probs = Problems()
    srcs = one_per_rank(scan(tmp_path, probs), probs)
    assert [s.rank for s in srcs] == [0]
    assert any("rank 0 also found" in p.reason for p in probs)


def test_symlink_loop_terminates(qwen3, tmp_path):
    shutil.copytree(qwen3 / "rank_1_ascend_pt", tmp_path / "rank_1_ascend_pt")
    (tmp_path / "loop").symlink_to(tmp_path, target_is_directory=True)
    assert [s.rank for s in scan(tmp_path)] == [1]


def test_missing_and_file_paths(tmp_path):
    with pytest.raises(UsageError, match="no such file"):
        scan(tmp_path / "nope")
    f = tmp_path / "f.txt"
    f.write_text("x")
    with pytest.raises(UsageError, match="not a directory"):
        scan(f)


def test_rank_id_contradicting_the_file_name_is_reported(qwen3, tmp_path):
    """profiler_info_1.json holding "rank_id": 5: before, ignored without a word."""
    import json

    dst = tmp_path / "q"
    shutil.copytree(qwen3, dst)
    info = dst / "rank_1_ascend_pt" / "profiler_info_1.json"
    doc = json.loads(info.read_text())
    assert str(doc["rank_id"]) == "1"  # what the profiler wrote (as text)
    doc["rank_id"] = type(doc["rank_id"])(5)
    info.write_text(json.dumps(doc))
    problems = Problems()
    ranks = sorted(s.rank for s in scan(dst, problems))
    assert ranks == [0, 1, 2, 3]
    (p,) = [p for p in problems if "contradicts" in p.reason]
    assert p.path.endswith("profiler_info_1.json") and "rank_id 5" in p.reason
    assert "rank 1" in p.reason
