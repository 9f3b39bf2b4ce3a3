"""The DuckDB decoding of a streamed communication.json batch
(ascendprof.readers.communication.decode_duckdb), on a real rank's file with one op edited and
read the way a big file is (streamed in small blocks):

- a key repeated inside a bandwidth transport (depth 6) is not DuckDB's first value but JSON's
  last one (the batch goes to the exact reader);
- a Large Packet Ratio beyond a double (1e400) is the file's invalid JSON, not DuckDB's inf;
- an op whose Time Info lacks a required time (absent key, null column) is still read by
  DuckDB, that time null, the op kept;
- a NaN / Infinity literal is read as the per-value reader reads it (a warning, the values
  left out; not a silently null value, not the whole file refused);
- at other places: each kind of edit DuckDB would read leniently or differently (bool / null /
  text values, repeated keys at depths 4-7, unknown keys, non-objects, lists and objects where
  a number belongs, a count beyond 2**53) sends its batch the exact way, the others (negative
  times, short / long size pairs, absent Time Info / Bandwidth Info / Start Timestamp) stay
  DuckDB's, all with the per-value reader's rows (op texts included) and problems; negative
  times are counted and the first named; a time beyond int64 ns is the file's InputError.

Expected values come from the file's own bytes, JSON's rule (the last of two equal keys), a hand
calculation (ms -> ns), or the per-value reader (the definition the fast reader must agree with).
"""

from __future__ import annotations

import json
import re

import pytest

from ascendprof.model import schemas as S
from ascendprof.model.errors import InputError
from ascendprof.model.problems import Problems
from ascendprof.readers import ascend_output as AO
from ascendprof.readers import communication as C
from ascendprof.readers.communication import decode_duckdb as D
from ascendprof.readers.communication import fast as F
from test_communication_decode_duckdb_seed34 import REAL, RANK, _spy_on_duckdb, _streamed_by
from test_communication_fast_seed35 import (_op_count, _reasons, _streamed,
                                            _with_second_op_changed)

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


@pytest.mark.parametrize("literal", [b"NaN", b"Infinity", b"-Infinity"])
@pytest.mark.parametrize("old", [b'"Elapse Time(ms)": 158.55328', b'"Wait Time Ratio": 1.0',
                                 b'"Bandwidth(GB/s)": 20.8838', b'[1, 0.40168]'])
def test_a_nan_literal_in_a_streamed_op_is_read_as_a_small_file_is(tmp_path, monkeypatch, old,
                                                                   literal):
    """NaN / Infinity are not JSON, but Python's json module writes them and the per-value
    reader (the definition) takes them as numbers that are not a number: one warning, the
    values holding them left out, the rest of the file read (or the file's error, for a packet
    count that must be finite). A streamed file holding one in its second op gives exactly
    that (not an InputError refusing the whole file because it is large, and not an op kept
    with the value silently null, as DuckDB would read NaN): the streamed batches hand the
    file back (Reread) and the spilled read, the way a large rank file is read, returns the
    per-value reader's tables and problems."""
    monkeypatch.setattr(F, "BLOCK_BYTES", 2000)  # the first op alone in the first batch
    value = old.rsplit(b" ", 1)[1]
    new = old[:len(old) - len(value)] + literal + (b"]" if value.endswith(b"]") else b"")
    path = _with_second_op_changed(tmp_path, old, new)
    assert path.read_bytes().count(literal) == 1
    want_problems = Problems()
    try:
        want = C.read_communication_per_value(path, RANK, want_problems)
    except InputError as e:
        want = e
    with pytest.raises(F.Reread):  # the first batch (the first op) was handed out already
        list(F.iter_tables(path, RANK, None, whole_file_bytes=0, block_bytes=2000))
    got_problems = Problems()
    if isinstance(want, InputError):
        with pytest.raises(InputError) as got:
            AO.read_communication_spilled(path, RANK, got_problems)
        assert (got.value.path, got.value.reason) == (want.path, want.reason)
        return
    assert any("NaN or Infinity" in p.reason for p in want_problems)  # the definition warns
    tables, spilled = AO.read_communication_spilled(path, RANK, got_problems)
    assert spilled == {}
    for name in (S.COMM_OPS, S.COMM_BANDWIDTH):  # repr: a NaN the definition keeps is equal
        assert tables[name].schema == want[name].schema, name
        assert repr(tables[name].to_pylist()) == repr(want[name].to_pylist()), name
    assert _reasons(got_problems) == _reasons(want_problems)
    # a file whose first batch holds the literal is read by the per-value reader at once
    parts = list(F.iter_tables(path, RANK, None, whole_file_bytes=0, block_bytes=1 << 20))
    assert len(parts) == 1
    assert repr(parts[0][S.COMM_OPS].to_pylist()) == repr(want[S.COMM_OPS].to_pylist())


# ---------------------------------------------------------------- the same gaps at other places

def _op_edited(data: bytes, nth: int, old: bytes, new: bytes) -> bytes:
    """``data`` with the first ``old`` after the ``nth`` (0-based) op's Time Info key replaced."""
    key = b'"Communication Time Info"'
    at = -1
    for _ in range(nth + 1):
        at = data.index(key, at + 1)
    at = data.index(old, at)
    return data[:at] + new + data[at + len(old):]


def _rows(tables):
    """Every row of the three tables, opinfo_json parsed (its text is the file's, the per-value
    reader's is re-serialized: the same JSON either way)."""
    out = {}
    for name in (S.COMM_OPS, S.COMM_BANDWIDTH, S.COMM_SIZE_DIST):
        rows = tables[name].to_pylist()
        for r in rows:
            if "opinfo_json" in r:
                r["opinfo_json"] = json.loads(r["opinfo_json"])
        out[name] = rows
    return out


def _read_both(monkeypatch, path):
    """(streamed, per-value) readings of ``path``: each (rows, problems) or the InputError text;
    and for each streamed batch whether DuckDB decoded it."""
    used = _spy_on_duckdb(monkeypatch)
    out = []
    for read in (lambda pr: _streamed(path, problems=pr, block=2000),
                 lambda pr: C.read_communication_per_value(path, RANK, pr)):
        problems = Problems()
        try:
            out.append((_rows(read(problems)), _reasons(problems)))
        except InputError as e:
            out.append(str(e))
    return out[0], out[1], used


def _second_ops_parts():
    """The second op's Time Info and Bandwidth Info, key and value, as the file has them."""
    data = REAL.read_bytes()
    key = b'"Communication Time Info"'
    ti = data.index(key, data.index(key) + 1)
    bw = data.index(b'"Communication Bandwidth Info"', ti)
    assert data[bw - 2:bw] == b", " and data[ti:bw - 2].count(b"}") == 1
    return data[ti:bw - 2], data[bw:data.index(b"}}}", data.index(b'"SIO"', bw)) + 3]


_TI, _BW = _second_ops_parts()
_REFUSED = {  # DuckDB would read these leniently or differently: the batch is the exact way's
    "true as a time": (b"158.55328", b"true"),
    "a text as a time": (b"158.55328", b'"158.55328"'),
    "a second Time Info that is a number": (b'"Communication Bandwidth Info"',
                                            b'"Communication Time Info": 5, '
                                            b'"Communication Bandwidth Info"'),
    "a second Time Info that is empty": (b'"Communication Bandwidth Info"',
                                         b'"Communication Time Info": {}, '
                                         b'"Communication Bandwidth Info"'),
    "false as a ratio": (b'"Large Packet Ratio": 0', b'"Large Packet Ratio": false'),
    "null in a size pair": (b"[1, 0.40168]", b"[1, null]"),
    "true as a count": (b"[1, 0.40168]", b"[true, 0.40168]"),
    "repeated time key": (b'"Elapse Time(ms)": ', b'"Elapse Time(ms)": 1, "Elapse Time(ms)": '),
    "repeated transport": (b'"RDMA": ', b'"RDMA": {"Transit Size(MB)": 7}, "RDMA": '),
    "repeated packet size": (b"[1, 0.40168]", b'[5, 0.1], "8.388608": [1, 0.40168]'),
    "unknown time key": (b'"Elapse Time(ms)": ', b'"Zzz": 5, "Elapse Time(ms)": '),
    "unknown transport key": (b'"Transit Size(MB)": ', b'"Foo": 1, "Transit Size(MB)": '),
    "a number as Time Info": (b'"Communication Time Info": {',
                              b'"Communication Time Info": 5, "X": {'),
    "a number as a transport": (b'"RDMA": {"Transit Size(MB)": 0, "Transit Time(ms)": 0, '
                                b'"Bandwidth(GB/s)": 0, "Large Packet Ratio": 0, '
                                b'"Size Distribution": {}}', b'"RDMA": 5'),
    "a number as a size pair": (b"[1, 0.40168]", b"7"),
    "a list in a size pair": (b"[1, 0.40168]", b"[1, [0.40168]]"),
    "an object in a size pair": (b"[1, 0.40168]", b'[1, {"a": 0.40168}]'),
    "an object as a size pair": (b'"Size Distribution": {}', b'"Size Distribution": {"1": {}}'),
    "objects inside a Size Distribution": (b"[1, 0.40168]",
                                           b'[1, 0.40168], "x": {"y": {"z": 1}}'),
    "a count beyond 2**53": (b"[1, 0.40168]", b"[9007199254740993, 0.40168]"),
}
_DUCKDB = {  # read by DuckDB as they are
    "a pair of one": (b"[1, 0.40168]", b"[1]"),
    "a pair of three": (b"[1, 0.40168]", b"[1, 0.40168, 3]"),
    "negative Elapse": (b'"Elapse Time(ms)": ', b'"Elapse Time(ms)": -'),
    "negative Transit": (b'"Transit Time(ms)": ', b'"Transit Time(ms)": -'),
    "negative Wait": (b'"Wait Time(ms)": ', b'"Wait Time(ms)": -'),
    "negative Synchronization": (b'"Synchronization Time(ms)": ',
                                 b'"Synchronization Time(ms)": -'),
    "negative Idle (not required)": (b'"Idle Time(ms)": ', b'"Idle Time(ms)": -'),
    "negative Wait Time Ratio (not required)": (b'"Wait Time Ratio": ', b'"Wait Time Ratio": -'),
    "no Start Timestamp": (b'"Start Timestamp(us)": 1764246877228630.0, ', b""),
    "no Bandwidth Info": (b", " + _BW, b""),
    "an empty Bandwidth Info": (_BW, b'"Communication Bandwidth Info": {}'),
    "no Time Info": (_TI + b", ", b""),
    "an empty Time Info": (_TI, b'"Communication Time Info": {}'),
}


@pytest.mark.parametrize("edit", list(_REFUSED) + list(_DUCKDB))
def test_an_edited_op_in_a_streamed_file_is_read_as_the_per_value_reader_reads_it(
        tmp_path, monkeypatch, edit):
    """The second op edited: the streamed tables (every row of the three tables, the op's text
    included) and problems are the per-value reader's; the edits DuckDB would read leniently or
    differently (a bool / null as a number, the first of two equal keys, a dropped unknown key,
    a non-object read as null, a count a double cannot hold) send that op's batch (one) the
    exact way, the others leave every batch DuckDB's."""
    old, new = _REFUSED.get(edit) or _DUCKDB[edit]
    path = tmp_path / "communication.json"
    path.write_bytes(_op_edited(REAL.read_bytes(), 1, old, new))
    got, want, used = _read_both(monkeypatch, path)
    assert got == want
    assert used.count(False) == (1 if edit in _REFUSED else 0) and used.count(True) >= 1


@pytest.mark.parametrize("edits,said", [
    # two required times of one op negative: the first in Elapse, Transit, Wait, Sync order
    ([(1, b'"Synchronization Time(ms)": ', b'"Synchronization Time(ms)": -'),
      (1, b'"Wait Time(ms)": ', b'"Wait Time(ms)": -')],
     "1 op(s) left out: a Communication Time Info time that is not a non-negative number "
     "(e.g. Wait Time(ms) = -158.10198 in hcom_batchSendRecv__128_4_1@3985310405473756128)"),
    # two ops with a negative time: both left out, the first in the file named
    ([(1, b'"Synchronization Time(ms)": ', b'"Synchronization Time(ms)": -'),
      (2, b'"Elapse Time(ms)": ', b'"Elapse Time(ms)": -')],
     "2 op(s) left out: a Communication Time Info time that is not a non-negative number "
     "(e.g. Synchronization Time(ms) = -158.10198 in "
     "hcom_batchSendRecv__128_4_1@3985310405473756128)")])
def test_negative_times_in_a_duckdb_batch_are_counted_and_the_first_named(
        tmp_path, monkeypatch, edits, said):
    """The problem text is written out by hand from the edited values (the second op's Wait
    and Synchronization Time are 158.10198 in the file); the ops left out are the per-value
    reader's, and every batch is still DuckDB's."""
    data = REAL.read_bytes()
    for nth, old, new in edits:
        data = _op_edited(data, nth, old, new)
    path = tmp_path / "communication.json"
    path.write_bytes(data)
    got, want, used = _read_both(monkeypatch, path)
    assert all(used)
    assert got == want
    rows, problems = got
    assert [reason for reason, _ in problems] == [said]
    assert len(rows[S.COMM_OPS]) == _op_count(json.loads(data)) - len({n for n, _, _ in edits})


def test_every_op_text_of_a_duckdb_read_file_is_the_files_op_object(monkeypatch):
    """Unedited: each comm_ops row's opinfo_json is, parsed, the file's own op object under its
    step, kind and op key (json.loads of the file), in file order."""
    doc = json.loads(REAL.read_bytes())
    want = [(step, kind, key, op) for step, kinds in doc.items() for kind, ops in kinds.items()
            for key, op in ops.items() if not key.startswith("Total")]
    tables, used = _streamed_by(monkeypatch, REAL)
    assert all(used)
    rows = tables[S.COMM_OPS].to_pylist()
    assert [json.loads(r["opinfo_json"]) for r in rows] == [op for *_, op in want]
    assert [f'{r["op_name"]}@{r["group"]}' for r in rows] == [key for _, _, key, _ in want]


@pytest.mark.parametrize("old,new", [
    (b'"Elapse Time(ms)": 158.55328', b'"Elapse Time(ms)": 10000000000000'),
    (b'"Transit Time(ms)": 0.40168', b'"Transit Time(ms)": 10000000000000'),
    (b"[1, 0.40168]", b"[1, 10000000000000]")])
def test_a_time_beyond_int64_ns_in_a_duckdb_batch_is_the_files_input_error(tmp_path, old, new):
    """10**13 ms = 10**19 ns > 2**63 - 1 (an exact double, below 2**53, so DuckDB's reading is
    kept up to the ns conversion): the streamed file raises the per-value reader's InputError,
    not a crash of the DuckDB batch."""
    assert 10**13 * 10**6 > 2**63 - 1 and 10**13 < 2**53
    path = _with_second_op_changed(tmp_path, old, new)
    with pytest.raises(InputError) as want:
        C.read_communication_per_value(path, RANK)
    with pytest.raises(InputError) as got:
        list(F.iter_tables(path, RANK, None, whole_file_bytes=0, block_bytes=2000))
    assert str(got.value) == str(want.value)
    assert got.value.path == str(path)


@pytest.mark.parametrize("raw", [b"[1,]", b"{,}", b"[1,\t]", b"[1,\r\n]", b"{\"a\": 1 ,\n }",
                                 b"[1, 2]", b"[1,2] ,", b",", b"]", b"[,1]", b'"a,]"x',
                                 b"[1,\x0b]", b"[1,x]", b"{1:2,\t\t}", b"[ , ]", b"[1,)"])
def test_has_trailing_comma_is_a_comma_then_only_json_whitespace_then_a_close(raw):
    """The regex of the docstring: ``,`` then JSON whitespace (space, tab, CR, LF: not \\v)
    then ``]`` or ``}`` (as bytes; a string's inside counts too, only refusing DuckDB)."""
    assert D._has_trailing_comma(raw) == bool(re.search(rb",[ \t\r\n]*[\]}]", raw))
