"""Operators section: op-type share per pipeline stage and per rank (op_statistics.csv), and the
top kernels (top_kernels.csv). One rank selector drives the per-rank chart and the kernels
table; tapping a rank in the step breakdown or in the heatmap here selects it too."""

from __future__ import annotations

import pandas as pd

from ascendprof.report.html.common import (MAX_BARS, MAX_TABLE_ROWS, PALETTE, Section, Table, cell,
                                           figure, legend_outside, ranks_text, source)

#: op types drawn (by cluster total time); the others are summed as "other" in the share chart
TOP_TYPES = 12
CLUSTER = "cluster"


def _num(df, col):
    return pd.to_numeric(df[col], errors="coerce").fillna(0.0)


class Operators:
    """Builds the section; :meth:`on_rank` gives other charts the callback that selects a rank
    here (None when there is nothing to select)."""

    def __init__(self, d):
        self.d = d
        ops = d.op_stats
        self.ops = ops if ops is not None and len(ops) and "Rank" in ops else None
        self.select = None
        if self.ops is not None:
            from bokeh.models import Select

            ranks = sorted({int(r) for r in self.ops["Rank"] if str(r).isdigit()})
            self.ranks = ranks
            opts = [CLUSTER] + [str(r) for r in ranks]
            self.select = Select(title="Rank (tap a rank in a chart to choose it):",
                                 value=CLUSTER, options=opts, width=260, name="ops_rank")

    def on_rank(self, src):
        """CustomJS for ``src.selected`` 'indices' changes: the tapped row's ``rank`` becomes
        the selected rank (when it has op statistics)."""
        if self.select is None:
            return None
        from bokeh.models import CustomJS

        return CustomJS(args={"sel": self.select, "src": src}, code="""
            const i = cb_obj.indices;
            if (i.length) {
                const r = String(src.data.rank[i[0]]);
                if (sel.options.includes(r)) { sel.value = r; }
            }""")

    def top_types(self) -> list[str]:
        ops = self.ops
        cl = ops[ops["Rank"] == CLUSTER]
        base = cl if len(cl) else ops
        tot = base.groupby("OP Type")["Total Time(us)"].sum().sort_values(ascending=False)
        return list(tot.index[:TOP_TYPES])

    def share_by_stage(self, types: list[str]):
        """Horizontal stacked bars: per pipeline stage the share (%) of each op type in the
        stage's op time (op_statistics.csv rank rows summed over the stage's ranks)."""
        from bokeh.models import FactorRange, HoverTool

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
            labels.append(f"stage {st} (ranks {ranks_text(ranks, 6)})")
            by = g.groupby("_type")["Total Time(us)"].sum()
            for c in cats:
                data.setdefault(c, []).append(100.0 * float(by.get(c, 0.0)) / total
                                              if total else 0.0)
        src = source({"y": labels, **{f"c{i}": data[c] for i, c in enumerate(cats)}})
        f = figure(y_range=FactorRange(*reversed(labels)), height=120 + 50 * len(labels),
                   name="ops_stage_share", x_axis_label="share of the stage's op time (%)",
                   title="Op-type share per pipeline stage (op_statistics.csv, ranks with "
                         "kernels)", tools="pan,wheel_zoom,reset,save")
        rs = f.hbar_stack([f"c{i}" for i in range(len(cats))], y="y", height=0.6, source=src,
                          color=[PALETTE[i % len(PALETTE)] for i in range(len(cats))],
                          line_color="white")
        for r, c, i in zip(rs, cats, range(len(cats))):
            f.add_tools(HoverTool(renderers=[r], tooltips=[("stage", "@y"),
                                                           (c, f"@c{i}{{0.00}} %")]))
        f.x_range.start, f.x_range.end = 0, 100
        f.ygrid.grid_line_color = None
        legend_outside(f, [(c, [r]) for c, r in zip(cats, rs)], location="below")
        f.legend[0].orientation = "horizontal"
        f.legend[0].ncols = 7 if len(cats) > 7 else len(cats)
        f.height += 30 * ((len(cats) + 6) // 7)
        return f

    def per_rank(self, types: list[str]):
        """Horizontal bars of one rank's (or the cluster's) op types, chosen by the selector."""
        from bokeh.models import CDSView, FactorRange, GroupFilter, HoverTool

        ops = self.ops[self.ops["OP Type"].isin(types)]
        # one bar per op type: its rows on several Accelerator Cores summed (core in the hover)
        core = ops["Accelerator Core"] if "Accelerator Core" in ops else pd.Series("", ops.index)
        ops = ops.assign(**{"Accelerator Core": core.fillna("").astype(str)})
        ops = ops.groupby(["Rank", "OP Type"], as_index=False, sort=False).agg(
            {"Accelerator Core": "+".join, "Total Time(us)": "sum", "Ratio(%)": "sum",
             "Count": "sum"})
        src = source({
            "rank": [str(r) for r in ops["Rank"]], "type": list(ops["OP Type"]),
            "core": list(ops["Accelerator Core"]),
            "ms": list(_num(ops, "Total Time(us)") / 1000),
            "us": list(_num(ops, "Total Time(us)")), "pct": list(_num(ops, "Ratio(%)")),
            "count": list(_num(ops, "Count"))})
        gf = GroupFilter(column_name="rank", group=CLUSTER)
        f = figure(y_range=FactorRange(*reversed(list(dict.fromkeys(types)))),
                   height=130 + 24 * len(types), name="ops_rank_bars",
                   x_axis_label="total time in the capture (ms)", y_axis_label="op type",
                   title="Op types of the selected rank (op_statistics.csv)",
                   tools="pan,wheel_zoom,reset,save")
        r = f.hbar(y="type", right="ms", height=0.6, source=src, view=CDSView(filter=gf),
                   color=PALETTE[0])
        f.add_tools(HoverTool(renderers=[r], tooltips=[
            ("rank", "@rank"), ("op type", "@type (@core)"), ("Total Time", "@us{0,0.00} µs"),
            ("Ratio", "@pct{0.000} %"), ("Count", "@count{0}")]))
        f.x_range.start = 0
        f.ygrid.grid_line_color = None
        self.select.js_link("value", gf, "group")
        return f

    def rank_heatmap(self, types: list[str]):
        """Ratio(%) of each top op type on every rank (x: rank, y: op type); tap selects."""
        from bokeh.models import (BasicTicker, ColorBar, FactorRange,
                                  HoverTool, LinearColorMapper)
        from bokeh.palettes import Blues256

        ops = self.ops[(self.ops["Rank"] != CLUSTER) & self.ops["OP Type"].isin(types)]
        ops = ops.groupby(["Rank", "OP Type"], as_index=False)[["Total Time(us)",
                                                                "Ratio(%)"]].sum()
        xs = [str(r) for r in self.ranks]
        many = len(xs) > MAX_BARS  # a numeric rank axis: one label per rank would be a smear
        pct = list(_num(ops, "Ratio(%)"))
        src = source({"rank": [int(r) if many else str(r) for r in ops["Rank"]],
                      "type": list(ops["OP Type"]), "pct": pct,
                      "us": list(_num(ops, "Total Time(us)"))})
        cmap = LinearColorMapper(palette=list(reversed(Blues256)), low=0,
                                 high=max([1.0] + pct))
        f = figure(x_range=(min(self.ranks) - 0.5, max(self.ranks) + 0.5) if many
                   else FactorRange(*xs), y_range=FactorRange(*reversed(types)),
                   height=130 + 24 * len(types), name="ops_rank_heatmap",
                   title="Ratio(%) of each op type per rank (op_statistics.csv); tap a rank",
                   x_axis_label="rank", y_axis_label="op type",
                   tools="hover,tap,pan,wheel_zoom,reset,save")
        f.rect(x="rank", y="type", width=1, height=1, source=src, line_color="white",
               fill_color={"field": "pct", "transform": cmap})
        f.select_one(HoverTool).tooltips = [("rank", "@rank"), ("op type", "@type"),
                                            ("Ratio", "@pct{0.000} %"),
                                            ("Total Time", "@us{0,0.00} µs")]
        f.add_layout(ColorBar(color_mapper=cmap, ticker=BasicTicker(), title="%", width=10),
                     "right")
        if not many:
            f.xaxis.major_label_orientation = 0 if len(xs) <= 32 else 1.2
        f.grid.grid_line_color = None
        src.selected.js_on_change("indices", self.on_rank(src))
        return f

    def kernels_table(self, tk: pd.DataFrame):
        """top_kernels.csv as a sortable table; rows of the selected rank only (its Ranks)."""
        from bokeh.models import (CDSView, CustomJS, CustomJSFilter,
                                  DataTable, NumberFormatter, TableColumn)

        tk = tk.head(MAX_TABLE_ROWS)
        cols = [c for c in tk.columns]
        data = {f"c{i}": (list(tk[c]) if c not in ("Name", "Input Shapes", "OP Type",
                                                   "Accelerator Core", "Ranks")
                          else [str(v) for v in tk[c]]) for i, c in enumerate(cols)}
        ranks_key = f"c{cols.index('Ranks')}" if "Ranks" in cols else None
        src = source(data)
        columns = []
        for i, c in enumerate(cols):
            kw_col = {"width": {"Name": 300, "Input Shapes": 180, "OP Type": 160,
                                "Accelerator Core": 130, "Count": 60, "Ranks": 70}.get(c, 100)}
            if c not in ("Name", "Input Shapes", "OP Type", "Accelerator Core", "Ranks"):
                kw_col["formatter"] = NumberFormatter(format="0,0.000" if "Time" in c else "0")
            columns.append(TableColumn(field=f"c{i}", title=c, **kw_col))
        kw = {}
        if ranks_key and self.select is not None:
            filt = CustomJSFilter(args={"sel": self.select, "key": ranks_key}, code="""
                // Ranks: "0,2" or ranges "128-255" (top_kernels.csv)
                const r = sel.value, n = Number(sel.value);
                const has = (text) => String(text).split(',').some((p) => {
                    const [a, b] = p.split('-');
                    return b === undefined ? a.trim() === r : n >= Number(a) && n <= Number(b);
                });
                return source.data[key].map((x) => r === 'cluster' || has(x));""")
            kw["view"] = CDSView(filter=filt)
            self.select.js_on_change("value", CustomJS(args={"src": src},
                                                       code="src.change.emit();"))
        return DataTable(source=src, columns=columns, height=min(600, 30 + 26 * len(tk)),
                         row_height=25,
                         sizing_mode="stretch_width", name="ops_kernels", index_position=None,
                         reorderable=False,
                         **kw)

    def build(self, ctx) -> Section:
        from bokeh.layouts import column

        sec = Section("operators", "Operators")
        d = self.d
        tk = d.top_kernels
        if self.ops is None and (tk is None or not len(tk)):
            nw = (d.summary or {}).get("not_written") or {}
            sec.missing = (nw.get("op_statistics.csv") or nw.get("top_kernels.csv")
                           or "no op_statistics.csv or top_kernels.csv in this output")
            return sec
        sec.intro = ("Which op types and kernels take the device time. Choose a rank (or tap "
                     "one in the step breakdown or the heatmap below) to see its op types and "
                     "its kernels.")
        if self.ops is not None:
            types = self.top_types()
            sec.chart(self.share_by_stage(types))
            sec.chart(column(self.select, self.per_rank(types), sizing_mode="stretch_width",
                             name="ops_rank"))
            if len(self.ranks) > 1:
                sec.chart(self.rank_heatmap(types))
        else:
            sec.text("Not in this analysis: " + ((d.summary or {}).get("not_written") or {}).get(
                "op_statistics.csv", "no op_statistics.csv"))
        if tk is not None and len(tk):
            sec.markup("<h3>Top kernels (top_kernels.csv, cluster-wide; the selected rank's "
                       "only)</h3>")
            sec.chart(self.kernels_table(tk))
            rows = [[cell(v) for v in r] for r in tk.head(MAX_TABLE_ROWS).itertuples(index=False)]
            sec.table(Table(list(tk.columns), rows, source="top_kernels.csv",
                            title="Numbers: top_kernels.csv", css="numbers kernels"))
        if self.ops is not None:
            rows = [[cell(v) for v in r]
                    for r in self.ops.head(MAX_TABLE_ROWS).itertuples(index=False)]
            sec.table(Table(list(self.ops.columns), rows, source="op_statistics.csv",
                            title="Numbers: op_statistics.csv", css="numbers opstats",
                            note=(f"first {MAX_TABLE_ROWS} of {len(self.ops)} rows; all in "
                                  f"op_statistics.csv" if len(self.ops) > MAX_TABLE_ROWS
                                  else "")))
        return sec
