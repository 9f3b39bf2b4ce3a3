"""Memory and environment advice on the real exports and on edited copies. The environment
rules run once for the cluster, so they are tested through the whole pipeline on a 2-rank
copy."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from _advice_data import advise, copy_rank, edit_csv, found, rows, stage_us, status
from conftest import analysis_of

ALEX = "torch_npu-2rank-levels/text/level2"


@pytest.fixture
def qrank(qwen3, tmp_path):
    return copy_rank(qwen3 / "rank_0_ascend_pt", tmp_path / "rank_0_ascend_pt")


# ---------------------------------------------------------------------------------- memory

def test_allocator_calls_silent_on_the_real_export(qrank):
    (free,) = [r for r in rows(qrank, "api_statistic.csv") if r["API Name"] == "aclrtFree"]
    assert float(free["Time(us)"]) < 10_000
    assert status(advise(qrank), "memory.allocator_calls") == "silent"


def test_allocator_calls_of_10ms_per_step_are_reported(qrank):
    edit_csv(qrank, "api_statistic.csv", lambda rs: [
        {**r, "Time(us)": "15000.0", "Count": "300"} if r["API Name"] == "aclrtFree" else r
        for r in rs])
    (f,) = found(advise(qrank), "memory.allocator_calls")
    assert f["key"] == "memory.allocator_calls:aclrtFree"
    assert f["evidence"]["calls_per_step"] == 300 and f["evidence"]["ms_per_step"] == 15.0
    assert f["share_of_step_pct"] == pytest.approx(100 * 15000 / stage_us(qrank), abs=0.01)
    assert any("empty_cache" in a for a in f["advice"])


# ----------------------------------------------------------------------------- environment

def two_ranks(shared_data, tmp_path) -> Path:
    root = tmp_path / "level2"
    for r in (0, 1):
        copy_rank(shared_data / ALEX / f"rank{r}_ascend_pt", root / f"rank{r}_ascend_pt",
                  skip=("trace_view.json",))
    return root


def set_env(root, rank, **env):
    p = root / f"rank{rank}_ascend_pt" / "profiler_metadata.json"
    meta = json.loads(p.read_text())
    meta["ENV_VARIABLES"].update(env)
    p.write_text(json.dumps(meta))


def cluster_doc(root) -> dict:

    return analysis_of(root).advice


def item(doc, key):
    got = [f for f in doc["items"] if f["key"] == key]
    return got[0] if got else None


def rule(doc, rid):
    (r,) = [r for r in doc["rules"] if r["id"] == rid]
    return r


def test_environment_on_the_real_export_only_what_the_data_supports(shared_data, tmp_path):
    root = two_ranks(shared_data, tmp_path)
    env = json.loads((root / "rank0_ascend_pt" / "profiler_metadata.json").read_text())
    assert env["ENV_VARIABLES"]["PYTORCH_NPU_ALLOC_CONF"] == ""  # the peer flags it
    doc = cluster_doc(root)
    # no allocator calls in the step: no reason to change the allocator setting
    assert rule(doc, "environment.alloc_conf")["status"] == "silent"
    # host-bound dispatch on both ranks: the aclnn cache setting is worth raising
    assert item(doc, "environment.aclnn_cache")["ranks"] == [0, 1]
    assert item(doc, "environment.host_cache")["ranks"] == [0, 1]  # aclop path fired
    for rid in ("environment.launch_blocking", "environment.log_level", "environment.hccl",
                "environment.inconsistent"):
        assert rule(doc, rid)["status"] == "silent", rid


def test_environment_launch_blocking_log_level_and_inconsistency(shared_data, tmp_path):
    root = two_ranks(shared_data, tmp_path)
    set_env(root, 1, ASCEND_LAUNCH_BLOCKING="1", ASCEND_GLOBAL_LOG_LEVEL="1", HCCL_ALGO="ring")
    doc = cluster_doc(root)
    lb = item(doc, "environment.launch_blocking")
    assert lb["ranks"] == [1] and lb["severity"] == "critical"
    assert doc["items"][0]["severity"] == "critical"
    assert item(doc, "environment.log_level")["ranks"] == [1]
    assert item(doc, "environment.hccl:HCCL_ALGO")["evidence"]["values"] == {"ring": [1]}
    diff = item(doc, "environment.inconsistent")["evidence"]["differences"]
    assert set(diff) == {"ASCEND_LAUNCH_BLOCKING", "ASCEND_GLOBAL_LOG_LEVEL", "HCCL_ALGO"}
    assert diff["ASCEND_LAUNCH_BLOCKING"] == {"(unset)": [0], "1": [1]}


def test_environment_alloc_conf_needs_allocator_calls(shared_data, tmp_path):
    root = two_ranks(shared_data, tmp_path)
    for r in (0, 1):
        edit_csv(root / f"rank{r}_ascend_pt", "api_statistic.csv", lambda rs: rs + [
            {**rs[0], "Level": "acl", "API Name": "aclrtFree", "Time(us)": "20000.0",
             "Count": "100"}])
    set_env(root, 1, PYTORCH_NPU_ALLOC_CONF="expandable_segments:True")
    doc = cluster_doc(root)
    assert item(doc, "memory.allocator_calls:aclrtFree")["ranks"] == [0, 1]
    # rank 1 already expands segments: only rank 0 is told to
    assert item(doc, "environment.alloc_conf")["ranks"] == [0]


def test_environment_caches_silent_when_set(shared_data, tmp_path):
    root = two_ranks(shared_data, tmp_path)
    for r in (0, 1):
        set_env(root, r, ACLNN_CACHE_LIMIT="100000", HOST_CACHE_CAPACITY="20")
    doc = cluster_doc(root)
    assert item(doc, "schedule.device_idle:dispatch") is not None
    assert item(doc, "computation.op_compile") is not None
    assert rule(doc, "environment.aclnn_cache")["status"] == "silent"
    assert rule(doc, "environment.host_cache")["status"] == "silent"


def test_environment_skipped_without_recorded_variables(shared_data, tmp_path):
    root = two_ranks(shared_data, tmp_path)
    for r in (0, 1):
        (root / f"rank{r}_ascend_pt" / "profiler_metadata.json").unlink()
    doc = cluster_doc(root)
    r = rule(doc, "environment.launch_blocking")
    assert r["status"] == "skipped" and "ENV_VARIABLES" in r["skipped"][0]["reason"]
