"""cluster_communication_matrix.json merged a batch of ranks at a time
(cluster_communication.matrix_json_batches, what ``ascendprof analyse`` writes) for a group the
column merge leaves to the record-by-record merge: two local ranks of one rank, so two local
links of one global link. Expected values worked out by hand in the comments."""

from __future__ import annotations

import json

from ascendprof.analyze import cluster_communication as cc
from ascendprof.model import schemas as S

from test_cluster_communication_by_hand import _entry, _link, table

# group g, step1. Rank 0 reports the self-links of local ranks 0 and 2, so both map to global
# rank 0; rank 1 reports local 1's self-link (local 1 -> global 1).
#   op a-total@g: rank 0: 0-0 (1 MB, 1 ms), 2-2 (5 MB, 1 ms): both are the global link "0-0"
#   op b-total@g: rank 0: 2-2 (1 MB, 1 ms) -> "0-0"; rank 1: 1-1 (1 MB, 1 ms) -> "1-1"
RANK0 = [_link(0, "a-total@g", 0, 0, "LOCAL", 1.0, 1_000_000),
         _link(0, "a-total@g", 2, 2, "LOCAL", 5.0, 1_000_000),
         _link(0, "b-total@g", 2, 2, "LOCAL", 1.0, 1_000_000)]
RANK1 = [_link(1, "b-total@g", 1, 1, "LOCAL", 1.0, 1_000_000)]


def test_batched_merge_of_a_group_needing_the_record_merge():
    batches = [table(S.COMM_LINKS, RANK0), table(S.COMM_LINKS, RANK1)]  # one rank per batch
    membership = cc.group_membership(None, table(S.COMM_LINKS, RANK0 + RANK1))
    parked = []

    def park(t):
        parked.append(t)
        return t

    got = [(key, b"".join(pieces))
           for key, pieces in cc.matrix_json_batches(lambda: iter(batches), membership, park)]
    assert [k for k, _ in got] == ["(0, 1)"]  # group g: ranks 0 and 1
    assert len(parked) == 2  # the group's rows of each batch put aside
    doc = json.loads(got[0][1])
    # a-total: the two local links of "0-0" are not summed: as msprof-analyze's dict does, the
    # key keeps its first place and the last value, 5 MB in 1 ms = 5 GB/s
    # b-total: "0-0" 1 MB in 1 ms, "1-1" 1 MB in 1 ms: 1 GB/s each
    # Total Op Info@g (both ops are "total", none top/middle/bottom): "0-0" = 5 + 1 MB in
    # 1 + 1 ms = 3 GB/s; "1-1" = 1 MB in 1 ms
    assert doc == {"step1": {
        "a-total@g": {"0-0": _entry("LOCAL", 1.0, 5.0, "", 5.0)},
        "b-total@g": {"0-0": _entry("LOCAL", 1.0, 1.0, "", 1.0),
                      "1-1": _entry("LOCAL", 1.0, 1.0, "", 1.0)},
        "Total Op Info@g": {"0-0": _entry("LOCAL", 2.0, 6.0, "", 3.0),
                            "1-1": _entry("LOCAL", 1.0, 1.0, "", 1.0)}}}
    # the merge over all links at once gives the same text
    whole = [(k, b"".join(p)) for k, p in cc.matrix_json(table(S.COMM_LINKS, RANK0 + RANK1),
                                                         membership=membership)]
    assert whole == got
