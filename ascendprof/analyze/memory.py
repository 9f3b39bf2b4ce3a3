"""Device memory per rank: peaks and when they happen, the operators that hold most memory, memory
per module, and ranks or stages far above their peers or near the device capacity (seeds 000,
003). Inputs: MEMORY_RECORD per component, OPERATOR_MEMORY, NPU_MODULE_MEM, STATIC_OP_MEM and the
capacity where the input records it (``meta["memory_capacity_mb"]``), all MB = 2^20 bytes; the
columns and the ``memory`` verdict: docs/analyses.md, "Memory".

The operator at a peak is the allocation at that very timestamp (torch_npu writes both from the
same allocator event), else the last allocation before it (marked ``(before)``). Per rank
(:func:`rank_memory`, in the worker) the tables are reduced to small ones; :func:`build` makes
memory_summary.csv, memory_top_ops.csv and memory_modules.csv; :func:`verdicts` judges them.
Nothing here reads files.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from ascendprof.model import schemas as S

MEMORY_PEAKS = "memory_peaks"
MEMORY_OPS = "memory_ops"
MEMORY_MODULES = "memory_modules"

PEAKS_SCHEMA = pa.schema([
    ("rank", pa.int32()), ("component", pa.string()), ("metric", pa.string()),
    ("peak_mb", pa.float64()), ("ts_ns", pa.int64()), ("step", pa.int32()),
    ("operator", pa.string()), ("capacity_mb", pa.float64())])
OPS_SCHEMA = pa.schema([
    ("rank", pa.int32()), ("name", pa.string()), ("source", pa.string()),
    ("allocations", pa.int64()), ("total_mb", pa.float64()), ("largest_mb", pa.float64()),
    ("size_time_mb_ms", pa.float64()), ("size_nodes_mb", pa.float64()),
    ("mean_lifetime_ms", pa.float64()), ("unreleased_mb", pa.float64())])
MODULES_SCHEMA = pa.schema([
    ("rank", pa.int32()), ("module", pa.string()), ("peak_mb", pa.float64()),
    ("ts_ns", pa.int64()), ("mean_mb", pa.float64())])

#: Components in the order memory_summary.csv lists them; ``PTA+GE`` is the framework's total
#: and the one compared between ranks (else the first present of the others).
COMPONENTS = ("PTA+GE", "PTA", "GE", "WORKSPACE", "APP")
METRICS = (("allocated", "total_allocated_mb"), ("reserved", "total_reserved_mb"),
           ("active", "total_active_mb"))

#: static_op_mem.csv's row for the whole graph (not an operator; left out of the top operators)
STATIC_TOTAL = "TOTAL"
#: operators kept per rank in memory_top_ops.csv: the top N by total allocation and the top N
#: by size x lifetime (the union)
TOP_N = 20

SUMMARY_COLUMNS = ["Rank", "Stage", "Component", "Peak Allocated(MB)", "Peak Allocated Time(us)",
                   "Peak Allocated Step", "Peak Allocated Operator", "Peak Reserved(MB)",
                   "Peak Reserved Time(us)", "Peak Active(MB)", "Peak Active Time(us)",
                   "Capacity(MB)", "Peak Reserved/Capacity(%)", "Peers Median Allocated(MB)",
                   "Allocated vs Peers(%)"]
TOP_OPS_COLUMNS = ["Rank", "Name", "Source", "Allocations", "Total Allocated(MB)", "Largest(MB)",
                   "Size x Lifetime(MB*ms)", "Size x Lifetime(MB*nodes)", "Mean Lifetime(ms)",
                   "Unreleased(MB)", "Rank By Size", "Rank By Size x Lifetime"]
MODULE_COLUMNS = ["Rank", "Module", "Peak Reserved(MB)", "Peak Time(us)", "Mean Reserved(MB)"]

# verdict thresholds (documented in docs/analyses.md)
#: a rank's peak (reserved, or allocated without reserved) at or above this % of the capacity
NEAR_CAPACITY_PCT = 90.0
#: a rank whose peak allocated exceeds the median of the other ranks of its stage by this %
PEER_EXCESS_PCT = 15.0
#: ... and by at least this many MB (small models' differences are noise)
PEER_EXCESS_MIN_MB = 512.0


def _abs_us(ns) -> str | None:
    if ns is None or pd.isna(ns):
        return None
    ns = int(ns)
    return f"{ns // 1000}.{ns % 1000:03d}"


# ---------------------------------------------------------------------------------------------
# per rank


def _step_at(ts: int, steps) -> int | None:
    """The step whose [start, end] window holds ``ts`` (``steps``: (step, start, end) lists)."""
    if steps is None or ts is None:
        return None
    for st, a, b in zip(*steps):
        if st is not None and a is not None and b is not None and a <= ts <= b:
            return int(st)
    return None


def _operator_at(ts: int, alloc: np.ndarray | None, names: list | None) -> str | None:
    """The operator allocating at ``ts`` (``alloc`` sorted allocation times, ``names`` in the
    same order); the last allocation before it, marked, when none is at that instant."""
    if alloc is None or alloc.size == 0 or ts is None:
        return None
    j = int(np.searchsorted(alloc, ts, side="right")) - 1
    if j < 0:
        return None
    return str(names[j]) if alloc[j] == ts else f"{names[j]} (before)"


def peaks(records: pa.Table, ops: pa.Table | None = None, steps: pa.Table | None = None,
          capacity_mb: float | None = None) -> pa.Table:
    """PEAKS_SCHEMA rows: per component and metric (allocated / reserved / active) of
    MEMORY_RECORD ``records`` (one rank) the peak MB, the first ns it is reached, its step and
    the operator allocating then (module doc); time, step and operator are null when no row of
    the peak has a time (a time lost to E-notation). Metrics a component never records are left
    out."""
    rec = records  # a row without its time (E-notation left empty) still counts for the peak
    st = None
    if steps is not None and steps.num_rows:
        st = (steps["step"].to_pylist(), steps["start_ns"].to_pylist(),
              steps["end_ns"].to_pylist())
    alloc = names = None
    if ops is not None and ops.num_rows:
        o = ops.filter(pc.is_valid(ops["alloc_ns"]))
        a = o["alloc_ns"].to_numpy(zero_copy_only=False).astype(np.int64)
        order = np.argsort(a, kind="stable")
        alloc = a[order]
        names = o["name"].take(pa.array(order)).to_numpy(zero_copy_only=False)
    rank = int(rec["rank"][0].as_py()) if rec.num_rows else None
    comp_col = pc.fill_null(rec["component"], "")
    ts_ok = np.asarray(pc.is_valid(rec["ts_ns"]).to_numpy(zero_copy_only=False), bool)
    ts_all = pc.fill_null(rec["ts_ns"], 0).to_numpy(zero_copy_only=False).astype(np.int64)
    vals = {col: rec[col].to_numpy(zero_copy_only=False).astype(np.float64)
            for _, col in METRICS}
    rows = []
    for comp in pc.unique(comp_col).to_pylist():  # first-seen order
        sel = np.asarray(pc.equal(comp_col, comp).to_numpy(zero_copy_only=False), bool)
        ts, known = ts_all[sel], ts_ok[sel]
        for metric, col in METRICS:
            v = vals[col][sel]
            ok = ~np.isnan(v)
            if not ok.any():
                continue
            peak = float(v[ok].max())
            at = ok & (v == peak) & known
            t = int(ts[at].min()) if at.any() else None  # None: the time was not readable
            rows.append({"rank": rank, "component": str(comp), "metric": metric,
                         "peak_mb": peak, "ts_ns": t, "step": _step_at(t, st),
                         "operator": None if comp == "APP" else _operator_at(t, alloc, names),
                         "capacity_mb": capacity_mb})
    return pa.Table.from_pylist(rows, schema=PEAKS_SCHEMA)


def top_operators(ops: pa.Table | None, static: pa.Table | None = None, end_ns: int | None = None,
                  top: int = TOP_N) -> pa.Table:
    """OPS_SCHEMA rows: OPERATOR_MEMORY aggregated per operator name — allocations, total and
    largest block (MB), Σ size x lifetime (MB·ms; a block never released lives until ``end_ns``,
    the end of the collection), mean lifetime, unreleased MB — keeping the ``top`` by total and the
    ``top`` by size x lifetime; then STATIC_OP_MEM rows (static graphs: lifetime in nodes)."""
    parts = []
    if ops is not None and ops.num_rows:
        d = ops.filter(pc.greater(pc.fill_null(ops["size_kb"], 0), 0))
        if d.num_rows:
            mb = pc.divide(d["size_kb"], 1024.0)
            open_ = pc.and_(pc.is_null(d["release_ns"]), pc.is_null(d["dur_ns"]))
            if end_ns is None:
                end_ns = max(x for x in (pc.max(d["alloc_ns"]).as_py(),
                                         pc.max(d["release_ns"]).as_py()) if x is not None)
            life_ns = pc.if_else(open_, pc.subtract(pa.scalar(end_ns, pa.int64()), d["alloc_ns"]),
                                 d["dur_ns"])
            life_ms = pc.divide(pc.max_element_wise(pc.cast(life_ns, pa.float64()), 0.0), 1e6)
            t = pa.table({"name": pc.fill_null(d["name"], ""), "mb": mb, "life_ms": life_ms,
                          "mb_ms": pc.multiply(mb, pc.fill_null(life_ms, 0.0)),
                          "unrel": pc.if_else(open_, mb, 0.0)})
            g = t.group_by("name", use_threads=False).aggregate([
                ("mb", "count"), ("mb", "sum"), ("mb", "max"), ("mb_ms", "sum"),
                ("life_ms", "mean"), ("unrel", "sum")])
            keep = set()
            for col in ("mb_sum", "mb_ms_sum"):
                idx = pc.sort_indices(g, sort_keys=[(col, "descending")])[:top]
                keep |= set(g["name"].take(idx).to_pylist())
            g = g.filter(pc.is_in(g["name"], value_set=pa.array(sorted(keep), pa.string())))
            n = g.num_rows
            parts.append(pa.table({
                "rank": pa.array([int(d["rank"][0].as_py())] * n, pa.int32()),
                "name": g["name"], "source": pa.array(["operator_memory"] * n, pa.string()),
                "allocations": g["mb_count"].cast(pa.int64()), "total_mb": g["mb_sum"],
                "largest_mb": g["mb_max"], "size_time_mb_ms": g["mb_ms_sum"],
                "size_nodes_mb": pa.nulls(n, pa.float64()), "mean_lifetime_ms": g["life_ms_mean"],
                "unreleased_mb": g["unrel_sum"]}, schema=OPS_SCHEMA))
    if static is not None and static.num_rows:
        d = static.to_pandas()
        # the TOTAL row is the graph's total (msprof's name for op 0), not an operator
        d = d[(d["size_kb"].fillna(0) > 0) & (d["name"] != STATIC_TOTAL)]
        if not d.empty:
            d["mb"] = d["size_kb"] / 1024.0
            nodes = (d["node_end"] - d["node_start"] + 1).clip(lower=0)
            d["mb_nodes"] = d["mb"] * nodes
            g = d.groupby("name", sort=False).agg(
                rank=("rank", "first"), allocations=("mb", "size"), total_mb=("mb", "sum"),
                largest_mb=("mb", "max"), size_nodes_mb=("mb_nodes", "sum")).reset_index()
            keep = set(g.nlargest(top, "total_mb")["name"]) | set(
                g.nlargest(top, "size_nodes_mb")["name"])
            g = g[g["name"].isin(keep)].assign(source="static_op_mem", size_time_mb_ms=np.nan,
                                               mean_lifetime_ms=np.nan, unreleased_mb=np.nan)
            parts.append(pa.Table.from_pandas(g[[f.name for f in OPS_SCHEMA]], schema=OPS_SCHEMA,
                                              preserve_index=False))
    if not parts:
        return OPS_SCHEMA.empty_table()
    return pa.concat_tables(parts)


def modules(mod: pa.Table) -> pa.Table:
    """MODULES_SCHEMA rows: per NPU_MODULE_MEM component (CANN module) its peak reserved MB, the
    first ns of the peak and the mean over its samples; modules that never reserve are left out."""
    d = mod.filter(pc.is_valid(mod["total_reserved_mb"]))
    if d.num_rows == 0:
        return MODULES_SCHEMA.empty_table()
    t = pa.table({"module": pc.fill_null(d["component"], ""), "mb": d["total_reserved_mb"],
                  "ts": d["ts_ns"]})
    g = t.group_by("module", use_threads=False).aggregate([("mb", "max"), ("mb", "mean")])
    g = g.filter(pc.greater(g["mb_max"], 0))
    if g.num_rows == 0:
        return MODULES_SCHEMA.empty_table()
    at = t.join(g.select(["module", "mb_max"]), "module", use_threads=False)
    at = at.filter(pc.equal(at["mb"], at["mb_max"]))
    first = dict(zip(*at.group_by("module", use_threads=False).aggregate(
        [("ts", "min")]).select(["module", "ts_min"]).to_pydict().values()))
    rank = int(d["rank"][0].as_py())
    rows = [{"rank": rank, "module": m, "peak_mb": p, "ts_ns": first.get(m), "mean_mb": a}
            for m, p, a in zip(g["module"].to_pylist(), g["mb_max"].to_pylist(),
                               g["mb_mean"].to_pylist())]
    return pa.Table.from_pylist(rows, schema=MODULES_SCHEMA)


def rank_memory(tables: dict, rank: int, meta: dict | None = None) -> dict[str, pa.Table]:
    """The rank's memory partials: {MEMORY_PEAKS, MEMORY_OPS, MEMORY_MODULES: table}, each only
    when its input exists. ``meta`` may carry ``memory_capacity_mb``."""
    out = {}
    rec = S.of_rank(tables.get(S.MEMORY_RECORD), rank)
    ops = S.of_rank(tables.get(S.OPERATOR_MEMORY), rank)
    static = S.of_rank(tables.get(getattr(S, "STATIC_OP_MEM", "static_op_mem")), rank)
    cap = (meta or {}).get("memory_capacity_mb")
    if rec is not None:
        out[MEMORY_PEAKS] = peaks(rec, ops, S.of_rank(tables.get(S.STEPS), rank),
                                  float(cap) if cap else None)
    end = None
    if rec is not None:
        end = pc.max(rec["ts_ns"]).as_py()
    if ops is not None or static is not None:
        t = top_operators(ops, static, end)
        if t.num_rows:
            out[MEMORY_OPS] = t
    mod = S.of_rank(tables.get(S.NPU_MODULE_MEM), rank)
    if mod is not None:
        t = modules(mod)
        if t.num_rows:
            out[MEMORY_MODULES] = t
    return {k: v for k, v in out.items() if v.num_rows}


# ---------------------------------------------------------------------------------------------
# the cluster


def main_component(components) -> str | None:
    """The component compared between ranks: the first of :data:`COMPONENTS` present (APP last:
    it is sampled, not exact)."""
    have = set(components)
    return next((c for c in COMPONENTS if c in have), None)


def build(peaks_t: pa.Table | None, ops_t: pa.Table | None, modules_t: pa.Table | None,
          stage_of: dict[int, int] | None = None) -> dict[str, pd.DataFrame]:
    """{"memory_summary.csv", "memory_top_ops.csv", "memory_modules.csv": DataFrame} from all
    ranks' partials (columns :data:`SUMMARY_COLUMNS`, :data:`TOP_OPS_COLUMNS`,
    :data:`MODULE_COLUMNS`; MB = 2^20 bytes, absolute times in us). ``stage_of``: rank ->
    pipeline stage. Frames without rows are left out."""
    stage_of = stage_of or {}
    out: dict[str, pd.DataFrame] = {}
    if peaks_t is not None and peaks_t.num_rows:
        p = peaks_t.to_pandas()
        rows = []
        order = {c: i for i, c in enumerate(COMPONENTS)}
        # the groupby's groups from one to_dict of the whole frame (a to_dict per group cost
        # ~1 ms each, 4 groups a rank); rows without a rank or component left out as there
        groups: dict = {}
        for rec in p.to_dict("records"):
            if not (pd.isna(rec["rank"]) or pd.isna(rec["component"])):
                groups.setdefault((rec["rank"], rec["component"]), []).append(rec)
        for (rank, comp), recs in sorted(groups.items(),
                                         key=lambda kv: (kv[0][0], order.get(kv[0][1], 99),
                                                         kv[0][1])):
            m = {r["metric"]: r for r in recs}
            a, r, act = m.get("allocated"), m.get("reserved"), m.get("active")
            cap = next((x["capacity_mb"] for x in (a, r, act) if x and pd.notna(x["capacity_mb"])),
                       None)
            ref = r or a
            rows.append([int(rank), stage_of.get(int(rank), ""), comp,
                         a and a["peak_mb"], a and _abs_us(a["ts_ns"]),
                         None if not a or pd.isna(a["step"]) else int(a["step"]),
                         a and a["operator"], r and r["peak_mb"], r and _abs_us(r["ts_ns"]),
                         act and act["peak_mb"], act and _abs_us(act["ts_ns"]), cap,
                         round(ref["peak_mb"] / cap * 100, 2) if cap and ref else None])
        df = pd.DataFrame(rows, columns=SUMMARY_COLUMNS[:-2])
        df["Peak Allocated Step"] = df["Peak Allocated Step"].astype("Int64")
        # imbalance within a stage: the other ranks of the stage (all ranks without stages),
        # same component
        med = pd.Series(np.nan, index=df.index)
        alloc = pd.to_numeric(df["Peak Allocated(MB)"], errors="coerce")
        for _, g in df.groupby([df["Component"], df["Stage"].astype(str)], sort=False):
            v = alloc[g.index].to_numpy(np.float64)
            for pos, idx in enumerate(g.index):
                others = np.delete(v, pos)
                others = others[~np.isnan(others)]
                if others.size:
                    med[idx] = float(np.median(others))
        df["Peers Median Allocated(MB)"] = med.where(med.notna(), None)
        vs = ((alloc - med) / med * 100).round(2)
        df["Allocated vs Peers(%)"] = vs.where(vs.notna() & (med > 0), None)
        out["memory_summary.csv"] = df
    if ops_t is not None and ops_t.num_rows:
        o = ops_t.to_pandas()
        frames = []
        for rank, g in o.groupby("rank", sort=True):
            g = g.copy()
            g["by_size"] = g["total_mb"].rank(ascending=False, method="first")
            life = g["size_time_mb_ms"].fillna(g["size_nodes_mb"])
            g["by_life"] = life.rank(ascending=False, method="first")
            frames.append(g.sort_values(["total_mb"], ascending=False, kind="stable"))
        o = pd.concat(frames)
        out["memory_top_ops.csv"] = pd.DataFrame({
            "Rank": o["rank"].astype(int), "Name": o["name"], "Source": o["source"],
            "Allocations": o["allocations"].astype(int), "Total Allocated(MB)": o["total_mb"],
            "Largest(MB)": o["largest_mb"], "Size x Lifetime(MB*ms)": o["size_time_mb_ms"],
            "Size x Lifetime(MB*nodes)": o["size_nodes_mb"],
            "Mean Lifetime(ms)": o["mean_lifetime_ms"], "Unreleased(MB)": o["unreleased_mb"],
            "Rank By Size": o["by_size"].astype(int),
            "Rank By Size x Lifetime": o["by_life"].astype("Int64")}).reset_index(drop=True)
    if modules_t is not None and modules_t.num_rows:
        m = modules_t.to_pandas().sort_values(["rank", "peak_mb"], ascending=[True, False],
                                              kind="stable")
        out["memory_modules.csv"] = pd.DataFrame({
            "Rank": m["rank"].astype(int), "Module": m["module"], "Peak Reserved(MB)": m["peak_mb"],
            "Peak Time(us)": [_abs_us(t) for t in m["ts_ns"]],
            "Mean Reserved(MB)": m["mean_mb"].round(6)}).reset_index(drop=True)
    return out


def rank_peaks(summary: pd.DataFrame) -> pd.DataFrame:
    """One row per rank: the rank's main component (:func:`main_component`) with its peak
    allocated / reserved MB, stage and capacity (columns rank, stage, component, allocated_mb,
    reserved_mb, capacity_mb)."""
    by_rank: dict = {}  # the groupby's groups, from one to_dict of the frame
    for rec in summary.to_dict("records"):
        if not pd.isna(rec["Rank"]):
            by_rank.setdefault(rec["Rank"], []).append(rec)
    rows = []
    for rank in sorted(by_rank):
        recs = by_rank[rank]
        comp = main_component([x["Component"] for x in recs])
        r = [x for x in recs if x["Component"] == comp][0]
        rows.append({"rank": int(rank), "stage": r["Stage"], "component": comp,
                     "allocated_mb": r["Peak Allocated(MB)"], "reserved_mb": r["Peak Reserved(MB)"],
                     "capacity_mb": r["Capacity(MB)"]})
    return pd.DataFrame(rows)


def verdicts(summary: pd.DataFrame | None, make, th: dict | None = None) -> list[dict]:
    """Memory verdicts from memory_summary.csv's frame; ``make`` builds one verdict
    (verdicts.make_verdict's signature). Silent when nothing is near capacity or far above its
    peers.

    - ``memory`` / rank, near capacity: peak reserved (else allocated) of the main component, or
      the APP reserved peak when larger, >= :data:`NEAR_CAPACITY_PCT` % of the recorded
      capacity (critical from 97 %);
    - ``memory`` / rank, far above peers: peak allocated exceeds the median of the other ranks of
      the same pipeline stage (all ranks without stages; at least 2 others with data... or 1)
      by >= :data:`PEER_EXCESS_PCT` % and >= :data:`PEER_EXCESS_MIN_MB` MB.
    """
    th = th or {}
    near = float(th.get("memory_near_capacity_pct", NEAR_CAPACITY_PCT))
    excess_pct = float(th.get("memory_peer_excess_pct", PEER_EXCESS_PCT))
    excess_mb = float(th.get("memory_peer_excess_min_mb", PEER_EXCESS_MIN_MB))
    if summary is None or summary.empty:
        return []
    out = []
    per = rank_peaks(summary)
    app = summary[summary["Component"] == "APP"].set_index("Rank")["Peak Reserved(MB)"]
    for r in per.itertuples(index=False):
        cap = r.capacity_mb
        if cap is None or pd.isna(cap) or cap <= 0:
            continue
        used = max(v for v in (r.reserved_mb, r.allocated_mb, app.get(r.rank))
                   if v is not None and pd.notna(v))
        pct = used / cap * 100
        if pct >= near:
            out.append(make(
                "memory", "rank", [r.rank], "critical" if pct >= 97 else "warning",
                f"Rank {r.rank} peaks at {used:.0f} MB of device memory, {pct:.1f}% of the "
                f"{cap:.0f} MB capacity: little headroom before out-of-memory.",
                "Look at memory_top_ops.csv for the operators holding most memory at the peak "
                "(activation recomputation, smaller micro-batches, or offloading free it).",
                id=f"memory:capacity:{r.rank}",
                evidence={"peak_mb": round(used, 3), "capacity_mb": round(cap, 3),
                          "peak_pct": round(pct, 2), "component": r.component},
                threshold={"memory_near_capacity_pct": near}))
    peers = per.dropna(subset=["allocated_mb"])
    groups = peers.groupby(peers["stage"].astype(str)) if len(peers) else []
    for stage, g in groups:
        if len(g) < 2:
            continue
        alloc = g["allocated_mb"].to_numpy(np.float64)
        for pos, r in enumerate(g.itertuples(index=False)):
            # the median of the other ranks (ranks are unique here), as Series.median takes
            # it (nanmedian), without a frame filter per rank
            med = float(np.nanmedian(np.delete(alloc, pos)))
            if med <= 0:
                continue
            over = r.allocated_mb - med
            if over >= excess_mb and over / med * 100 >= excess_pct:
                where = f"pipeline stage {stage}" if stage != "" else "the job"
                out.append(make(
                    "memory", "rank", [r.rank],
                    "critical" if over / med * 100 >= 2 * excess_pct else "warning",
                    f"Rank {r.rank} allocates {r.allocated_mb:.0f} MB at its peak, {over:.0f} MB "
                    f"({over / med * 100:.1f}%) more than the median {med:.0f} MB of the other "
                    f"ranks of {where}, which do the same work.",
                    f"Compare memory_top_ops.csv of rank {r.rank} with its peers: an uneven "
                    f"data or layer split, or a leak (Unreleased(MB)).",
                    id=f"memory:peers:{r.rank}",
                    evidence={"peak_allocated_mb": round(float(r.allocated_mb), 3),
                              "peer_median_mb": round(med, 3),
                              "excess_pct": round(over / med * 100, 2),
                              "peers": [int(x) for x in g["rank"] if x != r.rank],
                              "component": r.component},
                    threshold={"memory_peer_excess_pct": excess_pct,
                               "memory_peer_excess_min_mb": excess_mb}))
    return out


__all__ = ["MEMORY_PEAKS", "MEMORY_OPS", "MEMORY_MODULES", "peaks", "top_operators", "modules",
           "rank_memory", "build", "rank_peaks", "verdicts", "SUMMARY_COLUMNS", "TOP_OPS_COLUMNS",
           "MODULE_COLUMNS"]
