"""Raw CANN data (kind raw_cann) read through ``read_source``: the warnings a reader owes (and
must not give), the host data it falls back on, a repeated hccl_info, and a legacy MindSpore
1.x job built here byte by byte (§D.4 HWTS logs, Framework task_desc_info / graph_desc_info).

PROF_ directories come from test_raw_cann_by_hand's builder (device clock 50 MHz: 20 ns a tick;
two ACSQ tasks on stream 4). Every expected value is worked out in the comments.
"""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from ascendprof.model import schemas as S
from ascendprof.model.errors import InputError
from ascendprof.model.problems import Problems
from ascendprof.readers import read_source
from ascendprof.scan import scan
from test_raw_cann_by_hand import (DEV_CNT0, HOST_MONO0, _api, _job, _prefix, _read, _reasons,
                                   _stars, _task_track)

WALL_CLOCK_WARNING = "not on the local wall clock"


def test_complete_time_files_give_no_wall_clock_warning(tmp_path):
    """dev_start.log, host_start.log and start_info are all there: the kernel times are on the
    local wall clock and no warning says otherwise."""
    _job(tmp_path)
    data = _read(tmp_path)
    assert not any(WALL_CLOCK_WARNING in r for r in _reasons(data))
    assert data.tables[S.KERNELS].num_rows == 2


def test_an_sqe_type_outside_the_table_is_unknown(tmp_path):
    """§D.3: sqe type 40 (bits 15..10) has no name in the 21 known SQE types: the core of that
    task, without host data, is 'UNKNOWN'; sqe type 0 is AI_CORE."""
    stars = (_stars(0, 4, 1, DEV_CNT0 + 100, sqe=40) + _stars(1, 4, 1, DEV_CNT0 + 150, sqe=40)
             + _stars(0, 4, 2, DEV_CNT0 + 200) + _stars(1, 4, 2, DEV_CNT0 + 220))
    _job(tmp_path, stars=stars, host=False)
    k = _read(tmp_path).tables[S.KERNELS].to_pylist()
    # task 1: 50 ticks = 1000 ns; task 2: 20 ticks = 400 ns
    assert [(r["accelerator_core"], r["dur_ns"]) for r in k] == [("UNKNOWN", 1000),
                                                                 ("AI_CORE", 400)]


def test_task_track_without_node_basic_info_names_kernels_by_their_kernel_name(tmp_path):
    """No node_basic_info: the kernels take the task_track kernel name (hash 900 -> 'kernel'),
    have no op type, and a warning says so."""
    d = _job(tmp_path)
    (d / "host" / "data" / "aging.compact.node_basic_info.slice_0").unlink()
    data = _read(tmp_path)
    k = data.tables[S.KERNELS].to_pylist()
    assert [(r["name"], r["op_type"]) for r in k] == [("kernel", None), ("kernel", None)]
    assert "no node_basic_info: kernel names from task_track kernel names" in _reasons(data)


def _hccl_info(ts, size, name=501, group=999, remote=1, link=1, transport=0):
    """One hccl_info record (§D.2, the layout of test_raw_cann_by_hand's FFTS case): Memcpy
    (hash 501) of ``size`` bytes from local rank 0 to ``remote``, link HCCS (1), SDMA (0),
    no RDMA type, context id 0xFFFFFFFF."""
    return (_prefix(5500, 0, ts) + struct.pack(
        "<QQQIIIIIIQIIdQQQIIIII", name, 0, group, 0, remote, 4, 0, 0, 0xFFFFFFFF, 0, 0, 0, 0.0,
        0, 0, size, 0, 0, link, transport, 0xFFFF)).ljust(256, b"\0")


def _allreduce_job(tmp_path, sizes) -> Path:
    """A job with one all-reduce (node API item 301) and one HCCL API (level 5500) holding an
    hccl_info of each of ``sizes`` bytes (50 ns apart) for one device task: stream 5, task 10
    on the device over [1000100, 1000200] ticks, its task_track. Returns host/data."""
    stars = _stars(0, 5, 10, DEV_CNT0 + 100) + _stars(1, 5, 10, DEV_CNT0 + 200)
    d = _job(tmp_path, stars=stars, host=False)
    h = d / "host" / "data"
    h.mkdir(parents=True)
    h0 = HOST_MONO0 - 1_000_000
    b = h0 + 1000
    (h / "unaging.api_event.data.slice_0").write_bytes(
        _api(10000, 1, h0, h0 + 900_000, 301) + _api(5500, 1, b, b + 500, 600))
    (h / "unaging.additional.hccl_info.slice_0").write_bytes(
        b"".join(_hccl_info(b + 100 + 50 * i, n) for i, n in enumerate(sizes)))
    (h / "unaging.compact.task_track.slice_0").write_bytes(_task_track(b + 200, 5, 10, typ=2))
    return h


def test_a_later_hccl_info_of_the_same_task_replaces_the_earlier_one(tmp_path):
    """One all-reduce (node API item 301) with one HCCL API (master) that holds two hccl_info
    records for the same device task (stream 5, task 10, no FFTS context): 1 MB, then 3 MB.
    The later one is the small task: link 0->1 moves 3 MB, one packet, in the task's
    [1000100, 1000200] ticks = 2000 ns (not 4 MB in two packets)."""
    h = _allreduce_job(tmp_path, [1_000_000, 3_000_000])
    (h / "unaging.additional.hash_dic.slice_0").write_text(
        "301:hcom_allReduce__7_0_1\n501:Memcpy\n")
    (h / "unaging.additional.type_info_dic.slice_0").write_text("5500_1:master\n")
    data = _read(tmp_path)
    links = data.tables[S.COMM_LINKS].to_pylist()
    assert [(r["src_rank"], r["dst_rank"], r["size_mb"], r["transit_ns"]) for r in links] == [
        (0, 1, 3.0, 2000)]
    ops = data.tables[S.COMM_OPS].to_pylist()
    assert [(o["op_name"], o["transit_ns"]) for o in ops] == [("hcom_allReduce__7_0_1", 2000)]


def test_hccl_info_without_hccl_level_api_ranges_is_a_warning_on_the_hccl_info_file(tmp_path):
    """api_event holds only the node-level range (level 10000), no HCCL-level (5500) one: no
    communication tables, a warning on the hccl_info file, and the kernels stay."""
    d = _job(tmp_path)
    h = d / "host" / "data"
    h0 = HOST_MONO0 - 1_000_000
    (h / "unaging.api_event.data.slice_0").write_bytes(_api(10000, 1, h0, h0 + 900_000, 301))
    (h / "unaging.additional.hccl_info.slice_0").write_bytes(_hccl_info(h0 + 100, 1_000_000))
    data = _read(tmp_path)
    hits = [p for p in data.problems if p.reason.startswith("hccl_info records but no HCCL-")]
    assert len(hits) == 1
    assert hits[0].path.endswith("unaging.additional.hccl_info.slice_0")
    assert S.COMM_OPS not in data.tables
    assert data.tables[S.KERNELS].column("name").to_pylist() == ["MatMul_1", "Add_2"]


# ------------------------------------------------------------------ legacy MindSpore 1.x job

HWTS = "hwts.log.data.45.dev.profiler_default_tag.0.slice_0"
TASK_DESC = "Framework.host.vm.task_desc_info.0.slice_0"
GRAPH_DESC = "Framework.host.vm.graph_desc_info.0.slice_0"


def _hwts(kind, task, syscnt, stream=3):
    """§D.4 64-byte record: byte 0 log type (0 start, 1 end), +6 task id, +8 syscnt, +16
    stream id."""
    return struct.pack("<BBHHHQI", kind, 0, 0, 0, task, syscnt, stream).ljust(64, b"\0")


def _legacy_job(root: Path, task_desc: str, graph_desc: str | None = None) -> Path:
    """Device 0, stream 3: task 1 [100, 150], task 2 [200, 260], task 9 [300, 310] ticks
    (10 ns a tick)."""
    job = root / "JOB1"
    job.mkdir()
    (job / HWTS).write_bytes(b"".join(
        _hwts(k, t, c) for k, t, c in ((0, 1, 100), (1, 1, 150), (0, 2, 200), (1, 2, 260),
                                       (0, 9, 300), (1, 9, 310))))
    (job / TASK_DESC).write_text(task_desc)
    if graph_desc is not None:
        (job / GRAPH_DESC).write_text(graph_desc)
    return job


def _legacy_source(root: Path):
    return next(s for s in scan(root, Problems()) if s.kind == "raw_cann")


def test_legacy_job_kernels_by_hand(tmp_path):
    """task_desc: task 1 = Conv2D-op1 (block dim 32), task 2 = MatMul-op5 (8); task 9 has no
    description (a stream/event task): left out, and the warning counts 1 such task.
    graph_desc gives Conv2D-op1 the type Conv2DBackpropInput (it wins over the name);
    MatMul-op5 has none, so its type comes from the name without '-op5': MatMul.
    Times: 100 ticks * 10 ns = 1000 ns, 50 ticks = 500 ns; 2000 ns, 600 ns."""
    _legacy_job(tmp_path, "Conv2D-op1 32 1 7\nMatMul-op5 8 2 7\n",
                "op_name:Conv2D-op1 op_type:Conv2DBackpropInput\n")
    src = _legacy_source(tmp_path)
    data = read_source(src)
    k = data.tables[S.KERNELS].to_pylist()
    assert [(r["name"], r["op_type"], r["block_num"], r["task_id"], r["stream_id"],
             r["device_id"], r["start_ns"], r["dur_ns"]) for r in k] == [
        ("Conv2D-op1", "Conv2DBackpropInput", 32, 1, 3, 0, 1000, 500),
        ("MatMul-op5", "MatMul", 8, 2, 3, 0, 2000, 600)]
    assert ("1 device tasks have no framework op (stream/event tasks) and are not kernels"
            in _reasons(data))


def test_a_bad_task_desc_line_names_the_task_desc_file(tmp_path):
    _legacy_job(tmp_path, "Conv2D-op1 32 1 7\nMatMul-op5 eight 2 7\n")
    with pytest.raises(InputError) as e:
        read_source(_legacy_source(tmp_path))
    assert str(e.value.path).endswith(TASK_DESC)
    assert e.value.where == "line 2"


def test_a_damaged_hccl_op_info_names_its_file(tmp_path):
    """The repeated-hccl_info job plus an hccl_op_info file of 30 bytes (a record is 64): the
    error names that file and the offset of the partial record (0)."""
    h = _allreduce_job(tmp_path, [1_000_000])
    (h / "unaging.compact.hccl_op_info.slice_0").write_bytes(b"\x5a" * 30)
    with pytest.raises(InputError) as e:
        _read(tmp_path)
    assert str(e.value.path).endswith("unaging.compact.hccl_op_info.slice_0")
    assert e.value.where == 0


def test_prof_raw_with_an_hwts_device_log_instead_of_stars(tmp_path):
    """CANN 6 PROF_ data may hold hwts.data.<dev> (§D.4) instead of stars_soc: the same two
    tasks on stream 4 (task 1 [1000100, 1000150], task 2 [1000200, 1000260] ticks, 20 ns a
    tick) are kernels MatMul_1 (1000 ns) and Add_2 (1200 ns), without context ids."""
    d = _job(tmp_path)
    data_dir = d / "device_0" / "data"
    (data_dir / "stars_soc.data.0.slice_0").unlink()
    (data_dir / "hwts.data.0.slice_0").write_bytes(b"".join(
        _hwts(k, t, DEV_CNT0 + c, stream=4)
        for k, t, c in ((0, 1, 100), (0, 2, 200), (1, 1, 150), (1, 2, 260))))
    k = _read(tmp_path).tables[S.KERNELS].to_pylist()
    assert [(r["name"], r["task_id"], r["context_id"], r["dur_ns"]) for r in k] == [
        ("MatMul_1", 1, None, 1000), ("Add_2", 2, None, 1200)]


def test_a_device_log_that_is_not_sliced_is_named_in_the_error(tmp_path):
    """A job directory whose only device log is 'stars_soc.data.0' without a .slice_<n> suffix:
    no sliced file at all, so no device log to decode, and the error says so on the job."""
    job = tmp_path / "JOB9"
    job.mkdir()
    (job / "stars_soc.data.0").write_bytes(b"\0" * 64)
    with pytest.raises(InputError) as e:
        read_source(_legacy_source(tmp_path))
    assert e.value.path == str(job)
    assert e.value.reason == ("no device task log (hwts / stars_soc) to decode; found only "
                              "no sliced files")


def test_a_device_dir_without_its_numbered_log_is_named_in_the_error(tmp_path):
    """device_0/data/stars_soc.data.slice_0 carries no device number, so the reader takes device
    0 from the directory and finds no stars_soc.data.0 / hwts.data.0: the error is on the job
    directory and lists the kinds that are there."""
    job = tmp_path / "PROF_000001_1_X"
    (job / "device_0" / "data").mkdir(parents=True)
    (job / "device_0" / "data" / "stars_soc.data.slice_0").write_bytes(b"\0" * 64)
    with pytest.raises(InputError) as e:
        read_source(_legacy_source(tmp_path))
    assert e.value.path == str(job)
    assert e.value.reason == ("no device task log (stars_soc.data.0 / hwts.data.0) to decode; "
                              "found only stars_soc")
