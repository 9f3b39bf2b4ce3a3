"""Atomic output: every file is written to a temporary name beside it, then renamed.

An interrupted run leaves complete files or none; a second run to the same directory replaces
files cleanly. Every file path the user names (gate --junit / --markdown, report -o, diff
--html and diff -o's tables, timeline -o) goes through one rule, :func:`check_report_path`
before the work and :func:`write_report` / :func:`write_report_pieces` after it: never replace
what ascendprof did not write, never replace a symlink, FIFO or device, never write into or over
an input.
"""

from __future__ import annotations

import csv
import errno
import io
import os
import stat
import tempfile
from pathlib import Path

import orjson

from ascendprof.model.errors import OutputError
from ascendprof.sysio.csvsafe import csv_safe, csv_safe_frame
from ascendprof.sysio.parquet import parquet_bytes

#: files looked at when telling whether a report path is (a link to) a file of an input tree;
#: beyond this the report path is refused rather than risk writing over an input
INPUT_FILES_LIMIT = 500_000


def write_report(path: Path, data: bytes, *, signature: bytes = b"", ours=None, inputs=(),
                 append: bool = False) -> Path:
    """Write a report file the user named (gate --junit / --markdown, report -o, diff --html,
    diff -o's tables) without destroying anything; the rule is :func:`write_report_pieces`'s.
    ``signature``: how every file of this kind ascendprof writes begins (what marks an existing
    file as ours), or ``ours``: a function of the path saying so."""
    return write_report_pieces(path, (data,), ours=ours if ours is not None else signature,
                               inputs=inputs, append=append)


def write_report_pieces(path: Path, pieces, *, ours, inputs=(), append: bool = False) -> Path:
    """Write the byte strings of ``pieces`` to the user-named ``path`` under the one rule of
    every file ascendprof writes outside its output directories:

    - ``path`` absent: created atomically (temp file beside it + rename);
    - a regular file ascendprof wrote (``ours``: a prefix the file starts with, or a function
      of the path): replaced atomically;
    - written through, never replaced: a FIFO, a character device or terminal (also behind a
      symlink, e.g. /proc/self/fd/1), an empty regular file (``$GITHUB_STEP_SUMMARY`` at the
      start of a step) and a symlink to a file ascendprof wrote (the link stays a link);
    - a non-empty regular file ascendprof did not write: ``pieces`` appended when ``append``
      (Markdown step summaries are appended to), refused otherwise;
    - refused (OutputError, exit 2): a directory, a block device, a symlink to nothing, one
      of the ``inputs`` or a path inside an input directory, a file that is one of the input
      trees' files under another name (symlink or hard link), a FIFO nobody reads, a failed
      write (full disk, no permission).
    """
    path = Path(path)
    how = _plan(path, inputs, ours, append)
    if how == "replace":
        return _output_call(path, write_pieces, path, pieces)
    return _write_through(path, pieces, truncate=how == "truncate")


def check_report_path(path: Path, inputs=(), *, ours=None, append: bool = False) -> None:
    """Refuse (OutputError, exit 2) before any work a path :func:`write_report_pieces` would
    refuse after it: a directory, a block device, a symlink to nothing, an input or a file of an
    input tree, and (when ``ours`` is given) a non-empty file ascendprof did not write, unless
    ``append``."""
    _plan(Path(path), inputs, ours, append)


def _plan(path: Path, inputs, ours, append: bool) -> str:
    """How ``path`` may be written: 'replace' (atomic), 'truncate' or 'append' (write-through),
    or OutputError."""
    _refuse_input(path, inputs)
    try:
        st = os.stat(path)
    except FileNotFoundError:
        if os.path.islink(path):
            raise OutputError(f"{path}: a symbolic link to nothing; not followed") from None
        return "replace"
    except OSError as e:
        raise OutputError(f"{path}: cannot write the report: {e.strerror or e}") from None
    if stat.S_ISDIR(st.st_mode):
        raise OutputError(f"{path}: is a directory; give a file name")
    if stat.S_ISBLK(st.st_mode):
        raise OutputError(f"{path}: is a block device; a report is never written to a disk")
    if not stat.S_ISREG(st.st_mode):
        return "append"  # FIFO, character device, terminal, socket: written through
    _refuse_input_file(path, st, inputs)
    if ours is None:  # check_report_path without knowing what ascendprof's files look like
        return "unknown"
    link = os.path.islink(path)
    if _is_ours(path, ours):
        return "truncate" if link else "replace"
    if st.st_size == 0:
        return "truncate"
    if append:
        return "append"
    raise OutputError(f"{path}: exists and ascendprof did not write it; remove it or give "
                      f"another file name")


def _is_ours(path: Path, ours) -> bool:
    if callable(ours):
        try:
            return bool(ours(path))
        except OSError:
            return False
    return _starts_with(path, ours)


def _refuse_input(path: Path, inputs) -> None:
    where = Path(os.path.abspath(path))
    real = Path(os.path.realpath(path))
    for i in inputs:
        if i is None:
            continue
        i = Path(i)
        try:
            same = os.path.exists(path) and os.path.samefile(path, i)
        except OSError:
            same = False
        inside = i.is_dir() and any(
            p == q or q in p.parents for p in (where, real)
            for q in (Path(os.path.abspath(i)), Path(os.path.realpath(i))))
        if same or inside:
            raise OutputError(f"{path}: is {'one of the inputs' if same else f'inside the input {i}'}"
                              f"; write the report elsewhere")


def _refuse_input_file(path: Path, st: os.stat_result, inputs) -> None:
    """Refuse an existing ``path`` (stat ``st``) that is a file of an input tree under another
    name: a hard link, or a file an input's symlink points to (a report appended to a baseline
    that links to a shared CSV would damage that baseline)."""
    ident = (st.st_dev, st.st_ino)
    seen = 0
    for i in inputs:
        if i is None:
            continue
        stack = [str(i)]
        while stack:
            top = stack.pop()
            try:
                if not os.path.isdir(top) or os.path.islink(top):
                    s = os.stat(top)
                    if (s.st_dev, s.st_ino) == ident:
                        raise OutputError(f"{path}: is the input file {top} under another "
                                          f"name; write the report elsewhere")
                    continue
                with os.scandir(top) as it:
                    entries = list(it)
            except OSError:
                continue
            for e in entries:
                seen += 1
                if seen > INPUT_FILES_LIMIT:
                    raise OutputError(f"{path}: exists, and the inputs hold more than "
                                      f"{INPUT_FILES_LIMIT} files to compare it with; give a "
                                      f"new file name")
                try:
                    if e.is_dir(follow_symlinks=False):
                        stack.append(e.path)
                        continue
                    s = e.stat(follow_symlinks=True)
                except OSError:
                    continue
                if (s.st_dev, s.st_ino) == ident:
                    raise OutputError(f"{path}: is the input file {e.path} under another name; "
                                      f"write the report elsewhere")


def _starts_with(path: Path, signature: bytes) -> bool:
    if not signature:
        return False
    try:
        with open(path, "rb") as f:
            return f.read(len(signature)) == signature
    except OSError:
        return False


def _write_through(path: Path, pieces, *, truncate: bool) -> Path:
    """Open the existing ``path`` for writing (never creating or replacing it) and write
    ``pieces``: non-blocking open, so a FIFO without a reader fails instead of hanging."""
    flags = os.O_WRONLY | os.O_NONBLOCK | os.O_NOCTTY | getattr(os, "O_CLOEXEC", 0)
    flags |= os.O_TRUNC if truncate else os.O_APPEND
    try:
        fd = os.open(path, flags)
    except OSError as e:
        why = ("a FIFO that nobody reads" if e.errno == errno.ENXIO else e.strerror or str(e))
        raise OutputError(f"{path}: cannot write the report: {why}") from None
    try:
        st = os.fstat(fd)
        if stat.S_ISREG(st.st_mode) and not truncate and st.st_size:
            os.write(fd, b"\n")  # an appended report starts on a line of its own
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)  # a reader that is slow is waited for, not dropped
        for data in pieces:
            view = memoryview(data)
            while view:
                n = os.write(fd, view)
                view = view[n:]
    except OSError as e:
        raise OutputError(f"{path}: cannot write the report: {e.strerror or e}") from None
    finally:
        os.close(fd)
    return path


def _output_call(path: Path, fn, *args):
    try:
        return fn(*args)
    except OSError as e:
        raise OutputError(f"{e.filename or path}: cannot write the report: "
                          f"{e.strerror or e}") from None


def ensure_dir(d: Path) -> None:
    """``mkdir -p d``; a stat first, because a mkdir that fails with EEXIST costs ~0.1 ms on
    ext4 (thousands of them in a 256-rank run)."""
    if not os.path.isdir(d):
        Path(d).mkdir(parents=True, exist_ok=True)


def write_bytes(path: Path, data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically (temp file in the same directory + rename)."""
    return write_pieces(path, (data,))


def write_json(path: Path, obj, *, indent: bool = True) -> Path:
    opt = orjson.OPT_INDENT_2 if indent else 0
    return write_bytes(path, orjson.dumps(obj, option=opt | orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS))


def new_file_mode() -> int:
    """The permissions ``open()`` gives a new file: 0o666 less the process's umask."""
    global _FILE_MODE
    if _FILE_MODE is None:
        mask = os.umask(0o022)  # the only portable way to read it is to set it
        os.umask(mask)
        _FILE_MODE = 0o666 & ~mask
    return _FILE_MODE


_FILE_MODE: int | None = None


def write_pieces(path: Path, pieces) -> Path:
    """Write the byte strings of the iterable ``pieces`` one after another to ``path``,
    atomically (temp file in the same directory + rename), holding one piece at a time."""
    path = Path(path)
    ensure_dir(path.parent)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        if hasattr(os, "fchmod"):  # mkstemp makes it 0600; an output is shared like any file
            os.fchmod(fd, new_file_mode())
        # the loop in C: a 256-rank file comes in ~10^6 small pieces; a 1 MB buffer makes
        # ~250 write calls of a 236 MB file instead of ~30k
        with os.fdopen(fd, "wb", buffering=1 << 20) as f:
            f.writelines(pieces)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return path


def write_csv(path: Path, header: list[str], rows) -> Path:
    """Rows as CSV, atomically; text cells made safe for spreadsheets (:func:`csv_safe`)."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow([csv_safe(h) for h in header])
    w.writerows([csv_safe(c) for c in row] for row in rows)
    return write_bytes(path, buf.getvalue().encode("utf-8"))


#: Rows a CSV is formatted in at a time: a frame of 10^6 rows would be ~10^6 Python strings and
#: the whole text at once
CSV_CHUNK_ROWS = 65536


def write_frame_csv(path: Path, df) -> Path:
    """Write a pandas DataFrame as CSV (no index) atomically; text cells made safe for
    spreadsheets (:func:`csv_safe`). See :func:`write_frames_csv`."""
    return write_frames_csv(path, [df])


def write_frames_csv(path: Path, frames) -> Path:
    """Write the DataFrames of the iterable ``frames`` (same columns) as one CSV (the first
    one's header, no index) atomically; text cells made safe for spreadsheets
    (:func:`csv_safe`). Formatted a slice of rows at a time (each cell's text does not depend
    on its neighbours), so memory stays that of one frame."""
    def pieces():
        first = True
        for df in frames:
            for i in range(0, max(len(df), 1 if first else 0), CSV_CHUNK_ROWS):
                part = csv_safe_frame(df.iloc[i:i + CSV_CHUNK_ROWS])
                yield part.to_csv(index=False, header=first, lineterminator="\n").encode("utf-8")
                first = False
    return write_pieces(path, pieces())


def write_parquet(path: Path, table) -> Path:
    """``table`` as Parquet at ``path`` (encoded in memory, written atomically in one call)."""
    return write_bytes(path, parquet_bytes(table))
