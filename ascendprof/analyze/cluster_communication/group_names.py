"""How msprof-analyze names communication groups: the profiler's group name (a hash of the
group id), the parallel groups of profiler_metadata.json under those names, and the group key
``"(r0, r1, ...)"`` the cluster files are keyed by."""

from __future__ import annotations

from functools import lru_cache


def double_hash(text: str) -> int:
    """The profiler's name for a communication group: two 32-bit polynomial hashes (primes 29 and
    131) of the group id (``"group_name_5"``) joined into one 64-bit number."""
    h0 = h1 = 0
    for ch in text:
        h0 = (h0 * 29 + ord(ch)) & 0xFFFFFFFF
        h1 = (h1 * 131 + ord(ch)) & 0xFFFFFFFF
    return (h0 << 32) | h1


def parallel_groups(metadata: dict[int, dict]) -> dict[str, dict]:
    """group name as the profiler writes it (``str(double_hash(group id))``) -> ``{"group_id",
    "pg_name", "global_ranks"}`` from every rank's ``parallel_group_info`` (§A.13); the first
    rank (ascending) that lists a group id wins."""
    out: dict[str, dict] = {}
    for rank in sorted(metadata):
        info = (metadata.get(rank) or {}).get("parallel_group_info")
        if not isinstance(info, dict):
            continue
        for gid, g in info.items():
            key = str(double_hash(str(gid)))
            if key in out or not isinstance(g, dict):
                continue
            ranks = g.get("global_ranks")
            out[key] = {"group_id": gid, "pg_name": g.get("group_name", "") or "",
                        "global_ranks": sorted(ranks) if isinstance(ranks, list) else []}
    return out


def group_key(ranks) -> str:
    """``"(0, 1)"``: msprof-analyze's key, the tuple of a Python set of ranks."""
    s: set = set()
    for r in sorted(ranks):
        s.add(r)
    return str(tuple(s))


@lru_cache(maxsize=4096)
def _frozen_key(ranks: frozenset) -> str:
    return group_key(ranks)


def key_for(kind: str, group: str, coll: dict, p2p: dict) -> str:
    return _frozen_key(frozenset((p2p if kind == "p2p" else coll).get(group, ())))
