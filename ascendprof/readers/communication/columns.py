"""Columns and tables shared by every way of reading communication.json: the COMM_* table of
its columns (:func:`assemble`), the entry columns each row shares with its op
(:func:`entry_columns`), absolute timestamps, and the numeric columns of Arrow arrays of the
ops' Time Info and Bandwidth Info (:func:`typed_columns_of`). Times ms -> int ns, sizes MB."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ascendprof.model import schemas as S
from ascendprof.model.units import ms_vector_to_ns, us_column_to_ns, us_text_to_ns
from ascendprof.readers.communication.layout import SIZE_DIST, step_number

#: (column, JSON key) of COMM_OPS from Communication Time Info: ms -> ns, then as written
OP_MS = (("elapse_ns", "Elapse Time(ms)"), ("transit_ns", "Transit Time(ms)"),
         ("wait_ns", "Wait Time(ms)"), ("sync_ns", "Synchronization Time(ms)"),
         ("idle_ns", "Idle Time(ms)"))
OP_RATIOS = (("wait_ratio", "Wait Time Ratio"), ("sync_ratio", "Synchronization Time Ratio"))
#: (column, JSON key) of COMM_BANDWIDTH: the one ms field, then the ones kept as written
BW_MS = ("transit_ns", "Transit Time(ms)")
BW_FLOATS = (("size_mb", "Transit Size(MB)"), ("bandwidth_gbps", "Bandwidth(GB/s)"),
             ("large_packet_ratio", "Large Packet Ratio"))
F64 = pa.float64()
#: Arrow types of an op's Time Info and Bandwidth Info, fields in the order of the tuples above
TIME_TYPE = pa.struct([(k, F64) for _, k in OP_MS + OP_RATIOS])
BANDWIDTH_TYPE = pa.map_(pa.string(), pa.struct(
    [(k, F64) for _, k in (BW_MS,) + BW_FLOATS]
    + [(SIZE_DIST, pa.map_(pa.string(), pa.list_(F64)))]))
#: packet counts at or beyond this are not exact as float64: the per-value way keeps them exact
_EXACT_COUNT = 2.0 ** 53


def has_true_or_false(raw: bytes) -> bool:
    """``b"true" in raw or b"false" in raw``, ~2x faster on profiler JSON. Python's substring
    search is slow on text full of the needles' letters ("Transit Time", "Size Distribution"):
    1.5 ms for a 1.2 MB file. Here numpy looks at the rarer middle letters only ('u' of true,
    'l' of false) and checks their neighbours. (JSON true/false are what Arrow's converter takes
    as numbers where the per-value rules do not.)"""
    a = np.frombuffer(raw, np.uint8)
    n = len(a)
    u = np.flatnonzero(a[2:n - 1] == ord("u")) + 2  # t r [u] e: 2 before, 1 after
    if ((a[u - 2] == ord("t")) & (a[u - 1] == ord("r")) & (a[u + 1] == ord("e"))).any():
        return True
    i = np.flatnonzero(a[2:n - 2] == ord("l")) + 2  # f a [l] s e: 2 before, 2 after
    return bool(((a[i - 2] == ord("f")) & (a[i - 1] == ord("a")) & (a[i + 1] == ord("s"))
                 & (a[i + 2] == ord("e"))).any())


def _abs_us_to_ns(v) -> int | None:
    """Absolute us (a JSON float of ~16 digits) to ns through its shortest decimal text, so
    ``1764246877147674.5`` gives ``...674500`` and not the float product's ``...674624``."""
    return None if v is None else us_text_to_ns(repr(float(v)) if isinstance(v, float) else v)


def abs_us_column(values: list) -> pa.Array:
    """``start_ns`` of ``Start Timestamp(us)`` values (numbers or None): each through its
    shortest decimal text, converted in one vectorised step; value by value when that fails
    (which raises the ValueError naming the value)."""
    texts = [None if v is None else repr(float(v)) if type(v) is float else str(v)
             for v in values]
    try:
        return us_column_to_ns(pa.array(texts, pa.string()))
    except ValueError:
        return pa.array([_abs_us_to_ns(v) for v in values], pa.int64())


def _parent_indices(maps: pa.MapArray) -> pa.Array:
    """Index of the map each entry of ``maps.items`` belongs to (a freshly built array: its
    entries are stored in order and a null map holds none). Computed from the offsets:
    pyarrow.compute.list_parent_indices aborts the process on a MapArray (pyarrow 26)."""
    offsets = maps.offsets.to_numpy()
    return pa.array(np.repeat(np.arange(len(maps), dtype=np.int32), np.diff(offsets)))


def typed_columns_of(times: list, bw: pa.MapArray):
    """The numeric columns of the COMM_* tables from Arrow arrays: ``times`` the fields of the
    ops' Time Info in :data:`TIME_TYPE` order (one array each, null where absent), ``bw``
    their Bandwidth Info as a :data:`BANDWIDTH_TYPE` array (null where absent). Returns (ops,
    bandwidth, entry of every bandwidth row, size distribution, entry of every size row), the
    column dicts keyed by schema column; None when a value needs the per-value way."""
    ops = {col: _ms_to_ns(a) for (col, _), a in zip(OP_MS, times)}
    ops.update((col, a) for (col, _), a in zip(OP_RATIOS, times[len(OP_MS):]))
    # a transport whose value is null adds no row (the per-value way skips non-objects)
    b_ent = _parent_indices(bw)
    items, transports = bw.items, bw.keys
    if items.null_count:
        valid = items.is_valid()
        items, transports, b_ent = items.filter(valid), transports.filter(valid), \
            b_ent.filter(valid)
    fields = items.flatten()
    bws = {"transport": transports, BW_MS[0]: _ms_to_ns(fields[0])}
    bws.update((col, a) for (col, _), a in zip(BW_FLOATS, fields[1:]))
    dist = fields[-1]  # map<packet size text, list<double>> per bandwidth row
    d_row = _parent_indices(dist)
    pairs, keys = dist.items, dist.keys
    full = pc.fill_null(pc.greater_equal(pc.list_value_length(pairs), 2), False)
    if not pc.all(full).as_py():
        pairs, keys, d_row = pairs.filter(full), keys.filter(full), d_row.filter(full)
    count, dur = pc.list_element(pairs, 0), pc.list_element(pairs, 1)
    if len(count) and ((pc.max(pc.abs(count)).as_py() or 0) >= _EXACT_COUNT
                       or pc.any(pc.is_nan(count)).as_py()):
        return None  # not exact as float64, or NaN (the cast would make it -2^63)
    sds = {"transport": transports.take(d_row), "packet_size_mb": keys,
           "count": pc.cast(count, pa.int64(), safe=False),  # truncates, as int() does
           "dur_ns": _ms_to_ns(dur)}
    if any(c is None for c in (*ops.values(), bws[BW_MS[0]], sds["dur_ns"])):
        return None  # a time beyond int64 ns: the per-value way raises, naming it as written
    return ops, bws, b_ent, sds, b_ent.take(d_row)


def _ms_to_ns(ms: pa.Array) -> pa.Array | None:
    return ms_vector_to_ns(ms.to_numpy(zero_copy_only=False))  # null -> nan -> null


def rank_column(rank: int, n: int, path: Path) -> pa.Array:
    """The rank column of ``n`` rows; InputError when ``rank`` is not an int32."""
    try:
        # not pa.scalar(rank, int32): its first call imports pandas (~0.2 s)
        rank_value = pa.array([rank], pa.int32())[0]
    except (pa.ArrowException, OverflowError, TypeError, ValueError):
        S.from_lists(S.COMM_OPS, {"rank": [rank]}, path)  # raises the InputError
        raise
    return pa.repeat(rank_value, n) if n else pa.array([], pa.int32())


def entry_columns(rank: int, step_keys: list, kinds: list, names: list, groups: list,
                  path: Path) -> dict[str, pa.Array]:
    """The columns every COMM_* row shares with its op entry, one value per entry."""
    steps_of = {k: step_number(k) for k in set(step_keys)}
    rank_col = rank_column(rank, len(step_keys), path)
    return {"rank": rank_col,
            "step": pa.array([steps_of[k] for k in step_keys], pa.int32()),
            "step_key": pa.array(step_keys, pa.string()), "kind": pa.array(kinds, pa.string()),
            "op_name": pa.array(names, pa.string()), "group": pa.array(groups, pa.string())}


def assemble(name: str, common: dict, entries: list | None, own: dict) -> pa.Table:
    """Table ``name`` from its ``own`` columns and the entry columns taken at ``entries`` (the
    entry index of every row; None: one row per entry, in order)."""
    if isinstance(entries, pa.Array):
        same, index = False, entries
    else:
        same = entries is None or entries == list(range(len(common["step_key"])))
        index = None if same else pa.array(entries, pa.int32())
    cols = []
    for f in S.SCHEMAS[name]:
        if f.name in own:
            cols.append(own[f.name])
        else:
            col = common[f.name]
            cols.append(col if same else col.take(index))
    return pa.Table.from_arrays(cols, schema=S.SCHEMAS[name])


def comm_tables(common: dict, ops: dict, bws: dict, b_ent, sds: dict, d_ent
                ) -> dict[str, pa.Table]:
    """``{COMM_OPS, COMM_BANDWIDTH, COMM_SIZE_DIST}`` of the entry columns ``common`` and each
    table's own columns, ``b_ent`` / ``d_ent`` the entry of every bandwidth / size row."""
    return {S.COMM_OPS: assemble(S.COMM_OPS, common, None, ops),
            S.COMM_BANDWIDTH: assemble(S.COMM_BANDWIDTH, common, b_ent, bws),
            S.COMM_SIZE_DIST: assemble(S.COMM_SIZE_DIST, common, d_ent, sds)}
