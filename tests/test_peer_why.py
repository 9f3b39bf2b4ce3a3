"""Idle time and late ranks side by side with msprof-analyze 26.2.0's `cluster -m
free_analysis` and `-m communication_bottleneck` on the shared 2-rank Level2 db export (their
outputs kept in tests/reference/torch_npu-2rank-db-level2/, see its README).

free_analysis lists the 10 longest free intervals per rank with a host-side reason; each must be
one of our idle gaps (same start and end within 1 us) and, being a wait for the host, one we give
to host launch. communication_bottleneck names the slow rank of each op; ours names the same
rank late."""

from __future__ import annotations

import csv
from decimal import Decimal
from pathlib import Path

import pytest

import ascendprof
from ascendprof.analyze import idle
from ascendprof.analyze import intervals as iv
from ascendprof.engine.pipeline import read_rank
from ascendprof.model import schemas as S
from ascendprof.model.options import ReadOptions
from conftest import SHARED, SHARED_MISSING

REF = Path(__file__).parent / "reference" / "torch_npu-2rank-db-level2"
pytestmark = pytest.mark.skipif(SHARED is None, reason=SHARED_MISSING)


def _root():
    return SHARED / "torch_npu-2rank-levels" / "db" / "level2"


def _csv(name):
    with open(REF / name, newline="") as f:
        return list(csv.DictReader(f))


def _ns(us_text) -> int:
    return int(Decimal(us_text) * 1000)


def test_free_analysis_intervals_are_our_host_launch_gaps():
    peer = _csv("free_analysis.csv")
    c = ascendprof.open(_root())
    for rank in (0, 1):
        data, _ = read_rank(c.source(rank), ReadOptions())
        t = data.tables
        busy = idle.busy_intervals(t)
        (_, lo, hi), = idle.step_windows(t)
        gaps = iv.difference(iv.make([lo], [hi]), iv.clip(busy, lo, hi))
        sync, loader, _ = idle._host_sets(t)
        la = t[S.LAUNCHES].sort_by("device_start_ns")
        launches = (la["device_start_ns"].to_numpy(), la["host_start_ns"].to_numpy())
        mine = [r for r in peer if r["Rank ID"] == str(rank)]
        assert len(mine) == 10
        for r in mine:
            s, e = _ns(r["Start Time(us)"]), _ns(r["End Time(us)"])
            hit = [(a, b) for a, b in zip(gaps[0].tolist(), gaps[1].tolist())
                   if abs(a - s) <= 1000 and abs(b - e) <= 1000]
            assert len(hit) == 1, r
            got = idle.classify(*hit[0], sync, loader, launches)
            assert max(got, key=got.get) == "host_launch", (r, got)


def test_communication_bottleneck_slow_rank_is_our_late_rank():
    peer = [r for r in _csv("communication_bottleneck.csv") if r["Slow Rank ID"]]
    # the tool finds one slow rank: rank 0 in hcom_allReduce__865_0_1, "[Host-bound]"
    assert [(r["Communication Op"], float(r["Slow Rank ID"])) for r in peer] == [
        ("hcom_allReduce__865_0_1", 0.0)]
    late = ascendprof.open(_root()).analysis().csv_files["late_arrivals.csv"]
    ours = late[late["Op Name"] == "hcom_allReduce__865_0_1"]
    assert set(ours["Late Rank"]) == {0} and set(ours["Early Rank"]) == {1}
    # host-bound: what rank 0 did longer is device idle (waiting for the host), first
    assert ours.iloc[0]["Item Kind"] == "idle"
