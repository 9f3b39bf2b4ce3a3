"""The links of a gate input: one row per communication group, step and src -> dst link (global
ranks) with its transport, transit size and transit time, for the ``bandwidth@link`` rule.

From the ranks' own communication_matrix.json (the COMM_LINKS table of a profiling directory or
of an analyse output's ``tables/``; spec §A.6), or from an output's
cluster_communication_matrix.json (its ``Total Op Info@<group>`` links, already in global
ranks). The profiler writes src and dst as group-local ranks; they are mapped to global ranks
through the self-links (``"i-i"``, reported by global rank r: local i is r), as msprof-analyze
maps them, else through the group's global ranks in ascending order (local i is the i-th),
accepted only when it maps the reporting rank to itself. Links that map neither way, self-links
(on-chip copies) and the top / middle / bottom summaries are left out.
"""

from __future__ import annotations

import pandas as pd

#: Columns of :attr:`~ascendprof.compare.diff.Side.links`.
LINK_COLUMNS = ["group", "step_key", "src", "dst", "transport", "size_mb", "transit_ns"]
#: msprof-analyze's summaries per op type, not ops (left out of totals, as it does)
_SUMMARIES = ("top", "middle", "bottom")


def from_rank_links(comm_links: pd.DataFrame | None, groups: dict) -> pd.DataFrame | None:
    """All ranks' COMM_LINKS rows (``rank, step_key, link_key, group, src_rank, dst_rank,
    transport, size_mb, transit_ns``) -> :data:`LINK_COLUMNS`, summed per group, step and global
    link. ``groups``: group id -> GroupLabel (its ``ranks``: the group's global ranks). None
    when no link maps."""
    if comm_links is None or not len(comm_links):
        return None
    c = comm_links[["rank", "step_key", "link_key", "group", "src_rank", "dst_rank", "transport",
                    "size_mb", "transit_ns"]].dropna(subset=["src_rank", "dst_rank"]).copy()
    c = c[~c["link_key"].astype(str).str.contains("|".join(_SUMMARIES))]
    if not len(c):
        return None
    c["group"] = c["group"].astype(str)
    c["step_key"] = c["step_key"].astype(str)
    for col in ("rank", "src_rank", "dst_rank"):
        c[col] = c[col].astype(int)
    selfs = c[c["src_rank"] == c["dst_rank"]]
    by_self = {(g, s, loc): r for g, s, loc, r in zip(selfs["group"], selfs["step_key"],
                                                      selfs["src_rank"], selfs["rank"])}
    c = c[c["src_rank"] != c["dst_rank"]]
    src, dst = [], []
    for g, s, r, a, b in zip(c["group"], c["step_key"], c["rank"], c["src_rank"], c["dst_rank"]):
        ga, gb = by_self.get((g, s, a)), by_self.get((g, s, b))
        if ga is None or gb is None:
            ranks = getattr(groups.get(g), "ranks", ()) or ()
            if a < len(ranks) and b < len(ranks) and ranks[a] == r:
                ga, gb = ranks[a], ranks[b]
        src.append(ga)
        dst.append(gb)
    c["src"], c["dst"] = src, dst
    c = c.dropna(subset=["src", "dst"])
    if not len(c):
        return None
    c["src"] = c["src"].astype(int)
    c["dst"] = c["dst"].astype(int)
    c["transport"] = c["transport"].fillna("").astype(str)
    out = c.groupby(["group", "step_key", "src", "dst", "transport"], sort=True)[
        ["size_mb", "transit_ns"]].sum().reset_index()
    return out[LINK_COLUMNS]


def from_matrix(links: pd.DataFrame) -> pd.DataFrame | None:
    """:func:`ascendprof.report.readback.matrix_links` rows (cluster_communication_matrix.json's
    ``Total Op Info`` links, global ranks, ms and MB) -> :data:`LINK_COLUMNS` (self-links left
    out). None when there is none."""
    if links is None or not len(links):
        return None
    m = links[links["Src Rank"] != links["Dst Rank"]]
    if not len(m):
        return None
    out = pd.DataFrame({
        "group": m["Group Id"].astype(str), "step_key": m["Step"].astype(str),
        "src": m["Src Rank"].astype(int), "dst": m["Dst Rank"].astype(int),
        "transport": m["Transport Type"].fillna("").astype(str),
        "size_mb": pd.to_numeric(m["Transit Size(MB)"], errors="coerce").astype(float),
        "transit_ns": pd.to_numeric(m["Transit Time(ms)"], errors="coerce").astype(float) * 1e6})
    return out.dropna(subset=["size_mb", "transit_ns"]).reset_index(drop=True)[LINK_COLUMNS]
