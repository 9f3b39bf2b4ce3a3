"""Communication groups: how msprof-analyze names them (the profiler's group name, a hash of the
group id; parallel_group_info under that name; the group key ``"(r0, r1, ...)"`` the cluster
files are keyed by), which ranks belong to each, and communication_group.json."""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc


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
    return str(tuple(set(sorted(ranks))))  # added in order, as one by one


@lru_cache(maxsize=4096)
def _frozen_key(ranks: frozenset) -> str:
    return group_key(ranks)


def key_for(kind: str, group: str, coll: dict, p2p: dict) -> str:
    return _frozen_key(frozenset((p2p if kind == "p2p" else coll).get(group, ())))


def _membership_rows(table: pa.Table | None, source: int) -> pa.Table | None:
    if table is None or table.num_rows == 0:
        return None
    order = np.arange(table.num_rows, dtype=np.int64) + (source << 40)  # ops before links
    return pa.table({"rank": table.column("rank").cast(pa.int64()),
                     "kind": table.column("kind").cast(pa.string()),
                     "group": table.column("group").cast(pa.string()), "order": order})


def first_memberships(comm_ops: pa.Table | None, comm_links: pa.Table | None = None
                      ) -> pa.Table | None:
    """The first row of every (kind, group, rank) among ``comm_ops`` then ``comm_links``:
    columns ``kind, group, rank, order_min`` (row order, ops before links); None without rows.
    Computed per rank in the workers, it is all :func:`group_membership` needs."""
    parts = [t for t in (_membership_rows(comm_ops, 0), _membership_rows(comm_links, 1))
             if t is not None]
    if not parts:
        return None
    t = pa.concat_tables(parts)
    t = t.filter(pc.is_in(t.column("kind"), pa.array(["collective", "p2p"])))
    return t.group_by(["kind", "group", "rank"], use_threads=False).aggregate([("order", "min")])


def group_membership(comm_ops: pa.Table | None, comm_links: pa.Table | None = None, *,
                     firsts: pa.Table | None = None) -> tuple[dict[str, set], dict[str, set]]:
    """(collective, p2p): group name -> set of global ranks that report an op of it in
    communication.json or a link in communication_matrix.json, in first-seen order (ranks
    ascending, each rank's ops in file order, then its links). ``firsts``: the
    :func:`first_memberships` of every rank concatenated, used instead of the tables."""
    coll: dict[str, set] = {}
    p2p: dict[str, set] = {}
    first = firsts if firsts is not None else first_memberships(comm_ops, comm_links)
    if first is None or first.num_rows == 0:
        return coll, p2p
    # a rank's rows in its own order (the per-rank orders compare within a rank only)
    first = first.sort_by([("rank", "ascending"), ("order_min", "ascending")])
    for rank, kind, group in zip(first.column("rank").to_pylist(),
                                 first.column("kind").to_pylist(),
                                 first.column("group").to_pylist()):
        (coll if kind == "collective" else p2p).setdefault(group, set()).add(rank)
    return coll, p2p


def build_groups(comm_ops: pa.Table | None, metadata: dict[int, dict],
                 comm_links: pa.Table | None = None, membership=None) -> dict:
    """communication_group.json as msprof-analyze writes it.

    In: COMM_OPS (and optionally COMM_LINKS, which msprof-analyze also reads for membership),
    rank -> profiler_metadata object. Out: ``{"collective": [[ranks]...], "p2p": [[ranks]...],
    "comm_group_parallel_info": [{"type", "rank_set", "group_name", "group_id", "pg_name"}...]}``;
    ``rank_set`` is the group's ``global_ranks`` when parallel_group_info knows the group, else the
    ranks seen. With no communication data all three lists are empty (msprof-analyze still writes
    the file then). ``membership``: :func:`group_membership` of the same tables when the caller
    has it already.
    """
    coll, p2p = membership or group_membership(comm_ops, comm_links)
    pg = parallel_groups(metadata)
    info = []
    for kind, groups in (("collective", coll), ("p2p", p2p)):
        for name, ranks in groups.items():
            known = pg.get(name)
            rank_set = sorted(ranks)
            if known and known["global_ranks"]:
                rank_set = list(known["global_ranks"])
            info.append({"type": kind, "rank_set": rank_set, "group_name": name,
                         "group_id": known["group_id"] if known else "",
                         "pg_name": known["pg_name"] if known else ""})
    return {"collective": [list(_as_set(s)) for s in coll.values()],
            "p2p": [list(_as_set(s)) for s in p2p.values()],
            "comm_group_parallel_info": info}


def _as_set(ranks) -> set:
    s: set = set()
    for r in sorted(ranks):
        s.add(r)
    return s
