"""The per-rank result contract: what one rank's worker hands to the cluster step.

The engine's worker fills it, the cache stores it (as data only), the cluster step and the API
read it. It holds only Arrow tables, plain values and :class:`Problems`, so it pickles small
and crosses a process pool or a Dask cluster.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pyarrow as pa

from ascendprof.model import schemas as S
from ascendprof.model.problems import Problems
from ascendprof.model.source import Source

#: Tables small enough to send back from a worker and concatenate over ranks. COMM_OPS,
#: COMM_BANDWIDTH and COMM_SIZE_DIST stay in the worker: what the cluster step needs of them
#: travels as :class:`~ascendprof.analyze.cluster_communication.OpFragments` (the file),
#: ``memberships`` (the groups) and the table :data:`~ascendprof.analyze.verdicts.OP_ROWS`
#: (the verdicts' per-op numbers, see verdicts.op_rows).
SMALL_TABLES = (S.STEP_TRACE, S.STEPS, S.COMM_LINKS, S.OP_STATISTIC, S.ITERATIONS)


@dataclass
class RankResult:
    """What one rank contributes to the cluster analysis (picklable, small).

    ``tables``: the :data:`SMALL_TABLES` the rank had. ``breakdown``: the recomputed step
    breakdown (STEP_TRACE schema) and ``breakdown_method`` how it was obtained (or why not).
    ``op_partial`` / ``kernel_partial``: per-rank aggregates for op statistics.
    ``comm_fragments``: the rank's part of cluster_communication.json, serialised and compressed
    (list of cluster_communication.OpFragments); ``memberships``: its first op / link of every
    communication group (cluster_communication.first_memberships).
    """

    source: Source
    rank: int
    tables: dict[str, pa.Table] = field(default_factory=dict)
    meta: dict = field(default_factory=dict)
    breakdown: pa.Table | None = None
    breakdown_method: str = ""
    op_partial: pa.Table | None = None
    kernel_partial: pa.Table | None = None
    comm_fragments: list = field(default_factory=list)
    memberships: pa.Table | None = None
    problems: Problems = field(default_factory=Problems)
    missing: list[str] = field(default_factory=list)
    table_rows: dict[str, int] = field(default_factory=dict)
    #: the rank's advice findings and rule status (analyze.advice.rank_advice); None when off
    advice: dict | None = None
