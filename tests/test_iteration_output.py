"""The legacy cluster's iteration-trace breakdown reaches the analyse outputs (seed 003)."""

import csv

import pytest
from click.testing import CliRunner

from ascendprof.cli.main import main


def test_cluster_propose_iteration_trace_per_rank(shared_data, tmp_path):
    src = shared_data / "mindspore-legacy" / "cluster_propose"
    out = tmp_path / "out"
    r = CliRunner().invoke(main, ["analyse", str(src), "-o", str(out), "-q"])
    assert r.exit_code == 0, r.output
    got = {row["rank"]: row for row in csv.DictReader(open(out / "iteration_trace.csv"))}
    assert sorted(got) == ["0", "1", "2", "3"]
    for rank in range(4):
        rows = list(csv.DictReader(open(src / f"step_trace_raw_{rank}_detail_time.csv")))
        # the last row has step '-' (not a numbered step); MindInsight's reader drops it too
        rows = [x for x in rows if x["step_num"].isdigit()]
        # step_trace_raw counts 100 MHz device ticks: 1 tick = 10 ns = 1e-5 ms
        for col, name in (("iteration_interval", "iteration_interval_ms"),
                          ("fp_and_bp", "fp_bp_ms"), ("tail", "tail_ms")):
            expected = sum(int(x[col]) for x in rows) / len(rows) * 1e-5
            assert float(got[str(rank)][name]) == pytest.approx(expected, rel=1e-9), (rank, col)
        assert int(got[str(rank)]["steps"]) == len(rows)
    assert (out / "cluster_step_trace_time.csv").is_file()
