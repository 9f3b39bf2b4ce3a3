"""ascendprof: offline analysis of Ascend NPU profiling data.

Layers, one direction: cli -> api (:func:`ascendprof.open`, the façade) -> engine (run,
pipeline, executors, cache) -> scan (find sources) -> readers (one per producer, emit the Arrow
tables of :mod:`ascendprof.model.schemas`) -> analyze (tables in, tables out) -> report (files,
terminal, traces). ``import ascendprof`` stays light: the API loads on first use.
"""

from ascendprof._version import __version__

__all__ = ["open", "diff", "Collection", "__version__"]


def __getattr__(name):
    if name in ("open", "diff", "Collection"):
        from ascendprof import api

        return getattr(api, name)
    raise AttributeError(f"module 'ascendprof' has no attribute {name!r}")
