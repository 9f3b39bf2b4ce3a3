"""The Python API returns exactly what the command line writes.

For one input, `ascendprof analyse` writes its files; the API's tables and results are compared
with those files read back independently (pandas / pyarrow / json), so an API that computed
anything a second way, or differently, fails here.
"""

from __future__ import annotations

import io
import json
import subprocess
import sys

import pandas as pd
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

import ascendprof
from ascendprof.cli.main import main
from ascendprof.model.errors import NothingAnalysable, UsageError
from tests.conftest import QWEN3, ROOT


@pytest.fixture(scope="module")
def both(tmp_path_factory):
    out = tmp_path_factory.mktemp("api") / "out"
    r = CliRunner().invoke(main, ["analyse", str(QWEN3), "-o", str(out), "-q", "--no-cache"])
    assert r.exit_code == 0, r.output
    return ascendprof.open(QWEN3), out


def _csv(df: pd.DataFrame) -> pd.DataFrame:
    """A frame as it reads back from CSV (the same text round trip the file went through)."""
    return pd.read_csv(io.StringIO(df.to_csv(index=False)))


def test_ranks_and_tables_equal_the_written_parquet(both):
    c, out = both
    assert c.ranks == [0, 1, 2, 3]
    seen = 0
    for rank_dir in sorted((out / "tables").iterdir()):
        rank = int(rank_dir.name.removeprefix("rank"))
        for f in sorted(rank_dir.glob("*.parquet")):
            written = pq.read_table(f)
            got = c.table(f.stem, ranks=[rank])
            assert got.equals(written), (rank, f.stem)
            seen += 1
    assert seen >= 20
    # several ranks come back concatenated in rank order
    both_ranks = c.table("comm_ops", ranks=[2, 0])
    assert both_ranks.column("rank").to_pylist() == sorted(both_ranks.column("rank").to_pylist())
    assert both_ranks.num_rows == sum(pq.read_table(out / "tables" / f"rank{r}" /
                                                    "comm_ops.parquet").num_rows for r in (0, 2))


@pytest.mark.parametrize("method, file", [
    ("step_breakdown", "cluster_step_trace_time.csv"), ("op_statistics", "op_statistics.csv"),
    ("top_kernels", "top_kernels.csv"), ("step_check", "step_trace_check.csv")])
def test_frames_equal_the_written_csv(both, method, file):
    c, out = both
    pd.testing.assert_frame_equal(_csv(getattr(c, method)()), pd.read_csv(out / file),
                                  check_dtype=False)


def test_further_csv_files_equal_the_written_ones(both):
    c, out = both
    names = ["pipeline.csv", "pipeline_stages.csv", "memory_summary.csv", "memory_top_ops.csv"]
    present = [n for n in names if (out / n).exists()]
    assert present  # the Qwen3 sample has pipeline and memory data
    for name in present:
        pd.testing.assert_frame_equal(_csv(c.frame(name)), pd.read_csv(out / name),
                                      check_dtype=False)
    assert c.frame("no_such.csv").empty


def test_json_results_equal_the_written_files(both):
    c, out = both
    comm = json.loads((out / "cluster_communication.json").read_text())
    assert {k: c.communication()[k] for k in c.communication()} == comm
    matrix = json.loads((out / "cluster_communication_matrix.json").read_text())
    assert {k: c.communication_matrix()[k] for k in c.communication_matrix()} == matrix
    assert c.communication_groups() == json.loads((out / "communication_group.json").read_text())
    written = json.loads((out / "verdicts.json").read_text())
    assert json.loads(json.dumps(c.verdicts())) == written["verdicts"]
    problems = pd.read_csv(out / "problems.csv")
    assert len(c.problems) == len(problems)


def test_diff_equals_the_command(both, tmp_path):
    c, _ = both
    r = CliRunner().invoke(main, ["diff", str(QWEN3), "--ranks", "0,2", "--format", "json"])
    assert r.exit_code == 0, r.output
    cli = json.loads(r.output)
    got = c.diff(ranks=(0, 2)).as_dict(15)
    assert json.loads(json.dumps(got, default=float)) == cli


def test_errors(tmp_path):
    with pytest.raises(UsageError):
        ascendprof.open(tmp_path / "missing")
    with pytest.raises(NothingAnalysable):
        ascendprof.open(tmp_path)
    c = ascendprof.open(QWEN3)
    with pytest.raises(UsageError, match="unknown table"):
        c.table("nope")
    with pytest.raises(UsageError, match="rank 9"):
        c.table("kernels", ranks=[9])
    with pytest.raises(UsageError):
        ascendprof.open(QWEN3, thresholds={"no_such_threshold": 1})


def test_cache_dir_serves_the_same_tables(tmp_path):
    cache = tmp_path / "cache"
    first = ascendprof.open(QWEN3, cache_dir=cache).table("kernels", ranks=[2])
    assert any(cache.iterdir())  # stored on first read
    again = ascendprof.open(QWEN3, cache_dir=cache).table("kernels", ranks=[2])
    assert again.equals(first)


def test_example_script_runs(tmp_path):
    r = subprocess.run([sys.executable, str(ROOT / "examples" / "tour.py"), str(QWEN3),
                        str(tmp_path / "tour")], capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "ranks: [0, 1, 2, 3]" in r.stdout and "verdicts:" in r.stdout
    assert (tmp_path / "tour" / "cluster_trace.json").stat().st_size > 0


def test_analyse_through_the_api_writes_what_the_command_writes(both, tmp_path):
    c, out = both
    assert c.analyse(tmp_path / "o", cache=False) == 0
    for name in ("cluster_step_trace_time.csv", "cluster_communication.json",
                 "cluster_communication_matrix.json", "op_statistics.csv", "verdicts.json"):
        assert (tmp_path / "o" / name).read_bytes() == (out / name).read_bytes(), name


def test_a_run_is_picked_as_the_command_picks_it(tmp_path):
    # two jobs side by side: the Qwen3 sample and the 2023 torch_npu 2-rank collection
    import shutil

    from ascendprof.scan import MultipleRuns

    tree = tmp_path / "tree"
    shutil.copytree(QWEN3, tree / "qwen3")
    shutil.copytree(ROOT / "fixtures" / "torch_npu-2023-2rank", tree / "old")
    with pytest.raises(MultipleRuns, match="holds 2 separate runs") as e:
        ascendprof.open(tree)
    assert "run=NAME" in str(e.value)
    with pytest.raises(UsageError, match="no run 'nope'"):
        ascendprof.open(tree, run="nope")
    c = ascendprof.open(tree, run="qwen3")
    assert c.ranks == [0, 1, 2, 3]
    alone = ascendprof.open(tree / "qwen3")
    pd.testing.assert_frame_equal(c.step_breakdown(), alone.step_breakdown())
    # Collection.analyse keeps the pick, as `analyse TREE --run qwen3` does
    assert c.analyse(tmp_path / "api", cache=False) == 0
    r = CliRunner().invoke(main, ["analyse", str(tree), "--run", "qwen3", "-o",
                                  str(tmp_path / "cli"), "-q", "--no-cache"])
    assert r.exit_code == 0, r.output
    for name in ("cluster_step_trace_time.csv", "verdicts.json"):
        assert (tmp_path / "api" / name).read_bytes() == (tmp_path / "cli" / name).read_bytes()
