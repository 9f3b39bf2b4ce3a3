"""Mixture-of-experts section: tokens per rank of each expert-parallel group against the
group's mean (moe_expert_load.csv, analyze.moe); absent without GroupedMatmul operators."""

from __future__ import annotations

import pandas as pd

from ascendprof.report.html.common import (MAX_BARS, PALETTE, Section, figure, numbers_table,
                                           source)


def load_chart(ml: pd.DataFrame):
    """Load / Mean per rank (mean over the steps), one bar per rank, a line at 1.0; past 64
    ranks the most loaded ones."""
    from bokeh.models import FactorRange, HoverTool, Span

    ml = ml.assign(_rank=pd.to_numeric(ml["Rank"], errors="coerce"),
                   _load=pd.to_numeric(ml["Load / Mean"], errors="coerce"),
                   _tok=pd.to_numeric(ml["Tokens"], errors="coerce"))
    ml = ml.dropna(subset=["_rank", "_load"])
    per = (ml.groupby(["_rank", "EP Group"], as_index=False)
             .agg(load=("_load", "mean"), tokens=("_tok", "mean")))
    if len(per) > MAX_BARS:
        per = per.sort_values("load", ascending=False).head(MAX_BARS)
    per = per.sort_values("_rank")
    x = [str(int(r)) for r in per["_rank"]]
    src = source({"x": x, "load": list(per["load"]), "tokens": list(per["tokens"]),
                  "group": [str(g) for g in per["EP Group"]]})
    f = figure(x_range=FactorRange(*x), height=300, name="moe_load",
               title="Expert load per rank: tokens over the EP group's mean (moe_expert_load.csv)",
               y_axis_label="tokens / group mean", x_axis_label="rank")
    r = f.vbar(x="x", top="load", width=0.6, source=src, color=PALETTE[2])
    f.add_layout(Span(location=1.0, dimension="width", line_color="#444", line_dash="dashed"))
    f.add_tools(HoverTool(renderers=[r], tooltips=[
        ("rank", "@x"), ("EP group", "@group"), ("load / mean", "@load{0.000}"),
        ("tokens per step", "@tokens{0,0}")]))
    f.y_range.start = 0
    f.xgrid.grid_line_color = None
    return f


def build(d, ctx) -> Section:
    sec = Section("moe", "Expert load")
    ml = d.moe_expert_load
    if ml is None or not len(ml):
        sec.missing = ("no moe_expert_load.csv (no GroupedMatmul operators: not a mixture-of-"
                       "experts model, or no kernel input shapes)")
        return sec
    sec.intro = ("Tokens each rank's experts receive per step, over the mean of its "
                 "expert-parallel group; 1.0 is a perfectly even load.")
    if {"Rank", "Load / Mean", "Tokens", "EP Group"} <= set(ml.columns):
        sec.chart(load_chart(ml))
    sec.table(numbers_table(ml, "moe_expert_load.csv"))
    return sec
