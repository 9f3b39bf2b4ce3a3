"""The sampled mutation score's arithmetic (mutation/report.py, mutation/run.py): the 95 % Wilson
interval against values worked out by hand, and the sample draw is fixed by seed and module."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

MUTATION = Path(__file__).resolve().parents[1] / "mutation"


def _load(name: str):
    spec = importlib.util.spec_from_file_location(f"mutation_{name}", MUTATION / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


report = _load("report")
run = _load("run")


def test_wilson_interval_by_hand():
    z2 = 1.959963984540054 ** 2
    # every mutant killed: the lower end is n / (n + z^2), the upper end 100 %
    lo, hi = report.wilson(60, 60)
    assert lo == pytest.approx(100 * 60 / (60 + z2), abs=1e-9) and hi == pytest.approx(100.0)
    assert lo == pytest.approx(93.98, abs=0.01)
    # none of 10: upper end z^2 / (n + z^2) = 27.75 %
    lo, hi = report.wilson(0, 10)
    assert lo == 0.0 and hi == pytest.approx(100 * z2 / (10 + z2), abs=1e-9)
    # 57 of 60 (p = 0.95): centre (57 + z^2/2) / (60 + z^2), half-width
    # z * sqrt(57 * 3 / 60 + z^2 / 4) / (60 + z^2)
    centre = (57 + z2 / 2) / (60 + z2)
    half = 1.959963984540054 * (57 * 3 / 60 + z2 / 4) ** 0.5 / (60 + z2)
    lo, hi = report.wilson(57, 60)
    assert lo == pytest.approx(100 * (centre - half)) and hi == pytest.approx(100 * (centre + half))
    assert 86.0 < lo < 86.5  # three survivors in 60 still meet an 85 % lower bound
    assert report.wilson(0, 0) == (0.0, 100.0)


def test_sample_is_fixed_by_seed_and_module():
    names = [f"m.x_f__mutmut_{i}" for i in range(1, 301)]
    a = run.draw(names, 60, 33, "db")
    assert len(a) == len(set(a)) == 60 and set(a) <= set(names)
    assert a == run.draw(list(reversed(names)), 60, 33, "db")  # input order does not matter
    assert a != run.draw(names, 60, 34, "db") and a != run.draw(names, 60, 33, "diff")
    # natural order: _mutmut_9 before _mutmut_10
    nums = [int(n.rsplit("_", 1)[1]) for n in a]
    assert nums == sorted(nums)
    assert run.draw(names[:50], 60, 33, "db") == names[:50]  # fewer than the sample: all
    assert run.draw(names, None, 33, "db") == names  # --full
