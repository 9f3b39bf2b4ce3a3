"""Reading profiler text files robustly: CSV with BOM / CRLF / trailing TABs, JSON with orjson.

All readers go through these helpers, so every damaged file turns into one
:class:`~ascendprof.model.errors.InputError` that names the file and the problem.
"""

from __future__ import annotations

import csv
import os
import re
import stat
from pathlib import Path

import orjson

from ascendprof.model.errors import InputError


#: the most a metadata file (profiler_info_N.json, profiler_metadata.json, PROF_ info.json,
#: start logs) may hold; real ones are a few KB. A larger one is reported, not read.
METADATA_MAX_BYTES = 16 << 20


def file_kind(mode: int) -> str:
    """What a ``st_mode`` is, in words ("FIFO", "character device" ...)."""
    for test, name in ((stat.S_ISREG, "regular file"), (stat.S_ISDIR, "directory"),
                       (stat.S_ISFIFO, "FIFO"), (stat.S_ISCHR, "character device"),
                       (stat.S_ISBLK, "block device"), (stat.S_ISSOCK, "socket")):
        if test(mode):
            return name
    return "special file"


def open_regular(path: Path, max_bytes: int | None = None):
    """``path`` opened for binary reading, only when it is a regular file (after following
    symlinks) of at most ``max_bytes``. Opened non-blocking and checked on the open file, so a
    FIFO never blocks and a device (/dev/zero) is never read. Raises InputError naming the file
    (not a regular file, too large, cannot be opened)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC
                     | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_BINARY", 0))
    except OSError as e:
        raise InputError(path, f"cannot read: {e.strerror or e}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise InputError(path, f"not a regular file ({file_kind(st.st_mode)}); not read")
        if max_bytes is not None and st.st_size > max_bytes:
            raise InputError(path, f"{st.st_size} bytes, more than the {max_bytes >> 20} MB a "
                                   f"file of this kind may hold; not read")
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_regular(path: Path, max_bytes: int | None = None) -> bytes:
    """The bytes of the regular file ``path`` (see :func:`open_regular`; a file that grows
    beyond ``max_bytes`` while read is refused too). Raises InputError."""
    with open_regular(path, max_bytes) as f:
        try:
            data = f.read() if max_bytes is None else f.read(max_bytes + 1)
        except OSError as e:
            raise InputError(path, f"cannot read: {e.strerror or e}") from None
    if max_bytes is not None and len(data) > max_bytes:
        raise InputError(path, f"more than the {max_bytes >> 20} MB a file of this kind may "
                               f"hold; not read")
    return data


def is_regular(path) -> bool:
    """True when ``path`` is a regular file after following symlinks (never opens it)."""
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except (OSError, ValueError):
        return False


def read_payload(path: Path, max_bytes: int | None = None, *, as_json: bool = False) -> bytes:
    """The bytes of a text file without a UTF-8 BOM; with ``as_json``, the BOM is three spaces
    instead (white space to JSON), so an offset in the bytes is the offset in the file, as the
    streamed readers name it. Raises InputError when the file cannot be read (a directory, a
    FIFO or device, no permission, more than ``max_bytes``) or holds nothing but white space."""
    data = read_regular(path, max_bytes)
    if data.startswith(b"\xef\xbb\xbf"):
        data = b"   " + data[3:] if as_json else data[3:]
    if not data or data.isspace():  # isspace scans without copying (strip() copies 100s of MB)
        raise InputError(path, "empty file")
    return data


#: Cell texts read as null when a CSV is read with ``types`` (the spellings profilers use for
#: "no value"; the all-text read nulls only "" and "N/A" and leaves the rest to the caller).
MISSING_CELLS = ("", "N/A", "NA", "None", "none", "null", "nan", "NaN", "-")

# How many columns the typed read may demote to text (one re-parse each) before reading all text.
_MAX_DEMOTIONS = 3
_COLUMN_RE = re.compile(r"In CSV column #(\d+)")


def read_csv(path: Path, *, required: tuple[str, ...] = (), aliases: dict[str, str] | None = None,
             types: dict | None = None, other=None, bad_rows: list | None = None):
    """Read a profiler CSV into an Arrow table (header row first, UTF-8).

    Handles a UTF-8 BOM, CRLF line ends, and the trailing TAB of absolute timestamps. ``aliases``
    maps an older column name to the current one (e.g. ``{"Block Dim": "Block Num"}``); header
    names are stripped of whitespace.

    Without ``types`` every column is text (only "" and "N/A" are null) and a caller converts.
    With ``types`` (column name after aliases -> Arrow type; ``other`` is the type of the columns
    not named, default text) the columns are parsed into those types while reading, which is
    several times faster than converting text afterwards, and every :data:`MISSING_CELLS`
    spelling is null. A column with a cell that does not parse as its type comes back as text
    instead (so the caller's text conversion can name the bad cell); a file with duplicated
    headers is read all text. Absolute times in us parse exactly as ``decimal128(p, 3)``, unless
    the file holds E-notation (``E+``), which a spreadsheet writes: decimal columns are then
    text, for the caller to see what lost precision.

    ``bad_rows``: when a list is given, a data row with another number of fields than the
    header (a file cut off mid-row, a stray comma) is left out and ``(line, fields, expected)``
    appended to it (line 1-based, the header being line 1; None when unknown) -- the caller
    reports them; without it such a row raises.

    Raises :class:`InputError` when the file cannot be read, is empty, is not UTF-8, lacks a
    header row (its first line blank included), has rows of the wrong width (unless
    ``bad_rows``), or lacks a ``required`` column (after aliases).
    """
    path = Path(path)
    data = read_payload(path)
    nl = _line_end(data, HEADER_MAX_BYTES + 1)
    # without a line end, only the first 1 MB (+1 byte) is the header line, as for csv_header
    header = _checked_header(path, data[:HEADER_MAX_BYTES + 1] if nl < 0 else data[:nl],
                             nl < 0 and len(data) > HEADER_MAX_BYTES)
    if nl == 0:  # Arrow would skip the blank line, take line 2 for the header and infer types
        raise InputError(path, "the first line is blank: no header row", where="line 1")
    if not data.isascii():  # isascii is a quick scan; most profiler CSVs are pure ASCII
        try:
            data.decode("utf-8")
        except UnicodeDecodeError as e:
            raise InputError(path, "not UTF-8 text", where=e.start) from None
    finals = [(aliases or {}).get(n.strip(), n.strip()) for n in header]
    table = None
    skipped: list = []
    collect = skipped if bad_rows is not None else None
    if types is not None and _e_notation_in(data):  # a spreadsheet's E-notation: the exact
        types = decimals_as_text(types)  # decimal read would take it as written; text shows it
    if types is not None and len(set(finals)) == len(finals) and len(set(header)) == len(header):
        table = _read_typed(data, header, finals, types, other, collect)
    if table is None:
        skipped.clear()
        table = _read_text(path, data, header, collect)
    if bad_rows is not None:
        bad_rows.extend(skipped)
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


def _e_notation_in(data: bytes) -> bool:
    """Whether ``data`` holds a positive exponent (``E+`` / ``e+``) as a spreadsheet writes
    numbers: then a decimal column is read as text, for the caller to see what lost precision."""
    return b"E+" in data or b"e+" in data


def decimals_as_text(types: dict) -> dict:
    """``types`` (column -> Arrow type) with every decimal column read as text instead: for a
    file holding E-notation (:func:`holds_e_notation`), whose times the caller's text
    conversion checks for lost precision."""
    import pyarrow as pa

    return {k: pa.string() if pa.types.is_decimal(v) else v for k, v in types.items()}


def holds_e_notation(path: Path, block_bytes: int = 16 << 20) -> bool:
    """:func:`read_csv`'s E-notation check for a file read in batches (never held whole): the
    file scanned ``block_bytes`` at a time, each block with the previous block's last byte (so
    a pair split between blocks is seen). Raises InputError when the file cannot be read."""
    try:
        with open_regular(Path(path)) as f:
            tail = b""
            while True:
                block = f.read(block_bytes)
                if not block:
                    return False
                if _e_notation_in(tail + block[:1]) or _e_notation_in(block):
                    return True
                tail = block[-1:]
    except OSError as e:
        raise InputError(path, f"cannot read: {e.strerror or e}") from None


#: Arrow parses a CSV of this size or more with its thread pool (1 MB blocks in parallel). A
#: smaller one is read in the calling thread: the hand-offs cost more than they bring (a
#: 0.3 MB kernel_details.csv of the benchmark: 8.3-9.2 -> 7.4-7.5 ms of CPU), and in the
#: process pool the other cores are busy anyway.
THREADED_CSV_BYTES = 4 << 20


def _csv_options(column_types: dict, null_values, size: int, bad_rows: list | None = None):
    import pyarrow.csv as pacsv

    handler = None
    if bad_rows is not None:
        def handler(row):  # noqa: E306 - Arrow calls it for a row of the wrong width
            bad_rows.append((row.number, row.actual_columns, row.expected_columns))
            return "skip"
    return dict(
        read_options=pacsv.ReadOptions(block_size=1 << 20,  # 1 MB: more parallel, cache-sized
                                       use_threads=size >= THREADED_CSV_BYTES),
        parse_options=pacsv.ParseOptions(newlines_in_values=False,
                                         invalid_row_handler=handler),
        convert_options=pacsv.ConvertOptions(column_types=column_types, strings_can_be_null=True,
                                             null_values=list(null_values)),
    )


def _read_text(path: Path, data: bytes, header: list[str], bad_rows: list | None = None):
    """The exact, all-text read (also the fallback of the typed one). Raises InputError."""
    import pyarrow as pa
    import pyarrow.csv as pacsv

    try:
        return pacsv.read_csv(pa.py_buffer(data),
                              **_csv_options({n: pa.string() for n in header}, ["", "N/A"],
                                             len(data), bad_rows))
    except (pa.ArrowInvalid, pa.ArrowKeyError, ValueError) as e:
        msg = str(e).splitlines()[0]
        raise InputError(path, f"malformed CSV: {msg}") from None


def _read_typed(data: bytes, header: list[str], finals: list[str], types: dict, other,
                bad_rows: list | None = None):
    """The typed read of :func:`read_csv`; None when it cannot be done (the caller then reads all
    text, which also produces the precise error for a malformed file)."""
    import pyarrow as pa
    import pyarrow.csv as pacsv

    col_types = {raw: types.get(fin, other if other is not None else pa.string())
                 for raw, fin in zip(header, finals)}
    for _ in range(_MAX_DEMOTIONS + 1):
        if bad_rows is not None:
            bad_rows.clear()  # the rows of this attempt only
        try:
            table = pacsv.read_csv(pa.py_buffer(data),
                                   **_csv_options(col_types, MISSING_CELLS, len(data), bad_rows))
            # Arrow's header parse must agree with ours, or some column was type-inferred
            return table if table.column_names == header else None
        except (pa.ArrowInvalid, pa.ArrowKeyError, ValueError) as e:
            m = _COLUMN_RE.search(str(e))
            if not m or int(m.group(1)) >= len(header):
                return None  # not a cell conversion error (e.g. rows of the wrong width)
            raw = header[int(m.group(1))]
            if col_types[raw] == pa.string():
                return None
            col_types[raw] = pa.string()  # the caller's text conversion names the bad cell
    return None


#: text per batch of a CSV read in batches (:func:`open_csv_stream`): what the caller converts
#: and spills at once. 16 MB batches held ~90 MB of parsed and converted columns on a 70 MB
#: kernel_details.csv, 4 MB ones ~30 MB.
STREAM_BLOCK_BYTES = 4 << 20
#: the block size Arrow parses a streamed CSV in; a batch joins the blocks of
#: :data:`STREAM_BLOCK_BYTES`. Arrow's streaming reader reads up to 32 blocks ahead of the
#: parse (its background reader's queue), so this bounds the text in flight to ~32 MB (16 MB
#: blocks held ~0.5 GB of a 1 GB file in flight)
STREAM_PARSE_BYTES = 1 << 20


#: the longest header line a CSV may have (real profiler headers are < 2 KB); a file without a
#: line end in its first MB (a NUL-filled file left by a crash) is refused after reading that MB
HEADER_MAX_BYTES = 1 << 20


def csv_header(path: Path) -> list[str]:
    """The header names of a CSV as written (first line, UTF-8 BOM dropped). Reads at most
    :data:`HEADER_MAX_BYTES` (each block searched once: bounded work at any file size). Raises
    InputError when the file cannot be read, is empty, the header is malformed, holds NUL bytes
    or has no line end within that limit."""
    blocks: list[bytes] = []
    size = 0
    try:
        with open_regular(path) as f:
            while size <= HEADER_MAX_BYTES:
                more = f.read(1 << 16)
                if not more:
                    break
                blocks.append(more)
                size += len(more)
                if b"\n" in more or b"\r" in more:
                    break
    except OSError as e:
        raise InputError(path, f"cannot read: {e.strerror or e}") from None
    head = b"".join(blocks)
    if head.startswith(b"\xef\xbb\xbf"):
        head = head[3:]
    if not head.strip():
        raise InputError(path, "empty file")
    nl = _line_end(head, len(head))
    return _checked_header(path, head if nl < 0 else head[:nl], nl < 0 and size > HEADER_MAX_BYTES)


def _line_end(data: bytes, stop: int) -> int:
    """Where the first line of ``data[:stop]`` ends: its first CR or LF (Arrow's CSV parser ends
    a row at either, and a spreadsheet's "CSV (Macintosh)" ends every row with a lone CR); -1
    when there is neither."""
    ends = [i for i in (data.find(b"\n", 0, stop), data.find(b"\r", 0, stop)) if i >= 0]
    return min(ends) if ends else -1


def _checked_header(path: Path, line: bytes, unended: bool) -> list[str]:
    """The names of the header ``line`` (InputError for NUL bytes, an over-long line or a
    malformed one)."""
    if line.startswith((b"\xff\xfe", b"\xfe\xff")):  # its NUL bytes are not damage
        raise InputError(path, "UTF-16 text, not UTF-8 (a spreadsheet's \"Unicode Text\" "
                               "export?): save it as CSV UTF-8; not read")
    if b"\0" in line:
        raise InputError(path, "NUL bytes in the header line (a file cut off or zero-filled by "
                               "a crash?); not read", where=line.index(b"\0"))
    if unended or len(line) > HEADER_MAX_BYTES:
        raise InputError(path, f"no line end in the first {HEADER_MAX_BYTES >> 20} MB: no CSV "
                               f"header; not read")
    try:
        return _header_names(line.rstrip(b"\r"))
    except ValueError as e:
        raise InputError(path, f"malformed CSV: {e}") from None


def open_csv_stream(path: Path, column_types: dict, bad_rows: list | None = None,
                    include_columns=None, threads: bool = True,
                    block_bytes: int | None = None) -> "CsvBatches":
    """The CSV ``path`` read in batches (:class:`CsvBatches`: tables of ~``block_bytes`` of
    text each, default :data:`STREAM_BLOCK_BYTES`, parsed in blocks of
    :data:`STREAM_PARSE_BYTES`), typed as :func:`read_csv` with ``types`` reads it
    (:data:`MISSING_CELLS` null), parsed on Arrow's threads unless ``threads`` is False; rows of
    the wrong width are skipped into ``bad_rows`` when given (on threads their line numbers are
    unknown, None). Conversion errors surface while iterating (pyarrow.ArrowInvalid)."""
    import pyarrow.csv as pacsv

    block = block_bytes or STREAM_BLOCK_BYTES
    parse = min(block, STREAM_PARSE_BYTES)
    opts = _csv_options(column_types, MISSING_CELLS, THREADED_CSV_BYTES, bad_rows)
    opts["read_options"] = pacsv.ReadOptions(block_size=parse, use_threads=threads)
    if include_columns is not None:
        opts["convert_options"].include_columns = list(include_columns)
    return CsvBatches(pacsv.open_csv(path, **opts), max(1, block // parse))


class CsvBatches:
    """Batches of a pyarrow CSV stream reader, ``per`` of its record batches joined in each
    (a pa.Table of that many chunks; no copy). ``read_next()`` raises StopIteration at the
    end; iterating yields the same tables. ``schema``: the reader's."""

    def __init__(self, reader, per: int):
        self._reader, self._per = reader, per
        self.schema = reader.schema

    def read_next(self):
        import pyarrow as pa

        got = []
        while len(got) < self._per:
            try:
                got.append(self._reader.read_next_batch())
            except StopIteration:
                break
        if not got:
            raise StopIteration
        return pa.Table.from_batches(got, schema=self.schema)

    def __iter__(self):
        while True:
            try:
                yield self.read_next()
            except StopIteration:
                return


def _header_names(line: bytes) -> list[str]:
    try:
        return next(csv.reader([line.decode("utf-8", "replace")]), [])
    except csv.Error as e:  # e.g. a lone CR inside the header line
        raise ValueError(f"header row: {e}") from None


def read_json(path: Path, max_bytes: int | None = None):
    """Load a small JSON file (metadata, communication*.json) with orjson; ``max_bytes``: the
    most it may hold (:data:`METADATA_MAX_BYTES` for metadata files).

    Raises :class:`InputError` naming the byte offset when the JSON is invalid or truncated, or
    the file is not a regular file or too large. Not for trace_view.json: that is streamed
    (:mod:`ascendprof.readers.trace_view`).
    """
    path = Path(path)
    return parse_json(path, read_payload(path, max_bytes, as_json=True))


def parse_json(path: Path, data: bytes):
    """``data`` (the bytes of ``path``) parsed with orjson: the parsed value (dict, list, str,
    int, float, bool or None). Raises InputError naming the byte offset in ``data`` when it is
    invalid or truncated JSON, or not UTF-8 (the offset of the first byte that is not)."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as e:
        msg, pos = e.msg, e.pos
        if "UTF-8" in msg and not data.isascii():
            # orjson checks the whole text as UTF-8 before parsing and then names byte 0
            try:
                data.decode("utf-8")
            except UnicodeDecodeError as u:
                msg, pos = "str is not valid UTF-8", u.start
        raise InputError(path, f"invalid JSON ({msg})", where=pos) from None
