"""Step breakdown section: cluster_step_trace_time.csv as stacked bars per rank, grouped by
pipeline stage, the ranks named by a verdict marked; heatmaps per node and the top ranks when
the cluster is too large for one bar per rank.

Values are the CSV's (µs), drawn in ms. Stage = Computing + Communication(Not Overlapped) + Free
(spec §A.1), so those three are stacked; Overlapped is part of Computing and is drawn inside it;
Preparing (before the step's first kernel) is stacked on top.
"""

from __future__ import annotations

import pandas as pd

from ascendprof.model.ranks import rank_ranges
from ascendprof.report.bounded import source_column
from ascendprof.report.html.common import (cell, step_text, Chart, COLORS, FLAG_COLOR, MAX_BARS,
                                           MAX_STEPS, MAX_TABLE_ROWS, node_layout, Section,
                                           Table, Tabs, tabs_or_one)

STACK = [("comp", "Computing"), ("comm", "Communication(Not Overlapped)"), ("free", "Free"),
         ("prep", "Preparing")]
#: CSV column -> data source key of its µs value (hover texts)
METRICS = {"Computing": "computing_us", "Communication(Not Overlapped)": "comm_no_us",
           "Overlapped": "overlapped_us", "Communication": "communication_us", "Free": "free_us",
           "Stage": "stage_us", "Bubble": "bubble_us", "Preparing": "preparing_us"}
#: ranks shown as bars when the cluster is aggregated: the flagged ones, then the longest
TOP_RANKS = 32


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


#: one-line definitions of the step_trace_time columns (hover of the numbers table headers)
DEFINITIONS = {
    "Computing": "time the device runs compute kernels (µs per step)",
    "Communication(Not Overlapped)": "time in communication ops while no compute kernel runs "
                                     "(µs per step)",
    "Overlapped": "communication time hidden under compute kernels (µs per step)",
    "Communication": "all time in communication ops (µs per step)",
    "Free": "time the device runs nothing (µs per step)",
    "Stage": "the step on this rank: Computing + Communication(Not Overlapped) + Free (µs)",
    "Bubble": "the profiler's own Bubble column: time in pipeline receive ops it tagged as "
              "bubble (µs; often 0: the Pipeline section recomputes the bubble)",
    "Preparing": "time before the step's first kernel (µs)",
}


def _source_data(rows: pd.DataFrame, stage_of: dict[int, int], flags: dict, staged: bool):
    rows = rows.assign(_stage=[stage_of.get(int(r), 0) for r in rows["Rank"]])
    rows = rows.sort_values(["_stage", "Rank"])
    x = [f"s{s}·{r}" if staged else str(r) for s, r in zip(rows["_stage"], rows["Rank"])]
    data = {"x": x, "rank": [int(r) for r in rows["Rank"]],
            "stage": [int(s) for s in rows["_stage"]]}
    for key, col in STACK:
        data[key] = list(_num(rows, col) / 1000.0)  # µs -> ms
    for col, key in METRICS.items():
        data[key] = list(_num(rows, col) / 1000.0)
    comp, ovl = _num(rows, "Computing") / 1000.0, _num(rows, "Overlapped") / 1000.0
    data["ovl_bottom"], data["ovl_top"] = list(comp - ovl), list(comp)
    total = sum((_num(rows, c) for _, c in STACK), start=pd.Series(0.0, index=rows.index)) / 1000
    data["top"] = list(total)
    data["flag"] = ["; ".join(flags.get(int(r), [])) for r in rows["Rank"]]
    data["flagged"] = [t * 1.04 if f else None for t, f in zip(data["top"], data["flag"])]
    return data


_TIPS = [("rank", "rank", "", 0), ("pipeline stage", "stage", "", 0)] + [
    (col, key, "ms", 3) for col, key in METRICS.items()
    if col not in ("Communication", "Bubble")] + [("named by verdicts", "flag", "", 0)]


def bars(rows: pd.DataFrame, stage_of: dict[int, int], flags: dict, title: str,
         name: str, on_rank=None) -> Chart:
    """Stacked bars per rank (ms per step); a click on a bar selects the rank in the
    Operators section when ``on_rank``."""
    staged = len(set(stage_of.values())) > 1
    data = _source_data(rows, stage_of, flags, staged)
    series = [{"type": "bar", "y": k, "label": c, "color": COLORS[c], "stack": "step",
               "width": 0.8} for k, c in STACK]
    if any(v for v in data["overlapped_us"]):
        series.append({"type": "bar", "y": "ovl_top", "base": "ovl_bottom", "width": 0.3,
                       "label": "Overlapped (inside Computing)", "color": COLORS["Overlapped"],
                       "stack": "ovl"})
    if any(f for f in data["flag"]):
        series.append({"type": "scatter", "y": "flagged", "symbol": "triangle", "size": 12,
                       "label": "named by a verdict", "color": FLAG_COLOR})
    return Chart(name, data, series, title=title, y_label="time per step (ms)",
                 x_label="pipeline stage · rank" if staged else "rank", tips=_TIPS,
                 select=bool(on_rank), height=340)


def heatmaps(rows: pd.DataFrame, device_of: dict[int, int], flags: dict, name: str) -> Tabs:
    """Tabs of rank heatmaps by node (x: device in node, y: node), one per metric (ms)."""
    ranks = [int(r) for r in rows["Rank"]]
    node, per, how = node_layout(sorted(set(ranks)), device_of)
    panels = []
    nodes = sorted(set(node.values()))
    for i, col in enumerate(("Computing", "Communication(Not Overlapped)", "Free", "Preparing")):
        data = {"node": [node[r] for r in ranks], "slot": [r - node[r] * per for r in ranks],
                "rank": ranks, "v": list(_num(rows, col) / 1000.0),
                "flag": ["; ".join(flags.get(r, [])) for r in ranks]}
        c = Chart(f"{name}_{i}", data, title=f"{col} per rank (ms per step) by node: {how}",
                  x_label="device in node", y_label="node",
                  height=min(900, 140 + 14 * len(nodes)),
                  tips=[("rank", "rank", "", 0), (col, "v", "ms per step", 3),
                        ("named by verdicts", "flag", "", 0)],
                  heat={"x": "slot", "y": "node", "v": "v", "xcats": list(range(per)),
                        "ycats": nodes, "unit": "ms", "flag": "flag"})
        panels.append((col, [c]))
    return Tabs(name, panels)


def stage_bars(stage_rows: pd.DataFrame, name: str) -> Chart:
    """Stacked bars per pipeline stage from the CSV's stage rows (the max over the stage's
    ranks, as msprof-analyze writes them)."""
    idx = [str(i) for i in stage_rows["Index"]]
    rk = [[int(r) for r in i.strip("()").split(",") if r.strip().isdigit()] for i in idx]
    x = [f"stage {i} (ranks {rank_ranges(r, 3)})" for i, r in enumerate(rk)]
    data = {"x": x, "idx": [rank_ranges(r, 8) for r in rk]}
    for key, col in STACK:
        data[key] = list(_num(stage_rows, col) / 1000.0)
    return Chart(name, data, [{"type": "bar", "y": k, "label": c, "color": COLORS[c],
                               "stack": "step", "width": 0.6} for k, c in STACK],
                 title="Per stage row of the CSV (each value: the max over the row's ranks)",
                 y_label="time per step (ms)", x_label="stage row (ranks)", height=300,
                 tips=[("ranks", "idx", "", 0)] + [(c, k, "ms", 3) for k, c in STACK])


def numbers_table(st: pd.DataFrame) -> Table:
    cols = list(st.columns)
    rows, keys = [], []
    for rec in st.head(MAX_TABLE_ROWS).itertuples(index=False):
        rec = list(rec)
        rows.append([cell(v) for v in rec])
        keys.append({"type": cell(rec[1]), "index": cell(rec[2]), "step": cell(rec[0])})
    n = st.attrs.get("rows", len(st))  # the file's rows: the page reads only the first steps
    note = (f"first {MAX_TABLE_ROWS} of {n} rows; all in cluster_step_trace_time.csv"
            if n > MAX_TABLE_ROWS else "")
    return Table(cols, rows, source="cluster_step_trace_time.csv", keys=keys, note=note,
                 title="Numbers: cluster_step_trace_time.csv (µs)", css="numbers steps",
                 defs=DEFINITIONS)


def _tab_labels(steps: list[str]) -> list[str]:
    return [f"step {s}" if s else "no step number" for s in steps]


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
    labels = step_text(rows["Step"])
    steps = list(dict.fromkeys(labels))
    shown = steps[:MAX_STEPS]
    n_steps = d.step_trace.attrs.get("steps", len(steps))  # the file's, not only those read
    n_ranks = rows["Rank"].nunique()
    sec.intro = (f"Where each rank's step time goes, from cluster_step_trace_time.csv "
                 f"({n_ranks} ranks, {n_steps} step{'s' if n_steps != 1 else ''}"
                 + (f", the first {MAX_STEPS} shown" if n_steps > MAX_STEPS else "")
                 + "). Stage = Computing + Communication(Not Overlapped) + Free; Overlapped is "
                   "communication hidden under Computing; Preparing comes before the step. "
                   "Click a bar to select that rank in the Operators section; hover the "
                   "table's column names for their definitions.")
    on_rank = ctx.get("on_rank")
    if n_ranks <= MAX_BARS:
        charts = [bars(rows[labels == s], stage_of, flags,
                       f"Step {s}: time per rank" if s else "Time per rank (no step number)",
                       f"steps_bars_{i}", on_rank)
                  for i, s in enumerate(shown)]
        sec.chart(tabs_or_one(charts, _tab_labels(shown), "steps_bars"))
    else:
        st_rows = d.step_trace[d.step_trace["Type"].astype(str) == "stage"]
        if len(st_rows):
            st_text = step_text(st_rows["Step"])
            charts = [stage_bars(st_rows[st_text == s], f"steps_stage_{i}")
                      for i, s in enumerate(shown)]
            sec.chart(tabs_or_one(charts, _tab_labels(shown), "steps_stages"))
        device_of = {int(r): dev for r, dev in zip(source_column(d.summary, "rank"),
                                                   source_column(d.summary, "device_id"))
                     if r is not None}
        charts = [heatmaps(rows[labels == s], device_of, flags,
                           f"steps_heat_{i}") for i, s in enumerate(shown)]
        sec.chart(tabs_or_one(charts, _tab_labels(shown), "steps_heatmaps"),
                  caption="Every rank as one cell; hover for its value.")
        tops = []
        n_stages = max(1, len(set(stage_of.values())))
        per = max(1, TOP_RANKS // n_stages)
        for i, s in enumerate(shown):
            r = rows[labels == s]
            r = r.assign(_st=[stage_of.get(int(x), 0) for x in r["Rank"]],
                         _c=_num(r, "Computing"))
            keep = [x for _, g in r.groupby("_st")
                    for x in g.sort_values("_c", ascending=False)["Rank"].head(per)]
            what = f"per pipeline stage the {per}" if n_stages > 1 else f"the {per}"
            tops.append(bars(r[r["Rank"].isin(keep)], stage_of, flags,
                             f"{f'Step {s}' if s else 'No step number'}: {what} ranks with the "
                             f"longest Computing "
                             f"(of {n_ranks} ranks)", f"steps_top_{i}", on_rank))
        sec.chart(tabs_or_one(tops, _tab_labels(shown), "steps_top"))
    sec.table(numbers_table(d.step_trace))
    return sec
