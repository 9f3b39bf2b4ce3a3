"""How gate results are worded: a change with its unit and percentage, rank ranges, short
lists."""

from __future__ import annotations

import math


def fmt_change(change, pct, unit: str) -> str:
    """``+12.345 ms (+31.0 %)``; ``n/a`` when unknown."""
    if change is None or (isinstance(change, float) and math.isnan(change)):
        return "n/a"
    p = "" if pct is None or (isinstance(pct, float) and math.isnan(pct)) else f" ({pct:+.1f} %)"
    return f"{change:+.3f} {unit}{p}"


def ranges(ranks) -> str:
    """``0-3, 8`` for a set of ints."""
    rs = sorted(ranks)
    out, start = [], None
    for i, r in enumerate(rs):
        if start is None:
            start = r
        if i + 1 == len(rs) or rs[i + 1] != r + 1:
            out.append(str(start) if start == r else f"{start}-{r}")
            start = None
    return ", ".join(out) or "none"


def few(items, n: int = 4) -> str:
    items = sorted(map(str, items))
    return ", ".join(items[:n]) + (f" and {len(items) - n} more" if len(items) > n else "")
