#!/usr/bin/env python3
"""Build an N-rank torch_npu text cluster by cloning real ranks, for benchmarks and scale tests.

    python benchmarks/make_cluster.py N OUT [--template qwen3] [--kernels-per-rank K]
                                            [--comm-ops-per-rank C] [--tp T --pp P] [--seed S]

Every generated rank ``OUT/rank_<r>_ascend_pt`` is cloned from a real rank in the shared data
(``qwen3-4rank-pp2dp2`` by default, also shipped in fixtures/ and read from there when the shared
data is absent; or the ``torch_npu-2rank-levels`` text level 1/2 ranks, which also have
trace_view.json). What changes, and how:

* Layout: ranks are laid out TP x PP x DP in Megatron order (rank = stage*TP*DP + dp*TP + tp).
  Each rank's profiler_metadata.json gets ``distributed_args`` and a ``parallel_group_info`` with
  the groups default_group, tp, dp, dp_cp, pp, mp (TP x PP) and embd (first and last stage). Keys
  are ``group_name_<i>``; the HCCL group name used in communication*.json is the profiler's
  double hash of that key (two 32-bit polynomial hashes, primes 29 and 131), which is how
  torch_npu relates the two (so msprof-analyze's communication_group.json maps them to names).
* Communication: each template op is re-homed to the generated group playing the same role
  (found from the template's own parallel_group_info; a group with no entry counts as dp), op
  names get the new group's 3-digit suffix, and the op list is repeated ``copies`` times with
  new op indices to reach ``--comm-ops-per-rank``. Matrix link keys (group-local ``src-dst``)
  keep their offset from the rank's own group rank; with ``--matrix mesh`` each rank instead
  lists, for every op of its communication_matrix.json, its link to every member of the group
  (``me-0`` .. ``me-(n-1)``, its own self-link included), as all-to-all and mesh algorithms
  record them and as msprof-analyze's own test resources are laid out: the matrix then grows
  with the square of the group size.
* Time: one generated step is the template step repeated R times back to back (R = the largest
  repetition count of any file), so step_trace_time.csv values are x R. A file repeated n < R
  times is stretched by R/n, so the durations in every file still add up to the same step
  breakdown. Per rank, all durations are scaled by a factor f (0.95-1.05; a few seeded "slow"
  ranks 1.2-1.3) and all timestamps shifted by a clock skew of up to +-200 us. Bandwidths are
  recomputed from size / time, 'Total Op Info' from the generated ops.
* Ranks 1 and 3 of the Qwen3 sample have no kernel_details.csv; their clones use the
  kernel_details.csv of the rank of the same pipeline stage (0 or 2) with Device_id replaced.

Only profiler_info_<r>.json, profiler_metadata.json and ASCEND_PROFILER_OUTPUT/{step_trace_time.csv,
communication.json, communication_matrix.json, kernel_details.csv, trace_view.json (when the
template has one)} are written. Output is deterministic for a given seed and arguments, and
nothing is written outside OUT. ``OUT/make_cluster.json`` records the arguments and layout.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import math
import os
import random
import re
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path

import orjson

from ascendprof.analyze.cluster_communication import double_hash  # the profiler's group id

HERE = Path(__file__).resolve().parent
TEMPLATES = {
    "qwen3": ("qwen3-4rank-pp2dp2", ["rank_0_ascend_pt", "rank_1_ascend_pt", "rank_2_ascend_pt",
                                     "rank_3_ascend_pt"]),
    "torch_npu-level1": ("torch_npu-2rank-levels/text/level1", ["rank0_ascend_pt", "rank1_ascend_pt"]),
    "torch_npu-level2": ("torch_npu-2rank-levels/text/level2", ["rank0_ascend_pt", "rank1_ascend_pt"]),
}
OUT_SUB = "ASCEND_PROFILER_OUTPUT"
ROLES = ("default_group", "tp", "dp", "dp_cp", "pp", "mp", "embd")
#: trace_view bytes per kernel row at LLM size (~300 MB for 200k kernels)
TRACE_BYTES_PER_KERNEL = 1536
MANIFEST = "make_cluster.json"
FLOW_ID_BASE = 10**13  # copies of flow events get ids from here on
_OP_RE = re.compile(r"^(?P<head>.+?)__(?P<suffix>\d+)_(?P<idx>\d+)_(?P<tail>\d+)$")
_TS_RE = re.compile(r"^\s*(-?\d+)(?:\.(\d*))?(\s*)$")


def shared_data_dir(template: str = "qwen3") -> Path:
    """The directory holding ``template``'s real ranks: the shared data (ASCENDPROF_SHARED_DATA
    when set, else ../shared/data), else the repository's fixtures/, which ship the Qwen3 ranks
    unchanged. Exits with a message when neither has them."""
    env = os.environ.get("ASCENDPROF_SHARED_DATA")
    cands = [Path(env)] if env else [HERE.parent.parent / "shared" / "data",
                                     Path("/work/shared/data")]
    for cand in cands + [HERE.parent / "fixtures"]:
        if (cand / TEMPLATES[template][0]).is_dir():
            return cand
    raise SystemExit(f"make_cluster: the {template} ranks are in neither the shared data nor "
                     f"fixtures/ (set ASCENDPROF_SHARED_DATA)")


# ---------------------------------------------------------------- time arithmetic (int ns)

def us_text_to_ns(text) -> tuple[int, str]:
    """'1764246877073569.640\\t' -> (1764246877073569640, '\\t'): exact, keeps trailing junk."""
    if isinstance(text, (int, float)):
        return round(float(text) * 1000), ""
    m = _TS_RE.match(text)
    if not m:
        raise ValueError(f"not a timestamp: {text!r}")
    frac = (m.group(2) or "")[:3].ljust(3, "0")
    whole = int(m.group(1))
    ns = abs(whole) * 1000 + int(frac)
    return (-ns if text.strip().startswith("-") else ns), m.group(3)


def ns_to_us_text(ns: int) -> str:
    sign = "-" if ns < 0 else ""
    ns = abs(ns)
    return f"{sign}{ns // 1000}.{ns % 1000:03d}"


@dataclass
class Clock:
    """Maps template time to generated time for one rank and one file family.

    t' = anchor + ((t - anchor) + copy * period) * stretch * factor + skew   (all ns)
    """

    anchor: int
    period: int
    stretch: float
    factor: float
    skew: int

    def ts(self, t_ns: int, copy: int = 0) -> int:
        return self.anchor + round(((t_ns - self.anchor) + copy * self.period)
                                   * self.stretch * self.factor) + self.skew

    def dur(self, d: float) -> float:
        """Scale a duration in any unit."""
        return d * self.stretch * self.factor


# ---------------------------------------------------------------- layout

@dataclass
class Layout:
    n: int
    tp: int
    pp: int
    dp: int
    groups: dict = field(default_factory=dict)      # key -> (role, [ranks])
    member: dict = field(default_factory=dict)      # (rank, role) -> key

    def coords(self, r: int) -> tuple[int, int, int]:
        """(stage, dp index, tp index) of rank r."""
        return r // (self.tp * self.dp), (r // self.tp) % self.dp, r % self.tp


def default_parallel(n: int, template: str) -> tuple[int, int]:
    if template.startswith("torch_npu") or n < 4:
        return 1, 1
    pp = 2
    tp = 1
    while tp * 2 <= 8 and n % (tp * 2 * pp * 2) == 0:
        tp *= 2
    return tp, pp


def make_layout(n: int, tp: int, pp: int) -> Layout:
    if n % (tp * pp):
        raise SystemExit(f"make_cluster: {n} ranks is not a multiple of TP {tp} x PP {pp}")
    lay = Layout(n=n, tp=tp, pp=pp, dp=n // (tp * pp))
    by_role: dict[str, dict[tuple, list[int]]] = {r: {} for r in ROLES}
    for r in range(n):
        s, d, t = lay.coords(r)
        by_role["default_group"].setdefault((), []).append(r)
        by_role["tp"].setdefault((s, d), []).append(r)
        by_role["dp"].setdefault((s, t), []).append(r)
        by_role["dp_cp"].setdefault((s, t), []).append(r)
        by_role["pp"].setdefault((d, t), []).append(r)
        by_role["mp"].setdefault((d,), []).append(r)
        if s in (0, pp - 1):
            by_role["embd"].setdefault((d, t), []).append(r)
    i = 0
    for role in ROLES:
        for _, ranks in sorted(by_role[role].items(), key=lambda kv: kv[1][0]):
            key = f"group_name_{i}"
            i += 1
            lay.groups[key] = (role, ranks)
            for r in ranks:
                lay.member[(r, role)] = key
    return lay


def parallel_group_info(lay: Layout, r: int) -> dict:
    out = {}
    for role in ROLES:
        key = lay.member.get((r, role))
        if key:
            ranks = lay.groups[key][1]
            out[key] = {"group_name": role, "group_rank": ranks.index(r), "global_ranks": ranks}
    return out


# ---------------------------------------------------------------- template

@dataclass
class TemplateRank:
    name: str
    path: Path
    rank: int
    info: dict
    metadata: dict
    step_trace: list[list[str]]
    comm: dict
    matrix: dict
    kernels_path: Path
    trace_path: Path | None
    role_of: dict           # template group hash (str) -> (role, group size, my group rank)
    suffix_group: dict = field(default_factory=dict)  # op-name suffix ('128') -> group hash


def load_template(data: Path, template: str) -> list[TemplateRank]:
    sub, names = TEMPLATES[template]
    base = data / sub
    ranks = []
    for i, name in enumerate(names):
        d = base / name
        info_file = next(d.glob("profiler_info*.json"))
        meta_file = d / "profiler_metadata.json"
        out = d / OUT_SUB
        with open(out / "step_trace_time.csv", newline="", encoding="utf-8-sig") as f:
            st = list(csv.reader(f))
        meta = json.loads(meta_file.read_text()) if meta_file.is_file() else {}
        role_of = {}
        for key, g in (meta.get("parallel_group_info") or {}).items():
            role_of[str(double_hash(key))] = (g.get("group_name", "dp"), len(g.get("global_ranks", [])),
                                              g.get("group_rank", 0))
        kernels = out / "kernel_details.csv"
        ranks.append(TemplateRank(
            name=name, path=d, rank=i, info=json.loads(info_file.read_text()), metadata=meta,
            step_trace=st, comm=json.loads((out / "communication.json").read_text()),
            matrix=json.loads((out / "communication_matrix.json").read_text()),
            kernels_path=kernels, trace_path=(out / "trace_view.json")
            if (out / "trace_view.json").is_file() else None, role_of=role_of))
    for t in ranks:
        for step in t.comm.values():
            for _, op, _ in _ops(step):
                name, _, grp = op.rpartition("@")
                m = _OP_RE.match(name)
                if m:
                    t.suffix_group[m.group("suffix")] = grp
    # ranks without kernel_details borrow the same pipeline stage's (Qwen3: 1 <- 0, 3 <- 2)
    for t in ranks:
        if not t.kernels_path.is_file():
            donor = ranks[t.rank - 1] if t.rank % 2 else None
            if donor is None or not donor.kernels_path.is_file():
                raise SystemExit(f"make_cluster: no kernel_details.csv for {t.path}")
            t.kernels_path = donor.kernels_path
    return ranks


def template_for(lay: Layout, r: int, tmpl: list[TemplateRank]) -> TemplateRank:
    s, d, _ = lay.coords(r)
    if len(tmpl) == 4:  # Qwen3: rank = stage*2 + dp
        ts = 0 if (lay.pp == 1 or s < lay.pp / 2) else 1
        return tmpl[ts * 2 + d % 2]
    return tmpl[r % len(tmpl)]


def _ops(comm_step: dict):
    for kind in ("p2p", "collective"):
        for op, v in (comm_step.get(kind) or {}).items():
            if not op.startswith("Total"):
                yield kind, op, v


def op_strides(tmpl: list[TemplateRank]) -> dict[str, int]:
    """Template group hash -> 1 + largest op index seen on any template rank."""
    out: dict[str, int] = {}
    for t in tmpl:
        for step in t.comm.values():
            for _, op, _ in _ops(step):
                name, _, grp = op.rpartition("@")
                m = _OP_RE.match(name)
                if m:
                    out[grp] = max(out.get(grp, 1), int(m.group("idx")) + 1)
    return out


def time_span(t: TemplateRank, kernel_rows) -> tuple[int, int]:
    """(first start, last end) in ns over the rank's kernels and communication ops."""
    lo, hi = None, None
    for row in kernel_rows:
        s, _ = us_text_to_ns(row[0])
        e = s + round(float(row[1]) * 1000)
        lo = s if lo is None else min(lo, s)
        hi = e if hi is None else max(hi, e)
    for step in t.comm.values():
        for _, _, v in _ops(step):
            ti = v["Communication Time Info"]
            s = round(ti["Start Timestamp(us)"] * 1000)
            e = s + round(ti["Elapse Time(ms)"] * 1e6)
            lo = s if lo is None else min(lo, s)
            hi = e if hi is None else max(hi, e)
    return lo or 0, hi or 0


# ---------------------------------------------------------------- writers

def _r(x: float, nd: int = 6) -> float:
    return float(round(x, nd))


def new_op_name(name: str, new_group: int, copy: int, stride: int) -> str:
    m = _OP_RE.match(name)
    if not m:
        return f"{name}_{copy}" if copy else name
    return (f"{m.group('head')}__{new_group % 1000:03d}_{int(m.group('idx')) + copy * stride}"
            f"_{m.group('tail')}")


def _bw_info(bw: dict, clock: Clock, mult: int = 1) -> dict:
    out = {}
    for transport, b in bw.items():
        nb = dict(b)
        size = b.get("Transit Size(MB)", 0) * mult
        time_ms = clock.dur(b.get("Transit Time(ms)", 0) * mult)
        nb["Transit Size(MB)"] = _r(size)
        nb["Transit Time(ms)"] = _r(time_ms)
        if "Bandwidth(GB/s)" in b:
            nb["Bandwidth(GB/s)"] = _r(size / time_ms, 4) if time_ms > 0 else 0
        if "Size Distribution" in b:
            nb["Size Distribution"] = {k: [c * mult, _r(clock.dur(d) * mult)]
                                       for k, (c, d) in b["Size Distribution"].items()}
        out[transport] = nb
    return out


class _TotalOpInfo:
    """The 'Total Op Info' of one step and kind, summed op by op as they are written (so a
    file of 10^6 ops is never held whole)."""

    KEYS = ("Elapse Time(ms)", "Transit Time(ms)", "Wait Time(ms)", "Synchronization Time(ms)",
            "Idle Time(ms)")

    def __init__(self):
        self.n = 0
        self.ti = {k: 0.0 for k in self.KEYS}
        self.bw: dict[str, dict] = {}

    def add(self, o: dict) -> None:
        self.n += 1
        t = o["Communication Time Info"]
        for k in self.KEYS:
            self.ti[k] += t.get(k, 0)
        for transport, b in o["Communication Bandwidth Info"].items():
            acc = self.bw.setdefault(transport, {"Transit Time(ms)": 0.0, "Transit Size(MB)": 0.0,
                                                 "Size Distribution": {}})
            acc["Transit Time(ms)"] += b.get("Transit Time(ms)", 0)
            acc["Transit Size(MB)"] += b.get("Transit Size(MB)", 0)
            for k, (c, d) in (b.get("Size Distribution") or {}).items():
                cur = acc["Size Distribution"].setdefault(k, [0, 0.0])
                cur[0] += c
                cur[1] = _r(cur[1] + d)

    def result(self) -> dict:
        ti = {k: _r(v) for k, v in self.ti.items()}
        tr, wt, sy = ti["Transit Time(ms)"], ti["Wait Time(ms)"], ti["Synchronization Time(ms)"]
        ti["Wait Time Ratio"] = round(wt / (wt + tr), 4) if wt + tr else 0
        ti["Synchronization Time Ratio"] = round(sy / (sy + tr), 4) if sy + tr else 0
        bw = {}
        for transport, acc in self.bw.items():
            bw[transport] = dict(acc, **{"Transit Time(ms)": _r(acc["Transit Time(ms)"]),
                                         "Transit Size(MB)": _r(acc["Transit Size(MB)"])})
        return {"Communication Time Info": ti, "Communication Bandwidth Info": bw}


def _total_op_info(ops: list[dict]) -> dict:
    acc = _TotalOpInfo()
    for o in ops:
        acc.add(o)
    return acc.result()


class RankWriter:
    """Writes one generated rank from its template."""

    def __init__(self, lay: Layout, r: int, t: TemplateRank, plan: dict, rng: random.Random,
                 strides: dict, slow: bool):
        self.lay, self.r, self.t, self.plan, self.strides = lay, r, t, plan, strides
        self.factor = rng.uniform(0.95, 1.05) * (rng.uniform(1.2, 1.3) if slow else 1.0)
        self.skew = round(rng.uniform(-200_000, 200_000))
        self.device_id = r % 8

    def clock(self, copies: int) -> Clock:
        return Clock(anchor=self.plan["anchor"], period=self.plan["period"],
                     stretch=self.plan["R"] / copies, factor=self.factor, skew=self.skew)

    # group re-homing
    def target_group(self, grp: str) -> tuple[str, int, int, int] | None:
        """template group hash -> (new hash str, my new group rank, new size, template group rank)."""
        role, _, trank = self.t.role_of.get(grp, ("dp", 2, self.t.rank % 2))
        if role not in ROLES:
            role = "dp"
        key = self.lay.member.get((self.r, role))
        if key is None:
            return None  # e.g. embd on a middle pipeline stage
        ranks = self.lay.groups[key][1]
        return str(double_hash(key)), ranks.index(self.r), len(ranks), trank

    def write(self, out: Path) -> None:
        d = out / f"rank_{self.r}_ascend_pt"
        o = d / OUT_SUB
        o.mkdir(parents=True, exist_ok=True)
        info = dict(self.t.info)
        if "rank_id" in info:
            info["rank_id"] = str(self.r) if isinstance(info["rank_id"], str) else self.r
        (d / f"profiler_info_{self.r}.json").write_bytes(
            orjson.dumps(info, option=orjson.OPT_INDENT_2))
        meta = {k: v for k, v in self.t.metadata.items()
                if k not in ("distributed_args", "parallel_group_info")}
        meta["distributed_args"] = {
            "tensor_model_parallel_size": self.lay.tp, "pipeline_model_parallel_size": self.lay.pp,
            "data_parallel_size": self.lay.dp, "context_parallel_size": 1,
            "expert_model_parallel_size": 1, "sequence_parallel": False, "rank": self.r,
            "world_size": self.lay.n}
        meta["parallel_group_info"] = parallel_group_info(self.lay, self.r)
        (d / "profiler_metadata.json").write_bytes(orjson.dumps(meta))
        self.write_step_trace(o / "step_trace_time.csv")
        self.write_comm(o / "communication.json", o / "communication_matrix.json")
        self.write_kernels(o / "kernel_details.csv")
        if self.t.trace_path is not None:
            self.write_trace(o / "trace_view.json")

    def write_step_trace(self, path: Path) -> None:
        head, *rows = self.t.step_trace
        scale = self.plan["R"] * self.factor
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(head)
        for row in rows:
            new = []
            for h, v in zip(head, row):
                if h == "Device_id":
                    new.append(str(self.device_id))
                elif h == "Step":
                    new.append(v)
                else:
                    try:
                        new.append(repr(_r(float(v) * scale, 3)))
                    except ValueError:
                        new.append(v)
            w.writerow(new)
        path.write_text(buf.getvalue(), encoding="utf-8")

    def write_comm(self, comm_path: Path, matrix_path: Path) -> None:
        # written op by op (orjson's compact layout, the same bytes as dumping the whole
        # object): a file of 10^6 ops (~1 GB) is never held in memory
        copies = self.plan["comm_copies"]
        clock = self.clock(copies)
        dumps = orjson.dumps
        with open(comm_path, "wb") as f:
            f.write(b"{")
            for si, (step, body) in enumerate(self.t.comm.items()):
                f.write((b"," if si else b"") + dumps(step) + b":{")
                for ki, kind in enumerate(("p2p", "collective")):
                    f.write((b"," if ki else b"") + dumps(kind) + b":{")
                    total, buf = _TotalOpInfo(), []
                    for k in range(copies):
                        for kind_, op, v in _ops({kind: body.get(kind) or {}}):
                            name, _, grp = op.rpartition("@")
                            tg = self.target_group(grp)
                            if tg is None:
                                continue
                            new_name = new_op_name(name, int(tg[0]), k, self.strides.get(grp, 1))
                            ti = dict(v["Communication Time Info"])
                            start_ns = round(ti["Start Timestamp(us)"] * 1000)
                            ti["Start Timestamp(us)"] = _r(clock.ts(start_ns, k) / 1000, 3)
                            for key in ("Elapse Time(ms)", "Transit Time(ms)", "Wait Time(ms)",
                                        "Synchronization Time(ms)", "Idle Time(ms)"):
                                if key in ti:
                                    ti[key] = _r(clock.dur(ti[key]))
                            info = {"Communication Time Info": ti,
                                    "Communication Bandwidth Info": _bw_info(
                                        v.get("Communication Bandwidth Info", {}), clock)}
                            total.add(info)
                            buf.append((b"," if total.n > 1 else b"")
                                       + dumps(f"{new_name}@{tg[0]}") + b":" + dumps(info))
                        if len(buf) >= 4096:
                            f.write(b"".join(buf))
                            buf.clear()
                    f.write(b"".join(buf))
                    if total.n:
                        f.write(b',"Total Op Info":' + dumps(total.result()))
                    f.write(b"}")
                f.write(b"}")
            f.write(b"}")

        mat_out: dict = {}
        for step, body in self.t.matrix.items():
            step_out = {}
            for kind in ("p2p", "collective"):
                ops_out = {}
                for key, links in (body.get(kind) or {}).items():
                    label, _, grp = key.rpartition("@")
                    tg = self.target_group(grp)
                    if tg is None:
                        continue
                    new_hash, me, size, trank = tg
                    mult = copies if label.endswith("-total") else 1
                    new_links = {}
                    if self.plan.get("matrix") == "mesh":
                        ops_out[f"{label}@{new_hash}"] = self._mesh_links(
                            links, me, size, mult, clock, grp, new_hash)
                        continue
                    for lk, lv in links.items():
                        a, _, b = lk.partition("-")
                        try:
                            a, b = int(a), int(b)
                        except ValueError:
                            continue
                        na, nb = (me + a - trank) % size, (me + b - trank) % size
                        nk = f"{na}-{nb}"
                        if nk in new_links:
                            continue
                        new_links[nk] = self._link(lv, mult, clock, grp, new_hash)
                    ops_out[f"{label}@{new_hash}"] = new_links
                step_out[kind] = ops_out
            mat_out[step] = step_out
        matrix_path.write_bytes(orjson.dumps(mat_out))

    def _mesh_links(self, links: dict, me: int, size: int, mult: int, clock: Clock, grp: str,
                    new_hash: str) -> dict:
        """``me``'s link to every member of its group of ``size`` (``--matrix mesh``): the
        template's self-link for ``me-me``, its first other link for every peer (transport
        HCCS within a group of at most 8, a server; RDMA in a larger one)."""
        own = other = None
        for lk, lv in links.items():
            a, _, b = lk.partition("-")
            if a == b:
                own = own or lv
            elif a.isdigit() and b.isdigit():
                other = other or lv
        own, other = own or other, other or own
        if other is None:
            return {}
        out = {}
        for j in range(size):
            nv = self._link(own if j == me else other, mult, clock, grp, new_hash)
            if j != me:
                nv["Transport Type"] = "HCCS" if size <= 8 else "RDMA"
            out[f"{me}-{j}"] = nv
        return out

    def _link(self, lv: dict, mult: int, clock: Clock, grp: str, new_hash: str) -> dict:
        """Template link ``lv`` repeated ``mult`` times on this rank's clock: size and time
        scaled, bandwidth recomputed, the op name re-homed to the new group."""
        size_mb = lv.get("Transit Size(MB)", 0) * mult
        time_ms = clock.dur(lv.get("Transit Time(ms)", 0) * mult)
        nv = dict(lv)
        nv["Transit Size(MB)"] = _r(size_mb)
        nv["Transit Time(ms)"] = _r(time_ms)
        nv["Bandwidth(GB/s)"] = _r(size_mb / time_ms, 4) if time_ms > 0 else 0
        if "Op Name" in lv:
            nv["Op Name"] = new_op_name(lv["Op Name"], int(new_hash), 0, self.strides.get(grp, 1))
        return nv

    def write_kernels(self, path: Path) -> None:
        head, rows = self.plan["kernels"][self.t.kernels_path]
        target = self.plan["kernel_rows"] or len(rows)
        copies = max(1, math.ceil(target / max(1, len(rows))))
        clock = self.clock(self.plan["kernel_copies"] or copies)
        i_start, i_dur = head.index("Start Time(us)"), head.index("Duration(us)")
        i_wait = head.index("Wait Time(us)") if "Wait Time(us)" in head else None
        i_dev = head.index("Device_id") if "Device_id" in head else None
        i_name = head.index("Name")
        comm_copies = self.plan["comm_copies"]
        renamed: dict[tuple[str, int], str] = {}
        written = 0
        with open(path, "w", newline="", encoding="utf-8") as f:
            w = csv.writer(f, lineterminator="\n")
            w.writerow(head)
            for k in range(copies):
                batch = []
                for row in rows:
                    if written >= target:
                        break
                    new = list(row)
                    ns, junk = us_text_to_ns(row[i_start])
                    new[i_start] = ns_to_us_text(clock.ts(ns, k)) + junk
                    new[i_dur] = f"{clock.dur(float(row[i_dur])):.3f}"
                    if i_wait is not None:
                        try:
                            new[i_wait] = f"{clock.dur(float(row[i_wait])):.3f}"
                        except ValueError:
                            pass
                    if i_dev is not None:
                        new[i_dev] = str(self.device_id)
                    if row[i_name].startswith("hcom_"):
                        new[i_name] = self._kernel_comm_name(row[i_name], k % comm_copies, renamed)
                    batch.append(new)
                    written += 1
                w.writerows(batch)

    def _kernel_comm_name(self, name: str, copy: int, memo: dict) -> str:
        """A communication kernel row named like its op in communication.json (same group)."""
        key = (name, copy)
        if key not in memo:
            m = _OP_RE.match(name)
            grp = self.t.suffix_group.get(m.group("suffix")) if m else None
            tg = self.target_group(grp) if grp else None
            memo[key] = (new_op_name(name, int(tg[0]), copy, self.strides.get(grp, 1))
                         if tg else name)
        return memo[key]

    def write_trace(self, path: Path) -> None:
        events = self.plan["traces"][self.t.trace_path]
        copies = self.plan["trace_copies"]
        clock = self.clock(copies)
        id_index = self.plan["trace_ids"][self.t.trace_path]
        period = self.plan["period"]
        with open(path, "wb") as f:
            f.write(b"[")
            first = True
            for k in range(copies):
                batch = []
                for e in events:
                    ph = e.get("ph")
                    if ph == "M":
                        if k == 0:
                            batch.append(e)
                        continue
                    is_step = str(e.get("name", "")).startswith("ProfilerStep#")
                    if is_step and k:
                        continue
                    ne = dict(e)
                    if "ts" in e and e["ts"] is not None:
                        ns, _ = us_text_to_ns(e["ts"])
                        ne["ts"] = ns_to_us_text(clock.ts(ns, k))
                    if isinstance(e.get("dur"), (int, float)):
                        dur = e["dur"] + (period * (copies - 1) / 1000 if is_step else 0)
                        ne["dur"] = _r(clock.dur(dur), 3)
                    if k and ph in ("s", "f", "t") and e.get("id") in id_index:
                        # fresh ids per copy (template ids reach 1.7e18: no room to offset)
                        fresh = FLOW_ID_BASE + k * len(id_index) + id_index[e["id"]]
                        ne["id"] = fresh if isinstance(e["id"], int) else str(fresh)
                    batch.append(ne)
                if batch:
                    chunk = orjson.dumps(batch)[1:-1]
                    if chunk:
                        if not first:
                            f.write(b",")
                        f.write(chunk)
                        first = False
            f.write(b"]")


def build(n: int, out: Path, *, template: str = "qwen3", kernels_per_rank: int | None = None,
          comm_ops_per_rank: int | None = None, tp: int | None = None, pp: int | None = None,
          seed: int = 0, data: Path | None = None, progress=None,
          matrix: str = "template") -> dict:
    """Generate the cluster; returns the manifest written to OUT/make_cluster.json.
    ``matrix``: "template" (each rank's matrix links as its template rank's) or "mesh" (its link
    to every member of each group)."""
    data = Path(data) if data else shared_data_dir(template)
    tmpl = load_template(data, template)
    dtp, dpp = default_parallel(n, template)
    lay = make_layout(n, tp or dtp, pp or dpp)
    strides = op_strides(tmpl)

    kernels: dict[Path, tuple[list[str], list[list[str]]]] = {}
    for t in tmpl:
        if t.kernels_path not in kernels:
            with open(t.kernels_path, newline="", encoding="utf-8-sig") as f:
                head, *rows = list(csv.reader(f))
            kernels[t.kernels_path] = (head, rows)
    anchor, end = None, None
    for t in tmpl:
        head, rows = kernels[t.kernels_path]
        i_s, i_d = head.index("Start Time(us)"), head.index("Duration(us)")
        lo, hi = time_span(t, ((r[i_s], r[i_d]) for r in rows))
        anchor = lo if anchor is None else min(anchor, lo)
        end = hi if end is None else max(end, hi)
    period = max(1, end - anchor) + 1_000_000  # one template step + 1 ms gap

    ops_per_rank = max(1, sum(1 for t in tmpl for s in t.comm.values() for _ in _ops(s)) // len(tmpl))
    comm_copies = max(1, round((comm_ops_per_rank or ops_per_rank) / ops_per_rank))
    template_rows = max(len(kernels[t.kernels_path][1]) for t in tmpl)
    kernel_copies = max(1, math.ceil((kernels_per_rank or template_rows) / template_rows))
    traces, id_index, trace_copies = {}, {}, 1
    if any(t.trace_path for t in tmpl):
        tsize = max(t.trace_path.stat().st_size for t in tmpl if t.trace_path)
        rows = kernels_per_rank or template_rows
        trace_copies = max(1, round(rows * TRACE_BYTES_PER_KERNEL / tsize)) if kernels_per_rank else 1
        for t in tmpl:
            if t.trace_path:
                ev = orjson.loads(t.trace_path.read_bytes())
                traces[t.trace_path] = ev
                ids = dict.fromkeys(e["id"] for e in ev if e.get("ph") in ("s", "f", "t") and "id" in e)
                id_index[t.trace_path] = {v: j for j, v in enumerate(ids)}
    plan = {"anchor": anchor, "period": period, "comm_copies": comm_copies,
            "kernel_copies": kernel_copies, "trace_copies": trace_copies,
            "R": max(comm_copies, kernel_copies, trace_copies), "kernels": kernels,
            "kernel_rows": kernels_per_rank, "traces": traces, "trace_ids": id_index,
            "matrix": matrix}

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    slow = set(rng.sample(range(n), max(1, n // 16))) if n > 1 else set()
    for r in range(n):
        RankWriter(lay, r, template_for(lay, r, tmpl), plan, random.Random(seed * 1_000_003 + r),
                   strides, r in slow).write(out)
        if progress:
            progress(r)
    manifest = {
        "ranks": n, "template": template, "seed": seed, "kernels_per_rank": kernels_per_rank,
        "comm_ops_per_rank": comm_ops_per_rank, "matrix": matrix, "tp": lay.tp, "pp": lay.pp, "dp": lay.dp,
        "repeat": {"step": plan["R"], "communication": comm_copies, "kernels": kernel_copies,
                   "trace_view": trace_copies},
        "slow_ranks": sorted(slow),
        "groups": {str(double_hash(k)): {"key": k, "role": role, "ranks": ranks}
                   for k, (role, ranks) in lay.groups.items()},
    }
    (out / MANIFEST).write_bytes(orjson.dumps(manifest, option=orjson.OPT_INDENT_2))
    return manifest


DB_TEMPLATES = {"torch_npu-db-level1": "torch_npu-2rank-levels/db/level1",
                "torch_npu-db-level2": "torch_npu-2rank-levels/db/level2"}


def db_layout(n: int) -> Layout:
    """Megatron layout of a db cluster: TP = the largest of 8, 4, 2, 1 dividing n (one server's
    HCCS group: the template's collective runs over 8 local ranks on HCCS), PP 2 when the rest
    splits evenly, DP the rest."""
    tp = next(k for k in (8, 4, 2, 1) if n % k == 0)
    pp = 2 if (n // tp) >= 2 and (n // tp) % 2 == 0 else 1
    return make_layout(n, tp, pp)


#: the template's collective group spans this many local ranks (CommAnalyzerMatrix 0..7)
DB_TEMPLATE_GROUP = 8


def _local(x, own_t: int, own: int, size: int):
    """Template local rank ``x`` seen from template rank ``own_t`` -> the clone's local rank
    seen from ``own`` (rotated so the rank's own local rank maps to itself); None when it falls
    outside a group of ``size`` ranks (a smaller group than the template's)."""
    if isinstance(x, str):  # analysis.db stores them as text
        if not x.strip().isdigit():
            return x
        y = _local(int(x), own_t, own, size)
        return None if y is None else str(y)
    if x is None or x >= DB_TEMPLATE_GROUP:  # invalid markers (4294967295) stay as written
        return x
    y = (x - own_t + own) % DB_TEMPLATE_GROUP
    return y if y < size else None


def build_db(n: int, out: Path, *, template: str = "torch_npu-db-level1",
             data: Path | None = None, progress=None) -> dict:
    """An N-rank cluster of torch_npu db exports: rank r is a copy of the real rank r % 2
    (``rank<r>_ascend_pt/ASCEND_PROFILER_OUTPUT/{ascend_pytorch_profiler_<r>.db,
    analysis.db}``, ``profiler_info_<r>.json`` and ``profiler_metadata.json``) with its rank id
    set to r in the file names, profiler_info and the db's RANK_DEVICE_MAP (device r % 8).

    Groups as a real job has them (:func:`db_layout`: TP x PP x DP, Megatron order): the
    template's collective (an allreduce over the 8 NPUs of a server) becomes rank r's TP group:
    its own group id (analysis.db group_name = the hash of its group key, COMMUNICATION_OP /
    COMMUNICATION_TASK_INFO groupName = a new HCCL group name), local ranks in
    CommAnalyzerMatrix and COMMUNICATION_TASK_INFO renumbered so r is its TP index (links to
    local ranks beyond a group smaller than 8 dropped), and profiler_metadata.json's
    parallel_group_info / distributed_args list every group (tp, dp, pp, ...) of r. Timings are
    the real ones. For the db side of the benchmark (the peer's db path writes
    cluster_analysis.db)."""
    import sqlite3

    if data is None:
        env = os.environ.get("ASCENDPROF_SHARED_DATA")
        data = Path(env) if env else HERE.parent.parent / "shared" / "data"
    base = Path(data) / DB_TEMPLATES[template]
    if not base.is_dir():
        raise SystemExit(f"make_cluster: {base} not found (set ASCENDPROF_SHARED_DATA)")
    tmpl = [base / f"rank{i}_ascend_pt" for i in (0, 1)]
    lay = db_layout(n)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    for r in range(n):
        t = tmpl[r % 2]
        own_t = r % 2  # the template rank's local rank in its group
        key = lay.member[(r, "tp")]
        members = lay.groups[key][1]
        own, size = members.index(r), len(members)
        group_hash = str(double_hash(key))
        # an HCCL group name as torch_npu writes it (address%interface_port_index_time), one
        # per group
        hccl_name = f"90.91.105.46%enp189s0f0_60000_{list(lay.groups).index(key)}_1736410538306028"
        d = out / f"rank{r}_ascend_pt"
        o = d / OUT_SUB
        o.mkdir(parents=True, exist_ok=True)
        info_src = next(t.glob("profiler_info*.json"))
        info = json.loads(info_src.read_text())
        info["rank_id"] = r
        (d / f"profiler_info_{r}.json").write_bytes(orjson.dumps(info, option=orjson.OPT_INDENT_2))
        (d / "profiler_metadata.json").write_bytes(orjson.dumps({
            "distributed_args": {
                "tensor_model_parallel_size": lay.tp, "pipeline_model_parallel_size": lay.pp,
                "data_parallel_size": lay.dp, "context_parallel_size": 1,
                "expert_model_parallel_size": 1, "sequence_parallel": False, "rank": r,
                "world_size": n},
            "parallel_group_info": parallel_group_info(lay, r)}))
        src_db = next((t / OUT_SUB).glob("ascend_pytorch_profiler_*.db"))
        dst_db = o / f"ascend_pytorch_profiler_{r}.db"
        shutil.copyfile(src_db, dst_db)
        os.chmod(dst_db, 0o644)
        con = sqlite3.connect(dst_db)
        try:
            con.execute("UPDATE RANK_DEVICE_MAP SET rankId = ?, deviceId = ?", (r, r % 8))
            new_id = con.execute("SELECT COALESCE(MAX(id), 0) + 1 FROM STRING_IDS").fetchone()[0]
            con.execute("INSERT INTO STRING_IDS (id, value) VALUES (?, ?)", (new_id, hccl_name))
            con.execute("UPDATE COMMUNICATION_OP SET groupName = ?", (new_id,))
            cti = [c[1] for c in con.execute("PRAGMA table_info('COMMUNICATION_TASK_INFO')")]
            if cti:
                con.execute("UPDATE COMMUNICATION_TASK_INFO SET groupName = ?", (new_id,))
                if {"srcRank", "dstRank"} <= set(cti):
                    rows = con.execute("SELECT rowid, srcRank, dstRank FROM "
                                       "COMMUNICATION_TASK_INFO").fetchall()
                    con.executemany(
                        "UPDATE COMMUNICATION_TASK_INFO SET srcRank = ?, dstRank = ? "
                        "WHERE rowid = ?",
                        [(_local(a, own_t, own, size), _local(b, own_t, own, size), i)
                         for i, a, b in rows])
            con.commit()
        finally:
            con.close()
        if (t / OUT_SUB / "analysis.db").is_file():
            dst = o / "analysis.db"
            shutil.copyfile(t / OUT_SUB / "analysis.db", dst)
            os.chmod(dst, 0o644)
            con = sqlite3.connect(dst)
            try:
                for table in ("CommAnalyzerTime", "CommAnalyzerBandwidth", "CommAnalyzerMatrix"):
                    con.execute(f"UPDATE {table} SET group_name = ?", (group_hash,))
                rows = con.execute("SELECT rowid, src_rank, dst_rank FROM CommAnalyzerMatrix"
                                   ).fetchall()
                for i, a, b in rows:
                    a2, b2 = _local(a, own_t, own, size), _local(b, own_t, own, size)
                    if a2 is None or b2 is None:
                        con.execute("DELETE FROM CommAnalyzerMatrix WHERE rowid = ?", (i,))
                    else:
                        con.execute("UPDATE CommAnalyzerMatrix SET src_rank = ?, dst_rank = ? "
                                    "WHERE rowid = ?", (a2, b2, i))
                con.commit()
            finally:
                con.close()
        if progress:
            progress(r)
    manifest = {"ranks": n, "template": template, "tp": lay.tp, "pp": lay.pp, "dp": lay.dp}
    (out / MANIFEST).write_bytes(orjson.dumps(manifest, option=orjson.OPT_INDENT_2))
    return manifest


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("ranks", type=int, help="number of ranks to generate")
    ap.add_argument("out", type=Path, help="output directory (created; must be empty or absent)")
    ap.add_argument("--template", choices=sorted(TEMPLATES) + sorted(DB_TEMPLATES),
                    default="qwen3", help="real ranks to clone (torch_npu-db-*: db exports)")
    ap.add_argument("--kernels-per-rank", type=int, default=None,
                    help="kernel_details.csv rows per rank (default: as the template); also "
                         "sizes trace_view.json at ~1.5 kB per kernel when the template has one")
    ap.add_argument("--comm-ops-per-rank", type=int, default=None,
                    help="approximate communication ops per rank (default: as the template)")
    ap.add_argument("--tp", type=int, default=None)
    ap.add_argument("--pp", type=int, default=None)
    ap.add_argument("--matrix", choices=("template", "mesh"), default="template",
                    help="communication_matrix.json links: as the template rank's (default), or "
                         "each rank's link to every member of its group (all-to-all / mesh "
                         "algorithms; grows with the square of the group size)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--data", type=Path, default=None, help="shared data directory")
    ap.add_argument("--force", action="store_true",
                    help="replace an OUT this script generated before")
    a = ap.parse_args(argv)
    if a.ranks < 1:
        ap.error("ranks must be >= 1")
    if a.out.exists() and any(a.out.iterdir()):
        if not (a.force and (a.out / MANIFEST).is_file()):
            ap.error(f"{a.out} is not empty (use --force to replace an earlier make_cluster output)")
        for p in a.out.iterdir():
            if p.name == MANIFEST or re.fullmatch(r"rank_?\d+_ascend_pt", p.name):
                shutil.rmtree(p) if p.is_dir() else p.unlink()
    if a.template in DB_TEMPLATES:
        m = build_db(a.ranks, a.out, template=a.template, data=a.data)
        print(f"{a.out}: {m['ranks']} ranks of {a.template}, TP{m['tp']} PP{m['pp']} DP{m['dp']}",
              file=sys.stderr)
        return 0
    m = build(a.ranks, a.out, template=a.template, kernels_per_rank=a.kernels_per_rank,
              comm_ops_per_rank=a.comm_ops_per_rank, tp=a.tp, pp=a.pp, seed=a.seed, data=a.data,
              matrix=a.matrix)
    print(f"{a.out}: {m['ranks']} ranks, TP{m['tp']} PP{m['pp']} DP{m['dp']}, repeat {m['repeat']}",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
