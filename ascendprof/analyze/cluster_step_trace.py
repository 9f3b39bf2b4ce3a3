"""cluster_step_trace_time.csv in msprof-analyze 26.2.0's layout, from all ranks' STEP_TRACE.

What msprof-analyze's StepTraceTimeAnalysis writes for text data (spec §8;
msprof_analyze/cluster_analyse/analysis/step_trace_time_analysis.py, stage_group_analysis.py,
cluster_utils/parallel_strategy_calculator.py, parallel_algorithm.py):

- columns ``Step, Type, Index``, the nine step_trace_time.csv time columns in us (§A.1), and
  ``DP Index, PP Index, TP Index`` when a rank's profiler_metadata.json has usable
  ``distributed_args`` (Megatron rank layout; §A.13);
- one ``rank`` row per (step, rank) with that rank's own values; ``Index`` is the global rank
  (from profiler_info_{rank}.json, not step_trace's Device_id);
- one ``stage`` row per (step, pipeline stage) with the column-wise max over the stage's ranks;
  ``Index`` is ``str(tuple(ranks))``. Stages are the unions of collective communication groups
  that hold at most one rank of each pipeline (p2p groups whose parallel group name starts with
  ``pp``); without such p2p groups there are no stage rows. Ranks in no stage form the stage
  ``()``, as in msprof-analyze.

Rank rows are sorted by (step, rank) (msprof-analyze keeps its directory order), stage rows
follow in order of first appearance.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa

from ascendprof.model import schemas as S
from ascendprof.analyze.cluster_communication import parallel_groups

#: (output column, STEP_TRACE column)
TIME_COLUMNS = S.STEP_METRICS
PARALLEL_HEADERS = ["DP Index", "PP Index", "TP Index"]


# --- DP/PP/TP index (Megatron layout) ----------------------------------------------------------

def parallel_index(args: dict) -> list | None:
    """rank -> (DP Index, PP Index, TP Index) for Megatron ``distributed_args``, or None when
    msprof-analyze would reject them (non-int sizes, world_size != tp*pp*dp, dp not divisible by
    ep, …). Entries are None for ranks the layout does not place."""
    try:
        world = args.get("world_size", 1)
        tp = args.get("tensor_model_parallel_size", 1)
        pp = args.get("pipeline_model_parallel_size", 1)
        dp = args.get("data_parallel_size", 1)
        cp = args.get("context_parallel_size", 1)
        ep = args.get("expert_model_parallel_size", 1)
        if not all(isinstance(v, int) for v in (world, tp, pp, dp, cp, ep)):
            return None
        tp, pp, dp, ep = (v or 1 for v in (tp, pp, dp, ep))
        if dp % ep or (dp * cp) % ep or world != tp * pp * dp:
            return None
        per_stage = world // pp
        dp_groups = []
        for i in range(pp):
            for k in range(tp * cp):
                dp_groups.append(list(range(per_stage * i + k, per_stage * (i + 1), tp * cp)))
        model_groups = [[g[i] for g in dp_groups] for i in range(dp)]
    except (IndexError, ValueError, ZeroDivisionError, TypeError):
        return None
    index: list = [None] * world
    for dp_i, group in enumerate(model_groups):
        for pp_i, j in enumerate(range(0, len(group), tp)):
            for tp_i, r in enumerate(group[j:j + tp]):
                index[r] = (dp_i, pp_i, tp_i)
    return index


def _distributed_args(metadata: dict[int, dict]):
    for rank in sorted(metadata):
        args = (metadata.get(rank) or {}).get("distributed_args")
        if args:
            return args
    return None


# --- stages ------------------------------------------------------------------------------------

def stages_from_groups(groups: dict) -> list[list[int]]:
    """Pipeline stages from communication_group.json's ``comm_group_parallel_info``
    (StageInfoAnalysis): p2p groups named ``pp*`` are unioned into pipelines; every collective
    group holding at most one rank of each pipeline is merged with the stages it touches.
    Returns stages sorted by first rank; ``[]`` when there is no pp p2p group."""
    info = groups.get("comm_group_parallel_info") or []
    collective = {}
    for rec in info:
        if rec.get("type") == "collective":
            collective[rec.get("group_name")] = set(rec.get("rank_set", []))
    links = [set(rec.get("rank_set", [])) for rec in info
             if rec.get("type") == "p2p" and str(rec.get("pg_name") or "").lower().startswith("pp")]
    if not links:
        return []
    links.sort(key=lambda s: min(s) if s else 0)
    pipelines = []
    while links:
        union, removed = set(links[0]), [links[0]]
        for other in links[1:]:
            if other & union:
                union |= other
                removed.append(other)
        pipelines.append(union)
        links = [s for s in links if s not in removed]
    # The sets are built with the same operations in the same order as msprof-analyze builds
    # them, because the order a set lists its ranks in becomes the stage row's Index text.
    stage_by_first: dict[int, set] = {}
    for ranks in collective.values():
        if any(len(ranks & p) > 1 for p in pipelines) or not ranks:
            continue
        merged: set = set()
        touching = []
        for first, st in stage_by_first.items():
            if st & ranks:
                merged = _union(ranks, st, merged)
                touching.append(first)
        for first in touching:
            del stage_by_first[first]
        stage_by_first[min(merged or ranks)] = merged or ranks
    return [list(stage_by_first[f]) for f in sorted(stage_by_first)]


def _union(*sets: set) -> set:
    """A new set: the members of each argument added in turn (msprof-analyze's UnionFind.union)."""
    out: set = set()
    for s in sets:
        out |= s
    return out


def _stages_from_metadata(metadata: dict[int, dict]) -> list[list[int]]:
    """Fallback when no communication groups are given: treat every parallel group of
    profiler_metadata as seen, ``pp*`` ones as p2p. Differs from msprof-analyze only when a group
    the metadata lists never communicated."""
    info = []
    for name, g in parallel_groups(metadata).items():
        kind = "p2p" if g["pg_name"].lower().startswith("pp") else "collective"
        info.append({"type": kind, "rank_set": g["global_ranks"], "group_name": name,
                     "pg_name": g["pg_name"]})
    return stages_from_groups({"comm_group_parallel_info": info})


# --- the table ---------------------------------------------------------------------------------

def build(step_trace: pa.Table, metadata: dict[int, dict], groups: dict | None = None
          ) -> pd.DataFrame:
    """cluster_step_trace_time.csv as a DataFrame (write it with ``index=False``).

    In: ``step_trace`` = all ranks' STEP_TRACE tables (int ns); ``metadata`` = rank ->
    profiler_metadata.json object; ``groups`` = :func:`cluster_communication.build_groups` output
    (communication_group.json), from which the pipeline stages come — when None they are inferred
    from the metadata's parallel_group_info. Out columns: ``Step`` (int, or "" without step),
    ``Type`` ("rank"/"stage"), ``Index`` (rank int or stage "(r0, r1)"), the nine time columns
    in us (float; empty where the source did not record that metric), then ``DP Index, PP Index, TP Index`` (int, "NA" for stage rows and unplaced
    ranks) only when distributed_args are usable for all ranks. Raises nothing for a
    well-formed table; an empty table gives an empty frame with the columns.
    """
    headers = ["Step", "Type", "Index"] + [c for c, _ in TIME_COLUMNS]
    times = [c for c, _ in TIME_COLUMNS]
    # on columns: 10^6 steps a rank are 10^6 rows, as a row list ~1 GB a rank
    if step_trace is not None and step_trace.num_rows:
        rank = step_trace.column("rank").to_numpy(zero_copy_only=False).astype("int64")
        cols = {"Step": step_trace.column("step").to_pandas().astype("Int64"), "Type": "rank",
                "Index": rank}
        for out, c in TIME_COLUMNS:  # a metric the source never recorded stays empty, not 0
            cols[out] = step_trace.column(c).to_numpy(zero_copy_only=False).astype("float64") / 1000
        ranks = pd.DataFrame(cols).sort_values(["Step", "Index"], kind="stable",
                                               na_position="first", ignore_index=True)
    else:
        ranks = pd.DataFrame({h: [] for h in headers})

    stages = stages_from_groups(groups) if groups is not None else _stages_from_metadata(metadata)
    parts = [ranks]
    if stages and len(ranks):
        first: dict[int, int] = {}
        for i, s in enumerate(stages):
            for r in s:
                first.setdefault(r, i)
        names = [str(tuple(s)) for s in stages] + [str(tuple())]  # ranks in no stage: "()"
        sid = ranks["Index"].map(first).fillna(len(stages)).to_numpy("int64")
        step_code = pd.factorize(ranks["Step"].astype("float64").fillna(-1e300))[0]
        # one stage row per (step, stage), in order of first appearance among the rank rows
        code, _ = pd.factorize(step_code * (len(stages) + 1) + sid)
        at = np.unique(code, return_index=True)[1]
        stage = ranks[times].groupby(code, sort=True).max()
        stage.insert(0, "Index", [names[i] for i in sid[at]])
        stage.insert(0, "Type", "stage")
        stage.insert(0, "Step", ranks["Step"].to_numpy()[at])
        parts.append(stage.reset_index(drop=True))

    args = _distributed_args(metadata)
    index = parallel_index(args) if isinstance(args, dict) else None
    if index is not None and len(index) < ranks["Index"].nunique():
        index = None
    if index is not None:
        headers = headers + PARALLEL_HEADERS
        na = ["NA"] * 3
        table = np.array([list(p) if p else na for p in index] + [na], dtype=object)
        at = ranks["Index"].to_numpy("int64", na_value=-1) if len(ranks) else np.zeros(0, int)
        at = np.where((at >= 0) & (at < len(index)), at, len(index))
        for j, h in enumerate(PARALLEL_HEADERS):
            ranks[h] = table[at, j]
        for p in parts[1:]:
            for h in PARALLEL_HEADERS:
                p[h] = "NA"
    out = pd.concat(parts, ignore_index=True) if len(parts) > 1 else ranks
    step = out["Step"].astype(object)
    out["Step"] = step.where(step.notna(), "")
    return out[headers]


__all__ = ["build", "parallel_index", "stages_from_groups", "TIME_COLUMNS", "PARALLEL_HEADERS"]
