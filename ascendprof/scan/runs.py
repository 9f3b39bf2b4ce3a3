"""Which sources belong to one run (one profiling collection of one job), so that the ranks of
different jobs are never analysed as one cluster.

A run's ranks are written side by side (one output directory per job, ``*_ascend_pt`` /
``*_ascend_ms`` / ``PROF_*`` siblings) or copied per host into sibling folders. Sources are first
grouped by the directory holding them (their *anchor*: the parent of a rank directory, the
directory itself for legacy MindSpore and raw job directories). A group is split where its
sources cannot be one job:

- different producers (torch_npu, MindSpore, legacy MindSpore; CANN ``PROF_`` / raw data go with
  any of them), framework or CANN versions, or profiler levels;
- collection end times (profiler_info ``end_info.collectionTimeEnd``, PROF_ ``end_info``) more
  than :data:`RUN_GAP_S` apart: one job stops collecting on every rank within seconds;
- step ids that do not overlap (e.g. the two windows of a dynamic profiler).

Groups of different anchors are merged when they look like one job copied per host: the same
producer, versions and level, end times within :data:`RUN_GAP_S`, overlapping (or unknown) steps,
and no rank in both - unless it is a copy of the same rank (same end time). Sources without an
end time are never merged across directories.

Nothing here reads files: the scanner fills ``framework``, ``end_ns`` and ``host`` of each
:class:`~ascendprof.scan.Source`.
"""

from __future__ import annotations

import hashlib
import os
import time
from dataclasses import dataclass, field

#: collection end times further apart than this (seconds) are different runs
RUN_GAP_S = 300.0
#: producers that go with any framework (the CANN layer of the same job)
_ANY = ("cann",)


@dataclass
class Run:
    """One collection: ``name`` (its directory relative to the scanned root, ``.`` for the root
    itself; ``#2``… when one directory holds several), ``path`` (that directory) and its
    sources."""

    name: str
    path: str
    sources: list = field(default_factory=list)

    @property
    def ranks(self) -> list[int]:
        return sorted({s.rank for s in self.sources if s.rank is not None})

    @property
    def end_ns(self) -> int | None:
        ends = [s.end_ns for s in self.sources if s.end_ns]
        return max(ends) if ends else None

    def describe(self) -> str:
        """'text/level1 (2 ranks, torch_npu text, Level1, step 50, ended 2025-01-09 07:48 UTC)'."""
        kinds = sorted({s.label for s in self.sources})
        levels = sorted({s.profiler_level for s in self.sources if s.profiler_level})
        steps = sorted({st for s in self.sources for st in s.steps})
        parts = [f"{len(self.ranks)} rank{'s' if len(self.ranks) != 1 else ''}",
                 ", ".join(kinds)]
        parts += levels
        if steps:
            parts.append(f"step{'s' if len(steps) > 1 else ''} {_span(steps)}")
        if self.end_ns:
            parts.append("ended " + time.strftime("%Y-%m-%d %H:%M UTC",
                                                  time.gmtime(self.end_ns / 1e9)))
        return f"{self.name} ({', '.join(parts)})"

    def as_dict(self) -> dict:
        return {"name": self.name, "path": self.path, "ranks": self.ranks,
                "kinds": sorted({s.kind for s in self.sources}),
                "frameworks": sorted({s.framework for s in self.sources if s.framework}),
                "versions": sorted({v for s in self.sources
                                    for v in (s.framework_version, s.cann_version) if v}),
                "profiler_levels": sorted({s.profiler_level for s in self.sources
                                           if s.profiler_level}),
                "steps": sorted({st for s in self.sources for st in s.steps}),
                "hosts": sorted({s.host for s in self.sources if s.host}),
                "end_ns": self.end_ns, "n_sources": len(self.sources),
                "description": self.describe()}


def _span(steps: list[int]) -> str:
    if len(steps) > 2 and steps[-1] - steps[0] == len(steps) - 1:
        return f"{steps[0]}-{steps[-1]}"
    return ",".join(map(str, steps))


def anchor(source) -> str:
    """The directory that holds the job's per-rank output for this source."""
    if source.kind in ("legacy_mindspore", "raw_cann") and not \
            os.path.basename(source.path).startswith("PROF_"):
        return source.path
    return os.path.dirname(source.path.rstrip(os.sep)) or source.path


def _key(s) -> tuple:
    """What must be equal within a run (None: unknown, matches anything)."""
    fw = None if s.framework in _ANY else s.framework
    return (fw, s.framework_version, s.profiler_level)


def _compatible(a: tuple, b: tuple) -> bool:
    return all(x is None or y is None or x == y for x, y in zip(a, b))


def _split(sources: list) -> list[list]:
    """Split the sources of one directory where they cannot be one job."""
    buckets: list[list] = []
    for s in sorted(sources, key=lambda s: tuple(x is None for x in _key(s))):
        k = _key(s)
        fits = [b for b in buckets if all(_compatible(k, _key(x)) for x in b)]
        if len(fits) == 1 or (fits and all(x is None for x in k)):
            fits[0].append(s)
        else:
            buckets.append([s])
    out = []
    for b in buckets:
        for part in _split_by_time(b):
            out += _split_by_steps(part)
    return out


def _split_by_time(sources: list) -> list[list]:
    timed = sorted((s for s in sources if s.end_ns), key=lambda s: s.end_ns)
    untimed = [s for s in sources if not s.end_ns]
    if not timed:
        return [sources]
    parts, cur = [], [timed[0]]
    for s in timed[1:]:
        if (s.end_ns - cur[-1].end_ns) / 1e9 > RUN_GAP_S:
            parts.append(cur)
            cur = []
        cur.append(s)
    parts.append(cur)
    max(parts, key=len).extend(untimed)  # sources without a time go with the largest part
    return parts


def _split_by_steps(sources: list) -> list[list]:
    """Connected components of 'step sets overlap'; sources without steps join the largest."""
    with_steps = [s for s in sources if s.steps]
    without = [s for s in sources if not s.steps]
    comps: list[tuple[set, list]] = []
    for s in with_steps:
        st = set(s.steps)
        hit = [c for c in comps if c[0] & st]
        merged = (set(st), [s])
        for c in hit:
            merged[0].update(c[0])
            merged[1].extend(c[1])
            comps.remove(c)
        comps.append(merged)
    if not comps:
        return [sources]
    parts = [c[1] for c in comps]
    max(parts, key=len).extend(without)
    return parts


def _window(part: list) -> tuple[int, int] | None:
    ends = [s.end_ns for s in part if s.end_ns]
    return (min(ends), max(ends)) if ends else None


def _can_merge(a: list, b: list) -> bool:
    wa, wb = _window(a), _window(b)
    if wa is None or wb is None:
        return False
    if (max(wa[0], wb[0]) - min(wa[1], wb[1])) / 1e9 > RUN_GAP_S:
        return False
    if not all(_compatible(_key(x), _key(y)) for x in a for y in b):
        return False
    sa, sb = {st for s in a for st in s.steps}, {st for s in b for st in s.steps}
    if sa and sb and not sa & sb:
        return False
    ends_a = {s.rank: s.end_ns for s in a if s.rank is not None}
    for s in b:  # a rank in both is only allowed as a copy of the same collection
        if s.rank in ends_a and (not s.end_ns or not ends_a[s.rank]
                                 or abs(s.end_ns - ends_a[s.rank]) > 1e9):
            return False
    return True


def group_runs(sources: list, root) -> list[Run]:
    """The runs among ``sources`` (all of a scan of ``root``), in path order; every source is in
    exactly one run and gets its ``run`` name set."""
    root = os.path.abspath(str(root))
    by_anchor: dict[str, list] = {}
    for s in sources:
        by_anchor.setdefault(anchor(s), []).append(s)
    parts: list[tuple[str, list]] = []
    for a, srcs in sorted(by_anchor.items()):
        parts += [(a, p) for p in _split(srcs)]
    merged: list[tuple[set, list]] = []
    for a, p in parts:
        for m in merged:
            if _can_merge(m[1], p):
                m[0].add(a)
                m[1].extend(p)
                break
        else:
            merged.append(({a}, list(p)))
    runs = []
    for anchors, srcs in merged:
        paths = [os.path.abspath(s.path) for s in srcs]
        common = os.path.commonpath(paths) if len(paths) > 1 else paths[0]
        if len(paths) > 1 or len(anchors) > 1:
            common = os.path.commonpath(paths + [os.path.abspath(a) for a in anchors
                                                 if os.path.abspath(a).startswith(root)])
        base = common if common.startswith(root) else root
        name = os.path.relpath(base, root)
        runs.append(Run(name, base, sorted(srcs, key=lambda s: (s.rank is None, s.rank or 0,
                                                                 s.path))))
    runs.sort(key=lambda r: (r.name, r.end_ns or 0))
    seen: dict[str, int] = {}
    for r in runs:
        seen[r.name] = seen.get(r.name, 0) + 1
        if seen[r.name] > 1:
            r.name = f"{r.name}#{seen[r.name]}"
    for r in runs:
        for s in r.sources:
            s.run = r.name
    return runs


def pick(runs: list[Run], wanted: str) -> Run | None:
    """The run called ``wanted`` (its name, its path, or its 1-based number in the list)."""
    w = wanted.strip().rstrip("/")
    for r in runs:
        if w in (r.name, r.path, os.path.abspath(w) if os.path.exists(w) else None):
            return r
    if w.isdigit() and 1 <= int(w) <= len(runs):
        return runs[int(w) - 1]
    return None


def folder_names(names: list[str]) -> dict[str, str]:
    """One output folder name per run name (``analyse --each-run``): the run's path with ``/``
    as ``_`` and ``#`` as ``-`` (``.`` is ``run``), unique: names that would meet in one folder
    (``a/b`` and ``a_b``) each get 8 hex digits of a hash of the run name, so no run's outputs
    replace another's and the same run keeps its folder from one call to the next."""
    def plain(n: str) -> str:
        return n.replace(os.sep, "_").replace("/", "_").replace("#", "-") if n != "." else "run"

    counts: dict[str, int] = {}
    for n in names:
        counts[plain(n).lower()] = counts.get(plain(n).lower(), 0) + 1  # case-blind file systems
    out = {}
    for n in names:
        p = plain(n)
        if counts[p.lower()] > 1:
            p = f"{p}-{hashlib.sha256(n.encode('utf-8', 'surrogateescape')).hexdigest()[:8]}"
        out[n] = p
    return out
