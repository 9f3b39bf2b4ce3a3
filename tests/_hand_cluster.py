"""Small hand-built clusters for the verdict tests (tests/test_verdict_*_by_hand.py).

A cluster is described by its per-step values (ms), its parallel groups (profiler_metadata.json
``parallel_group_info``), its communication ops (elapse and transit per rank, ms) and its
links; :func:`cluster` turns that into the tables :func:`ascendprof.analyze.verdicts.derive`
reads (a :class:`_verdict_tables.FakeCluster`). Every number a test expects is worked out by
hand from these inputs, in the test's comments.
"""

from __future__ import annotations

import pyarrow as pa

from ascendprof.analyze import verdicts as V
from ascendprof.analyze.cluster_communication import double_hash
from ascendprof.model import schemas as S

from _verdict_tables import FakeCluster

MS = 1_000_000


def gid(key: str) -> str:
    """The group id the COMM tables write for parallel_group_info key ``key``."""
    return str(double_hash(key))


def _tab(name, rows):
    schema = S.SCHEMAS[name]
    return pa.Table.from_pylist(rows, schema=schema) if rows else schema.empty_table()


def cluster(steps: dict, groups: dict | None = None, ops: list | None = None,
            links: list | None = None, world_size: int | None = None,
            iterations: list | None = None, n_steps: int = 2) -> FakeCluster:
    """``steps``: {rank: (computing, comm not overlapped, free) ms, the same in every one of
    ``n_steps`` steps, or a list of such triples, one per step};
    ``groups``: {key: (group name, [global ranks])}, written into every rank's metadata;
    ``ops``: [(op name, group key, kind, {rank: (elapse ms, transit ms[, Wait Time ms])})], each
    op once in every step (step keys "step1" …);
    ``links``: [(group key, src local, dst local, transport, size MB, transit ms, reported by)],
    each once per step (communication_matrix.json entries, link key "<op>-total@<group>")."""
    rows = []
    for r, v in steps.items():
        per = v if isinstance(v, list) else [v] * n_steps
        for i, (c, n, fr) in enumerate(per, start=1):
            rows.append({"rank": r, "step": i, "computing_ns": round(c * MS),
                         "comm_not_overlapped_ns": round(n * MS), "overlapped_ns": 0,
                         "communication_ns": round(n * MS), "free_ns": round(fr * MS),
                         "stage_ns": round((c + n + fr) * MS), "bubble_ns": 0,
                         "preparing_ns": 0})
    n_st = max(len(v) if isinstance(v, list) else n_steps for v in steps.values())
    op_rows = []
    for name, key, kind, per_rank in ops or []:
        for i in range(1, n_st + 1):
            for r, (el, tr, *wait) in per_rank.items():
                op_rows.append({"rank": r, "step": i, "step_key": f"step{i}", "kind": kind,
                                "op_name": f"{name}@{gid(key)}", "group": gid(key),
                                "elapse_ns": round(el * MS), "transit_ns": round(tr * MS),
                                "wait_ns": round((wait or [0])[0] * MS), "sync_ns": 0,
                                "idle_ns": 0})
    link_rows = []
    for key, s, d, tr, size, t_ms, by in links or []:
        for i in range(1, n_st + 1):
            link_rows.append({"rank": by, "step": i, "step_key": f"step{i}",
                              "kind": "collective", "link_key": f"allreduce-total@{gid(key)}",
                              "op_name": "allreduce", "group": gid(key), "src_rank": s,
                              "dst_rank": d, "transport": tr, "size_mb": size,
                              "transit_ns": round(t_ms * MS),
                              "bandwidth_gbps": size / t_ms if t_ms else None})
    pgi = {key: {"group_name": name, "global_ranks": list(ranks)}
           for key, (name, ranks) in (groups or {}).items()}
    meta = {}
    for r in steps:
        m = {"parallel_group_info": pgi} if pgi else {}
        if world_size:
            m["distributed_args"] = {"world_size": world_size}
        meta[r] = m
    tabs = {S.STEP_TRACE: _tab(S.STEP_TRACE, rows), S.COMM_OPS: _tab(S.COMM_OPS, op_rows),
            S.COMM_LINKS: _tab(S.COMM_LINKS, link_rows)}
    if iterations is not None:
        tabs[S.ITERATIONS] = _tab(S.ITERATIONS, iterations)
    return FakeCluster(tabs, meta)


def derive(ca, **overrides) -> list[dict]:
    return V.derive(ca, V.thresholds(overrides or None))


def by_id(out: list[dict]) -> dict[str, dict]:
    return {v["id"]: v for v in out}
