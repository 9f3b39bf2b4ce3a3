"""cluster_communication_matrix.json (analyze/cluster_communication/matrix.py) on small
communication_matrix.json files read as a rank's worker reads them (readers.communication
read_matrix), for the survivors of the module's seed-34 mutation run: a raw (PROF_) link with
exactly three records, a group with no self-link at all, a group name holding a NUL character.
Every expected value is worked out in the comments from the records given."""

from __future__ import annotations

import json

import pyarrow as pa

from ascendprof.analyze import cluster_communication as cc
from ascendprof.readers.communication import read_matrix


def rec(tt, mb, ms):
    return {"Transport Type": tt, "Transit Size(MB)": mb, "Transit Time(ms)": ms,
            "Bandwidth(GB/s)": round(mb / ms, 4)}


def links_of(tmp_path, files: dict) -> pa.Table:
    """COMM_LINKS of every rank's communication_matrix.json (``files``: rank -> its JSON)."""
    tables = []
    for rank, data in files.items():
        p = tmp_path / f"communication_matrix_{rank}.json"
        p.write_text(json.dumps(data))
        tables.append(read_matrix(p, rank))
    return pa.concat_tables(tables)


def test_raw_link_with_three_records_has_bottom1_to_bottom3(tmp_path):
    # PROF_ layout, one record per op: three allReduce ops over link 0-1 of group g at 3, 2
    # and 1 GB/s; ranks 0 and 1 give the self-links (local 0 -> rank 0, local 1 -> rank 1).
    # Sorted by bandwidth (descending): __1_0 (3), __1_1 (2), __1_2 (1): top1 = __1_0,
    # middle = index 3 // 2 = 1 -> __1_1, bottom1 = last = __1_2, bottom2 = second last =
    # __1_1, bottom3 = third last = __1_0 (three records are enough for a bottom3)
    links = links_of(tmp_path, {
        0: {"hcom_allReduce__1_0_1@g": {"0-0": rec("LOCAL", 1.0, 1.0),
                                        "0-1": rec("HCCS", 3.0, 1.0)},
            "hcom_allReduce__1_1_1@g": {"0-1": rec("HCCS", 2.0, 1.0)},
            "hcom_allReduce__1_2_1@g": {"0-1": rec("HCCS", 1.0, 1.0)}},
        1: {"hcom_allReduce__1_0_1@g": {"1-1": rec("LOCAL", 1.0, 1.0)}}})
    ((key, steps),) = list(cc.matrix_groups(links))
    assert key == "(0, 1)"
    step = steps["step"]
    assert {k: v["0-1"]["Op Name"] for k, v in step.items() if "0-1" in v
            and k != "Total Op Info@g"} == {
        "allreduce-top1@g": "hcom_allReduce__1_0_1",
        "allreduce-middle@g": "hcom_allReduce__1_1_1",
        "allreduce-bottom1@g": "hcom_allReduce__1_2_1",
        "allreduce-bottom2@g": "hcom_allReduce__1_1_1",
        "allreduce-bottom3@g": "hcom_allReduce__1_0_1",
        "allreduce-total@g": ""}
    assert step["allreduce-bottom3@g"]["0-1"]["Bandwidth(GB/s)"] == 3.0
    # total: 3 + 2 + 1 = 6 MB over 3 ms = 2 GB/s
    assert step["allreduce-total@g"]["0-1"]["Bandwidth(GB/s)"] == 2.0


def test_group_without_any_self_link_writes_no_links(tmp_path):
    # torch_npu layout. Group g: ranks 0 and 2 report their self-links (local 0 -> rank 0,
    # local 1 -> rank 2). p2p group h (a send to a peer on another node): rank 0 reports only
    # 0-1, no rank reports a self-link of h, so no local rank of h maps to a global one and
    # none of its links is written (as msprof-analyze leaves them out); h's op is there with
    # no link and h has no total
    links = links_of(tmp_path, {
        0: {"step1": {"collective": {"allreduce-total@g": {"0-0": rec("LOCAL", 1.0, 1.0),
                                                           "0-1": rec("HCCS", 4.0, 2.0)}},
                      "p2p": {"send-total@h": {"0-1": rec("RDMA", 8.0, 4.0)}}}},
        2: {"step1": {"collective": {"allreduce-total@g": {"1-1": rec("LOCAL", 1.0, 1.0)}}}}})
    got = dict(cc.matrix_groups(links))
    # g's members: ranks 0 and 2; h's: rank 0
    assert set(got) == {"(0, 2)", "(0,)"}
    # g: 0-1 is rank 0 -> rank 2, 4 MB / 2 ms = 2 GB/s
    assert got["(0, 2)"]["step1"]["allreduce-total@g"]["0-2"]["Bandwidth(GB/s)"] == 2.0
    assert got["(0,)"] == {"step1": {"send-total@h": {}}}
    # and the one link left out is reported: its source (local 0) does not map, so the
    # source is the unmapped local rank named (the destination is named only when the source
    # maps)
    assert [(u["group"], u["links"], u["local_ranks"]) for u in cc.unmapped_links(links)] == [
        ("h", 1, [0])]


def test_group_name_holding_a_nul_character(tmp_path):
    # a group name is any JSON string: "g\u0000x" (with a NUL) is one group like any other;
    # rank 4 reports its self-link (local 0 -> rank 4) and 0-0 is written as 4-4,
    # 2 MB / 0.5 ms = 4 GB/s
    links = links_of(tmp_path, {
        4: {"step1": {"collective": {"allgather-total@g\u0000x": {
            "0-0": rec("LOCAL", 2.0, 0.5)}}}}})
    assert links.column("group").to_pylist() == ["g\u0000x"]
    ((key, steps),) = list(cc.matrix_groups(links))
    assert key == "(4,)"
    assert steps["step1"]["allgather-total@g\u0000x"]["4-4"]["Bandwidth(GB/s)"] == 4.0
    assert steps["step1"]["Total Op Info@g\u0000x"]["4-4"]["Transit Size(MB)"] == 2.0


def test_a_single_link_row_without_a_self_link_is_reported_unmapped(tmp_path):
    # torch_npu layout, one rank, one op, one link 0-1 and no self-link "i-i" in p2p group h:
    # neither local rank maps to a global rank, so the one link row is left out of the matrix
    # and reported: one dropped link of one op, its source (local 0) named
    links = links_of(tmp_path, {
        0: {"step1": {"p2p": {"send-total@h": {"0-1": rec("RDMA", 8.0, 4.0)}}}}})
    assert links.num_rows == 1
    assert [(u["group"], u["step_key"], u["links"], u["ops"], u["local_ranks"])
            for u in cc.unmapped_links(links)] == [("h", "step1", 1, 1, [0])]


def test_a_group_merged_record_by_record_does_not_end_the_groups_after_it(tmp_path):
    # torch_npu layout. Group a (first in the file): rank 0 reports the self-links of both its
    # local ranks 0 and 1, so both map to rank 0 and the links 0-0 and 1-1 are one global link
    # 0-0: a is merged record by record. Group b after it is an ordinary group: local 0 ->
    # rank 0, local 1 -> rank 1, its link 0-1 moves 4 MB in 2 ms = 2 GB/s. Both are written.
    links = links_of(tmp_path, {
        0: {"step1": {"collective": {
            "allreduce-total@a": {"0-0": rec("LOCAL", 1.0, 1.0), "1-1": rec("LOCAL", 1.0, 1.0),
                                  "0-1": rec("HCCS", 2.0, 1.0)},
            "allgather-total@b": {"0-0": rec("LOCAL", 1.0, 1.0),
                                  "0-1": rec("HCCS", 4.0, 2.0)}}}},
        1: {"step1": {"collective": {"allgather-total@b": {"1-1": rec("LOCAL", 1.0, 1.0)}}}}})
    got = dict(cc.matrix_groups(links))
    assert set(got) == {"(0,)", "(0, 1)"}
    assert got["(0, 1)"]["step1"]["allgather-total@b"]["0-1"]["Bandwidth(GB/s)"] == 2.0


def test_links_without_a_kind_are_still_written(tmp_path):
    # a db export's CommAnalyzerMatrix may leave the type (kind) NULL: the links of group g
    # (local 0 -> rank 0, local 1 -> rank 1; 0-1 moves 4 MB in 2 ms = 2 GB/s) are still
    # merged and written (under the key of a group whose members are not known without its
    # kind), not lost with the analysis
    links = links_of(tmp_path, {
        0: {"step1": {"collective": {"allgather-total@g": {"0-0": rec("LOCAL", 1.0, 1.0),
                                                           "0-1": rec("HCCS", 4.0, 2.0)}}}},
        1: {"step1": {"collective": {"allgather-total@g": {"1-1": rec("LOCAL", 1.0, 1.0)}}}}})
    i = links.schema.get_field_index("kind")
    links = links.set_column(i, "kind", pa.nulls(links.num_rows, pa.string()))
    ((_, steps),) = list(cc.matrix_groups(links))
    assert steps["step1"]["allgather-total@g"]["0-1"]["Bandwidth(GB/s)"] == 2.0
