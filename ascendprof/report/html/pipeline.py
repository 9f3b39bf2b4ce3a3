"""Pipeline section: per pipeline, each stage's send/recv ops over the step (pipeline.csv: start
offset and duration of every p2p op, its micro-batch labels), so the waits and the heavier stage
show; per stage Computing against Bubble (pipeline_stages.csv)."""

from __future__ import annotations

import pandas as pd

from ascendprof.report.html.common import (COLORS, MAX_TABLE_ROWS, PALETTE, Section, Table, cell,
                                           figure, legend_outside, source)
from ascendprof.report.html.steps import flagged_ranks

#: pipelines drawn (tabs); the others are in pipeline.csv
MAX_PIPELINES = 4
_KIND_COLOR = {"send": PALETTE[0], "recv": PALETTE[1], "send_recv": PALETTE[6]}


def _num(df, col):
    return pd.to_numeric(df[col], errors="coerce").fillna(0.0) if col in df else 0.0


def gantt(ops: pd.DataFrame, title: str, name: str):
    """One pipeline in one step: a row per stage (rank), a bar per p2p op from its Offset for
    its Duration (ms), labelled with the micro-batches it sends / receives."""
    from bokeh.models import FactorRange, HoverTool, LabelSet

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
            "left": list(start), "right": list(start + dur), "mid": list(start + dur / 2),
            "kind": [str(k) for k in ops["Kind"]], "op": list(ops["Op Name"]),
            "phase": [str(p) for p in ops.get("Phase", [""] * len(ops))], "label": label,
            "offset_us": list(_num(ops, "Offset(us)")), "dur_us": list(_num(ops, "Duration(us)")),
            "wait_us": list(_num(ops, "Wait(us)")), "exposed_us": list(_num(ops, "Exposed(us)")),
            "color": [_KIND_COLOR.get(str(k), PALETTE[9]) for k in ops["Kind"]]}
    src = source(data)
    f = figure(y_range=FactorRange(*reversed(ys)), title=title, name=name,
               height=110 + 60 * len(ys), x_axis_label="time from the pipeline's first p2p op (ms)",
               y_axis_label="pipeline stage")
    items = []
    for kind in dict.fromkeys(data["kind"]):
        view_src = source({k: [v for v, kk in zip(data[k], data["kind"]) if kk == kind]
                                     for k in data})
        r = f.hbar(y="y", left="left", right="right", height=0.55, source=view_src,
                   color="color", line_color="#333", line_width=0.5)
        items.append((f"p2p {kind}", [r]))
        f.add_tools(HoverTool(renderers=[r], tooltips=[
            ("op", "@op (@kind, @phase)"), ("micro-batches", "@label"),
            ("Offset", "@offset_us{0,0.00} µs"), ("Duration", "@dur_us{0,0.00} µs"),
            ("Wait", "@wait_us{0,0.00} µs"), ("Exposed (bubble)", "@exposed_us{0,0.00} µs")]))
    f.add_layout(LabelSet(x="mid", y="y", text="label", source=src, text_font_size="11px",
                          text_align="center", y_offset=22, text_color="#333"))
    f.x_range.start = 0
    f.ygrid.grid_line_color = None
    legend_outside(f, items, title="op kind")
    return f


def stage_chart(stages: pd.DataFrame, name: str):
    """Per step and stage: Computing and Bubble (mean per rank, µs -> ms), the stage's step
    time (Stage(us), as the profiler reports it) as a line across each bar."""
    from bokeh.models import FactorRange, HoverTool

    x = [(f"step {s}", f"stage {st}") for s, st in zip(stages["Step"], stages["Stage"])]
    data = {"x": x, "ranks": [str(r) for r in stages["Ranks"]],
            "comp": list(_num(stages, "Computing(us)") / 1000),
            "bubble": list(_num(stages, "Bubble(us)") / 1000),
            "stage": list(_num(stages, "Stage(us)") / 1000),
            "comp_us": list(_num(stages, "Computing(us)")),
            "bubble_us": list(_num(stages, "Bubble(us)")),
            "bubble_pct": list(_num(stages, "Bubble(%)")),
            "stage_us": list(_num(stages, "Stage(us)"))}
    src = source(data)
    f = figure(x_range=FactorRange(*x), name=name, height=320,
               title="Per pipeline stage: Computing and Bubble (exposed p2p time), "
                     "mean per rank; line = Stage (step time)",
               y_axis_label="time per step (ms)", x_axis_label="step / pipeline stage")
    rs = f.vbar_stack(["comp", "bubble"], x="x", width=0.5, source=src,
                      color=[COLORS["Computing"], COLORS["Bubble"]], line_color="white")
    st = f.scatter(x="x", y="stage", source=src, marker="dash", size=60, line_width=3,
                   color="#222")
    f.add_tools(HoverTool(renderers=rs, tooltips=[
        ("stage ranks", "@ranks"), ("Computing", "@comp_us{0,0.00} µs"),
        ("Bubble", "@bubble_us{0,0.00} µs (@bubble_pct{0.00} % of the stage)"),
        ("Stage", "@stage_us{0,0.00} µs")]))
    f.y_range.start = 0
    f.xgrid.grid_line_color = None
    legend_outside(f, [("Computing", [rs[0]]), ("Bubble", [rs[1]]), ("Stage (step time)", [st])])
    return f


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
        keys = list(dict.fromkeys(zip(p["Step"].astype(str), p["Pipeline"])))
        ranks_of = {k: set(pd.to_numeric(g["Rank"], errors="coerce").dropna().astype(int))
                    for k, g in p.groupby([p["Step"].astype(str), p["Pipeline"]])}
        chosen = [k for k in keys if ranks_of.get(k, set()) & set(flags)][:MAX_PIPELINES]
        chosen += [k for k in keys if k not in chosen][:MAX_PIPELINES - len(chosen)]
        charts = []
        for i, (step, pipe) in enumerate(chosen):
            ops = p[(p["Step"].astype(str) == step) & (p["Pipeline"] == pipe)]
            charts.append((f"step {step} · pipeline {pipe}",
                           gantt(ops, f"Step {step}, pipeline ranks {pipe}: p2p ops per stage",
                                 f"pipeline_gantt_{i}")))
        if len(charts) == 1:
            charts[0][1].name = "pipeline_gantt"
            sec.chart(charts[0][1])
        else:
            from bokeh.models import TabPanel, Tabs

            sec.chart(Tabs(tabs=[TabPanel(child=m, title=t) for t, m in charts],
                           name="pipeline_gantt", sizing_mode="stretch_width"))
        if len(keys) > len(chosen):
            sec.text(f"{len(chosen)} of {len(keys)} pipelines × steps drawn (those with ranks "
                     f"named by a verdict first); all are in pipeline.csv.")
    if stages is not None and len(stages):
        sec.table(_table(stages, "pipeline_stages.csv", "Numbers: pipeline_stages.csv",
                         "numbers pipeline-stages"))
    if p is not None and len(p):
        sec.table(_table(p, "pipeline.csv", "Numbers: pipeline.csv", "numbers pipeline-ops"))
    return sec
