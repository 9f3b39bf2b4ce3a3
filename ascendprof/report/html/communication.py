"""Communication section: per communication group a src→dst heatmap of its links (bandwidth,
transit time, size: the 'Total Op Info' of cluster_communication_matrix.json), every link's
bandwidth per transport against that transport's median, and per rank the time in
communication ops split into transit, wait and idle ('Total Op Info' of
cluster_communication.json). Links and ranks named by a verdict are outlined in red."""

from __future__ import annotations

import pandas as pd

from ascendprof.report.html.common import (COLORS, FLAG_COLOR, MAX_BARS, MAX_TABLE_ROWS, PALETTE,
                                           Section, Table, cell, figure, legend_outside, source)
from ascendprof.report.html.steps import flagged_ranks

#: steps drawn one tab each; past this only the first step is drawn
MAX_STEPS = 4
#: heatmap axes list every rank up to this many ranks in the group, else a numeric axis
MAX_RANK_LABELS = 32
HEAT_METRICS = [("Bandwidth(GB/s)", "GB/s"), ("Transit Time(ms)", "ms"),
                ("Transit Size(MB)", "MB")]


def slow_links(verdicts: dict | None) -> set[tuple[int, int]]:
    """(src, dst) pairs, both directions, of verdicts about a link."""
    out = set()
    for v in (verdicts or {}).get("verdicts", []) or []:
        if v.get("scope") == "link" or "link" in str(v.get("category", "")):
            r = [int(x) for x in v.get("ranks") or []]
            if len(r) == 2:
                out |= {(r[0], r[1]), (r[1], r[0])}
    return out


def _steps(df: pd.DataFrame) -> list[str]:
    steps = list(dict.fromkeys(df["Step"].astype(str)))
    return steps if len(steps) <= MAX_STEPS else steps[:1]


def heatmap(links: pd.DataFrame, metric: str, unit: str, slow: set, title: str):
    from bokeh.models import (BasicTicker, ColorBar, FactorRange, HoverTool,
                              LinearColorMapper)
    from bokeh.palettes import Viridis256

    ranks = sorted(set(links["Src Rank"]) | set(links["Dst Rank"]))
    labelled = len(ranks) <= MAX_RANK_LABELS
    vals = [float(v) for v in pd.to_numeric(links[metric], errors="coerce").fillna(0.0)]
    flag = [(s, t) in slow for s, t in zip(links["Src Rank"], links["Dst Rank"])]
    data = {"src": [str(s) if labelled else int(s) for s in links["Src Rank"]],
            "dst": [str(t) if labelled else int(t) for t in links["Dst Rank"]],
            "v": vals, "transport": list(links["Transport Type"]),
            "bw": list(links["Bandwidth(GB/s)"]), "time": list(links["Transit Time(ms)"]),
            "size": list(links["Transit Size(MB)"]), "group": list(links["Group"]),
            "gid": list(links["Group Id"]), "step": list(links["Step"]),
            "line": [FLAG_COLOR if f else "white" for f in flag],
            "lw": [3 if f else 1 for f in flag], "la": [1.0 if f else 0.0 for f in flag]}
    src = source(data)
    hi = max(vals) if vals else 1.0  # from 0: equal links look equal, whatever their spread
    cmap = LinearColorMapper(palette=Viridis256, low=0, high=hi if hi > 0 else 1.0)
    kw = {}
    if labelled:
        kw = {"x_range": FactorRange(*map(str, ranks)),
              "y_range": FactorRange(*map(str, reversed(ranks)))}  # rank 0 on top
    side = 260 if len(ranks) <= 8 else 380
    f = figure(title=title, x_axis_label="dst rank", y_axis_label="src rank", height=side + 60,
               sizing_mode="stretch_width", tools="hover,pan,wheel_zoom,reset,save", **kw)
    if labelled:
        f.rect(x="dst", y="src", width=1, height=1, source=src,
               fill_color={"field": "v", "transform": cmap}, line_color="line", line_width="lw")
    else:  # a cell of 1 rank would be under a pixel wide: fixed-size squares instead
        px = max(4, min(10, 600 // len(ranks)))
        f.scatter(x="dst", y="src", marker="square", size=px, source=src,
                  fill_color={"field": "v", "transform": cmap}, line_color=FLAG_COLOR,
                  line_alpha="la", line_width=2)
    f.select_one(HoverTool).tooltips = [
        ("link", "@src → @dst (@transport, @group)"), ("bandwidth", "@bw{0,0.0000} GB/s"),
        ("transit time", "@time{0,0.00000} ms"), ("size", "@size{0,0.000000} MB")]
    if not labelled:
        f.y_range.flipped = True
    f.add_layout(ColorBar(color_mapper=cmap, ticker=BasicTicker(desired_num_ticks=5),
                          title=unit, width=10, label_standoff=4), "right")
    f.grid.grid_line_color = None
    f.xaxis.major_label_orientation = 0 if len(ranks) <= 16 else 1.2
    return f


def heatmaps(links: pd.DataFrame, slow: set):
    """Tabs: one per group name (and step), each with the three metrics side by side."""
    from bokeh.layouts import row
    from bokeh.models import TabPanel, Tabs

    links = links[links["Src Rank"] != links["Dst Rank"]]  # self links are local copies
    panels = []
    for step in _steps(links):
        per_step = links[links["Step"] == step]
        for name, g in per_step.groupby("Group", sort=False):
            figs = [heatmap(g, m, u, slow, f"{name}: {m.split('(')[0].strip()} ({u})")
                    for m, u in HEAT_METRICS]
            title = name if len(_steps(links)) == 1 else f"{name} · {step}"
            panels.append(TabPanel(child=row(*figs, sizing_mode="stretch_width"), title=title))
    if not panels:
        return None
    return Tabs(tabs=panels, name="comm_heatmaps", sizing_mode="stretch_width")


def bandwidth_strip(links: pd.DataFrame, slow: set, min_mb: float):
    """Every link moving at least ``min_mb`` MB: its bandwidth per transport (jittered), that
    transport's median as a bar. Smaller transfers are latency-bound; their GB/s says nothing
    about the link (the verdicts judge links with the same floor, slow_link_min_mb)."""
    import random

    from bokeh.models import FactorRange, HoverTool
    from bokeh.transform import jitter

    links = links[(links["Src Rank"] != links["Dst Rank"])
                  & (links["Transport Type"].astype(str).str.upper() != "LOCAL")]
    links = links[pd.to_numeric(links["Transit Size(MB)"], errors="coerce").fillna(0) >= min_mb]
    if not len(links):
        return None
    random.seed(0)
    transports = sorted(set(links["Transport Type"].astype(str)))
    flag = [(s, t) in slow for s, t in zip(links["Src Rank"], links["Dst Rank"])]
    src = source({
        "t": list(links["Transport Type"].astype(str)),
        "bw": [float(v) for v in links["Bandwidth(GB/s)"]],
        "link": [f"{s} → {t}" for s, t in zip(links["Src Rank"], links["Dst Rank"])],
        "group": list(links["Group"]), "step": list(links["Step"]),
        "size": list(links["Transit Size(MB)"]), "time": list(links["Transit Time(ms)"]),
        "color": [FLAG_COLOR if f else PALETTE[0] for f in flag],
        "size_px": [11 if f else 7 for f in flag]})
    med = links.groupby(links["Transport Type"].astype(str))["Bandwidth(GB/s)"].median()
    msrc = source({"t": list(med.index), "m": [float(v) for v in med.values]})
    f = figure(x_range=FactorRange(*transports), height=340, name="comm_bandwidth",
               title=f"Bandwidth per transport of every link moving ≥ {min_mb:g} MB per step "
                     f"(matrix 'Total Op Info'); bar = the transport's median",
               y_axis_label="bandwidth (GB/s)", x_axis_label="transport type")
    med_r = f.vbar(x="t", top="m", width=0.6, source=msrc, color="#dfe6ee", line_color="#8a99a8")
    pts = f.scatter(x=jitter("t", width=0.5, range=f.x_range), y="bw", source=src,
                    color="color", size="size_px", alpha=0.8)
    f.add_tools(HoverTool(renderers=[pts], tooltips=[
        ("link", "@link (@group, @step)"), ("bandwidth", "@bw{0,0.0000} GB/s"),
        ("size", "@size{0,0.000} MB"), ("transit time", "@time{0,0.000} ms")]))
    f.add_tools(HoverTool(renderers=[med_r], tooltips=[("median", "@m{0,0.000} GB/s")]))
    f.y_range.start = 0
    f.xgrid.grid_line_color = None
    items = [("median per transport", [med_r]), ("link", [pts])]
    legend_outside(f, items)
    return f


def wait_bars(tot: pd.DataFrame, flags: dict, title: str, name: str):
    """Stacked bars per rank: Transit, Wait, Idle time in communication ops (ms per step)."""
    from bokeh.models import FactorRange, HoverTool

    cols = [("Transit", "Transit Time(ms)"), ("Wait", "Wait Time(ms)"), ("Idle", "Idle Time(ms)")]
    per = tot.groupby("Rank")[[c for _, c in cols] + ["Elapse Time(ms)"]].sum()
    if len(per) > MAX_BARS:
        keep = sorted(set(per.index) & set(flags))[:MAX_BARS // 2]
        keep += [r for r in per.sort_values("Wait Time(ms)", ascending=False).index
                 if r not in keep][:MAX_BARS - len(keep)]
        per = per.loc[sorted(keep)]
        title += f" (the {len(per)} ranks named by verdicts or waiting longest)"
    x = [str(r) for r in per.index]
    data = {"x": x, "rank": list(per.index), "flag": ["; ".join(flags.get(r, [])) for r in per.index]}
    for k, c in cols + [("Elapse", "Elapse Time(ms)")]:
        data[k] = [float(v) for v in per[c]]
    src = source(data)
    f = figure(x_range=FactorRange(*x), title=title, name=name, height=320,
               y_axis_label="time in communication ops per step (ms)", x_axis_label="rank")
    rs = f.vbar_stack([k for k, _ in cols], x="x", width=0.7, source=src,
                      color=[COLORS[k] for k, _ in cols], line_color="white")
    f.add_tools(HoverTool(renderers=rs, tooltips=[("rank", "@rank")] + [
        (c, f"@{k}{{0,0.000}} ms") for k, c in cols + [("Elapse", "Elapse Time(ms)")]]
        + [("verdicts", "@flag")]))
    f.y_range.start = 0
    f.xgrid.grid_line_color = None
    f.xaxis.major_label_orientation = 0 if len(x) <= 24 else 1.2
    legend_outside(f, [(f"{c}", [r]) for (_, c), r in zip(cols, rs)])
    return f


def wait_tabs(tot: pd.DataFrame, flags: dict):
    from bokeh.models import TabPanel, Tabs

    panels = []
    steps = _steps(tot)
    for step in steps:
        t = tot[tot["Step"] == step]
        sfx = "" if len(steps) == 1 else f" · {step}"
        panels.append(TabPanel(child=wait_bars(t, flags, f"All groups{sfx}: per rank",
                                               f"comm_wait_all_{step}"), title="all groups" + sfx))
        for name, g in t.groupby("Group", sort=False):
            panels.append(TabPanel(child=wait_bars(g, flags, f"Group {name}{sfx}: per rank",
                                                   f"comm_wait_{name}_{step}"),
                                   title=f"{name}{sfx}"))
    return Tabs(tabs=panels, name="comm_wait", sizing_mode="stretch_width")


def links_table(links: pd.DataFrame) -> Table:
    df = links.sort_values(["Group", "Step", "Src Rank", "Dst Rank"], kind="stable")
    cols = ["Group", "Group Id", "Step", "Src Rank", "Dst Rank", "Transport Type",
            "Bandwidth(GB/s)", "Transit Time(ms)", "Transit Size(MB)"]
    rows, keys = [], []
    for r in df.head(MAX_TABLE_ROWS).itertuples(index=False):
        rec = dict(zip(links.columns, r))
        rows.append([cell(rec[c]) for c in cols])
        keys.append({"group-id": rec["Group Id"], "step": rec["Step"],
                     "src": rec["Src Rank"], "dst": rec["Dst Rank"]})
    return Table(cols, rows, source="cluster_communication_matrix.json", keys=keys,
                 title="Numbers: links of cluster_communication_matrix.json ('Total Op Info' "
                       "of each group and step)", css="numbers links",
                 note=(f"first {MAX_TABLE_ROWS} of {len(df)} links; all in "
                       f"cluster_communication_matrix.json" if len(df) > MAX_TABLE_ROWS else ""))


def totals_table(tot: pd.DataFrame) -> Table:
    df = tot.sort_values(["Group", "Step", "Rank"], kind="stable")
    cols = list(df.columns)
    rows = [[cell(v) for v in r] for r in df.head(MAX_TABLE_ROWS).itertuples(index=False)]
    return Table(cols, rows, source="cluster_communication.json", css="numbers comm-totals",
                 title="Numbers: 'Total Op Info' per group, step and rank of "
                       "cluster_communication.json (ms)",
                 note=(f"first {MAX_TABLE_ROWS} of {len(df)} rows; all in "
                       f"cluster_communication.json" if len(df) > MAX_TABLE_ROWS else ""))


def build(d, ctx) -> Section:
    sec = Section("communication", "Communication")
    links, tot = d.links, d.comm_totals
    if (links is None or not len(links)) and (tot is None or not len(tot)):
        nw = (d.summary or {}).get("not_written") or {}
        sec.missing = (nw.get("cluster_communication_matrix.json")
                       or nw.get("cluster_communication.json")
                       or "no cluster_communication(_matrix).json in this output")
        return sec
    slow = slow_links(d.verdicts)
    flags = flagged_ranks(d.verdicts)
    sec.intro = ("Per communication group (named as the profiler's parallel groups: pp, dp, tp "
                 "…), the src→dst links' bandwidth, transit time and size; self links (local "
                 "copies) are left out of the heatmaps. Links named by a verdict are outlined "
                 "in red.")
    if links is not None and len(links):
        hm = heatmaps(links, slow)
        if hm is not None:
            sec.chart(hm, caption="Hover a cell for its values. Groups of the same name "
                                  "(e.g. the two pp groups) share one heatmap: they have no "
                                  "rank in common.")
        min_mb = float(((d.verdicts or {}).get("thresholds") or {}).get("slow_link_min_mb", 1.0))
        bw = bandwidth_strip(links, slow, min_mb)
        if bw is not None:
            sec.chart(bw)
    else:
        sec.text("Not in this analysis: " + ((d.summary or {}).get("not_written") or {}).get(
            "cluster_communication_matrix.json", "no cluster_communication_matrix.json"))
    if tot is not None and len(tot):
        caption = ("Transit: data moving; Wait: waiting for the peer to arrive; Idle: the rest "
                   "of the op (Elapse = Transit + Wait + Idle), as the profiler wrote them in "
                   "communication.json.")
        moved = links is not None and len(links) and pd.to_numeric(
            links.loc[links["Src Rank"] != links["Dst Rank"], "Transit Time(ms)"],
            errors="coerce").fillna(0).sum() > 0
        transit = pd.to_numeric(tot["Transit Time(ms)"], errors="coerce").fillna(0).sum()
        elapse = pd.to_numeric(tot["Elapse Time(ms)"], errors="coerce").fillna(0).sum()
        if moved and transit < 0.01 * elapse:
            caption += (" Here the profiler recorded (almost) no Transit Time in the ops' "
                        "records while the matrix above has the links' transit times: the "
                        "transfers are counted in Idle.")
        sec.chart(wait_tabs(tot, flags), caption=caption)
    if links is not None and len(links):
        sec.table(links_table(links))
    if tot is not None and len(tot):
        sec.table(totals_table(tot))
    return sec
