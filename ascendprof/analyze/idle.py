"""Idle time by cause: the device's Free time of each step split into what kept it idle.

Free is the part of the step's device window (STEPS) that no device task covers (KERNELS, with
kernel_details' COMMUNICATION rows, and the COMM_OPS big ops), recomputed from the tasks and
written beside the profiler's own Free; ``Edge Idle`` is the part before the step's first task and
after its last, which the profiler's Free leaves out. Each gap goes to one cause of
:data:`CAUSES`, in that order: ``short`` (below :data:`SHORT_GAP_NS`), ``sync`` (host
synchronisation, HOST_EVENTS), ``data_loader``, ``host_launch`` (LAUNCHES: the next task's launch
began after the gap had begun), ``other``. Without host data only ``short`` and ``other`` can be
seen. Definitions and sources: docs/analyses.md, "Idle time by cause".
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from ascendprof.analyze import intervals as iv
from ascendprof.model import schemas as S

IDLE = "idle_breakdown"
#: gaps shorter than this are kernel-to-kernel turnaround (ns)
SHORT_GAP_NS = 30_000
SYNC_PREFIXES = ("AscendCL@aclrtSynchronize",)
SYNC_OPS = ("aten::item", "aten::_local_scalar_dense", "aten::is_nonzero", "aten::nonzero",
            "aten::equal", "aten::masked_select")
CAUSES = ("short", "sync", "data_loader", "host_launch", "other")

PARTIAL_SCHEMA = pa.schema(
    [("rank", pa.int32()), ("step", pa.int32()), ("window_ns", pa.int64()),
     ("gaps", pa.int64()), ("free_ns", pa.int64()), ("edge_ns", pa.int64()),
     ("reported_free_ns", pa.int64())]
    + [(f"{c}_ns", pa.int64()) for c in CAUSES] + [("host_data", pa.string())])

COLUMNS = ["Rank", "Step", "Step Window(us)", "Free(us)", "Edge Idle(us)", "Free Reported(us)",
           "Idle Gaps",
           "Short Gaps(us)", "Synchronisation(us)", "Data Loader(us)", "Host Launch(us)",
           "Other(us)", "Host Data"]


def busy_intervals(tables: dict) -> iv.Intervals:
    """The union of the rank's device tasks: KERNELS start + dur and COMM_OPS start + elapse."""
    sets = []
    k = tables.get(S.KERNELS)
    if k is not None and k.num_rows:
        sets.append(iv.from_durations(pc.fill_null(k["start_ns"], 0).to_numpy(),
                                      pc.fill_null(k["dur_ns"], 0).to_numpy()))
    c = tables.get(S.COMM_OPS)
    if c is not None and c.num_rows:
        # the two columns before the filter: a filter copies every column it is given, and a
        # communication.json of 10^6 ops holds ~1 GB of text (opinfo_json, names) in the others
        c = c.select(["start_ns", "elapse_ns"])
        c = c.filter(pc.is_valid(c["start_ns"]))
        sets.append(iv.from_durations(c["start_ns"].to_numpy(),
                                      pc.fill_null(c["elapse_ns"], 0).to_numpy()))
    return iv.union_of(*sets) if sets else iv.empty()


def step_windows(tables: dict) -> list[tuple[int | None, int, int]]:
    """[(step, start, end)] of the rank: STEPS, else the span of each step's kernels."""
    st = tables.get(S.STEPS)
    if st is not None and st.num_rows:
        return [(r["step"], int(r["start_ns"]), int(r["end_ns"])) for r in st.to_pylist()
                if r["start_ns"] is not None and r["end_ns"] is not None]
    k = tables.get(S.KERNELS)
    if k is None or k.num_rows == 0:
        return []
    d = k.select(["step", "start_ns", "dur_ns"]).to_pandas()
    d["end"] = d["start_ns"] + d["dur_ns"].fillna(0)
    return [(None if s < 0 else int(s), int(g["start_ns"].min()), int(g["end"].max()))
            for s, g in d.groupby(d["step"].fillna(-1).astype(int))]


def _host_sets(tables: dict) -> tuple[iv.Intervals, iv.Intervals, bool]:
    h = tables.get(S.HOST_EVENTS)
    if h is None or h.num_rows == 0:
        return iv.empty(), iv.empty(), False
    # the Arrow kernels pandas' string methods run, without building the frame
    name = pc.fill_null(h["name"], "")
    sync = pc.is_in(name, value_set=pa.array(SYNC_OPS, pa.string()))
    for p in SYNC_PREFIXES:
        sync = pc.or_(sync, pc.starts_with(name, p))
    loader = pc.and_(pc.fill_null(pc.equal(h["source"], "framework"), False),
                     pc.match_substring(pc.utf8_lower(name), "dataloader"))
    start = h["start_ns"].to_numpy(zero_copy_only=False)  # (as pandas holds it)
    dur = pc.fill_null(h["dur_ns"], 0).to_numpy()
    f = lambda m: iv.union(iv.from_durations(start[m], dur[m]))  # noqa: E731
    return (f(np.asarray(sync.to_numpy(zero_copy_only=False), bool)),
            f(np.asarray(loader.to_numpy(zero_copy_only=False), bool)), True)


def rank_partial(tables: dict, rank: int, meta: dict | None = None) -> dict[str, pa.Table]:
    """{IDLE: per step: window, gap count, Free from the tasks, the profiler's Free and the
    nanoseconds of each cause} when the rank has device tasks and step windows."""
    busy = busy_intervals(tables)
    wins = step_windows(tables)
    if not len(busy[0]) or not wins:
        return {}
    sync, loader, have_host = _host_sets(tables)
    # what classify counts as data loader: the loader spans outside the synchronisation ones
    loader_only = iv.difference(loader, sync) if len(sync[0]) else loader
    la = tables.get(S.LAUNCHES)
    launches = None
    if la is not None and la.num_rows:
        la = la.filter(pc.and_(pc.is_valid(la["device_start_ns"]),
                               pc.is_valid(la["host_start_ns"])))
        order = np.argsort(la["device_start_ns"].to_numpy(), kind="stable")
        launches = (la["device_start_ns"].to_numpy()[order], la["host_start_ns"].to_numpy()[order])
    reported = {}
    stt = tables.get(S.STEP_TRACE)
    if stt is not None and stt.num_rows:  # the windows' steps only: 10^6 dicts are ~1 GB
        stt = S.of_steps(stt.select(["step", "free_ns"]), {w[0] for w in wins})
        reported = {r["step"]: r["free_ns"] for r in stt.to_pylist()}
    host_data = ("host events + launch links" if have_host and launches is not None else
                 "host events" if have_host else "launch links" if launches is not None
                 else "none")
    rows = []
    for step, lo, hi in wins:
        gaps = iv.difference(iv.make([lo], [hi]), iv.clip(busy, lo, hi)) if hi > lo else iv.empty()
        acc = dict.fromkeys(CAUSES, 0)
        _classify_all(gaps, sync, loader_only, launches, acc)
        inner = iv.hull(iv.clip(busy, lo, hi))
        edge = int(iv.total(gaps) - iv.total(iv.intersection(gaps, inner)))
        rows.append({"rank": rank, "step": step, "window_ns": hi - lo, "gaps": len(gaps[0]),
                     "free_ns": int(iv.total(gaps)), "edge_ns": edge,
                     "reported_free_ns": reported.get(step),
                     **{f"{c}_ns": int(v) for c, v in acc.items()}, "host_data": host_data})
    return {IDLE: pa.Table.from_pylist(rows, schema=PARTIAL_SCHEMA)}


def _classify_all(gaps: iv.Intervals, sync: iv.Intervals, loader_only: iv.Intervals,
                  launches: tuple | None, acc: dict) -> None:
    """Add to ``acc`` the causes of ``gaps`` (normalised): what :func:`classify` gives each
    gap, vectorised (a rank has thousands of gaps). ``loader_only`` is the data-loader spans
    less the synchronisation ones (what classify takes from a gap once sync is out of it), so
    each gap's data-loader time is its overlap with that set."""
    a, b = gaps[0].astype(np.int64), gaps[1].astype(np.int64)
    length = b - a
    short = length < SHORT_GAP_NS
    acc["short"] += int(length[short].sum())
    long_ = ~short & (length > 0)
    a, b, length = a[long_], b[long_], length[long_]
    s = iv.length_in_windows(sync, a, b) if len(sync[0]) else np.zeros(len(a), np.int64)
    dl = (iv.length_in_windows(loader_only, a, b) if len(loader_only[0])
          else np.zeros(len(a), np.int64))
    left = length - s - dl
    acc["sync"] += int(s.sum())
    acc["data_loader"] += int(dl.sum())
    launched = np.zeros(len(a), dtype=bool)
    if launches is not None and len(launches[0]):
        j = np.searchsorted(launches[0], b, side="left")
        ok = j < len(launches[0])
        launched[ok] = launches[1][j[ok]] > a[ok]
    acc["host_launch"] += int(left[launched].sum())
    acc["other"] += int(left[~launched].sum())


def classify(a: int, b: int, sync: iv.Intervals, loader: iv.Intervals,
             launches: tuple | None) -> dict[str, int]:
    """{cause: ns} of one idle gap ``[a, b)`` (module doc); the values add up to ``b - a``."""
    length = b - a
    if length < SHORT_GAP_NS:
        return {"short": length}
    gap = (np.array([a], np.int64), np.array([b], np.int64))
    s = iv.intersection(gap, sync)
    rest = iv.difference(gap, s)
    dl = iv.intersection(rest, loader)
    rest = iv.difference(rest, dl)
    out = {"sync": iv.total(s), "data_loader": iv.total(dl)}
    left = iv.total(rest)
    cause = "other"
    if launches is not None and left:
        j = int(np.searchsorted(launches[0], b, side="left"))
        if j < len(launches[0]) and launches[1][j] > a:
            cause = "host_launch"
    out[cause] = out.get(cause, 0) + left
    return out


def build(part: pa.Table | None) -> pd.DataFrame:
    """idle_breakdown.csv (:data:`COLUMNS`): one row per rank and step, in microseconds."""
    if part is None or part.num_rows == 0:
        return pd.DataFrame(columns=COLUMNS)
    d = part.to_pandas().sort_values(["rank", "step"], kind="stable")
    us = lambda c: (d[c] / 1e3).round(3)  # noqa: E731
    out = pd.DataFrame({
        "Rank": d["rank"].astype(int), "Step": d["step"].astype("Int64"),
        "Step Window(us)": us("window_ns"), "Free(us)": us("free_ns"),
        "Edge Idle(us)": us("edge_ns"), "Free Reported(us)": us("reported_free_ns"),
        "Idle Gaps": d["gaps"].astype(int),
        "Short Gaps(us)": us("short_ns"), "Synchronisation(us)": us("sync_ns"),
        "Data Loader(us)": us("data_loader_ns"), "Host Launch(us)": us("host_launch_ns"),
        "Other(us)": us("other_ns"), "Host Data": d["host_data"]})
    return out.reset_index(drop=True)
