"""Communication section: per communication group a src→dst heatmap of its links (bandwidth,
transit time, size: the 'Total Op Info' of cluster_communication_matrix.json), every link's
bandwidth per transport against that transport's median, and per rank the time in
communication ops split into transit, wait and idle ('Total Op Info' of
cluster_communication.json). Links and ranks named by a verdict are outlined in red."""

from __future__ import annotations

import random

import pandas as pd

from ascendprof.report.html.common import (COLORS, FLAG_COLOR, MAX_BARS, MAX_TABLE_ROWS, PALETTE,
                                           Chart, Section, Table, Tabs, cell)
from ascendprof.report.html.steps import flagged_ranks

#: steps drawn one tab each; past this only the first step is drawn
MAX_STEPS = 4
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


def heatmap(links: pd.DataFrame, metric: str, unit: str, slow: set, title: str,
            name: str) -> Chart:
    ranks = sorted(set(links["Src Rank"]) | set(links["Dst Rank"]))
    vals = [float(v) for v in pd.to_numeric(links[metric], errors="coerce").fillna(0.0)]
    flag = [(s, t) in slow for s, t in zip(links["Src Rank"], links["Dst Rank"])]
    data = {"src": [int(s) for s in links["Src Rank"]],
            "dst": [int(t) for t in links["Dst Rank"]],
            "v": vals, "transport": list(links["Transport Type"]),
            "bw": list(links["Bandwidth(GB/s)"]), "time": list(links["Transit Time(ms)"]),
            "size": list(links["Transit Size(MB)"]), "group": list(links["Group"]),
            "gid": list(links["Group Id"]), "step": list(links["Step"]), "flag": flag,
            "link": [f"{s} → {t}" for s, t in zip(links["Src Rank"], links["Dst Rank"])]}
    hi = max(vals) if vals else 1.0  # from 0: equal links look equal, whatever their spread
    side = 260 if len(ranks) <= 8 else 380
    return Chart(name, data, title=title, x_label="dst rank", y_label="src rank",
                 height=side + 60,
                 tips=[("link (src → dst rank)", "link", "", 0),
                       ("transport", "transport", "", 0), ("group", "group", "", 0),
                       ("bandwidth", "bw", "GB/s", 4), ("transit time", "time", "ms", 5),
                       ("size", "size", "MB", 6)],
                 heat={"x": "dst", "y": "src", "v": "v", "xcats": ranks, "ycats": ranks,
                       "unit": unit, "min": 0, "max": hi if hi > 0 else 1.0, "flag": "flag"})


def heatmaps(links: pd.DataFrame, slow: set):
    """Tabs: one per group name (and step), each with the three metrics side by side."""
    links = links[links["Src Rank"] != links["Dst Rank"]]  # self links are local copies
    panels = []
    for step in _steps(links):
        per_step = links[links["Step"] == step]
        for name, g in per_step.groupby("Group", sort=False):
            k = len(panels)
            figs = [heatmap(g, m, u, slow, f"{name}: {m.split('(')[0].strip()} ({u})",
                            f"comm_heat_{k}_{j}")
                    for j, (m, u) in enumerate(HEAT_METRICS)]
            for j, f in enumerate(figs[1:], 1):  # one copy of the links' data per group
                v = f.data["v"]
                figs[0].data[f"v{j}"] = v
                f.data, f.data_ref = {}, figs[0].name
                f.heat = dict(f.heat, v=f"v{j}")
            title = name if len(_steps(links)) == 1 else f"{name}, step {step}"
            panels.append((title, figs))
    return Tabs("comm_heatmaps", panels) if panels else None


def bandwidth_strip(links: pd.DataFrame, slow: set, min_mb: float):
    """Every link moving at least ``min_mb`` MB: its bandwidth per transport (jittered), that
    transport's median as a dash. Smaller transfers are latency-bound; their GB/s says nothing
    about the link (the verdicts judge links with the same floor, slow_link_min_mb)."""
    links = links[(links["Src Rank"] != links["Dst Rank"])
                  & (links["Transport Type"].astype(str).str.upper() != "LOCAL")]
    links = links[pd.to_numeric(links["Transit Size(MB)"], errors="coerce").fillna(0) >= min_mb]
    if not len(links):
        return None
    rnd = random.Random(0)
    transports = sorted(set(links["Transport Type"].astype(str)))
    pos = {t: i for i, t in enumerate(transports)}
    flag = [(s, t) in slow for s, t in zip(links["Src Rank"], links["Dst Rank"])]
    med = links.groupby(links["Transport Type"].astype(str))["Bandwidth(GB/s)"].median()
    n = len(links)
    data = {
        "x": [pos[str(t)] + rnd.uniform(-0.25, 0.25) for t in links["Transport Type"]]
        + [pos[t] for t in med.index],
        "t": list(links["Transport Type"].astype(str)) + list(med.index),
        "bw": [float(v) for v in links["Bandwidth(GB/s)"]] + [None] * len(med),
        "median": [None] * n + [float(v) for v in med.values],
        "link": [f"{s} → {t}" for s, t in zip(links["Src Rank"], links["Dst Rank"])]
        + [""] * len(med),
        "group": list(links["Group"]) + [""] * len(med),
        "step": list(links["Step"]) + [""] * len(med),
        "size": list(links["Transit Size(MB)"]) + [None] * len(med),
        "time": list(links["Transit Time(ms)"]) + [None] * len(med),
        "color": [FLAG_COLOR if f else PALETTE[0] for f in flag] + ["#444"] * len(med)}
    return Chart("comm_bandwidth", data, [
        {"type": "scatter", "y": "bw", "label": "link", "color": PALETTE[0],
         "color_col": "color", "size": 8, "opacity": 0.8},
        {"type": "scatter", "y": "median", "label": "median per transport", "color": "#444",
         "symbol": "dash", "size": 60}],
        xvalue=True, xcats=transports, height=340,
        title=f"Bandwidth per transport of every link moving ≥ {min_mb:g} MB per step "
              f"(matrix 'Total Op Info'); dash = the transport's median",
        y_label="bandwidth (GB/s)", x_label="transport type",
        tips=[("link", "link", "", 0), ("transport", "t", "", 0), ("group", "group", "", 0),
              ("step", "step", "", 0), ("bandwidth", "bw", "GB/s", 4),
              ("median", "median", "GB/s", 3), ("size", "size", "MB", 3),
              ("transit time", "time", "ms", 3)])


#: one-line definitions of cluster_communication.json's times (legend and table headers)
COMM_DEFINITIONS = {
    "Elapse Time(ms)": "the ops' duration on this rank, summed over the step's ops "
                       "(Transit + Wait + Idle)",
    "Transit Time(ms)": "time data moves over the links",
    "Wait Time(ms)": "the profiler's Wait: time in notify-wait tasks, waiting for the peer "
                     "to be ready (synchronisation inside the op)",
    "Idle Time(ms)": "the rest of the op: neither transit nor wait (e.g. waiting for the "
                     "peer to arrive at the op, task launch)",
}


def wait_bars(tot: pd.DataFrame, flags: dict, title: str, name: str) -> Chart:
    """Stacked bars per rank: Transit, Wait, Idle time in communication ops (ms per step)."""
    cols = [("Transit", "Transit Time(ms)"), ("Wait", "Wait Time(ms)"), ("Idle", "Idle Time(ms)")]
    per = tot.groupby("Rank")[[c for _, c in cols] + ["Elapse Time(ms)"]].sum()
    if len(per) > MAX_BARS:
        keep = sorted(set(per.index) & set(flags))[:MAX_BARS // 2]
        keep += [r for r in per.sort_values("Wait Time(ms)", ascending=False).index
                 if r not in keep][:MAX_BARS - len(keep)]
        per = per.loc[sorted(keep)]
        title += f" (the {len(per)} ranks named by verdicts or waiting longest)"
    data = {"x": [str(r) for r in per.index], "rank": [int(r) for r in per.index],
            "flag": ["; ".join(flags.get(r, [])) for r in per.index]}
    for k, c in cols + [("Elapse", "Elapse Time(ms)")]:
        data[k] = [float(v) for v in per[c]]
    return Chart(name, data, [{"type": "bar", "y": k, "label": k, "color": COLORS[k],
                               "stack": "op", "width": 0.7} for k, _ in cols],
                 title=title, y_label="time in communication ops per step (ms)",
                 x_label="rank", height=320, select=True,
                 tips=[("rank", "rank", "", 0)] + [
                     (c, k, "ms", 3) for k, c in cols + [("Elapse", "Elapse Time(ms)")]]
                 + [("named by verdicts", "flag", "", 0)])


def wait_tabs(tot: pd.DataFrame, flags: dict):
    panels = []
    steps = _steps(tot)
    for step in steps:
        t = tot[tot["Step"] == step]
        sfx = "" if len(steps) == 1 else f", step {step}"
        panels.append(("all groups" + sfx, [wait_bars(t, flags, f"All groups{sfx}: per rank",
                                                      f"comm_wait_{len(panels)}")]))
        for name, g in t.groupby("Group", sort=False):
            panels.append((f"{name}{sfx}", [wait_bars(g, flags, f"Group {name}{sfx}: per rank",
                                                      f"comm_wait_{len(panels)}")]))
    return Tabs("comm_wait", panels)


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
                 defs=COMM_DEFINITIONS,
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
        caption = ("Transit: data moving; Wait: the profiler's notify-wait time (waiting for "
                   "the peer to be ready); Idle: the rest of the op (Elapse = Transit + Wait + "
                   "Idle), ms per step as the profiler wrote them in communication.json. A "
                   "verdict's wait for a peer is measured on the op timeline and compares "
                   "with Wait + Idle here (see the reconciliation under the verdict).")
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
