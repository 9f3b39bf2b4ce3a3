"""Interval arithmetic on int64 nanosecond timelines (numpy, O(n log n)).

An interval set is a pair ``(starts, ends)`` of equal-length int64 numpy arrays, each interval
half-open ``[start, end)``. Inputs may overlap, touch, be unsorted or empty; every function that
returns a set returns it *normalised*: sorted, disjoint, non-touching, no zero-length pieces.
These are the operations the step breakdown of spec §7.1.b needs (union of compute / communication
sections, Communication(Not Overlapped) = M \\ C, Free = busy extent \\ (C ∪ M), clipping to a step).

Raises ``ValueError`` when starts and ends differ in length or an interval ends before it starts.
"""

from __future__ import annotations

import numpy as np

Intervals = tuple[np.ndarray, np.ndarray]

_I64 = np.int64


def make(starts, ends) -> Intervals:
    """Validate and convert to two int64 arrays (not normalised)."""
    s = np.asarray(starts, dtype=_I64).ravel()
    e = np.asarray(ends, dtype=_I64).ravel()
    if s.shape != e.shape:
        raise ValueError(f"starts ({s.size}) and ends ({e.size}) differ in length")
    if s.size and np.any(e < s):
        raise ValueError("an interval ends before it starts")
    return s, e


def from_durations(starts, durs) -> Intervals:
    """Intervals ``[start, start + dur)``; negative durations count as zero."""
    s = np.asarray(starts, dtype=_I64).ravel()
    d = np.maximum(np.asarray(durs, dtype=_I64).ravel(), 0)
    return make(s, s + d)


def empty() -> Intervals:
    return np.empty(0, _I64), np.empty(0, _I64)


def union(a: Intervals) -> Intervals:
    """Normalise one set: merge overlapping or touching intervals, drop zero-length ones. A
    set already normalised (e.g. a union's result, clipped to many windows in turn) comes back
    as it is, without sorting its millions of intervals again."""
    s, e = make(*a)
    if s.size and (e > s).all() and (s[1:] > e[:-1]).all():
        return s, e
    keep = e > s
    if not keep.all():
        s, e = s[keep], e[keep]
    del keep
    if s.size == 0:
        return empty()
    order = np.argsort(s, kind="stable")
    s, reach = s[order], e[order]  # (copies: millions of kernels hold few of them at once)
    del order
    np.maximum.accumulate(reach, out=reach)
    # A new merged interval starts where a start lies beyond everything reached so far.
    new = np.empty(s.size, dtype=bool)
    new[0] = True
    np.greater(s[1:], reach[:-1], out=new[1:])
    first = np.flatnonzero(new)
    del new
    last = np.append(first[1:] - 1, s.size - 1)
    return s[first], reach[last]


def union_of(*sets: Intervals) -> Intervals:
    """Union of several sets."""
    if not sets:
        return empty()
    return union((np.concatenate([x[0] for x in sets]).astype(_I64, copy=False),
                  np.concatenate([x[1] for x in sets]).astype(_I64, copy=False)))


def _combine(a: Intervals, b: Intervals, keep) -> Intervals:
    """Sweep both sets' boundaries; keep the elementary segments where ``keep(cov_a, cov_b)``."""
    a, b = union(a), union(b)
    coords = np.concatenate([a[0], a[1], b[0], b[1]])
    if coords.size == 0:
        return empty()
    # +1 / -1 per boundary: int8 is enough, as a normalised set has at most one boundary at
    # any point (a sweep over millions of kernels held ~16 bytes per boundary for these)
    da = np.concatenate([np.ones(a[0].size, np.int8), -np.ones(a[1].size, np.int8),
                         np.zeros(2 * b[0].size, np.int8)])
    db = np.concatenate([np.zeros(2 * a[0].size, np.int8), np.ones(b[0].size, np.int8),
                         -np.ones(b[1].size, np.int8)])
    order = np.argsort(coords, kind="stable")
    coords, da, db = coords[order], da[order], db[order]
    del order
    first = np.flatnonzero(np.concatenate([[True], coords[1:] != coords[:-1]]))  # sorted
    points = coords[first]
    del coords
    cov_a = np.cumsum(np.add.reduceat(da, first))[:-1]  # coverage on [points[k], points[k+1])
    cov_b = np.cumsum(np.add.reduceat(db, first))[:-1]
    sel = keep(cov_a > 0, cov_b > 0)
    if not sel.any():
        return empty()
    prev = np.concatenate([[False], sel[:-1]])
    nxt = np.concatenate([sel[1:], [False]])
    starts = points[:-1][sel & ~prev]
    ends = points[1:][sel & ~nxt]
    return starts, ends


def intersection(a: Intervals, b: Intervals) -> Intervals:
    """Points covered by both sets."""
    return _combine(a, b, lambda x, y: x & y)


def difference(a: Intervals, b: Intervals) -> Intervals:
    """Points covered by ``a`` and not by ``b`` (``a \\ b``)."""
    return _combine(a, b, lambda x, y: x & ~y)


def total(a: Intervals) -> int:
    """Length covered (each point counted once), in the input's unit."""
    s, e = union(a)
    return int((e - s).sum())


def clip(a: Intervals, lo: int, hi: int) -> Intervals:
    """The part of ``a`` inside ``[lo, hi)``, normalised."""
    s, e = union(a)
    s2, e2 = np.maximum(s, lo), np.minimum(e, hi)
    keep = e2 > s2
    return s2[keep], e2[keep]


def hull(a: Intervals) -> Intervals:
    """The single interval from the earliest start to the latest end (empty for an empty set)."""
    s, e = union(a)
    if s.size == 0:
        return empty()
    return np.array([s[0]], _I64), np.array([e[-1]], _I64)


def length_in_windows(a: Intervals, lo, hi) -> np.ndarray:
    """Covered length of ``a`` inside each window ``[lo[i], hi[i])`` (int64 array).

    Uses prefix sums over the normalised set, so many windows cost O((n + w) log n).
    """
    s, e = union(a)
    lo = np.asarray(lo, _I64)
    hi = np.asarray(hi, _I64)
    if s.size == 0:
        return np.zeros(lo.size, _I64)
    cum = np.concatenate([[0], np.cumsum(e - s)])

    def covered_before(t: np.ndarray) -> np.ndarray:
        # Covered length in (-inf, t): whole intervals ending before t, plus the part of the one
        # containing t.
        k = np.searchsorted(s, t, side="right")  # intervals starting before or at t
        part = np.where(k > 0, np.minimum(t, e[np.maximum(k - 1, 0)]) - s[np.maximum(k - 1, 0)], 0)
        return cum[np.maximum(k - 1, 0)] + np.where(k > 0, np.maximum(part, 0), 0)

    return np.maximum(covered_before(hi) - covered_before(lo), 0)
