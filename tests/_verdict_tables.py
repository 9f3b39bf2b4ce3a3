"""Test-side loading of the Qwen3 fixture into the normalised tables the verdicts use.

Written independently of ascendprof's readers (plain csv/json, spec §A.1, §A.5, §A.6), so the
verdict logic can be tested on real numbers without depending on the reader code.
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa

from ascendprof.analyze.verdicts.opsplit import OpInstances, text_codes
from ascendprof.model import schemas as S
from ascendprof.model.problems import Problems


def rank_dirs(root: Path) -> dict[int, Path]:
    return {int(p.name.split("_")[1]): p for p in sorted(Path(root).glob("rank_*_ascend_pt"))}


def step_rows(root: Path) -> list[dict]:
    rows = []
    for rank, d in rank_dirs(root).items():
        with open(d / "ASCEND_PROFILER_OUTPUT" / "step_trace_time.csv", newline="") as f:
            for r in csv.DictReader(f):
                rows.append({
                    "rank": rank, "step": int(r["Step"]), "device_id": int(r["Device_id"]),
                    "computing_ns": round(float(r["Computing"]) * 1000),
                    "comm_not_overlapped_ns":
                        round(float(r["Communication(Not Overlapped)"]) * 1000),
                    "overlapped_ns": round(float(r["Overlapped"]) * 1000),
                    "communication_ns": round(float(r["Communication"]) * 1000),
                    "free_ns": round(float(r["Free"]) * 1000),
                    "stage_ns": round(float(r["Stage"]) * 1000),
                    "bubble_ns": round(float(r["Bubble"]) * 1000),
                    "preparing_ns": round(float(r["Preparing"]) * 1000)})
    return rows


def comm_json(root: Path) -> dict[int, dict]:
    return {rank: json.loads((d / "ASCEND_PROFILER_OUTPUT" / "communication.json").read_text())
            for rank, d in rank_dirs(root).items()}


def matrix_json(root: Path) -> dict[int, dict]:
    return {rank: json.loads((d / "ASCEND_PROFILER_OUTPUT" / "communication_matrix.json")
                             .read_text()) for rank, d in rank_dirs(root).items()}


def metadata(root: Path) -> dict[int, dict]:
    return {rank: json.loads((d / "profiler_metadata.json").read_text())
            for rank, d in rank_dirs(root).items()}


def _tab(name: str, rows: list[dict]) -> pa.Table:
    schema = S.SCHEMAS[name]
    return pa.Table.from_pylist(rows, schema=schema) if rows else schema.empty_table()


def tables(root: Path) -> dict[str, pa.Table]:
    ops, bws, links = [], [], []
    for rank, d in comm_json(root).items():
        for step_key, kinds in d.items():
            step = int(step_key[4:]) if step_key[4:].isdigit() else None
            for kind, entries in kinds.items():
                for key, info in entries.items():
                    if key.startswith("Total"):
                        continue
                    op, group = key.split("@")
                    t = info["Communication Time Info"]
                    ops.append({"rank": rank, "step": step, "step_key": step_key, "kind": kind,
                                "op_name": op, "group": group,
                                "elapse_ns": round(t["Elapse Time(ms)"] * 1e6),
                                "transit_ns": round(t["Transit Time(ms)"] * 1e6),
                                "wait_ns": round(t["Wait Time(ms)"] * 1e6),
                                "sync_ns": round(t["Synchronization Time(ms)"] * 1e6),
                                "idle_ns": round(t["Idle Time(ms)"] * 1e6),
                                "wait_ratio": t["Wait Time Ratio"],
                                "sync_ratio": t["Synchronization Time Ratio"]})
                    for tr, b in info["Communication Bandwidth Info"].items():
                        bws.append({"rank": rank, "step": step, "step_key": step_key,
                                    "kind": kind, "op_name": op, "group": group, "transport": tr,
                                    "size_mb": b["Transit Size(MB)"],
                                    "transit_ns": round(b["Transit Time(ms)"] * 1e6),
                                    "bandwidth_gbps": b["Bandwidth(GB/s)"]})
    for rank, d in matrix_json(root).items():
        for step_key, kinds in d.items():
            step = int(step_key[4:]) if step_key[4:].isdigit() else None
            for kind, entries in kinds.items():
                for key, lks in entries.items():
                    group = key.split("@")[-1]
                    for sd, l in lks.items():
                        s, t = sd.split("-")
                        links.append({"rank": rank, "step": step, "step_key": step_key,
                                      "kind": kind, "link_key": key, "op_name": l.get("Op Name"),
                                      "group": group, "src_rank": int(s), "dst_rank": int(t),
                                      "transport": l["Transport Type"],
                                      "size_mb": l["Transit Size(MB)"],
                                      "transit_ns": round(l["Transit Time(ms)"] * 1e6),
                                      "bandwidth_gbps": l["Bandwidth(GB/s)"]})
    return {S.STEP_TRACE: _tab(S.STEP_TRACE, step_rows(root)), S.COMM_OPS: _tab(S.COMM_OPS, ops),
            S.COMM_BANDWIDTH: _tab(S.COMM_BANDWIDTH, bws), S.COMM_LINKS: _tab(S.COMM_LINKS, links)}


@dataclass
class FakeCluster:
    """The attributes of pipeline.ClusterAnalysis that verdicts.derive reads."""

    tabs: dict
    metadata: dict
    breakdown: pa.Table | None = None
    op_statistics: object = None
    problems: Problems = field(default_factory=Problems)

    @property
    def step_trace(self):
        return self.tabs.get(S.STEP_TRACE)

    def concat(self, name):
        return self.tabs.get(name)


def fake_cluster(root: Path) -> FakeCluster:
    return FakeCluster(tables(root), metadata(root))


def split_op_time(rows, sizes: dict | None = None) -> pd.DataFrame:
    """The op-time split of all ``rows`` (verdicts.op_rows of every rank, concatenated) at once:
    one row per op instance and rank with the columns of OpInstances.split, ``rank`` int32 and
    ``step_key``, ``kind``, ``group``, ``op`` as Categoricals. (op_totals runs the same two
    passes over batches of ranks and keeps only the sums the verdicts need.)"""
    if rows is None or rows.num_rows == 0:
        return pd.DataFrame()
    inst = OpInstances()
    cols = inst.split(rows, inst.add(rows), sizes)
    cats = {c: pd.Categorical.from_codes(*text_codes(rows.column(c)), validate=False)
            for c in ("step_key", "kind", "op", "group")}
    out = {"rank": cols.pop("rank").astype(np.int32), "step_key": cats["step_key"],
           "kind": cats["kind"], "group": cats["group"], "op": cats["op"]}
    out.update(cols)
    return pd.DataFrame(out, copy=False)
