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


# ------------------------------------------------------------------ edges, written out by hand
# Half-open [start, end): touching pieces merge, a shared end point is not an overlap, zero-length
# pieces vanish (§7.1.b: emit events of zero length are skipped).

def _l(x: I.Intervals) -> list[list[int]]:
    return [x[0].tolist(), x[1].tolist()]


def test_make_and_from_durations_edges():
    import pytest

    with pytest.raises(ValueError, match=r"starts \(2\) and ends \(1\) differ in length"):
        I.make([0, 1], [2])
    with pytest.raises(ValueError, match="^an interval ends before it starts$"):
        I.make([5], [4])
    assert _l(I.make([5], [5])) == [[5], [5]]  # zero length is valid input
    # starts and durations become int64 ns each before they are added (0.5 + 0.6 is not 1)
    assert _l(I.from_durations([0.5, 2.9], [0.6, 0.2])) == [[0, 2], [0, 2]]
    # a negative duration counts as zero, a zero duration stays zero
    assert _l(I.from_durations([5, 7, 9], [-3, 0, 2])) == [[5, 7, 9], [5, 7, 11]]
    assert I.total(I.from_durations([5, 7], [-3, 0])) == 0


def test_union_edges():
    assert _l(I.union(I.make([0, 10], [10, 20]))) == [[0], [20]]            # touching: merged
    assert _l(I.union(I.make([0, 11], [10, 20]))) == [[0, 11], [10, 20]]    # gap of 1: kept apart
    assert _l(I.union(I.make([3, 0], [3, 0]))) == [[], []]                  # zero length: gone
    assert _l(I.union(I.make([20, 0, 5], [30, 10, 25]))) == [[0], [30]]     # unsorted, chained
    assert _l(I.union(I.make([0, 0], [10, 4]))) == [[0], [10]]              # same start
    assert _l(I.union_of()) == [[], []]
    assert _l(I.union_of(I.make([0], [5]), I.make([5], [9]))) == [[0], [9]]


def test_intersection_and_difference_edges():
    a, b = I.make([0], [10]), I.make([10], [20])
    assert _l(I.intersection(a, b)) == [[], []]          # a shared end point is no overlap
    assert _l(I.difference(a, b)) == [[0], [10]]
    assert _l(I.difference(b, a)) == [[10], [20]]
    assert _l(I.intersection(I.empty(), I.empty())) == [[], []]
    assert _l(I.difference(I.empty(), a)) == [[], []]
    assert _l(I.difference(a, I.empty())) == [[0], [10]]
    # a hole exactly at the ends: [0,10) \ ([0,2) ∪ [8,10)) = [2,8)
    assert _l(I.difference(a, I.make([0, 8], [2, 10]))) == [[2], [8]]
    # b covering a exactly leaves nothing; two pieces of b touching inside a merge first
    assert _l(I.difference(a, I.make([0], [10]))) == [[], []]
    assert _l(I.intersection(a, I.make([2, 5], [5, 7]))) == [[2], [7]]


def test_clip_hull_total_edges():
    a = I.make([0, 20], [10, 30])
    assert _l(I.clip(a, 10, 20)) == [[], []]           # exactly the gap: nothing, no empty piece
    assert _l(I.clip(a, 10, 21)) == [[20], [21]]
    assert _l(I.clip(a, -5, 0)) == [[], []]            # ends where a starts
    assert _l(I.clip(a, 30, 40)) == [[], []]           # starts where a ends
    assert _l(I.clip(a, 5, 25)) == [[5, 20], [10, 25]]
    assert _l(I.hull(a)) == [[0], [30]] and _l(I.hull(I.empty())) == [[], []]
    assert I.total(I.empty()) == 0 and I.total(I.make([0, 5], [10, 15])) == 15


def test_length_in_windows_edges():
    a = I.make([10, 30], [20, 40])
    lo = [0, 10, 20, 15, 30, 40, 25]
    hi = [10, 20, 30, 35, 40, 50, 25]
    # before, exactly the first piece, exactly the gap, straddling, exactly the second, after,
    # an empty window
    assert I.length_in_windows(a, lo, hi).tolist() == [0, 10, 0, 5 + 5, 10, 0, 0]
    assert I.length_in_windows(I.empty(), [0, 5], [10, 6]).tolist() == [0, 0]


def test_epoch_nanoseconds_stay_exact():
    """Real start times are ~1.76e18 ns, beyond float64's exact integers (2^53): no operation
    may pass them through floats."""
    t0 = 1_764_246_877_073_569_641  # odd: a float64 would round it
    a = I.make([t0, t0 + 100], [t0 + 10, t0 + 110])
    b = I.make([t0 + 5], [t0 + 105])
    assert _l(I.union_of(a, b)) == [[t0], [t0 + 110]]
    assert _l(I.intersection(a, b)) == [[t0 + 5, t0 + 100], [t0 + 10, t0 + 105]]
    assert _l(I.difference(b, a)) == [[t0 + 10], [t0 + 100]]
    assert _l(I.from_durations([t0], [3])) == [[t0], [t0 + 3]]
    assert _l(I.hull(a)) == [[t0], [t0 + 110]]
    assert I.length_in_windows(a, [t0 + 1], [t0 + 105]).tolist() == [9 + 5]


def test_results_are_int64_whatever_the_input():
    """Times are int64 ns everywhere (README): results keep that dtype for empty input, Python
    ints, floats (truncated like int()) and int32 arrays."""
    f = I.make([0.0, 20.9], [10.5, 30.0])
    assert f[0].tolist() == [0, 20] and f[1].tolist() == [10, 30]
    cases = [I.empty(), I.make([], []), f, I.from_durations([0.0, 5.5], [2.5, 1.0]),
             I.from_durations(np.array([1, 2], np.int32), np.array([1, 1], np.int32)),
             I.union(f), I.union_of(f, I.empty()), I.union_of(), I.intersection(f, f),
             I.difference(f, I.empty()), I.intersection(I.empty(), I.empty()), I.clip(f, 5, 25),
             I.hull(f), I.hull(I.empty())]
    for x in cases:
        assert x[0].dtype == np.int64 and x[1].dtype == np.int64, x
    w = I.length_in_windows(f, np.array([0.0]), np.array([100.0]))
    assert w.dtype == np.int64 and w.tolist() == [20]
    assert I.length_in_windows(I.empty(), [0], [9]).dtype == np.int64
