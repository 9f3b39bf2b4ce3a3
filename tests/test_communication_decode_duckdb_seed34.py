"""The DuckDB decoding of a streamed communication.json batch
(ascendprof.readers.communication.decode_duckdb): a real rank's file read the way a big file is
(streamed in small blocks) has every batch decoded by DuckDB (not silently handed to msgspec)
with the per-value reader's tables; the DuckDB connection is made with all cores and the 8 MB
allocator flush thresholds; ``_has_null`` is ``b"null" in raw``; a Start Timestamp that a
double cannot hold exactly (2**53 + 1 us) is not taken from DuckDB's double but read exactly.

Expected values come from the file's own bytes, os.cpu_count(), Python's ``in`` on bytes, the
per-value reader (the definition the fast reader must agree with), or a hand calculation.
"""

from __future__ import annotations

import os

import pyarrow as pa
import pytest

from ascendprof.model import schemas as S
from ascendprof.model.errors import InputError
from ascendprof.readers import communication as C
from ascendprof.readers.communication import decode_duckdb as D
from ascendprof.readers.communication import fast as F
from conftest import QWEN3

pytest.importorskip("duckdb")

REAL = sorted(QWEN3.glob("rank_*/ASCEND_PROFILER_OUTPUT/communication.json"))[0]
RANK = 2


def _spy_on_duckdb(monkeypatch) -> list[bool]:
    """A list that gets, for each batch the fast reader decodes from now on, whether DuckDB
    decoded it."""
    used = []

    def spy(entries, *args):
        got = D.duck_tables(entries, *args)
        used.append(got is not None)
        return got

    monkeypatch.setattr(F, "duck_tables", spy)
    return used


def _streamed_by(monkeypatch, path, block=2000):
    """The tables of ``path`` streamed in ``block``-byte blocks, and for each batch whether
    DuckDB decoded it."""
    used = _spy_on_duckdb(monkeypatch)
    parts = list(F.iter_tables(path, RANK, None, whole_file_bytes=0, block_bytes=block))
    return {n: pa.concat_tables([p[n] for p in parts]) for n in parts[0]}, used


def test_every_batch_of_a_real_file_is_decoded_by_duckdb_as_the_per_value_reader_reads_it(
        monkeypatch):
    """The real file has no true/false/null, text values or odd lists: each batch is DuckDB's,
    and its tables are the per-value reader's, row for row."""
    data = REAL.read_bytes()
    assert b"null" not in data and b"true" not in data and b"false" not in data
    assert b'"Size Distribution": {"' in data  # some op has a non-empty size distribution
    tables, used = _streamed_by(monkeypatch, REAL)
    assert len(used) > 1 and all(used)
    want = C.read_communication_per_value(REAL, RANK)
    for name in (S.COMM_OPS, S.COMM_BANDWIDTH):
        got = tables[name]
        assert got.num_rows == want[name].num_rows > 0
        for col in want[name].column_names:
            if col in got.column_names and col != "opinfo_json":  # text as the file has it
                assert got.column(col).to_pylist() == want[name].column(col).to_pylist(), col


def test_the_duckdb_connection_uses_every_core_and_flushes_freed_memory_at_8_mb():
    """threads = os.cpu_count(); both allocator flush thresholds 8 MB (as a fresh connection
    told '8MB' shows them; DuckDB's defaults are 128 MB and 512 MB)."""
    import duckdb

    con = D._duck()
    assert con is not None
    ask = ("SELECT current_setting('threads'), current_setting('allocator_flush_threshold'), "
           "current_setting('allocator_bulk_deallocation_flush_threshold')")
    threads, flush, bulk = con.execute(ask).fetchall()[0]
    assert int(threads) == max(1, os.cpu_count() or 1)
    fresh = duckdb.connect()
    default = fresh.execute(ask).fetchall()[0]
    fresh.execute("SET allocator_flush_threshold = '8MB'")
    fresh.execute("SET allocator_bulk_deallocation_flush_threshold = '8MB'")
    want = fresh.execute(ask).fetchall()[0]
    assert want[1:] != default[1:]
    assert (flush, bulk) == want[1:]


@pytest.mark.parametrize("raw", [b"null", b'{"a": null}', b'[1,null]', b'"nu"', b'"nul"',
                                 b'"ull"', b'"Linux full"', b'nuLl', b'NULL', b'nnull', b'unull',
                                 b'"Communication"', b'{"x": 1}', b'nu ll', b'xnullx'])
def test_has_null_is_null_in_the_bytes(raw):
    assert D._has_null(raw) == (b"null" in raw)


def test_a_start_timestamp_a_double_cannot_hold_is_read_exactly(tmp_path, monkeypatch):
    """The second op's Start Timestamp(us) made 2**53 + 1 = 9007199254740993 (odd: a double
    rounds it to 2**53): its start_ns is 9007199254740993 * 1000, not 9007199254740992000."""
    data = REAL.read_bytes()
    key = b'"Start Timestamp(us)": '
    at = data.index(key, data.index(key) + 1) + len(key)
    end = data.index(b",", at)
    path = tmp_path / "communication.json"
    path.write_bytes(data[:at] + b"9007199254740993" + data[end:])
    tables, used = _streamed_by(monkeypatch, path)
    starts = tables[S.COMM_OPS].column("start_ns").to_pylist()
    assert 9007199254740993 * 1000 in starts
    assert 9007199254740992 * 1000 not in starts
    assert used.count(False) == 1  # that op's batch alone is not DuckDB's


@pytest.mark.parametrize("old,new", [(b"[1, 0.40168]", b"[1, 0.40168,]"),
                                     (b"[1, 0.40168]", b"[1, 0.40168 , ]"),
                                     (b"[1, 0.40168]}", b"[1, 0.40168],}")])
def test_a_trailing_comma_in_a_streamed_op_is_the_files_invalid_json(tmp_path, old, new):
    """A trailing comma in a [count, duration] list or a Size Distribution object is not
    JSON: the streamed file raises the per-value reader's InputError, not DuckDB's lenient
    reading of it."""
    data = REAL.read_bytes()
    at = data.index(old)
    path = tmp_path / "communication.json"
    path.write_bytes(data[:at] + new + data[at + len(old):])
    with pytest.raises(InputError) as want:
        C.read_communication_per_value(path, RANK)
    assert "trailing comma" in str(want.value)
    with pytest.raises(InputError) as got:
        list(F.iter_tables(path, RANK, None, whole_file_bytes=0, block_bytes=2000))
    assert str(got.value) == str(want.value)
