"""Exact microsecond-text -> int ns conversion (spec §A general conventions)."""

from decimal import Decimal

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ascendprof.model.units import us_column_to_ns, us_text_to_ns


def test_real_kernel_start_time_is_exact():
    # Qwen3 rank 0 kernel_details.csv, first row: "1764246877073569.640\t"
    assert us_text_to_ns("1764246877073569.640\t") == 1_764_246_877_073_569_640


def test_float64_would_lose_it():
    # the reason for parsing text: float64 rounds this value to a different ns
    assert round(float("1764246877073569.641") * 1000) != 1_764_246_877_073_569_641
    assert us_text_to_ns("1764246877073569.641") == 1_764_246_877_073_569_641


@pytest.mark.parametrize("text,ns", [("0", 0), ("1.5", 1500), (".25", 250), ("12.", 12000),
                                     ("-3.001", -3001), ("2.0005", 2001), ("2.0004", 2000),
                                     ("N/A", None), ("", None), (" 7 ", 7000)])
def test_small_cases(text, ns):
    assert us_text_to_ns(text) == ns


def test_rejects_text():
    with pytest.raises(ValueError):
        us_text_to_ns("abc")


@settings(deadline=None)  # timing is irrelevant here
@given(st.integers(min_value=0, max_value=9 * 10**15), st.integers(min_value=0, max_value=999))
def test_column_matches_decimal(whole, frac):
    text = f"{whole}.{frac:03d}\t"
    expected = int(Decimal(f"{whole}.{frac:03d}") * 1000)
    assert us_text_to_ns(text) == expected
    assert us_column_to_ns(pa.array([text, None])).to_pylist() == [expected, None]


def test_column_rejects_non_numeric():
    with pytest.raises(ValueError, match="abc"):
        us_column_to_ns(pa.array(["1.0", "abc"]))


def test_column_out_of_range_is_an_error():
    with pytest.raises(ValueError, match="out of range"):
        us_column_to_ns(pa.array(["99999999999999999999.000"]))
