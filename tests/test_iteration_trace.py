"""Graph-mode iteration trace statistics (ascendprof.analyze.iteration_trace) by hand: the
modified z-score (Iglewicz & Hoaglin: 0.6745 (x - median) / MAD), per-rank means, and the
thresholds of the slow host / slow card / long tail findings at their edges."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from ascendprof.analyze import iteration_trace as IT

MS = 1_000_000


def test_robust_z_by_hand():
    # median 3, absolute deviations 2 1 0 1 97 -> MAD 1
    z = IT.robust_z([1, 2, 3, 4, 100])
    assert z.dtype == np.float64
    assert z.tolist() == pytest.approx([-1.349, -0.6745, 0.0, 0.6745, 97 * 0.6745])
    # MAD 0 (three of five equal): above the median +inf, below -inf, at it 0
    assert IT.robust_z([5, 5, 5, 9, 1]).tolist() == [0.0, 0.0, 0.0, math.inf, -math.inf]
    # integer division would lose the fraction: 0.6745 * 1 / 2
    assert IT.robust_z([0, 1, 1, 2, 3]).tolist() == pytest.approx(
        [-0.6745, 0.0, 0.0, 0.6745, 1.349])


def _its(rows):
    """ITERATIONS rows (rank, step, interval ms, fp+bp ms, tail ms)."""
    return pd.DataFrame([{"rank": r, "step": s, "iteration_interval_ns": round(i * MS),
                          "fp_bp_ns": round(f * MS), "tail_ns": round(t * MS)}
                         for r, s, i, f, t in rows])


def test_per_rank_means_and_first_step():
    its = _its([(1, 1, 9, 20, 3), (1, 2, 1, 10, 1), (1, 3, 3, 30, 5), (0, 7, 2, 4, 6)])
    got = IT.per_rank(its)
    assert got.columns.tolist() == ["rank", "steps", "iteration_interval_ms", "fp_bp_ms",
                                    "tail_ms", "total_ms"]
    assert got.values.tolist() == [[0, 1, 2.0, 4.0, 6.0, 12.0], [1, 3, 13 / 3, 20.0, 3.0,
                                                                 13 / 3 + 23.0]]
    # skip_first drops a rank's first step only when it has more than one (rank 2: two)
    its = pd.concat([its, _its([(2, 4, 5, 5, 5), (2, 5, 1, 1, 1)])])
    got = IT.per_rank(its, skip_first=True)
    assert got.values.tolist() == [[0, 1, 2.0, 4.0, 6.0, 12.0], [1, 2, 2.0, 20.0, 3.0, 25.0],
                                   [2, 1, 1.0, 1.0, 1.0, 3.0]]
    empty = IT.per_rank(its.iloc[:0])
    assert empty.empty and empty.columns.tolist() == got.columns.tolist()


def _table(interval, fp_bp, tail):
    n = len(interval)
    return pd.DataFrame({"rank": list(range(n)), "steps": [1] * n,
                         "iteration_interval_ms": interval, "fp_bp_ms": fp_bp,
                         "tail_ms": tail})


def test_findings_edges():
    quiet = [10.0, 10.0, 10.0]
    # no table or two ranks say nothing; three do
    assert IT.findings(None) == []
    assert IT.findings(_table([10.0, 99.0], [1.0, 1.0], [1.0, 1.0])) == []
    got = IT.findings(_table([10.0, 10.0, 99.0], quiet, quiet))
    assert [(f["category"], f["ranks"]) for f in got] == [("slow_host", [2])]
    assert got[0]["values_ms"] == {0: 10.0, 1: 10.0, 2: 99.0} and got[0]["median_ms"] == 10.0
    # the first phase clean, the second and third not: every phase is looked at
    got = IT.findings(_table(quiet, [10.0, 30.0, 10.0], [10.0, 10.0, 12.0]))
    assert [(f["category"], f["ranks"]) for f in got] == [("slow_card", [1]), ("long_tail", [2])]
    # exactly 10 % above the median is not "more than" 10 %; just above is
    assert IT.findings(_table([10.0, 10.0, 11.0], quiet, quiet)) == []
    assert IT.findings(_table([10.0, 10.0, 11.0001], quiet, quiet))[0]["ranks"] == [2]
    # a z-score exactly at the threshold is not above it: median 10, MAD 1, z(x) = 0.6745 (x-10)
    at = 10 + 3.5 / 0.6745
    vals = [8.0, 9.0, 10.0, 11.0, at]
    assert IT.robust_z(vals)[-1] == pytest.approx(3.5)
    five = [10.0] * 5
    assert IT.findings(_table(vals, five, five), z_threshold=float(IT.robust_z(vals)[-1])) == []
    assert IT.findings(_table(vals[:4] + [at + 0.01], five, five))[0]["ranks"] == [4]
    # sub-millisecond phases are judged like any other
    assert IT.findings(_table([0.1, 0.1, 0.5], quiet, quiet))[0]["ranks"] == [2]
    # nothing measured: no finding (times must be positive)
    assert IT.findings(_table([0.0, 0.0, 0.0], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0])) == []


def test_analyse_passes_its_thresholds():
    its = _its([(0, 1, 10, 10, 10), (1, 1, 10, 10, 10), (2, 1, 13, 10, 10)])
    assert [f["ranks"] for f in IT.analyse(its)[1]] == [[2]]          # +30 %, z = inf
    assert IT.analyse(its, min_excess=0.5)[1] == []                    # needs +50 %
    its = _its([(r, 1, v, 10, 10) for r, v in enumerate([8, 9, 10, 11, 20])])
    assert [f["ranks"] for f in IT.analyse(its)[1]] == [[4]]          # z = 0.6745 * 10
    assert IT.analyse(its, z_threshold=7.0)[1] == []
