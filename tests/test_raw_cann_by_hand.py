"""PROF_ raw data (kind raw_cann) read through ``read_source``, case by case. No public CANN 7/8
raw data exists, so every directory is built here byte by byte from the spec tables (§D.1
names, §D.2 host records, §D.3 STARS logs, §D.6 time files), as in test_raw_cann.py; values
are chosen by hand and the expected results worked out in the comments.

Device clock: 50 MHz (20 ns a tick), dev_start cntvct 1000000, host clock_monotonic_raw
2e9 ns, start_info offset 1.7e18 - 1e9 ns.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

from ascendprof.model import schemas as S
from ascendprof.model.errors import InputError
from ascendprof.model.problems import Problems
from ascendprof.readers import read_source
from ascendprof.scan import scan
from ascendprof.sysio.textio import METADATA_MAX_BYTES

DEV_CNT0, HOST_MONO0 = 1_000_000, 2_000_000_000
INVALID = 0xFFFFFFFF


def _prefix(level, typ, ts, thread=7):
    return struct.pack("<HHIIIQ", 0x5A5A, level, typ, thread, 40, ts)


def _api(level, typ, begin, end, item, thread=7):
    return struct.pack("<HHIIIQQQ", 0x5A5A, level, typ, thread, 0, begin, end, item)


def _stars(func, stream, task, ts, cnt=0, sqe=0, subtype=0, subid=0):
    """§D.3: func type bits 5..0, cnt 9..6, sqe type 15..10; FFTS+ logs carry the subtask
    type at +16 and the subtask (context) id at +18."""
    return struct.pack("<HHHHQBBH", func | (cnt << 6) | (sqe << 10), 0x6BD3, stream, task, ts,
                       subtype, 0, subid).ljust(64, b"\0")


def _task_track(ts, stream, task, typ=1):
    return (_prefix(5000, typ, ts) + struct.pack("<HHHHQQHHB", 0, stream, task, 0, 1, 900, 8, 0,
                                                 0)).ljust(64, b"\0")


def _job(root: Path, info=None, stars=None, host=True) -> Path:
    """A PROF_ raw directory of device 0 (rank 3) with the time files of §D.6. Default device
    log: two ACSQ tasks on stream 4: task 1 [1000100, 1000150], task 2 [1000200, 1000260]."""
    d = root / "PROF_000001_1_X"
    dev = d / "device_0"
    (dev / "data").mkdir(parents=True)
    (dev / "info.json.0").write_text(json.dumps(info or {
        "rank_id": 3, "DeviceInfo": [{"id": 0, "hwts_frequency": "50"}], "CPU": [{"Frequency": ""}]}))
    (dev / "dev_start.log.0").write_text(f"clock_monotonic_raw: 1\ncntvct: {DEV_CNT0}\n")
    (dev / "host_start.log.0").write_text(f"[Host]\nclock_monotonic_raw: {HOST_MONO0}\ncntvct: 5\n")
    (dev / "start_info.0").write_text(json.dumps({"collectionTimeBegin": "1700000000000000",
                                                  "clockMonotonicRaw": "1000000000"}))
    if stars is None:
        stars = (_stars(0, 4, 1, DEV_CNT0 + 100) + _stars(0, 4, 2, DEV_CNT0 + 200)
                 + _stars(1, 4, 1, DEV_CNT0 + 150) + _stars(1, 4, 2, DEV_CNT0 + 260))
    (dev / "data" / "stars_soc.data.0.slice_0").write_bytes(stars)
    if host:
        h = d / "host" / "data"
        h.mkdir(parents=True)
        nb = b"".join((_prefix(10000, 0, ts) + struct.pack("<QIQIIB", name, 0, typ, 8, 0, 0)
                       ).ljust(64, b"\0") for ts, name, typ in ((HOST_MONO0 - 900, 101, 201),
                                                                 (HOST_MONO0 - 800, 102, 202)))
        (h / "aging.compact.node_basic_info.slice_0").write_bytes(nb)
        (h / "unaging.compact.task_track.slice_0").write_bytes(
            _task_track(HOST_MONO0 - 850, 4, 1) + _task_track(HOST_MONO0 - 750, 4, 2))
        (h / "unaging.additional.hash_dic.slice_0").write_text(
            "101:MatMul_1\n102:Add_2\n201:MatMul\n202:Add\n900:kernel\n")
    return d


def _read(root: Path):
    return read_source(scan(root, Problems())[0])


def _reasons(data):
    return [p.reason for p in data.problems]


# ------------------------------------------------------------------ the device clock's files

def test_info_json_without_hwts_frequency_names_the_field(tmp_path):
    _job(tmp_path, info={"rank_id": 3, "DeviceInfo": [{"id": 0}]})
    with pytest.raises(InputError) as e:
        _read(tmp_path)
    assert e.value.path.endswith("info.json.0")
    assert e.value.reason == "info.json has no DeviceInfo[0].hwts_frequency"


def test_an_info_json_past_the_metadata_limit_is_refused(tmp_path):
    """info.json is metadata: one larger than METADATA_MAX_BYTES (16 MiB) is not read, and
    without it there is no clock."""
    d = _job(tmp_path)
    p = d / "device_0" / "info.json.0"
    p.write_text(p.read_text() + " " * METADATA_MAX_BYTES)
    with pytest.raises(InputError) as e:
        read_source(scan(tmp_path, Problems())[0])
    assert e.value.reason.startswith("needed for the device clock")


def test_a_dev_start_log_past_the_metadata_limit_is_ignored(tmp_path):
    """An oversized dev_start.log counts as missing: no host/device anchor, so the times stay
    device ticks (task 1 starts at tick 1000100 -> 1000100 * 20 ns) and a warning says so."""
    d = _job(tmp_path)
    p = d / "device_0" / "dev_start.log.0"
    p.write_text(p.read_text() + "#" * METADATA_MAX_BYTES)
    data = _read(tmp_path)
    k = data.tables[S.KERNELS]
    assert k.column("start_ns").to_pylist() == [1_000_100 * 20, 1_000_200 * 20]
    assert any("not on the local wall clock" in r for r in _reasons(data))


# ------------------------------------------------------------------ device tasks without host data

def test_ffts_tasks_without_host_data_are_named_by_their_subtask_type(tmp_path):
    """FFTS+ logs (func 34 start / 35 end) of stream 6 task 11: subtask 3 of type 6 (MIX_AIC)
    [1000300, 1000350] and subtask 4 of type 8 (SDMA) [1000400, 1000410]. No host data: no op
    names, the core is the subtask type, the context id the subtask id."""
    stars = (_stars(34, 6, 11, DEV_CNT0 + 300, subtype=6, subid=3)
             + _stars(35, 6, 11, DEV_CNT0 + 350, subtype=6, subid=3)
             + _stars(34, 6, 11, DEV_CNT0 + 400, subtype=8, subid=4)
             + _stars(35, 6, 11, DEV_CNT0 + 410, subtype=8, subid=4))
    _job(tmp_path, stars=stars, host=False)
    data = _read(tmp_path)
    k = data.tables[S.KERNELS].to_pylist()
    assert [(r["accelerator_core"], r["context_id"], r["dur_ns"]) for r in k] == [
        ("MIX_AIC", 3, 50 * 20), ("SDMA", 4, 10 * 20)]
    assert [(r["name"], r["op_type"], r["block_num"]) for r in k] == [(None, None, None)] * 2
    assert "no host task_track data: kernels have no op names" in _reasons(data)


# ------------------------------------------------------------------ HCCL small tasks

def test_hccl_info_without_api_events_is_a_warning_and_the_kernels_stay(tmp_path):
    d = _job(tmp_path)
    rec = (_prefix(5500, 0, HOST_MONO0 - 700) + b"\0" * 16).ljust(256, b"\0")
    (d / "host" / "data" / "unaging.additional.hccl_info.slice_0").write_bytes(rec)
    data = _read(tmp_path)
    assert data.tables[S.KERNELS].column("name").to_pylist() == ["MatMul_1", "Add_2"]
    assert ("hccl_info without api_event / task_track data: no communication tables"
            in _reasons(data))
    assert S.COMM_OPS not in data.tables


def test_an_ffts_small_task_is_matched_by_the_context_id_of_its_hccl_info(tmp_path):
    """One all-reduce (node API item 301) with one HCCL API (type 1 = master) holding an
    hccl_info (Memcpy, SDMA over HCCS, 1 MB to rank 1, ctxID 3), its task_track (stream 5,
    task 10) and a level-5500 context_id_info: FFTS+ is on, so the small task is device
    subtask 3 of stream 5 task 10 [1000100, 1000200] ticks = 2000 ns of transit. That task is
    communication, not a kernel."""
    stars = (_stars(34, 5, 10, DEV_CNT0 + 100, subtype=8, subid=3)
             + _stars(35, 5, 10, DEV_CNT0 + 200, subtype=8, subid=3))
    d = _job(tmp_path, stars=stars, host=False)
    h = d / "host" / "data"
    h.mkdir(parents=True)
    h0 = HOST_MONO0 - 1_000_000
    b = h0 + 1000
    (h / "unaging.api_event.data.slice_0").write_bytes(
        _api(10000, 1, h0, h0 + 900_000, 301) + _api(5500, 1, b, b + 500, 600))
    info = (_prefix(5500, 0, b + 100) + struct.pack(
        "<QQQIIIIIIQIIdQQQIIIII", 501, 0, 999, 0, 1, 4, 0, 0, 3, 0, 0, 0, 0.0, 0, 0,
        1_000_000, 0, 0, 1, 0, 0xFFFF)).ljust(256, b"\0")  # link HCCS, transport SDMA
    (h / "unaging.additional.hccl_info.slice_0").write_bytes(info)
    (h / "unaging.compact.task_track.slice_0").write_bytes(_task_track(b + 200, 5, 10, typ=2))
    ctx = (_prefix(5500, 0, b + 300) + struct.pack("<QII", 301, 1, 3)).ljust(256, b"\0")
    (h / "unaging.additional.context_id_info.slice_0").write_bytes(ctx)
    (h / "unaging.additional.hash_dic.slice_0").write_text(
        "301:hcom_allReduce__7_0_1\n501:Memcpy\n")
    (h / "unaging.additional.type_info_dic.slice_0").write_text("5500_1:master\n")
    data = _read(tmp_path)
    ops = data.tables[S.COMM_OPS].to_pylist()
    assert [(o["op_name"], o["group"], o["transit_ns"]) for o in ops] == [
        ("hcom_allReduce__7_0_1", "999", 2000)]
    assert data.tables[S.KERNELS].num_rows == 0


def test_a_device_task_without_a_host_launch_record_is_a_kernel_without_name(tmp_path):
    """A third ACSQ task on stream 4 (task 3, [1000300, 1000310] ticks) that no host
    task_track launched (e.g. launched before the host side started recording): it stays a
    kernel of 10 ticks = 200 ns, with no name, op type or block count; the two launched tasks
    keep theirs. (Before: the merge left NaN in the name column and the rank failed with
    ArrowTypeError 'Expected bytes, got a float object'.)"""
    stars = (_stars(0, 4, 1, DEV_CNT0 + 100) + _stars(0, 4, 2, DEV_CNT0 + 200)
             + _stars(1, 4, 1, DEV_CNT0 + 150) + _stars(1, 4, 2, DEV_CNT0 + 260)
             + _stars(0, 4, 3, DEV_CNT0 + 300) + _stars(1, 4, 3, DEV_CNT0 + 310))
    _job(tmp_path, stars=stars)
    k = _read(tmp_path).tables[S.KERNELS].to_pylist()
    assert [(r["name"], r["op_type"], r["block_num"], r["dur_ns"]) for r in k] == [
        ("MatMul_1", "MatMul", 8, 1000), ("Add_2", "Add", 8, 1200), (None, None, None, 200)]
