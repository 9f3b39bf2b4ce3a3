"""Every rank whose recomputed Computing or Communication(Not Overlapped) deviates more than
1 % from the profiler's own is listed in problems.csv and the summary, with the reason; so is
a rank whose values nothing could check (issue #16).

Real data: a copy of the torch_npu level1 text collection with kernel_details.csv cut down
(the damage a half-copied file does), the Qwen3 fixture (ranks 1 and 3 hold no kernels). The
expected figures are the profiler's step_trace_time.csv values (csv module) and the interval
union of the rows left in the cut file, computed here by hand.
"""

from __future__ import annotations

import csv
import json
import shutil

import pandas as pd
import pytest
from click.testing import CliRunner

from ascendprof.analyze.step_breakdown import rank_checks
from ascendprof.cli.main import main

OUT = "ASCEND_PROFILER_OUTPUT"


def _rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def _analyse(src, out):
    r = CliRunner().invoke(main, ["analyse", str(src), "-o", str(out), "-q"])
    assert r.exit_code == 0, r.output
    return _rows(out / "problems.csv"), json.loads((out / "summary.json").read_text())


def _union_us(rows) -> float:
    """Total length (us) of the union of the rows' [start, start + dur] intervals (exact
    decimals: absolute us need 19 digits)."""
    from decimal import Decimal

    iv = sorted((Decimal(r["Start Time(us)"].strip()), Decimal(r["Start Time(us)"].strip())
                 + Decimal(r["Duration(us)"])) for r in rows)
    total, cur_s, cur_e = Decimal(0), None, None
    for s, e in iv:
        if cur_e is None or s > cur_e:
            if cur_e is not None:
                total += cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    return float(total + (cur_e - cur_s if cur_e is not None else 0))


def test_cut_down_kernel_details_is_listed_with_the_deviation(shared_data, tmp_path):
    src = tmp_path / "src"
    shutil.copytree(shared_data / "torch_npu-2rank-levels" / "text" / "level1", src)
    kd = src / "rank0_ascend_pt" / OUT / "kernel_details.csv"
    with open(kd, newline="") as f:
        lines = f.read().splitlines(keepends=True)
    kd.write_text("".join(lines[: 1 + (len(lines) - 1) // 2]))  # header + first half
    kept = [r for r in _rows(kd) if r["Accelerator Core"] not in ("COMMUNICATION", "HCCL")]
    (rep,) = _rows(src / "rank0_ascend_pt" / OUT / "step_trace_time.csv")
    rep_comp = float(rep["Computing"])
    want = _union_us(kept)  # what the cut file still holds
    assert want < 0.9 * rep_comp

    problems, summary = _analyse(src, tmp_path / "out")
    (p,) = [p for p in problems if p["Rank"] == "0" and "step breakdown" in p["Where"]]
    assert p["Severity"] == "warning"
    assert "Computing" in p["Reason"] and f"{rep_comp:.1f} us" in p["Reason"]
    assert "kernel_details" in p["Reason"]  # the method, i.e. where the numbers came from
    assert not [p for p in problems if p["Rank"] == "1"]  # the intact rank agrees
    check = {c["rank"]: c for c in summary["breakdown_check"]}
    assert check[0]["status"] == "deviates" and check[0]["used"] == "reported"
    assert check[1]["status"] == "agrees"
    got = check[0]["metrics"]["Computing"]
    assert got["reported_us"] == pytest.approx(rep_comp, abs=1e-3)
    assert got["recomputed_us"] == pytest.approx(want, rel=1e-6)
    assert got["deviation_pct"] == pytest.approx((want - rep_comp) / rep_comp * 100, rel=1e-6)
    assert summary["problems"] and any(q["reason"] == p["Reason"] for q in summary["problems"])


def test_ranks_nothing_can_check_are_listed(qwen3, tmp_path):
    problems, summary = _analyse(qwen3, tmp_path / "out")
    listed = {int(p["Rank"]) for p in problems if "step breakdown" in p["Where"]}
    assert listed == {1, 3}  # no kernel_details, no trace_view: not cross-checked
    assert all("cross-checked" in p["Reason"] for p in problems if "step breakdown" in p["Where"])
    status = {c["rank"]: c["status"] for c in summary["breakdown_check"]}
    assert status == {0: "agrees", 1: "not_checked", 2: "agrees", 3: "not_checked"}


def _check(rows):
    return pd.DataFrame(rows, columns=["Rank", "Step", "Metric", "Reported(us)",
                                       "Recomputed(us)", "Deviation(%)", "Method", "Note"])


def test_rank_checks_limits_by_hand():
    m = "kernels: x"
    df = _check([
        [0, 1, "Computing", 100.0, 100.9, 0.9, m, ""],             # within 1 %
        [0, 1, "Communication(Not Overlapped)", 50.0, 50.2, 0.4, m, ""],
        [1, 1, "Computing", 100.0, 101.5, 1.5, m, ""],             # beyond 1 %
        [1, 1, "Communication(Not Overlapped)", 0.0, 0.0, None, m, ""],
        [2, 1, "Computing", 100.0, 100.0, 0.0, m, ""],
        [2, 1, "Communication(Not Overlapped)", 0.0, 30.0, None, m, ""],  # reported 0
        [3, 1, "Computing", None, 80.0, None, m, ""],              # nothing reported
        [4, 1, "Computing", 70.0, None, None, "cannot recompute: no kernels", ""],
        [5, None, "Computing", None, None, None, "cannot recompute: nothing", ""],
    ])
    got = {c["rank"]: c for c in rank_checks(df)}
    assert [got[r]["status"] for r in range(6)] == ["agrees", "deviates", "deviates",
                                                    "recomputed_only", "not_checked", "none"]
    assert [got[r]["used"] for r in range(6)] == ["reported", "reported", "reported",
                                                  "recomputed", "reported", None]
    assert all(got[r]["reason"] for r in range(1, 6))
    assert got[0]["reason"] == ""
    assert "+1.5 %" in got[1]["reason"] and "101.5 us" in got[1]["reason"]
    assert "Communication(Not Overlapped) 30.0 us" in got[2]["reason"]
    assert "no kernels" in got[4]["reason"]
