"""The fast communication.json reader (ascendprof.readers.communication.fast) at the size that
chooses its way: a file of exactly ``whole_file_bytes`` (or :data:`WHOLE_FILE_BYTES`) bytes is
"up to" the limit, so it is split whole, in one batch, and a repeated op key in it is settled
there (JSON keeps the last value at the first place) instead of ending the stream in Reread;
one byte less of limit and the same file is streamed block by block.

Files are small step -> kind -> op communication.json files written here; expected rows are
worked out by hand from the values written (us * 1000 and ms * 1e6 give ns).
"""

from __future__ import annotations

import json

import pyarrow as pa

from ascendprof.model import schemas as S
from ascendprof.readers.communication import fast as F

RANK = 3
BLOCK = 200  # bytes a block when streamed: each op object below is longer than that


def _op(start_us, elapse_ms):
    return {"Communication Time Info": {
        "Start Timestamp(us)": start_us, "Elapse Time(ms)": elapse_ms, "Transit Time(ms)": 0.5,
        "Wait Time(ms)": 0.25, "Synchronization Time(ms)": 0.125, "Idle Time(ms)": 1.0,
        "Wait Time Ratio": 0.3333, "Synchronization Time Ratio": 0.2},
        "Communication Bandwidth Info": {"HCCS": {
            "Transit Size(MB)": 4.0, "Transit Time(ms)": 0.5, "Bandwidth(GB/s)": 8.0,
            "Large Packet Ratio": 0.0, "Size Distribution": {"2.0": [2, 0.5]}}}}


def _write(tmp_path, text: str):
    path = tmp_path / "communication.json"
    path.write_bytes(text.encode())
    return path, len(text.encode())


def _three_ops(tmp_path):
    doc = {"step7": {"collective": {
        "hcom_allReduce__1_0_1@11": _op(1000.5, 2.25),
        "hcom_broadcast__1_1_1@11": _op(2000.0, 1.5),
        "hcom_allGather__1_2_1@11": _op(3000.25, 0.75)}}}
    return _write(tmp_path, json.dumps(doc))


def _ops_rows(batches):
    ops = pa.concat_tables([b[S.COMM_OPS] for b in batches])
    return list(zip(ops["op_name"].to_pylist(), ops["start_ns"].to_pylist(),
                    ops["elapse_ns"].to_pylist(), ops["rank"].to_pylist()))


# by hand: start_ns = Start Timestamp(us) * 1000, elapse_ns = Elapse Time(ms) * 1e6
THREE_ROWS = [("hcom_allReduce__1_0_1", 1000500, 2250000, RANK),
              ("hcom_broadcast__1_1_1", 2000000, 1500000, RANK),
              ("hcom_allGather__1_2_1", 3000250, 750000, RANK)]


def test_a_file_of_exactly_whole_file_bytes_is_read_whole_in_one_batch(tmp_path):
    path, size = _three_ops(tmp_path)
    whole = list(F.iter_tables(path, RANK, whole_file_bytes=size, block_bytes=BLOCK))
    assert len(whole) == 1
    assert _ops_rows(whole) == THREE_ROWS
    # one byte over the limit: streamed, each op in its own block (so the count above tells)
    streamed = list(F.iter_tables(path, RANK, whole_file_bytes=size - 1, block_bytes=BLOCK))
    assert len(streamed) > 1
    assert _ops_rows(streamed) == THREE_ROWS


def test_a_file_of_exactly_WHOLE_FILE_BYTES_is_read_whole(tmp_path, monkeypatch):
    """The default limit (whole_file_bytes left out) is inclusive too."""
    path, size = _three_ops(tmp_path)
    monkeypatch.setattr(F, "WHOLE_FILE_BYTES", size)
    batches = list(F.iter_tables(path, RANK, block_bytes=BLOCK))
    assert len(batches) == 1
    assert _ops_rows(batches) == THREE_ROWS


def test_a_repeated_op_key_in_a_file_at_the_limit_is_settled_whole_not_reread(tmp_path):
    """The same op key twice in one step and kind: JSON keeps the last value at the first
    place. Read whole (the file is exactly the limit) that is the one batch handed out; no
    Reread, which a streamed read raises after its batches."""
    first = json.dumps(_op(1000.5, 2.25))
    other = json.dumps(_op(2000.0, 1.5))
    last = json.dumps(_op(4000.75, 0.5))
    text = ('{"step7": {"collective": {"hcom_allReduce__1_0_1@11": ' + first
            + ', "hcom_broadcast__1_1_1@11": ' + other
            + ', "hcom_allReduce__1_0_1@11": ' + last + '}}}')
    path, size = _write(tmp_path, text)
    batches = list(F.iter_tables(path, RANK, whole_file_bytes=size, block_bytes=BLOCK))
    assert len(batches) == 1
    # by hand: the repeated key's row holds the last object's values (4000.75 us, 0.5 ms)
    assert _ops_rows(batches) == [("hcom_allReduce__1_0_1", 4000750, 500000, RANK),
                                  ("hcom_broadcast__1_1_1", 2000000, 1500000, RANK)]
