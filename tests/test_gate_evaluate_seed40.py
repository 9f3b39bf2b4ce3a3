"""`ascendprof gate` (ascendprof/compare/gate/evaluate.py) through the CLI: a rank whose metric
one side lacks is named in the one-sided warning ("rank(s) N only in the baseline; compared on
the M rank(s) ...") only for the rules that leave it out -- the cluster, op type, group and link
scopes. A per-rank rule does not leave the rank out: it lists the rank's own check as skipped
("skipped: not in current"), so it adds no metric to that warning -- the survivor of mutation
sample seed 40 (x_evaluate__mutmut_5).

Input: a copy of the Qwen3 fixture (ranks 0-3) whose rank 1 step_trace_time.csv is damaged in
the current copy (and rank 1 has no kernel_details.csv to rebuild the steps from), so rank 1 has
step values in the baseline only.
"""

from __future__ import annotations

from test_gate_evaluate_seed38 import _check
from test_gate_evaluate_seed39 import _gate
from test_gate_one_sided_rank import QWEN, _damaged


def _one_sided(doc) -> list[str]:
    return [w for w in doc["warnings"] if "only in the" in w]


def test_a_per_rank_rule_alone_gives_no_one_sided_warning(tmp_path):
    # Only Stage@rank: rank 1's row is skipped ("not in current"), ranks 0, 2, 3 are judged on
    # their own values; no rank is left out of any comparison, so no "only in the" sentence.
    cur = _damaged(tmp_path)
    code, doc = _gate(QWEN, cur, "--no-defaults", "--rule", "Stage@rank=+5%")
    assert code == 0
    rows = {c["key"]: c for c in doc["checks"] if c["rule"] == "Stage@rank"}
    assert set(rows) == {"rank 0", "rank 1", "rank 2", "rank 3"}
    assert (rows["rank 1"]["verdict"], rows["rank 1"]["note"]) == ("skip",
                                                                   "skipped: not in current")
    assert _one_sided(doc) == [], doc["warnings"]


def test_the_one_sided_warning_names_the_cluster_rules_metric_not_the_per_rank_ones(tmp_path):
    # Stage@rank and Computing@cluster: Computing@cluster compares ranks 0, 2, 3 (the 3 ranks
    # with Computing on both sides) and says so; Stage is judged per rank only, so the sentence
    # names Computing alone.
    cur = _damaged(tmp_path)
    code, doc = _gate(QWEN, cur, "--no-defaults", "--rule", "Stage@rank=+5%",
                      "--rule", "Computing@cluster=+5%")
    assert code == 0
    assert _one_sided(doc) == [
        "Computing: rank(s) 1 only in the baseline; compared on the 3 rank(s) with values on "
        "both sides"]
    c = _check(doc, "Computing@cluster")
    # the same three ranks' steps on both sides (the ranks are byte-identical copies)
    assert c["baseline_n"] == c["current_n"] and c["change"] == 0 and c["verdict"] == "pass"
