"""Every gate input reduced to one *observation* table (:data:`OBS_COLUMNS`): one value per
metric, rank, step and key (op type, group label), which the rules then judge."""

from __future__ import annotations

import pandas as pd

from ascendprof.compare.diff import COMM_CORES, COMM_METRICS, STEP_METRICS, GroupLabel, Side
from ascendprof.compare.gate.rules import BANDWIDTH, LINK_BANDWIDTH, OP_TIME
from ascendprof.model.ranks import rank_ranges

#: Columns of the observation table.
OBS_COLUMNS = ["metric", "rank", "step", "key", "transport", "value", "denom"]


def link_group(g: GroupLabel) -> str:
    """A group as links name it: ``tp (0-7)`` (parallel-group name and rank ranges; the ranks
    alone, or the group id, when that is all there is). Short at any cluster size."""
    rs = f"({rank_ranges(g.ranks, len(g.ranks))})" if g.ranks else ""
    return " ".join(x for x in (g.pg_name, rs) if x) or g.name


def observations(side: Side) -> pd.DataFrame:
    """Side -> observation table :data:`OBS_COLUMNS`.

    - step metrics: one row per (rank, step) and metric, ``value`` in ns;
    - ``op_time``: per (rank, step, op type) Σ kernel time in ns (communication cores left out);
      from op_statistic totals (step ``""``) divided by the rank's step count when known;
    - group metrics: per (rank, step, group label) Σ over the group's ops, ns;
    - ``bandwidth``: per (rank, step, group label, transport) ``value`` = Σ size (MB) and
      ``denom`` = Σ transit time (ns); GB/s = value / (denom / 1e6);
    - :data:`~ascendprof.compare.gate.rules.LINK_BANDWIDTH`: the same per (src rank, step, link
      ``"<group> <src>-><dst>"``, transport), from :attr:`Side.links`; the group as its
      parallel-group name and rank ranges (``tp (0-7) 2->3``: :func:`link_group`).
    """
    rows = []
    nsteps: dict[int, int] = {}
    if side.steps is not None and len(side.steps):
        st = side.steps
        nsteps = {int(r): max(int(n), 1) for r, n in st.groupby("rank")["step"].nunique().items()}
        # a breakdown without step numbers (one window over the run, recomputed from kernels)
        # is one value of its rank: keyed "" (a null key would drop out of every groupby)
        step_key = st["step"].map(lambda v: "" if pd.isna(v) else str(int(v)))
        for name, col in STEP_METRICS.items():
            v = st[col]
            ok = v.notna()
            if ok.any():
                rows.append(pd.DataFrame({
                    "metric": name, "rank": st["rank"][ok].astype(int),
                    "step": step_key[ok], "key": "", "transport": "",
                    "value": v[ok].astype(float), "denom": float("nan")}))
    if side.kernels is not None and len(side.kernels):
        k = side.kernels[~side.kernels["accelerator_core"].isin(COMM_CORES)]
        g = k.groupby(["rank", "step", "op_type"])["total_ns"].sum().reset_index()
        g["step"] = g["step"].astype(str)
        rows.append(pd.DataFrame({"metric": OP_TIME, "rank": g["rank"].astype(int),
                                  "step": g["step"], "key": g["op_type"], "transport": "",
                                  "value": g["total_ns"].astype(float), "denom": float("nan")}))
    elif side.op_stats is not None and len(side.op_stats):
        o = side.op_stats[~side.op_stats["accelerator_core"].isin(COMM_CORES)]
        g = o.groupby(["rank", "op_type"])["total_ns"].sum().reset_index()
        div = g["rank"].map(lambda r: nsteps.get(int(r), 1)).astype(float)
        rows.append(pd.DataFrame({"metric": OP_TIME, "rank": g["rank"].astype(int), "step": "",
                                  "key": g["op_type"], "transport": "",
                                  "value": g["total_ns"].astype(float) / div,
                                  "denom": float("nan")}))
    if side.comm_ops is not None and len(side.comm_ops):
        c = side.comm_ops.copy()
        c["key"] = c["group"].map(lambda g: (side.groups.get(str(g)) or GroupLabel(str(g))).text)
        for name, col in COMM_METRICS.items():
            g = c.groupby(["rank", "step_key", "key"])[col].sum(min_count=1).reset_index()
            g = g[g[col].notna()]
            rows.append(pd.DataFrame({"metric": name, "rank": g["rank"].astype(int),
                                      "step": g["step_key"].astype(str), "key": g["key"],
                                      "transport": "", "value": g[col].astype(float),
                                      "denom": float("nan")}))
    if side.comm_bw is not None and len(side.comm_bw):
        b = side.comm_bw.copy()
        b["key"] = b["group"].map(lambda g: (side.groups.get(str(g)) or GroupLabel(str(g))).text)
        g = b.groupby(["rank", "step_key", "key", "transport"])[["size_mb", "transit_ns"]].sum(
        ).reset_index()
        g = g[g["size_mb"] > 0]
        rows.append(pd.DataFrame({"metric": BANDWIDTH, "rank": g["rank"].astype(int),
                                  "step": g["step_key"].astype(str), "key": g["key"],
                                  "transport": g["transport"].astype(str),
                                  "value": g["size_mb"].astype(float),
                                  "denom": g["transit_ns"].astype(float)}))
    if side.links is not None and len(side.links):
        k = side.links
        label = k["group"].map(lambda g: link_group(side.groups.get(str(g)) or GroupLabel(str(g))))
        k = k[k["size_mb"] > 0]
        label = label[k.index]
        rows.append(pd.DataFrame({"metric": LINK_BANDWIDTH, "rank": k["src"].astype(int),
                                  "step": k["step_key"].astype(str),
                                  "key": label + " " + k["src"].astype(str) + "->"
                                  + k["dst"].astype(str),
                                  "transport": k["transport"].astype(str),
                                  "value": k["size_mb"].astype(float),
                                  "denom": k["transit_ns"].astype(float)}))
    rows = [r for r in rows if len(r)]
    if not rows:
        return pd.DataFrame(columns=OBS_COLUMNS)
    return pd.concat(rows, ignore_index=True)[OBS_COLUMNS]
