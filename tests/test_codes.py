"""Integer codes of text key columns (ascendprof.analyze.verdicts.opsplit.text_codes): every
row's code indexes its own text in the returned list, -1 for null, whatever the Arrow layout.
Expected values by hand."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from ascendprof.analyze.verdicts.opsplit import text_codes


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
