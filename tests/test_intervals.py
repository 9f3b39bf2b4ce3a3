"""Interval arithmetic: hand-worked cases and hypothesis properties (spec §7.1.b identities)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings, strategies as st

from ascendprof.analyze import intervals as I


def _pairs(draw_list):
    s = np.array([a for a, _ in draw_list], np.int64)
    e = np.array([a + d for a, d in draw_list], np.int64)
    return s, e


ivals = st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 500)), max_size=40).map(_pairs)


def _points(a: I.Intervals) -> set[int]:
    """Brute force: the integer points covered (half-open)."""
    return {p for s, e in zip(*a) for p in range(int(s), int(e))}


def test_hand_worked_cases():
    a = I.make([0, 5, 20], [10, 8, 30])  # [0,10) ∪ [20,30); [5,8) inside the first
    b = I.make([7], [25])
    assert [list(x) for x in I.union(a)] == [[0, 20], [10, 30]]
    assert [list(x) for x in I.intersection(a, b)] == [[7, 20], [10, 25]]
    assert [list(x) for x in I.difference(a, b)] == [[0, 25], [7, 30]]
    assert I.total(a) == 20
    assert [list(x) for x in I.clip(a, 3, 22)] == [[3, 20], [10, 22]]
    # windows [0,9) -> 9, [9,25) -> 1 + 5, [25,100) -> 5
    assert list(I.length_in_windows(a, [0, 9, 25], [9, 25, 100])) == [9, 6, 5]
    assert [list(x) for x in I.union(I.make([0, 5], [5, 9]))] == [[0], [9]]  # touching merge


def test_bad_input_raises():
    import pytest

    with pytest.raises(ValueError):
        I.make([0, 1], [2])
    with pytest.raises(ValueError):
        I.make([5], [4])


@settings(max_examples=150, deadline=None)
@given(ivals, ivals)
def test_operations_match_brute_force(a, b):
    assert _points(I.union(a)) == _points(a)
    assert _points(I.intersection(a, b)) == _points(a) & _points(b)
    assert _points(I.difference(a, b)) == _points(a) - _points(b)
    assert I.total(a) == len(_points(a))


@settings(max_examples=150, deadline=None)
@given(ivals)
def test_union_is_idempotent_and_normalised(a):
    u = I.union(a)
    u2 = I.union(u)
    assert np.array_equal(u[0], u2[0]) and np.array_equal(u[1], u2[1])
    assert np.all(u[1] > u[0])
    assert np.all(u[0][1:] > u[1][:-1])  # sorted, disjoint, not touching


@settings(max_examples=150, deadline=None)
@given(ivals, ivals)
def test_breakdown_identities(compute, comm):
    """Computing + Communication(Not Overlapped) + Free == busy span; Overlapped <= min(C, M)."""
    C, M = I.union(compute), I.union(comm)
    CM = I.union_of(C, M)
    cno = I.difference(M, C)
    free = I.difference(I.hull(CM), CM)
    span = I.total(I.hull(CM))
    assert I.total(C) + I.total(cno) + I.total(free) == span
    overlapped = I.total(M) - I.total(cno)
    assert overlapped == I.total(I.intersection(C, M))
    assert 0 <= overlapped <= min(I.total(C), I.total(M))
    for x in (C, M, cno, free):
        assert I.total(x) >= 0 and np.all(x[1] - x[0] > 0)


@settings(max_examples=100, deadline=None)
@given(ivals, st.lists(st.tuples(st.integers(0, 11_000), st.integers(0, 3000)), max_size=6))
def test_windows_and_clip_agree(a, wins):
    lo = [w[0] for w in wins]
    hi = [w[0] + w[1] for w in wins]
    got = I.length_in_windows(a, lo, hi)
    for k in range(len(wins)):
        assert got[k] == I.total(I.clip(a, lo[k], hi[k])) == len(
            _points(a) & set(range(lo[k], hi[k])))
