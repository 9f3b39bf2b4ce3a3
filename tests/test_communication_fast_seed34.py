"""The fast communication.json reader (ascendprof.readers.communication.fast) on damaged or odd
copies of a real rank's file, read the way a big file is (streamed in small blocks): a problem
names the file and the byte where it is, the rank's rows or its errors are the caller's rank, a
missing file is an InputError naming it, ops of different keys never count as one repeated key,
and a file read in several batches gives all of its ops.

Expected values come from the file's own bytes (offsets found with bytes.index), the JSON module
(op counts), or the per-value reader (the definition the fast reader must agree with).
"""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

from ascendprof.model import schemas as S
from ascendprof.model.errors import InputError
from ascendprof.model.problems import Problems
from ascendprof.readers import communication as C
from ascendprof.readers.communication import fast as F
from conftest import QWEN3

REAL = sorted(QWEN3.glob("rank_*/ASCEND_PROFILER_OUTPUT/communication.json"))[0]
RANK = 2  # any rank but 0: rows must carry the one the caller gave


def _streamed(path, rank=RANK, problems=None, block=512):
    parts = list(F.iter_tables(path, rank, problems, whole_file_bytes=0, block_bytes=block))
    return {n: pa.concat_tables([p[n] for p in parts]) for n in parts[0]}


def _op_count(doc) -> int:
    """Op entries of a step -> kind -> op file, "Total ..." entries left out."""
    return sum(1 for step in doc.values() for ops in step.values() for k in ops
               if not k.startswith("Total"))


def test_invalid_json_inside_an_op_names_the_file_and_byte(tmp_path):
    """A trailing comma inside the third op: the streamed read reports the file and the byte
    of that comma."""
    data = REAL.read_bytes()
    first = data.index(b'"Idle Time(ms)"')
    third = data.index(b'"Idle Time(ms)"', data.index(b'"Idle Time(ms)"', first + 1) + 1)
    bad = data[:third] + b'"x": 1, ' + b'}' + data[third:]  # ..., "x": 1, }"Idle ...
    path = tmp_path / "communication.json"
    path.write_bytes(bad)
    want_at = third + len(b'"x": 1')  # the comma before the '}'
    assert bad[want_at:want_at + 1] == b","
    with pytest.raises(InputError) as got:
        _streamed(path)
    assert got.value.path == str(path)
    assert str(got.value).startswith(f"{path} at byte ")
    assert "invalid JSON" in got.value.reason
    assert got.value.where == want_at


def test_a_huge_number_where_a_number_is_unreadable_as_a_double(tmp_path):
    """An op whose time is text (not the typed shape) and that also holds 1e400 (JSON grammar,
    but beyond a double, which orjson refuses): the per-value fallback of the batch reports an
    InputError naming the file, not a crash."""
    doc = ('{"step1": {"p2p": {"a@g": {"Communication Time Info": {"Elapse Time(ms)": 1}}, '
           '"b@g": {"Communication Time Info": {"Elapse Time(ms)": "3", "x": 1e400}}}}}')
    path = tmp_path / "communication.json"
    path.write_text(doc)
    with pytest.raises(InputError) as got:
        _streamed(path, block=1 << 20)
    assert got.value.path == str(path)
    assert "invalid JSON" in got.value.reason


@pytest.mark.parametrize("whole_file_bytes", [None, 0])
def test_a_missing_file_is_an_input_error_naming_it(tmp_path, whole_file_bytes):
    path = tmp_path / "nope" / "communication.json"
    with pytest.raises(InputError) as got:
        list(F.iter_tables(path, RANK, whole_file_bytes=whole_file_bytes, block_bytes=512))
    assert got.value.path == str(path)
    with pytest.raises(InputError) as want:
        C.read_communication_per_value(path, RANK)
    assert str(got.value) == str(want.value)


def test_a_rank_beyond_int32_names_the_file(tmp_path):
    """The rank column is int32: a rank that does not fit is the file's InputError (as the
    per-value reader says it), also when the file is streamed."""
    path = tmp_path / "communication.json"
    path.write_bytes(REAL.read_bytes())
    with pytest.raises(InputError) as want:
        C.read_communication_per_value(path, 2 ** 31)
    assert want.value.path == str(path)
    with pytest.raises(InputError) as got:
        _streamed(path, rank=2 ** 31)
    assert str(got.value) == str(want.value)


def test_a_rank_beyond_int32_in_a_file_without_ops(tmp_path):
    """A (streamed) file with steps but no ops still checks the rank, as the per-value reader
    does; with a good rank its tables are empty."""
    path = tmp_path / "communication.json"
    path.write_text('{"step1": {}, "step2": {"p2p": {}, "collective": {}}}')
    with pytest.raises(InputError) as want:
        C.read_communication_per_value(path, 2 ** 31)
    with pytest.raises(InputError) as got:
        _streamed(path, rank=2 ** 31, block=16)
    assert str(got.value) == str(want.value)
    tables = _streamed(path, block=16)
    assert all(t.num_rows == 0 for t in tables.values())


def test_streamed_rows_carry_the_rank(tmp_path):
    tables = _streamed(REAL, block=300)
    n = _op_count(json.loads(REAL.read_text()))
    assert tables[S.COMM_OPS].num_rows == n
    assert set(tables[S.COMM_OPS]["rank"].to_pylist()) == {RANK}
    assert set(tables[S.COMM_BANDWIDTH]["rank"].to_pylist()) == {RANK}


def test_different_keys_whose_parts_run_together_are_not_a_repeat(tmp_path):
    """(step "s", op "a@g") and (step "sg", op "ga") are different ops; strung together without
    a separator their parts read the same ("s"+"g"+"p2p"+"g"+"a" = "sg"+""+"p2p"+""+"ga"), which
    must not make the streamed read ask for a re-read."""
    doc = ('{"s": {"p2p": {"a@g": {"Communication Time Info": {"Elapse Time(ms)": 1}}}}, '
           '"sg": {"p2p": {"ga": {"Communication Time Info": {"Elapse Time(ms)": 2}}}}}')
    path = tmp_path / "communication.json"
    path.write_text(doc)
    parts = list(F.iter_tables(path, RANK, whole_file_bytes=0, block_bytes=16))  # no Reread
    ops = pa.concat_tables([p[S.COMM_OPS] for p in parts])
    assert [(r["step_key"], r["op_name"], r["group"], r["elapse_ns"]) for r in ops.to_pylist()] \
        == [("s", "a", "g", 1_000_000), ("sg", "ga", "", 2_000_000)]


def test_a_big_file_read_in_several_batches_gives_every_op(monkeypatch):
    """read_communication (the public reader) of a file above WHOLE_FILE_BYTES joins its
    batches: every op entry of the file is a row, in the file's order."""
    monkeypatch.setattr(F, "WHOLE_FILE_BYTES", 1000)
    monkeypatch.setattr(F, "BLOCK_BYTES", 2000)
    assert len(list(F.iter_tables(REAL, RANK))) > 1
    doc = json.loads(REAL.read_text())
    tables = C.read_communication(REAL, RANK)
    ops = tables[S.COMM_OPS]
    want = [(s, k, op.split("@")[0]) for s, step in doc.items() for k, kind in step.items()
            for op in kind if not op.startswith("Total")]
    assert [(r["step_key"], r["kind"], r["op_name"]) for r in ops.to_pylist()] == want
    assert ops.num_rows == _op_count(doc)


def test_a_time_info_that_is_not_an_object_is_warned_in_a_streamed_batch(tmp_path):
    """An op whose "Communication Time Info" is a number: skipped with the per-value reader's
    warning, also when its batch goes the per-value way (streamed); the other op is a row."""
    doc = ('{"step1": {"collective": {"a@g": {"Communication Time Info": {"Elapse Time(ms)": 1}}, '
           '"x@g": {"Communication Time Info": 5}}}}')
    path = tmp_path / "communication.json"
    path.write_text(doc)
    want = ["op 'x@g' in step1: 'Communication Time Info' is not an object; op skipped"]
    for block in (16, 1 << 20):
        problems = Problems()
        tables = _streamed(path, problems=problems, block=block)
        assert [p.reason for p in problems] == want
        assert tables[S.COMM_OPS]["op_name"].to_pylist() == ["a"]
