"""The engine: runs the layers for a whole collection.

``pipeline`` (the per-rank pure function and the cluster combine), ``executors`` (local
process pool or Dask), ``cache`` (Parquet cache of the per-rank tables and results), ``spill``
(per-rank results parked on disk until the cluster step reads them) and ``run`` (the analyse
flow: paths, scan, pipeline with progress, outputs). Nothing here parses a profiler file or
computes a profiling figure itself: that is ``readers`` and ``analyze``.
"""
