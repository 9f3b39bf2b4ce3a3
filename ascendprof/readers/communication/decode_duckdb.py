"""A batch of communication.json op entries decoded by DuckDB's JSON reader, when its shape
shows DuckDB reads every value as it is (:func:`duck_tables`). DuckDB is optional: without it
the batch goes to msgspec (:mod:`ascendprof.readers.communication.decode_msgspec`)."""

from __future__ import annotations

import os

import numpy as np
import pyarrow as pa

from ascendprof.readers.communication.batch import (EXACT, REQUIRED, BatchProblems, Entries,
                                                    batch_columns, first_bad)
from ascendprof.readers.communication.columns import (BANDWIDTH_TYPE, abs_us_column,
                                                      comm_tables, has_true_or_false,
                                                      typed_columns_of)

def _has_null(raw: bytes) -> bool:
    """``b"null" in raw``, the way columns.has_true_or_false looks for true / false."""
    a = np.frombuffer(raw, np.uint8)
    n = len(a)
    u = np.flatnonzero(a[1:n - 2] == ord("u")) + 1  # n [u] l l
    return bool(((a[u - 1] == ord("n")) & (a[u + 1] == ord("l")) & (a[u + 2] == ord("l"))).any())


def _has_trailing_comma(raw: bytes) -> bool:
    """A ``,`` before a ``]`` or ``}`` (whitespace between ignored): DuckDB reads ``[1, 2,]``
    as [1, 2] where JSON (and every other reader) refuses it."""
    a = np.frombuffer(raw, np.uint8)
    a = a[~np.isin(a, np.frombuffer(b" \t\r\n", np.uint8))]
    return bool(((a[:-1] == ord(",")) & ((a[1:] == ord("]")) | (a[1:] == ord("}")))).any())


_DUCK: list = []
#: the fields asked of DuckDB, in columns.TIME_TYPE / BANDWIDTH_TYPE order
_DUCK_TYPE = (
    '{"Communication Time Info": {"Elapse Time(ms)": "DOUBLE", "Transit Time(ms)": "DOUBLE", '
    '"Wait Time(ms)": "DOUBLE", "Synchronization Time(ms)": "DOUBLE", "Idle Time(ms)": "DOUBLE", '
    '"Wait Time Ratio": "DOUBLE", "Synchronization Time Ratio": "DOUBLE", '
    '"Start Timestamp(us)": "DOUBLE"}, '
    '"Communication Bandwidth Info": "MAP(VARCHAR, STRUCT(\\"Transit Time(ms)\\" DOUBLE, '
    '\\"Transit Size(MB)\\" DOUBLE, \\"Bandwidth(GB/s)\\" DOUBLE, \\"Large Packet Ratio\\" '
    'DOUBLE, \\"Size Distribution\\" MAP(VARCHAR, DOUBLE[])))"}')


def _duck():
    """A DuckDB connection (one per process), None when DuckDB is not installed."""
    if not _DUCK:
        try:
            import duckdb

            con = duckdb.connect()
            con.execute(f"SET threads={max(1, os.cpu_count() or 1)}")
            # hand freed memory back instead of keeping up to 128 MB (or 512 MB in bulk)
            for setting in ("allocator_flush_threshold", "allocator_bulk_deallocation_flush_"
                                                         "threshold"):
                try:
                    con.execute(f"SET {setting} = '8MB'")
                except Exception:  # noqa: BLE001 - an older DuckDB without the setting
                    pass
            _DUCK.append(con)
        except Exception:  # noqa: BLE001 - an optional speed-up
            _DUCK.append(None)
    return _DUCK[0]


def duck_tables(entries: Entries, path, rank, sink: BatchProblems):
    """The tables of a streamed batch decoded by DuckDB's JSON reader (C++, all cores),
    ~4x faster than msgspec and Python. DuckDB reads leniently (a text "3" as 3, true as 1, a
    list as null, the first of two equal keys), so it is used only when the block shows none of
    that: no true / false / null, no text value (two quotes per key), lists only as the
    [count, duration] pairs, and as many keys and objects at each depth as DuckDB returned
    values (an unknown field, a repeated key or an object where a number belongs differs).
    None when not used."""
    shape = entries.shape
    if shape is None or entries.doc is None:
        return None
    colons, objects, lists = shape["colons"], shape["objects"], shape["lists"]
    if shape["quotes"] != 2 * int(colons.sum()) or lists.sum() != lists[7] \
            or objects[7:].any() or colons[8:].any():
        return None
    if has_true_or_false(entries.doc) or _has_null(entries.doc) \
            or _has_trailing_comma(entries.doc):
        return None
    con = _duck()
    if con is None:
        return None
    op_texts = pa.table({"j": entries.texts.cast(pa.string())})  # noqa: F841 (DuckDB reads it)
    try:
        got = con.sql(f"SELECT from_json(j, '{_DUCK_TYPE}') AS o FROM op_texts").to_arrow_table()
    except Exception:  # noqa: BLE001 - any doubt: the exact way
        return None
    o = got.column("o").combine_chunks()
    time, bw = o.flatten()
    n = len(o)
    ti_fields = time.flatten()
    n_ti, n_bw = time.is_valid().true_count if n else 0, bw.is_valid().true_count if n else 0
    entries_n = len(bw.keys)
    items = bw.items
    item_fields = items.flatten()
    dist = item_fields[-1]
    n_dist = dist.is_valid().true_count if len(dist) else 0
    dist_n = len(dist.keys)
    valid_ti = sum(f.is_valid().true_count for f in ti_fields if len(f))
    valid_tr = sum(f.is_valid().true_count for f in item_fields[:-1] if len(f)) + n_dist
    if (colons[4] != n_ti + n_bw or objects[4] != n_ti + n_bw
            or colons[5] != valid_ti + entries_n or objects[5] != entries_n
            or items.null_count or colons[6] != valid_tr or objects[6] != n_dist
            or colons[7] != dist_n or lists[7] != dist_n or dist.items.null_count):
        return None
    numbers = [*ti_fields, *item_fields[:-1], dist.items.flatten()]
    for a in numbers:
        v = a.to_numpy(zero_copy_only=False)
        with np.errstate(invalid="ignore"):
            # a NaN beyond the nulls: a NaN literal, not JSON, which DuckDB reads as a number
            if len(v) and (int(np.isnan(v).sum()) != a.null_count or
                           ~np.isfinite(v[~np.isnan(v)]).any() or
                           (np.abs(v[~np.isnan(v)]) >= EXACT).any()):
                return None
    # ops with a required time below 0 are left out and counted (nulls are absent keys here)
    bad_field = np.full(n, -1, np.int64)
    for j in range(3, -1, -1):  # the first required field in order wins
        neg = np.nan_to_num(ti_fields[j].to_numpy(zero_copy_only=False), nan=0.0) < 0
        bad_field[neg] = j
    keep = None
    if (bad_field >= 0).any():
        first = int(np.flatnonzero(bad_field >= 0)[0])
        key = REQUIRED[int(bad_field[first])][0]
        v = ti_fields[int(bad_field[first])][first].as_py()
        first_bad(entries, first, int((bad_field >= 0).sum()), key, v, sink)
        keep = np.flatnonzero(bad_field < 0).tolist()
        mask = pa.array(bad_field < 0)
        ti_fields = [f.filter(mask) for f in ti_fields]
        bw = bw.filter(mask)
    try:
        bw = bw.cast(BANDWIDTH_TYPE)
    except (pa.ArrowException, ValueError):
        return None
    cols = typed_columns_of(ti_fields[:7], bw)
    if cols is None:
        return None
    ops, bws, b_ent, sds, d_ent = cols
    ops["start_ns"] = abs_us_column(ti_fields[7].to_pylist())
    texts = entries.texts if keep is None else entries.texts.take(pa.array(keep, pa.int64()))
    ops["opinfo_json"] = texts.cast(pa.string())
    return comm_tables(batch_columns(entries, keep, rank, path), ops, bws, b_ent, sds, d_ent)
