"""The HTML report: one self-contained page (report.html) built from the files of an analysis
output directory, and a two-run comparison page (diff.html).

Renders only: every number on the pages comes from the output files (or, for diff, the tables
``ascendprof diff -o`` writes); nothing is recomputed. Bokeh draws the charts (its JavaScript
inlined once per page, so the page opens offline), Jinja2 lays out the page.

- :func:`write_report` — report.html for an output directory (``analyse`` writes it by
  default, into its staging directory, so report.html is one of the run's outputs);
- :func:`rebuild` — ``ascendprof report OUT_DIR``: the page again, from the files in OUT_DIR;
- :func:`ascendprof.report.html.diffpage.write_diff_page` — diff.html.
"""

from __future__ import annotations

import os
from pathlib import Path

REPORT_NAME = "report.html"
#: marks a page ascendprof wrote (only such a file is ever replaced or removed)
GENERATOR = b'<meta name="generator" content="ascendprof'


def write_report(out: Path, dest: Path | None = None) -> Path:
    """Write the page of the analysis in ``out`` to ``dest`` (default ``out/report.html``),
    atomically; returns its path. Raises UsageError when ``out`` is not an analysis output,
    InputError naming a file that cannot be read."""
    from ascendprof.report.html.page import write_report as write

    return write(out, dest)


def ours(path: Path) -> bool:
    """True when ``path`` is a page ascendprof wrote (its generator tag in the first 4 KB)."""
    try:
        with open(path, "rb") as f:
            return GENERATOR in f.read(4096)
    except OSError:
        return False


def rebuild(out: Path, dest: Path | None = None) -> Path:
    """``ascendprof report``: write the page of the analysis in ``out`` to ``dest``, by default
    ``out/report.html``. There it becomes one of the analysis' outputs: listed in the output
    directory's manifest (so the next ``analyse`` into ``out`` may replace or remove it), and a
    report.html that ascendprof did not write is refused (OutputConflict, exit 2), as
    ``analyse`` refuses it."""
    from ascendprof.engine import outdir

    out = Path(out)
    if dest is not None:
        return write_report(out, dest)
    page = out / REPORT_NAME
    manifest = outdir.read_manifest(out)
    listed = manifest is not None and REPORT_NAME in manifest["files"]
    if os.path.lexists(page) and not listed and not (page.is_file() and ours(page)):
        raise outdir.OutputConflict(
            f"{page} exists and ascendprof did not write it; move it away or give -o FILE")
    path = write_report(out)
    if manifest is not None and not listed:
        outdir.adopt(out, REPORT_NAME)
    return path
