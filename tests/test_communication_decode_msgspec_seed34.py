"""The msgspec batch decoder of communication.json (ascendprof.readers.communication.
decode_msgspec), through ``read_communication`` on a copy of a real rank's file: an op whose
required time is negative is left out, and only that op; the other ops of the same batch whose
time is 0 or between 0 and 1 ms (the real file's Transit Time is 0 everywhere, many Wait Times
are 0 or below 1 ms) are kept, as the per-value rule "a required time must be a non-negative
number" says.

Expected values come from the file itself (the JSON module lists its ops) and the rule above.
"""

from __future__ import annotations

import json

import pytest

from ascendprof.model import schemas as S
from ascendprof.model.problems import Problems
from ascendprof.readers.communication import read_communication
from conftest import QWEN3

REAL = sorted(QWEN3.glob("rank_*/ASCEND_PROFILER_OUTPUT/communication.json"))[0]


def _ops(doc) -> list[tuple[str, str, str]]:
    """(step, kind, op key) of every op, "Total ..." entries left out, in file order."""
    return [(s, k, n) for s, step in doc.items() for k, ops in step.items() for n in ops
            if not n.startswith("Total")]


@pytest.mark.parametrize("field", ["Transit Time(ms)", "Wait Time(ms)"])
def test_only_the_op_with_a_negative_required_time_is_left_out(tmp_path, field):
    doc = json.loads(REAL.read_text())
    ops = _ops(doc)
    # the file has ops of this time at 0 and (for Wait) in (0, 1): those must stay
    values = [doc[s][k][n]["Communication Time Info"][field] for s, k, n in ops]
    assert 0 in values
    if field == "Wait Time(ms)":
        assert any(0 < v < 1 for v in values)
    # make the second op's time negative
    s, k, n = ops[1]
    doc[s][k][n]["Communication Time Info"][field] = -0.5
    path = tmp_path / "communication.json"
    path.write_text(json.dumps(doc))

    probs = Problems()
    got = read_communication(path, 0, probs)[S.COMM_OPS].to_pylist()
    want = [op for op in ops if op != (s, k, n)]
    assert len(want) == len(ops) - 1
    assert [(r["step_key"], r["kind"], f'{r["op_name"]}@{r["group"]}') for r in got] == want
    # one problem of the file, counting that one op
    assert len(probs) == 1
    assert str(path) in str(list(probs)[0])
