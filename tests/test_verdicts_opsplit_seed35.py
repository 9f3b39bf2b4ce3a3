"""verdicts_opsplit seed 35: the op split on integer codes (OpTotals / _InstanceIds).

Checks, with expected values worked out by hand: a Transit Time of 1 ns is kept over the
bandwidth rows' transit; op_totals passes the group sizes to the split (an op whose group has
more members than are present is incomplete); the > 63-bit (dict) path of the instance ids
gives first-seen ids across batches; a batch whose columns have no chunks gets no ids.
"""
from __future__ import annotations

import pyarrow as pa

from ascendprof.analyze.verdicts import opsplit

from test_opsplit_by_hand import _bw, _op, _ops


def test_transit_time_of_one_ns_is_kept_over_the_bandwidth_transit():
    # Transit Time 1 (> 0) is used as it is; the RDMA row's 5 only stands in for a 0
    t = opsplit.op_rows(_ops([_op(0, "s1", "collective", "ar", "g", 10, transit=1),
                              _op(0, "s2", "collective", "ar", "g", 10, transit=0)]),
                        _bw([(0, "s1", "collective", "ar", "g", "RDMA", 5),
                             (0, "s2", "collective", "ar", "g", "RDMA", 5)]))
    assert t.column("transfer_ns").to_pylist() == [1, 5]


def test_op_totals_uses_the_group_sizes():
    """Ranks 4 and 5 of group g (3 members by sizes) run ar in two steps.

    step1: rank 4 elapse 10 transfer 2 wait 6, rank 5 elapse 4 transfer 2 wait 0;
    step2: both elapse 8 transfer 2 wait 0. With 3 members expected and 2 present every
    instance is incomplete: other 0; rank 4's peer wait step1 = min(10 - 4, 10 - 2) = 6,
    rest 2; step2 rest 6; absent = the shortest wait of the instance (0) -> unattributed
    2 + 6 = 8. Without the sizes both instances would be complete (other 8)."""
    r4 = [_op(4, "s1", "collective", "ar", "g", 10, transit=2, wait=6),
          _op(4, "s2", "collective", "ar", "g", 8, transit=2)]
    r5 = [_op(5, "s1", "collective", "ar", "g", 4, transit=2),
          _op(5, "s2", "collective", "ar", "g", 8, transit=2)]
    batches = [opsplit.op_rows(_ops(r4)), opsplit.op_rows(_ops(r5))]
    totals = opsplit.op_totals(lambda: iter(batches), {}, {"g": 3})
    vals = dict(zip(opsplit.OpTotals.NUM, totals.comp[(4, "collective", "g")].tolist()))
    assert vals["other_ns"] == 0
    assert vals["peer_wait_ns"] == 6
    assert vals["unattributed_ns"] == 8


def _keys(rows):
    return pa.table({c: pa.array([r[i] for r in rows], pa.string())
                     for i, c in enumerate(("step_key", "op", "group"))})


def test_wide_instance_ids_are_first_seen_across_batches():
    # the dict path (taken once the codes need > 63 bits) forced from the start
    b1 = [("s1", "ar", "g"), ("s2", "ar", "g"), ("s1", "ar", "g")]
    b2 = [("s2", "ar", "g"), ("s1", "send", "pp"), ("s1", "ar", "g")]
    for wide in (True, False):
        ids = opsplit._InstanceIds()
        if wide:
            ids._wide = {}
        assert ids.ids_of(_keys(b1)).tolist() == [0, 1, 0]
        assert ids.ids_of(_keys(b2)).tolist() == [1, 2, 0]
        assert len(ids) == 3


def test_a_batch_without_chunks_gets_no_ids():
    empty = pa.chunked_array([], pa.string())
    rows = pa.table({"step_key": empty, "op": empty, "group": empty})
    assert rows.column("op").num_chunks == 0
    assert opsplit._InstanceIds().ids_of(rows).tolist() == []
