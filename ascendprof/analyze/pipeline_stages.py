"""Pipeline-parallel stages: compute per stage, bubbles in p2p send/receive, and the schedule.

Seed 003 (集群迭代轨迹 "stage 时间" / "纯接收时间", Marey view): a pipeline stage's step time is its
own compute plus the time it waits for its neighbours in the p2p send/receive ops between
stages (the *bubble*). This module takes every rank's p2p ops, places each rank in its pipeline
(the ``pp`` groups), and writes

- ``pipeline.csv``: one row per p2p op per rank and step, in device order, with what each op
  sends and receives (``F<m>`` = activations of micro-batch m, forward; ``B<m>`` = gradients of
  micro-batch m, backward) when the op sequence matches the non-interleaved 1F1B schedule
  (Megatron / MindSpeed ``forward_backward_pipelining_without_interleaving``) for some number of
  micro-batches; columns in :data:`PIPELINE_COLUMNS`;
- ``pipeline_stages.csv``: one row per (step, pipeline stage): compute, p2p time and the exposed
  part of it (the bubble), and the profiler's Stage / Bubble next to the recomputed ones
  (:data:`STAGE_COLUMNS`).

**Bubble.** The exposed time of a p2p op is the part of its device interval that no compute
kernel covers (interval difference, :mod:`ascendprof.analyze.intervals`); a stage's bubble is the
sum over its p2p ops. When the rank has no kernels but its step breakdown reports Overlapped = 0
(no communication overlapped by compute in that step), every p2p op is wholly exposed. Otherwise
the exposed time is unknown (empty). The profiler's own ``Bubble`` column counts only ops whose
name starts with ``hcom_receive`` (torch_npu, spec §7.1.c) and is therefore 0 for ``batchSendRecv``
pipelines such as MindSpeed's; both are written so the difference is visible.

**The 1F1B schedule** (per stage ``s`` of ``P``, ``M`` micro-batches, ``w = min(P - s - 1, M)``
warm-up micro-batches): warm-up ``recv F(i)`` (not on the first stage), ``send F(i)`` (not on the
last) for i < w; then ``recv F(w)``; steady state for i < M - w: ``send F(w+i) + recv B(i)``
(not on the last stage), then ``send B(i) + recv F(w+i+1)``, or ``send B(i)`` alone after the
last (nothing of it on the first stage); cool-down ``recv B(M-w+i)`` (not on the last stage),
``send B(M-w+i)`` (not on the first). With batched p2p (``batchSendRecv``) each line is one op;
with separate ``hcom_send`` / ``hcom_receive`` ops each part is one op and the two parts of a line
may come in either order. A pipeline whose stages' op sequences fit one ``M`` gets labels; any
other sequence (interleaved or zero-bubble schedules, truncated steps) is written unlabelled.

Nothing here reads files: per rank :func:`rank_p2p_ops` (KERNELS / COMM_OPS / TIMELINE / STEP
_TRACE in, :data:`P2P_SCHEMA` out), per cluster :func:`build`.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from ascendprof.analyze import intervals as I
from ascendprof.analyze.codes import distinct_mask
from ascendprof.model import schemas as S
from ascendprof.model.tasks import comm_rows

#: Name of the per-rank partial (a small table sent back from the workers).
P2P_OPS = "p2p_ops"

P2P_SCHEMA = pa.schema([
    ("rank", pa.int32()), ("step", pa.int32()), ("seq", pa.int32()), ("op_name", pa.string()),
    ("group", pa.string()), ("kind", pa.string()), ("start_ns", pa.int64()),
    ("dur_ns", pa.int64()), ("wait_ns", pa.int64()), ("exposed_ns", pa.int64()),
    ("source", pa.string()),
])

#: pipeline.csv columns, in order. Times in microseconds; ``Start(us)`` is the absolute local
#: wall-clock time as the profiler writes it; ``Offset(us)`` is the start relative to the
#: earliest p2p op start of the same step and pipeline (the x axis of a pipeline chart).
PIPELINE_COLUMNS = ["Step", "Pipeline", "Stage", "Rank", "Seq", "Op Name", "Kind", "Phase",
                    "Send", "Recv", "Start(us)", "Offset(us)", "Duration(us)", "Wait(us)",
                    "Exposed(us)", "Source"]

#: pipeline_stages.csv columns. Per (step, stage): ``Ranks`` of the stage (all pipelines),
#: ``Computing(us)`` mean over its ranks, ``P2P(us)`` / ``Bubble(us)`` mean per rank of the p2p
#: time and its exposed part (empty when unknown), ``Bubble(%)`` = Bubble / Stage,
#: ``Stage(us)`` / ``Bubble Reported(us)`` the profiler's stage row (max over the stage's ranks,
#: as cluster_step_trace_time.csv), ``Stage Recomputed(us)`` / ``Bubble Recomputed(us)`` the same
#: from ascendprof's recomputed breakdown (profiler formula) over the ranks that have one,
#: ``Stage Deviation(%)`` recomputed vs reported over those same ranks,
#: ``Micro-batches`` and ``Schedule`` (``1F1B`` when the op sequence fits, else empty).
STAGE_COLUMNS = ["Step", "Stage", "Ranks", "Computing(us)", "P2P(us)", "Bubble(us)",
                 "Bubble(%)", "Stage(us)", "Stage Recomputed(us)", "Stage Deviation(%)",
                 "Bubble Reported(us)", "Bubble Recomputed(us)", "Micro-batches", "Schedule"]

_P2P_NAME = re.compile(r"(?i)(send|receive|recv)")
#: Group names (parallel_group_info ``group_name`` / communication_group.json ``pg_name``) of
#: pipeline-parallel groups (as verdicts.PP_GROUP_NAMES).
PP_NAMES = ("pp", "pipeline", "pipeline_parallel", "pipeline_model_parallel")


def p2p_kind(name: str) -> str:
    """``send``, ``recv`` or ``send_recv`` (batched) from an HCCL op name
    (``hcom_batchSendRecv__128_3_1``, ``hcom_send__…``, ``hcom_receive__…``, MindSpore
    ``Send-op12`` / ``Receive-op3``); ``p2p`` when the name says neither."""
    low = (name or "").lower()
    has_send = "send" in low
    has_recv = "receive" in low or "recv" in low
    if has_send and has_recv:
        return "send_recv"
    if has_recv:
        return "recv"
    if has_send:
        return "send"
    return "p2p"


# ---------------------------------------------------------------------------------------------
# per rank


def _np(col, fill=0):
    return np.asarray(pc.fill_null(col, fill).to_numpy(zero_copy_only=False))


def _compute_intervals(kernels) -> I.Intervals | None:
    """Compute kernels of KERNELS as intervals: every row that is not a communication big op,
    except the MC2 helper kernels (``*AicpuKernel`` / ``*AivKernel``) CANN leaves out of the
    compute sections (§7.1.b). kernel_details / op_summary hold no runtime tasks, so the full
    task classification of the step breakdown is not needed here."""
    if kernels is None:
        return None
    k = kernels if kernels["start_ns"].null_count == 0 else kernels.filter(
        pc.is_valid(kernels["start_ns"]))
    if k.num_rows == 0:
        return None

    def other(cores, names):
        names = pc.fill_null(names, "")
        return pc.or_(comm_rows(cores, names),
                      pc.or_(pc.ends_with(names, "AicpuKernel"), pc.ends_with(names, "AivKernel")))
    mask = ~distinct_mask(other, k["accelerator_core"], k["name"])  # per distinct text
    return I.from_durations(_np(k["start_ns"])[mask], _np(k["dur_ns"])[mask])


def rank_p2p_ops(tables: dict, rank: int) -> pa.Table | None:
    """The rank's p2p communication ops (:data:`P2P_SCHEMA`), or None when it has none.

    Sources, first that has p2p ops: KERNELS rows that are communication big ops with a
    send/receive name (kernel_details.csv, db TASK; spec §A.2), then COMM_OPS rows of kind
    ``p2p`` (communication.json Start Timestamp + Elapse Time, §A.5), then the TIMELINE
    ``communication`` track's big ops. ``wait_ns`` is communication.json's Wait Time of the same
    op (null when absent). ``exposed_ns`` (see the module doc) needs compute kernels, or a step
    whose reported Overlapped is 0. ``seq`` numbers the ops of one step in start order.
    """
    kernels = S.of_rank(tables.get(S.KERNELS), rank)
    ops = S.of_rank(tables.get(S.COMM_OPS), rank)
    src = None
    if kernels is not None:
        comm = pa.array(distinct_mask(comm_rows, kernels["accelerator_core"], kernels["name"]))
        k = kernels.filter(pc.and_(comm, pc.is_valid(kernels["start_ns"])))
        k = k.filter(pc.match_substring_regex(pc.fill_null(k["name"], ""), _P2P_NAME.pattern))
        if k.num_rows:
            src = (k, "name", "dur_ns", "kernel_details")
    if src is None and ops is not None:
        o = ops.filter(pc.and_(pc.equal(pc.fill_null(ops["kind"], ""), "p2p"),
                               pc.is_valid(ops["start_ns"])))
        if o.num_rows:
            src = (o, "op_name", "elapse_ns", "communication.json")
    if src is None:
        tl = S.of_rank(tables.get(S.TIMELINE), rank)
        if tl is not None:
            t = tl.filter(pc.and_(pc.equal(pc.fill_null(tl["track"], ""), "communication"),
                                  pc.match_substring_regex(pc.fill_null(tl["thread"], ""),
                                                           r"^Group .* Communication$")))
            t = t.filter(pc.match_substring_regex(pc.fill_null(t["name"], ""), _P2P_NAME.pattern))
            if t.num_rows:
                src = (t, "name", "dur_ns", "trace_view")
    if src is None:
        return None
    t, name_col, dur_col, source = src
    steps = t["step"].to_pylist()
    names = [str(n) for n in t[name_col].to_pylist()]
    groups = t["group"].to_pylist() if "group" in t.column_names else [None] * len(names)
    starts = _np(t["start_ns"]).astype(np.int64)
    durs = np.maximum(_np(t[dur_col]).astype(np.int64), 0)
    # communication.json knows the group and the wait time of the same op
    waits: list = [None] * len(names)
    if ops is not None:
        o = ops.filter(pc.equal(pc.fill_null(ops["kind"], ""), "p2p"))
        info = {}
        for st, name, grp, w in zip(o["step"].to_pylist(), o["op_name"].to_pylist(),
                                    o["group"].to_pylist(), o["wait_ns"].to_pylist()):
            info.setdefault((st, str(name).split("@")[0]), (grp, w))
        for i, (st, n) in enumerate(zip(steps, names)):
            got = info.get((st, n.split("@")[0]))
            if got:
                groups[i] = got[0] if got[0] is not None else groups[i]
                waits[i] = got[1]
    exposed = _exposed(steps, starts, durs, kernels,
                       S.of_rank(tables.get(S.STEP_TRACE), rank))
    order = sorted(range(len(names)), key=lambda i: (steps[i] is not None,
                                                     steps[i] if steps[i] is not None else 0,
                                                     int(starts[i])))
    seq, count = [0] * len(names), {}
    for i in order:
        seq[i] = count.get(steps[i], 0)
        count[steps[i]] = seq[i] + 1
    cols = {"rank": [rank] * len(order), "step": [steps[i] for i in order],
            "seq": [seq[i] for i in order], "op_name": [names[i] for i in order],
            "group": [None if groups[i] is None else str(groups[i]) for i in order],
            "kind": [p2p_kind(names[i]) for i in order],
            "start_ns": [int(starts[i]) for i in order], "dur_ns": [int(durs[i]) for i in order],
            "wait_ns": [waits[i] for i in order], "exposed_ns": [exposed[i] for i in order],
            "source": [source] * len(order)}
    return pa.table({f.name: pa.array(cols[f.name], f.type) for f in P2P_SCHEMA},
                    schema=P2P_SCHEMA)


def _exposed(steps: list, starts: np.ndarray, durs: np.ndarray, kernels, step_trace) -> list:
    """Per p2p op: ns of its interval that no compute kernel covers (module doc); None where
    unknown."""
    ends = starts + durs
    comp = _compute_intervals(kernels)
    if comp is not None:
        covered = I.length_in_windows(comp, starts, ends)
        return [int(x) for x in ends - starts - covered]
    if step_trace is None:
        return [None] * len(steps)
    no_overlap = {s for s, v in zip(step_trace["step"].to_pylist(),
                                    step_trace["overlapped_ns"].to_pylist()) if v == 0}
    return [int(e - s) if st is not None and st in no_overlap else None
            for st, s, e in zip(steps, starts, ends)]


# ---------------------------------------------------------------------------------------------
# the 1F1B schedule


def one_f_one_b(P: int, s: int, M: int) -> list[dict]:
    """The p2p lines of stage ``s`` (0-based) of ``P`` stages for ``M`` micro-batches in the
    non-interleaved 1F1B schedule (module doc), in issue order. Each line is ``{"phase":
    "warmup"|"steady"|"cooldown", "send": label or None, "recv": label or None}``; lines with
    neither are left out (they are no-ops on the first / last stage)."""
    first, last = s == 0, s == P - 1
    w = min(P - s - 1, M)
    rest = M - w
    lines: list[dict] = []

    def add(phase, send=None, recv=None):
        if send or recv:
            lines.append({"phase": phase, "send": send, "recv": recv})

    for i in range(w):
        add("warmup", recv=None if first else f"F{i}")
        add("warmup", send=None if last else f"F{i}")
    if rest > 0:
        add("warmup" if w else "steady", recv=None if first else f"F{w}")
    for i in range(rest):
        add("steady", send=None if last else f"F{w + i}", recv=None if last else f"B{i}")
        if i == rest - 1:
            add("steady", send=None if first else f"B{i}")
        else:
            add("steady", send=None if first else f"B{i}", recv=None if first else f"F{w + i + 1}")
    for i in range(w):
        add("cooldown", recv=None if last else f"B{rest + i}")
        add("cooldown", send=None if first else f"B{rest + i}")
    return lines


def _match(kinds: list[str], lines: list[dict]) -> list[dict] | None:
    """Labels per observed op when ``kinds`` (in order) follow ``lines``, else None. Batched
    ops (send_recv) take one line each; separate send / recv ops take one part each, the parts
    of one line in either order."""
    out: list[dict] = []
    if kinds and all(k == "send_recv" for k in kinds):
        if len(kinds) != len(lines):
            return None
        return [dict(line) for line in lines]
    i = 0
    for line in lines:
        parts = [("send", line["send"]), ("recv", line["recv"])]
        parts = [(k, lab) for k, lab in parts if lab]
        got = kinds[i:i + len(parts)]
        if sorted(got) != sorted(k for k, _ in parts):
            return None
        lab = dict(parts)
        for k in got:
            out.append({"phase": line["phase"], "send": lab[k] if k == "send" else None,
                        "recv": lab[k] if k == "recv" else None})
        i += len(parts)
    return out if i == len(kinds) else None


def infer_1f1b(kinds_by_stage: dict[int, list[str]], P: int, max_m: int = 4096):
    """``(M, {stage: labels})`` for the smallest number of micro-batches M with which every
    listed stage's op kinds follow :func:`one_f_one_b`, or ``(None, {})``. ``kinds_by_stage``
    maps a stage index to its ops' :func:`p2p_kind` in start order."""
    if not kinds_by_stage or P < 2:
        return None, {}
    n = max(len(k) for k in kinds_by_stage.values())
    for M in range(1, min(max_m, 2 * n + 2) + 1):
        labels = {}
        for s, kinds in kinds_by_stage.items():
            got = _match(kinds, one_f_one_b(P, s, M))
            if got is None:
                break
            labels[s] = got
        else:
            return M, labels
    return None, {}


# ---------------------------------------------------------------------------------------------
# the cluster


def pipelines(metadata: dict[int, dict] | None, groups: dict | None) -> list[list[int]]:
    """Every pipeline as its global ranks in stage order.

    From profiler_metadata.json ``parallel_group_info`` groups named :data:`PP_NAMES` (their
    ``global_ranks`` order, spec §A.13), else from communication_group.json's p2p groups whose
    ``pg_name`` is one of them (ranks ascending), else from all p2p groups. Groups of one rank
    are no pipeline."""
    found: list[tuple[int, ...]] = []
    for meta in (metadata or {}).values():
        pgi = (meta or {}).get("parallel_group_info") or {}
        for info in pgi.values() if isinstance(pgi, dict) else ():
            if isinstance(info, dict) and str(info.get("group_name", "")).lower() in PP_NAMES:
                ranks = tuple(int(r) for r in info.get("global_ranks") or [])
                if len(ranks) > 1 and ranks not in found:
                    found.append(ranks)
    if not found and groups:
        info = [g for g in groups.get("comm_group_parallel_info") or [] if g.get("type") == "p2p"]
        named = [g for g in info if str(g.get("pg_name") or "").lower() in PP_NAMES]
        for g in named or info:
            ranks = tuple(sorted(int(r) for r in g.get("rank_set") or []))
            if len(ranks) > 1 and ranks not in found:
                found.append(ranks)
    return [list(p) for p in sorted(found)]


def _us(ns):
    return None if ns is None or pd.isna(ns) else round(float(ns) / 1000, 3)


def _abs_us(ns) -> str:
    """An absolute time in us with exactly 3 decimals, from int ns (a float would lose the
    last digits of a 16-digit microsecond timestamp)."""
    ns = int(ns)
    return f"{ns // 1000}.{ns % 1000:03d}"


def build(p2p: pa.Table | None, lines: list[list[int]], step_trace: pa.Table | None = None,
          breakdown: pa.Table | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(pipeline.csv, pipeline_stages.csv) as DataFrames (columns :data:`PIPELINE_COLUMNS`,
    :data:`STAGE_COLUMNS`; microseconds).

    In: ``p2p`` all ranks' :func:`rank_p2p_ops`; ``lines`` :func:`pipelines`; ``step_trace`` /
    ``breakdown`` the reported and recomputed step breakdowns (STEP_TRACE schema, all ranks).
    Ranks in no pipeline are left out. Empty frames (with the columns) when there is nothing.
    """
    stage_of: dict[int, tuple[int, int]] = {}  # rank -> (pipeline index, stage)
    for pi, line in enumerate(lines):
        for s, r in enumerate(line):
            stage_of.setdefault(r, (pi, s))
    if p2p is None or p2p.num_rows == 0 or not stage_of:
        return pd.DataFrame(columns=PIPELINE_COLUMNS), pd.DataFrame(columns=STAGE_COLUMNS)
    ops = p2p.to_pandas()
    ops = ops[ops["rank"].isin(list(stage_of))]
    ops = ops.assign(_pipe=[stage_of[r][0] for r in ops["rank"]],
                     _stage=[stage_of[r][1] for r in ops["rank"]],
                     _step=ops["step"].fillna(-1).astype(int))
    rows, schedule = [], {}
    for (step, pi), part in ops.groupby(["_step", "_pipe"], sort=True):
        P = len(lines[pi])
        kinds = {}
        for r, g in part.groupby("rank"):
            kinds[r] = list(g.sort_values("seq")["kind"])
        # every rank of the pipeline is checked against its stage's schedule
        M, by_stage = _infer_ranks(kinds, stage_of, P)
        schedule[(step, pi)] = M
        t0 = part["start_ns"].min()
        for r, g in part.groupby("rank"):
            lab = by_stage.get(r) or []
            for j, op in enumerate(g.sort_values("seq").itertuples(index=False)):
                x = lab[j] if j < len(lab) else {}
                rows.append([None if step < 0 else int(step), str(tuple(lines[pi])),
                             stage_of[r][1], int(r), int(op.seq), op.op_name, op.kind,
                             x.get("phase") or "", x.get("send") or "", x.get("recv") or "",
                             _abs_us(op.start_ns), _us(op.start_ns - t0), _us(op.dur_ns),
                             _us(op.wait_ns), _us(op.exposed_ns), op.source])
    pipe = pd.DataFrame(rows, columns=PIPELINE_COLUMNS)
    pipe = pipe.sort_values(["Step", "Pipeline", "Stage", "Rank", "Seq"], kind="stable",
                            na_position="first").reset_index(drop=True)
    return pipe, _stages(ops, lines, stage_of, schedule, step_trace, breakdown)


def _infer_ranks(kinds: dict[int, list[str]], stage_of: dict, P: int):
    """infer_1f1b over the ranks of one pipeline (stage from ``stage_of``); labels per rank."""
    by_stage: dict[int, list[str]] = {}
    for r, k in kinds.items():
        s = stage_of[r][1]
        if s in by_stage and by_stage[s] != k:
            return None, {}
        by_stage[s] = k
    M, labels = infer_1f1b(by_stage, P)
    return M, {r: labels.get(stage_of[r][1]) for r in kinds} if M else {}


def _stages(ops: pd.DataFrame, lines, stage_of, schedule, step_trace, breakdown) -> pd.DataFrame:
    steps = set(ops["_step"])
    rep = _frame(step_trace, steps)
    rec = _frame(breakdown, steps)
    per_rank = ops.groupby(["_step", "rank"]).agg(p2p=("dur_ns", "sum"),
                                                  exposed=("exposed_ns", lambda x: x.sum()
                                                           if x.notna().all() else pd.NA))
    steps = sorted(set(ops["_step"]))
    n_stages = max(len(p) for p in lines)
    rows = []
    for step in steps:
        for s in range(n_stages):
            ranks = sorted(r for r, (pi, st) in stage_of.items() if st == s)
            got = [per_rank.loc[(step, r)] for r in ranks if (step, r) in per_rank.index]
            if not got:  # no rank of this stage was collected (or has p2p ops) in this step
                continue
            comp = [rep.get((step, r), rec.get((step, r), {})).get("computing_ns") for r in ranks]
            comp = [c for c in comp if c is not None]
            stage_rep = _max([rep.get((step, r), {}).get("stage_ns") for r in ranks])
            bubble_rep = _max([rep.get((step, r), {}).get("bubble_ns") for r in ranks])
            # recomputed: over the ranks that have both, and compared on those ranks only
            both = [r for r in ranks if (step, r) in rec and (step, r) in rep]
            stage_rec = _max([rec[(step, r)].get("stage_ns") for r in both])
            bubble_rec = _max([rec[(step, r)].get("bubble_ns") for r in both])
            stage_both = _max([rep[(step, r)].get("stage_ns") for r in both])
            p2p = np.mean([float(g["p2p"]) for g in got]) if got else None
            exp = [g["exposed"] for g in got]
            exposed = (np.mean([float(e) for e in exp])
                       if exp and all(not pd.isna(e) for e in exp) else None)
            ms = {schedule.get((step, pi)) for pi, line in enumerate(lines) if s < len(line)}
            M = ms.pop() if len(ms) == 1 else None
            dev = (round((stage_rec - stage_both) / stage_both * 100, 6)
                   if stage_both and stage_rec is not None else None)
            rows.append([None if step < 0 else int(step), s, str(tuple(ranks)),
                         _us(np.mean(comp)) if comp else None, _us(p2p), _us(exposed),
                         round(exposed / stage_rep * 100, 2) if exposed is not None and stage_rep
                         else None,
                         _us(stage_rep), _us(stage_rec), dev, _us(bubble_rep), _us(bubble_rec),
                         M, "1F1B" if M else ""])
    return pd.DataFrame(rows, columns=STAGE_COLUMNS)


def _frame(t: pa.Table | None, steps: set) -> dict:
    """(step, rank) -> row of ``t`` for the ``steps`` (-1: no step number) p2p ops were seen in
    (a step_trace_time of 10^6 steps is ~1 GB as dicts)."""
    if t is None or t.num_rows == 0:
        return {}
    t = t.select(["rank", "step", "computing_ns", "stage_ns", "bubble_ns"])
    out = {}
    for rec in S.of_steps(t, set(steps) | ({None} if -1 in steps else set())).to_pylist():
        step = -1 if rec["step"] is None else rec["step"]
        out[(step, rec["rank"])] = rec
    return out


def _max(values):
    known = [v for v in values if v is not None and not pd.isna(v)]
    return max(known) if known else None


__all__ = ["P2P_OPS", "P2P_SCHEMA", "PIPELINE_COLUMNS", "STAGE_COLUMNS", "p2p_kind",
           "rank_p2p_ops", "one_f_one_b", "infer_1f1b", "pipelines", "build"]
