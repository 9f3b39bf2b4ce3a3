"""Directory inputs of `ascendprof gate` / `ascendprof diff` (compare.gate.dir_inputs), checked
through the CLI on the committed fixtures (mutation sample seed 38):

- an `ascendprof analyse` output directory of the Qwen3 4-rank run gated against the profiling
  directory it came from: its group labels (process-group names) come from the
  communication_group.json analyse wrote, so every group meets its twin and nothing differs in
  shape;
- an output directory with no usable table is refused with exit 2, naming the directory;
- a profiling directory read for `diff` is labelled with its path (A = / B = of the result, and
  the error for a rank it lacks).

Expected values come from the profiler's own profiler_metadata.json (parallel_group_info),
read here with the json module, and from the paths given on the command line.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from ascendprof.cli.main import main

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
TWO_RANKS = FIXTURES / "torch_npu-2023-2rank"
QWEN3 = FIXTURES / "qwen3-4rank-pp2dp2"


def run(*args):
    return CliRunner().invoke(main, [*map(str, args)])


def as_json(result) -> dict:
    return json.loads(result.output[result.output.index("{"):])


def one_line_error(result) -> str:
    err = result.stderr.strip() if getattr(result, "stderr", None) else result.output.strip()
    assert len(err.splitlines()) == 1, err
    return err


@pytest.fixture(scope="module")
def qwen3_out(tmp_path_factory):
    out = tmp_path_factory.mktemp("seed38") / "out"
    r = run("analyse", QWEN3, "-o", out, "-q")
    assert r.exit_code == 0, r.output[-2000:]
    return QWEN3, out


def test_analyse_output_groups_carry_the_process_group_names(qwen3_out):
    qwen3, out = qwen3_out
    assert (out / "tables").is_dir() and (out / "communication_group.json").is_file()
    # every group a rank's profiler_metadata.json names: "<group_name> (<global ranks>)"
    named = set()
    for meta in sorted(qwen3.glob("rank_*_ascend_pt/profiler_metadata.json")):
        for info in json.loads(meta.read_text())["parallel_group_info"].values():
            ranks = sorted(int(r) for r in info["global_ranks"])
            named.add(f"{info['group_name']} ({', '.join(map(str, ranks))}"
                      f"{',' if len(ranks) == 1 else ''})")
    r = run("gate", out, qwen3, "--format", "json")
    assert r.exit_code == 0, r.output
    doc = as_json(r)
    # the output directory's groups are labelled as the profiling directory's (from its
    # metadata): no "communication groups differ" warning, no group only on one side
    assert doc["warnings"] == []
    groups = [c for c in doc["checks"] if c["rule"] == "bandwidth@group"]
    assert groups
    for c in groups:
        group, transport = c["key"].rsplit(" ", 1)
        assert group in named, c["key"]
        assert transport in ("HCCS", "SDMA", "RDMA", "PCIE"), c["key"]
        assert c["verdict"] == "pass" and c["note"] in ("", None), c
        assert c["change"] == pytest.approx(0.0, abs=1e-9)
    # e.g. the data-parallel group of ranks 0 and 1 (group_name_5 "dp_cp" of rank 0's metadata)
    assert any(c["key"].startswith("dp_cp (0, 1) ") for c in groups)


def test_output_dir_without_a_usable_table_exits_2_naming_it(qwen3_out, tmp_path):
    qwen3, _ = qwen3_out
    # a summary.json alone makes it an analyse output directory, but it has no table to compare
    empty = tmp_path / "empty_out"
    empty.mkdir()
    (empty / "summary.json").write_text("{}", encoding="utf-8")
    for args in ((empty, qwen3), (qwen3, empty)):
        r = run("gate", *args)
        assert r.exit_code == 2, r.output
        err = one_line_error(r)
        assert err == (f"ascendprof: error: {empty}: analyse output directory without any "
                       f"usable table"), err


def test_profiling_dirs_are_labelled_with_their_paths_in_diff(tmp_path):
    b = tmp_path / "run_b"
    shutil.copytree(TWO_RANKS, b)
    r = run("diff", TWO_RANKS, b, "--format", "json", "--workers", "1")
    assert r.exit_code == 0, r.output[-2000:]
    doc = as_json(r)
    assert (doc["a"], doc["b"]) == (str(TWO_RANKS), str(b))
    # a rank the directory lacks: the error names the directory and the ranks it has (0, 1)
    r = run("diff", TWO_RANKS, b, "--ranks", "0,5", "--workers", "1")
    assert r.exit_code == 2, r.output
    err = one_line_error(r)
    assert f"rank(s) 5 not in {b} (ranks there: 0, 1)" in err, err
