"""The analyses of pipeline stages, memory, data preparation and expert load, as the engine runs
them: :func:`rank_partials` in the worker (one rank's tables in, small tables out) and
:func:`cluster_files` in the cluster step (all ranks' partials in, output frames out).

Each analysis lives in its own module (:mod:`pipeline_stages`, ...); this module only routes
their per-rank partials and names their output files, so the engine needs one call each way.
A failing analysis loses its own outputs, never the run: the failure is recorded as a problem.
"""

from __future__ import annotations

import pyarrow as pa

from ascendprof.analyze import pipeline_stages

#: per-rank partial table names (RankResult.tables keys), each produced by one analysis
PARTIALS = (pipeline_stages.P2P_OPS,)

#: output files, in the order they are written (report.files removes stale ones)
FILES = ("pipeline.csv", "pipeline_stages.csv")


def rank_partials(tables: dict[str, pa.Table], rank: int, problems=None) -> dict[str, pa.Table]:
    """{partial name: table} of one rank (absent when the rank has no such data)."""
    out: dict[str, pa.Table] = {}
    for name, fn in ((pipeline_stages.P2P_OPS, pipeline_stages.rank_p2p_ops),):
        try:
            t = fn(tables, rank)
        except Exception as e:  # noqa: BLE001 - one analysis' defect must not lose the rank
            if problems is not None:
                problems.add("<analysis>", f"{name} failed ({type(e).__name__}: {e}); please "
                                           f"report this", rank=rank, affects=(name,))
            continue
        if t is not None and t.num_rows:
            out[name] = t
    return out


def cluster_files(ca) -> dict[str, object]:
    """{output file name: pandas DataFrame} from a ClusterAnalysis after gather's own results
    (step trace, breakdown, communication groups). Files without rows are left out."""
    out: dict[str, object] = {}
    try:
        lines = pipeline_stages.pipelines(ca.metadata, ca.communication_group)
        pipe, stages = pipeline_stages.build(ca.concat(pipeline_stages.P2P_OPS), lines,
                                             ca.step_trace, ca.breakdown)
        out["pipeline.csv"], out["pipeline_stages.csv"] = pipe, stages
    except Exception as e:  # noqa: BLE001
        ca.problems.add("<analysis>", f"pipeline stages failed ({type(e).__name__}: {e}); "
                                      f"please report this", affects=("pipeline",))
    return {k: v for k, v in out.items() if v is not None and len(v)}
