"""ascendprof: offline analysis of Ascend NPU profiling data.

API (``import ascendprof`` stays light: these load on first use)
-----------------------------------------------------------------
open(path, *, workers=None, cache_dir=None, timeline=False, thresholds=None, run=None)
    -> Collection: the profiling data under ``path`` (one rank or a whole cluster; the
    ``ascendprof scan`` of it is done at once). Raises UsageError for a missing path, an
    unknown threshold or run, NothingAnalysable when no profiling data is found.

Collection: one run's ranks.
    .ranks, .problems, .source(rank), .table(name, ranks=None) (the normalised Arrow tables),
    .step_breakdown(), .step_check(), .communication(), .communication_matrix(),
    .communication_groups(), .op_statistics(), .top_kernels(), .verdicts(),
    .frame(file_name) (any output file of analyse as a DataFrame),
    .analyse(out, **options) (what ``ascendprof analyse`` writes), .timeline(...),
    .diff(other=None, ranks=None).

analyse(directory, out, **options) -> exit code: ``ascendprof analyse DIRECTORY -o OUT``.

diff(a, b=None, *, ranks=None, workers=None) -> DiffResult: ``ascendprof diff``; the step
    breakdown, op types, kernels, communication and bandwidth as DataFrames (µs per step and
    rank, delta = B − A) and the plain-English explanation.

rebuild_report(out, dest=None) -> Path: ``ascendprof report OUT`` (report.html again).

Times are µs in the output files (column names carry the unit), ms in the summaries. The full
reference: docs/outputs.md in the source tree.

Layers, one direction: cli -> api (the façade above) -> engine (run, pipeline, executors,
cache) -> scan (find sources) -> readers (one per producer, emit the Arrow tables of
:mod:`ascendprof.model.schemas`) -> analyze (tables in, tables out) -> report (files, terminal,
traces).
"""

from ascendprof import api
from ascendprof._version import __version__

_API = ("open", "analyse", "diff", "rebuild_report", "Collection")
__all__ = [*_API, "__version__"]


def __getattr__(name):
    if name in _API:
        return getattr(api, name)
    raise AttributeError(f"module 'ascendprof' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_API))
