"""What every section of the HTML report shares: the section record, figure defaults, colours,
number formatting and the numbers tables shown under the charts.

Charts are :class:`Chart` specs: the chart's own data as columns plus what to draw, embedded
in the page as JSON and drawn in the browser by Apache ECharts (inlined once, see page.py);
tables are plain HTML made by the Jinja2 template from :class:`Table` (so their numbers are
text in the page, which the browser test reads back).
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
MAX_TABLE_ROWS = 256
#: steps of cluster_step_trace_time.csv shown one tab each (the page reads only their rows)
MAX_STEPS = 16


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
    live: bool = False  # rows filtered by the rank picker (their data-ranks)
    defs: dict = field(default_factory=dict)  # column -> one-line definition (hover)


@dataclass
class Block:
    """One item of a section: ``kind`` is ``chart`` (``model`` a :class:`Chart`, :class:`Tabs`
    or :class:`RankPick`), ``table`` (``table`` a :class:`Table`), ``html`` (``html`` trusted
    markup made by this package) or ``text`` (plain text, escaped)."""

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


def files_section(key: str, title: str, files: dict, missing: str, intro: str,
                  chart: "Chart | None" = None) -> Section:
    """A section of CSV outputs: ``chart`` (None: none) above the "Numbers" table of each of
    ``files`` ({file name: frame read back, or None}) that has rows; ``missing`` when none
    has."""
    sec = Section(key, title)
    if not any(df is not None and len(df) for df in files.values()):
        sec.missing = missing
        return sec
    sec.intro = intro
    if chart is not None:
        sec.chart(chart)
    for name, df in files.items():
        if df is not None and len(df):
            sec.table(numbers_table(df, name))
    return sec


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


def _plain(v):
    """A JSON-ready value: numpy scalars as Python numbers, NaN as None (null), floats to 6
    decimals (ms from the files' µs with 3 decimals are exact; the page stays small)."""
    if hasattr(v, "item"):
        v = v.item()
    if isinstance(v, float):
        if math.isnan(v) or math.isinf(v):
            return None
        return round(v, 6)
    if isinstance(v, tuple):
        return " · ".join(map(str, v))
    return v


def columns(data: dict) -> dict:
    """``data`` ({name: sequence}) as JSON-ready lists (numbers stay exact; NaN -> null)."""
    return {k: [_plain(x) for x in (v.tolist() if hasattr(v, "tolist") else v)]
            for k, v in data.items()}


@dataclass
class Chart:
    """One chart, drawn in the page by ``static/charts.js`` from this spec.

    ``data``: the chart's own data, columns of equal length (one row per bar, cell or point;
    the browser test reads them back); ``x``: the category column (the y axis when
    ``horizontal``); ``series``: what to draw, each a dict with ``type`` (``bar``: ``y`` the
    value column, optional ``base`` column where the bar starts, ``stack`` name; ``scatter``:
    markers at ``y``, ``symbol`` triangle / dash, rows with null y not drawn; ``range``:
    bars from ``base`` to ``y`` on the category row, labelled by ``label_col``), ``label``
    (legend), ``color`` (or ``color_col``, a colour per row); ``tips``: the hover text, a list
    of (label, column, unit, decimals) — every value carries its unit; ``heat``: a heatmap
    instead ({x, y, v: columns; xcats, ycats: category order; unit; palette; flag: a bool
    column outlined in red}); ``hline``: a dashed line at this value; ``select``: a click on a
    bar selects its ``rank`` in the Operators section; ``filter``: the rows whose column
    equals the selected rank (``cluster`` at first) are drawn; ``xvalue``: the x axis is
    numeric (``xcats`` label its integer ticks)."""

    name: str
    data: dict
    series: list = field(default_factory=list)
    x: str = "x"
    title: str = ""
    x_label: str = ""
    y_label: str = ""
    height: int = 320
    horizontal: bool = False
    tips: list = field(default_factory=list)
    heat: dict | None = None
    hline: float | None = None
    select: bool = False
    filter: str | None = None
    xvalue: bool = False
    xcats: list | None = None
    y_max: float | None = None
    cats: list | None = None  # category order when rows repeat a category (range series)
    data_ref: str = ""  # another chart whose data this one draws (``data`` left empty)

    def spec(self) -> dict:
        return {"name": self.name, "data": columns(self.data), "series": self.series,
                "x": self.x, "title": self.title, "xLabel": self.x_label,
                "yLabel": self.y_label, "height": self.height, "horizontal": self.horizontal,
                "tips": [list(t) for t in self.tips], "heat": self.heat, "hline": self.hline,
                "select": self.select, "filter": self.filter, "xvalue": self.xvalue,
                "xcats": self.xcats, "yMax": self.y_max, "cats": self.cats,
                "dataRef": self.data_ref or None}

    kind = "chart"

    def charts(self):
        yield self


@dataclass
class Tabs:
    """Charts in tabs (one shown at a time; a tab's charts are drawn when it is first shown).
    ``panels``: [(title, [Chart, ...])]."""

    name: str
    panels: list
    kind = "tabs"

    def charts(self):
        for _, cs in self.panels:
            yield from cs


@dataclass
class RankPick:
    """A rank selector (``cluster`` and every rank) above ``chart``, whose rows it filters;
    tapping a rank in a chart with ``select`` chooses it too."""

    name: str
    options: list
    chart: Chart
    label: str = "Rank (click a rank in a chart to choose it):"
    kind = "pick"

    def charts(self):
        yield self.chart


def step_text(step):
    """A Step column (pandas Series) as text, '' for a step without a number (raw CANN data of a
    legacy MindSpore job leaves cluster_step_trace_time.csv's Step empty): ``astype(str)`` alone
    keeps a missing value missing under pandas 3 (a filter on it then selects no row) and makes
    it 'nan' under pandas 2."""
    return step.astype(str).where(step.notna(), "")


def tabs_or_one(charts: list, titles: list[str], name: str):
    """One chart as it is, several as :class:`Tabs` named ``name``."""
    if len(charts) == 1:
        charts[0].name = name
        return charts[0]
    return Tabs(name, [(t, [c]) for t, c in zip(titles, charts)])


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
