"""Verdicts: where step time goes, and which rank, pipeline stage or link is the bottleneck.

Triage follows the MindSpore / MindStudio Insight guide (seeds 000 "定界、分析问题", 001):

- **compute** problem: within one communication group the spread (max − min) of the share of the
  step spent in Computing is large (some rank computes more than its peers);
- **schedule** problem: within one communication group the spread of the Free share is large
  (some rank idles while its peers work: uneven task distribution or host-bound dispatch);
- **communication** problem: Communication(Not Overlapped) takes a large share of the step.

A group whose ranks sit in different pipeline-parallel stages does different work by design, so
its imbalance is reported once as a **stage** verdict (which stage computes most and which stages
wait for it), not as a group verdict. Time in communication ops is split into *transfer* (data
moving: Transit Time, spec §7.2), *waiting for a slower peer* (a member's extra elapse over the
member that arrived last at the same op instance) and *other* (time all members spend alike);
when waiting dominates the verdict names the ranks or the stage that are waited for.
**slow_rank** uses a robust statistic of Computing and Free over the ranks that do the same work
(same stage);
**slow_link** compares each src→dst link's bandwidth (communication_matrix.json, spec §A.6,
§7.3) with the median of the links of the same transport type.

Inputs (a :class:`ascendprof.engine.pipeline.ClusterAnalysis`): ``step_trace`` / ``breakdown``
(STEP_TRACE schema, ns), ``concat(OP_ROWS)`` (:func:`op_rows`, made per rank by the workers) or
else ``concat("comm_ops")`` and ``concat("comm_bandwidth")``,
``concat("comm_links")``, ``concat("op_statistic")`` and ``metadata`` (profiler_metadata.json,
spec §A.13). Output: a list of verdict dicts (see :func:`derive`). Nothing here reads files.

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

import math
from itertools import repeat

import numpy as np
import pandas as pd

from ascendprof.analyze.cluster_communication import double_hash
from ascendprof.analyze.codes import text_codes

#: Compute problem: spread (max − min) of Computing as % of step time across a group's ranks,
#: in percentage points. 5 points matches msprof-analyze's slow-rank gap ratio of 5%.
COMPUTE_SPREAD_PCT = 5.0
#: Schedule problem: spread of Free as % of step time across a group's ranks (percentage points).
FREE_SPREAD_PCT = 5.0
#: Communication problem: Communication(Not Overlapped) as % of the step time on a rank.
COMM_SHARE_PCT = 30.0
#: Share of communication time that is waiting (not transfer) above which communication is
#: explained as waiting for a peer rather than slow transfer.
WAIT_RATIO = 0.5
#: Slow rank: a step part the rank's own work decides (Computing, Free) exceeds the
#: median of the other ranks of the same stage by at least this many percent of the step time
#: (relative to the step, so a 20 % longer but tiny part is not a slow rank) ...
SLOW_RANK_EXCESS_PCT = 5.0
#: ... and, when at least 3 peers exist, its robust z-score 0.6745·(x − median)/MAD exceeds this
#: (3.5 is the usual outlier cut of Iglewicz and Hoaglin). With 2 ranks MAD cannot single one
#: out, so only the excess over the other rank applies.
SLOW_RANK_MAD_Z = 3.5
#: Slow link: bandwidth below this fraction of the median of comparable links (same transport).
SLOW_LINK_BW_RATIO = 0.6
#: Links that moved less than this many MB (10^6 bytes) per step are latency-bound; their
#: bandwidth says nothing about the link and they are not judged.
SLOW_LINK_MIN_MB = 1.0
#: A finding is "critical" when it is this many times beyond its threshold.
CRITICAL_FACTOR = 2.0

_NAMES = ("COMPUTE_SPREAD_PCT", "FREE_SPREAD_PCT", "COMM_SHARE_PCT", "WAIT_RATIO",
          "SLOW_RANK_EXCESS_PCT", "SLOW_RANK_MAD_Z", "SLOW_LINK_BW_RATIO", "SLOW_LINK_MIN_MB",
          "CRITICAL_FACTOR")

#: Group names (parallel_group_info ``group_name``) that denote the pipeline-parallel group.
PP_GROUP_NAMES = ("pp", "pipeline", "pipeline_parallel", "pipeline_model_parallel")

# Step parts a rank's own work decides. Step time is not judged (in synchronous training every
# rank's step ends together) and neither is Communication(Not Overlapped): more of it on a rank
# usually means it waits for the others, which the communication verdict explains.
_PARTS = (("computing_ns", "Computing"), ("free_ns", "Free"))
_SEVERITY_ORDER = {"critical": 0, "warning": 1, "info": 2}


def thresholds(overrides: dict | None = None) -> dict:
    """The module constants as ``{lower-case name: value}``, updated by ``overrides``.

    Keys of ``overrides`` are the lower-case constant names (``compute_spread_pct`` …); ``None``
    values are ignored. Raises ``ValueError`` for an unknown key or a non-numeric / negative value.
    """
    th = {n.lower(): float(globals()[n]) for n in _NAMES}
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


# ---------------------------------------------------------------------------------------------
# groups and stages from profiler_metadata.json


def group_directory(metadata: dict[int, dict]) -> dict[str, dict]:
    """Communication groups named in profiler_metadata.json ``parallel_group_info`` (§A.13).

    Returns ``{group id as the COMM tables write it: {"key", "name", "global_ranks"}}``; each
    group is listed under its numeric id (double hash of the key) and under the key itself.
    """
    out: dict[str, dict] = {}
    for meta in metadata.values():
        pgi = (meta or {}).get("parallel_group_info") or {}
        if not isinstance(pgi, dict):
            continue
        for key, info in pgi.items():
            if not isinstance(info, dict):
                continue
            ranks = [int(r) for r in info.get("global_ranks") or []]
            entry = {"key": str(key), "name": str(info.get("group_name") or key),
                     "global_ranks": ranks}
            out.setdefault(str(double_hash(str(key))), entry)
            out.setdefault(str(key), entry)
    return out


def stages(metadata: dict[int, dict]) -> dict[int, int]:
    """rank -> pipeline-parallel stage (0-based), from the ``pp`` group of parallel_group_info.

    The stage is the rank's position in the pp group's ``global_ranks``. Empty when no rank's
    metadata names a pipeline group of more than one rank.
    """
    out: dict[int, int] = {}
    for meta in metadata.values():
        pgi = (meta or {}).get("parallel_group_info") or {}
        for info in pgi.values() if isinstance(pgi, dict) else ():
            if not isinstance(info, dict):
                continue
            if str(info.get("group_name", "")).lower() not in PP_GROUP_NAMES:
                continue
            ranks = [int(r) for r in info.get("global_ranks") or []]
            if len(ranks) < 2:
                continue
            for pos, r in enumerate(ranks):
                out.setdefault(r, pos)
    return out


# ---------------------------------------------------------------------------------------------
# tables


def step_frame(step_trace, breakdown) -> pd.DataFrame:
    """Per rank and step: ``computing_ns, cno_ns, overlapped_ns, free_ns, bubble_ns, total_ns``.

    Reported values (``step_trace``, STEP_TRACE schema) are used for every rank that has them;
    the recomputed ``breakdown`` fills ranks without reported rows (``source`` says which).
    ``total_ns`` = Computing + Communication(Not Overlapped) + Free, the partition of the step's
    device time (spec §7.1.c). Empty frame when neither table has rows.
    """
    parts = []
    for table, source in ((step_trace, "reported"), (breakdown, "recomputed")):
        if table is None or table.num_rows == 0:
            continue
        df = table.to_pandas()
        if parts:
            df = df[~df["rank"].isin(parts[0]["rank"].unique())]
        df = df.assign(source=source)
        parts.append(df)
    cols = ["rank", "step", "computing_ns", "cno_ns", "overlapped_ns", "free_ns", "bubble_ns",
            "total_ns", "source"]
    if not parts:
        return pd.DataFrame(columns=cols)
    df = pd.concat(parts, ignore_index=True)
    df = df.rename(columns={"comm_not_overlapped_ns": "cno_ns"})
    for c in ("computing_ns", "cno_ns", "overlapped_ns", "free_ns", "bubble_ns"):
        df[c] = pd.to_numeric(df[c], errors="coerce").fillna(0).astype("int64")
    df["total_ns"] = df["computing_ns"] + df["cno_ns"] + df["free_ns"]
    df["step"] = pd.to_numeric(df["step"], errors="coerce").fillna(-1).astype("int64")
    df["rank"] = df["rank"].astype("int64")
    return df[cols]


def rank_means(steps: pd.DataFrame) -> pd.DataFrame:
    """Mean per step of every part, per rank (index rank), plus ``n_steps`` and share columns
    ``computing_pct, free_pct, cno_pct`` (% of total_ns)."""
    num = ["computing_ns", "cno_ns", "overlapped_ns", "free_ns", "bubble_ns", "total_ns"]
    g = steps.groupby("rank")
    m = g[num].mean()
    m["n_steps"] = g.size()
    tot = m["total_ns"].where(m["total_ns"] > 0)
    for c, p in (("computing_ns", "computing_pct"), ("free_ns", "free_pct"), ("cno_ns", "cno_pct")):
        m[p] = (100.0 * m[c] / tot).fillna(0.0)
    return m


_BW_KEY = ["rank", "step_key", "op", "group"]


def _op_keys(table):
    """(rank, step_key or '', op name before any '@', group or '') of every row, as an Arrow
    table with columns :data:`_BW_KEY` (a missing op name reads 'None', as str(None) did)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    name = pc.fill_null(table.column("op_name").cast(pa.string()), "None")
    op = pc.list_element(pc.split_pattern(name, "@", max_splits=1), 0)
    return pa.table({"rank": table.column("rank"),
                     "step_key": pc.fill_null(table.column("step_key").cast(pa.string()), ""),
                     "op": op, "group": pc.fill_null(table.column("group").cast(pa.string()), "")})


def _bandwidth_transit(comm_bandwidth):
    """Table of :data:`_BW_KEY` + ``bw_ns``: summed RDMA + SDMA Transit Time in ns (missing as
    0) per op that has such rows."""
    import pyarrow as pa
    import pyarrow.compute as pc

    transport = comm_bandwidth.column("transport").cast(pa.string())
    wanted = pc.fill_null(pc.is_in(pc.utf8_upper(transport), pa.array(["RDMA", "SDMA"])), False)
    bw = comm_bandwidth.filter(wanted)
    keys = _op_keys(bw).append_column("bw_ns", pc.fill_null(bw.column("transit_ns"), 0))
    return keys.group_by(_BW_KEY, use_threads=False).aggregate([("bw_ns", "sum")])


def _bw_transit_of(keys, comm_bandwidth):
    """Per row of ``keys`` (:func:`_op_keys` of COMM_OPS): the op's summed RDMA + SDMA transit
    (float64 ns; null when it has no such bandwidth row)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    rows = keys.append_column("__row", pa.array(np.arange(keys.num_rows)))
    joined = rows.join(_bandwidth_transit(comm_bandwidth), _BW_KEY, join_type="left outer",
                       use_threads=False)
    joined = joined.take(pc.sort_indices(joined.column("__row")))
    return joined.column("bw_ns_sum").cast(pa.float64())


#: Name of the per-rank table :func:`op_rows` makes; the worker puts it in RankResult.tables in
#: place of COMM_OPS, so the cluster step holds ~80 bytes of numbers and keys per op.
OP_ROWS = "comm_op_rows"
_OP_ROWS_TEXT = ("step_key", "kind", "op", "group")


def op_rows(comm_ops, comm_bandwidth=None):
    """COMM_OPS reduced to what the verdicts use of each op, with its transfer time settled.

    In: COMM_OPS (pyarrow Table, int ns) and optionally COMM_BANDWIDTH. Out: a
    pyarrow Table with one row per COMM_OPS row, in order: ``rank`` int32; ``step_key`` and
    ``group`` ('' when missing), ``kind`` (as given) as dictionary-encoded text, ``op`` (the op
    name before its first '@'; 'None' when missing) as text; ``elapse_ns``, ``wait_ns``,
    ``idle_ns``, ``transfer_ns`` int64 (a missing time reads 0). None when ``comm_ops`` is
    None.

    ``transfer_ns`` is the Transit Time (§7.2); when that is 0 but the op's 'Communication
    Bandwidth Info' shows RDMA or SDMA transit (SDMA already includes HCCS/PCIE/SIO, §7.2), that
    transit is used: some profiles report no master-plane transit while still recording the
    transfer per transport. Either is capped at the elapse.
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    if comm_ops is None:
        return None
    keys = _op_keys(comm_ops)  # the same keys find the op's bandwidth rows

    def ns(name):
        return pc.fill_null(comm_ops.column(name), 0).to_numpy().astype(np.int64, copy=False)

    elapse, transit = ns("elapse_ns"), ns("transit_ns")
    transfer = transit
    bw = (_bw_transit_of(keys, comm_bandwidth)
          if comm_bandwidth is not None and comm_bandwidth.num_rows and comm_ops.num_rows
          else None)
    if bw is not None:
        # float min then truncation, as the per-op rule was first written (pandas astype)
        fallback = np.minimum(pc.fill_null(bw, 0.0).to_numpy(), elapse).astype(np.int64)
        transfer = np.where(transit > 0, transit, fallback)
    return pa.table({
        "rank": keys.column("rank").cast(pa.int32()),
        # dictionary-encoded: a rank has a few step keys, kinds and groups over ~10^3 ops
        "step_key": pc.dictionary_encode(keys.column("step_key")),
        "kind": pc.dictionary_encode(comm_ops.column("kind").cast(pa.string())),
        "op": keys.column("op"),
        "group": pc.dictionary_encode(keys.column("group")),
        "elapse_ns": elapse, "wait_ns": ns("wait_ns"), "idle_ns": ns("idle_ns"),
        "transfer_ns": np.minimum(transfer, elapse)})


class _Interned:
    """Ids of texts (or text tuples) in first-seen order, looked up a batch at a time."""

    def __init__(self):
        self.ids: dict = {}

    def __len__(self) -> int:
        return len(self.ids)

    def lookup(self, keys: list) -> np.ndarray:
        """The id (int64) of every key of ``keys``; unseen keys get the next ids."""
        # the loop in C: most keys were seen before
        found = np.fromiter(map(self.ids.get, keys, repeat(-1)), dtype=np.int64,
                            count=len(keys))
        for j in np.flatnonzero(found < 0).tolist():
            found[j] = self.ids.setdefault(keys[j], len(self.ids))
        return found


def _sum_by(key: np.ndarray, values: list[np.ndarray]) -> tuple[np.ndarray, list[np.ndarray]]:
    """Distinct ``key`` values (ascending) and the exact int64 sums of each of ``values`` per
    key (plus, last, the number of rows per key)."""
    order = np.argsort(key, kind="stable")
    k = key[order]
    starts = np.flatnonzero(np.r_[True, k[1:] != k[:-1]]) if len(k) else np.zeros(0, np.int64)
    sums = [np.add.reduceat(v[order], starts) if len(k) else v[:0] for v in values]
    return k[starts], sums + [np.diff(np.r_[starts, len(k)])]


class OpInstances:
    """Pass 1 of the op-time split over batches of :func:`op_rows` (one rank's, or any rows).

    Every op instance (step key, op, group) seen so far gets an id; kept per id (numpy arrays):
    ``shortest`` elapse (ns), ``first_rank`` (the rank of the first row with that elapse, in
    the order the batches were added, which must be the order of their rows) and ``members``
    (distinct ranks, exact even when a rank comes in several batches). Memory: a few tens of
    bytes per instance and 4 bytes per distinct (rank, instance), whatever the number of
    batches.
    """

    def __init__(self):
        self._ids = _Interned()
        self.shortest = np.zeros(0, np.int64)
        self.first_rank = np.zeros(0, np.int64)
        self.members = np.zeros(0, np.int64)
        self._seen: dict[int, np.ndarray] = {}  # rank -> its instance ids so far (sorted)

    def ids_of(self, rows) -> np.ndarray:
        """The instance id (int64) of every row; unseen instances get new ids."""
        texts, codes, key = [], [], np.zeros(rows.num_rows, dtype=np.int64)
        for c in ("step_key", "op", "group"):  # filled by op_rows: no nulls
            code, values = text_codes(rows.column(c))
            texts.append(values)
            codes.append(code)
            key = key * (len(values) + 1) + code
        _, first, inverse = np.unique(key, return_index=True, return_inverse=True)
        step_t, op_t, group_t = texts
        keys = list(zip(map(step_t.__getitem__, codes[0][first].tolist()),
                        map(op_t.__getitem__, codes[1][first].tolist()),
                        map(group_t.__getitem__, codes[2][first].tolist())))
        return self._ids.lookup(keys)[inverse.reshape(-1)]

    def add(self, rows) -> np.ndarray:
        """Fold the rows of one batch in; returns their instance ids (for :meth:`split`)."""
        ids = self.ids_of(rows)
        grow = len(self._ids) - len(self.shortest)
        if grow:
            self.shortest = np.r_[self.shortest, np.full(grow, np.iinfo(np.int64).max)]
            self.first_rank = np.r_[self.first_rank, np.full(grow, -1, np.int64)]
            self.members = np.r_[self.members, np.zeros(grow, np.int64)]
        rank = rows.column("rank").to_numpy().astype(np.int64)
        elapse = rows.column("elapse_ns").to_numpy()
        order = np.lexsort((np.arange(len(ids)), elapse, ids))  # first shortest row per id
        sorted_ids = ids[order]
        first = order[np.flatnonzero(np.r_[True, sorted_ids[1:] != sorted_ids[:-1]])]
        better = elapse[first] < self.shortest[ids[first]]  # ties: the earlier batch keeps it
        self.shortest[ids[first][better]] = elapse[first][better]
        self.first_rank[ids[first][better]] = rank[first][better]
        for r in np.unique(rank).tolist():
            mine = np.unique(ids[rank == r]).astype(np.int32)
            before = self._seen.get(r)
            new = mine if before is None else np.setdiff1d(mine, before, assume_unique=True)
            self.members[new] += 1
            self._seen[r] = mine if before is None else np.union1d(before, mine)
        return ids

    def split(self, rows, ids: np.ndarray) -> dict[str, np.ndarray]:
        """Pass 2 for one batch once every batch was added: per row ``rank``, ``elapse_ns``,
        ``wait_ns``, ``idle_ns``, ``transfer_ns``, ``waited_for`` (-1 when unknown),
        ``peer_wait_ns``, ``other_ns`` (int64; see :func:`split_op_time`)."""
        rank = rows.column("rank").to_numpy().astype(np.int64)
        elapse, wait, transfer = (rows.column(c).to_numpy() for c in
                                  ("elapse_ns", "wait_ns", "transfer_ns"))
        own = self.members[ids] >= 2
        room = elapse - transfer
        peer_wait = np.minimum(np.where(own, elapse - self.shortest[ids], wait), room)
        waited_for = self.first_rank[ids].copy()
        waited_for[~(own & (peer_wait > 0) & (waited_for != rank))] = -1
        return {"rank": rank, "elapse_ns": elapse, "wait_ns": wait,
                "idle_ns": rows.column("idle_ns").to_numpy(), "transfer_ns": transfer,
                "waited_for": waited_for, "peer_wait_ns": peer_wait, "other_ns": room - peer_wait}


def split_op_time(rows) -> pd.DataFrame:
    """One row per communication op instance and rank (the rows of :func:`op_rows`, all ranks
    concatenated) with its time split three ways.

    Columns: ``rank`` int32; ``step_key``, ``kind``, ``group``, ``op`` as pandas Categoricals;
    ``elapse_ns``, ``wait_ns``, ``idle_ns``, ``transfer_ns`` (from op_rows), ``waited_for``
    (global rank, -1 when unknown), ``peer_wait_ns``, ``other_ns`` (int64 ns).

    - ``peer_wait_ns``: time this rank waited for a slower peer. The same op instance (same
      group, step and op name) ends together on every member, so a member's extra elapse over the
      shortest member's elapse is the time it sat waiting for the last one to arrive; the member
      with the shortest elapse (its first row) is ``waited_for``. When no other member's row is
      present, the op's Wait Time (Notify_Wait) is used instead. Capped at elapse − transfer.
    - ``other_ns`` = elapse − transfer − peer wait: time inside the op common to all members
      (synchronisation overhead, idle gaps).

    :func:`derive` runs the same two passes (:class:`OpInstances`) over batches of ranks
    (:func:`op_totals`) and keeps only the sums it needs.
    """
    if rows is None or rows.num_rows == 0:
        return pd.DataFrame()
    inst = OpInstances()
    cols = inst.split(rows, inst.add(rows))
    cats = {c: pd.Categorical.from_codes(*text_codes(rows.column(c)), validate=False)
            for c in _OP_ROWS_TEXT}
    return pd.DataFrame({
        "rank": cols["rank"].astype(np.int32), "step_key": cats["step_key"],
        "kind": cats["kind"], "group": cats["group"], "elapse_ns": cols["elapse_ns"],
        "wait_ns": cols["wait_ns"], "idle_ns": cols["idle_ns"], "op": cats["op"],
        "transfer_ns": cols["transfer_ns"], "waited_for": cols["waited_for"],
        "peer_wait_ns": cols["peer_wait_ns"], "other_ns": cols["other_ns"]}, copy=False)


_NOT_FLAGGED = object()


class OpTotals:
    """Pass 2 of the op-time split, summed as batches come: what the verdicts use of it.

    ``flagged``: {stage (or None): ranks} whose Communication(Not Overlapped) share passed the
    threshold (see :func:`_comm_flagged`); for those, per stage, the peer wait by waited-for
    rank and the elapse by op name are kept. For every rank, kind and group the split's sums
    (exact int64 ns) and op count, and per rank its distinct step keys.
    """

    _NUM = ("elapse_ns", "transfer_ns", "peer_wait_ns", "other_ns", "wait_ns", "idle_ns")

    def __init__(self, flagged: dict | None = None):
        self.stage_of = {r: st for st, ranks in (flagged or {}).items() for r in ranks}
        self.comp: dict[tuple, np.ndarray] = {}
        self.step_keys: dict[int, set] = {}
        self.waited: dict = {st: {} for st in (flagged or {})}
        self._ops = _Interned()  # op names of the flagged ranks
        self._op_elapse: dict = {st: np.zeros(0, np.int64) for st in (flagged or {})}
        self._op_seen: dict = {st: np.zeros(0, bool) for st in (flagged or {})}

    def add(self, rows, split: dict[str, np.ndarray]) -> None:
        """One batch: ``rows`` (op_rows) and its :meth:`OpInstances.split`."""
        rank = split["rank"]
        kind, kind_t = text_codes(rows.column("kind"))
        group, group_t = text_codes(rows.column("group"))
        step, step_t = text_codes(rows.column("step_key"))
        for r in np.unique(rank).tolist():
            self.step_keys.setdefault(r, set()).update(
                step_t[i] for i in np.unique(step[rank == r]).tolist())
        ok = kind >= 0  # a row without kind has no (rank, kind, group) entry, as in a group-by
        lo = int(rank.min())
        key = ((rank - lo) * (len(kind_t) + 1) + kind) * (len(group_t) + 1) + group
        uniq, sums = _sum_by(key[ok], [split[c][ok] for c in self._NUM])
        for j, k in enumerate(uniq.tolist()):
            rest, g = divmod(k, len(group_t) + 1)
            rk, kd = divmod(rest, len(kind_t) + 1)
            entry = (rk + lo, kind_t[kd], group_t[g])
            vals = np.array([s[j] for s in sums], dtype=np.int64)
            if entry in self.comp:
                self.comp[entry] += vals
            else:
                self.comp[entry] = vals
        if not self.stage_of:
            return
        ranks, where = np.unique(rank, return_inverse=True)
        stages = [self.stage_of.get(r, _NOT_FLAGGED) for r in ranks.tolist()]
        if all(st is _NOT_FLAGGED for st in stages):
            return
        op, op_t = text_codes(rows.column("op"))
        where = where.reshape(-1)
        for st in {st for st in stages if st is not _NOT_FLAGGED}:
            mine = np.array([x is not _NOT_FLAGGED and x == st for x in stages])[where]
            w = mine & (split["waited_for"] >= 0)
            who, (pw, _) = _sum_by(split["waited_for"][w], [split["peer_wait_ns"][w]])
            acc = self.waited[st]
            for r, v in zip(who.tolist(), pw.tolist()):
                acc[r] = acc.get(r, 0) + v
            codes, (el, _) = _sum_by(op[mine].astype(np.int64), [split["elapse_ns"][mine]])
            ids = self._ops.lookup([op_t[o] for o in codes.tolist()])
            grow = len(self._ops) - len(self._op_elapse[st])
            if grow:
                self._op_elapse[st] = np.r_[self._op_elapse[st], np.zeros(grow, np.int64)]
                self._op_seen[st] = np.r_[self._op_seen[st], np.zeros(grow, bool)]
            self._op_elapse[st][ids] += el  # ids distinct within a batch
            self._op_seen[st][ids] = True

    def op_elapse(self, stage) -> dict[str, int]:
        """{op name: summed elapse (ns)} over the flagged ranks of ``stage``."""
        acc = self._op_elapse.get(stage)
        if acc is None:
            return {}
        names = list(self._ops.ids)
        return {names[i]: int(acc[i]) for i in np.flatnonzero(self._op_seen[stage]).tolist()}

    def components(self, directory: dict[str, dict]) -> pd.DataFrame:
        """Per rank, op kind and communication group: mean per step (sum / the rank's distinct
        step keys) of the split. Columns ``rank, kind, group, group_name, elapse_ns,
        transfer_ns, peer_wait_ns, other_ns, wait_ns, idle_ns, n_ops``, sorted by rank, kind,
        group."""
        cols = ["rank", "kind", "group", "group_name", *self._NUM, "n_ops"]
        if not self.comp:
            return pd.DataFrame(columns=cols)
        keys = sorted(self.comp)
        vals = np.array([self.comp[k] for k in keys], dtype=np.int64)
        n = np.array([len(self.step_keys[k[0]]) for k in keys], dtype=np.float64)
        out = {"rank": np.array([k[0] for k in keys], dtype=np.int32),
               "kind": [k[1] for k in keys], "group": [k[2] for k in keys],
               "group_name": [directory.get(k[2], {}).get("name", k[2]) for k in keys]}
        for i, c in enumerate(self._NUM):
            out[c] = vals[:, i] / n
        out["n_ops"] = vals[:, len(self._NUM)]
        return pd.DataFrame(out)[cols]


def link_table(comm_links, directory: dict[str, dict]) -> pd.DataFrame:
    """Per communication group, src→dst link and transport: size, transit time and bandwidth.

    Uses the ``<type>-total@<group>`` entries of communication_matrix.json (sums over the op
    instances of one op type, spec §A.6) when a rank/step/op type has them, otherwise sums every
    entry. LOCAL links (on-chip copies, src = dst) are left out: they are not links between ranks.
    Columns: ``group, group_name, src_local, dst_local, src_rank, dst_rank, transport, reported_by,
    size_mb, transit_ns, bandwidth_gbps, ranks_known``; sizes and times are means per step;
    ``src_rank/dst_rank`` are global when the group is in ``directory`` (else the local numbers).
    """
    cols = ["group", "group_name", "src_local", "dst_local", "src_rank", "dst_rank", "transport",
            "reported_by", "size_mb", "transit_ns", "bandwidth_gbps", "ranks_known"]
    if comm_links is None or comm_links.num_rows == 0:
        return pd.DataFrame(columns=cols)
    lk = comm_links.to_pandas()
    lk["transport"] = lk["transport"].fillna("").astype(str).str.upper()
    lk = lk[(lk["transport"] != "LOCAL") & (lk["src_rank"] != lk["dst_rank"])].copy()
    if lk.empty:
        return pd.DataFrame(columns=cols)
    key = lk["link_key"].fillna("").astype(str)
    lk["group"] = lk["group"].fillna("").astype(str)
    lk["op_type"] = key.str.split("@").str[0].str.rsplit("-", n=1).str[0]
    lk["is_total"] = key.str.split("@").str[0].str.endswith("-total")
    lk["step_key"] = lk["step_key"].fillna("").astype(str)
    unit = ["rank", "step_key", "group", "op_type"]
    has_total = lk.groupby(unit)["is_total"].transform("any")
    lk = lk[lk["is_total"] | ~has_total]
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


# ---------------------------------------------------------------------------------------------
# small helpers


def _ms(ns) -> float:
    return round(float(ns) / 1e6, 3)


def _pct(x) -> float:
    return round(float(x), 2)


def _severity(measure: float, threshold: float, factor: float, below: bool = False) -> str:
    """warning past the threshold, critical ``factor`` times past it (or below 1/factor)."""
    if below:
        return "critical" if threshold > 0 and measure <= threshold / factor else "warning"
    return "critical" if measure >= threshold * factor else "warning"


def _verdict(category, scope, ranks, severity, evidence, threshold, message, next_step) -> dict:
    return make_verdict(category, scope, ranks, severity, message, next_step, evidence=evidence,
                        threshold=threshold)


#: Keys of every verdict dict, in output order (docs/verdicts.md, "The verdict format").
VERDICT_KEYS = ("id", "category", "severity", "scope", "ranks", "groups", "message", "evidence",
                "symptoms", "threshold", "next_step", "caused_by")


def make_verdict(category: str, scope: str, ranks, severity: str, message: str, next_step: str,
                 *, evidence: dict | None = None, threshold: dict | None = None,
                 groups: list[dict] | None = None, symptoms: list[dict] | None = None,
                 id: str | None = None, caused_by: str | None = None) -> dict:  # noqa: A002
    """One verdict in the documented format (docs/verdicts.md). For rule functions, built-in
    or contributed (:func:`register_rule`).

    ``category``: what kind of cause ("stage", "slow_rank", "schedule", "communication",
    "slow_link", "collection" …, or a contributed one such as "data", "memory", "moe");
    ``scope``: "cluster" | "stage" | "group" | "rank" | "link" | "transport" | "collection";
    ``ranks``: the global ranks the cause is on; ``severity``: "critical" | "warning" | "info";
    ``groups``: ``[{"name": parallel-group name or id, "id": group id, "global_ranks": [...]}]``
    the verdict talks about; ``symptoms``: consequences attached as evidence (each a dict with
    at least ``message``, ``ranks`` and ``caused_by``); ``caused_by``: id of another verdict
    this one is a consequence of (it is then moved under that verdict's symptoms by
    :func:`derive`). ``id`` defaults to ``category:scope:ranks``; :func:`derive` makes ids
    unique. Raises ValueError for an unknown severity.
    """
    if severity not in _SEVERITY_ORDER:
        raise ValueError(f"severity must be one of {sorted(_SEVERITY_ORDER)}, got {severity!r}")
    ranks = sorted({int(r) for r in ranks})
    return {"id": id or f"{category}:{scope}:{','.join(map(str, ranks))}",
            "category": category, "severity": severity, "scope": scope, "ranks": ranks,
            "groups": list(groups or []), "message": message, "evidence": dict(evidence or {}),
            "symptoms": list(symptoms or []), "threshold": dict(threshold or {}),
            "next_step": next_step, "caused_by": caused_by}


_RULES: dict[str, object] = {}


def register_rule(name: str, fn=None):
    """Add a rule function to :func:`derive`: ``fn(ca, th) -> list of verdict dicts``
    (:func:`make_verdict`). Usable as a decorator (``@register_rule("data")``). Rules run after
    the built-in ones, in registration order; registering a name again replaces that rule.
    A contributed verdict may set ``caused_by`` to the id of another verdict to be attached
    under it as a symptom. A rule that raises loses its own verdicts only (the error is
    recorded in ``ca.problems``)."""
    def add(f):
        _RULES[str(name)] = f
        return f
    return add(fn) if fn is not None else add


def registered_rules() -> dict:
    """{name: rule function} of the contributed rules, in the order they run."""
    return dict(_RULES)


def _finish(out: list[dict]) -> list[dict]:
    """Unique ids; verdicts with ``caused_by`` naming another verdict moved under its
    ``symptoms``; internal keys (leading ``_``) dropped; most severe first (stable)."""
    seen: dict[str, int] = {}
    for v in out:
        base = v.get("id") or f"{v.get('category')}:{v.get('scope')}"
        n = seen.get(base, 0)
        seen[base] = n + 1
        v["id"] = base if n == 0 else f"{base}#{n + 1}"
        for k in VERDICT_KEYS:
            v.setdefault(k, [] if k in ("groups", "symptoms") else None)
    by_id = {v["id"]: v for v in out}
    kept = []
    for v in out:
        cause = by_id.get(v.get("caused_by") or "")
        if cause is not None and cause is not v and not cause.get("caused_by"):
            cause["symptoms"].append({k: v[k] for k in ("id", "category", "scope", "ranks",
                                                         "groups", "message", "evidence",
                                                         "caused_by")})
        else:
            kept.append(v)
    for v in kept:
        for k in [k for k in v if k.startswith("_")]:
            del v[k]
    kept.sort(key=lambda v: _SEVERITY_ORDER.get(v["severity"], 3))
    return [{k: v[k] for k in VERDICT_KEYS} | {k: v[k] for k in v if k not in VERDICT_KEYS}
            for v in kept]


def _ranks_text(ranks) -> str:
    """'rank 3', 'ranks 0, 1' or, for runs of 3 or more, 'ranks 0–31, 40'."""
    ranks = sorted({int(r) for r in ranks})
    parts, i = [], 0
    while i < len(ranks):
        j = i
        while j + 1 < len(ranks) and ranks[j + 1] == ranks[j] + 1:
            j += 1
        parts += [f"{ranks[i]}–{ranks[j]}"] if j - i >= 2 else [str(r) for r in ranks[i:j + 1]]
        i = j + 1
    return ("rank " if len(ranks) == 1 else "ranks ") + ", ".join(parts)


def _peer_sets(ranks: list[int], stage_of: dict[int, int]) -> dict:
    """Ranks that do the same work: one set per pipeline stage, or all ranks."""
    if not stage_of:
        return {None: sorted(ranks)}
    out: dict = {}
    for r in sorted(ranks):
        out.setdefault(stage_of.get(r), []).append(r)
    return out


def _op_type_diff(op_stat, rank: int, peers: list[int], top: int = 3) -> list[dict]:
    """Op types whose total time on ``rank`` exceeds the peers' median the most (op_statistic)."""
    if op_stat is None or op_stat.num_rows == 0:
        return []
    df = op_stat.to_pandas()
    if rank not in set(df["rank"]):
        return []
    others = [p for p in peers if p != rank and p in set(df["rank"])]
    if not others:
        return []
    per = df.groupby(["op_type", "rank"])["total_ns"].sum().unstack(fill_value=0)
    diff = (per[rank] - per[others].median(axis=1)).sort_values(ascending=False)
    return [{"op_type": str(k), "excess_ms": _ms(v)} for k, v in diff.head(top).items() if v > 0]


# ---------------------------------------------------------------------------------------------
# the verdicts


def _stage_verdicts(m: pd.DataFrame, stage_of: dict[int, int], comp: pd.DataFrame,
                    th: dict) -> list[dict]:
    """Pipeline stages that compute more than others, and the stages that wait for them."""
    have = [r for r in m.index if r in stage_of]
    by_stage: dict[int, list[int]] = {}
    for r in have:
        by_stage.setdefault(stage_of[r], []).append(int(r))
    if len(by_stage) < 2:
        return []
    p2p_cols = ["elapse_ns", "peer_wait_ns", "wait_ns"]
    p2p = comp[comp["kind"] == "p2p"].groupby("rank")[p2p_cols].sum() \
        if not comp.empty else pd.DataFrame(columns=p2p_cols)
    rows = {}
    for s, rs in sorted(by_stage.items()):
        sub = m.loc[rs]
        rows[s] = {
            "ranks": sorted(rs),
            "computing_ms": _ms(sub["computing_ns"].mean()),
            "computing_pct": _pct(sub["computing_pct"].mean()),
            "free_ms": _ms(sub["free_ns"].mean()),
            "comm_not_overlapped_ms": _ms(sub["cno_ns"].mean()),
            "step_ms": _ms(sub["total_ns"].mean()),
            "p2p_elapse_ms": _ms(p2p.reindex(rs)["elapse_ns"].fillna(0).mean()),
            "p2p_peer_wait_ms": _ms(p2p.reindex(rs)["peer_wait_ns"].fillna(0).mean()),
            "p2p_wait_ms": _ms(p2p.reindex(rs)["wait_ns"].fillna(0).mean()),
        }
    slow = max(rows, key=lambda s: rows[s]["computing_ms"])
    fast = min(rows, key=lambda s: rows[s]["computing_ms"])
    spread = rows[slow]["computing_pct"] - rows[fast]["computing_pct"]
    thr = th["compute_spread_pct"]
    if spread < thr:
        return []
    waiting = [s for s in rows if s != slow]
    waiting_ranks = sorted(r for s in waiting for r in rows[s]["ranks"])
    ev = {"stages": {str(s): v for s, v in rows.items()},
          "slowest_stage": int(slow), "slowest_stage_ranks": rows[slow]["ranks"],
          "waiting_stages": sorted(int(s) for s in waiting), "waiting_ranks": waiting_ranks,
          "computing_spread_pct": _pct(spread),
          "computing_gap_ms": round(rows[slow]["computing_ms"] - rows[fast]["computing_ms"], 3)}
    wait_text = "; ".join(
        f"stage {s} ({_ranks_text(rows[s]['ranks'])}) waits {rows[s]['p2p_peer_wait_ms']:.1f} ms "
        f"per step in pipeline send/receive for its peer to arrive" for s in waiting)
    msg = (f"Pipeline stages are unbalanced: stage {slow} ({_ranks_text(rows[slow]['ranks'])}) "
           f"computes {rows[slow]['computing_ms']:.1f} ms per step, stage {fast} "
           f"({_ranks_text(rows[fast]['ranks'])}) {rows[fast]['computing_ms']:.1f} ms "
           f"(Computing share spread {spread:.1f} points). The other stages wait for stage {slow}: "
           f"{wait_text}.")
    nxt = (f"Move layers from stage {slow} to the lighter stages (pipeline layer split), or "
           f"compare the op statistics of {_ranks_text(rows[slow]['ranks'])} with "
           f"{_ranks_text(rows[fast]['ranks'])} to see which op types make stage {slow} heavier.")
    return [_verdict("compute", "stage", rows[slow]["ranks"],
                     _severity(spread, thr, th["critical_factor"]), ev,
                     {"compute_spread_pct": thr}, msg, nxt)]


def _group_verdicts(m: pd.DataFrame, stage_of: dict[int, int], directory: dict[str, dict],
                    op_stat, th: dict) -> list[dict]:
    """Compute / schedule triage per communication group (seed 000), one per distinct rank set."""
    groups: dict[tuple, list[str]] = {}
    for gid, info in directory.items():
        if gid != info["key"]:
            continue  # each group once (listed under id and key)
        rs = tuple(sorted(r for r in set(info["global_ranks"]) if r in m.index))
        if len(rs) >= 2:
            names = groups.setdefault(rs, [])
            if info["name"] not in names:
                names.append(info["name"])
    if not groups and len(m.index) >= 2 and not stage_of:
        groups[tuple(sorted(int(r) for r in m.index))] = ["all ranks"]
    out = []
    for rs, names in sorted(groups.items()):
        if stage_of and len({stage_of.get(r) for r in rs}) > 1:
            continue  # ranks of different stages: explained by the stage verdict
        sub = m.loc[list(rs)]
        label = "/".join(sorted(names))
        for col, cat, key, what in (("computing_pct", "compute", "compute_spread_pct", "Computing"),
                                    ("free_pct", "schedule", "free_spread_pct", "Free")):
            hi, lo = sub[col].idxmax(), sub[col].idxmin()
            spread = sub.loc[hi, col] - sub.loc[lo, col]
            thr = th[key]
            if spread < thr:
                continue
            median = sub[col].median()
            culprits = [int(r) for r in rs if sub.loc[r, col] - median >= thr / 2] or [int(hi)]
            ev = {"group": label, "group_ranks": list(rs),
                  f"{what.lower()}_pct": {str(r): _pct(sub.loc[r, col]) for r in rs},
                  f"{what.lower()}_ms": {str(r): _ms(sub.loc[r, col.replace('_pct', '_ns')])
                                         for r in rs},
                  "max_rank": int(hi), "min_rank": int(lo), "spread_pct": _pct(spread)}
            if cat == "compute":
                diff = _op_type_diff(op_stat, int(hi), list(rs))
                if diff:
                    ev["top_excess_op_types"] = diff
                msg = (f"Compute imbalance in group {label} ({_ranks_text(rs)}): "
                       f"{_ranks_text(culprits)} spend up to {sub.loc[hi, col]:.1f}% of the step "
                       f"computing, rank {lo} {sub.loc[lo, col]:.1f}% (spread {spread:.1f} "
                       f"points); the group's other ranks wait for {_ranks_text(culprits)}.")
                nxt = (f"Compare the op statistics / kernels of rank {hi} with rank {lo}: more "
                       f"data per rank (uneven batch or sequence length), heavier ops, or a "
                       f"slower device (check its AI Core frequency and temperature).")
            else:
                msg = (f"Schedule imbalance in group {label} ({_ranks_text(rs)}): "
                       f"{_ranks_text(culprits)} are idle (Free) for up to "
                       f"{sub.loc[hi, col]:.1f}% of the step, rank {lo} {sub.loc[lo, col]:.1f}% "
                       f"(spread {spread:.1f} points).")
                nxt = (f"Open the timeline of rank {hi} next to rank {lo}: vertical host-to-device "
                       f"launch lines mean the device outruns the host (dispatch-bound); look at "
                       f"host-side work, data loading and synchronisation on rank {hi}.")
            out.append(_verdict(cat, "group", culprits,
                                _severity(spread, thr, th["critical_factor"]), ev, {key: thr},
                                msg, nxt))
    return out


def _leave_one_out_median(values: np.ndarray) -> np.ndarray:
    """``out[i]`` = median of ``values`` without element ``i`` (mean of the two middle values
    when n - 1 is even, like pandas' median), for all i from one sort. Needs n >= 2."""
    n = len(values)
    order = np.argsort(values, kind="stable")
    ordered = values[order]
    pos = np.empty(n, dtype=np.int64)
    pos[order] = np.arange(n)

    def nth_of_rest(k: int) -> np.ndarray:  # k-th smallest once element i is removed
        idx = np.full(n, k, dtype=np.int64)
        return ordered[idx + (idx >= pos)]

    rest = n - 1
    if rest % 2:
        return nth_of_rest(rest // 2)
    return (nth_of_rest(rest // 2 - 1) + nth_of_rest(rest // 2)) / 2


def _slow_rank_verdicts(m: pd.DataFrame, stage_of: dict[int, int], op_stat,
                        th: dict) -> list[dict]:
    """Ranks whose step parts exceed those of the ranks doing the same work (median / MAD)."""
    out = []
    ex_thr, z_thr = th["slow_rank_excess_pct"], th["slow_rank_mad_z"]
    for stage, peers in _peer_sets([int(r) for r in m.index], stage_of).items():
        if len(peers) < 2:
            continue
        sub = m.loc[peers]
        # medians of the other peers for every rank at once (leave-one-out): O(n log n), not
        # one median of n - 1 values per rank
        step_others = _leave_one_out_median(sub["total_ns"].astype(float).to_numpy())
        cols = {}
        for col, _ in _PARTS:
            vals = sub[col].astype(float)
            med = float(vals.median())
            cols[col] = (vals, _leave_one_out_median(vals.to_numpy()), med,
                         float((vals - med).abs().median()))
        for i, r in enumerate(peers):
            hits = {}
            for col, label in _PARTS:
                vals, others_median, med, mad = cols[col]
                base = float(others_median[i])
                step = float(step_others[i])
                if step <= 0:
                    continue
                excess = 100.0 * (float(vals[r]) - base) / step
                z = 0.6745 * (float(vals[r]) - med) / mad if mad > 0 else None
                if excess < ex_thr:
                    continue
                if len(peers) >= 3 and z is not None and z < z_thr:
                    continue  # MAD 0 (most peers equal) leaves the excess alone to decide
                hits[col] = {"part": label, "value_ms": _ms(vals[r]), "peer_median_ms": _ms(base),
                             "excess_ms": _ms(float(vals[r]) - base),
                             "excess_of_part_pct": _pct(100.0 * (float(vals[r]) - base) / base)
                             if base > 0 else None,
                             "excess_of_step_pct": _pct(excess),
                             "robust_z": None if z is None else round(z, 2)}
            if not hits:
                continue
            main = max(hits, key=lambda c: hits[c]["excess_of_step_pct"])
            h = hits[main]
            where = f"stage {stage} " if stage is not None else ""
            ev = {"parts": {hits[c]["part"]: hits[c] for c in hits}, "peers": peers,
                  "stage": stage, "n_steps": int(m.loc[r, "n_steps"])}
            if "computing_ns" in hits:
                diff = _op_type_diff(op_stat, r, peers)
                if diff:
                    ev["top_excess_op_types"] = diff
            nxt = {"computing_ns": f"Compare rank {r}'s kernels and op statistics with its peers: "
                                   f"same ops slower means a slow device; more ops or larger "
                                   f"shapes mean more work assigned to it.",
                   "free_ns": f"Open rank {r}'s timeline: long Free gaps mean the host does not "
                              f"keep the device busy (dispatch, data loading, "
                              f"synchronisation)."}[main]
            msg = (f"Rank {r} is slow among the {where}ranks doing the same work "
                   f"({_ranks_text(peers)}): its {h['part']} is {h['value_ms']:.1f} ms per step, "
                   f"{h['excess_ms']:.1f} ms ({h['excess_of_step_pct']:.1f}% of the step) above "
                   f"the median of the others ({h['peer_median_ms']:.1f} ms).")
            out.append(_verdict("slow_rank", "rank", [r],
                                _severity(h["excess_of_step_pct"], ex_thr, th["critical_factor"]),
                                ev,
                                {"slow_rank_excess_pct": ex_thr, "slow_rank_mad_z": z_thr},
                                msg, nxt))
    return out


def _comm_flagged(m: pd.DataFrame, stage_of: dict[int, int], th: dict) -> dict:
    """{stage (None without stages): ranks} whose Communication(Not Overlapped) share of the
    step passes ``comm_share_pct``; stages without such a rank are left out."""
    flagged = [int(r) for r in m.index if m.loc[r, "cno_pct"] >= th["comm_share_pct"]]
    return {st: ranks for st, ranks in _peer_sets(flagged, stage_of).items() if ranks}


def _comm_verdicts(m: pd.DataFrame, stage_of: dict[int, int], comp: pd.DataFrame,
                   totals: OpTotals, th: dict) -> list[dict]:
    """Ranks where Communication(Not Overlapped) is a large share of the step, one verdict per
    stage (or for all ranks without stages), with the cause: waiting for a slower peer (and
    which), data transfer, or time inside the ops common to all members. ``totals`` was built
    with :func:`_comm_flagged` of the same ``m``."""
    thr, wthr = th["comm_share_pct"], th["wait_ratio"]
    out = []
    for stage, ranks in _comm_flagged(m, stage_of, th).items():
        n = len(ranks)
        sub_c = comp[comp["rank"].isin(ranks)]
        tot = {c: float(sub_c[c].sum()) / n for c in
               ("elapse_ns", "transfer_ns", "peer_wait_ns", "other_ns")}
        elapse = tot["elapse_ns"]
        by = {}
        if not sub_c.empty:
            agg = sub_c.groupby(["kind", "group_name"])[
                ["elapse_ns", "transfer_ns", "peer_wait_ns", "other_ns", "wait_ns"]].sum() / n
            for (kind, gname), row in agg.sort_values("elapse_ns", ascending=False).iterrows():
                by[f"{kind}:{gname}"] = {k.replace("_ns", "_ms"): _ms(v) for k, v in row.items()}
        waited_ms = {int(k): v / n for k, v in sorted(totals.waited.get(stage, {}).items())
                     if v / n >= 1e3}
        top = max(waited_ms.values(), default=0.0)
        primary = sorted(r for r, v in waited_ms.items() if v >= 0.25 * top and top > 0)
        ev = {"comm_not_overlapped_ms": {str(r): _ms(m.loc[r, "cno_ns"]) for r in ranks},
              "comm_not_overlapped_pct": {str(r): _pct(m.loc[r, "cno_pct"]) for r in ranks},
              "op_elapse_ms": _ms(elapse), "transfer_ms": _ms(tot["transfer_ns"]),
              "peer_wait_ms": _ms(tot["peer_wait_ns"]), "other_ms": _ms(tot["other_ns"]),
              "peer_wait_ratio": round(tot["peer_wait_ns"] / elapse, 3) if elapse else None,
              "by_kind_group": by,
              "waited_for_ms": {str(r): _ms(v) for r, v in sorted(waited_ms.items())}}
        if stage is not None:
            ev["stage"] = int(stage)
        where = f"stage {stage} ({_ranks_text(ranks)})" if stage is not None else _ranks_text(ranks)
        shares = m.loc[ranks, "cno_pct"]
        span = f"{shares.min():.1f}–{shares.max():.1f}%" if n > 1 else f"{shares.max():.1f}%"
        lead = f"Communication(Not Overlapped) takes {span} of the step on {where}"
        ratio = tot["peer_wait_ns"] / elapse if elapse else 0.0
        if elapse <= 0:
            ev["cause"] = "unknown"
            msg = f"{lead}; there are no per-op communication times to explain it."
            nxt = ("Collect with communication analysis on (profiler level 1 or higher) to get "
                   "communication.json, or inspect the communication ops on the timeline.")
        elif ratio >= wthr:
            ev["cause"] = "waiting"
            ev["waited_for_ranks"] = primary
            wstages = {stage_of.get(r) for r in primary}
            who = _ranks_text(primary) if primary else "slower peers"
            if stage_of and len(wstages) == 1 and None not in wstages and stage not in wstages:
                ev["waited_for_stage"] = int(next(iter(wstages)))
                who = f"pipeline stage {ev['waited_for_stage']} ({_ranks_text(primary)})"
            main = max(by, key=lambda k: by[k]["peer_wait_ms"]) if by else ""
            msg = (f"{lead}; {ratio:.0%} of the time in communication ops is waiting for a slower "
                   f"peer ({_ms(tot['peer_wait_ns']):.1f} of {_ms(elapse):.1f} ms per step, "
                   f"mostly in {main.replace(':', ' ops of group ')}), not transfer: these ranks "
                   f"wait for {who}.")
            nxt = (f"Look at why {who} arrive late at these ops (more compute, host delays); the "
                   f"waiting ranks are not limited by their links.")
        elif tot["transfer_ns"] >= tot["other_ns"]:
            ev["cause"] = "transfer"
            msg = (f"{lead}; most of it is data transfer ({_ms(tot['transfer_ns']):.1f} of "
                   f"{_ms(elapse):.1f} ms per step), not waiting for peers.")
            nxt = ("Check the slow_link verdicts and the bandwidth per transport type; overlap "
                   "communication with computation or reduce the communicated volume.")
        else:
            ev["cause"] = "other"
            by_op = pd.Series(totals.op_elapse(stage), dtype="int64").sort_index()
            longest = (by_op / n).sort_values(ascending=False, kind="stable").head(3)
            ev["longest_ops_ms"] = {str(k): _ms(v) for k, v in longest.items()}
            msg = (f"{lead}; {_ms(tot['other_ns']):.1f} of {_ms(elapse):.1f} ms per step inside "
                   f"the communication ops is neither transfer nor waiting for a peer: every "
                   f"member of the ops spends it alike (longest: "
                   f"{', '.join(ev['longest_ops_ms'])}).")
            nxt = ("Open these ops on the timeline of all ranks: time common to every member "
                   "usually means all ranks waited for the same thing (host-side launch, a "
                   "synchronisation, the first op of the step absorbing setup).")
        out.append(_verdict("communication", "stage" if stage is not None else "rank", ranks,
                            _severity(float(shares.max()), thr, th["critical_factor"]), ev,
                            {"comm_share_pct": thr, "wait_ratio": wthr}, msg, nxt))
    return out


def _slow_link_verdicts(links: pd.DataFrame, th: dict) -> list[dict]:
    """Links whose bandwidth is well below the median of comparable links (same transport; same
    group when it has at least 3 such links, otherwise all groups)."""
    if links.empty:
        return []
    lk = links[(links["size_mb"] >= th["slow_link_min_mb"]) & links["bandwidth_gbps"].notna()]
    out = []
    ratio_thr = th["slow_link_bw_ratio"]
    for transport, tdf in lk.groupby("transport"):
        if len(tdf) < 2:
            continue
        overall = float(tdf["bandwidth_gbps"].median())
        by_group = tdf.groupby("group")["bandwidth_gbps"]
        n_group = by_group.transform("size")
        base_s = by_group.transform("median").where(n_group >= 3, overall)
        ratio_s = tdf["bandwidth_gbps"] / base_s.where(base_s > 0)
        for idx in tdf.index[ratio_s < ratio_thr]:
            row = tdf.loc[idx]
            base, ratio = float(base_s[idx]), float(ratio_s[idx])
            basis = "group" if n_group[idx] >= 3 else "transport"
            src, dst = int(row["src_rank"]), int(row["dst_rank"])
            ev = {"transport": transport, "group": row["group_name"], "group_id": row["group"],
                  "src_rank": src, "dst_rank": dst, "src_group_rank": int(row["src_local"]),
                  "dst_group_rank": int(row["dst_local"]),
                  "reported_by_rank": int(row["reported_by"]),
                  "bandwidth_gbps": round(float(row["bandwidth_gbps"]), 4),
                  "baseline_median_gbps": round(base, 4), "baseline": basis,
                  "bandwidth_ratio": round(ratio, 3), "size_mb": round(float(row["size_mb"]), 3),
                  "transit_ms": _ms(row["transit_ns"]), "global_ranks_known":
                      bool(row["ranks_known"])}
            rk = "" if row["ranks_known"] else " (group-local rank numbers)"
            msg = (f"Slow {transport} link {src}→{dst}{rk} in group {row['group_name']}: "
                   f"{row['bandwidth_gbps']:.2f} GB/s, {ratio:.0%} of the median "
                   f"{base:.2f} GB/s of comparable {transport} links (transfer itself is slow, "
                   f"independent of waiting).")
            nxt = (f"Check the {transport} path between ranks {src} and {dst}: link health and "
                   f"error counters, lane degradation, and for RDMA the NIC, switch port and "
                   f"retransmissions; rerun a bandwidth test between these two devices.")
            out.append(_verdict("slow_link", "link", sorted({src, dst}),
                                _severity(ratio, ratio_thr, th["critical_factor"], below=True),
                                ev, {"slow_link_bw_ratio": ratio_thr,
                                     "slow_link_min_mb": th["slow_link_min_mb"]}, msg, nxt))
    return out


_ITERATION_NEXT = {
    "slow_host": "Look at the data pipeline and host-side work on these ranks (dataset "
                 "operations, CPU load, host memory) between iterations.",
    "slow_card": "Compare these ranks' kernels and op statistics with the others: a slower "
                 "device or more work assigned to it.",
    "long_tail": "Look at the all-reduce / parameter-update part of the step on these ranks: "
                 "communication bandwidth or waiting for slower ranks.",
}


def _iteration_verdicts(ca, th: dict) -> list[dict]:
    """Legacy graph-mode iteration-trace findings (ascendprof.analyze.iteration_trace, seed 003),
    as verdicts. Only when the ITERATIONS table exists."""
    its = ca.concat("iterations")
    if its is None or its.num_rows == 0:
        return []
    try:
        from ascendprof.analyze import iteration_trace
    except ImportError:
        return []
    z = th["slow_rank_mad_z"]
    try:
        _, found = iteration_trace.analyse(its, z_threshold=z)
    except Exception as e:  # noqa: BLE001 - a helper's failure must not lose the other verdicts
        ca.problems.warn("iterations", f"iteration-trace findings failed: {e}")
        return []
    out = []
    for f in found or []:
        ev = {"values_ms": {str(k): round(float(v), 3) for k, v in f.get("values_ms", {}).items()},
              "median_ms": round(float(f.get("median_ms", 0.0)), 3), "source": "iteration trace"}
        out.append(_verdict(f.get("category", "iteration"), "rank", f.get("ranks", []),
                            "warning", ev, {"slow_rank_mad_z": z,
                                            "min_excess_ratio": iteration_trace.MIN_EXCESS},
                            str(f.get("evidence", "")),
                            _ITERATION_NEXT.get(f.get("category"), "Inspect the iteration trace.")))
    return out


def _op_batches(ca):
    """A callable giving the op_rows of every rank, one table per rank in rank order (the
    workers' OP_ROWS, through ``ca.op_row_batches`` when the cluster has it), else one table
    built from the full COMM_OPS / COMM_BANDWIDTH tables (tests, tools)."""
    batches = getattr(ca, "op_row_batches", None)
    if batches is not None and any(True for _ in batches()):
        return batches
    rows = op_rows(ca.concat("comm_ops"), ca.concat("comm_bandwidth"))
    parts = [rows] if rows is not None and rows.num_rows else []
    return lambda: iter(parts)


def op_totals(batches, flagged: dict) -> OpTotals:
    """The op-time split of every op (:class:`OpInstances`, two passes over ``batches()``, an
    iterable of op_rows tables in row order, one rank at a time) summed into :class:`OpTotals`
    for ``flagged`` ({stage: ranks}). Holds one batch at a time besides the instance arrays."""
    inst = OpInstances()
    ids = [inst.add(b).astype(np.int32) for b in _grouped(batches())]
    totals = OpTotals(flagged)
    for b, i in zip(_grouped(batches()), ids):
        totals.add(b, inst.split(b, i))
    return totals


#: rows per batch of the op-time split: consecutive ranks are taken together up to this many
#: rows (~1 MB), which amortises the per-batch work over ~8 ranks of ~10^3 ops
_BATCH_ROWS = 1 << 13


def _grouped(tables):
    """Consecutive tables of ``tables`` concatenated (no copy) into batches of about
    :data:`_BATCH_ROWS` rows, in order."""
    import pyarrow as pa

    held, rows = [], 0
    for t in tables:
        held.append(t)
        rows += t.num_rows
        if rows >= _BATCH_ROWS:
            yield pa.concat_tables(held)
            held, rows = [], 0
    if held:
        yield pa.concat_tables(held)


def derive(ca, th: dict) -> list[dict]:
    """All verdicts for one :class:`~ascendprof.engine.pipeline.ClusterAnalysis`, most severe first.

    Each verdict is a dict with the keys :data:`VERDICT_KEYS` (docs/verdicts.md, "The verdict
    format"; built by :func:`make_verdict`): ``id``, ``category``, ``severity``
    ("critical"|"warning"|"info"), ``scope``, ``ranks`` (global ranks the cause is on),
    ``groups``, ``message``, ``evidence`` (numbers with unit-bearing keys, per step means),
    ``symptoms`` (consequences attached to this cause), ``threshold``, ``next_step`` and
    ``caused_by``. ``th`` comes from :func:`thresholds`. The built-in rules run first, then the
    contributed ones (:func:`register_rule`). Never raises for missing tables: each analysis
    runs on what exists; a cluster with data and no warning gets one "balanced" info verdict.
    """
    meta = ca.metadata or {}
    directory = group_directory(meta)
    stage_of = stages(meta)
    steps = step_frame(ca.step_trace, ca.breakdown)
    m = rank_means(steps) if not steps.empty else None
    totals = op_totals(_op_batches(ca), _comm_flagged(m, stage_of, th) if m is not None else {})
    comp = totals.components(directory)
    op_stat = ca.concat("op_statistic")
    out: list[dict] = []
    if m is not None:
        out += _stage_verdicts(m, stage_of, comp, th)
        out += _group_verdicts(m, stage_of, directory, op_stat, th)
        out += _slow_rank_verdicts(m, stage_of, op_stat, th)
        out += _comm_verdicts(m, stage_of, comp, totals, th)
    out += _slow_link_verdicts(link_table(ca.concat("comm_links"), directory), th)
    out += _iteration_verdicts(ca, th)
    for name, rule in _RULES.items():
        try:
            out += list(rule(ca, th) or [])
        except Exception as e:  # noqa: BLE001 - a contributed rule must not lose the others
            ca.problems.warn("verdicts", f"verdict rule {name!r} failed: "
                                         f"{type(e).__name__}: {e}")
    if not [v for v in out if v.get("severity") in ("warning", "critical")] and (
            not steps.empty or not comp.empty):
        out.append(_verdict(
            "balanced", "cluster", sorted(int(r) for r in steps["rank"].unique()), "info",
            {"n_ranks": int(steps["rank"].nunique()), "n_steps": int(steps["step"].nunique())},
            dict(th), "No compute, schedule or communication imbalance, slow rank or slow link "
            "passed the thresholds.", "Look at the top kernels and op statistics for "
            "single-rank optimisation."))
    return _finish(out)


__all__ = ["thresholds", "derive", "make_verdict", "register_rule", "registered_rules",
           "VERDICT_KEYS", "double_hash", "group_directory", "stages", "step_frame",
           "rank_means", "link_table", "OpInstances", "OpTotals",
           "op_rows", "split_op_time", "OP_ROWS"] + list(_NAMES)
