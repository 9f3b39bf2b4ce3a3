"""What a reader returns for one rank: its tables, metadata and problems.

This is the contract between the readers (one per producer) and the analyzers. It is plain data
(picklable), so per-rank work can run in a process pool or on a distributed engine.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pyarrow as pa

from ascendprof.model.problems import Problems
from ascendprof.model.source import Source


@dataclass
class RankData:
    """Normalised data of one rank.

    ``tables`` maps a name from :mod:`ascendprof.model.schemas` to a table with exactly that schema
    (a name is absent when the input did not have that data). ``meta`` holds the parsed
    ``profiler_info`` / ``profiler_metadata`` JSON objects (keys ``"profiler_info"``,
    ``"profiler_metadata"``), ``missing`` names files an analysis wanted but did not find.
    """

    source: Source
    rank: int
    tables: dict[str, pa.Table] = field(default_factory=dict)
    meta: dict = field(default_factory=dict)
    problems: Problems = field(default_factory=Problems)
    missing: list[str] = field(default_factory=list)
    spilled: dict = field(default_factory=dict)

    def get(self, name: str) -> pa.Table | None:
        return self.tables.get(name)

    def has(self, name: str) -> bool:
        t = self.tables.get(name)
        if t is None and name in self.spilled:
            return self.spilled[name].num_rows > 0
        return t is not None and t.num_rows > 0

    def num_rows(self, name: str) -> int:
        """Rows of table ``name`` (of the whole table when spilled)."""
        if name in self.spilled:
            return self.spilled[name].num_rows
        t = self.tables.get(name)
        return 0 if t is None else t.num_rows

    def names(self) -> list[str]:
        """Every table the rank has, in memory or spilled."""
        return list(dict.fromkeys([*self.tables, *self.spilled]))
