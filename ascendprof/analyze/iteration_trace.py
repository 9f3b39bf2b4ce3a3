"""Cluster iteration-trace analysis (graph mode): slow host and slow card detection.

Input is the ITERATIONS table of every rank (legacy MindSpore ``step_trace_raw``, CANN
``step_trace``): per step the *iteration interval* (waiting for data: host / data pipeline side),
*forward and backward* (device compute) and *tail* (gradient all-reduce and parameter update).
Following the MindSpore cluster iteration-trace guide (seed 003): a rank whose interval stands
out is on a slow host (data processing), a rank whose fp+bp stands out is a slow card, a long
tail points at all-reduce time or parallel imbalance.

"Stands out" uses a robust statistic: the modified z-score ``0.6745 * (x - median) / MAD`` over
the ranks' mean values, plus a minimum relative excess over the median so that tiny absolute
differences on a quiet cluster are not reported. With MAD = 0 (most ranks equal) the score is
taken as infinite for any rank above the median by more than the relative margin.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa

#: modified z-score above which a rank is an outlier (Iglewicz & Hoaglin's usual 3.5)
Z_THRESHOLD = 3.5
#: a rank must also exceed the cluster median by this fraction to be reported
MIN_EXCESS = 0.10

_PHASES = (("iteration_interval_ns", "slow_host",
            "iteration interval (data / host side) is long on this rank"),
           ("fp_bp_ns", "slow_card", "forward+backward (device compute) is long on this rank"),
           ("tail_ns", "long_tail", "tail (all-reduce / parameter update) is long on this rank"))


def per_rank(iterations: pa.Table | pd.DataFrame, *, skip_first: bool = False) -> pd.DataFrame:
    """Per-rank averages of the iteration trace.

    ``iterations``: ITERATIONS rows of any number of ranks. ``skip_first`` drops each rank's
    first step (graph compilation / warm-up often makes it much longer) when the rank has more
    than one step. Returns a DataFrame indexed by nothing with columns ``rank, steps,
    iteration_interval_ms, fp_bp_ms, tail_ms, total_ms`` (means over the rank's steps, ms),
    sorted by rank. Empty input gives an empty frame with these columns.
    """
    df = iterations.to_pandas() if isinstance(iterations, pa.Table) else iterations.copy()
    cols = ["rank", "steps", "iteration_interval_ms", "fp_bp_ms", "tail_ms", "total_ms"]
    if df.empty:
        return pd.DataFrame(columns=cols)
    df = df.sort_values(["rank", "step"])
    if skip_first:
        first = df.groupby("rank")["step"].transform("min")
        many = df.groupby("rank")["step"].transform("size") > 1
        df = df[~((df["step"] == first) & many)]
    g = df.groupby("rank")
    out = pd.DataFrame({
        "steps": g["step"].size(),
        "iteration_interval_ms": g["iteration_interval_ns"].mean() / 1e6,
        "fp_bp_ms": g["fp_bp_ns"].mean() / 1e6,
        "tail_ms": g["tail_ns"].mean() / 1e6,
    }).reset_index()
    out["total_ms"] = out["iteration_interval_ms"] + out["fp_bp_ms"] + out["tail_ms"]
    return out[cols]


def robust_z(values) -> np.ndarray:
    """Modified z-scores ``0.6745 (x - median) / MAD``; where MAD is 0, ranks above the median
    get +inf, those below -inf and the rest 0."""
    x = np.asarray(values, dtype=float)
    med = np.median(x)
    mad = np.median(np.abs(x - med))
    if mad == 0:
        return np.where(x > med, np.inf, np.where(x < med, -np.inf, 0.0))
    return 0.6745 * (x - med) / mad


def findings(table: pd.DataFrame, *, z_threshold: float = Z_THRESHOLD,
             min_excess: float = MIN_EXCESS) -> list[dict]:
    """Verdict-ready findings from :func:`per_rank` output.

    One dict per phase with outliers: ``{"category": "slow_host"|"slow_card"|"long_tail",
    "ranks": [..], "evidence": str, "values_ms": {rank: mean}, "median_ms": float}``. Needs at
    least 3 ranks (a median of two says nothing); returns ``[]`` otherwise.
    """
    if table is None or len(table) < 3:
        return []
    out = []
    ms_cols = {"iteration_interval_ns": "iteration_interval_ms", "fp_bp_ns": "fp_bp_ms",
               "tail_ns": "tail_ms"}
    for col, category, what in _PHASES:
        vals = table[ms_cols[col]].to_numpy(dtype=float)
        med = float(np.median(vals))
        z = robust_z(vals)
        hit = (z > z_threshold) & (vals > med * (1 + min_excess)) & (vals > 0)
        if not hit.any():
            continue
        ranks = [int(r) for r in table["rank"][hit]]
        worst = int(np.argmax(np.where(hit, vals, -np.inf)))
        out.append({
            "category": category,
            "ranks": ranks,
            "evidence": (f"{what}: rank {int(table['rank'].iloc[worst])} averages "
                         f"{vals[worst]:.3f} ms against a cluster median of {med:.3f} ms "
                         f"(robust z {z[worst]:.1f} > {z_threshold})"),
            "values_ms": {int(r): float(v) for r, v in zip(table["rank"], vals)},
            "median_ms": med,
        })
    return out


def analyse(iterations: pa.Table | pd.DataFrame, *, skip_first: bool = False,
            z_threshold: float = Z_THRESHOLD, min_excess: float = MIN_EXCESS
            ) -> tuple[pd.DataFrame, list[dict]]:
    """:func:`per_rank` then :func:`findings`: ``(per-rank DataFrame, findings)``."""
    table = per_rank(iterations, skip_first=skip_first)
    return table, findings(table, z_threshold=z_threshold, min_excess=min_excess)
