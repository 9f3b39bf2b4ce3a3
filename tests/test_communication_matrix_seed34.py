"""communication_matrix.json reader (readers/communication/matrix.py), seed-34 survivors.

Checks, on small hand-written communication_matrix.json files read through the public
``read_matrix``: every COMM_LINKS column of every link read back (kind and large_packet_ratio
included), a link entry that is not an object skips only itself (the op's later links are
kept), a local rank below int32 is null rather than a refused file, and a value that does not
fit its column (a step number beyond int32) is refused naming the file. Expected values are
written out by hand from the JSON below.
"""

from __future__ import annotations

import json

import pytest

from ascendprof.model import schemas as S
from ascendprof.model.errors import InputError
from ascendprof.readers.communication import read_matrix


def _link(op, transport, size_mb, time_ms, bw, lpr):
    return {"Op Name": op, "Transport Type": transport, "Transit Size(MB)": size_mb,
            "Transit Time(ms)": time_ms, "Bandwidth(GB/s)": bw, "Large Packet Ratio": lpr}


def _write(tmp_path, data):
    p = tmp_path / "communication_matrix.json"
    p.write_text(json.dumps(data))
    return p


def test_every_column_of_every_link(tmp_path):
    data = {"step3": {
        "collective": {"allreduce-top1@g7": {
            "0-1": _link("hcom_allReduce__7_1_1", "HCCS", 4.0, 0.5, 8.0, 0.75),
            "1-0": _link("hcom_allReduce__7_1_1", "HCCS", 2.0, 0.25, 8.0, 0.5)}},
        "p2p": {"send-top1@g9": {
            "1-3": _link("hcom_send__9_2_1", "RDMA", 1.0, 0.125, 8.0, 1.0)}}}}
    p = _write(tmp_path, data)
    t = read_matrix(p, 6)
    assert t.schema.equals(S.SCHEMAS[S.COMM_LINKS], check_metadata=False)
    # columns in schema order: rank, step, step_key, kind, link_key, op_name, group,
    # src_rank, dst_rank, transport, size_mb, transit_ns (ms * 10^6), bandwidth_gbps,
    # large_packet_ratio
    assert [tuple(r.values()) for r in t.to_pylist()] == [
        (6, 3, "step3", "collective", "allreduce-top1@g7", "hcom_allReduce__7_1_1", "g7",
         0, 1, "HCCS", 4.0, 500_000, 8.0, 0.75),
        (6, 3, "step3", "collective", "allreduce-top1@g7", "hcom_allReduce__7_1_1", "g7",
         1, 0, "HCCS", 2.0, 250_000, 8.0, 0.5),
        (6, 3, "step3", "p2p", "send-top1@g9", "hcom_send__9_2_1", "g9",
         1, 3, "RDMA", 1.0, 125_000, 8.0, 1.0),
    ]


def test_flat_layout_kind_and_large_packet_ratio(tmp_path):
    # raw CANN layout: op keys at the top; kind from the op name (send -> p2p)
    data = {"hcom_send__9_2_1@g9": {"0-1": {"Transport Type": "RDMA", "Transit Size(MB)": 1.0,
                                            "Transit Time(ms)": 2.0, "Bandwidth(GB/s)": 0.5,
                                            "Large Packet Ratio": 0.25}},
            "Total HCCL Operators": {"0-1": {"Transport Type": "RDMA"}}}
    rows = read_matrix(_write(tmp_path, data), 1).to_pylist()
    assert [(r["kind"], r["link_key"], r["op_name"], r["step_key"], r["step"],
             r["transit_ns"], r["large_packet_ratio"]) for r in rows] == \
        [("p2p", "hcom_send__9_2_1@g9", "hcom_send__9_2_1", "step", None, 2_000_000, 0.25)]


def test_link_that_is_not_an_object_skips_only_itself(tmp_path):
    data = {"step1": {"collective": {"allreduce-top1@g1": {
        "0-1": "not a link",
        "0-2": _link("hcom_allReduce__1_1_1", "HCCS", 3.0, 1.5, 2.0, 0.0),
        "0-3": [1, 2],
        "0-4": _link("hcom_allReduce__1_1_1", "HCCS", 6.0, 3.0, 2.0, 0.0)}}}}
    rows = read_matrix(_write(tmp_path, data), 0).to_pylist()
    assert [(r["src_rank"], r["dst_rank"], r["size_mb"], r["transit_ns"]) for r in rows] == \
        [(0, 2, 3.0, 1_500_000), (0, 4, 6.0, 3_000_000)]


def test_local_rank_below_int32_is_null(tmp_path):
    # the key is split at its first '-': "0--3000000000" -> "0" and "-3000000000"; the
    # second is below -2**31 = -2147483648 (int32's least), so it is no rank (null), while
    # "-2147483648" itself fits and is kept as written.
    data = {"step1": {"p2p": {"send-top1@g1": {
        "0--3000000000": _link("hcom_send__1_1_1", "RDMA", 1.0, 1.0, 1.0, 1.0),
        "0--2147483648": _link("hcom_send__1_1_1", "RDMA", 1.0, 1.0, 1.0, 1.0),
        "0--2147483649": _link("hcom_send__1_1_1", "RDMA", 1.0, 1.0, 1.0, 1.0)}}}}
    rows = read_matrix(_write(tmp_path, data), 0).to_pylist()
    assert [(r["src_rank"], r["dst_rank"]) for r in rows] == \
        [(0, None), (0, -2147483648), (0, None)]


def test_step_beyond_int32_is_refused_naming_the_file(tmp_path):
    # step 3000000000 > 2**31 - 1 = 2147483647 does not fit COMM_LINKS' int32 step column
    data = {"step3000000000": {"collective": {"allreduce-top1@g1": {
        "0-1": _link("hcom_allReduce__1_1_1", "HCCS", 1.0, 1.0, 1.0, 1.0)}}}}
    p = _write(tmp_path, data)
    with pytest.raises(InputError) as e:
        read_matrix(p, 0)
    assert e.value.path == str(p)
    assert e.value.reason == "column 'step': 3000000000 is not a valid int32 value"


# --- the same kinds of gaps at other places of the reader ---------------------------------


def test_values_that_are_not_numbers_are_null(tmp_path):
    # a JSON true is no number (bool is not taken for 1); text "4.0" is no number either
    data = {"step2": {"collective": {"allreduce-top1@g1": {
        "0-1": _link("hcom_allReduce__1_1_1", "HCCS", True, "0.5", False, "1"),
        "1-0": _link("hcom_allReduce__1_1_1", "HCCS", 4, 2, 2, 1)}}}}
    rows = read_matrix(_write(tmp_path, data), 0).to_pylist()
    assert [(r["size_mb"], r["transit_ns"], r["bandwidth_gbps"], r["large_packet_ratio"])
            for r in rows] == [(None, None, None, None), (4.0, 2_000_000, 2.0, 1.0)]


def test_flat_layout_op_name_is_the_key_not_the_links_op_name(tmp_path):
    # raw CANN layout: op_name is the op part of the key, whatever the link says; in the
    # torch_npu layout it is the link's own "Op Name" (null when it has none)
    flat = {"hcom_allGather__5_1_1@g5": {"2-0": _link("something else", "HCCS", 1, 1, 1, 1)}}
    rows = read_matrix(_write(tmp_path, flat), 0).to_pylist()
    assert [(r["op_name"], r["group"], r["kind"], r["src_rank"], r["dst_rank"])
            for r in rows] == [("hcom_allGather__5_1_1", "g5", "collective", 2, 0)]
    nested = {"step1": {"collective": {"allgather-total@g5": {
        "2-0": {"Transport Type": "HCCS", "Transit Size(MB)": 1.0}}}}}
    rows = read_matrix(_write(tmp_path, nested), 0).to_pylist()
    assert [(r["op_name"], r["group"], r["size_mb"]) for r in rows] == [(None, "g5", 1.0)]


def test_link_ends_that_are_not_integers_are_null(tmp_path):
    # split at the first '-': "a-b" -> neither is an int; "3" has no '-' -> dst is "";
    # "0-" -> dst ""; " 4 - 5 " -> int() takes the blanks around a number
    data = {"step1": {"p2p": {"send-top1@g1": {
        k: _link("hcom_send__1_1_1", "RDMA", 1.0, 1.0, 1.0, 1.0)
        for k in ("a-b", "3", "0-", " 4 - 5 ")}}}}
    rows = read_matrix(_write(tmp_path, data), 0).to_pylist()
    assert [(r["src_rank"], r["dst_rank"]) for r in rows] == \
        [(None, None), (3, None), (0, None), (4, 5)]


def test_op_without_any_object_link_keeps_the_next_ops_columns_aligned(tmp_path):
    # the first op has no link that is an object: it gives no row, and the rows of the ops
    # after it keep their own step, kind, link key and group
    data = {"step7": {"collective": {
        "allreduce-top1@g1": {"0-1": 5, "1-0": None},
        "allreduce-top2@g2": {"0-1": _link("hcom_allReduce__2_1_1", "HCCS", 1.0, 1.0, 1.0, 1.0),
                              "1-0": _link("hcom_allReduce__2_1_1", "HCCS", 2.0, 1.0, 1.0, 1.0)}},
        "p2p": {"send-top1@g3": {"0-1": _link("hcom_send__3_1_1", "RDMA", 3.0, 1.0, 1.0, 1.0)}}},
        "step8": {"p2p": {"send-top1@g3": {
            "1-0": _link("hcom_send__3_2_1", "RDMA", 4.0, 1.0, 1.0, 1.0)}}}}
    rows = read_matrix(_write(tmp_path, data), 0).to_pylist()
    assert [(r["step"], r["step_key"], r["kind"], r["link_key"], r["group"], r["size_mb"])
            for r in rows] == [
        (7, "step7", "collective", "allreduce-top2@g2", "g2", 1.0),
        (7, "step7", "collective", "allreduce-top2@g2", "g2", 2.0),
        (7, "step7", "p2p", "send-top1@g3", "g3", 3.0),
        (8, "step8", "p2p", "send-top1@g3", "g3", 4.0)]
