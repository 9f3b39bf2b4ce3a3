"""gate_result (ascendprof/compare/gate/result.py), seed 35 survivors: how load_side words a
project error that is neither an InputError nor a gate error (here NothingAnalysable for a
directory holding no profiling data) -- the path named once, then the reason -- and that the
gate exits 2 for it (an unusable gate input), not 3.

Inputs are empty directories made in tmp_path; the expected message is written out from the
documented form ``<path>: <reason>`` of InputError.
"""

from __future__ import annotations

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
