"""Readers: one per producer, each turning one :class:`~ascendprof.scan.Source` into a
:class:`~ascendprof.model.rankdata.RankData` whose tables follow :mod:`ascendprof.model.schemas`.

Every reader module exposes ``read(source: Source, options: ReadOptions | None) -> RankData``
(:class:`~ascendprof.model.options.ReadOptions`: what to read beyond the defaults). A damaged file is recorded in
``RankData.problems`` and only the tables that depend on it are missing; a reader raises
:class:`~ascendprof.model.errors.InputError` only when nothing of the rank can be read.
"""

from __future__ import annotations

from importlib import import_module

from ascendprof.model import source as S


def reader_module(kind: str) -> str:
    """The module that reads sources of ``kind`` (KeyError for an unknown kind)."""
    return {
        S.TORCH_TEXT: "ascendprof.readers.ascend_output",
        S.MS_TEXT: "ascendprof.readers.ascend_output",
        S.DB: "ascendprof.readers.db",
        S.PROF: "ascendprof.readers.prof",
        S.RAW_CANN: "ascendprof.readers.raw_cann",
        S.LEGACY_MS: "ascendprof.readers.legacy_mindspore",
    }[kind]


def read_source(source, options=None):
    """Dispatch ``source`` to the reader of its kind (``options``: model.options.ReadOptions,
    None for the defaults); returns a RankData whose odd values (negative durations and times)
    are left out and reported (:mod:`ascendprof.readers.values`)."""
    from ascendprof.readers import values

    data = import_module(reader_module(source.kind)).read(source, options)
    values.check(data)
    return data
