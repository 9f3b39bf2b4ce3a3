"""The project's own exception types and the documented exit codes.

Every error a user can cause (bad arguments, unreadable or malformed input) is one of these.
The CLI catches :class:`AscendProfError` at the command boundary and prints ``str(err)`` as one
line; a traceback appears only with ``--debug``.
"""

from __future__ import annotations

import functools
from pathlib import Path

EXIT_OK = 0  #: done, possibly with warnings
EXIT_REGRESSION = 1  #: ``gate`` found a regression
EXIT_USAGE = 2  #: bad arguments, missing path, unreadable gate input, unwritable output
EXIT_NOTHING = 3  #: nothing analysable (or any skip under ``--strict``)


class AscendProfError(Exception):
    """Base class. ``exit_code`` is what the CLI exits with when this reaches it."""

    exit_code = EXIT_USAGE


class UsageError(AscendProfError):
    """Bad command-line arguments or paths (exit 2)."""

    exit_code = EXIT_USAGE


class OutputError(UsageError):
    """The output cannot be written where asked: not a directory, no permission, in use by
    another run, or holding a file ascendprof did not write (exit 2)."""

    exit_code = EXIT_USAGE


class NothingAnalysable(AscendProfError):
    """No source under the given directory yields any table an analysis needs (exit 3)."""

    exit_code = EXIT_NOTHING


class InputError(AscendProfError):
    """A profiler file is unreadable or malformed.

    ``path`` names the file, ``where`` is a byte offset (``int``) or a line / record description
    (``str``) when known. ``str(err)`` is one line: ``<path>[ at <where>]: <reason>``.
    """

    exit_code = EXIT_NOTHING

    def __init__(self, path: str | Path, reason: str, where: int | str | None = None):
        self.path = str(path)
        self.reason = reason
        self.where = where
        loc = ""
        if isinstance(where, int):
            loc = f" at byte {where}"
        elif where:
            loc = f" at {where}"
        super().__init__(f"{self.path}{loc}: {reason}")


class RecordError(InputError):
    """A fixed-size binary record is truncated or of an unknown kind (raw CANN decoders)."""


class malformed:  # noqa: N801 - used as a context manager: ``with malformed(path, "event"):``
    """Turn the built-in errors a parser meets on content of an unexpected shape (a list where a
    number belongs, an unhashable id, a number beyond range ...) into one :class:`InputError`
    naming ``path``. Parsers check the shapes they expect; this is the net for the rest, so a
    damaged file never surfaces as KeyError / TypeError / OverflowError."""

    CAUGHT = (TypeError, ValueError, AttributeError, KeyError, IndexError, ArithmeticError,
              RecursionError)

    def __init__(self, path: str | Path, what: str = "content"):
        self.path, self.what = path, what

    def __enter__(self):
        return self

    def __exit__(self, typ, err, tb):
        if typ is not None and issubclass(typ, self.CAUGHT) and not issubclass(typ, AscendProfError):
            raise InputError(self.path, f"unexpected {self.what} ({typ.__name__}: {err})") from None
        return False


def shielded(what: str = "content"):
    """Decorator for a parser whose first argument is the file path: runs it inside
    :class:`malformed` (``@shielded("trace event")``)."""
    def deco(fn):
        @functools.wraps(fn)
        def wrapper(path, *args, **kwargs):
            with malformed(path, what):
                return fn(path, *args, **kwargs)
        return wrapper
    return deco
