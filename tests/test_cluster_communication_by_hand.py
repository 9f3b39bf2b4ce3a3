"""analyze/cluster_communication by hand: group names and membership, communication_group.json,
cluster_communication.json (OPINFOs built from table rows, 'Total Op Info' sums) and
cluster_communication_matrix.json on small hand-built COMM_* tables.

Every expected value is worked out in the comments from the rows given (msprof-analyze's rules
as the package docstring states them), never copied from the code's output.
"""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

from ascendprof.analyze import cluster_communication as cc
from ascendprof.analyze.cluster_communication import groups as G
from ascendprof.model import schemas as S


def table(name: str, rows: list[dict], **common) -> pa.Table:
    """A COMM_* table of schema ``name`` from ``rows`` (each completed by ``common``)."""
    rows = [{**common, **r} for r in rows]
    return S.from_lists(name, {k: [r.get(k) for r in rows] for k in S.SCHEMAS[name].names})


# --- groups ----------------------------------------------------------------------------------

def test_double_hash_by_hand():
    # "x": h0 = h1 = ord("x") = 120 -> 120 * 2**32 + 120 = 515396075640
    assert cc.double_hash("x") == 515_396_075_640
    # "ab": h0 = 97 * 29 + 98 = 2911, h1 = 97 * 131 + 98 = 12805 -> 2911 * 2**32 + 12805
    assert cc.double_hash("ab") == 2911 * 2**32 + 12805 == 12_502_649_811_461
    assert cc.double_hash("") == 0


def test_double_hash_wraps_each_half_at_32_bits():
    # 8 characters "~" (126): h1 = sum 126 * 131**k, k < 8, exceeds 2**32 (131**7 > 6e14), so
    # each half is the polynomial taken mod 2**32 -- and both halves stay below 2**32
    text = "~" * 8
    h0 = sum(126 * 29**k for k in range(8)) % 2**32
    h1 = sum(126 * 131**k for k in range(8)) % 2**32
    assert cc.double_hash(text) == (h0 << 32) | h1
    assert cc.double_hash(text) < 2**64


def test_parallel_groups_first_rank_wins_and_odd_entries():
    """Ranks read in ascending order whatever the dict order; the first rank listing a group id
    wins; an entry that is not an object is skipped (a later rank may still give it); a missing
    group_name is ""; global_ranks that are not a list are []; ranks sorted."""
    meta = {
        2: {"parallel_group_info": {"gA": {"group_name": "late", "global_ranks": [9]},
                                    "gX": {"group_name": "x2", "global_ranks": [7]}}},
        0: {"parallel_group_info": {"gA": {"group_name": None, "global_ranks": [2, 0]},
                                    "gX": "not an object",
                                    "gY": {"global_ranks": "0,1"}}},
        1: {"parallel_group_info": ["not", "an", "object"]},
        3: None,
        4: {},
    }
    got = cc.parallel_groups(meta)
    h = {g: str(cc.double_hash(g)) for g in ("gA", "gX", "gY")}
    assert got == {
        h["gA"]: {"group_id": "gA", "pg_name": "", "global_ranks": [0, 2]},  # rank 0's
        h["gY"]: {"group_id": "gY", "pg_name": "", "global_ranks": []},
        h["gX"]: {"group_id": "gX", "pg_name": "x2", "global_ranks": [7]},  # rank 2's
    }
    assert list(got) == [h["gA"], h["gY"], h["gX"]]


def test_group_key_is_the_tuple_text_of_the_rank_set():
    assert G.group_key([5, 3]) == "(3, 5)" and G.group_key({0}) == "(0,)"
    assert G.group_key([]) == "()"
    # key_for: the kind picks the membership dict; an unknown group has no ranks
    coll, p2p = {"g": {1, 0}}, {"g": {4, 2}}
    assert G.key_for("collective", "g", coll, p2p) == "(0, 1)"
    assert G.key_for("p2p", "g", coll, p2p) == "(2, 4)"
    assert G.key_for("collective", "nope", coll, p2p) == "()"


# COMM_OPS / COMM_LINKS for membership: ranks out of order in the table, a kind that is neither
# collective nor p2p, a group seen only in a rank's links.
GA, GC = str(cc.double_hash("ga")), str(cc.double_hash("gc"))


def _membership_tables():
    ops = table(S.COMM_OPS, [
        dict(rank=1, kind="collective", group="B", op_name="o1"),
        dict(rank=1, kind="collective", group=GA, op_name="o2"),
        dict(rank=0, kind="collective", group=GA, op_name="o3"),
        dict(rank=0, kind="p2p", group="P", op_name="o4"),
        dict(rank=0, kind="other", group="Z", op_name="o5"),  # neither kind: no group
    ], step_key="step1")
    links = table(S.COMM_LINKS, [
        dict(rank=0, kind="collective", group=GC, link_key="x@" + GC, src_rank=0, dst_rank=0),
        dict(rank=1, kind="collective", group="B", link_key="x@B", src_rank=0, dst_rank=0),
        dict(rank=2, kind="p2p", group="P", link_key="y@P", src_rank=1, dst_rank=1),
    ], step_key="step1")
    return ops, links


def test_group_membership_first_seen_order_ops_before_links():
    # by rank ascending, a rank's ops before its links: rank 0 -> GA (op), P (op), GC (link);
    # rank 1 -> B (op), GA (op), B (link); rank 2 -> P (link). Collective groups in the order
    # GA, GC, B; "other" rows make no group.
    ops, links = _membership_tables()
    coll, p2p = cc.group_membership(ops, links)
    assert list(coll.items()) == [(GA, {0, 1}), (GC, {0}), ("B", {1})]
    assert list(p2p.items()) == [("P", {0, 2})]
    # the same from per-rank first_memberships concatenated (what the workers send)
    firsts = pa.concat_tables([cc.first_memberships(
        ops.filter(pa.compute.equal(ops["rank"], r)),
        links.filter(pa.compute.equal(links["rank"], r))) for r in (1, 0, 2)])
    assert [list(d.items()) for d in cc.group_membership(None, firsts=firsts)] == \
        [list(coll.items()), list(p2p.items())]
    # ops alone: GC is not seen
    coll, p2p = cc.group_membership(ops)
    assert list(coll.items()) == [(GA, {0, 1}), ("B", {1})] and p2p == {"P": {0}}


def test_first_memberships_columns_and_empty_input():
    ops, links = _membership_tables()
    f = cc.first_memberships(ops, links)
    assert sorted(f.column_names) == ["group", "kind", "order_min", "rank"]
    # one row per (kind, group, rank) of the collective / p2p rows: the ops give GA@1, B@1,
    # GA@0, P@0 (Z@0 is neither kind); the links add GC@0 and P@2 (B@1 is there already)
    assert f.num_rows == 6
    assert cc.first_memberships(None) is None
    assert cc.first_memberships(ops.slice(0, 0), links.slice(0, 0)) is None
    assert cc.group_membership(None) == ({}, {})


def test_build_groups_by_hand():
    """rank_set is the group's global_ranks when parallel_group_info knows the group with a
    non-empty list, else the ranks seen (sorted); group_id / pg_name "" for unknown groups."""
    ops, links = _membership_tables()
    meta = {0: {"parallel_group_info": {
        "ga": {"group_name": "dp", "global_ranks": [5, 1, 0]},
        "gc": {"group_name": "tp", "global_ranks": []}}}}
    got = cc.build_groups(ops, meta, comm_links=links)
    assert got == {
        "collective": [[0, 1], [0], [1]],
        "p2p": [[0, 2]],
        "comm_group_parallel_info": [
            {"type": "collective", "rank_set": [0, 1, 5], "group_name": GA, "group_id": "ga",
             "pg_name": "dp"},
            {"type": "collective", "rank_set": [0], "group_name": GC, "group_id": "gc",
             "pg_name": "tp"},
            {"type": "collective", "rank_set": [1], "group_name": "B", "group_id": "",
             "pg_name": ""},
            {"type": "p2p", "rank_set": [0, 2], "group_name": "P", "group_id": "", "pg_name": ""},
        ]}
    # a membership given by the caller is used as it is
    assert cc.build_groups(None, {}, membership=({"g": {3, 1}}, {})) == {
        "collective": [[1, 3]], "p2p": [],
        "comm_group_parallel_info": [{"type": "collective", "rank_set": [1, 3],
                                      "group_name": "g", "group_id": "", "pg_name": ""}]}
    assert cc.build_groups(None, meta) == {"collective": [], "p2p": [],
                                           "comm_group_parallel_info": []}


# --- matrix ----------------------------------------------------------------------------------

def _link(rank, link_key, src, dst, transport, mb, ns, op=None, step="step1"):
    kind = "p2p" if link_key.endswith("@p") else "collective"
    return dict(rank=rank, step_key=step, kind=kind, link_key=link_key,
                group=link_key.rsplit("@", 1)[1], src_rank=src, dst_rank=dst,
                transport=transport, size_mb=mb, transit_ns=ns, op_name=op)


#: group g: global ranks 3 (local 0) and 5 (local 1); p2p group p: ranks 3 (local 0) and 7
#: (rank 7 reports ops only). Rows in this order (rank 5's row before some of rank 3's).
LINKS = [
    _link(3, "allreduce-top1@g", 0, 0, "LOCAL", 1.0, 1_000_000, "hcom_allReduce__1"),
    _link(3, "allreduce-top1@g", 0, 1, "HCCS", 2.0, 1_000_000, "hcom_allReduce__1"),
    _link(5, "allreduce-top1@g", 1, 1, "LOCAL", 1.0, 500_000, "hcom_allReduce__2"),
    _link(5, "allreduce-top1@g", 1, 0, "HCCS", 4.0, 2_000_000, "hcom_allReduce__2"),
    _link(3, "allreduce-total@g", 0, 1, "HCCS", 6.0, 2_000_000),
    _link(3, "allreduce-total@g", 0, 1, "RDMA", 100.0, 9_000_000),  # a rank's repeat: ignored
    _link(3, "allreduce-total@g", 0, 2, "HCCS", 9.0, 1_000_000),  # local 2: nobody's self-link
    _link(5, "allreduce-total@g", 0, 1, "HCCS", 2.0, 2_000_000),  # same link, other rank: summed
    _link(5, "allreduce-total@g", 1, 0, "HCCS", 4.0, 1_000_000),
    _link(5, "allreduce-total@g", 0, 2, "HCCS", 9.0, 1_000_000),  # the same dropped link
    _link(3, "allreduce-top1@g", 4, 0, "HCCS", 1.0, 1_000_000, "hcom_allReduce__1"),  # local 4
    _link(3, "allreduce-total@g", None, 1, "HCCS", 1.0, 1_000_000),  # no source rank: skipped
    _link(3, "allreduce-total@g", 0, 0, "LOCAL", 1.0, 1_000_000, step="step2"),
    _link(3, "allreduce-total@g", 0, 1, "HCCS", 1.0, 1_000_000, step="step2"),  # 1 unmapped
    _link(3, "batchsendrecv-top1@p", 0, 0, "LOCAL", 3.0, 1_500_000, "hcom_batchSendRecv__1"),
    _link(3, "batchsendrecv-top1@p", 0, 1, "HCCS", 3.0, 1_500_000, "hcom_batchSendRecv__1"),
]


def _entry(transport, ms, mb, op, bw):
    return {"Transport Type": transport, "Transit Time(ms)": ms, "Transit Size(MB)": mb,
            "Op Name": op, "Bandwidth(GB/s)": bw}


def test_matrix_by_hand():
    links = table(S.COMM_LINKS, LINKS)
    ops = table(S.COMM_OPS, [dict(rank=7, kind="p2p", group="p", op_name="hcom_batchSendRecv__1"),
                             dict(rank=3, kind="p2p", group="p", op_name="hcom_batchSendRecv__1")],
                step_key="step1")
    got = list(cc.matrix_groups(links, comm_ops=ops))
    # group keys in first-seen order: rank 3's rows come first (g, then p)
    assert [k for k, _ in got] == ["(3, 5)", "(3, 7)"]
    g, p = got[0][1], got[1][1]
    # step1 of g: local 0 -> rank 3, local 1 -> rank 5 (their self-links); per link the ranks'
    # records summed, bandwidth = MB / ms; links with local 2 or 4 or no source left out
    assert json.dumps(g["step1"]) == json.dumps({
        "allreduce-top1@g": {
            "3-3": _entry("LOCAL", 1.0, 1.0, "hcom_allReduce__1", 1.0),
            "3-5": _entry("HCCS", 1.0, 2.0, "hcom_allReduce__1", 2.0),
            "5-5": _entry("LOCAL", 0.5, 1.0, "hcom_allReduce__2", 2.0),
            "5-3": _entry("HCCS", 2.0, 4.0, "hcom_allReduce__2", 2.0)},
        # 0-1: rank 3's first record 6 MB / 2 ms (its RDMA repeat ignored) + rank 5's
        # 2 MB / 2 ms = 8 MB / 4 ms = 2 GB/s; 1-0: 4 MB / 1 ms
        "allreduce-total@g": {
            "3-5": _entry("HCCS", 4.0, 8.0, "", 2.0),
            "5-3": _entry("HCCS", 1.0, 4.0, "", 4.0)},
        # the group total sums the -total@ op only (top1 is a summary of the same traffic)
        "Total Op Info@g": {
            "3-5": _entry("HCCS", 4.0, 8.0, "", 2.0),
            "5-3": _entry("HCCS", 1.0, 4.0, "", 4.0)}})
    # step2: only rank 3 reports, local 1 has no self-link in that step
    assert g["step2"] == {"allreduce-total@g": {"3-3": _entry("LOCAL", 1.0, 1.0, "", 1.0)},
                          "Total Op Info@g": {"3-3": _entry("LOCAL", 1.0, 1.0, "", 1.0)}}
    assert list(g) == ["step1", "step2"]
    # p: top1 is not summed into the total, which has no link then
    assert p == {"step1": {"batchsendrecv-top1@p": {
        "3-3": _entry("LOCAL", 1.5, 3.0, "hcom_batchSendRecv__1", 2.0)}}}


def test_matrix_without_links_is_empty():
    assert list(cc.matrix_groups(None)) == []
    assert list(cc.matrix_groups(table(S.COMM_LINKS, []))) == []


def test_matrix_of_one_link():
    # the smallest input: rank 6's self-link (local 0 -> rank 6), 2 MB in 0.5 ms = 4 GB/s
    one = table(S.COMM_LINKS, [_link(6, "allgather-total@g", 0, 0, "LOCAL", 2.0, 500_000)])
    want = _entry("LOCAL", 0.5, 2.0, "", 4.0)
    assert list(cc.matrix_groups(one)) == [
        ("(6,)", {"step1": {"allgather-total@g": {"6-6": want}, "Total Op Info@g": {"6-6": want}}})]


def test_matrix_group_is_the_text_after_the_last_at():
    # an op part holding "@" ("my@op-total@g"): the group is "g", after the last "@"
    links = table(S.COMM_LINKS, [
        _link(0, "my@op-total@g", 0, 0, "LOCAL", 1.0, 1_000_000),
        _link(0, "my@op-total@g", 0, 1, "HCCS", 3.0, 1_000_000),
        _link(2, "my@op-total@g", 1, 1, "LOCAL", 1.0, 1_000_000)])
    ((key, steps),) = list(cc.matrix_groups(links))
    assert key == "(0, 2)"
    assert set(steps["step1"]) == {"my@op-total@g", "Total Op Info@g"}
    assert steps["step1"]["my@op-total@g"]["0-2"] == _entry("HCCS", 1.0, 3.0, "", 3.0)
    assert steps["step1"]["Total Op Info@g"]["0-2"] == _entry("HCCS", 1.0, 3.0, "", 3.0)


def test_unmapped_links_by_hand():
    # per (group, step) the links left out, counted once over ranks: step1 of g: 0-2 (rank 3
    # and rank 5: one link), 4-0 of another op; the row without a source is no link.
    # The unmapped local rank: the destination when the source maps, else the source.
    got = cc.unmapped_links(table(S.COMM_LINKS, LINKS))
    assert got == [
        {"group": "g", "step_key": "step1", "links": 2, "ops": 2, "local_ranks": [2, 4],
         "example": "allreduce-total@g 0-2"},
        {"group": "g", "step_key": "step2", "links": 1, "ops": 1, "local_ranks": [1],
         "example": "allreduce-total@g 0-1"},
        {"group": "p", "step_key": "step1", "links": 1, "ops": 1, "local_ranks": [1],
         "example": "batchsendrecv-top1@p 0-1"}]
    # groups in the order their first dropped link comes (not sorted): rows reversed, p first;
    # the example is the first dropped row of its group and step
    assert [(u["group"], u["step_key"], u["example"]) for u in
            cc.unmapped_links(table(S.COMM_LINKS, LINKS[::-1]))] == [
        ("p", "step1", "batchsendrecv-top1@p 0-1"), ("g", "step2", "allreduce-total@g 0-1"),
        ("g", "step1", "allreduce-top1@g 4-0")]
    mapped = [r for r in LINKS if r["src_rank"] in (0, 1) and r["dst_rank"] in (0, 1)
              and r["step_key"] == "step1" and r["link_key"].endswith("@g")]
    assert cc.unmapped_links(table(S.COMM_LINKS, mapped)) == []
    assert cc.unmapped_links(None) == [] and cc.unmapped_links(table(S.COMM_LINKS, [])) == []
    # only rows without ranks: nothing to map
    assert cc.unmapped_links(table(S.COMM_LINKS, [_link(3, "a@g", None, None, "HCCS", 1, 1)])) \
        == []


# --- OPINFOs from table rows and 'Total Op Info' (db / PROF_ input: no opinfo_json) -----------

def _db_tables():
    """Rank 0, step1, collective group g: ops a and b, as the db reader gives them."""
    common = dict(rank=0, step=1, step_key="step1", kind="collective", group="g")
    ops = table(S.COMM_OPS, [
        dict(op_name="a", start_ns=1_000_500, elapse_ns=2_000_000, transit_ns=500_000,
             wait_ns=1_000_000, sync_ns=250_000, idle_ns=250_000),
        dict(op_name="b", elapse_ns=3_000_000, transit_ns=1_500_000, wait_ns=0,
             wait_ratio=0.5, sync_ratio=0.25)], **common)
    bw = table(S.COMM_BANDWIDTH, [
        dict(op_name="a", transport="HCCS", size_mb=10.0, transit_ns=1_000_000),
        dict(op_name="a", transport="RDMA", size_mb=4.0, transit_ns=2_000_000,
             bandwidth_gbps=1.5, large_packet_ratio=0.25),
        dict(op_name="b", transport="HCCS"),
        dict(op_name="b", transport="SIO", size_mb=5.0, transit_ns=0),
        dict(op_name="c", transport="HCCS", size_mb=50.0, transit_ns=5_000_000)], **common)
    dist = table(S.COMM_SIZE_DIST, [
        dict(op_name="a", transport="HCCS", packet_size_mb="1", count=2, dur_ns=400_000),
        dict(op_name="a", transport="HCCS", packet_size_mb="2"),
        dict(op_name="a", transport="PCIE", packet_size_mb="1", count=7, dur_ns=700_000),
        dict(op_name="c", transport="HCCS", packet_size_mb="1", count=9, dur_ns=900_000)],
        **common)
    return ops, bw, dist


def _file(ops, bw, dist, links=None) -> dict:
    coll, p2p = cc.group_membership(ops, links)
    return json.loads(json.dumps(dict(cc.CommunicationFile(cc.rank_fragments(ops, bw, dist),
                                                           coll, p2p))))


def test_opinfos_and_totals_from_db_rows_by_hand():
    got = _file(*_db_tables())
    assert list(got) == ["(0,)"] and list(got["(0,)"]) == ["step1"]
    ops = got["(0,)"]["step1"]
    assert list(ops) == ["a@g", "b@g", "Total Op Info@g"]  # op c has no COMM_OPS row
    a, b = ops["a@g"]["0"], ops["b@g"]["0"]
    # a: times ns -> ms; Start 1_000_500 ns = 1000.5 us; ratios missing, so recomputed:
    # wait 1 / (1 + 0.5) = 0.6667, sync 0.25 / (0.25 + 0.5) = 0.3333
    assert a["Communication Time Info"] == {
        "Start Timestamp(us)": 1000.5, "Elapse Time(ms)": 2.0, "Transit Time(ms)": 0.5,
        "Wait Time(ms)": 1.0, "Synchronization Time(ms)": 0.25, "Idle Time(ms)": 0.25,
        "Wait Time Ratio": 0.6667, "Synchronization Time Ratio": 0.3333}
    # HCCS: no bandwidth given -> 10 MB / 1 ms = 10 GB/s; no Large Packet Ratio -> no key;
    # sizes "1" (2 packets, 0.4 ms) and "2" (count and time missing -> 0, 0).
    # RDMA: bandwidth and ratio as given; no size rows. PCIE: sizes but no bandwidth row: none
    assert a["Communication Bandwidth Info"] == {
        "HCCS": {"Transit Size(MB)": 10.0, "Transit Time(ms)": 1.0, "Bandwidth(GB/s)": 10.0,
                 "Size Distribution": {"1": [2, 0.4], "2": [0, 0]}},
        "RDMA": {"Transit Size(MB)": 4.0, "Transit Time(ms)": 2.0, "Bandwidth(GB/s)": 1.5,
                 "Large Packet Ratio": 0.25, "Size Distribution": {}}}
    assert list(a["Communication Bandwidth Info"]["RDMA"]) == [
        "Transit Size(MB)", "Transit Time(ms)", "Bandwidth(GB/s)", "Large Packet Ratio",
        "Size Distribution"]
    # b: no start, no sync / idle -> no such keys; both ratios as given (0.5, 0.25; from the
    # times they would be 0); HCCS without size or time: 0, 0, 0 GB/s;
    # SIO 5 MB in 0 ms: bandwidth 0 (no time to divide by)
    assert b["Communication Time Info"] == {
        "Elapse Time(ms)": 3.0, "Transit Time(ms)": 1.5, "Wait Time(ms)": 0.0,
        "Wait Time Ratio": 0.5, "Synchronization Time Ratio": 0.25}
    assert b["Communication Bandwidth Info"] == {
        "HCCS": {"Transit Size(MB)": 0, "Transit Time(ms)": 0, "Bandwidth(GB/s)": 0,
                 "Size Distribution": {}},
        "SIO": {"Transit Size(MB)": 5.0, "Transit Time(ms)": 0, "Bandwidth(GB/s)": 0,
                "Size Distribution": {}}}
    total = ops["Total Op Info@g"]["0"]
    # sums over a and b: elapse 5, transit 2, wait 1; sync and idle only a's (b has none);
    # wait ratio 1 / (1 + 2) = 0.3333, sync ratio 0.25 / (0.25 + 2) = 0.1111
    assert total["Communication Time Info"] == {
        "Elapse Time(ms)": 5.0, "Transit Time(ms)": 2.0, "Wait Time(ms)": 1.0,
        "Synchronization Time(ms)": 0.25, "Idle Time(ms)": 0.25,
        "Wait Time Ratio": 0.3333, "Synchronization Time Ratio": 0.1111}
    # per transport: HCCS 10 + 0 MB over 1 + 0 ms = 10 GB/s, its sizes summed (c's left out,
    # PCIE's too: no bandwidth row); db input (a bandwidth row has a Large Packet Ratio):
    # "Large Packet Ratio" 0 in every transport of the totals, as msprof-analyze writes it
    assert total["Communication Bandwidth Info"] == {
        "HCCS": {"Transit Time(ms)": 1.0, "Transit Size(MB)": 10.0,
                 "Size Distribution": {"1": [2, 0.4], "2": [0, 0.0]},
                 "Bandwidth(GB/s)": 10.0, "Large Packet Ratio": 0},
        "RDMA": {"Transit Time(ms)": 2.0, "Transit Size(MB)": 4.0, "Size Distribution": {},
                 "Bandwidth(GB/s)": 2.0, "Large Packet Ratio": 0},
        "SIO": {"Transit Time(ms)": 0, "Transit Size(MB)": 5.0, "Size Distribution": {},
                "Bandwidth(GB/s)": 0, "Large Packet Ratio": 0}}
    # transports in order of first appearance among the op rows (a's HCCS, a's RDMA, b's SIO)
    assert list(total["Communication Bandwidth Info"]) == ["HCCS", "RDMA", "SIO"]
    assert list(a["Communication Bandwidth Info"]) == ["HCCS", "RDMA"]


def test_totals_without_large_packet_ratio_have_no_such_key():
    # PROF_-like input: no bandwidth row carries a Large Packet Ratio -> no key in the totals
    ops, bw, dist = _db_tables()
    bw = bw.set_column(bw.schema.get_field_index("large_packet_ratio"), "large_packet_ratio",
                       pa.nulls(bw.num_rows, pa.float64()))
    total = _file(ops, bw, dist)["(0,)"]["step1"]["Total Op Info@g"]["0"]
    assert {tr: "Large Packet Ratio" in e
            for tr, e in total["Communication Bandwidth Info"].items()} == \
        {"HCCS": False, "RDMA": False, "SIO": False}
    # an op without bandwidth rows: totals without transports
    total = _file(ops, None, None)["(0,)"]["step1"]["Total Op Info@g"]["0"]
    assert total["Communication Bandwidth Info"] == {}
    assert total["Communication Time Info"]["Elapse Time(ms)"] == 5.0


@pytest.mark.parametrize("text", [False, True], ids=["db", "text"])
def test_one_group_name_in_two_kinds_sharing_a_key_merges_totals(text):
    """Rank 0 reports group g as collective (op a) and as p2p (ops q and a again): both kinds
    have the rank set {0}, so one group key "(0,)"; the ops are merged (the rank's first record
    of a@g -- the collective one -- wins) and the two per-kind totals are summed again.
    ``text``: the rows carry the profiler's OPINFO text (communication.json input), copied as it
    is; the totals come from the rows all the same, without a "Large Packet Ratio" key."""
    common = dict(rank=0, step=1, step_key="step1", group="g")

    def own(name):
        return json.dumps({"own": name}) if text else None

    ops = table(S.COMM_OPS, [
        dict(kind="collective", op_name="a", elapse_ns=2_000_000, transit_ns=500_000,
             wait_ns=1_000_000, opinfo_json=own("a coll")),
        dict(kind="p2p", op_name="q", elapse_ns=1_000_000, transit_ns=1_000_000,
             wait_ns=500_000, sync_ns=200_000, opinfo_json=own("q")),
        dict(kind="p2p", op_name="a", elapse_ns=4_000_000, transit_ns=0, wait_ns=0,
             opinfo_json=own("a p2p"))],
        **common)
    bw = table(S.COMM_BANDWIDTH, [
        dict(kind="collective", op_name="a", transport="HCCS", size_mb=10.0,
             transit_ns=1_000_000, large_packet_ratio=0.5),
        dict(kind="p2p", op_name="q", transport="HCCS", size_mb=6.0, transit_ns=2_000_000)],
        **common)
    dist = table(S.COMM_SIZE_DIST, [
        dict(kind="collective", op_name="a", transport="HCCS", packet_size_mb="1", count=2,
             dur_ns=400_000),
        dict(kind="p2p", op_name="q", transport="HCCS", packet_size_mb="1", count=1,
             dur_ns=100_000),
        dict(kind="p2p", op_name="q", transport="HCCS", packet_size_mb="4", count=3,
             dur_ns=300_000)], **common)
    got = _file(ops, bw, dist)
    assert list(got) == ["(0,)"]
    step = got["(0,)"]["step1"]
    assert list(step) == ["a@g", "q@g", "Total Op Info@g"]
    if text:
        assert step["a@g"]["0"] == {"own": "a coll"} and step["q@g"]["0"] == {"own": "q"}
    else:
        assert step["a@g"]["0"]["Communication Time Info"]["Elapse Time(ms)"] == 2.0
    t = step["Total Op Info@g"]["0"]
    # elapse 2 + 1 + 4 = 7, transit 0.5 + 1 + 0 = 1.5, wait 1 + 0.5 + 0 = 1.5, sync only q's
    # 0.2; wait ratio 1.5 / 3 = 0.5, sync ratio 0.2 / 1.7 = 0.11765 -> 0.1176
    assert t["Communication Time Info"] == pytest.approx({
        "Elapse Time(ms)": 7.0, "Transit Time(ms)": 1.5, "Wait Time(ms)": 1.5,
        "Synchronization Time(ms)": 0.2, "Wait Time Ratio": 0.5,
        "Synchronization Time Ratio": 0.1176}, abs=1e-12)
    # HCCS: 10 + 6 MB over 1 + 2 ms = 5.3333 GB/s; sizes "1": 2 + 1 packets, 0.4 + 0.1 ms,
    # "4": 3 packets 0.3 ms; db input (a Large Packet Ratio given): 0 in the totals; text: none
    hccs = dict(t["Communication Bandwidth Info"]["HCCS"])
    sizes = hccs.pop("Size Distribution")
    want = {"Transit Time(ms)": 3.0, "Transit Size(MB)": 16.0, "Bandwidth(GB/s)": 5.3333}
    if not text:
        want["Large Packet Ratio"] = 0
    assert hccs == pytest.approx(want, abs=1e-12)
    assert sizes == {"1": [3, pytest.approx(0.5)],
                                         "4": [3, pytest.approx(0.3)]}


def test_matrix_from_raw_records_four_per_link(tmp_path):
    """PROF_ matrix (one record per op): per rank, op type and link, records sorted by
    bandwidth (descending): top1 = the fastest, middle = index n // 2, bottom1/2/3 = the last,
    second and third last, total = sums (bandwidth MB / ms); the op type is the first known
    collective name in the op name, else the name before "__"."""
    from ascendprof.readers.communication import read_matrix

    def link(tt, mb, ms):
        return {"Transport Type": tt, "Transit Size(MB)": mb, "Transit Time(ms)": ms,
                "Bandwidth(GB/s)": round(mb / ms, 4)}

    files = {0: {"hcom_allGather__1_0_1@g": {"0-0": link("LOCAL", 1.0, 1.0),
                                             "0-1": link("HCCS", 1.0, 1.0)},   # 1 GB/s
                 "hcom_allGather__1_1_1@g": {"0-1": link("HCCS", 4.0, 1.0)},   # 4
                 "hcom_allGather__1_2_1@g": {"0-1": link("HCCS", 2.0, 1.0)},   # 2
                 "hcom_allGather__1_3_1@g": {"0-1": link("HCCS", 3.0, 1.0)},   # 3
                 "myop__7_0_1@g": {"0-1": link("RDMA", 5.0, 1.0)},
                 # no size: counted as 0 MB in the total
                 "hcom_broadcast__2_0_1@g": {"0-1": {"Transport Type": "HCCS",
                                                     "Transit Time(ms)": 1.0,
                                                     "Bandwidth(GB/s)": 0.0}}},
             1: {"hcom_allGather__1_0_1@g": {"1-1": link("LOCAL", 1.0, 1.0)}}}
    tables = []
    for rank, data in files.items():
        p = tmp_path / f"m{rank}.json"
        p.write_text(json.dumps(data))
        tables.append(read_matrix(p, rank))
    ((key, steps),) = list(cc.matrix_groups(pa.concat_tables(tables)))
    assert key == "(0, 1)"
    step = steps["step"]
    op = {k: v["0-1"]["Op Name"] for k, v in step.items()
          if k.startswith("allgather") and "0-1" in v}
    # by bandwidth: 1_1 (4), 1_3 (3), 1_2 (2), 1_0 (1); middle = index 4 // 2 = 2 -> 1_2
    assert op == {"allgather-top1@g": "hcom_allGather__1_1_1",
                  "allgather-middle@g": "hcom_allGather__1_2_1",
                  "allgather-bottom1@g": "hcom_allGather__1_0_1",
                  "allgather-bottom2@g": "hcom_allGather__1_2_1",
                  "allgather-bottom3@g": "hcom_allGather__1_3_1",
                  "allgather-total@g": ""}
    assert step["allgather-top1@g"]["0-1"]["Bandwidth(GB/s)"] == 4.0
    # total: 1 + 4 + 2 + 3 = 10 MB over 4 ms = 2.5 GB/s
    assert step["allgather-total@g"]["0-1"] == {
        "Transport Type": "HCCS", "Transit Time(ms)": 4.0, "Transit Size(MB)": 10.0,
        "Op Name": "", "Bandwidth(GB/s)": 2.5}
    # the self-links: one record each, so no bottom2 / bottom3
    assert {k for k, v in step.items() if "0-0" in v} == {
        "allgather-top1@g", "allgather-middle@g", "allgather-bottom1@g", "allgather-total@g",
        "Total Op Info@g"}
    assert step["allgather-bottom1@g"]["1-1"]["Transit Size(MB)"] == 1.0
    # an op name without a known type: "myop" (before "__"), one record
    assert step["myop-top1@g"]["0-1"]["Op Name"] == "myop__7_0_1"
    assert step["broadcast-total@g"]["0-1"] == {
        "Transport Type": "HCCS", "Transit Time(ms)": 1.0, "Transit Size(MB)": 0,
        "Op Name": "", "Bandwidth(GB/s)": 0}
    # the group total sums the -total@ entries: 0-1 = 10 MB / 4 ms + 5 MB / 1 ms + 0 MB / 1 ms
    # = 15 MB / 6 ms = 2.5 GB/s
    assert step["Total Op Info@g"]["0-1"]["Transit Size(MB)"] == 15.0
    assert step["Total Op Info@g"]["0-1"]["Transit Time(ms)"] == 6.0
    assert step["Total Op Info@g"]["0-1"]["Bandwidth(GB/s)"] == 2.5
    assert set(step["Total Op Info@g"]) == {"0-0", "0-1", "1-1"}
    assert cc.unmapped_links(pa.concat_tables(tables)) == []  # raw records: condensed elsewhere


def test_communication_file_mapping_and_sizes():
    ops, bw, dist = _db_tables()
    frags = cc.rank_fragments(ops, bw, dist)
    (f,) = frags
    assert (f.rank, f.kind, f.group, f.count) == (0, "collective", "g", 2)
    steps, keys, infos = f.unpack()
    assert [bytes(s) for s in steps] == [b'"step1"', b'"step1"']
    assert [bytes(k) for k in keys] == [b'"a@g"', b'"b@g"']
    info_bytes = sum(len(bytes(i)) for i in infos)
    # size: the uncompressed head (lengths, key lengths, step index: 3 int32 per record, then
    # the key JSONs) and the OPINFO JSONs
    assert f.size == 3 * 4 * 2 + len(b'"a@g""b@g"') + info_bytes
    assert f.compressed_size == len(f.head[1]) + sum(len(b) for _, b in f.chunks)
    file = cc.CommunicationFile(frags, *cc.group_membership(ops))
    assert len(file) == 1 and list(file) == ["(0,)"]
    assert file.opinfo_bytes == info_bytes
    ((key, pieces),) = list(file.items_json())
    assert key == "(0,)" and json.loads(b"".join(pieces)) == file["(0,)"]
    with pytest.raises(KeyError):
        file.group_json("(9,)")
    assert cc.rank_fragments(None, bw, dist) == [] and \
        cc.rank_fragments(ops.slice(0, 0), None, None) == []


def _set_as_msprof_analyze(ranks) -> list:
    """The iteration order of a Python set the ranks were added to one by one, ascending (what
    msprof-analyze lists and keys groups by, its rank directories found in rank order)."""
    s: set = set()
    for r in sorted(ranks):
        s.add(r)
    return list(s)


def test_group_lists_and_keys_keep_the_order_of_a_set_filled_in_rank_order():
    """Python's set order is not ascending once ranks collide in its hash table: ranks 39 and 55
    added in that order iterate as 55, 39; 0, 1, 2, 4, 16 iterate in that order, though a
    frozenset copied from their set does not (0, 1, 2, 16, 4). The group key and communication_group.json's
    lists are those of the set filled in rank order; comm_group_parallel_info's rank_set is
    sorted."""
    assert _set_as_msprof_analyze([55, 39]) == [55, 39]
    assert _set_as_msprof_analyze([16, 4, 2, 1, 0]) == [0, 1, 2, 4, 16]
    assert list(frozenset(set(_set_as_msprof_analyze([16, 4, 2, 1, 0])))) == [0, 1, 2, 16, 4]
    rows = [dict(rank=r, kind="collective", group="g", op_name="a") for r in (16, 4, 2, 1, 0)]
    rows += [dict(rank=r, kind="p2p", group="p", op_name="s") for r in (55, 39)]
    ops = table(S.COMM_OPS, rows, step_key="step1", elapse_ns=1_000_000, transit_ns=0,
                wait_ns=0)
    groups = cc.build_groups(ops, {})
    assert groups["collective"] == [[0, 1, 2, 4, 16]] and groups["p2p"] == [[55, 39]]
    assert [g["rank_set"] for g in groups["comm_group_parallel_info"]] == [[0, 1, 2, 4, 16],
                                                                          [39, 55]]
    file = _file(ops, None, None)
    assert list(file) == ["(0, 1, 2, 4, 16)", "(55, 39)"]
    links = table(S.COMM_LINKS, [
        dict(rank=r, kind="collective", group="g", link_key="allreduce-total@g", src_rank=i,
             dst_rank=i, transport="LOCAL", size_mb=1.0, transit_ns=1_000_000)
        for i, r in enumerate((0, 1, 2, 4, 16))], step_key="step1")
    assert [k for k, _ in cc.matrix_groups(links, comm_ops=ops)] == ["(0, 1, 2, 4, 16)"]


def test_one_op_one_transport_one_size():
    """Tables of one row each (the smallest input): the op's OPINFO has its bandwidth entry and
    its size distribution; the totals are the op's own numbers."""
    common = dict(rank=4, step=1, step_key="step1", kind="collective", group="g", op_name="a")
    ops = table(S.COMM_OPS, [dict(elapse_ns=4_000_000, transit_ns=2_000_000, wait_ns=2_000_000)],
                **common)
    bw = table(S.COMM_BANDWIDTH, [dict(transport="RDMA", size_mb=8.0, transit_ns=2_000_000)],
               **common)
    dist = table(S.COMM_SIZE_DIST, [dict(transport="RDMA", packet_size_mb="8", count=1,
                                         dur_ns=2_000_000)], **common)
    step = _file(ops, bw, dist)["(4,)"]["step1"]
    # 8 MB / 2 ms = 4 GB/s; wait ratio 2 / (2 + 2) = 0.5
    rdma = {"Transit Size(MB)": 8.0, "Transit Time(ms)": 2.0, "Bandwidth(GB/s)": 4.0,
            "Size Distribution": {"8": [1, 2.0]}}
    assert step["a@g"]["4"] == {
        "Communication Time Info": {"Elapse Time(ms)": 4.0, "Transit Time(ms)": 2.0,
                                    "Wait Time(ms)": 2.0, "Wait Time Ratio": 0.5,
                                    "Synchronization Time Ratio": 0},
        "Communication Bandwidth Info": {"RDMA": rdma}}
    total = step["Total Op Info@g"]["4"]
    assert total["Communication Bandwidth Info"] == {"RDMA": rdma}  # no ratio given: no key
    assert total["Communication Time Info"]["Wait Time Ratio"] == 0.5


def test_sums_added_batch_by_batch_by_hand():
    """step_sums of two batches of one rank's ops, added with add_sums, are the sums of the
    whole: a time column null in every row so far stays null, a later value replaces it."""
    from ascendprof.analyze.cluster_communication import totals as T

    common = dict(rank=0, step=1, step_key="step1", kind="collective", group="g")
    first = table(S.COMM_OPS, [dict(op_name="a", elapse_ns=2_000_000, transit_ns=500_000)],
                  **common)
    second = table(S.COMM_OPS, [
        dict(op_name="b", elapse_ns=3_000_000, transit_ns=1_500_000, sync_ns=100_000),
        dict(op_name="c", elapse_ns=1_000_000, step_key="step2")], **common)
    bw1 = table(S.COMM_BANDWIDTH, [dict(op_name="a", transport="HCCS", size_mb=1.0,
                                        transit_ns=500_000)], **common)
    bw2 = table(S.COMM_BANDWIDTH, [dict(op_name="b", transport="HCCS", size_mb=2.0,
                                        transit_ns=1_500_000)], **common)
    d1 = table(S.COMM_SIZE_DIST, [dict(op_name="a", transport="HCCS", packet_size_mb="1",
                                       count=1, dur_ns=500_000)], **common)
    d2 = table(S.COMM_SIZE_DIST, [dict(op_name="b", transport="HCCS", packet_size_mb="1",
                                       count=2, dur_ns=1_500_000)], **common)
    acc = T.add_sums(T.step_sums(first, bw1, d1), T.step_sums(second, bw2, d2))
    k1, k2 = (0, "collective", "g", "step1"), (0, "collective", "g", "step2")
    # step1: elapse 2 + 3 ms, transit 0.5 + 1.5, wait null in both, sync only b's 0.1 ms
    assert acc["ops"] == {
        k1: {"elapse_ns": 5_000_000, "transit_ns": 2_000_000, "wait_ns": None,
             "sync_ns": 100_000, "idle_ns": None},
        k2: {"elapse_ns": 1_000_000, "transit_ns": None, "wait_ns": None, "sync_ns": None,
             "idle_ns": None}}
    assert acc["bw"] == {k1 + ("HCCS",): [2_000_000, 3.0]}
    assert acc["dist"] == {k1 + ("HCCS", "1"): [3, 2_000_000]}
    # the totals: ratios from the sums, wait 0 / (0 + 2) = 0, sync 0.1 / 2.1 = 0.0476
    tot = T.totals_from_sums(acc)[(0, "collective", "g")]
    assert tot["step1"]["Communication Time Info"] == {
        "Elapse Time(ms)": 5.0, "Transit Time(ms)": 2.0, "Synchronization Time(ms)": 0.1,
        "Wait Time Ratio": 0, "Synchronization Time Ratio": 0.0476}
    assert tot["step1"]["Communication Bandwidth Info"] == {"HCCS": {
        "Transit Time(ms)": 2.0, "Transit Size(MB)": 3.0, "Size Distribution": {"1": [3, 2.0]},
        "Bandwidth(GB/s)": 1.5}}
    assert tot["step2"] == {"Communication Time Info": {"Elapse Time(ms)": 1.0,
                                                        "Wait Time Ratio": 0,
                                                        "Synchronization Time Ratio": 0},
                            "Communication Bandwidth Info": {}}


def test_fragments_in_any_order_give_ranks_ascending():
    """CommunicationFile takes the ranks' fragments in whatever order the workers finish: each
    op lists its ranks ascending (1 before 3), and so do the totals."""
    rows = [dict(rank=r, op_name=op, elapse_ns=1_000_000 * (r + 1), transit_ns=0, wait_ns=0)
            for r in (3, 1) for op in ("a", "b")]
    ops = table(S.COMM_OPS, rows, step_key="step1", kind="collective", group="g")
    frags = cc.rank_fragments(ops, None, None)
    assert [f.rank for f in frags] == [1, 3]  # rank_fragments: ascending
    coll, p2p = cc.group_membership(ops)
    for order in (frags, frags[::-1]):
        text = cc.CommunicationFile(order, coll, p2p).group_json("(1, 3)")
        got = json.loads(text)
        assert [list(v) for v in got["step1"].values()] == [["1", "3"]] * 3
        assert got["step1"]["b@g"]["3"]["Communication Time Info"]["Elapse Time(ms)"] == 4.0


def test_ranks_with_different_ops_are_merged_op_by_op():
    """Ranks 0 and 2 report ops a and b, rank 1 (the second fragment) a and c: ops in order of
    first appearance (a, b from rank 0, then c), each listing the ranks that have it."""
    rows = [dict(rank=r, op_name=op, elapse_ns=1_000_000 * (10 * r + i), transit_ns=0,
                 wait_ns=0)
            for r, names in ((0, "ab"), (1, "ac"), (2, "ab")) for i, op in enumerate(names)]
    ops = table(S.COMM_OPS, rows, step_key="step1", kind="collective", group="g")
    step = _file(ops, None, None)["(0, 1, 2)"]["step1"]
    assert {op: list(ranks) for op, ranks in step.items()} == {
        "a@g": ["0", "1", "2"], "b@g": ["0", "2"], "c@g": ["1"], "Total Op Info@g": ["0", "1", "2"]}
    assert list(step) == ["a@g", "b@g", "c@g", "Total Op Info@g"]
    # elapse = 10 * rank + position in the rank's list, in ms
    assert {(op, r): v["Communication Time Info"]["Elapse Time(ms)"]
            for op, ranks in step.items() if op != "Total Op Info@g"
            for r, v in ranks.items()} == {
        ("a@g", "0"): 0.0, ("a@g", "1"): 10.0, ("a@g", "2"): 20.0, ("b@g", "0"): 1.0,
        ("b@g", "2"): 21.0, ("c@g", "1"): 11.0}


def test_transport_without_any_size_totals_zero_megabytes():
    # op a's PCIE row has a time but no size: 0 MB in the OPINFO and in the totals (not null),
    # bandwidth 0 / 1 ms = 0
    common = dict(rank=0, step=1, step_key="step1", kind="collective", group="g", op_name="a")
    ops = table(S.COMM_OPS, [dict(elapse_ns=1_000_000, transit_ns=1_000_000, wait_ns=0)],
                **common)
    bw = table(S.COMM_BANDWIDTH, [dict(transport="PCIE", transit_ns=1_000_000),
                                  dict(transport="PCIE", op_name="z", size_mb=9.0)], **common)
    step = _file(ops, bw, None)["(0,)"]["step1"]
    want = {"Transit Size(MB)": 0, "Transit Time(ms)": 1.0, "Bandwidth(GB/s)": 0,
            "Size Distribution": {}}
    assert step["a@g"]["0"]["Communication Bandwidth Info"] == {"PCIE": want}
    assert step["Total Op Info@g"]["0"]["Communication Bandwidth Info"] == {"PCIE": want}


@pytest.mark.parametrize("group", ["g", 'q"g', "\\\\"], ids=["plain", "quote", "backslashes"])
def test_fragments_built_batch_by_batch_with_odd_op_names(group):
    """FragmentsBuilder (a spilled communication.json read in batches) gives the fragments
    rank_fragments gives for the whole table, also when an op or group name needs escaping in
    JSON (a quote, a backslash, a control character): op keys are the JSON of "<op>@<group>".
    A group of two backslashes: its JSON text has four, the escaped text of one backslash is
    as long as the name itself."""
    names = [f"op{i}" for i in range(50)]
    names[3], names[17], names[18], names[45] = 'a"b', "c\\d", "e\tf", "\x01"
    rows = [dict(op_name=n, elapse_ns=1000 * i, opinfo_json=json.dumps({"i": i}))
            for i, n in enumerate(names)]
    ops = table(S.COMM_OPS, rows, rank=0, step=1, step_key="step1", kind="collective",
                group=group)
    want = cc.rank_fragments(ops, None, None)
    builder = cc.FragmentsBuilder()
    # batches of 20, 7, 13 and 10 records: a chunk of 16 inside a batch, chunks completed
    # from the records a batch left open, a chunk left open at the end
    for start, n in ((0, 20), (20, 7), (27, 13), (40, 10)):
        builder.add(ops.slice(start, n), None, None)
    got = builder.result()

    def unpacked(frags):
        return [(f.rank, f.kind, f.group, f.count,
                 *[[bytes(x) for x in part] for part in f.unpack()],
                 [(json.loads(s), json.loads(t)) for s, t in f.totals]) for f in frags]

    assert unpacked(got) == unpacked(want)
    (f,) = got
    _, keys, infos = f.unpack()
    assert [json.loads(bytes(k)) for k in keys] == [f"{n}@{group}" for n in names]
    assert [json.loads(bytes(i)) for i in infos] == [{"i": i} for i in range(50)]
    assert len(f.chunks) == 4  # 16 + 16 + 16 + 2 records
