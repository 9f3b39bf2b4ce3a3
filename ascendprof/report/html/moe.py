"""Mixture-of-experts section: tokens per rank of each expert-parallel group against the
group's mean (moe_expert_load.csv, analyze.moe); absent without GroupedMatmul operators."""

from __future__ import annotations

import pandas as pd

from ascendprof.report.html.common import MAX_BARS, PALETTE, Chart, Section, files_section


def load_chart(ml: pd.DataFrame) -> Chart:
    """Load / Mean per rank (mean over the steps), one bar per rank, a line at 1.0; past 64
    ranks the most loaded ones."""
    ml = ml.assign(_rank=pd.to_numeric(ml["Rank"], errors="coerce"),
                   _load=pd.to_numeric(ml["Load / Mean"], errors="coerce"),
                   _tok=pd.to_numeric(ml["Tokens"], errors="coerce"))
    ml = ml.dropna(subset=["_rank", "_load"])
    per = (ml.groupby(["_rank", "EP Group"], as_index=False)
             .agg(load=("_load", "mean"), tokens=("_tok", "mean")))
    if len(per) > MAX_BARS:
        per = per.sort_values("load", ascending=False).head(MAX_BARS)
    per = per.sort_values("_rank")
    data = {"x": [str(int(r)) for r in per["_rank"]], "load": list(per["load"]),
            "tokens": list(per["tokens"]), "group": [str(g) for g in per["EP Group"]]}
    return Chart("moe_load", data, [{"type": "bar", "y": "load", "color": PALETTE[2],
                                     "width": 0.6}], hline=1.0, height=300,
                 title="Expert load per rank: tokens over the EP group's mean "
                       "(moe_expert_load.csv); dashed line = an even load",
                 y_label="tokens / group mean", x_label="rank",
                 tips=[("rank", "x", "", 0), ("EP group", "group", "", 0),
                       ("load / group mean", "load", "", 3),
                       ("tokens per step", "tokens", "", 0)])


def build(d, ctx) -> Section:
    ml = d.moe_expert_load
    return files_section(
        "moe", "Expert load", {"moe_expert_load.csv": ml},
        "no moe_expert_load.csv (no GroupedMatmul operators: not a mixture-of-experts model, "
        "or no kernel input shapes)",
        "Tokens each rank's experts receive per step, over the mean of its expert-parallel "
        "group; 1.0 is a perfectly even load.",
        load_chart(ml) if ml is not None and len(ml)
        and {"Rank", "Load / Mean", "Tokens", "EP Group"} <= set(ml.columns) else None)
