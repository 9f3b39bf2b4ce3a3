"""What every section of the HTML report shares: the section record, figure defaults, colours,
number formatting and the numbers tables shown under the charts.

Charts are Bokeh models; tables are plain HTML made by the Jinja2 template from
:class:`Table` (so their numbers are text in the page, which the browser test reads back).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

#: colours of the step_trace_time columns, the same in every chart
COLORS = {
    "Computing": "#4e79a7",
    "Communication(Not Overlapped)": "#e15759",
    "Overlapped": "#b07aa1",
    "Free": "#bab0ac",
    "Preparing": "#59a14f",
    "Bubble": "#f28e2b",
    "Transit": "#4e79a7",
    "Wait": "#e15759",
    "Idle": "#bab0ac",
}
#: categorical palette for op types / transports (Tableau 10, then greys)
PALETTE = ["#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1",
           "#ff9da7", "#9c755f", "#bab0ac", "#4d4d4d", "#d4a6c8", "#8cd17d", "#f1ce63",
           "#a0cbe8", "#79706e"]
FLAG_COLOR = "#d62728"

#: above this many ranks a chart aggregates (heatmaps per node, top-N ranks) instead of one
#: bar per rank: 64 bars still carry readable labels at the page's width
MAX_BARS = 64
#: rows of a numbers table before it is cut (the file holds them all)
MAX_TABLE_ROWS = 512


@dataclass
class Table:
    """An HTML table of numbers as the file has them. ``cols``: header texts; ``rows``: cell
    texts; ``keys``: optional per-row ``data-*`` attributes (for the browser test);
    ``source``: the file the values come from; ``note``: shown under it (e.g. rows cut)."""

    cols: list[str]
    rows: list[list[str]]
    source: str = ""
    title: str = ""
    keys: list[dict] = field(default_factory=list)
    note: str = ""
    css: str = "numbers"
    open: bool = False


@dataclass
class Block:
    """One item of a section: ``kind`` is ``chart`` (``model`` a Bokeh model), ``table``
    (``table`` a :class:`Table`), ``html`` (``html`` trusted markup made by this package) or
    ``text`` (plain text, escaped)."""

    kind: str
    model: object = None
    table: Table | None = None
    html: str = ""
    text: str = ""
    caption: str = ""


@dataclass
class Section:
    """One section of the page. ``missing``: why it has nothing to show (the page then says
    "not in this analysis: <missing>")."""

    id: str
    title: str
    blocks: list[Block] = field(default_factory=list)
    missing: str = ""
    intro: str = ""

    def chart(self, model, caption: str = "") -> None:
        self.blocks.append(Block("chart", model=model, caption=caption))

    def table(self, table: Table) -> None:
        self.blocks.append(Block("table", table=table))

    def text(self, text: str) -> None:
        self.blocks.append(Block("text", text=text))

    def markup(self, html: str) -> None:
        self.blocks.append(Block("html", html=html))


def numbers_table(df, file: str) -> Table:
    """The "Numbers: FILE" table under a chart: ``df`` (a CSV output read back) as the file has
    it, the first :data:`MAX_TABLE_ROWS` rows, a note saying where the rest is."""
    rows = [[cell(v) for v in r] for r in df.head(MAX_TABLE_ROWS).itertuples(index=False)]
    return Table(list(df.columns), rows, source=file, title=f"Numbers: {file}",
                 css="numbers " + file.split(".")[0],
                 note=(f"first {MAX_TABLE_ROWS} of {len(df)} rows; all in {file}"
                       if len(df) > MAX_TABLE_ROWS else ""))


def cell(v) -> str:
    """A file's value as text, unchanged: integers without '.0', floats as Python prints them
    (the shortest text that reads back to the same number), NaN/None as ''."""
    if v is None:
        return ""
    if isinstance(v, float):
        if math.isnan(v):
            return ""
        return str(int(v)) if v.is_integer() and abs(v) < 1e15 else repr(v)
    if hasattr(v, "item"):  # numpy scalar
        return cell(v.item())
    return str(v)


def fmt(v, digits: int = 1) -> str:
    """A number for prose: thousands separators, ``digits`` decimals; '-' when missing."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    return f"{v:,.{digits}f}"


def source(data: dict):
    """A Bokeh ColumnDataSource whose numeric and text columns are numpy arrays: Bokeh embeds
    those as binary (base64) and, unlike Python lists, does not walk them item by item looking
    for models (at 256 ranks that walk cost most of the page's build time). Columns of tuples
    (nested categorical factors) stay lists. Numbers keep their float64 value exactly."""
    import numpy as np
    from bokeh.models import ColumnDataSource

    out = {}
    for k, v in data.items():
        v = list(v) if not isinstance(v, np.ndarray) else v
        if isinstance(v, np.ndarray) or not v:
            out[k] = v
        elif all(isinstance(x, (bool, np.bool_)) for x in v):
            out[k] = np.asarray(v, dtype=bool)
        elif all(isinstance(x, (int, np.integer)) and not isinstance(x, bool) for x in v):
            out[k] = np.asarray(v, dtype=np.int64)
        elif all(x is None or isinstance(x, (int, float, np.integer, np.floating)) for x in v):
            out[k] = np.asarray([np.nan if x is None else x for x in v], dtype=np.float64)
        elif all(isinstance(x, str) for x in v):
            out[k] = np.asarray(v, dtype=object)
        else:
            out[k] = v
    return ColumnDataSource(out)


def figure(**kw):
    """A Bokeh figure with the report's defaults: full width, few tools, readable fonts."""
    from bokeh.plotting import figure as bk_figure

    kw.setdefault("sizing_mode", "stretch_width")
    kw.setdefault("height", 340)
    kw.setdefault("tools", "pan,wheel_zoom,box_zoom,reset,save")
    kw.setdefault("toolbar_location", "above")
    f = bk_figure(**kw)
    f.toolbar.logo = None
    for ax in (*f.xaxis, *f.yaxis):
        if type(ax.formatter).__name__ == "BasicTickFormatter":
            ax.formatter.use_scientific = False  # 120000, not 1.2e+5
        ax.axis_label_text_font_size = "13px"
        ax.axis_label_text_font_style = "normal"
        ax.major_label_text_font_size = "12px"
    f.title.text_font_size = "14px"
    return f


def legend_outside(f, items, location: str = "right", title: str = "") -> None:
    """A legend beside the plot (``items``: [(label, [renderers])]), so it never covers bars;
    clicking an entry hides its renderers."""
    from bokeh.models import Legend

    leg = Legend(items=list(items), location="top_left", click_policy="hide",
                 label_text_font_size="12px", title=title or None)
    f.add_layout(leg, location)


def ranks_text(ranks, limit: int = 12) -> str:
    """'0, 1, 2' (with '… (N ranks)' past ``limit``)."""
    ranks = list(ranks)
    if len(ranks) <= limit:
        return ", ".join(map(str, ranks))
    return ", ".join(map(str, ranks[:limit])) + f", … ({len(ranks)} ranks)"


def node_layout(ranks: list[int], device_of: dict[int, int]) -> tuple[dict[int, int], int, str]:
    """Rank -> (node, slot) for heatmaps by node: the device id when every rank has one and
    ranks fill each node in order (device ids restart at 0 on each node), else 8 ranks a
    node. Returns ({rank: node}, devices per node, how it was decided)."""
    devs = [device_of.get(r) for r in ranks]
    if ranks and all(d is not None for d in devs):
        per = max(devs) + 1
        if per > 0 and all(d == r % per for r, d in zip(ranks, devs)):
            return {r: r // per for r in ranks}, per, f"{per} devices per node (device ids)"
    return {r: r // 8 for r in ranks}, 8, "8 ranks per node assumed (no device ids)"
