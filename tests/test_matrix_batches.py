"""cluster_communication_matrix.json from the ranks' links read a batch of ranks at a time and
split by group (cluster_communication.matrix_json_batches, what the analyse flow writes) is the
text of the merge over all links at once (cluster_communication.matrix_json, a second path:
one table of every rank's links, grouped by one sort).

Generated clusters with several groups per rank (TP, PP and DP), in both matrix layouts, and
the batches cut small so that a group's rows are spread over several batches."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

from ascendprof.analyze import cluster_communication as cc
from ascendprof.model import results as R
from ascendprof.model import schemas as S
from ascendprof.model.problems import Problems
from ascendprof.readers import read_source
from ascendprof.readers.communication import read_matrix
from ascendprof.scan import load_sources


def _rank_links(root):
    """Each rank's COMM_LINKS as read, ranks ascending, and every rank's COMM_OPS."""
    links, ops = {}, []
    for src in load_sources(root, Problems()):
        data = read_source(src)
        if data.has(S.COMM_LINKS):
            links[data.rank] = data.tables[S.COMM_LINKS]
        if data.has(S.COMM_OPS):
            ops.append(data.tables[S.COMM_OPS])
    return [links[r] for r in sorted(links)], pa.concat_tables(ops)


def _text(pairs) -> list[tuple[str, bytes]]:
    return [(key, b"".join(pieces)) for key, pieces in pairs]


class _Parked:
    """A table kept as IPC bytes (what the engine's scratch file holds), read back on load."""

    def __init__(self, table):
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, table.schema) as w:
            w.write_table(table)
        self.data = sink.getvalue()

    def load(self):
        return pa.ipc.open_stream(self.data).read_all()


@pytest.mark.parametrize("layout", ["template", "mesh"])
@pytest.mark.parametrize("batch", [3, 7, 256])
def test_batched_matrix_equals_whole_table(generated_cluster, monkeypatch, layout, batch):
    root = generated_cluster(32, "--comm-ops-per-rank", "12", "--kernels-per-rank", "20",
                             "--tp", "4", "--pp", "2", "--matrix", layout)
    tables, ops = _rank_links(root)
    membership = cc.group_membership(ops, pa.concat_tables(tables))
    whole = _text(cc.matrix_json(pa.concat_tables(tables), membership=membership))
    # several group keys (TP 4 x PP 2 x DP 4 groups and the p2p pairs), each with links
    assert len(whole) >= 8 and all(len(text) > 2 for _, text in whole)
    monkeypatch.setattr(R, "CONCAT_BATCH", batch)
    parked = []

    def park(t):
        parked.append(_Parked(t))
        return parked[-1]

    got = _text(cc.matrix_json_batches(lambda: R.concat_batches(tables, "permissive"),
                                       membership, park=park))
    assert [k for k, _ in got] == [k for k, _ in whole]
    assert got == whole
    # the groups' rows were put aside batch by batch: more parts than groups when cut small
    assert len(parked) > len(whole) if batch < 32 else len(parked) == len(whole)
    # and without parking (the tables held as they are)
    assert _text(cc.matrix_json_batches(lambda: R.concat_batches(tables, "permissive"),
                                        membership)) == whole


def test_batched_matrix_without_links():
    assert list(cc.matrix_json_batches(lambda: iter(()), ({}, {}))) == []
    empty = pa.Table.from_pylist([], schema=S.SCHEMAS[S.COMM_LINKS])
    assert list(cc.matrix_json_batches(lambda: iter([empty]), ({}, {}))) == []


def test_raw_records_in_a_later_batch_condensed_over_all_links(tmp_path, monkeypatch):
    """A flat-CANN matrix (one record per op, condensed to top1/middle/bottom/total over all
    rows) in the second batch: the batches already split are dropped and every link is merged
    at once, as matrix_json does."""
    tables = _matrix_files(tmp_path, {
        0: {"allgather-total@g": {"0-0": _link("LOCAL", 1.0, 1.0), "0-1": _link("HCCS", 2.0, 1.0)}},
        1: {"hcom_allGather__1_0_1@g": {"1-1": _link("LOCAL", 1.0, 1.0),
                                        "1-0": _link("HCCS", 4.0, 1.0)},
            "hcom_allGather__1_1_1@g": {"1-0": _link("HCCS", 3.0, 1.0)}}})
    links = pa.concat_tables(tables)
    membership = cc.group_membership(None, links)
    whole = _text(cc.matrix_json(links, membership=membership))
    assert whole and any(b"top1" in text for _, text in whole)  # condensed
    monkeypatch.setattr(R, "CONCAT_BATCH", 1)
    got = _text(cc.matrix_json_batches(lambda: R.concat_batches(tables, "permissive"),
                                       membership, park=_Parked))
    assert got == whole


def test_batches_of_different_column_types_merge_as_the_whole(generated_cluster, monkeypatch):
    """Ranks whose links arrive with a wider integer type (src/dst rank as int64, e.g. read back
    from a file another version wrote) in some batches only: the batches' schemas are unified
    (int32 -> int64) and each group's text is the whole table's."""
    root = generated_cluster(8, "--comm-ops-per-rank", "6", "--kernels-per-rank", "10",
                             "--tp", "4")
    tables, ops = _rank_links(root)

    def widened(t):
        for c in ("src_rank", "dst_rank"):
            t = t.set_column(t.schema.get_field_index(c), c, t.column(c).cast(pa.int64()))
        return t

    mixed = tables[:4] + [widened(t) for t in tables[4:]]
    assert mixed[0].schema.field("src_rank").type == pa.int32()
    assert mixed[-1].schema.field("src_rank").type == pa.int64()
    membership = cc.group_membership(ops, pa.concat_tables(tables))
    whole = _text(cc.matrix_json(pa.concat_tables(tables), membership=membership))
    assert whole
    monkeypatch.setattr(R, "CONCAT_BATCH", 4)  # ranks 0-3 narrow, 4-7 wide: two schemas
    got = _text(cc.matrix_json_batches(lambda: R.concat_batches(mixed, "permissive"),
                                       membership, park=_Parked))
    assert got == whole


def _link(tt, mb, ms):
    return {"Transport Type": tt, "Transit Size(MB)": mb, "Transit Time(ms)": ms,
            "Bandwidth(GB/s)": round(mb / ms, 4)}


def _matrix_files(tmp_path, files: dict) -> list[pa.Table]:
    """COMM_LINKS of each rank's communication_matrix.json ``files[rank]``, read as the reader
    reads a file, ranks in the dict's order."""
    tables = []
    for rank, data in files.items():
        p = tmp_path / f"m{rank}.json"
        p.write_text(json.dumps(data))
        tables.append(read_matrix(p, rank))
    return tables


def test_top1_is_the_fastest_record_not_the_first(tmp_path):
    """A flat-CANN link is condensed to top1 / bottom by its records' bandwidth: top1 is the
    fastest instance, bottom1 the slowest, whatever order the file lists them in."""
    # rank 1's link 1->0 in three instances: 1.0, 3.0 and 2.0 MB each in 1 ms, so 1, 3 and 2
    # GB/s; listed slowest first, the fastest second
    tables = _matrix_files(tmp_path, {
        0: {"allgather-total@g": {"0-0": _link("LOCAL", 1.0, 1.0), "0-1": _link("HCCS", 2.0, 1.0)}},
        1: {"hcom_allGather__1_0_1@g": {"1-1": _link("LOCAL", 1.0, 1.0),
                                        "1-0": _link("HCCS", 1.0, 1.0)},
            "hcom_allGather__1_1_1@g": {"1-0": _link("HCCS", 3.0, 1.0)},
            "hcom_allGather__1_2_1@g": {"1-0": _link("HCCS", 2.0, 1.0)}}})
    links = pa.concat_tables(tables)
    [(_, pieces)] = list(cc.matrix_json(links, membership=cc.group_membership(None, links)))
    [doc] = json.loads(b"".join(pieces)).values()
    top, bottom = doc["allgather-top1@g"]["1-0"], doc["allgather-bottom1@g"]["1-0"]
    assert (top["Op Name"], top["Transit Size(MB)"]) == ("hcom_allGather__1_1_1", 3.0)
    assert (bottom["Op Name"], bottom["Transit Size(MB)"]) == ("hcom_allGather__1_0_1", 1.0)
