"""Operators section: op-type share per pipeline stage and per rank (op_statistics.csv), and the
top kernels (top_kernels.csv). One rank selector drives the per-rank chart and the kernels
table; tapping a rank in the step breakdown or in the heatmap here selects it too."""

from __future__ import annotations

import pandas as pd

from ascendprof.report.html.common import (MAX_TABLE_ROWS, PALETTE, Chart, RankPick, Section,
                                           Table, cell)
from ascendprof.model.ranks import rank_ranges

#: op types drawn (by cluster total time); the others are summed as "other" in the share chart
TOP_TYPES = 12
CLUSTER = "cluster"


def _num(df, col):
    return pd.to_numeric(df[col], errors="coerce").fillna(0.0)


class Operators:
    """Builds the section; ``select`` is True when there are ranks to choose (other charts
    then select a rank here with a click)."""

    def __init__(self, d):
        self.d = d
        ops = d.op_stats
        self.ops = ops if ops is not None and len(ops) and "Rank" in ops else None
        self.select = None
        if self.ops is not None:
            self.ranks = sorted({int(r) for r in self.ops["Rank"] if str(r).isdigit()})
            self.select = [CLUSTER] + [str(r) for r in self.ranks]

    def top_types(self) -> list[str]:
        ops = self.ops
        cl = ops[ops["Rank"] == CLUSTER]
        base = cl if len(cl) else ops
        tot = base.groupby("OP Type")["Total Time(us)"].sum().sort_values(ascending=False)
        return list(tot.index[:TOP_TYPES])

    def share_by_stage(self, types: list[str]) -> Chart:
        """Horizontal stacked bars: per pipeline stage the share (%) of each op type in the
        stage's op time (op_statistics.csv rank rows summed over the stage's ranks)."""
        ops = self.ops[self.ops["Rank"] != CLUSTER]
        stage_of = self.d.stage_of()
        ops = ops.assign(_rank=pd.to_numeric(ops["Rank"], errors="coerce"))
        ops = ops.assign(_stage=[stage_of.get(int(r), 0) if pd.notna(r) else 0
                                 for r in ops["_rank"]])
        ops = ops.assign(_type=[t if t in types else "other" for t in ops["OP Type"]])
        labels, data = [], {}
        cats = types + (["other"] if (ops["_type"] == "other").any() else [])
        for st, g in ops.groupby("_stage"):
            total = _num(g, "Total Time(us)").sum()
            ranks = sorted(set(int(r) for r in g["_rank"].dropna()))
            labels.append(f"stage {st} (ranks {rank_ranges(ranks, 4)})")
            by = g.groupby("_type")["Total Time(us)"].sum()
            for c in cats:
                data.setdefault(c, []).append(100.0 * float(by.get(c, 0.0)) / total
                                              if total else 0.0)
        cols = {f"c{i}": data[c] for i, c in enumerate(cats)}
        series = [{"type": "bar", "y": f"c{i}", "label": c, "stack": "share",
                   "color": PALETTE[i % len(PALETTE)], "width": 0.6}
                  for i, c in enumerate(cats)]
        return Chart("ops_stage_share", {"y": labels, **cols}, series, x="y", horizontal=True,
                     height=130 + 50 * len(labels) + 24 * ((len(cats) + 6) // 7),
                     x_label="share of the stage's op time (%)", y_max=100,
                     title="Op-type share per pipeline stage (op_statistics.csv, ranks with "
                           "kernels)",
                     tips=[("stage", "y", "", 0)] + [(c, f"c{i}", "%", 2)
                                                     for i, c in enumerate(cats)])

    def per_rank(self, types: list[str]) -> Chart:
        """Horizontal bars of one rank's (or the cluster's) op types, chosen by the selector."""
        ops = self.ops[self.ops["OP Type"].isin(types)]
        # one bar per op type: its rows on several Accelerator Cores summed (core in the hover)
        core = ops["Accelerator Core"] if "Accelerator Core" in ops else pd.Series("", ops.index)
        ops = ops.assign(**{"Accelerator Core": core.fillna("").astype(str)})
        ops = ops.groupby(["Rank", "OP Type"], as_index=False, sort=False).agg(
            {"Accelerator Core": "+".join, "Total Time(us)": "sum", "Ratio(%)": "sum",
             "Count": "sum"})
        order = {t: i for i, t in enumerate(types)}
        ops = ops.assign(_o=[order[t] for t in ops["OP Type"]]).sort_values(
            ["Rank", "_o"], kind="stable")
        data = {"rank": [str(r) for r in ops["Rank"]], "type": list(ops["OP Type"]),
                "core": list(ops["Accelerator Core"]),
                "ms": list(_num(ops, "Total Time(us)") / 1000),
                "pct": list(_num(ops, "Ratio(%)")), "count": list(_num(ops, "Count"))}
        return Chart("ops_rank_bars", data, [{"type": "bar", "y": "ms", "color": PALETTE[0],
                                              "width": 0.6}],
                     x="type", horizontal=True, filter="rank", height=130 + 24 * len(types),
                     x_label="total time in the capture (ms)",
                     title="Op types of the selected rank (op_statistics.csv)",
                     tips=[("rank", "rank", "", 0), ("op type", "type", "", 0),
                           ("Accelerator Core", "core", "", 0), ("Total Time", "ms", "ms", 3),
                           ("Ratio: share of the rank's op time", "pct", "%", 3),
                           ("Count", "count", "", 0)])

    def rank_heatmap(self, types: list[str], bars: Chart) -> Chart:
        """Ratio(%) of each top op type on every rank (x: rank, y: op type); a click selects
        the rank. Draws the rank rows of ``bars`` (the per-rank chart's data, not copied)."""
        pct = [p for r, p in zip(bars.data["rank"], bars.data["pct"]) if r != CLUSTER]
        return Chart("ops_rank_heatmap", {}, height=150 + 24 * len(types), select=True,
                     data_ref=bars.name,
                     title="Ratio(%) of each op type per rank (op_statistics.csv); click a rank",
                     x_label="rank", y_label="op type",
                     tips=[("rank", "rank", "", 0), ("op type", "type", "", 0),
                           ("Ratio", "pct", "%", 3), ("Total Time", "ms", "ms", 3)],
                     heat={"x": "rank", "y": "type", "v": "pct", "xcats": self.ranks,
                           "ycats": types, "unit": "%", "min": 0, "max": max([1.0] + pct),
                           "palette": "blues", "precision": 1})

    def kernels_table(self, tk: pd.DataFrame) -> Table:
        """top_kernels.csv; the rows of the selected rank only (its Ranks)."""
        tk = tk.head(MAX_TABLE_ROWS)
        rows = [[cell(v) for v in r] for r in tk.itertuples(index=False)]
        keys = ([{"ranks": str(v)} for v in tk["Ranks"]] if "Ranks" in tk else [])
        return Table(list(tk.columns), rows, source="top_kernels.csv", keys=keys, open=True,
                     live=bool(keys), css="numbers kernels",
                     title="Top kernels (top_kernels.csv, cluster-wide; the selected rank's "
                           "only)")

    def build(self, ctx) -> Section:
        sec = Section("operators", "Operators")
        d = self.d
        tk = d.top_kernels
        if self.ops is None and (tk is None or not len(tk)):
            nw = (d.summary or {}).get("not_written") or {}
            sec.missing = (nw.get("op_statistics.csv") or nw.get("top_kernels.csv")
                           or "no op_statistics.csv or top_kernels.csv in this output")
            return sec
        sec.intro = ("Which op types and kernels take the device time. Choose a rank (or click "
                     "one in the step breakdown or the heatmap below) to see its op types and "
                     "its kernels.")
        if self.ops is not None:
            types = self.top_types()
            sec.chart(self.share_by_stage(types))
            bars = self.per_rank(types)
            sec.chart(RankPick("ops_rank", self.select, bars))
            if len(self.ranks) > 1:
                sec.chart(self.rank_heatmap(types, bars))
        else:
            sec.text("Not in this analysis: " + ((d.summary or {}).get("not_written") or {}).get(
                "op_statistics.csv", "no op_statistics.csv"))
        if tk is not None and len(tk):
            sec.table(self.kernels_table(tk))
        if self.ops is not None:
            rows = [[cell(v) for v in r]
                    for r in self.ops.head(MAX_TABLE_ROWS).itertuples(index=False)]
            sec.table(Table(list(self.ops.columns), rows, source="op_statistics.csv",
                            title="Numbers: op_statistics.csv", css="numbers opstats",
                            note=(f"first {MAX_TABLE_ROWS} of {len(self.ops)} rows; all in "
                                  f"op_statistics.csv" if len(self.ops) > MAX_TABLE_ROWS
                                  else "")))
        return sec
