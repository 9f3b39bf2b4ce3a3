"""Find profiling sources under a directory, at any depth, say what each allows, and group them
into runs (:mod:`ascendprof.scan.runs`). The walk itself is :mod:`ascendprof.scan.walk`.

A *source* is the data of one rank from one producer:

- ``torch_npu`` / ``mindspore`` text: a ``*_ascend_pt`` / ``*_ascend_ms`` directory whose
  ``ASCEND_PROFILER_OUTPUT`` holds the text files (spec §0, §A);
- ``db``: the same directories holding only ``.db`` exports (§B);
- ``prof``: a stand-alone CANN ``PROF_*`` directory with ``mindstudio_profiler_output`` or
  per-iteration timeline JSON (§C);
- ``raw_cann``: a ``PROF_*`` / job directory with only raw host/device data (§D);
- ``legacy_mindspore``: MindSpore 1.x/2.0 output (``step_trace_raw_{rank}_detail_time.csv``,
  ``hccl_raw_{rank}.csv``, ``output_timeline_data_*`` …); one directory may hold several ranks.

Scanning reads only names and a few small metadata files, so it stays fast on large trees. It
never follows symlinked directories (no loops, no escape from the tree) and never writes
anything. Only regular files are listed (a FIFO or a link to a device is reported, never
opened); a directory that cannot be listed, a symlinked directory, a name that is not UTF-8 or a
path the system cannot open is reported in ``problems`` and costs at most its own rank.
"""

from ascendprof.model.source import (DB, KIND_LABELS, LEGACY_MS, MS_TEXT, PROF, RAW_CANN,
                                     TORCH_TEXT, Source)
from ascendprof.scan.walk import (ANALYSES, OUTPUT_DIR, RANK_LIMIT, MultipleRuns, allowed_analyses,
                                  load_sources, one_per_rank, runs_of, scan)

__all__ = ["DB", "KIND_LABELS", "LEGACY_MS", "MS_TEXT", "PROF", "RAW_CANN", "TORCH_TEXT", "Source",
           "ANALYSES", "OUTPUT_DIR", "RANK_LIMIT", "MultipleRuns", "allowed_analyses",
           "load_sources", "one_per_rank", "runs_of", "scan"]
