"""Assemble report.html: the sections' chart specs as one JSON document, drawn in the browser by
Apache ECharts (``static/echarts.min.js``, vendored from npm) and ``static/charts.js``, both
inlined once (no network when the page is viewed), laid out by the Jinja2 template
``templates/report.html.j2``.

Why not Bokeh (used before): building Bokeh's Python-side models cost 3-5 s per page (7 s at
256 ranks) and 1.5 s of import alone; here the Python side only writes JSON (the same analysis
gives the same page, byte for byte) and the drawing happens in the browser.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

from ascendprof._version import __version__
from ascendprof.model.outputs import REPORT_FILE
from ascendprof.report.html import (communication, data as data_mod, dataprep, diagnosis, memory,
                                    moe, operators, ours, pipeline, problems, steps, why)
from ascendprof.report.html.common import Section
from ascendprof.sysio.atomic import check_report_path, write_pieces, write_report as write_named

STATIC = Path(__file__).resolve().parent / "static"


@functools.lru_cache(maxsize=None)
def _static(name: str) -> str:
    return (STATIC / name).read_text(encoding="utf-8")


def _env():
    from jinja2 import Environment, PackageLoader, select_autoescape

    return Environment(loader=PackageLoader("ascendprof.report.html", "templates"),
                       autoescape=select_autoescape(["html", "j2"]), trim_blocks=True,
                       lstrip_blocks=True)


def _specs(sections: list[Section]) -> str:
    """Every chart's spec, by name, as JSON safe inside a <script> element."""
    return "".join(_spec_pieces(sections))


def _spec_pieces(sections: list[Section]):
    """The text of :func:`_specs` (``{name: spec}`` as json.dumps writes it), one chart's member
    at a time, each spec's lists made, encoded and dropped before the next one's."""
    seen = set()
    yield "{"
    for s in sections:
        for b in s.blocks:
            if b.kind == "chart":
                for c in b.model.charts():
                    if c.name in seen:
                        raise ValueError(f"two charts named {c.name}")
                    # a member's text ends with a JSON value and starts with a key: no "</"
                    # or "<!--" spans two members
                    yield ("," if seen else "") + _safe(_dumps(c.name) + ":" + _dumps(c.spec()))
                    seen.add(c.name)
    yield "}"


def _dumps(value) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def _safe(text: str) -> str:
    """JSON text safe inside a <script> element."""
    return text.replace("</", "<\\/").replace("<!--", "<\\!--")


def render(sections: list[Section], title: str, template: str, **variables) -> str:
    """The page's HTML: ``template`` with ``sections``, the chart specs and the inlined
    scripts."""
    tpl = _env().get_template(template)
    return tpl.render(sections=sections, version=__version__, title=title,
                      chart_specs=_specs(sections), echarts_js=_static("echarts.min.js"),
                      charts_js=_static("charts.js"), **variables)


#: where the chart specs go in the template's output when it is rendered piece by piece
_SPECS_MARK = "\0ascendprof-chart-specs\0"


def render_pieces(sections: list[Section], title: str, template: str, **variables):
    """:func:`render`'s text as an iterator of pieces, the chart specs made one chart at a
    time as they are written: the page is never held whole (at 4096 ranks its text, its bytes
    and every chart's lists at once were ~0.1 GB beside the sections)."""
    tpl = _env().get_template(template)
    for piece in tpl.generate(sections=sections, version=__version__, title=title,
                              chart_specs=_SPECS_MARK, echarts_js=_static("echarts.min.js"),
                              charts_js=_static("charts.js"), **variables):
        if _SPECS_MARK in piece:
            before, _, after = piece.partition(_SPECS_MARK)
            yield before
            yield from _spec_pieces(sections)
            yield after
        else:
            yield piece


def build_sections(d) -> list[Section]:
    ctx: dict = {}
    ops = operators.Operators(d)  # its rank selector is driven by clicks in other charts
    ctx["on_rank"] = ops.select is not None
    return [diagnosis.build(d, ctx), steps.build(d, ctx), pipeline.build(d, ctx),
            communication.build(d, ctx), ops.build(ctx), memory.build(d, ctx),
            dataprep.build(d, ctx), moe.build(d, ctx), why.build(d, ctx),
            problems.build(d, ctx)]


def build_page(out: Path) -> str:
    """report.html's text for the analysis output directory ``out`` (read by
    :func:`ascendprof.report.html.data.load`, whose errors propagate)."""
    return "".join(page_pieces(out))


def page_pieces(out: Path):
    """:func:`build_page`'s text as an iterator of pieces (:func:`render_pieces`); ``out`` is
    read and the sections are built before it is returned (their errors raised here)."""
    d = data_mod.load(out)
    sections = build_sections(d)
    root = (d.summary or {}).get("root") or str(out)
    return render_pieces(sections, f"ascendprof report: {root}", "report.html.j2", root=root,
                         headline=diagnosis.headline_html(d))


def write_report(out: Path, dest: Path | None = None) -> Path:
    """Write the page of the analysis in ``out`` to ``dest`` (default ``out/report.html``,
    atomically, written piece by piece as it is made); returns its path. A ``dest`` the user
    named follows the rule of every report path (:func:`ascendprof.sysio.atomic.write_report`):
    checked before the page is built, never inside ``out`` (the input here), never replacing
    what ascendprof did not write."""
    out = Path(out)
    if dest is None:
        return write_pieces(out / REPORT_FILE,
                            (p.encode("utf-8") for p in page_pieces(out)))
    check_report_path(Path(dest), [out], ours=ours)
    return write_named(Path(dest), build_page(out).encode("utf-8"), ours=ours, inputs=[out])
