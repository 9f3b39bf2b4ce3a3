"""The analyses of pipeline stages, memory, data preparation and expert load, as the engine runs
them: :func:`rank_partials` in the worker (one rank's tables in, small tables out) and
:func:`cluster_files` in the cluster step (all ranks' partials in, output frames out).

Each analysis lives in its own module (:mod:`pipeline_stages`, :mod:`memory`, ...); this module
only routes their per-rank partials and names their output files, so the engine needs one call
each way. A failing analysis loses its own outputs, never the run: the failure is recorded as a
problem.
"""

from __future__ import annotations

import pyarrow as pa

from ascendprof.analyze import data_prep, memory, moe, pipeline_stages
from ascendprof.model.outputs import ANALYSIS_FILES

#: output files, in the order they are written (named in the registry model.outputs, which
#: must stay light to import)
FILES = ANALYSIS_FILES


def _p2p(tables, rank, meta):
    t = pipeline_stages.rank_p2p_ops(tables, rank)
    return {pipeline_stages.P2P_OPS: t} if t is not None else {}


#: (analysis name, fn(tables, rank, meta) -> {partial name: table})
_RANK_STEPS = (("pipeline", _p2p), ("memory", memory.rank_memory),
               ("data_preparation", data_prep.rank_data_prep),
               ("moe", moe.rank_expert_load))


def rank_partials(tables: dict[str, pa.Table], rank: int, problems=None,
                  meta: dict | None = None) -> dict[str, pa.Table]:
    """{partial name: table} of one rank (absent when the rank has no such data)."""
    out: dict[str, pa.Table] = {}
    for name, fn in _RANK_STEPS:
        try:
            got = fn(tables, rank, meta or {})
        except Exception as e:  # noqa: BLE001 - one analysis' defect must not lose the rank
            if problems is not None:
                problems.add("<analysis>", f"{name} analysis failed ({type(e).__name__}: {e}); "
                                           f"please report this", rank=rank, affects=(name,))
            continue
        out.update({k: v for k, v in got.items() if v is not None and v.num_rows})
    return out


def _pipeline_files(ca, lines):
    pipe, stages = pipeline_stages.build(ca.concat(pipeline_stages.P2P_OPS), lines,
                                         ca.step_trace, ca.breakdown)
    return {"pipeline.csv": pipe, "pipeline_stages.csv": stages}


def _memory_files(ca, lines):
    stage_of = {r: s for line in lines for s, r in enumerate(line)}
    return memory.build(ca.concat(memory.MEMORY_PEAKS), ca.concat(memory.MEMORY_OPS),
                        ca.concat(memory.MEMORY_MODULES), stage_of)


def _data_prep_files(ca, lines):
    return data_prep.build(ca.concat(data_prep.DATA_PREP), ca.concat(data_prep.DATASET_OPS_FLAGGED))


def _moe_files(ca, lines):
    return {"moe_expert_load.csv": moe.build(ca.concat(moe.EXPERT_LOAD),
                                             moe.ep_groups(ca.metadata))}


def cluster_files(ca) -> dict[str, object]:
    """{output file name: pandas DataFrame} from a ClusterAnalysis after gather's own results
    (step trace, breakdown, communication groups). Files without rows are left out."""
    out: dict[str, object] = {}
    lines = pipeline_stages.pipelines(ca.metadata, ca.communication_group)
    for name, fn in (("pipeline", _pipeline_files), ("memory", _memory_files),
                     ("data_preparation", _data_prep_files), ("moe", _moe_files)):
        try:
            out.update(fn(ca, lines))
        except Exception as e:  # noqa: BLE001
            ca.problems.add("<analysis>", f"{name} analysis failed ({type(e).__name__}: {e}); "
                                          f"please report this", affects=(name,))
    return {k: v for k, v in out.items() if v is not None and len(v)}


# ---------------------------------------------------------------------------------------------
# verdicts: contributed to analyze.verdicts (docs/verdicts.md "Contributing verdicts")

def _register_rules() -> None:
    from ascendprof.analyze import verdicts

    def memory_rule(ca, th):
        return memory.verdicts((getattr(ca, "csv_files", None) or {}).get("memory_summary.csv"),
                               verdicts.make_verdict, th)

    def data_rule(ca, th):
        return data_prep.verdicts((getattr(ca, "csv_files", None) or {}).get(
            "data_preparation.csv"), verdicts.make_verdict, th)

    def moe_rule(ca, th):
        return moe.verdicts((getattr(ca, "csv_files", None) or {}).get("moe_expert_load.csv"),
                            verdicts.make_verdict, th)

    verdicts.register_rule("memory", memory_rule, thresholds={
        "memory_near_capacity_pct": memory.NEAR_CAPACITY_PCT,
        "memory_peer_excess_pct": memory.PEER_EXCESS_PCT,
        "memory_peer_excess_min_mb": memory.PEER_EXCESS_MIN_MB})
    verdicts.register_rule("moe", moe_rule,
                           thresholds={"ep_imbalance_ratio": moe.EP_IMBALANCE_RATIO})
    verdicts.register_rule("data", data_rule, thresholds={
        "data_bound_pct": data_prep.DATA_BOUND_PCT,
        "preparing_bound_pct": data_prep.PREPARING_BOUND_PCT})


_register_rules()


# ---------------------------------------------------------------------------------------------
# summary (summary.json "analyses"; rendered by report.terminal)

def _num(v, nd=3):
    import math

    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(f) else round(f, nd)


def summary(csv_files: dict) -> dict:
    """Short per-analysis results for summary.json: ``pipeline`` (per step-averaged stage:
    ranks, computing / bubble ms, bubble %, micro-batches), ``memory`` (per rank, main
    component: peak allocated / reserved MB, % of capacity), ``data_preparation`` (per rank:
    data wait ms and % of the step, its source, bottleneck stage and operator), ``moe`` (per EP
    group: max / mean tokens). Keys only for the analyses that produced output."""
    out: dict = {}
    st = csv_files.get("pipeline_stages.csv")
    if st is not None and len(st):
        rows = []
        for stage, g in st.groupby("Stage", sort=True):
            rows.append({"stage": int(stage), "ranks": str(g["Ranks"].iloc[0]),
                         "computing_ms": _num(g["Computing(us)"].mean() / 1000),
                         "bubble_ms": _num(g["Bubble(us)"].mean() / 1000),
                         "bubble_pct": _num(g["Bubble(%)"].mean(), 2),
                         "micro_batches": None if g["Micro-batches"].isna().all()
                         else int(g["Micro-batches"].dropna().iloc[0])})
        out["pipeline"] = rows
    ms = csv_files.get("memory_summary.csv")
    if ms is not None and len(ms):
        per = memory.rank_peaks(ms)
        out["memory"] = [{"rank": int(r.rank), "component": r.component,
                          "peak_allocated_mb": _num(r.allocated_mb),
                          "peak_reserved_mb": _num(r.reserved_mb),
                          "capacity_pct": _num(r.reserved_mb / r.capacity_mb * 100, 2)
                          if _num(r.capacity_mb) else None} for r in per.itertuples()]
    dp = csv_files.get("data_preparation.csv")
    if dp is not None and len(dp):
        out["data_preparation"] = [{"rank": int(r["Rank"]), "data_wait_ms": _num(r["Data Wait(ms)"]),
                                    "data_wait_pct": _num(r["Data Wait(%)"], 2),
                                    "source": r["Wait Source"],
                                    "bottleneck_stage": r["Bottleneck Stage"] or None,
                                    "bottleneck_operator": r["Bottleneck Operator"] or None}
                                   for r in dp.to_dict("records")]
    me = csv_files.get("moe_expert_load.csv")
    if me is not None and len(me):
        out["moe"] = [{"group": grp, "max_over_mean": _num(g["Group Max / Mean"].max(), 4)}
                      for grp, g in me.groupby("EP Group", sort=True)]
    return out
