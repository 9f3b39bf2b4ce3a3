"""A batch of communication.json op entries decoded by msgspec into typed structs that declare
only the fields the tables need (the rest is skipped, not built), and the COMM_* tables of
them (:func:`typed_tables`). A value the structs do not take exactly (a text or bool where a
number belongs, a list where an object belongs, a number of 2^53 or more) makes the decode or
:func:`typed_tables` fail, and the batch goes to the per-value rules."""

from __future__ import annotations

from itertools import chain
from operator import attrgetter
from typing import Dict, List, Optional, Union

import msgspec
import numpy as np
import pyarrow as pa

from ascendprof.model.units import ms_vector_to_ns
from ascendprof.readers.communication.batch import (EXACT, REQUIRED, BatchProblems, Entries,
                                                    batch_columns, first_bad)
from ascendprof.readers.communication.columns import abs_us_column, comm_tables
from ascendprof.readers.communication.layout import is_total

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


#: a batch's op objects as a JSON array; the whole file split into ``step -> kind -> op``
#: with every op left undecoded; the whole file with its ops decoded
OPS = msgspec.json.Decoder(List[_Op])
LAYOUT = msgspec.json.Decoder(Dict[str, Dict[str, Dict[str, msgspec.Raw]]])
TYPED = msgspec.json.Decoder(Dict[str, Dict[str, Dict[str, _Op]]])
_EMPTY_TIME = _Time()
_NO_BW: dict = {}
#: (column, struct field) of the Communication Time Info times, ms -> ns
_TIMES = (("elapse_ns", "elapse"), ("transit_ns", "transit"), ("wait_ns", "wait"),
          ("sync_ns", "sync"), ("idle_ns", "idle"))


def ops_of(typed: dict) -> list:
    """The ops of a :data:`TYPED` decode, "Total ..." entries left out, in file order."""
    out = []
    for step in typed.values():
        for ops in step.values():
            if any(map(is_total, ops)):
                out.extend(v for k, v in ops.items() if not is_total(k))
            else:
                out.extend(ops.values())
    return out


def _column(objs: list, name: str) -> list:
    return list(map(attrgetter(name), objs))


def _floats(values: list) -> np.ndarray | None:
    """float64 array of numbers / None / UNSET (both nan); None when a value needs the
    per-value rules (|x| >= 2^53: an int there may not be exact)."""
    if _UNSET in values:
        values = [None if v is _UNSET else v for v in values]
    a = np.array(values, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        if (np.abs(a) >= EXACT).any():
            return None
    return a


def _f64(values: list) -> pa.Array | None:
    a = _floats(values)
    return None if a is None else pa.array(a, pa.float64(), from_pandas=True)


def _ns(values: list) -> pa.Array | None:
    a = _floats(values)
    return None if a is None else ms_vector_to_ns(a)  # None beyond int64 ns


def typed_tables(entries: Entries, path, rank, sink: BatchProblems):
    """The COMM_* tables of a batch of decoded ops (``entries.ops``); None when a value needs
    the per-value rules. Ops left out for their times are counted in ``sink``."""
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
    op_cols["start_ns"] = abs_us_column(starts)
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
    return comm_tables(batch_columns(entries, keep, rank, path), op_cols, bw_cols,
                       pa.array(b_ent), sd_cols, pa.array(d_ent, pa.int32()))


def _drop_bad_times(times: list, entries: Entries, sink: BatchProblems) -> list | None:
    """Indices of the ops to keep when some required time is present but null or negative
    (the op is left out and counted in ``sink``, as the per-value rule does); None when all
    are kept."""
    bad: dict[int, str] = {}
    for key, attr in REQUIRED:
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
    first_bad(entries, first, len(bad), key, getattr(times[first], dict(REQUIRED)[key]), sink)
    return [i for i in range(len(times)) if i not in bad]
