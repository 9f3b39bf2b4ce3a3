"""Step breakdown section: cluster_step_trace_time.csv as stacked bars per rank, grouped by
pipeline stage, the ranks named by a verdict marked; heatmaps per node and the top ranks when
the cluster is too large for one bar per rank.

Values are the CSV's (µs), drawn in ms. Stage = Computing + Communication(Not Overlapped) + Free
(spec §A.1), so those three are stacked; Overlapped is part of Computing and is drawn inside it;
Preparing (before the step's first kernel) is stacked on top.
"""

from __future__ import annotations

import pandas as pd

from ascendprof.report.html.common import (COLORS, FLAG_COLOR, MAX_BARS, MAX_TABLE_ROWS, Section,
                                           Table, cell, figure, legend_outside, node_layout, source)

STACK = [("comp", "Computing"), ("comm", "Communication(Not Overlapped)"), ("free", "Free"),
         ("prep", "Preparing")]
#: CSV column -> data source key of its µs value (hover texts)
METRICS = {"Computing": "computing_us", "Communication(Not Overlapped)": "comm_no_us",
           "Overlapped": "overlapped_us", "Communication": "communication_us", "Free": "free_us",
           "Stage": "stage_us", "Bubble": "bubble_us", "Preparing": "preparing_us"}
#: ranks shown as bars when the cluster is aggregated: the flagged ones, then the longest
TOP_RANKS = 32
#: steps shown one tab each
MAX_STEPS = 16


def flagged_ranks(verdicts: dict | None) -> dict[int, list[str]]:
    """rank -> ['critical compute: message…'] for every verdict that names the rank."""
    out: dict[int, list[str]] = {}
    for v in (verdicts or {}).get("verdicts", []) or []:
        if v.get("category") == "balanced" or v.get("severity") == "info":
            continue
        for r in v.get("ranks") or []:
            out.setdefault(int(r), []).append(f"{v.get('severity', '')} {v.get('category', '')}")
    return out


def _num(df: pd.DataFrame, col: str) -> pd.Series:
    if col not in df:
        return pd.Series(0.0, index=df.index)
    return pd.to_numeric(df[col], errors="coerce").fillna(0.0)


def _source_data(rows: pd.DataFrame, stage_of: dict[int, int], flags: dict, staged: bool):
    rows = rows.assign(_stage=[stage_of.get(int(r), 0) for r in rows["Rank"]])
    rows = rows.sort_values(["_stage", "Rank"])
    x = [(f"stage {s}", str(r)) if staged else str(r)
         for s, r in zip(rows["_stage"], rows["Rank"])]
    data = {"x": x, "rank": [int(r) for r in rows["Rank"]],
            "stage": [int(s) for s in rows["_stage"]]}
    for key, col in STACK:
        data[key] = list(_num(rows, col) / 1000.0)  # µs -> ms
    for col, key in METRICS.items():
        data[key] = list(_num(rows, col))
    comp, ovl = _num(rows, "Computing") / 1000.0, _num(rows, "Overlapped") / 1000.0
    data["ovl_bottom"], data["ovl_top"] = list(comp - ovl), list(comp)
    total = sum((_num(rows, c) for _, c in STACK), start=pd.Series(0.0, index=rows.index)) / 1000
    data["top"] = list(total)
    data["flag"] = ["; ".join(flags.get(int(r), [])) for r in rows["Rank"]]
    return data


_TIPS = [("rank", "@rank (stage @stage)")] + [
    (col, f"@{key}{{0,0.00}} µs") for col, key in METRICS.items()
    if col not in ("Communication", "Bubble")] + [("verdicts", "@flag")]


def bars(rows: pd.DataFrame, stage_of: dict[int, int], flags: dict, title: str,
         name: str, on_rank=None):
    """Stacked bars per rank (ms per step). ``on_rank``: a function(source) -> CustomJS run
    when a bar is tapped (selects the rank in the other charts)."""
    from bokeh.models import FactorRange, HoverTool, TapTool

    staged = len(set(stage_of.values())) > 1
    data = _source_data(rows, stage_of, flags, staged)
    src = source(data)
    f = figure(x_range=FactorRange(*data["x"]), title=title, name=name,
               y_axis_label="time per step (ms)",
               x_axis_label="pipeline stage / rank" if staged else "rank",
               tools="pan,wheel_zoom,box_zoom,reset,save,tap")
    rs = f.vbar_stack([k for k, _ in STACK], x="x", width=0.8, source=src,
                      color=[COLORS[c] for _, c in STACK], line_color="white")
    ovl = f.vbar(x="x", bottom="ovl_bottom", top="ovl_top", width=0.3, source=src,
                 color=COLORS["Overlapped"], line_color=None, alpha=0.9)
    items = [(c, [r]) for (_, c), r in zip(STACK, rs)]
    items.insert(3, ("Overlapped (inside Computing)", [ovl]))
    fl = {k: [v for v, g in zip(data[k], data["flag"]) if g] for k in ("x", "top", "flag", "rank")}
    if fl["x"]:
        fsrc = source({**fl, "y": [t * 1.04 for t in fl["top"]]})
        mk = f.scatter(x="x", y="y", source=fsrc, marker="inverted_triangle", size=13,
                       color=FLAG_COLOR, name="flagged")
        items.append(("named by a verdict", [mk]))
    f.add_tools(HoverTool(renderers=rs, tooltips=_TIPS))
    f.y_range.start = 0
    f.xgrid.grid_line_color = None
    f.xaxis.major_label_orientation = 0 if len(data["x"]) <= 24 else 1.2
    legend_outside(f, items)
    callback = on_rank(src) if on_rank is not None else None
    if callback is not None:
        f.select_one(TapTool).renderers = rs
        src.selected.js_on_change("indices", callback)
    return f


def heatmaps(rows: pd.DataFrame, device_of: dict[int, int], flags: dict, name: str):
    """Tabs of rank heatmaps by node (x: device in node, y: node), one per metric (ms)."""
    from bokeh.models import (BasicTicker, ColorBar, HoverTool,
                              LinearColorMapper, TabPanel, Tabs)
    from bokeh.palettes import Viridis256

    ranks = [int(r) for r in rows["Rank"]]
    node, per, how = node_layout(sorted(set(ranks)), device_of)
    panels = []
    for col in ("Computing", "Communication(Not Overlapped)", "Free", "Preparing"):
        vals = list(_num(rows, col) / 1000.0)
        src = source({"node": [node[r] for r in ranks],
                                "slot": [r - node[r] * per for r in ranks], "rank": ranks,
                                "v": vals, "us": list(_num(rows, col)),
                                "flag": ["; ".join(flags.get(r, [])) for r in ranks]})
        lo, hi = (min(vals), max(vals)) if vals else (0, 1)
        cmap = LinearColorMapper(palette=Viridis256, low=lo, high=hi if hi > lo else lo + 1)
        f = figure(title=f"{col} per rank (ms per step) by node: {how}", height=420,
                   x_axis_label="device in node", y_axis_label="node",
                   tools="hover,pan,wheel_zoom,reset,save")
        f.rect(x="slot", y="node", width=1, height=1, source=src,
               fill_color={"field": "v", "transform": cmap}, line_color="white")
        f.select_one(HoverTool).tooltips = [("rank", "@rank"), (col, "@us{0,0.00} µs"),
                                           ("verdicts", "@flag")]
        f.y_range.flipped = True
        f.add_layout(ColorBar(color_mapper=cmap, ticker=BasicTicker(), title="ms",
                              label_standoff=6), "right")
        panels.append(TabPanel(child=f, title=col))
    return Tabs(tabs=panels, name=name, sizing_mode="stretch_width")


def stage_bars(stage_rows: pd.DataFrame, name: str):
    """Stacked bars per pipeline stage from the CSV's stage rows (the max over the stage's
    ranks, as msprof-analyze writes them)."""
    from bokeh.models import FactorRange, HoverTool

    idx = [str(i) for i in stage_rows["Index"]]
    n = [len([r for r in i.strip("()").split(",") if r.strip()]) for i in idx]
    x = [f"{i} ({k} ranks)" if k > 2 else f"{i} {v}" for i, (k, v) in enumerate(zip(n, idx))]
    data = {"x": x, "idx": [i if len(i) <= 120 else i[:117] + "…" for i in idx]}
    for key, col in STACK:
        data[key] = list(_num(stage_rows, col) / 1000.0)
        data[key + "_us"] = list(_num(stage_rows, col))
    src = source(data)
    f = figure(x_range=FactorRange(*x), name=name, height=300,
               title="Per stage row of the CSV (each value: the max over the row's ranks)",
               y_axis_label="time per step (ms)", x_axis_label="stage row (ranks)")
    rs = f.vbar_stack([k for k, _ in STACK], x="x", width=0.6, source=src,
                      color=[COLORS[c] for _, c in STACK], line_color="white")
    f.add_tools(HoverTool(renderers=rs, tooltips=[("ranks", "@idx")] + [
        (c, f"@{k}_us{{0,0.00}} µs") for k, c in STACK]))
    f.y_range.start = 0
    legend_outside(f, [(c, [r]) for (_, c), r in zip(STACK, rs)])
    return f


def numbers_table(st: pd.DataFrame) -> Table:
    cols = list(st.columns)
    rows, keys = [], []
    for rec in st.head(MAX_TABLE_ROWS).itertuples(index=False):
        rec = list(rec)
        rows.append([cell(v) for v in rec])
        keys.append({"type": cell(rec[1]), "index": cell(rec[2]), "step": cell(rec[0])})
    note = (f"first {MAX_TABLE_ROWS} of {len(st)} rows; all in cluster_step_trace_time.csv"
            if len(st) > MAX_TABLE_ROWS else "")
    return Table(cols, rows, source="cluster_step_trace_time.csv", keys=keys, note=note,
                 title="Numbers: cluster_step_trace_time.csv (µs)", css="numbers steps")


def _tabs_or_one(models: list, titles: list[str], name: str):
    from bokeh.models import TabPanel, Tabs

    if len(models) == 1:
        models[0].name = name
        return models[0]
    return Tabs(tabs=[TabPanel(child=m, title=t) for m, t in zip(models, titles)], name=name,
                sizing_mode="stretch_width")


def build(d, ctx) -> Section:
    sec = Section("steps", "Step breakdown")
    rows = d.rank_rows()
    if rows is None or not len(rows):
        sec.missing = ((d.summary or {}).get("not_written", {}).get(
            "cluster_step_trace_time.csv") or "no cluster_step_trace_time.csv in this output")
        it = d.iteration_trace
        if it is not None and len(it):  # graph mode: the iteration trace is what there is
            sec.table(Table(list(it.columns), [[cell(v) for v in r] for r in
                                               it.head(MAX_TABLE_ROWS).itertuples(index=False)],
                            source="iteration_trace.csv", open=True, css="numbers iteration",
                            title="Iteration trace (iteration_trace.csv, ms per iteration)"))
        return sec
    flags = flagged_ranks(d.verdicts)
    stage_of = d.stage_of()
    steps = list(dict.fromkeys(rows["Step"].astype(str)))
    shown = steps[:MAX_STEPS]
    n_ranks = rows["Rank"].nunique()
    sec.intro = (f"Where each rank's step time goes, from cluster_step_trace_time.csv "
                 f"({n_ranks} ranks, {len(steps)} step{'s' if len(steps) != 1 else ''}"
                 + (f", the first {MAX_STEPS} shown" if len(steps) > MAX_STEPS else "")
                 + "). Stage = Computing + Communication(Not Overlapped) + Free; Overlapped is "
                   "communication hidden under Computing; Preparing comes before the step. "
                   "Tap a bar to select that rank in the Operators section.")
    on_rank = ctx.get("on_rank")
    if n_ranks <= MAX_BARS:
        charts = [bars(rows[rows["Step"].astype(str) == s], stage_of, flags,
                       f"Step {s}: time per rank", f"steps_bars_{i}", on_rank)
                  for i, s in enumerate(shown)]
        sec.chart(_tabs_or_one(charts, [f"step {s}" for s in shown], "steps_bars"))
    else:
        st_rows = d.step_trace[d.step_trace["Type"].astype(str) == "stage"]
        if len(st_rows):
            charts = [stage_bars(st_rows[st_rows["Step"].astype(str) == s], f"steps_stage_{i}")
                      for i, s in enumerate(shown)]
            sec.chart(_tabs_or_one(charts, [f"step {s}" for s in shown], "steps_stages"))
        device_of = {int(s["rank"]): s.get("device_id") for s in (d.summary or {}).get(
            "sources", []) if s.get("rank") is not None}
        charts = [heatmaps(rows[rows["Step"].astype(str) == s], device_of, flags,
                           f"steps_heat_{i}") for i, s in enumerate(shown)]
        sec.chart(_tabs_or_one(charts, [f"step {s}" for s in shown], "steps_heatmaps"),
                  caption="Every rank as one cell; hover for its value.")
        tops = []
        n_stages = max(1, len(set(stage_of.values())))
        per = max(1, TOP_RANKS // n_stages)
        for i, s in enumerate(shown):
            r = rows[rows["Step"].astype(str) == s]
            r = r.assign(_st=[stage_of.get(int(x), 0) for x in r["Rank"]],
                         _c=_num(r, "Computing"))
            keep = [x for _, g in r.groupby("_st")
                    for x in g.sort_values("_c", ascending=False)["Rank"].head(per)]
            what = f"per pipeline stage the {per}" if n_stages > 1 else f"the {per}"
            tops.append(bars(r[r["Rank"].isin(keep)], stage_of, flags,
                             f"Step {s}: {what} ranks with the longest Computing "
                             f"(of {n_ranks} ranks)", f"steps_top_{i}", on_rank))
        sec.chart(_tabs_or_one(tops, [f"step {s}" for s in shown], "steps_top"))
    sec.table(numbers_table(d.step_trace))
    return sec
