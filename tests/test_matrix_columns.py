"""cluster_communication_matrix.json merged from columns (analyze/cluster_communication/
matrix_columns.py) and kept in a scratch file (sysio/jsonstream.SpilledJsonMembers): the same
text as the record-by-record merge, hand-checked values on the cases where the two could part
(pieces, interleaved ops, zero sums, two local links of one global link), and the file written
through the user's path on a generated all-to-all cluster."""

from __future__ import annotations

import json

import orjson
import pytest

from ascendprof.analyze import cluster_communication as cc
from ascendprof.analyze.cluster_communication import matrix as M
from ascendprof.analyze.cluster_communication import matrix_columns as MC
from ascendprof.model import schemas as S
from ascendprof.sysio.jsonstream import SpilledJsonMembers

from test_cluster_communication_by_hand import LINKS, _entry, _link, table


def _by_records(links):
    """The record-by-record merge (msprof-analyze's loop, kept for PROF_ input) as texts."""
    mem = cc.group_membership(None, links)
    return {k: orjson.dumps(v, option=orjson.OPT_NON_STR_KEYS)
            for k, v in M._matrix_members(M._link_records(links), *mem)}


def _by_columns(links):
    return {k: b"".join(p) for k, p in cc.matrix_json(links)}


def test_columns_give_the_record_merge_text_on_the_hand_built_links():
    links = table(S.COMM_LINKS, LINKS)
    assert _by_columns(links) == _by_records(links)
    rev = table(S.COMM_LINKS, LINKS[::-1])  # other first-seen orders of groups, steps, ops
    assert _by_columns(rev) == _by_records(rev)


def test_links_are_written_in_pieces_that_join_to_one_object(monkeypatch):
    # three links in one op, two per piece: the pieces "{a,b" and ",c}" must make one object
    monkeypatch.setattr(MC, "LINKS_PER_PIECE", 2)
    rows = [_link(r, "alltoall-total@g", r, d, "HCCS" if r != d else "LOCAL", 1.0, 1_000_000)
            for r in range(2) for d in range(2)] + [
        _link(2, "alltoall-total@g", 2, 2, "LOCAL", 1.0, 1_000_000),
        _link(2, "alltoall-total@g", 2, 0, "HCCS", 4.0, 2_000_000)]
    links = table(S.COMM_LINKS, rows)
    ((key, pieces),) = list(cc.matrix_json(links))
    pieces = list(pieces)
    assert len(pieces) > 4 and key == "(0, 1, 2)"
    got = json.loads(b"".join(pieces))
    # local i -> rank i (each reports i-i); 5 links: 0-0 0-1 1-0 1-1 2-2 2-0 (six)
    op = got["step1"]["alltoall-total@g"]
    assert list(op) == ["0-0", "0-1", "1-0", "1-1", "2-2", "2-0"]
    assert op["2-0"] == _entry("HCCS", 2.0, 4.0, "", 2.0)  # 4 MB / 2 ms
    assert got["step1"]["Total Op Info@g"] == op
    assert b"".join(pieces) == _by_records(links)[key]


def test_ops_interleaved_differently_on_each_rank_keep_first_seen_order():
    # rank 0 lists op a then b, rank 1 b then a: the op order is the first rank's (a, b); the
    # local -> global map takes, per local rank, the first self-link in (op, rank) order
    rows = [_link(0, "a-total@g", 0, 0, "LOCAL", 1.0, 1_000_000),
            _link(0, "b-total@g", 0, 1, "HCCS", 2.0, 1_000_000),
            _link(1, "b-total@g", 1, 1, "LOCAL", 1.0, 1_000_000),
            _link(1, "a-total@g", 1, 0, "HCCS", 3.0, 1_000_000)]
    links = table(S.COMM_LINKS, rows)
    steps = dict(cc.matrix_groups(links))["(0, 1)"]["step1"]
    assert list(steps) == ["a-total@g", "b-total@g", "Total Op Info@g"]
    assert steps["a-total@g"] == {"0-0": _entry("LOCAL", 1.0, 1.0, "", 1.0),
                                  "1-0": _entry("HCCS", 1.0, 3.0, "", 3.0)}
    # the total: a's links then b's, 0-0 first seen in a
    assert list(steps["Total Op Info@g"]) == ["0-0", "1-0", "0-1", "1-1"]
    assert _by_columns(links) == _by_records(links)


def test_a_sum_of_zeros_stays_the_integer_zero():
    # both ranks report 0 MB in 0 ns on link 0-1: msprof-analyze's sum 0 + 0 + 0 stays int 0
    # (written "0"), and the bandwidth of a zero time is 0
    rows = [_link(0, "x-total@g", 0, 0, "LOCAL", 0.0, 0),
            _link(0, "x-total@g", 0, 1, "HCCS", 0.0, 0),
            _link(1, "x-total@g", 1, 1, "LOCAL", None, None),
            _link(1, "x-total@g", 0, 1, "HCCS", 0.0, 0)]
    links = table(S.COMM_LINKS, rows)
    text = _by_columns(links)["(0, 1)"]
    assert b'"0-1":{"Transport Type":"HCCS","Transit Time(ms)":0,"Transit Size(MB)":0,' in text
    assert b"0.0" not in text
    assert text == _by_records(links)["(0, 1)"]


def test_two_local_links_of_one_global_link_are_merged_record_by_record():
    # local ranks 0 and 2 both map to rank 0 (rank 0 reports the self-links 0-0 and 2-2),
    # local 1 to rank 1: in op a the links 0-0 (1 MB) and 2-2 (5 MB) are both global "0-0".
    # The column path leaves this to the record merge, which (as msprof-analyze's dict does)
    # keeps the key's first place and the last value: 5 MB in 1 ms = 5 GB/s
    rows = [_link(0, "a-total@g", 0, 0, "LOCAL", 1.0, 1_000_000),
            _link(0, "a-total@g", 2, 2, "LOCAL", 5.0, 1_000_000),
            _link(0, "b-total@g", 2, 2, "LOCAL", 1.0, 1_000_000),
            _link(1, "b-total@g", 1, 1, "LOCAL", 1.0, 1_000_000)]
    links = table(S.COMM_LINKS, rows)
    with pytest.raises(MC.NeedsRecords):
        MC.group_json(links)  # one group, rows already in rank order
    got = dict(cc.matrix_groups(links))["(0, 1)"]["step1"]
    assert got["a-total@g"] == {"0-0": _entry("LOCAL", 1.0, 5.0, "", 5.0)}
    assert _by_columns(links) == _by_records(links)


def test_spilled_members_read_back_whole_and_in_pieces(tmp_path, monkeypatch):
    monkeypatch.setattr(SpilledJsonMembers, "READ_BYTES", 3)
    m = SpilledJsonMembers([("a", [b'{"x":', b"1}"]), ("b", b"[1,2,3]"), ("c", iter([b"{}"]))],
                           directory=tmp_path)
    assert list(m) == ["a", "b", "c"] and len(m) == 3
    assert m["a"] == {"x": 1} and m["b"] == [1, 2, 3] and m["c"] == {}
    items = [(k, b"".join(p)) for k, p in m.items_json()]
    assert items == [("a", b'{"x":1}'), ("b", b"[1,2,3]"), ("c", b"{}")]
    assert not list(tmp_path.iterdir())  # an unlinked file: nothing left in the directory
    m.close()


def test_the_analysis_writes_the_merged_matrix_of_an_all_to_all_cluster(generated_cluster,
                                                                        tmp_path):
    # the user's path: `ascendprof analyse` of 16 generated ranks whose matrix files list a
    # link to every group member; the written file equals the record merge of the ranks' links
    root = generated_cluster(16, "--tp", "8", "--pp", "1", "--matrix", "mesh",
                             "--comm-ops-per-rank", "20", "--kernels-per-rank", "200")
    import ascendprof
    a = ascendprof.open(root)
    links = a.analysis().concat(S.COMM_LINKS)
    want = {k: json.loads(v) for k, v in _by_records(links).items()}
    assert dict(a.communication_matrix()) == want
    from ascendprof.cli.main import main as cli
    with pytest.raises(SystemExit) as e:
        cli(["analyse", str(root), "-o", str(tmp_path / "o"), "-q", "--no-html", "--no-cache"])
    assert e.value.code == 0
    assert json.loads((tmp_path / "o" / "cluster_communication_matrix.json").read_text()) == want


def test_a_link_without_transport_is_merged_from_columns():
    # a missing "Transport Type" is a value of the link (written null), not a reason to leave
    # the group to the record merge: the column path takes it (and gives the same text)
    rows = [_link(0, "x-total@g", 0, 0, None, 1.0, 1_000_000),
            _link(0, "x-total@g", 0, 1, None, 2.0, 1_000_000),
            _link(1, "x-total@g", 1, 1, "LOCAL", 1.0, 1_000_000)]
    links = table(S.COMM_LINKS, rows)
    text = b"".join(MC.group_json(links))  # no NeedsRecords
    assert json.loads(text)["step1"]["x-total@g"]["0-1"] == _entry(None, 1.0, 2.0, "", 2.0)
    assert text == _by_records(links)["(0, 1)"]


def test_record_merge_fallback_keeps_a_step_without_self_links_empty():
    # step1 needs the record merge (locals 0 and 2 both map to rank 0, as above); step2 of the
    # same group has a link but nobody's self-link, so no local rank maps there: its op is
    # written with no links, and no total (msprof-analyze: an empty op, nothing summed)
    rows = [_link(0, "a-total@g", 0, 0, "LOCAL", 1.0, 1_000_000),
            _link(0, "a-total@g", 2, 2, "LOCAL", 5.0, 1_000_000),
            _link(1, "a-total@g", 1, 1, "LOCAL", 1.0, 1_000_000),
            _link(0, "a-total@g", 0, 1, "HCCS", 2.0, 1_000_000, step="step2")]
    links = table(S.COMM_LINKS, rows)
    got = dict(cc.matrix_groups(links))["(0, 1)"]
    assert got["step2"] == {"a-total@g": {}}
    assert got["step1"]["a-total@g"]["0-0"] == _entry("LOCAL", 1.0, 5.0, "", 5.0)


def test_a_link_without_step_key_is_merged_under_null():
    # a record without a step key (not one the readers write, but the table allows it) goes to
    # the record merge, whose step key None is written as the JSON key "null"
    rows = [_link(0, "a-total@g", 0, 0, "LOCAL", 1.0, 1_000_000, step=None),
            _link(0, "a-total@g", 0, 1, "HCCS", 2.0, 1_000_000, step=None),
            _link(1, "a-total@g", 1, 1, "LOCAL", 1.0, 1_000_000, step=None)]
    ((key, pieces),) = list(cc.matrix_json(table(S.COMM_LINKS, rows)))
    doc = json.loads(b"".join(pieces))
    assert key == "(0, 1)" and list(doc) == ["null"]
    assert doc["null"]["a-total@g"]["0-1"] == _entry("HCCS", 1.0, 2.0, "", 2.0)


def test_raw_per_op_records_without_step_key_are_merged_under_null():
    # flat CANN records (the link key is the op key itself) are condensed and merged record by
    # record; a missing step key is written as the JSON key "null" there too
    rows = [_link(0, "hcom_allReduce__1@g", 0, 0, "LOCAL", 1.0, 1_000_000,
                  op="hcom_allReduce__1", step=None),
            _link(0, "hcom_allReduce__1@g", 0, 1, "HCCS", 2.0, 1_000_000,
                  op="hcom_allReduce__1", step=None),
            _link(1, "hcom_allReduce__1@g", 1, 1, "LOCAL", 1.0, 1_000_000,
                  op="hcom_allReduce__1", step=None)]
    ((key, pieces),) = list(cc.matrix_json(table(S.COMM_LINKS, rows)))
    doc = json.loads(b"".join(pieces))
    # one record per link: top1 = middle = bottom1 = total = that record, of type allreduce
    assert key == "(0, 1)" and list(doc) == ["null"]
    assert doc["null"]["allreduce-total@g"]["0-1"]["Transit Size(MB)"] == 2.0
