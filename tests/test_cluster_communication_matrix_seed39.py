"""cluster_communication_matrix.json (analyze/cluster_communication/matrix.py) on small hand-built
COMM_LINKS tables, for the survivors of the module's seed-39 mutation run: links whose group is
missing (a link key without "@<group>"), through matrix_json and matrix_json_batches, and an
unmapped link whose link key is missing, through unmapped_links. Every expected value is worked
out in the comments from the rows given."""

from __future__ import annotations

from ascendprof.analyze.cluster_communication import matrix as m
from ascendprof.analyze.cluster_communication.groups import group_membership
from ascendprof.model.schemas import COMM_LINKS, from_lists


def links(rows: list[dict]):
    cols = {f: [r.get(f) for r in rows] for f in
            ("rank", "step", "step_key", "kind", "link_key", "op_name", "group", "src_rank",
             "dst_rank", "transport", "size_mb", "transit_ns", "bandwidth_gbps",
             "large_packet_ratio")}
    return from_lists(COMM_LINKS, cols)


def row(rank, link_key, group, src, dst, mb, ns):
    return {"rank": rank, "step": 1, "step_key": "step1", "kind": "collective",
            "link_key": link_key, "group": group, "src_rank": src, "dst_rank": dst,
            "transport": "LOCAL", "size_mb": mb, "transit_ns": ns}


def ungrouped():
    # two ranks, each its self-link 0-0 / 1-1 of op "allreduce-total" (no "@": group null)
    return links([row(0, "allreduce-total", None, 0, 0, 2.0, 1_000_000),
                  row(1, "allreduce-total", None, 1, 1, 1.0, 1_000_000)])


# The expected step: the op's links mapped through their own self-links (local 0 -> rank 0,
# local 1 -> rank 1): "0-0" 2 MB / 1 ms = 2 GB/s, "1-1" 1 MB / 1 ms = 1 GB/s; the total of group
# "allreduce-total" (the text after the last "@" of a key without "@" is the whole key) the same.
LINK = {"0-0": {"Transport Type": "LOCAL", "Transit Time(ms)": 1.0, "Transit Size(MB)": 2.0,
                "Op Name": "", "Bandwidth(GB/s)": 2.0},
        "1-1": {"Transport Type": "LOCAL", "Transit Time(ms)": 1.0, "Transit Size(MB)": 1.0,
                "Op Name": "", "Bandwidth(GB/s)": 1.0}}
STEP = {"step1": {"allreduce-total": LINK, "Total Op Info@allreduce-total": LINK}}


def test_links_without_a_group_are_kept_in_the_matrix():
    # a missing group is read as "" (one (kind, group) pair, one group key), not dropped
    got = list(m.matrix_groups(ungrouped()))
    assert len(got) == 1
    assert got[0][1] == STEP


def test_links_without_a_group_are_kept_by_the_batched_path():
    import orjson
    t = ungrouped()
    got = [(k, orjson.loads(b"".join(p)))
           for k, p in m.matrix_json_batches(lambda: [t], group_membership(None, t))]
    assert len(got) == 1
    assert got[0][1] == STEP


def test_an_unmapped_link_without_a_link_key_is_reported():
    # rank 0, group g: its self-link 0-0 (op a@g) maps local 0 -> rank 0; the link 0-1 has no
    # link key and local 1 has no self-link in g: one dropped link, no named op (ops 0),
    # unmapped local rank 1, example "None 0-1" (the missing key printed as None)
    t = links([row(0, "a@g", "g", 0, 0, 2.0, 1_000_000),
               row(0, None, "g", 0, 1, 1.0, 1_000_000)])
    assert m.unmapped_links(t) == [{"group": "g", "step_key": "step1", "links": 1, "ops": 0,
                                    "local_ranks": [1], "example": "None 0-1"}]
