"""Data preparation section: how long each rank's steps wait for their data
(data_preparation.csv) and MindSpore's dataset pipeline operators (dataset_pipeline.csv)."""

from __future__ import annotations

import pandas as pd

from ascendprof.report.html.common import (MAX_BARS, PALETTE, Section, figure, numbers_table,
                                           source)


def wait_chart(dp: pd.DataFrame):
    """Data Wait per rank (ms per step), the step time as a line; largest first past 64."""
    from bokeh.models import FactorRange, HoverTool

    dp = dp.assign(_rank=pd.to_numeric(dp["Rank"], errors="coerce"),
                   _wait=pd.to_numeric(dp["Data Wait(ms)"], errors="coerce").fillna(0.0))
    dp = dp.dropna(subset=["_rank"])
    if len(dp) > MAX_BARS:
        dp = dp.sort_values("_wait", ascending=False).head(MAX_BARS)
    dp = dp.sort_values("_rank")
    x = [str(int(r)) for r in dp["_rank"]]
    src = source({"x": x, "wait": list(dp["_wait"]),
                  "pct": list(pd.to_numeric(dp.get("Data Wait(%)"), errors="coerce")),
                  "step": list(pd.to_numeric(dp.get("Step(ms)"), errors="coerce")),
                  "how": [str(v) for v in dp.get("Wait Source", [""] * len(dp))]})
    f = figure(x_range=FactorRange(*x), height=300, name="dataprep_wait",
               title="Data Wait per rank (data_preparation.csv)",
               y_axis_label="data wait per step (ms)", x_axis_label="rank")
    r = f.vbar(x="x", top="wait", width=0.6, source=src, color=PALETTE[4])
    f.add_tools(HoverTool(renderers=[r], tooltips=[
        ("rank", "@x"), ("Data Wait", "@wait{0,0.000} ms (@pct{0.0} % of the step)"),
        ("step", "@step{0,0.000} ms"), ("measured from", "@how")]))
    f.y_range.start = 0
    f.xgrid.grid_line_color = None
    return f


def build(d, ctx) -> Section:
    sec = Section("dataprep", "Data preparation")
    dp, pipe = d.data_preparation, d.dataset_pipeline
    if (dp is None or not len(dp)) and (pipe is None or not len(pipe)):
        sec.missing = "no data_preparation.csv (no step timing to judge data loading by)"
        return sec
    sec.intro = "How long each step waits for its input data, and where the input pipeline stalls."
    if dp is not None and len(dp) and "Data Wait(ms)" in dp:
        sec.chart(wait_chart(dp))
    for df, name in ((dp, "data_preparation.csv"), (pipe, "dataset_pipeline.csv")):
        if df is not None and len(df):
            sec.table(numbers_table(df, name))
    return sec
