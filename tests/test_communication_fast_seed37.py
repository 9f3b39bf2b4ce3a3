"""The fast communication.json reader (ascendprof.readers.communication.fast) on a real rank's
file read the way a big file is (streamed in small blocks): a consumer slower than the
background block scan still gets every op (a full queue makes the scan wait, never skip a
block); an op left out for its time in a later batch decoded by the per-value rules is the
file's problem without handing the file back (no Reread); and the Reread a consumer does get
names the file.

Expected values come from the file's own bytes and the JSON module (op counts), or from the
per-value reader (the definition the fast reader must agree with).
"""

from __future__ import annotations

import json
import time

import pyarrow as pa
import pytest

from ascendprof.model import schemas as S
from ascendprof.model.problems import Problems
from ascendprof.readers import communication as C
from ascendprof.readers.communication import fast as F
from conftest import QWEN3

REAL = sorted(QWEN3.glob("rank_*/ASCEND_PROFILER_OUTPUT/communication.json"))[0]
RANK = 2  # any rank but 0: rows must carry the one the caller gave


def _op_count(doc) -> int:
    """Op entries of a step -> kind -> op file, "Total ..." entries left out."""
    return sum(1 for step in doc.values() for ops in step.values() for k in ops
               if not k.startswith("Total"))


def test_a_slow_consumer_still_gets_every_op():
    """Streamed in 512-byte blocks, with the consumer pausing 0.35 s after each of its first
    batches (the scan thread meanwhile fills its queue of 2 and waits on it, well past its
    0.1 s put timeout): every op of the file is a row, none of a waiting block is lost."""
    doc = json.loads(REAL.read_bytes())
    parts = []
    it = F.iter_tables(REAL, RANK, None, whole_file_bytes=0, block_bytes=512)
    try:
        for i, tables in enumerate(it):
            parts.append(tables)
            if i < 2:
                time.sleep(0.35)
    finally:
        it.close()
    assert len(parts) > 5
    ops = pa.concat_tables([p[S.COMM_OPS] for p in parts])
    assert ops.num_rows == _op_count(doc)
    want = C.read_communication_per_value(REAL, RANK)[S.COMM_OPS]
    assert ops.column("op_name").to_pylist() == want.column("op_name").to_pylist()
    assert ops.column("step_key").to_pylist() == want.column("step_key").to_pylist()


def _late_per_value_batch_with_a_bad_time(tmp_path):
    """REAL with its last op's Elapse Time the text "x": neither DuckDB nor msgspec takes
    that value, so the op's batch (the file's last) takes the per-value rules, which leave the
    op out for it."""
    data = REAL.read_bytes()
    key = b'"Communication Time Info": '
    at, ops = -1, []  # the Time Info keys of ops ("Total Op Info" entries are not ops)
    while (at := data.find(key, at + 1)) >= 0:
        if not data[:at].endswith(b'"Total Op Info": {'):
            ops.append(at)
    elapse = data.index(b'"Elapse Time(ms)": ', ops[-1]) + len(b'"Elapse Time(ms)": ')
    end = data.index(b",", elapse)
    path = tmp_path / "communication.json"
    path.write_bytes(data[:elapse] + b'"x"' + data[end:])
    return path


def test_a_left_out_op_in_a_later_per_value_batch_is_said_without_a_reread(tmp_path,
                                                                           monkeypatch):
    """The last op's Elapse Time a text (see _late_per_value_batch_with_a_bad_time), streamed
    in blocks of 4000 bytes: its batch is decoded by the per-value rules after earlier batches
    were handed out; iter_tables goes on to the end (no Reread: nothing needs the file read
    again), the op is left out and the one problem is the per-value reader's."""
    path = _late_per_value_batch_with_a_bad_time(tmp_path)
    doc = json.loads(path.read_bytes())
    want = Problems()
    want_tables = C.read_communication_per_value(path, RANK, want)
    assert [p.severity for p in want] == ["skipped"]
    per_value_batches = []
    real = F._per_value_batch

    def spy(entries, *args):
        per_value_batches.append(len(entries))
        return real(entries, *args)

    monkeypatch.setattr(F, "_per_value_batch", spy)
    got = Problems()
    parts = list(F.iter_tables(path, RANK, got, whole_file_bytes=0, block_bytes=4000))
    assert len(parts) > 2 and len(per_value_batches) == 1
    assert list(got) == list(want)
    ops = pa.concat_tables([p[S.COMM_OPS] for p in parts])
    assert ops.num_rows == _op_count(doc) - 1  # the one left out
    for col in ("step_key", "op_name", "group", "elapse_ns"):
        assert ops[col].to_pylist() == want_tables[S.COMM_OPS][col].to_pylist(), col


def test_a_reread_names_the_file(tmp_path):
    """A text Transit Size in the second op of a file streamed in 300-byte blocks: batches were
    handed out before it, so iter_tables raises Reread, and the exception names the file (its
    one argument is the path, as str() of it shows)."""
    data = REAL.read_bytes()
    key = b'"Communication Time Info"'
    second = data.index(key, data.index(key) + 1)
    old = b'"Transit Size(MB)": 0'
    at = data.index(old, second)
    path = tmp_path / "communication.json"
    path.write_bytes(data[:at] + b'"Transit Size(MB)": "2"' + data[at + len(old):])
    with pytest.raises(F.Reread) as got:
        list(F.iter_tables(path, RANK, Problems(), whole_file_bytes=0, block_bytes=300))
    assert got.value.args == (path,)
    assert str(got.value) == str(path)
