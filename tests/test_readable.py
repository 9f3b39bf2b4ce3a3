"""The answer first, bounded at any size: the terminal summary of ``ascendprof analyse`` (default
options, COLUMNS=80) for 1, 4, 128 and 1024 ranks opens with the headline (step time, its split
into Computing / Communication(Not Overlapped) / Free, the cause with its ranks, what to look at
next), prints no number cut by the width, groups repeated notes into one line per kind with
rank ranges, and stays within one screen (40 lines) at 1024 ranks. summary.json carries the
same headline first.

Expected step times come from the profiler's own step_trace_time.csv files, read here with the
csv module (the step = Computing + Communication(Not Overlapped) + Free, in us, per rank; the
headline is their mean over ranks in ms)."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from ascendprof.cli.main import main
from ascendprof.report import bounded
from conftest import FIXTURES, QWEN3

SPLIT = ("Computing", "Communication(Not Overlapped)", "Free")


def _analyse(src: Path, out: Path, *extra: str, html: bool = False) -> list[str]:
    r = CliRunner().invoke(main, ["analyse", str(src), "-o", str(out), "--no-cache",
                                  *extra], env={"COLUMNS": "80",
                                                "ASCENDPROF_HTML": "1" if html else "0"})
    assert r.exit_code in (0, 1), r.output
    return r.output.rstrip("\n").split("\n")


def _profiler_steps(root: Path) -> dict[int, dict[str, float]]:
    """{rank: {column: mean us over the steps}} from each rank's step_trace_time.csv."""
    out = {}
    for f in sorted(root.rglob("ASCEND_PROFILER_OUTPUT/step_trace_time.csv")):
        rank = int(re.search(r"rank_(\d+)", str(f)).group(1))
        with open(f, newline="", encoding="utf-8-sig") as fh:
            rows = list(csv.DictReader(fh))
        out[rank] = {c: sum(float(r[c]) for r in rows) / len(rows) for c in SPLIT}
    return out


def _check_screen(lines: list[str]) -> None:
    """No line past 80 columns, no number cut short by rich ('420…')."""
    for ln in lines:
        # the CLI's last line names the page by its full path (not wrapped by rich)
        assert len(ln) <= 80 or ln.startswith("HTML report: "), ln
        assert not re.search(r"\d…", ln), f"a number cut at 80 columns: {ln}"


def _check_headline(lines: list[str], steps: dict[int, dict[str, float]]) -> None:
    assert lines[0].startswith("ascendprof ")
    assert lines[1].startswith("Step time "), lines[:3]
    head = " ".join(lines[1:4])
    step_ms = sum(sum(v.values()) for v in steps.values()) / len(steps) / 1000
    assert f"Step time {step_ms:,.1f} ms" in lines[1]
    for col in SPLIT:
        ms = sum(v[col] for v in steps.values()) / len(steps) / 1000
        assert re.search(re.escape(col) + r"\s+" + re.escape(f"{ms:,.1f} ms"), head), (col, ms)
    assert any(ln.startswith("Cause") for ln in lines[2:8])
    assert any(ln.startswith("Next: ") for ln in lines[2:12])


def test_four_ranks_headline_first(tmp_path):
    lines = _analyse(QWEN3, tmp_path / "o")
    _check_screen(lines)
    _check_headline(lines, _profiler_steps(QWEN3))
    cause = next(ln for ln in lines if ln.startswith("Cause"))
    assert cause.startswith("Cause [ranks 2-3]: Pipeline stages are unbalanced")
    # the two ranks without kernel_details: one grouped note, not one per rank
    note = [ln for ln in lines if "ranks 1, 3 (2 notes)" in ln]
    assert len(note) == 1 and "step breakdown" in note[0]
    # Bubble is 0 in every step_trace_time.csv of the sample: the column is left out, so the
    # only bubble shown is the recomputed pipeline bubble, said to be recomputed
    assert not any(" Bubble " in ln for ln in lines)
    assert any("pipeline bubble" in ln and "recomputed" in " ".join(lines) for ln in lines)
    doc = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert list(doc)[0] == "headline"
    h = doc["headline"]
    steps = _profiler_steps(QWEN3)
    assert h["step_ms"] == pytest.approx(
        sum(sum(v.values()) for v in steps.values()) / len(steps) / 1000, abs=1e-3)
    assert h["cause"]["ranks"] == "ranks 2-3" and h["cause"]["severity"] == "critical"
    assert sum(v["pct"] for v in h["split"].values()) == pytest.approx(100, abs=0.2)


def test_one_rank_headline_first(tmp_path):
    src = FIXTURES / "torch_npu-db-level1-rank0"
    lines = _analyse(src, tmp_path / "o")
    _check_screen(lines)
    assert lines[1].startswith("Step time ") and "mean of 1 rank" in lines[1]
    assert "slowest rank" not in lines[1]
    doc = json.loads((tmp_path / "o" / "summary.json").read_text())
    (row,) = doc["ranks"]  # one rank, one step: the headline is that row
    step_ms = (row["computing_us"] + row["comm_not_overlapped_us"] + row["free_us"]) / 1000
    assert doc["headline"]["step_ms"] == pytest.approx(step_ms, abs=1e-3)
    assert f"Step time {step_ms:,.1f} ms" in lines[1]


def _cluster(generated_cluster, n: int) -> Path:
    return generated_cluster(n, "--kernels-per-rank", "20", "--comm-ops-per-rank", "10")


def test_128_ranks_bounded(tmp_path, generated_cluster):
    root = _cluster(generated_cluster, 128)
    lines = _analyse(root, tmp_path / "o")
    _check_screen(lines)
    _check_headline(lines, _profiler_steps(root))
    assert len(lines) <= 40, "\n".join(lines)
    # no per-rank note: each kind once, with its rank ranges
    notes = [ln for ln in lines if ln.startswith("  warning ranks")]
    assert notes and len(notes) <= 6
    assert not any(re.match(r"\s+warning rank \d+:", ln) for ln in lines)
    # the step breakdown: the 5 longest steps, then min / median / max over all 128 ranks
    steps = _profiler_steps(root)
    total = {r: sum(v.values()) / 1000 for r, v in steps.items()}
    top = sorted(total, key=total.get, reverse=True)[:5]
    i = next(i for i, ln in enumerate(lines) if ln.startswith("Step breakdown"))
    shown = [int(ln.split()[0]) for ln in lines[i + 3:i + 8]]
    assert shown == top
    row = {ln.split()[0]: ln.split() for ln in lines[i + 8:i + 11]}
    assert row["max"][1] == f"{max(total.values()):,.1f}"
    assert row["min"][1] == f"{min(total.values()):,.1f}"


@pytest.mark.slow
def test_1024_ranks_fit_one_screen(tmp_path, generated_cluster, monkeypatch):
    """Default options (the page on): the whole terminal output within 40 lines of 80
    columns, the page under 5 MB."""
    root = _cluster(generated_cluster, 1024)
    monkeypatch.chdir(tmp_path)
    lines = _analyse(root, Path("o"), html=True)
    _check_screen(lines)
    _check_headline(lines, _profiler_steps(root))
    screen = sum(max(1, -(-len(ln) // 80)) for ln in lines)  # rows on an 80-column screen
    assert screen <= 40, "\n".join(lines)
    assert lines[-1].startswith("HTML report: ") and lines[-1].split()[2].endswith(
        "o/report.html")
    assert (tmp_path / "o" / "report.html").stat().st_size < 5_000_000
    doc = json.loads((tmp_path / "o" / "summary.json").read_text())
    kinds = doc["notes"]
    # every problem in a kind (summary.json bounds its list above 128: count them all)
    assert sum(k["count"] for k in kinds) == bounded.total(doc["problems"]) and len(kinds) <= 6


# ------------------------------------------------------------------------------ invocations


def _run(args: list[str], cwd: Path | None = None, monkeypatch=None):
    if cwd is not None:
        monkeypatch.chdir(cwd)
    return CliRunner().invoke(main, args, env={"COLUMNS": "100", "ASCENDPROF_HTML": "0"})


def test_analyse_dot_writes_into_the_job_and_skips_its_own_output(tmp_path, monkeypatch):
    """`cd job && ascendprof analyse .`: the default output (./ascendprof_output) goes beside
    the ranks; a second run does not read the first run's output as input."""
    import shutil

    job = tmp_path / "job"
    shutil.copytree(QWEN3, job)
    for i in range(2):
        r = _run(["analyse", ".", "--no-cache"], job, monkeypatch)
        assert r.exit_code == 0, r.output
        doc = json.loads((job / "ascendprof_output" / "summary.json").read_text())
        assert sorted(s["rank"] for s in doc["sources"]) == [0, 1, 2, 3]
        assert not any("ascendprof_output" in p["path"] for p in doc["problems"])
    assert (job / "ascendprof_output" / "cluster_step_trace_time.csv").is_file()
    # scan skips it too
    r = _run(["scan", ".", "--format", "json"], job, monkeypatch)
    assert len(json.loads(r.output)["sources"]) == 4
    # the inside of a rank's folder is no place for the output
    r = _run(["analyse", ".", "-o", "rank_0_ascend_pt/out"], job, monkeypatch)
    assert r.exit_code == 2 and "inside the profiling directory" in r.output
    assert len(r.output.strip().splitlines()) == 1


def test_a_folder_inside_a_rank_analyses_that_rank(tmp_path, monkeypatch):
    """`analyse rank_0_ascend_pt/ASCEND_PROFILER_OUTPUT`: the rank is analysed (its step
    breakdown is that of its step_trace_time.csv) and a note says which folder to give."""
    inner = QWEN3 / "rank_0_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
    r = _run(["analyse", str(inner), "-o", str(tmp_path / "o"), "--no-cache"])
    assert r.exit_code == 0, r.output
    doc = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert [s["rank"] for s in doc["sources"]] == [0]
    want = _profiler_steps(QWEN3)[0]
    assert doc["headline"]["step_ms"] == pytest.approx(sum(want.values()) / 1000, abs=1e-3)
    assert any("inside the profiling directory" in p["reason"]
               and p["reason"].rstrip().endswith("(give it next time)")
               for p in doc["problems"])
    r = _run(["scan", str(inner), "--format", "json"])
    assert r.exit_code == 0 and len(json.loads(r.output)["sources"]) == 1


def test_prof_run_writes_the_step_breakdown_it_prints(tmp_path, shared_data):
    """A PROF_ collection has no step breakdown of the profiler's: the one ascendprof
    recomputes is printed and written to cluster_step_trace_time.csv, one row per step of
    the PROF_'s step_trace_*.json files, Stage = Computing + Communication(Not Overlapped) +
    Free on every row, and the terminal's rows are the file's (ms, one decimal)."""
    prof = next((shared_data / "mindspore-legacy" / "profiler").glob("PROF_*"))
    steps = sorted(int(re.search(r"_(\d+)\.json$", p.name).group(1))
                   for p in (prof / "device_0" / "timeline").glob("step_trace_*.json"))
    r = _run(["analyse", str(prof), "-o", str(tmp_path / "o"), "--no-cache"])
    assert r.exit_code in (0, 1), r.output
    with open(tmp_path / "o" / "cluster_step_trace_time.csv", newline="") as f:
        rows = [x for x in csv.DictReader(f) if x["Type"] == "rank"]
    assert sorted(int(x["Step"]) for x in rows) == steps
    for x in rows:
        parts = sum(float(x[c]) for c in SPLIT)
        assert float(x["Stage"]) == pytest.approx(parts, abs=0.01)
    printed = {}
    out = r.output.splitlines()
    start = next(i for i, ln in enumerate(out) if ln.startswith("Step breakdown"))
    end = next(i for i, ln in enumerate(out) if ln.startswith("Total = "))
    for ln in out[start:end]:
        cells = ln.split()
        if len(cells) >= 4 and cells[0].isdigit() and cells[1].isdigit():
            printed[(int(cells[0]), int(cells[1]))] = cells[2]
    assert printed
    for x in rows:
        key = (int(x["Index"]), int(x["Step"]))
        if key in printed:
            parts = sum(float(x[c]) for c in SPLIT) / 1000
            assert printed[key] == f"{parts:,.1f}"
    doc = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert "cluster_step_trace_time.csv" not in doc["not_written"]


# ------------------------------------------------------------------------------ newcomer

ROOT = Path(__file__).resolve().parents[1]
#: what a user cannot follow: internal documents, spec sections, issue numbers
INTERNAL = re.compile(r"§|\bissue #?\d+|\(#\d+\)|\bof #\d+|seed 0\d\d|shared/spec|"
                      r"spec section")


def test_readme_is_short_and_keeps_the_two_commands():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 200
    blocks = re.findall(r"```bash\n(.*?)\n```", text, re.S)
    assert blocks[:2] == [
        "python3 -m venv .venv && .venv/bin/pip install -q -e '.[test]' && "
        ".venv/bin/ascendprof analyse fixtures/qwen3-4rank-pp2dp2 -o ascendprof_output",
        ".venv/bin/python -m pytest -q"]
    assert "docs/outputs.md" in text and "docs/report/first-screen.png" in text
    assert (ROOT / "docs" / "report" / "first-screen.png").is_file()
    assert not INTERNAL.search(text), INTERNAL.search(text)
    ref = (ROOT / "docs" / "outputs.md").read_text(encoding="utf-8")
    assert "## What `analyse` writes" in ref and not INTERNAL.search(ref)


def test_help_texts_name_nothing_internal():
    runner = CliRunner()
    for cmd in ([], ["scan"], ["analyse"], ["report"], ["diff"], ["gate"], ["timeline"]):
        r = runner.invoke(main, [*cmd, "--help"])
        assert r.exit_code == 0, r.output
        assert not INTERNAL.search(r.output), (cmd, INTERNAL.search(r.output))


def test_terminal_and_page_name_nothing_internal(tmp_path):
    lines = _analyse(QWEN3, tmp_path / "o", html=True)
    assert not INTERNAL.search("\n".join(lines))
    page = (tmp_path / "o" / "report.html").read_text(encoding="utf-8")
    body = page[page.index("<body>"):page.index('<script type="application/json"')]
    assert not INTERNAL.search(re.sub(r"<[^>]+>", " ", body))


def test_help_lists_the_api():
    import pydoc

    import ascendprof

    text = pydoc.render_doc(ascendprof, renderer=pydoc.plaintext)
    for name in ("open(path", "Collection", "analyse(directory", "diff(a", "rebuild_report"):
        assert name in text, name
    for name in ("open", "analyse", "diff", "rebuild_report", "Collection"):
        assert callable(getattr(ascendprof, name)) and name in dir(ascendprof)


@pytest.mark.parametrize("value", ["0", "-1"])
def test_invalid_workers_rejected(value, tmp_path):
    for cmd in (["analyse", str(QWEN3), "-o", str(tmp_path / "o")], ["diff", str(QWEN3),
                                                                       "--ranks", "0,2"],
                ["timeline", str(QWEN3), "-o", str(tmp_path / "t.json")]):
        r = CliRunner().invoke(main, [*cmd, "--workers", value])
        assert r.exit_code == 2 and "--workers" in r.output, (cmd, r.output)
    assert not (tmp_path / "o").exists()
