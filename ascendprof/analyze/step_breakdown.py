"""The per-step time breakdown (Computing, Communication(Not Overlapped), Free, ...), recomputed
from lower-level data, and its cross-check against what the profiler reported.

Spec §7.1: CANN builds, per device, the compute sections C (union of compute-kernel intervals) and
communication sections M (union of communication big ops), then Communication(Not Overlapped) =
M \\ C and Free = busy extent \\ (C ∪ M) (§7.1.b); torch_npu credits each resulting piece wholly to
the step whose window contains its start and sums per step (§7.1.c). :func:`recompute` does the
same from whatever lower-level input the rank has, in this order of preference:

1. ``timeline``: TIMELINE 'hardware' compute tasks + 'communication' big ops (threads
   "Group <g> Communication") -- the true recomputation; which tasks are compute is decided by
   what they are linked to (:func:`classify_hardware`: compute-op info, kernel_details rows,
   HCCL ops), not by a Task Type label that changed between releases;
2. ``overlap``: the TIMELINE 'overlap' track (the profiler's own Overlap Analysis pieces) summed
   per step -- a weaker check (same arithmetic as torch_npu, not independent data);
3. ``kernels``: KERNELS compute rows + communication big ops (KERNELS rows with Accelerator Core
   COMMUNICATION/HCCL, else COMM_OPS start + Elapse Time).

Deviation from §7.1.b, found on the torch_npu-2rank-levels data: the busy extent there is the hull
of C ∪ M (the MEMCPY_ASYNC tasks before the first kernel are not inside the profiler's Free), so
the hull of C ∪ M is used, not the span of all non-kernel tasks.
"""

from __future__ import annotations

import math

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ascendprof.model import schemas as S
from ascendprof.model import tasks
from ascendprof.analyze import intervals as I
from ascendprof.analyze.codes import distinct_mask

#: The nine step_trace_time.csv metrics: (CSV column, STEP_TRACE column) (spec §A.1).
METRICS = S.STEP_METRICS

#: Task types of compute kernels (kernel_details 'Accelerator Core', trace 'Task Type').
COMPUTE_TYPES = {
    "AI_CORE", "AI_VECTOR_CORE", "AIV", "AIC", "MIX_AIC", "MIX_AIV", "AI_CPU", "AICPU",
    "DSA", "DSA_SQE", "FFTS_PLUS", "KERNEL_AICORE", "KERNEL_AIVEC", "KERNEL_AICPU",
    "KERNEL_MIX_AIC", "KERNEL_MIX_AIV", "WRITE_BACK",
}
#: Runtime / communication task types and names that are not compute (trace 'Task Type' or name),
#: matched at the start, case-insensitively (RE2 syntax: evaluated by Arrow).
_NON_COMPUTE = (
    r"^(EVENT_|MEMCPY|PCIE_DMA|SDMA|NOTIFY|WRITE VALUE|WRITE_VALUE|PLACE_HOLDER|PROFILING_|RDMA|"
    r"REDUCE_INLINE|HCCL|COMMUNICATION|STARS_COMMON|CAPTURE_|MODEL_|STREAM_|LABEL_|BARRIER|"
    r"HCOM_)")
#: A runtime task's name: all capitals / digits / '_', or containing whitespace (the set
#: str.isspace() accepts, spelled out for RE2).
_RUNTIME_NAME = r"^[A-Z0-9_]+$|[\t\n\v\f\r\x1c-\x1f\x85\p{Z}]"
#: §7.1.b: MC2 helper kernels that CANN leaves out of the compute sections.
_EXCLUDED_SUFFIX = ("AicpuKernel", "AivKernel")
_BIG_OP_THREAD = r"^Group .* Communication$"

METHOD_TIMELINE = "timeline: Ascend Hardware compute tasks + HCCL big ops (interval union/difference)"
METHOD_OVERLAP = "overlap: profiler's Overlap Analysis events summed per step (weaker check)"
METHOD_KERNELS = ("kernels: kernel_details compute rows ({n}) + {comm} (interval "
                  "union/difference)")


def _text(values) -> pa.Array:
    """A string column (Arrow array, chunked array or list; non-text values as str()), nulls
    as ''."""
    if not isinstance(values, (pa.Array, pa.ChunkedArray)):
        values = pa.array([None if v is None else str(v) for v in values], pa.string())
    elif not pa.types.is_string(values.type):
        values = values.cast(pa.string())
    return pc.fill_null(values, "")


def _mask(arr) -> np.ndarray:
    return np.asarray(pc.fill_null(arr, False).to_numpy(zero_copy_only=False), bool)


def compute_mask(task_types, names, unknown: str = "name") -> np.ndarray:
    """Which device tasks count as compute for §7.1.b by their labels alone, one bool per row.

    ``task_types``: trace 'Task Type' or kernel_details 'Accelerator Core' per task; ``names``:
    the task names (Arrow string columns or lists; null allowed). Rule, per row: a name ending in
    AicpuKernel / AivKernel or starting with hcom_ (any case) is not compute; else a non-empty
    task type (trimmed, upper-cased) in :data:`COMPUTE_TYPES` is compute and one starting with a
    runtime / communication prefix is not; a task without a type is judged by its name: compute
    unless it looks like a runtime task (all capitals, or with whitespace) or starts with such a
    prefix. A task whose type is none of these (``Other`` in older releases, which types HCCL
    tasks, copies and helper tasks alike so) is judged by its name when ``unknown`` is
    ``"name"`` (kernel_details rows: compute ops by construction), and is not compute when it is
    ``"exclude"`` (device timeline tasks: a label that says nothing is no evidence of compute).
    Prefer the links of :func:`classify_hardware` where the input has them.
    """
    n = _text(names)
    raw_t = _text(task_types)
    t = pc.utf8_upper(pc.utf8_trim_whitespace(raw_t))
    has_t = pc.greater(pc.binary_length(raw_t), 0)
    excluded = pc.or_(pc.or_(pc.ends_with(n, _EXCLUDED_SUFFIX[0]),
                             pc.ends_with(n, _EXCLUDED_SUFFIX[1])),
                      pc.starts_with(pc.utf8_lower(n), tasks.COMM_NAME_PREFIX))
    compute_type = pc.and_(has_t, pc.is_in(t, value_set=pa.array(sorted(COMPUTE_TYPES))))
    other_type = pc.and_(has_t, pc.match_substring_regex(t, _NON_COMPUTE, ignore_case=True))
    if unknown == "exclude":
        other_type = pc.or_(other_type, pc.and_(has_t, pc.invert(compute_type)))
    name_ok = pc.invert(pc.or_(pc.match_substring_regex(n, _RUNTIME_NAME),
                               pc.match_substring_regex(n, _NON_COMPUTE, ignore_case=True)))
    keep = pc.or_(compute_type, pc.and_(pc.invert(other_type), name_ok))
    return _mask(pc.and_(pc.invert(excluded), keep))


def classify_hardware(hw: pa.Table, kernels: pa.Table | None) -> tuple[np.ndarray, str]:
    """Which TIMELINE 'hardware' tasks are compute for §7.1.b, by what they are linked to.

    ``hw``: TIMELINE rows of track 'hardware' (``category``, ``task_type``, ``name``,
    ``start_ns``); ``kernels``: the rank's KERNELS table or None. In order of preference:

    1. the input links tasks to compute-op info (``category`` 'compute': db TASK ⋈
       COMPUTE_TASK_INFO): exactly those, as CANN's overlap analysis takes them;
    2. kernel_details / op_summary rows (KERNELS, communication big ops left out): the tasks
       that start at the same ns as one of them (both come from the same device record);
    3. neither: tasks typed as compute (:func:`compute_mask` with ``unknown="exclude"``).

    A task linked to an HCCL op (``category`` 'communication') is never compute, and the MC2
    helper kernels (names ending in AicpuKernel / AivKernel) are left out as in §7.1.b.
    Returns (bool per row, how the tasks were classified, with counts).
    """
    cat = np.array(_text(hw.column("category")).to_pylist(), dtype=object)
    names = hw.column("name")
    n = _text(names)
    helper = _mask(pc.or_(pc.ends_with(n, _EXCLUDED_SUFFIX[0]),
                          pc.ends_with(n, _EXCLUDED_SUFFIX[1])))
    is_comm = cat == "communication"
    linked = f"{int(is_comm.sum())} linked to HCCL ops"
    if (cat == "compute").any():
        comp = (cat == "compute") & ~helper
        return comp, (f"tasks classified by their links: {int(comp.sum())} with compute-op "
                      f"info, {linked}, {int((cat == 'other').sum())} other")
    if kernels is not None and kernels.num_rows:
        is_k_comm = _comm_mask(kernels.column("accelerator_core"), kernels.column("name"))
        starts = kernels.column("start_ns").filter(pa.array(~is_k_comm)).drop_null()
        if len(starts):
            match = _mask(pc.is_in(hw.column("start_ns"), value_set=starts.unique()))
            comp = match & ~is_comm & ~helper
            found = len(pc.unique(hw.column("start_ns").filter(pa.array(comp))))
            return comp, (f"tasks classified by their links: {int(comp.sum())} matching a "
                          f"kernel_details compute row ({found} of {len(starts.unique())} "
                          f"rows found), {linked}")
    comp = compute_mask(hw.column("task_type"), names, unknown="exclude") & ~is_comm
    unknown = _mask(pc.and_(pc.greater(pc.binary_length(_text(hw.column("task_type"))), 0),
                            pc.invert(pc.is_in(pc.utf8_upper(_text(hw.column("task_type"))),
                                               value_set=pa.array(sorted(COMPUTE_TYPES))))))
    return comp, (f"tasks classified by task type (no compute-op info in the input): "
                  f"{int(comp.sum())} compute, {linked}, {int((unknown & ~is_comm).sum())} "
                  f"of other or unknown types left out")


def _comm_mask(cores, names) -> np.ndarray:
    """kernel_details rows that are communication big ops (:func:`ascendprof.model.tasks.comm_rows`)."""
    return _mask(tasks.comm_rows(_text(cores), _text(names)))


def _big_op_mask(threads) -> np.ndarray:
    """Timeline rows on an HCCL big-op thread ("Group <g> Communication")."""
    return _mask(pc.match_substring_regex(_text(threads), _BIG_OP_THREAD))


# --------------------------------------------------------------------------------------------
# the breakdown arithmetic


def breakdown(compute: I.Intervals, comm: I.Intervals, receive: I.Intervals,
              windows: list[tuple[int | None, int, int]],
              fwk_start: dict | None = None) -> list[dict]:
    """Per-window metrics in ns from compute / communication / hcom_receive intervals.

    ``windows``: (step, lo, hi) -- a piece belongs to the first window with ``lo <= start < hi``
    (§7.1.c, no clipping). ``fwk_start``: step -> ProfilerStep start for Preparing (else null).
    Returns one dict per window with the STEP_TRACE ``*_ns`` keys and ``step``.
    """
    C, M = I.union(compute), I.union(comm)
    CM = I.union_of(C, M)
    cno = I.difference(M, C)
    free = I.difference(I.hull(CM), CM)
    rec = I.make(*receive)
    order = sorted(range(len(windows)), key=lambda k: windows[k][1])
    lo = np.array([windows[k][1] for k in order], np.int64)
    hi = np.array([windows[k][2] for k in order], np.int64)

    def owner(starts: np.ndarray) -> np.ndarray:
        """Index into ``order`` of the first window holding each start, -1 if none."""
        out = np.full(starts.size, -1, np.int64)
        for j in range(len(lo)):
            out[(starts >= lo[j]) & (starts < hi[j]) & (out < 0)] = j
        return out

    def per_window(s: I.Intervals) -> np.ndarray:
        w = owner(s[0])
        return np.bincount(w[w >= 0], weights=(s[1] - s[0])[w >= 0],
                           minlength=len(lo)).astype(np.int64)

    comp_w, comm_w, cno_w, free_w, rec_w = (per_window(x) for x in (C, M, cno, free, rec))
    # Stage: e2e span of every piece torch_npu looks at, per window of its start
    rows = []
    ev_s = np.concatenate([C[0], M[0], cno[0], free[0], rec[0]])
    ev_e = np.concatenate([C[1], M[1], cno[1], free[1], rec[1]])
    ev_w = owner(ev_s)
    task_s = np.concatenate([C[0], M[0]])
    task_w = owner(task_s)
    for j, k in enumerate(order):
        step = windows[k][0]
        mine = ev_w == j
        stage = int(ev_e[mine].max() - ev_s[mine].min()) if mine.any() else 0
        first = task_s[task_w == j]
        prep = None
        if fwk_start and step in fwk_start and first.size:
            prep = int(first.min() - fwk_start[step])
        bubble = int(rec_w[j])
        rows.append({
            "step": step,
            "computing_ns": int(comp_w[j]),
            "comm_not_overlapped_ns": int(cno_w[j]),
            "overlapped_ns": int(comm_w[j] - cno_w[j]),
            "communication_ns": int(comm_w[j]),
            "free_ns": int(free_w[j]),
            "stage_ns": stage - bubble,
            "bubble_ns": bubble,
            "comm_not_overlapped_excl_receive_ns": max(int(cno_w[j]) - bubble, 0),
            "preparing_ns": prep,
        })
    return rows


# --------------------------------------------------------------------------------------------
# choosing the input


def _rank_rows(t: pa.Table | None, rank: int) -> pa.Table | None:
    if t is None or t.num_rows == 0:
        return None
    if "rank" in t.column_names:
        mm = pc.min_max(t["rank"]).as_py()
        if not (mm["min"] == mm["max"] == rank and t["rank"].null_count == 0):  # one rank's table
            t = t.filter(pc.equal(t["rank"], rank))
    return t if t.num_rows else None


def _col(t: pa.Table, name: str) -> list:
    return t.column(name).to_pylist()


def _ivals(t: pa.Table, mask=None, dur="dur_ns") -> I.Intervals:
    s = t.column("start_ns").to_numpy(zero_copy_only=False)
    d = t.column(dur).fill_null(0).to_numpy(zero_copy_only=False)
    if mask is not None:
        mask = np.asarray(mask, bool)
        s, d = s[mask], d[mask]
    ok = ~np.isnan(s.astype(float)) if s.dtype.kind == "f" else np.ones(s.size, bool)
    return I.from_durations(s[ok].astype(np.int64), d[ok].astype(np.int64))


def _windows(tables, rank, data_span: tuple[int, int] | None):
    """(step, lo, hi) windows and a description. STEPS first, else kernel Step Id spans, else one
    window over all the data."""
    steps = _rank_rows(tables.get(S.STEPS), rank)
    if steps is not None:
        w = [(s, int(a), int(b)) for s, a, b in zip(_col(steps, "step"), _col(steps, "start_ns"),
                                                     _col(steps, "end_ns")) if a is not None]
        if w:
            origin = ", ".join(sorted({o for o in _col(steps, "origin") if o})) or "STEPS"
            return w, f"step windows from {origin}"
    k = _rank_rows(tables.get(S.KERNELS), rank)
    if k is not None and k["step"].null_count < k.num_rows:
        k = k.select(["step", "start_ns", "dur_ns"])
        k = k.filter(pc.and_(pc.is_valid(k["step"]), pc.is_valid(k["start_ns"])))
        end = pc.add(k["start_ns"], pc.fill_null(k["dur_ns"], 0))
        g = pa.table({"step": k["step"], "s": k["start_ns"], "e": end}).group_by("step").aggregate(
            [("s", "min"), ("e", "max")])
        w = [(st, a, b + 1) for st, a, b in zip(_col(g, "step"), _col(g, "s_min"), _col(g, "e_max"))
             if a is not None]  # a step whose kernels have no start time (unreadable) has none
        if data_span is not None and len(w) == 1:  # a single step owns everything
            w = [(w[0][0], min(w[0][1], data_span[0]), max(w[0][2], data_span[1] + 1))]
        return w, "step windows from kernel_details Step Id spans"
    if data_span is None:
        return [], ""
    return [(None, data_span[0], data_span[1] + 1)], "one window over all data (no step windows)"


def _fwk_starts(tables, rank) -> dict:
    tl = _rank_rows(tables.get(S.TIMELINE), rank)
    if tl is None:
        return {}
    st = tl.filter(pc.equal(tl["track"], "step"))
    return {s: a for s, a in zip(_col(st, "step"), _col(st, "start_ns")) if s is not None}


def _receive_mask(names) -> np.ndarray:
    return _mask(pc.starts_with(pc.utf8_lower(_text(names)), "hcom_receive"))


def _span(*sets: I.Intervals) -> tuple[int, int] | None:
    h = I.hull(I.union_of(*sets))
    return (int(h[0][0]), int(h[1][0])) if h[0].size else None


def _from_timeline(tables, rank):
    tl = _rank_rows(tables.get(S.TIMELINE), rank)
    if tl is None:
        return None, "no trace_view timeline"
    track = np.array(_col(tl, "track"), dtype=object)
    hw = tl.filter(pa.array(track == "hardware"))
    if hw.num_rows == 0:
        return None, "timeline has no Ascend Hardware tasks"
    comp_mask, how = classify_hardware(hw, _rank_rows(tables.get(S.KERNELS), rank))
    if not comp_mask.any():
        return None, f"timeline has no compute kernels among the Ascend Hardware tasks ({how})"
    cm = tl.filter(pa.array(track == "communication"))
    big = _big_op_mask(cm.column("thread"))
    compute = _ivals(hw, comp_mask)
    comm, comm_how = comm_sections(cm, big)
    receive = _ivals(cm, big & _receive_mask(cm.column("name")))
    note = "" if big.any() or comm_how else "; no HCCL big ops in the timeline (communication = 0)"
    method = METHOD_TIMELINE if not comm_how else METHOD_TIMELINE.replace("HCCL big ops", comm_how)
    return (compute, comm, receive), f"{method} ({how}){note}"


#: task_type of the db's per-op communication sections (readers.db._hccl_task_extents)
_FROM_OP_SPAN = "op span (no tasks)"


def comm_sections(cm: pa.Table, big: np.ndarray) -> tuple[I.Intervals, str]:
    """The communication intervals of a rank's 'communication' TIMELINE rows ``cm`` (``big``:
    the HCCL big-op rows) and how they were found ("" for the big ops' spans).

    When the input gives per HCCL op the extent of its tasks (rows off the big-op threads with
    ``category`` 'communication': db TASK ⋈ COMMUNICATION_TASK_INFO, and the op's own span,
    task_type ``op span (no tasks)``, for an op without tasks), the communication section is
    their union -- an op's span may be wider than its tasks (torch_npu 2024 db exports).
    Otherwise (text trace_view, whose planes carry no link) the big ops' spans."""
    linked = np.zeros(len(big), bool)
    if "category" in cm.column_names:
        linked = _mask(pc.equal(cm.column("category"), "communication")) & ~big
    if not linked.any():
        return _ivals(cm, big), ""
    spans = linked & _mask(pc.equal(cm.column("task_type"), _FROM_OP_SPAN))
    n_tasks, n_spans = int((linked & ~spans).sum()), int(spans.sum())
    how = f"HCCL ops' task extents ({n_tasks} ops, tasks linked by the profiler)"
    if n_spans:
        how += f" + the spans of {n_spans} HCCL op(s) without tasks"
    return _ivals(cm, linked), how


def _from_overlap(tables, rank):
    tl = _rank_rows(tables.get(S.TIMELINE), rank)
    if tl is None:
        return None, "no trace_view timeline"
    ov = tl.filter(pc.equal(tl["track"], "overlap"))
    if ov.num_rows == 0:
        return None, "timeline has no Overlap Analysis events"
    return ov, METHOD_OVERLAP


def _from_kernels(tables, rank):
    k = _rank_rows(tables.get(S.KERNELS), rank)
    if k is None:
        return None, "no kernel_details (KERNELS) for this rank"
    cores, names = k.column("accelerator_core"), k.column("name")
    # per distinct (core, name): a rank of millions of kernels has a few thousand
    is_comm = distinct_mask(_comm_mask, cores, names)
    comp_mask = ~is_comm & distinct_mask(compute_mask, cores, names)
    if not comp_mask.any():
        return None, "kernel_details has no compute rows"
    if is_comm.any():
        comm = _ivals(k, is_comm)
        receive = _ivals(k, is_comm & distinct_mask(_receive_mask, names))
        src = "kernel_details COMMUNICATION rows (big ops)"
    else:
        ops = _rank_rows(tables.get(S.COMM_OPS), rank)
        if ops is None:
            comm, receive = I.empty(), I.empty()
            src = "no communication ops (communication = 0)"
        else:
            comm = _ivals(ops, dur="elapse_ns")
            receive = _ivals(ops, _receive_mask(ops.column("op_name")), dur="elapse_ns")
            src = "communication.json ops (Start Timestamp + Elapse Time)"
    return (_ivals(k, comp_mask), comm, receive), METHOD_KERNELS.format(n=int(comp_mask.sum()),
                                                                        comm=src)


def _device_id(tables, rank):
    for name in (S.STEP_TRACE, S.KERNELS):
        t = _rank_rows(tables.get(name), rank)
        if t is not None and "device_id" in t.column_names:
            v = pc.drop_null(t["device_id"])
            if len(v):
                return v[0].as_py()
    return None


def recompute(tables: dict[str, pa.Table], rank: int) -> tuple[pa.Table | None, str]:
    """The nine step_trace_time metrics per step, recomputed (STEP_TRACE schema, int ns).

    Input: one rank's tables (TIMELINE / KERNELS / COMM_OPS / STEPS / STEP_TRACE, any subset).
    Chooses the best available method (module doc) and returns ``(table, method)`` where method
    names the input used and the step windows; when nothing suffices returns ``(None, reason)``
    naming what is missing. Preparing is null unless the ProfilerStep start is known (TIMELINE
    'step' track). Never raises for missing data.
    """
    reasons = []
    fwk = _fwk_starts(tables, rank)
    for build in (_from_timeline, _from_overlap, _from_kernels):
        got, how = build(tables, rank)
        if got is None:
            reasons.append(how)
            continue
        if build is _from_overlap:
            return _overlap_table(tables, rank, got, fwk, how)
        compute, comm, receive = got
        windows, wdesc = _windows(tables, rank, _span(compute, comm))
        rows = breakdown(compute, comm, receive, windows, fwk)
        return _table(rows, rank, _device_id(tables, rank)), f"{how}; {wdesc}"
    return None, "cannot recompute: " + "; ".join(dict.fromkeys(reasons))


def _overlap_table(tables, rank, ov, fwk, how):
    threads = np.array(_col(ov, "thread"), dtype=object)
    sets = {t: _ivals(ov, threads == t) for t in
            ("Computing", "Communication", "Communication(Not Overlapped)", "Free")}
    tl = _rank_rows(tables.get(S.TIMELINE), rank)
    cm = tl.filter(pc.equal(tl["track"], "communication"))
    big = _big_op_mask(cm.column("thread"))
    receive = _ivals(cm, big & _receive_mask(cm.column("name")))
    windows, wdesc = _windows(tables, rank, _span(*sets.values()))
    rows = _sum_overlap(sets, receive, windows, fwk)
    return _table(rows, rank, _device_id(tables, rank)), f"{how}; {wdesc}"


def _sum_overlap(sets, receive, windows, fwk) -> list[dict]:
    """§7.1.c verbatim: sum each event's duration into the step holding its start."""
    order = sorted(range(len(windows)), key=lambda k: windows[k][1])
    rows = []
    for k in order:
        step, lo, hi = windows[k]
        sums, s_min, e_max, first = {}, [], [], []
        for name, (s, e) in list(sets.items()) + [("receive", receive)]:
            m = (s >= lo) & (s < hi)
            sums[name] = int((e[m] - s[m]).sum())
            if m.any():
                s_min.append(s[m].min())
                e_max.append(e[m].max())
                if name in ("Computing", "Communication"):
                    first.append(s[m].min())
        bubble = sums["receive"]
        cno = sums["Communication(Not Overlapped)"]
        stage = int(max(e_max) - min(s_min)) if s_min else 0
        prep = int(min(first) - fwk[step]) if first and step in fwk else None
        rows.append({
            "step": step, "computing_ns": sums["Computing"], "comm_not_overlapped_ns": cno,
            "overlapped_ns": sums["Communication"] - cno, "communication_ns": sums["Communication"],
            "free_ns": sums["Free"], "stage_ns": stage - bubble, "bubble_ns": bubble,
            "comm_not_overlapped_excl_receive_ns": max(cno - bubble, 0), "preparing_ns": prep,
        })
    return rows


def _table(rows: list[dict], rank: int, device_id) -> pa.Table:
    cols = {k: [r[k] for r in rows] for k in rows[0]} if rows else {}
    t = pa.table({"rank": pa.array([rank] * len(rows), pa.int32()),
                  "device_id": pa.array([device_id] * len(rows), pa.int32()),
                  **{k: pa.array(v, pa.int32() if k == "step" else pa.int64())
                     for k, v in cols.items()}})
    return S.conform(S.STEP_TRACE, t)


# --------------------------------------------------------------------------------------------
# cross-check

CHECK_COLUMNS = ["Rank", "Step", "Metric", "Reported(us)", "Recomputed(us)", "Deviation(%)",
                 "Method", "Note"]
#: Deviation above which a row gets a note (percent).
NOTE_THRESHOLD_PCT = 1.0


def _by_step(t: pa.Table | None, steps=None, at: dict | None = None) -> dict:
    """step -> row (a dict) of ``t``, the last row of a repeated step; only ``steps`` when given
    (a reported table of 10^6 steps is ~1 GB as dicts, and most are summarised), found with
    ``at`` (:func:`_step_rows` of ``t``) when given."""
    if t is None or t.num_rows == 0:
        return {}
    if steps is not None:
        at = _step_rows(t) if at is None else at
        t = t.take(pa.array(sorted(at[s] for s in steps if s in at), pa.int64()))
    return {r["step"]: r for r in t.to_pylist()}


def _step_rows(t: pa.Table | None) -> dict:
    """step -> index of its last row in ``t``: the keys of :func:`_by_step`, in its order (a
    repeated step keeps its first place)."""
    if t is None or t.num_rows == 0:
        return {}
    at: dict = {}
    for i, s in enumerate(t.column("step").to_pylist()):
        at[s] = i
    return at


def _many_unchecked(reported: pa.Table | None, rec: dict):
    """What check_table derives from the reported steps (:func:`_step_rows`, :func:`_pair_steps`,
    the steps without a recomputed value), on arrays, for a reported table of more than
    MAX_UNCHECKED_STEPS steps most of which have no recomputed value: (the steps checked one by
    one, the number of steps summarised, their first and last, the reported row of each checked
    step). None otherwise (the general path): at 10^6 steps its dicts and lists of Python ints
    were ~0.2 GB."""
    if reported is None or reported.num_rows <= MAX_UNCHECKED_STEPS:
        return None
    col = reported.column("step").combine_chunks()
    valid = col.is_valid().to_numpy(zero_copy_only=False)
    vals = col.drop_null().to_numpy().astype(np.int64)
    uniq, has_none = np.unique(vals), col.null_count > 0
    if len(uniq) + has_none <= 1:  # one reported step: it may pair with an unnamed window
        return None
    known = np.array([k for k in rec if k is not None], dtype=np.int64)
    lost = uniq[~np.isin(uniq, known)]
    n_lost = len(lost) + (has_none and None not in rec)
    if n_lost <= MAX_UNCHECKED_STEPS:
        return None
    at: dict = {}
    where = np.flatnonzero(valid)
    for i in np.flatnonzero(np.isin(vals, known)):  # in row order: the last row of a step wins
        at[int(vals[i])] = int(where[i])
    if has_none and None in rec:
        at[None] = int(np.flatnonzero(~valid)[-1])
    steps = sorted(rec, key=lambda s: (s is None, s if s is not None else 0))
    span = (int(lost[0]), int(lost[-1])) if len(lost) else (None, None)
    return steps, n_lost, span, at


def _pair_steps(rep: dict, rec: dict) -> list:
    """Steps of both sides; a lone unnamed recomputed window pairs with a lone reported step."""
    if len(rep) == 1 and len(rec) == 1 and None in rec and None not in rep:
        only = next(iter(rep))
        rec[only] = rec.pop(None)
    steps = list(dict.fromkeys(list(rep) + list(rec)))
    return sorted(steps, key=lambda s: (s is None, s if s is not None else 0))


def check_table(per_rank: dict[int, tuple]):
    """The step_trace_check table: reported vs recomputed, one row per rank / step / metric.

    ``per_rank``: rank -> (reported STEP_TRACE table or None, recomputed STEP_TRACE table or None,
    method string from :func:`recompute`). Returns a pandas DataFrame with :data:`CHECK_COLUMNS`:
    values in us (float), Deviation(%) = (recomputed - reported) / reported * 100, empty when the
    reported value is 0 or either side is missing. Note says why a value is missing and flags
    deviations above :data:`NOTE_THRESHOLD_PCT`. A rank that could not be recomputed gets rows whose
    Note is the reason (``method``). More than :data:`MAX_UNCHECKED_STEPS` steps of one rank
    without a recomputed value are summarised in one row per metric (Step empty, the Note
    says how many and which); ``df.attrs["summarised"]`` maps rank -> that number.
    """
    import pandas as pd

    out = []
    summarised: dict[int, int] = {}
    for rank in sorted(per_rank):
        reported, recomputed, method = per_rank[rank]
        rec = _by_step(recomputed)
        many = _many_unchecked(reported, rec)
        if many is not None:  # found on arrays, without a Python object per step
            steps, n_lost, (lo, hi), rep = many
        else:
            rep = _step_rows(reported)
            if not rep and not rec:
                for col, _ in METRICS:
                    out.append([rank, None, col, None, None, None, method,
                                "not reported and not recomputed: " + (method or "no data")])
                continue
            steps = _pair_steps(rep, rec)
            if rec:  # steps the recomputation does not cover tell nothing step by step
                lost = [st for st in steps if st not in rec]
            else:
                lost = list(steps)
            n_lost, (lo, hi) = len(lost), _step_span(lost)
            if n_lost > MAX_UNCHECKED_STEPS:
                gone = set(lost)
                steps = [st for st in steps if st not in gone]
        if n_lost > MAX_UNCHECKED_STEPS:  # bounded output: one row per metric for them
            summarised[rank] = n_lost
            why = ("step not found in the recomputed data" if rec
                   else (method or "not recomputed"))
            for col, _ in METRICS:
                out.append([rank, None, col, None, None, None, method,
                            f"{n_lost} steps ({lo}..{hi}): {why}; summarised in this row "
                            f"(more than {MAX_UNCHECKED_STEPS} such steps)"])
        rep = _by_step(reported, steps, rep)
        for step in steps:
            r_row, c_row = rep.get(step), rec.get(step)
            for col, key in METRICS:
                rv = None if r_row is None or r_row.get(key) is None else r_row[key] / 1000
                cv = None if c_row is None or c_row.get(key) is None else c_row[key] / 1000
                dev, note = None, ""
                if recomputed is None or not rec:
                    note = method or "not recomputed"
                elif c_row is None:
                    note = "step not found in the recomputed data"
                elif cv is None:
                    note = ("ProfilerStep start unknown (no framework events in the input)"
                            if key == "preparing_ns" else "not recomputable from this input")
                elif rv is None:
                    note = "not reported by the profiler" if r_row is None else "reported value missing"
                elif rv == 0:
                    note = "" if cv == 0 else f"reported 0, recomputed {cv:.3f} us"
                else:
                    dev = (cv - rv) / rv * 100
                    if abs(dev) > NOTE_THRESHOLD_PCT:
                        note = (f"recomputed differs by {dev:+.2f}% ({cv - rv:+.3f} us) beyond "
                                f"{NOTE_THRESHOLD_PCT:g}%")
                out.append([rank, step, col, rv, cv, dev, method, note])
    df = pd.DataFrame(out, columns=CHECK_COLUMNS)
    df["Step"] = df["Step"].astype("Int64")
    for c in ("Reported(us)", "Recomputed(us)", "Deviation(%)"):
        df[c] = df[c].astype("float64")
    df.attrs["summarised"] = summarised  # rank -> steps summarised (for problems.csv)
    return df


#: Above this many steps of one rank that the recomputation does not cover (a step_trace_time
#: of 10^6 steps beside kernels of a few), step_trace_check.csv holds one row per metric for
#: them instead of one per step and metric (4 GB of rows that each said "not found").
MAX_UNCHECKED_STEPS = 1000


def _step_span(steps) -> tuple:
    known = [s for s in steps if s is not None]
    return (min(known), max(known)) if known else (None, None)


# --------------------------------------------------------------------------------------------
# per-rank verdict on the cross-check

#: The metrics whose recomputation must agree with the profiler's (issue #16): the two that
#: say whether a rank computes or waits.
CHECKED_METRICS = ("Computing", "Communication(Not Overlapped)")
#: Deviation (percent) above which a rank's recomputed breakdown is reported as a problem.
DEVIATION_LIMIT_PCT = 1.0
#: Below this many us a difference is noise whatever the ratio (a reported 0 against a few ns).
_NOISE_US = 1.0


def rank_checks(check) -> list[dict]:
    """One verdict per rank on the step_trace_check table (:func:`check_table`).

    Returns, per rank in order, ``{"rank", "status", "used", "metrics", "reason"}``:

    - ``status``: ``"agrees"`` (every step's Computing and Communication(Not Overlapped)
      recomputed within :data:`DEVIATION_LIMIT_PCT` of the profiler's), ``"deviates"`` (some
      step beyond it), ``"not_checked"`` (the profiler reports values, nothing lower-level to
      recompute them from), ``"recomputed_only"`` (no values from the profiler: the recomputed
      ones stand alone), ``"none"``;
    - ``used``: which values the step breakdown of this rank (cluster_step_trace_time.csv, the
      summary, the verdicts) is built on: ``"reported"``, ``"recomputed"`` or None;
    - ``metrics``: for each of :data:`CHECKED_METRICS` the step with the largest deviation:
      ``{"step", "reported_us", "recomputed_us", "deviation_pct"}`` (deviation null when the
      reported value is 0; us floats);
    - ``reason``: one sentence for problems.csv and the summary ('' only when ``agrees``).
    """
    out = []
    if check is None or not len(check):
        return out
    # numpy columns split by rank once: a pandas groupby and boolean frame per rank cost
    # ~20 ms a rank, most of the cluster step at 1024 ranks
    ranks = check["Rank"].to_numpy()
    order = np.argsort(ranks, kind="stable")
    keys, starts = np.unique(ranks[order], return_index=True)
    checked = check["Metric"].isin(CHECKED_METRICS).to_numpy()[order]
    metric = check["Metric"].to_numpy(dtype=object)[order]
    method_col = check["Method"].to_numpy(dtype=object)[order]
    step_col = check["Step"].to_numpy(dtype=float, na_value=np.nan)[order]
    reported = check["Reported(us)"].to_numpy(dtype=float, na_value=np.nan)[order]
    recomputed = check["Recomputed(us)"].to_numpy(dtype=float, na_value=np.nan)[order]
    deviation = check["Deviation(%)"].to_numpy(dtype=float, na_value=np.nan)[order]
    for rank, lo, hi in zip(keys, starts, list(starts[1:]) + [len(order)]):
        sel = np.arange(lo, hi)[checked[lo:hi]]
        method = next((m for m in method_col[sel] if isinstance(m, str) and m), "")
        rep = ~np.isnan(reported[sel])
        rec = ~np.isnan(recomputed[sel])
        metrics, bad = {}, []
        for name in CHECKED_METRICS:
            m = sel[(metric[sel] == name) & rep & rec]
            if not len(m):
                continue
            diff = np.abs(recomputed[m] - reported[m])
            dev = np.abs(deviation[m])
            # a deviation in % where the profiler's value is not 0, else "beyond noise" first
            score = np.where(np.isnan(dev), np.where(diff > _NOISE_US, math.inf, 0.0), dev)
            w = m[int(np.argmax(score))]  # the first of equal worst, as pandas' idxmax
            d = None if np.isnan(deviation[w]) else float(deviation[w])
            metrics[name] = {"step": None if np.isnan(step_col[w]) else int(step_col[w]),
                             "reported_us": float(reported[w]),
                             "recomputed_us": float(recomputed[w]),
                             "deviation_pct": d}
            beyond = (d is not None and abs(d) > DEVIATION_LIMIT_PCT) or (
                d is None and abs(recomputed[w] - reported[w]) > _NOISE_US)
            if beyond:
                bad.append(name)
        unpaired = sel[rep & ~rec] if rec.any() else sel[:0]
        if bad:
            status, used = "deviates", "reported"
            parts = []
            for name in bad:
                v = metrics[name]
                pct = ("" if v["deviation_pct"] is None else f" ({v['deviation_pct']:+.1f} %)")
                step = "" if v["step"] is None else f" in step {v['step']}"
                parts.append(f"recomputed {name} {v['recomputed_us']:.1f} us against the "
                             f"profiler's {v['reported_us']:.1f} us{pct}{step}")
            reason = ("; ".join(parts) + f" (limit {DEVIATION_LIMIT_PCT:g} %). Recomputed by "
                      f"{method}. The lower-level input may be incomplete (a cut-down "
                      f"kernel_details.csv or trace) or labelled otherwise than the files the "
                      f"profiler used; the profiler's values are used")
        elif rep.any() and not rec.any():
            status, used = "not_checked", "reported"
            reason = (f"the profiler's step breakdown could not be cross-checked ({method}); "
                      f"its values are used unchecked")
        elif rec.any() and not rep.any():
            status, used = "recomputed_only", "recomputed"
            reason = (f"no step breakdown from the profiler (step_trace_time.csv / "
                      f"StepTraceTime): the recomputed one is used, not checked against it "
                      f"({method})")
        elif not rec.any():
            status, used = "none", None
            reason = (f"no step breakdown for this rank: none from the profiler, and it cannot "
                      f"be recomputed ({method})")
        else:
            status, used, reason = "agrees", "reported", ""
            if len(unpaired):
                steps = sorted({int(s) for s in step_col[unpaired] if not np.isnan(s)})
                status = "not_checked"
                reason = (f"step(s) {', '.join(map(str, steps))} of the profiler's breakdown "
                          f"not found in the recomputed data ({method}); used unchecked")
        out.append({"rank": int(rank), "status": status, "used": used, "metrics": metrics,
                    "reason": reason})
    return out
