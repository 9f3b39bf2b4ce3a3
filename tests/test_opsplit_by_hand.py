"""The op-time split (verdicts/opsplit.py) on small tables worked out by hand.

tests/test_op_split.py checks the per-row split against a pandas oracle; this file pins what the
oracle does not look at: the columns and types of op_rows, the transfer taken from the
bandwidth rows (which transports, which op, capped at the elapse), the sums OpTotals keeps
(means per step, op counts, group names, sort order, the wait-for graph, the elapse per op of
the flagged ranks) and the batching of op_totals. Every expected value is worked out in the
comments from the rows written here.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from ascendprof.analyze.verdicts import opsplit
from ascendprof.model import schemas as S

from _verdict_tables import split_op_time

_OP_KEYS = ("rank", "step_key", "kind", "op_name", "group")


def _op(rank, step_key, kind, op_name, group, elapse, transit=0, wait=0, idle=0):
    return dict(rank=rank, step=1, step_key=step_key, kind=kind, op_name=op_name, group=group,
                elapse_ns=elapse, transit_ns=transit, wait_ns=wait, sync_ns=0, idle_ns=idle)


def _ops(rows) -> pa.Table:
    return pa.Table.from_pylist(rows, schema=S.SCHEMAS[S.COMM_OPS])


def _bw(rows) -> pa.Table:
    """COMM_BANDWIDTH from (rank, step_key, kind, op_name, group, transport, transit_ns)."""
    return pa.Table.from_pylist(
        [dict(zip(_OP_KEYS + ("transport", "transit_ns"), r)) for r in rows],
        schema=S.SCHEMAS[S.COMM_BANDWIDTH])


# -- op_rows ------------------------------------------------------------------------------------

def test_op_rows_columns_types_and_missing_values():
    t = opsplit.op_rows(_ops([
        _op(3, "step1", "collective", "ar@x@y", "g", 10, transit=4, wait=3, idle=1),
        _op(3, None, None, None, None, None, transit=None, wait=None, idle=None),
    ]))
    assert t.column_names == ["rank", "step_key", "kind", "op", "group", "elapse_ns",
                              "wait_ns", "idle_ns", "transfer_ns"]
    assert t.schema.field("rank").type == pa.int32()
    for c in ("step_key", "kind", "group"):
        assert pa.types.is_dictionary(t.schema.field(c).type), c
    assert t.schema.field("op").type == pa.string()
    for c in ("elapse_ns", "wait_ns", "idle_ns", "transfer_ns"):
        assert t.schema.field(c).type == pa.int64(), c
    assert t.column("rank").to_pylist() == [3, 3]
    # missing step key and group read '', a missing op name 'None', a missing kind stays missing
    assert t.column("step_key").to_pylist() == ["step1", ""]
    assert t.column("group").to_pylist() == ["g", ""]
    assert t.column("kind").to_pylist() == ["collective", None]
    # the op name is the text before the FIRST '@'
    assert t.column("op").to_pylist() == ["ar", "None"]
    # missing times read 0; transfer = Transit Time (4 < elapse 10)
    assert t.column("elapse_ns").to_pylist() == [10, 0]
    assert t.column("wait_ns").to_pylist() == [3, 0]
    assert t.column("idle_ns").to_pylist() == [1, 0]
    assert t.column("transfer_ns").to_pylist() == [4, 0]
    assert opsplit.op_rows(None) is None


def test_transfer_from_rdma_and_sdma_bandwidth_when_transit_is_zero():
    ops = _ops([
        # 0: transit 0, RDMA 2 + sdma 3 (any case) = 5 (HCCS 100 and a missing transport are not
        #    counted: SDMA already includes HCCS) -> 5 < elapse 10
        _op(0, "step1", "collective", "ar@1", "g", 10),
        # 1: transit 4 > 0 is kept, its RDMA 7 is not used
        _op(0, "step1", "collective", "ag", "g", 10, transit=4),
        # 2: no group on either side: SDMA 20 capped at the elapse 6
        _op(0, "step1", "p2p", "send", None, 6),
        # 3: the same op on rank 1 has no bandwidth row of its own (rank 0's do not count): 0
        _op(1, "step1", "collective", "ar", "g", 9),
        # 4: a negative Transit Time is not a transfer: the RDMA 1 of its bandwidth is taken
        _op(1, "step1", "collective", "neg", "g", 9, transit=-2),
        # 5: Transit Time 12 beyond the elapse 5 is capped at 5
        _op(1, "step1", "collective", "big", "g", 5, transit=12),
        # 6: the same name in another group: group h has RDMA 8 of its own -> 8
        _op(0, "step1", "collective", "ar", "h", 10),
        # 7: the same name in another step: step2 has no bandwidth row -> 0
        _op(0, "step2", "collective", "ar", "g", 10),
    ])
    bw = _bw([
        (0, "step1", "collective", "ar@1", "g", "RDMA", 2),
        (0, "step1", "collective", "ar@2", "g", "sdma", 3),
        (0, "step1", "collective", "ar", "g", "HCCS", 100),
        (0, "step1", "collective", "ar", "g", None, 50),
        (0, "step1", "collective", "ag", "g", "RDMA", 7),
        (0, "step1", "p2p", "send", None, "SDMA", 20),
        (1, "step1", "collective", "neg", "g", "RDMA", 1),
        (0, "step1", "collective", "ar", "h", "RDMA", 8),
        (0, "step1", "collective", "ar", "g", "RDMA", None),  # a missing transit adds 0
    ])
    got = opsplit.op_rows(ops, bw).column("transfer_ns").to_pylist()
    assert got == [5, 4, 6, 0, 1, 5, 8, 0]
    # without bandwidth rows (None or an empty table): Transit Time, capped at the elapse
    want = [0, 4, 0, 0, -2, 5, 0, 0]
    assert opsplit.op_rows(ops).column("transfer_ns").to_pylist() == want
    assert opsplit.op_rows(ops, bw.slice(0, 0)).column("transfer_ns").to_pylist() == want


def test_op_rows_of_no_rows_with_bandwidth_rows():
    bw = _bw([(0, "step1", "collective", "ar", "g", "RDMA", 2)])
    t = opsplit.op_rows(_ops([]), bw)
    assert t.num_rows == 0 and t.column_names[-1] == "transfer_ns"


# -- the split: what the oracle of test_op_split.py does not vary ------------------------------

def test_p2p_kind_is_recognised_whatever_its_case():
    # a send between ranks 0 and 2 of group pp, which sizes says has 4 members: a p2p op has
    # 2 members whatever its group's size, so kind 'P2P' is complete (rank 0: other =
    # 8 - 1 - (8 - 5) = 4, rank 2: 5 - 1 = 4) ...
    def split(kind):
        rows = opsplit.op_rows(_ops([_op(0, "step1", kind, "send", "pp", 8, transit=1, wait=3),
                                     _op(2, "step1", kind, "send", "pp", 5, transit=1, wait=2)]))
        return split_op_time(rows, {"pp": 4})

    for kind in ("P2P", "p2p"):
        got = split(kind)
        assert got["complete"].tolist() == [True, True], kind
        assert got["other_ns"].tolist() == [4, 4], kind
    # ... while a collective of that group misses 2 members: rank 2 (arrived last, Wait Time 2)
    # waited 2 on them, so did rank 0 (after its 3 for rank 2); the rest is unattributed
    got = split("collective")
    assert got["complete"].tolist() == [False, False]
    assert got["absent_wait_ns"].tolist() == [2, 2]
    assert got["unattributed_ns"].tolist() == [8 - 1 - 3 - 2, 5 - 1 - 2]


def test_group_size_unknown_or_zero_in_sizes_reads_as_unknown():
    # two members of group g present; sizes says nothing usable about g (None, 0): complete
    rows = opsplit.op_rows(_ops([_op(0, "s", "collective", "ar", "g", 10, transit=2, wait=1),
                                 _op(1, "s", "collective", "ar", "g", 6, transit=2, wait=1)]))
    for sizes in (None, {}, {"g": None}, {"g": 0}, {"other": 5}):
        assert split_op_time(rows, sizes)["complete"].tolist() == [True, True], sizes
    # sizes g: 3 -> one member missing: incomplete
    assert split_op_time(rows, {"g": 3})["complete"].tolist() == [False, False]


def test_members_counted_once_when_a_rank_comes_in_several_batches():
    # rank 0's two ops and rank 1's one op of instance (s, ar, g) in three batches: the
    # instance has 2 members (ranks 0 and 1), whatever the batches
    inst = opsplit.OpInstances()
    b1 = opsplit.op_rows(_ops([_op(0, "s", "collective", "ar", "g", 10)]))
    b2 = opsplit.op_rows(_ops([_op(0, "s", "collective", "ar", "g", 7),
                               _op(0, "s", "collective", "other", "g", 3)]))
    b3 = opsplit.op_rows(_ops([_op(1, "s", "collective", "ar", "g", 4, wait=2)]))
    ids = [inst.add(b) for b in (b1, b2, b3)]
    assert ids[0].tolist() == [0] and ids[1].tolist() == [0, 1] and ids[2].tolist() == [0]
    assert inst.members.tolist() == [2, 1]
    # shortest elapse of 'ar': 4 on rank 1 (its Wait Time 2); of 'other': 3 on rank 0
    assert inst.shortest.tolist() == [4, 3]
    assert inst.first_rank.tolist() == [1, 0]
    assert inst.shortest_wait.tolist() == [2, 0]
    assert inst.elapse_sum.tolist() == [21, 3]
    # every per-instance array holds integers (ns, ranks, counts), as the split reads them
    for a in (inst.shortest, inst.first_rank, inst.shortest_wait, inst.elapse_sum,
              inst.members):
        assert a.dtype == np.int64


def test_equal_shortest_elapse_keeps_the_earlier_batch():
    # ranks 2 and 1 both have the shortest elapse 4: the first added (rank 2) is the one
    # waited for; rank 0 (elapse 9) waits 5 for rank 2
    inst = opsplit.OpInstances()
    batches = [opsplit.op_rows(_ops([_op(r, "s", "collective", "ar", "g", e, wait=w)]))
               for r, e, w in ((2, 4, 1), (0, 9, 0), (1, 4, 2))]
    ids = [inst.add(b) for b in batches]
    assert inst.first_rank.tolist() == [2] and inst.shortest_wait.tolist() == [1]
    got = inst.split(batches[1], ids[1])
    assert got["waited_for"].tolist() == [2] and got["peer_wait_ns"].tolist() == [5]


def test_lateness_is_the_median_of_the_others_minus_its_elapse():
    # one instance on four ranks, elapses 10, 20, 30, 60 (the shortest arrived last):
    #   rank 0 (10): others 20, 30, 60 -> median 30 -> late 30 - 10 = 20
    #   rank 1 (20): others 10, 30, 60 -> 30 -> late 10
    #   rank 2 (30): others 10, 20, 60 -> 20 -> 0 (never negative)
    #   rank 3 (60): others 10, 20, 30 -> 20 -> 0
    # with a fifth rank (elapse 15): rank 0's others 15, 20, 30, 60 -> (20 + 30) // 2 = 25
    # -> 15; rank 4's others 10, 20, 30, 60 -> 25 -> 10; rank 1's others 10, 15, 30, 60 -> 22
    # (floor of 22.5) -> 2
    def late(elapses):
        rows = opsplit.op_rows(_ops([_op(r, "s", "collective", "ar", "g", e)
                                     for r, e in enumerate(elapses)]))
        return split_op_time(rows)["late_ns"].tolist()

    assert late([10, 20, 30, 60]) == [20, 10, 0, 0]
    assert late([10, 20, 30, 60, 15]) == [15, 2, 0, 0, 10]
    # the same after another instance (ranks 0 and 1, elapses 5 and 9: rank 0 is 4 late)
    # took the first rows: each row is found within its own instance
    rows = opsplit.op_rows(_ops([_op(0, "s", "collective", "first", "g", 5),
                                 _op(1, "s", "collective", "first", "g", 9)]
                                + [_op(r, "s", "collective", "ar", "g", e)
                                   for r, e in enumerate([10, 20, 30, 60, 15])]))
    assert split_op_time(rows)["late_ns"].tolist() == [4, 0, 15, 2, 0, 0, 10]
    # alone in its instance: no other member, no lateness
    assert late([10]) == [0]


# -- OpTotals: the sums the verdicts read -----------------------------------------------------

def _two_ranks():
    """Ranks 4 and 5 (not 0, 1: a rank number is not a position), two steps.

    Instances and their split (transfer = Transit Time here):
      (step1, ar, g): rank 4 elapse 10 transfer 2, rank 5 elapse 4 transfer 2 -> rank 5 arrived
          last; rank 4 peer wait min(10 - 4, 10 - 2) = 6 waiting for 5, other 10 - 2 - 6 = 2;
          rank 5 other 2, late 10 - 4 = 6.
      (step2, ar, g): both 8, transfer 2: no wait, other 6 each, nobody late.
      (step1, send, pp) p2p on rank 4 only, elapse 5 transfer 1 wait 3: incomplete; absent 3,
          unattributed 5 - 1 - 3 = 1.
    """
    r4 = [_op(4, "step1", "collective", "ar@g", "g", 10, transit=2, wait=6, idle=1),
          _op(4, "step2", "collective", "ar@g", "g", 8, transit=2, wait=0, idle=0),
          _op(4, "step1", "p2p", "send", "pp", 5, transit=1, wait=3, idle=2)]
    r5 = [_op(5, "step1", "collective", "ar@g", "g", 4, transit=2, wait=0, idle=0),
          _op(5, "step2", "collective", "ar@g", "g", 8, transit=2, wait=0, idle=4)]
    return [opsplit.op_rows(_ops(r4)), opsplit.op_rows(_ops(r5))]


def _totals(batches, flagged, monkeypatch, batch_rows):
    monkeypatch.setattr(opsplit, "_BATCH_ROWS", batch_rows)
    return opsplit.op_totals(lambda: iter(batches), flagged)


@pytest.mark.parametrize("batch_rows", [1, 1 << 13])
def test_components_are_means_per_step_with_counts_sorted(monkeypatch, batch_rows):
    totals = _totals(_two_ranks(), {}, monkeypatch, batch_rows)
    comp = totals.components({"g": "dp"})
    assert list(comp.columns) == ["rank", "kind", "group", "group_name", "elapse_ns",
                                  "transfer_ns", "peer_wait_ns", "absent_wait_ns", "other_ns",
                                  "unattributed_ns", "wait_ns", "idle_ns", "late_ns", "n_ops"]
    assert str(comp["rank"].dtype) == "int32"
    # sorted by rank, kind, group; 'pp' has no display name: its id
    assert comp[["rank", "kind", "group", "group_name"]].values.tolist() == [
        [4, "collective", "g", "dp"], [4, "p2p", "pp", "pp"], [5, "collective", "g", "dp"]]
    # both ranks have 2 step keys: sums / 2
    #   (4, collective, g): elapse 10 + 8 = 18 -> 9; transfer 4 -> 2; peer 6 -> 3; other
    #       2 + 6 = 8 -> 4; wait 6 -> 3; idle 1 -> 0.5; 2 ops
    #   (4, p2p, pp): elapse 5 -> 2.5; transfer 1 -> 0.5; absent 3 -> 1.5; unattributed 1 -> 0.5;
    #       wait 3 -> 1.5; idle 2 -> 1; 1 op
    #   (5, collective, g): elapse 4 + 8 = 12 -> 6; transfer 2; other 2 + 6 = 8 -> 4; idle 4 ->
    #       2; late 6 -> 3; 2 ops
    num = ["elapse_ns", "transfer_ns", "peer_wait_ns", "absent_wait_ns", "other_ns",
           "unattributed_ns", "wait_ns", "idle_ns", "late_ns"]
    assert comp[num].values.tolist() == [
        [9, 2, 3, 0, 4, 0, 3, 0.5, 0],
        [2.5, 0.5, 0, 1.5, 0, 0.5, 1.5, 1, 0],
        [6, 2, 0, 0, 4, 0, 0, 2, 3]]
    assert comp["n_ops"].tolist() == [2, 1, 2]
    # without names the group name is the id
    assert totals.components()["group_name"].tolist() == ["g", "pp", "g"]
    assert totals.n_steps(4) == 2 and totals.n_steps(5) == 2
    # a rank never seen counts one step
    assert totals.n_steps(99) == 1


@pytest.mark.parametrize("batch_rows", [1, 1 << 13])
def test_wait_for_graph_per_step_of_the_waiter(monkeypatch, batch_rows):
    totals = _totals(_two_ranks(), {}, monkeypatch, batch_rows)
    # rank 4 waits 6 for rank 5 in group g (step1 only), over 2 steps: 3 per step
    assert totals.blame == {(4, 5, "g"): 6}
    b = totals.blame_frame()
    assert list(b.columns) == ["waiter", "waited_for", "group", "peer_wait_ns"]
    assert b.values.tolist() == [[4, 5, "g", 3.0]]


def test_wait_for_graph_sums_over_instances_and_sorts():
    # group g2 only (code 0 in the batch), three steps on each of ranks 0, 1, 2:
    #   step a: elapses 0: 7, 1: 3, 2: 5 -> rank 1 last; 0 waits 4, 2 waits 2 for 1
    #   step b: 0: 2, 1: 6, 2: 9 -> rank 0 last; 1 waits 4, 2 waits 7 for 0
    #   step c: 0: 8, 1: 5, 2: 5 -> ranks 1 and 2 shortest, rank 1 first; 0 waits 3 for 1;
    #           rank 2 has no wait (peer wait 0)
    # sums: (0, 1): 4 + 3 = 7; (1, 0): 4; (2, 0): 7; (2, 1): 2; per step (3 steps): / 3
    el = {"a": (7, 3, 5), "b": (2, 6, 9), "c": (8, 5, 5)}
    rows = [_op(r, s, "collective", "ar", "g2", el[s][r]) for r in range(3) for s in "abc"]
    totals = opsplit.op_totals(lambda: iter([opsplit.op_rows(_ops(rows))]), {})
    assert totals.blame == {(0, 1, "g2"): 7, (1, 0, "g2"): 4, (2, 0, "g2"): 7, (2, 1, "g2"): 2}
    b = totals.blame_frame()
    assert b[["waiter", "waited_for", "group"]].values.tolist() == [
        [0, 1, "g2"], [1, 0, "g2"], [2, 0, "g2"], [2, 1, "g2"]]
    assert b["peer_wait_ns"].tolist() == pytest.approx([7 / 3, 4 / 3, 7 / 3, 2 / 3])


@pytest.mark.parametrize("batch_rows", [1, 1 << 13])
def test_op_elapse_of_the_flagged_ranks_per_stage(monkeypatch, batch_rows):
    flagged = {"late": [5], "early": [4], "nobody": [7]}
    totals = _totals(_two_ranks(), flagged, monkeypatch, batch_rows)
    # rank 4: ar 10 + 8 = 18, send 5; rank 5: ar 4 + 8 = 12
    assert totals.op_elapse("early") == {"ar": 18, "send": 5}
    assert totals.op_elapse("late") == {"ar": 12}
    # a stage whose ranks have no op, and a stage not flagged: nothing
    assert totals.op_elapse("nobody") == {}
    assert totals.op_elapse("unknown") == {}
    # stage None (no pipeline stages): both ranks together
    totals = _totals(_two_ranks(), {None: [4, 5]}, monkeypatch, batch_rows)
    assert totals.op_elapse(None) == {"ar": 30, "send": 5}
    # nothing flagged: nothing kept
    totals = _totals(_two_ranks(), {}, monkeypatch, batch_rows)
    assert totals.op_elapse(None) == {}


def test_a_row_without_kind_counts_its_step_but_has_no_component():
    # rank 0: op 'ar' in step1 (elapse 6) and a row without kind in step2 (elapse 100): rank 0
    # has 2 step keys, so its one component is 6 / 2 = 3 per step, 1 op
    rows = opsplit.op_rows(_ops([_op(0, "step1", "collective", "ar", "g", 6),
                                 _op(0, "step2", None, "x", "g", 100)]))
    totals = opsplit.op_totals(lambda: iter([rows]), {})
    comp = totals.components()
    assert comp[["rank", "kind", "group"]].values.tolist() == [[0, "collective", "g"]]
    assert comp["elapse_ns"].tolist() == [3.0] and comp["n_ops"].tolist() == [1]


def test_no_ops_gives_empty_frames_with_their_columns():
    totals = opsplit.op_totals(lambda: iter([]), {0: [1]})
    comp = totals.components({"g": "dp"})
    assert comp.empty and list(comp.columns) == [
        "rank", "kind", "group", "group_name", *opsplit.OpTotals.NUM, "n_ops"]
    b = totals.blame_frame()
    assert b.empty and list(b.columns) == ["waiter", "waited_for", "group", "peer_wait_ns"]
    assert totals.op_elapse(0) == {}


def test_batches_are_consecutive_tables_of_about_batch_rows(monkeypatch):
    monkeypatch.setattr(opsplit, "_BATCH_ROWS", 2)
    tables = [pa.table({"x": list(range(n))}) for n in (1, 1, 3, 1)]
    # 1 + 1 reaches 2: one batch; 3 alone reaches it; the last 1 is what is left
    got = [b.column("x").to_pylist() for b in opsplit._grouped(iter(tables))]
    assert got == [[0, 0], [0, 1, 2], [0]]
    assert list(opsplit._grouped(iter([]))) == []


def test_interned_ids_in_first_seen_order():
    ids = opsplit._Interned()
    assert ids.lookup(["b", "a", "b"]).tolist() == [0, 1, 0]
    assert ids.lookup(["c", "a"]).tolist() == [2, 1]
    assert len(ids) == 3


def test_same_op_name_in_two_groups_is_two_instances():
    # 'ar' of step s in group g (ranks 0, 1: elapses 10, 4) and in group h (ranks 0, 1: 3, 3):
    # two instances; in g rank 0 waits 10 - 4 = 6 for rank 1 (not 10 - 3 = 7: h's rows are
    # another instance), in h nobody waits
    rows = opsplit.op_rows(_ops([_op(0, "s", "collective", "ar", "g", 10),
                                 _op(1, "s", "collective", "ar", "g", 4),
                                 _op(0, "s", "collective", "ar", "h", 3),
                                 _op(1, "s", "collective", "ar", "h", 3)]))
    got = split_op_time(rows)
    assert got["peer_wait_ns"].tolist() == [6, 0, 0, 0]
    assert got["waited_for"].tolist() == [1, -1, -1, -1]


def test_instance_keys_do_not_collide_across_step_op_and_group():
    # one step, ops a, b, c, d in group g and op a in group h, on ranks 0 and 1 with equal
    # elapses per instance: five instances, nobody waits. (Were (d, g) and (a, h) taken for
    # one instance, rank 0's d (elapse 10) would wait 10 - 2 = 8 for the a of group h.)
    ops = [("a", "g", 4), ("b", "g", 5), ("c", "g", 6), ("d", "g", 10), ("a", "h", 2)]
    rows = opsplit.op_rows(_ops([_op(r, "s", "collective", op, g, e)
                                 for r in (0, 1) for op, g, e in ops]))
    inst = opsplit.OpInstances()
    ids = inst.add(rows)
    assert len(set(ids.tolist())) == 5 and ids[:5].tolist() == ids[5:].tolist()
    assert inst.members.tolist() == [2] * 5
    got = inst.split(rows, ids)
    assert got["peer_wait_ns"].tolist() == [0] * 10 and got["waited_for"].tolist() == [-1] * 10
    # more step keys than op names: steps s0..s4, ops x, y: ten instances (e.g. (s3, x) and
    # (s0, y) are distinct)
    rows = opsplit.op_rows(_ops([_op(r, f"s{i}", "collective", op, "g", 3 + i + 7 * (op == "y"))
                                 for r in (0, 1) for i in range(5) for op in "xy"]))
    inst = opsplit.OpInstances()
    assert len(set(inst.add(rows).tolist())) == 10
    assert inst.members.tolist() == [2] * 10


def test_others_median_of_nothing_is_nothing():
    # no batch added, no row asked: an empty int64 answer
    got = opsplit.OpInstances().others_median(np.zeros(0, np.int64), np.zeros(0, np.int64))
    assert got.dtype == np.int64 and got.tolist() == []
