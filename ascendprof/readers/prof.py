"""Reader for stand-alone CANN ``PROF_*`` directories with exported output (kind ``prof``).

Two export layouts (spec §0, §C, §D.6):

1. ``mindstudio_profiler_output/`` (CANN text export, files ``<module>[_slice_<n>]_<ts>.csv|json``):
   ``op_summary_*`` -> KERNELS (same columns as kernel_details after renaming, §C.1, parsed by
   :func:`ascendprof.readers.ascend_output.read_kernel_details`), ``task_time_*`` -> KERNELS when
   there is no op_summary (§C.2, no op type), ``op_statistic_*`` -> OP_STATISTIC,
   ``api_statistic_*`` -> API_STATISTIC, ``step_trace_*`` -> ITERATIONS (§C.5), ``msprof_*.json``
   (every slice) -> TIMELINE (§C.8, parsed by :mod:`ascendprof.readers.trace_view`).
   ``communication_statistic_*`` has no table (the per-op data comes from ``analyze/``).
   ``analyze/communication*.json`` -> COMM_* via :mod:`ascendprof.readers.communication`.
2. Older CANN (2023, the MindSpore-driven jobs in the shared data): per-iteration timeline JSON in
   ``device_<id>/timeline/<module>_<device>_<model>_<iteration>.json``: ``task_time_*`` ->
   KERNELS (one X event per device task, ``args`` Task Type / Stream Id / Task Id, step =
   iteration), ``msprof_*`` -> TIMELINE (``hccl_*`` when there is no msprof file),
   ``step_trace_*`` -> ITERATIONS (every such file repeats all iterations; rows are de-duplicated).

Time base: these older files write ``ts`` as float *monotonic* microseconds. When a ``ts`` is
below 10^15 us (before 2001 as Unix time, so not wall clock), it is moved to local wall-clock
ns with ``device_<id>/start_info.<id>``: ``t_local = t_mono + collectionTimeBegin(us)*1000 -
clockMonotonicRaw(ns)`` (spec §D.6). Without start_info the monotonic base is kept (warning).
Float ``ts`` are converted through their shortest decimal text, so no binary rounding is added.
"""

from __future__ import annotations

import os
import re
from collections import defaultdict
from decimal import Decimal
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ascendprof.model import schemas as S
from ascendprof.model.errors import InputError, shielded
from ascendprof.model.rankdata import RankData
from ascendprof.model.units import us_column_to_ns
from ascendprof.readers import ascend_output as ao
from ascendprof.readers.ascend_output import assign_steps
from ascendprof.readers.communication import read_communication, read_matrix
from ascendprof.readers.trace_view import read_trace_view
from ascendprof.sysio.textio import METADATA_MAX_BYTES, read_csv, read_json

OUT = "mindstudio_profiler_output"
#: below this many us a timestamp cannot be Unix wall-clock time (it is monotonic)
_WALL_CLOCK_MIN_US = 10 ** 15
_TIMELINE_RE = re.compile(r"^(?P<module>[a-z_]+?)_(?P<dev>\d+)_(?P<model>\d+)_(?P<iter>\d+)\.json$")
_OUT_RE = re.compile(r"^(?P<module>[a-z_]+?)(?:_slice_(?P<slice>\d+))?_(?P<ts>\d{1,20})(?:_\d+)?"
                     r"\.(?P<ext>csv|json)$")
_MS_OP_RE = re.compile(r"([^/]+)-op\d+$")
_TRACKS = {"Overlap Analysis": "overlap", "HCCL": "communication", "Communication": "communication",
           "Ascend Hardware": "hardware", "Step Trace": "step"}


def read(source, options=None) -> RankData:  # noqa: ARG001 - one signature for all readers
    """Read one ``PROF_*`` source into a :class:`RankData` (tables per the module doc).

    A damaged file is recorded in ``problems`` and only its tables are missing. Raises
    :class:`InputError` when the rank is unknown or no table at all could be read.
    """
    base = Path(source.path)
    if source.rank is None:  # as ascend_output: tables of no rank would mix into the others
        raise InputError(base, "rank unknown; not read")
    rank = source.rank
    data = RankData(source=source, rank=rank)
    by_dir: dict[str, list[str]] = defaultdict(list)
    for f in source.files:
        by_dir[os.path.dirname(f)].append(os.path.basename(f))
    if by_dir.get(OUT):
        _read_export(base / OUT, sorted(by_dir[OUT]), data)
    dev = f"device_{source.device_id}" if source.device_id is not None else None
    tl_dir = f"{dev}/timeline" if dev else next((d for d in by_dir if d.endswith("/timeline")), None)
    if tl_dir and by_dir.get(tl_dir) and S.KERNELS not in data.tables:
        offset = _mono_to_local_offset(base, source, data)
        _read_timeline_dir(base / tl_dir, sorted(by_dir[tl_dir]), data, offset)
    _read_analyze(base, by_dir.get("analyze", []), data)
    info = next((f for f in source.files if re.match(r"^device_\d+/info\.json\.\d+$", f)), None)
    if info:
        try:
            data.meta["prof_info"] = read_json(base / info, METADATA_MAX_BYTES)
        except InputError as e:
            data.problems.add_error(e, rank=rank, affects=("metadata",))
    if S.KERNELS in data.tables and data.has(S.ITERATIONS):
        data.tables[S.KERNELS] = assign_steps(data.tables[S.KERNELS], _windows(data))
    if not data.tables:
        raise InputError(source.path, "no readable exported data in this PROF_ directory")
    return data


def _windows(data: RankData) -> pa.Table:
    it = data.tables[S.ITERATIONS]
    return S.conform(S.STEPS, it.select(["rank", "step", "start_ns", "end_ns"]))


def _guard(data: RankData, path: Path, affects: tuple[str, ...], fn, *args):
    try:
        return fn(*args)
    except InputError as e:
        data.problems.add_error(e, rank=data.rank, affects=affects)
        return None


# ----------------------------------------------------------------- mindstudio_profiler_output

def _read_export(out: Path, names: list[str], data: RankData) -> None:
    groups: dict[str, list[tuple[int, str]]] = defaultdict(list)
    for n in names:
        m = _OUT_RE.match(n)
        if m:
            groups[m.group("module")].append((int(m.group("slice") or 0), n))
    files = {k: [out / n for _, n in sorted(v)] for k, v in groups.items()}
    parts = [t for p in files.get("op_summary", [])
             if (t := _guard(data, p, ("op_statistics", "step_breakdown"),
                             ao.read_kernel_details, p, data.rank)) is not None]
    if not parts and files.get("task_time"):
        parts = [t for p in files["task_time"]
                 if (t := _guard(data, p, ("op_statistics",), read_task_time_csv, p, data.rank))
                 is not None]
    if parts:
        data.tables[S.KERNELS] = pa.concat_tables(parts, promote_options="permissive")
    for module, reader, name in (("op_statistic", ao.read_op_statistic, S.OP_STATISTIC),
                                 ("api_statistic", ao.read_api_statistic, S.API_STATISTIC),
                                 ("step_trace", read_step_trace_csv, S.ITERATIONS)):
        got = [t for p in files.get(module, [])
               if (t := _guard(data, p, (), reader, p, data.rank)) is not None]
        if got:
            data.tables[name] = pa.concat_tables(got)
    timelines = []
    for p in files.get("msprof", []):
        if p.suffix == ".json":
            t = _guard(data, p, ("step_breakdown",), read_trace_view, p, data.rank)
            if t is not None:
                timelines.append(t[S.TIMELINE])
    if timelines:
        data.tables[S.TIMELINE] = pa.concat_tables(timelines, promote_options="permissive")


def read_task_time_csv(path: Path, rank: int) -> pa.Table:
    """``task_time_*.csv`` (§C.2: ``Device_id, kernel_name, kernel_type, stream_id, task_id,
    task_time(us), task_start(us), task_stop(us)``) -> KERNELS (no op type). Raises InputError."""
    return _named(_task_time_csv, path, rank)


def _named(read, path: Path, rank: int) -> pa.Table:
    """``read(path, rank)`` with a ValueError of the units (a time cell that is not a number or
    out of range) as an InputError naming the file."""
    try:
        return read(path, rank)
    except ValueError as e:
        raise InputError(path, str(e)) from None


def _task_time_csv(path: Path, rank: int) -> pa.Table:
    raw = read_csv(path, required=("kernel_name", "task_time(us)", "task_start(us)"))
    cols = {"rank": [rank] * raw.num_rows,
            "name": raw.column("kernel_name"),
            "start_ns": us_column_to_ns(raw.column("task_start(us)")),
            "dur_ns": us_column_to_ns(raw.column("task_time(us)"))}
    for src, dst in (("kernel_type", "accelerator_core"),):
        if src in raw.column_names:
            cols[dst] = raw.column(src)
    for src, dst in (("Device_id", "device_id"), ("stream_id", "stream_id"), ("task_id", "task_id")):
        if src in raw.column_names:
            try:
                cols[dst] = raw.column(src).cast(pa.int64())
            except pa.ArrowInvalid:
                raise InputError(path, f"column {src!r} is not an integer") from None
    return S.conform(S.KERNELS, pa.table(cols))


def read_step_trace_csv(path: Path, rank: int) -> pa.Table:
    """``step_trace_*.csv`` (§C.5) -> ITERATIONS: end = Iteration End, start = end - Iteration
    Time, interval = Data Aug Bound, fp+bp = FP to BP Time, tail = Iteration Refresh (us -> ns).
    Raises InputError."""
    return _named(_step_trace_csv, path, rank)


def _step_trace_csv(path: Path, rank: int) -> pa.Table:
    need = ("Iteration ID", "Iteration End(us)", "Iteration Time(us)", "FP to BP Time(us)",
            "Iteration Refresh(us)", "Data Aug Bound(us)")
    raw = read_csv(path, required=need)
    end = us_column_to_ns(raw.column("Iteration End(us)"))
    dur = us_column_to_ns(raw.column("Iteration Time(us)"))
    try:
        step = raw.column("Iteration ID").cast(pa.int32())
    except pa.ArrowInvalid:
        raise InputError(path, "column 'Iteration ID' is not an integer") from None
    return S.conform(S.ITERATIONS, pa.table({
        "rank": [rank] * raw.num_rows, "step": step, "end_ns": end,
        "start_ns": pc.subtract(end, dur),
        "iteration_interval_ns": us_column_to_ns(raw.column("Data Aug Bound(us)")),
        "fp_bp_ns": us_column_to_ns(raw.column("FP to BP Time(us)")),
        "tail_ns": us_column_to_ns(raw.column("Iteration Refresh(us)"))}))


# ----------------------------------------------------------------- analyze/communication*.json

def _read_analyze(base: Path, names: list[str], data: RankData) -> None:
    if not names:
        return

    if "communication.json" in names:
        got = _guard(data, base, ("communication",), read_communication,
                     base / "analyze" / "communication.json", data.rank, data.problems)
        if got:
            data.tables.update(got)
    if "communication_matrix.json" in names:
        got = _guard(data, base, ("communication_matrix",), read_matrix,
                     base / "analyze" / "communication_matrix.json", data.rank, data.problems)
        if got is not None:
            data.tables[S.COMM_LINKS] = got


# ----------------------------------------------------------------- per-iteration timeline JSON

def _mono_to_local_offset(base: Path, source, data: RankData) -> int | None:
    """ns to add to a monotonic timestamp to get local wall-clock time (§D.6), from the
    device's ``start_info.<id>`` (else ``host/start_info``); None when neither is usable."""
    cands = []
    if source.device_id is not None:
        cands.append(base / f"device_{source.device_id}" / f"start_info.{source.device_id}")
    cands.append(base / "host" / "start_info")
    for p in cands:
        if not p.is_file():
            continue
        try:
            info = read_json(p, METADATA_MAX_BYTES)
            off = int(Decimal(str(info["collectionTimeBegin"])) * 1000) - int(info["clockMonotonicRaw"])
        except InputError as e:
            data.problems.add_error(e, rank=data.rank, affects=("step_breakdown",))
            continue
        except (KeyError, TypeError, ValueError, ArithmeticError):
            data.problems.add(p, "start_info lacks collectionTimeBegin / clockMonotonicRaw",
                              rank=data.rank, severity="warning")
            continue
        if off < 0:
            data.problems.warn(p, "negative monotonic-to-local offset; times kept monotonic",
                               rank=data.rank)
            return None
        return off
    return None


def ts_to_ns(value, offset: int | None) -> int:
    """One trace ``ts`` (us, number or text) -> int ns; monotonic values (< 10^15 us) get
    ``offset`` added when known. Raises ValueError for a non-number."""
    d = Decimal(value.strip()) if isinstance(value, str) else Decimal(repr(float(value)))
    ns = int((d * 1000).to_integral_value())
    if offset is not None and d < _WALL_CLOCK_MIN_US:
        ns += offset
    return ns


def _dur_ns(v) -> int:
    return int((Decimal(repr(float(v))) * 1000).to_integral_value()) if v is not None else 0


def _args(event: dict) -> dict:
    """The event's ``args`` object ({} when absent or not an object)."""
    a = event.get("args")
    return a if isinstance(a, dict) else {}


def _load_events(path: Path) -> list:
    events = read_json(path)
    if not isinstance(events, list):
        raise InputError(path, "expected a JSON array of trace events")
    return events


@shielded("trace event")
def timeline_rows(path: Path, rank: int, offset: int | None, step: int | None) -> pa.Table:
    """X events of one msprof/hccl timeline JSON -> TIMELINE (tracks as in trace_view: overlap,
    communication, hardware; ``Iteration N`` of the step trace -> track ``step``). Raises
    InputError on invalid JSON or a non-numeric ts."""
    events = _load_events(path)
    procs, threads = {}, {}
    for e in events:
        if isinstance(e, dict) and e.get("ph") == "M":
            if e.get("name") == "process_name":
                procs[e.get("pid")] = str(_args(e).get("name"))
            elif e.get("name") == "thread_name":
                threads[(e.get("pid"), e.get("tid"))] = str(_args(e).get("name"))
    cols = defaultdict(list)
    for e in events:
        if not isinstance(e, dict) or e.get("ph") != "X":
            continue
        proc = procs.get(e.get("pid"), "")
        track = _TRACKS.get(proc)
        args = _args(e)
        name = str(e.get("name", ""))
        thread = threads.get((e.get("pid"), e.get("tid")), str(e.get("tid")))
        if track in ("hardware", "step") and e.get("cat") == "Iteration Time":
            track = "step"
        elif track in ("step", None) or thread.startswith("Step Trace"):
            continue  # FP_BP / Refresh / Reduce markers of the step trace are not device tasks
        try:
            start = ts_to_ns(e["ts"], offset)
            dur = _dur_ns(e.get("dur"))
        except (KeyError, ValueError, TypeError, ArithmeticError):
            raise InputError(path, f"event without numeric ts/dur: {name[:60]}") from None
        cols["track"].append(track)
        cols["process"].append(proc)
        cols["thread"].append(thread)
        cols["name"].append(name)
        cols["start_ns"].append(start)
        cols["dur_ns"].append(dur)
        tt = args.get("Task Type") or args.get("task type")
        cols["task_type"].append(str(tt) if tt is not None else None)
        m = re.match(r"^Iteration (\d+)$", name)
        cols["step"].append(int(m.group(1)) if track == "step" and m else step)
    cols["rank"] = [rank] * len(cols["name"])
    return S.from_lists(S.TIMELINE, cols, path)


@shielded("trace event")
def task_time_kernels(path: Path, rank: int, device_id: int | None, model_id: int | None,
                      step: int | None, offset: int | None) -> pa.Table:
    """``task_time_<dev>_<model>_<iter>.json`` -> KERNELS: one row per Ascend Hardware X event
    with ``args["Task Type"]`` (name, Accelerator Core = Task Type, stream / task id; op type =
    the MindSpore op name's type when the name ends in ``-op<N>``). Raises InputError."""
    events = _load_events(path)
    cols = defaultdict(list)
    for e in events:
        if not isinstance(e, dict) or e.get("ph") != "X":
            continue
        args = _args(e)
        if "Task Type" not in args:
            continue
        name = str(e.get("name", ""))
        try:
            cols["start_ns"].append(ts_to_ns(e["ts"], offset))
            cols["dur_ns"].append(_dur_ns(e.get("dur")))
        except (KeyError, ValueError, TypeError, ArithmeticError):
            raise InputError(path, f"task without numeric ts/dur: {name[:60]}") from None
        m = _MS_OP_RE.search(name)
        cols["name"].append(name)
        cols["op_type"].append(m.group(1) if m else None)
        cols["accelerator_core"].append(str(args["Task Type"]))
        cols["stream_id"].append(args.get("Stream Id"))
        cols["task_id"].append(args.get("Task Id"))
    n = len(cols["name"])
    if not n:
        return S.empty(S.KERNELS)
    cols.update(rank=[rank] * n, device_id=[device_id] * n, model_id=[model_id] * n, step=[step] * n)
    return S.from_lists(S.KERNELS, cols, path)


@shielded("trace event")
def step_trace_iterations(path: Path, rank: int, offset: int | None) -> pa.Table:
    """``step_trace_*.json`` -> ITERATIONS from its ``Iteration N`` events (args FP Start, BP End,
    Iteration End, us). Window = [previous Iteration End (else the event ts), Iteration End];
    interval = FP Start - previous Iteration End (0 for the first iteration seen, as MindSpore
    does); fp+bp = BP End - FP Start; tail = Iteration End - BP End. Raises InputError."""
    rows = {}
    for e in _load_events(path):
        if not isinstance(e, dict) or e.get("ph") != "X" or e.get("cat") != "Iteration Time":
            continue
        a = _args(e)
        try:
            it = int(a["Iteration ID"])
            rows[it] = (ts_to_ns(e["ts"], offset), ts_to_ns(a["FP Start"], offset),
                        ts_to_ns(a["BP End"], offset), ts_to_ns(a["Iteration End"], offset))
        except (KeyError, ValueError, TypeError, ArithmeticError):
            raise InputError(path, f"iteration event lacks numeric fields: {str(e)[:80]}") from None
    cols = defaultdict(list)
    prev_end = None
    for it in sorted(rows):
        ts, fp, bp, end = rows[it]
        start = prev_end if prev_end is not None and prev_end <= fp else ts
        cols["step"].append(it)
        cols["start_ns"].append(start)
        cols["end_ns"].append(end)
        cols["iteration_interval_ns"].append(fp - prev_end if prev_end is not None and prev_end <= fp else 0)
        cols["fp_bp_ns"].append(bp - fp)
        cols["tail_ns"].append(end - bp)
        prev_end = end
    cols["rank"] = [rank] * len(cols["step"])
    return S.from_lists(S.ITERATIONS, cols, path)


def _read_timeline_dir(tl: Path, names: list[str], data: RankData, offset: int | None) -> None:
    if offset is None:
        data.problems.warn(tl, "no start_info: timeline times stay on the monotonic clock",
                           rank=data.rank)
    by_module: dict[str, list[tuple[int, int, int, str]]] = defaultdict(list)
    for n in names:
        m = _TIMELINE_RE.match(n)
        if m:
            by_module[m.group("module")].append(
                (int(m.group("iter")), int(m.group("dev")), int(m.group("model")), n))
    for v in by_module.values():
        v.sort()
    kern = [t for it, dev, model, n in by_module.get("task_time", [])
            if (t := _guard(data, tl / n, ("op_statistics", "step_breakdown"), task_time_kernels,
                            tl / n, data.rank, dev, model, it, offset)) is not None]
    if kern:
        data.tables[S.KERNELS] = pa.concat_tables(kern)
    source = "msprof" if by_module.get("msprof") else "hccl"
    tls = [t for it, _, _, n in by_module.get(source, [])
           if (t := _guard(data, tl / n, ("step_breakdown",), timeline_rows, tl / n, data.rank,
                           offset, it)) is not None]
    if tls:
        t = pa.concat_tables(tls)
        data.tables[S.TIMELINE] = _dedup_steps(t)
    its = [t for _, _, _, n in by_module.get("step_trace", [])
           if (t := _guard(data, tl / n, ("cluster_step_trace",), step_trace_iterations,
                           tl / n, data.rank, offset)) is not None]
    if its:
        t = pa.concat_tables(its)
        _, first = np.unique(t.column("step").to_numpy(zero_copy_only=False), return_index=True)
        data.tables[S.ITERATIONS] = t.take(pa.array(np.sort(first)))


def _dedup_steps(t: pa.Table) -> pa.Table:
    """Each per-iteration msprof file may repeat the step-trace iteration events; keep one."""
    is_step = pc.equal(t.column("track"), "step")
    if not pc.any(is_step).as_py():
        return t
    steps = t.filter(is_step)
    _, first = np.unique(steps.column("name").to_numpy(zero_copy_only=False), return_index=True)
    return pa.concat_tables([t.filter(pc.invert(is_step)), steps.take(pa.array(np.sort(first)))])
