"""The recomputed step breakdown does not depend on one release's task labels (issue #16).

Each collection of ../shared/data is copied with the labelling of an older torch_npu release
(tests/relabel.py: HCCL and helper tasks typed "Other", helper tasks on extra streams, older
kernel_details / step_trace_time columns). The expected values are the profiler's own
Computing and Communication(Not Overlapped), read here from the copy's step_trace_time.csv
(csv module) or analysis.db StepTraceTime (sqlite3): relabelling does not change them.
"""

from __future__ import annotations

import csv
import json
import sqlite3

import pytest
from click.testing import CliRunner

import relabel
from ascendprof.cli.main import main

METRICS = {"Computing": "computing", "Communication(Not Overlapped)": "communication_not_overlapped"}


@pytest.fixture(scope="module")
def variants(tmp_path_factory):
    built = {}

    def get(shared, kind: str, level: str):
        if (kind, level) not in built:
            src = shared / "torch_npu-2rank-levels" / kind / level
            dst = tmp_path_factory.mktemp("retyped") / f"{kind}_{level}"
            (relabel.retype_text if kind == "text" else relabel.retype_db)(src, dst)
            built[kind, level] = dst
        return built[kind, level]

    return get


def profiler_values(root) -> dict[int, dict[str, float]]:
    """rank -> the profiler's own values (us) of METRICS, from the copy's files."""
    out = {}
    for rank_dir in sorted(root.glob("rank*_ascend_pt")):
        rank = int(rank_dir.name[4])
        csv_path = rank_dir / relabel.OUT / "step_trace_time.csv"
        if csv_path.is_file():
            with open(csv_path, newline="") as f:
                (row,) = list(csv.DictReader(f))
            out[rank] = {m: float(row[m]) for m in METRICS}
        else:
            db = rank_dir / relabel.OUT / "analysis.db"
            with sqlite3.connect(f"file:{db}?mode=ro&immutable=1", uri=True) as c:
                (row,) = c.execute(f"SELECT {', '.join(METRICS.values())} FROM StepTraceTime")
            out[rank] = dict(zip(METRICS, row))
    return out


# The recomputed values of every retyped copy, with and without --timeline, are checked against
# the profiler's own in tests/test_numbers_everywhere.py (the VARIANTS cases, strict).


def test_retyped_tasks_are_classified_by_their_links(shared_data, variants, tmp_path):
    """db level1 copy: compute = the COMPUTE_TASK_INFO tasks (counted here with sqlite3), the
    'Other'-typed HCCL tasks are linked to their ops, the extra-stream tasks are neither."""
    src = variants(shared_data, "db", "level1")
    db = src / "rank0_ascend_pt" / relabel.OUT / "ascend_pytorch_profiler_0.db"
    with sqlite3.connect(f"file:{db}?mode=ro&immutable=1", uri=True) as c:
        n_compute = c.execute("SELECT COUNT(*) FROM TASK t JOIN COMPUTE_TASK_INFO i "
                              "ON t.globalTaskId = i.globalTaskId").fetchone()[0]
        n_other = c.execute("SELECT COUNT(*) FROM TASK t JOIN STRING_IDS s ON s.id = t.taskType "
                            "WHERE s.value = 'Other'").fetchone()[0]
        n_hccl = c.execute(
            "SELECT COUNT(*) FROM TASK t WHERE t.globalTaskId NOT IN (SELECT globalTaskId FROM "
            "COMPUTE_TASK_INFO) AND (t.globalTaskId IN (SELECT globalTaskId FROM "
            "COMMUNICATION_TASK_INFO) OR t.connectionId IN (SELECT connectionId FROM "
            "COMMUNICATION_OP))").fetchone()[0]
    from ascendprof.readers import db as dbreader
    from ascendprof.scan import scan

    (source,) = [s for s in scan(src) if s.rank == 0]
    tl = dbreader.read(source).tables["timeline"].to_pylist()
    hw = [r for r in tl if r["track"] == "hardware"]
    assert sum(r["category"] == "compute" for r in hw) == n_compute
    extra = [r for r in hw if r["thread"] in {f"Stream {s}" for s in relabel.EXTRA_STREAMS}]
    assert len(extra) == len(relabel.EXTRA_STREAMS) * relabel.EXTRA_PER_STREAM
    assert all(r["category"] == "other" and r["task_type"] == "Other" for r in extra)
    assert n_other > len(extra)  # HCCL tasks and copies are typed Other too
    assert sum(r["category"] == "communication" for r in hw) == n_hccl > 0


def test_retyped_text_without_step_trace_time_gives_no_false_compute_verdict(
        shared_data, variants, tmp_path):
    """With step_trace_time.csv absent the recomputed values are what the verdicts use: they
    must be the profiler's (read from the removed file) and no rank is called compute-slow."""
    import shutil

    src = tmp_path / "src"
    shutil.copytree(variants(shared_data, "text", "level1"), src)
    want = profiler_values(src)
    for f in src.rglob("step_trace_time.csv"):
        f.unlink()
    out = tmp_path / "out"
    r = CliRunner().invoke(main, ["analyse", str(src), "-o", str(out), "-q", "--timeline"])
    assert r.exit_code == 0, r.output
    summary = json.loads((out / "summary.json").read_text())
    for row in summary["ranks"]:
        assert row["origin"] == "recomputed"
        assert row["computing_us"] == pytest.approx(want[row["rank"]]["Computing"], rel=0.01)
    verdicts = json.loads((out / "verdicts.json").read_text())["verdicts"]
    assert not [v for v in verdicts if v.get("severity") == "critical"
                and "comput" in v.get("message", "").lower()], verdicts
