"""Atomic output: every file is written to a temporary name beside it, then renamed.

An interrupted run leaves complete files or none; a second run to the same directory replaces
files cleanly. Report paths the user names (gate reports, report.html, diff.html) go through
:func:`write_report`, which never replaces what ascendprof did not write and never writes into
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

from ascendprof.sysio.csvsafe import csv_safe, csv_safe_frame
from ascendprof.sysio.parquet import parquet_bytes


def write_report(path: Path, data: bytes, *, signature: bytes, inputs=(),
                 append: bool = False) -> Path:
    """Write a report file the user named (gate --junit / --markdown) without destroying
    anything: ``data`` replaces ``path`` atomically only when ``path`` is absent or a regular
    file that starts with ``signature`` (ascendprof wrote it). Otherwise it is written
    through, never replaced: a FIFO, device or terminal (also behind a symlink, e.g.
    /proc/self/fd/1) receives the bytes; an empty regular file (``$GITHUB_STEP_SUMMARY`` at the
    start of a step) is filled in place; a non-empty regular file that ascendprof did not write
    gets ``data`` appended when ``append`` (Markdown step summaries are appended to) and is
    refused otherwise. Raises OutputError (exit 2) for a directory, a path that is one of the
    ``inputs`` or lies inside an input directory, a FIFO nobody reads, or a failed write.
    """
    from ascendprof.model.errors import OutputError

    path = Path(path)
    _refuse_input(path, inputs)
    try:
        st = os.stat(path)
    except FileNotFoundError:
        if os.path.islink(path):
            raise OutputError(f"{path}: a symbolic link to nothing; not followed") from None
        return _output_call(path, write_bytes, path, data)
    except OSError as e:
        raise OutputError(f"{path}: cannot write the report: {e.strerror or e}") from None
    if stat.S_ISDIR(st.st_mode):
        raise OutputError(f"{path}: is a directory; give a file name")
    if stat.S_ISREG(st.st_mode):
        ours = _starts_with(path, signature)
        if ours and not os.path.islink(path):
            return _output_call(path, write_bytes, path, data)
        if ours or st.st_size == 0:
            return _write_through(path, data, truncate=True)
        if append:
            return _write_through(path, b"\n" + data, truncate=False)
        raise OutputError(f"{path}: exists and ascendprof did not write it; remove it or give "
                          f"another file name")
    return _write_through(path, data, truncate=False)  # FIFO, device, terminal, socket


def check_report_path(path: Path, inputs=()) -> None:
    """Refuse (OutputError, exit 2) a report path that cannot be right, before any work: a
    directory, or one of the ``inputs`` / a path inside an input directory."""
    from ascendprof.model.errors import OutputError

    _refuse_input(Path(path), inputs)
    if os.path.isdir(path):
        raise OutputError(f"{path}: is a directory; give a file name")


def _refuse_input(path: Path, inputs) -> None:
    from ascendprof.model.errors import OutputError

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


def _starts_with(path: Path, signature: bytes) -> bool:
    if not signature:
        return False
    try:
        with open(path, "rb") as f:
            return f.read(len(signature)) == signature
    except OSError:
        return False


def _write_through(path: Path, data: bytes, *, truncate: bool) -> Path:
    """Open the existing ``path`` for writing (never creating or replacing it) and write
    ``data``: non-blocking open, so a FIFO without a reader fails instead of hanging."""
    from ascendprof.model.errors import OutputError

    flags = os.O_WRONLY | os.O_NONBLOCK | os.O_NOCTTY | getattr(os, "O_CLOEXEC", 0)
    flags |= os.O_TRUNC if truncate else os.O_APPEND
    try:
        fd = os.open(path, flags)
    except OSError as e:
        why = ("a FIFO that nobody reads" if e.errno == errno.ENXIO else e.strerror or str(e))
        raise OutputError(f"{path}: cannot write the report: {why}") from None
    try:
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)  # a reader that is slow is waited for, not dropped
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
    from ascendprof.model.errors import OutputError

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


def write_frame_csv(path: Path, df) -> Path:
    """Write a pandas DataFrame as CSV (no index) atomically; text cells made safe for
    spreadsheets (:func:`csv_safe`)."""
    return write_bytes(path, csv_safe_frame(df).to_csv(index=False, lineterminator="\n")
                       .encode("utf-8"))


def write_parquet(path: Path, table) -> Path:
    """``table`` as Parquet at ``path`` (encoded in memory, written atomically in one call)."""
    return write_bytes(path, parquet_bytes(table))
