"""What a cache entry must be before any of it is used (the cache is untrusted input): table
names that may become file names, and the rank an entry of a source must carry. Shared by the
cache (engine.cache) and the per-rank result file (engine.resultfile)."""

from __future__ import annotations

import re

_NAME = re.compile(r"[A-Za-z0-9_]{1,64}\Z")


def safe_name(name) -> bool:
    """True for a table name the cache may turn into a file name (``[A-Za-z0-9_]``, at most 64
    characters): no separator, no ``..``, nothing hidden."""
    return isinstance(name, str) and _NAME.match(name) is not None


def expected_rank(source) -> int:
    """The rank a cached entry of ``source`` must carry (the readers' rule: the scanned rank,
    -1 for a db export whose rank is unknown)."""
    return int(source.rank) if source.rank is not None else -1
