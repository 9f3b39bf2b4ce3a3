"""JSON written piece by piece: an object whose members are serialised as they come and
streamed to disk, never held whole as one text."""

from __future__ import annotations

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


class JsonMembers(Mapping):
    """A read-only JSON object kept as the compact JSON text of each member: the cluster step
    serialises a result as soon as it is built (a dict of 10^4 small dicts is ~5x its text), and
    the report writer streams the texts (:meth:`items_json`). Indexing parses a member back."""

    def __init__(self, members):
        """``members``: a dict, or an iterable of (key, value) pairs, each serialised as it
        comes (so a generator of members is never held whole)."""
        opt = orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS
        pairs = members.items() if isinstance(members, dict) else members
        self._texts = {k: orjson.dumps(v, option=opt) for k, v in pairs}

    def __getitem__(self, key):
        return orjson.loads(self._texts[key])

    def __iter__(self):
        return iter(self._texts)

    def __len__(self) -> int:
        return len(self._texts)

    def items_json(self):
        return iter(self._texts.items())


def write_json_items(path: Path, items) -> Path:
    """Write a JSON object whose members come from the iterable ``(key, value JSON bytes)``
    pairs ``items`` (e.g. one communication group at a time), atomically and without ever
    holding the whole text."""
    return atomic.write_pieces(path, json_object_pieces(items))


