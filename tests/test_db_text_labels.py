"""The db export labels what it reads as the text export of the same job does.

torch_npu-2rank-levels holds one job exported both ways (export_type db and text). The
expected labels come from the profiler's own text files, read here with json / csv:
trace_view.json names the process of the HCCL ops, kernel_details.csv the kernel types and
shapes. Times and op names differ between the two runs; the labels must not.
"""

from __future__ import annotations

import csv
import json
import re
from collections import Counter
from pathlib import Path

import pytest

from ascendprof.model import schemas as S
from ascendprof.model.problems import Problems
from ascendprof.readers import read_source
from ascendprof.scan import DB, scan

OUT = "ASCEND_PROFILER_OUTPUT"
LEVELS = ("level0", "level1", "level2")
BIG_OP_THREAD = re.compile(r"^Group .* Communication$")


def _rank_dirs(shared_data: Path, level: str, rank: int) -> tuple[Path, Path]:
    base = shared_data / "torch_npu-2rank-levels"
    return (base / "db" / level / f"rank{rank}_ascend_pt",
            base / "text" / level / f"rank{rank}_ascend_pt")


def _db_data(rank_dir: Path):
    found = scan(rank_dir, Problems())
    assert len(found) == 1 and found[0].kind == DB, found
    return read_source(found[0])


def _trace_view_big_ops(text_dir: Path) -> tuple[set[str], int]:
    """(names of the processes holding "Group <g> Communication" threads, number of X events
    on those threads) of trace_view.json."""
    events = json.loads((text_dir / OUT / "trace_view.json").read_text(encoding="utf-8"))
    if isinstance(events, dict):
        events = events["traceEvents"]
    procs, threads = {}, {}
    for e in events:
        if e.get("ph") == "M" and e.get("name") == "process_name":
            procs[e["pid"]] = e["args"]["name"]
        elif e.get("ph") == "M" and e.get("name") == "thread_name":
            threads[(e["pid"], e["tid"])] = e["args"]["name"]
    big = {k for k, v in threads.items() if BIG_OP_THREAD.match(v)}
    n = sum(1 for e in events if e.get("ph") == "X" and (e.get("pid"), e.get("tid")) in big)
    return {procs[pid] for pid, _ in big}, n


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("rank", (0, 1))
def test_hccl_ops_on_the_process_trace_view_names(shared_data, level, rank):
    """The db's HCCL big ops sit in the process trace_view.json of the same job puts its
    "Group <g> Communication" threads in ("HCCL" here; the db used to say "Communication"), one
    row per big op. The thread keeps the HCCL group name: trace_view's group index ("Group 0")
    is not in the db."""
    db_dir, text_dir = _rank_dirs(shared_data, level, rank)
    want_procs, want_n = _trace_view_big_ops(text_dir)
    assert len(want_procs) == 1 and want_n > 0

    tl = _db_data(db_dir).tables[S.TIMELINE].to_pylist()
    comm = [r for r in tl if r["track"] == "communication"]
    assert {r["process"] for r in comm} == want_procs
    big = [r for r in comm if BIG_OP_THREAD.match(r["thread"])]
    assert len(big) == want_n
    assert {r["thread"] for r in big} != set()
    for r in big:
        group = r["thread"][len("Group "):-len(" Communication")]
        assert group and not group.isdigit()  # the HCCL group name, not an index


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("rank", (0, 1))
def test_other_timeline_processes_as_trace_view(shared_data, level, rank):
    """The hardware (and, where the db has OVERLAP_ANALYSIS, overlap) rows carry the process
    names of trace_view.json."""
    db_dir, text_dir = _rank_dirs(shared_data, level, rank)
    events = json.loads((text_dir / OUT / "trace_view.json").read_text(encoding="utf-8"))
    if isinstance(events, dict):
        events = events["traceEvents"]
    names = {e["args"]["name"] for e in events
             if e.get("ph") == "M" and e.get("name") == "process_name"}
    tl = _db_data(db_dir).tables[S.TIMELINE]
    for track in ("hardware", "overlap", "communication"):
        got = {p for t, p in zip(tl["track"].to_pylist(), tl["process"].to_pylist())
               if t == track}
        assert got <= names, (track, got)


def _csv_label(v: str) -> str | None:
    """A kernel_details.csv cell as a label: "N/A" means no value; torch_npu wraps shapes in
    double quotes (kept by the csv module) so spreadsheets keep them as text."""
    if v in ("", "N/A"):
        return None
    if len(v) >= 2 and v[0] == v[-1] == '"':
        return v[1:-1]
    return v


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("rank", (0, 1))
def test_kernel_labels_as_kernel_details(shared_data, level, rank):
    """Type, Accelerator Core, shapes, data types and formats of the db's kernels are those of
    kernel_details.csv of the same job: "N/A" is null (every Level0 type, which grouped all of
    a db rank's launches under one op type "N/A") and shapes lose the quotes both files wrap
    them in."""
    db_dir, text_dir = _rank_dirs(shared_data, level, rank)
    k = _db_data(db_dir).tables[S.KERNELS]
    with open(text_dir / OUT / "kernel_details.csv", newline="", encoding="utf-8-sig") as f:
        rows = list(csv.DictReader(f))
    pairs = (("op_type", "Type"), ("accelerator_core", "Accelerator Core"),
             ("input_shapes", "Input Shapes"), ("output_shapes", "Output Shapes"),
             ("input_dtypes", "Input Data Types"), ("output_dtypes", "Output Data Types"),
             ("input_formats", "Input Formats"), ("output_formats", "Output Formats"))
    for col, header in pairs:
        if header not in rows[0]:
            continue
        want = Counter(_csv_label(r[header]) for r in rows)
        assert Counter(k[col].to_pylist()) == want, col
