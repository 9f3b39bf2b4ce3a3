"""Shared test locations. Real data comes from fixtures/ (shipped) or ../shared/data (beside the
checkout in development and CI); tests that need the latter skip with a reason when it is absent."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "fixtures"
QWEN3 = FIXTURES / "qwen3-4rank-pp2dp2"


def _shared() -> Path | None:
    env = os.environ.get("ASCENDPROF_SHARED_DATA")
    for cand in ([Path(env)] if env else []) + [ROOT.parent / "shared" / "data",
                                                 ROOT.parent.parent / "shared" / "data"]:
        if cand.is_dir():
            return cand
    return None


SHARED = _shared()


@pytest.fixture
def shared_data() -> Path:
    if SHARED is None:
        pytest.skip("../shared/data not present (set ASCENDPROF_SHARED_DATA)")
    return SHARED


@pytest.fixture
def qwen3() -> Path:
    return QWEN3
