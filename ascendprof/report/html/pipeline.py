"""Pipeline section: per pipeline, each stage's send/recv ops over the step (pipeline.csv: start
offset and duration of every p2p op, its micro-batch labels), so the waits and the heavier stage
show; per stage Computing against Bubble (pipeline_stages.csv)."""

from __future__ import annotations

import pandas as pd

from ascendprof.report.html.common import (COLORS, MAX_TABLE_ROWS, PALETTE, Chart, Section,
                                           Table, Tabs, cell, step_text)
from ascendprof.report.html.steps import flagged_ranks

#: pipelines drawn (tabs); the others are in pipeline.csv
MAX_PIPELINES = 4
_KIND_COLOR = {"send": PALETTE[0], "recv": PALETTE[1], "send_recv": PALETTE[6]}


def _num(df, col):
    return pd.to_numeric(df[col], errors="coerce").fillna(0.0) if col in df else 0.0


def gantt(ops: pd.DataFrame, title: str, name: str) -> Chart:
    """One pipeline in one step: a row per stage (rank), a bar per p2p op from its Offset for
    its Duration (ms), labelled with the micro-batches it sends / receives."""
    ops = ops.assign(_stage=pd.to_numeric(ops["Stage"], errors="coerce"),
                     _rank=pd.to_numeric(ops["Rank"], errors="coerce"))
    ops = ops.sort_values(["_stage", "Seq"])
    ys = list(dict.fromkeys(f"stage {int(s)} · rank {int(r)}"
                            for s, r in zip(ops["_stage"], ops["_rank"])))
    start = _num(ops, "Offset(us)") / 1000.0
    dur = _num(ops, "Duration(us)") / 1000.0
    label = [" ".join(x for x in (f"→{s}" if s else "", f"←{r}" if r else "") if x)
             for s, r in zip(ops["Send"], ops["Recv"])]
    data = {"y": [f"stage {int(s)} · rank {int(r)}" for s, r in zip(ops["_stage"], ops["_rank"])],
            "left": list(start), "right": list(start + dur),
            "kind": [str(k) for k in ops["Kind"]], "op": list(ops["Op Name"]),
            "phase": [str(p) for p in ops.get("Phase", [""] * len(ops))], "label": label,
            "offset": list(start), "dur": list(dur),
            "wait": list(_num(ops, "Wait(us)") / 1000), "exposed": list(_num(ops, "Exposed(us)") / 1000),
            "color": [_KIND_COLOR.get(str(k), PALETTE[9]) for k in ops["Kind"]]}
    series = [{"type": "range", "y": "right", "base": "left", "color_col": "color",
               "label_col": "label", "label": "p2p op (colour: send / recv)",
               "color": PALETTE[0]}]
    return Chart(name, data, series, x="y", horizontal=True, title=title, cats=ys,
              height=110 + 60 * len(ys), x_label="time from the pipeline's first p2p op (ms)",
              y_label="pipeline stage",
              tips=[("op", "op", "", 0), ("kind", "kind", "", 0), ("phase", "phase", "", 0),
                    ("micro-batches (→ sends, ← receives)", "label", "", 0),
                    ("Offset", "offset", "ms", 3), ("Duration", "dur", "ms", 3),
                    ("Wait", "wait", "ms", 3), ("Exposed (bubble)", "exposed", "ms", 3)])


def stage_chart(stages: pd.DataFrame, name: str) -> Chart:
    """Per step and stage: Computing and Bubble (mean per rank, µs -> ms), the stage's step
    time (Stage(us), as the profiler reports it) as a dash across each bar."""
    x = [f"step {s} · stage {st}" if s else f"no step number · stage {st}"
         for s, st in zip(step_text(stages["Step"]), stages["Stage"])]
    data = {"x": x, "ranks": [str(r) for r in stages["Ranks"]],
            "comp": list(_num(stages, "Computing(us)") / 1000),
            "bubble": list(_num(stages, "Bubble(us)") / 1000),
            "stage": list(_num(stages, "Stage(us)") / 1000),
            "bubble_pct": list(_num(stages, "Bubble(%)"))}
    return Chart(name, data, [
        {"type": "bar", "y": "comp", "label": "Computing", "color": COLORS["Computing"],
         "stack": "s", "width": 0.5},
        {"type": "bar", "y": "bubble", "label": "Bubble (recomputed)", "color": COLORS["Bubble"],
         "stack": "s", "width": 0.5},
        {"type": "scatter", "y": "stage", "label": "Stage (step time)", "color": "#222",
         "symbol": "dash", "size": 60}],
        title="Per pipeline stage: Computing and Bubble (recomputed: exposed p2p time), mean "
              "per rank; dash = Stage (step time)",
        y_label="time per step (ms)", x_label="step · pipeline stage", height=320,
        tips=[("stage ranks", "ranks", "", 0), ("Computing", "comp", "ms", 3),
              ("Bubble (exposed p2p time)", "bubble", "ms", 3),
              ("Bubble share of the stage", "bubble_pct", "%", 2), ("Stage", "stage", "ms", 3)])


def _table(df: pd.DataFrame, source: str, title: str, css: str) -> Table:
    rows = [[cell(v) for v in r] for r in df.head(MAX_TABLE_ROWS).itertuples(index=False)]
    return Table(list(df.columns), rows, source=source, title=title, css=css,
                 note=(f"first {MAX_TABLE_ROWS} of {len(df)} rows; all in {source}"
                       if len(df) > MAX_TABLE_ROWS else ""))


def build(d, ctx) -> Section:
    sec = Section("pipeline", "Pipeline")
    p, stages = d.pipeline, d.pipeline_stages
    if (p is None or not len(p)) and (stages is None or not len(stages)):
        rows = d.rank_rows()
        pp = (pd.to_numeric(rows["PP Index"], errors="coerce").nunique()
              if rows is not None and "PP Index" in rows else None)
        sec.missing = ("no pipeline-parallel p2p ops (pipeline.csv absent"
                       + (", PP = 1" if pp == 1 else "") + ")")
        return sec
    sec.intro = ("Each stage's send/recv ops over the step (pipeline.csv; →F0 sends the "
                 "activations of micro-batch 0, ←B0 receives its gradients). The gaps between "
                 "ops are the stage's compute and other communication; a long op is a stage "
                 "waiting for its peer: the bubble.")
    if stages is not None and len(stages):
        sec.chart(stage_chart(stages, "pipeline_stages"))
    if p is not None and len(p):
        flags = flagged_ranks(d.verdicts)
        steps = step_text(p["Step"])  # '' for ops without a step number
        keys = list(dict.fromkeys(zip(steps, p["Pipeline"])))
        ranks_of = {k: set(pd.to_numeric(g["Rank"], errors="coerce").dropna().astype(int))
                    for k, g in p.groupby([steps, p["Pipeline"]])}
        chosen = [k for k in keys if ranks_of.get(k, set()) & set(flags)][:MAX_PIPELINES]
        chosen += [k for k in keys if k not in chosen][:MAX_PIPELINES - len(chosen)]
        charts = []
        for i, (step, pipe) in enumerate(chosen):
            ops = p[(steps == step) & (p["Pipeline"] == pipe)]
            where = f"step {step}" if step else "no step number"
            charts.append((f"{where}, pipeline {pipe}",
                           gantt(ops, f"{where[0].upper()}{where[1:]}, pipeline ranks {pipe}: "
                                      f"p2p ops per stage", f"pipeline_gantt_{i}")))
        if len(charts) == 1:
            charts[0][1].name = "pipeline_gantt"
            sec.chart(charts[0][1])
        else:
            sec.chart(Tabs("pipeline_gantt", [(t, [m]) for t, m in charts]))
        if len(keys) > len(chosen):
            sec.text(f"{len(chosen)} of {len(keys)} pipelines × steps drawn (those with ranks "
                     f"named by a verdict first); all are in pipeline.csv.")
    if stages is not None and len(stages):
        sec.table(_table(stages, "pipeline_stages.csv", "Numbers: pipeline_stages.csv",
                         "numbers pipeline-stages"))
    if p is not None and len(p):
        sec.table(_table(p, "pipeline.csv", "Numbers: pipeline.csv", "numbers pipeline-ops"))
    return sec
