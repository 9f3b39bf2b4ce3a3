"""JSON written piece by piece: an object whose members are serialised as they come and
streamed to disk, never held whole as one text."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping
from itertools import chain
from pathlib import Path

import orjson

from ascendprof.sysio import atomic


def json_object_pieces(items):
    """Compact JSON text of an object, piece by piece, from ``(key, value)`` pairs where the
    value is its JSON text as bytes or as an iterable of byte pieces (what ``json.dumps``
    would write for the dict of those pairs, without the spaces). An iterator whose pieces
    pass through itertools, so a writer consumes them without a Python step per piece."""
    return chain.from_iterable(_object_chunks(items))


def _object_chunks(items):
    yield (b"{",)
    first = True
    for key, value in items:
        yield ((b"" if first else b",") + orjson.dumps(str(key)) + b":",)
        yield (value,) if isinstance(value, (bytes, bytearray, memoryview)) else value
        first = False
    yield (b"}",)


class SpilledJsonMembers(Mapping):
    """A read-only JSON object whose members' compact JSON texts wait in an unlinked temporary
    file (in ``directory``, the system's temporary directory when None) until they are written:
    the process holds one member's pieces while it is made, not the whole text (a cluster
    matrix of all-to-all groups grows with the square of the group size). Indexing parses a
    member back; :meth:`items_json` reads each member back in pieces of :data:`READ_BYTES`.
    Creating one raises OSError when the file cannot be made or written."""

    READ_BYTES = 4 << 20

    def __init__(self, members, directory: Path | None = None):
        """``members``: ``(key, JSON text)`` pairs, the text as bytes or an iterable of bytes
        pieces, written as they come."""
        self._file = tempfile.TemporaryFile(prefix=".ascendprof-json-", dir=directory)
        self._at: dict = {}
        end = 0
        for key, text in members:
            start = end
            for piece in ((text,) if isinstance(text, (bytes, bytearray)) else text):
                self._file.write(piece)
                end += len(piece)
            self._at[key] = (start, end - start)
        self._file.flush()

    def _read(self, offset: int, length: int) -> bytes:
        return os.pread(self._file.fileno(), length, offset)

    def __getitem__(self, key):
        return orjson.loads(self._read(*self._at[key]))

    def __iter__(self):
        return iter(self._at)

    def __len__(self) -> int:
        return len(self._at)

    def _pieces(self, offset: int, length: int):
        for a in range(offset, offset + length, self.READ_BYTES):
            yield self._read(a, min(self.READ_BYTES, offset + length - a))

    def items_json(self):
        """``(key, iterator of the member's text pieces)`` in insertion order."""
        return ((k, self._pieces(*at)) for k, at in self._at.items())

    def close(self) -> None:
        self._file.close()


def write_json_items(path: Path, items) -> Path:
    """Write a JSON object whose members come from the iterable ``(key, value JSON bytes)``
    pairs ``items`` (e.g. one communication group at a time), atomically and without ever
    holding the whole text."""
    return atomic.write_pieces(path, json_object_pieces(items))


