"""The SQLite export reader (ascendprof.readers.db): the labels and bookkeeping the seed-38
mutation sample found untested.

- the process names of the timeline tracks the db reader builds (Ascend Hardware, the Python
  process of the step and data loader spans) are the ones the profiler's own text export gives
  the same tracks: read with json from trace_view.json of the text export of the same job
  (shared data torch_npu-2rank-levels, level1 rank 0; the db and text exports are two runs of
  one job, so only names are compared, not times);
- an HCCL op whose group name is unknown names no invented group: its big-op thread and its
  task thread name the same (empty) group;
- a db source of unknown rank reads as rank -1 (the readers' rule, see
  ``ascendprof.engine.resultfile.expected_rank``), never as a real rank;
- a damaged analysis.db next to a readable profiler db is a problem naming the analyses that
  lose their input.

Inputs are the shipped level1 rank 0 db export (fixtures/torch_npu-db-level1-rank0), copied and
edited with sqlite3 where a case needs it (helpers of tests/test_db_by_hand.py).
"""

from __future__ import annotations

import json
from pathlib import Path

from ascendprof.engine.resultfile import expected_rank
from ascendprof.model import schemas as S
from ascendprof.readers import read_source
from ascendprof.scan import DB, Source
from test_db_by_hand import FIXTURE, OUT, PROFILER_DB, _copy
from test_db_reader import _source

TEXT_TRACE = Path("torch_npu-2rank-levels") / "text" / "level1" / "rank0_ascend_pt" / OUT / \
    "trace_view.json"


def _trace_names(trace: Path):
    """From a text export's trace_view.json: (pid -> process_name, (pid, tid) -> thread_name,
    the complete events)."""
    doc = json.loads(trace.read_text(encoding="utf-8"))
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    procs = {e["pid"]: e["args"]["name"] for e in events
             if e.get("ph") == "M" and e.get("name") == "process_name"}
    threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in events
               if e.get("ph") == "M" and e.get("name") == "thread_name"}
    return procs, threads, [e for e in events if e.get("ph") == "X"]


# ----------------------------------------------------------------------------- track labels

def test_timeline_process_names_are_those_of_the_text_export(shared_data):
    """trace_view.json names the process of the device streams ("Stream <id>" threads) and the
    process of the ProfilerStep# and enumerate(DataLoader) spans; the db reader's 'hardware',
    'step' and 'dataloader' rows must carry those process names, letter for letter."""
    procs, threads, spans = _trace_names(shared_data / TEXT_TRACE)
    stream_procs = {procs[pid] for (pid, _), name in threads.items()
                    if name.startswith("Stream ")}
    step_procs = {procs[e["pid"]] for e in spans if e["name"].startswith("ProfilerStep#")}
    loader_procs = {procs[e["pid"]] for e in spans
                    if e["name"].startswith("enumerate(DataLoader)")}
    assert len(stream_procs) == len(step_procs) == len(loader_procs) == 1

    tl = read_source(_source(FIXTURE)).tables[S.TIMELINE].to_pylist()
    by_track = {}
    for r in tl:
        by_track.setdefault(r["track"], set()).add(r["process"])
    assert by_track["hardware"] == stream_procs      # {"Ascend Hardware"}
    assert by_track["step"] == step_procs            # {"Python"}
    assert by_track["dataloader"] == loader_procs    # {"Python"}


def test_an_op_of_unknown_group_names_no_invented_group(tmp_path):
    """COMMUNICATION_OP.groupName of every op set to an id STRING_IDS does not have: the group is
    unknown. Each op's big-op thread and its task thread must still name the same group (the
    task thread is the big-op thread + " tasks", as for a known group), and that group is
    empty: "Group " + "" + " Communication"."""
    rank_dir = _copy(tmp_path, ["UPDATE COMMUNICATION_OP SET groupName = -12345"])
    tl = read_source(_source(rank_dir)).tables[S.TIMELINE].to_pylist()
    comm = [r for r in tl if r["track"] == "communication"]
    big = {r["name"]: r["thread"] for r in comm if not r["thread"].endswith(" tasks")}
    tasks = {r["name"]: r["thread"] for r in comm if r["thread"].endswith(" tasks")}
    assert len(big) == len(tasks) == 4  # the fixture's four HCCL ops
    assert {n: t + " tasks" for n, t in big.items()} == tasks
    assert set(big.values()) == {"Group  Communication"}


# ----------------------------------------------------------------------------- bookkeeping

def test_a_db_source_of_unknown_rank_reads_as_rank_minus_one():
    """A Source whose rank the scan could not tell (rank None): the RankData and every table's
    rank column say -1 (expected_rank's rule for a db export), not a real rank such as 1."""
    src = Source(path=str(FIXTURE), kind=DB, rank=None,
                 files=[f"{OUT}/{PROFILER_DB}", f"{OUT}/analysis.db"])
    data = read_source(src)
    assert data.rank == expected_rank(src) == -1
    for name, table in data.tables.items():
        if "rank" in table.column_names and table.num_rows:
            assert set(table["rank"].to_pylist()) == {-1}, name
    assert S.KERNELS in data.tables and S.STEP_TRACE in data.tables


def test_a_damaged_analysis_db_names_the_analyses_it_feeds(tmp_path):
    """analysis.db overwritten with text next to an intact profiler db: the problem recorded for
    it names the analyses built from its tables (StepTraceTime -> cluster_step_trace,
    CommAnalyzerTime/Bandwidth -> communication, CommAnalyzerMatrix -> communication_matrix;
    the text export's step_trace_time.csv / communication.json / communication_matrix.json
    problems name the same ones), so the report can say what was lost."""
    rank_dir = _copy(tmp_path)
    bad = rank_dir / OUT / "analysis.db"
    bad.write_bytes(b"not a database at all" * 10)
    data = read_source(_source(rank_dir))
    (p,) = list(data.problems)
    assert p.path == str(bad)
    assert {"cluster_step_trace", "communication", "communication_matrix"} <= set(p.affects)
    assert S.KERNELS in data.tables and S.COMM_OPS not in data.tables
