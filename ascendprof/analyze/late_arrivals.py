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
    spans = _spans(ops, idle.step_windows(tables))
    if spans is None:
        return {}
    span_cols, los, starts = spans
    texts, items, ks, ke = _kernel_items(k)
    # every window at once (prefix sums over the merged intervals; exact integer ns): the
    # device idle in [lo, start) is its length less the busy time in it
    gaps = (starts - los) - iv.length_in_windows(idle.busy_intervals(tables), los, starts)
    loader = _loader(tables)
    loaded = None if loader is None else iv.length_in_windows(loader, los, starts)
    firsts = np.searchsorted(ks, los, side="left")
    lasts = np.searchsorted(ks, starts, side="left")
    at, kinds, names, durs = [], [], [], []  # per row: its span, kind, item, ns
    for n in range(len(starts)):
        i, j = firsts[n], lasts[n]
        if j > i:
            dur = np.minimum(ke[i:j], starts[n]) - ks[i:j]
            for item, ns in _largest(texts, items[i:j], dur):
                at.append(n), kinds.append("kernel"), names.append(item), durs.append(ns)
        at.append(n), kinds.append("idle"), names.append("device idle")
        durs.append(int(gaps[n]))
        if loaded is not None and loaded[n]:
            at.append(n), kinds.append("data loader"), names.append("DataLoader")
            durs.append(int(loaded[n]))
    if not at:
        return {}
    # the span's own columns once per span, repeated for its rows (a rank of 10^3 ops has
    # ~10^4 rows: a dict per row cost more than the analysis)
    take = pa.array(at, pa.int64())
    span = {c: a.take(take) for c, a in span_cols.items()}
    cols = {"rank": pa.array(np.full(len(at), rank, np.int32)), **span,
            "start_ns": pa.array(starts).take(take), "window_start_ns": pa.array(los).take(take),
            "kind": pa.array(kinds, pa.string()), "item": pa.array(names, pa.string()),
            "dur_ns": pa.array(durs, pa.int64())}
    return {WINDOWS: pa.Table.from_arrays([cols[f.name] for f in SCHEMA], schema=SCHEMA)}


def _as_pandas(column) -> np.ndarray:
    """A numeric column as pandas holds it: its own type, float64 with NaN when it has nulls
    (an int64 of ns then loses its last digits, as it did in the frame)."""
    return column.to_numpy(zero_copy_only=False)  # (Arrow's conversion is pandas')


def _spans(ops: pa.Table, wins) -> tuple[dict, np.ndarray, np.ndarray] | None:
    """The windows before the ops of COMM_OPS ``ops`` that have one, kept as the module doc
    says, in start order: ``(columns, window starts, op starts)``, the columns the ops' step /
    group / op_name / wait_ns (Arrow arrays of :data:`SCHEMA`'s types), the starts int64 ns
    (None when no op has a start). An op's window starts at the end of the previous op of its
    (group, step), its first op's at the start of the step window (``wins``, idle.step_windows)
    holding it. On numpy columns in start order (a communication.json holds up to millions of
    ops): the same ops and order as a frame of them sorted by start time (pandas' default sort)
    and walked row by row, a null step never matching another op's."""
    start = _as_pandas(ops["start_ns"])
    rows = np.flatnonzero(~np.isnan(start)) if start.dtype.kind == "f" else \
        np.arange(len(start))
    if not len(rows):
        return None
    rows = rows[np.argsort(start[rows], kind="quicksort")]
    start = start[rows].astype(np.int64)
    take = pa.array(rows)
    elapse = _as_pandas(ops["elapse_ns"].take(take))
    end = start + (np.nan_to_num(elapse, nan=0.0).astype(np.int64) if elapse.dtype.kind == "f"
                   else elapse.astype(np.int64))
    # the (group, step) of each op as one code; a null step is a key of its own per op
    group = text_codes(ops["group"].take(take))[0].astype(np.int64) + 1
    step = ops["step"].take(take)
    known = np.asarray(pc.is_valid(step).to_numpy(zero_copy_only=False), bool)
    _, step_code = np.unique(np.asarray(pc.fill_null(step, 0).to_numpy(), np.int64),
                             return_inverse=True)
    step_code = np.where(known, step_code.reshape(-1), -1 - np.arange(len(rows)))
    _, key = group_codes(group, step_code - step_code.min())
    # the previous op of the same key: the one before it among its key's ops in start order
    by_key = np.argsort(key, kind="stable")
    same = key[by_key][1:] == key[by_key][:-1]
    prev = np.full(len(rows), -1, np.int64)
    prev[by_key[1:][same]] = by_key[:-1][same]
    first = prev < 0
    lo = np.zeros(len(rows), np.int64)
    has = ~first
    lo[has] = end[prev[has]]
    for i in np.flatnonzero(first).tolist():  # one per key: a step's window holding it
        s = int(start[i])
        w = next((w_lo for st, w_lo, w_hi in wins if w_lo <= s <= w_hi), None)
        if w is not None:
            lo[i], has[i] = w, True
    keep = np.flatnonzero(has & (lo < start))
    wait = _as_pandas(ops["wait_ns"].take(take))
    if len(keep) > 2 * KEEP_OPS:
        w = -np.nan_to_num(wait[keep], nan=0.0) if wait.dtype.kind == "f" else \
            -wait[keep].astype(np.int64)
        by_wait = np.argsort(w, kind="stable")[:KEEP_OPS]
        later = np.flatnonzero(~first[keep])
        by_len = later[np.argsort(lo[keep][later] - start[keep][later], kind="stable")][:KEEP_OPS]
        chosen = np.zeros(len(keep), bool)
        chosen[by_wait] = chosen[by_len] = True
        chosen |= first[keep]
        keep = keep[chosen]
    take = pa.array(rows[keep])
    cols = {c: ops[c].take(take).cast(SCHEMA.field(c).type)
            for c in ("step", "group", "op_name")}
    waits = wait[keep]
    cols["wait_ns"] = pa.array(
        [None if v != v else int(v) for v in waits.tolist()] if waits.dtype.kind == "f"
        else waits.astype(np.int64), pa.int64())
    return cols, lo[keep], start[keep]


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
