"""The verdict format and the way other analyses contribute verdicts (docs/verdicts.md)."""

from __future__ import annotations

import pyarrow as pa
import pytest

from ascendprof.analyze import verdicts as V
from ascendprof.model import schemas as S

from _verdict_tables import FakeCluster


def _two_ranks() -> FakeCluster:
    # two ranks doing the same work, 100 ms steps split 70 / 20 / 10 ms: nothing to report
    rows = [{"rank": r, "step": 1, "computing_ns": 70_000_000, "comm_not_overlapped_ns": 20_000_000,
             "overlapped_ns": 0, "communication_ns": 20_000_000, "free_ns": 10_000_000,
             "stage_ns": 100_000_000, "bubble_ns": 0, "preparing_ns": 0} for r in (0, 1)]
    return FakeCluster({S.STEP_TRACE: pa.Table.from_pylist(rows, schema=S.SCHEMAS[S.STEP_TRACE])},
                       {})


@pytest.fixture
def contributed():
    before = V.registered_rules()
    yield
    V._RULES.clear()
    V._RULES.update(before)


def test_contributed_rule_verdicts_and_symptoms(contributed):
    def data_rule(ca, th):
        cause = V.make_verdict("data", "rank", [1], "warning", "Rank 1 waits for its data loader.",
                               "Look at the data loader of rank 1.", id="data:1",
                               evidence={"preparing_ms": 25.0})
        symptom = V.make_verdict("schedule", "rank", [1], "warning", "Rank 1 idles.", "-",
                                 caused_by="data:1")
        return [symptom, cause]

    V.register_rule("data", data_rule)
    out = V.derive(_two_ranks(), V.thresholds(None))
    (v,) = out  # the symptom is not a verdict of its own, and no "balanced" verdict
    assert v["id"] == "data:1" and v["category"] == "data" and v["ranks"] == [1]
    assert list(v) == list(V.VERDICT_KEYS)
    (s,) = v["symptoms"]
    assert s["caused_by"] == "data:1" and s["message"] == "Rank 1 idles." and s["ranks"] == [1]


def test_a_failing_rule_loses_only_its_own_verdicts(contributed):
    def broken(ca, th):
        raise RuntimeError("boom")

    V.register_rule("broken", broken)
    ca = _two_ranks()
    out = V.derive(ca, V.thresholds(None))
    assert [v["category"] for v in out] == ["balanced"]
    assert any("broken" in p.reason and "boom" in p.reason for p in ca.problems)


def test_make_verdict_rejects_unknown_severity():
    with pytest.raises(ValueError):
        V.make_verdict("data", "rank", [0], "severe", "m", "n")


def test_contributed_cause_takes_a_built_in_finding_and_its_waits(contributed):
    """A contributed cause (say MoE routing) that explains why rank 3 computes more: the
    built-in slow_rank verdict of rank 3 becomes its symptom (``_explains``), and it reads the
    same facts the built-in rules read (a ``facts`` parameter)."""
    # rank 3 computes 8 ms more than ranks 0-2 (108 vs 100 ms; 5 % of the 138 ms step = 6.9)
    rows = []
    for r in range(4):
        c, n = (108, 20) if r == 3 else (100, 28)
        rows.append({"rank": r, "step": 1, "computing_ns": c * 10**6,
                     "comm_not_overlapped_ns": n * 10**6, "overlapped_ns": 0,
                     "communication_ns": n * 10**6, "free_ns": 10 * 10**6,
                     "stage_ns": 138 * 10**6, "bubble_ns": 0, "preparing_ns": 0})
    ca = FakeCluster({S.STEP_TRACE: pa.Table.from_pylist(rows, schema=S.SCHEMAS[S.STEP_TRACE])},
                     {})
    seen = {}

    def moe(ca, th, facts):
        seen["computing_ms"] = facts.means.loc[3, "computing_ns"] / 1e6
        v = V.make_verdict("moe", "rank", [3], "warning", "Rank 3's experts get more tokens.",
                           "Look at the router's load balancing.", id="moe:3")
        v["_explains"] = ["slow_rank:3"]
        return [v]

    V.register_rule("moe", moe)
    out = V.derive(ca, V.thresholds(None))
    assert seen == {"computing_ms": 108.0}
    (v,) = out
    assert v["id"] == "moe:3" and "_explains" not in v
    (s,) = v["symptoms"]
    assert s["id"] == "slow_rank:3" and s["caused_by"] == "moe:3"
