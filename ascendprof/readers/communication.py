"""communication.json and communication_matrix.json of one rank -> COMM_* tables.

Two layouts exist (spec §A.5, §A.6):

- torch_npu / MindSpore re-packaging: ``{step_key: {"collective" | "p2p": {"<op>@<group>": INFO,
  "Total Op Info": ...}}}`` with ``step_key`` = ``"step<N>"`` (or ``"step"`` without step info);
- raw CANN (``PROF_*/.../communication*.json``): the flat ``{"<op>@<group>": INFO, "Total HCCL
  Operators": ...}``. Its ops get step key ``"step"`` and are split into p2p / collective by the
  op-name rule of §A.5, exactly as msprof-analyze's msprof adapters do.

The profiler's own per-step totals (``Total Op Info``, ``Total HCCL Operators``, any key starting
with ``Total``) are not rows; the cluster builders recompute them. Times are converted from ms to
int ns (:func:`ascendprof.model.units.ms_to_ns`); sizes stay in MB (10^6 bytes) as written.
"""

from __future__ import annotations

import re
from itertools import chain, repeat
from operator import methodcaller
from pathlib import Path

import orjson
import pyarrow as pa

from ascendprof.model import schemas as S
from ascendprof.model.errors import InputError
from ascendprof.model.problems import Problems
from ascendprof.sysio.textio import parse_json, read_json, read_payload
from ascendprof.model.units import (ms_list_to_ns, ms_to_ns, ms_vector_to_ns, us_column_to_ns,
                              us_text_to_ns)

KINDS = ("collective", "p2p")
#: lower-cased op-name prefixes of point-to-point ops (spec §A.5)
P2P_PREFIXES = ("hcom_send", "hcom_receive", "hcom_batchsendrecv")
FLAT_STEP_KEY = "step"
_STEP_RE = re.compile(r"^step(\d+)$")

TIME_INFO = "Communication Time Info"
BANDWIDTH_INFO = "Communication Bandwidth Info"


def step_number(step_key: str) -> int | None:
    """``"step13"`` -> 13; ``"step"`` or anything else -> None."""
    m = _STEP_RE.match(str(step_key))
    return int(m.group(1)) if m else None


def op_kind(op_key: str) -> str:
    """'p2p' for send / receive / batchSendRecv ops, else 'collective' (spec §A.5)."""
    return "p2p" if op_key.lower().startswith(P2P_PREFIXES) else "collective"


def split_op_key(op_key: str) -> tuple[str, str]:
    """``"hcom_allReduce__1_1@123"`` -> (``"hcom_allReduce__1_1"``, ``"123"``); the group is what
    follows the last '@' (as msprof-analyze takes it), '' when there is none."""
    name, at, group = op_key.rpartition("@")
    return (name, group) if at else (op_key, "")


def _is_total(key: str) -> bool:
    return key.lower().startswith("total")


def _is_flat(data: dict) -> bool:
    """True for the raw CANN layout: top-level keys are op keys, not step keys."""
    return any("@" in k or _is_total(k) for k in data)


def _iter_ops(data: dict, path: Path, problems: Problems | None, rank: int):
    """Yield (step_key, kind, op_key, info) for every op of either layout, in file order."""
    if not isinstance(data, dict):
        raise InputError(path, "top level is not a JSON object")
    if _is_flat(data):
        for op_key, info in data.items():
            if not _is_total(op_key):
                yield FLAT_STEP_KEY, op_kind(op_key), op_key, info
        return
    for step_key, step in data.items():
        if not isinstance(step, dict):
            if problems is not None:
                problems.warn(path, f"step entry {step_key!r} is not an object; skipped", rank=rank)
            continue
        for kind, ops in step.items():
            if not isinstance(ops, dict):
                if problems is not None:
                    problems.warn(path, f"{step_key}/{kind} is not an object; skipped", rank=rank)
                continue
            for op_key, info in ops.items():
                if not _is_total(op_key):
                    yield step_key, kind, op_key, info


def _abs_us_to_ns(v) -> int | None:
    """Absolute us (a JSON float of ~16 digits) to ns through its shortest decimal text, so
    ``1764246877147674.5`` gives ``...674500`` and not the float product's ``...674624``."""
    return None if v is None else us_text_to_ns(repr(float(v)) if isinstance(v, float) else v)


def _num(d: dict, key: str):
    v = d.get(key)
    return v if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def read_communication(path: Path, rank: int, problems: Problems | None = None
                       ) -> dict[str, pa.Table]:
    """Parse one rank's communication.json (spec §A.5) into three tables.

    Returns ``{COMM_OPS, COMM_BANDWIDTH, COMM_SIZE_DIST}`` (schemas in :mod:`ascendprof.model.schemas`):

    - COMM_OPS: one row per op and step, from ``Communication Time Info``: ``start_ns`` from
      ``Start Timestamp(us)``, ``elapse/transit/wait/sync/idle_ns`` from the ``(ms)`` fields,
      ``wait_ratio`` / ``sync_ratio`` as written;
    - COMM_BANDWIDTH: one row per op and transport type (RDMA/HCCS/PCIE/SDMA/SIO …) of
      ``Communication Bandwidth Info``, zero rows included;
    - COMM_SIZE_DIST: one row per ``Size Distribution`` entry (packet size key kept as text).

    ``step_key`` keeps the JSON key (``"step13"``; ``"step"`` for the flat CANN layout, step
    null). ``rank`` fills the rank column. Raises :class:`InputError` when the file cannot be read,
    is not valid JSON (with byte offset) or is not a JSON object; an op or step entry of the wrong
    shape is skipped and recorded in ``problems`` when given.
    """
    from ascendprof.readers import comm_fast

    return comm_fast.read_tables(path, rank, problems)


def read_communication_per_value(path: Path, rank: int, problems: Problems | None = None,
                                 raw: bytes | None = None) -> dict[str, pa.Table]:
    """:func:`read_communication` the first way: the whole file parsed by orjson, the columns
    by Arrow's converter or value by value. The definition the fast reader
    (:mod:`ascendprof.readers.comm_fast`) is tested against, and what it hands every file of
    another shape than it handles (``raw``: the file's bytes when already read)."""
    path = Path(path)
    raw = read_payload(path) if raw is None else raw
    data = parse_json(path, raw)
    # JSON true/false are the one value Arrow's converter takes as a number where the per-value
    # rule (_num) does not: a file with any goes the per-value way
    typed = not has_true_or_false(raw)
    del raw
    try:
        return _communication_tables(data, path, rank, problems, typed)
    except ValueError as e:  # a time beyond int64 ns (units raise only ValueError)
        raise InputError(path, str(e)) from None


def has_true_or_false(raw: bytes) -> bool:
    """``b"true" in raw or b"false" in raw``, ~2x faster on profiler JSON. Python's substring
    search is slow on text full of the needles' letters ("Transit Time", "Size Distribution"):
    1.5 ms for a 1.2 MB file. Here numpy looks at the rarer middle letters only ('u' of true,
    'l' of false) and checks their neighbours."""
    import numpy as np

    a = np.frombuffer(raw, np.uint8)
    n = len(a)
    u = np.flatnonzero(a[2:n - 1] == ord("u")) + 2  # t r [u] e: 2 before, 1 after
    if ((a[u - 2] == ord("t")) & (a[u - 1] == ord("r")) & (a[u + 1] == ord("e"))).any():
        return True
    i = np.flatnonzero(a[2:n - 2] == ord("l")) + 2  # f a [l] s e: 2 before, 2 after
    return bool(((a[i - 2] == ord("f")) & (a[i - 1] == ord("a")) & (a[i + 1] == ord("s"))
                 & (a[i + 2] == ord("e"))).any())


#: types of JSON numbers as orjson returns them (a bool is not a number here)
_NUMBER = frozenset((int, float))
_NUMBER_OR_BOOL = frozenset((int, float, bool))
_NUMBER_OR_NONE = frozenset((int, float, type(None)))
_DICTS = frozenset((dict,))

SIZE_DIST = "Size Distribution"
#: (column, JSON key) of COMM_OPS from Communication Time Info: ms -> ns, then as written
_OP_MS = (("elapse_ns", "Elapse Time(ms)"), ("transit_ns", "Transit Time(ms)"),
          ("wait_ns", "Wait Time(ms)"), ("sync_ns", "Synchronization Time(ms)"),
          ("idle_ns", "Idle Time(ms)"))
_OP_RATIOS = (("wait_ratio", "Wait Time Ratio"), ("sync_ratio", "Synchronization Time Ratio"))
#: (column, JSON key) of COMM_BANDWIDTH: the one ms field, then the ones kept as written
_BW_MS = ("transit_ns", "Transit Time(ms)")
_BW_FLOATS = (("size_mb", "Transit Size(MB)"), ("bandwidth_gbps", "Bandwidth(GB/s)"),
              ("large_packet_ratio", "Large Packet Ratio"))
_F64 = pa.float64()
_TIME_TYPE = pa.struct([(k, _F64) for _, k in _OP_MS + _OP_RATIOS])
_BANDWIDTH_TYPE = pa.map_(pa.string(), pa.struct(
    [(k, _F64) for _, k in (_BW_MS,) + _BW_FLOATS]
    + [(SIZE_DIST, pa.map_(pa.string(), pa.list_(_F64)))]))
#: packet counts at or beyond this are not exact as float64: the per-value way keeps them exact
_EXACT_COUNT = 2.0 ** 53


def _json_column(objects: list) -> pa.Array:
    """Compact JSON text of every parsed object, as a string column (orjson gives back what it
    parsed). Built as binary and cast: pyarrow converts a list of Python bytes to string ~50x
    slower than to binary, and the cast still checks the UTF-8."""
    return pa.array(list(map(orjson.dumps, objects)), pa.binary()).cast(pa.string())


def _field(objects: list[dict], key: str) -> list:
    """:func:`_num` of ``key`` in every object: the column of one numeric field."""
    values = list(map(methodcaller("get", key), objects))  # loops in C
    if _NUMBER_OR_NONE.issuperset(map(type, values)):  # the usual case: all numbers or null
        return values
    number = _NUMBER
    return [v if type(v) in number else None for v in values]


def _abs_us_column(values: list) -> pa.Array:
    """:func:`_abs_us_to_ns` over a column, through the shortest decimal text of each value
    converted in one vectorised step; the per-value path when that fails (it raises the
    ValueError naming the value)."""
    texts = [None if v is None else repr(float(v)) if type(v) is float else str(v)
             for v in values]
    try:
        return us_column_to_ns(pa.array(texts, pa.string()))
    except ValueError:
        return pa.array([_abs_us_to_ns(v) for v in values], pa.int64())


def _array(table: str, column: str, values: list, typ: pa.DataType, path: Path) -> pa.Array:
    try:
        return pa.array(values, typ)
    except (pa.ArrowException, OverflowError, TypeError, ValueError):
        S.from_lists(table, {column: values}, path)  # raises the InputError naming the value
        raise


def _communication_tables(data, path: Path, rank: int, problems, typed: bool = False
                          ) -> dict[str, pa.Table]:
    """The three COMM_* tables of parsed communication.json ``data``. ``typed`` (only for a
    file without JSON true/false): the numeric columns may come from Arrow's converter
    (:func:`_typed_columns`), which falls back to the per-value rules
    (:func:`_per_value_columns`) by itself; False takes those rules directly."""
    return _entry_tables(_iter_ops(data, path, problems, rank), path, rank, problems, typed)


def _entry_tables(entries, path: Path, rank: int, problems, typed: bool = False,
                  bad_sink: list | None = None, opinfo: list | None = None
                  ) -> dict[str, pa.Table]:
    """:func:`_communication_tables` of ``entries`` = (step key, kind, op key, parsed OPINFO)
    in file order. ``bad_sink``: ops left out for their times are appended there as (count,
    step key, field, value, name, group) instead of recorded in ``problems``; ``opinfo``: the
    OPINFO texts of the entries as the file has them (else each parsed one is dumped)."""
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
    common = _entry_columns(rank, e_step_key, e_kind, e_name, e_group, path)
    cols = _typed_columns(o_info, o_bw) if typed else None
    ops, bws, b_ent, sds, d_ent = cols or _per_value_columns(o_info, o_bw, path)
    ops["start_ns"] = _abs_us_column(_field(o_info, "Start Timestamp(us)"))
    # kept verbatim for cluster_communication.json (msprof-analyze copies it as is)
    ops["opinfo_json"] = (_json_column(o_raw) if opinfo is None else
                          pa.array([bytes(x) for x in o_raw], pa.binary()).cast(pa.string()))
    return {S.COMM_OPS: _assemble(S.COMM_OPS, common, None, ops),
            S.COMM_BANDWIDTH: _assemble(S.COMM_BANDWIDTH, common, b_ent, bws),
            S.COMM_SIZE_DIST: _assemble(S.COMM_SIZE_DIST, common, d_ent, sds)}


def report_bad_times(problems: Problems, path: Path, rank: int, count: int, step_key: str,
                     key: str, value, name: str, group: str) -> None:
    """The one problem of a file whose ``count`` ops were left out for a time that is not a
    non-negative number (the first: ``key`` = ``value`` of ``name@group`` in ``step_key``)."""
    problems.add(path, f"{count} op(s) left out: a {TIME_INFO} time that is not a "
                       f"non-negative number (e.g. {key} = {_show(value)} in "
                       f"{name}@{group})",
                 rank=rank, where=step_key, severity="skipped",
                 affects=("communication", "communication_matrix", "verdicts"))


#: Communication Time Info fields an op cannot be analysed without (spec §A.5, §7.2).
REQUIRED_TIMES = ("Elapse Time(ms)", "Transit Time(ms)", "Wait Time(ms)",
                  "Synchronization Time(ms)")


def _bad_times(o_info: list[dict]) -> list[tuple[int, str, object]]:
    """(entry index, field, value) of every op whose :data:`REQUIRED_TIMES` field is present
    but not a non-negative finite number (text, null, a list, a bool, NaN, negative), first
    field per op; an absent field is not flagged (older files lack some)."""
    import math

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


def _show(v) -> str:
    text = orjson.dumps(v).decode() if not isinstance(v, float) else repr(v)
    return text if len(text) <= 40 else text[:37] + "..."


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
            d_count.append(int(count) if type(count) in number_or_bool else None)
            d_dur.append(float(dur) if type(dur) in number_or_bool else None)
    ops = {col: ms_list_to_ns(_field(o_info, key)) for col, key in _OP_MS}
    for col, key in _OP_RATIOS:
        ops[col] = _array(S.COMM_OPS, col, _field(o_info, key), _F64, path)
    bws = {"transport": pa.array(b_transport, pa.string()),
           _BW_MS[0]: ms_list_to_ns(_field(b_info, _BW_MS[1]))}
    for col, key in _BW_FLOATS:
        bws[col] = _array(S.COMM_BANDWIDTH, col, _field(b_info, key), _F64, path)
    sds = {"transport": pa.array(d_transport, pa.string()),
           "packet_size_mb": pa.array(d_key, pa.string()),
           "count": _array(S.COMM_SIZE_DIST, "count", d_count, pa.int64(), path),
           "dur_ns": ms_list_to_ns(d_dur)}
    return ops, bws, b_ent, sds, d_ent


def _parent_indices(maps: pa.MapArray) -> pa.Array:
    """Index of the map each entry of ``maps.items`` belongs to (a freshly built array: its
    entries are stored in order and a null map holds none). Computed from the offsets:
    pyarrow.compute.list_parent_indices aborts the process on a MapArray (pyarrow 26)."""
    import numpy as np

    offsets = maps.offsets.to_numpy()
    return pa.array(np.repeat(np.arange(len(maps), dtype=np.int32), np.diff(offsets)))


def _typed_columns(o_info: list[dict], o_bw: list):
    """:func:`_per_value_columns` through Arrow's converter: the whole Time Info and Bandwidth
    Info of all ops in two calls instead of a Python step per value (the tables of a 1219-op
    bench rank: 9.4 ms instead of 14.2).
    Same results; None whenever a value is not what the converter maps exactly (a text or
    object where a number belongs, an int beyond int64, a count beyond 2^53 …) — the caller
    then takes the per-value way. Call only for files without JSON true/false."""
    import pyarrow.compute as pc

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
        times = pa.array(o_info, _TIME_TYPE).flatten()
        bw = pa.array(o_bw, _BANDWIDTH_TYPE)
        # pyarrow can build invalid nested arrays from odd input, and its kernels abort the
        # process on those: check before use
        bw.validate(full=True)
    except (pa.ArrowException, OverflowError, TypeError, ValueError):
        return None
    return typed_columns_of(times, bw)


def typed_columns_of(times: list, bw: pa.MapArray):
    """The part of :func:`_typed_columns` after the conversion: ``times`` the fields of the
    ops' Time Info in :data:`_TIME_TYPE` order (one array each, null where absent), ``bw``
    their Bandwidth Info as a :data:`_BANDWIDTH_TYPE` array (null where absent). Also used by
    comm_fast with arrays DuckDB decoded. None when a value needs the per-value way."""
    import pyarrow.compute as pc

    ops = {col: _ms_to_ns(a) for (col, _), a in zip(_OP_MS, times)}
    ops.update((col, a) for (col, _), a in zip(_OP_RATIOS, times[len(_OP_MS):]))
    # a transport whose value is null adds no row (the per-value way skips non-objects)
    b_ent = _parent_indices(bw)
    items, transports = bw.items, bw.keys
    if items.null_count:
        valid = items.is_valid()
        items, transports, b_ent = items.filter(valid), transports.filter(valid), \
            b_ent.filter(valid)
    fields = items.flatten()
    bws = {"transport": transports, _BW_MS[0]: _ms_to_ns(fields[0])}
    bws.update((col, a) for (col, _), a in zip(_BW_FLOATS, fields[1:]))
    dist = fields[-1]  # map<packet size text, list<double>> per bandwidth row
    d_row = _parent_indices(dist)
    pairs, keys = dist.items, dist.keys
    full = pc.fill_null(pc.greater_equal(pc.list_value_length(pairs), 2), False)
    if not pc.all(full).as_py():
        pairs, keys, d_row = pairs.filter(full), keys.filter(full), d_row.filter(full)
    count, dur = pc.list_element(pairs, 0), pc.list_element(pairs, 1)
    if len(count) and (pc.max(pc.abs(count)).as_py() or 0) >= _EXACT_COUNT:
        return None
    sds = {"transport": transports.take(d_row), "packet_size_mb": keys,
           "count": pc.cast(count, pa.int64(), safe=False),  # truncates, as int() does
           "dur_ns": _ms_to_ns(dur)}
    if any(c is None for c in (*ops.values(), bws[_BW_MS[0]], sds["dur_ns"])):
        return None  # a time beyond int64 ns: the per-value way raises, naming it as written
    return ops, bws, b_ent, sds, b_ent.take(d_row)


def _ms_to_ns(ms: pa.Array) -> pa.Array | None:
    return ms_vector_to_ns(ms.to_numpy(zero_copy_only=False))  # null -> nan -> null


def _entry_columns(rank: int, step_keys: list, kinds: list, names: list, groups: list,
                   path: Path) -> dict[str, pa.Array]:
    """The columns every COMM_* row shares with its op entry, one value per entry."""
    steps_of = {k: step_number(k) for k in set(step_keys)}
    try:
        # not pa.scalar(rank, int32): its first call imports pandas (~0.2 s)
        rank_value = pa.array([rank], pa.int32())[0]
    except (pa.ArrowException, OverflowError, TypeError, ValueError):
        S.from_lists(S.COMM_OPS, {"rank": [rank]}, path)  # raises the InputError
        raise
    n = len(step_keys)
    return {"rank": pa.repeat(rank_value, n) if n else pa.array([], pa.int32()),
            "step": pa.array([steps_of[k] for k in step_keys], pa.int32()),
            "step_key": pa.array(step_keys, pa.string()), "kind": pa.array(kinds, pa.string()),
            "op_name": pa.array(names, pa.string()), "group": pa.array(groups, pa.string())}


def _assemble(name: str, common: dict, entries: list | None, own: dict) -> pa.Table:
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


def _local_rank(text: str) -> int | None:
    try:
        v = int(text)
    except ValueError:
        return None
    return v if -2**31 <= v < 2**31 else None


def read_matrix(path: Path, rank: int, problems: Problems | None = None) -> pa.Table:
    """Parse one rank's communication_matrix.json (spec §A.6) into a COMM_LINKS table.

    One row per (step, kind, link key, ``"<src>-<dst>"`` link). For the torch_npu layout
    ``link_key`` is the JSON key (``"allreduce-top1@<group>"``) and ``op_name`` the link's
    ``Op Name`` (null for ``-total@`` entries, which have none). For the flat CANN layout the
    per-op records are kept as they are: ``link_key`` is the op key ``"<op>@<group>"`` and
    ``op_name`` its op part, step key ``"step"`` (the cluster builder condenses them into
    top1/middle/bottom/total like msprof-analyze). src/dst are the group-local ranks as written
    (null when not an int32). Times ms -> int ns, sizes MB.

    Raises :class:`InputError` when the file is unreadable, not valid JSON or not a JSON object;
    entries of the wrong shape are skipped and recorded in ``problems`` when given.
    """
    path = Path(path)
    data = read_json(path)
    try:
        return _links_table(data, path, rank, problems)
    except ValueError as e:  # a time beyond int64 ns
        raise InputError(path, str(e)) from None


def _links_table(data, path: Path, rank: int, problems) -> pa.Table:
    cols = {f.name: [] for f in S.SCHEMAS[S.COMM_LINKS]}
    flat = isinstance(data, dict) and _is_flat(data)
    for step_key, kind, link_key, links in _iter_ops(data, path, problems, rank):
        if not isinstance(links, dict):
            if problems is not None:
                problems.warn(path, f"{link_key!r} in {step_key} is not an object; skipped",
                              rank=rank)
            continue
        key_name, group = split_op_key(link_key)
        for link, info in links.items():
            if not isinstance(info, dict):
                continue
            src, _, dst = str(link).partition("-")
            op_name = key_name if flat else info.get("Op Name")
            row = {"rank": rank, "step": step_number(step_key), "step_key": step_key,
                   "kind": kind, "link_key": link_key, "op_name": op_name, "group": group,
                   "src_rank": _local_rank(src), "dst_rank": _local_rank(dst),
                   "transport": info.get("Transport Type"),
                   "size_mb": _num(info, "Transit Size(MB)"),
                   "transit_ns": ms_to_ns(_num(info, "Transit Time(ms)")),
                   "bandwidth_gbps": _num(info, "Bandwidth(GB/s)"),
                   "large_packet_ratio": _num(info, "Large Packet Ratio")}
            for k in cols:
                cols[k].append(row.get(k))
    return S.from_lists(S.COMM_LINKS, cols, path)
