"""What made a rank late (analyze.late_arrivals, late_arrivals.csv) on the shipped Qwen3 sample
(PP2 x DP2): stage 0 (rank 0) waits 158 ms in the pipeline op hcom_batchSendRecv__128_4_1 for
stage 1 (rank 2), which runs the output layer and the loss — the vocabulary-sized (151936)
kernels that stage 0 never runs. Expected values are computed here from the two ranks'
kernel_details.csv with the csv module."""

from __future__ import annotations

import csv
from decimal import Decimal

import pandas as pd
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


def _window_rows(rank, step, group, op, start, lo, wait, items):
    return [{"rank": rank, "step": step, "group": group, "op_name": op, "start_ns": start,
             "window_start_ns": lo, "wait_ns": wait, "kind": kind, "item": item, "dur_ns": ns}
            for kind, item, ns in items]


def test_instances_picked_and_ordered_by_hand(monkeypatch):
    """build() on partials written out by hand: which (step, group, op) instances count, which
    rank is early and late, and their order (the largest wait first; equal waits by step, then
    group, then op name)."""
    import pyarrow as pa

    from ascendprof.analyze import late_arrivals as la

    monkeypatch.setattr(la, "TOP_INSTANCES", 10)
    MS = 10**6
    k = lambda item, ms: ("kernel", item, ms * MS)  # noqa: E731
    rows = [
        # step 2, g, "ar": rank 1 arrives at 10 ms, rank 0 at 14 ms (late), rank 3 at 10 ms
        # too (rank 1 stays early: the first row with the smallest start); wait 5 ms (rank 1)
        *_window_rows(1, 2, "g", "ar", 10 * MS, 2 * MS, 5 * MS, [k("MatMul [1]", 3)]),
        *_window_rows(0, 2, "g", "ar", 14 * MS, 2 * MS, 1 * MS,
                      [k("MatMul [1]", 5), k("Add [2]", 3), ("idle", "device idle", 1 * MS)]),
        *_window_rows(3, 2, "g", "ar", 10 * MS, 2 * MS, None, [k("Add [2]", 4)]),
        # a second row set of rank 0 for the same op (a later occurrence): its first one counts
        *_window_rows(0, 2, "g", "ar", 99 * MS, 2 * MS, 50 * MS, [k("Cast [3]", 6)]),
        # step 1, g, "ar": wait 5 ms too -> before the step 2 instance (equal waits: step)
        *_window_rows(0, 1, "g", "ar", 1 * MS, 0, 5 * MS, [k("MatMul [1]", 1)]),
        *_window_rows(1, 1, "g", "ar", 2 * MS, 0, 0, [k("MatMul [1]", 2)]),
        # step 1, "f" (group) < "g": before both
        *_window_rows(0, 1, "f", "zz", 1 * MS, 0, 5 * MS, [k("Sub [4]", 1)]),
        *_window_rows(1, 1, "f", "zz", 3 * MS, 0, 0, [k("Sub [4]", 4)]),
        # the largest wait (9 ms), but one rank only: no instance
        *_window_rows(0, 3, "g", "solo", 1 * MS, 0, 9 * MS, [k("Sub [4]", 1)]),
        # both ranks arrive together: no early and late rank
        *_window_rows(0, 4, "g", "tie", 5 * MS, 0, 8 * MS, [k("Sub [4]", 1)]),
        *_window_rows(1, 4, "g", "tie", 5 * MS, 0, 0, [k("Sub [4]", 2)]),
        # no group: belongs to no instance
        *_window_rows(0, 5, None, "ng", 1 * MS, 0, 7 * MS, [k("Sub [4]", 1)]),
        *_window_rows(1, 5, None, "ng", 2 * MS, 0, 0, [k("Sub [4]", 3)]),
        # no step: its own instance, the step column empty; wait 1 ms: last
        *_window_rows(0, None, "g", "ns", 1 * MS, 0, 1 * MS, [k("Mul [5]", 1)]),
        *_window_rows(1, None, "g", "ns", 2 * MS, 0, None, [k("Mul [5]", 2)]),
    ]
    out = la.build(pa.Table.from_pylist(rows, schema=la.SCHEMA))
    got = [(None if pd.isna(r["Step"]) else int(r["Step"]), r["Group"], r["Op Name"],
            r["Max Wait(ms)"], r["Arrival Skew(ms)"], r["Early Rank"], r["Late Rank"],
            r["Early Window(ms)"], r["Late Window(ms)"], r["Item Kind"], r["Item"],
            r["Late(ms)"], r["Early(ms)"], r["Extra(ms)"]) for _, r in out.iterrows()]
    assert got == [
        (1, "f", "zz", 5.0, 2.0, 0, 1, 1.0, 3.0, "kernel", "Sub [4]", 4.0, 1.0, 3.0),
        (1, "g", "ar", 5.0, 1.0, 0, 1, 1.0, 2.0, "kernel", "MatMul [1]", 2.0, 1.0, 1.0),
        # late rank 0 against early rank 1: the rows of rank 0's later occurrence count in
        # its sums (same instance), not in who arrived when
        (2, "g", "ar", 5.0, 4.0, 1, 0, 8.0, 12.0, "kernel", "Cast [3]", 6.0, 0.0, 6.0),
        (2, "g", "ar", 5.0, 4.0, 1, 0, 8.0, 12.0, "kernel", "Add [2]", 3.0, 0.0, 3.0),
        (2, "g", "ar", 5.0, 4.0, 1, 0, 8.0, 12.0, "kernel", "MatMul [1]", 5.0, 3.0, 2.0),
        (2, "g", "ar", 5.0, 4.0, 1, 0, 8.0, 12.0, "idle", "device idle", 1.0, 0.0, 1.0),
        (None, "g", "ns", 1.0, 1.0, 0, 1, 1.0, 2.0, "kernel", "Mul [5]", 2.0, 1.0, 1.0),
    ]
    assert str(out["Step"].dtype) == "Int64"
