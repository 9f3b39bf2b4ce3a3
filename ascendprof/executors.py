"""Executors run the per-rank pure function over sources: a local process pool by default.

Worker count defaults to the number of cores (at most the number of sources); one source runs
in-process, which also keeps tests and small jobs free of pool start-up cost.
"""

from __future__ import annotations

import os
from concurrent.futures import ProcessPoolExecutor
from functools import partial


def local_map(fn, sources, *, tables_dir=None, workers=None, progress=None):
    """``[fn(s, tables_dir) for s in sources]`` in a process pool, results in input order.

    ``progress`` is called with no argument after each finished source.
    """
    sources = list(sources)
    workers = workers or min(len(sources), os.cpu_count() or 1)
    call = partial(fn, tables_dir=tables_dir)
    if workers <= 1 or len(sources) <= 1:
        out = []
        for s in sources:
            out.append(call(s))
            if progress:
                progress()
        return out
    with ProcessPoolExecutor(max_workers=workers) as pool:
        futures = [pool.submit(call, s) for s in sources]
        out = []
        for f in futures:
            out.append(f.result())
            if progress:
                progress()
        return out
