"""Pure decoders of raw CANN profiling records (spec §D). Bytes in, numpy arrays / dicts out.

Nothing here opens files except :func:`read_slices`; every decoder takes the bytes and the path
they came from (for error messages) and is vectorised with numpy structured dtypes, so millions
of records decode without a Python loop. All layouts are little-endian, packed (§D.0).

Errors: a byte string that is not a whole number of records, or a record with the wrong magic
number where the spec says the kind is fixed (host records, §D.2), raises
:class:`~ascendprof.model.errors.RecordError` with the file and the byte offset of the first bad record.
STARS records with another magic, and STARS/HWTS logs of kinds that are not task start/end, are
other log types sharing the file and are skipped, as the spec says (§D.3, §D.4).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ascendprof.model.errors import RecordError
from ascendprof.model.numtext import int_text, is_digits
from ascendprof.sysio.textio import read_regular

HOST_MAGIC = 0x5A5A
STARS_MAGIC = 0x6BD3
API_EVENT_SIZE, COMPACT_SIZE, ADDITIONAL_SIZE, STARS_SIZE, HWTS_SIZE = 40, 64, 256, 64, 64
#: api_event: endTime of an Event (not an API range) record (§D.2)
EVENT_FLAG = 0xFFFFFFFFFFFFFFFF
INVALID_CONTEXT = 0xFFFFFFFF

LEVELS = {30000: "pytorch", 25000: "pta", 20500: "tx", 20000: "acl", 15000: "model",
          10000: "node", 5500: "hccl", 5000: "runtime"}
GE_TASK_TYPES = ("AI_CORE", "AI_CPU", "AI_VECTOR_CORE", "WRITE_BACK", "MIX_AIC", "MIX_AIV",
                 "FFTS_PLUS", "DSA_SQE", "DVPP", "HCCL", "FUSION", "INVALID")
SQE_TYPES = ("AI_CORE", "AI_CPU", "AIV_SQE", "PLACE_HOLDER_SQE", "EVENT_RECORD_SQE",
             "EVENT_WAIT_SQE", "NOTIFY_RECORD_SQE", "NOTIFY_WAIT_SQE", "WRITE_VALUE_SQE", "VQ6_SQE",
             "TOF_SQE", "SDMA_SQE", "VPC_SQE", "JPEGE_SQE", "JPEGD_SQE", "DSA_SQE", "ROCCE_SQE",
             "PCIE_DMA_SQE", "HOST_CPU_SQE", "CDQM_SQE", "C_CORE_SQE")
FFTS_SUBTASK_TYPES = {0: "AIC", 1: "AIV", 3: "Notify Wait", 4: "Notify Record", 5: "Write Value",
                      6: "MIX_AIC", 7: "MIX_AIV", 8: "SDMA", 9: "Data Context",
                      10: "Invalidate Data Context", 11: "Writeback Data Context", 12: "AI_CPU",
                      13: "Load Context", 15: "DSA"}
LINK_TYPES = ("ON_CHIP", "HCCS", "PCIE", "ROCE", "SIO", "HCCS_SW")
TRANSPORT_TYPES = ("SDMA", "RDMA", "LOCAL")
ACSQ_START, ACSQ_END, FFTS_START, FFTS_END = 0, 1, 34, 35


def _dt(size: int, fields: list[tuple[str, str, int]]) -> np.dtype:
    return np.dtype({"names": [f[0] for f in fields], "formats": [f[1] for f in fields],
                     "offsets": [f[2] for f in fields], "itemsize": size})


_PREFIX = [("magic", "<u2", 0), ("level", "<u2", 2), ("type", "<u4", 4), ("thread_id", "<u4", 8),
           ("data_len", "<u4", 12), ("timestamp", "<u8", 16)]

API_EVENT = _dt(API_EVENT_SIZE, [("magic", "<u2", 0), ("level", "<u2", 2), ("type", "<u4", 4),
                                 ("thread_id", "<u4", 8), ("request_id", "<u4", 12),
                                 ("begin", "<u8", 16), ("end", "<u8", 24), ("item_id", "<u8", 32)])
COMPACT = {
    "task_track": _dt(COMPACT_SIZE, _PREFIX + [
        ("device_raw", "<u2", 24), ("stream_id", "<u2", 26), ("task_id", "<u2", 28),
        ("batch_id", "<u2", 30), ("task_type", "<u8", 32), ("kernel_name", "<u8", 40),
        ("num_blocks", "<u2", 48), ("args_size", "<u2", 50), ("mode_bits", "u1", 52)]),
    "node_basic_info": _dt(COMPACT_SIZE, _PREFIX + [
        ("op_name", "<u8", 24), ("task_type", "<u4", 32), ("op_type", "<u8", 36),
        ("block_num", "<u4", 44), ("op_flag", "<u4", 48), ("op_state", "u1", 52)]),
    "hccl_op_info": _dt(COMPACT_SIZE, _PREFIX + [
        ("flags", "u1", 24), ("data_type", "u1", 25), ("alg_type", "<u8", 26), ("count", "<u8", 34),
        ("group_name", "<u8", 42)]),
    "node_attr_info": _dt(COMPACT_SIZE, _PREFIX + [
        ("op_name", "<u8", 24), ("attr_type", "<u4", 32), ("hash_id", "<u8", 36)]),
}
_TENSOR = [("tensor_type", "<u4", 0), ("format", "<u4", 4), ("data_type", "<u4", 8),
           ("shape", "<u4", 12)]
ADDITIONAL = {
    "hccl_info": _dt(ADDITIONAL_SIZE, _PREFIX + [
        ("item_id", "<u8", 24), ("ccl_tag", "<u8", 32), ("group_name", "<u8", 40),
        ("local_rank", "<u4", 48), ("remote_rank", "<u4", 52), ("rank_size", "<u4", 56),
        ("work_flow_mode", "<u4", 60), ("plane_id", "<u4", 64), ("ctx_id", "<u4", 68),
        ("notify_id", "<u8", 72), ("stage", "<u4", 80), ("role", "<u4", 84),
        ("duration_estimated_us", "<f8", 88), ("src_addr", "<u8", 96), ("dst_addr", "<u8", 104),
        ("data_size", "<u8", 112), ("op_type", "<u4", 120), ("data_type", "<u4", 124),
        ("link_type", "<u4", 128), ("transport_type", "<u4", 132), ("rdma_type", "<u4", 136)]),
    "context_id_info": _dt(ADDITIONAL_SIZE, _PREFIX + [
        ("op_name", "<u8", 24), ("ctx_id_num", "<u4", 32), ("ctx_ids", ("<u4", 55), 36)]),
    "tensor_info": _dt(ADDITIONAL_SIZE, _PREFIX + [
        ("op_name", "<u8", 24), ("tensor_num", "<u4", 32)]
        + [(f"t{i}_{n}", (f if n != "shape" else (f, 8)), 36 + 44 * i + o)
           for i in range(5) for n, f, o in _TENSOR]),
    "graph_id_map": _dt(ADDITIONAL_SIZE, _PREFIX + [
        ("model_name", "<u8", 24), ("graph_id", "<u4", 32), ("model_id", "<u4", 36)]),
}
STARS = _dt(STARS_SIZE, [("header", "<u2", 0), ("magic", "<u2", 2), ("stream_raw", "<u2", 4),
                         ("task_raw", "<u2", 6), ("timestamp", "<u8", 8), ("acc", "<u2", 16),
                         ("subtask_type", "u1", 16), ("subtask_id", "<u2", 18),
                         ("ffts_bits", "<u2", 20), ("thread_id", "<u2", 22)])
HWTS = _dt(HWTS_SIZE, [("head", "u1", 0), ("task_type", "u1", 1), ("reserved", "<u2", 2),
                       ("block_id", "<u2", 4), ("task_id", "<u2", 6), ("syscnt", "<u8", 8),
                       ("stream_id", "<u4", 16)])


# ------------------------------------------------------------------------------ whole records

def _records(buf: bytes, dtype: np.dtype, path, what: str) -> np.ndarray:
    size = dtype.itemsize
    if len(buf) % size:
        whole = len(buf) - len(buf) % size
        raise RecordError(path, f"truncated {what} record: {len(buf) % size} of {size} bytes",
                          where=whole)
    return np.frombuffer(buf, dtype=dtype)


def _check_magic(arr: np.ndarray, size: int, path, what: str, magic: int = HOST_MAGIC) -> None:
    bad = np.flatnonzero(arr["magic"] != magic)
    if bad.size:
        i = int(bad[0])
        raise RecordError(path, f"unknown {what} record (magic 0x{int(arr['magic'][i]):04X}, "
                                f"expected 0x{magic:04X})", where=i * size)


def decode_api_event(buf: bytes, path="<bytes>") -> np.ndarray:
    """40-byte api_event records (§D.2) -> structured array (magic, level, type, thread_id,
    request_id, begin, end, item_id). ``end == EVENT_FLAG`` marks an Event (point) record.
    Raises RecordError on a partial record or a magic other than 0x5A5A."""
    arr = _records(buf, API_EVENT, path, "api_event")
    _check_magic(arr, API_EVENT_SIZE, path, "api_event")
    return arr


def decode_compact(buf: bytes, kind: str, path="<bytes>") -> np.ndarray:
    """64-byte compact records of ``kind`` (task_track, node_basic_info, hccl_op_info,
    node_attr_info; §D.2) -> structured array with the common prefix (magic, level, type,
    thread_id, data_len, timestamp) and the kind's payload fields. For task_track,
    :func:`task_track_device` splits ``device_raw``. Raises RecordError (partial record, bad
    magic); ValueError for an unknown ``kind``."""
    if kind not in COMPACT:
        raise ValueError(f"unknown compact kind {kind!r}")
    arr = _records(buf, COMPACT[kind], path, kind)
    _check_magic(arr, COMPACT_SIZE, path, kind)
    return arr


def task_track_device(arr: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(device_id, device_type) from task_track ``device_raw``: bits 11..0 id, 15..12 type."""
    return arr["device_raw"] & 0x0FFF, arr["device_raw"] >> 12


def decode_additional(buf: bytes, kind: str, path="<bytes>") -> np.ndarray:
    """256-byte additional records of ``kind`` (hccl_info, context_id_info, tensor_info,
    graph_id_map; §D.2) -> structured array. tensor_info exposes the first 5 tensors as
    ``t<i>_tensor_type/format/data_type/shape``. Raises RecordError; ValueError for an unknown
    ``kind``."""
    if kind not in ADDITIONAL:
        raise ValueError(f"unknown additional kind {kind!r}")
    arr = _records(buf, ADDITIONAL[kind], path, kind)
    _check_magic(arr, ADDITIONAL_SIZE, path, kind)
    return arr


def decode_stars_soc(buf: bytes, path="<bytes>") -> dict[str, np.ndarray]:
    """64-byte STARS ``stars_soc.data`` records (§D.3) -> task start/end logs.

    Returns columns ``func_type, cnt, sqe_type, stream_raw, task_raw, timestamp, context_id,
    is_start, offset`` for ACSQ (func 0/1, context = 0xFFFFFFFF) and FFTS+ (func 34/35, context =
    subTaskId, ``subtask_type``) records; records with another magic or func type are other logs
    and are left out. Raises RecordError on a partial record."""
    arr = _records(buf, STARS, path, "stars_soc")
    head = arr["header"]
    func = head & 0x3F
    keep = (arr["magic"] == STARS_MAGIC) & np.isin(func, (ACSQ_START, ACSQ_END, FFTS_START,
                                                          FFTS_END))
    idx = np.flatnonzero(keep)
    a, f = arr[idx], func[idx]
    ffts = f >= FFTS_START
    return {
        "func_type": f.astype(np.int64), "cnt": ((a["header"] >> 6) & 0xF).astype(np.int64),
        "sqe_type": (a["header"] >> 10).astype(np.int64),
        "stream_raw": a["stream_raw"].astype(np.int64), "task_raw": a["task_raw"].astype(np.int64),
        "timestamp": a["timestamp"].astype(np.int64),
        # widen first: np.where would keep the u16 type and wrap 0xFFFFFFFF
        "context_id": np.where(ffts, a["subtask_id"].astype(np.int64), np.int64(INVALID_CONTEXT)),
        "subtask_type": np.where(ffts, a["subtask_type"].astype(np.int64), np.int64(-1)),
        "is_start": np.isin(f, (ACSQ_START, FFTS_START)),
        "offset": (idx * STARS_SIZE).astype(np.int64),
    }


def decode_hwts(buf: bytes, path="<bytes>") -> dict[str, np.ndarray]:
    """64-byte HWTS log records (``hwts.data`` §D.4, and the older ``hwts.log.data`` that
    MindSpore 1.x jobs wrote, same offsets) -> task start/end logs.

    Byte 0: bits 2..0 log type (0 task start, 1 task end; 2-4 are block / PMU logs, skipped),
    bits 7..4 ``cnt``; byte 1 task type (the older layout: core id); +6 u16 task id; +8 u64
    syscnt; +16 u32 stream id (``% 2048``). Returns columns ``stream_id, task_id, timestamp,
    is_start, cnt, task_type, offset``. Raises RecordError on a partial record or a log type
    above 4 (no such HWTS log)."""
    arr = _records(buf, HWTS, path, "hwts")
    kind = arr["head"] & 0x7
    bad = np.flatnonzero(kind > 4)
    if bad.size:
        raise RecordError(path, f"unknown HWTS log type {int(kind[bad[0]])}",
                          where=int(bad[0]) * HWTS_SIZE)
    idx = np.flatnonzero(kind <= 1)
    a = arr[idx]
    return {
        "stream_id": (a["stream_id"] % 2048).astype(np.int64),
        "task_id": a["task_id"].astype(np.int64), "timestamp": a["syscnt"].astype(np.int64),
        "is_start": (a["head"][:] & 0x7) == 0, "cnt": (a["head"] >> 4).astype(np.int64),
        "task_type": a["task_type"].astype(np.int64), "offset": (idx * HWTS_SIZE).astype(np.int64),
    }


def decode_stream_task(s, t, sqe_type=None, expand=0) -> tuple[np.ndarray, np.ndarray]:
    """STARS raw stream/task ids -> (stream_id, task_id), spec §D.5 (vectorised)."""
    s = np.asarray(s, dtype=np.int64)
    t = np.asarray(t, dtype=np.int64)
    if expand:
        sqe = np.zeros_like(s) if sqe_type is None else np.asarray(sqe_type, dtype=np.int64)
        place = np.isin(sqe, (3, 4))
        hi = (s & 0x8000) != 0
        stream = np.where(place | ~hi, s & 0x7FFF, t & 0x7FFF)
        task = np.where(place | ~hi, t, (t & 0x8000) | (s & 0x7FFF))
        return stream, task
    b12 = (s & 0x1000) != 0
    b13 = ((s & 0x2000) != 0) & ~b12
    stream = np.where(b12, s % 2048, np.where(b13, (t & 0x0FFF) % 2048, s % 2048))
    task = np.where(b12, (t & 0x1FFF) | (s & 0xE000), np.where(b13, (s & 0x0FFF) | (t & 0xF000), t))
    return stream, task


def pair_start_end(keys: list[np.ndarray], timestamp: np.ndarray, is_start: np.ndarray
                   ) -> tuple[np.ndarray, np.ndarray]:
    """Pair task start and end logs (§D.3): within one key (stream, task[, context]), in time
    order, a start followed directly by an end is one task. Returns index arrays (start_idx,
    end_idx) into the inputs, ordered by start time. Unpaired logs (lost records) are dropped."""
    n = len(timestamp)
    if n == 0:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    # ends sort after starts at the same tick so a zero-length task pairs
    order = np.lexsort((~is_start, timestamp) + tuple(reversed(keys)))
    same = np.ones(n - 1, dtype=bool)
    for k in keys:
        ks = k[order]
        same &= ks[1:] == ks[:-1]
    st = is_start[order]
    hit = same & st[:-1] & ~st[1:]
    # a start can be used once; consecutive hits cannot overlap since a hit needs start then end
    s_idx, e_idx = order[:-1][hit], order[1:][hit]
    by_time = np.argsort(timestamp[s_idx], kind="stable")
    return s_idx[by_time], e_idx[by_time]


# ------------------------------------------------------------------------------ dictionaries

def parse_hash_dic(text: str) -> dict[int, str]:
    """``hash_dic`` text (``<u64 id>:<string>`` per line, split at the first ``:``; last
    duplicate wins) -> {id: string}. Lines without a numeric id are ignored."""
    out = {}
    for line in text.splitlines():
        key, sep, val = line.partition(":")
        if sep and is_digits(key.strip()):
            out[int(key)] = val
    return out


def parse_type_info_dic(text: str) -> dict[tuple[int, int], str]:
    """``type_info_dic`` text (``<level>_<type>:<string>``) -> {(level, type): string}."""
    out = {}
    for line in text.splitlines():
        key, sep, val = line.partition(":")
        m = re.fullmatch(r"\s*(\d+)_(\d+)\s*", key)
        if sep and m:
            out[(int(m.group(1)), int(m.group(2)))] = val
    return out


def type_name(types: dict[tuple[int, int], str], level: int, typ: int) -> str:
    """Resolve a record type (§D.2): dict entry, else 27/28 -> DYNAMIC_ENABLE/DISABLE, else
    the decimal number."""
    if (level, typ) in types:
        return types[(level, typ)]
    return {27: "DYNAMIC_ENABLE", 28: "DYNAMIC_DISABLE"}.get(typ, str(typ))


# ------------------------------------------------------------------------------ time (§D.6)

def parse_start_log(text: str) -> dict[str, int]:
    """``host_start.log`` / ``dev_start.log.<id>`` (INI-like, ``key: value``) -> {key: int};
    section headers and non-integer values are ignored."""
    out = {}
    for line in text.splitlines():
        key, sep, val = line.partition(":")
        if sep and int_text(val) is not None:
            out[key.strip()] = int_text(val)
    return out


@dataclass(frozen=True)
class DeviceClock:
    """Conversion of device syscnt to local wall-clock ns (§D.6).

    ``t_local = host_mono0 + (syscnt - dev_cntvct) * 1000 / hwts_freq_mhz + local_offset`` with
    ``host_mono0 = host clock_monotonic_raw + cntvct_diff * 1000 / host_freq_mhz`` and
    ``local_offset = collectionTimeBegin(us) * 1000 - clockMonotonicRaw``. Durations are
    ``ticks * 1000 / hwts_freq_mhz``.
    """

    hwts_freq_mhz: float
    dev_cntvct: int = 0
    host_mono0_ns: int = 0
    local_offset_ns: int = 0

    def to_local_ns(self, syscnt) -> np.ndarray:
        d = np.asarray(syscnt, dtype=np.int64) - self.dev_cntvct
        return self.host_mono0_ns + self.ticks_to_ns(d) + self.local_offset_ns

    def ticks_to_ns(self, ticks) -> np.ndarray:
        t = np.asarray(ticks, dtype=np.int64)
        f = self.hwts_freq_mhz
        if float(f).is_integer():
            f = int(f)
            q, r = np.divmod(t * 1000, f)  # exact integer ns, rounded half up
            return q + (2 * r >= f)
        return np.round(t * (1000.0 / f)).astype(np.int64)


def device_clock(info: dict, dev_start: dict | None = None, host_start: dict | None = None,
                 start_info: dict | None = None) -> DeviceClock:
    """Build a :class:`DeviceClock` from parsed ``info.json[.id]``, ``dev_start.log.<id>``,
    ``host_start.log[.id]`` and ``start_info[.id]`` (any may be missing: the terms they provide
    are then 0 and the result is on the device / monotonic clock). Raises ValueError when
    ``DeviceInfo[0].hwts_frequency`` is missing or not positive."""
    try:
        f = float((info.get("DeviceInfo") or [{}])[0].get("hwts_frequency"))
    except (TypeError, ValueError, IndexError):
        raise ValueError("info.json has no DeviceInfo[0].hwts_frequency") from None
    if f <= 0:
        raise ValueError("hwts_frequency must be positive")
    mono0 = 0
    if host_start and dev_start and "cntvct" in dev_start:
        mono0 = host_start.get("clock_monotonic_raw", 0)
        diff = host_start.get("cntvct_diff", 0)
        try:
            hf = float((info.get("CPU") or [{}])[0].get("Frequency"))
        except (TypeError, ValueError, IndexError):
            hf = 0.0
        if diff and hf > 0:
            mono0 += round(diff * 1000 / hf)
    offset = 0
    if start_info and mono0:
        offset = int(start_info["collectionTimeBegin"]) * 1000 - int(start_info["clockMonotonicRaw"])
    dev_cnt = (dev_start or {}).get("cntvct", 0) if mono0 else 0
    return DeviceClock(hwts_freq_mhz=f, dev_cntvct=dev_cnt, host_mono0_ns=mono0,
                       local_offset_ns=offset)


# ------------------------------------------------------------------------------ files

_SLICE_RE = re.compile(r"^(?P<stem>.+?)\.slice_(?P<n>\d+)$")


def slice_groups(names: list[str]) -> dict[str, list[str]]:
    """Group file names by logical file (``<stem>.slice_<n>``), each list in ascending n (§D.0).
    ``.done`` / ``.complete`` / ``.zip`` markers are not data and are left out."""
    out: dict[str, list[tuple[int, str]]] = {}
    for n in names:
        if n.endswith((".done", ".complete", ".zip")):
            continue
        m = _SLICE_RE.match(Path(n).name)
        if m:
            stem = str(Path(n).parent / m.group("stem")) if Path(n).parent != Path(".") else m.group("stem")
            out.setdefault(stem, []).append((int(m.group("n")), n))
    return {k: [n for _, n in sorted(v)] for k, v in out.items()}


def read_slices(base: Path, names: list[str]) -> bytes:
    """Concatenate the slices ``names`` (relative to ``base``) in the given order: a record may
    straddle a slice boundary, so records are cut only after concatenation (§D.0)."""
    return b"".join(read_regular(Path(base) / n) for n in names)


# ------------------------------------------------------------------------------ HCCL small tasks

#: hccl_info rdmaType (§D.2; names 2-5 as the db's ENUM_HCCL_RDMA_TYPE lists them, §B.1)
RDMA_TYPES = ("RDMA_SEND_NOTIFY", "RDMA_SEND_PAYLOAD", "RDMA_PAYLOAD_PREPARE",
              "RDMA_PAYLOAD_CHECK", "RDMA_PAYLOAD_ACK", "RDMA_SEND_OP")
#: linkType names past the spec's six, as ENUM_HCCL_LINK_TYPE lists them (§B.1)
LINK_TYPES_DB = LINK_TYPES + ("STANDARD_ROCE", "RESERVED")
INVALID_ENUM = 0xFFFF


def enum_names(values, names: tuple[str, ...]) -> np.ndarray:
    """hccl_info enum codes -> names (object array); 65535 / 0xFFFFFFFF -> None (not set),
    other unknown codes -> the decimal number as text."""
    out = np.empty(len(values), dtype=object)
    for i, v in enumerate(np.asarray(values).tolist()):
        if v in (INVALID_ENUM, 0xFFFFFFFF, 65534):
            out[i] = None
        else:
            out[i] = names[v] if 0 <= v < len(names) else str(v)
    return out


def api_ranges(api: np.ndarray, level: int) -> np.ndarray:
    """The API (range) records of one level from decoded api_event records (§D.2): Event
    (point) records and zero-length ranges are left out (CANN drops them as invalid)."""
    keep = (api["level"] == level) & (api["end"] != EVENT_FLAG) & (api["end"] > api["begin"])
    return api[keep]
