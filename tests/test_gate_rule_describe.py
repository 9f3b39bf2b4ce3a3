"""A gate rule described in one line: its allowed change with the sign, and the noise floor in
the metric's unit (ms for the times, GB/s for bandwidth), as written out here from the rule's
fields. (Rule.describe has no caller in the program today; this pins its text.)"""

from __future__ import annotations

import pytest

from ascendprof.compare.gate.rules import BANDWIDTH, OP_TIME, Rule


@pytest.mark.parametrize("rule, text", [
    (Rule("Stage", "cluster", 5.0, 0.1), "+5 % (floor 0.1 ms)"),
    (Rule(OP_TIME, "op_type", 20.0, 1.0), "+20 % (floor 1 ms)"),
    (Rule(BANDWIDTH, "group", -10.0, 0.1), "-10 % (floor 0.1 GB/s)"),
    (Rule("wait", "group", 12.5), "+12.5 % (floor 0 ms)"),
])
def test_a_rule_describes_its_limit_and_floor_in_the_metrics_unit(rule, text):
    assert rule.describe() == text
