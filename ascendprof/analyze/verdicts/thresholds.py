"""The verdicts' thresholds, each with where its value comes from (docs/verdicts.md).

Shares of the step rank problems (seed 000's triage); absolute times per step confirm them
(msprof-analyze advisor's slow-rank rule, ../shared/design/causal-verdicts.md §1).
"""

from __future__ import annotations

import math

#: A rank's (or stage's) Computing or Free must exceed its peers' by this many percent of the
#: median step time, in ms per step (absolute time confirms, design note §1). msprof-analyze
#: advisor: a slow rank when (max − min) of Computing over the mean step time exceeds 0.05.
#: Seed 000's share spread (Computing / Free share within a group) ranks the verdicts.
EXCESS_OF_STEP_PCT = 5.0
#: ... and by at least this many ms per step (absolute floor, design note §1). Measured: ranks
#: doing the same work differ by 0.01-0.7 ms of Computing on the real clusters
#: (Qwen3 stages 0 and 1: 0.4 and 0.7 ms; torch_npu 2-rank: 0.01-0.03 ms).
MIN_EXCESS_MS = 1.0
#: A single rank among >= 3 peers is an outlier only when its robust z-score
#: 0.6745·(x − median)/MAD reaches this (Iglewicz and Hoaglin's usual 3.5); a larger
#: part of the set above the threshold is a split of the set (category "compute").
SLOW_RANK_MAD_Z = 3.5
#: Extra Free on a rank is a schedule problem only when it makes the rank late: it must arrive
#: at its communication ops later than the other members (per step, beyond what the ranks
#: doing the same work show) by this fraction of its extra Free (ours: in synchronous training
#: the whole excess delays it; a half leaves room for partial overlap). Without per-op
#: communication data the check cannot run and the verdict says so.
BLAME_RATIO = 0.5
#: Communication(Not Overlapped) share of the step on a rank above which its communication is
#: examined (ours: seed 000 names "long" without a number; at 30 % communication is the
#: largest part after Computing on the clusters we know).
COMM_SHARE_PCT = 30.0
#: Share of the time in communication ops that is waiting above which the communication is
#: waiting (for whom), not transfer (ours: the larger half).
WAIT_RATIO = 0.5
#: Slow link / group: bandwidth below this fraction of the median of comparable links (ours;
#: measured spread of comparable links on real clusters: HCCS 14.8-16.0 GB/s on the
#: 8-member torch_npu group, 18.67-18.69 GB/s on Qwen3's dp links, i.e. within ±5 %).
SLOW_LINK_BW_RATIO = 0.6
#: Links moving less than this many MB (10^6 bytes) per step are latency-bound and not judged
#: (msprof-analyze advisor packet rule: RDMA packets under 1 MB are "small").
SLOW_LINK_MIN_MB = 1.0
#: A finding is "critical" when it is this many times beyond its threshold (ours).
CRITICAL_FACTOR = 2.0
#: At most this many separate verdicts of one kind per set of ranks doing the same work (slow
#: ranks / nodes / groups, transient stragglers) or per transport (slow links, slow groups);
#: beyond, one verdict describes the distribution: how many, how far, the worst few, what
#: they share (ours: a user reads a handful of causes; many failing the same test is one
#: finding about the cluster, not one each).
MAX_SEPARATE_VERDICTS = 4.0

NAMES = ("EXCESS_OF_STEP_PCT", "MIN_EXCESS_MS",
         "SLOW_RANK_MAD_Z", "BLAME_RATIO", "COMM_SHARE_PCT", "WAIT_RATIO", "SLOW_LINK_BW_RATIO",
         "SLOW_LINK_MIN_MB", "CRITICAL_FACTOR", "MAX_SEPARATE_VERDICTS")


#: thresholds of contributed rules (verdicts.register_rule(..., thresholds=...)): name -> default
CONTRIBUTED: dict[str, float] = {}
def thresholds(overrides: dict | None = None, extra: dict | None = None) -> dict:
    """The module constants, the analyses' rule thresholds ``extra`` ({lower-case name:
    default}: analyze.registry.thresholds, passed by the engine) and those of rules registered
    with verdicts.register_rule, as ``{lower-case name: value}``, updated by ``overrides``.

    Keys of ``overrides`` are the lower-case names (``comm_share_pct``, ``data_bound_pct`` …);
    ``None`` values are ignored. Raises ``ValueError`` for an unknown key or a non-numeric /
    negative value.
    """
    th = {n.lower(): float(globals()[n]) for n in NAMES}
    th.update(extra or {})
    th.update(CONTRIBUTED)
    for k, v in (overrides or {}).items():
        if v is None:
            continue
        key = str(k).lower().replace("-", "_")
        if key not in th:
            raise ValueError(f"unknown threshold {k!r}; known: {', '.join(sorted(th))}")
        try:
            val = float(v)
        except (TypeError, ValueError):
            raise ValueError(f"threshold {k!r} must be a number, got {v!r}") from None
        if not math.isfinite(val) or val < 0:
            raise ValueError(f"threshold {k!r} must be a finite number >= 0, got {v!r}")
        th[key] = val
    return th
