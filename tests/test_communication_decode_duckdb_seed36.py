"""The DuckDB decoding of a streamed communication.json batch
(ascendprof.readers.communication.decode_duckdb), the survivors of the seed-36 sample:

- on a machine whose core count Python cannot tell (os.cpu_count() is None) the DuckDB
  connection gets one thread, not a guessed count;
- an op of a DuckDB batch with a negative required time is left out and said even when its
  Start Timestamp (not a required time) is negative too: the Start Timestamp is not one of the
  fields whose sign decides, so it cannot undo the verdict of the required ones.

Expected values come from the file's own bytes (the second op's times), a hand-written problem
text, or the per-value reader (the definition the fast reader must agree with).
"""

from __future__ import annotations

import json
import os

import pytest

from ascendprof.model import schemas as S
from ascendprof.readers.communication import decode_duckdb as D
from test_communication_decode_duckdb_seed34 import REAL
from test_communication_decode_duckdb_seed35 import SECOND_OP, _op_edited, _read_both
from test_communication_fast_seed35 import _op_count

pytest.importorskip("duckdb")


def test_a_machine_of_unknown_core_count_gets_one_duckdb_thread(monkeypatch):
    """os.cpu_count() is documented to return None when the count cannot be told: the
    connection then runs one thread (the one core sure to exist), and still decodes."""
    monkeypatch.setattr(os, "cpu_count", lambda: None)
    monkeypatch.setattr(D, "_DUCK", [])  # a fresh connection, made under the patched count
    con = D._duck()
    assert con is not None and D._DUCK == [con]
    assert int(con.execute("SELECT current_setting('threads')").fetchall()[0][0]) == 1
    assert con.execute("SELECT from_json('{\"a\": 2.5}', '{\"a\": \"DOUBLE\"}') AS o"
                       ).fetchall()[0][0] == {"a": 2.5}


_START = b'"Start Timestamp(us)": '


@pytest.mark.parametrize("required,said", [
    (b'"Elapse Time(ms)": ', "Elapse Time(ms) = -158.55328"),
    (b'"Synchronization Time(ms)": ', "Synchronization Time(ms) = -158.10198")])
def test_a_negative_start_timestamp_does_not_keep_an_op_with_a_negative_required_time(
        tmp_path, monkeypatch, required, said):
    """The second op (Elapse 158.55328 ms, Synchronization 158.10198 ms in the file) given a
    negative required time and a negative Start Timestamp: it is left out and named, as the
    per-value reader does, every batch still DuckDB's; the rows are one op fewer than the
    file's ops."""
    data = _op_edited(REAL.read_bytes(), 1, required, required + b"-")
    data = _op_edited(data, 1, _START, _START + b"-")
    path = tmp_path / "communication.json"
    path.write_bytes(data)
    got, want, used = _read_both(monkeypatch, path)
    assert used and all(used)
    assert got == want
    rows, problems = got
    assert [reason for reason, _ in problems] == [
        "1 op(s) left out: a Communication Time Info time that is not a non-negative number "
        f"(e.g. {said} in {SECOND_OP}@3985310405473756128)"]
    assert len(rows[S.COMM_OPS]) == _op_count(json.loads(data)) - 1
    assert SECOND_OP not in {r["op_name"] for r in rows[S.COMM_OPS]}
