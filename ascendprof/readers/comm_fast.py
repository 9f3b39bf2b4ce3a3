"""communication.json (spec §A.5) read fast and, for a large file, in bounded memory.

Same tables, rows and problems as the per-value reader in :mod:`ascendprof.readers.communication`,
which stays the definition: whatever the fast way cannot map exactly goes through it. Two ways
of cutting the file into op entries, one way of decoding them:

* a file up to :data:`WHOLE_FILE_BYTES` is split by msgspec into ``step -> kind -> op`` with
  every op's object left undecoded (``msgspec.Raw``); anything but that three-level object shape
  (the flat CANN layout, an entry that is not an object, invalid JSON) sends the whole file to
  the per-value reader, which words the warnings and errors;
* a larger file is never held whole: :class:`_Scanner` reads it in blocks of
  :data:`BLOCK_BYTES` and finds the op objects with a vectorised structural index (the
  positions of quotes, brackets and colons outside strings and their nesting depth, the first
  stage of simdjson done with numpy), so no Python step is taken per op. The levels above the
  ops are checked as JSON block by block (orjson, with each op object replaced by ``0``), the
  ops by their decoder. Peak memory is a few blocks' worth, whatever the file's size.

The op objects of a batch are decoded in one msgspec call into typed structs that declare
only the fields the tables need (the rest is skipped, not built). ``opinfo_json`` is the op's
object text as the file has it (msprof-analyze copies it as is into
cluster_communication.json). A value the structs do not take exactly (a text or bool where a
number belongs, a list where an object belongs, a number of 2^53 or more) sends that batch to
the per-value rules.

Public: :func:`read_tables` (whole tables), :func:`iter_tables` (batches of tables, for the
streaming engine). Both raise :class:`~ascendprof.model.errors.InputError` as the per-value
reader does.
"""

from __future__ import annotations

import os
from itertools import chain
from operator import attrgetter
from pathlib import Path
from typing import Dict, List, Optional, Union

import msgspec
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ascendprof.model import schemas as S
from ascendprof.model.errors import InputError

#: files up to this size are split in one msgspec call (the whole file in memory, ~2.5 times its
#: size at the peak); larger ones are streamed block by block
WHOLE_FILE_BYTES = 64 << 20
#: bytes scanned at a time when streaming (~20k ops of the usual ~800 bytes)
BLOCK_BYTES = 16 << 20

_Num = Union[int, float, None, msgspec.UnsetType]
_UNSET = msgspec.UNSET


class _Time(msgspec.Struct, gc=False):
    start: _Num = msgspec.field(name="Start Timestamp(us)", default=_UNSET)
    elapse: _Num = msgspec.field(name="Elapse Time(ms)", default=_UNSET)
    transit: _Num = msgspec.field(name="Transit Time(ms)", default=_UNSET)
    wait: _Num = msgspec.field(name="Wait Time(ms)", default=_UNSET)
    sync: _Num = msgspec.field(name="Synchronization Time(ms)", default=_UNSET)
    idle: _Num = msgspec.field(name="Idle Time(ms)", default=_UNSET)
    wait_ratio: _Num = msgspec.field(name="Wait Time Ratio", default=_UNSET)
    sync_ratio: _Num = msgspec.field(name="Synchronization Time Ratio", default=_UNSET)


class _Transport(msgspec.Struct, gc=False):
    size: _Num = msgspec.field(name="Transit Size(MB)", default=_UNSET)
    transit: _Num = msgspec.field(name="Transit Time(ms)", default=_UNSET)
    bandwidth: _Num = msgspec.field(name="Bandwidth(GB/s)", default=_UNSET)
    large_packet_ratio: _Num = msgspec.field(name="Large Packet Ratio", default=_UNSET)
    dist: Optional[Dict[str, List[Union[int, float, None]]]] = msgspec.field(
        name="Size Distribution", default=None)


class _Op(msgspec.Struct, gc=False):
    time: Optional[_Time] = msgspec.field(name="Communication Time Info", default=None)
    bandwidth: Optional[Dict[str, _Transport]] = msgspec.field(
        name="Communication Bandwidth Info", default=None)


_OPS = msgspec.json.Decoder(List[_Op])
_LAYOUT = msgspec.json.Decoder(Dict[str, Dict[str, Dict[str, msgspec.Raw]]])
_TYPED = msgspec.json.Decoder(Dict[str, Dict[str, Dict[str, _Op]]])
_EMPTY_TIME = _Time()
_NO_BW: dict = {}
#: numbers from here on are not exact as float64: the per-value rules take them
_EXACT = 2.0 ** 53
#: (column, struct field) of the Communication Time Info times, ms -> ns
_TIMES = (("elapse_ns", "elapse"), ("transit_ns", "transit"), ("wait_ns", "wait"),
          ("sync_ns", "sync"), ("idle_ns", "idle"))
#: REQUIRED_TIMES (communication.py) as struct fields
_REQUIRED = (("Elapse Time(ms)", "elapse"), ("Transit Time(ms)", "transit"),
             ("Wait Time(ms)", "wait"), ("Synchronization Time(ms)", "sync"))


class _Irregular(Exception):
    """The file is not of the shape the fast way handles: the per-value reader reads it."""


class Reread(Exception):
    """Raised by :func:`iter_tables` after it handed out batches, when the file turns out to
    need the per-value reader after all (an op key repeated in one step and kind: JSON keeps
    the last value at the first place). The consumer drops what it got and reads the file with
    ``communication.read_communication_per_value``."""


class _Entries:
    """One batch of op entries in file order: step key, kind, op key (Arrow string arrays or
    lists), the op objects' texts (binary array) and either the decoded ops or the JSON array
    text to decode them from; ``offsets``: each text's offset in the file (streaming only)."""

    def __init__(self, steps, kinds, keys, texts, ops=None, doc=None, offsets=None):
        self.steps, self.kinds, self.keys, self.texts = steps, kinds, keys, texts
        self.ops, self.doc, self.offsets = ops, doc, offsets

    def __len__(self):
        return len(self.texts)


# ------------------------------------------------------------------------------ entry points

def read_tables(path: Path, rank: int, problems=None) -> dict[str, pa.Table]:
    """The three COMM_* tables of ``path`` (see communication.read_communication), as one
    table each."""
    try:
        parts = list(iter_tables(path, rank, problems))
    except Reread:
        from ascendprof.readers.communication import read_communication_per_value

        return read_communication_per_value(path, rank, problems)
    if len(parts) == 1:
        return parts[0]
    return {name: pa.concat_tables([p[name] for p in parts]) for name in parts[0]}


def iter_tables(path: Path, rank: int, problems=None, *, whole_file_bytes: int | None = None,
                block_bytes: int | None = None):
    """Yield ``{COMM_OPS, COMM_BANDWIDTH, COMM_SIZE_DIST}`` batches of ``path`` in file order
    (at least one, possibly empty). A streamed file's problems are recorded once it has been
    read to its end. Raises InputError, or :class:`Reread` after some batches."""
    from ascendprof.readers import communication as C

    path = Path(path)
    limit = WHOLE_FILE_BYTES if whole_file_bytes is None else whole_file_bytes
    try:
        size = os.stat(path).st_size
    except OSError:
        size = 0
    if size <= limit:
        yield _whole(path, rank, problems, C)
    else:
        yield from _streamed(path, rank, problems, block_bytes or BLOCK_BYTES, C)


def _whole(path, rank, problems, C):
    from ascendprof.sysio.textio import read_payload

    raw = read_payload(path)
    try:
        if not raw.isascii():
            raw.decode("utf-8")  # msgspec does not look inside the values it skips
        entries = _entries_of(_LAYOUT.decode(raw))
    except (msgspec.DecodeError, UnicodeDecodeError, _Irregular):
        # not this shape, or not valid JSON: the per-value reader words what is wrong
        return C.read_communication_per_value(path, rank, problems, raw)
    try:
        entries.ops = _decode_ops(_TYPED.decode(raw))
    except msgspec.ValidationError:  # (a DecodeError too: the layout decode checked the JSON)
        entries.ops = None
    sink = _Problems()
    tables = _typed_tables(entries, path, rank, sink, C) if entries.ops is not None else None
    if tables is None:  # a value the structs do not take exactly: the per-value rules
        return C.read_communication_per_value(path, rank, problems, raw)
    sink.flush(problems, path, rank, C)
    return tables


def _is_total(key: str) -> bool:
    return key[:1] in "Tt" and key[:5].lower() == "total"


def _totals(keys) -> bool:
    """Whether any of ``keys`` is a "Total ..." entry."""
    return any(k[:1] in "Tt" and _is_total(k) for k in keys)


def _entries_of(layout: dict) -> _Entries:
    """The op entries of a decoded ``step -> kind -> op -> Raw`` layout; _Irregular for the
    flat CANN layout and for an op that is not an object (the per-value reader takes both)."""
    steps, kinds, keys, texts = [], [], [], []
    if any("@" in k or _is_total(k) for k in layout):
        raise _Irregular
    for step_key, step in layout.items():
        for kind, ops in step.items():
            ks = list(ops)
            vs = list(ops.values())
            if _totals(ks):
                keep = [i for i, k in enumerate(ks) if not _is_total(k)]
                ks, vs = [ks[i] for i in keep], [vs[i] for i in keep]
            steps.extend([step_key] * len(ks))
            kinds.extend([kind] * len(ks))
            keys.extend(ks)
            texts.extend(vs)
    texts = list(map(memoryview, texts))
    if any(t[0] != 123 for t in texts):  # not an object (a Raw holds no leading space)
        raise _Irregular
    return _Entries(steps, kinds, keys, pa.array(texts, pa.binary()))


def _decode_ops(typed: dict) -> list:
    """The ops of a typed decode, in the order of :func:`_entries_of`."""
    out = []
    for step in typed.values():
        for ops in step.values():
            if _totals(ops):
                out.extend(v for k, v in ops.items() if not _is_total(k))
            else:
                out.extend(ops.values())
    return out


class _Problems:
    """What the batches found, recorded once at the end of the file: the ops left out for a
    time that is not a non-negative number (one problem for the file, worded as the
    per-value reader does) and the entries skipped because they are not objects."""

    def __init__(self):
        self.bad: list = []  # (count, step key, field, value, name, group) of each batch
        self.warnings: list[tuple[int, str]] = []  # (offset in the file, warning)

    def flush(self, problems, path, rank, C):
        if problems is None:
            return
        for _, w in sorted(self.warnings, key=lambda w: w[0]):
            problems.warn(path, w, rank=rank)
        if self.bad:
            n = sum(b[0] for b in self.bad)
            _, step_key, key, v, name, group = self.bad[0]
            C.report_bad_times(problems, path, rank, n, step_key, key, v, name, group)


# ------------------------------------------------------------------------------ decoding

def _column(objs: list, name: str) -> list:
    return list(map(attrgetter(name), objs))


def _floats(values: list) -> np.ndarray | None:
    """float64 array of numbers / None / UNSET (both nan); None when a value needs the
    per-value rules (|x| >= 2^53: an int there may not be exact)."""
    if _UNSET in values:
        values = [None if v is _UNSET else v for v in values]
    a = np.array(values, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        if (np.abs(a) >= _EXACT).any():
            return None
    return a


def _f64(values: list) -> pa.Array | None:
    a = _floats(values)
    return None if a is None else pa.array(a, pa.float64(), from_pandas=True)


def _ns(values: list) -> pa.Array | None:
    from ascendprof.model.units import ms_vector_to_ns

    a = _floats(values)
    return None if a is None else ms_vector_to_ns(a)  # None beyond int64 ns


def _split_keys(keys) -> tuple[pa.Array, pa.Array]:
    """Op name and group of each op key (group: after the last '@', '' without one)."""
    keys = keys if isinstance(keys, pa.Array) else pa.array(keys, pa.string())
    parts = pc.extract_regex(keys, r"^(?P<name>.*)@(?P<group>[^@]*)$")
    if parts.null_count == 0:
        return parts.field("name"), parts.field("group")
    name, group = parts.flatten()  # (field() would drop the nulls of keys without a match)
    return pc.coalesce(name, keys), pc.coalesce(group, pa.scalar("", pa.string()))


def _decode_batch(entries: _Entries, path, rank, sink: _Problems, C):
    """Tables of one streamed batch: by DuckDB when the batch's shape allows
    (:func:`_duck_tables`), else msgspec, else the per-value rules. Raises InputError for an
    op text that is not valid JSON."""
    tables = _duck_tables(entries, path, rank, sink, C)
    if tables is not None:
        return tables
    try:
        entries.ops = _OPS.decode(entries.doc)
    except msgspec.ValidationError:
        entries.ops = None
    except (msgspec.DecodeError, UnicodeDecodeError):
        _raise_invalid(path, entries)
    entries.doc = None
    tables = _typed_tables(entries, path, rank, sink, C) if entries.ops is not None else None
    if tables is None:
        tables = _per_value_batch(entries, path, rank, sink, C)
    return tables


def _per_value_batch(entries: _Entries, path, rank, sink: _Problems, C):
    import orjson

    texts = entries.texts.to_pylist()
    try:
        infos = list(map(orjson.loads, texts))
    except orjson.JSONDecodeError:
        _raise_invalid(path, entries)
    keys = entries.keys if isinstance(entries.keys, list) else entries.keys.to_pylist()
    steps = entries.steps if isinstance(entries.steps, list) else entries.steps.to_pylist()
    kinds = entries.kinds if isinstance(entries.kinds, list) else entries.kinds.to_pylist()
    bad: list = []
    at = [0]
    offsets = entries.offsets or [0] * len(texts)

    def numbered():
        for j, entry in enumerate(zip(steps, kinds, keys, infos)):
            at[0] = j
            yield entry

    class Said:  # the per-value rules' warnings, placed in file order by the op's offset
        @staticmethod
        def warn(_path, message, rank=None):
            sink.warnings.append((offsets[at[0]], message))

    try:
        tables = C._entry_tables(numbered(), path, rank, Said, typed=False, bad_sink=bad,
                                 opinfo=texts)
    except ValueError as e:  # a time beyond int64 ns
        raise InputError(path, str(e)) from None
    sink.bad.extend(bad)
    return tables


def _shape(sch, spos, before, qpos, o, c) -> dict | None:
    """What the ops [o, c) of a block hold, counted on the structural index: colons, object
    and list openings by depth (an op's object opens at depth 3), and quotes. With the
    decoded values these tell whether a lenient decoder read every value as it is
    (:func:`_duck_tables`)."""
    if not len(o):
        return None
    lo, hi = np.searchsorted(spos, o), np.searchsorted(spos, c)
    edge = np.zeros(len(sch) + 1, np.int32)
    np.add.at(edge, lo, 1)
    np.add.at(edge, hi, -1)
    inside = np.cumsum(edge[:-1]) > 0
    ch, dep = sch[inside], before[inside]
    top = 12

    def by_depth(mask):
        return np.bincount(np.minimum(dep[mask], top), minlength=top + 1)

    quotes = int((np.searchsorted(qpos, c) - np.searchsorted(qpos, o)).sum())
    return {"colons": by_depth(ch == 58), "objects": by_depth(ch == 123),
            "lists": by_depth(ch == 91), "quotes": quotes}


def _has_null(raw: bytes) -> bool:
    """``b"null" in raw``, the way communication.has_true_or_false looks for true / false."""
    a = np.frombuffer(raw, np.uint8)
    n = len(a)
    u = np.flatnonzero(a[1:n - 2] == ord("u")) + 1  # n [u] l l
    return bool(((a[u - 1] == ord("n")) & (a[u + 1] == ord("l")) & (a[u + 2] == ord("l"))).any())


_DUCK: list = []
#: the fields comm_fast asks DuckDB for, in communication._TIME_TYPE / _BANDWIDTH_TYPE order
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


def _duck_tables(entries: _Entries, path, rank, sink: _Problems, C):
    """The tables of a streamed batch decoded by DuckDB's JSON reader (C++, all cores),
    ~4x faster than msgspec and Python. DuckDB reads leniently (a text "3" as 3, true as 1, a
    list as null, the first of two equal keys), so it is used only when the block shows none of
    that: no true / false / null, no text value (two quotes per key), lists only as the
    [count, duration] pairs, and as many keys and objects at each depth as DuckDB returned
    values (an unknown field, a repeated key or an object where a number belongs differs).
    None when not used."""
    shape = getattr(entries, "shape", None)
    if shape is None or entries.doc is None:
        return None
    colons, objects, lists = shape["colons"], shape["objects"], shape["lists"]
    if shape["quotes"] != 2 * int(colons.sum()) or lists.sum() != lists[7] \
            or objects[7:].any() or colons[8:].any():
        return None
    from ascendprof.readers.communication import has_true_or_false

    if has_true_or_false(entries.doc) or _has_null(entries.doc):
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
            if len(v) and (~np.isfinite(v[~np.isnan(v)]).any() or
                           (np.abs(v[~np.isnan(v)]) >= _EXACT).any()):
                return None
    # ops with a required time below 0 are left out and counted (nulls are absent keys here)
    bad_field = np.full(n, -1, np.int64)
    for j in range(3, -1, -1):  # the first required field in order wins
        neg = np.nan_to_num(ti_fields[j].to_numpy(zero_copy_only=False), nan=0.0) < 0
        bad_field[neg] = j
    keep = None
    if (bad_field >= 0).any():
        first = int(np.flatnonzero(bad_field >= 0)[0])
        key = _REQUIRED[int(bad_field[first])][0]
        op_key, step_key = entries.keys[first].as_py(), entries.steps[first].as_py()
        name, at, group = op_key.rpartition("@")
        v = ti_fields[int(bad_field[first])][first].as_py()
        sink.bad.append((int((bad_field >= 0).sum()), step_key, key, v,
                         name if at else op_key, group if at else ""))
        keep = np.flatnonzero(bad_field < 0).tolist()
        mask = pa.array(bad_field < 0)
        ti_fields = [f.filter(mask) for f in ti_fields]
        bw = bw.filter(mask)
    try:
        bw = bw.cast(C._BANDWIDTH_TYPE)
    except (pa.ArrowException, ValueError):
        return None
    cols = C.typed_columns_of(ti_fields[:7], bw)
    if cols is None:
        return None
    ops, bws, b_ent, sds, d_ent = cols
    ops["start_ns"] = C._abs_us_column(ti_fields[7].to_pylist())
    texts = entries.texts if keep is None else entries.texts.take(pa.array(keep, pa.int64()))
    ops["opinfo_json"] = texts.cast(pa.string())
    common = _common(entries, keep, rank, path, C)
    return {S.COMM_OPS: C._assemble(S.COMM_OPS, common, None, ops),
            S.COMM_BANDWIDTH: C._assemble(S.COMM_BANDWIDTH, common, b_ent, bws),
            S.COMM_SIZE_DIST: C._assemble(S.COMM_SIZE_DIST, common, d_ent, sds)}


def _raise_invalid(path, entries: _Entries):
    import orjson

    for text, off in zip(entries.texts.to_pylist(), entries.offsets or ()):
        try:
            orjson.loads(text)
        except orjson.JSONDecodeError as e:
            raise InputError(path, f"invalid JSON ({e.msg})", where=off + e.pos) from None
    raise InputError(path, "invalid JSON", where=(entries.offsets or [0])[0])


def _typed_tables(entries: _Entries, path, rank, sink: _Problems, C):
    """The tables of a batch of decoded ops (see module doc); None when a value needs the
    per-value rules."""
    ops = entries.ops
    times = [o.time if o.time is not None else _EMPTY_TIME for o in ops]
    keep = _drop_bad_times(times, entries, sink)
    if keep is not None:
        ops = [ops[i] for i in keep]
        times = [times[i] for i in keep]
    op_cols = {}
    for col, attr in _TIMES:
        op_cols[col] = _ns(_column(times, attr))
    for col in ("wait_ratio", "sync_ratio"):
        op_cols[col] = _f64(_column(times, col))
    if any(v is None for v in op_cols.values()):
        return None
    starts = _column(times, "start")
    if _UNSET in starts:
        starts = [None if v is _UNSET else v for v in starts]
    op_cols["start_ns"] = C._abs_us_column(starts)
    texts = entries.texts if keep is None else entries.texts.take(pa.array(keep, pa.int64()))
    op_cols["opinfo_json"] = texts.cast(pa.string())

    # Communication Bandwidth Info: one row per (op, transport), Size Distribution per pair
    bws = [o.bandwidth or _NO_BW for o in ops]
    b_ent = np.repeat(np.arange(len(bws), dtype=np.int32), list(map(len, bws)))
    b_transport = list(chain.from_iterable(bws))
    b_info = list(chain.from_iterable(map(dict.values, bws)))
    bw_cols = {"transport": pa.array(b_transport, pa.string()),
               "transit_ns": _ns(_column(b_info, "transit"))}
    for col, attr in (("size_mb", "size"), ("bandwidth_gbps", "bandwidth"),
                      ("large_packet_ratio", "large_packet_ratio")):
        bw_cols[col] = _f64(_column(b_info, attr))
    if any(v is None for v in bw_cols.values()):
        return None
    dists = _column(b_info, "dist")
    d_ent, d_transport, d_key, d_count, d_dur = [], [], [], [], []
    for j in [j for j, d in enumerate(dists) if d]:  # most transports have none
        dist = dists[j]
        pairs = list(dist.values())
        size_keys = list(dist)
        if not all(len(pr) >= 2 for pr in pairs):  # a pair needs [count, duration, ...]
            keep_p = [i for i, pr in enumerate(pairs) if len(pr) >= 2]
            size_keys, pairs = [size_keys[i] for i in keep_p], [pairs[i] for i in keep_p]
        n = len(pairs)
        d_key.extend(size_keys)
        d_ent.extend([int(b_ent[j])] * n)
        d_transport.extend([b_transport[j]] * n)
        d_count.extend(pr[0] for pr in pairs)
        d_dur.extend(pr[1] for pr in pairs)
    counts, dur_ns = _floats(d_count), _ns(d_dur)
    if counts is None or dur_ns is None:
        return None
    missing = np.isnan(counts)
    counts[missing] = 0
    sd_cols = {"transport": pa.array(d_transport, pa.string()),
               "packet_size_mb": pa.array(d_key, pa.string()),
               "count": pa.array(np.trunc(counts).astype(np.int64), pa.int64(),
                                 mask=missing if missing.any() else None),
               "dur_ns": dur_ns}
    common = _common(entries, keep, rank, path, C)
    return {S.COMM_OPS: C._assemble(S.COMM_OPS, common, None, op_cols),
            S.COMM_BANDWIDTH: C._assemble(S.COMM_BANDWIDTH, common, pa.array(b_ent), bw_cols),
            S.COMM_SIZE_DIST: C._assemble(S.COMM_SIZE_DIST, common,
                                          pa.array(d_ent, pa.int32()), sd_cols)}


def _common(entries: _Entries, keep, rank, path, C) -> dict:
    """The entry columns of COMM_* (rank, step, step_key, kind, op_name, group)."""
    steps, kinds, keys = entries.steps, entries.kinds, entries.keys
    if isinstance(steps, list):
        steps, kinds = pa.array(steps, pa.string()), pa.array(kinds, pa.string())
    keys = keys if isinstance(keys, pa.Array) else pa.array(keys, pa.string())
    if keep is not None:
        index = pa.array(keep, pa.int64())
        steps, kinds, keys = steps.take(index), kinds.take(index), keys.take(index)
    names, groups = _split_keys(keys)
    uniq = pc.unique(steps)
    numbers = pa.array([C.step_number(k) for k in uniq.to_pylist()], pa.int32())
    step = numbers.take(pc.index_in(steps, uniq))
    try:
        rank_value = pa.array([rank], pa.int32())[0]
    except (pa.ArrowException, OverflowError, TypeError, ValueError):
        S.from_lists(S.COMM_OPS, {"rank": [rank]}, path)  # raises the InputError
        raise
    n = len(steps)
    return {"rank": pa.repeat(rank_value, n) if n else pa.array([], pa.int32()),
            "step": step, "step_key": steps, "kind": kinds, "op_name": names, "group": groups}


def _drop_bad_times(times: list, entries: _Entries, sink: _Problems) -> list | None:
    """Indices of the ops to keep when some required time is present but null or negative
    (the op is left out and counted in ``sink``, as the per-value rule does); None when all
    are kept."""
    bad: dict[int, str] = {}
    for key, attr in _REQUIRED:
        values = _column(times, attr)
        present = [v for v in values if v is not _UNSET] if _UNSET in values else values
        if None not in present and (not present or min(present) >= 0):
            continue
        for i, v in enumerate(values):
            if i not in bad and v is not _UNSET and (v is None or v < 0):
                bad[i] = key
    if not bad:
        return None
    first = min(bad)
    key = bad[first]
    op_key = entries.keys[first] if isinstance(entries.keys, list) \
        else entries.keys[first].as_py()
    step_key = entries.steps[first] if isinstance(entries.steps, list) \
        else entries.steps[first].as_py()
    name, at, group = op_key.rpartition("@")
    v = getattr(times[first], dict(_REQUIRED)[key])
    sink.bad.append((len(bad), step_key, key, v, name if at else op_key, group if at else ""))
    return [i for i in range(len(times)) if i not in bad]


# ------------------------------------------------------------------------------ streaming

def _streamed(path, rank, problems, block_bytes, C):
    """iter_tables for a large file (see :class:`_Scanner`); a file of a shape the scanner
    leaves to the per-value reader is read whole by it, which is only possible before any
    batch was handed out."""
    from array import array

    sink = _Problems()
    scanner = _Scanner(path, block_bytes)
    seen = array("q")
    yielded = False
    try:
        for entries in _ahead(scanner.blocks()):
            tables = _decode_batch(entries, path, rank, sink, C)
            _remember(seen, tables[S.COMM_OPS])
            yielded = True
            yield tables
        if _repeated(seen):  # JSON keeps the last value of a key, at its first place
            raise _Irregular
    except _Irregular:
        if yielded:
            raise Reread(path) from None
        yield C.read_communication_per_value(path, rank, problems)
        return
    sink.warnings.extend(scanner.warnings)
    if not yielded:
        yield _empty_tables(rank, path, C)
    sink.flush(problems, path, rank, C)


def _ahead(blocks, depth: int = 2):
    """``blocks`` iterated in a thread, up to ``depth`` ahead: the scan of the next block
    (numpy, mostly outside the GIL) runs while this one is decoded (DuckDB, outside it)."""
    import queue
    import threading

    q: queue.Queue = queue.Queue(maxsize=depth)
    stop = threading.Event()
    done = object()

    def run():
        try:
            for b in blocks:
                while not stop.is_set():
                    try:
                        q.put(("ok", b), timeout=0.1)
                        break
                    except queue.Full:
                        continue
                if stop.is_set():
                    return
            q.put(("ok", done))
        except BaseException as e:  # noqa: BLE001 - handed to the consumer
            q.put(("err", e))

    t = threading.Thread(target=run, name="ascendprof-comm-scan", daemon=True)
    t.start()
    try:
        while True:
            kind, item = q.get()
            if kind == "err":
                raise item
            if item is done:
                return
            yield item
    finally:
        stop.set()
        while t.is_alive():  # unblock a producer waiting on a full queue
            try:
                q.get_nowait()
            except queue.Empty:
                pass
            t.join(timeout=0.05)


def _empty_tables(rank, path, C):
    e = _Entries([], [], [], pa.array([], pa.binary()), ops=[])
    return _typed_tables(e, path, rank, _Problems(), C)


def _remember(seen: "array", ops: pa.Table):
    """Keep a hash of every op key (step key, kind, op key) of the batch: 8 bytes an op, so
    10^6 ops cost 8 MB (:func:`_repeated` checks them at the end)."""
    if not ops.num_rows:
        return
    joined = pc.binary_join_element_wise(ops["step_key"], ops["kind"], ops["op_name"],
                                         ops["group"], "\x00").to_pylist()
    seen.extend(map(hash, joined))


def _repeated(seen: "array") -> bool:
    """Whether two ops had the same key (a hash collision only costs the per-value read)."""
    h = np.frombuffer(seen, np.int64) if len(seen) else np.zeros(0, np.int64)
    return len(np.unique(h)) != len(h)


#: bytes.translate table: 1 for the bytes that can be structural (quotes, backslashes,
#: brackets, braces, colons), 0 for the rest; translate and a bool nonzero are ~1.5x faster
#: than numpy compares
_STRUCTURAL = bytes(1 if c in b'{}[]:"\\' else 0 for c in range(256))


def _structural(buf: bytes) -> np.ndarray:
    """Positions of the bytes of ``buf`` that can be structural."""
    return np.flatnonzero(np.frombuffer(buf.translate(_STRUCTURAL), np.bool_))


def _binary(pieces: list, typ: pa.DataType) -> pa.Array:
    """A binary (or, for valid UTF-8, string) array of the byte strings ``pieces``, built from
    one joined buffer and their offsets."""
    offsets = np.zeros(len(pieces) + 1, np.int64)
    np.cumsum(np.fromiter(map(len, pieces), np.int64, len(pieces)), out=offsets[1:])
    return pa.Array.from_buffers(typ, len(pieces), [None, pa.py_buffer(offsets.astype(np.int32)),
                                                    pa.py_buffer(b"".join(pieces))])


class _Scanner:
    """Op entries of a large communication.json, block by block (see module doc).

    Between blocks the state is: the unscanned rest (from the end of the last complete op
    object), the nesting depth there (3: inside a kind object) and the step key and kind it is
    under. Raises InputError for invalid JSON, _Irregular for a shape it leaves to the
    per-value reader (the flat CANN layout, a list above the op level, a step or kind key
    repeated)."""

    def __init__(self, path: Path, block_bytes: int = BLOCK_BYTES):
        self.path = Path(path)
        self.block_bytes = block_bytes
        self.warnings: list[tuple[int, str]] = []  # (offset in the file, warning)
        self.steps_seen: set = set()
        self.kinds_seen: set = set()
        self.step = self.kind = None
        self.depth = 0

    def blocks(self):
        """Yield an :class:`_Entries` (with ``doc``) per block that holds ops."""
        from ascendprof.sysio.textio import open_regular

        path = self.path
        with open_regular(path) as f:  # a regular file only (never a FIFO or device)
            buf = f.read(self.block_bytes)
            offset = 0
            if buf.startswith(b"\xef\xbb\xbf"):
                buf, offset = buf[3:], 3
            lead = len(buf) - len(buf.lstrip())
            if lead == len(buf):
                raise _Irregular  # all white space: the per-value reader says so
            if buf[lead:lead + 1] != b"{":
                raise _Irregular  # not an object
            eof = False
            while True:
                if not eof and len(buf) < self.block_bytes:
                    more = f.read(self.block_bytes)
                    eof = not more
                    buf += more
                    continue
                entries, cut = self._scan(buf, offset, eof)
                if entries is not None and len(entries):
                    yield entries
                if eof:
                    return
                buf, offset = buf[cut:], offset + cut
                more = f.read(self.block_bytes)
                eof = not more
                buf += more

    def _scan(self, buf: bytes, offset: int, eof: bool):
        """Entries of the complete ops in ``buf`` (at ``offset`` in the file) and where to cut
        it (after the last of them); at ``eof`` the buffer must end the document."""
        path = self.path
        a = np.frombuffer(buf, np.uint8)
        pos = _structural(buf)
        ch = a[pos]
        isq = ch == 34
        escapes = bool((ch == 92).any())
        if escapes:  # a quote after an odd run of backslashes is inside its string
            qi = np.flatnonzero(isq)
            for k in qi[a[np.maximum(pos[qi] - 1, 0)] == 92].tolist():
                p, n = int(pos[k]), 0
                while p - 1 - n >= 0 and buf[p - 1 - n] == 92:
                    n += 1
                if n % 2:
                    isq[k] = False
        inside = (np.cumsum(isq, dtype=np.int32) & 1).astype(np.bool_)  # after odd quotes
        outside = ~isq & ~inside & (ch != 92)
        qpos = pos[isq]
        spos = pos[outside]
        sch = ch[outside]
        del pos, ch, isq, inside, outside
        delta = ((sch == 123) | (sch == 91)).astype(np.int8) - \
            ((sch == 125) | (sch == 93)).astype(np.int8)
        after = self.depth + np.cumsum(delta, dtype=np.int32)
        before = after - delta
        # an op object opens at depth 3 and closes back to it; cut after the last close
        closes = np.flatnonzero((sch == 125) & (after == 3))
        if eof:
            cut, n_tok = len(buf), len(sch)
        elif len(closes):
            n_tok = int(closes[-1]) + 1
            cut = int(spos[n_tok - 1]) + 1
        else:
            return None, 0  # no op ends in this buffer: the caller reads on (blocks())
        sch, spos, after, before = sch[:n_tok], spos[:n_tok], after[:n_tok], before[:n_tok]
        if len(before) and (int(before.min()) < 0 or
                            ((sch == 91) & (before <= 2)).any()):
            raise _Irregular  # a list above the op level, or invalid nesting
        colon = np.flatnonzero((sch == 58) & (before <= 3))
        cpos = spos[colon]
        k = np.searchsorted(qpos, cpos)
        if len(k) and int(k.min()) < 2:
            raise _Irregular
        kstart, kend = qpos[k - 2] + 1, qpos[k - 1]
        nxt = np.minimum(colon + 1, max(len(sch) - 1, 0))
        next_quote = np.where(k < len(qpos), qpos[np.minimum(k, max(len(qpos) - 1, 0))],
                              len(buf))
        is_obj = (colon + 1 < len(sch)) & (sch[nxt] == 123) & (next_quote > spos[nxt])
        level = before[colon]
        upper = np.flatnonzero(level < 3)
        # the levels above the ops (few keys): the step key and kind every op is under
        ctx_step, ctx_kind = [self.step], [self.kind]
        said: list[tuple[int, str]] = []  # (colon, warning): said in file order
        for j in upper.tolist():
            key = _key(buf, int(kstart[j]), int(kend[j]), path, offset)
            if level[j] == 1:
                if "@" in key or _is_total(key) or key in self.steps_seen:
                    raise _Irregular  # the flat CANN layout, or a step key repeated
                self.steps_seen.add(key)
                self.step, self.kind = key, None
                if not is_obj[j]:
                    said.append((j, f"step entry {key!r} is not an object; skipped"))
            else:
                if (self.step, key) in self.kinds_seen:
                    raise _Irregular
                self.kinds_seen.add((self.step, key))
                self.kind = key
                if not is_obj[j]:
                    said.append((j, f"{self.step}/{key} is not an object; skipped"))
            ctx_step.append(self.step)
            ctx_kind.append(self.kind)
        ops = np.flatnonzero(level == 3)
        ctx = np.searchsorted(upper, ops)  # upper colons before each op: its context
        op_obj = is_obj[ops]
        for j in ops[~op_obj].tolist():  # an op that is not an object: skipped, said so
            key = _key(buf, int(kstart[j]), int(kend[j]), path, offset)
            if not _is_total(key):
                c = int(np.searchsorted(upper, j))
                said.append((j, f"op {key!r} in {ctx_step[c]} is not an object; skipped"))
        self.warnings.extend((offset + int(cpos[j]), w) for j, w in said)
        ops, ctx = ops[op_obj], ctx[op_obj]
        o = spos[nxt[ops]]
        which = np.searchsorted(closes, nxt[ops])
        if len(which) and int(which[-1]) >= len(closes):  # the file ends inside an op
            raise InputError(path, "invalid JSON (unexpected end of data)",
                             where=offset + len(buf))
        c = spos[closes[which]] + 1 if len(ops) else o
        ks, ke = kstart[ops], kend[ops]
        self._check_skeleton(buf, o, c, cut, offset, eof)
        if not buf[:cut].isascii():
            try:
                buf[:cut].decode("utf-8")
            except UnicodeDecodeError as e:
                raise InputError(path, "invalid JSON (str is not valid UTF-8)",
                                 where=offset + e.start) from None
        # "Total ..." entries are the profiler's sums, not ops
        head = np.zeros((len(ks), 5), np.uint8)
        for i in range(5):
            at = np.minimum(ks + i, len(a) - 1)
            head[:, i] = np.where(ks + i < ke, a[at] | 0x20, 0)
        real = ~(head == np.frombuffer(b"total", np.uint8)).all(axis=1)
        ks, ke, o, c, ctx = ks[real], ke[real], o[real], c[real], ctx[real]
        self.depth = int(after[-1]) if len(after) else self.depth
        if not len(o):
            return _Entries([], [], [], pa.array([], pa.binary())), cut
        shape = _shape(sch, spos, before, qpos, o, c)
        view = memoryview(buf)
        if escapes and any(92 in buf[s:e] for s, e in zip(ks.tolist(), ke.tolist())):
            keys = pa.array([_key(buf, s, e, path, offset) for s, e in
                             zip(ks.tolist(), ke.tolist())], pa.string())
        else:
            keys = _binary([view[s:e] for s, e in zip(ks.tolist(), ke.tolist())], pa.string())
        pieces = [view[s:e] for s, e in zip(o.tolist(), c.tolist())]
        texts = _binary(pieces, pa.binary())
        doc = b"".join((b"[", b",".join(pieces), b"]"))
        del pieces, view
        steps = pa.array(ctx_step, pa.string()).take(pa.array(ctx))
        kinds = pa.array(ctx_kind, pa.string()).take(pa.array(ctx))
        entries = _Entries(steps, kinds, keys, texts, doc=doc, offsets=(o + offset).tolist())
        entries.shape = shape
        return entries, cut

    def _check_skeleton(self, buf: bytes, o, c, cut: int, offset: int, eof: bool):
        """The levels above the ops of ``buf[:cut]``, each op object replaced by 0, must be
        JSON: wrapped in the brackets and keys open at its start (after an op, at depth 3,
        unless it is the file's start) and closed at its end (after an op, unless it is the
        file's end)."""
        import orjson

        pieces = []
        last = 0
        for s, e in zip(o.tolist(), c.tolist()):
            pieces.append(buf[last:s])
            last = e
        pieces.append(buf[last:cut])
        text = b"0".join(pieces)
        head = b'{"s":{"k":{"o":0' if offset and self.depth == 3 else b""
        tail = b"" if eof else b"}}}"
        try:
            orjson.loads(head + text + tail)
        except orjson.JSONDecodeError as e:
            at = offset + min(cut, max(0, e.pos - len(head)))
            raise InputError(self.path, f"invalid JSON ({e.msg})", where=at) from None


def _key(buf: bytes, start: int, end: int, path, offset: int) -> str:
    """The JSON string buf[start:end] (without its quotes) decoded."""
    raw = buf[start:end]
    if 92 in raw:  # an escape: JSON decodes it
        import orjson

        try:
            return orjson.loads(b'"' + raw + b'"')
        except orjson.JSONDecodeError as e:
            raise InputError(path, f"invalid JSON ({e.msg})", where=offset + start) from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise InputError(path, "invalid JSON (str is not valid UTF-8)",
                         where=offset + start + e.start) from None
