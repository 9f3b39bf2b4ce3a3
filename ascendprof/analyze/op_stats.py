"""Op statistics from kernels, computed the way CANN's op_statistic.csv is (spec §A.3, §7.4),
per rank and for the whole cluster, plus the cluster's top kernels.

Work is split for distribution: :func:`rank_partial` / :func:`kernel_partial` reduce one rank's
KERNELS table to small aggregates on the worker; :func:`combine` / :func:`top_kernels` build the
outputs from those partials only, never from the raw kernels of all ranks.
"""

from __future__ import annotations

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from ascendprof.model.results import concat_parts
from ascendprof.model.tasks import COMM_CORES

#: Task types CANN never counts as ops (spec §A.3).
NON_OP_CORES = ("WRITE_BACK", "INVALID")

_AGGS = [("dur_ns", "count"), ("dur_ns", "sum"), ("dur_ns", "min"), ("dur_ns", "max")]

OP_STATISTICS_COLUMNS = ["Rank", "OP Type", "Accelerator Core", "Count", "Total Time(us)",
                         "Min Time(us)", "Avg Time(us)", "Max Time(us)", "Ratio(%)"]
TOP_KERNELS_COLUMNS = ["Name", "Input Shapes", "OP Type", "Accelerator Core", "Count", "Ranks",
                       "Total Time(us)", "Avg Time(us)", "Max Time(us)"]


#: the KERNELS columns the partials use (filtering only these, not ~50 PMU columns, is 5x faster)
_USED = ["rank", "name", "input_shapes", "op_type", "accelerator_core", "dur_ns"]
#: ... those :func:`rank_partial` and :func:`kernel_partial` read
RANK_COLUMNS = ("rank", "op_type", "accelerator_core", "dur_ns")
KERNEL_COLUMNS = tuple(_USED)


def _not_comm(kernels: pa.Table) -> pa.Table:
    present = set(kernels.column_names)
    kernels = kernels.select([c for c in _USED if c in present])
    core = kernels["accelerator_core"]
    keep = pc.invert(pc.fill_null(pc.is_in(core, pa.array(COMM_CORES)), False))
    return kernels.filter(pc.and_(keep, pc.is_valid(kernels["dur_ns"])))


def _aggregate(t: pa.Table, keys: list[str]) -> pa.Table:
    g = t.select(keys + ["dur_ns"]).group_by(keys, use_threads=False).aggregate(_AGGS)
    g = g.rename_columns([{"dur_ns_count": "count", "dur_ns_sum": "total_ns", "dur_ns_min": "min_ns",
                           "dur_ns_max": "max_ns"}.get(c, c) for c in g.column_names])
    return g.select(keys + ["count", "total_ns", "min_ns", "max_ns"]).cast(pa.schema(
        [t.schema.field(k) for k in keys]
        + [pa.field(c, pa.int64()) for c in ("count", "total_ns", "min_ns", "max_ns")]))


def rank_partial(kernels: pa.Table) -> pa.Table:
    """One rank's op statistics aggregate from a KERNELS table (spec §A.3 grouping).

    In: KERNELS (``rank, op_type, accelerator_core, dur_ns`` used). Rows left out, as the
    profiler does: communication rows (Accelerator Core COMMUNICATION / HCCL), op type 'N/A'
    (null after reading; all Level0 rows), core types WRITE_BACK / INVALID, null durations.
    Out: ``rank int32, op_type, accelerator_core, count, total_ns, min_ns, max_ns`` (int64 ns),
    one row per (rank, op_type, accelerator_core); empty when nothing is left.
    """
    keys = ["rank", "op_type", "accelerator_core"]
    t = kernels.select(keys + ["dur_ns"])  # one filtered copy of these columns only
    core, op = t["accelerator_core"], t["op_type"]
    keep = pc.and_(pc.invert(pc.fill_null(pc.is_in(core, pa.array(COMM_CORES)), False)),
                   pc.is_valid(t["dur_ns"]))  # _not_comm's rows
    keep = pc.and_(keep, pc.and_(pc.is_valid(op), pc.not_equal(pc.fill_null(op, ""), "N/A")))
    keep = pc.and_(keep, pc.invert(pc.fill_null(pc.is_in(core, pa.array(NON_OP_CORES)),
                                                False)))
    return _aggregate(t.filter(keep), keys)


def kernel_partial(kernels: pa.Table) -> pa.Table:
    """One rank's per-kernel aggregate from a KERNELS table, for :func:`top_kernels`.

    Groups by ``(rank, name, input_shapes, op_type, accelerator_core)`` (null keys form their own
    group, so Level0 kernels without op type count too); communication rows are left out.
    Out: those keys plus ``count, total_ns, min_ns, max_ns`` (int64 ns).
    """
    return _aggregate(_not_comm(kernels),
                      ["rank", "name", "input_shapes", "op_type", "accelerator_core"])


def _us(ns: pd.Series) -> pd.Series:
    return (ns.astype("float64") / 1000.0).round(3)


def _finish(g: pd.DataFrame, rank_label) -> pd.DataFrame:
    """op_statistics rows of ``g`` (grouped partial rows). ``rank_label`` None: ``g`` holds many
    ranks (column ``rank``), each rank's ratios relative to its own total; else every row is
    labelled ``rank_label`` and ratios are relative to the whole of ``g``. Sorted by rank, then
    Total desc, OP Type, Accelerator Core (vectorised over all ranks at once: no per-rank loop)."""
    if rank_label is None:
        labels = g["rank"].astype("int64").to_numpy()
        total_all = g.groupby("rank")["total_ns"].transform("sum").astype("float64")
    else:
        labels = [rank_label] * len(g)
        total_all = pd.Series(float(g["total_ns"].sum()), index=g.index)
    total = g["total_ns"].astype("float64")
    ratio = (total / total_all.where(total_all != 0) * 100.0).round(3).fillna(0.0)
    ratio = ratio.where(total_all != 0, 0.0)
    out = pd.DataFrame({
        "Rank": labels,
        "OP Type": g["op_type"].to_numpy(),
        "Accelerator Core": g["accelerator_core"].to_numpy(),
        "Count": g["count"].astype("int64").to_numpy(),
        "Total Time(us)": _us(g["total_ns"]).to_numpy(),
        "Min Time(us)": _us(g["min_ns"]).to_numpy(),
        "Avg Time(us)": (total / g["count"] / 1000.0).round(3).to_numpy(),
        "Max Time(us)": _us(g["max_ns"]).to_numpy(),
        "Ratio(%)": ratio.to_numpy(),
    })
    out["_total"] = g["total_ns"].to_numpy()
    keys = ["_total", "OP Type", "Accelerator Core"]
    asc = [False, True, True]
    if rank_label is None:
        keys, asc = ["Rank"] + keys, [True] + asc
    return out.sort_values(keys, ascending=asc, kind="stable")


def _group(df: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    return df.groupby(keys, dropna=False, sort=True).agg(
        count=("count", "sum"), total_ns=("total_ns", "sum"), min_ns=("min_ns", "min"),
        max_ns=("max_ns", "max")).reset_index()


def combine(partials) -> pd.DataFrame:
    """op_statistics.csv from :func:`rank_partial` tables of any number of ranks (an iterable;
    parked tables are read back a batch of ranks at a time: model.results.concat_parts).

    Out columns :data:`OP_STATISTICS_COLUMNS`: ``Rank`` (the rank number, or ``"cluster"`` for
    rows summed over all ranks), ``OP Type``, ``Accelerator Core``, ``Count``, ``Total / Min /
    Avg / Max Time(us)`` (3 decimals), ``Ratio(%)`` = share of that rank's (or the cluster's)
    total op time, 3 decimals, as in the profiler's op_statistic.csv (spec §A.3). Sorted by rank
    (cluster last), then Total desc. Partials of the same rank are merged. Empty input -> an
    empty frame with these columns.
    """
    t = concat_parts(p for p in partials if p is not None and p.num_rows)
    if t is None:
        return pd.DataFrame(columns=OP_STATISTICS_COLUMNS)
    df = t.to_pandas()
    del t
    df[["op_type", "accelerator_core"]] = df[["op_type", "accelerator_core"]].astype(object)
    frames = []
    frames.append(_finish(_group(df, ["rank", "op_type", "accelerator_core"]), None))
    frames.append(_finish(_group(df, ["op_type", "accelerator_core"]), "cluster"))
    out = pd.concat(frames, ignore_index=True).drop(columns="_total")
    out["Rank"] = out["Rank"].astype(object)
    return out[OP_STATISTICS_COLUMNS]


def compact_ranks(ranks) -> str:
    """Sorted distinct ranks as ranges: ``[3, 0, 1, 2, 8] -> "0-3,8"``."""
    rs = sorted({int(r) for r in ranks})
    out, i = [], 0
    while i < len(rs):
        j = i
        while j + 1 < len(rs) and rs[j + 1] == rs[j] + 1:
            j += 1
        out.append(str(rs[i]) if i == j else f"{rs[i]}-{rs[j]}")
        i = j + 1
    return ",".join(out)


def top_kernels(partials, n: int = 20) -> pd.DataFrame:
    """top_kernels.csv: the ``n`` kernels with the largest total time over the cluster.

    In: :func:`kernel_partial` tables (an iterable, read back as :func:`combine` does). A kernel is (name, input shapes, op type, accelerator
    core), summed over ranks. Out columns :data:`TOP_KERNELS_COLUMNS`: ``Count`` (all ranks),
    ``Ranks`` (the ranks that ran it, as ranges "0-3,8"), ``Total / Avg / Max Time(us)``
    (3 decimals). Missing text keys are written 'N/A'. Sorted by Total desc, then Name.
    """
    t = concat_parts(p for p in partials if p is not None and p.num_rows)
    if t is None:
        return pd.DataFrame(columns=TOP_KERNELS_COLUMNS)
    keys = ["name", "input_shapes", "op_type", "accelerator_core"]
    t = pa.table({**{k: pc.fill_null(t[k].cast(pa.string()), "N/A") for k in keys},
                  **{c: t[c] for c in ("rank", "count", "total_ns", "max_ns")}})
    # grouped and sorted in Arrow: only the top n kernels become Python rows (a cluster has
    # ~10^5 partial rows; a pandas group-by over their texts took ~20 MB at 256 ranks).
    # Arrow orders text by UTF-8 bytes, which is code point order, as Python's sort.
    g = t.group_by(keys, use_threads=False).aggregate(
        [("count", "sum"), ("total_ns", "sum"), ("max_ns", "max"), ("rank", "distinct")])
    g = g.take(pc.sort_indices(g, [("total_ns_sum", "descending")]
                               + [(k, "ascending") for k in keys])[:n]).to_pydict()
    total = pd.Series(g["total_ns_sum"], dtype="int64")
    count = pd.Series(g["count_sum"], dtype="int64")
    return pd.DataFrame({
        "Name": g["name"], "Input Shapes": g["input_shapes"], "OP Type": g["op_type"],
        "Accelerator Core": g["accelerator_core"], "Count": count,
        "Ranks": [compact_ranks(r) for r in g["rank_distinct"]],
        "Total Time(us)": _us(total),
        "Avg Time(us)": (total.astype("float64") / count / 1000.0).round(3),
        "Max Time(us)": _us(pd.Series(g["max_ns_max"], dtype="int64")),
    }, columns=TOP_KERNELS_COLUMNS)
