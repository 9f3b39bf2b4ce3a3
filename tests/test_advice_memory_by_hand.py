"""memory.allocator_calls on hand-built tables, through
:func:`ascendprof.analyze.advice.rank_advice` (what each rank's worker runs on the rank's tables).
Every expected number is worked out in the comments from the rows written here and the rule's
threshold (10 000 us per step, msprof-analyze memory.yaml)."""

from __future__ import annotations

import pyarrow as pa
import pytest

from ascendprof.analyze import advice
from ascendprof.analyze.advice import memory as M
from ascendprof.model import schemas as S

MS = 1_000_000  # ns


def api_stat(rows) -> pa.Table:
    """api_statistic rows (name, total ns, count)."""
    return S.conform(S.API_STATISTIC, pa.table({
        "level": ["acl"] * len(rows), "api_name": [r[0] for r in rows],
        "total_ns": pa.array([r[1] for r in rows], pa.int64()),
        "count": pa.array([r[2] for r in rows], pa.int64())}))


def step_trace(stages_ns) -> pa.Table:
    return S.conform(S.STEP_TRACE, pa.table({
        "step": pa.array(range(1, len(stages_ns) + 1), pa.int32()),
        "stage_ns": pa.array(stages_ns, pa.int64())}))


def host_events(rows) -> pa.Table:
    """host events (source, name, start ns, dur ns)."""
    return S.conform(S.HOST_EVENTS, pa.table({
        "source": [r[0] for r in rows], "name": [r[1] for r in rows],
        "start_ns": pa.array([r[2] for r in rows], pa.int64()),
        "dur_ns": pa.array([r[3] for r in rows], pa.int64())}))


def run(tables) -> dict:
    return advice.rank_advice(tables, {}, 3)


def found(res) -> dict:
    return {f["key"]: f for f in res["findings"] if f["id"] == "memory.allocator_calls"}


def test_each_allocator_api_of_10ms_per_step_or_more_is_its_own_finding():
    # 2 steps of 100 ms each (mean step 100 ms):
    #  aclMallocMemInner: 40 calls, 60 ms in all -> 20 calls, 30 ms per step = 30 % (critical)
    #  aclrtFree:        10 calls, 19.98 ms   -> 5 calls, 9.99 ms per step (< 10 ms: silent)
    #  aclrtFreePhysical: 3 calls, 20 ms       -> 1.5 calls, 10 ms per step = 10 % (critical:
    #                                             the threshold itself counts)
    #  aclrtMalloc is no allocator API the rule watches (300 ms: ignored)
    res = run({S.API_STATISTIC: api_stat([("aclMallocMemInner", 60 * MS, 40),
                                          ("aclrtFree", 19_980_000, 10),
                                          ("aclrtFreePhysical", 20 * MS, 3),
                                          ("aclrtMalloc", 300 * MS, 9)]),
               S.STEP_TRACE: step_trace([100 * MS, 100 * MS])})
    assert res["status"]["memory.allocator_calls"] == ["fired", ""]
    got = found(res)
    # in the order of the rule's API list
    assert list(got) == ["memory.allocator_calls:aclMallocMemInner",
                         "memory.allocator_calls:aclrtFreePhysical"]
    m = got["memory.allocator_calls:aclMallocMemInner"]
    assert m["ranks"] == [3] and m["severity"] == "critical"
    assert m["impact_us_per_step"] == 30_000.0 and m["share_of_step_pct"] == 30.0
    assert m["evidence"] == {"api": "aclMallocMemInner", "calls_per_step": 20.0,
                             "ms_per_step": 30.0, "n_steps": 2}
    assert m["message"] == ("20 aclMallocMemInner call(s) per step take 30.0 ms (30.0% of the "
                            "step); the host blocks in each and the device idles meanwhile.")
    assert m["advice"] == M.ALLOCATOR_APIS["aclMallocMemInner"]
    assert "expandable_segments:True" in m["advice"][0]
    p = got["memory.allocator_calls:aclrtFreePhysical"]
    assert p["evidence"] == {"api": "aclrtFreePhysical", "calls_per_step": 1.5,
                             "ms_per_step": 10.0, "n_steps": 2}
    assert p["severity"] == "critical" and p["share_of_step_pct"] == 10.0
    assert any("empty_cache" in a for a in p["advice"]) and len(p["advice"]) == 2


def test_below_ten_percent_of_the_step_is_a_warning():
    # one step of 200 ms; aclrtFree 12 ms in 7 calls = 6 % of the step: a warning
    res = run({S.API_STATISTIC: api_stat([("aclrtFree", 12 * MS, 7)]),
               S.STEP_TRACE: step_trace([200 * MS])})
    (f,) = found(res).values()
    assert f["severity"] == "warning" and f["share_of_step_pct"] == 6.0
    assert f["message"].startswith("7 aclrtFree call(s) per step take 12.0 ms (6.0% of the step)")


def test_without_a_step_time_the_finding_is_info_and_says_no_share():
    # no step breakdown, no step windows, no kernels: the step time is unknown, so is the share
    res = run({S.API_STATISTIC: api_stat([("aclrtFree", 15 * MS, 300)])})
    (f,) = found(res).values()
    assert f["severity"] == "info" and f["share_of_step_pct"] is None
    assert f["impact_us_per_step"] == 15_000.0
    assert f["evidence"]["n_steps"] == 1 and f["evidence"]["calls_per_step"] == 300
    assert f["message"] == ("300 aclrtFree call(s) per step take 15.0 ms; the host blocks in "
                            "each and the device idles meanwhile.")


def test_an_api_with_no_calls_is_not_reported():
    # a row with 0 calls (whatever its time) is no allocator activity
    res = run({S.API_STATISTIC: api_stat([("aclrtFree", 50 * MS, 0)]),
               S.STEP_TRACE: step_trace([100 * MS])})
    assert res["status"]["memory.allocator_calls"] == ["silent", ""]


def test_host_events_give_calls_and_time_per_step():
    # host timeline of one step (100 ms): 4 aclrtFree calls of 3 ms = 12 ms, 12 %
    ev = [("cann", "AscendCL@aclrtFree", i * 10 * MS, 3 * MS) for i in range(4)]
    ev.append(("cann", "AscendCL@aclrtMalloc", 0, 50 * MS))
    res = run({S.HOST_EVENTS: host_events(ev), S.STEP_TRACE: step_trace([100 * MS])})
    (f,) = found(res).values()
    assert f["key"] == "memory.allocator_calls:aclrtFree"
    assert f["evidence"]["calls_per_step"] == 4 and f["evidence"]["ms_per_step"] == 12.0
    assert f["severity"] == "critical" and f["share_of_step_pct"] == 12.0


def test_skipped_without_api_data():
    res = run({S.STEP_TRACE: step_trace([100 * MS])})
    st, why = res["status"]["memory.allocator_calls"]
    assert st == "skipped" and "CANN API statistics" in why


def test_rule_declaration():
    (r,) = M.RULES
    assert r.id == "memory.allocator_calls" and r.area == "memory" and r.scope == "rank"
    assert r.threshold == {"us_per_step": 10000.0}
    assert r.needs == ((S.HOST_EVENTS, S.API_STATISTIC),)


@pytest.mark.parametrize("api", list(M.ALLOCATOR_APIS))
def test_every_watched_api_is_reported_alone(api):
    # 10 ms exactly in 1 call, one step of 1 s: 1 %, a warning
    res = run({S.API_STATISTIC: api_stat([(api, 10 * MS, 1)]),
               S.STEP_TRACE: step_trace([1000 * MS])})
    (f,) = found(res).values()
    assert f["key"] == f"memory.allocator_calls:{api}" and f["severity"] == "warning"
    assert f["advice"] == M.ALLOCATOR_APIS[api]


def test_any_share_of_the_step_is_at_least_a_warning_and_calls_are_rounded_to_tenths():
    # 3 steps of 6 s: aclMallocMemInner 7 calls, 15 ms in all -> 5 ms per step: below 10 ms,
    # silent (and the APIs after it are still looked at); aclrtFree 7 calls, 33 ms ->
    # 2.333... calls (2.3 at one decimal) and 11 ms per step, 11 / 6000 = 0.18 % of the step:
    # still a warning (any share of the step counts)
    res = run({S.API_STATISTIC: api_stat([("aclMallocMemInner", 15 * MS, 7),
                                          ("aclrtFree", 33 * MS, 7)]),
               S.STEP_TRACE: step_trace([6000 * MS] * 3)})
    (f,) = found(res).values()
    assert f["key"] == "memory.allocator_calls:aclrtFree"
    assert f["evidence"]["calls_per_step"] == 2.3 and f["evidence"]["ms_per_step"] == 11.0
    assert f["share_of_step_pct"] == 0.18 and f["severity"] == "warning"
    assert f["message"].startswith("2 aclrtFree call(s) per step take 11.0 ms (0.2% of the step)")
