"""Older-release labelling, reproduced on copies of the REAL exports (nothing hand-made).

A torch_npu release of September 2024 labels device tasks differently from the releases the
shared data comes from (issue #16): kernel_details.csv has no Model ID / Type / PMU columns,
step_trace_time.csv no Device_id; the HCCL tasks of trace_view.json's Ascend Hardware track
carry Task Type "Other" (and the HCCL task names), the db TASK table types every task without
compute-op info "Other", and helper tasks without compute info run on extra streams.

These builders apply exactly that relabelling to a copy of a real collection. They change
labels only (plus the extra-stream tasks, which the profiler did not count as compute), so the
profiler's own step_trace_time.csv / StepTraceTime values stay the truth for the copy.

- :func:`retype_text`: a text collection (``*_ascend_pt`` ranks);
- :func:`retype_db`: a db collection (``ascend_pytorch_profiler_N.db``);
- :func:`extra_tasks`: the (start_ns, dur_ns) of the added extra-stream tasks of one rank,
  spread over its busy span so that any of them taken for compute changes Computing.
"""

from __future__ import annotations

import csv
import json
import shutil
import sqlite3
from contextlib import closing
from pathlib import Path

OUT = "ASCEND_PROFILER_OUTPUT"
#: Accelerator Core / Task Type values of compute tasks in the shared data (kept as they are).
COMPUTE_TYPES = {"AI_CORE", "AI_VECTOR_CORE", "MIX_AIC", "MIX_AIV", "AI_CPU", "DSA_SQE",
                 "KERNEL_AICORE", "KERNEL_AIVEC", "KERNEL_MIX_AIC", "KERNEL_MIX_AIV", "STARS_COMMON"}
#: Streams of the added helper tasks, and how many tasks per stream.
EXTRA_STREAMS = (61, 62)
EXTRA_PER_STREAM = 400
OTHER = "Other"
#: kernel_details columns the older release writes (a subset of the Level1 set, in order).
OLD_KERNEL_COLUMNS = ("Step Id", "Task ID", "Stream ID", "Name", "Accelerator Core",
                      "Start Time(us)", "Duration(us)", "Wait Time(us)", "Block Dim",
                      "Input Shapes", "Input Data Types", "Input Formats", "Output Shapes",
                      "Output Data Types", "Output Formats")


def _rank_dirs(root: Path) -> list[Path]:
    return sorted(p for p in Path(root).rglob("*_ascend_pt") if p.is_dir())


def extra_tasks(lo_ns: int, hi_ns: int) -> list[tuple[int, int]]:
    """Per extra stream, EXTRA_PER_STREAM tasks evenly over [lo, hi): each a quarter of its
    slot long (so together they cover about half the span on two streams)."""
    out = []
    n = EXTRA_PER_STREAM
    slot = max((hi_ns - lo_ns) // n, 4)
    for k, _ in enumerate(EXTRA_STREAMS):
        for i in range(n):
            out.append((lo_ns + i * slot + k * slot // 2, slot // 4))
    return out


# ----------------------------------------------------------------------------- text

def _old_csv(path: Path, keep=None, drop=()) -> None:
    """Rewrite ``path`` with only the columns of ``keep`` that it has (or without ``drop``),
    cells unchanged."""
    with open(path, newline="", encoding="utf-8") as f:
        rows = list(csv.reader(f))
    head = rows[0]
    idx = [i for i, h in enumerate(head) if (keep is None or h in keep) and h not in drop]
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f, lineterminator="\n")
        for r in rows:
            w.writerow([r[i] if i < len(r) else "" for i in idx])


def _retype_trace(path: Path) -> tuple[int, int]:
    """Relabel trace_view.json in place (see module doc); returns the busy span in ns."""
    events = json.loads(path.read_text(encoding="utf-8"))
    pname, tname = {}, {}
    for e in events:
        if e.get("ph") == "M" and e.get("name") == "process_name":
            pname[e["pid"]] = e["args"]["name"]
        if e.get("ph") == "M" and e.get("name") == "thread_name":
            tname[(e["pid"], e["tid"])] = e["args"]["name"]
    hccl_name = {}  # (stream id, task id, ts) of an HCCL small task -> its name
    for e in events:
        if e.get("ph") == "X" and pname.get(e.get("pid")) in ("HCCL", "Communication"):
            a = e.get("args") or {}
            if "stream id" in a:
                hccl_name[(a["stream id"], a.get("task id"), e["ts"])] = e["name"]
    hw_pid, lo, hi = None, None, None
    for e in events:
        if e.get("ph") != "X" or pname.get(e.get("pid")) != "Ascend Hardware":
            continue
        hw_pid = e["pid"]
        a = e.setdefault("args", {})
        start = int(round(float(e["ts"]) * 1000))
        lo = start if lo is None else min(lo, start)
        hi = max(hi or 0, start + int(round(float(e.get("dur", 0)) * 1000)))
        if a.get("Task Type") in COMPUTE_TYPES:
            continue
        key = (a.get("Physic Stream Id"), a.get("Task Id"), e["ts"])
        if key in hccl_name:  # an HCCL task: typed Other, named as the HCCL task
            e["name"] = hccl_name[key]
        a["Task Type"] = OTHER
    for k, stream in enumerate(EXTRA_STREAMS):
        events.append({"ph": "M", "name": "thread_name", "pid": hw_pid, "tid": stream,
                       "args": {"name": f"Stream {stream}"}})
    tasks = extra_tasks(lo, hi)
    per = len(tasks) // len(EXTRA_STREAMS)
    for i, (s, d) in enumerate(tasks):
        stream = EXTRA_STREAMS[i // per]
        events.append({"name": "aclnnInplaceCopy_ViewCopyAiCore_ViewCopy", "pid": hw_pid,
                       "tid": stream, "ts": f"{s // 1000}.{s % 1000:03d}", "dur": d / 1000,
                       "ph": "X", "args": {"Model Id": 4294967295, "Task Type": OTHER,
                                           "Physic Stream Id": stream, "Task Id": i,
                                           "Batch Id": 0, "Subtask Id": 4294967295,
                                           "connection_id": 9_000_000 + i}})
    path.write_text(json.dumps(events), encoding="utf-8")
    return lo, hi


def retype_text(src: Path, dst: Path) -> Path:
    """Copy the text collection ``src`` to ``dst`` with the older labelling (module doc)."""
    shutil.copytree(src, dst)
    for rank_dir in _rank_dirs(dst):
        out = rank_dir / OUT
        if (out / "trace_view.json").is_file():
            _retype_trace(out / "trace_view.json")
        if (out / "kernel_details.csv").is_file():
            with open(out / "kernel_details.csv", newline="", encoding="utf-8") as f:
                head = next(csv.reader(f))
            old = [c for c in OLD_KERNEL_COLUMNS if c in head]
            if "Start Time(us)" in old:  # Level0 sets lack most columns: drop Type only
                _old_csv(out / "kernel_details.csv",
                         keep=old if "Model ID" in head else None, drop=("Type",))
        if (out / "step_trace_time.csv").is_file():
            _old_csv(out / "step_trace_time.csv", drop=("Device_id",))
    return dst


# ----------------------------------------------------------------------------- db

def retype_db(src: Path, dst: Path) -> Path:
    """Copy the db collection ``src`` to ``dst`` with the older labelling: every TASK row
    without COMPUTE_TASK_INFO typed "Other", plus helper tasks typed "Other" on extra streams
    (no compute info, connection ids of nothing), and StepTraceTime without deviceId."""
    shutil.copytree(src, dst)
    for db in sorted(Path(dst).rglob("ascend_pytorch_profiler*.db")):
        # closed at once (closing + commit): readers open the copy immutable, which ignores an
        # unmerged write-ahead log
        with closing(sqlite3.connect(db)) as c, c:
            other = c.execute("SELECT MAX(id) FROM STRING_IDS").fetchone()[0] + 1
            c.execute("INSERT INTO STRING_IDS (id, value) VALUES (?, ?)", (other, OTHER))
            c.execute("UPDATE TASK SET taskType = ? WHERE globalTaskId NOT IN "
                      "(SELECT globalTaskId FROM COMPUTE_TASK_INFO)", (other,))
            lo, hi, dev, gpid, gtid = c.execute(
                "SELECT MIN(startNs), MAX(endNs), MIN(deviceId), MIN(globalPid), "
                "MAX(globalTaskId) FROM TASK").fetchone()
            tasks = extra_tasks(lo, hi)
            per = len(tasks) // len(EXTRA_STREAMS)
            c.executemany(
                "INSERT INTO TASK (startNs, endNs, deviceId, connectionId, globalTaskId, "
                "globalPid, taskType, contextId, streamId, taskId, modelId) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, 4294967295, ?, ?, 4294967295)",
                [(s, s + d, dev, 9_000_000 + i, gtid + 1 + i, gpid, other,
                  EXTRA_STREAMS[i // per], i) for i, (s, d) in enumerate(tasks)])
    for db in sorted(Path(dst).rglob("analysis.db")):
        with closing(sqlite3.connect(db)) as c, c:
            cols = [r[1] for r in c.execute("PRAGMA table_info('StepTraceTime')")]
            if "deviceId" in cols:
                c.execute("ALTER TABLE StepTraceTime DROP COLUMN deviceId")
    return dst
