"""Comparisons that line up (issue #16): diff matches communication groups by what they are,
gate lists every rule, reads msprof-analyze's output, warns about (or refuses) inputs of
another shape, uses the statistic diff shows, and refuses incomplete inputs and bad rules.

Real data: the torch_npu 2-rank collections (text and db, levels 1 and 2), the Qwen3 fixture,
msprof-analyze 26.2.0's output for Qwen3 (tests/reference/qwen3-4rank-pp2dp2, its README says
how it was made) and an older msprof-analyze output (fixtures/torch_npu-2023-*). Expected
values are read here from the profilers' files with the csv / json modules.
"""

from __future__ import annotations

import csv
import json
import shutil
import statistics
from pathlib import Path

import pytest
from click.testing import CliRunner

from ascendprof.cli.main import main
from ascendprof.compare.gate import DEFAULT_RULES

OUT = "ASCEND_PROFILER_OUTPUT"
ROOT = Path(__file__).resolve().parents[1]
MSA_QWEN3 = ROOT / "tests" / "reference" / "qwen3-4rank-pp2dp2"
OLD_MSA = ROOT / "fixtures" / "torch_npu-2023-msprof-analyze-output"
OLD_RUN = ROOT / "fixtures" / "torch_npu-2023-2rank"


def cli(*args):
    return CliRunner().invoke(main, [*map(str, args)])


def as_json(r) -> dict:
    return json.loads(r.output[r.output.index("{"):])


def levels(shared, kind, level):
    return shared / "torch_npu-2rank-levels" / kind / level


def rank_comm(root: Path, rank_dir: str) -> dict:
    return json.loads((root / rank_dir / OUT / "communication.json").read_text())


def wait_ms(root: Path, rank_dir: str) -> float:
    """Σ Wait Time(ms) of a rank's ops (one step in these collections)."""
    doc = rank_comm(root, rank_dir)
    return sum(op["Communication Time Info"]["Wait Time(ms)"] for s in doc.values()
               for kind in s.values() for k, op in kind.items() if not k.startswith("Total"))


# ------------------------------------------------------------------ diff: groups line up

@pytest.mark.parametrize("b", [("text", "level2"), ("db", "level1")], ids=["level2", "db"])
def test_diff_matches_the_same_group_of_two_runs(shared_data, b):
    a_dir, b_dir = levels(shared_data, "text", "level1"), levels(shared_data, *b)
    r = cli("diff", a_dir, b_dir, "--format", "json")
    assert r.exit_code == 0, r.output
    doc = as_json(r)
    (g,) = doc["communication"]
    assert (g["group_a"], g["group_b"], g["presence"]) == ("(0, 1)", "(0, 1)", "both")
    assert doc["unmatched_groups"] == []
    # wait per step and rank: the median of the two ranks' Σ Wait Time(ms) (two values: mean)
    want = statistics.median(wait_ms(a_dir, f"rank{r}_ascend_pt") for r in (0, 1)) * 1000
    assert g["a_wait_us"] == pytest.approx(want, abs=0.01)  # ops kept as whole ns
    assert {x["group"] for x in doc["bandwidth"]} == {"(0, 1)"}
    text = cli("diff", a_dir, b_dir).output
    assert "(0, 1) | -" not in text and "- | (0, 1)" not in text


def test_diff_names_groups_without_a_match(shared_data, qwen3):
    r = cli("diff", levels(shared_data, "text", "level1"), qwen3, "--format", "json")
    assert r.exit_code == 0, r.output
    doc = as_json(r)
    lines = doc["unmatched_groups"]
    assert any(x.startswith("group (0, 1) of A has no match in B") for x in lines)
    assert any("dp_cp (0, 1) of B has no match in A" in x for x in lines)
    assert "no match:" in cli("diff", levels(shared_data, "text", "level1"), qwen3).output


def test_diff_and_gate_show_the_same_cluster_value(shared_data):
    """Stage of the cluster: diff's a_us and gate's baseline are both the median over the
    rank-steps of step_trace_time.csv; diff shows the mean too."""
    a_dir, b_dir = levels(shared_data, "text", "level1"), levels(shared_data, "text", "level2")
    stages = []
    for r in (0, 1):
        with open(a_dir / f"rank{r}_ascend_pt" / OUT / "step_trace_time.csv", newline="") as f:
            stages += [float(x["Stage"]) for x in csv.DictReader(f)]
    d = as_json(cli("diff", a_dir, b_dir, "--format", "json"))
    (row,) = [x for x in d["steps"] if x["scope"] == "cluster" and x["metric"] == "Stage"]
    g = as_json(cli("gate", a_dir, b_dir, "--format", "json"))
    (chk,) = [c for c in g["checks"] if c["rule"] == "Stage@cluster"]
    assert d["statistic"] == g["statistic"] == "median"
    assert row["a_us"] == pytest.approx(statistics.median(stages), abs=1e-6)
    assert chk["baseline"] * 1000 == pytest.approx(row["a_us"], abs=1e-6)
    assert row["a_mean_us"] == pytest.approx(statistics.mean(stages), abs=1e-6)
    assert chk["baseline_mean"] * 1000 == pytest.approx(row["a_mean_us"], abs=1e-6)


# ------------------------------------------------------------------ gate: every rule listed

def _recipe_baseline(qwen3, tmp_path, extra=()) -> Path:
    """README "Use in CI" step 1: analyse, commit the two CSVs (and ``extra`` files)."""
    out = tmp_path / "baseline_out"
    r = cli("analyse", qwen3, "-o", out, "-q")
    assert r.exit_code == 0, r.output
    base = tmp_path / "perf" / "baseline"
    base.mkdir(parents=True)
    for name in ("cluster_step_trace_time.csv", "op_statistics.csv", *extra):
        shutil.copy(out / name, base / name)
    return base


def test_readme_ci_recipe_lists_every_rule(qwen3, tmp_path):
    base = _recipe_baseline(qwen3, tmp_path)
    r = cli("gate", base, qwen3, "--format", "json")
    assert r.exit_code == 0, r.output
    doc = as_json(r)
    listed = {c["rule"] for c in doc["checks"]}
    assert listed == {rule.name for rule in DEFAULT_RULES}
    (bw,) = [c for c in doc["checks"] if c["rule"] == "bandwidth@group"]
    assert bw["verdict"] == "skip" and bw["key"] == "-"
    assert "baseline has no bandwidth" in bw["note"] and "cluster_communication.json" in bw["note"]
    # the two CSVs have no communication: the three bandwidth rules (group, link, rank) skip
    skipped = {c["rule"] for c in doc["checks"] if c["verdict"] == "skip"}
    assert skipped == {"bandwidth@group", "bandwidth@link", "bandwidth@rank"}
    assert "3 skipped" in doc["summary"]
    table = cli("gate", base, qwen3).output
    assert "bandwidth" in table and "SKIP" in table


def test_readme_ci_recipe_with_cluster_communication_checks_bandwidth(qwen3, tmp_path):
    base = _recipe_baseline(qwen3, tmp_path, ("cluster_communication.json",
                                              "cluster_communication_matrix.json",
                                              "communication_group.json"))
    doc = as_json(cli("gate", base, qwen3, "--format", "json"))
    for rule in ("bandwidth@group", "bandwidth@link", "bandwidth@rank"):
        bw = [c for c in doc["checks"] if c["rule"] == rule]
        assert bw and all(c["verdict"] == "pass" for c in bw), rule
    assert not [c for c in doc["checks"] if c["verdict"] == "skip"]


def _bandwidth(qwen3: Path, group: str, transport: str) -> float:
    """Median over the ranks of Σ Transit Size(MB) / Σ Transit Time(ms) of a group's ops."""
    vals = []
    for r in range(4):
        size = ms = 0.0
        for s in rank_comm(qwen3, f"rank_{r}_ascend_pt").values():
            for kind in s.values():
                for k, op in kind.items():
                    if k.endswith("@" + group) and not k.startswith("Total"):
                        t = op["Communication Bandwidth Info"].get(transport) or {}
                        size += t.get("Transit Size(MB)", 0)
                        ms += t.get("Transit Time(ms)", 0)
        if size > 0 and ms > 0:
            vals.append(size / ms)
    return statistics.median(vals)


@pytest.mark.parametrize("layout", ["cluster_analysis_output", "its -o directory"])
def test_msprof_analyze_output_gives_bandwidth(qwen3, tmp_path, layout):
    base = tmp_path / "msa"
    dst = base / "cluster_analysis_output" if layout != "cluster_analysis_output" else base
    shutil.copytree(MSA_QWEN3, dst)
    r = cli("gate", base, qwen3, "--format", "json")
    assert r.exit_code == 0, r.output
    doc = as_json(r)
    bw = {c["key"]: c for c in doc["checks"] if c["rule"] == "bandwidth@group"}
    pp = "3985310405473756128"  # the pp group of ranks 0 and 2 (communication_group.json)
    assert bw["pp (0, 2) HCCS"]["baseline"] == pytest.approx(_bandwidth(qwen3, pp, "HCCS"),
                                                             rel=1e-6)
    assert all(c["verdict"] == "pass" for c in bw.values())


def test_older_msprof_analyze_layout_is_read(tmp_path):
    doc = as_json(cli("gate", OLD_MSA, OLD_MSA, "--format", "json"))
    rules = {c["rule"] for c in doc["checks"] if c["verdict"] == "pass"}
    assert {"bandwidth@group", "Stage@cluster"} <= rules
    # its hcom_send op on RDMA: 20.97152 MB in 0.86381540625 ms (cluster_communication.json)
    (send,) = [c for c in doc["checks"] if c["rule"] == "bandwidth@group"
               and c["key"].endswith("RDMA") and "13337953553061386822" in c["key"]]
    # (times are kept as whole ns: 863815.40625 ns -> 863815 ns)
    assert send["baseline_max"] == pytest.approx(20.97152 / 0.86381540625, rel=1e-6)


# ------------------------------------------------------------------ gate: shape

def test_inputs_of_another_shape_warn_and_fail_with_same_shape(qwen3, tmp_path):
    r = CliRunner().invoke(main, ["gate", str(OLD_MSA), str(OLD_RUN), "--format", "json"])
    assert r.exit_code in (0, 1), r.output
    doc = as_json(r)
    assert any(w.startswith("the ranks differ: baseline has 16") for w in doc["warnings"])
    # the cluster value compares the ranks both have (0, 1), not 16 ranks against 2
    (stage,) = [c for c in doc["checks"] if c["rule"] == "Stage@cluster"]
    assert stage["baseline"] == pytest.approx(stage["current"], rel=1e-9)
    r = cli("gate", OLD_MSA, OLD_RUN, "--same-shape")
    assert r.exit_code == 2 and "not the same shape" in r.output
    assert r.output.strip().count("\n") == 0, r.output
    # another model: the Qwen3 run against the AlexNet-like torch_npu run
    r = cli("gate", qwen3, OLD_RUN, "--same-shape")
    assert r.exit_code == 2


def test_shape_warnings_reach_the_junit_and_markdown_reports(tmp_path):
    # CI views show the reports, not stderr: the warning must be beside the verdict there
    import xml.etree.ElementTree as ET

    junit, md = tmp_path / "gate.xml", tmp_path / "gate.md"
    r = cli("gate", OLD_MSA, OLD_RUN, "--junit", junit, "--markdown", md)
    assert r.exit_code in (0, 1), r.output
    suite = ET.parse(junit).getroot().find("testsuite")
    warned = [p.get("value") for p in suite.iter("property") if p.get("name") == "warning"]
    assert any(w.startswith("the ranks differ: baseline has 16") for w in warned)
    assert "the ranks differ" in suite.find("system-err").text
    text = md.read_text()
    assert "**Warnings**" in text and "the ranks differ: baseline has 16" in text
    assert text.index("**Warnings**") < text.index("| verdict |")
    # the same collection twice: no warning anywhere
    junit2, md2 = tmp_path / "same.xml", tmp_path / "same.md"
    assert cli("gate", OLD_RUN, OLD_RUN, "--junit", junit2, "--markdown", md2).exit_code == 0
    suite = ET.parse(junit2).getroot().find("testsuite")
    assert suite.find("system-err") is None
    assert not [p for p in suite.iter("property") if p.get("name") == "warning"]
    assert "Warnings" not in md2.read_text()


def test_same_shape_passes_for_the_same_collection(qwen3):
    r = cli("gate", qwen3, qwen3, "--same-shape", "--format", "json")
    assert r.exit_code == 0, r.output
    assert as_json(r)["warnings"] == []


# ------------------------------------------------------------------ gate: refused inputs

REF = ROOT / "tests" / "reference" / "gate" / "qwen3-4rank-pp2dp2_cluster_step_trace_time.csv"


def _edit_csv(tmp_path, fn) -> Path:
    with open(REF, newline="") as f:
        rows = list(csv.reader(f))
    fn(rows)
    out = tmp_path / "cluster_step_trace_time.csv"
    with open(out, "w", newline="") as f:
        csv.writer(f, lineterminator="\n").writerows(rows)
    return out


def _one_line_2(r, *words):
    assert r.exit_code == 2, r.output
    assert r.output.strip().count("\n") == 0, r.output
    for w in words:
        assert w in r.output, r.output


@pytest.mark.parametrize("cell", ["nan", "", "NaN", "inf", "abc"])
def test_nan_cell_exits_2(tmp_path, cell):
    def put(rows):
        rows[2][3] = cell  # rank 2's Computing
    cur = _edit_csv(tmp_path, put)
    _one_line_2(cli("gate", REF, cur), str(cur), "Computing", "data row 2")


def test_duplicated_rows_exit_2(tmp_path):
    cur = _edit_csv(tmp_path, lambda rows: rows.insert(2, list(rows[1])))
    _one_line_2(cli("gate", REF, cur), "duplicated rows", "rank 0 step 13")


@pytest.mark.parametrize("body,words", [
    ('[[rule]]\nmetric = "Stage"\nscope = "cluster"\nmax_change_pct = nan\n', ["finite"]),
    ('[[rule]]\nmetric = "Stage"\nmax_change_pct = inf\n', ["finite"]),
    ("rule = 5\n", ["rule = 5", "[[rule]]"]),
    ('[[rule]]\nmetric = "Stage"\nmax_change_pct = 5\nnoise = "1ms"\n', ["unknown key", "noise"]),
    ('[[rule]]\nmetric = "Stage"\nmax_change_pct = 5\nnoise_floor = "-1ms"\n', ["negative"]),
    ('defaults = "no"\n', ["defaults"]),
], ids=["nan", "inf", "rule=5", "unknown-key", "negative-floor", "defaults-text"])
def test_bad_rules_exit_2_with_one_line(tmp_path, body, words):
    rules = tmp_path / "gate.toml"
    rules.write_text(body)
    _one_line_2(cli("gate", REF, REF, "--rules", rules), str(rules), *words)


def test_nan_limit_no_longer_lets_a_regression_pass(tmp_path):
    """The +50 % Stage regression that max_change_pct = nan let through fails with a number."""
    def slow(rows):
        i = rows[0].index("Stage")
        for r in rows[1:]:
            if r[1] == "rank":
                r[i] = repr(float(r[i]) * 1.5)
    cur = _edit_csv(tmp_path, slow)
    rules = tmp_path / "gate.toml"
    rules.write_text('[[rule]]\nmetric = "Stage"\nscope = "cluster"\nmax_change_pct = 10\n')
    assert cli("gate", REF, cur, "--rules", rules).exit_code == 1
    rules.write_text('[[rule]]\nmetric = "Stage"\nscope = "cluster"\nmax_change_pct = nan\n')
    assert cli("gate", REF, cur, "--rules", rules).exit_code == 2
