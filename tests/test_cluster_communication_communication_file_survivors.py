"""cluster_communication.json (analyze/cluster_communication/communication_file.py) on small
hand-built COMM_OPS tables, for the survivors of the module's seed-34 mutation run: one rank
whose collective and p2p records of a group have the same op keys. Expected values worked out
in the comments from the rows given."""

from __future__ import annotations

import json

from ascendprof.analyze import cluster_communication as cc
from ascendprof.model import schemas as S


def table(name: str, rows: list[dict], **common):
    rows = [{**common, **r} for r in rows]
    return S.from_lists(name, {k: [r.get(k) for r in rows] for k in S.SCHEMAS[name].names})


def test_one_rank_same_op_key_in_two_kinds_is_written_once_first_record_wins():
    # rank 0 reports group g as collective and as p2p, each with one op a in step1 (the
    # profiler's OPINFO text kept as it is): both kinds have the rank set {0}, so one group
    # key "(0,)" holds two fragments of rank 0 with the same step and op keys. The op is
    # written once, with rank 0 once, its first record (the collective one) winning
    common = dict(rank=0, step=1, step_key="step1", group="g", op_name="a",
                  elapse_ns=1_000_000, transit_ns=0, wait_ns=0)
    ops = table(S.COMM_OPS, [
        dict(kind="collective", opinfo_json=json.dumps({"own": "a coll"})),
        dict(kind="p2p", opinfo_json=json.dumps({"own": "a p2p"}))], **common)
    coll, p2p = cc.group_membership(ops)
    f = cc.CommunicationFile(cc.rank_fragments(ops, None, None), coll, p2p)
    assert list(f) == ["(0,)"]
    raw = f.group_json("(0,)")
    step = json.loads(raw)["step1"]
    assert list(step) == ["a@g", "Total Op Info@g"]
    assert step["a@g"] == {"0": {"own": "a coll"}}
    # the bytes hold the op once and rank 0 once in it (a JSON object with a repeated key
    # would load as its last value only, hiding the repeat)
    a = raw.split(b'"a@g":', 1)[1].split(b',"Total Op Info@g"', 1)[0]
    assert raw.count(b'"a@g":') == 1 and a.count(b'"0":') == 1
