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
import pyarrow.compute as pc

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
    """cluster_step_trace_time.csv as one DataFrame (write it with ``index=False``): the
    frames of :func:`table` concatenated. Same inputs, columns and errors as :func:`table`."""
    return table(step_trace, metadata, groups).to_frame()


def table(step_trace: pa.Table, metadata: dict[int, dict], groups: dict | None = None
          ) -> "ClusterStepTrace":
    """cluster_step_trace_time.csv as a :class:`ClusterStepTrace`, made a slice of steps at a
    time when its frames are asked for (a run of 10^6 steps has millions of rows).

    In: ``step_trace`` = all ranks' STEP_TRACE tables (int ns); ``metadata`` = rank ->
    profiler_metadata.json object; ``groups`` = :func:`cluster_communication.build_groups` output
    (communication_group.json), from which the pipeline stages come — when None they are inferred
    from the metadata's parallel_group_info. Out columns: ``Step`` (int, or "" without step),
    ``Type`` ("rank"/"stage"), ``Index`` (rank int or stage "(r0, r1)"), the nine time columns
    in us (float; empty where the source did not record that metric), then ``DP Index, PP
    Index, TP Index`` (int, "NA" for stage rows and unplaced ranks) only when distributed_args
    are usable for all ranks. Raises nothing for a well-formed table; an empty table gives one
    empty frame with the columns.
    """
    return ClusterStepTrace(step_trace, metadata, groups)


class ClusterStepTrace:
    """The rows of cluster_step_trace_time.csv, kept as the step table and a sort order:
    :meth:`frames` gives them as DataFrames of about ``rows`` rows each (rank rows by step and
    rank, then stage rows), :meth:`to_frame` as one; ``len()`` is the number of rows."""

    def __init__(self, step_trace, metadata, groups):
        self.headers = ["Step", "Type", "Index"] + [c for c, _ in TIME_COLUMNS]
        self.t = step_trace if step_trace is not None and step_trace.num_rows else None
        stages = (stages_from_groups(groups) if groups is not None
                  else _stages_from_metadata(metadata))
        n = self.t.num_rows if self.t is not None else 0
        rank = (self.t.column("rank").to_numpy(zero_copy_only=False).astype("int64") if n
                else np.zeros(0, np.int64))
        step = self.t.column("step") if n else pa.array([], pa.int64())
        # rows by step (no step first) then rank, stable: the order msprof-analyze's file has
        key = np.where(step.is_null().to_numpy(zero_copy_only=False), -np.inf,
                       pc.fill_null(step, 0).to_numpy(zero_copy_only=False).astype("float64"))
        self.order = np.lexsort((rank, key))
        self.key = key[self.order]
        self.first: dict[int, int] = {}
        for i, s in enumerate(stages):
            for r in s:
                self.first.setdefault(r, i)
        self.names = [str(tuple(s)) for s in stages] + [str(tuple())]  # in no stage: "()"
        self.n_stage_rows = 0
        if stages and n:
            sid = pd.Series(rank).map(self.first).fillna(len(stages)).to_numpy("float64")
            pairs = np.unique(np.stack([key, sid]), axis=1)
            self.n_stage_rows = pairs.shape[1]
        self.stages = stages
        args = _distributed_args(metadata)
        index = parallel_index(args) if isinstance(args, dict) else None
        if index is not None and len(index) < len(np.unique(rank)):
            index = None
        self.index = index
        if index is not None:
            self.headers = self.headers + PARALLEL_HEADERS

    def __len__(self) -> int:
        return len(self.order) + self.n_stage_rows

    def _slices(self, rows: int):
        """Slices of the sorted rows of about ``rows`` each, cut only between steps (a stage
        row takes the max over its step's ranks)."""
        n, i = len(self.order), 0
        while i < n:
            j = min(i + rows, n)
            if j < n:
                j = int(np.searchsorted(self.key, self.key[j - 1], side="right"))
            yield slice(i, j)
            i = j

    def _rank_rows(self, sl: slice) -> pd.DataFrame:
        t = self.t.take(pa.array(self.order[sl]))
        cols = {"Step": t.column("step").to_pandas().astype("Int64"), "Type": "rank",
                "Index": t.column("rank").to_numpy(zero_copy_only=False).astype("int64")}
        for out, c in TIME_COLUMNS:  # a metric the source never recorded stays empty, not 0
            cols[out] = t.column(c).to_numpy(zero_copy_only=False).astype("float64") / 1000
        return pd.DataFrame(cols)

    def _stage_rows(self, ranks: pd.DataFrame) -> pd.DataFrame:
        times = [c for c, _ in TIME_COLUMNS]
        sid = ranks["Index"].map(self.first).fillna(len(self.stages)).to_numpy("int64")
        step_code = pd.factorize(ranks["Step"].astype("float64").fillna(-1e300))[0]
        # one stage row per (step, stage), in order of first appearance among the rank rows
        code, _ = pd.factorize(step_code * (len(self.stages) + 1) + sid)
        at = np.unique(code, return_index=True)[1]
        stage = ranks[times].groupby(code, sort=True).max()
        stage.insert(0, "Index", [self.names[i] for i in sid[at]])
        stage.insert(0, "Type", "stage")
        stage.insert(0, "Step", ranks["Step"].iloc[at].to_numpy(dtype=object, na_value=None))
        return stage.reset_index(drop=True)

    def _finish(self, df: pd.DataFrame, stage: bool) -> pd.DataFrame:
        if self.index is not None:
            if stage:
                for h in PARALLEL_HEADERS:
                    df[h] = "NA"
            else:
                na = ["NA"] * 3
                place = np.array([list(p) if p else na for p in self.index] + [na],
                                 dtype=object)
                at = df["Index"].to_numpy("int64")
                at = np.where((at >= 0) & (at < len(self.index)), at, len(self.index))
                for j, h in enumerate(PARALLEL_HEADERS):
                    df[h] = place[at, j]
        step = df["Step"].astype(object)
        df["Step"] = step.where(step.notna(), "")
        return df[self.headers]

    def frames(self, rows: int = 65536):
        """The file's rows as DataFrames (rank rows, then stage rows), each holding the steps
        of about ``rows`` rank rows; one empty frame with the columns when there are none."""
        if self.t is None:
            yield pd.DataFrame({h: [] for h in self.headers})
            return
        for sl in self._slices(rows):
            yield self._finish(self._rank_rows(sl), stage=False)
        if self.stages:
            for sl in self._slices(rows):
                yield self._finish(self._stage_rows(self._rank_rows(sl)), stage=True)

    def to_frame(self) -> pd.DataFrame:
        """All rows in one DataFrame."""
        parts = list(self.frames())
        return pd.concat(parts, ignore_index=True) if len(parts) > 1 else parts[0]


__all__ = ["build", "table", "ClusterStepTrace", "parallel_index", "stages_from_groups", "TIME_COLUMNS", "PARALLEL_HEADERS"]
