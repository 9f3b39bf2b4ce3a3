"""Integer codes of text key columns (ascendprof.analyze.codes): every row's code indexes its
own text in the returned list, -1 for null, whatever the Arrow layout; filled codes, groups of
several codes and per-distinct-text masks. Expected values by hand."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

import pyarrow.compute as pc

from ascendprof.analyze.codes import distinct_mask, filled_codes, group_codes, text_codes


def _decoded(codes: np.ndarray, values: list) -> list:
    return [None if c < 0 else values[c] for c in codes]


ROWS = ["ar", None, "bc", "ar", "", None, "bc"]


@pytest.mark.parametrize("layout", ["array", "one chunk", "three chunks", "dictionary",
                                    "dictionary chunks", "dictionaries per chunk"])
def test_codes_name_each_rows_text(layout):
    a = pa.array(ROWS, pa.string())
    col = {
        "array": a,
        "one chunk": pa.chunked_array([a]),
        "three chunks": pa.chunked_array([a[:2], a[2:2], a[2:]]),
        "dictionary": a.dictionary_encode(),
        "dictionary chunks": pa.chunked_array([a[:3], a[3:]]).dictionary_encode(),
        # one dictionary per chunk, as each rank's op rows arrive: unified before coding
        "dictionaries per chunk": pa.chunked_array([a[:3].dictionary_encode(),
                                                    a[3:].dictionary_encode()]),
    }[layout]
    codes, values = text_codes(col)
    assert codes.dtype == np.int32 and len(codes) == len(ROWS)
    assert _decoded(codes, values) == ROWS
    assert sorted(values) == ["", "ar", "bc"]  # each distinct text once
    # equal texts get equal codes, different texts different ones
    assert codes[0] == codes[3] and codes[2] == codes[6] and len(set(codes[[0, 2, 4]])) == 3
    assert codes[1] == codes[5] == -1


def test_no_nulls_and_empty():
    codes, values = text_codes(pa.chunked_array([pa.array(["x", "y", "x"])]))
    assert codes.tolist() == [values.index("x"), values.index("y"), values.index("x")]
    codes, values = text_codes(pa.chunked_array([], pa.string()))
    assert codes.tolist() == [] and values == []
    codes, values = text_codes(pa.array([], pa.string()))
    assert codes.tolist() == [] and codes.dtype == np.int32


def test_filled_codes_fill_nulls_and_merge_what_fn_makes_equal():
    col = pa.chunked_array([["ai_core", None, "AI_CORE"], ["", "hccl", None]])
    values, codes = filled_codes(col, fn=pc.utf8_upper)
    assert list(values[codes]) == ["AI_CORE", "", "AI_CORE", "", "HCCL", ""]
    assert len(set(values)) == len(values) == 3  # "ai_core"/"AI_CORE" and null/"" merged
    values, codes = filled_codes(col, null="?")
    assert list(values[codes]) == ["ai_core", "?", "AI_CORE", "", "hccl", "?"]


def test_group_codes_number_groups_by_first_appearance():
    a = np.array([3, 1, 3, 0, 1, 3])
    b = np.array([0, 2, 0, 1, 2, 1])
    keys, inv = group_codes(a, b)
    # pairs in order of appearance: (3,0) (1,2) (0,1) (3,1)
    assert keys.tolist() == [[3, 0], [1, 2], [0, 1], [3, 1]]
    assert inv.tolist() == [0, 1, 0, 2, 1, 3]
    keys, inv = group_codes(np.zeros(0, np.int32), np.zeros(0, np.int32))
    assert keys.shape == (0, 2) and inv.size == 0


def test_distinct_mask_is_the_rowwise_function():
    calls = []

    def fn(cores, names):  # elementwise; sees nulls as nulls
        calls.append(len(cores))
        return pc.or_(pc.fill_null(pc.equal(cores, "HCCL"), False),
                      pc.fill_null(pc.starts_with(names, "hcom_"), True))
    cores = pa.chunked_array([["HCCL", "AI_CORE", None, "AI_CORE"], ["AI_CORE", "HCCL"]])
    names = pa.chunked_array([["a", "hcom_b", "c", None], ["a", "a"]])
    # by hand: HCCL; hcom_ name; neither; null name -> True; neither; HCCL
    assert distinct_mask(fn, cores, names).tolist() == [True, True, False, True, False, True]
    assert calls == [5]  # (HCCL, a) twice: evaluated once
