"""Spreadsheet safety of CSV outputs (OWASP, "CSV Injection"): a text cell a spreadsheet would
run as a formula gets a leading ``'``; :func:`csv_unsafe` undoes it when ascendprof reads its
own CSV outputs back."""

from __future__ import annotations

import re

#: a CSV cell starting with one of these is a formula to a spreadsheet (OWASP, "CSV Injection")
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
_FORMULA_RE = r"^[=+\-@\t\r]"
#: ... unless it is a plain number ("-1.5e3") or a lone sign, which no spreadsheet runs
_NUMBER_RE = r"^[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?$|^[+-]$"


def csv_safe(cell):
    """``cell`` as written to a CSV output: a text that a spreadsheet would run as a formula
    (starting with ``= + - @``, TAB or CR, and not a plain number) gets a leading ``'``, as
    OWASP recommends; anything else is unchanged. Parquet tables keep the raw text."""
    if isinstance(cell, str) and cell.startswith(FORMULA_START) and not re.match(_NUMBER_RE, cell):
        return "'" + cell
    return cell


def csv_unsafe(cell):
    """The text :func:`csv_safe` was given, from a cell read back from one of ascendprof's
    CSV outputs: a leading ``'`` before a formula start is removed (a name that really begins
    with ``'`` followed by one of those characters cannot be told apart and loses its quote)."""
    if isinstance(cell, str) and len(cell) > 1 and cell[0] == "'" and cell[1] in FORMULA_START:
        return cell[1:]
    return cell


def csv_safe_frame(df):
    """``df`` with :func:`csv_safe` applied to its text columns (vectorised; a copy only when
    a cell changes)."""
    out = None
    for col in df.columns:
        s = df[col]
        if s.dtype != object and str(s.dtype) not in ("string", "str"):
            continue
        try:  # .str gives NaN for the cells that are not text (numbers in an object column)
            risky = s.str.match(_FORMULA_RE, na=False) & ~s.str.match(_NUMBER_RE, na=False)
        except AttributeError:  # no text at all
            continue
        if risky.any():
            out = df.copy() if out is None else out
            out[col] = s.mask(risky, "'" + s[risky])
    return df if out is None else out


