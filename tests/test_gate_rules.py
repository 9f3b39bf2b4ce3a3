"""How `ascendprof gate` reads the rules a user gives (``--rule`` text and ``--rules`` TOML):
metric aliases, scope spellings, limits with '%', floors with their unit, and one usage error
naming the problem for each kind of mistake. Expected values are written out from the rules'
documented syntax (README, ``make_rule`` / ``load_rules_toml``)."""

from __future__ import annotations

import pytest

from ascendprof.compare.gate.errors import GateUsageError
from ascendprof.compare.gate.rules import (BANDWIDTH, DEFAULT_RULES, OP_TIME, Rule,
                                           canonical_metric, load_rules_toml, make_rule,
                                           merge_rules, parse_rule)


@pytest.mark.parametrize("given, metric", [
    ("Stage", "Stage"), ("stage", "Stage"), ("Step Time", "Stage"), ("step-time", "Stage"),
    ("  computing ", "Computing"), ("COMM not overlapped", "Communication(Not Overlapped)"),
    ("communication-not-overlapped", "Communication(Not Overlapped)"),
    ("Communication(Not Overlapped)", "Communication(Not Overlapped)"),
    ("op", OP_TIME), ("op type time", OP_TIME), ("BW", BANDWIDTH), ("Sync", "synchronization"),
    ("synchronisation", "synchronization"), ("Free", "Free"), ("bubble", "Bubble"),
])
def test_metric_names_and_aliases(given, metric):
    assert canonical_metric(given) == metric


def test_unknown_metric_names_itself_and_the_known_ones():
    with pytest.raises(GateUsageError) as e:
        canonical_metric("latency")
    msg = str(e.value)
    assert msg.startswith("unknown gate metric 'latency'; known: ")
    assert ", Free, " in msg  # names separated by ', '
    for m in ("Stage", "Computing", "Communication(Not Overlapped)", "Free", OP_TIME, BANDWIDTH,
              "elapse", "synchronization", "idle"):
        assert m in msg


@pytest.mark.parametrize("metric, scope, want", [
    ("Stage", None, "cluster"), ("op_time", None, "op_type"), ("bandwidth", None, "group"),
    ("Stage", "per-rank", "rank"), ("Stage", " Ranks ", "rank"), ("op_time", "op", "op_type"),
    ("op_time", "op_types", "op_type"), ("bandwidth", "communication-group", "group"),
    ("bandwidth", "groups", "group"), ("bandwidth", "Links", "link"),
    ("elapse", "group", "group"),
])
def test_scope_spellings(metric, scope, want):
    assert make_rule(metric, scope, 5).scope == want


def test_scope_not_allowed_for_the_metric():
    with pytest.raises(GateUsageError, match=r"rule Stage: scope 'link' not allowed; use one of "
                                             r"cluster, rank$"):
        make_rule("Stage", "link", 5)


@pytest.mark.parametrize("limit, want", [
    (5, 5.0), ("+5%", 5.0), (" - 10 % ", -10.0), ("20", 20.0), (2.5, 2.5)])
def test_limits_with_and_without_percent(limit, want):
    assert make_rule("Stage", "cluster", limit).limit_pct == want


@pytest.mark.parametrize("limit, message", [
    ("abc", "gate rule: limit 'abc' is not a number"),
    (True, "gate rule: limit True is not a number"),
    ([5], "gate rule: limit [5] is not a number"),
    (float("nan"), "gate rule: limit nan is not a finite number"),
    ("inf%", "gate rule: limit 'inf%' is not a finite number"),
])
def test_a_limit_that_is_not_a_finite_number(limit, message):
    with pytest.raises(GateUsageError) as e:
        make_rule("Stage", "cluster", limit)
    assert str(e.value) == message


@pytest.mark.parametrize("metric, floor, want", [
    ("Stage", 0.25, 0.25), ("Stage", "1ms", 1.0), ("Stage", "500us", 0.5),
    ("Stage", "500 US", 0.5), ("Stage", "2000ns", 0.002), ("Stage", "0.5s", 500.0),
    ("Stage", " 3 ", 3.0), ("bandwidth", "0.5GB/s", 0.5), ("bandwidth", "2 gb/s", 2.0),
])
def test_floors_with_their_unit(metric, floor, want):
    assert make_rule(metric, None, 5, floor).floor == pytest.approx(want, rel=1e-12)


@pytest.mark.parametrize("metric, floor, message", [
    ("bandwidth", "1ms", "gate rule bandwidth: floor '1ms' has the wrong unit (use GB/s)"),
    ("Stage", "0.5GB/s", "gate rule Stage: floor '0.5GB/s' has the wrong unit (use ms)"),
    ("Stage", "-1", "gate rule Stage: floor '-1' is negative"),
    ("Stage", "-1ms", "gate rule Stage: floor '-1ms' is negative"),
    ("Stage", "fast", "gate rule: floor 'fast' is not a number"),
    ("Stage", "abcms", "gate rule: floor 'abc' is not a number"),
])
def test_bad_floors(metric, floor, message):
    with pytest.raises(GateUsageError) as e:
        make_rule(metric, None, 5, floor)
    assert str(e.value) == message


@pytest.mark.parametrize("text, rule", [
    ("Stage@cluster=+5%", Rule("Stage", "cluster", 5.0, 0.0)),
    ("op_time@op_type=+20%,floor=1ms", Rule(OP_TIME, "op_type", 20.0, 1.0)),
    ("bandwidth@group=-10%", Rule(BANDWIDTH, "group", -10.0, 0.0)),
    (" computing @ rank = 5 , floor = 200us ", Rule("Computing", "rank", 5.0, 0.2)),
])
def test_rule_text(text, rule):
    got = parse_rule(text)
    assert (got.metric, got.scope, got.limit_pct) == (rule.metric, rule.scope, rule.limit_pct)
    assert got.floor == pytest.approx(rule.floor, rel=1e-12)


def test_rule_text_without_a_limit():
    with pytest.raises(GateUsageError, match=r"^--rule 'Stage@cluster': expected "
                                             r"METRIC\[@SCOPE\]=LIMIT%\[,floor=FLOOR\]$"):
        parse_rule("Stage@cluster")


def _toml(tmp_path, text: str):
    p = tmp_path / "rules.toml"
    p.write_text(text, encoding="utf-8")
    return p


def test_toml_rules_long_and_short_keys(tmp_path):
    p = _toml(tmp_path, """
# Schwelle für die Stufe (a non-ASCII comment: the file is UTF-8)
defaults = false
[[rule]]
metric = "step_time"
scope = "rank"
max_change_pct = 3
noise_floor = "200us"
[[rule]]
metric = "bw"
scope = "link"
limit_pct = -15
floor = 0.25
[[rule]]
metric = "op"
limit = "+30%"
""")
    rules, defaults = load_rules_toml(p)
    assert defaults is False
    assert [(r.metric, r.scope, r.limit_pct) for r in rules] == [
        ("Stage", "rank", 3.0), (BANDWIDTH, "link", -15.0), (OP_TIME, "op_type", 30.0)]
    assert [r.floor for r in rules] == pytest.approx([0.2, 0.25, 0.0])


def test_toml_rules_as_rules_key(tmp_path):
    p = _toml(tmp_path, "[[rules]]\nmetric = \"Free\"\nmax_change_pct = 7\n")
    rules, defaults = load_rules_toml(p)
    assert [(r.metric, r.scope, r.limit_pct) for r in rules] == [("Free", "cluster", 7.0)]
    assert defaults is True


@pytest.mark.parametrize("text, message", [
    ("threshold = 5\n", "unknown key(s) threshold (known: defaults, [[rule]])"),
    ("defaults = \"no\"\n", "defaults = 'no': use true or false"),
    ("rule = 5\n", "rule = 5: rules are tables, written as [[rule]] blocks with metric, scope, "
                   "max_change_pct, noise_floor"),
    ("[[rule]]\nscope = \"rank\"\n", "rule 1 needs at least 'metric' ([[rule]] blocks with "
                                     "metric, scope, max_change_pct, noise_floor)"),
    ("[[rule]]\nmetric = \"Stage\"\nmax_change_pct = 5\n[[rule]]\nmetric = \"Stage\"\n"
     "max = 5\n", "rule 2: unknown key(s) max (known: floor, limit, limit_pct, max_change_pct, "
                  "metric, noise_floor, scope)"),
    ("[[rule]]\nmetric = \"Stage\"\n", "rule 1 (Stage) needs max_change_pct"),
    ("[[rule]]\nmetric = 5\nmax_change_pct = 5\n",
     "rule 1: metric and scope are names, not 5"),
    ("[[rule]]\nmetric = \"Stage\"\nscope = \"link\"\nmax_change_pct = 5\n",
     "rule 1: rule Stage: scope 'link' not allowed; use one of cluster, rank"),
])
def test_toml_mistakes_name_file_rule_and_problem(tmp_path, text, message):
    p = _toml(tmp_path, text)
    with pytest.raises(GateUsageError) as e:
        load_rules_toml(p)
    assert str(e.value) == f"{p}: {message}"


def test_toml_that_is_not_toml_or_not_there(tmp_path):
    p = _toml(tmp_path, "[[rule]\nmetric=")
    with pytest.raises(GateUsageError, match=r"rules\.toml: invalid TOML: "):
        load_rules_toml(p)
    with pytest.raises(GateUsageError) as e:
        load_rules_toml(tmp_path / "missing.toml")
    assert str(e.value) == f"{tmp_path / 'missing.toml'}: cannot read rules: No such file or " \
                           "directory"


def test_user_rules_replace_defaults_of_the_same_metric_and_scope():
    mine = [Rule("Stage", "cluster", 2.0, 0.0), Rule("Stage", "cluster", 3.0, 0.0),
            Rule("Bubble", "rank", 5.0, 0.0)]
    got = merge_rules(mine)
    # the defaults but Stage@cluster, then the user's rules; of two with one metric and scope
    # the later one holds
    assert got == [d for d in DEFAULT_RULES if (d.metric, d.scope) != ("Stage", "cluster")] + [
        Rule("Stage", "cluster", 3.0, 0.0), Rule("Bubble", "rank", 5.0, 0.0)]
    assert merge_rules(mine, use_defaults=False) == [Rule("Stage", "cluster", 3.0, 0.0),
                                                      Rule("Bubble", "rank", 5.0, 0.0)]
