"""Damaged and partial input, end to end: every case of the fault corpus (tests/faultgen.py,
built from real profiler output) must end without a traceback, with the documented exit code and
a message naming the file and the problem; ranks the damage does not touch must give exactly the
rows of a clean run; the input tree must be byte-identical afterwards.

Expected values: the clean run of the same real data (for untouched ranks) and the exit codes and
messages the CLI documents (ascendprof/model/errors.py, cli/main.py). No output of a damaged run is pasted.
"""

from __future__ import annotations

import csv
import json
import re
import shutil

import pytest
from click.testing import CliRunner

import faultgen as FG
from ascendprof.cli.main import main
from treehash import tree_fingerprint

CASES = FG.corpus()
COMPARED = ("cluster_step_trace_time.csv", "op_statistics.csv", "step_trace_check.csv")


def invoke(*args):
    r = CliRunner().invoke(main, [str(a) for a in args])
    if r.exception is not None and not isinstance(r.exception, SystemExit):
        raise AssertionError(f"uncaught {type(r.exception).__name__}: {r.exception}\n{r.output}")
    return r


def analyse(src, out, *extra):
    return invoke("analyse", src, "-o", out, "--quiet", "--no-cache", "--workers", "1",
                  *extra)


def _rows(path):
    if not path.is_file():
        return []
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def rank_rows(out, name, ranks):
    """Rows of output ``name`` that belong to one of ``ranks`` (as text, exactly as written)."""
    rows = _rows(out / name)
    if name == "cluster_step_trace_time.csv":
        keep = [r for r in rows if r["Type"] == "rank" and int(r["Index"]) in ranks]
    else:
        keep = [r for r in rows if r["Rank"] not in ("", "cluster") and int(r["Rank"]) in ranks]
    return sorted(keep, key=lambda r: tuple(r.values()))


_clean: dict[str, object] = {}


@pytest.fixture
def clean_out(tmp_path_factory):
    """Output directory of a clean run of a base (built once per base)."""
    def get(base, args=()):
        if (base, args) not in _clean:
            d = tmp_path_factory.mktemp(f"clean_{base}")
            src = FG.copy_base(base, d / "in")
            r = analyse(src, d / "out", *args)
            assert r.exit_code == 0, r.output
            _clean[(base, args)] = d / "out"
        return _clean[(base, args)]
    return get


def _flat(text: str) -> str:
    """Output without any whitespace, lower-cased: the terminal wraps long lines anywhere."""
    return re.sub(r"\s+", "", text).lower()


@pytest.mark.parametrize("fault", CASES, ids=[c.id for c in CASES])
def test_fault_case(fault, tmp_path, clean_out):
    if not FG.available(fault):
        pytest.skip(f"base {fault.base} not present (../shared/data)")
    target = FG.build(fault, tmp_path)
    src = tmp_path / "in"
    before = tree_fingerprint(src)
    out = tmp_path / "out"

    r = analyse(target, out, *fault.args)

    assert "Traceback" not in r.output and "internal error" not in r.output, r.output
    assert r.exit_code == fault.exit_code, r.output
    flat = _flat(r.output)
    for word in fault.mentions:
        assert _flat(word) in flat, f"{word!r} not in output:\n{r.output}"
    assert tree_fingerprint(src) == before, "the input tree changed"
    if fault.exit_code != 0 and not (out / "summary.json").is_file():
        # a run that stops prints exactly one error line
        assert r.output.strip().count("\n") == 0, r.output
        return

    probs = _rows(out / "problems.csv")
    skipped = [p for p in probs if p["Severity"] == "skipped"]
    summary = json.loads((out / "summary.json").read_text())
    verdicts = json.loads((out / "verdicts.json").read_text())
    keys = [(p["Path"], p["Where"], p["Reason"], p["Severity"]) for p in probs]
    assert len(keys) == len(set(keys)), f"a problem is reported twice: {probs}"
    if fault.skip_expected:
        named = [p for p in skipped if fault.mentions[0].lower() in p["Path"].lower()]
        assert named, f"no skipped problem names {fault.mentions[0]}: {probs}"
        for p in named:
            assert p["Reason"] and p["Affects"], p
        # the same problems in summary.json and verdicts.json
        for doc in (summary, verdicts):
            assert [(p["path"], p["reason"]) for p in doc["problems"]] == \
                [(p["Path"], p["Reason"]) for p in probs]
    else:
        assert not skipped, skipped

    if fault.touched is None:
        return
    good = set(FG.BASE_RANKS[fault.base]) - set(fault.touched)
    clean = clean_out(fault.base, tuple(a for a in fault.args if a == "--timeline"))
    for name in COMPARED:
        expect = rank_rows(clean, name, good)
        assert rank_rows(out, name, good) == expect, f"{name}: untouched ranks differ"


def test_second_run_to_the_same_output_replaces_cleanly(tmp_path):
    """A damaged run after a clean one to the same OUT: no stale file of the clean run stays
    (the damaged rank's communication is gone), no temporary file is left behind."""
    src = FG.copy_base("qwen3", tmp_path / "in")
    out = tmp_path / "out"
    assert analyse(src, out).exit_code == 0
    for r in range(4):
        for n in ("communication.json", "communication_matrix.json"):
            (FG.out_file(src, "qwen3", r, n)).unlink()
    r = analyse(src, out)
    assert r.exit_code == 0, r.output
    assert not (out / "cluster_communication.json").exists()
    assert not [p for p in out.rglob("*") if p.name.endswith(".tmp") or ".partial" in p.name]
    # the same file set as a first run into an empty directory
    fresh = tmp_path / "fresh"
    assert analyse(src, fresh).exit_code == 0
    listing = lambda d: sorted(str(p.relative_to(d)) for p in d.rglob("*")
                               if ".ascendprof-cache" not in p.parts)
    assert listing(out) == listing(fresh)


def test_output_directory_inside_input_is_refused(tmp_path):
    src = FG.copy_base("qwen3", tmp_path / "in")
    before = tree_fingerprint(src)
    r = analyse(src, src / "rank_0_ascend_pt" / "out")
    assert r.exit_code == 2 and "inside the profiling directory" in r.output
    assert tree_fingerprint(src) == before


# ------------------------------------------------------------------------- other commands

_SCAN_CASES = [c for c in CASES if c.exit_code == 0]


@pytest.mark.parametrize("fault", _SCAN_CASES, ids=[c.id for c in _SCAN_CASES])
def test_scan_never_fails_on_damaged_input(fault, tmp_path):
    if not FG.available(fault):
        pytest.skip(f"base {fault.base} not present (../shared/data)")
    target = FG.build(fault, tmp_path)
    before = tree_fingerprint(tmp_path / "in")
    r = invoke("scan", target, "--format", "json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["sources"]
    assert tree_fingerprint(tmp_path / "in") == before


_CMD_CASES = {c.id: c for c in CASES if c.id in (
    "truncated_communication_json_0.3", "empty_kernel_details", "output_dir_is_a_file",
    "non_utf8_kernel_details", "duplicate_rank_copy", "every_rank_broken", "nonexistent_path")}


@pytest.mark.parametrize("case_id", sorted(_CMD_CASES))
@pytest.mark.parametrize("command", ["diff", "gate"])
def test_diff_and_gate_on_damaged_input(command, case_id, tmp_path):
    """diff and gate read profiling directories through the same readers: a damaged current
    run against the clean copy ends with a documented exit code and no traceback; an input that
    cannot be read at all is named in a one-line error."""
    fault = _CMD_CASES[case_id]
    clean = FG.copy_base(fault.base, tmp_path / "clean")
    target = FG.build(fault, tmp_path)
    before = tree_fingerprint(tmp_path / "in")
    args = [command, clean, target] + (["--format", "json"] if command == "diff" else [])
    args += ["--workers", "1"]
    r = invoke(*args)
    assert "Traceback" not in r.output and "internal error" not in r.output, r.output
    if fault.exit_code == 0:
        assert r.exit_code in ((0,) if command == "diff" else (0, 1)), r.output
    else:
        assert r.exit_code in (2, 3), r.output
        assert r.output.strip().count("\n") == 0, r.output
        assert any(_flat(w) in _flat(r.output) for w in fault.mentions), r.output
    assert tree_fingerprint(tmp_path / "in") == before


def test_gate_on_unreadable_output_file(tmp_path):
    """gate given a damaged CSV (cut off mid-row) names the file."""
    src = FG.copy_base("qwen3", tmp_path / "in")
    out = tmp_path / "out"
    assert analyse(src, out).exit_code == 0
    bad = tmp_path / "cluster_step_trace_time.csv"
    shutil.copy(out / "cluster_step_trace_time.csv", bad)
    FG.empty(bad)
    r = invoke("gate", out / "cluster_step_trace_time.csv", bad)
    assert r.exit_code == 2, r.output
    assert "cluster_step_trace_time.csv" in r.output and "Traceback" not in r.output
