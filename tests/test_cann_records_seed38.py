"""Raw CANN records (spec §D), the cases the seed-38 mutation sample of readers/cann_records.py
found untested: read through ``read_source`` on directories built byte by byte (the helpers of
test_raw_cann_by_hand.py / test_raw_cann_warnings_and_legacy_jobs.py) where the reader reaches
the case, else through the decoder functions themselves. Expected values worked out by hand in
the comments.
"""

from __future__ import annotations

import struct

import numpy as np

from ascendprof.model import schemas as S
from ascendprof.readers import cann_records as C
from ascendprof.readers import read_source
from test_raw_cann_by_hand import HOST_MONO0, _job, _prefix, _read
from test_raw_cann_warnings_and_legacy_jobs import HWTS, TASK_DESC, _hwts, _legacy_source


# ------------------------------------------------------------------ §D.4 HWTS offsets

def test_hwts_offsets_locate_each_task_log_in_the_buffer():
    """Three 64-byte HWTS records: a task start (log type 0, task 1) at byte 0, a block log
    (type 2, skipped) at byte 64, a task end (type 1, task 1) at byte 128. The offsets of the
    two task logs are 0 and 128, and slicing the buffer with them gives back those records
    (byte offsets must be integers to index the bytes)."""
    recs = [_hwts(0, 1, 100), _hwts(2, 1, 120), _hwts(1, 1, 150)]
    buf = b"".join(recs)
    offs = C.decode_hwts(buf)["offset"]
    assert offs.tolist() == [0, 128]
    assert [buf[o:o + C.HWTS_SIZE] for o in offs] == [recs[0], recs[2]]


# ------------------------------------------------------------------ §D.3 pairing order

def test_legacy_kernels_starting_at_the_same_tick_keep_stream_task_order(tmp_path):
    """Legacy job (10 ns ticks), four tasks on three streams:
        stream 3 task 1 [10, 20], stream 3 task 2 [20, 30], stream 4 task 3 [0, 5],
        stream 5 task 4 [0, 5].
    The kernels come in start order: tasks 3 and 4 both start at tick 0, and a tie keeps the
    (stream, task) order the start/end logs were paired in: task 3 (stream 4) before task 4
    (stream 5); then task 1 (tick 10 = 100 ns) and task 2 (tick 20 = 200 ns). Ties are real:
    in the shared JOB3 HWTS log 84 paired device tasks start at the same tick as another."""
    job = tmp_path / "JOB1"
    job.mkdir()
    logs = [(0, 1, 10, 3), (1, 1, 20, 3), (0, 2, 20, 3), (1, 2, 30, 3),
            (0, 3, 0, 4), (1, 3, 5, 4), (0, 4, 0, 5), (1, 4, 5, 5)]
    (job / HWTS).write_bytes(b"".join(_hwts(k, t, c, stream=s) for k, t, c, s in logs))
    (job / TASK_DESC).write_text("Op1 1 1 0\nOp2 1 2 0\nOp3 1 3 0\nOp4 1 4 0\n")
    k = read_source(_legacy_source(tmp_path)).tables[S.KERNELS].to_pylist()
    assert [(r["stream_id"], r["task_id"], r["name"], r["start_ns"], r["dur_ns"]) for r in k] == [
        (4, 3, "Op3", 0, 50), (5, 4, "Op4", 0, 50), (3, 1, "Op1", 100, 100),
        (3, 2, "Op2", 200, 100)]


def test_tasks_starting_at_the_same_tick_are_returned_in_key_order():
    """pair_start_end on keys (stream): stream 1 starts at 1 and 2 (two tasks, keys equal but
    task differs: task 1 [1, 3], task 2 [2, 4]), streams 2 and 3 start at 0 ([0, 5] each).
    Ordered by start, the tie at 0 keeps the key order: stream 2 (index 4) before stream 3
    (index 6)."""
    stream = [1, 1, 1, 1, 2, 2, 3, 3]
    task = [1, 1, 2, 2, 5, 5, 6, 6]
    ts = [1, 3, 2, 4, 0, 5, 0, 5]
    start = [True, False, True, False, True, False, True, False]
    s, e = C.pair_start_end([np.array(stream), np.array(task)], np.array(ts), np.array(start))
    assert s.tolist() == [4, 6, 0, 2]
    assert e.tolist() == [5, 7, 1, 3]


# ------------------------------------------------------------------ §D.2 type names

def _track_of_type(ts, stream, task, task_type):
    """task_track (§D.2, level 5000): device 0, stream, task, batch 0, the u64 task type at
    +32, kernel name hash 900 ("kernel")."""
    return (_prefix(5000, 1, ts) + struct.pack("<HHHHQQHHB", 0, stream, task, 0, task_type,
                                               900, 8, 0, 0)).ljust(64, b"\0")


def test_task_types_27_and_28_are_the_dynamic_profiling_switches(tmp_path):
    """§D.2: without a type_info_dic entry, task_track type 27 is DYNAMIC_ENABLE and 28
    DYNAMIC_DISABLE. No node_basic_info: the kernels' accelerator core is the name of the
    task_track's task type (stream 4 task 1 launched with task type 27, task 2 with 28)."""
    d = _job(tmp_path)
    h = d / "host" / "data"
    (h / "aging.compact.node_basic_info.slice_0").unlink()
    (h / "unaging.compact.task_track.slice_0").write_bytes(
        _track_of_type(HOST_MONO0 - 850, 4, 1, 27) + _track_of_type(HOST_MONO0 - 750, 4, 2, 28))
    k = _read(tmp_path).tables[S.KERNELS].to_pylist()
    assert [(r["task_id"], r["accelerator_core"]) for r in k] == [
        (1, "DYNAMIC_ENABLE"), (2, "DYNAMIC_DISABLE")]


def test_type_name_falls_back_to_the_number_past_28():
    # 27 / 28 are the only built-in names; 29 has none, so it is its decimal text
    assert [C.type_name({}, 5000, t) for t in (27, 28, 29)] == [
        "DYNAMIC_ENABLE", "DYNAMIC_DISABLE", "29"]


# ------------------------------------------------------------------ hccl_info enums

def test_an_unset_u32_enum_is_none():
    """hccl_info's link / transport / rdma type are u32 (§D.2): 0xFFFFFFFF (4294967295) is
    'not set' like 65535, so None, not the text '4294967295'; 2 is PCIE."""
    out = C.enum_names(np.array([0xFFFFFFFF, 0xFFFF, 2], dtype=np.uint32), C.LINK_TYPES)
    assert out.tolist() == [None, None, "PCIE"]


# ------------------------------------------------------------------ §D.0 sliced files

def test_slices_in_sub_folders_are_grouped_under_their_folder():
    """Names relative to the job: the logical file keeps its folder (device_0/data/...), two
    slices of it are listed in slice order, and a file at the top level has no folder."""
    names = ["device_0/data/stars_soc.data.0.slice_1", "device_0/data/stars_soc.data.0.slice_0",
             "host/data/unaging.compact.task_track.slice_0", "top.slice_0"]
    assert C.slice_groups(names) == {
        "device_0/data/stars_soc.data.0": ["device_0/data/stars_soc.data.0.slice_0",
                                           "device_0/data/stars_soc.data.0.slice_1"],
        "host/data/unaging.compact.task_track": ["host/data/unaging.compact.task_track.slice_0"],
        "top": ["top.slice_0"]}

