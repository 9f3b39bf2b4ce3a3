"""cluster_communication_matrix.json (analyze/cluster_communication/matrix.py) on small
communication_matrix.json files read as a rank's worker reads them (readers.communication
read_matrix), for the survivors of the module's seed-38 mutation run: two ranks' links given in
descending rank order, a raw (PROF_) rank beside a torch_npu one, a group whose membership comes
from the communication files (COMM_OPS) through the batched path, a raw record without
"Transit Size(MB)". Every expected value is worked out in the comments from the records given."""

from __future__ import annotations

import json

import pyarrow as pa

from ascendprof.analyze import cluster_communication as cc
from ascendprof.readers.communication import read_matrix


def rec(tt, mb, ms):
    return {"Transport Type": tt, "Transit Size(MB)": mb, "Transit Time(ms)": ms,
            "Bandwidth(GB/s)": round(mb / ms, 4)}


def links_of(tmp_path, files: dict) -> pa.Table:
    """COMM_LINKS of every rank's communication_matrix.json (``files``: rank -> its JSON),
    concatenated in the order of ``files``."""
    tables = []
    for rank, data in files.items():
        p = tmp_path / f"communication_matrix_{rank}.json"
        p.write_text(json.dumps(data))
        tables.append(read_matrix(p, rank))
    return pa.concat_tables(tables)


def test_two_ranks_given_in_descending_order_are_merged_ranks_ascending(tmp_path):
    # torch_npu layout, group g, one row each: rank 1's self-link 1-1 (1 MB / 1 ms) comes
    # first in the table, rank 0's 0-0 (2 MB / 1 ms) second. The matrix is merged ranks
    # ascending whatever order the tables come in: rank 0's link first ("0-0", 2 GB/s), then
    # rank 1's ("1-1", 1 GB/s), in the op and in its total alike.
    links = links_of(tmp_path, {
        1: {"step1": {"collective": {"allreduce-total@g": {"1-1": rec("LOCAL", 1.0, 1.0)}}}},
        0: {"step1": {"collective": {"allreduce-total@g": {"0-0": rec("LOCAL", 2.0, 1.0)}}}}})
    assert links.column("rank").to_pylist() == [1, 0]
    ((key, steps),) = list(cc.matrix_groups(links))
    assert key == "(0, 1)"
    step = steps["step1"]
    assert list(step) == ["allreduce-total@g", "Total Op Info@g"]
    for op in step.values():
        assert [(k, v["Bandwidth(GB/s)"]) for k, v in op.items()] == [("0-0", 2.0), ("1-1", 1.0)]


def test_a_torch_npu_rank_beside_a_raw_prof_rank_keeps_its_links(tmp_path):
    # Rank 0 is PROF_ data (one record per op: op hcom_allReduce__1_0_1 over group g, its
    # self-link 0-0, 1 MB / 1 ms); rank 1 is torch_npu data (step1, allreduce-total@h, its
    # self-link 0-0 = local 0 of h -> rank 1, 2 MB / 1 ms). Rank 0's records are condensed to
    # top1 / middle / bottom1 / total under step key "step"; rank 1's summary record is kept as
    # it is: group h (members: rank 1, key "(1,)") has "1-1" at 2 MB / 1 ms = 2 GB/s.
    links = links_of(tmp_path, {
        0: {"hcom_allReduce__1_0_1@g": {"0-0": rec("LOCAL", 1.0, 1.0)}},
        1: {"step1": {"collective": {"allreduce-total@h": {"0-0": rec("LOCAL", 2.0, 1.0)}}}}})
    got = dict(cc.matrix_groups(links))
    assert list(got) == ["(0,)", "(1,)"]
    assert list(got["(0,)"]["step"]) == ["allreduce-top1@g", "allreduce-middle@g",
                                         "allreduce-bottom1@g", "allreduce-total@g",
                                         "Total Op Info@g"]
    h = got["(1,)"]["step1"]
    assert list(h) == ["allreduce-total@h", "Total Op Info@h"]
    assert h["allreduce-total@h"] == {"1-1": {
        "Transport Type": "LOCAL", "Transit Time(ms)": 1.0, "Transit Size(MB)": 2.0,
        "Op Name": "", "Bandwidth(GB/s)": 2.0}}


def test_raw_batches_key_a_group_by_the_membership_given(tmp_path):
    # PROF_ data of ranks 0 and 1 over group g (self-links: local 0 -> rank 0, local 1 ->
    # rank 1, and 0-1 4 MB / 2 ms). communication.json (COMM_OPS) says rank 2 runs ops of g
    # too (it has no matrix file): g's members are ranks 0, 1, 2, so the group key the batched
    # path writes is "(0, 1, 2)", not "(0, 1)" (the ranks of the links alone).
    links = links_of(tmp_path, {
        0: {"hcom_allReduce__1_0_1@g": {"0-0": rec("LOCAL", 1.0, 1.0),
                                        "0-1": rec("HCCS", 4.0, 2.0)}},
        1: {"hcom_allReduce__1_0_1@g": {"1-1": rec("LOCAL", 1.0, 1.0)}}})
    ops = pa.table({"rank": pa.array([0, 1, 2], pa.int32()),
                    "kind": ["collective"] * 3, "group": ["g"] * 3})
    membership = cc.group_membership(ops, links)
    assert membership[0] == {"g": {0, 1, 2}}
    got = [(k, json.loads(b"".join(p))) for k, p in
           cc.matrix_json_batches(lambda: [links[:2], links[2:]], membership)]
    assert [k for k, _ in got] == ["(0, 1, 2)"]
    # 0-1 is rank 0 -> rank 1: 4 MB / 2 ms = 2 GB/s in the condensed total
    assert got[0][1]["step"]["allreduce-total@g"]["0-1"]["Bandwidth(GB/s)"] == 2.0


def test_a_raw_record_without_a_size_counts_as_zero_mb(tmp_path):
    # PROF_ data, rank 0, group g: self-link 0-0 (1 MB / 1 ms) and 0-1 with no
    # "Transit Size(MB)" (2 ms); rank 1 gives its self-link. The size of 0-1 counts as 0 MB:
    # 0 MB over 2 ms, bandwidth 0, in the op's total and in Total Op Info.
    links = links_of(tmp_path, {
        0: {"hcom_allReduce__1_0_1@g": {"0-0": rec("LOCAL", 1.0, 1.0),
                                        "0-1": {"Transport Type": "HCCS",
                                                "Transit Time(ms)": 2.0}}},
        1: {"hcom_allReduce__1_0_1@g": {"1-1": rec("LOCAL", 1.0, 1.0)}}})
    ((_, steps),) = list(cc.matrix_groups(links))
    for op in ("allreduce-total@g", "Total Op Info@g"):
        d = steps["step"][op]["0-1"]
        assert (d["Transit Size(MB)"], d["Transit Time(ms)"], d["Bandwidth(GB/s)"]) == (0, 2.0, 0)
