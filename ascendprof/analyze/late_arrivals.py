"""What made a rank late: for the communication instances with the largest wait, what the
latest-arriving rank did longer than the earliest-arriving one since their previous op in the
same group (kernel time by op type and shapes, device idle, DataLoader time): at most
:data:`TOP_ITEMS` items per instance, :data:`TOP_INSTANCES` instances by wait. Definitions and
columns: docs/analyses.md, "What made a rank late".

A rank with many communication ops keeps the windows of the :data:`KEEP_OPS` ops with the
largest wait (where it arrived early), the :data:`KEEP_OPS` with the longest window since the
previous op of their group (where it arrived late) and the first op of each group, at most
:data:`KEEP_ITEMS` items each, so the partial stays small at scale. A rank without kernels
cannot be aligned: its instances are skipped.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from ascendprof.analyze import idle
from ascendprof.analyze import intervals as iv
from ascendprof.analyze.codes import filled_codes, group_codes, text_codes
from ascendprof.model import schemas as S

WINDOWS = "late_windows"
TOP_INSTANCES = 5
TOP_ITEMS = 10
#: items kept per rank window (by duration) in the partial
KEEP_ITEMS = 20
#: a rank with more communication ops keeps the windows of this many ops with the largest wait
#: (where it arrived early) and this many with the longest window (where it arrived late), and
#: the first op of each group
KEEP_OPS = 200

SCHEMA = pa.schema([
    ("rank", pa.int32()), ("step", pa.int32()), ("group", pa.string()), ("op_name", pa.string()),
    ("start_ns", pa.int64()), ("window_start_ns", pa.int64()), ("wait_ns", pa.int64()),
    ("kind", pa.string()), ("item", pa.string()), ("dur_ns", pa.int64())])

COLUMNS = ["Step", "Group", "Op Name", "Max Wait(ms)", "Arrival Skew(ms)", "Early Rank",
           "Late Rank", "Early Window(ms)", "Late Window(ms)", "Item Kind", "Item", "Late(ms)",
           "Early(ms)", "Extra(ms)"]


def rank_partial(tables: dict, rank: int, meta: dict | None = None) -> dict[str, pa.Table]:
    """{WINDOWS: per communication op of the rank, the window before it and what filled it}
    when the rank has both communication ops and kernels."""
    ops, k = tables.get(S.COMM_OPS), tables.get(S.KERNELS)
    if ops is None or ops.num_rows == 0 or k is None or k.num_rows == 0:
        return {}
    o = ops.select(["step", "op_name", "group", "start_ns", "elapse_ns", "wait_ns"]).to_pandas()
    o = o[o["start_ns"].notna()].sort_values("start_ns")
    if o.empty:
        return {}
    texts, items, ks, ke = _kernel_items(k)
    busy = idle.busy_intervals(tables)
    loader = _loader(tables)
    wins = idle.step_windows(tables)
    spans = []
    prev_end: dict = {}
    for r in o.itertuples(index=False):
        start = int(r.start_ns)
        key = (r.group, r.step)
        lo = prev_end.get(key)
        first = lo is None
        if first:
            lo = next((w_lo for st, w_lo, w_hi in wins if w_lo <= start <= w_hi), None)
        prev_end[key] = start + int(0 if pd.isna(r.elapse_ns) else r.elapse_ns)
        if lo is not None and lo < start:
            spans.append((r, int(lo), start, first))
    if len(spans) > 2 * KEEP_OPS:
        by_wait = sorted(range(len(spans)), key=lambda i: -(0 if pd.isna(spans[i][0].wait_ns)
                                                            else spans[i][0].wait_ns))
        later = [i for i, sp in enumerate(spans) if not sp[3]]
        by_len = sorted(later, key=lambda i: spans[i][1] - spans[i][2])
        keep = (set(by_wait[:KEEP_OPS]) | set(by_len[:KEEP_OPS])
                | {i for i, sp in enumerate(spans) if sp[3]})
        spans = [s for i, s in enumerate(spans) if i in keep]
    rows = []
    for r, lo, start, _ in spans:
        base = {"rank": rank, "step": None if pd.isna(r.step) else int(r.step),
                "group": r.group, "op_name": r.op_name, "start_ns": start,
                "window_start_ns": int(lo),
                "wait_ns": None if pd.isna(r.wait_ns) else int(r.wait_ns)}
        i, j = np.searchsorted(ks, lo, side="left"), np.searchsorted(ks, start, side="left")
        if j > i:
            dur = np.minimum(ke[i:j], start) - ks[i:j]
            for item, ns in _largest(texts, items[i:j], dur):
                rows.append({**base, "kind": "kernel", "item": item, "dur_ns": ns})
        gap = iv.total(iv.difference(iv.make([lo], [start]), iv.clip(busy, lo, start)))
        rows.append({**base, "kind": "idle", "item": "device idle", "dur_ns": int(gap)})
        if loader is not None:
            dl = iv.total(iv.clip(loader, lo, start))
            if dl:
                rows.append({**base, "kind": "data loader", "item": "DataLoader",
                             "dur_ns": int(dl)})
    return {WINDOWS: pa.Table.from_pylist(rows, schema=SCHEMA)} if rows else {}


def _largest(texts: np.ndarray, items: np.ndarray, dur: np.ndarray) -> list[tuple[str, int]]:
    """The :data:`KEEP_ITEMS` items (``texts[items]``) with the most time in ``dur`` (ns per
    kernel), as (text, ns), most first; ties in text order (as pandas' groupby by text, then
    nlargest). Summed per item code: a window may hold millions of kernels."""
    sums = np.bincount(items, weights=dur)  # < 2^53 ns: exact
    present = np.flatnonzero(np.bincount(items))
    by_text = present[np.argsort(texts[present], kind="stable")]
    top = by_text[np.argsort(-sums[by_text].astype(np.int64), kind="stable")[:KEEP_ITEMS]]
    return [(texts[g], int(sums[g])) for g in top]


def _kernel_items(k: pa.Table) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The compute kernels of KERNELS ``k`` with a start, in start order: ``(texts, items,
    start, end)``: their item ("op type [input shapes]") as a code into ``texts``, start and end
    (int64 ns). An item text is built once per distinct (op type, shapes), not per kernel (a
    rank may hold millions)."""
    core_v, core_c = filled_codes(k["accelerator_core"])
    comm = np.isin(np.array([v.upper() for v in core_v], dtype=object),
                   ["COMMUNICATION", "HCCL"])[core_c]
    rows = np.flatnonzero(~comm & np.asarray(pc.is_valid(k["start_ns"]).to_numpy(
        zero_copy_only=False), bool))
    take = pa.array(rows)
    ks = np.asarray(k["start_ns"].take(take).to_numpy(zero_copy_only=False), np.int64)
    order = np.argsort(ks, kind="stable")
    rows, ks = rows[order], ks[order]
    take = pa.array(rows)
    ke = ks + np.asarray(pc.fill_null(k["dur_ns"].take(take), 0).to_numpy(
        zero_copy_only=False), np.int64)
    type_v, type_c = filled_codes(k["op_type"], null="?")
    shape_v, shape_c = filled_codes(k["input_shapes"])
    pairs, inv = group_codes(type_c[rows], shape_c[rows])
    first: dict = {}  # two pairs may make one text (shapes with and without quotes)
    same = np.array([first.setdefault(f"{type_v[t]} [{str(shape_v[sh]).strip(chr(34))}]",
                                      len(first)) for t, sh in pairs], np.int64)
    texts = np.empty(len(first), dtype=object)
    texts[:] = list(first)
    return texts, same[inv] if len(same) else inv, ks, ke


def _loader(tables: dict):
    h = tables.get(S.HOST_EVENTS)
    if h is None or h.num_rows == 0:
        return None
    h = h.filter(pc.match_substring(pc.utf8_lower(pc.fill_null(h["name"], "")), "dataloader"))
    if h.num_rows == 0:
        return None
    return iv.union(iv.from_durations(h["start_ns"].to_numpy(),
                                      pc.fill_null(h["dur_ns"], 0).to_numpy()))


def build(part: pa.Table | None) -> pd.DataFrame:
    """late_arrivals.csv (:data:`COLUMNS`) of all ranks' :data:`WINDOWS` partials concatenated
    (SCHEMA, ranks ascending): :func:`build_parts` of that one table."""
    return build_parts(lambda: [] if part is None else [part])


def build_parts(parts) -> pd.DataFrame:
    """late_arrivals.csv (:data:`COLUMNS`): for the :data:`TOP_INSTANCES` instances (at least
    two ranks with kernels) with the largest wait, the items the late rank spent longer on.

    ``parts()``: the ranks' :data:`WINDOWS` partials (SCHEMA), one table at a time, ranks
    ascending; called twice (they are read back from disk one rank at a time: at 4096 ranks
    all of them are ~80 MB). An instance is a (step, group, op name) (rows without a group or
    op name belong to none); its ranks' first rows say when each arrived: the early rank is
    the first with the smallest start, the late rank the first with the largest (none when all
    arrive together); its wait is the largest of theirs (ns, null as 0). Instances by wait,
    largest first, then step, group, op name, then first seen. Found one rank's first rows at
    a time, holding one entry per instance; only the rows of the instances shown are read as a
    frame."""
    # (step or -1, group, op name) -> [ranks, largest wait, then (start, rank, window start) of
    # the early rank and of the late rank], in order of first appearance; one rank's first
    # rows at a time (all ranks' at once were ~50 MB at 4096 ranks)
    state: dict[tuple, list] = {}
    for p in parts():
        if p is None or not p.num_rows:
            continue
        h = _heads(p)
        for rank, st, grp, name, start, window, wait in zip(
                _ints(h["rank"], 0).tolist(), _ints(h["step"], -1).tolist(),
                h["group"].to_pylist(), h["op_name"].to_pylist(),
                _ints(h["start_ns"], 0).tolist(), _ints(h["window_start_ns"], 0).tolist(),
                _ints(h["wait_ns"], 0).tolist()):
            got = state.get((st, grp, name))
            if got is None:
                state[(st, grp, name)] = [1, wait, start, rank, window, start, rank, window]
                continue
            got[0] += 1
            if wait > got[1]:
                got[1] = wait
            if start < got[2]:  # the first with the smallest start
                got[2:5] = start, rank, window
            if start > got[5]:  # the first with the largest start
                got[5:8] = start, rank, window
        del h
    if not state:
        return pd.DataFrame(columns=COLUMNS)
    cand = [(float(v[1]), st, grp, name, v[2:5], v[5:8])
            for (st, grp, name), v in state.items() if v[0] >= 2 and v[3] != v[6]]
    del state
    cand.sort(key=lambda t: (-t[0], t[1], str(t[2]), str(t[3])))
    cand = cand[:TOP_INSTANCES]
    wanted = [(st, grp, name) for _, st, grp, name, _, _ in cand]
    chosen = pa.concat_tables([p.filter(_of_instances(p, wanted)) for p in parts()
                               if p is not None and p.num_rows]) if cand else None
    rows = []
    ms = lambda ns: round(ns / 1e6, 3)  # noqa: E731
    for (wait_ns, st, grp, name, (e_start, e_rank, e_window),
         (l_start, l_rank, l_window)), key in zip(cand, wanted):
        sel = chosen.filter(_of_instances(chosen, [key])).select(
            ["rank", "kind", "item", "dur_ns"]).to_pandas()
        per = sel.groupby(["rank", "kind", "item"])["dur_ns"].sum()
        a = per.get(l_rank, pd.Series(dtype="int64"))
        b = per.get(e_rank, pd.Series(dtype="int64"))
        diff = a.sub(b, fill_value=0).sort_values(ascending=False)
        diff = diff[diff > 0].head(TOP_ITEMS)
        lw, ew = l_start - l_window, e_start - e_window
        for (kind, item), extra in diff.items():
            rows.append([None if st < 0 else st, grp, name, ms(wait_ns),
                         ms(l_start - e_start), e_rank, l_rank, ms(ew),
                         ms(lw), kind, item, ms(int(a.get((kind, item), 0))),
                         ms(int(b.get((kind, item), 0))), ms(int(extra))])
    out = pd.DataFrame(rows, columns=COLUMNS)
    out["Step"] = out["Step"].astype("Int64")
    return out


_HEAD_COLUMNS = ["rank", "step", "group", "op_name", "start_ns", "window_start_ns", "wait_ns"]


def _heads(part: pa.Table) -> pa.Table:
    """The rows of ``part`` (WINDOWS) that are each rank's first of an instance (a group and an
    op name set), in row order, with the columns that say when the rank arrived."""
    inst, _ = _instances(part)
    rank = _ints(part["rank"], 0)
    rows = np.flatnonzero(inst >= 0)
    _, first = np.unique(np.stack([inst[rows], rank[rows]], axis=1), axis=0, return_index=True)
    return part.select(_HEAD_COLUMNS).take(pa.array(rows[np.sort(first)]))


def _of_instances(part: pa.Table, keys) -> pa.ChunkedArray | pa.Array:
    """The filter of the rows of ``part`` in one of the instances ``keys`` ((step or -1,
    group, op name) each)."""
    step = pc.fill_null(part["step"], -1)
    mask = None
    for st, grp, name in keys:
        m = pc.and_(pc.and_(pc.equal(step, st), pc.equal(part["group"], grp)),
                    pc.equal(part["op_name"], name))
        mask = m if mask is None else pc.or_(mask, m)
    return pc.fill_null(mask, False)


def _ints(column, null: int) -> np.ndarray:
    """An integer column as int64 numpy, null as ``null``."""
    return np.asarray(pc.fill_null(column, null).to_numpy(), np.int64)


def _instances(part: pa.Table) -> tuple[np.ndarray, np.ndarray]:
    """``(instance per row, keys)``: the (step, group, op name) instance of each row of
    ``part`` as a number (-1 for a row without a group or an op name), numbered in order of
    first appearance; ``keys`` one (step, group, op name) row per instance (object array; the
    step -1 when null)."""
    g, gv = text_codes(part["group"])
    o, ov = text_codes(part["op_name"])
    step = _ints(part["step"], -1)
    ok = np.flatnonzero((g >= 0) & (o >= 0))
    steps, s = np.unique(step[ok], return_inverse=True)
    pairs, inv = group_codes(s.astype(np.int64), g[ok].astype(np.int64),
                             o[ok].astype(np.int64))
    inst = np.full(part.num_rows, -1, np.int64)
    inst[ok] = inv
    keys = np.empty((len(pairs), 3), dtype=object)
    if len(pairs):
        keys[:, 0] = steps[pairs[:, 0]].tolist()
        keys[:, 1] = np.array(gv, dtype=object)[pairs[:, 1]]
        keys[:, 2] = np.array(ov, dtype=object)[pairs[:, 2]]
    return inst, keys
