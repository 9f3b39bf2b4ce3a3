"""Reader for raw CANN data (kind ``raw_cann``): decodes the binary logs itself (spec §D).

Two layouts:

1. **Legacy job directory** (MindSpore 1.x ``JOB*``, e.g. the shared ``JOB3``):
   ``hwts.log.data.45.dev.profiler_default_tag.<dev>.slice_<n>`` (64-byte HWTS logs, the layout
   of §D.4; the cycle counter ticks at 100 MHz = 10 ns, as MindInsight's op time parser states)
   and ``Framework.host.vm.task_desc_info.<dev>.slice_<n>`` (text lines ``<op name> <block dim>
   <task id> <stream id>``) plus ``graph_desc_info`` (``op_name:<name> op_type:<type> …``).
   Device task logs are paired (start then end per stream+task) and joined to the framework
   task description **by task id** (the framework's stream ids are logical and differ from the
   device's, so MindInsight also joins on the task id alone). Tasks without a framework
   description are not op kernels (stream / event tasks) and are left out (counted in a
   warning). These jobs have no ``dev_start.log``, so times stay on the device clock.
2. **PROF_ raw data** (CANN 6+): ``device_<id>/data/stars_soc.data.*`` (STARS, §D.3) or
   ``hwts.data.*`` (§D.4), ``host/data/(un)aging.compact.task_track.*`` /
   ``node_basic_info.*`` and the ``hash_dic`` / ``type_info_dic`` dictionaries (§D.2). Device
   logs are paired per (stream, task, context) and converted to local time with
   ``info.json.<id>``, ``dev_start.log.<id>``, ``host_start.log`` and ``start_info`` (§D.6).
   Host association is simplified from §D.2's API tree: per host thread, a task_track record takes
   the op of the latest node_basic_info at or before it; a device task takes the latest host
   task_track with the same (stream, task) launched before it (§D.7, batch id ignored).

   HCCL small tasks (§D.2 association, per host thread): an ``hccl_info`` record belongs to the
   HCCL-level API range containing it (its type string ``master`` / ``slave`` gives is_master),
   that range's last task_track gives the device (stream, task) and the node-level API range
   around it gives the big op (name = hash of its itemId, group = ``hccl_op_info`` groupName
   hash in decimal, as the profiler keys groups, else hccl_info's). With FFTS+ (a level-5500
   ``context_id_info`` in the range) the small task's context id is hccl_info's ctxID. Device
   tasks paired to such a host task become the small-task table that
   :func:`ascendprof.analyze.hccl_tasks.comm_tables` turns into COMM_OPS / COMM_BANDWIDTH /
   COMM_SIZE_DIST / COMM_LINKS (spec §7.2/§7.3, elapse over the master plane); those device
   tasks are not kernels.

The step trace (ts_track / training_trace) is not decoded yet.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa

from ascendprof.analyze import hccl_tasks
from ascendprof.model import schemas as S
from ascendprof.model.errors import InputError, RecordError
from ascendprof.model.numtext import int_text
from ascendprof.model.rankdata import RankData
from ascendprof.readers import cann_records as C
from ascendprof.sysio.textio import METADATA_MAX_BYTES, read_json, read_regular

#: legacy HWTS cycle length in ns (100 MHz)
LEGACY_TICK_NS = 10
_OP_TYPE_RE = re.compile(r"([^/]+?)(?:-op\d+)?$")


def read(source, options=None) -> RankData:  # noqa: ARG001 - one signature for all readers
    """Decode one raw source into a :class:`RankData` with a KERNELS table.

    Raises :class:`InputError` / :class:`RecordError` (file + byte offset) when the device log
    cannot be decoded, and :class:`InputError` when the source has no device log at all.
    """
    base = Path(source.path)
    data = RankData(source=source, rank=source.rank)
    groups = C.slice_groups(source.files)
    legacy = {k: v for k, v in groups.items() if os.path.basename(k).startswith("hwts.log.data")}
    if legacy:
        _read_legacy_job(base, groups, legacy, data, source)
    else:
        _read_prof_raw(base, groups, data, source)
    return data


# ----------------------------------------------------------------------------- legacy job

def parse_task_desc(text: str, path="<text>") -> dict[int, tuple[str, int, int]]:
    """Legacy ``task_desc_info`` text -> {task_id: (op name, block dim, stream id)}.
    Raises InputError for a line that is not ``<name> <int> <int> <int>``."""
    out = {}
    for n, line in enumerate(text.splitlines(), start=1):
        parts = line.split()
        if not parts:
            continue
        if len(parts) < 4 or not all(int_text(p) is not None for p in parts[1:4]):
            raise InputError(path, f"unexpected task_desc_info line: {line[:80]!r}", where=f"line {n}")
        out[int(parts[2])] = (parts[0], int(parts[1]), int(parts[3]))
    return out


def parse_graph_desc(text: str) -> dict[str, str]:
    """Legacy ``graph_desc_info`` text -> {op name: op type}."""
    out = {}
    for line in text.splitlines():
        fields = dict(f.split(":", 1) for f in line.split(" ") if ":" in f)
        if "op_name" in fields and "op_type" in fields:
            out[fields["op_name"]] = fields["op_type"]
    return out


def _text_of(base: Path, groups: dict, marker: str) -> tuple[str, Path | None]:
    for stem, names in sorted(groups.items()):
        if marker in os.path.basename(stem):
            try:
                return C.read_slices(base, names).decode("utf-8"), base / names[0]
            except UnicodeDecodeError as e:
                raise InputError(base / names[0], "not UTF-8 text", where=e.start) from None
    return "", None


def _read_legacy_job(base: Path, groups: dict, hwts: dict, data: RankData, source) -> None:
    stem, names = sorted(hwts.items())[0]
    path = base / names[0]
    logs = C.decode_hwts(C.read_slices(base, names), path)
    s_idx, e_idx = C.pair_start_end([logs["stream_id"], logs["task_id"]], logs["timestamp"],
                                    logs["is_start"])
    text, tpath = _text_of(base, groups, "task_desc_info")
    tasks = parse_task_desc(text, tpath) if text else {}
    gtext, _ = _text_of(base, groups, "graph_desc_info")
    op_types = parse_graph_desc(gtext) if gtext else {}
    if not tasks:
        data.problems.warn(base, "no Framework task_desc_info: kernels have no op names",
                           rank=data.rank)
    task_ids = logs["task_id"][s_idx]
    if tasks:
        known = np.isin(task_ids, np.fromiter(tasks, dtype=np.int64, count=len(tasks)))
        dropped = int((~known).sum())
        if dropped:
            data.problems.warn(path, f"{dropped} device tasks have no framework op (stream/event "
                                     f"tasks) and are not kernels", rank=data.rank)
        s_idx, e_idx, task_ids = s_idx[known], e_idx[known], task_ids[known]
    names_ = [tasks[t][0] if t in tasks else None for t in task_ids.tolist()]
    start = logs["timestamp"][s_idx]
    n = len(s_idx)
    cols = {
        "rank": np.full(n, data.rank if data.rank is not None else -1, dtype=np.int32),
        "device_id": [source.device_id] * n,
        "task_id": task_ids, "stream_id": logs["stream_id"][s_idx],
        "name": names_,
        "op_type": [op_types.get(x) or (_OP_TYPE_RE.search(x).group(1) if x else None)
                    for x in names_],
        "block_num": [tasks[t][1] if t in tasks else None for t in task_ids.tolist()],
        "start_ns": start * LEGACY_TICK_NS,
        "dur_ns": (logs["timestamp"][e_idx] - start) * LEGACY_TICK_NS,
    }
    data.tables[S.KERNELS] = S.conform(S.KERNELS, pa.table(cols))
    data.problems.warn(path, "legacy raw job has no dev_start.log: kernel times are on the "
                             "device clock (10 ns ticks), not wall clock", rank=data.rank)


# ----------------------------------------------------------------------------- PROF_ raw

def _find(groups: dict, pattern: str) -> list[tuple[str, list[str]]]:
    rx = re.compile(pattern)
    return [(k, v) for k, v in sorted(groups.items()) if rx.search(k)]


def _host_concat(base: Path, groups: dict, name: str) -> tuple[bytes, Path | None]:
    """Both aging and unaging parts of one host file kind (§D.0), concatenated."""
    hits = _find(groups, rf"(^|/)(aging|unaging)\.{re.escape(name)}$")
    if not hits:
        return b"", None
    return b"".join(C.read_slices(base, v) for _, v in hits), base / hits[0][1][0]


def _read_text(p: Path) -> str | None:
    """A small start log as text; None when absent, not a regular file, too large or not UTF-8."""
    try:
        return read_regular(p, METADATA_MAX_BYTES).decode("utf-8")
    except (InputError, UnicodeDecodeError):
        return None


def _clock(base: Path, dev: int, data: RankData) -> C.DeviceClock:
    d = base / f"device_{dev}"
    try:
        info = read_json(d / f"info.json.{dev}", METADATA_MAX_BYTES)
    except InputError as e:
        raise InputError(e.path, f"needed for the device clock: {e.reason}") from None
    dev_start = C.parse_start_log(_read_text(d / f"dev_start.log.{dev}") or "")
    host_txt = _read_text(d / f"host_start.log.{dev}") or _read_text(base / "host" / "host_start.log")
    host_start = C.parse_start_log(host_txt or "")
    start_info = None
    for p in (d / f"start_info.{dev}", base / "host" / "start_info"):
        if p.is_file():
            try:
                start_info = read_json(p, METADATA_MAX_BYTES)
                break
            except InputError as e:
                data.problems.add_error(e, rank=data.rank)
    try:
        clock = C.device_clock(info, dev_start, host_start, start_info)
    except (ValueError, KeyError) as e:
        raise InputError(d / f"info.json.{dev}", str(e)) from None
    if not clock.host_mono0_ns or not clock.local_offset_ns:
        data.problems.warn(d, "dev_start.log / host_start.log / start_info incomplete: kernel "
                              "times are not on the local wall clock", rank=data.rank)
    return clock


def _device_tasks(base: Path, groups: dict, dev: int) -> dict[str, np.ndarray] | None:
    stars = _find(groups, rf"(^|/)stars_soc\.data\.{dev}$")
    if stars:
        buf = C.read_slices(base, stars[0][1])
        logs = C.decode_stars_soc(buf, base / stars[0][1][0])
        stream, task = C.decode_stream_task(logs["stream_raw"], logs["task_raw"], logs["sqe_type"])
        ctx = logs["context_id"]
        core = np.array(C.SQE_TYPES + ("UNKNOWN",) * 44, dtype=object)[logs["sqe_type"]]
        ffts = logs["subtask_type"] >= 0
        if ffts.any():
            sub = np.array([C.FFTS_SUBTASK_TYPES.get(int(x), str(int(x))) for x in
                            logs["subtask_type"][ffts]], dtype=object)
            core = core.copy()
            core[ffts] = sub
    else:
        hw = _find(groups, rf"(^|/)hwts\.data\.{dev}$")
        if not hw:
            return None
        logs = C.decode_hwts(C.read_slices(base, hw[0][1]), base / hw[0][1][0])
        stream, task = logs["stream_id"], logs["task_id"]
        ctx = np.full(len(task), C.INVALID_CONTEXT, dtype=np.int64)
        core = np.full(len(task), None, dtype=object)
    s_idx, e_idx = C.pair_start_end([stream, task, ctx], logs["timestamp"], logs["is_start"])
    return {"stream_id": stream[s_idx], "task_id": task[s_idx], "context_id": ctx[s_idx],
            "start": logs["timestamp"][s_idx], "end": logs["timestamp"][e_idx],
            "core": core[s_idx]}


def _host_ops(base: Path, groups: dict, data: RankData):
    """Host task_track joined to node_basic_info per thread: DataFrame with stream_id, task_id,
    timestamp, name, op_type, task_type, block_num (or None without host data)."""
    tt_buf, tt_path = _host_concat(base, groups, "compact.task_track")
    if not tt_buf:
        return None
    tt = C.decode_compact(tt_buf, "task_track", tt_path)
    nb_buf, nb_path = _host_concat(base, groups, "compact.node_basic_info")
    nb = C.decode_compact(nb_buf, "node_basic_info", nb_path) if nb_buf else None
    hashes, types = _dictionaries(base, groups)
    host = pd.DataFrame({
        "thread_id": tt["thread_id"].astype(np.int64), "timestamp": tt["timestamp"].astype(np.int64),
        "stream_id": tt["stream_id"].astype(np.int64), "task_id": tt["task_id"].astype(np.int64),
        "host_task_type": [C.type_name(types, 5000, int(x)) for x in tt["task_type"]],
        "kernel_name": [hashes.get(int(x)) for x in tt["kernel_name"]],
    }).sort_values("timestamp")
    host["launch_ts"] = host["timestamp"]   # kept through the merge: pairs HCCL small tasks
    if nb is not None and len(nb):
        ops = pd.DataFrame({
            "thread_id": nb["thread_id"].astype(np.int64),
            "timestamp": nb["timestamp"].astype(np.int64),
            "name": [hashes.get(int(x), str(int(x))) for x in nb["op_name"]],
            "op_type": [hashes.get(int(x), str(int(x))) for x in nb["op_type"]],
            "task_type": [C.GE_TASK_TYPES[x] if x < len(C.GE_TASK_TYPES) else str(x)
                          for x in nb["task_type"].tolist()],
            "block_num": (nb["block_num"] & 0xFFFF).astype(np.int64),
        }).sort_values("timestamp")
        host = pd.merge_asof(host, ops, on="timestamp", by="thread_id", direction="backward")
    else:
        data.problems.warn(base, "no node_basic_info: kernel names from task_track kernel names",
                           rank=data.rank)
        host["name"], host["op_type"] = host["kernel_name"], None
        host["task_type"], host["block_num"] = host["host_task_type"], None
    host["name"] = host["name"].where(host["name"].notna(), host["kernel_name"])
    return host


def _read_prof_raw(base: Path, groups: dict, data: RankData, source) -> None:
    dev = source.device_id
    if dev is None:
        devs = sorted({int(m.group(1)) for k in groups for m in [re.match(r"device_(\d+)/", k)] if m})
        if not devs:
            kinds = sorted({os.path.basename(k).split(".")[0] for k in groups})
            raise InputError(base, f"no device task log (hwts / stars_soc) to decode; found only "
                                   f"{', '.join(kinds) or 'no sliced files'}")
        dev = devs[0]
    tasks = _device_tasks(base, groups, dev)
    if tasks is None:
        kinds = sorted({os.path.basename(k).split(".")[0] for k in groups})
        raise InputError(base, f"no device task log (stars_soc.data.{dev} / hwts.data.{dev}) to "
                               f"decode; found only {', '.join(kinds) or 'no sliced files'}")
    clock = _clock(base, dev, data)
    start = clock.to_local_ns(tasks["start"])
    dur = clock.ticks_to_ns(tasks["end"] - tasks["start"])
    dev_df = pd.DataFrame({"timestamp": start, "dur_ns": dur, "stream_id": tasks["stream_id"],
                           "task_id": tasks["task_id"], "context_id": tasks["context_id"],
                           "core": tasks["core"]}).sort_values("timestamp")
    host = _host_ops(base, groups, data)
    if host is not None:
        # host timestamps: monotonic ns (host freq unknown) -> local with the same offset
        host = host.assign(timestamp=host["timestamp"] + clock.local_offset_ns)
        dev_df = pd.merge_asof(dev_df, host.drop(columns=["thread_id"]), on="timestamp",
                               by=["stream_id", "task_id"], direction="backward")
    else:
        data.problems.warn(base, "no host task_track data: kernels have no op names",
                           rank=data.rank)
        dev_df["name"] = dev_df["op_type"] = dev_df["task_type"] = dev_df["block_num"] = None
    if host is not None:
        comm = _hccl_host_tasks(base, groups, data)
        if comm is not None and len(comm):
            dev_df = _emit_comm(dev_df, comm, clock.local_offset_ns, data)
    n = len(dev_df)
    core = dev_df["task_type"].where(dev_df["task_type"].notna(), dev_df["core"])
    ctx = [None if c == C.INVALID_CONTEXT else int(c) for c in dev_df["context_id"].tolist()]
    cols = {
        "rank": np.full(n, data.rank if data.rank is not None else -1, dtype=np.int32),
        "device_id": [dev] * n, "stream_id": dev_df["stream_id"].to_numpy(),
        "task_id": dev_df["task_id"].to_numpy(),
        "context_id": pa.array(ctx, pa.int64()),
        # a device task no host task_track launched has NaN here after the merge: no name
        "name": pa.array([_text_or_none(v) for v in dev_df["name"].tolist()], pa.string()),
        "op_type": pa.array([_text_or_none(v) for v in dev_df["op_type"].tolist()], pa.string()),
        "accelerator_core": pa.array([_text_or_none(c) for c in core], pa.string()),
        "block_num": pa.array([None if b is None or b != b else int(b)
                               for b in dev_df["block_num"].tolist()], pa.int64()),
        "start_ns": dev_df["timestamp"].to_numpy(), "dur_ns": dev_df["dur_ns"].to_numpy(),
    }
    data.tables[S.KERNELS] = S.conform(S.KERNELS, pa.table(cols))


def _text_or_none(v):
    """A text cell of the merged frame: None for a missing one (None or NaN), else its text."""
    return None if v is None or v != v else str(v)


# ----------------------------------------------------------------------------- HCCL small tasks

def _dictionaries(base: Path, groups: dict):
    hd_buf, _ = _host_concat(base, groups, "additional.hash_dic")
    hashes = C.parse_hash_dic(hd_buf.decode("utf-8", "replace")) if hd_buf else {}
    ti_buf, _ = _host_concat(base, groups, "additional.type_info_dic")
    types = C.parse_type_info_dic(ti_buf.decode("utf-8", "replace")) if ti_buf else {}
    return hashes, types


def _inside(points, ranges, cols: list[str]):
    """For each point (thread_id, ts) the latest range (thread_id, begin, end, *cols) of the same
    thread with begin < ts <= end (§D.2 attach rule); cols are null where none contains it."""
    left = points.reset_index(drop=True).assign(_row=lambda d: range(len(d))).sort_values("ts")
    right = ranges.sort_values("begin")
    m = pd.merge_asof(left, right[["thread_id", "begin", "end"] + cols], left_on="ts",
                      right_on="begin", by="thread_id", direction="backward",
                      allow_exact_matches=False).sort_values("_row")
    out = m.drop(columns=["_row"]).reset_index(drop=True)
    miss = ~(out["ts"] <= out["end"])
    for c in ["begin", "end"] + cols:
        out[c] = out[c].astype(object).where(~miss, None)
    return out


def _hccl_host_tasks(base: Path, groups: dict, data: RankData):
    """Host HCCL small tasks (§D.2): one row per hccl_info attached to an HCCL API range with a
    task_track, with its op (node API), group, plane, master flag, task name, transport, link and
    rdma type, size, ranks and the (stream, task, context, launch_ts) of its device task.
    None when the source has no hccl_info / api_event data."""
    hi_buf, hi_path = _host_concat(base, groups, "additional.hccl_info")
    api_buf, api_path = _host_concat(base, groups, "api_event.data")
    tt_buf, tt_path = _host_concat(base, groups, "compact.task_track")
    if not hi_buf:
        return None
    if not (api_buf and tt_buf):
        data.problems.warn(base, "hccl_info without api_event / task_track data: no "
                                 "communication tables", rank=data.rank)
        return None
    hashes, types = _dictionaries(base, groups)
    hi = C.decode_additional(hi_buf, "hccl_info", hi_path)
    api = C.decode_api_event(api_buf, api_path)
    tt = C.decode_compact(tt_buf, "task_track", tt_path)

    def ranges(level):
        r = C.api_ranges(api, level)
        return pd.DataFrame({"thread_id": r["thread_id"].astype(np.int64),
                             "begin": r["begin"].astype(np.int64),
                             "end": r["end"].astype(np.int64),
                             "item_id": r["item_id"].astype(np.int64),
                             "type": r["type"].astype(np.int64)})

    hccl, node = ranges(5500), ranges(10000)
    if hccl.empty or node.empty:
        data.problems.warn(hi_path, "hccl_info records but no HCCL- or node-level API ranges: "
                                    "no communication tables", rank=data.rank)
        return None
    hccl["api_id"] = np.arange(len(hccl))
    hccl["is_master"] = [int(C.type_name(types, 5500, int(t)) == "master") for t in hccl["type"]]
    # the big op around each HCCL API, and its group from hccl_op_info
    at = _inside(hccl[["thread_id"]].assign(ts=hccl["begin"]),
                 node.rename(columns={"item_id": "op_item"}).assign(op_begin=node["begin"]),
                 ["op_item", "op_begin"])
    hccl["op_item"], hccl["op_begin"] = at["op_item"].to_numpy(), at["op_begin"].to_numpy()
    ho_buf, ho_path = _host_concat(base, groups, "compact.hccl_op_info")
    op_group = {}
    if ho_buf:
        ho = C.decode_compact(ho_buf, "hccl_op_info", ho_path)
        pts = pd.DataFrame({"thread_id": ho["thread_id"].astype(np.int64),
                            "ts": ho["timestamp"].astype(np.int64),
                            "group": [str(int(g)) for g in ho["group_name"]]})
        hit = _inside(pts, node.assign(op_begin=node["begin"]), ["op_begin"])
        op_group = {(t, b): g for t, b, g in zip(hit["thread_id"], hit["op_begin"], pts["group"])
                    if b is not None}
    # the last task_track of each HCCL API: the device task of its small tasks
    trk = _inside(pd.DataFrame({"thread_id": tt["thread_id"].astype(np.int64),
                                "ts": tt["timestamp"].astype(np.int64),
                                "stream_id": tt["stream_id"].astype(np.int64),
                                "task_id": tt["task_id"].astype(np.int64)}),
                  hccl, ["api_id"]).dropna(subset=["api_id"])
    last_track = trk.groupby("api_id").last()
    ffts_apis = set()
    ci_buf, ci_path = _host_concat(base, groups, "additional.context_id_info")
    if ci_buf:
        ci = C.decode_additional(ci_buf, "context_id_info", ci_path)
        ci = ci[ci["level"] == 5500]
        hit = _inside(pd.DataFrame({"thread_id": ci["thread_id"].astype(np.int64),
                                    "ts": ci["timestamp"].astype(np.int64)}), hccl, ["api_id"])
        ffts_apis = {int(a) for a in hit["api_id"] if a is not None}
    info = _inside(pd.DataFrame({"thread_id": hi["thread_id"].astype(np.int64),
                                 "ts": hi["timestamp"].astype(np.int64)}), hccl, ["api_id"])
    rows = []
    api_rows = hccl.set_index("api_id")
    for k, a in enumerate(info["api_id"].tolist()):
        if a is None or a not in last_track.index:
            continue
        a = int(a)
        h, trk_row, rec = api_rows.loc[a], last_track.loc[a], hi[k]
        if h["op_item"] is None:
            continue
        ctx = int(rec["ctx_id"]) if a in ffts_apis else C.INVALID_CONTEXT
        key = (int(h["thread_id"]), h["op_begin"])
        rows.append({
            "api_id": a, "stream_id": int(trk_row["stream_id"]), "task_id": int(trk_row["task_id"]),
            "context_id": ctx, "launch_ts": int(trk_row["ts"]),
            "op_name": hashes.get(int(h["op_item"]), str(int(h["op_item"]))),
            "op_start_ns": int(h["op_begin"]),
            "group": op_group.get(key, str(int(rec["group_name"]))),
            "plane_id": int(rec["plane_id"]), "is_master": int(h["is_master"]),
            "task_name": hashes.get(int(rec["item_id"]), str(int(rec["item_id"]))),
            "transport": C.enum_names([rec["transport_type"]], C.TRANSPORT_TYPES)[0],
            "link_type": C.enum_names([rec["link_type"]], C.LINK_TYPES_DB)[0],
            "rdma_type": C.enum_names([rec["rdma_type"]], C.RDMA_TYPES)[0],
            "size_bytes": int(rec["data_size"]), "local_rank": int(rec["local_rank"]),
            "remote_rank": int(rec["remote_rank"]),
        })
    if not rows:
        return None
    # one small task per (HCCL API, context id): a later hccl_info replaces an earlier one
    return pd.DataFrame(rows).drop_duplicates(["api_id", "context_id"], keep="last")


def _emit_comm(dev_df, comm, local_offset_ns: int, data: RankData):
    """Pair device tasks with host HCCL small tasks (same stream, task, context and launching
    task_track), store the COMM_* tables in ``data`` and return the device tasks that are not
    HCCL small tasks (the kernels)."""
    keys = ["stream_id", "task_id", "context_id", "launch_ts"]
    dev = dev_df.reset_index(drop=True)
    # launch_ts: the raw host time of the task_track each device task was matched to
    m = dev.dropna(subset=["launch_ts"]).astype({"launch_ts": "int64"}).reset_index() \
        .merge(comm, on=keys, how="inner")
    if m.empty:
        data.problems.warn(data.source.path, "HCCL small tasks found on the host but none in the "
                                             "device log: no communication tables", rank=data.rank)
        return dev_df
    small = m.assign(start_ns=m["timestamp"], dur_ns=m["dur_ns"],
                     op_start_ns=m["op_start_ns"] + local_offset_ns)
    tables = hccl_tasks.comm_tables(small[list(hccl_tasks.REQUIRED) + ["op_start_ns"]],
                                    data.rank if data.rank is not None else -1)
    data.tables.update(tables)
    return dev.drop(index=m["index"].unique())


__all__ = ["read", "parse_task_desc", "parse_graph_desc", "RecordError"]
