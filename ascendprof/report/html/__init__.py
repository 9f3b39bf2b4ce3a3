"""The HTML report: one self-contained page (report.html) built from the files of an analysis
output directory, and a two-run comparison page (diff.html).

Renders only: every number on the pages comes from the output files (or, for diff, the tables
``ascendprof diff -o`` writes); nothing is recomputed. The charts are specs with their own data
(JSON in the page), drawn in the browser by Apache ECharts (its JavaScript inlined once per
page, so the page opens offline); Jinja2 lays out the page.

- :func:`write_report` — report.html for an output directory (``analyse`` writes it by
  default, into its staging directory, so report.html is one of the run's outputs);
- ``ascendprof report OUT_DIR`` (:func:`ascendprof.api.rebuild_report`) writes the page
  again from the files in OUT_DIR;
- :func:`ascendprof.report.html.diffpage.write_diff_page` — diff.html.
"""

from __future__ import annotations

from pathlib import Path
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
