"""fragments.FragmentsBuilder (a rank's spilled communication.json tables given batch by batch)
on small hand-built tables, for the survivors of the module's seed-34 mutation run: an empty
or missing batch adds nothing, tables of another reader are refused with a message naming
what the builder takes, and a batch whose rows are not all of one (rank, kind, group) is split
by it, also when only one row differs by a missing kind. Expected values are worked out in the
comments from the rows given."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

from ascendprof.analyze import cluster_communication as cc
from ascendprof.model import schemas as S
from tests.test_cluster_communication_by_hand import table


def _ops(names, **common):
    """COMM_OPS rows of the communication.json reader (every row carries its OPINFO text)."""
    rows = [dict(op_name=n, elapse_ns=1_000_000 * (i + 1), opinfo_json=json.dumps({"n": n}))
            for i, n in enumerate(names)]
    return table(S.COMM_OPS, rows, **{**dict(rank=0, step=1, step_key="step1",
                                             kind="collective", group="g"), **common})


def _unpacked(frags):
    return [(f.rank, f.kind, f.group, f.count,
             *[[bytes(x) for x in part] for part in f.unpack()],
             [(json.loads(s), json.loads(t)) for s, t in f.totals]) for f in frags]


def test_an_empty_or_missing_batch_adds_nothing():
    ops = _ops(["a", "b"])
    b = cc.FragmentsBuilder()
    b.add(None, None, None)            # no COMM_OPS in this row group
    b.add(ops.slice(0, 0), None, None)  # a row group of no ops
    b.add(ops, None, None)
    b.add(ops.slice(2, 0), None, None)
    got = b.result()
    # one fragment (rank 0, collective, g) of the two ops a, b, in file order; its step1 total:
    # elapse 1 + 2 = 3 ms
    (f,) = got
    assert (f.rank, f.kind, f.group, f.count) == (0, "collective", "g", 2)
    steps, keys, infos = f.unpack()
    assert [json.loads(k) for k in keys] == ["a@g", "b@g"]
    assert [json.loads(bytes(i)) for i in infos] == [{"n": "a"}, {"n": "b"}]
    ((step, total),) = [(json.loads(s), json.loads(t)) for s, t in f.totals]
    assert step == "step1"
    assert total["Communication Time Info"]["Elapse Time(ms)"] == 3.0
    # nothing added at all: no fragments
    empty = cc.FragmentsBuilder()
    empty.add(None, None, None)
    empty.add(ops.slice(0, 0), None, None)
    assert empty.result() == []


def test_tables_without_the_profilers_opinfo_are_refused_by_name():
    # a db / PROF_ reader's COMM_OPS: no opinfo_json text (null), the OPINFO is built from the
    # columns by rank_fragments instead
    ops = _ops(["a"]).drop_columns(["opinfo_json"])
    ops = ops.append_column("opinfo_json", pa.nulls(1, pa.string()))
    with pytest.raises(ValueError, match="FragmentsBuilder takes communication.json tables"):
        cc.FragmentsBuilder().add(ops, None, None)


def test_a_batch_with_one_row_of_a_missing_kind_is_split_like_rank_fragments():
    # rows a (collective), b (kind missing), c (collective), all rank 0, group g: rank and
    # group are equal in every row and the kind of every row that has one equals the first
    # row's, yet b is not of (0, collective, g). rank_fragments keys each row by its own
    # (rank, kind, group): fragments (0, collective, g) with a, c and (0, None, g) with b
    ops = _ops(["a", "b", "c"])
    kinds = pa.array(["collective", None, "collective"], ops.schema.field("kind").type)
    ops = ops.set_column(ops.schema.get_field_index("kind"), "kind", kinds)
    want = cc.rank_fragments(ops, None, None)
    assert [(f.rank, f.kind, f.group, f.count) for f in want] == [
        (0, "collective", "g", 2), (0, None, "g", 1)]
    b = cc.FragmentsBuilder()
    b.add(ops, None, None)
    got = b.result()
    assert _unpacked(got) == _unpacked(want)
    assert [[json.loads(k) for k in f.unpack()[1]] for f in got] == [["a@g", "c@g"], ["b@g"]]
