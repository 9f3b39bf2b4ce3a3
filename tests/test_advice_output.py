"""advice.json / advice.csv, the --advice option, the summary and the rule declarations."""

from __future__ import annotations

import csv
import json

import pytest
from click.testing import CliRunner

from ascendprof.analyze import advice
from ascendprof.analyze.advice.base import AREAS, SEVERITY_RANK, TABLE_FILES
from ascendprof.cli.main import main


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def test_every_rule_declares_inputs_threshold_source_and_area():
    ids = [r.id for r in advice.RULES]
    assert len(ids) == len(set(ids))
    for r in advice.RULES:
        assert r.area in AREAS and r.id.startswith(r.area + ".")
        assert r.needs and all(alt and all(a in TABLE_FILES for a in alt) for alt in r.needs)
        assert r.threshold and r.source and r.title
    # one module per area, each with rules
    assert {r.area for r in advice.RULES} == set(AREAS)


def test_default_run_writes_advice_json_csv_and_summary(qwen3, tmp_path):
    out = tmp_path / "out"
    res = run("analyse", qwen3, "-o", out, "-q", "--no-cache")
    assert res.exit_code == 0, res.output
    doc = json.loads((out / "advice.json").read_text())
    assert doc["format"] == "ascendprof-advice/1" and doc["mode"] == "summary"
    assert [r["id"] for r in doc["rules"]] == [r.id for r in advice.RULES]
    items = doc["items"]
    assert items, "qwen3 is host-bound on ranks 0 and 2"
    keys = [(SEVERITY_RANK[f["severity"]], -(f["impact_us_per_step"] or 0)) for f in items]
    assert keys == sorted(keys)
    for f in items:
        assert f["message"] and f["advice"] and f["evidence"] and f["source"]
    with open(out / "advice.csv", newline="") as fh:
        table = list(csv.reader(fh))
    assert table[0] == advice.CSV_COLUMNS
    assert [r[2] for r in table[1:]] == [f["id"] for f in items]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["advice"]["count"] == len(items)
    assert summary["advice"]["shown"] == min(5, len(items))
    assert f"Advice ({len(items)}" in res.output
    # ranks 1 and 3 have no kernel_details: the rules needing kernels say so
    dev = [r for r in doc["rules"] if r["id"] == "schedule.device_idle"][0]
    assert dev["fired_ranks"] == [0, 2]
    assert dev["skipped"][0]["ranks"] == [1, 3] and "kernels" in dev["skipped"][0]["reason"]


def test_advice_off_writes_nothing_and_removes_an_older_run(qwen3, tmp_path):
    out = tmp_path / "out"
    assert run("analyse", qwen3, "-o", out, "-q").exit_code == 0
    assert (out / "advice.json").exists() and (out / "advice.csv").exists()
    res = run("analyse", qwen3, "-o", out, "-q", "--advice", "off")
    assert res.exit_code == 0, res.output
    assert not (out / "advice.json").exists() and not (out / "advice.csv").exists()
    assert json.loads((out / "summary.json").read_text())["advice"] is None
    assert "Advice (" not in res.output


def test_advice_all_reads_host_events_and_shows_every_item(shared_data, tmp_path):
    src = shared_data / "torch_npu-2rank-levels/text/level2"
    out = tmp_path / "out"
    res = run("analyse", src, "-o", out, "-q", "--advice", "all")
    assert res.exit_code == 0, res.output
    doc = json.loads((out / "advice.json").read_text())
    st = {r["id"]: r["status"] for r in doc["rules"]}
    assert st["schedule.dataloader"] == "silent"  # read and judged, not skipped
    assert st["communication.byte_alignment"] == "fired"
    summary = json.loads((out / "summary.json").read_text())
    assert summary["advice"]["shown"] == summary["advice"]["count"] == len(doc["items"])
    # the cache keeps the modes apart: summary mode afterwards skips the host rules again
    res = run("analyse", src, "-o", out, "-q")
    doc = json.loads((out / "advice.json").read_text())
    assert doc["mode"] == "summary"
    st = {r["id"]: r for r in doc["rules"]}
    assert st["schedule.dataloader"]["status"] == "skipped"
    assert "--advice all" in st["schedule.dataloader"]["skipped"][0]["reason"]


def test_advice_option_is_checked():
    res = run("analyse", ".", "--advice", "some")
    assert res.exit_code == 2 and "--advice" in res.output


def test_a_failing_rule_is_reported_not_raised(monkeypatch):

    from ascendprof.analyze.advice import base

    bad = base.Rule("memory.broken", "memory", "x", needs=(), threshold={"t": 1}, source="s",
                    check=lambda ctx: 1 / 0)
    monkeypatch.setattr(advice, "RANK_RULES", [bad])
    res = advice.rank_advice({}, {}, 0)
    assert res["findings"] == []
    st, why = res["status"]["memory.broken"]
    assert st == "skipped" and "ZeroDivisionError" in why


def test_findings_of_one_rule_merge_over_ranks_with_the_worst_rank_first():
    rule = advice.RULES[0]
    from ascendprof.analyze.advice.base import finding

    per_rank = {r: {"findings": [finding(rule, [r], severity=sev, message=f"m{r}",
                                         advice=["a"], evidence={"r": r}, impact_ns=imp,
                                         step_ns=1e6)],
                    "status": {rule.id: ["fired", ""]}}
                for r, sev, imp in ((0, "info", 5e5), (1, "warning", 1e5), (2, "warning", 2e5),
                                    (5, "info", 1e3))}
    doc = advice.cluster_advice(per_rank, {})
    (it,) = doc["items"]
    assert it["ranks"] == [0, 1, 2, 5] and it["severity"] == "warning"
    assert it["worst_rank"] == 2 and it["evidence"] == {"r": 2}
    assert it["message"].startswith("ranks 0-2, 5 (worst rank 2): m2")
    assert it["per_rank"]["0"]["share_of_step_pct"] == 50.0


@pytest.mark.parametrize("export,mode", [
    ("torch_npu-2rank-levels/text/level2/rank0_ascend_pt", "all"),
    ("torch_npu-2rank-levels/text/level0/rank0_ascend_pt", "summary"),
    ("torch_npu-2rank-levels/db/level2/rank0_ascend_pt", "summary"),
    ("mindspore-legacy/profiler/PROF_000001_20230818142704322_COJGGGCANRMICFBC", "summary"),
])
def test_no_rule_fails_on_the_real_exports(shared_data, export, mode):
    """A rule that raises is reported as skipped (the analysis goes on); on real data that
    must never happen, or a defect would pass for a skip."""
    from _advice_data import advise_real

    res = advise_real(shared_data / export, mode)
    failed = {k: v for k, v in res["status"].items() if "rule failed" in v[1]}
    assert not failed


def test_no_rule_fails_on_qwen3(qwen3):
    from _advice_data import advise_real

    for r in range(4):
        res = advise_real(qwen3 / f"rank_{r}_ascend_pt")
        assert not [k for k, v in res["status"].items() if "rule failed" in v[1]]
