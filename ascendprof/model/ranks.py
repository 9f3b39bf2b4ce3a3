"""Rank lists as short text: ``[0, 1, 2, 3, 8]`` -> ``"0-3, 8"``, bounded at any cluster size."""

from __future__ import annotations


def runs(ranks) -> list[tuple[int, int]]:
    """Sorted, de-duplicated ``ranks`` as (first, last) runs of consecutive ranks."""
    out: list[tuple[int, int]] = []
    for r in sorted({int(x) for x in ranks}):
        if out and r == out[-1][1] + 1:
            out[-1] = (out[-1][0], r)
        else:
            out.append((r, r))
    return out


def rank_ranges(ranks, limit: int = 6) -> str:
    """``"0-3, 8, 10-11"``; past ``limit`` runs the first ones then ``"… (N ranks)"``, so the
    text stays short however many ranks there are. ``""`` for no rank."""
    rs = runs(ranks)
    text = [f"{a}-{b}" if b > a else str(a) for a, b in rs]
    if len(text) <= limit:
        return ", ".join(text)
    n = sum(b - a + 1 for a, b in rs)
    return ", ".join(text[:limit]) + f", … ({n} ranks)"


def ranks_phrase(ranks, limit: int = 6) -> str:
    """``"rank 3"`` or ``"ranks 0-3, 8"`` (see :func:`rank_ranges`)."""
    rs = sorted({int(x) for x in ranks})
    if len(rs) == 1:
        return f"rank {rs[0]}"
    return "ranks " + rank_ranges(rs, limit)
