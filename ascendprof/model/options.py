"""The options of a run, explicit: what the per-rank worker reads (:class:`ReadOptions`, part of
the cache key) and how the whole ``analyse`` run goes (:class:`RunOptions`). The command line,
the API and the gate build them; nothing travels on :class:`~ascendprof.model.source.Source`."""

from __future__ import annotations

from dataclasses import dataclass, field

#: ``--advice`` modes: no advice; advice from the files read anyway; also trace_view.json's
#: host events
ADVICE_MODES = ("off", "summary", "all")


@dataclass(frozen=True)
class ReadOptions:
    """How one rank is read. ``timeline``: read trace_view.json even when kernel_details.csv /
    communication.json carry what the analyses need (``analyse --timeline``); ``advice``: one of
    :data:`ADVICE_MODES` ("all" also reads trace_view.json's host events). Both change the
    tables read, so both are part of the cache fingerprint (:meth:`cache_text`)."""

    timeline: bool = False
    advice: str = "summary"

    def cache_text(self) -> bytes:
        """What these options add to a cache fingerprint (nothing for the defaults, so the
        entries of a default run keep their keys)."""
        text = "read_timeline\n" if self.timeline else ""
        if self.advice != "summary":
            text += f"advice={self.advice}\n"
        return text.encode()


@dataclass(frozen=True)
class RunOptions:
    """One ``analyse`` run (the command's options; see ``ascendprof analyse --help``).

    ``read``: :class:`ReadOptions` of every rank; ``fmt``: terminal summary as "text" or "json";
    ``workers``: processes of the local pool (None: by cores and memory); ``executor``: "local"
    or "dask" (``scheduler``: the Dask scheduler address); ``tables``: write ``tables/``;
    ``cache``: use the per-rank cache; ``thresholds``: verdict threshold overrides
    ({lower-case name: value}); ``strict``: any skip makes exit code 3; ``progress``: a progress
    bar on a terminal; ``run``: the run to pick when the directory holds several; ``html``:
    write report.html (None: the ``ASCENDPROF_HTML`` default)."""

    read: ReadOptions = field(default_factory=ReadOptions)
    fmt: str = "text"
    workers: int | None = None
    executor: str = "local"
    scheduler: str | None = None
    tables: bool = True
    cache: bool = True
    thresholds: dict | None = None
    strict: bool = False
    progress: bool = True
    run: str | None = None
    html: bool | None = None

    @classmethod
    def of(cls, *, timeline: bool = False, advice: str = "summary", **kw) -> "RunOptions":
        """From the keyword options of ``analyse`` (``timeline`` and ``advice`` go to
        :attr:`read`); raises TypeError for an unknown option."""
        return cls(read=ReadOptions(timeline=bool(timeline), advice=advice), **kw)
