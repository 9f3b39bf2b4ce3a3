"""communication.json read by the tolerant reader (ascendprof.readers.communication.per_value)
through read_communication (the user's path) and read_communication_per_value:

- an op whose Time Info has a negative time in a later required field (Transit, Wait or
  Synchronization Time) while every op's Elapse Time is fine is still left out, with the one
  problem naming the field, the value and the op (every required field is checked, not only
  up to the first that is fine for all ops);
- a Wait / Synchronization Time Ratio integer beyond what a float64 column holds (2^63) makes
  the file's InputError naming the file, the column and the value;
- read_communication_per_value given ``raw`` (the file's bytes when already read) parses those
  bytes and does not read the file again.

Expected values are written out by hand from the JSON each test writes.
"""

from __future__ import annotations

import json

import pytest

from ascendprof.model import schemas as S
from ascendprof.model.errors import InputError
from ascendprof.model.problems import Problems
from ascendprof.readers import communication as C
from test_communication_per_value_seed34 import READERS, _transport
from test_communication_per_value_seed35 import _op


def _with_time(op: dict, **times) -> dict:
    op["Communication Time Info"].update(times)
    return op


@pytest.mark.parametrize("read", READERS)
@pytest.mark.parametrize("key", ["Transit Time(ms)", "Wait Time(ms)",
                                 "Synchronization Time(ms)"])
def test_a_negative_later_time_leaves_the_op_out(tmp_path, read, key):
    # every op's Elapse Time (the first required field) is 0.5 ms; op b's `key` is -0.25
    ops = {"a@g": _op({"HCCS": _transport()}, 1000.0),
           "b@g": _with_time(_op({"HCCS": _transport()}, 2000.0), **{key: -0.25}),
           "c@g": _op({"HCCS": _transport()}, 3000.0)}
    path = tmp_path / "communication.json"
    path.write_text(json.dumps({"step1": {"collective": ops}}))
    problems = Problems()
    tables = read(path, 3, problems)
    assert tables[S.COMM_OPS].column("op_name").to_pylist() == ["a", "c"]
    # the op's bandwidth and size rows go with it
    assert tables[S.COMM_BANDWIDTH].column("op_name").to_pylist() == ["a", "c"]
    assert tables[S.COMM_SIZE_DIST].column("op_name").to_pylist() == ["a", "c"]
    (p,) = [p for p in problems.items if "left out" in p.reason]
    assert p.reason == ("1 op(s) left out: a Communication Time Info time that is not a "
                        f"non-negative number (e.g. {key} = -0.25 in b@g)")
    assert p.where == "step1"
    assert p.severity == "skipped"


@pytest.mark.parametrize("read", READERS)
@pytest.mark.parametrize("key, column", [("Wait Time Ratio", "wait_ratio"),
                                         ("Synchronization Time Ratio", "sync_ratio")])
def test_a_ratio_beyond_int64_is_the_files_error_naming_the_column(tmp_path, read, key,
                                                                   column):
    ops = {"a@g": _with_time(_op({"HCCS": _transport()}, 1000.0), **{key: 2**63})}
    path = tmp_path / "communication.json"
    path.write_text(json.dumps({"step1": {"collective": ops}}))
    with pytest.raises(InputError) as got:
        read(path, 3, Problems())
    assert got.value.path == str(path)
    # 2^63 = 9223372036854775808
    assert got.value.reason == (f"column {column!r}: 9223372036854775808 is not a valid "
                                "double value")


def test_given_bytes_are_parsed_not_the_file_again(tmp_path):
    """The bytes the caller already read are the ones parsed: the file on disk, since
    replaced by other content, is not read again."""
    path = tmp_path / "communication.json"
    read_before = json.dumps({"step1": {"collective": {
        "a@g": _op({"HCCS": _transport()}, 1000.0)}}}).encode()
    path.write_text(json.dumps({"step1": {"collective": {
        "z@h": _op({"HCCS": _transport()}, 5000.0)}}}))
    tables = C.read_communication_per_value(path, 3, Problems(), read_before)
    assert tables[S.COMM_OPS].column("op_name").to_pylist() == ["a"]
    assert tables[S.COMM_OPS].column("group").to_pylist() == ["g"]
    # 1000.0 us = 1_000_000 ns
    assert tables[S.COMM_OPS].column("start_ns").to_pylist() == [1_000_000]
    # and with the file gone, the given bytes are still read
    path.unlink()
    tables = C.read_communication_per_value(path, 3, Problems(), read_before)
    assert tables[S.COMM_OPS].column("op_name").to_pylist() == ["a"]
