"""Raw CANN records (spec §D), the cases the seed-37 mutation sample of readers/cann_records.py
found untested: read through ``read_source`` on PROF_ directories built byte by byte (the
helpers of test_raw_cann_by_hand.py) where the reader reaches the case, else through the
decoder functions themselves. Expected values worked out by hand in the comments.

Device clock of the built job: 50 MHz (20 ns a tick); the host launch records of the default
job name stream 4 task 1 "MatMul_1" and stream 4 task 2 "Add_2".
"""

from __future__ import annotations

import numpy as np
import pytest

from ascendprof.model import schemas as S
from ascendprof.model.errors import RecordError
from ascendprof.readers import cann_records as C
from test_raw_cann_by_hand import DEV_CNT0, _job, _read, _stars


def _kernels(tmp_path):
    return [(r["stream_id"], r["task_id"], r["name"], r["dur_ns"])
            for r in _read(tmp_path).tables[S.KERNELS].to_pylist()]


# ------------------------------------------------------------------ §D.5 stream ids

def test_stream_id_bits_past_eleven_are_dropped_when_bits_12_and_13_are_clear(tmp_path):
    """§D.5, expand 0, neither bit 12 nor 13 set: stream = raw % 2048. Raw 0x0804 (bit 11 set,
    2052) is stream 2052 - 2048 = 4, raw 0x4004 (bit 14, 16388) is stream 16388 - 8 * 2048 = 4,
    so both tasks are stream 4's and join their host launch records (MatMul_1, Add_2).
    Durations: 50 and 60 ticks of 20 ns."""
    stars = (_stars(0, 0x0804, 1, DEV_CNT0 + 100) + _stars(1, 0x0804, 1, DEV_CNT0 + 150)
             + _stars(0, 0x4004, 2, DEV_CNT0 + 200) + _stars(1, 0x4004, 2, DEV_CNT0 + 260))
    _job(tmp_path, stars=stars)
    assert _kernels(tmp_path) == [(4, 1, "MatMul_1", 1000), (4, 2, "Add_2", 1200)]


def test_stream_task_decoding_of_unsigned_64_bit_stream_ids_stays_integer():
    """Raw stream ids given as a uint64 array (with bit 12 set: stream = s % 2048, task =
    (t & 0x1FFF) | (s & 0xE000)) decode to int64 ids as plain ints do: raw s 0x1005, t 0x0007
    -> stream 0x1005 % 2048 = 5, task 7 | 0 = 7; raw s 0x0009 (no bit) -> stream 9, task 77."""
    s, t = C.decode_stream_task(np.array([0x1005, 0x0009], np.uint64), [0x0007, 77])
    assert s.dtype == np.int64 and t.dtype == np.int64
    assert (s.tolist(), t.tolist()) == ([5, 9], [7, 77])


# ------------------------------------------------------------------ §D.3 pairing

def test_a_start_and_an_end_of_different_tasks_are_no_task(tmp_path):
    """Lost logs: task 1 of stream 4 has a start (tick +100) and no end, task 2 of stream 4 an
    end (+160) and no start. Ordered by (stream, task, time) they are neighbours, but a task is
    a start followed by an end of the SAME stream and task: neither is a kernel. Task 3
    [+300, +350] is the only kernel: 50 ticks = 1000 ns, no host record for it (no name)."""
    stars = (_stars(0, 4, 1, DEV_CNT0 + 100) + _stars(1, 4, 2, DEV_CNT0 + 160)
             + _stars(0, 4, 3, DEV_CNT0 + 300) + _stars(1, 4, 3, DEV_CNT0 + 350))
    _job(tmp_path, stars=stars)
    assert _kernels(tmp_path) == [(4, 3, None, 1000)]


# ------------------------------------------------------------------ §D.2 hash_dic

def test_hash_dic_lines_without_a_numeric_id_are_ignored(tmp_path):
    """hash_dic lines are ``<id>:<string>``; a header line with a non-numeric key and a bare
    number without ':' are no entries (the bare '101' does not blank MatMul_1's name). The
    default job's two tasks keep their names: MatMul_1 [100, 150], Add_2 [200, 260]."""
    d = _job(tmp_path)
    p = d / "host" / "data" / "unaging.additional.hash_dic.slice_0"
    p.write_text("hash dictionary:v1\n" + p.read_text() + "101\n")
    assert _kernels(tmp_path) == [(4, 1, "MatMul_1", 1000), (4, 2, "Add_2", 1200)]


def test_parse_hash_dic_needs_an_id_and_a_colon():
    """'12:Add' is an entry; 'Add:12' (key not a number) and '13' (no ':') are not."""
    assert C.parse_hash_dic("Add:12\n12:Add\n13\n") == {12: "Add"}


# ------------------------------------------------------------------ errors of the decoders

@pytest.mark.parametrize("decode, size", [
    (C.decode_api_event, 40),
    (lambda b: C.decode_compact(b, "task_track"), 64),
    (lambda b: C.decode_additional(b, "hccl_info"), 256),
    (C.decode_stars_soc, 64),
    (C.decode_hwts, 64),
])
def test_a_decoder_given_bytes_without_a_file_names_them_bytes(decode, size):
    """Called on bytes alone (no path), a truncated buffer (one whole record of zeros plus 3
    bytes) is reported as '<bytes>' at the end of the whole record."""
    with pytest.raises(RecordError) as ei:
        decode(b"\0" * (size + 3))
    assert ei.value.path == "<bytes>" and ei.value.where == size


@pytest.mark.parametrize("decode, what", [
    (C.decode_additional, "additional"),
    (C.decode_compact, "compact"),
])
def test_an_unknown_record_kind_is_named(decode, what):
    with pytest.raises(ValueError, match=f"^unknown {what} kind 'hccl_infos'$"):
        decode(b"", "hccl_infos")
