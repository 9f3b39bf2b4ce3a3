"""Which ranks belong to which communication group: the first op or link of every (kind, group,
rank), computed per rank in the workers, and the groups' rank sets from them."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc


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
