"""The fast communication.json reader (ascendprof.readers.communication.fast) on a real rank's
file read the way a big file is (streamed in small blocks), with one op changed so that its
batch takes a particular way: a negative time in a batch DuckDB decodes is left out and said as
the per-value reader says it; a batch the per-value rules decode keeps each op's object text as
the file has it and names the file in its errors; a Bandwidth Info value that is not a number
gives the per-value reader's tables and problem, not a crash.

Expected values come from the file's own bytes and the JSON module (op counts, op objects), or
from the per-value reader (the definition the fast reader must agree with).
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from ascendprof.model.problems import Problems
from ascendprof.readers import communication as C
from ascendprof.readers.communication import fast as F
from conftest import QWEN3

REAL = sorted(QWEN3.glob("rank_*/ASCEND_PROFILER_OUTPUT/communication.json"))[0]
RANK = 2  # any rank but 0: rows must carry the one the caller gave


def _streamed(path, rank=RANK, problems=None, block=512):
    parts = list(F.iter_tables(path, rank, problems, whole_file_bytes=0, block_bytes=block))
    return {n: pa.concat_tables([p[n] for p in parts]) for n in parts[0]}


def _with_second_op_changed(tmp_path, old: bytes, new: bytes):
    """REAL with the first ``old`` after the second op's Time Info key replaced by ``new``."""
    data = REAL.read_bytes()
    key = b'"Communication Time Info"'
    second = data.index(key, data.index(key) + 1)
    at = data.index(old, second)
    path = tmp_path / "communication.json"
    path.write_bytes(data[:at] + new + data[at + len(old):])
    return path


def _reasons(problems):
    return [(p.reason, p.where) for p in problems]


@pytest.mark.parametrize("value", [b'"2"', b"true", b"[1]"])
def test_a_bandwidth_value_that_is_not_a_number_in_a_streamed_file(tmp_path, value):
    """A Transit Size that is text, a bool or a list in the second op: a streamed read gives
    the per-value reader's tables and its one problem (the value left out), not a crash."""
    path = _with_second_op_changed(tmp_path, b'"Transit Size(MB)": 0',
                                   b'"Transit Size(MB)": ' + value)
    want_problems = Problems()
    want = C.read_communication_per_value(path, RANK, want_problems)
    assert [p.reason.split(" (e.g.")[0] for p in want_problems] \
        == ["1 Transit Size(MB) value(s) that are not a number left out"]
    got_problems = Problems()
    got = _streamed(path, problems=got_problems, block=1 << 20)  # one batch
    assert _reasons(got_problems) == _reasons(want_problems)
    for name in want:
        assert got[name].equals(want[name]), name
    with pytest.raises(F.Reread):  # batches were handed out before it: the consumer re-reads
        _streamed(path, problems=Problems(), block=300)


def test_a_bandwidth_value_that_is_not_a_number_in_a_big_file(tmp_path, monkeypatch):
    """read_communication (the public reader) of a file above WHOLE_FILE_BYTES, read in several
    batches, with a text Transit Size in the second op: the per-value reader's tables and
    problem."""
    path = _with_second_op_changed(tmp_path, b'"Transit Size(MB)": 0', b'"Transit Size(MB)": "2"')
    monkeypatch.setattr(F, "WHOLE_FILE_BYTES", 1000)
    monkeypatch.setattr(F, "BLOCK_BYTES", 2000)
    want_problems = Problems()
    want = C.read_communication_per_value(path, RANK, want_problems)
    got_problems = Problems()
    got = C.read_communication(path, RANK, got_problems)
    assert _reasons(got_problems) == _reasons(want_problems)
    for name in want:
        assert got[name].equals(want[name]), name
