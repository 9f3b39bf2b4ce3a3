"""diff.html: the two-run (or two-rank) comparison of ``ascendprof diff`` as one self-contained
page, drawn from the same tables ``diff -o`` writes as CSV (compare.diff.DiffResult.tables():
steps, op_types, kernels, communication, bandwidth; µs per step and per rank, GB/s)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from ascendprof.report.html import ours
from ascendprof.report.html.common import (cell, Chart, COLORS, MAX_TABLE_ROWS, PALETTE, Section,
                                           Table, tabs_or_one)
from ascendprof.report.html.page import render
from ascendprof.sysio.atomic import write_report

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


def steps_chart(steps: pd.DataFrame, scope: str, name: str) -> Chart:
    """A and B side by side per step_trace_time metric (ms per step) of one scope."""
    s = steps[steps["scope"] == scope]
    s = s[s["metric"].isin(["Computing", "Communication(Not Overlapped)", "Overlapped", "Free",
                            "Stage", "Bubble", "Preparing"])]
    data = {"x": list(s["metric"]), "a": list(_num(s, "a_us") / 1000),
            "b": list(_num(s, "b_us") / 1000), "delta": list(_num(s, "delta_us") / 1000)}
    return Chart(name, data, [
        {"type": "bar", "y": "a", "label": "A", "color": _A, "width": 0.35, "gap": "10%"},
        {"type": "bar", "y": "b", "label": "B", "color": _B, "width": 0.35, "gap": "10%"}],
        title=f"{scope}: step breakdown, A vs B (ms per step)", height=340,
        y_label="time per step (ms)", x_label="metric",
        tips=[("metric", "x", "", 0), ("A", "a", "ms", 3), ("B", "b", "ms", 3),
              ("B − A", "delta", "ms", 3)])


def delta_bars(df: pd.DataFrame, label: pd.Series, title: str, name: str,
               xlabel: str) -> Chart | None:
    """Horizontal bars of B − A (ms per step), red where B is slower, green where faster;
    only rows that changed by at least 0.05 ms (a 0.0 ms change is no change)."""
    keep = (_num(df, "delta_us").abs() >= 50).to_numpy()
    df, label = df[keep].head(TOP), label[keep].head(TOP)
    if not len(df):
        return None
    d = list(_num(df, "delta_us") / 1000)
    data = {"y": [f"{i + 1}. {t}"[:70] for i, t in enumerate(label)], "d": d,
            "a": list(_num(df, "a_us") / 1000), "b": list(_num(df, "b_us") / 1000),
            "color": [_WORSE if v > 0 else _BETTER for v in d]}
    return Chart(name, data, [{"type": "bar", "y": "d", "color_col": "color", "width": 0.6}],
                 x="y", horizontal=True, title=title, x_label=xlabel,
                 height=110 + 26 * len(data["y"]),
                 tips=[("", "y", "", 0), ("A", "a", "ms per step", 3),
                       ("B", "b", "ms per step", 3), ("B − A", "d", "ms per step", 3)])


def comm_chart(comm: pd.DataFrame, name: str) -> Chart:
    """Per group: transit / wait / idle of A and B (ms per step), one bar per group and run."""
    comm = comm.head(TOP)
    groups = [(str(a) if isinstance(a, str) and a else str(b) if isinstance(b, str) and b
               else str(g)) for g, a, b in zip(comm["group"], comm["group_a"], comm["group_b"])]
    x, data = [], {"transit": [], "wait": [], "idle": []}
    for g, p, (_, row) in zip(groups, comm["presence"], comm.iterrows()):
        for side in ("a", "b"):
            x.append(f"{g} ({p}) {side.upper()}")
            for m in data:
                v = pd.to_numeric(row.get(f"{side}_{m}_us"), errors="coerce")
                data[m].append(0.0 if pd.isna(v) else float(v) / 1000)
    return Chart(name, {"x": x, **data}, [
        {"type": "bar", "y": m, "label": m.capitalize(), "color": COLORS[m.capitalize()],
         "stack": "c", "width": 0.7} for m in ("transit", "wait", "idle")],
        title="Communication per group: transit, wait and idle of A and B", height=360,
        y_label="time per step (ms)", x_label="group and run",
        tips=[("", "x", "", 0), ("Transit", "transit", "ms", 3), ("Wait", "wait", "ms", 3),
              ("Idle", "idle", "ms", 3)])


def bandwidth_chart(bw: pd.DataFrame, name: str) -> Chart:
    bw = bw.head(TOP * 2)
    x, a, b = [], [], []
    for _, r in bw.iterrows():
        g = r["group_a"] if isinstance(r["group_a"], str) and r["group_a"] else r["group_b"]
        x.append(f"{g} {r['transport']}")
        for side, out in (("a", a), ("b", b)):
            v = pd.to_numeric(r[f"{side}_gbps"], errors="coerce")
            out.append(0.0 if pd.isna(v) else float(v))
    return Chart(name, {"x": x, "a": a, "b": b}, [
        {"type": "bar", "y": "a", "label": "A", "color": _A, "width": 0.35, "gap": "10%"},
        {"type": "bar", "y": "b", "label": "B", "color": _B, "width": 0.35, "gap": "10%"}],
        title="Bandwidth per group and transport, A vs B", height=340,
        y_label="bandwidth (GB/s)", x_label="group and transport",
        tips=[("", "x", "", 0), ("A", "a", "GB/s", 3), ("B", "b", "GB/s", 3)])


def build_sections(result) -> list[Section]:
    t = result.tables()
    out = []
    s = Section("steps", "Step breakdown")
    steps = t["steps"]
    if len(steps):
        scopes = list(dict.fromkeys(steps["scope"]))[:16]
        charts = [steps_chart(steps, sc, f"diff_steps_{i}") for i, sc in enumerate(scopes)]
        s.intro = "A (grey) and B (blue) per step; hover for the values and the difference (ms)."
        s.chart(tabs_or_one(charts, scopes, "diff_steps"))
        s.table(_table(steps, "steps"))
    else:
        s.missing = "neither side has a step breakdown"
    out.append(s)
    s = Section("operators", "Op types and kernels")
    ops, ker = t["op_types"], t["kernels"]
    if len(ops):
        lab = ops["op_type"].astype(str) + " (" + ops["accelerator_core"].astype(str) + ", " \
            + ops["presence"].astype(str) + ")"
        c = delta_bars(ops, lab, "Op types: B − A per step (the largest changes; red = B "
                                 "slower)", "diff_ops", "B − A (ms per step)")
        if c is not None:
            s.chart(c)
        else:
            s.text("No op type changed by 0.05 ms per step or more (the table has every "
                   "change).")
    if len(ker):
        name = ker["name_a"].where(ker["name_a"].astype(str).ne("nan") & ker["name_a"].notna(),
                                   ker["name_b"])
        c = delta_bars(ker, name.astype(str) + " [" + ker["match"].astype(str) + "]",
                       "Kernels: B − A per step (the largest changes)", "diff_kernels",
                       "B − A (ms per step)")
        if c is not None:
            s.chart(c)
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
    sections = build_sections(result)
    html = render(sections, f"ascendprof diff: {result.a} vs {result.b}", "diff.html.j2",
                  a=result.a, b=result.b, explanation=result.explanation)
    return write_report(Path(dest), html.encode("utf-8"), ours=ours, inputs=inputs)
