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


def load_make_cluster():
    """benchmarks/make_cluster.py as a module (it is a script, not part of the package)."""
    import importlib.util
    import sys

    if "make_cluster" in sys.modules:
        return sys.modules["make_cluster"]
    spec = importlib.util.spec_from_file_location("make_cluster",
                                                  ROOT / "benchmarks" / "make_cluster.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["make_cluster"] = mod  # dataclasses look their module up here
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="session")
def generated_cluster(tmp_path_factory):
    """``make(n, *args)`` -> an n-rank cluster cloned from the real ranks by make_cluster.py
    (built once per argument set); skips when ../shared/data is absent."""
    built = {}

    def make(n: int, *args: str) -> Path:
        key = (n, *args)
        if key not in built:
            mc = load_make_cluster()
            try:
                mc.shared_data_dir()
            except SystemExit:
                pytest.skip("shared data not present")
            out = tmp_path_factory.mktemp("generated") / f"c{n}"
            mc.main([str(n), str(out), *args])
            built[key] = out
        return built[key]

    return make
