"""The communication advice of a rank whose communication.json is too large to hold
(sysio.bigtables: spilled to Parquet, COMM_BANDWIDTH read back for the advice a row group at a
time with only the rows its rules read) is the advice on the whole table, each rule made to
fire on a copy of a real export edited to carry its problem.

Oracle: the same rank analysed with every table whole in memory (no spilling), the path the
rules' own tests pin against the edited files. Spilling is forced on the small real files by
lowering SPILL_BYTES, and the batch size, so the bandwidth file has several row groups.
"""

from __future__ import annotations

import pytest

from _advice_data import OUT, copy_rank, edit_json
from ascendprof.engine.pipeline import process_rank
from ascendprof.model import schemas as S
from ascendprof.model.options import ReadOptions
from ascendprof.readers.communication import fast as F
from ascendprof.scan import load_sources
from ascendprof.sysio import bigtables, textio

ALEX = "torch_npu-2rank-levels/text/level2/rank0_ascend_pt"


def _ops(comm):
    for step in comm.values():
        for kind in ("collective", "p2p"):
            for name, op in (step.get(kind) or {}).items():
                if name != "Total Op Info":
                    yield name, op


def _advice(rank_dir, spill: bool, monkeypatch):
    """The rank's advice ("all" mode) and, when spilled, the row counts of each read of the
    bandwidth table's file: (rows kept, rows in the file)."""
    reads = []
    real_read = bigtables.SpilledTable.read

    def read(self, columns=None, dictionary=False, rows=None):
        t = real_read(self, columns, dictionary, rows)
        if self.path.name.startswith(f".{S.COMM_BANDWIDTH}."):
            reads.append((t.num_rows, self.num_rows, rows is not None))
        return t

    with monkeypatch.context() as m:
        if spill:
            m.setattr(bigtables, "SPILL_BYTES", 1)
            m.setattr(textio, "STREAM_BLOCK_BYTES", 64 << 10)
            m.setattr(F, "BLOCK_BYTES", 4 << 10)
            m.setattr(bigtables.SpilledTable, "read", read)
        (src,) = load_sources(rank_dir)
        res = process_rank(src, read=ReadOptions(advice="all"))
    assert res.advice is not None, res.problems.brief()
    return res.advice, reads


def _shrink(comm):  # small packets: every SDMA transfer 1 % of its size
    for _, op in _ops(comm):
        op["Communication Bandwidth Info"]["SDMA"]["Transit Size(MB)"] *= 0.01


def _stall(comm):  # retransmission: one RDMA transfer of 5 s
    _, op = next(iter(_ops(comm)))
    op["Communication Bandwidth Info"]["RDMA"].update(
        {"Transit Size(MB)": 10.0, "Transit Time(ms)": 5000.0, "Bandwidth(GB/s)": 0.002})


def _slow(comm):  # bandwidth contention: SDMA at 10 GB/s beside the MatMuls
    for _, op in _ops(comm):
        op["Communication Bandwidth Info"]["SDMA"]["Bandwidth(GB/s)"] = 10.0


def _none(comm):  # no SDMA / RDMA transfer of a positive size: the rules read no row
    for _, op in _ops(comm):
        for tr in ("SDMA", "RDMA"):
            if tr in op["Communication Bandwidth Info"]:
                op["Communication Bandwidth Info"][tr]["Transit Size(MB)"] = 0.0


@pytest.mark.parametrize("source, edit, rule", [
    ("qwen3", _shrink, "communication.small_packets"),
    ("qwen3", _stall, "communication.retransmission"),
    ("alex", _slow, "communication.bandwidth_contention"),
    ("qwen3", _none, None),
])
def test_spilled_bandwidth_gives_the_same_advice(monkeypatch, tmp_path, qwen3, shared_data,
                                                 source, edit, rule):
    src = qwen3 / "rank_0_ascend_pt" if source == "qwen3" else shared_data / ALEX
    rank = copy_rank(src, tmp_path / src.name, skip=("trace_view.json",) if source == "alex"
                     else ())
    edit_json(rank / OUT / "communication.json", edit)
    whole, _ = _advice(rank, False, monkeypatch)
    got, reads = _advice(rank, True, monkeypatch)
    if rule is not None:
        assert whole["status"][rule][0] == "fired"
    else:  # the rules ran and found nothing (not skipped for want of the table)
        assert all(whole["status"][r][0] == "silent" for r in (
            "communication.small_packets", "communication.retransmission"))
    assert got == whole
    # the advice read the bandwidth file (so the rank did spill) keeping only some rows
    kept = [(n, total) for n, total, filtered in reads if filtered]
    assert kept and all(0 < n < total for n, total in kept), reads
