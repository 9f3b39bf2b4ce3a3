"""`ascendprof analyse` on the torch_npu 2-rank collections: every level, text and db.

Level0 collects no communication data and writes op type 'N/A' for every kernel (see the
level0 kernel_details.csv and the absence of communication*.json in ../shared/data), so three
files cannot be produced there; the summary must say so instead of writing empty or invented
results.
"""

import json

import pytest
from click.testing import CliRunner

from ascendprof.cli import main

ALWAYS = ("cluster_step_trace_time.csv", "step_trace_check.csv", "top_kernels.csv",
          "verdicts.json", "problems.csv", "summary.json", "communication_group.json")
WITH_COMM = ("cluster_communication.json", "cluster_communication_matrix.json",
             "op_statistics.csv")


@pytest.mark.parametrize("kind", ["text", "db"])
@pytest.mark.parametrize("level", ["level0", "level1", "level2"])
def test_every_output(shared_data, tmp_path, kind, level):
    src = shared_data / "torch_npu-2rank-levels" / kind / level
    out = tmp_path / "out"
    r = CliRunner().invoke(main, ["analyse", str(src), "-o", str(out), "-q"])
    assert r.exit_code == 0, r.output
    for f in ALWAYS:
        assert (out / f).is_file(), f
    for r_ in (0, 1):
        assert (out / "tables" / f"rank{r_}" / "kernels.parquet").is_file()
    summary = json.loads((out / "summary.json").read_text())
    if level == "level0":
        assert set(summary["not_written"]) == set(WITH_COMM)
        assert "Level0" in summary["not_written"]["cluster_communication.json"]
        for f in WITH_COMM:
            assert not (out / f).exists()
    else:
        assert summary["not_written"] == {}
        for f in WITH_COMM:
            assert (out / f).is_file(), f
    # rank rows of the cluster file: one per rank for step 50 (the collected step)
    rows = (out / "cluster_step_trace_time.csv").read_text().splitlines()
    assert [x.split(",")[:3] for x in rows[1:3]] == [["50", "rank", "0"], ["50", "rank", "1"]]
