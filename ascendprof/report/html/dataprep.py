"""Data preparation section: how long each rank's steps wait for their data
(data_preparation.csv) and MindSpore's dataset pipeline operators (dataset_pipeline.csv)."""

from __future__ import annotations

import pandas as pd

from ascendprof.report.html.common import MAX_BARS, PALETTE, Chart, Section, files_section


def wait_chart(dp: pd.DataFrame) -> Chart:
    """Data Wait per rank (ms per step) against the rank's step time: the wait is drawn inside
    a bar of the whole step, so a 0.2 ms wait in an 800 ms step looks as small as it is;
    largest waits first past 64 ranks."""
    dp = dp.assign(_rank=pd.to_numeric(dp["Rank"], errors="coerce"),
                   _wait=pd.to_numeric(dp["Data Wait(ms)"], errors="coerce").fillna(0.0))
    dp = dp.dropna(subset=["_rank"])
    if len(dp) > MAX_BARS:
        dp = dp.sort_values("_wait", ascending=False).head(MAX_BARS)
    dp = dp.sort_values("_rank")
    step = list(pd.to_numeric(dp.get("Step(ms)"), errors="coerce"))
    data = {"x": [str(int(r)) for r in dp["_rank"]], "wait": list(dp["_wait"]),
            "pct": list(pd.to_numeric(dp.get("Data Wait(%)"), errors="coerce")),
            "step": step,
            "rest": [None if s != s else max(0.0, s - w) for s, w in zip(step, dp["_wait"])],
            "how": [str(v) for v in dp.get("Wait Source", [""] * len(dp))]}
    series = [{"type": "bar", "y": "wait", "label": "Data Wait", "color": PALETTE[4],
               "stack": "s", "width": 0.6}]
    if any(v is not None for v in data["rest"]):
        series.append({"type": "bar", "y": "rest", "label": "rest of the step",
                       "color": "#e3e8ee", "stack": "s", "width": 0.6})
    return Chart("dataprep_wait", data, series, height=300,
                 title="Data Wait per rank within its step time (data_preparation.csv)",
                 y_label="time per step (ms)", x_label="rank",
                 tips=[("rank", "x", "", 0), ("Data Wait", "wait", "ms per step", 3),
                       ("share of the step", "pct", "%", 1), ("step", "step", "ms", 3),
                       ("measured from", "how", "", 0)])


def build(d, ctx) -> Section:
    dp = d.data_preparation
    return files_section(
        "dataprep", "Data preparation",
        {"data_preparation.csv": dp, "dataset_pipeline.csv": d.dataset_pipeline},
        "no data_preparation.csv (no step timing to judge data loading by)",
        "How long each step waits for its input data, and where the input pipeline stalls.",
        wait_chart(dp) if dp is not None and len(dp) and "Data Wait(ms)" in dp else None)
