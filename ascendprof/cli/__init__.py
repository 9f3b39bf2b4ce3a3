"""The command line: a thin click layer (``main`` for analyse and scan, ``diff``, ``gate``).

Commands parse options, call the engine or the comparisons, and hand results to ``report``
for printing; no profiling knowledge lives here.
"""
