"""`ascendprof scan ../shared/data` lists every source with the right kind and rank.

The expectations are written from the data's own file names and metadata (see
../shared/data/README.md), not from the scanner's output.
"""

import json

from click.testing import CliRunner

from ascendprof.cli.main import main

EXPECTED = set()
# torch_npu text / db: profiler_info_{rank}.json in every rank directory
for lvl in ("level0", "level1", "level2"):
    for r in (0, 1):
        EXPECTED.add((r, "torch_npu", f"torch_npu-2rank-levels/text/{lvl}/rank{r}_ascend_pt"))
        EXPECTED.add((r, "db", f"torch_npu-2rank-levels/db/{lvl}/rank{r}_ascend_pt"))
for r in range(4):
    EXPECTED.add((r, "torch_npu", f"qwen3-4rank-pp2dp2/rank_{r}_ascend_pt"))
    # step_trace_raw_{0..3}_detail_time.csv, hccl_raw_{0..3}.csv
    EXPECTED.add((r, "legacy_mindspore", "mindspore-legacy/cluster_propose"))
# profiler/: step_trace_raw_0 and _10, aicore_intermediate_1_* -> ranks 0, 10 and 1
for r in (0, 1, 10):
    EXPECTED.add((r, "legacy_mindspore", "mindspore-legacy/profiler"))
# run_{1..4}/normal_run/profiler: *_1 files (single card, device 1)
for n in (1, 2, 3, 4):
    EXPECTED.add((1, "legacy_mindspore", f"mindspore-legacy/run_{n}/normal_run/profiler"))
# the two PROF_ directories: device_0 / device_1 info.json rank_id 0 and 1
EXPECTED.add((0, "prof", "mindspore-legacy/profiler/PROF_000001_20230818142704322_COJGGGCANRMICFBC"))
EXPECTED.add((1, "prof", "mindspore-legacy/profiler/PROF_000001_20230818142704567_GQFAMHBKGODKJMLA"))
# JOB3: raw HWTS log hwts.log.data.45.dev.profiler_default_tag.1.slice_0 (device 1)
EXPECTED.add((1, "raw_cann", "mindspore-legacy/JOB3"))


def test_scan_lists_every_source(shared_data):
    r = CliRunner().invoke(main, ["scan", str(shared_data), "--format", "json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.output)
    got = {(s["rank"], s["kind"], s["path"].split(str(shared_data) + "/")[1]) for s in doc["sources"]}
    assert got == EXPECTED
    raw = [s for s in doc["sources"] if s["kind"] == "raw_cann"]
    assert all(s["kind_label"] == "raw CANN data, decoded by ascendprof" for s in raw)
