"""The environment advice rules on hand-written ENV_VARIABLES, through
:func:`ascendprof.analyze.advice.cluster_advice` (what analyse runs once for the cluster, on every
rank's profiler_metadata and rank findings). Each expectation is worked out from the variables
written here and the rule's documented thresholds (docs/advice.md), never from the code's output.
"""

from __future__ import annotations

import pytest

from ascendprof.analyze import advice
from ascendprof.analyze.advice import environment as E
from ascendprof.analyze.advice.base import Skip


def meta(env: dict) -> dict:
    """A rank's metadata recording ``env`` (and HOME, as every real recording has other
    variables: a rank recording none is a rank without ENV_VARIABLES)."""
    return {"profiler_metadata": {"ENV_VARIABLES": {"HOME": "/root", **env}}}


def fired(*keys) -> dict:
    """A rank's rank-advice result with findings of these keys (what the cluster rules read)."""
    return {"findings": [{"id": k.split(":")[0], "key": k, "area": k.split(".")[0],
                          "title": "t", "severity": "info", "scope": "rank", "ranks": [0],
                          "message": "m", "advice": [], "impact_us_per_step": None,
                          "share_of_step_pct": None, "evidence": {}, "threshold": {},
                          "source": "s"} for k in keys],
            "status": {}}


def doc_of(envs: dict, per_rank: dict | None = None) -> dict:
    return advice.cluster_advice(per_rank or {}, {r: meta(e) for r, e in envs.items()})


def items(doc, rid) -> list[dict]:
    return [f for f in doc["items"] if f["id"] == rid]


def status(doc, rid) -> tuple[str, list]:
    (r,) = [r for r in doc["rules"] if r["id"] == rid]
    return r["status"], r["skipped"]


# ------------------------------------------------------------------------ launch blocking

def test_launch_blocking_flags_the_ranks_with_the_value_one():
    # ranks 0 and 2 set 1 (rank 2 with blanks around it, still the integer 1); rank 1 sets 0,
    # rank 3 a text that is no integer, rank 4 leaves it unset: only 0 and 2 block
    doc = doc_of({0: {"ASCEND_LAUNCH_BLOCKING": "1"}, 1: {"ASCEND_LAUNCH_BLOCKING": "0"},
                  2: {"ASCEND_LAUNCH_BLOCKING": " 1 "}, 3: {"ASCEND_LAUNCH_BLOCKING": "yes"},
                  4: {}})
    (f,) = items(doc, "environment.launch_blocking")
    assert f["key"] == "environment.launch_blocking"
    assert f["ranks"] == [0, 2] and f["severity"] == "critical" and f["scope"] == "cluster"
    # "1" and " 1 " are two recorded values: grouped by value in rank order, "1" first
    assert f["evidence"] == {"ASCEND_LAUNCH_BLOCKING": "1", "ranks": [0, 2]}
    assert f["message"] == ("ASCEND_LAUNCH_BLOCKING=1: every operator launch waits for the "
                            "operator to finish, so host and device never overlap.")
    assert f["advice"] == ["unset ASCEND_LAUNCH_BLOCKING (it is for debugging only)."]
    assert f["impact_us_per_step"] is None and f["share_of_step_pct"] is None


def test_launch_blocking_evidence_lists_ranks_by_value_then_rank():
    # metadata given out of rank order: rank 3 "1", rank 1 "01" (the integer 1), rank 0 "1".
    # Groups in rank order: "1" -> [0, 3], "01" -> [1]; the evidence keeps that order
    doc = doc_of({3: {"ASCEND_LAUNCH_BLOCKING": "1"}, 1: {"ASCEND_LAUNCH_BLOCKING": "01"},
                  0: {"ASCEND_LAUNCH_BLOCKING": "1"}})
    (f,) = items(doc, "environment.launch_blocking")
    assert f["evidence"]["ranks"] == [0, 3, 1]
    assert f["ranks"] == [0, 1, 3]


def test_launch_blocking_silent_when_no_rank_blocks():
    doc = doc_of({0: {"ASCEND_LAUNCH_BLOCKING": "0"}, 1: {"ASCEND_LAUNCH_BLOCKING": "2"}})
    assert status(doc, "environment.launch_blocking") == ("silent", [])
    assert items(doc, "environment.launch_blocking") == []


# ------------------------------------------------------------------------------ log level

def test_log_level_flags_debug_and_info_only():
    # 0 debug, 1 info: flagged; 2 warning, 3 error (the default), unset: not
    doc = doc_of({0: {"ASCEND_GLOBAL_LOG_LEVEL": "1"}, 1: {"ASCEND_GLOBAL_LOG_LEVEL": "3"},
                  2: {"ASCEND_GLOBAL_LOG_LEVEL": "0"}, 3: {"ASCEND_GLOBAL_LOG_LEVEL": "2"},
                  4: {}, 5: {"ASCEND_GLOBAL_LOG_LEVEL": "1"}})
    (f,) = items(doc, "environment.log_level")
    assert f["ranks"] == [0, 2, 5] and f["severity"] == "warning"
    # the values sorted as text: 0 then 1
    assert f["message"] == ("ASCEND_GLOBAL_LOG_LEVEL=0/1 (debug/info): CANN logs every call, "
                            "which slows the host.")
    # value -> ranks, in the order of the first rank holding each value (rank 0 holds "1")
    assert f["evidence"] == {"values": {"1": [0, 5], "0": [2]}}
    assert list(f["evidence"]["values"]) == ["1", "0"]
    assert f["advice"] == ["export ASCEND_GLOBAL_LOG_LEVEL=3 (error) for training runs."]


def test_log_level_silent_at_warning_and_error():
    doc = doc_of({0: {"ASCEND_GLOBAL_LOG_LEVEL": "2"}, 1: {"ASCEND_GLOBAL_LOG_LEVEL": "x"}})
    assert status(doc, "environment.log_level")[0] == "silent"


# ------------------------------------------------------------------------------ alloc conf

def test_alloc_conf_only_on_ranks_with_allocator_calls_and_no_expandable_segments():
    envs = {0: {},                                                        # unset
            1: {"PYTORCH_NPU_ALLOC_CONF": "Expandable_Segments : True"},  # set (spaces, case)
            2: {"PYTORCH_NPU_ALLOC_CONF": "max_split_size_mb:128"},      # set, not expanding
            3: {"PYTORCH_NPU_ALLOC_CONF": ""},                            # no allocator calls
            4: {"PYTORCH_NPU_ALLOC_CONF": "garbage_collection_threshold:0.6"}}
    per_rank = {0: fired("memory.allocator_calls:aclrtFree"),
                1: fired("memory.allocator_calls:aclrtFree"),
                2: fired("memory.allocator_calls:aclMallocMemInner", "schedule.gc"),
                3: fired("schedule.gc"),
                # a key that only begins like the rule's: no evidence of allocator calls
                4: fired("memory.allocator_callsX")}
    doc = doc_of(envs, per_rank)
    (f,) = items(doc, "environment.alloc_conf")
    assert f["ranks"] == [0, 2] and f["severity"] == "warning"
    assert f["evidence"] == {"values": {"(unset)": [0], "max_split_size_mb:128": [2]}}
    assert f["message"] == ("PYTORCH_NPU_ALLOC_CONF does not enable expandable segments on "
                            "ranks where allocator calls slow the step "
                            "(memory.allocator_calls).")
    assert f["advice"] == ["export PYTORCH_NPU_ALLOC_CONF=expandable_segments:True"]


def test_alloc_conf_the_bare_rule_key_is_evidence_too():
    # a finding whose key is the rule id itself (no ":<api>") counts as the rule firing
    doc = doc_of({0: {}, 1: {}}, {0: fired("memory.allocator_calls"), 1: fired()})
    (f,) = items(doc, "environment.alloc_conf")
    assert f["ranks"] == [0]
    assert f["evidence"] == {"values": {"(unset)": [0]}}


def test_alloc_conf_evidence_keeps_only_the_ranks_with_calls_of_a_shared_value():
    # ranks 0, 1, 2 share the value "max_split_size_mb:64"; only 0 and 2 have allocator calls
    envs = {r: {"PYTORCH_NPU_ALLOC_CONF": "max_split_size_mb:64"} for r in range(3)}
    per_rank = {0: fired("memory.allocator_calls:aclrtFree"), 1: fired(),
                2: fired("memory.allocator_calls:aclrtFree")}
    (f,) = items(doc_of(envs, per_rank), "environment.alloc_conf")
    assert f["ranks"] == [0, 2]
    assert f["evidence"] == {"values": {"max_split_size_mb:64": [0, 2]}}


def test_alloc_conf_silent_without_allocator_calls():
    doc = doc_of({0: {}, 1: {}}, {0: fired("schedule.gc"), 1: fired()})
    assert status(doc, "environment.alloc_conf")[0] == "silent"


# -------------------------------------------------------------------------- aclnn cache

def test_aclnn_cache_below_ten_thousand_on_host_bound_ranks():
    envs = {0: {"ACLNN_CACHE_LIMIT": "9999"},    # below 10000: flagged
            1: {"ACLNN_CACHE_LIMIT": "10000"},   # the minimum itself is enough
            2: {},                               # unset: flagged
            3: {"ACLNN_CACHE_LIMIT": "lots"},    # not a number: counts as 0, flagged
            4: {"ACLNN_CACHE_LIMIT": "100"},     # small, but rank 4 stalls (not dispatch)
            5: {"ACLNN_CACHE_LIMIT": "100000"}}
    per_rank = {r: fired("schedule.device_idle:dispatch") for r in (0, 1, 2, 3, 5)}
    per_rank[4] = fired("schedule.device_idle:stall")
    doc = doc_of(envs, per_rank)
    (f,) = items(doc, "environment.aclnn_cache")
    assert f["ranks"] == [0, 2, 3] and f["severity"] == "info"
    assert f["evidence"] == {"values": {"9999": [0], "(unset)": [2], "lots": [3]}}
    assert f["message"] == ("ACLNN_CACHE_LIMIT is unset or below 10000 on ranks whose step is "
                            "host-bound (schedule.device_idle): a larger cache saves rebuilding "
                            "aclnn executors.")
    assert f["advice"] == ["export ACLNN_CACHE_LIMIT=100000"]


def test_aclnn_cache_silent_without_host_bound_dispatch():
    doc = doc_of({0: {}}, {0: fired("schedule.device_idle:stall")})
    assert status(doc, "environment.aclnn_cache")[0] == "silent"


# --------------------------------------------------------------------------- host cache

def test_host_cache_unset_or_zero_on_ranks_that_compile():
    envs = {0: {"HOST_CACHE_CAPACITY": "0"}, 1: {"HOST_CACHE_CAPACITY": "20"}, 2: {},
            3: {"HOST_CACHE_CAPACITY": "0"}, 4: {"HOST_CACHE_CAPACITY": "none"}}
    per_rank = {r: fired("computation.op_compile") for r in (0, 1, 2, 4)}
    per_rank[3] = fired("computation.aicpu")  # rank 3 compiles nothing
    doc = doc_of(envs, per_rank)
    (f,) = items(doc, "environment.host_cache")
    # "none" is no integer: as unset
    assert f["ranks"] == [0, 2, 4] and f["severity"] == "info"
    assert f["evidence"] == {"values": {"0": [0], "(unset)": [2], "none": [4]}}
    assert f["message"] == ("HOST_CACHE_CAPACITY is unset or 0 on ranks that compile operators "
                            "online (computation.op_compile): with changing shapes the host "
                            "rebuilds operators.")
    assert f["advice"] == ["export HOST_CACHE_CAPACITY=20 (caches the executors of the 20 most "
                           "recent input shapes; costs host memory)."]


# ---------------------------------------------------------------------------------- HCCL

def test_hccl_one_finding_per_pinned_variable():
    envs = {0: {"HCCL_ALGO": "level0:ring", "HCCL_RDMA_TC": ""},
            1: {"HCCL_ALGO": "level0:fullmesh", "HCCL_RDMA_TC": "132"},
            2: {"HCCL_ALGO": "level0:ring"}}
    doc = doc_of(envs)
    got = {f["key"]: f for f in items(doc, "environment.hccl")}
    # HCCL_RDMA_SL set nowhere, HCCL_RDMA_TC empty on rank 0 (= unset): two findings
    assert set(got) == {"environment.hccl:HCCL_ALGO", "environment.hccl:HCCL_RDMA_TC"}
    algo = got["environment.hccl:HCCL_ALGO"]
    assert algo["ranks"] == [0, 1, 2] and algo["severity"] == "info"
    assert algo["message"] == ("HCCL_ALGO=level0:fullmesh/level0:ring pins the collective "
                               "algorithm instead of HCCL's choice by chip, node count and size.")
    assert algo["advice"] == ["unset HCCL_ALGO unless a measurement showed it helps"]
    assert algo["evidence"] == {"variable": "HCCL_ALGO",
                                "values": {"level0:ring": [0, 2], "level0:fullmesh": [1]}}
    tc = got["environment.hccl:HCCL_RDMA_TC"]
    assert tc["ranks"] == [1]
    assert tc["message"] == ("HCCL_RDMA_TC=132 sets the RoCE traffic class/priority; it must "
                             "match the switch's PFC/ECN configuration.")
    assert tc["advice"] == [f"Check HCCL_RDMA_TC against the switch configuration ({E.DOC})."]
    assert tc["evidence"] == {"variable": "HCCL_RDMA_TC", "values": {"132": [1]}}


def test_hccl_rdma_sl_alone():
    (f,) = items(doc_of({0: {"HCCL_RDMA_SL": "4"}}), "environment.hccl")
    assert f["key"] == "environment.hccl:HCCL_RDMA_SL" and f["ranks"] == [0]
    assert f["message"].startswith("HCCL_RDMA_SL=4 sets the RoCE traffic class")


def test_hccl_silent_when_nothing_is_pinned():
    doc = doc_of({0: {"HCCL_ALGO": ""}, 1: {"OTHER": "1"}})
    assert status(doc, "environment.hccl")[0] == "silent"


# -------------------------------------------------------------------------- inconsistent

def test_inconsistent_names_the_variables_that_differ_and_their_ranks():
    envs = {0: {"HCCL_ALGO": "ring", "ASCEND_GLOBAL_LOG_LEVEL": "3", "OTHER": "a",
                "ASCEND_ENHANCE_ENABLE": "1"},
            1: {"HCCL_ALGO": "ring", "ASCEND_GLOBAL_LOG_LEVEL": "1", "OTHER": "b",
                "ASCEND_ENHANCE_ENABLE": "1"},
            2: {"ASCEND_GLOBAL_LOG_LEVEL": "3", "ASCEND_ENHANCE_ENABLE": "1"}}
    doc = doc_of(envs)
    (f,) = items(doc, "environment.inconsistent")
    # OTHER is not a job-wide setting; ASCEND_ENHANCE_ENABLE is the same everywhere; HCCL_ALGO
    # is unset on rank 2 (absent = unset); the log level differs on rank 1
    assert f["evidence"] == {"differences": {
        "ASCEND_GLOBAL_LOG_LEVEL": {"3": [0, 2], "1": [1]},
        "HCCL_ALGO": {"ring": [0, 1], "(unset)": [2]}}}
    assert list(f["evidence"]["differences"]) == ["ASCEND_GLOBAL_LOG_LEVEL", "HCCL_ALGO"]
    assert f["ranks"] == [0, 1, 2] and f["severity"] == "warning"
    assert f["message"] == ("2 environment variable(s) differ between ranks of one job: "
                            "ASCEND_GLOBAL_LOG_LEVEL, HCCL_ALGO; ranks then behave differently "
                            "(and the slowest sets the pace).")
    assert f["advice"] == ["Set the same values on every node (launch script / job template)."]


def test_inconsistent_ranks_are_those_of_the_differing_variables():
    # rank 2 records other variables only: it holds "(unset)" of the difference
    envs = {0: {"HCCL_RDMA_TC": "132"}, 1: {"HCCL_RDMA_TC": "160"}, 2: {"X": "1"}}
    (f,) = items(doc_of(envs), "environment.inconsistent")
    assert f["evidence"]["differences"] == {"HCCL_RDMA_TC": {"132": [0], "160": [1],
                                                             "(unset)": [2]}}
    assert f["ranks"] == [0, 1, 2]
    assert f["message"].startswith("1 environment variable(s) differ")


def test_inconsistent_silent_when_every_rank_agrees():
    envs = {0: {"HCCL_ALGO": "ring", "X": "1"}, 1: {"HCCL_ALGO": "ring", "X": "2"}}
    assert status(doc_of(envs), "environment.inconsistent")[0] == "silent"


def test_inconsistent_skipped_on_one_rank():
    st, skipped = status(doc_of({0: {"HCCL_ALGO": "ring"}}), "environment.inconsistent")
    assert st == "skipped" and skipped[0]["reason"] == "one rank only"


# ----------------------------------------------------------------- no recorded variables

@pytest.mark.parametrize("rule", E.RULES, ids=lambda r: r.id)
def test_every_environment_rule_skips_without_variables(rule):
    # the cluster pipeline skips them by their needs first; the checks themselves say why too
    with pytest.raises(Skip, match="^no rank recorded ENV_VARIABLES$"):
        rule.check(E.ClusterContext(env={}))


def test_cluster_pipeline_skips_them_without_variables():
    doc = advice.cluster_advice({0: fired()}, {0: {"profiler_metadata": {}}})
    for r in E.RULES:
        st, skipped = status(doc, r.id)
        assert st == "skipped" and "environment variables" in skipped[0]["reason"]


def test_environment_rules_are_cluster_rules_with_their_thresholds():
    by_id = {r.id: r for r in E.RULES}
    assert [r.id for r in E.RULES] == [
        "environment.launch_blocking", "environment.log_level", "environment.alloc_conf",
        "environment.aclnn_cache", "environment.host_cache", "environment.hccl",
        "environment.inconsistent"]
    assert all(r.scope == "cluster" and r.area == "environment" for r in E.RULES)
    assert by_id["environment.aclnn_cache"].threshold["ACLNN_CACHE_LIMIT_min"] == 10000
    assert by_id["environment.hccl"].threshold == {"set": ["HCCL_ALGO", "HCCL_RDMA_TC",
                                                           "HCCL_RDMA_SL"]}
