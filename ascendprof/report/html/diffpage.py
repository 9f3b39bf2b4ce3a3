"""diff.html: the two-run (or two-rank) comparison of ``ascendprof diff`` as one self-contained
page, drawn from the same tables ``diff -o`` writes as CSV (compare.diff.DiffResult.tables():
steps, op_types, kernels, communication, bandwidth; µs per step and per rank, GB/s)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from ascendprof.report.html.common import (COLORS, MAX_TABLE_ROWS, PALETTE, Section, Table,
                                           cell, figure, source)
from ascendprof.report.html.page import render

TOP = 15
_A, _B = PALETTE[9], PALETTE[0]
_WORSE, _BETTER = "#d62728", "#2ca02c"


def _num(df, col):
    return pd.to_numeric(df[col], errors="coerce").fillna(0.0)


def _table(df: pd.DataFrame, name: str) -> Table:
    rows = [[cell(v) for v in r] for r in df.head(MAX_TABLE_ROWS).itertuples(index=False)]
    return Table(list(df.columns), rows, source=f"{name}.csv", title=f"Numbers: {name}.csv",
                 css=f"numbers diff-{name}",
                 note=(f"first {MAX_TABLE_ROWS} of {len(df)} rows (diff -o writes them all)"
                       if len(df) > MAX_TABLE_ROWS else ""))


def steps_chart(steps: pd.DataFrame, scope: str, name: str):
    """A and B side by side per step_trace_time metric (ms per step) of one scope."""
    from bokeh.models import FactorRange, HoverTool

    s = steps[steps["scope"] == scope]
    s = s[s["metric"].isin(["Computing", "Communication(Not Overlapped)", "Overlapped", "Free",
                            "Stage", "Bubble", "Preparing"])]
    metrics = list(s["metric"])
    x = [(m, side) for m in metrics for side in ("A", "B")]
    vals = [v for a, b in zip(_num(s, "a_us"), _num(s, "b_us")) for v in (a / 1000, b / 1000)]
    deltas = [d for d in _num(s, "delta_us") for _ in (0, 1)]
    src = source({"x": x, "v": vals, "us": [v * 1000 for v in vals], "delta": deltas,
                            "color": [_A, _B] * len(metrics)})
    f = figure(x_range=FactorRange(*x), name=name, height=340,
               title=f"{scope}: step breakdown, A vs B (ms per step)",
               y_axis_label="time per step (ms)", x_axis_label="metric / run")
    r = f.vbar(x="x", top="v", width=0.8, source=src, color="color")
    f.add_tools(HoverTool(renderers=[r], tooltips=[("", "@x"), ("value", "@us{0,0.000} µs"),
                                                   ("B - A", "@delta{+0,0.000} µs")]))
    f.y_range.start = 0
    f.xgrid.grid_line_color = None
    f.xaxis.major_label_orientation = 0.9
    f.xaxis.group_label_orientation = 0
    f.xaxis.group_text_font_size = "11px"
    return f


def delta_bars(df: pd.DataFrame, label: pd.Series, title: str, name: str, xlabel: str):
    """Horizontal bars of B − A (µs per step), red where B is slower, green where faster."""
    from bokeh.models import FactorRange, HoverTool

    df = df.head(TOP)
    labels = [f"{i + 1}. {t}"[:70] for i, t in enumerate(label.head(TOP))]
    d = list(_num(df, "delta_us"))
    src = source({"y": labels, "d": d, "a": list(_num(df, "a_us")),
                            "b": list(_num(df, "b_us")),
                            "color": [_WORSE if v > 0 else _BETTER for v in d]})
    f = figure(y_range=FactorRange(*reversed(labels)), name=name,
               height=110 + 26 * len(labels), title=title, x_axis_label=xlabel,
               tools="pan,wheel_zoom,reset,save")
    r = f.hbar(y="y", right="d", left=0, height=0.6, source=src, color="color")
    f.add_tools(HoverTool(renderers=[r], tooltips=[("", "@y"), ("A", "@a{0,0.000} µs"),
                                                   ("B", "@b{0,0.000} µs"),
                                                   ("B - A", "@d{+0,0.000} µs")]))
    f.ygrid.grid_line_color = None
    return f


def comm_chart(comm: pd.DataFrame, name: str):
    """Per group: elapse / transit / wait of A and B (ms per step)."""
    from bokeh.models import FactorRange, HoverTool

    comm = comm.head(TOP)
    groups = [(str(a) if isinstance(a, str) and a else str(b) if isinstance(b, str) and b
               else str(g)) for g, a, b in zip(comm["group"], comm["group_a"], comm["group_b"])]
    labels = list(dict.fromkeys(f"{g} ({p})" for g, p in zip(groups, comm["presence"])))
    x, vals, colors = [], [], []
    for lab, (_, row) in zip(labels, comm.iterrows()):
        for m, c in (("transit", COLORS["Transit"]), ("wait", COLORS["Wait"]),
                     ("idle", COLORS["Idle"])):
            for side in ("a", "b"):
                x.append((lab, f"{m} {side.upper()}"))
                vals.append(float(pd.to_numeric(row.get(f"{side}_{m}_us"), errors="coerce")
                                  or 0.0))
                colors.append(c)
    src = source({"x": x, "v": [v / 1000 for v in vals], "us": vals,
                            "color": colors})
    f = figure(x_range=FactorRange(*x), name=name, height=360,
               title="Communication per group: transit, wait and idle of A and B",
               y_axis_label="time per step (ms)", x_axis_label="group / metric and run")
    r = f.vbar(x="x", top="v", width=0.8, source=src, color="color")
    f.add_tools(HoverTool(renderers=[r], tooltips=[("", "@x"), ("value", "@us{0,0.000} µs")]))
    f.y_range.start = 0
    f.xaxis.major_label_orientation = 1.1
    f.xgrid.grid_line_color = None
    return f


def bandwidth_chart(bw: pd.DataFrame, name: str):
    from bokeh.models import FactorRange, HoverTool

    bw = bw.head(TOP * 2)
    x, vals = [], []
    for _, r in bw.iterrows():
        g = r["group_a"] if isinstance(r["group_a"], str) and r["group_a"] else r["group_b"]
        for side in ("a", "b"):
            x.append((f"{g} {r['transport']}", side.upper()))
            v = pd.to_numeric(r[f"{side}_gbps"], errors="coerce")
            vals.append(0.0 if pd.isna(v) else float(v))
    src = source({"x": x, "v": vals, "color": [_A, _B] * (len(x) // 2)})
    f = figure(x_range=FactorRange(*dict.fromkeys(x)), name=name, height=320,
               title="Bandwidth per group and transport, A vs B",
               y_axis_label="bandwidth (GB/s)", x_axis_label="group transport / run")
    r = f.vbar(x="x", top="v", width=0.8, source=src, color="color")
    f.add_tools(HoverTool(renderers=[r], tooltips=[("", "@x"), ("bandwidth", "@v{0,0.000} GB/s")]))
    f.y_range.start = 0
    f.xgrid.grid_line_color = None
    return f


def build_sections(result) -> list[Section]:
    t = result.tables()
    out = []
    s = Section("steps", "Step breakdown")
    steps = t["steps"]
    if len(steps):
        from bokeh.models import TabPanel, Tabs

        scopes = list(dict.fromkeys(steps["scope"]))[:16]
        charts = [steps_chart(steps, sc, f"diff_steps_{i}") for i, sc in enumerate(scopes)]
        s.intro = "A (grey) and B (blue) per step; hover for µs and the difference."
        s.chart(charts[0] if len(charts) == 1 else Tabs(
            tabs=[TabPanel(child=c, title=sc) for c, sc in zip(charts, scopes)],
            name="diff_steps", sizing_mode="stretch_width"))
        s.table(_table(steps, "steps"))
    else:
        s.missing = "neither side has a step breakdown"
    out.append(s)
    s = Section("operators", "Op types and kernels")
    ops, ker = t["op_types"], t["kernels"]
    if len(ops):
        lab = ops["op_type"].astype(str) + " (" + ops["accelerator_core"].astype(str) + ", " \
            + ops["presence"].astype(str) + ")"
        s.chart(delta_bars(ops, lab, f"Op types: B − A per step (the {min(TOP, len(ops))} "
                                     f"largest changes; red = B slower)", "diff_ops",
                           "B − A (µs per step)"))
    if len(ker):
        name = ker["name_a"].where(ker["name_a"].astype(str).ne("nan") & ker["name_a"].notna(),
                                   ker["name_b"])
        s.chart(delta_bars(ker, name.astype(str) + " [" + ker["match"].astype(str) + "]",
                           f"Kernels: B − A per step (the {min(TOP, len(ker))} largest changes)",
                           "diff_kernels", "B − A (µs per step)"))
    if len(ops):
        s.table(_table(ops, "op_types"))
    if len(ker):
        s.table(_table(ker, "kernels"))
    if not len(ops) and not len(ker):
        s.missing = "no kernels on either side"
    out.append(s)
    s = Section("communication", "Communication")
    comm, bw = t["communication"], t["bandwidth"]
    if len(comm):
        s.chart(comm_chart(comm, "diff_comm"))
        s.table(_table(comm, "communication"))
    if len(bw):
        s.chart(bandwidth_chart(bw, "diff_bandwidth"))
        s.table(_table(bw, "bandwidth"))
    if not len(comm) and not len(bw):
        s.missing = "no communication data on either side"
    out.append(s)
    return out


def write_diff_page(result, dest: Path, inputs=()) -> Path:
    """Write diff.html for ``result`` (compare.diff.DiffResult) to ``dest`` under the rule of
    every report path (:func:`ascendprof.sysio.atomic.write_report`: never one of the
    ``inputs`` or inside one, never replacing a file ascendprof did not write, a symlink, FIFO
    or device). Raises OutputError (exit 2)."""
    from ascendprof.report.html import ours
    from ascendprof.sysio.atomic import write_report

    sections = build_sections(result)
    html = render(sections, f"ascendprof diff: {result.a} vs {result.b}", "diff.html.j2",
                  a=result.a, b=result.b, explanation=result.explanation)
    return write_report(Path(dest), html.encode("utf-8"), ours=ours, inputs=inputs)
