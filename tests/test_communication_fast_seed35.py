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


def test_a_negative_time_in_a_duckdb_batch_is_left_out_and_said(tmp_path):
    """The second op's Elapse Time made negative: its (DuckDB-decoded) batch leaves it out and
    the file gets the per-value reader's problem for it."""
    data = REAL.read_bytes()
    key = b'"Communication Time Info"'
    second = data.index(key, data.index(key) + 1)
    at = data.index(b'"Elapse Time(ms)": ', second) + len(b'"Elapse Time(ms)": ')
    path = tmp_path / "communication.json"
    path.write_bytes(data[:at] + b"-" + data[at:])
    doc = json.loads(path.read_text())
    got_problems = Problems()
    tables = _streamed(path, problems=got_problems, block=2000)
    assert tables[S.COMM_OPS].num_rows == _op_count(doc) - 1
    want_problems = Problems()
    C.read_communication_per_value(path, RANK, want_problems)
    assert [("Elapse Time(ms)" in p.reason) for p in want_problems] == [True]
    assert _reasons(got_problems) == _reasons(want_problems)


def test_a_per_value_batch_keeps_each_ops_text_as_the_file_has_it(tmp_path):
    """The second op's Time Info a number (so its batch takes the per-value rules): it is
    skipped, and every other op's opinfo_json is its object's text, byte for byte as in the
    file (the file writes ", " and ": "; re-encoding the parsed object would not)."""
    path = _with_second_op_changed(tmp_path, b'{"Start Timestamp(us)"',
                                   b'5, "x": {"Start Timestamp(us)"')
    data = path.read_bytes()
    doc = json.loads(data)
    problems = Problems()
    ops = _streamed(path, problems=problems, block=1 << 20)[S.COMM_OPS]
    assert [p.reason for p in problems] == [
        f"op {list(doc['step13']['p2p'])[1]!r} in step13: 'Communication Time Info' is not an "
        "object; op skipped"]
    assert ops.num_rows == _op_count(doc) - 1
    want = [op for step in doc.values() for kind in step.values()
            for k, op in kind.items() if not k.startswith("Total")
            and isinstance(op["Communication Time Info"], dict)]
    texts = ops["opinfo_json"].to_pylist()
    assert [json.loads(t) for t in texts] == want
    for t in texts:
        assert t.encode() in data  # the file's own text, not a re-encoding
    assert b", " in texts[0].encode() and b": " in texts[0].encode()


def test_a_rank_beyond_int32_in_a_per_value_batch_names_the_file(tmp_path):
    """The rank column is int32: in a batch the per-value rules decode, a rank that does not
    fit is the file's InputError, worded as the per-value reader words it."""
    path = _with_second_op_changed(tmp_path, b'{"Start Timestamp(us)"',
                                   b'5, "x": {"Start Timestamp(us)"')
    with pytest.raises(InputError) as want:
        C.read_communication_per_value(path, 2 ** 31)
    assert want.value.path == str(path)
    with pytest.raises(InputError) as got:
        _streamed(path, rank=2 ** 31, block=1 << 20)
    assert got.value.path == str(path)
    assert str(got.value) == str(want.value)


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


# ---------------------------------------------------------------- the same gaps at other places

def _beyond_int64_ns(tmp_path, field: bytes, value: bytes, per_value_batch: bool):
    """REAL with the second op's ``field`` = ``value`` (beyond int64 nanoseconds); with
    ``per_value_batch`` also the first op's Time Info a number (its batch then takes the
    per-value rules)."""
    data = REAL.read_bytes()
    key = b'"Communication Time Info": '
    first = data.index(key)
    second = data.index(key, first + 1)
    at = data.index(b'"' + field + b'": ', second) + len(field) + 4
    end = data.index(b",", at)
    data = data[:at] + value + data[end:]
    if per_value_batch:
        at = first + len(key)
        data = data[:at] + b'5, "x": ' + data[at:]
    path = tmp_path / "communication.json"
    path.write_bytes(data)
    return path


# int64 ns holds up to 9223372036854775807 ns = 9.22e15 us = 9.22e12 ms
@pytest.mark.parametrize("field,value", [(b"Elapse Time(ms)", b"1e17"),
                                         (b"Start Timestamp(us)", b"9300000000000000")])
@pytest.mark.parametrize("how", ["whole", "streamed", "streamed per-value batch"])
def test_a_time_beyond_int64_ns_is_the_files_input_error(tmp_path, how, field, value):
    """A time that does not fit int64 nanoseconds: read whole (msgspec), streamed (DuckDB or
    msgspec) or in a streamed batch of the per-value rules, it is an InputError naming the
    file, worded as the per-value reader words it."""
    path = _beyond_int64_ns(tmp_path, field, value, per_value_batch=how.endswith("batch"))
    with pytest.raises(InputError) as want:
        C.read_communication_per_value(path, RANK)
    assert want.value.path == str(path) and "out of range for int64" in str(want.value)
    with pytest.raises(InputError) as got:
        if how == "whole":
            list(F.iter_tables(path, RANK))
        else:
            _streamed(path, block=1 << 20)
    assert got.value.path == str(path)
    assert str(got.value) == str(want.value)


@pytest.mark.parametrize("whole_file_bytes", [None, 0])
def test_left_out_ops_are_the_files_problem_with_its_path_and_rank(tmp_path, whole_file_bytes):
    """The second op's Elapse Time negative: read whole (msgspec) or streamed (DuckDB), the one
    problem is the per-value reader's, path, rank, reason and place alike."""
    data = REAL.read_bytes()
    key = b'"Communication Time Info"'
    second = data.index(key, data.index(key) + 1)
    at = data.index(b'"Elapse Time(ms)": ', second) + len(b'"Elapse Time(ms)": ')
    path = tmp_path / "communication.json"
    path.write_bytes(data[:at] + b"-" + data[at:])
    want = Problems()
    C.read_communication_per_value(path, RANK, want)
    assert [(p.path, p.rank) for p in want] == [(str(path), RANK)]
    got = Problems()
    list(F.iter_tables(path, RANK, got, whole_file_bytes=whole_file_bytes, block_bytes=2000))
    assert list(got) == list(want)


def test_a_warning_of_a_streamed_batch_carries_the_path_and_rank(tmp_path):
    """The second op's Time Info a number, streamed: the warning is the per-value reader's,
    path and rank alike."""
    path = _with_second_op_changed(tmp_path, b'{"Start Timestamp(us)"',
                                   b'5, "x": {"Start Timestamp(us)"')
    want = Problems()
    C.read_communication_per_value(path, RANK, want)
    assert [(p.path, p.rank, p.severity) for p in want] == [(str(path), RANK, "warning")]
    for block in (300, 1 << 20):
        got = Problems()
        _streamed(path, problems=got, block=block)
        assert list(got) == list(want)


def test_entries_that_are_not_objects_are_warned_in_file_order_when_streamed(tmp_path):
    """A step, a kind, an op and an op's Time Info that are not objects: streamed, each is the per-value reader's warning (path, rank, wording), in file order,
    and the one good op is a row."""
    doc = ('{"step0": 4, "step1": {"p2p": 3, "collective": {'
           '"a@g": {"Communication Time Info": {"Elapse Time(ms)": 1}}, "b@g": 7, '
           '"c@g": {"Communication Time Info": 5}}}}')
    path = tmp_path / "communication.json"
    path.write_text(doc)
    want = Problems()
    C.read_communication_per_value(path, RANK, want)
    assert [p.reason for p in want] == [
        "step entry 'step0' is not an object; skipped",
        "step1/p2p is not an object; skipped",
        "op 'b@g' in step1 is not an object; skipped",
        "op 'c@g' in step1: 'Communication Time Info' is not an object; op skipped"]
    for block in (16, 1 << 20):
        got = Problems()
        tables = _streamed(path, problems=got, block=block)
        assert list(got) == list(want)
        assert tables[S.COMM_OPS]["op_name"].to_pylist() == ["a"]
