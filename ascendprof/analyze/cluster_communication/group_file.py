"""communication_group.json as msprof-analyze writes it."""

from __future__ import annotations

import pyarrow as pa

from ascendprof.analyze.cluster_communication.group_names import parallel_groups
from ascendprof.analyze.cluster_communication.membership import group_membership


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
