"""Memory section: per rank the peak memory of each component (memory_summary.csv) against the
device capacity when recorded, and the operators holding most memory (memory_top_ops.csv)."""

from __future__ import annotations

import pandas as pd

from ascendprof.report.html.common import (MAX_BARS, PALETTE, Section, figure, legend_outside,
                                           numbers_table, source)

_BARS = [("Peak Allocated(MB)", PALETTE[0]), ("Peak Reserved(MB)", PALETTE[3])]


def peaks(ms: pd.DataFrame):
    """Grouped bars per rank and component: peak allocated and reserved (MB)."""
    from bokeh.models import FactorRange, HoverTool
    from bokeh.transform import dodge

    ms = ms.assign(_rank=pd.to_numeric(ms["Rank"], errors="coerce")).dropna(subset=["_rank"])
    comps = list(dict.fromkeys(ms["Component"].astype(str)))
    comp = "PTA+GE" if "PTA+GE" in comps else comps[0]
    rows = ms[ms["Component"].astype(str) == comp].sort_values("_rank")
    if len(rows) > MAX_BARS:
        rows = rows.sort_values("Peak Reserved(MB)", ascending=False).head(MAX_BARS)
        rows = rows.sort_values("_rank")
    x = [str(int(r)) for r in rows["_rank"]]
    data = {"x": x}
    for col, _ in _BARS + [("Capacity(MB)", None)]:
        data[col] = [None if pd.isna(v) else float(v)
                     for v in pd.to_numeric(rows.get(col, pd.Series(index=rows.index)),
                                            errors="coerce")]
    data["op"] = [str(v) for v in rows.get("Peak Allocated Operator", [""] * len(rows))]
    data["alloc"], data["resv"] = data["Peak Allocated(MB)"], data["Peak Reserved(MB)"]
    data["cap"] = data["Capacity(MB)"]
    src = source(data)
    f = figure(x_range=FactorRange(*x), height=320, name="memory_peaks",
               title=f"Peak memory per rank, component {comp} (memory_summary.csv)",
               y_axis_label="memory (MB)", x_axis_label="rank")
    items = []
    for (col, color), off in zip(_BARS, (-0.18, 0.18)):
        key = "alloc" if "Allocated" in col else "resv"
        r = f.vbar(x=dodge("x", off, range=f.x_range), top=key, width=0.34, source=src,
                   color=color)
        items.append((col.replace("(MB)", ""), [r]))
    if any(v is not None for v in data["cap"]):
        cap = f.scatter(x="x", y="cap", source=src, marker="dash", size=40, line_width=3,
                        color="#d62728")
        items.append(("device capacity", [cap]))
    f.add_tools(HoverTool(renderers=[r for _, rs in items for r in rs], tooltips=[
        ("rank", "@x"), ("peak allocated", "@alloc{0,0.0} MB (at @op)"),
        ("peak reserved", "@resv{0,0.0} MB"), ("capacity", "@cap{0,0} MB")]))
    f.y_range.start = 0
    f.xgrid.grid_line_color = None
    legend_outside(f, items)
    return f


def build(d, ctx) -> Section:
    sec = Section("memory", "Memory")
    ms, top = d.memory_summary, d.memory_top_ops
    if (ms is None or not len(ms)) and (top is None or not len(top)):
        sec.missing = "no memory_summary.csv (the profiler recorded no memory)"
        return sec
    sec.intro = "Peak device memory per rank and the operators holding the most."
    if ms is not None and len(ms) and "Component" in ms:
        sec.chart(peaks(ms))
    for df, name in ((ms, "memory_summary.csv"), (top, "memory_top_ops.csv")):
        if df is not None and len(df):
            sec.table(numbers_table(df, name))
    return sec
