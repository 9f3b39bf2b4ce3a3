"""The analyses' cluster files: comm_hardware (the largest transient tables) is built first, yet
the files and the problems of failed analyses come in the registry's order, as when each ran in
turn; the engine's ``between`` runs after each analysis."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import pandas as pd

from ascendprof.analyze import registry
from ascendprof.model.problems import Problems


def test_cluster_files_in_registry_order_whatever_runs_first(monkeypatch):
    ran = []

    def files(name, fail=False):
        def build(ca, lines):
            ran.append(name)
            if fail:
                raise ValueError(f"broken {name}")
            return {f"{name}.csv": pd.DataFrame({"x": [1]})}
        return build

    fails = {"memory", "comm_hardware"}
    monkeypatch.setattr(registry, "ANALYSES", tuple(
        dataclasses.replace(a, cluster_files=files(a.name, a.name in fails))
        for a in registry.ANALYSES))
    names = [a.name for a in registry.ANALYSES]
    assert names.index("comm_hardware") > names.index("memory")  # registered after
    calls = []
    ca = SimpleNamespace(metadata={}, communication_group=None, problems=Problems())
    out = registry.cluster_files(ca, between=lambda: calls.append(len(ran)))
    assert ran == ["comm_hardware"] + [n for n in names if n != "comm_hardware"]
    assert calls == list(range(1, len(names) + 1))
    assert list(out) == [f"{n}.csv" for n in names if n not in fails]
    texts = [p.reason for p in ca.problems]
    assert texts == [f"{n} analysis failed (ValueError: broken {n}); please report this"
                     for n in names if n in fails]
