"""Readers: one per producer, each turning one :class:`~ascendprof.scan.Source` into a
:class:`~ascendprof.rankdata.RankData` whose tables follow :mod:`ascendprof.schemas`.

Every reader module exposes ``read(source: Source) -> RankData``. A damaged file is recorded in
``RankData.problems`` and only the tables that depend on it are missing; a reader raises
:class:`~ascendprof.errors.InputError` only when nothing of the rank can be read.
"""

from __future__ import annotations

from importlib import import_module

from ascendprof import scan as _scan

_MODULES = {
    _scan.TORCH_TEXT: "ascendprof.readers.torch_text",
    _scan.MS_TEXT: "ascendprof.readers.mindspore_text",
    _scan.DB: "ascendprof.readers.db",
    _scan.PROF: "ascendprof.readers.prof",
    _scan.RAW_CANN: "ascendprof.readers.raw_cann",
    _scan.LEGACY_MS: "ascendprof.readers.legacy_mindspore",
}


def reader_module(kind: str) -> str:
    """The module that reads sources of ``kind`` (KeyError for an unknown kind)."""
    return _MODULES[kind]


def read_source(source):
    """Dispatch ``source`` to the reader of its kind; returns a RankData."""
    return import_module(_MODULES[source.kind]).read(source)
