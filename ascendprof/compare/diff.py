"""Compare two runs, or two ranks of one run: step breakdown, op types, kernels, communication.

Pure logic on pandas frames; nothing here reads files (loading is in :mod:`ascendprof.compare.gate`,
:func:`ascendprof.compare.gate.load_run`). One side of a comparison is a :class:`Side`: the frames of the
ranks taken from one run. Every value a comparison reports is **per step and per rank**, and the
statistic is the one ``ascendprof gate`` uses (:data:`STATISTIC`): the **median** over the
(rank, step) values in which the key occurs (a metric, an op type, a kernel, a group); the step
table shows the **mean** too. Input without steps (op_statistic.csv) gives one value per rank:
its total divided by the rank's step count. So runs that captured different numbers of steps or
ranks still compare, and a diff shows the numbers a gate judges.

Communication groups are matched by what they are, not by their id (a hash of a per-run key):
the parallel-group name (profiler_metadata.json) and the global ranks (:attr:`GroupLabel.text`);
when two different ranks are compared (``--ranks 0,2``), by the parallel-group name alone. A group of one side that the other lacks is named in :attr:`DiffResult.unmatched`.

Output tables (pandas, stable column order; times in microseconds as in the profiler's CSVs):

- :data:`STEP_DIFF_COLUMNS` — the nine step_trace_time.csv columns (spec §A.1) side by side;
- :data:`OP_DIFF_COLUMNS` — op types per (OP Type, Accelerator Core), like op_statistic.csv (§A.3);
- :data:`KERNEL_DIFF_COLUMNS` — kernels matched by name + input shapes, unmatched ones then by
  op type + input shapes (kernel_details.csv §A.2);
- :data:`COMM_DIFF_COLUMNS` — communication ops per group: elapse / transit / wait /
  synchronization / idle time ('Communication Time Info' of communication.json, §A.5);
- :data:`BANDWIDTH_DIFF_COLUMNS` — bandwidth per group and transport (Σ size / Σ transit time,
  'Communication Bandwidth Info', §A.5, §7.2).

Ratios are ``B / A`` (``None`` when A is 0); deltas are ``B − A``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ascendprof.model import schemas as S
from ascendprof.model import tasks
from ascendprof.analyze.cluster_communication import double_hash as group_hash

#: step_trace_time.csv column (spec §A.1) -> STEP_TRACE table column (ns).
STEP_METRICS: dict[str, str] = dict(S.STEP_METRICS)

#: Communication time fields of COMM_OPS (spec §A.5 'Communication Time Info').
COMM_METRICS: dict[str, str] = {
    "elapse": "elapse_ns", "transit": "transit_ns", "wait": "wait_ns",
    "synchronization": "sync_ns", "idle": "idle_ns",
}

#: Accelerator Core values of communication rows in kernel_details (ascendprof.model.tasks); op-type
#: and kernel comparisons leave them out (they are compared per group instead), as op_statistic
#: does (§A.3).
COMM_CORES = frozenset(tasks.COMM_CORES)

#: The statistic over a side's (rank, step) values, shared with ascendprof gate.
STATISTIC = "median"

STEP_DIFF_COLUMNS = ["scope", "metric", "a_us", "b_us", "delta_us", "ratio", "a_mean_us",
                     "b_mean_us"]
OP_DIFF_COLUMNS = ["op_type", "accelerator_core", "presence", "a_count", "b_count",
                   "count_delta", "a_us", "b_us", "delta_us", "ratio"]
KERNEL_DIFF_COLUMNS = ["match", "name_a", "name_b", "op_type", "accelerator_core",
                       "input_shapes", "a_count", "b_count", "count_delta", "a_us", "b_us",
                       "delta_us", "ratio"]
COMM_DIFF_COLUMNS = ["group", "group_a", "group_b", "presence", "a_count", "b_count"] + [
    f"{side}_{m}_us" for m in COMM_METRICS for side in ("a", "b")] + [
    f"delta_{m}_us" for m in COMM_METRICS]
BANDWIDTH_DIFF_COLUMNS = ["group", "group_a", "group_b", "transport", "a_size_mb", "b_size_mb", "a_gbps", "b_gbps",
                          "delta_gbps", "ratio"]


@dataclass
class Side:
    """The data of one side of a comparison (frames already limited to its ranks).

    - ``steps``: STEP_TRACE columns (``rank``, ``step`` and the ``*_ns`` of :data:`STEP_METRICS`),
      one row per (rank, step);
    - ``kernels``: kernel aggregates ``rank, step, name, op_type, accelerator_core,
      input_shapes, count, total_ns`` (from the KERNELS table; see :func:`aggregate_kernels`);
    - ``op_stats``: ``rank, op_type, accelerator_core, count, total_ns`` totals over the capture
      (op_statistic.csv), used only when ``kernels`` is empty;
    - ``comm_ops``: COMM_OPS columns; ``comm_bw``: COMM_BANDWIDTH columns;
    - ``groups``: communication group name (as in communication.json) -> :class:`GroupLabel`.
    """

    label: str
    ranks: list[int]
    steps: pd.DataFrame | None = None
    kernels: pd.DataFrame | None = None
    op_stats: pd.DataFrame | None = None
    comm_ops: pd.DataFrame | None = None
    comm_bw: pd.DataFrame | None = None
    groups: dict[str, "GroupLabel"] = field(default_factory=dict)
    #: src -> dst links in global ranks (``group, step_key, src, dst, transport, size_mb,
    #: transit_ns``; compare.gate.links), for the gate's per-link bandwidth
    links: pd.DataFrame | None = None


@dataclass(frozen=True)
class GroupLabel:
    """A communication group as people name it: process-group name (``pp``, ``dp_cp`` …, from
    profiler_metadata.json ``parallel_group_info``, spec §A.13) and its global ranks."""

    name: str
    pg_name: str = ""
    ranks: tuple[int, ...] = ()

    @property
    def text(self) -> str:
        rs = f"({', '.join(map(str, self.ranks))}{',' if len(self.ranks) == 1 else ''})" \
            if self.ranks else ""
        if self.pg_name and rs:
            return f"{self.pg_name} {rs}"
        return self.pg_name or rs or self.name

    @property
    def key(self) -> str:
        """What groups are matched on across two runs: the process-group name and the global
        ranks (:attr:`text`), never the group id alone, which is a hash of a per-run key."""
        return self.text

    @property
    def role(self) -> str:
        """What groups are matched on across two different rank sets: the process-group name
        (so rank 0's ``dp_cp (0, 1)`` meets rank 2's ``dp_cp (2, 3)``), else :attr:`key`."""
        return self.pg_name or self.key


@dataclass
class DiffResult:
    """All comparison tables plus the plain-English explanation."""

    a: str
    b: str
    steps: pd.DataFrame
    op_types: pd.DataFrame
    kernels: pd.DataFrame
    communication: pd.DataFrame
    bandwidth: pd.DataFrame
    explanation: str
    pairs: list[tuple[int, int]] = field(default_factory=list)
    #: one sentence per communication group of one side without a match on the other
    unmatched: list[str] = field(default_factory=list)

    def tables(self) -> dict[str, pd.DataFrame]:
        return {"steps": self.steps, "op_types": self.op_types, "kernels": self.kernels,
                "communication": self.communication, "bandwidth": self.bandwidth}

    def as_dict(self, top: int | None = None) -> dict:
        """JSON-ready: ``{"a", "b", "pairs", "explanation", <table>: [row objects]}``;
        NaN becomes null; op_types/kernels/communication are cut to ``top`` rows."""
        out = {"a": self.a, "b": self.b, "pairs": [list(p) for p in self.pairs],
               "statistic": STATISTIC, "explanation": self.explanation,
               "unmatched_groups": list(self.unmatched)}
        for name, df in self.tables().items():
            if top is not None and name in ("op_types", "kernels", "communication"):
                df = df.head(top)
            out[name] = _records(df)
        return out


def _records(df: pd.DataFrame) -> list[dict]:
    df = df.astype(object).where(pd.notna(df), None)
    return df.to_dict(orient="records")


# ---------------------------------------------------------------------------------------------
# group labels


def group_labels(comm_ops: pd.DataFrame | None, metadata: dict[int, dict] | None = None,
                 known: dict[str, GroupLabel] | None = None) -> dict[str, GroupLabel]:
    """Label every group of ``comm_ops`` (COMM_OPS columns ``rank``, ``group``).

    ``metadata``: rank -> profiler_metadata.json object; its ``parallel_group_info`` gives the
    process-group name and global ranks (matched through :func:`group_hash`). Otherwise the
    ranks are those that have ops in the group here, and ``known`` (e.g. from
    communication_group.json) may supply labels. Returns group name -> :class:`GroupLabel`.
    """
    out: dict[str, GroupLabel] = dict(known or {})
    by_hash: dict[str, tuple[str, tuple[int, ...]]] = {}
    for meta in (metadata or {}).values():
        for gid, info in ((meta or {}).get("parallel_group_info") or {}).items():
            if not isinstance(info, dict):
                continue
            ranks = tuple(sorted(int(r) for r in info.get("global_ranks") or []))
            by_hash[str(group_hash(str(gid)))] = (str(info.get("group_name") or ""), ranks)
    if comm_ops is None or not len(comm_ops):
        return out
    seen = comm_ops.groupby("group", dropna=True)["rank"].agg(lambda s: tuple(sorted(set(s))))
    for g, ranks in seen.items():
        g = str(g)
        if g in by_hash:
            out[g] = GroupLabel(g, *by_hash[g])
        elif g not in out:
            out[g] = GroupLabel(g, "", tuple(int(r) for r in ranks))
    return out


# ---------------------------------------------------------------------------------------------
# per-side reductions


def aggregate_kernels(kernels: pd.DataFrame) -> pd.DataFrame:
    """KERNELS rows -> ``rank, step, name, op_type, accelerator_core, input_shapes, count,
    total_ns`` (one row per distinct kernel and step). Null shapes become ``""``, null step -1."""
    cols = ["rank", "step", "name", "op_type", "accelerator_core", "input_shapes"]
    if kernels is None or not len(kernels):
        return pd.DataFrame(columns=cols + ["count", "total_ns"])
    k = kernels[cols + ["dur_ns"]].copy()
    k["step"] = k["step"].fillna(-1).astype("int64")
    for c in ("name", "op_type", "accelerator_core", "input_shapes"):
        k[c] = k[c].fillna("").astype(str)
    g = k.groupby(cols, sort=False)["dur_ns"].agg(count="size", total_ns="sum").reset_index()
    return g


def _steps_per_rank(side: Side) -> dict:
    """rank -> number of steps in the side's step breakdown (at least 1)."""
    if side.steps is None or not len(side.steps):
        return {}
    return {int(r): max(int(c), 1)
            for r, c in side.steps.groupby("rank")["step"].nunique().items()}


def _real_step(s: pd.Series) -> pd.Series:
    """True where a step value names a step (not null, -1, '' or the flat key 'step')."""
    t = s.astype(str)
    return s.notna() & ~t.isin(["-1", "", "step", "<NA>", "nan", "None"])


def _stat(values: np.ndarray) -> tuple[float, float]:
    return float(np.median(values)), float(np.mean(values))


def _per_rank_step(df: pd.DataFrame, keys: list[str], values: list[str], side: Side,
                   step_col: str | None = "step") -> pd.DataFrame:
    """Per ``keys``: the :data:`STATISTIC` (column = the value name) and the mean (``<value>_
    mean``) over the (rank, step) values of Σ ``values`` in each rank-step where the key occurs.
    A rank whose rows have no real step (op_statistic totals, the flat key 'step') gives one
    value: its sum divided by its step count in the side's breakdown (else 1)."""
    cols = keys + values + [f"{v}_mean" for v in values]
    if df is None or not len(df):
        return pd.DataFrame(columns=cols)
    d = df.copy()
    nsteps = _steps_per_rank(side)
    real = _real_step(d[step_col]) if step_col and step_col in d.columns else \
        pd.Series(False, index=d.index)
    d["_unit"] = np.where(real, d[step_col].astype(str) if step_col in d.columns else "", "*")
    for k in keys:  # group-by keys without nulls, so no row is dropped
        d[k] = d[k].astype(object).where(d[k].notna(), "")
    g = d.groupby(keys + ["rank", "_unit"], sort=False)[values].sum().reset_index()
    whole = g["_unit"] == "*"
    if whole.any():
        div = g.loc[whole, "rank"].map(lambda r: nsteps.get(int(r), 1)).astype(float)
        for v in values:
            g[v] = g[v].astype(float)
            g.loc[whole, v] = g.loc[whole, v] / div
    rows = []
    for key, grp in g.groupby(keys, sort=False):
        key = key if isinstance(key, tuple) else (key,)
        stats = [_stat(grp[v].to_numpy(dtype=float)) for v in values]
        rows.append(list(key) + [m for m, _ in stats] + [a for _, a in stats])
    return pd.DataFrame(rows, columns=cols)


def step_stats(steps: pd.DataFrame | None) -> tuple[pd.Series, pd.Series]:
    """(:data:`STATISTIC`, mean) of each :data:`STEP_METRICS` column (ns, float) over the
    (rank, step) rows that have a value; NaN where there is none."""
    cols = list(STEP_METRICS.values())
    if steps is None or not len(steps):
        nan = pd.Series({c: float("nan") for c in cols})
        return nan, nan
    v = steps[cols].astype(float)
    return v.median(), v.mean()


def op_type_totals(side: Side) -> pd.DataFrame:
    """Per (op_type, accelerator_core): ``count`` and ``total_ns`` per step per rank.

    From ``side.kernels`` when present (communication cores left out), else from
    ``side.op_stats`` (totals over the capture, divided by the rank's step count)."""
    keys, vals = ["op_type", "accelerator_core"], ["count", "total_ns"]
    if side.kernels is not None and len(side.kernels):
        k = side.kernels[~side.kernels["accelerator_core"].isin(COMM_CORES)]
        return _per_rank_step(k, keys, vals, side)
    if side.op_stats is not None and len(side.op_stats):
        o = side.op_stats[~side.op_stats["accelerator_core"].isin(COMM_CORES)]
        return _per_rank_step(o, keys, vals, side, step_col=None)
    return pd.DataFrame(columns=keys + vals)


def _group_key(side: Side, group, by_role: bool) -> str:
    label = _label(side, group)
    return label.role if by_role else label.key


def comm_totals(side: Side, by_role: bool = False) -> pd.DataFrame:
    """Per group key (:attr:`GroupLabel.key`, or :attr:`GroupLabel.role` when ``by_role``):
    ``label``, op ``count`` and the :data:`COMM_METRICS` times (ns) per step per rank."""
    vals = list(COMM_METRICS.values())
    if side.comm_ops is None or not len(side.comm_ops):
        return pd.DataFrame(columns=["gkey", "label", "count"] + vals)
    c = side.comm_ops.copy()
    c["gkey"] = c["group"].map(lambda g: _group_key(side, g, by_role))
    c["count"] = 1
    for v in vals:
        c[v] = c[v].fillna(0)
    out = _per_rank_step(c, ["gkey"], ["count"] + vals, side, step_col="step_key")
    labels = c.groupby("gkey")["group"].agg(lambda s: "; ".join(sorted({_label(side, g).text
                                                                        for g in s})))
    out["label"] = out["gkey"].map(labels)
    return out


def bandwidth_totals(side: Side, by_role: bool = False) -> pd.DataFrame:
    """Per (group key, transport): Σ ``size_mb`` and Σ ``transit_ns`` and ``gbps`` = size / time
    (MB/ms = GB/s, spec §7.2) per (rank, step), then their :data:`STATISTIC` over the rank-steps
    that moved data -- as ascendprof gate judges bandwidth."""
    cols = ["gkey", "transport", "size_mb", "transit_ns", "gbps", "label"]
    if side.comm_bw is None or not len(side.comm_bw):
        return pd.DataFrame(columns=cols)
    b = side.comm_bw.copy()
    b["gkey"] = b["group"].map(lambda g: _group_key(side, g, by_role))
    b["size_mb"] = b["size_mb"].fillna(0.0)
    b["transit_ns"] = b["transit_ns"].fillna(0)
    keys = ["gkey", "transport", "rank", "step_key"]
    g = b.groupby(keys, sort=False)[["size_mb", "transit_ns"]].sum().reset_index()
    g = g[(g["size_mb"] > 0) & (g["transit_ns"] > 0)]
    if not len(g):
        return pd.DataFrame(columns=cols)
    g["gbps"] = g["size_mb"] / (g["transit_ns"] / 1e6)
    out = _per_rank_step(g, ["gkey", "transport"], ["size_mb", "transit_ns", "gbps"], side,
                         step_col="step_key")
    labels = b.groupby("gkey")["group"].agg(lambda s: "; ".join(sorted({_label(side, g).text
                                                                        for g in s})))
    out["label"] = out["gkey"].map(labels)
    return out[cols]


def _label(side: Side, group) -> GroupLabel:
    g = str(group)
    return side.groups.get(g) or GroupLabel(g)


# ---------------------------------------------------------------------------------------------
# comparisons


def _ratio(a, b):
    return (b / a).where(a != 0) if isinstance(a, pd.Series) else (b / a if a else None)


def diff_steps(a: pd.DataFrame | None, b: pd.DataFrame | None, scope: str) -> pd.DataFrame:
    """The nine step metrics of two STEP_TRACE frames side by side in us, each side's
    :data:`STATISTIC` over its (rank, step) rows (``a_us``, ``b_us``, delta and ratio of those)
    and its mean (``a_mean_us``, ``b_mean_us``): :data:`STEP_DIFF_COLUMNS`, one row per metric,
    ``scope`` as given (e.g. ``"rank 0 vs rank 2"`` or ``"cluster"``)."""
    (ma, mean_a), (mb, mean_b) = step_stats(a), step_stats(b)
    rows = []
    for name, col in STEP_METRICS.items():
        va, vb = ma[col] / 1000.0, mb[col] / 1000.0
        rows.append([scope, name, va, vb, vb - va, (vb / va) if va else None,
                     mean_a[col] / 1000.0, mean_b[col] / 1000.0])
    return pd.DataFrame(rows, columns=STEP_DIFF_COLUMNS)


def diff_op_types(a: Side, b: Side) -> pd.DataFrame:
    """Op types of ``a`` and ``b`` per (op_type, accelerator_core), outer-joined, per step per
    rank: :data:`OP_DIFF_COLUMNS`, sorted by ``|delta_us|`` descending. ``presence`` is
    ``both``, ``only_a`` or ``only_b``."""
    ta, tb = op_type_totals(a), op_type_totals(b)
    m = ta.merge(tb, on=["op_type", "accelerator_core"], how="outer", suffixes=("_a", "_b"),
                 indicator=True)
    out = pd.DataFrame({
        "op_type": m["op_type"], "accelerator_core": m["accelerator_core"],
        "presence": m["_merge"].map({"both": "both", "left_only": "only_a",
                                     "right_only": "only_b"}).astype(str),
        "a_count": m["count_a"].fillna(0).astype(float),
        "b_count": m["count_b"].fillna(0).astype(float),
        "a_us": m["total_ns_a"].fillna(0).astype(float) / 1000.0,
        "b_us": m["total_ns_b"].fillna(0).astype(float) / 1000.0,
    })
    return _deltas(out, OP_DIFF_COLUMNS)


def _deltas(out: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    """``out`` with count_delta, delta_us and ratio (b against a), by ``|delta_us|``."""
    out["count_delta"] = out["b_count"] - out["a_count"]
    out["delta_us"] = out["b_us"] - out["a_us"]
    out["ratio"] = _ratio(out["a_us"], out["b_us"])
    return _sort_abs(out[columns], "delta_us")


def _sort_abs(df: pd.DataFrame, col: str) -> pd.DataFrame:
    if not len(df):
        return df.reset_index(drop=True)
    order = df[col].abs().sort_values(ascending=False, kind="stable").index
    return df.loc[order].reset_index(drop=True)


def diff_kernels(a: Side, b: Side) -> pd.DataFrame:
    """Kernels matched by (name, input shapes); those left over are matched by (op type,
    input shapes) (``match`` = ``name+shapes`` / ``op_type+shapes``), the rest are ``only_a`` /
    ``only_b``. Values per step per rank: :data:`KERNEL_DIFF_COLUMNS`, by ``|delta_us|``."""
    keys = ["name", "op_type", "accelerator_core", "input_shapes"]
    empty = pd.DataFrame(columns=KERNEL_DIFF_COLUMNS)
    frames = []
    for s in (a, b):
        k = s.kernels
        if k is None or not len(k):
            frames.append(pd.DataFrame(columns=keys + ["count", "total_ns"]))
            continue
        k = k[~k["accelerator_core"].isin(COMM_CORES)]
        frames.append(_per_rank_step(k, keys, ["count", "total_ns"], s))
    ka, kb = frames
    if not len(ka) and not len(kb):
        return empty
    m1 = ka.merge(kb, on=["name", "input_shapes"], how="outer", suffixes=("_a", "_b"),
                  indicator=True)
    both = m1[m1["_merge"] == "both"]
    rows = [pd.DataFrame({
        "match": "name+shapes", "name_a": both["name"], "name_b": both["name"],
        "op_type": both["op_type_a"], "accelerator_core": both["accelerator_core_a"],
        "input_shapes": both["input_shapes"], "a_count": both["count_a"],
        "b_count": both["count_b"], "a_us": both["total_ns_a"] / 1000.0,
        "b_us": both["total_ns_b"] / 1000.0})]
    # second pass on op type + shapes for what the names did not match
    la = m1[m1["_merge"] == "left_only"][["name", "op_type_a", "accelerator_core_a",
                                          "input_shapes", "count_a", "total_ns_a"]]
    lb = m1[m1["_merge"] == "right_only"][["name", "op_type_b", "accelerator_core_b",
                                           "input_shapes", "count_b", "total_ns_b"]]
    la.columns = lb.columns = ["name", "op_type", "accelerator_core", "input_shapes", "count",
                               "total_ns"]
    ga, gb = (_by_type(x) for x in (la, lb))
    m2 = ga.merge(gb, on=["op_type", "input_shapes"], how="outer", suffixes=("_a", "_b"),
                  indicator=True)
    kind = m2["_merge"].map({"both": "op_type+shapes", "left_only": "only_a",
                             "right_only": "only_b"}).astype(str)
    rows.append(pd.DataFrame({
        "match": kind, "name_a": m2["name_a"], "name_b": m2["name_b"], "op_type": m2["op_type"],
        "accelerator_core": m2["accelerator_core_a"].fillna(m2["accelerator_core_b"]),
        "input_shapes": m2["input_shapes"], "a_count": m2["count_a"],
        "b_count": m2["count_b"], "a_us": m2["total_ns_a"] / 1000.0,
        "b_us": m2["total_ns_b"] / 1000.0}))
    out = pd.concat([r for r in rows if len(r)], ignore_index=True) if any(
        len(r) for r in rows) else empty.copy()
    for c in ("a_count", "b_count", "a_us", "b_us"):
        out[c] = out[c].astype(float).fillna(0.0)
    return _deltas(out, KERNEL_DIFF_COLUMNS)


def _by_type(k: pd.DataFrame) -> pd.DataFrame:
    if not len(k):
        return pd.DataFrame(columns=["op_type", "input_shapes", "name", "accelerator_core",
                                     "count", "total_ns"])
    return k.groupby(["op_type", "input_shapes"], dropna=False).agg(
        name=("name", lambda s: "; ".join(sorted(set(s)))),
        accelerator_core=("accelerator_core", lambda s: "; ".join(sorted(set(s)))),
        count=("count", "sum"), total_ns=("total_ns", "sum")).reset_index()


def diff_comm(a: Side, b: Side, by_role: bool = False) -> pd.DataFrame:
    """Communication per group (matched on :attr:`GroupLabel.key`, or :attr:`GroupLabel.role`
    when ``by_role``): op count and the :data:`COMM_METRICS` times per step per rank (us), with
    deltas: :data:`COMM_DIFF_COLUMNS`, sorted by ``|delta_elapse_us|``."""
    ta, tb = comm_totals(a, by_role), comm_totals(b, by_role)
    if not len(ta) and not len(tb):
        return pd.DataFrame(columns=COMM_DIFF_COLUMNS)
    m = ta.merge(tb, on="gkey", how="outer", suffixes=("_a", "_b"), indicator=True)
    out = pd.DataFrame({
        "group": m["gkey"], "group_a": m["label_a"], "group_b": m["label_b"],
        "presence": m["_merge"].map({"both": "both", "left_only": "only_a",
                                     "right_only": "only_b"}).astype(str),
        "a_count": m["count_a"].astype(float).fillna(0.0),
        "b_count": m["count_b"].astype(float).fillna(0.0)})
    for name, col in COMM_METRICS.items():
        out[f"a_{name}_us"] = m[f"{col}_a"].astype(float).fillna(0.0) / 1000.0
        out[f"b_{name}_us"] = m[f"{col}_b"].astype(float).fillna(0.0) / 1000.0
    for name in COMM_METRICS:
        out[f"delta_{name}_us"] = out[f"b_{name}_us"] - out[f"a_{name}_us"]
    return _sort_abs(out[COMM_DIFF_COLUMNS], "delta_elapse_us")


def diff_bandwidth(a: Side, b: Side, by_role: bool = False) -> pd.DataFrame:
    """Bandwidth per (group key, transport), per rank-step size / time, :data:`STATISTIC` on
    each side: :data:`BANDWIDTH_DIFF_COLUMNS`. Transports that moved nothing on both sides are
    left out."""
    ta, tb = bandwidth_totals(a, by_role), bandwidth_totals(b, by_role)
    if not len(ta) and not len(tb):
        return pd.DataFrame(columns=BANDWIDTH_DIFF_COLUMNS)
    m = ta.merge(tb, on=["gkey", "transport"], how="outer", suffixes=("_a", "_b"))
    out = pd.DataFrame({
        "group": m["gkey"], "group_a": m["label_a"], "group_b": m["label_b"],
        "transport": m["transport"],
        "a_size_mb": m["size_mb_a"].astype(float).fillna(0.0),
        "b_size_mb": m["size_mb_b"].astype(float).fillna(0.0),
        "a_gbps": m["gbps_a"].astype(float), "b_gbps": m["gbps_b"].astype(float)})
    out = out[(out["a_size_mb"] > 0) | (out["b_size_mb"] > 0)]
    out["delta_gbps"] = out["b_gbps"] - out["a_gbps"]
    out["ratio"] = _ratio(out["a_gbps"], out["b_gbps"])
    return out[BANDWIDTH_DIFF_COLUMNS].sort_values(["group", "transport"]).reset_index(drop=True)


# ---------------------------------------------------------------------------------------------
# explanation


#: the smallest op-type change per step the explanation names (µs)
OP_CHANGE_US = 50.0


def _ms(us: float) -> str:
    return f"{abs(us) / 1000.0:.1f} ms"


def _pct(a: float, b: float) -> str:
    if not a:
        return "new"
    return f"{(b - a) / a * 100:+.0f} %"


def explain(steps: pd.DataFrame, op_types: pd.DataFrame, comm: pd.DataFrame,
            scope: str | None = None, a_name: str = "A", b_name: str = "B") -> str:
    """A few sentences saying where most of the difference between A and B lies.

    Uses the ``scope`` rows of ``steps`` (default: the first scope): the Stage (step time)
    delta, then the Computing / Communication(Not Overlapped) / Free deltas, the op types that
    make most of the Computing delta, and the group with the largest change in wait time.
    Empty string when there is no step data and no op data.
    """
    parts: list[str] = []
    if len(steps):
        scope = scope or steps["scope"].iloc[0]
        st = steps[steps["scope"] == scope].set_index("metric")
        stage = st.loc["Stage"]
        d = stage["delta_us"]
        if pd.isna(d):
            pass
        elif abs(d) < max(0.005 * abs(stage["a_us"]), 1.0):
            parts.append(f"{b_name} and {a_name} take the same time per step "
                         f"({_ms(stage['a_us'])} vs {_ms(stage['b_us'])} Stage)")
        else:
            parts.append(f"{b_name} is {_ms(d)} {'slower' if d > 0 else 'faster'} per step "
                         f"than {a_name} (Stage {_ms(stage['a_us'])} -> {_ms(stage['b_us'])}, "
                         f"{_pct(stage['a_us'], stage['b_us'])})")
        comp = []
        for m in ("Computing", "Communication(Not Overlapped)", "Free"):
            r = st.loc[m]
            if pd.notna(r["delta_us"]) and abs(r["delta_us"]) >= max(
                    0.01 * abs(stage["a_us"] or 0), 1.0):
                comp.append(f"{'+' if r['delta_us'] > 0 else '-'}{_ms(r['delta_us'])} {m} "
                            f"({_pct(r['a_us'], r['b_us'])})")
        if comp:
            parts.append(f"{b_name} spends " + ", ".join(comp))
    # an op type counts as changed from 0.05 ms per step (it then shows as 0.1 ms or more)
    ops = op_types[op_types["delta_us"].abs() >= OP_CHANGE_US] if len(op_types) else op_types
    if len(ops):
        top = ops.head(3)
        items = []
        for _, r in top.iterrows():
            what = f"{r['op_type']} on {r['accelerator_core']}" if r["accelerator_core"] else \
                str(r["op_type"])
            sign = "+" if r["delta_us"] > 0 else "-"
            items.append(f"{sign}{_ms(r['delta_us'])} {what} ({_pct(r['a_us'], r['b_us'])})")
        parts.append("largest op-type changes: " + ", ".join(items))
    if len(comm):
        c = comm.loc[comm["delta_wait_us"].abs().sort_values(ascending=False).index[:1]].iloc[0]
        if abs(c["delta_wait_us"]) >= 1.0:
            label = c["group_b"] if isinstance(c["group_b"], str) else c["group_a"]
            more = "more" if c["delta_wait_us"] > 0 else "less"
            parts.append(f"{b_name} waits {_ms(c['delta_wait_us'])} {more} in group {label} "
                         f"(wait {_ms(c['a_wait_us'])} -> {_ms(c['b_wait_us'])})")
    return "; ".join(parts) + ("." if parts else "")


def compare(a: Side, b: Side, pairs: list[tuple[int, int]] | None = None) -> DiffResult:
    """Compare two sides. ``pairs`` (rank of A, rank of B) add per-pair step rows (scope
    ``"rank i vs rank j"``) after the whole-side rows; the whole-side scope is ``"cluster"``
    when a side has several ranks, else the single pair."""
    pairs = pairs or []
    single = len(a.ranks) == 1 and len(b.ranks) == 1
    main_scope = (f"rank {a.ranks[0]} vs rank {b.ranks[0]}" if a.ranks[0] != b.ranks[0]
                  else f"rank {a.ranks[0]}") if single else "cluster"
    frames = [diff_steps(a.steps, b.steps, main_scope)]
    if not single:
        for ra, rb in pairs:
            sa = a.steps[a.steps["rank"] == ra] if a.steps is not None else None
            sb = b.steps[b.steps["rank"] == rb] if b.steps is not None else None
            frames.append(diff_steps(sa, sb, f"rank {ra}" if ra == rb else
                                     f"rank {ra} vs rank {rb}"))
    steps = pd.concat(frames, ignore_index=True)
    ops = diff_op_types(a, b)
    kernels = diff_kernels(a, b)
    # two different ranks (--ranks 0,2): their groups meet by role (dp with dp), not by ranks
    by_role = single and a.ranks != b.ranks
    comm = diff_comm(a, b, by_role)
    bw = diff_bandwidth(a, b, by_role)
    # a side without op or communication data at all (e.g. a CSV-only baseline) makes every
    # row "only in" the other side: nothing to explain there
    has_ops = [(s.kernels is not None and len(s.kernels)) or (s.op_stats is not None and
                                                               len(s.op_stats)) for s in (a, b)]
    text = explain(steps, ops if all(has_ops) else ops.iloc[0:0],
                   comm[comm["presence"] == "both"] if len(comm) else comm, main_scope)
    return DiffResult(a.label, b.label, steps, ops, kernels, comm, bw, text, pairs,
                      unmatched_groups(comm))


def unmatched_groups(comm: pd.DataFrame) -> list[str]:
    """One sentence per group of the :func:`diff_comm` table found on one side only."""
    out = []
    for r in comm.itertuples(index=False):
        if r.presence == "only_a":
            out.append(f"group {r.group_a} of A has no match in B (no group with the same "
                       f"parallel-group name and ranks)")
        elif r.presence == "only_b":
            out.append(f"group {r.group_b} of B has no match in A (no group with the same "
                       f"parallel-group name and ranks)")
    return out


def select_ranks(side: Side, ranks: list[int], label: str | None = None) -> Side:
    """The part of ``side`` that belongs to ``ranks`` (every frame filtered on ``rank``; group
    labels kept). Raises ValueError naming the ranks ``side`` lacks."""
    missing = [r for r in ranks if r not in side.ranks]
    if missing:
        raise ValueError(f"rank(s) {', '.join(map(str, missing))} not in {side.label} "
                         f"(ranks there: {', '.join(map(str, side.ranks)) or 'none'})")

    def f(df):
        return None if df is None else df[df["rank"].isin(ranks)].reset_index(drop=True)

    return Side(label=label or side.label, ranks=sorted(ranks), steps=f(side.steps),
                kernels=f(side.kernels), op_stats=f(side.op_stats), comm_ops=f(side.comm_ops),
                comm_bw=f(side.comm_bw), groups=dict(side.groups))


def rank_pairs(a: Side, b: Side) -> list[tuple[int, int]]:
    """Which ranks to set side by side: the one rank of each when both have a single rank,
    else the ranks both have (rank i with rank i)."""
    if len(a.ranks) == 1 and len(b.ranks) == 1:
        return [(a.ranks[0], b.ranks[0])]
    return [(r, r) for r in a.ranks if r in b.ranks]
