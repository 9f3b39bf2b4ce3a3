"""gate_result (ascendprof/compare/gate/result.py), seed 35 survivors: how load_side words a
project error that is neither an InputError nor a gate error (here NothingAnalysable for a
directory holding no profiling data) -- the path named once, then the reason -- and that the
gate exits 2 for it (an unusable gate input), not 3. Then the same kinds of wording at other
places of the module: a missing input path, the "no rank in common" error, the --same-shape
error, and the two rank warnings (ranks differ; checks use the ranks both have), each read back
whole.

Inputs are empty directories made in tmp_path and copies of the msprof-analyze
cluster_step_trace_time.csv of the Qwen3 fixture (tests/reference/gate, ranks 0-3) with rank rows
dropped or renumbered by the csv module; the expected messages are written out from the ranks
kept (``0-1, 3`` for ranks 0, 1, 3) and the documented form ``<path>: <reason>``.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from ascendprof.cli.main import main
from ascendprof.compare.gate.errors import GateInputError
from ascendprof.compare.gate.result import load_side
from ascendprof.model.errors import EXIT_USAGE

ROOT = Path(__file__).resolve().parent.parent
REF = ROOT / "tests" / "reference" / "gate" / "qwen3-4rank-pp2dp2_cluster_step_trace_time.csv"


def test_load_side_of_a_directory_without_profiling_data(tmp_path):
    """load_side turns the NothingAnalysable of an empty directory into a GateInputError whose
    path is the directory and whose reason does not repeat it (nor is empty / 'None')."""
    empty = tmp_path / "nothing here"
    empty.mkdir()
    with pytest.raises(GateInputError) as ei:
        load_side(empty)
    e = ei.value
    assert e.path == str(empty)
    assert e.reason.startswith("no profiling data found"), e.reason
    assert str(empty) not in e.reason
    assert str(e) == f"{empty}: {e.reason}"
    assert e.exit_code == EXIT_USAGE


def test_gate_cli_names_an_empty_current_directory_once(tmp_path):
    """gate REF <empty dir>: one error line, '<dir>: no profiling data found ...', exit 2."""
    empty = tmp_path / "current"
    empty.mkdir()
    r = CliRunner().invoke(main, ["gate", str(REF), str(empty)])
    assert r.exit_code == 2, r.output
    lines = [ln for ln in r.output.splitlines() if "error" in ln]
    assert len(lines) == 1, r.output
    assert lines[0].startswith(f"ascendprof: error: {empty}: no profiling data found"), lines[0]
    assert lines[0].count(str(empty)) == 1, lines[0]
    assert "None" not in lines[0]


def gate(*args):
    return CliRunner().invoke(main, ["gate", *map(str, args)])


def error_line(result) -> str:
    lines = [ln for ln in result.output.splitlines() if ln.startswith("ascendprof: error:")]
    assert len(lines) == 1, result.output
    return lines[0]


def edited_copy(dst: Path, keep, renumber=lambda i: i) -> Path:
    """REF with only the rank rows whose Index is in ``keep`` (renumbered) and the stage rows
    whose ranks are all kept."""
    with open(REF, newline="", encoding="utf-8-sig") as f:
        rd = csv.DictReader(f)
        head, rows = rd.fieldnames, list(rd)
    out = []
    for r in rows:
        if r["Type"] == "rank":
            if int(r["Index"]) not in keep:
                continue
            r = {**r, "Index": str(renumber(int(r["Index"])))}
        elif r["Type"] == "stage":
            ranks = [int(x) for x in r["Index"].strip("()").split(",")]
            if not set(ranks) <= set(keep):
                continue
        out.append(r)
    with open(dst, "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, head, lineterminator="\n")
        w.writeheader()
        w.writerows(out)
    return dst


def test_gate_missing_input_path(tmp_path):
    """A current path that does not exist: '<path>: no such file or directory', exit 2."""
    missing = tmp_path / "no such run"
    r = gate(REF, missing)
    assert r.exit_code == 2, r.output
    assert error_line(r) == f"ascendprof: error: {missing}: no such file or directory"


def test_no_rank_in_common_message_whole(tmp_path):
    """Current = REF's ranks 0-3 renumbered 10-13: the error names the current file, the
    baseline, both rank sets and says nothing is compared."""
    cur = edited_copy(tmp_path / "cluster_step_trace_time.csv", {0, 1, 2, 3}, lambda i: i + 10)
    r = gate(REF, cur)
    assert r.exit_code == 2, r.output
    assert error_line(r) == (f"ascendprof: error: {cur}: no rank in common with {REF} "
                             f"(baseline 0-3, current 10-13): nothing to compare")


def test_other_ranks_warnings_whole(tmp_path):
    """Current = REF without rank 2 (and without stage (2, 3)): ranks 0, 1, 3 against 0-3. Two
    warnings: the rank sets, and that cluster/op type/group checks use the 3 common ranks."""
    cur = edited_copy(tmp_path / "cluster_step_trace_time.csv", {0, 1, 3})
    r = gate(REF, cur, "--format", "json")
    assert r.exit_code in (0, 1), r.output
    doc = json.loads(r.output[r.output.index("{"):])
    assert doc["warnings"] == [
        "the ranks differ: baseline has 4 (0-3), current 3 (0-1, 3)",
        "cluster, op type and group checks use the 3 rank(s) both have (0-1, 3)",
    ]


def test_same_shape_error_whole(tmp_path):
    """The same pair with --same-shape: exit 2, the current file named, the baseline named, and
    the shape difference (only the rank sets: the common-ranks note comes after this check)."""
    cur = edited_copy(tmp_path / "cluster_step_trace_time.csv", {0, 1, 3})
    r = gate(REF, cur, "--same-shape")
    assert r.exit_code == 2, r.output
    assert error_line(r) == (f"ascendprof: error: {cur}: not the same shape as {REF}: "
                             f"the ranks differ: baseline has 4 (0-3), current 3 (0-1, 3)")
