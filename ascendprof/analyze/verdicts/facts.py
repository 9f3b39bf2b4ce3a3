"""What the verdict rules read, derived once per cluster: step values per rank, pipeline
stages, communication groups and which of their members were collected, the op-time split and
the wait-for graph (who waits for whom), and the links. Tables in, frames out; no files.

Communication group ids. The profiler writes a group as a number after ``@`` in op names
(``hcom_allReduce__170_1_1@3985310491373102170``). It is the 64-bit "double hash" of the
``parallel_group_info`` key in profiler_metadata.json (``"group_name_20"`` → 3985310491373102170):
two 32-bit polynomial hashes of the key's characters with multipliers 29 and 131, the first in
the high word. Checked on fixtures/qwen3-4rank-pp2dp2: every group id in communication.json maps to
a key of some rank's parallel_group_info (e.g. pp of ranks 0,2 = group_name_19 =
3985310405473756128); msprof-analyze joins the two the same way. ``global_ranks`` lists the
group's global ranks in group-rank order, which maps the group-local src/dst of
communication_matrix.json to global ranks.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from ascendprof.analyze.cluster_communication import double_hash
from ascendprof.analyze.verdicts import opsplit
from ascendprof.model.results import concat_parts

#: Group names (parallel_group_info ``group_name``) that denote the pipeline-parallel group.
PP_GROUP_NAMES = ("pp", "pipeline", "pipeline_parallel", "pipeline_model_parallel")


def group_directory(metadata: dict[int, dict]) -> dict[str, dict]:
    """Communication groups named in profiler_metadata.json ``parallel_group_info`` (§A.13).

    Returns ``{group id as the COMM tables write it: {"key", "name", "global_ranks"}}``; each
    group is listed under its numeric id (double hash of the key) and under the key itself.
    """
    out: dict[str, dict] = {}
    for key, info in _group_infos(metadata):
        entry = {"key": str(key), "name": str(info.get("group_name") or key),
                 "global_ranks": [int(r) for r in info.get("global_ranks") or []]}
        out.setdefault(str(double_hash(str(key))), entry)
        out.setdefault(str(key), entry)
    return out


def _group_infos(metadata: dict[int, dict]):
    """(key, info) of every group object in the ranks' parallel_group_info."""
    for meta in metadata.values():
        pgi = (meta or {}).get("parallel_group_info") or {}
        for key, info in pgi.items() if isinstance(pgi, dict) else ():
            if isinstance(info, dict):
                yield key, info


def stages(metadata: dict[int, dict]) -> dict[int, int]:
    """rank -> pipeline-parallel stage (0-based), from the ``pp`` group of parallel_group_info.

    The stage is the rank's position in the pp group's ``global_ranks``. Empty when no rank's
    metadata names a pipeline group of more than one rank.
    """
    out: dict[int, int] = {}
    for _, info in _group_infos(metadata):
        if str(info.get("group_name", "")).lower() in PP_GROUP_NAMES and len(
                ranks := [int(r) for r in info.get("global_ranks") or []]) >= 2:
            for pos, r in enumerate(ranks):
                out.setdefault(r, pos)
    return out


def step_frame(step_trace, breakdown) -> pd.DataFrame:
    """Per rank and step: ``computing_ns, cno_ns, overlapped_ns, free_ns, bubble_ns, total_ns``.

    Reported values (``step_trace``, STEP_TRACE schema) are used for every rank that has them;
    the recomputed ``breakdown`` fills ranks without reported rows (``source`` says which).
    ``total_ns`` = Computing + Communication(Not Overlapped) + Free, the partition of the step's
    device time (spec §7.1.c). Empty frame when neither table has rows.
    """
    parts, reported = [], None
    for table, source in ((step_trace, "reported"), (breakdown, "recomputed")):
        if table is None or table.num_rows == 0:
            continue
        t = table.select(_STEP_COLUMNS)
        if reported is not None:  # the ranks without reported rows
            t = t.filter(pc.invert(pc.is_in(t["rank"], value_set=reported)))
            if not t.num_rows:
                continue
        else:
            reported = pc.unique(t["rank"])
        # int64 with a missing value as 0 (a missing step as -1), made on the Arrow columns:
        # pandas' conversions copied the frame column by column (~0.3 GB at 10^6 steps)
        df = pa.table({"rank": t["rank"].cast(pa.int64()),
                       "step": pc.fill_null(t["step"].cast(pa.int64(), safe=False), -1),
                       **{_RENAME.get(c, c): pc.fill_null(t[c].cast(pa.int64(), safe=False), 0)
                          for c in _STEP_COLUMNS[2:]}}).to_pandas()
        df["total_ns"] = df["computing_ns"] + df["cno_ns"] + df["free_ns"]
        df["source"] = source
        parts.append(df)
    cols = ["rank", "step", "computing_ns", "cno_ns", "overlapped_ns", "free_ns", "bubble_ns",
            "total_ns", "source"]
    if not parts:
        return pd.DataFrame(columns=cols)
    df = pd.concat(parts, ignore_index=True) if len(parts) > 1 else parts[0]
    return df[cols]


#: the STEP_TRACE columns :func:`step_frame` reads
_STEP_COLUMNS = ["rank", "step", "computing_ns", "comm_not_overlapped_ns", "overlapped_ns",
                 "free_ns", "bubble_ns"]
_RENAME = {"comm_not_overlapped_ns": "cno_ns"}


def rank_means(steps: pd.DataFrame) -> pd.DataFrame:
    """Mean per step of every part, per rank (index rank), plus ``n_steps``, ``source``
    ("reported" or "recomputed": which step values were used) and share columns
    ``computing_pct, free_pct, cno_pct`` (% of total_ns)."""
    num = ["computing_ns", "cno_ns", "overlapped_ns", "free_ns", "bubble_ns", "total_ns"]
    g = steps.groupby("rank")
    m = g[num].mean()
    m["n_steps"] = g.size()
    m["source"] = g["source"].first()
    tot = m["total_ns"].where(m["total_ns"] > 0)
    for c, p in (("computing_ns", "computing_pct"), ("free_ns", "free_pct"), ("cno_ns", "cno_pct")):
        m[p] = (100.0 * m[c] / tot).fillna(0.0)
    return m


def _summed_links(comm_links: pa.Table, as_float=("src_rank", "dst_rank", "transit_ns")
                  ) -> pd.DataFrame:
    """The rows of ``comm_links`` :func:`link_table` sums, as a frame of the columns it reads:
    no LOCAL transport (upper-cased) and no self-link (a row without a local rank stays, as
    pandas compared it: NaN != x), and of each (rank, step, group, op type) its ``-total``
    entries when it has some. Filtered on Arrow columns, the op type and the ``-total`` test
    made once per distinct link key: an all-to-all cluster has millions of link rows, of
    which the frame holds the kept ones only (one in six with top1 / middle / bottom1 / bottom2
    / bottom3 / total per op type)."""
    transport = pc.utf8_upper(pc.fill_null(comm_links.column("transport").cast(pa.string()), ""))
    src, dst = comm_links.column("src_rank"), comm_links.column("dst_rank")
    apart = pc.fill_null(pc.not_equal(src, dst), True)  # NaN != x in the frame: True
    t = comm_links.set_column(comm_links.schema.get_field_index("transport"), "transport",
                              transport)
    t = t.filter(pc.and_(pc.not_equal(transport, "LOCAL"), apart))
    if t.num_rows == 0:
        return pd.DataFrame()
    keys = pc.dictionary_encode(pc.fill_null(t.column("link_key").cast(pa.string()), "")
                                ).combine_chunks()
    heads = [k.split("@")[0] for k in keys.dictionary.to_pylist()]
    key_code = keys.indices.to_numpy(zero_copy_only=False)
    op_type = np.array([h.rsplit("-", 1)[0] for h in heads], dtype=object)
    is_total = np.array([h.endswith("-total") for h in heads], dtype=bool)[key_code]
    # one id per (rank, step, group, op type): does it have a -total entry?
    unit = np.stack([t.column("rank").to_numpy(zero_copy_only=False).astype(np.int64),
                     _text_codes(t.column("step_key")), _text_codes(t.column("group")),
                     pd.factorize(op_type)[0][key_code]], axis=1)
    _, unit_id = np.unique(unit, axis=0, return_inverse=True)
    unit_id = unit_id.reshape(-1)
    has_total = np.bincount(unit_id, weights=is_total.astype(np.float64)) > 0
    t = t.filter(pa.array(is_total | ~has_total[unit_id]))
    lk = t.select(["rank", "step_key", "group", "src_rank", "dst_rank", "transport", "size_mb",
                   "transit_ns"]).to_pandas()
    for c in as_float:  # the whole column's dtype, as before
        if comm_links.column(c).null_count:
            lk[c] = lk[c].astype("float64")
    lk["group"] = lk["group"].fillna("").astype(str)
    lk["step_key"] = lk["step_key"].fillna("").astype(str)
    return lk


def _text_codes(col) -> np.ndarray:
    """Integer codes of a text column, a missing value the same code as ""."""
    enc = pc.dictionary_encode(pc.fill_null(col.cast(pa.string()), "")).combine_chunks()
    return enc.indices.to_numpy(zero_copy_only=False).astype(np.int64)


#: the columns of :func:`link_table`
LINK_COLUMNS = ["group", "group_name", "src_local", "dst_local", "src_rank", "dst_rank",
                "transport", "reported_by", "size_mb", "transit_ns", "bandwidth_gbps",
                "ranks_known"]


def link_table(comm_links, directory: dict[str, dict]) -> pd.DataFrame:
    """Per communication group, src→dst link and transport: size, transit time and bandwidth.

    Uses the ``<type>-total@<group>`` entries of communication_matrix.json (sums over the op
    instances of one op type, spec §A.6) when a rank/step/op type has them, otherwise sums every
    entry. LOCAL links (on-chip copies, src = dst) are left out: they are not links between ranks.
    Columns: ``group, group_name, src_local, dst_local, src_rank, dst_rank, transport, reported_by,
    size_mb, transit_ns, bandwidth_gbps, ranks_known``; sizes and times are means per step;
    ``src_rank/dst_rank`` are global when the group is in ``directory`` (else the local numbers).
    """
    cols = LINK_COLUMNS
    if comm_links is None or comm_links.num_rows == 0:
        return pd.DataFrame(columns=cols)
    return _link_table(_summed_links(comm_links), directory, cols)


def _link_table(lk: pd.DataFrame, directory: dict[str, dict], cols: list[str]) -> pd.DataFrame:
    """:func:`link_table` of the rows :func:`_summed_links` kept."""
    if lk.empty:
        return pd.DataFrame(columns=cols)
    lk["size_mb"] = pd.to_numeric(lk["size_mb"], errors="coerce").fillna(0.0)
    lk["transit_ns"] = pd.to_numeric(lk["transit_ns"], errors="coerce").fillna(0)
    n_steps = lk.groupby("rank")["step_key"].nunique().rename("n_step_keys")
    g = lk.groupby(["group", "src_rank", "dst_rank", "transport", "rank"], as_index=False)[
        ["size_mb", "transit_ns"]].sum()
    g = g.merge(n_steps, left_on="rank", right_index=True)
    g["size_mb"] /= g["n_step_keys"]
    g["transit_ns"] /= g["n_step_keys"]
    g = g.rename(columns={"src_rank": "src_local", "dst_rank": "dst_local", "rank": "reported_by"})
    # MB / ms = GB/s (10^6 B / 10^-3 s = 10^9 B/s), as the profiler computes it (§7.3)
    g["bandwidth_gbps"] = (g["size_mb"] / (g["transit_ns"] / 1e6)).where(g["transit_ns"] > 0)

    def to_global(group, local):
        ranks = directory.get(group, {}).get("global_ranks") or []
        return ranks[int(local)] if 0 <= int(local) < len(ranks) else int(local)

    g["ranks_known"] = g["group"].map(lambda x: bool(directory.get(x, {}).get("global_ranks")))
    g["src_rank"] = [to_global(a, b) for a, b in zip(g["group"], g["src_local"])]
    g["dst_rank"] = [to_global(a, b) for a, b in zip(g["group"], g["dst_local"])]
    g["group_name"] = g["group"].map(lambda x: directory.get(x, {}).get("name", x))
    return g[cols]


def group_sizes_from_links(comm_links) -> dict[str, int]:
    """{group id: highest group-local rank in communication_matrix.json + 1}: how many members
    the group has at least (each rank's file names the group-local ranks it sends to, §A.6)."""
    if comm_links is None or comm_links.num_rows == 0:
        return {}
    df = comm_links.select(["group", "src_rank", "dst_rank"]).to_pandas()
    df["group"] = df["group"].fillna("").astype(str)
    hi = df[["src_rank", "dst_rank"]].max(axis=1)
    # a group whose link keys name no rank number ("x-y": null src and dst) tells no size
    return {str(g): int(v) + 1 for g, v in hi.groupby(df["group"]).max().items()
            if g and not pd.isna(v)}


@dataclass
class GroupInfo:
    """One communication group: ``id`` as in communication.json, ``name`` its parallel-group
    name (None when the profiler wrote none), ``global_ranks`` (None when unknown), ``size``
    (number of members when known), ``collected`` (its collected global ranks)."""

    id: str
    name: str | None = None
    key: str | None = None
    global_ranks: list[int] | None = None
    size: int | None = None
    collected: list[int] = field(default_factory=list)

    @property
    def label(self) -> str:
        return self.name or f"group {self.id}"

    @property
    def absent(self) -> list[int]:
        """Global ranks of the members not collected (known only with global_ranks)."""
        if self.global_ranks is None:
            return []
        have = set(self.collected)
        return [r for r in self.global_ranks if r not in have]

    @property
    def n_absent(self) -> int:
        if self.global_ranks is not None:
            return len(self.absent)
        return max(0, (self.size or 0) - len(self.collected))

    def ref(self) -> dict:
        """The verdict format's group entry."""
        return {"name": self.label, "id": self.id,
                "global_ranks": list(self.global_ranks if self.global_ranks is not None
                                     else self.collected)}

    def text(self) -> str:
        """'pp (ranks 0, 2)' or 'group 175… (8 members; collected: ranks 0, 1)'."""
        if self.global_ranks is not None:
            return f"{self.label} ({ranks_text(self.global_ranks)})"
        size = f"at least {self.size} members; " if self.size else ""
        return f"{self.label} ({size}collected: {ranks_text(self.collected)})"


def ranks_text(ranks) -> str:
    """'rank 3', 'ranks 0, 1' or, for runs of 3 or more, 'ranks 0–31, 40'."""
    ranks = sorted({int(r) for r in ranks})
    if not ranks:
        return "no ranks"
    parts, i = [], 0
    while i < len(ranks):
        j = i
        while j + 1 < len(ranks) and ranks[j + 1] == ranks[j] + 1:
            j += 1
        parts += [f"{ranks[i]}–{ranks[j]}"] if j - i >= 2 else [str(r) for r in ranks[i:j + 1]]
        i = j + 1
    return ("rank " if len(ranks) == 1 else "ranks ") + ", ".join(parts)


class Facts:
    """Everything the rules read about one cluster (``ca``: engine.pipeline.ClusterAnalysis, or
    any object with its attributes ``step_trace``, ``breakdown``, ``metadata``, ``concat``,
    optionally ``op_row_batches``, ``ranks``, ``sources``, ``problems``), with thresholds
    ``th``. Times are ns per step (means over the rank's steps) unless a name says otherwise.

    Attributes: ``steps`` (step_frame), ``means`` (rank_means, index rank; None without step
    values), ``stage_of`` {rank: stage}, ``collected`` (sorted ranks in the analysis),
    ``unreadable`` (ranks found but not readable), ``world_size`` (None when unknown),
    ``absent`` (sorted global ranks expected but not collected), ``groups`` {id: GroupInfo},
    ``comp`` (OpTotals.components with ``group_name``), ``blame`` (the wait-for graph:
    ``waiter, waited_for, group, group_name, peer_wait_ns``), ``links`` (link_table),
    ``totals`` (OpTotals), ``missing_files`` {rank: [files]}, ``levels`` {rank: profiler level}, ``kinds`` {rank:
    source kind}.
    """

    def __init__(self, ca, th: dict):
        self.ca, self.th = ca, th
        meta = ca.metadata or {}
        self.directory = group_directory(meta)
        self.stage_of = stages(meta)
        self.steps = step_frame(ca.step_trace, ca.breakdown)
        self.means = rank_means(self.steps) if not self.steps.empty else None
        results = list(getattr(ca, "ranks", None) or [])
        self.collected = sorted({int(r.rank) for r in results}) or (
            sorted(int(r) for r in self.means.index) if self.means is not None else [])
        found = {int(s.rank) for s in (getattr(ca, "sources", None) or [])
                 if getattr(s, "rank", None) is not None}
        self.unreadable = sorted(found - set(self.collected)) if results else []
        self.missing_files = {int(r.rank): list(r.missing or []) for r in results}
        self.levels = {int(r.rank): getattr(r.source, "profiler_level", None) for r in results
                       if getattr(r, "source", None) is not None}
        #: {rank: source kind} (scan: torch_npu, mindspore, db, prof, raw_cann, ...)
        self.kinds = {int(r.rank): getattr(r.source, "kind", None) for r in results
                      if getattr(r, "source", None) is not None}
        self.world_size = max((int(((m or {}).get("distributed_args") or {}).get("world_size")
                                   or 0) for m in meta.values()), default=0) or None
        # a caller's concatenation when it holds one, else the ranks' links a batch of ranks
        # at a time (all of them at once were ~110 MB at 4096 ranks, under the verdicts' peak)
        batches = _link_batches(ca)
        if batches is None:
            links_raw = ca.links if getattr(ca, "links", None) is not None else \
                ca.concat("comm_links")
            link_sizes, summed = group_sizes_from_links(links_raw), None
        else:
            link_sizes, summed = _sizes_and_summed(batches)
        sizes = {gid: len(info["global_ranks"]) for gid, info in self.directory.items()
                 if info["global_ranks"]}
        for gid, n in link_sizes.items():
            sizes[gid] = max(n, sizes.get(gid, 0))
        self.flagged = self._comm_flagged()
        self.totals = opsplit.op_totals(_op_batches(ca), self.flagged, sizes)
        self.groups = self._groups(sizes)
        names = {gid: g.label for gid, g in self.groups.items()}
        self.comp = self.totals.components(names)
        self.blame = self.totals.blame_frame()
        self.blame["group_name"] = [names.get(g, g) for g in self.blame["group"]]
        self.links = (link_table(links_raw, self.directory) if summed is None else
                      _link_table(summed, self.directory, LINK_COLUMNS))
        del summed
        expected = set(range(self.world_size or 0))
        for g in self.groups.values():
            expected.update(g.global_ranks or ())
        self.absent = sorted(expected - set(self.collected))
        self._lateness: dict | None = None
        self._nodes: dict | None = None
        self._op_excess: OpExcess | None = None

    @property
    def op_excess(self) -> "OpExcess":
        """Which operators: :class:`OpExcess` of the collected ranks (built on first use)."""
        if self._op_excess is None:
            steps = ({} if self.means is None else
                     {int(r): int(n) for r, n in self.means["n_steps"].items()})
            self._op_excess = OpExcess(self.ca, steps)
        return self._op_excess

    # -- construction

    def _comm_flagged(self) -> dict:
        """{stage (None without stages): ranks} whose Communication(Not Overlapped) share of the
        step passes ``comm_share_pct``."""
        if self.means is None:
            return {}
        thr = self.th["comm_share_pct"]
        out: dict = {}
        for r in self.means.index:
            if self.means.loc[r, "cno_pct"] >= thr:
                out.setdefault(self.stage_of.get(int(r)), []).append(int(r))
        return out

    def _groups(self, sizes: dict[str, int]) -> dict[str, GroupInfo]:
        have = set(self.collected)
        out: dict[str, GroupInfo] = {}
        for gid, info in self.directory.items():
            if gid == info["key"]:
                continue  # listed under its id and its key: once, by id
            ranks = list(info["global_ranks"])
            out[gid] = GroupInfo(gid, info["name"], info["key"], ranks, len(ranks) or None,
                                 [r for r in ranks if r in have])
        members: dict[str, set] = {}
        for (rank, _kind, gid) in self.totals.comp:
            if gid:
                members.setdefault(gid, set()).add(int(rank))
        for gid, ranks in members.items():
            g = out.setdefault(gid, GroupInfo(gid, size=sizes.get(gid)))
            if g.global_ranks is None:
                g.collected = sorted(set(g.collected) | ranks)
                if g.size is not None:
                    g.size = max(g.size, len(g.collected))
        return out

    # -- queries

    def ranks_with_steps(self) -> list[int]:
        return [] if self.means is None else sorted(int(r) for r in self.means.index)

    def same_work_sets(self) -> dict:
        """Ranks that do the same work: {stage: ranks} with pipeline stages, else {None: all}
        (ranks with step values only)."""
        ranks = self.ranks_with_steps()
        if not self.stage_of:
            return {None: ranks} if ranks else {}
        out: dict = {}
        for r in ranks:
            out.setdefault(self.stage_of.get(r), []).append(r)
        return out

    def median_step_ns(self, ranks=None) -> float:
        m = self.means if ranks is None else self.means.loc[list(ranks)]
        return float(m["total_ns"].median())

    def excess_threshold_ns(self, ranks=None) -> float:
        """The confirmation threshold in ns: ``excess_of_step_pct`` of the median step of
        ``ranks`` (all ranks when None), at least ``min_excess_ms``."""
        return max(self.th["excess_of_step_pct"] / 100.0 * self.median_step_ns(ranks),
                   self.th["min_excess_ms"] * 1e6)

    def step_sources(self, ranks) -> dict[str, str]:
        """{rank: "reported" | "recomputed"}: which step values a verdict used for each rank."""
        if self.means is None:
            return {}
        return {str(int(r)): str(self.means.loc[r, "source"]) for r in sorted(set(ranks))
                if r in self.means.index}

    def waits_for(self, late: set, waiters: set | None = None) -> pd.DataFrame:
        """Rows of the wait-for graph where a rank outside ``late`` (and in ``waiters`` when
        given) waits for a rank in ``late``."""
        b = self.blame
        sel = b["waited_for"].isin(late) & ~b["waiter"].isin(late)
        if waiters is not None:
            sel &= b["waiter"].isin(waiters)
        return b[sel]

    def max_wait_for(self, rank: int) -> float:
        """The most any single rank waits per step for ``rank`` (ns, over all groups)."""
        b = self.blame[(self.blame["waited_for"] == rank) & (self.blame["waiter"] != rank)]
        return float(b.groupby("waiter")["peer_wait_ns"].sum().max()) if len(b) else 0.0

    def lateness(self, rank: int) -> float:
        """How long the communication ops of ``rank`` waited for it alone (it arrived last),
        ns per step (opsplit ``late_ns``, summed over its ops). Only the ops of groups within
        its pipeline stage count when it has such ops with a collected peer: a delay that made
        it late at a tensor-parallel op reaches its pipeline neighbours too, and is not counted
        again in the p2p op after it (nor pipeline filling and draining)."""
        if self._lateness is None:
            self._lateness = self._all_lateness()
        return float(self._lateness.get(int(rank), 0.0))

    def _all_lateness(self) -> dict[int, float]:
        if self.comp.empty:
            return {}
        c = self.comp
        gids = c["group"].unique()
        within = {g: (not self.crosses_stages(g)) and len(self.group_of(g).collected) >= 2
                  for g in gids}
        inner = c["group"].map(within).astype(bool)
        has_inner = inner.groupby(c["rank"]).transform("any")
        use = c[inner | ~has_inner]
        return {int(r): float(v) for r, v in use.groupby("rank")["late_ns"].sum().items()}

    def node_of(self) -> dict[int, int]:
        """rank -> node (the smallest rank of its node): ranks joined by HCCS links
        (communication_matrix.json transport HCCS: the devices of one server). Ranks without
        HCCS links are a node of their own. Empty without links."""
        if self._nodes is not None:
            return self._nodes
        parent: dict[int, int] = {}

        def find(x):
            while parent.setdefault(x, x) != x:
                parent[x] = parent[parent[x]]
                x = parent[x]
            return x

        lk = self.links
        if not lk.empty:
            h = lk[(lk["transport"] == "HCCS") & lk["ranks_known"].astype(bool)]
            for a, b in zip(h["src_rank"].astype(int), h["dst_rank"].astype(int)):
                ra, rb = find(a), find(b)
                if ra != rb:
                    parent[max(ra, rb)] = min(ra, rb)
        self._nodes = {r: find(r) for r in list(parent)}
        return self._nodes

    def has_peer_data(self, rank: int) -> bool:
        """True when ``rank`` has communication ops in a group with another collected member
        (so whether its peers wait for it can be seen)."""
        if self.comp.empty:
            return False
        mine = set(self.comp.loc[self.comp["rank"] == rank, "group"])
        return any(len(self.groups[g].collected) >= 2 for g in mine if g in self.groups)

    def group_of(self, gid: str) -> GroupInfo:
        return self.groups.get(gid) or GroupInfo(gid)

    def crosses_stages(self, gid: str) -> bool:
        """True when the group's collected members sit in more than one pipeline stage."""
        g = self.group_of(gid)
        return len({self.stage_of.get(r) for r in g.collected}) > 1


def _op_batches(ca):
    """A callable giving the op_rows of every rank, one table per rank in rank order (the
    workers' OP_ROWS, through ``ca.op_row_batches`` when the cluster has it), else one table
    built from the full COMM_OPS / COMM_BANDWIDTH tables (tests, tools)."""
    batches = getattr(ca, "op_row_batches", None)
    if batches is not None and any(True for _ in batches()):
        return batches
    rows = opsplit.op_rows(ca.concat("comm_ops"), ca.concat("comm_bandwidth"))
    parts = [rows] if rows is not None and rows.num_rows else []
    return lambda: iter(parts)


def _loaded(t):
    """A rank result's table, read back when a spill parked it (engine.spill.ParkedTable has
    ``load``; an Arrow table has ``column``)."""
    return t.load() if t is not None and hasattr(t, "load") and not hasattr(t, "column") else t


#: ranks whose links the verdicts read back and filter at a time (:func:`_link_batches`)
LINK_BATCH = 256


def _link_batches(ca):
    """The ranks' COMM_LINKS of ``ca`` as a generator of tables of :data:`LINK_BATCH` ranks
    each (rank results in order, read back when parked), or None when ``ca`` holds its links
    concatenated already (``ca.links``) or has no rank results to read them from."""
    ranks = getattr(ca, "ranks", None)
    if getattr(ca, "links", None) is not None or not ranks \
            or not all(isinstance(getattr(r, "tables", None), dict) for r in ranks):
        return None

    def batches():
        for i in range(0, len(ranks), LINK_BATCH):
            t = concat_parts((r.tables["comm_links"] for r in ranks[i:i + LINK_BATCH]
                              if "comm_links" in r.tables), promote_options="permissive")
            if t is not None and t.num_rows:
                yield t
    return batches()


def _sizes_and_summed(batches) -> tuple[dict[str, int], pd.DataFrame]:
    """(:func:`group_sizes_from_links`, :func:`_summed_links`) of the concatenation of the
    tables ``batches`` (ranks in order), one table at a time: the filter keeps or drops a
    row by its own rank's rows only, and the sizes are maxima."""
    best: dict[str, float] = {}
    frames, nulls = [], set()
    for t in batches:
        df = t.select(["group", "src_rank", "dst_rank"]).to_pandas()
        df["group"] = df["group"].fillna("").astype(str)
        hi = df[["src_rank", "dst_rank"]].max(axis=1).groupby(df["group"]).max()
        for g, v in hi.items():
            if not pd.isna(v):  # a group with null ranks only tells no size
                best[g] = max(v, best.get(g, v))
        del df, hi
        nulls.update(c for c in ("src_rank", "dst_rank", "transit_ns") if t.column(c).null_count)
        lk = _summed_links(t, as_float=())
        if not lk.empty:
            frames.append(lk)
    sizes = {str(g): int(best[g]) + 1 for g in sorted(best) if g}
    if not frames:
        return sizes, pd.DataFrame()
    lk = pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]
    for c in sorted(nulls):
        lk[c] = lk[c].astype("float64")
    return sizes, lk


#: the key columns of each partial OpExcess compares, in the order its rows name them
_EXCESS_KEYS = {"op_partial": ("op_type", "accelerator_core"),
                "kernel_partial": ("name", "input_shapes", "op_type")}


@dataclass
class _KeyedTimes:
    """The ranks' partial rows in numbers only (:func:`_per_step_frame`): ``frame`` has the
    columns ``key`` (int64, a row of ``keys``), ``rank``, ``per_step_ns`` and
    ``per_step_count`` (float64, per step of the rank); ``keys`` holds each distinct key as a
    tuple of texts (a missing text is ""), in the order of the key columns."""

    frame: pd.DataFrame
    keys: list


def _per_step_frame(ranks, attr: str, steps_of: dict[int, int]) -> _KeyedTimes | None:
    """The ranks' partial ``attr`` (op_partial or kernel_partial, read back when parked) in
    rank order, as :class:`_KeyedTimes`: ``total_ns`` and ``count`` divided by the rank's
    number of steps (``steps_of``, at least 1); None when no rank has rows. The key texts
    become one integer per row, each distinct key held once: the texts of every row of 4096
    ranks (and their copies in each comparison) were ~30 MB of the verdicts' peak. Read a
    rank at a time; partials that differ in schema (a column missing, dictionary-encoded
    texts) are read alike."""
    names = _EXCESS_KEYS[attr]
    index: list[dict[str, int]] = [{} for _ in names]
    codes: list[list[np.ndarray]] = [[] for _ in names]
    rank, total, count, steps = [], [], [], []
    for t, n in _partials(ranks, attr, steps_of):
        for i, k in enumerate(names):
            codes[i].append(_shared_codes(t.column(k) if k in t.column_names else None,
                                        t.num_rows, index[i]))
        rank.append(t.column("rank").to_numpy().astype(np.int64))
        total.append(t.column("total_ns").to_numpy().astype(float))
        count.append(t.column("count").to_numpy().astype(float))
        steps.append(np.full(t.num_rows, n, dtype=np.int64))
    if not steps:
        return None
    # one code per distinct key: mixed radix over the columns' codes, then made dense
    combined = np.zeros(sum(len(a) for a in steps), dtype=np.int64)
    for i in range(len(names)):
        combined = combined * max(len(index[i]), 1) + np.concatenate(codes[i])
    distinct, key = np.unique(combined, return_inverse=True)
    texts = [list(d) for d in index]
    parts = []
    for i in reversed(range(len(names))):
        radix = max(len(index[i]), 1)
        distinct, digit = np.divmod(distinct, radix)
        parts.append([texts[i][j] for j in digit])
    keys = list(zip(*reversed(parts)))
    n = np.concatenate(steps)
    frame = pd.DataFrame({"key": key.astype(np.int64), "rank": np.concatenate(rank),
                          "per_step_ns": np.concatenate(total) / n,
                          "per_step_count": np.concatenate(count) / n})
    return _KeyedTimes(frame, keys)


def _shared_codes(column, rows: int, index: dict[str, int]) -> np.ndarray:
    """An integer per row of the text ``column`` (None: all missing), equal texts equal
    codes across calls sharing ``index`` (text -> code, grown here); a missing text is ""."""
    if column is None:
        return np.full(rows, index.setdefault("", len(index)), dtype=np.int64)
    out = []
    for chunk in column.chunks:
        if pa.types.is_dictionary(chunk.type):
            chunk = chunk.cast(chunk.type.value_type)
        enc = pc.fill_null(chunk.cast(pa.string()), "").dictionary_encode()
        local = np.array([index.setdefault(s, len(index)) for s in enc.dictionary.to_pylist()],
                         dtype=np.int64)
        out.append(local[enc.indices.to_numpy(zero_copy_only=False)] if len(local)
                   else np.zeros(len(chunk), dtype=np.int64))
    return np.concatenate(out) if out else np.zeros(0, dtype=np.int64)


def _partials(ranks, attr: str, steps_of: dict[int, int]):
    """(the rank's non-empty partial ``attr``, read back when parked; its number of steps, at
    least 1) of each of ``ranks`` in order."""
    for r in ranks:
        t = _loaded(getattr(r, attr, None))
        if t is not None and t.num_rows:
            yield t, max(1, int(steps_of.get(int(r.rank), 1)))


class OpExcess:
    """Which operators make some ranks slower than their peers: per rank and step, the time
    of every op type (Accelerator Core) and every kernel (name + input shapes) from
    kernel_details.csv (the workers' op-statistic and kernel partials: total ns over the
    capture, divided by the rank's number of steps in the step values). Ranks without
    kernel_details.csv (Qwen3's ranks 1 and 3) have no entry."""

    def __init__(self, ca, steps_of: dict[int, int]):
        ranks = list(getattr(ca, "ranks", None) or [])
        self.ops = _per_step_frame(ranks, "op_partial", steps_of)
        self.kernels = _per_step_frame(ranks, "kernel_partial", steps_of)

    def ranks(self) -> set[int]:
        return set() if self.ops is None else {int(r) for r in
                                               self.ops.frame["rank"].unique()}

    def excess(self, ranks, peers, top: int = 5) -> dict:
        """``{"op_types": [...], "kernels": [...], "ranks_compared": [...], "peers_compared":
        [...]}``: the op types and kernels whose time per step on ``ranks`` (median over
        those with kernel data; a key a rank lacks counts 0) exceeds that on ``peers`` the
        most, largest first, at most ``top`` each, only positive excesses: ``{"op_type",
        "accelerator_core", "excess_ms", "ms", "peer_ms", "count", "peer_count"}`` and
        ``{"kernel", "input_shapes", "op_type", ...}`` (ms per step and rank). Empty when
        either side has no kernel data."""
        have = self.ranks()
        a = sorted(set(int(r) for r in ranks) & have)
        b = sorted(set(int(r) for r in peers) & have - set(a))
        if not a or not b:
            return {}

        def side(kt: _KeyedTimes, keys, rs):
            # per key: the median over ``rs`` of each rank's sum (a rank without it: 0)
            df = kt.frame
            sub = df[df["rank"].isin(rs)]
            per = sub.groupby(["key", "rank"])[["per_step_ns", "per_step_count"]].sum()
            t = per["per_step_ns"].unstack("rank").reindex(columns=rs).fillna(0.0)
            c = per["per_step_count"].unstack("rank").reindex(columns=rs).fillna(0.0)
            at = pd.MultiIndex.from_tuples([kt.keys[i] for i in t.index], names=keys)
            t, c = t.median(axis=1), c.median(axis=1)
            t.index, c.index = at, at
            return t.sort_index(), c.sort_index()

        out = {"ranks_compared": a, "peers_compared": b}
        for name, df, keys in (("op_types", self.ops, ["op_type", "accelerator_core"]),
                               ("kernels", self.kernels, ["name", "input_shapes", "op_type"])):
            if df is None:
                continue
            ta, ca_ = side(df, keys, a)
            tb, cb = side(df, keys, b)
            idx = ta.index.union(tb.index)
            ta, tb = ta.reindex(idx, fill_value=0.0), tb.reindex(idx, fill_value=0.0)
            ca_, cb = ca_.reindex(idx, fill_value=0.0), cb.reindex(idx, fill_value=0.0)
            d = (ta - tb).sort_values(ascending=False, kind="stable")
            rows = []
            for key, v in d.head(top).items():
                if v <= 0:
                    break
                key = key if isinstance(key, tuple) else (key,)
                row = dict(zip(["kernel" if k == "name" else k for k in keys], key))
                row.update({"excess_ms": round(v / 1e6, 3), "ms": round(ta[key] / 1e6, 3),
                            "peer_ms": round(tb[key] / 1e6, 3),
                            "count": round(float(ca_[key]), 2),
                            "peer_count": round(float(cb[key]), 2)})
                rows.append(row)
            out[name] = rows
        return out
