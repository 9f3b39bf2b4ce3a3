"""Raw CANN reader. Real data: the legacy MindSpore job mindspore-legacy/JOB3 (4 MB HWTS log +
Framework task descriptions). Its kernels are checked against (a) a pairing written here with
struct the way MindInsight's op time parser does it (consecutive start/end of the same op in the
log filtered to framework task ids) and (b) run_1/normal_run/profiler/output_timeline_data_1.txt,
which MindInsight produced from this same job. Modern PROF_ raw data has no public sample: that
case is built byte by byte from the spec tables (§D.2-§D.6) and says so."""

from __future__ import annotations

import json
import struct
from decimal import Decimal

import pytest

from ascendprof.model import schemas as S
from ascendprof.model.errors import InputError, RecordError
from ascendprof.model.problems import Problems
from ascendprof.readers import raw_cann
from ascendprof.scan import RAW_CANN, scan


def _job3(shared_data):
    return shared_data / "mindspore-legacy" / "JOB3"


def test_job3_listed_once_with_its_data_dir(shared_data):
    srcs = [s for s in scan(shared_data / "mindspore-legacy", Problems()) if s.kind == RAW_CANN]
    paths = [s.path for s in srcs]
    assert str(_job3(shared_data)) in paths
    assert not any(p.endswith("JOB3/data") for p in paths)
    job3 = next(s for s in srcs if s.path == str(_job3(shared_data)))
    assert (job3.rank, job3.device_id) == (1, 1)
    assert "data/training_trace.46.dev.profiler_default_tag.1.slice_0" in job3.files
    # host-only fragments are not sources
    assert not any(p.endswith(("JOB4/data", "container/0/data")) for p in paths)


def test_job3_kernels_match_an_independent_struct_pairing(shared_data):
    job = _job3(shared_data)
    data = raw_cann.read(next(s for s in scan(job, Problems()) if s.path == str(job)))
    k = data.tables[S.KERNELS]
    assert k.schema.equals(S.SCHEMAS[S.KERNELS], check_metadata=False)

    ops = {}
    for line in open(job / "Framework.host.vm.task_desc_info.1.slice_0"):
        name, _block, task, _stream = line.split()
        ops[int(task)] = name
    raw = (job / "hwts.log.data.45.dev.profiler_default_tag.1.slice_0").read_bytes()
    logs = []
    for off in range(0, len(raw), 64):
        head, _core, _m, _blk, task, syscnt, stream = struct.unpack_from("<BBHHHQI", raw, off)
        if head & 7 in (0, 1) and task in ops:
            logs.append((head & 7, task, syscnt))
    count = ticks = 0
    i = 0
    while i + 1 < len(logs):
        a, b = logs[i], logs[i + 1]
        if a[0] == 0 and b[0] == 1 and ops[a[1]] == ops[b[1]]:
            count, ticks, i = count + 1, ticks + b[2] - a[2], i + 2
        else:
            i += 1
    assert k.num_rows == count == 2817
    assert sum(k.column("dur_ns").to_pylist()) == ticks * 10      # 10 ns per HWTS cycle
    assert set(k.column("name").to_pylist()) <= set(ops.values())
    assert k.column("op_type").to_pylist()[:1] and None not in k.column("op_type").to_pylist()


def test_job3_kernels_match_mindinsight_timeline_of_the_same_job(shared_data):
    job = _job3(shared_data)
    k = raw_cann.read(next(s for s in scan(job, Problems()) if s.path == str(job))).tables[S.KERNELS]
    ref = (shared_data / "mindspore-legacy" / "run_1" / "normal_run" / "profiler"
           / "output_timeline_data_1.txt").read_text().splitlines()[1:]
    rows = [r.split(",") for r in ref]
    assert k.num_rows == len(rows)
    want = sorted((r[0], int(Decimal(r[2]) * 100_000), int(Decimal(r[3]) * 100_000)) for r in rows)
    got = sorted((n, s // 10, d // 10) for n, s, d in zip(
        k.column("name").to_pylist(), k.column("start_ns").to_pylist(), k.column("dur_ns").to_pylist()))
    assert got == want    # same op, same start cycle, same duration for every kernel


def test_training_trace_only_job_is_skipped_by_the_scanner(shared_data):
    problems = Problems()
    assert scan(shared_data / "mindspore-legacy" / "JOB1", problems) == []
    assert "without a device task log" in problems.items[0].reason


def test_reader_without_device_log_is_an_input_error(tmp_path):
    from ascendprof.scan import Source

    (tmp_path / "training_trace.46.dev.profiler_default_tag.0.slice_0").write_bytes(b"\0" * 40)
    src = Source(path=str(tmp_path), kind=RAW_CANN, rank=0, device_id=0,
                 files=["training_trace.46.dev.profiler_default_tag.0.slice_0"])
    with pytest.raises(InputError, match="no device task log"):
        raw_cann.read(src)


def _prefix(level, ts, thread=7, magic=0x5A5A):
    return struct.pack("<HHIIIQ", magic, level, 0, thread, 40, ts)


def _stars(func, stream, task, ts, cnt=0, sqe=0):
    return struct.pack("<HHHHQ", func | (cnt << 6) | (sqe << 10), 0x6BD3, stream, task, ts).ljust(64, b"\0")


def _build_prof_raw(root):
    """A PROF_ raw directory written from the spec tables (§D.1 names, §D.2/§D.3 layouts,
    §D.6 time files); values chosen by hand."""
    d = root / "PROF_000001_1_X"
    dev = d / "device_0"
    (dev / "data").mkdir(parents=True)
    (d / "host" / "data").mkdir(parents=True)
    (dev / "info.json.0").write_text(json.dumps({"rank_id": 3, "DeviceInfo": [{"id": 0, "hwts_frequency": "50"}],
                                                 "CPU": [{"Frequency": ""}]}))
    (dev / "dev_start.log.0").write_text("clock_monotonic_raw: 1\ncntvct: 1000000\n")
    (dev / "host_start.log.0").write_text("[Host]\nclock_monotonic_raw: 2000000000\ncntvct: 5\n")
    (dev / "start_info.0").write_text(json.dumps({"collectionTimeBegin": "1700000000000000",
                                                  "clockMonotonicRaw": "1000000000"}))
    # two tasks on stream 4: task 1 [1000100, 1000150] ticks, task 2 [1000200, 1000260] (50 MHz)
    stars = (_stars(0, 4, 1, 1000100) + _stars(0, 4, 2, 1000200, cnt=1) + _stars(1, 4, 1, 1000150, cnt=2)
             + _stars(1, 4, 2, 1000260, cnt=3))
    (dev / "data" / "stars_soc.data.0.slice_0").write_bytes(stars[:100])   # a record straddles
    (dev / "data" / "stars_soc.data.0.slice_1").write_bytes(stars[100:])   # the slice boundary
    # host (monotonic ns): node ops at 2000000500 / 2000001500, launches right after
    tt = b"".join((_prefix(5000, ts) + struct.pack("<HHHHQQHHB", 0, 4, task, 0, 1, 900, 8, 0, 0)).ljust(64, b"\0")
                  for ts, task in ((2000000600, 1), (2000001600, 2)))
    nb = b"".join((_prefix(10000, ts) + struct.pack("<QIQIIB", name, tt_, typ, 0x10008, 0, 0)).ljust(64, b"\0")
                  for ts, name, typ, tt_ in ((2000000500, 101, 201, 0), (2000001500, 102, 202, 2)))
    (d / "host" / "data" / "unaging.compact.task_track.slice_0").write_bytes(tt)
    (d / "host" / "data" / "aging.compact.node_basic_info.slice_0").write_bytes(nb)
    (d / "host" / "data" / "unaging.additional.hash_dic.slice_0").write_text(
        "101:MatMul_1\n102:Add_2\n201:MatMul\n202:Add\n900:kernel\n")
    (d / "host" / "data" / "unaging.additional.type_info_dic.slice_0").write_text("5000_1:KERNEL_AICORE\n")
    return d


def test_prof_raw_built_from_spec(tmp_path):
    d = _build_prof_raw(tmp_path)
    src = scan(tmp_path, Problems())[0]
    assert (src.kind, src.rank, src.device_id, src.path) == (RAW_CANN, 3, 0, str(d))
    k = raw_cann.read(src).tables[S.KERNELS]
    assert k.column("name").to_pylist() == ["MatMul_1", "Add_2"]
    assert k.column("op_type").to_pylist() == ["MatMul", "Add"]
    assert k.column("accelerator_core").to_pylist() == ["AI_CORE", "AI_VECTOR_CORE"]
    assert k.column("block_num").to_pylist() == [8, 8]
    # durations: 50 and 60 ticks at 50 MHz = 1000 and 1200 ns
    assert k.column("dur_ns").to_pylist() == [1000, 1200]
    # start by hand: host mono0 2e9 + (1000100-1000000)*20 ns + (1.7e18 - 1e9)
    assert k.column("start_ns").to_pylist()[0] == 2_000_000_000 + 2000 + 1_700_000_000_000_000_000 - 1_000_000_000
    assert k.column("context_id").null_count == 2


def test_prof_raw_truncated_device_log_names_file_and_offset(tmp_path):
    d = _build_prof_raw(tmp_path)
    p = d / "device_0" / "data" / "stars_soc.data.0.slice_1"
    p.write_bytes(p.read_bytes()[:-10])
    with pytest.raises(RecordError) as ei:
        raw_cann.read(scan(tmp_path, Problems())[0])
    assert ei.value.where == 192 and "stars_soc.data.0.slice_0" in ei.value.path
