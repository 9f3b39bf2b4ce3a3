"""The engine: runs the layers for a whole collection.

``pipeline`` (the per-rank worker and the cluster combine), ``executors`` (local process pool
or Dask), ``cache`` (Parquet cache of the per-rank tables; ``resultfile``: its per-rank results,
data only), ``outdir`` (the output directory: lock, staging, manifest), ``run`` (the analyse
flow: paths, scan, pipeline with progress, outputs) and ``timeline`` (the timeline job).
Nothing here parses a profiler file or computes a profiling figure itself: that is ``readers``
and ``analyze``.
"""
