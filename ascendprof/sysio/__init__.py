"""The bottom I/O layer: everything that touches files, streams and processes without knowing
about profiling.

``atomic`` (whole-file writes by rename; report paths that never replace what ascendprof did not
write), ``ownership`` (which names in a directory ascendprof wrote: the manifest), ``csvsafe``
(spreadsheet-safe CSV cells), ``jsonstream`` (JSON written member by member), ``parquet``,
``textio`` (CSV / JSON text with errors that name the file), ``bigtables`` (tables too large to
hold, spilled to Parquet), ``lz4chunk`` (compressed byte chunks) and ``lifetime`` (signals,
workers that die with the run). It imports only :mod:`ascendprof.model`.
"""
