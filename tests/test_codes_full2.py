"""ascendprof.analyze.codes against plain reference implementations written here (Python
dicts and loops): text_codes, filled_codes, group_codes and distinct_mask on many generated
inputs (every Arrow layout a text column arrives in; code arrays of int32 and int64 up to
the size where one int64 key per row no longer fits and the rows are sorted instead), plus
hand-written edge cases (empty, all-null, one row, a mask function returning numpy or
nulls). Only what the docstrings promise, and what the callers rely on (integer codes they
index and bincount with, one numpy bool per row they negate), is asserted."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ascendprof.analyze.codes import distinct_mask, filled_codes, group_codes, text_codes

SETTINGS = settings(max_examples=200, deadline=None, derandomize=True)

TEXTS = st.lists(st.one_of(st.none(), st.sampled_from(["", "a", "B", "b", "hcom_x", "AI_CORE",
                                                        "ai_core", "é", "a b"])),
                 max_size=30)


def _layout(rows: list, how: str, cuts: list):
    """The same texts as the Arrow layout ``how``; ``cuts`` chunk boundaries (sorted)."""
    typ = pa.large_string() if how == "large" else pa.string()
    a = pa.array(rows, typ)
    bounds = [0, *[min(c, len(rows)) for c in cuts], len(rows)]
    pieces = [a[s:e] for s, e in zip(bounds, bounds[1:])]
    if how in ("array", "large"):
        return a
    if how == "chunks":
        return pa.chunked_array(pieces, typ)
    if how == "dictionary":
        return a.dictionary_encode()
    if how == "dictionary chunks":  # one dictionary shared by the chunks
        return pa.chunked_array(pieces, typ).dictionary_encode()
    assert how == "dictionary per chunk"  # each rank's own dictionary
    return pa.chunked_array([p.dictionary_encode() for p in pieces],
                            pa.dictionary(pa.int32(), typ))


LAYOUTS = st.sampled_from(["array", "large", "chunks", "dictionary", "dictionary chunks",
                           "dictionary per chunk"])
CUTS = st.lists(st.integers(0, 30), max_size=3).map(sorted)


# ---- reference implementations -------------------------------------------------------------

def ref_groups(cols: list) -> tuple[list, list]:
    """Groups of rows by the tuple of their codes, numbered in order of first appearance."""
    first: dict = {}
    inverse = [first.setdefault(t, len(first)) for t in zip(*cols)]
    return [list(t) for t in first], inverse


def ref_filled(rows: list, null: str, fn) -> list:
    out = []
    for r in rows:
        t = null if r is None else r
        out.append(t if fn is None else fn(pa.array([t], pa.string()))[0].as_py())
    return out


# ---- text_codes ----------------------------------------------------------------------------

def _check_text_codes(rows, col):
    codes, values = text_codes(col)
    assert isinstance(codes, np.ndarray) and codes.dtype == np.int32
    assert len(codes) == len(rows)
    assert [None if c == -1 else values[c] for c in codes] == rows
    assert codes.min(initial=-1) >= -1
    assert len(set(values)) == len(values)  # each distinct text once
    assert set(values) >= {r for r in rows if r is not None}


@SETTINGS
@given(TEXTS, LAYOUTS, CUTS)
def test_text_codes_index_each_rows_text(rows, how, cuts):
    _check_text_codes(rows, _layout(rows, how, cuts))


@pytest.mark.parametrize("how", ["array", "chunks", "dictionary", "dictionary chunks",
                                 "dictionary per chunk"])
@pytest.mark.parametrize("rows", [[], [None], [None, None, None], ["x"], [""], ["x", None]])
def test_text_codes_edges(rows, how):
    _check_text_codes(rows, _layout(rows, how, [1]))
    _check_text_codes(rows, pa.chunked_array([_layout(rows, "array", [])]))  # one chunk


def test_text_codes_of_an_int_column():
    """Not text, but the same contract: each row's code indexes its own value."""
    rows = [5, None, 7, 5, -1]
    for col in (pa.array(rows, pa.int64()), pa.chunked_array([rows[:2], rows[2:]], pa.int64())):
        codes, values = text_codes(col)
        assert codes.dtype == np.int32
        assert [None if c == -1 else values[c] for c in codes] == rows


# ---- filled_codes --------------------------------------------------------------------------

@SETTINGS
@given(TEXTS, LAYOUTS, CUTS, st.sampled_from(["", "?", "a"]),
       st.sampled_from([None, pc.utf8_upper, pc.utf8_lower]))
def test_filled_codes_are_the_filled_mapped_column(rows, how, cuts, null, fn):
    values, codes = filled_codes(_layout(rows, how, cuts), null=null, fn=fn)
    assert isinstance(codes, np.ndarray) and codes.dtype == np.int32  # "int32 per row"
    assert values.dtype == object and len(codes) == len(rows)
    assert list(values[codes]) == ref_filled(rows, null, fn)
    assert len(set(values.tolist())) == len(values)  # equal texts merged: one object each
    assert all(isinstance(v, str) for v in values)


def test_filled_codes_edges():
    for rows in ([], [None], [None, None], ["x"]):
        values, codes = filled_codes(pa.array(rows, pa.string()), null="-")
        assert codes.dtype == np.int32 and list(values[codes]) == ["-" if r is None else r
                                                                   for r in rows]
    values, codes = filled_codes(pa.chunked_array([["a", None], [None, "A"]]), fn=pc.utf8_upper)
    assert list(values[codes]) == ["A", "", "", "A"] and len(values) == 2
    assert codes[0] == codes[3] and codes[1] == codes[2]


# ---- group_codes ---------------------------------------------------------------------------

@st.composite
def code_columns(draw):
    """1-4 code arrays of one length, each int32 or int64 with its own range of codes: small
    (dense groups), up to ~2^16 (the int64 key exceeds int32), or up to 2^31-1 / 2^40 (the
    product of the sizes passes 2^62 and the rows are sorted instead)."""
    n = draw(st.integers(0, 25))
    k = draw(st.integers(1, 4))
    cols = []
    for _ in range(k):
        dtype = draw(st.sampled_from([np.int32, np.int64]))
        top = draw(st.sampled_from([0, 1, 3, 70_000, 2**22, 2**31 - 1]
                                   + ([2**40] if dtype == np.int64 else [])))
        small = st.integers(0, min(top, 3))
        vals = draw(st.lists(st.one_of(small, st.integers(0, top), st.just(top)),
                             min_size=n, max_size=n))
        cols.append(np.array(vals, dtype))
    return cols


def _check_groups(cols):
    keys, inv = group_codes(*cols)
    want_keys, want_inv = ref_groups([c.tolist() for c in cols])
    assert isinstance(keys, np.ndarray) and isinstance(inv, np.ndarray)
    # integer arrays: callers index with them and np.bincount them
    assert np.issubdtype(keys.dtype, np.integer) and np.issubdtype(inv.dtype, np.integer)
    assert keys.shape == (len(want_keys), len(cols))
    assert keys.tolist() == want_keys
    assert inv.shape == (len(cols[0]),) and inv.tolist() == want_inv
    np.bincount(inv)  # as the callers count groups


@SETTINGS
@given(code_columns())
def test_group_codes_number_groups_by_first_appearance(cols):
    _check_groups(cols)


def test_group_codes_edges():
    _check_groups([np.zeros(0, np.int32)])
    _check_groups([np.zeros(0, np.int64), np.zeros(0, np.int32), np.zeros(0, np.int64)])
    _check_groups([np.array([0], np.int32)])
    _check_groups([np.array([7], np.int64), np.array([2**31 - 1], np.int32)])
    _check_groups([np.array([0, 0, 0], np.int32), np.array([1, 1, 1], np.int64)])


def test_group_codes_int32_codes_whose_key_passes_int32():
    """filled_codes gives int32 codes: the joined key (a * 70001 + b) must not wrap in int32."""
    a = np.array([70_000, 1, 70_000, 0, 1], np.int32)
    b = np.array([70_000, 5, 70_000, 70_000, 4], np.int32)
    _check_groups([a, b])
    keys, inv = group_codes(a, b)
    assert keys.tolist() == [[70_000, 70_000], [1, 5], [0, 70_000], [1, 4]]
    assert inv.tolist() == [0, 1, 0, 2, 3]


@pytest.mark.parametrize("top", [2**21 - 1, 2**22 - 1, 2**31 - 1])
def test_group_codes_when_no_int64_key_fits(top):
    """Three code arrays whose sizes multiply past 2^62 (2^63 .. 2^93): the joined key would
    wrap in int64, so groups are found by sorting; still first-appearance order."""
    t = top
    cols = [np.array([t, 0, t, 1, t, 0], np.int64), np.array([t, t, t, 0, 1, t], np.int64),
            np.array([t, 2, t, t, t, 2], np.int64)]
    keys, inv = group_codes(*cols)
    # by hand: (t,t,t) (0,t,2) (1,0,t) (t,1,t); rows 0/2 and 1/5 repeat a group
    assert keys.tolist() == [[t, t, t], [0, t, 2], [1, 0, t], [t, 1, t]]
    assert inv.tolist() == [0, 1, 0, 2, 3, 1]
    assert np.issubdtype(inv.dtype, np.integer) and np.issubdtype(keys.dtype, np.integer)
    _check_groups([c.astype(np.int32) for c in cols])


# ---- distinct_mask -------------------------------------------------------------------------

def _fn_one(a):
    return pc.fill_null(pc.starts_with(a, "a"), True)


def _fn_two(a, b):
    return pc.or_(pc.fill_null(pc.equal(pc.utf8_upper(a), "AI_CORE"), False),
                  pc.fill_null(pc.equal(a, b), False))


@SETTINGS
@given(TEXTS, LAYOUTS, CUTS, st.data())
def test_distinct_mask_is_fn_of_the_whole_columns(rows, how, cuts, data):
    other = data.draw(st.lists(st.sampled_from([None, "a", "B", ""]), min_size=len(rows),
                               max_size=len(rows)))
    col = _layout(rows, how, cuts)
    col2 = _layout(other, data.draw(LAYOUTS), data.draw(CUTS))
    got = distinct_mask(_fn_one, col)
    assert got.dtype == bool and got.tolist() == _fn_one(pa.array(rows, pa.string())).to_pylist()
    got = distinct_mask(_fn_two, col, col2)
    want = _fn_two(pa.array(rows, pa.string()), pa.array(other, pa.string())).to_pylist()
    assert got.dtype == bool and got.tolist() == want


def test_distinct_mask_gives_fn_string_arrays_even_of_all_null_columns():
    seen = []

    def fn(a):
        seen.append(a.type)
        return pc.fill_null(pc.starts_with(a, "x"), False)  # a string function

    assert distinct_mask(fn, pa.array([None, None], pa.string())).tolist() == [False, False]
    assert distinct_mask(fn, pa.chunked_array([[None], [None]], pa.string())).tolist() == \
        [False, False]
    assert seen == [pa.string(), pa.string()]


def test_distinct_mask_of_empty_columns():
    def fn(a, b):
        return pc.and_(pc.is_null(a), pc.is_null(b))
    out = distinct_mask(fn, pa.array([], pa.string()), pa.chunked_array([], pa.string()))
    assert isinstance(out, np.ndarray) and out.dtype == bool and out.tolist() == []


def test_distinct_mask_fn_may_return_numpy():
    def fn(a):  # "as an Arrow or numpy array"
        return np.array([v is not None and v.startswith("k") for v in a.to_pylist()])
    col = pa.chunked_array([["k1", None, "z"], ["k1", "kz"]])
    assert distinct_mask(fn, col).tolist() == [True, False, False, True, True]


def test_distinct_mask_is_one_bool_per_row_even_where_fn_gives_null():
    """fn passes nulls through (pc.equal of a null): the mask is still a numpy bool array (the
    callers negate it with ~ and combine it with &), the null rows False."""
    col = pa.array(["HCCL", None, "AI_CORE", None, "HCCL"])
    out = distinct_mask(lambda a: pc.equal(a, "HCCL"), col)
    assert out.dtype == bool
    assert out.tolist() == [True, False, False, False, True]
    assert (~out).tolist() == [False, True, True, True, False]
