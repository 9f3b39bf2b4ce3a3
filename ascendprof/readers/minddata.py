"""Parsers for MindSpore's data preparation (minddata) profiling files, shared by the legacy
MindSpore reader (``profiler/`` directories) and the MindSpore text reader
(``*_ascend_ms/ASCEND_PROFILER_OUTPUT``). Seeds 000 and 004 ("数据准备性能分析"); layouts as
MindSpore's profiler writes them and MindInsight / MindSpore's MinddataProfilingAnalyzer read
them (mindspore/profiler/parser/minddata_analyzer.py, minddata_parser.py):

- ``minddata_pipeline_raw_{rank}.csv``: ``op_id, op_type, num_workers, output_queue_size`` (the
  sampled sizes, a list ``[0, 2]``), ``output_queue_average_size, output_queue_length``
  (capacity), ``output_queue_usage_rate`` (average size / capacity, 0..1), ``sample_interval``
  (ms), ``parent_id, children_id`` (a list ``[1]`` or empty) -> DATASET_OPS;
- ``pipeline_profiling_{rank}.json``: ``{"op_info": [{"op_id", "op_type", "num_workers",
  "children", "metrics": {"output_queue": {"length", "size": [...]}}|null}], "sampling_interval"}``
  -> DATASET_OPS (when the raw CSV is absent);
- ``minddata_pipeline_summary_{rank}.json``: per op lists ``op_ids, op_names, num_workers,
  queue_average_size, queue_utilization_pct, queue_empty_freq_pct, children_ids, parent_id,
  avg_cpu_pct`` (MindSpore >= 1.6; its .csv holds the same lists, one per row) -> DATASET_OPS;
- ``minddata_cpu_utilization_{rank}.json``: ``op_info[{op_id, metrics: {user_utilization[],
  sys_utilization[]}}]`` -> ``avg_cpu_pct`` of DATASET_OPS (mean of user + sys, %);
- ``device_queue_profiling_{rank}.txt`` (sink mode) or ``dataset_iterator_profiling_{rank}.txt``:
  lines ``type extra batch value timestamp``; type 0 = a time (extra 0 pipeline time, 1 push time,
  2 batch time; value ms), type 1 = the host connector's size when the batch was taken (extra =
  capacity) -> DATASET_QUEUE rows of queue ``host``;
- ``minddata_aicpu_{rank}.txt``: lines ``GetNext_dequeue_wait start end queue_size`` — the
  device queue's size when the device took a batch; start / end in us (MindInsight) -> DATASET_QUEUE
  rows of queue ``device``.

Every parser raises :class:`~ascendprof.model.errors.InputError` naming the file (and line) when
it cannot make sense of it.
"""

from __future__ import annotations

import ast
import csv
import io
import math
import re
from pathlib import Path

import pyarrow as pa

from ascendprof.model import schemas as S
from ascendprof.model.errors import InputError
from ascendprof.sysio.textio import read_json, read_regular

_TIME_KIND = {0: "pipeline_time", 1: "push_time", 2: "batch_time"}


def _text(path: Path) -> str:
    """The file's text, line endings as Python's text mode gives them (a lone CR ends a line).
    Raises InputError when it is not a regular file (a FIFO is never opened: it would block),
    cannot be read or is not UTF-8."""
    try:
        data = read_regular(Path(path))
        return data.decode("utf-8-sig").replace("\r\n", "\n").replace("\r", "\n")
    except UnicodeDecodeError as e:
        raise InputError(path, "not UTF-8 text", where=e.start) from None


def _whole(v) -> int:
    """``v`` (an int, a float or their text) as an int when it is a whole number ("3", 3.0,
    "3.0", "3e2"). Raises ValueError for a fraction ("1.5": int() would cut it to 1, putting a
    damaged row on another op), inf, nan, text and TypeError for other types."""
    if isinstance(v, bool):
        raise TypeError("a boolean is not a number")
    if isinstance(v, int):
        return v
    if isinstance(v, str):
        try:
            return int(v)
        except ValueError:
            pass
    f = float(v)
    if not f.is_integer():
        raise ValueError(f"not a whole number: {v!r}")
    return int(f)


def _num(path, text, line, cast=float):
    """``text`` (a CSV field or a word of a text line) as ``cast`` (float or int); None when
    blank. Raises InputError naming the file and line: 'not a number' for text, inf or nan,
    'not an integer' when ``cast`` is int and the number has a fraction ("1.5")."""
    t = str(text).strip()
    if t == "":
        return None
    try:
        if cast is not int:
            return cast(t)
        if not math.isfinite(float(t)):
            raise ValueError(t)
    except (TypeError, ValueError, OverflowError):
        raise InputError(path, f"not a number: {text!r}", where=f"line {line}") from None
    try:
        return _whole(t)
    except ValueError:
        raise InputError(path, f"not an integer: {text!r}", where=f"line {line}") from None


def _int_list(path, text, line) -> list[int]:
    """A list field ("[0, 2]", "[1]", "1" or blank) -> its ints. Raises InputError naming the
    file and line when it is not a list of numbers, or holds a fraction (a "[1.5]" child or
    queue size is no op id or size)."""
    t = str(text).strip()
    if t in ("", "[]"):
        return []
    try:
        v = ast.literal_eval(t)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        raise InputError(path, f"not a list of numbers: {text[:40]!r}", where=f"line {line}") \
            from None
    v = v if isinstance(v, (list, tuple)) else [v]
    try:
        return [_whole(x) for x in v]
    except (TypeError, ValueError, OverflowError):
        raise InputError(path, f"not a list of {_kind(v)}: {text[:40]!r}",
                         where=f"line {line}") from None


def _kind(values) -> str:
    """What a list that :func:`_whole` refused should have held: "integers" when all its items
    are finite numbers (one has a fraction), else "numbers"."""
    return "integers" if all(type(x) is int or (type(x) is float and math.isfinite(x))
                             for x in values) else "numbers"


def _op_row(rank, op_id, op_type, workers, parent, children, length, sizes, avg=None, usage=None,
            empty=None, cpu=None, source=""):
    if sizes:
        avg = sum(sizes) / len(sizes) if avg is None else avg
        empty = 100.0 * sum(1 for x in sizes if x == 0) / len(sizes) if empty is None else empty
    if usage is None and avg is not None and length:
        usage = 100.0 * avg / length
    return {"rank": rank, "op_id": op_id, "op_type": op_type, "num_workers": workers,
            "parent_id": parent, "children": ",".join(str(c) for c in children or []),
            "queue_length": length, "queue_avg_size": avg, "queue_usage_pct": usage,
            "queue_empty_pct": empty, "queue_samples": len(sizes) if sizes else None,
            "avg_cpu_pct": cpu, "source": source}


def _table(rows: list[dict], path) -> pa.Table:
    cols = {f.name: [r.get(f.name) for r in rows] for f in S.SCHEMAS[S.DATASET_OPS]}
    return S.from_lists(S.DATASET_OPS, cols, path)


def read_pipeline_raw(path: Path, rank: int) -> pa.Table:
    """``minddata_pipeline_raw_{rank}.csv`` -> DATASET_OPS, one row per CSV row (usage rate
    0..1 -> %). Raises InputError naming the file (and the line) when it is not CSV text, has
    no row or lacks op_id / op_type / output_queue_length, or a value is not a number — or not
    an integer where the column holds ids, counts or sizes (an op id "1.5" is not op 1)."""
    try:
        rows = list(csv.reader(io.StringIO(_text(path))))
    except csv.Error as e:  # e.g. a field over the csv module's 128 KiB limit
        raise InputError(path, f"not readable as CSV: {e}") from None
    rows = [r for r in rows if r and any(c.strip() for c in r)]
    if not rows:
        raise InputError(path, "empty file")
    head = [h.strip() for h in rows[0]]
    need = ("op_id", "op_type", "output_queue_length")
    missing = [c for c in need if c not in head]
    if missing:
        raise InputError(path, f"missing column(s) {', '.join(missing)}")
    ix = {h: i for i, h in enumerate(head)}

    def get(row, col):
        i = ix.get(col)
        return row[i] if i is not None and i < len(row) else ""

    out = []
    for n, row in enumerate(rows[1:], start=2):
        rate = _num(path, get(row, "output_queue_usage_rate"), n)
        out.append(_op_row(
            rank, _num(path, get(row, "op_id"), n, int), get(row, "op_type").strip(),
            _num(path, get(row, "num_workers"), n, int), _num(path, get(row, "parent_id"), n, int),
            _int_list(path, get(row, "children_id"), n),
            _num(path, get(row, "output_queue_length"), n, int),
            _int_list(path, get(row, "output_queue_size"), n),
            avg=_num(path, get(row, "output_queue_average_size"), n),
            usage=None if rate is None else rate * 100.0, source=Path(path).name))
    return _table(out, path)


def read_pipeline_profiling(path: Path, rank: int) -> pa.Table:
    """``pipeline_profiling_{rank}.json`` -> DATASET_OPS, one row per op_info entry (parents
    from the children lists). Raises InputError naming the file when it has no op_info list, an
    entry has no op_id, an op_id is not an integer (1.5 is not op 1) or a queue size is not a
    whole number."""
    obj = read_json(path)
    ops = obj.get("op_info") if isinstance(obj, dict) else None
    if not isinstance(ops, list):
        raise InputError(path, "no op_info list")
    parent = {}
    for op in ops:
        if isinstance(op, dict):
            for c in op.get("children") or []:
                parent[c] = op.get("op_id")
    out = []
    for op in ops:
        if not isinstance(op, dict) or op.get("op_id") is None:
            raise InputError(path, f"op_info entry without op_id: {str(op)[:60]}")
        q = ((op.get("metrics") or {}).get("output_queue") or {})
        sizes = q.get("size") or []
        try:
            op_id = _whole(op["op_id"])
        except (TypeError, ValueError, OverflowError):
            raise InputError(path, f"op_id is not an integer: {op['op_id']!r}") from None
        try:
            sizes = [_whole(x) for x in sizes]
        except (TypeError, ValueError, OverflowError):
            raise InputError(path, f"op {op_id}: queue sizes are not "
                                   f"{_kind(sizes) if isinstance(sizes, list) else 'numbers'}"
                             ) from None
        out.append(_op_row(rank, op_id, str(op.get("op_type", "")), op.get("num_workers"),
                           parent.get(op_id), op.get("children") or [], q.get("length"), sizes,
                           source=Path(path).name))
    return _table(out, path)


def read_pipeline_summary(path: Path, rank: int) -> pa.Table:
    """``minddata_pipeline_summary_{rank}.json`` -> DATASET_OPS (-1 means "no value")."""
    obj = read_json(path)
    if not isinstance(obj, dict) or not isinstance(obj.get("op_ids"), list):
        raise InputError(path, "no op_ids list")

    def col(key):
        v = obj.get(key)
        return v if isinstance(v, list) and len(v) == len(obj["op_ids"]) else [None] * len(
            obj["op_ids"])

    def val(x):
        return None if x is None or x == -1 else x

    out = []
    for op_id, name, workers, avg, usage, empty, children, parent, cpu in zip(
            obj["op_ids"], col("op_names"), col("num_workers"), col("queue_average_size"),
            col("queue_utilization_pct"), col("queue_empty_freq_pct"), col("children_ids"),
            col("parent_id"), col("avg_cpu_pct")):
        out.append(_op_row(rank, op_id, name, workers, val(parent), children or [], None, [],
                           avg=val(avg), usage=val(usage), empty=val(empty), cpu=val(cpu),
                           source=Path(path).name))
    return _table(out, path)


def read_cpu_utilization(path: Path) -> dict[int, float]:
    """``minddata_cpu_utilization_{rank}.json`` -> {op_id: mean(user + sys) %} (op_id -1, the
    pipeline's own threads, left out)."""
    obj = read_json(path)
    ops = obj.get("op_info") if isinstance(obj, dict) else None
    if not isinstance(ops, list):
        raise InputError(path, "no op_info list")
    out = {}
    for op in ops:
        if not isinstance(op, dict) or op.get("op_id") in (None, -1):
            continue
        m = op.get("metrics") or {}
        user, sys_ = m.get("user_utilization") or [], m.get("sys_utilization") or []
        try:
            both = [float(u) + float(s) for u, s in zip(user, sys_)]
        except (TypeError, ValueError):
            raise InputError(path, f"op {op.get('op_id')}: utilization is not numbers") from None
        if both:
            out[int(op["op_id"])] = sum(both) / len(both)
    return out


def with_cpu(ops: pa.Table, cpu: dict[int, float]) -> pa.Table:
    """DATASET_OPS with ``avg_cpu_pct`` filled from :func:`read_cpu_utilization` where empty."""
    if not cpu:
        return ops
    have = ops["avg_cpu_pct"].to_pylist()
    ids = ops["op_id"].to_pylist()
    vals = [h if h is not None else cpu.get(i) for h, i in zip(have, ids)]
    return ops.set_column(ops.schema.get_field_index("avg_cpu_pct"), "avg_cpu_pct",
                          pa.array(vals, pa.float64()))


def read_device_queue(path: Path, rank: int) -> pa.Table:
    """``device_queue_profiling_{rank}.txt`` / ``dataset_iterator_profiling_{rank}.txt`` ->
    DATASET_QUEUE rows of queue ``host``."""
    cols = {k: [] for k in ("step", "size", "capacity", "value_ms", "kind")}
    for n, line in enumerate(_text(path).splitlines(), start=1):
        parts = line.split()
        if not parts:
            continue
        if len(parts) < 4:
            raise InputError(path, f"expected 'type extra batch value [timestamp]', got {line!r}",
                             where=f"line {n}")
        typ, extra, batch = (_num(path, p, n, int) for p in parts[:3])
        if typ == 0:
            kind = _TIME_KIND.get(extra)
            if kind is None:
                continue
            cols["kind"].append(kind)
            cols["value_ms"].append(_num(path, parts[3], n))
            cols["size"].append(None)
            cols["capacity"].append(None)
        elif typ == 1:
            cols["kind"].append("size")
            cols["value_ms"].append(None)
            cols["size"].append(_num(path, parts[3], n, int))
            cols["capacity"].append(extra)
        else:
            continue
        cols["step"].append(batch)
    k = len(cols["step"])
    cols.update(rank=[rank] * k, queue=["host"] * k)
    return S.from_lists(S.DATASET_QUEUE, cols, path)


def read_minddata_aicpu(path: Path, rank: int) -> pa.Table:
    """``minddata_aicpu_{rank}.txt`` -> DATASET_QUEUE rows of queue ``device`` (one per GetNext,
    numbered from 1 in file order; start / end us -> ns)."""
    cols = {k: [] for k in ("step", "size", "start_ns", "end_ns", "kind")}
    for n, line in enumerate(_text(path).splitlines(), start=1):
        parts = line.split()
        if not parts or not parts[0].startswith("GetNext"):
            continue  # the header line "node_name start_time end_time queue_size", others
        if len(parts) < 4:
            raise InputError(path, f"expected 'GetNext... start end queue_size', got {line!r}",
                             where=f"line {n}")
        cols["step"].append(len(cols["step"]) + 1)
        cols["start_ns"].append(round(_num(path, parts[1], n) * 1000))
        cols["end_ns"].append(round(_num(path, parts[2], n) * 1000))
        cols["size"].append(_num(path, parts[3], n, int))
        cols["kind"].append("size")
    k = len(cols["step"])
    cols.update(rank=[rank] * k, queue=["device"] * k)
    return S.from_lists(S.DATASET_QUEUE, cols, path)


def read_all(names: dict[str, Path], rank: int, problems, affects=("data_preparation",)
             ) -> dict[str, pa.Table]:
    """The rank's minddata tables from ``names`` (file name -> path; other files ignored):
    {DATASET_OPS, DATASET_QUEUE: table}, each only when a file for it exists and parses. The
    pipeline comes from the summary JSON, else the raw CSV, else pipeline_profiling JSON; the
    host queue from device_queue_profiling, else dataset_iterator_profiling (as MindSpore's
    analyzer chooses). A damaged file is recorded in ``problems`` and skipped."""
    r = re.escape(str(rank))

    def pick(pattern: str) -> Path | None:
        rx = re.compile(pattern)
        hits = sorted(n for n in names if rx.match(n))
        return names[hits[0]] if hits else None

    def attempt(fn, *args):
        try:
            return fn(*args)
        except InputError as e:
            problems.add_error(e, rank=rank, affects=affects)
            return None

    out: dict[str, pa.Table] = {}
    for pattern, fn in ((rf"^minddata_pipeline_summary_{r}\.json$", read_pipeline_summary),
                        (rf"^minddata_pipeline_raw_{r}\.csv$", read_pipeline_raw),
                        (rf"^pipeline_profiling_{r}\.json$", read_pipeline_profiling)):
        path = pick(pattern)
        t = attempt(fn, path, rank) if path else None
        if t is not None:
            path = pick(rf"^minddata_cpu_utilization_{r}\.json$")
            cpu = attempt(read_cpu_utilization, path) if path else None
            out[S.DATASET_OPS] = with_cpu(t, cpu or {})
            break
    parts = []
    for pattern in (rf"^device_queue_profiling_{r}\.txt$",
                    rf"^dataset_iterator_profiling_{r}\.txt$"):
        path = pick(pattern)
        t = attempt(read_device_queue, path, rank) if path else None
        if t is not None:
            parts.append(t)
            break
    path = pick(rf"^minddata_aicpu_{r}\.txt$")
    t = attempt(read_minddata_aicpu, path, rank) if path else None
    if t is not None:
        parts.append(t)
    if parts:
        out[S.DATASET_QUEUE] = pa.concat_tables(parts)
    return out


def memory_capacity_mb(path: Path) -> float | None:
    """``memory_usage_summary_{rank}.json`` (MindSpore 1.x memory profiling): ``capacity`` is the
    device memory in GiB (MindSpore divides total_mem by 1024^3) -> MB (2^20 B); None when it
    is 0 or less. Raises InputError naming the file (MindSpore always writes a capacity):
    'not a JSON object', 'capacity is missing' (no such key), 'capacity is null' or 'capacity
    is not a number: <value>' (text, a list)."""
    obj = read_json(path)
    if not isinstance(obj, dict):
        raise InputError(path, "not a JSON object")
    if "capacity" not in obj:
        raise InputError(path, "capacity is missing")
    cap = obj["capacity"]
    if cap is None:
        raise InputError(path, "capacity is null")
    try:
        cap = float(cap)
    except (TypeError, ValueError):
        raise InputError(path, f"capacity is not a number: {cap!r}") from None
    return cap * 1024.0 if cap > 0 else None
