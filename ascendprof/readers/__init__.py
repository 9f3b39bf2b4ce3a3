"""Readers: one per producer, each turning one :class:`~ascendprof.scan.Source` into a
:class:`~ascendprof.model.rankdata.RankData` whose tables follow :mod:`ascendprof.model.schemas`.

Every reader module exposes ``read(source: Source) -> RankData``. A damaged file is recorded in
``RankData.problems`` and only the tables that depend on it are missing; a reader raises
:class:`~ascendprof.model.errors.InputError` only when nothing of the rank can be read.
"""

from __future__ import annotations

from importlib import import_module


def reader_module(kind: str) -> str:
    """The module that reads sources of ``kind`` (KeyError for an unknown kind)."""
    # scan imports readers.textio, so the kinds are looked up at call time
    from ascendprof import scan

    return {
        scan.TORCH_TEXT: "ascendprof.readers.torch_text",
        scan.MS_TEXT: "ascendprof.readers.mindspore_text",
        scan.DB: "ascendprof.readers.db",
        scan.PROF: "ascendprof.readers.prof",
        scan.RAW_CANN: "ascendprof.readers.raw_cann",
        scan.LEGACY_MS: "ascendprof.readers.legacy_mindspore",
    }[kind]


def read_source(source):
    """Dispatch ``source`` to the reader of its kind; returns a RankData whose odd values
    (negative durations and times) are left out and reported (:mod:`ascendprof.readers.values`)."""
    from ascendprof.readers import values

    data = import_module(reader_module(source.kind)).read(source)
    values.check(data)
    return data
