"""Assemble report.html: the sections' Bokeh models in one Bokeh document, its JavaScript and
CSS inlined once (no network when the page is viewed), laid out by the Jinja2 template
``templates/report.html.j2``.
"""

from __future__ import annotations

import contextlib
import itertools
from pathlib import Path

from ascendprof._version import __version__
from ascendprof.report.html import (REPORT_NAME, communication, data as data_mod, dataprep,
                                    diagnosis, memory, moe, operators, pipeline, problems,
                                    steps)
from ascendprof.report.html.common import Section


def _env():
    from jinja2 import Environment, PackageLoader, select_autoescape

    return Environment(loader=PackageLoader("ascendprof.report.html", "templates"),
                       autoescape=select_autoescape(["html", "j2"]), trim_blocks=True,
                       lstrip_blocks=True)


def render(sections: list[Section], title: str, template: str, **variables) -> str:
    """The page's HTML: the charts of ``sections`` (each model has a unique ``name``) embedded
    through Bokeh's standalone file writer with inline resources and our template."""
    from bokeh.embed import file_html
    from bokeh.resources import INLINE

    models = [b.model for s in sections for b in s.blocks if b.kind == "chart"]
    for i, m in enumerate(models):
        if not m.name:
            m.name = f"chart_{i}"
    tpl = _env().get_template(template)
    variables = dict(variables, sections=sections, version=__version__)
    if not models:  # a page with no chart still needs a Bokeh root to render through
        from bokeh.models import Div

        models = [Div(text="", name="empty")]
    from bokeh.document import Document

    doc = Document()
    _number_models([*models, doc.config])  # before the document indexes them by id
    for m in models:
        doc.add_root(m)
    with _counted_element_ids():
        return file_html(doc, INLINE, title=title, template=tpl,
                         template_variables=variables, suppress_callback_warning=True)


@contextlib.contextmanager
def _counted_element_ids():
    """Bokeh names the page's document, root elements and data script with random UUIDs; count
    them instead, so the same analysis always gives the same page, byte for byte (outputs are
    compared across runs and cached). Without the names this Bokeh version uses, the page keeps
    Bokeh's own (still correct, only not reproducible)."""
    from unittest import mock

    counter = itertools.count(1)

    def next_id():
        return f"ascendprof-{next(counter)}"

    targets = [("bokeh.embed.util", "make_globally_unique_id"),
               ("bokeh.embed.util", "make_globally_unique_css_safe_id"),
               ("bokeh.embed.elements", "make_globally_unique_css_safe_id")]
    with contextlib.ExitStack() as stack:
        for mod, name in targets:
            try:
                stack.enter_context(mock.patch(f"{mod}.{name}", next_id))
            except (AttributeError, ImportError):
                pass
        yield


def _number_models(roots) -> None:
    """Bokeh numbers models p1000, p1001 … in the order they are made, process-wide (and makes
    some defaults lazily, once per process), so the same page would get other ids in another
    process. Renumber every model of the page in the order a walk from its roots meets them:
    the same analysis then always gives the same page, byte for byte (ids need only be unique
    within one page's document)."""
    from bokeh.core.types import ID
    from bokeh.model.util import collect_models

    for i, m in enumerate(collect_models(*roots)):
        m._id = ID(f"m{i}")


def build_sections(d) -> list[Section]:
    ctx: dict = {}
    ops = operators.Operators(d)  # its rank selector is driven by taps in other charts
    ctx["on_rank"] = ops.on_rank
    return [diagnosis.build(d, ctx), steps.build(d, ctx), pipeline.build(d, ctx),
            communication.build(d, ctx), ops.build(ctx), memory.build(d, ctx),
            dataprep.build(d, ctx), moe.build(d, ctx), problems.build(d, ctx)]


def build_page(out: Path) -> str:
    """report.html's text for the analysis output directory ``out`` (read by
    :func:`ascendprof.report.html.data.load`, whose errors propagate)."""
    d = data_mod.load(out)
    sections = build_sections(d)
    root = (d.summary or {}).get("root") or str(out)
    return render(sections, f"ascendprof report: {root}", "report.html.j2",
                  root=root)


def write_report(out: Path, dest: Path | None = None) -> Path:
    """Write the page of the analysis in ``out`` to ``dest`` (default ``out/report.html``,
    atomically); returns its path. A ``dest`` the user named follows the rule of every report
    path (:func:`ascendprof.sysio.atomic.write_report`): checked before the page is built,
    never inside ``out`` (the input here), never replacing what ascendprof did not write."""
    from ascendprof.report.html import ours
    from ascendprof.sysio.atomic import check_report_path, write_bytes
    from ascendprof.sysio.atomic import write_report as write_named

    out = Path(out)
    if dest is None:
        return write_bytes(out / REPORT_NAME, build_page(out).encode("utf-8"))
    check_report_path(Path(dest), [out], ours=ours)
    return write_named(Path(dest), build_page(out).encode("utf-8"), ours=ours, inputs=[out])
