"""What made a rank late (analyze.late_arrivals, late_arrivals.csv) on the shipped Qwen3 sample
(PP2 x DP2): stage 0 (rank 0) waits 158 ms in the pipeline op hcom_batchSendRecv__128_4_1 for
stage 1 (rank 2), which runs the output layer and the loss — the vocabulary-sized (151936)
kernels that stage 0 never runs. Expected values are computed here from the two ranks'
kernel_details.csv with the csv module."""

from __future__ import annotations

import csv
from decimal import Decimal

import pytest

from conftest import QWEN3, analysis_of

OP = "hcom_batchSendRecv__128_4_1"
PREV = "hcom_batchSendRecv__128_3_1"


def _rows(rank):
    path = QWEN3 / f"rank_{rank}_ascend_pt" / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv"
    with open(path, newline="", encoding="utf-8-sig") as f:
        return list(csv.DictReader(f))


def _ns(us_text) -> int:
    return int(Decimal(us_text.strip()) * 1000)


def test_pp_wait_names_stage_1s_extra_kernels():
    late = analysis_of(QWEN3).csv_files["late_arrivals.csv"]
    top = late[late["Op Name"] == OP]
    assert late.iloc[0]["Op Name"] == OP  # the largest wait of the step
    assert set(top["Early Rank"]) == {0} and set(top["Late Rank"]) == {2}
    assert top.iloc[0]["Max Wait(ms)"] == pytest.approx(158.102, abs=0.001)  # communication.json

    # rank 2's window: end of the previous pp op -> start of this one (its COMMUNICATION rows)
    r2 = _rows(2)
    prev = next(r for r in r2 if r["Name"] == PREV)
    cur = next(r for r in r2 if r["Name"] == OP)
    lo = _ns(prev["Start Time(us)"]) + _ns(prev["Duration(us)"])
    hi = _ns(cur["Start Time(us)"])
    lm_head = "4096,151936;151936,1024"
    expected = sum(_ns(r["Duration(us)"]) for r in r2
                   if r["Type"] == "MatMulV3" and r["Input Shapes"].strip('"') == lm_head
                   and lo <= _ns(r["Start Time(us)"]) < hi)
    assert expected > 0
    # stage 0 never runs the output layer: no MatMul with the vocabulary dimension
    assert not any("151936" in r["Input Shapes"] for r in _rows(0) if "MatMul" in r["Type"])
    row = top[top["Item"] == f"MatMulV3 [{lm_head}]"].iloc[0]
    assert row["Item Kind"] == "kernel" and row["Early(ms)"] == 0
    assert row["Extra(ms)"] == pytest.approx(expected / 1e6, abs=0.002)
    # the loss over the vocabulary (Cast / Exp / Sub / RealDiv of [4096,1,151936]) is named too
    vocab = top[top["Item"].str.contains("4096,1,151936")]
    assert len(vocab) >= 3 and (vocab["Early(ms)"] == 0).all()
    # the late rank's window is the early one's plus (about) the skew
    r = top.iloc[0]
    assert r["Late Window(ms)"] - r["Early Window(ms)"] == pytest.approx(r["Arrival Skew(ms)"],
                                                                          abs=0.5)


def test_many_ops_keep_the_largest_wait(monkeypatch):
    # with one op kept per criterion (and the first of each group), rank 0 keeps its largest
    # wait (the pp op, 158 ms) and rank 2 its longest window after a previous op of the group
    # (the same op, 238 ms): the pp instance is still explained
    from ascendprof.analyze import late_arrivals

    monkeypatch.setattr(late_arrivals, "KEEP_OPS", 1)
    late = analysis_of(QWEN3).csv_files["late_arrivals.csv"]
    assert late.iloc[0]["Op Name"] == OP
    assert "MatMulV3 [4096,151936;151936,1024]" in set(late["Item"])
