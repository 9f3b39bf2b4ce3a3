"""Schedule advice: why the device waits for the host.

Rules: device idle within the step and what the host did meanwhile (``schedule.device_idle``:
host-bound dispatch vs host stalls), host-device synchronisation (``schedule.synchronize``),
the dataloader (``schedule.dataloader``), Python garbage collection seen
(``schedule.gc``) or conjectured from long idle gaps without host API activity
(``schedule.conjectured_gc``) and SyncBatchNorm (``schedule.syncbn``).

Device idle gaps are the complement of the union of all device tasks of KERNELS (compute and
communication) inside each step window (STEPS, else the span of the step's kernels).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ascendprof.analyze import intervals as I
from ascendprof.analyze.advice.base import Rule, Skip, finding, ms, severity_by_share, us
from ascendprof.model import schemas as S

# ----------------------------------------------------------------------------- device gaps


def device_gaps(ctx) -> pd.DataFrame:
    """Idle gaps of the device inside each step: columns step, start_ns, end_ns, dur_ns (the
    device ran no task of KERNELS). Empty when the rank has no kernels."""
    def f():
        import pyarrow.compute as pc

        cols = ["step", "start_ns", "end_ns", "dur_ns"]
        t = ctx.tables.get(S.KERNELS)
        if t is None or t.num_rows == 0:
            return pd.DataFrame(columns=cols)
        t = t.select(["step", "start_ns", "dur_ns"])
        if t["start_ns"].null_count or t["dur_ns"].null_count:
            t = t.filter(pc.and_(pc.is_valid(t["start_ns"]), pc.is_valid(t["dur_ns"])))
        if t.num_rows == 0:
            return pd.DataFrame(columns=cols)
        start = t["start_ns"].to_numpy()
        dur = t["dur_ns"].to_numpy()
        busy = I.union(I.from_durations(start, dur))
        parts = []
        for step, lo, hi in _windows(ctx, t, start, dur):
            s_, e_ = I.clip(busy, lo, hi)
            if s_.size < 2:
                continue
            gs, ge = e_[:-1], s_[1:]  # between consecutive busy pieces
            parts.append(pd.DataFrame({"step": np.full(gs.size, np.nan if step is None
                                                       else step), "start_ns": gs,
                                       "end_ns": ge, "dur_ns": ge - gs}))
        return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=cols)
    return ctx._memo("device_gaps", f)


def _windows(ctx, t, start: np.ndarray, dur: np.ndarray) -> list[tuple]:
    st = ctx.tables.get(S.STEPS)
    if st is not None and st.num_rows:
        rows = [(s_, lo, hi) for s_, lo, hi in zip(st["step"].to_pylist(),
                                                    st["start_ns"].to_pylist(),
                                                    st["end_ns"].to_pylist())
                if lo is not None and hi is not None]
        if rows:
            return rows
    step = t["step"].to_numpy(zero_copy_only=False)
    ok = ~pd.isna(step)
    if ok.any():
        out = []
        for s_ in np.unique(step[ok].astype(np.int64)):
            m = ok & (step == s_)
            out.append((int(s_), int(start[m].min()), int((start[m] + dur[m]).max())))
        return out
    return [(None, int(start.min()), int((start + dur).max()))]


def host_columns(ctx) -> dict:
    """HOST_EVENTS' columns as numpy arrays, as its pandas frame (:meth:`Context.df`) holds them
    (texts as objects, missing as NaN; an integer column with nulls as float), plus ``lower``:
    the names in lower case (None where missing). Computed once per rank."""
    def f():
        h = ctx.df(S.HOST_EVENTS)
        out = {c: h[c].to_numpy() for c in h.columns}
        out["lower"] = [n.lower() if isinstance(n, str) else None for n in out["name"].tolist()]
        return out
    return ctx._memo("host_columns", f)


def host_activity(ctx, lo: int, hi: int, top: int = 3) -> list[dict]:
    """What the host was in during ``[lo, hi)``: the HOST_EVENTS (not ProfilerStep# or the
    dataloader's nested Python frames, not Node@launch) overlapping it most, with the overlap."""
    names, start, end = ctx._memo("host_activity", lambda: _host_rows(host_columns(ctx)))
    if not len(names):
        return []
    ov = np.minimum(end, hi) - np.maximum(start, lo)  # numpy: called per gap, on every event
    idx = np.flatnonzero(ov > 0)
    idx = idx[np.argsort(-ov[idx], kind="stable")]
    out, seen = [], set()
    for i in idx:
        if names[i] in seen:
            continue
        seen.add(names[i])
        out.append({"name": names[i], "overlap_ms": ms(int(ov[i]))})
        if len(out) >= top:
            break
    return out


def _host_rows(h: dict):
    """(names, start, end) numpy arrays of the HOST_EVENTS host_activity looks at (``h``:
    :func:`host_columns`)."""
    keep = np.array([not (isinstance(n, str) and n.startswith("ProfilerStep#"))
                     and n != "Node@launch" for n in h["name"].tolist()], bool)
    int_ns = lambda v: np.where(pd.isna(v), 0, v).astype(np.int64)  # noqa: E731
    start = int_ns(h["start_ns"][keep])
    return h["name"][keep].astype(object), start, start + int_ns(h["dur_ns"][keep])


def profiler_overhead(meta: dict) -> list[str]:
    """Profiler options of this collection that add host time to every operator
    (profiler_info.json config.common_config, spec §A.12): with_stack, record_shapes,
    profile_memory, when true."""
    info = (meta or {}).get("profiler_info") or {}
    cfg = ((info.get("config") or {}).get("common_config") or {}) if isinstance(info, dict) else {}
    return [k for k in ("with_stack", "record_shapes", "profile_memory") if cfg.get(k) is True]


# ----------------------------------------------------------------------------- device idle

#: Free (device idle) from this share of the step is worth acting on (ascendprof; the seeds
#: judge Free only by its spread over the ranks of a group, seed 000 "调度问题", and
#: msprof-analyze's overall summary reports it without a threshold).
IDLE_PCT = 10.0
#: Gaps shorter than this are dispatch gaps (the host launches each task just in time: seed
#: 000's vertical HostToDevice lines); longer ones are host stalls. 1 ms is ~20 kernel launches
#: (a launch costs 5-50 us on the host: KernelLaunch in api_statistic of the real exports).
STALL_GAP_US = 1000.0
#: Gaps below this are the device switching between queued tasks, not waiting for the host
#: (ascendprof: on the real exports 45-56 % of the gaps are under 5 us and hold < 0.5 % of Free).
SWITCH_GAP_US = 10.0
TOP_GAPS = 5


def _device_idle(ctx):
    if ctx.free_ns is None:
        # without the profiler's Free the kernel list alone may not hold every device task
        # (legacy HWTS timelines list AI Core tasks only): a gap there may be AI CPU or HCCL work
        raise Skip("no step breakdown from the profiler (Free); the kernels alone may not list "
                   "every device task")
    free = ctx.free_ns
    share = ctx.share(free)
    if share is None or share < IDLE_PCT:
        return None
    gaps = device_gaps(ctx)
    stall = gaps[gaps["dur_ns"] >= STALL_GAP_US * 1000]
    d = gaps["dur_ns"]
    small = gaps[(d < STALL_GAP_US * 1000) & (d >= SWITCH_GAP_US * 1000)]
    switch = gaps[gaps["dur_ns"] < SWITCH_GAP_US * 1000]
    stall_ns, small_ns = ctx.per_step(stall["dur_ns"].sum()), ctx.per_step(small["dur_ns"].sum())
    largest = []
    for r in gaps.sort_values("dur_ns", ascending=False).head(TOP_GAPS).itertuples():
        largest.append({"step": None if pd.isna(r.step) else int(r.step),
                        "start_ns": int(r.start_ns), "dur_ms": ms(r.dur_ns),
                        "host": host_activity(ctx, int(r.start_ns), int(r.end_ns))})
    stalls = stall_ns >= small_ns
    launch = _launch_evidence(ctx, gaps)
    evidence = {"free_us_per_step": us(free), "free_pct_of_step": share,
                "gaps_per_step": round(ctx.per_step(len(gaps)), 1),
                "task_switch_gaps": {"count_per_step": round(ctx.per_step(len(switch)), 1),
                                     "us_per_step": us(ctx.per_step(switch["dur_ns"].sum()))},
                "dispatch_gaps": {"count_per_step": round(ctx.per_step(len(small)), 1),
                                  "us_per_step": us(small_ns),
                                  "median_us": us(small["dur_ns"].median()) if len(small)
                                  else None},
                "stall_gaps": {"count_per_step": round(ctx.per_step(len(stall)), 1),
                               "us_per_step": us(stall_ns)},
                "largest_gaps": largest,
                "host_events_read": bool(len(ctx.df(S.HOST_EVENTS))),
                "profiler_options_adding_host_time": profiler_overhead(ctx.meta)}
    if launch:
        evidence["launch"] = launch
    if stalls:
        held: dict = {}  # host activity weighted by its overlap with the largest gaps
        for g in largest:
            for a in g["host"]:
                held[a["name"]] = held.get(a["name"], 0.0) + a["overlap_ms"]
        during = ""
        if held:
            common = max(held, key=held.get)
            during = f"; the host was mostly in {common} during the largest ones"
        elif not evidence["host_events_read"]:
            during = ("; run with --advice all to see what the host did meanwhile"
                      if ctx.meta.get("advice_not_read") else
                      "; the collection has no host timeline to tell what the host did")
        message = (f"The device idles {share:.1f}% of the step ({us(free) / 1000:.1f} ms), "
                   f"mostly in {len(stall)} gap(s) of {STALL_GAP_US / 1000:g} ms or more "
                   f"({us(stall_ns) / 1000:.1f} ms per step){during}.")
        advice = ["Find what the host does during the largest gaps (evidence.largest_gaps: "
                  "synchronisation such as .item()/.cpu()/print of device tensors, data loading, "
                  "Python work between steps) and move it off the step or make it asynchronous."]
    else:
        message = (f"The device idles {share:.1f}% of the step ({us(free) / 1000:.1f} ms), "
                   f"{us(small_ns) / 1000:.1f} ms of it in {ctx.per_step(len(small)):.0f} gap(s) "
                   f"of {SWITCH_GAP_US:g} us to {STALL_GAP_US / 1000:g} ms per step (median "
                   f"{evidence['dispatch_gaps']['median_us'] or 0:.0f} us): the host does not "
                   f"launch operators as fast as the device runs them (host-bound dispatch).")
        if launch:
            message += (f" Launch delay median {launch['delay_median_us']:.0f} us; "
                        f"{launch['idle_before_launch_us_per_step'] / 1000:.1f} ms of idle per "
                        f"step is in gaps whose next task was launched only after they began "
                        f"(dispatch.csv).")
        advice = ["Enable the level-2 task queue: export TASK_QUEUE_ENABLE=2.",
                  "Bind the training processes to the CPU cores of the card's NUMA node "
                  "(CPU_AFFINITY_CONF=1 with torch_npu, or taskset/numactl).",
                  "Launch fewer, larger operators: fused operators and optimizers "
                  "(torch_npu.optim.NpuFused*, foreach), graph mode (torchair) or larger "
                  "micro-batches.",
                  "Raise ACLNN_CACHE_LIMIT (e.g. 100000) so aclnn executors are not rebuilt."]
        over = evidence["profiler_options_adding_host_time"]
        if over:
            advice.append(f"This collection ran with {', '.join(over)}=True, which adds host "
                          f"time to every operator: confirm the gaps with a collection "
                          f"without {'it' if len(over) == 1 else 'them'}.")
    return finding(RULES[0], [ctx.rank], key=f"{RULES[0].id}:{'stall' if stalls else 'dispatch'}",
                   severity=severity_by_share(share, IDLE_PCT, 2 * IDLE_PCT + 10),
                   message=message, advice=advice, evidence=evidence, impact_ns=free,
                   step_ns=ctx.step_ns)


def _launch_evidence(ctx, gaps: pd.DataFrame) -> dict | None:
    """Launch delays (task start − its launching host call; LAUNCHES, as dispatch.csv) and the
    idle of the gaps whose next task was launched after the gap began; None without launch
    links."""
    t = ctx.tables.get(S.LAUNCHES)
    if t is None or t.num_rows == 0:
        return None
    # the two columns as pandas holds them (an integer column with nulls is float), sorted as
    # its sort_values sorts (quicksort of the values): the same launch for each gap
    dev = t["device_start_ns"].to_numpy(zero_copy_only=False)
    host = t["host_start_ns"].to_numpy(zero_copy_only=False)
    ok = ~(pd.isna(dev) | pd.isna(host))
    dev, host = dev[ok], host[ok]
    if not len(dev):
        return None
    order = dev.argsort(kind="quicksort")
    dev, host = dev[order].astype(np.int64), host[order].astype(np.int64)
    delay = dev - host
    late = 0
    if len(gaps):
        j = np.searchsorted(dev, gaps["end_ns"].to_numpy(np.int64), side="left")
        ok = j < len(dev)
        started = np.zeros(len(gaps), bool)
        started[ok] = host[j[ok]] > gaps["start_ns"].to_numpy(np.int64)[ok]
        late = int(gaps["dur_ns"].to_numpy(np.int64)[started].sum())
    return {"launches": int(len(dev)), "delay_median_us": us(float(np.median(delay))),
            "delay_p95_us": us(float(np.percentile(delay, 95))),
            "idle_before_launch_us_per_step": us(ctx.per_step(late)), "file": "dispatch.csv"}


# ----------------------------------------------------------------------- synchronisation

#: Launch-then-synchronise pairs above this share of node launches mean every launch waits
#: (ASCEND_LAUNCH_BLOCKING=1 behaviour) (msprof-analyze rules/en/synchronize.yaml
#: ``min_co_occurrence_ratio``).
SYNC_CO_OCCURRENCE = 0.5
#: Host time blocked in stream/device synchronisation from this share of the step (ascendprof).
SYNC_PCT = 10.0
SYNC_APIS = ("aclrtSynchronizeStream", "aclrtSynchronizeStreamWithTimeout",
             "aclrtSynchronizeDevice", "aclrtSynchronizeDeviceWithTimeout")
#: Device idle that begins while the host synchronises, from this share of the step, makes the
#: finding a warning (ascendprof).
SYNC_IDLE_PCT = 5.0
_SYNC_TRIGGERS = ("aten::item", "aten::_local_scalar_dense", "aten::is_nonzero",
                  "aten::nonzero", "aten::equal", "aten::masked_select")


def _idle_after(gaps: pd.DataFrame, s: np.ndarray, d: np.ndarray) -> float:
    """Total length (ns) of the device gaps that begin inside a synchronisation call (starts
    ``s``, durations ``d``): the device ran dry while the host waited, and stays idle until the
    host launches again."""
    if gaps.empty or not len(s):
        return 0.0
    e = s + d
    order = np.argsort(s)
    s, e = s[order], np.maximum.accumulate(e[order])
    g = gaps["start_ns"].to_numpy()
    j = np.searchsorted(s, g, side="right") - 1
    inside = (j >= 0) & (g <= e[np.maximum(j, 0)])
    return float(gaps["dur_ns"].to_numpy()[inside].sum())


def _synchronize(ctx):
    h = host_columns(ctx)
    if len(h["name"]):
        # numpy columns; the CANN rows in the order of pandas' sort_values (quicksort)
        cann = np.flatnonzero(h["source"] == "cann")
        cann = cann[h["start_ns"][cann].argsort(kind="quicksort")]
        names = h["name"][cann]
        is_sync = np.array([isinstance(n, str) and n.startswith("AscendCL@aclrtSynchronize")
                            for n in names.tolist()], bool)
        launches = names == "Node@launch"
        prev_launch = np.concatenate([[False], launches[:-1]])
        co = int((is_sync & prev_launch).sum())
        n_launch = int(launches.sum())
        co_ratio = co / n_launch if n_launch else 0.0
        syncs = cann[is_sync]
        sync_ns = ctx.per_step(np.nansum(h["dur_ns"][syncs]))
        sync_calls = ctx.per_step(len(syncs))
        idle_after = _idle_after(device_gaps(ctx), h["start_ns"][syncs], h["dur_ns"][syncs])
        fw = ctx.df(S.HOST_EVENTS)["name"][(h["source"] == "framework")
                                           & np.isin(h["name"], _SYNC_TRIGGERS)]
        # top-level triggers only (aten::item calls aten::_local_scalar_dense)
        triggers = {n: round(ctx.per_step(c), 1) for n, c in fw.value_counts().items()}
    else:
        a = ctx.df(S.API_STATISTIC)
        if a.empty:
            raise Skip("no CANN API data")
        rows = a[a["api_name"].isin(SYNC_APIS)]
        sync_ns, sync_calls = ctx.per_step(rows["total_ns"].sum()), ctx.per_step(rows["count"].sum())
        co, n_launch, co_ratio, triggers, idle_after = None, None, None, {}, None
    share = ctx.share(sync_ns)
    evidence = {"sync_calls_per_step": round(sync_calls, 1), "sync_us_per_step": us(sync_ns),
                "sync_pct_of_step": share, "launch_then_sync": co, "node_launches": n_launch,
                "co_occurrence_ratio": None if co_ratio is None else round(co_ratio, 4),
                "framework_triggers_per_step": triggers,
                "device_idle_after_sync_us_per_step": None if idle_after is None
                else us(ctx.per_step(idle_after)),
                "free_pct_of_step": ctx.share(ctx.free_ns)}
    if co_ratio is not None and co_ratio > SYNC_CO_OCCURRENCE:
        return finding(
            RULES[1], [ctx.rank], key=f"{RULES[1].id}:blocking", severity="critical",
            message=(f"{co} of {n_launch} operator launches are followed at once by a stream "
                     f"synchronisation ({co_ratio:.0%}): every operator waits for the device "
                     f"before the next is launched."),
            advice=["Unset ASCEND_LAUNCH_BLOCKING (or set it to 0): it is for debugging only.",
                    "Remove per-operator synchronisation from the code (torch.npu.synchronize() "
                    "in a loop)."],
            evidence=evidence, impact_ns=sync_ns, step_ns=ctx.step_ns)
    if share is None or share < SYNC_PCT:
        return None
    after = ctx.share(ctx.per_step(idle_after)) if idle_after is not None else None
    trig = ", ".join(f"{n} x{c:g}" for n, c in list(triggers.items())[:3])
    return finding(
        RULES[1], [ctx.rank], key=f"{RULES[1].id}:wait",
        severity="warning" if (after or 0) >= SYNC_IDLE_PCT else "info",
        message=(f"The host waits {us(sync_ns) / 1000:.1f} ms per step ({share:.1f}% of the "
                 f"step) in {sync_calls:.0f} stream/device synchronisation(s)"
                 + (f", triggered by {trig}" if trig else "")
                 + "; while it waits it launches nothing, so the device idles once the queue "
                   "drains"
                 + (f" ({after:.1f}% of the step is device idle that begins during a "
                    f"synchronisation)." if after is not None else ".")),
        advice=["Avoid reading device values on the host inside the step (loss.item(), "
                "tensor.cpu(), print or logging of device tensors, Python conditions on device "
                "tensors): accumulate on the device and read every N steps.",
                "Where a value is needed, copy it with non_blocking=True and read it one step "
                "later."],
        evidence=evidence, impact_ns=sync_ns, step_ns=ctx.step_ns)


# ------------------------------------------------------------------------------ dataloader

#: A step's data loading from this long is slow (msprof-analyze rules/en/dataloader.yaml
#: ``dataloader_duration_threshold: 10000`` us).
DATALOADER_US = 10000.0


def _outermost(start: np.ndarray, dur: np.ndarray, tid: np.ndarray) -> np.ndarray:
    """Positions of the events not inside another event of the same thread (per tid, by start
    then longest), thread by thread in ascending tid (missing: -1), each in that order."""
    order = np.lexsort((-dur, start))  # stable, as pandas' two-key sort_values
    tid = np.where(pd.isna(tid), -1, tid)
    keep = []
    for t in np.unique(tid).tolist():
        reach = None
        # plain Python values of the sorted thread (numpy scalars compare and add alike, at
        # many times the cost)
        rows = order[tid[order] == t]
        for i, st, d in zip(rows.tolist(), start[rows].tolist(), dur[rows].tolist()):
            end = st + d
            if reach is not None and end <= reach:
                continue
            keep.append(i)
            reach = end if reach is None else max(reach, end)
    return np.array(keep, np.int64)


def _dataloader(ctx):
    h = host_columns(ctx)
    dl = np.flatnonzero((h["source"] == "framework")
                        & np.array([low is not None and "dataloader" in low
                                    for low in h["lower"]], bool))
    if not len(dl):
        return None
    top = dl[_outermost(h["start_ns"][dl], h["dur_ns"][dl], h["tid"][dl])]
    step = h["step"][top]
    step = np.where(pd.isna(step), -1, step).astype(step.dtype)
    dur = h["dur_ns"][top]
    keys = np.unique(step)
    per = {k: np.nansum(dur[step == k]) for k in keys.tolist()}  # the groupby's sums
    worst = float(max(per.values()))
    share = ctx.share(worst)
    names = h["name"][top].tolist()
    evidence = {"dataloader_ms_per_step": {("collection" if k == -1 else str(int(k))): ms(v)
                                           for k, v in per.items()},
                "events": sorted(set(names))[:5],
                "single_process": any("singleprocess" in h["lower"][i] for i in top.tolist())}
    if worst < DATALOADER_US * 1000:
        return None
    advice = ["Raise DataLoader num_workers and set pin_memory=True (and persistent_workers=True).",
              "Check the disk I/O of the data directory (local SSD or a cache instead of network "
              "storage); avoid archive formats (tar, zip) read per sample.",
              "Do not pin the training process to few cores (taskset) when the loader workers "
              "need them."]
    if evidence["single_process"]:
        advice.insert(0, "The dataloader runs in the training process (num_workers=0): set "
                         "num_workers > 0.")
    return finding(
        RULES[2], [ctx.rank], severity=severity_by_share(share, 0.0, 10.0),
        message=(f"Loading the data of a step takes up to {ms(worst):.1f} ms"
                 + (f" ({share:.1f}% of the step)" if share is not None else "")
                 + f", above {DATALOADER_US / 1000:g} ms."),
        advice=advice, evidence=evidence, impact_ns=worst, step_ns=ctx.step_ns)


# -------------------------------------------------------------------------------------- GC

#: A garbage collection from this long is abnormal (msprof-analyze rules/en/gc.yaml
#: ``gc_threshold: 1000`` us).
GC_US = 1000.0
_GC_ADVICE = ["Release Python objects promptly and avoid reference cycles (they are what the "
              "cyclic collector walks).",
              "Raise the collection thresholds (gc.set_threshold) or run gc.collect() yourself "
              "between steps with gc.disable() inside the step (a temporary measure)."]


def _gc(ctx):
    h = ctx.df(S.HOST_EVENTS)
    g = h[h["source"] == "gc"]
    if g.empty:
        raise Skip("no GC events (collected only with torch_npu experimental_config "
                   "gc_detect_threshold)")
    bad = g[g["dur_ns"] >= GC_US * 1000]
    if bad.empty:
        return None
    ns = ctx.per_step(bad["dur_ns"].sum())
    return finding(
        RULES[3], [ctx.rank], severity=severity_by_share(ctx.share(ns), 1.0, 10.0),
        message=(f"{len(bad)} Python garbage collection(s) of {GC_US / 1000:g} ms or more, "
                 f"{ms(bad['dur_ns'].sum()):.1f} ms in all; a collection blocks the whole "
                 f"process."),
        advice=_GC_ADVICE,
        evidence={"gc_count": len(bad), "gc_total_ms": ms(bad["dur_ns"].sum()),
                  "longest_ms": ms(bad["dur_ns"].max()),
                  "largest": [{"start_ns": int(r.start_ns), "dur_ms": ms(r.dur_ns)}
                              for r in bad.nlargest(10, "dur_ns").itertuples()]},
        impact_ns=ns, step_ns=ctx.step_ns)


#: An idle gap this long with almost no host API activity is likely a Python GC pause
#: (msprof-analyze rules/en/conjectured_gc.yaml: max_free_threshold 200000 us,
#: max_acl_event_num_ratio 0.0001 per us, max_acl_event_time_ratio 0.01).
CONJ_GAP_US = 200000.0
CONJ_EVENTS_PER_US = 0.0001
CONJ_TIME_RATIO = 0.01


def _conjectured_gc(ctx):
    h = ctx.df(S.HOST_EVENTS)
    if (h["source"] == "gc").any():
        raise Skip("GC events were collected (schedule.gc judges them)")
    acl = h[(h["source"] == "cann") & h["name"].str.startswith("AscendCL@")]
    if acl.empty:
        raise Skip("no CANN API events (host timeline not collected)")
    gaps = device_gaps(ctx)
    long = gaps[gaps["dur_ns"] >= CONJ_GAP_US * 1000] if len(gaps) else gaps
    if long.empty:
        return None
    s = acl["start_ns"].to_numpy()
    e = s + acl["dur_ns"].to_numpy()
    hits = []
    for r in long.itertuples():
        inside = (e > r.start_ns) & (s < r.end_ns)
        n = int(inside.sum())
        t = float((np.minimum(e[inside], r.end_ns) - np.maximum(s[inside], r.start_ns)).sum())
        dur_us = r.dur_ns / 1000
        if n / dur_us < CONJ_EVENTS_PER_US and t / r.dur_ns < CONJ_TIME_RATIO:
            hits.append({"step": None if pd.isna(r.step) else int(r.step),
                         "start_ns": int(r.start_ns), "dur_ms": ms(r.dur_ns),
                         "acl_events": n, "acl_ms": ms(t)})
    if not hits:
        return None
    ns = ctx.per_step(sum(x["dur_ms"] for x in hits) * 1e6)
    return finding(
        RULES[4], [ctx.rank], severity=severity_by_share(ctx.share(ns), 1.0, 10.0),
        message=(f"{len(hits)} device idle gap(s) of {CONJ_GAP_US / 1000:g} ms or more with "
                 f"almost no host API call in them (longest {max(x['dur_ms'] for x in hits):.0f}"
                 f" ms): the host was likely paused by Python garbage collection."),
        advice=_GC_ADVICE + ["Confirm with torch_npu experimental_config(gc_detect_threshold=1) "
                             "(records GC events)."],
        evidence={"gaps": hits[:10]}, impact_ns=ns, step_ns=ctx.step_ns)


# ------------------------------------------------------------------------------ SyncBatchNorm

#: SyncBatchNorm calls per step from which they slow the step (msprof-analyze
#: rules/en/sync_batchnorm.yaml ``max_syncbn_num: 20``).
SYNCBN_CALLS = 20


def _syncbn(ctx):
    h = ctx.df(S.HOST_EVENTS)
    bn = h[(h["source"] == "framework") & (h["name"].str.lower() == "syncbatchnorm")]
    if bn.empty:
        return None
    per = ctx.per_step(len(bn))
    if per < SYNCBN_CALLS:
        return None
    ns = ctx.per_step(bn["dur_ns"].sum())
    return finding(
        RULES[5], [ctx.rank], severity="warning",
        message=(f"{per:.0f} SyncBatchNorm call(s) per step ({ms(ns):.1f} ms of host time): each "
                 f"synchronises statistics across devices and launches many small operators."),
        advice=["Use plain BatchNorm where the per-device batch is large enough (remove "
                "torch.nn.SyncBatchNorm.convert_sync_batchnorm).",
                "Otherwise use the efficient SyncBatchNorm forward (one all-gather of "
                "sum/square-sum/count per layer) given in msprof-analyze's "
                "sync_batchnorm.yaml."],
        evidence={"syncbn_calls_per_step": round(per, 1), "host_ms_per_step": ms(ns)},
        impact_ns=ns, step_ns=ctx.step_ns)


RULES = [
    Rule("schedule.device_idle", "schedule", "Device idle: host-bound dispatch or host stalls",
         needs=((S.KERNELS,), (S.STEP_TRACE,)),
         threshold={"free_pct_of_step": IDLE_PCT, "stall_gap_us": STALL_GAP_US,
                    "task_switch_gap_us": SWITCH_GAP_US},
         source="ascendprof (the seeds judge Free only by its spread over a group; 1 ms ~ 20 "
                "kernel launches of api_statistic KernelLaunch)",
         check=_device_idle),
    Rule("schedule.synchronize", "schedule", "Host-device synchronisation",
         needs=((S.HOST_EVENTS, S.API_STATISTIC),),
         threshold={"launch_then_sync_ratio": SYNC_CO_OCCURRENCE, "sync_pct_of_step": SYNC_PCT,
                    "idle_after_sync_pct_of_step_for_warning": SYNC_IDLE_PCT},
         source="ratio: msprof-analyze rules/en/synchronize.yaml min_co_occurrence_ratio; "
                "time share: ascendprof",
         check=_synchronize),
    Rule("schedule.dataloader", "schedule", "Slow dataloader",
         needs=((S.HOST_EVENTS,),),
         threshold={"dataloader_us_per_step": DATALOADER_US},
         source="msprof-analyze rules/en/dataloader.yaml dataloader_duration_threshold",
         check=_dataloader),
    Rule("schedule.gc", "schedule", "Python garbage collection",
         needs=((S.HOST_EVENTS,),),
         threshold={"gc_us": GC_US},
         source="msprof-analyze rules/en/gc.yaml gc_threshold",
         check=_gc),
    Rule("schedule.conjectured_gc", "schedule", "Long idle gaps without host activity "
                                                "(conjectured GC)",
         needs=((S.HOST_EVENTS,), (S.KERNELS,)),
         threshold={"gap_us": CONJ_GAP_US, "max_acl_events_per_us": CONJ_EVENTS_PER_US,
                    "max_acl_time_ratio": CONJ_TIME_RATIO},
         source="msprof-analyze rules/en/conjectured_gc.yaml",
         check=_conjectured_gc),
    Rule("schedule.syncbn", "schedule", "SyncBatchNorm",
         needs=((S.HOST_EVENTS,),),
         threshold={"calls_per_step": SYNCBN_CALLS},
         source="msprof-analyze rules/en/sync_batchnorm.yaml max_syncbn_num (counted per step "
                "here, over the whole trace there)",
         check=_syncbn),
]
