"""Integers in text, strictly: what the readers and the scanner accept as a number (no pyarrow,
so the scanner and the cache check stay light)."""

from __future__ import annotations


def is_digits(s: str) -> bool:
    """True for a non-empty run of ASCII digits. (``str.isdigit`` also accepts '²' and other
    Unicode digits, which ``int()`` then rejects.)"""
    return s.isascii() and s.isdigit()


def int_text(text) -> int | None:
    """The int of an ASCII decimal integer text (``" -12 "``), None for anything else
    (including more digits than Python converts, ~4300)."""
    s = str(text).strip()
    body = s[1:] if s[:1] in "+-" else s
    if not is_digits(body):
        return None
    try:
        return int(s)
    except ValueError:
        return None
