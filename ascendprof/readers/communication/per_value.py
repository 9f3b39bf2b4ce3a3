"""communication.json read the tolerant way: the whole file parsed by orjson, the columns by
Arrow's converter or value by value. The definition the fast reader
(:mod:`ascendprof.readers.communication.fast`) is tested against, and what it hands every file
or batch of another shape than it handles."""

from __future__ import annotations

import json
import math
import re
import sys
from itertools import chain, repeat
from operator import methodcaller
from pathlib import Path

import orjson
import pyarrow as pa

from ascendprof.model import schemas as S
from ascendprof.model.errors import InputError
from ascendprof.model.problems import Problems
from ascendprof.model.units import ms_list_to_ns
from ascendprof.readers.communication.columns import (BANDWIDTH_TYPE, BW_FLOATS, BW_MS, F64,
                                                      OP_MS, OP_RATIOS, TIME_TYPE,
                                                      abs_us_column, comm_tables,
                                                      entry_columns, has_true_or_false,
                                                      typed_columns_of)
from ascendprof.readers.communication.layout import (BANDWIDTH_INFO, REQUIRED_TIMES, SIZE_DIST,
                                                     TIME_INFO, iter_ops, report_bad_times)
from ascendprof.sysio.textio import parse_json, read_payload

#: types of JSON numbers as orjson returns them (a bool is not a number here)
_NUMBER = frozenset((int, float))
_NUMBER_OR_BOOL = frozenset((int, float, bool))
_NUMBER_OR_NONE = frozenset((int, float, type(None)))
_DICTS = frozenset((dict,))


def read_communication_per_value(path: Path, rank: int, problems: Problems | None = None,
                                 raw: bytes | None = None) -> dict[str, pa.Table]:
    """The tables of :func:`ascendprof.readers.communication.read_communication`, the file
    parsed whole (``raw``: its bytes when already read). Raises InputError as it does."""
    path = Path(path)
    raw = read_payload(path, as_json=True) if raw is None else raw
    data = _parse_allowing_nan(path, raw, rank, problems)
    # JSON true/false are the one value Arrow's converter takes as a number where the per-value
    # rule (_field) does not: a file with any goes the per-value way
    typed = not has_true_or_false(raw)
    del raw
    try:
        return tables_from_json(data, path, rank, problems, typed)
    except ValueError as e:  # a time beyond int64 ns (units raise only ValueError)
        raise InputError(path, str(e)) from None


#: a NaN / Infinity / -Infinity value literal (not JSON; Python's json module writes them)
NAN_LITERAL = rb"[:\[,]\s*-?(?:NaN|Infinity)\s*[,}\]]"
_NAN_LITERAL = re.compile(NAN_LITERAL)


def _parse_allowing_nan(path: Path, raw: bytes, rank: int, problems: Problems | None):
    """``raw`` parsed as JSON; a file that is valid but for ``NaN`` / ``Infinity`` literals
    (which Python's json module writes for a float that is not a number) is parsed with them
    as floats, so only the ops holding them are left out (by the checks of each value), not
    the whole file. Raises InputError as :func:`parse_json` does otherwise."""
    try:
        return parse_json(path, raw)
    except InputError:
        if not _NAN_LITERAL.search(raw):
            raise
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError):
        return parse_json(path, raw)  # the error of the JSON that is broken anyway
    if problems is not None:
        problems.warn(path, "NaN or Infinity literal(s), not valid JSON: read as numbers that "
                            "are not a number; the values holding them are left out", rank=rank)
    return data


def tables_from_json(data, path: Path, rank: int, problems: Problems | None,
                     typed: bool = False) -> dict[str, pa.Table]:
    """The three COMM_* tables of parsed communication.json ``data`` (either layout). ``typed``
    (only for a file without JSON true/false): the numeric columns may come from Arrow's
    converter (:func:`_typed_columns`), which falls back to the per-value rules
    (:func:`_per_value_columns`) by itself; False takes those rules directly. Raises
    InputError when ``data`` is not an object or a value does not fit its column, ValueError
    for a time beyond int64 ns."""
    return entry_tables(iter_ops(data, path, problems, rank), path, rank, problems, typed)


#: the deepest nesting orjson parses (deeper is its "depth limit exceeded")
_DEEPEST = 1024


def _json_column(objects: list) -> pa.Array:
    """Compact JSON text of every parsed object, as a string column (orjson gives back what it
    parsed). Built as binary and cast: pyarrow converts a list of Python bytes to string ~50x
    slower than to binary, and the cast still checks the UTF-8."""
    try:
        texts = list(map(orjson.dumps, objects))
    except TypeError:  # nested deeper than orjson writes (255 levels; it reads 1024)
        texts = list(map(_dumps_deep, objects))
    return pa.array(texts, pa.binary()).cast(pa.string())


def _dumps_deep(obj) -> bytes:
    """``obj`` as compact JSON text, by Python's json module when orjson's depth limit (255)
    is too low for it. orjson parsed it, so it is at most 1024 levels deep: the recursion
    limit is raised for the call to let json write every such value."""
    try:
        return orjson.dumps(obj)
    except TypeError:
        pass
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, _DEEPEST + 1000))
    try:
        return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()
    finally:
        sys.setrecursionlimit(limit)


def _field(objects: list[dict], key: str) -> list:
    """``key`` of every object when it is a JSON number (a bool is not), else None: the column
    of one numeric field."""
    values = list(map(methodcaller("get", key), objects))  # loops in C
    if _NUMBER_OR_NONE.issuperset(map(type, values)):  # the usual case: all numbers or null
        return values
    number = _NUMBER
    return [v if type(v) in number else None for v in values]


def _array(table: str, column: str, values: list, typ: pa.DataType, path: Path) -> pa.Array:
    try:
        return pa.array(values, typ)
    except (pa.ArrowException, OverflowError, TypeError, ValueError):
        S.from_lists(table, {column: values}, path)  # raises the InputError naming the value
        raise


def entry_tables(entries, path: Path, rank: int, problems, typed: bool = False,
                 bad_sink: list | None = None, opinfo: list | None = None
                 ) -> dict[str, pa.Table]:
    """:func:`tables_from_json` of ``entries`` = (step key, kind, op key, parsed OPINFO) in
    file order. ``bad_sink``: ops left out for their times are appended there as (count, step
    key, field, value, name, group) instead of recorded in ``problems``; ``opinfo``: the OPINFO
    texts of the entries as the file has them (else each parsed one is dumped)."""
    e_step_key, e_kind, e_name, e_group = [], [], [], []
    o_info, o_raw, o_bw = [], [], []  # per entry (= COMM_OPS row): time info, OPINFO, bandwidth
    for j, (step_key, kind, op_key, info) in enumerate(entries):
        if type(info) is not dict:  # orjson gives plain dicts for objects
            if problems is not None:
                problems.warn(path, f"op {op_key!r} in {step_key} is not an object; skipped",
                              rank=rank)
            continue
        t = info.get(TIME_INFO) or {}
        if type(t) is not dict:  # every row of the other tables then has its op row
            if problems is not None:
                problems.warn(path, f"op {op_key!r} in {step_key}: {TIME_INFO!r} is not an "
                                    f"object; op skipped", rank=rank)
            continue
        name, at, group = op_key.rpartition("@")
        e_step_key.append(step_key)
        e_kind.append(kind)
        e_name.append(name if at else op_key)
        e_group.append(group if at else "")
        o_info.append(t)
        o_raw.append(info if opinfo is None else opinfo[j])
        o_bw.append(info.get(BANDWIDTH_INFO))
    bad = _bad_times(o_info)
    if bad:  # left out: an op whose time is not a number cannot be analysed
        i, key, v = bad[0]
        if bad_sink is not None:
            bad_sink.append((len(bad), e_step_key[i], key, v, e_name[i], e_group[i]))
        elif problems is not None:
            report_bad_times(problems, path, rank, len(bad), e_step_key[i], key, v, e_name[i],
                             e_group[i])
        drop = {i for i, _, _ in bad}
        keep = [i for i in range(len(o_info)) if i not in drop]
        e_step_key, e_kind, e_name, e_group, o_info, o_raw, o_bw = (
            [col[i] for i in keep]
            for col in (e_step_key, e_kind, e_name, e_group, o_info, o_raw, o_bw))
    if problems is not None:
        _report_non_numeric_bandwidth(problems, path, rank, o_bw, e_step_key, e_name, e_group)
    common = entry_columns(rank, e_step_key, e_kind, e_name, e_group, path)
    cols = _typed_columns(o_info, o_bw) if typed else None
    ops, bws, b_ent, sds, d_ent = cols or _per_value_columns(o_info, o_bw, path)
    ops["start_ns"] = abs_us_column(_field(o_info, "Start Timestamp(us)"))
    # kept verbatim for cluster_communication.json (msprof-analyze copies it as is)
    ops["opinfo_json"] = (_json_column(o_raw) if opinfo is None else
                          pa.array([bytes(x) for x in o_raw], pa.binary()).cast(pa.string()))
    return comm_tables(common, ops, bws, b_ent, sds, d_ent)


#: Bandwidth Info fields that must be JSON numbers when present
_BW_FIELDS = ("Transit Size(MB)", "Transit Time(ms)", "Bandwidth(GB/s)")


def _report_non_numeric_bandwidth(problems: Problems, path: Path, rank: int, o_bw: list,
                                  steps: list, names: list, groups: list) -> None:
    """One problem per Bandwidth Info field that holds something other than a number (text,
    a list, a bool) in some transport entry: the value is left out (null), the op kept."""
    number = _NUMBER
    first: dict[str, tuple] = {}
    count: dict[str, int] = {}
    for ent, b in enumerate(o_bw):
        if type(b) is not dict:
            continue
        for transport, tinfo in b.items():
            if type(tinfo) is not dict:
                continue
            for key in _BW_FIELDS:
                v = tinfo.get(key)
                if v is None or type(v) in number:
                    continue
                count[key] = count.get(key, 0) + 1
                first.setdefault(key, (ent, transport, v))
    for key, (ent, transport, v) in first.items():
        problems.add(path, f"{count[key]} {key} value(s) that are not a number left out (e.g. "
                           f"{orjson.dumps(v).decode()[:40]} in {names[ent]}@{groups[ent]}, "
                           f"{transport})", rank=rank, where=f"{steps[ent]}, column {key}",
                     severity="skipped", affects=("communication", "verdicts"))


def _bad_times(o_info: list[dict]) -> list[tuple[int, str, object]]:
    """(entry index, field, value) of every op whose :data:`REQUIRED_TIMES` field is present
    but not a non-negative finite number (text, null, a list, a bool, NaN, negative), first
    field per op; an absent field is not flagged (older files lack some)."""
    bad: dict[int, tuple[int, str, object]] = {}
    for key in REQUIRED_TIMES:
        values = list(map(methodcaller("get", key, 0), o_info))
        if _NUMBER.issuperset(map(type, values)) and (not values or min(values) >= 0) \
                and all(map(math.isfinite, values)):
            continue  # the usual case: all numbers, checked in C
        for i, v in enumerate(values):
            if i not in bad and not (type(v) in _NUMBER and math.isfinite(v) and v >= 0):
                bad[i] = (i, key, v)
    return sorted(bad.values())


def _per_value_columns(o_info: list[dict], o_bw: list, path: Path):
    """The numeric columns of the COMM_* tables, value by value (the rules the typed way must
    match): a time or bandwidth field that is not a JSON number (bool included) is null; a
    ``Communication Bandwidth Info`` that is not an object, and a transport entry that is not
    one, add no rows; a ``Size Distribution`` entry needs a [count, dur, ...] pair, whose count
    is truncated to an integer. Returns (ops, bandwidth, entry of every bandwidth row,
    size distribution, entry of every size row), the column dicts keyed by schema column."""
    b_ent, b_transport, b_info = [], [], []
    d_ent, d_transport, d_key, d_count, d_dur = [], [], [], [], []
    number_or_bool = _NUMBER_OR_BOOL
    only_dicts = _DICTS
    for ent, b in enumerate(o_bw):
        b = b or {}
        if type(b) is not dict:
            continue
        if only_dicts.issuperset(map(type, b.values())):  # the usual case: extend in C
            b_ent.extend(repeat(ent, len(b)))
            b_transport.extend(b)
            b_info.extend(b.values())
            continue
        for transport, tinfo in b.items():
            if type(tinfo) is dict:
                b_ent.append(ent)
                b_transport.append(transport)
                b_info.append(tinfo)
    # 'Size Distribution' is empty for most transports: visit only the non-empty ones
    for j, dist in enumerate(map(methodcaller("get", SIZE_DIST), b_info)):
        if not dist or type(dist) is not dict:
            continue
        ent, transport = b_ent[j], b_transport[j]
        for size_key, pair in dist.items():
            if not (isinstance(pair, (list, tuple)) and len(pair) >= 2):
                continue
            count, dur = pair[0], pair[1]
            d_ent.append(ent)
            d_transport.append(transport)
            d_key.append(str(size_key))
            # a NaN / Infinity count (a literal _parse_allowing_nan let in) is left out
            d_count.append(int(count) if type(count) in number_or_bool
                           and math.isfinite(count) else None)
            d_dur.append(float(dur) if type(dur) in number_or_bool else None)
    ops = {col: ms_list_to_ns(_field(o_info, key)) for col, key in OP_MS}
    for col, key in OP_RATIOS:
        ops[col] = _array(S.COMM_OPS, col, _field(o_info, key), F64, path)
    bws = {"transport": pa.array(b_transport, pa.string()),
           BW_MS[0]: ms_list_to_ns(_field(b_info, BW_MS[1]))}
    for col, key in BW_FLOATS:
        bws[col] = _array(S.COMM_BANDWIDTH, col, _field(b_info, key), F64, path)
    sds = {"transport": pa.array(d_transport, pa.string()),
           "packet_size_mb": pa.array(d_key, pa.string()),
           "count": _array(S.COMM_SIZE_DIST, "count", d_count, pa.int64(), path),
           "dur_ns": ms_list_to_ns(d_dur)}
    return ops, bws, b_ent, sds, d_ent


def _typed_columns(o_info: list[dict], o_bw: list):
    """:func:`_per_value_columns` through Arrow's converter: the whole Time Info and Bandwidth
    Info of all ops in two calls instead of a Python step per value (the tables of a 1219-op
    bench rank: 9.4 ms instead of 14.2). Same results; None whenever a value is not what the
    converter maps exactly (a text or object where a number belongs, an int beyond int64, a
    count beyond 2^53 …) — the caller then takes the per-value way. Call only for files without
    JSON true/false."""
    # The converter takes an empty list or text as a transport entry with every field null,
    # where the per-value way skips it; other lists or texts there, or as Size Distribution,
    # fail or (a null pair) make an invalid array, checked below.
    try:
        entries = list(chain.from_iterable(map(dict.values, filter(None, o_bw))))
    except TypeError:  # a Bandwidth Info that is a list
        return None
    if [] in entries or "" in entries:
        return None
    try:
        times = pa.array(o_info, TIME_TYPE).flatten()
        bw = pa.array(o_bw, BANDWIDTH_TYPE)
        # pyarrow can build invalid nested arrays from odd input, and its kernels abort the
        # process on those: check before use
        bw.validate(full=True)
    except (pa.ArrowException, OverflowError, TypeError, ValueError):
        return None
    return typed_columns_of(times, bw)
