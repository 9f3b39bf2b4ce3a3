"""ascendprof: offline analysis of Ascend NPU profiling data.

Pipeline, one direction: scan (find sources) -> readers (one per producer, emit the Arrow
tables of :mod:`ascendprof.model.schemas`) -> analyze (tables in, tables out) -> report (files,
terminal). The CLI in :mod:`ascendprof.cli.main` is a thin layer over that.
"""

__version__ = "0.1.0"
