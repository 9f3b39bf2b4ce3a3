"""The registry's per-rank parts (analyze.registry.rank_partials) of a rank whose
communication.json is too large to hold (sysio.bigtables: spilled to Parquet) equal those of
the same rank with every table whole in memory, although a spilled COMM_BANDWIDTH is no
longer read whole for the registry: op_efficiency reads two of its columns while it runs and
comm_hardware reads it a row group at a time (its sums added part by part).

Oracle: the same rank analysed without spilling (the path comm_hardware's and op_efficiency's
own tests pin by hand and against pandas). Spilling is forced on small files by lowering
SPILL_BYTES, and the reader's block, so the bandwidth file has several row groups.
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from ascendprof.analyze import comm_hardware as ch, op_efficiency, registry, verdicts
from ascendprof.engine import pipeline
from ascendprof.engine.pipeline import process_rank
from ascendprof.model import schemas as S
from ascendprof.readers.communication import fast as F
from ascendprof.scan import load_sources
from ascendprof.sysio import bigtables, textio

#: the registry's parts that read COMM_BANDWIDTH
_PARTS = (ch.OPS, ch.LINKS, op_efficiency.OP_EFFICIENCY, op_efficiency.STEP_WINDOWS)


def _rank(src, spill: bool, monkeypatch):
    """The rank's result and, when spilled, the reads of its bandwidth table for the
    registry: ("read" | "row_groups", columns asked for, tables given)."""
    reads = []
    real_read, real_groups = pipeline._LaterColumns.read, pipeline._LaterColumns.row_groups

    def read(self, columns=None):
        t = real_read(self, columns)
        if "transport" in self.cols:  # (not the other spilled tables)
            reads.append(("read", columns, [t]))
        return t

    def row_groups(self, columns=None):
        got = []
        if "transport" in self.cols:
            reads.append(("row_groups", columns, got))
        for t in real_groups(self, columns):
            got.append(t.num_rows)
            yield t

    with monkeypatch.context() as m:
        if spill:
            m.setattr(bigtables, "SPILL_BYTES", 1)
            m.setattr(textio, "STREAM_BLOCK_BYTES", 64 << 10)
            m.setattr(F, "BLOCK_BYTES", 4 << 10)
            m.setattr(pipeline._LaterColumns, "read", read)
            m.setattr(pipeline._LaterColumns, "row_groups", row_groups)
        res = process_rank(src)
    return res, reads


def _same(a: pa.Table, b: pa.Table) -> bool:
    return a.schema == b.schema and a.to_pylist() == b.to_pylist()


def _null_transit(comm):  # a transfer without a transit time: the sums go through floats
    for step in comm.values():
        for kind in ("collective", "p2p"):
            for name, op in (step.get(kind) or {}).items():
                info = op["Communication Bandwidth Info"] if name != "Total Op Info" else {}
                for tr in info.values():
                    if tr.get("Transit Size(MB)", 0) > 0:
                        tr["Transit Time(ms)"] = None
                        return


@pytest.mark.parametrize("edit", [None, _null_transit])
def test_spilled_bandwidth_gives_the_same_registry_parts(monkeypatch, tmp_path, qwen3, edit):
    from _advice_data import OUT, copy_rank, edit_json

    rank = copy_rank(qwen3 / "rank_0_ascend_pt", tmp_path / "rank_0_ascend_pt")
    if edit is not None:
        edit_json(rank / OUT / "communication.json", edit)
    (src,) = load_sources(rank)
    whole, _ = _rank(src, False, monkeypatch)
    got, reads = _rank(src, True, monkeypatch)
    assert not whole.problems.brief() and not got.problems.brief()
    for name in _PARTS:  # the rank has every part: the comparison is not of nothing
        assert whole.tables[name].num_rows > 0, name
        assert _same(got.tables[name], whole.tables[name]), name
    links = whole.tables[ch.LINKS].to_pylist()
    assert {r["transport"] for r in links} >= {"HCCS", "SDMA"}
    assert any(r["sent_mb"] > 0 for r in whole.tables[ch.OPS].to_pylist())
    # every registry partial the same, not only those that read the bandwidth table
    names = set(whole.tables) - {verdicts.OP_ROWS}
    assert names - set(_PARTS) and names <= set(got.tables)
    for name in names:
        assert _same(got.tables[name], whole.tables[name]), name
    # the bandwidth table was never read whole for the registry: two columns for
    # op_efficiency, and every column a row group at a time (several) for comm_hardware
    assert [(how, cols) for how, cols, _ in reads] == [
        ("read", registry.READ_LATER[S.COMM_BANDWIDTH]["op_efficiency"]),
        ("row_groups", None)], reads
    assert reads[0][2][0].column_names == ["transport", "size_mb"]
    groups = reads[1][2]
    assert len(groups) > 1 and sum(groups) == whole.table_rows[S.COMM_BANDWIDTH], groups
