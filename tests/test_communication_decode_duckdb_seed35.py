"""The DuckDB decoding of a streamed communication.json batch
(ascendprof.readers.communication.decode_duckdb), on a real rank's file with one op edited and
read the way a big file is (streamed in small blocks):

- a key repeated inside a bandwidth transport (depth 6) is not DuckDB's first value but JSON's
  last one (the batch goes to the exact reader);
- a Large Packet Ratio beyond a double (1e400) is the file's invalid JSON, not DuckDB's inf;
- an op whose Time Info lacks a required time (absent key, null column) is still read by
  DuckDB, that time null, the op kept.

Expected values come from the file's own bytes, JSON's rule (the last of two equal keys), a hand
calculation (ms -> ns), or the per-value reader (the definition the fast reader must agree with).
"""

from __future__ import annotations

import pytest

from ascendprof.model import schemas as S
from ascendprof.model.errors import InputError
from ascendprof.model.problems import Problems
from ascendprof.readers import communication as C
from ascendprof.readers.communication import fast as F
from test_communication_decode_duckdb_seed34 import RANK, _streamed_by
from test_communication_fast_seed35 import _reasons, _with_second_op_changed

pytest.importorskip("duckdb")

SECOND_OP = "hcom_batchSendRecv__128_4_1"  # the second op of REAL (rank 0 of qwen3)


def _same_as_per_value(tables, path):
    want = C.read_communication_per_value(path, RANK)
    for name in (S.COMM_OPS, S.COMM_BANDWIDTH):
        got = tables[name]
        assert got.num_rows == want[name].num_rows > 0
        for col in want[name].column_names:
            if col != "opinfo_json":
                assert got.column(col).to_pylist() == want[name].column(col).to_pylist(), col


def _second_op_rows(table):
    return [r for r in table.to_pylist() if r["op_name"] == SECOND_OP]


def test_a_key_repeated_in_a_transport_is_read_as_json_reads_it(tmp_path, monkeypatch):
    """The second op's first transport (RDMA, "Transit Size(MB)": 0) given a
    "Transit Size(MB)": 12345 before it: JSON keeps the last value, 0, as the per-value reader
    does; DuckDB would keep the first, so that op's batch is not DuckDB's."""
    ts = b'"Transit Size(MB)": '
    path = _with_second_op_changed(tmp_path, ts, ts + b"12345, " + ts)
    tables, used = _streamed_by(monkeypatch, path)
    assert used.count(False) == 1 and used.count(True) >= 1
    bw = tables[S.COMM_BANDWIDTH]
    assert 12345.0 not in bw.column("size_mb").to_pylist()
    _same_as_per_value(tables, path)


def test_a_large_packet_ratio_beyond_a_double_is_the_files_invalid_json(tmp_path, monkeypatch):
    """The second op's first Large Packet Ratio made 1e400 (JSON grammar, beyond a double):
    the streamed file raises the per-value reader's InputError, not a ratio of inf."""
    key = b'"Large Packet Ratio": '
    path = _with_second_op_changed(tmp_path, key, key + b"1e40")  # "0" -> "1e400"
    assert b'"Large Packet Ratio": 1e400,' in path.read_bytes()
    with pytest.raises(InputError) as want:
        C.read_communication_per_value(path, RANK)
    with pytest.raises(InputError) as got:
        _streamed_by(monkeypatch, path)
    assert str(got.value) == str(want.value)
    assert "infinity" in str(got.value)


@pytest.mark.parametrize("field,col", [
    (b'"Elapse Time(ms)": 158.55328, ', "elapse_ns"),
    (b'"Wait Time(ms)": 158.10198, ', "wait_ns"),
    (b'"Synchronization Time(ms)": 158.10198, ', "sync_ns")])
def test_an_absent_required_time_in_a_duckdb_batch_is_null(tmp_path, monkeypatch, field, col):
    """The second op's Time Info without one required time: every batch is still DuckDB's,
    the op is kept with that time null (the per-value reader's reading), its other times as
    written (Idle Time 0.45130000000000337 ms -> 451300 ns); the per-value reader says no
    problem of it either."""
    path = _with_second_op_changed(tmp_path, field, b"")
    tables, used = _streamed_by(monkeypatch, path)
    assert used and all(used)
    rows = _second_op_rows(tables[S.COMM_OPS])
    assert len(rows) == 1
    assert rows[0][col] is None
    assert rows[0]["idle_ns"] == 451300
    assert rows[0]["transit_ns"] == 0
    _same_as_per_value(tables, path)
    want_problems = Problems()
    C.read_communication_per_value(path, RANK, want_problems)
    assert _reasons(want_problems) == []


@pytest.mark.parametrize("old,new", [
    (b'"Elapse Time(ms)": 158.55328', b'"Elapse Time(ms)": NaN'),
    (b'"Wait Time Ratio": 1.0', b'"Wait Time Ratio": NaN'),
    (b'"Bandwidth(GB/s)": 20.8838', b'"Bandwidth(GB/s)": NaN'),
    (b'[1, 0.40168]', b'[1, NaN]')])
def test_a_nan_literal_in_a_streamed_op_is_invalid_json_as_infinity_is(tmp_path, old, new):
    """NaN is not JSON: a streamed file holding it in the second op raises InputError naming
    the file and the byte where NaN starts (as it does for Infinity), not an op kept with the
    value silently null (DuckDB reads NaN as a number)."""
    (tmp_path / "inf").mkdir()
    inf_path = _with_second_op_changed(tmp_path / "inf", old, new.replace(b"NaN", b"Infinity"))
    with pytest.raises(InputError) as inf:
        list(F.iter_tables(inf_path, RANK, None, whole_file_bytes=0, block_bytes=2000))
    assert "invalid JSON" in inf.value.reason
    path = _with_second_op_changed(tmp_path, old, new)
    data = path.read_bytes()
    assert data.count(b"NaN") == 1
    with pytest.raises(InputError) as got:
        list(F.iter_tables(path, RANK, None, whole_file_bytes=0, block_bytes=2000))
    assert got.value.path == str(path)
    assert "invalid JSON" in got.value.reason
    assert got.value.where == data.index(b"NaN")
