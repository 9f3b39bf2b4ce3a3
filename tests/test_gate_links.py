"""The gate's links from the ranks' own COMM_LINKS rows (``compare.gate.links.from_rank_links``):
group-local src/dst mapped to global ranks, the per-op summaries left out, rows summed per
group, step, link and transport.

The rows below are written the way a rank's communication_matrix.json gives them (one row per
op and local ``src-dst`` link, reported by global rank ``rank``; the profiler's summaries
``<op>-top1`` / ``-middle`` / ``-bottom1`` beside the ops and the ``-total`` op); every
expected value is worked out by hand in the comments.
"""

from __future__ import annotations

import math

import pandas as pd

from ascendprof.compare.diff import GroupLabel
from ascendprof.compare.gate.links import LINK_COLUMNS, from_rank_links

NAN = float("nan")


def _rows(*rows):
    cols = ["rank", "step_key", "link_key", "group", "src_rank", "dst_rank", "transport",
            "size_mb", "transit_ns"]
    return pd.DataFrame([dict(zip(cols, r)) for r in rows])


def _records(df):
    return [] if df is None else df.to_dict("records")


def test_self_links_map_local_ranks_and_summaries_are_left_out():
    # group g: local 0 is global 6 and local 1 is global 4 (each rank's self-link "i-i" says
    # which local rank it is), the opposite of the ascending order of the group's ranks, and no
    # group list is given: the mapping can only come from the self-links.
    rows = _rows(
        (6, "step1", "allreduce-total@g", "g", 0, 0, "LOCAL", 5.0, 100.0),
        (4, "step1", "allreduce-total@g", "g", 1, 1, "LOCAL", 5.0, 100.0),
        (6, "step1", "allreduce-total@g", "g", 0, 1, "HCCS", 8.0, 2000.0),
        (4, "step1", "allreduce-total@g", "g", 1, 0, "HCCS", 4.0, 1000.0),
        # summaries of the same op: left out, or the link would count 3 times
        (6, "step1", "allreduce-top1@g", "g", 0, 1, "HCCS", 8.0, 2000.0),
        (6, "step1", "allreduce-middle@g", "g", 0, 1, "HCCS", 8.0, 2000.0),
        (6, "step1", "allreduce-bottom1@g", "g", 0, 1, "HCCS", 8.0, 2000.0),
    )
    got = from_rank_links(rows, {})
    assert list(got.columns) == LINK_COLUMNS
    # local 0 -> 1 reported by 6 is 6 -> 4; local 1 -> 0 reported by 4 is 4 -> 6; sorted by src
    assert _records(got) == [
        {"group": "g", "step_key": "step1", "src": 4, "dst": 6, "transport": "HCCS",
         "size_mb": 4.0, "transit_ns": 1000.0},
        {"group": "g", "step_key": "step1", "src": 6, "dst": 4, "transport": "HCCS",
         "size_mb": 8.0, "transit_ns": 2000.0},
    ]


def test_one_side_without_self_link_is_mapped_through_the_group():
    # Only rank 4 was profiled: its self-link says local 0 is 4, local 1 has none. The group's
    # global ranks (4, 6) in ascending order map local 1 to 6, accepted because they map the
    # reporting rank 4 to local 0 as its self-link does.
    rows = _rows(
        (4, "step2", "send-total@g", "g", 0, 0, "LOCAL", 1.0, 10.0),
        (4, "step2", "send-total@g", "g", 0, 1, "RDMA", 3.0, 300.0),
        (4, "step2", "recv-total@g", "g", 0, 1, "RDMA", 2.0, 200.0),
        # local 2 is not in a 2-rank group: no global rank, the row is left out
        (4, "step2", "send-total@g", "g", 0, 2, "RDMA", 9.0, 900.0),
    )
    got = from_rank_links(rows, {"g": GroupLabel(name="g", ranks=(4, 6))})
    # send and recv on 4 -> 6 summed: 3 + 2 MB, 300 + 200 ns
    assert _records(got) == [
        {"group": "g", "step_key": "step2", "src": 4, "dst": 6, "transport": "RDMA",
         "size_mb": 5.0, "transit_ns": 500.0},
    ]


def test_group_order_not_matching_the_reporting_rank_maps_nothing():
    # rank 6 reports local 0 -> 1 with no self-links; the group's ascending order would make
    # local 0 rank 4, not the reporting rank 6: that mapping is refused, nothing is left
    rows = _rows((6, "step1", "send-total@g", "g", 0, 1, "RDMA", 3.0, 300.0))
    assert from_rank_links(rows, {"g": GroupLabel(name="g", ranks=(4, 6))}) is None
    # only summaries, or only self-links: nothing to gate
    only_summary = _rows((6, "step1", "send-top1@g", "g", 0, 1, "RDMA", 3.0, 300.0))
    assert from_rank_links(only_summary, {"g": GroupLabel(name="g", ranks=(6, 4))}) is None
    assert from_rank_links(None, {}) is None


def test_missing_transport_or_size_keeps_the_link():
    # A link whose transport is missing is kept under an empty transport; one whose size is
    # missing is kept with the sizes it has (pandas' sum leaves NaN out): only rows without
    # src or dst are dropped.
    rows = _rows(
        (0, "step1", "allgather-total@g", "g", 0, 0, "LOCAL", 1.0, 10.0),
        (1, "step1", "allgather-total@g", "g", 1, 1, "LOCAL", 1.0, 10.0),
        (0, "step1", "allgather-total@g", "g", 0, 1, None, 6.0, 600.0),
        (1, "step1", "allgather-total@g", "g", 1, 0, "HCCS", NAN, 700.0),
        (1, "step1", "allgather-total@g", "g", 1, None, "HCCS", 1.0, 1.0),
    )
    got = _records(from_rank_links(rows, {}))
    assert [(r["src"], r["dst"], r["transport"]) for r in got] == [(0, 1, ""), (1, 0, "HCCS")]
    assert got[0]["size_mb"] == 6.0 and got[0]["transit_ns"] == 600.0
    assert got[1]["size_mb"] == 0.0 and got[1]["transit_ns"] == 700.0
    assert not any(math.isnan(r["size_mb"]) for r in got)
