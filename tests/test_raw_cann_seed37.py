"""Raw CANN data (kind raw_cann) read through ``read_source``: the cases the seed-37 mutation
sample of readers/raw_cann.py found untested (host/host_start.log as the fallback of §D.6, the
rank the kernels and warnings carry, the legacy job's clock warning, HCCL small tasks the device
log lacks, a PROF_ device folder with no sliced file). Directories built byte by byte with the
helpers of test_raw_cann_by_hand.py / test_raw_cann_warnings_and_legacy_jobs.py; expected
values worked out in the comments.

Clock of the built PROF_ job (§D.6): 50 MHz (20 ns a tick), dev_start cntvct 1000000, host
clock_monotonic_raw 2e9 ns (no cntvct_diff, no CPU frequency: nothing added), start_info
offset 1700000000000000 us * 1000 - 1e9 ns. A task starting at tick 1000000 + x is at
2e9 + 20 x + 1.7e18 - 1e9 = 1.7e18 + 1e9 + 20 x ns.
"""

from __future__ import annotations

import pytest

from ascendprof.model import schemas as S
from ascendprof.model.errors import InputError
from ascendprof.model.problems import Problems
from ascendprof.readers import read_source
from ascendprof.scan import scan
from test_raw_cann_by_hand import DEV_CNT0, _job, _read, _reasons, _stars
from test_raw_cann_warnings_and_legacy_jobs import (_allreduce_job, _legacy_job,
                                                    _legacy_source)

T0 = 1_700_000_000_000_000_000 + 1_000_000_000  # local ns of device tick DEV_CNT0


def test_host_start_log_of_the_host_folder_is_the_fallback(tmp_path):
    """No device_0/host_start.log.0, but host/host_start.log (same content): the clock is
    complete, so the kernels are on the local wall clock (task 1 at tick +100: T0 + 2000 ns,
    task 2 at +200: T0 + 4000 ns) and no warning says otherwise."""
    d = _job(tmp_path)
    dev_log = d / "device_0" / "host_start.log.0"
    (d / "host" / "host_start.log").write_text(dev_log.read_text())
    dev_log.unlink()
    data = _read(tmp_path)
    assert data.tables[S.KERNELS].column("start_ns").to_pylist() == [T0 + 2000, T0 + 4000]
    assert not any("not on the local wall clock" in r for r in _reasons(data))


def test_kernels_and_warnings_of_a_prof_job_carry_its_rank(tmp_path):
    """info.json.0 names rank 3: both kernels are rank 3's, and so is the warning about the
    missing host data."""
    _job(tmp_path, host=False)
    data = _read(tmp_path)
    assert data.rank == 3
    assert data.tables[S.KERNELS].column("rank").to_pylist() == [3, 3]
    assert [p.rank for p in data.problems] == [3]


def test_hccl_small_tasks_missing_from_the_device_log_are_a_warning_on_the_job(tmp_path):
    """The host launches its HCCL small task as stream 5 task 10, but the device log holds
    stream 5 task 11 only [tick +100, +200]: no communication table, one warning on the job
    directory, and the device task stays a kernel (100 ticks = 2000 ns, no host name)."""
    _allreduce_job(tmp_path, [1_000_000])
    job = tmp_path / "PROF_000001_1_X"
    (job / "device_0" / "data" / "stars_soc.data.0.slice_0").write_bytes(
        _stars(0, 5, 11, DEV_CNT0 + 100) + _stars(1, 5, 11, DEV_CNT0 + 200))
    data = _read(tmp_path)
    hits = [p for p in data.problems if p.reason.startswith("HCCL small tasks")]
    assert [(p.path, p.reason, p.rank) for p in hits] == [
        (str(job), "HCCL small tasks found on the host but none in the device log: no "
                   "communication tables", 3)]
    assert S.COMM_OPS not in data.tables
    k = data.tables[S.KERNELS].to_pylist()
    assert [(r["stream_id"], r["task_id"], r["name"], r["dur_ns"]) for r in k] == [
        (5, 11, None, 2000)]


def test_a_prof_device_folder_without_any_sliced_file_is_named_in_the_error(tmp_path):
    """PROF_ job with device_0/info.json.0 (rank 3) and a device log 'stars_soc.data.0' that
    lacks its .slice_<n> suffix: device 0 is known but there is no sliced file at all."""
    dev = tmp_path / "PROF_000001_1_X" / "device_0"
    (dev / "data").mkdir(parents=True)
    (dev / "info.json.0").write_text('{"rank_id": 3, "DeviceInfo": [{"id": 0, '
                                     '"hwts_frequency": "50"}]}')
    (dev / "data" / "stars_soc.data.0").write_bytes(b"\0" * 64)
    (src,) = scan(tmp_path, Problems())
    assert (src.kind, src.device_id) == ("raw_cann", 0)
    with pytest.raises(InputError) as e:
        read_source(src)
    assert e.value.reason == ("no device task log (stars_soc.data.0 / hwts.data.0) to decode; "
                              "found only no sliced files")


def test_legacy_job_kernels_carry_the_rank_and_the_clock_warning(tmp_path):
    """Legacy JOB1 of device 0 (rank 0 from the device id in the file names): its kernels are
    rank 0's, and the job's HWTS log gets the warning that the times are device ticks."""
    _legacy_job(tmp_path, "Conv2D-op1 32 1 7\nMatMul-op5 8 2 7\n")
    src = _legacy_source(tmp_path)
    assert src.rank == 0
    data = read_source(src)
    assert data.tables[S.KERNELS].column("rank").to_pylist() == [0, 0]
    assert ("legacy raw job has no dev_start.log: kernel times are on the device clock (10 ns "
            "ticks), not wall clock") in _reasons(data)
