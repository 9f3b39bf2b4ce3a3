"""union, union_of, intersection and difference (the _combine sweep) compared with a plain-Python
reference (sorted merge of half-open [start, end) intervals by hand) on hypothesis-generated
inputs and hand-picked edge cases: empty, touching, nested, zero-length, unsorted, int64 extremes."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings, strategies as st

from ascendprof.analyze import intervals as I

I64_MIN, I64_MAX = int(np.iinfo(np.int64).min), int(np.iinfo(np.int64).max)


def ref_union(pairs):
    """Sort by start, drop zero-length, merge overlapping or touching intervals."""
    out = []
    for s, e in sorted((s, e) for s, e in pairs if e > s):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return [tuple(x) for x in out]


def ref_combine(a, b, keep):
    """Elementary segments between all boundaries, kept where keep(in_a, in_b), then merged."""
    ua, ub = ref_union(a), ref_union(b)
    pts = sorted({p for s, e in ua + ub for p in (s, e)})
    segs = []
    for lo, hi in zip(pts, pts[1:]):
        in_a = any(s <= lo and hi <= e for s, e in ua)
        in_b = any(s <= lo and hi <= e for s, e in ub)
        if keep(in_a, in_b):
            segs.append((lo, hi))
    return ref_union(segs)


def as_pairs(x):
    s, e = x
    assert s.dtype == np.int64 and e.dtype == np.int64
    return list(zip(s.tolist(), e.tolist()))


def arr(pairs):
    return (np.array([p[0] for p in pairs], np.int64), np.array([p[1] for p in pairs], np.int64))


iv = st.tuples(st.integers(-50, 50), st.integers(0, 20)).map(lambda t: (t[0], t[0] + t[1]))
sets = st.lists(iv, max_size=12)
SETTINGS = settings(max_examples=200, deadline=None, derandomize=True)

EDGE = [
    [],
    [(0, 0)],
    [(0, 5), (5, 10)],                    # touching
    [(0, 10), (2, 3)],                    # nested
    [(7, 9), (0, 2), (3, 3), (1, 4)],     # unsorted, zero-length
    [(0, 5), (0, 3), (0, 9), (0, 1)],     # equal starts, different ends
    [(I64_MIN, I64_MIN + 3), (I64_MAX - 4, I64_MAX), (-1, 1)],
    [(I64_MIN, I64_MAX)],
]


@SETTINGS
@given(sets)
def test_union_matches_reference(a):
    assert as_pairs(I.union(arr(a))) == ref_union(a)
    # a normalised set comes back unchanged
    u = ref_union(a)
    assert as_pairs(I.union(arr(u))) == u


@SETTINGS
@given(st.lists(sets, max_size=4))
def test_union_of_matches_reference(many):
    got = I.union_of(*[arr(a) for a in many])
    assert as_pairs(got) == ref_union([p for a in many for p in a])


@SETTINGS
@given(sets, sets)
def test_intersection_and_difference_match_reference(a, b):
    assert as_pairs(I.intersection(arr(a), arr(b))) == ref_combine(a, b, lambda x, y: x and y)
    assert as_pairs(I.difference(arr(a), arr(b))) == ref_combine(a, b, lambda x, y: x and not y)
    assert as_pairs(I.difference(arr(b), arr(a))) == ref_combine(b, a, lambda x, y: x and not y)


def test_edge_cases():
    for a in EDGE:
        assert as_pairs(I.union(arr(a))) == ref_union(a)
        for b in EDGE:
            assert as_pairs(I.union_of(arr(a), arr(b))) == ref_union(a + b)
            assert as_pairs(I.intersection(arr(a), arr(b))) == ref_combine(a, b, lambda x, y: x and y)
            assert as_pairs(I.difference(arr(a), arr(b))) == ref_combine(a, b,
                                                                          lambda x, y: x and not y)
    assert as_pairs(I.union_of()) == []


def test_union_of_does_not_alias_or_change_inputs():
    a, b = arr([(0, 5), (10, 12)]), arr([(3, 7)])
    keep = [x.copy() for x in a + b]
    got = I.union_of(a)
    got[0][:] = -1
    for x, k in zip(a + b, keep):
        assert x.tolist() == k.tolist()
    assert as_pairs(I.union_of(a, b)) == [(0, 7), (10, 12)]
    # lists and other integer dtypes are converted to int64
    lists = ([0, 4], [2, 6])
    assert as_pairs(I.union_of(lists, (np.array([6], np.int32), np.array([8], np.int32)))) == [(0, 2), (4, 8)]
