"""The SQLite export reader (ascendprof.readers.db): what the seed-40 mutation sample found
untested.

- when the scan gives no device id, the device comes from RANK_DEVICE_MAP's row of the
  source's own rank, even when the map lists other ranks first (a db holding several ranks);
- COMPUTE_TASK_INFO.waitNs, when the table has it, is each kernel's wait_ns;
- COMPUTE_TASK_INFO written with the spec's column names blockNum / mixBlockNum (instead of
  torch_npu's blockDim / mixBlockDim) still gives block_num / mix_block_num;
- a damaged JSON metadata file beside the databases is a problem for rank and file that names
  the analysis it feeds "metadata", the name the scan gives the same damage.

Inputs are the shipped level1 rank 0 db export (fixtures/torch_npu-db-level1-rank0), copied and
edited with sqlite3 where a case needs it (helpers of tests/test_db_by_hand.py). Expected values
are read back from the files with sqlite3 and worked out in the tests.
"""

from __future__ import annotations

import shutil

from ascendprof.model import schemas as S
from ascendprof.model.problems import Problems
from ascendprof.readers import db as dbreader
from ascendprof.readers import read_source
from ascendprof.scan import scan
from test_db_by_hand import FIXTURE, OUT, PROFILER_DB, _copy
from test_db_reader import _ro, _source


def _task_kernels(rank_dir, *cols):
    """(streamId, taskId, startNs, *cols of COMPUTE_TASK_INFO) per compute task, with sqlite3."""
    sel = ", ".join(f"c.{c}" for c in cols)
    with _ro(rank_dir / OUT / PROFILER_DB) as c:
        return sorted(c.execute(
            f"""SELECT t.streamId, t.taskId, t.startNs, {sel} FROM TASK t
                JOIN COMPUTE_TASK_INFO c ON c.globalTaskId = t.globalTaskId""").fetchall())


def _compute_kernels(data, *cols):
    return sorted((r["stream_id"], r["task_id"], r["start_ns"], *(r[c] for c in cols))
                  for r in data.tables[S.KERNELS].to_pylist()
                  if r["accelerator_core"] != dbreader.COMM_CORE)


# ----------------------------------------------------------------------------- device

def test_the_device_is_the_one_rank_device_map_gives_this_rank(tmp_path):
    """RANK_DEVICE_MAP rewritten to list rank 1 -> device 7 first, then rank 0 -> device 3, and
    TASK.deviceId emptied (NULL), so the device can only come from the map. The source is rank
    0 and the scan found no device id for it: the rank's device is 3 (its own row of the map,
    not the first row), and every kernel of the rank carries device 3."""
    rank_dir = _copy(tmp_path, ["DELETE FROM RANK_DEVICE_MAP",
                                "INSERT INTO RANK_DEVICE_MAP (rankId, deviceId) VALUES (1, 7)",
                                "INSERT INTO RANK_DEVICE_MAP (rankId, deviceId) VALUES (0, 3)",
                                "UPDATE TASK SET deviceId = NULL"])
    with _ro(rank_dir / OUT / PROFILER_DB) as c:
        assert c.execute("SELECT rankId, deviceId FROM RANK_DEVICE_MAP ORDER BY rowid"
                         ).fetchall() == [(1, 7), (0, 3)]
        assert c.execute("SELECT COUNT(deviceId) FROM TASK").fetchone() == (0,)
    src = _source(rank_dir)
    assert src.rank == 0 and src.device_id is None
    data = read_source(src)
    assert data.meta["device_id"] == 3
    k = data.tables[S.KERNELS]
    assert k.num_rows > 0 and set(k["device_id"].to_pylist()) == {3}


# ----------------------------------------------------------------------------- kernel columns

def test_wait_ns_is_compute_task_info_wait_ns():
    """The fixture's COMPUTE_TASK_INFO has a waitNs column (187 rows, 177 distinct values, read
    with sqlite3): each compute kernel's wait_ns is the waitNs of its task (tasks matched by
    stream, task id and start)."""
    want = _task_kernels(FIXTURE, "waitNs")
    assert len(want) == 187 and len({w for *_, w in want}) == 177
    got = _compute_kernels(read_source(_source(FIXTURE)), "wait_ns")
    assert got == want


def test_block_counts_under_the_spec_column_names(tmp_path):
    """COMPUTE_TASK_INFO's blockDim / mixBlockDim renamed to the spec's blockNum / mixBlockNum
    (the names of the CANN db spec): block_num and mix_block_num are still those numbers for
    every compute kernel."""
    rank_dir = _copy(tmp_path, [
        "ALTER TABLE COMPUTE_TASK_INFO RENAME COLUMN blockDim TO blockNum",
        "ALTER TABLE COMPUTE_TASK_INFO RENAME COLUMN mixBlockDim TO mixBlockNum"])
    want = _task_kernels(rank_dir, "blockNum", "mixBlockNum")
    assert len(want) == 187
    assert any(b for _, _, _, b, _ in want)  # real block counts, not all 0 / NULL
    got = _compute_kernels(read_source(_source(rank_dir)), "block_num", "mix_block_num")
    assert got == want


# ----------------------------------------------------------------------------- metadata

def test_damaged_json_metadata_is_a_metadata_problem(tmp_path):
    """profiler_info_0.json overwritten with broken JSON: the scan records its problem as
    affecting "metadata"; the reader's problem for the same file (rank 0) names the same
    analysis. profiler_metadata.json (which the scan does not read) broken the same way: one
    problem naming it, rank 0, affecting "metadata"; the db's META_DATA still gives the
    profiler metadata."""
    rank_dir = tmp_path / "rank0_ascend_pt"
    shutil.copytree(FIXTURE, rank_dir)
    info = rank_dir / "profiler_info_0.json"
    info.write_text("{not json", encoding="utf-8")
    scanned = Problems()
    (src,) = scan(rank_dir, scanned)
    (sp,) = list(scanned)
    assert sp.path == str(info)
    data = read_source(src)
    assert [(p.path, p.rank, p.affects) for p in data.problems] == \
        [(str(info), 0, sp.affects)] == [(str(info), 0, ("metadata",))]

    shutil.copy2(FIXTURE / "profiler_info_0.json", info)
    meta_json = rank_dir / "profiler_metadata.json"
    meta_json.write_text("{not json", encoding="utf-8")
    data = read_source(_source(rank_dir))
    assert [(p.path, p.rank, p.affects) for p in data.problems] == \
        [(str(meta_json), 0, ("metadata",))]
    assert data.meta["profiler_metadata"]["SCHEMA_VERSION"] == "1.0.0"
