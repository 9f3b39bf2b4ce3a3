"""The ``timeline`` job: read every rank, build the merged cluster timeline, measure clock skew.

:func:`rank_part` is the per-rank pure function (one Source in, its trace events out), run by
the same executors as ``analyse``; :func:`build` joins the ranks (analyze.timeline) and returns
what report/trace.py writes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from ascendprof._version import __version__
from ascendprof.analyze import timeline as T
from ascendprof.analyze.timeline import rank_events
from ascendprof.analyze.verdicts import group_directory
from ascendprof.engine.executors import local_map
from ascendprof.engine.pipeline import read_rank
from ascendprof.model.errors import InputError, NothingAnalysable, UsageError
from ascendprof.model.options import ReadOptions
from ascendprof.model.problems import Problems
from ascendprof.report import trace


@dataclass
class RankPart:
    """One rank's events (analyze.timeline.EVENT_SCHEMA) and what the job needs besides."""

    rank: int
    events: pa.Table | None
    metadata: dict = field(default_factory=dict)
    problems: Problems = field(default_factory=Problems)


def rank_part(source, tables_dir=None, steps: frozenset | None = None) -> RankPart:
    """Read ``source`` with the worker's reading step (engine.pipeline.read_rank, no advice
    tables) and return its trace events, only those of ``steps`` when given. Never raises for
    bad input: an unreadable rank comes back without events and with its problem recorded.
    ``tables_dir`` is accepted for the executors' signature and unused."""
    part = RankPart(rank=source.rank, events=None)
    try:
        data, _ = read_rank(source, ReadOptions(advice="off"))
    except InputError as e:
        part.problems.add_error(e, rank=source.rank, affects=("timeline",))
        return part
    part.problems.extend(data.problems)
    part.metadata = data.meta.get("profiler_metadata") or {}
    names = {gid: g["name"] for gid, g in group_directory({source.rank: part.metadata}).items()}
    ev = rank_events(data.tables, source.rank, names)
    if steps is not None and ev.num_rows:
        ev = ev.filter(pc.fill_null(pc.is_in(ev.column("step"),
                                             value_set=pa.array(sorted(steps), pa.int32())),
                                    False))
    part.events = ev
    return part


@dataclass
class Timeline:
    """The merged timeline: ``events`` (sorted, lanes assigned), ``joined`` (flow members),
    ``names`` (rank -> process name), ``skew`` (analyze.timeline.clock_skew, measured before
    any shift), ``aligned`` (whether each rank was shifted by its measured offset)."""

    events: pa.Table
    joined: list
    names: dict
    skew: dict
    aligned: bool
    problems: Problems


def parse_window(text: str | None) -> tuple[float, float] | None:
    """``"START:END"`` in ms from the collection's first event -> (start, end); either side
    may be empty (open). Raises UsageError for anything else."""
    if not text:
        return None
    lo, sep, hi = text.partition(":")
    try:
        if not sep:
            raise ValueError
        a = float(lo) if lo.strip() else float("-inf")
        b = float(hi) if hi.strip() else float("inf")
    except ValueError:
        raise UsageError(f"--window {text!r}: expected START:END in ms, e.g. 0:500") from None
    if b <= a:
        raise UsageError(f"--window {text!r}: END must be after START")
    return a, b


def build(sources, *, steps=None, window=None, align=False, workers=None,
          progress=None, problems: Problems | None = None) -> Timeline:
    """Read ``sources`` (one per rank) and merge them.

    ``steps``: keep only events of these steps; ``window``: (start, end) ms from the first
    event of the collection, keeps the events that overlap it; ``align``: shift every rank by
    its measured offset (clock_skew) so that collectives end together. Raises
    NothingAnalysable when no rank has an event."""

    problems = problems if problems is not None else Problems()
    parts = local_map(rank_part, sources, workers=workers, progress=progress,
                      steps=frozenset(steps) if steps else None)
    tables = []
    for p in parts:
        problems.extend(p.problems)
        if p.events is not None and p.events.num_rows:
            tables.append(p.events)
    if not tables:
        raise NothingAnalysable("no rank has device tasks or communication ops to draw"
                                + (f" in steps {sorted(steps)}" if steps else ""))
    events = pa.concat_tables(tables)
    skew = T.clock_skew(events)
    if align:
        events = T.shift(events, skew["offset_ns"])
    if window is not None:
        first = int(pc.min(events.column("start_ns")).as_py())
        start = pc.subtract(events.column("start_ns"), first)
        end = pc.add(start, events.column("dur_ns"))
        lo, hi = window[0] * 1e6, window[1] * 1e6
        keep = pc.and_(pc.greater(pc.cast(end, pa.float64()), lo),
                       pc.less(pc.cast(start, pa.float64()), hi))
        events = events.filter(keep)
        if events.num_rows == 0:
            raise UsageError(f"--window: no event between {window[0]} and {window[1]} ms")
    events = T.lanes(events)
    joined = T.flows(events)
    metadata = {p.rank: p.metadata for p in parts}
    names = T.process_names(metadata, sorted(set(events.column("rank").to_pylist())))
    return Timeline(events, joined, names, skew, align, problems)


def write(tl: Timeline, path: Path, fmt: str, root: str, inputs=()) -> Path:
    """Write ``tl`` to ``path`` in ``fmt`` ('chrome' or 'perfetto'); ``inputs`` are never
    written into or over (sysio.atomic.write_report_pieces)."""
    if fmt == "perfetto":
        return trace.write_perfetto(path, tl.events, tl.joined, tl.names, inputs)
    other = {"producer": f"ascendprof {__version__}", "source": root,
             "clock_skew": {k: v for k, v in tl.skew.items() if k != "offset_ns"},
             "clock_offset_ns": {str(k): v for k, v in tl.skew["offset_ns"].items()},
             "clocks_aligned_on_collectives": tl.aligned}
    return trace.write_chrome(path, tl.events, tl.joined, tl.names, other, inputs)
