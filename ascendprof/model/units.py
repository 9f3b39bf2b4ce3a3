"""Unit conversion to integer nanoseconds.

Profiler text writes absolute times as microseconds with three decimals and a trailing TAB
(``"1764246877073569.640\\t"``, spec §A). A float64 cannot hold 16 integer digits plus 3 decimals
exactly, so absolute times are parsed as decimal text: ``ns = int(integer part) * 1000 +
fraction padded to 3 digits`` (the trick torch_npu's ``convert_us2ns`` uses). Durations are small
enough for ``round(us * 1000)``.
"""

from __future__ import annotations

import math

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ascendprof.model.numtext import is_digits


NS_PER_US = 1_000
NS_PER_MS = 1_000_000

_MISSING = {"", "N/A", "NA", "nan", "NaN", "None", "null", "-"}


def us_text_to_ns(text) -> int | None:
    """Exact conversion of one microsecond value (text or number) to int ns; None if missing.

    Raises ``ValueError`` (and nothing else) for text that is not a number, for infinity and
    for a value outside int64 nanoseconds.
    """
    if text is None:
        return None
    if isinstance(text, (int, float)):
        if isinstance(text, float) and math.isnan(text):
            return None
        return _in_range(_round(text * NS_PER_US, text), text)
    s = str(text).strip().strip("\t").strip()
    if s in _MISSING:
        return None
    neg = s.startswith("-")
    if neg or s.startswith("+"):
        s = s[1:]
    if ("e" in s or "E" in s) and s.isascii():
        try:
            v = _round(float(s) * NS_PER_US, text)
        except ValueError:
            raise ValueError(f"not a number: {text!r}") from None
        return _in_range(-v if neg else v, text)
    whole, _, frac = s.partition(".")
    if not (whole or frac) or (whole and not is_digits(whole)) or (frac and not is_digits(frac)):
        raise ValueError(f"not a number: {text!r}")
    ns = int(whole or "0") * NS_PER_US + int((frac + "000")[:3])
    if len(frac) > 3 and int(frac[3]) >= 5:  # round half up on the 4th decimal
        ns += 1
    return _in_range(-ns if neg else ns, text)


def _round(v: float, text) -> int:
    if math.isinf(v) or math.isnan(v):
        raise ValueError(f"not a finite number: {text!r}")
    return round(v)


def _in_range(ns: int, text) -> int:
    if not -2**63 <= ns < 2**63:
        raise ValueError(f"value out of range for int64 nanoseconds: {text!r}")
    return ns


def us_column_to_ns(col: pa.Array | pa.ChunkedArray) -> pa.Array:
    """Vectorised :func:`us_text_to_ns` for a string (or numeric) column; missing -> null.

    Numeric input is treated as a duration-sized float (``round(us * 1000)``); decimal input
    (up to 3 decimals, as :func:`ascendprof.sysio.textio.read_csv` parses it) converts exactly. Raises
    ``ValueError`` naming the first bad value when a cell is not a number.
    """
    if isinstance(col, pa.ChunkedArray):
        col = col.combine_chunks()
    if pa.types.is_integer(col.type) or pa.types.is_floating(col.type):
        try:
            return pc.round(pc.multiply(col.cast(pa.float64()), NS_PER_US)).cast(pa.int64())
        except pa.ArrowInvalid:  # inf / nan / beyond int64
            raise ValueError("value not finite or out of range for int64 nanoseconds") from None
    if pa.types.is_null(col.type):
        return pa.nulls(len(col), pa.int64())
    if pa.types.is_decimal(col.type) and col.type.scale <= 3:
        # Exact decimal (read_csv parses us text with 3 decimals so): ns = us * 1000, integral.
        try:
            ns = pc.multiply(col, pa.scalar(1000, pa.decimal128(4, 0)))
            return ns.cast(pa.int64())
        except pa.ArrowInvalid:
            raise ValueError("value out of range for int64 nanoseconds") from None
    if pa.types.is_string(col.type):
        try:  # plain decimal text with up to 3 decimals (the usual case): one exact cast
            return us_column_to_ns(col.cast(pa.decimal128(22, 3)))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            pass  # spaces, missing-value spellings, more decimals, bad text: the exact path
    s = pc.utf8_trim_whitespace(col.cast(pa.string()))
    s = pc.if_else(pc.is_in(s, pa.array(sorted(_MISSING))), pa.scalar(None, pa.string()), s)
    ok = pc.match_substring_regex(s, r"^-?\d*(\.\d*)?$")
    ok = pc.and_(ok, pc.match_substring_regex(s, r"\d"))
    bad = pc.and_(pc.is_valid(s), pc.invert(pc.fill_null(ok, False)))
    if pc.any(bad).as_py():
        first = s.filter(bad)[0].as_py()
        if not _looks_scientific(first):
            raise ValueError(f"not a number: {first!r}")
        return pa.array([us_text_to_ns(v) for v in s.to_pylist()], pa.int64())
    neg = pc.fill_null(pc.starts_with(s, "-"), False)
    s = pc.utf8_ltrim(s, "-")
    # append "." where absent so every row splits into exactly two parts (list_element on a
    # one-element list fails even in the unused branch of if_else)
    s = pc.if_else(pc.match_substring(s, "."), s, pc.binary_join_element_wise(s, ".", ""))
    parts = pc.split_pattern(s, ".", max_splits=1)
    whole = pc.list_element(parts, 0)
    whole = pc.if_else(pc.equal(whole, ""), "0", whole)
    frac = pc.list_element(parts, 1)
    frac3 = pc.utf8_slice_codeunits(pc.utf8_rpad(frac, 4, "0"), 0, 3)
    fourth = pc.utf8_slice_codeunits(pc.utf8_rpad(frac, 4, "0"), 3, 4)
    try:  # checked: a value past int64 ns (year 2262) is bad input, not a wrap-around
        ns = pc.add_checked(pc.multiply_checked(whole.cast(pa.int64()), NS_PER_US),
                            frac3.cast(pa.int64()))
    except pa.ArrowInvalid:
        raise ValueError("value out of range for int64 nanoseconds") from None
    ns = pc.add(ns, pc.greater_equal(fourth.cast(pa.int64()), 5).cast(pa.int64()))
    return pc.if_else(neg, pc.negate(ns), ns)


def _looks_scientific(v: str) -> bool:
    try:
        float(v)
        return True
    except ValueError:
        return False


def ms_to_ns(ms) -> int | None:
    """Milliseconds (float, as communication.json writes them) to int ns; None if missing."""
    if ms is None or (isinstance(ms, float) and math.isnan(ms)):
        return None
    return _in_range(_round(float(ms) * NS_PER_MS, ms), ms)


def ms_list_to_ns(values: list) -> pa.Array:
    """Vectorised :func:`ms_to_ns` over a list of ms numbers (int / float / None) -> int64 array,
    missing (None, NaN) -> null. Same results as the per-value function (one IEEE product by
    10^6, round half to even); raises the same ``ValueError`` as :func:`ms_to_ns` for the first
    value that is not finite or beyond int64 ns after scaling."""
    try:
        ms = np.array(values, dtype=np.float64)  # None -> nan
    except (TypeError, ValueError, OverflowError):
        ms = None
    got = None if ms is None else ms_vector_to_ns(ms)
    return got if got is not None else pa.array([ms_to_ns(v) for v in values], pa.int64())


def ms_vector_to_ns(ms) -> pa.Array | None:
    """The vector core of :func:`ms_list_to_ns`: ms (float64 ndarray, nan = missing) -> int64
    ns array; None when a value is not finite or beyond int64 ns (the caller then goes value by
    value, which names it)."""
    missing = np.isnan(ms)
    with np.errstate(over="ignore", invalid="ignore"):
        ns = np.rint(ms * NS_PER_MS)
    ok = missing | ((ns >= -2.0**63) & (ns < 2.0**63))  # inf fails both comparisons
    if not ok.all():
        return None
    ns[missing] = 0
    return pa.array(ns.astype(np.int64), pa.int64(), mask=missing if missing.any() else None)
