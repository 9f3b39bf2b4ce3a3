"""Mixture of experts: token load per rank of each expert-parallel (EP) group, from the input
shapes of the GroupedMatmul operators that compute the experts (KERNELS ``input_shapes``).

Tokens of one call: the first dimensions of the inputs before the stacked expert weights
``E,K,N``; without them, msprof-analyze's ``ep_load_balance`` count (the first dimensions of
every non-empty input but the last two; msprof-analyze uses it always and also adds the weights'
first dimension when a bias or scale input is present, which the first rule avoids). EP groups,
columns and the ``moe`` verdict (:data:`EP_IMBALANCE_RATIO`): docs/analyses.md, "Mixture of
experts". Nothing here reads files.
"""

from __future__ import annotations

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from ascendprof.model import schemas as S

EXPERT_LOAD = "expert_load"
LOAD_SCHEMA = pa.schema([
    ("rank", pa.int32()), ("step", pa.int32()), ("calls", pa.int64()), ("tokens", pa.int64()),
    ("experts", pa.int64()), ("unparsed", pa.int64())])

#: op types whose input shapes carry the expert load
OP_TYPES = ("GroupedMatmul",)
#: parallel_group_info group names of expert-parallel groups
EP_NAMES = ("exp", "ep", "expert", "expert_model_parallel", "expert_parallel")
#: a group whose busiest rank carries this many times the group's mean tokens is imbalanced
#: (critical at 1.5 x)
EP_IMBALANCE_RATIO = 1.2

COLUMNS = ["Step", "EP Group", "EP Group Source", "Rank", "GroupedMatmul Calls", "Tokens",
           "Local Experts", "Tokens per Expert", "Group Mean Tokens", "Load / Mean",
           "Group Max / Mean"]


def tokens_of(shapes: str | None) -> tuple[int | None, int | None]:
    """(tokens, local experts) of one GroupedMatmul call from its Input Shapes text (module
    doc); (None, None) when the text does not parse."""
    if not shapes:
        return None, None
    parts = [p.strip().strip('"') for p in str(shapes).split(";")]
    parts = [p for p in parts if p]
    if len(parts) < 2:
        return None, None
    dims = []
    for p in parts:
        try:
            dims.append([int(x) for x in p.split(",") if x.strip()])
        except ValueError:
            return None, None
    w = next((i for i, d in enumerate(dims) if len(d) == 3), None)
    if w is not None and w > 0:  # x tensor(s) before the stacked weights E,K,N
        return sum(d[0] for d in dims[:w] if d), dims[w][0]
    # no stacked weights (x and weights given as lists): msprof-analyze's count
    tokens = sum(d[0] for d in dims[:-2] if d) if len(dims) > 2 else None
    return tokens, None


def rank_expert_load(tables: dict, rank: int, meta: dict | None = None) -> dict[str, pa.Table]:
    """{EXPERT_LOAD: per step of the rank: calls, tokens, experts, unparsed calls} when the rank
    has GroupedMatmul kernels."""
    k = tables.get(S.KERNELS)
    if k is None or k.num_rows == 0:
        return {}
    k = k.filter(pc.is_in(pc.fill_null(k["op_type"], ""), value_set=pa.array(OP_TYPES)))
    if k.num_rows == 0:
        return {}
    d = k.select(["step", "input_shapes"]).to_pandas()
    parsed = [tokens_of(s) for s in d["input_shapes"]]
    d["tokens"] = [t for t, _ in parsed]
    d["experts"] = [e for _, e in parsed]
    d["_step"] = d["step"].fillna(-1).astype(int)
    rows = []
    for step, g in d.groupby("_step", sort=True):
        ok = g["tokens"].notna()
        experts = g["experts"].dropna()
        rows.append({"rank": rank, "step": None if step < 0 else int(step), "calls": len(g),
                     "tokens": int(g.loc[ok, "tokens"].sum()) if ok.any() else None,
                     "experts": int(experts.mode().iloc[0]) if len(experts) else None,
                     "unparsed": int((~ok).sum())})
    return {EXPERT_LOAD: pa.Table.from_pylist(rows, schema=LOAD_SCHEMA)}


def ep_groups(metadata: dict[int, dict] | None) -> list[list[int]]:
    """Expert-parallel groups (global ranks) named in parallel_group_info (:data:`EP_NAMES`)."""
    found: list[tuple[int, ...]] = []
    for meta in (metadata or {}).values():
        pgi = (meta or {}).get("parallel_group_info") or {}
        for info in pgi.values() if isinstance(pgi, dict) else ():
            if isinstance(info, dict) and str(info.get("group_name", "")).lower() in EP_NAMES:
                ranks = tuple(sorted(int(r) for r in info.get("global_ranks") or []))
                if len(ranks) > 1 and ranks not in found:
                    found.append(ranks)
    return [list(g) for g in sorted(found)]


def build(load: pa.Table | None, groups: list[list[int]]) -> pd.DataFrame:
    """moe_expert_load.csv (:data:`COLUMNS`): one row per (step, EP group, rank). Ranks in no
    named group form one group of their own (``EP Group Source`` = ``inferred``)."""
    if load is None or load.num_rows == 0:
        return pd.DataFrame(columns=COLUMNS)
    d = load.to_pandas()
    d = d[d["tokens"].notna()]
    member = {r: (tuple(g), "parallel_group_info") for g in groups for r in g}
    rest = sorted(set(d["rank"]) - set(member))
    for r in rest:
        member[r] = (tuple(rest), "inferred: all ranks with GroupedMatmul")
    d = d.assign(grp=[member[r][0] for r in d["rank"]], src=[member[r][1] for r in d["rank"]],
                 stp=d["step"].fillna(-1).astype(int))
    rows = []
    for (step, grp), g in d.groupby(["stp", "grp"], sort=True):
        mean = g["tokens"].mean()
        mx = g["tokens"].max()
        for r in g.sort_values("rank").itertuples(index=False):
            per = (r.tokens / r.experts) if r.experts and not pd.isna(r.experts) else None
            rows.append([None if step < 0 else int(step), str(grp), r.src, int(r.rank),
                         int(r.calls), int(r.tokens),
                         None if pd.isna(r.experts) else int(r.experts),
                         None if per is None else round(per, 3), round(float(mean), 3),
                         round(r.tokens / mean, 4) if mean else None,
                         round(mx / mean, 4) if mean else None])
    out = pd.DataFrame(rows, columns=COLUMNS)
    out["Local Experts"] = out["Local Experts"].astype("Int64")
    return out


def verdicts(table: pd.DataFrame | None, make, th: dict | None = None) -> list[dict]:
    """One ``moe`` verdict per EP group whose max / mean tokens (mean over the steps) reaches
    :data:`EP_IMBALANCE_RATIO` (critical at 1.5); silent for balanced groups and groups of one
    rank."""
    th = th or {}
    ratio = float(th.get("ep_imbalance_ratio", EP_IMBALANCE_RATIO))
    if table is None or table.empty:
        return []
    out = []
    for grp, g in table.groupby("EP Group", sort=True):
        per_rank = g.groupby("Rank")["Tokens"].mean()
        if len(per_rank) < 2 or per_rank.mean() <= 0:
            continue
        mean = per_rank.mean()
        top = int(per_rank.idxmax())
        mx = per_rank.max() / mean
        if mx < ratio:
            continue
        least = int(per_rank.idxmin())
        out.append(make(
            "moe", "group", [top], "critical" if mx >= 1.5 else "warning",
            f"Expert load is unbalanced in EP group {grp}: rank {top}'s experts take "
            f"{per_rank.max():.0f} tokens per step, {mx:.2f}x the group mean {mean:.0f} "
            f"(rank {least}: {per_rank.min():.0f}); the group waits for rank {top} in its "
            f"all-to-all.",
            "Balance the router (auxiliary load-balancing loss, capacity factor, expert "
            "placement) or check the token distribution of the batch; moe_expert_load.csv has "
            "the tokens per rank and step.",
            id=f"moe:group:{grp}",
            groups=[{"name": "ep" if g["EP Group Source"].iloc[0] == "parallel_group_info"
                     else "ep (inferred)", "id": None,
                     "global_ranks": [int(r) for r in per_rank.index]}],
            evidence={"tokens_per_rank": {str(int(r)): round(float(v), 1)
                                          for r, v in per_rank.items()},
                      "group_mean_tokens": round(float(mean), 1),
                      "max_over_mean": round(float(mx), 4),
                      "source": str(g["EP Group Source"].iloc[0])},
            threshold={"ep_imbalance_ratio": ratio}))
    return out


__all__ = ["EXPERT_LOAD", "tokens_of", "rank_expert_load", "ep_groups", "build", "verdicts",
           "COLUMNS", "EP_IMBALANCE_RATIO"]
