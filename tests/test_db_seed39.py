"""The SQLite export reader (ascendprof.readers.db): what the seed-39 mutation sample found
untested.

- the db's META_DATA table is the rank's profiler metadata when no profiler_metadata.json lies
  beside it: every key with its value (JSON text decoded, other text kept as text), never a
  key without its value;
- the step windows read from STEP_TIME say where they came from (``origin`` "db STEP_TIME",
  the name the STEPS schema documents for them);
- a profiler db with COMMUNICATION_TASK_INFO but no COMMUNICATION_OP table still gives each
  HCCL op's communication section, the extent of its tasks;
- an empty text cell or a NULL in an integer column (COMPUTE_TASK_INFO.blockDim) is a missing
  value, the other cells keep their numbers;
- a profiler db that SQLite cannot read is a problem whose reason says so and carries SQLite's
  own message.

Inputs are the shipped level1 rank 0 db export (fixtures/torch_npu-db-level1-rank0), copied and
edited with sqlite3 where a case needs it (helpers of tests/test_db_by_hand.py). Expected values
are read back from the files with sqlite3 and worked out in the tests.
"""

from __future__ import annotations

import json
import sqlite3

from ascendprof.model import schemas as S
from ascendprof.readers import db as dbreader
from ascendprof.readers import read_source
from test_db_by_hand import FIXTURE, OUT, PROFILER_DB, _copy
from test_db_reader import _ro, _source


# ----------------------------------------------------------------------------- metadata and steps

def test_meta_data_table_is_the_profiler_metadata_without_a_json_file():
    """The fixture has no profiler_metadata.json, so the db's META_DATA rows are the metadata:
    the five keys it holds (read with sqlite3), SCHEMA_VERSION '1.0.0' (not JSON: kept as the
    text), SCHEMA_VERSION_MAJOR '1' (JSON: the number 1) and ENV_VARIABLES (a JSON object: the
    dict, e.g. ASCEND_GLOBAL_LOG_LEVEL ''). No key may be present with no value."""
    assert not (FIXTURE / "profiler_metadata.json").exists()
    with _ro(FIXTURE / OUT / PROFILER_DB) as c:
        rows = dict(c.execute("SELECT name, value FROM META_DATA").fetchall())
    assert set(rows) == {"SCHEMA_VERSION", "SCHEMA_VERSION_MAJOR", "SCHEMA_VERSION_MINOR",
                         "SCHEMA_VERSION_MICRO", "ENV_VARIABLES"}
    meta = read_source(_source(FIXTURE)).meta["profiler_metadata"]
    assert set(meta) == set(rows)
    assert meta["SCHEMA_VERSION"] == "1.0.0"
    assert (meta["SCHEMA_VERSION_MAJOR"], meta["SCHEMA_VERSION_MINOR"],
            meta["SCHEMA_VERSION_MICRO"]) == (1, 0, 0)
    env = meta["ENV_VARIABLES"]
    assert isinstance(env, dict) and env == json.loads(rows["ENV_VARIABLES"])
    assert env["ASCEND_GLOBAL_LOG_LEVEL"] == ""
    assert all(v is not None for v in meta.values())


def test_step_windows_from_step_time_say_so():
    """STEPS from STEP_TIME: the fixture's one window (id 50, [startNs, endNs] read with sqlite3)
    for rank 0, with origin 'db STEP_TIME' -- the name the STEPS schema's doc gives windows of a
    db export (next to 'trace_view ProfilerStep#' and 'kernel Step Id span')."""
    assert "db STEP_TIME" in S.SCHEMAS[S.STEPS].metadata[b"doc"].decode()
    with _ro(FIXTURE / OUT / PROFILER_DB) as c:
        want = c.execute("SELECT id, startNs, endNs FROM STEP_TIME").fetchall()
    assert len(want) == 1 and want[0][0] == 50
    steps = read_source(_source(FIXTURE)).tables[S.STEPS].to_pylist()
    assert [(r["rank"], r["step"], r["start_ns"], r["end_ns"], r["origin"]) for r in steps] == \
        [(0, i, s, e, "db STEP_TIME") for i, s, e in want]


# ----------------------------------------------------------------------------- timeline

def test_hccl_task_extents_without_communication_op_table(tmp_path):
    """COMMUNICATION_OP dropped (recorded missing), COMMUNICATION_TASK_INFO kept: each HCCL op
    (opId 1..4, 74 tasks each) is still one 'communication' row on thread 'Group <group>
    Communication tasks', named by its tasks' name, spanning [first task start, last task end]
    -- worked out here in Python from the 296 task rows read with sqlite3 -- typed
    'HCCL tasks', in the HCCL process."""
    rank_dir = _copy(tmp_path, ["DROP TABLE COMMUNICATION_OP"])
    with _ro(rank_dir / OUT / PROFILER_DB) as c:
        tasks = c.execute(
            """SELECT ci.opId, n.value, g.value, t.startNs, t.endNs
               FROM COMMUNICATION_TASK_INFO ci JOIN TASK t ON t.globalTaskId = ci.globalTaskId
               JOIN STRING_IDS n ON n.id = ci.name JOIN STRING_IDS g ON g.id = ci.groupName"""
        ).fetchall()
    assert len(tasks) == 296
    ops: dict[int, list] = {}
    for op, name, group, start, end in tasks:
        ops.setdefault(op, []).append((name, group, start, end))
    assert sorted(ops) == [1, 2, 3, 4]
    want = []
    for rows in ops.values():
        (name,), (group,) = {r[0] for r in rows}, {r[1] for r in rows}
        first, last = min(r[2] for r in rows), max(r[3] for r in rows)
        want.append((name, f"Group {group} Communication tasks", first, last - first,
                     "HCCL tasks", "HCCL", "communication"))

    data = read_source(_source(rank_dir))
    assert f"{PROFILER_DB}:COMMUNICATION_OP" in data.missing
    tl = data.tables[S.TIMELINE].to_pylist()
    got = [(r["name"], r["thread"], r["start_ns"], r["dur_ns"], r["task_type"], r["process"],
            r["category"]) for r in tl if r["track"] == "communication"]
    assert sorted(got) == sorted(want)
    assert sum(r["track"] == "hardware" for r in tl) == 552  # every TASK row still there


# ----------------------------------------------------------------------------- stored value types

def test_an_empty_text_cell_or_null_in_an_integer_column_is_missing(tmp_path):
    """COMPUTE_TASK_INFO.blockDim (an integer column) set to '' (an empty text cell) on every
    third row and to NULL on the next: those kernels have block_num null, every other kernel
    the blockDim number of its task (tasks matched by stream, task id and start)."""
    rank_dir = _copy(tmp_path, ["UPDATE COMPUTE_TASK_INFO SET blockDim = '' WHERE rowid % 3 = 0",
                                "UPDATE COMPUTE_TASK_INFO SET blockDim = NULL "
                                "WHERE rowid % 3 = 1"])
    with _ro(rank_dir / OUT / PROFILER_DB) as c:
        rows = c.execute(
            """SELECT t.streamId, t.taskId, t.startNs, c.blockDim FROM TASK t
               JOIN COMPUTE_TASK_INFO c ON c.globalTaskId = t.globalTaskId""").fetchall()
    kinds = {type(b) for *_, b in rows}
    assert kinds == {str, type(None), int}  # the edit took: '', NULL and numbers
    want = sorted((s, t, st, b if isinstance(b, int) else None) for s, t, st, b in rows)
    k = read_source(_source(rank_dir)).tables[S.KERNELS].to_pylist()
    got = sorted((r["stream_id"], r["task_id"], r["start_ns"], r["block_num"]) for r in k
                 if r["accelerator_core"] != dbreader.COMM_CORE)
    assert got == want and len(got) == 187


# ----------------------------------------------------------------------------- errors

def test_an_unreadable_profiler_db_problem_gives_sqlites_reason(tmp_path):
    """The profiler db overwritten with text: the problem recorded for it says it is not a
    readable SQLite database and carries the message SQLite itself gives for the file (got
    here by opening it with sqlite3), so the user learns why it was skipped."""
    rank_dir = _copy(tmp_path)
    bad = rank_dir / OUT / PROFILER_DB
    bad.write_bytes(b"not a database at all" * 10)
    try:
        sqlite3.connect(bad).execute("SELECT name FROM sqlite_master").fetchall()
    except sqlite3.DatabaseError as e:
        sqlite_says = str(e)
    else:
        raise AssertionError("sqlite3 read the damaged file")
    assert sqlite_says == "file is not a database"
    (p,) = list(read_source(_source(rank_dir)).problems)
    assert p.path == str(bad)
    assert "not a readable SQLite database" in p.reason and sqlite_says in p.reason
