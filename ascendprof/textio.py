"""Reading profiler text files robustly: CSV with BOM / CRLF / trailing TABs, JSON with orjson.

All readers go through these helpers, so every damaged file turns into one
:class:`~ascendprof.errors.InputError` that names the file and the problem.
"""

from __future__ import annotations

import io
from pathlib import Path

import orjson

from ascendprof.errors import InputError


def read_payload(path: Path) -> bytes:
    """The bytes of a text file without a UTF-8 BOM. Raises InputError when the file cannot be
    read (a directory, no permission) or holds nothing but white space."""
    try:
        data = Path(path).read_bytes()
    except OSError as e:
        raise InputError(path, f"cannot read: {e.strerror or e}") from None
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    if not data.strip():
        raise InputError(path, "empty file")
    return data


def read_csv(path: Path, *, required: tuple[str, ...] = (), aliases: dict[str, str] | None = None
             ):
    """Read a profiler CSV as an all-string Arrow table (header row first, UTF-8).

    Handles a UTF-8 BOM, CRLF line ends, and the trailing TAB of absolute timestamps (kept in
    the text; :func:`ascendprof.units.us_column_to_ns` strips it). ``aliases`` maps an older
    column name to the current one (e.g. ``{"Block Dim": "Block Num"}``); header names are
    stripped of whitespace.

    Raises :class:`InputError` when the file cannot be read, is empty, is not UTF-8, lacks a
    header row, has rows of the wrong width, or lacks a ``required`` column (after aliases).
    """
    import pyarrow as pa  # deferred: scan and --help must start fast
    import pyarrow.csv as pacsv

    path = Path(path)
    data = read_payload(path)
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise InputError(path, "not UTF-8 text", where=e.start) from None
    header_line = data.split(b"\n", 1)[0].rstrip(b"\r")
    try:
        table = pacsv.read_csv(
            io.BytesIO(data),
            read_options=pacsv.ReadOptions(block_size=1 << 24),
            parse_options=pacsv.ParseOptions(newlines_in_values=False),
            convert_options=pacsv.ConvertOptions(
                column_types={n: pa.string() for n in _header_names(header_line)},
                strings_can_be_null=True,
                null_values=["", "N/A"],
            ),
        )
    except (pa.ArrowInvalid, pa.ArrowKeyError, ValueError) as e:
        msg = str(e).splitlines()[0]
        raise InputError(path, f"malformed CSV: {msg}") from None
    names = [n.strip() for n in table.column_names]
    if aliases:
        names = [aliases.get(n, n) for n in names]
    if len(set(names)) != len(names):
        seen, uniq = set(), []
        for n in names:  # keep the first of duplicated headers
            uniq.append(n if n not in seen else f"{n}.dup")
            seen.add(n)
        names = uniq
    table = table.rename_columns(names)
    missing = [c for c in required if c not in table.column_names]
    if missing:
        raise InputError(path, f"missing column(s) {', '.join(missing)}")
    return table


def _header_names(line: bytes) -> list[str]:
    import csv

    try:
        return next(csv.reader([line.decode("utf-8", "replace")]), [])
    except csv.Error as e:  # e.g. a lone CR inside the header line
        raise ValueError(f"header row: {e}") from None


def read_json(path: Path):
    """Load a small JSON file (metadata, communication*.json) with orjson.

    Raises :class:`InputError` naming the byte offset when the JSON is invalid or truncated.
    Not for trace_view.json: that is streamed (:mod:`ascendprof.readers.trace_view`).
    """
    path = Path(path)
    data = read_payload(path)
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as e:
        raise InputError(path, f"invalid JSON ({e.msg})", where=e.pos) from None


def is_digits(s: str) -> bool:
    """True for a non-empty run of ASCII digits. (``str.isdigit`` also accepts '²' and other
    Unicode digits, which ``int()`` then rejects.)"""
    return s.isascii() and s.isdigit()


def int_text(text) -> int | None:
    """The int of an ASCII decimal integer text (``" -12 "``), None for anything else."""
    s = str(text).strip()
    body = s[1:] if s[:1] in "+-" else s
    return int(s) if is_digits(body) else None
