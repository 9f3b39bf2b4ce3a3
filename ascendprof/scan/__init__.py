"""The scanner: find profiling sources under a directory (:mod:`ascendprof.scan.walk`: what a
source is, per producer, and what it allows) and group them into runs
(:mod:`ascendprof.scan.runs`). Reads only names and small metadata files; never writes."""

from ascendprof.model.source import (DB, KIND_LABELS, LEGACY_MS, MS_TEXT, PROF, RAW_CANN,
                                     TORCH_TEXT, Source)
from ascendprof.scan.walk import (ANALYSES, OUTPUT_DIR, RANK_LIMIT, MultipleRuns, allowed_analyses,
                                  load_sources, one_per_rank, runs_of, scan)

__all__ = ["DB", "KIND_LABELS", "LEGACY_MS", "MS_TEXT", "PROF", "RAW_CANN", "TORCH_TEXT", "Source",
           "ANALYSES", "OUTPUT_DIR", "RANK_LIMIT", "MultipleRuns", "allowed_analyses",
           "load_sources", "one_per_rank", "runs_of", "scan"]
