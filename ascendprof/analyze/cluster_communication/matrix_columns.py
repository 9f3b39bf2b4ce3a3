"""One group of cluster_communication_matrix.json merged from columns and written as JSON text
piece by piece, so a group whose ranks each list a link to every member (all-to-all and mesh
algorithms: n x n links per op) costs a few arrays per link, not a Python dict per record.

Same numbers, keys, order and JSON text as the record-by-record merge in :mod:`.matrix`
(``_matrix_members`` / ``_merge_step``, which follow msprof-analyze's CommMatrixAnalysis), which
remains for the inputs this path leaves to it (:class:`NeedsRecords`):

- per (step, op key, rank, local src, local dst) the rank's first record counts;
- per (step, op key, local src, local dst) sizes (MB) and times (ms) are summed over ranks in
  ascending rank order (as Python adds them: the first term to 0), the transport and op name are
  the last rank's; a sum of nothing but zeros / missing values stays the integer 0;
- local ranks map to global ranks through the self-links ``"i-i"``: per step, the op's group
  (text after the last "@") and local rank i, the first rank reporting ``i-i`` (ops in first-seen
  order, then ranks ascending, then file order); links with an unmapped end are left out;
- per step and group a ``Total Op Info@<group>`` sums the links of its op keys that are not
  top / middle / bottom summaries, in op order; Bandwidth(GB/s) = MB / ms rounded to 4
  decimals, 0 when the time is (almost) 0.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc

from ascendprof.analyze.cluster_communication.opinfo import TOTAL_OP_INFO, ratio

#: links encoded per orjson call (one small dict of this many links at a time)
LINKS_PER_PIECE = 8192
_I64 = np.int64


class NeedsRecords(Exception):
    """The group holds something the column path does not reproduce exactly (a missing step or
    op key, two local links mapping to one global link): the caller merges it record by
    record."""


def _codes(col, nulls_ok: bool = False) -> tuple[np.ndarray, list]:
    """Dictionary codes of ``col`` (values numbered in first-seen order) and the values; a null
    is a value of its own when ``nulls_ok``, else NeedsRecords."""
    if col.null_count and not nulls_ok:
        raise NeedsRecords("null key")
    enc = pc.dictionary_encode(col, null_encoding="encode").combine_chunks()
    return enc.indices.to_numpy(zero_copy_only=False).astype(_I64), enc.dictionary.to_pylist()


def _groups(*cols: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rows grouped by equal values of ``cols``: ``(ids, first)``, each row's group id, groups
    numbered in the order of their first row, and that first row of each group."""
    n = cols[0].size
    if n == 0:
        return np.zeros(0, _I64), np.zeros(0, _I64)
    order = np.lexsort((np.arange(n, dtype=_I64),) + tuple(reversed(cols)))
    new = np.ones(n, bool)
    new[1:] = False
    for c in cols:
        s = c[order]
        new[1:] |= s[1:] != s[:-1]
    sorted_gid = np.cumsum(new) - 1
    heads = order[new]  # first row of each group, groups in sorted order
    number = np.empty(heads.size, _I64)
    number[np.argsort(heads, kind="stable")] = np.arange(heads.size, dtype=_I64)
    ids = np.empty(n, _I64)
    ids[order] = number[sorted_gid]
    return ids, np.sort(heads)


def _sums(ids: np.ndarray, n: int, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per id: the sum of ``values`` in input order (np.bincount adds sequentially, as Python's
    += does; a NaN stays NaN) and whether any term was not 0 (else Python's sum is the integer
    0)."""
    total = np.bincount(ids, weights=values, minlength=n)
    nonzero = np.bincount(ids, weights=(values != 0).astype(np.float64), minlength=n) > 0
    return total, nonzero


def _number(total: np.ndarray, nonzero: np.ndarray, at: np.ndarray) -> list:
    return [float(t) if nz else 0 for t, nz in zip(total[at].tolist(), nonzero[at].tolist())]


def _last(ids: np.ndarray, n: int) -> np.ndarray:
    last = np.full(n, -1, _I64)
    np.maximum.at(last, ids, np.arange(ids.size, dtype=_I64))
    return last


def _links_json(keys: list[str], transport: list, time_ms: list, size_mb: list,
                op_name: list) -> Iterator[bytes]:
    """The JSON object {key: {"Transport Type", "Transit Time(ms)", "Transit Size(MB)",
    "Op Name", "Bandwidth(GB/s)"}} in pieces of :data:`LINKS_PER_PIECE` links."""
    if not keys:
        yield b"{}"
        return
    for a in range(0, len(keys), LINKS_PER_PIECE):
        b = min(a + LINKS_PER_PIECE, len(keys))
        piece = orjson.dumps({keys[i]: {"Transport Type": transport[i],
                                        "Transit Time(ms)": time_ms[i],
                                        "Transit Size(MB)": size_mb[i],
                                        "Op Name": op_name[i],
                                        "Bandwidth(GB/s)": ratio(size_mb[i], time_ms[i])}
                              for i in range(a, b)})
        yield (b"{" if a == 0 else b",") + piece[1:-1] + (b"}" if b == len(keys) else b"")


def group_json(sub: pa.Table) -> Iterator[bytes] | None:
    """The JSON text, in pieces (an iterator), of one group key's member of cluster_communication_matrix.json
    (``{step key: {op key: {"<global src>-<global dst>": link}, "Total Op Info@<group>": ...}}``)
    from its COMM_LINKS rows ``sub`` (all ranks, ranks ascending, each rank's rows in file
    order). None when no row has both local ranks (the group is left out). Raises NeedsRecords,
    before any piece, for what only the record-by-record merge reproduces."""
    sub = sub.filter(pc.and_(pc.is_valid(sub.column("src_rank")),
                             pc.is_valid(sub.column("dst_rank"))))
    if sub.num_rows == 0:
        return None
    step, steps = _codes(sub.column("step_key"))
    op, op_names = _codes(sub.column("link_key"))
    rank = sub.column("rank").to_numpy().astype(_I64)
    src = sub.column("src_rank").to_numpy().astype(_I64)
    dst = sub.column("dst_rank").to_numpy().astype(_I64)
    # the rank's first record of a link counts (a second one in the same op is ignored)
    _, keep = _groups(step, op, rank, src, dst)
    step, op, rank, src, dst = step[keep], op[keep], rank[keep], src[keep], dst[keep]
    tr, transports = _codes(sub.column("transport").take(pa.array(keep)), nulls_ok=True)
    name, names = _codes(sub.column("op_name").take(pa.array(keep)), nulls_ok=True)
    # a missing size or time counts as 0 (the merge's ``or 0``); ms = ns / 1e6 as to_ms does
    size = sub.column("size_mb").take(pa.array(keep)).cast(pa.float64()).fill_null(0.0).to_numpy()
    time = pc.divide(sub.column("transit_ns").take(pa.array(keep)).cast(pa.float64()),
                     1e6).fill_null(0.0).to_numpy()

    # ops numbered in first-seen order within their step (steps apart)
    step_op, step_op_first = _groups(step, op)
    group_names = sorted({n.split("@")[-1] for n in op_names})
    grp_of_op = np.array([group_names.index(n.split("@")[-1]) for n in op_names], _I64)
    grp = grp_of_op[op]

    # local -> global: per (step, group, local rank) the first self-link in (op, rank, row) order
    own = np.flatnonzero(src == dst)
    own = own[np.lexsort((own, rank[own], step_op[own]))]
    key_ids, _ = _groups(np.r_[step[own], step, step], np.r_[grp[own], grp, grp],
                         np.r_[src[own], src, dst])
    glob = np.full(key_ids.max() + 1, -1, _I64)
    own_ids = key_ids[:own.size]
    first_own = np.unique(own_ids, return_index=True)[1]  # own is in the wanted order
    glob[own_ids[first_own]] = rank[own][first_own]
    n = step.size
    g_src, g_dst = glob[key_ids[own.size:own.size + n]], glob[key_ids[own.size + n:]]

    # one accumulator per (step, op, src, dst), in first-seen row order (rows: ranks ascending)
    acc, acc_first = _groups(step, op, src, dst)
    k = acc_first.size
    t_sum, t_nz = _sums(acc, k, time)
    s_sum, s_nz = _sums(acc, k, size)
    last = _last(acc, k)
    a_src, a_dst = g_src[acc_first], g_dst[acc_first]
    a_step_op = step_op[acc_first]
    mapped = (a_src >= 0) & (a_dst >= 0)
    pairs, _ = _groups(a_step_op[mapped], a_src[mapped], a_dst[mapped])
    if pairs.size and pairs.max() + 1 != pairs.size:
        raise NeedsRecords("two local links map to one global link")

    # the output order: steps by first row, ops by first row within the step, links in
    # accumulator order
    so_step = step[step_op_first]
    step_first = np.full(len(steps), n, _I64)
    np.minimum.at(step_first, step, np.arange(n, dtype=_I64))
    so_order = np.lexsort((step_op_first, step_first[so_step]))
    accs_of = np.argsort(a_step_op, kind="stable")
    tr_last, nm_last = tr[last], name[last]
    return _emit(steps, op_names, transports, names, so_order, so_step, op[step_op_first],
                 accs_of[mapped[accs_of]], a_step_op, a_src, a_dst, tr_last, nm_last,
                 (t_sum, t_nz), (s_sum, s_nz))


def _emit(steps, op_names, transports, names, so_order, so_step, so_op, accs, a_step_op,
          a_src, a_dst, tr_last, nm_last, times, sizes) -> Iterator[bytes]:
    """The group's JSON text, one op's links at a time (``accs``: the mapped accumulators
    grouped by (step, op), each group in accumulator order)."""
    bounds = np.searchsorted(a_step_op[accs], np.arange(so_step.size + 1))
    yield b"{"
    totals: dict[str, dict[str, list]] = {}
    prev = -1
    for so in so_order.tolist():
        st = int(so_step[so])
        if st != prev:
            if prev >= 0:
                yield from _totals_json(totals)
                yield b"},"
            yield orjson.dumps(steps[st]) + b":{"
            totals, prev, first_op = {}, st, True
        opname = op_names[int(so_op[so])]
        at = accs[bounds[so]:bounds[so + 1]]
        keys = [f"{s}-{d}" for s, d in zip(a_src[at].tolist(), a_dst[at].tolist())]
        trs = [transports[t] for t in tr_last[at].tolist()]
        ts, ss = _number(*times, at), _number(*sizes, at)
        nms = [names[c] or "" for c in nm_last[at].tolist()]
        yield (b"" if first_op else b",") + orjson.dumps(opname) + b":"
        yield from _links_json(keys, trs, ts, ss, nms)
        first_op = False
        if keys and not any(s in opname for s in ("middle", "top", "bottom")):
            links = totals.setdefault(opname.split("@")[-1], {})
            for key, t1, t, s, nm in zip(keys, trs, ts, ss, nms):
                v = links.get(key)
                if v is None:
                    links[key] = [t1, t, s, nm]
                else:  # as msprof-analyze adds them: 0 + ..., the last op's transport and name
                    v[0], v[1], v[2], v[3] = t1, v[1] + t, v[2] + s, nm
    yield from _totals_json(totals)
    yield b"}}"


def _totals_json(totals: dict[str, dict[str, list]]) -> Iterator[bytes]:
    """The step's ``Total Op Info@<group>`` members (each preceded by a comma)."""
    for group, links in totals.items():
        vals = list(links.values())
        yield b"," + orjson.dumps(f"{TOTAL_OP_INFO}@{group}") + b":"
        yield from _links_json(list(links), [v[0] for v in vals], [v[1] for v in vals],
                               [v[2] for v in vals], [v[3] or "" for v in vals])
