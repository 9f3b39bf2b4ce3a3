"""`ascendprof analyse` on the torch_npu 2-rank collections: every level, text and db.

Level0 collects no communication data and writes op type 'N/A' for every kernel (see the
level0 kernel_details.csv and the absence of communication*.json in ../shared/data), so three
files cannot be produced there; the summary must say so instead of writing empty or invented
results.
"""

import json

import pytest
from click.testing import CliRunner

from ascendprof.cli.main import main

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


# ------------------------------------------------------------------ trace_view only when needed

def _check_rows(out):
    import csv

    with open(out / "step_trace_check.csv", newline="") as f:
        return list(csv.DictReader(f))


def _run(src, out, *extra):
    r = CliRunner().invoke(main, ["analyse", str(src), "-o", str(out), "-q", "--format", "json",
                                  *extra])
    assert r.exit_code == 0, r.output
    return json.loads((out / "summary.json").read_text())


@pytest.mark.parametrize("level", ["level0", "level1", "level2"])
def test_trace_view_skipped_when_kernels_carry_the_facts(shared_data, tmp_path, level):
    """kernel_details.csv has the compute and the COMMUNICATION (big op) rows at every level, so
    trace_view.json is not read; the recomputed Computing / Communication(Not Overlapped) / Free
    still match the profiler's step_trace_time.csv to 0.001 %, and only Preparing (which needs
    the framework's ProfilerStep start from the trace) is left unrecomputed, saying why."""
    src = shared_data / "torch_npu-2rank-levels" / "text" / level
    summary = _run(src, tmp_path / "out")
    assert set(summary["not_read"]) == {"0", "1"}
    assert all("trace_view.json" in v for v in summary["not_read"].values())
    assert all(m.startswith("kernels") for m in summary["breakdown_methods"].values())
    rows = _check_rows(tmp_path / "out")
    for r in rows:
        if r["Metric"] in ("Computing", "Communication(Not Overlapped)", "Free"):
            assert abs(float(r["Deviation(%)"])) < 1e-3, r
    assert {r["Note"] for r in rows if r["Metric"] == "Preparing"} == \
        {"ProfilerStep start unknown (no framework events in the input)"}


def test_timeline_option_reads_trace_view(shared_data, tmp_path):
    """--timeline reads trace_view.json: the breakdown comes from the device timeline and
    Preparing is recomputed too; to the same output directory the cached default run is not
    reused (the reading choice is part of the cache key)."""
    src = shared_data / "torch_npu-2rank-levels" / "text" / "level1"
    out = tmp_path / "out"
    _run(src, out)
    summary = _run(src, out, "--timeline")
    assert summary["not_read"] == {}
    assert all(m.startswith("timeline") for m in summary["breakdown_methods"].values())
    prep = [r for r in _check_rows(out) if r["Metric"] == "Preparing"]
    assert prep and all(abs(float(r["Deviation(%)"])) < 1e-3 for r in prep)


def test_trace_view_read_when_communication_is_only_there(shared_data, tmp_path):
    """Without COMMUNICATION rows in kernel_details.csv and without communication.json, while
    step_trace_time.csv reports communication, only the trace has the HCCL big ops: it is read."""
    import csv
    import shutil

    src = tmp_path / "in"
    shutil.copytree(shared_data / "torch_npu-2rank-levels" / "text" / "level1", src)
    for rank in (0, 1):
        d = src / f"rank{rank}_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
        for name in ("communication.json", "communication_matrix.json"):
            (d / name).unlink()
        with open(d / "kernel_details.csv", newline="", encoding="utf-8") as f:
            rows = list(csv.reader(f))
        core = rows[0].index("Accelerator Core")
        kept = [rows[0]] + [r for r in rows[1:] if r[core] not in ("COMMUNICATION", "HCCL")]
        assert len(kept) < len(rows)
        with open(d / "kernel_details.csv", "w", newline="", encoding="utf-8") as f:
            csv.writer(f).writerows(kept)
    summary = _run(src, tmp_path / "out")
    assert summary["not_read"] == {}
    assert all(m.startswith("timeline") for m in summary["breakdown_methods"].values())
