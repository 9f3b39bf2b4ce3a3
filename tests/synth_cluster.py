"""Synthetic Ascend clusters in the profiler's own text layout, for the verdict matrix.

A cluster is laid out TP x PP x DP in Megatron order (global rank = tp + TP*dp + TP*DP*stage,
8 NPUs per node) and *executed*: every rank runs a program of compute kernels, host gaps and
communication ops, and an op starts only when its last member arrives (all members end it
together). So when one rank is late, its peers wait in the next op, as on a real cluster.

Per step and rank the program is (GPipe schedule, M micro-batches): a host gap before the
step (Preparing), for each micro-batch the forward (receive from the previous stage, compute,
tensor-parallel all-reduce, send to the next stage), then the backward the other way round,
the embedding all-reduce between the first and last stage, a tiny all-reduce over all ranks
(loss scale / grad norm), the data-parallel gradient all-reduce and the optimizer. Collectives
run as a ring: each member sends 2(n-1)/n of the payload to the next member over HCCS (same
node) or RDMA; the op lasts the slowest link's time plus a fixed overhead, and a member on a
fast link spends the rest in Notify_Wait (the profiler's Wait Time).

Every file is derived from that one execution, with the columns and units of real exports
(tests/../shared/spec/formats.md §A.1, §A.2, §A.5, §A.6, §A.12, §A.13):
``profiler_info_{rank}.json``, ``profiler_metadata.json`` (distributed_args,
parallel_group_info with group_name_<i> keys; the group id in communication*.json is the
profiler's double hash of the key) and ``ASCEND_PROFILER_OUTPUT/{step_trace_time.csv,
kernel_details.csv, communication.json, communication_matrix.json}``. Step values: Computing =
Σ compute kernels, Communication(Not Overlapped) = Σ op elapse (nothing overlaps), Stage = first
task start to last task end, Free = Stage − Computing − Communication (§7.1.c).

Problems are injected into the execution (see :class:`Spec`), never into the files afterwards,
so every file stays consistent with every other.
"""

from __future__ import annotations

import csv
import io
import json
import random
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

from ascendprof.analyze.cluster_communication import double_hash

MS = 1_000_000  # ns
EPOCH_NS = 1_748_779_200_000_000_000  # 2025-06-01 12:00:00 UTC: the clusters' wall clock
NODE_SIZE = 8
BW_GBPS = {"HCCS": 20.0, "RDMA": 12.0}
OP_OVERHEAD_NS = 20_000
OUT = "ASCEND_PROFILER_OUTPUT"


@dataclass(frozen=True)
class Shape:
    tp: int
    pp: int
    dp: int

    @property
    def n(self) -> int:
        return self.tp * self.pp * self.dp

    def rank(self, tp: int, dp: int, stage: int) -> int:
        return tp + self.tp * dp + self.tp * self.dp * stage

    def coords(self, rank: int) -> tuple[int, int, int]:
        return rank % self.tp, (rank // self.tp) % self.dp, rank // (self.tp * self.dp)

    def label(self) -> str:
        return f"TP{self.tp}xPP{self.pp}xDP{self.dp}"


@dataclass
class Spec:
    """One cluster to generate. Times in ms, factors multiply.

    ``stage_scale``: compute of every rank of a stage x f (stage imbalance);
    ``compute_scale``: compute of one rank x f (slow rank); ``host_gap_ms``: extra host gaps
    of a rank per step, spread over its micro-batch kernels (host-bound: Free); ``early_start``: {rank: (ms, "wait" |
    "free")} the rank starts its step earlier and spends the time waiting in its first op
    ("wait") or idle after a first tiny kernel ("free") - unequal step lengths, nobody waits for
    it; ``link_scale``: {(src, dst): f} bandwidth of one directed link; ``group_scale``:
    {(group name, index of that group among its siblings): f} bandwidth of every link of a
    group; ``missing``: ranks whose directories are not written; ``noise``: relative jitter of
    every kernel duration and link bandwidth (uniform ±noise); ``step_compute_scale``: {rank:
    (f, steps)} compute of one rank x f in those steps only (a transient straggler);
    ``bw_spread``: (lo, hi) every link's bandwidth x a factor drawn uniformly from [lo, hi]
    (links of very different speeds, as msprof-analyze's own test generator draws them);
    ``metadata``: False to write no profiler_metadata.json (no group names, sizes only from
    communication_matrix.json).
    """

    shape: Shape
    microbatches: int = 0  # 0: 4 x PP (pipeline bubble ~ (PP-1)/(M+PP-1))
    steps: tuple[int, ...] = (7, 8)
    compute_ms: float = 90.0  # forward + backward per step and rank (1 : 2)
    preparing_ms: float = 2.0
    optimizer_ms: float = 3.0
    launch_gap_ms: float = 0.03  # host launch gap before every compute kernel (Free)
    stage_scale: dict = field(default_factory=dict)
    compute_scale: dict = field(default_factory=dict)
    host_gap_ms: dict = field(default_factory=dict)
    early_start: dict = field(default_factory=dict)
    link_scale: dict = field(default_factory=dict)
    group_scale: dict = field(default_factory=dict)
    missing: frozenset = frozenset()
    epoch_ns: int = 0  # shifts the cluster's wall clock (another job, another time)
    noise: float = 0.0
    seed: int = 0
    step_compute_scale: dict = field(default_factory=dict)
    bw_spread: tuple | None = None
    metadata: bool = True
    tp_mb: float = 4.0
    p2p_mb: float = 2.0
    dp_mb: float = 60.0
    embd_mb: float = 16.0
    world_mb: float = 0.004


# ------------------------------------------------------------------------------ groups


@dataclass
class Group:
    key: str  # "group_name_<i>" in parallel_group_info
    name: str  # tp, dp, pp, embd, default_group
    ranks: list[int]
    index: int  # position among the groups of the same name

    @property
    def gid(self) -> str:
        return str(double_hash(self.key))


def build_groups(shape: Shape) -> list[Group]:
    out: list[Group] = []

    def add(name, ranks):
        idx = sum(g.name == name for g in out)
        out.append(Group(f"group_name_{len(out)}", name, sorted(ranks), idx))

    add("default_group", range(shape.n))
    for s in range(shape.pp):
        for d in range(shape.dp):
            add("tp", [shape.rank(t, d, s) for t in range(shape.tp)])
    for s in range(shape.pp):
        for t in range(shape.tp):
            add("dp", [shape.rank(t, d, s) for d in range(shape.dp)])
    for d in range(shape.dp):
        for t in range(shape.tp):
            add("pp", [shape.rank(t, d, s) for s in range(shape.pp)])
    if shape.pp > 1:
        for d in range(shape.dp):
            for t in range(shape.tp):
                add("embd", [shape.rank(t, d, 0), shape.rank(t, d, shape.pp - 1)])
    return out


# ------------------------------------------------------------------------------ execution


@dataclass
class Instance:
    name: str  # op name (same on every member)
    op_type: str  # allreduce, batchsendrecv (communication_matrix.json type)
    kind: str  # collective | p2p
    group: Group
    members: list[int]  # in ring order
    volume_mb: float  # per link
    arrivals: dict = field(default_factory=dict)


@dataclass
class OpRecord:
    step: int
    inst: Instance
    arrive: int
    end: int
    transit: int  # own link's transfer time
    wait: int
    sync: int
    link: tuple  # (src, dst, transport, size_mb, time_ns)


@dataclass
class Kernel:
    step: int
    name: str
    op_type: str
    start: int
    dur: int


class Cluster:
    """The executed cluster: per rank its kernels and op records (int ns from time 0)."""

    def __init__(self, spec: Spec):
        self.spec = spec
        self.shape = spec.shape
        self.rng = random.Random(spec.seed)
        self.groups = build_groups(self.shape)
        self.by_name: dict[str, list[Group]] = {}
        for g in self.groups:
            self.by_name.setdefault(g.name, []).append(g)
        self.bw = self._link_bandwidths()
        self.kernels: dict[int, list[Kernel]] = {r: [] for r in range(self.shape.n)}
        self.ops: dict[int, list[OpRecord]] = {r: [] for r in range(self.shape.n)}
        self._counter = 0
        self._run()

    # -- setup

    def group_of(self, name: str, rank: int) -> Group | None:
        for g in self.by_name.get(name, ()):
            if rank in g.ranks:
                return g
        return None

    def transport(self, a: int, b: int) -> str:
        return "HCCS" if a // NODE_SIZE == b // NODE_SIZE else "RDMA"

    def _link_bandwidths(self) -> dict:
        """(group key, src, dst) -> GB/s for every ring / p2p link."""
        out = {}
        for g in self.groups:
            n = len(g.ranks)
            pairs = [(g.ranks[i], g.ranks[(i + 1) % n]) for i in range(n)] if n > 1 else []
            if g.name == "pp":  # p2p both ways between neighbouring stages
                pairs = [(g.ranks[i], g.ranks[i + 1]) for i in range(n - 1)]
                pairs += [(b, a) for a, b in pairs]
            for a, b in pairs:
                bw = BW_GBPS[self.transport(a, b)] * self._jitter()
                if self.spec.bw_spread:
                    bw *= self.rng.uniform(*self.spec.bw_spread)
                bw *= self.spec.link_scale.get((a, b), 1.0)
                bw *= self.spec.group_scale.get((g.name, g.index), 1.0)
                out[(g.key, a, b)] = bw
        return out

    def _jitter(self) -> float:
        n = self.spec.noise
        return 1.0 + (self.rng.uniform(-n, n) if n else 0.0)

    def _new_instance(self, name_head, op_type, kind, group, members, volume_mb) -> Instance:
        self._counter += 1
        suffix = int(group.gid) % 1000
        return Instance(f"{name_head}__{suffix:03d}_{self._counter}_1", op_type, kind, group,
                        members, volume_mb)

    # -- programs

    def _programs(self) -> dict[int, list]:
        sh, sp = self.shape, self.spec
        m = sp.microbatches or 4 * sh.pp
        progs: dict[int, list] = {r: [] for r in range(sh.n)}

        def ring(volume, n):
            return 2 * (n - 1) / n * volume if n > 1 else 0.0

        def compute_ms(rank, stage):
            f, steps = sp.step_compute_scale.get(rank, (1.0, ()))
            return (sp.compute_ms * sp.stage_scale.get(stage, 1.0)
                    * sp.compute_scale.get(rank, 1.0) * (f if step in steps else 1.0))

        lead = max((ms for ms, _ in sp.early_start.values()), default=0.0)
        for step in sp.steps:
            for r in range(sh.n):
                early = sp.early_start.get(r)
                pre = (sp.preparing_ms + lead) * MS
                progs[r].append(("step", step))
                if early is None:
                    progs[r].append(("gap", pre))
                else:
                    ms, how = early
                    progs[r].append(("gap", pre - ms * MS))
                    if how == "free":
                        progs[r].append(("compute", "aclnnInplaceZero_ZerosLike", "ZerosLike", 0.05))
                        progs[r].append(("gap", ms * MS - 50_000))
            # per-(tp, dp) pipelines: forward then backward; instances shared by members
            fwd_p2p, bwd_p2p, tp_ops = {}, {}, {}
            for s in range(sh.pp - 1):
                for d in range(sh.dp):
                    for t in range(sh.tp):
                        a, b = sh.rank(t, d, s), sh.rank(t, d, s + 1)
                        g = self.group_of("pp", a)
                        for mb in range(m):
                            fwd_p2p[(a, b, mb)] = self._new_instance(
                                "hcom_batchSendRecv", "batchsendrecv", "p2p", g, [a, b],
                                sp.p2p_mb)
                            bwd_p2p[(b, a, mb)] = self._new_instance(
                                "hcom_batchSendRecv", "batchsendrecv", "p2p", g, [b, a],
                                sp.p2p_mb)
            if sh.tp > 1:
                for g in self.by_name["tp"]:
                    for mb in range(m):
                        for phase in ("f", "b"):
                            tp_ops[(g.key, mb, phase)] = self._new_instance(
                                "hcom_allReduce", "allreduce", "collective", g, g.ranks,
                                ring(sp.tp_mb, len(g.ranks)))
            for r in range(sh.n):
                t, d, s = sh.coords(r)
                prev_r = sh.rank(t, d, s - 1) if s > 0 else None
                next_r = sh.rank(t, d, s + 1) if s < sh.pp - 1 else None
                tpg = self.group_of("tp", r)
                fms, bms = compute_ms(r, s) / 3 / m, compute_ms(r, s) * 2 / 3 / m
                gap = (sp.host_gap_ms.get(r, 0.0) / (4 * m) + sp.launch_gap_ms) * MS
                p = progs[r]

                def kern(name, op_type, ms):
                    if gap:
                        p.append(("gap", gap))
                    p.append(("compute", name, op_type, ms))

                for mb in range(m):
                    if prev_r is not None:
                        p.append(("op", fwd_p2p[(prev_r, r, mb)]))
                    kern("MatMulV3_fwd", "MatMulV3", fms * 0.6)
                    kern("FlashAttentionScore", "FlashAttentionScore", fms * 0.4)
                    if sh.tp > 1:
                        p.append(("op", tp_ops[(tpg.key, mb, "f")]))
                    if next_r is not None:
                        p.append(("op", fwd_p2p[(r, next_r, mb)]))
                for mb in range(m):
                    if next_r is not None:
                        p.append(("op", bwd_p2p[(next_r, r, mb)]))
                    kern("MatMulV3_bwd", "MatMulV3", bms * 0.6)
                    kern("FlashAttentionScoreGrad", "FlashAttentionScoreGrad", bms * 0.4)
                    if sh.tp > 1:
                        p.append(("op", tp_ops[(tpg.key, mb, "b")]))
                    if prev_r is not None:
                        p.append(("op", bwd_p2p[(r, prev_r, mb)]))
            end_ops = {}
            if sh.pp > 1:
                for g in self.by_name["embd"]:
                    end_ops[("embd", g.key)] = self._new_instance(
                        "hcom_allReduce", "allreduce", "collective", g, g.ranks,
                        ring(sp.embd_mb, 2))
            world = self.by_name["default_group"][0]
            end_ops[("world", world.key)] = self._new_instance(
                "hcom_allReduce", "allreduce", "collective", world, world.ranks,
                ring(sp.world_mb, len(world.ranks)))
            if sh.dp > 1:
                for g in self.by_name["dp"]:
                    end_ops[("dp", g.key)] = self._new_instance(
                        "hcom_allReduce", "allreduce", "collective", g, g.ranks,
                        ring(sp.dp_mb / sh.tp, len(g.ranks)))
            for r in range(sh.n):
                p = progs[r]
                if sh.pp > 1:
                    g = self.group_of("embd", r)
                    if g is not None:
                        p.append(("op", end_ops[("embd", g.key)]))
                p.append(("op", end_ops[("world", world.key)]))
                if sh.dp > 1:
                    p.append(("op", end_ops[("dp", self.group_of("dp", r).key)]))
                p.append(("compute", "ApplyAdamWV2", "ApplyAdamWV2", sp.optimizer_ms))
        return progs

    # -- execution

    def _run(self) -> None:
        progs = self._programs()
        n = self.shape.n
        pc = [0] * n
        clock = [0] * n
        step = [0] * n
        ready = deque(range(n))
        while ready:
            r = ready.popleft()
            prog = progs[r]
            while pc[r] < len(prog):
                item = prog[pc[r]]
                kind = item[0]
                if kind == "step":
                    step[r] = item[1]
                elif kind == "gap":
                    clock[r] += int(item[1])
                elif kind == "compute":
                    _, name, op_type, ms = item
                    dur = max(1000, int(round(ms * MS * self._jitter())))
                    self.kernels[r].append(Kernel(step[r], name, op_type, clock[r], dur))
                    clock[r] += dur
                else:
                    inst = item[1]
                    inst.arrivals[r] = clock[r]
                    if len(inst.arrivals) < len(inst.members):
                        break  # wait; resolved by the last member
                    for m in self._resolve(inst, step[r]):
                        clock[m] = self.ops[m][-1].end
                        if m != r:
                            pc[m] += 1
                            ready.append(m)
                pc[r] += 1
        stuck = [r for r in range(n) if pc[r] < len(progs[r])]
        assert not stuck, f"deadlock in the generated programs at ranks {stuck[:8]}"

    def _resolve(self, inst: Instance, step_id: int) -> list[int]:
        members = inst.members
        n = len(members)
        links = {}
        for i, a in enumerate(members):
            if inst.kind == "p2p":
                if i:
                    continue
                b = members[1]
            else:
                b = members[(i + 1) % n]
            bw = self.bw[(inst.group.key, a, b)]
            t = int(round(inst.volume_mb / bw * MS))  # MB / (GB/s) = ms
            links[a] = (a, b, self.transport(a, b), inst.volume_mb, t)
        slowest = max(l[4] for l in links.values())
        last = max(inst.arrivals.values())
        end = last + slowest + OP_OVERHEAD_NS
        for m in members:
            a = inst.arrivals[m]
            link = links.get(m) or links[members[0]]  # p2p: the receiver sees the sender's link
            own = link[4]
            self.ops[m].append(OpRecord(step_id, inst, a, end, own, (last - a) + (slowest - own),
                                        last - a, link))
        return members

    # -- per-step values

    def step_values(self, r: int) -> dict[int, dict]:
        out = {}
        for st in self.spec.steps:
            ks = [k for k in self.kernels[r] if k.step == st]
            os_ = [o for o in self.ops[r] if o.step == st]
            start = min([k.start for k in ks] + [o.arrive for o in os_])
            end = max([k.start + k.dur for k in ks] + [o.end for o in os_])
            comp = sum(k.dur for k in ks)
            comm = sum(o.end - o.arrive for o in os_)
            out[st] = {"Computing": comp, "Communication(Not Overlapped)": comm,
                       "Overlapped": 0, "Communication": comm,
                       "Free": (end - start) - comp - comm, "Stage": end - start, "Bubble": 0,
                       "Communication(Not Overlapped and Exclude Receive)": comm,
                       "Preparing": int(self.spec.preparing_ms * MS)}
        return out


# ------------------------------------------------------------------------------ files


def _us(ns: int) -> str:
    return f"{ns // 1000}.{ns % 1000:03d}"


def _ms(ns: int) -> float:
    return round(ns / MS, 6)


def _bw_info(link) -> dict:
    out = {}
    for tr in ("RDMA", "HCCS", "PCIE", "SDMA", "SIO"):
        size, t = (link[3], link[4]) if link and (tr == link[2] or
                                                    (tr == "SDMA" and link[2] == "HCCS")) else (0, 0)
        out[tr] = {"Transit Size(MB)": size, "Transit Time(ms)": _ms(t),
                   "Bandwidth(GB/s)": round(size / _ms(t), 4) if t else 0,
                   "Large Packet Ratio": 0, "Size Distribution": {}}
    return out


def _comm_json(cl: Cluster, r: int) -> dict:
    out = {}
    for st in cl.spec.steps:
        kinds = {"collective": {}, "p2p": {}}
        tot = {k: {"Elapse Time(ms)": 0.0, "Transit Time(ms)": 0.0, "Wait Time(ms)": 0.0,
                   "Synchronization Time(ms)": 0.0, "Idle Time(ms)": 0.0} for k in kinds}
        for o in cl.ops[r]:
            if o.step != st:
                continue
            el = o.end - o.arrive
            idle = el - o.transit - o.wait
            t = {"Start Timestamp(us)": (EPOCH_NS + cl.spec.epoch_ns + o.arrive) / 1000,
                 "Elapse Time(ms)": _ms(el), "Transit Time(ms)": _ms(o.transit),
                 "Wait Time(ms)": _ms(o.wait), "Synchronization Time(ms)": _ms(o.sync),
                 "Idle Time(ms)": _ms(idle),
                 "Wait Time Ratio": round(o.wait / (o.wait + o.transit), 4)
                 if o.wait + o.transit else 0,
                 "Synchronization Time Ratio": round(o.sync / (o.sync + o.transit), 4)
                 if o.sync + o.transit else 0}
            link = o.link if o.link[0] == r or o.inst.kind == "p2p" else None
            kinds[o.inst.kind][f"{o.inst.name}@{o.inst.group.gid}"] = {
                "Communication Time Info": t, "Communication Bandwidth Info": _bw_info(link)}
            for k in tot[o.inst.kind]:
                tot[o.inst.kind][k] += t[k]
        for k, ops in kinds.items():
            if ops:
                tt = {a: round(b, 6) for a, b in tot[k].items()}
                w, tr = tt["Wait Time(ms)"], tt["Transit Time(ms)"]
                tt["Wait Time Ratio"] = round(w / (w + tr), 4) if w + tr else 0
                tt["Synchronization Time Ratio"] = 0
                ops["Total Op Info"] = {"Communication Time Info": tt,
                                        "Communication Bandwidth Info": _bw_info(None)}
        out[f"step{st}"] = kinds
    return out


def _matrix_json(cl: Cluster, r: int) -> dict:
    out = {}
    for st in cl.spec.steps:
        kinds: dict = {"collective": {}, "p2p": {}}
        per: dict = {}
        for o in cl.ops[r]:
            if o.step != st or o.link[0] != r:
                continue  # a rank reports the links it sends on
            g = o.inst.group
            src, dst = g.ranks.index(o.link[0]), g.ranks.index(o.link[1])
            per.setdefault((o.inst.kind, o.inst.op_type, g.gid, f"{src}-{dst}"), []).append(o)
        for (kind, op_type, gid, sd), recs in per.items():
            def entry(rs):
                size = sum(x.link[3] for x in rs)
                t = sum(x.link[4] for x in rs)
                return {"Transport Type": rs[0].link[2], "Transit Size(MB)": round(size, 6),
                        "Transit Time(ms)": _ms(t),
                        "Bandwidth(GB/s)": round(size / _ms(t), 4) if t else 0,
                        "Bandwidth(Utilization)": 0, "Large Packet Ratio": 0,
                        "Op Name": rs[0].inst.name}
            ranked = sorted(recs, key=lambda x: -(x.link[3] / max(x.link[4], 1)))
            keys = {"top1": ranked[0], "middle": ranked[len(ranked) // 2],
                    "bottom1": ranked[-1]}
            for label, rec in keys.items():
                kinds[kind].setdefault(f"{op_type}-{label}@{gid}", {})[sd] = entry([rec])
            kinds[kind].setdefault(f"{op_type}-total@{gid}", {})[sd] = entry(recs)
        out[f"step{st}"] = kinds
    return out


_KERNEL_HEAD = ["Step Id", "Device_id", "Model ID", "Task ID", "Stream ID", "Name", "Type",
                "OP State", "Accelerator Core", "Start Time(us)", "Duration(us)", "Wait Time(us)",
                "Block Dim", "Mix Block Dim", "HF32 Eligible", "Input Shapes",
                "Input Data Types", "Input Formats", "Output Shapes", "Output Data Types",
                "Output Formats", "Context ID"]
_STEP_HEAD = ["Device_id", "Step", "Computing", "Communication(Not Overlapped)", "Overlapped",
              "Communication", "Free", "Stage", "Bubble",
              "Communication(Not Overlapped and Exclude Receive)", "Preparing"]


def _kernel_csv(cl: Cluster, r: int) -> str:
    rows = []
    for k in cl.kernels[r]:
        core = "AI_CORE" if k.op_type.startswith("MatMul") else (
            "MIX_AIC" if "Flash" in k.op_type else "AI_VECTOR_CORE")
        rows.append((k.start, [k.step, r, 4294967295, 0, 2, k.name, k.op_type, "dynamic", core,
                               _us(EPOCH_NS + cl.spec.epoch_ns + k.start) + "\t", _us(k.dur),
                               "0", 24, 0, "NO",
                               '"4096,4096"', "BF16", "ND", '"4096,4096"', "BF16", "ND", "N/A"]))
    for o in cl.ops[r]:
        head = o.inst.name.split("__")[0]
        rows.append((o.arrive, [o.step, r, 4294967295, "N/A", "N/A", o.inst.name, head + "_",
                                "N/A", "COMMUNICATION",
                                _us(EPOCH_NS + cl.spec.epoch_ns + o.arrive) + "\t",
                                _us(o.end - o.arrive), "0"] + ["N/A"] * 10))
    rows.sort(key=lambda x: x[0])
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(_KERNEL_HEAD)
    for _, row in rows:
        w.writerow(row)
    return buf.getvalue()


def _step_csv(cl: Cluster, r: int) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(_STEP_HEAD)
    for st, vals in cl.step_values(r).items():
        w.writerow([r, st] + [_us(vals[c]) for c in _STEP_HEAD[2:]])
    return buf.getvalue()


def _metadata(cl: Cluster, r: int) -> dict:
    sh = cl.shape
    pgi = {g.key: {"group_name": g.name, "group_rank": g.ranks.index(r), "global_ranks": g.ranks}
           for g in cl.groups if r in g.ranks}
    return {"distributed_args": {"tensor_model_parallel_size": sh.tp,
                                 "pipeline_model_parallel_size": sh.pp,
                                 "data_parallel_size": sh.dp, "rank": r, "world_size": sh.n},
            "parallel_group_info": pgi}


def _profiler_info(cl: Cluster, r: int) -> dict:
    end = max([o.end for o in cl.ops[r]] + [k.start + k.dur for k in cl.kernels[r]])
    return {"config": {"common_config": {"activities": ["ProfilerActivity.CPU",
                                                        "ProfilerActivity.NPU"],
                                         "schedule": {"wait": 0, "active": len(cl.spec.steps),
                                                      "warmup": 1, "repeat": 1,
                                                      "skip_first": cl.spec.steps[0] - 2}},
                       "experimental_config": {"_profiler_level": "Level1",
                                               "_export_type": ["text"]}},
            "start_info": {"syscnt_enable": True, "freq": 100, "start_cnt": 1000 + r,
                           "start_monotonic": 5_000_000_000 + r},
            "end_info": {"collectionTimeEnd": EPOCH_NS + cl.spec.epoch_ns + end + 1_000_000,
                         "MonotonicTimeEnd": 5_000_000_000 + end},
            "torch_npu_version": "2.1.0.post12", "cann_version": "8.0.RC3", "rank_id": r}


def rank_dir_name(r: int, epoch_ns: int = 0) -> str:
    ts = time.strftime("%Y%m%d%H%M%S", time.gmtime((EPOCH_NS + epoch_ns) // 10**9))
    return f"node{r // NODE_SIZE:02d}_{40000 + r}_{ts}{r % 1000:03d}_ascend_pt"


def write(spec: Spec, root: Path) -> Cluster:
    """Execute ``spec`` and write every collected rank under ``root`` (created). Returns the
    executed :class:`Cluster` (its kernels and ops are what the files say)."""
    cl = Cluster(spec)
    root = Path(root)
    for r in range(spec.shape.n):
        if r in spec.missing:
            continue
        d = root / rank_dir_name(r, spec.epoch_ns)
        (d / OUT).mkdir(parents=True, exist_ok=True)
        (d / f"profiler_info_{r}.json").write_text(json.dumps(_profiler_info(cl, r)))
        if spec.metadata:
            (d / "profiler_metadata.json").write_text(json.dumps(_metadata(cl, r)))
        (d / OUT / "step_trace_time.csv").write_text(_step_csv(cl, r))
        (d / OUT / "kernel_details.csv").write_text(_kernel_csv(cl, r))
        (d / OUT / "communication.json").write_text(json.dumps(_comm_json(cl, r)))
        (d / OUT / "communication_matrix.json").write_text(json.dumps(_matrix_json(cl, r)))
    return cl
