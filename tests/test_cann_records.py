"""Raw CANN record decoders (spec §D). No public raw CANN 7/8 data exists, so every modern record
here is built byte by byte in the test from the offset tables of spec §D.2-§D.5 with struct;
the values are chosen by hand. Property tests: arbitrary bytes give decoded records or a
RecordError (never another exception), and records built from the spec decode back to the
values they were built from."""

from __future__ import annotations

import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ascendprof.model.errors import InputError, RecordError
from ascendprof.readers import cann_records as C

U16, U32, U64 = st.integers(0, 2**16 - 1), st.integers(0, 2**32 - 1), st.integers(0, 2**63 - 1)


def prefix(level, typ, thread, data_len, ts, magic=0x5A5A):
    return struct.pack("<HHIIIQ", magic, level, typ, thread, data_len, ts)


def task_track(ts, stream, task, batch=0, device=0, thread=7, task_type=1, kernel=99, blocks=8):
    body = struct.pack("<HHHHQQHHB", device, stream, task, batch, task_type, kernel, blocks, 16, 0)
    return (prefix(5000, 0, thread, 40, ts) + body).ljust(64, b"\0")


def node_basic(ts, op_name, op_type, task_type=0, block_num=0x00020008, thread=7):
    body = struct.pack("<QIQIIB", op_name, task_type, op_type, block_num, 1, 2)
    return (prefix(10000, 0, thread, 40, ts) + body).ljust(64, b"\0")


def stars(func, sqe, cnt, stream, task, ts, subtype=0, subid=0):
    header = func | (cnt << 6) | (sqe << 10)
    return struct.pack("<HHHHQBBH", header, 0x6BD3, stream, task, ts, subtype, 0, subid).ljust(64, b"\0")


def hwts(kind, task, stream, syscnt, cnt=0, task_type=0):
    return struct.pack("<BBHHHQI", kind | (cnt << 4), task_type, 0, 0, task, syscnt, stream).ljust(64, b"\0")


# ------------------------------------------------------------------ round trips from the spec

@settings(deadline=None)  # timing is irrelevant here
@given(ts=U64, stream=U16, task=U16, batch=U16, dev=st.integers(0, 0xFFF), dtype=st.integers(0, 15),
       thread=U32, kernel=U64)
def test_task_track_round_trip(ts, stream, task, batch, dev, dtype, thread, kernel):
    buf = task_track(ts, stream, task, batch, device=dev | (dtype << 12), thread=thread, kernel=kernel)
    r = C.decode_compact(buf, "task_track")
    assert (int(r["timestamp"][0]), int(r["stream_id"][0]), int(r["task_id"][0]),
            int(r["batch_id"][0]), int(r["thread_id"][0]), int(r["kernel_name"][0])) == (
        ts, stream, task, batch, thread, kernel)
    d, t = C.task_track_device(r)
    assert (int(d[0]), int(t[0])) == (dev, dtype)


@settings(deadline=None)
@given(op=U64, typ=U64, tt=st.integers(0, 11), blocks=U32)
def test_node_basic_info_round_trip_is_packed(op, typ, tt, blocks):
    r = C.decode_compact(node_basic(5, op, typ, tt, blocks), "node_basic_info")
    assert (int(r["op_name"][0]), int(r["op_type"][0]), int(r["task_type"][0]),
            int(r["block_num"][0]), int(r["op_state"][0])) == (op, typ, tt, blocks, 2)


def test_hccl_info_fields_at_spec_offsets():
    body = struct.pack("<QQQIIIIIIQIIdQQQIIIII", 11, 12, 13, 0, 1, 8, 0, 2, 3, 44, 0, 1, 0.25,
                       0, 0, 4096, 0, 4, 1, 0, 1)
    buf = (prefix(5500, 0, 9, 232, 123) + body).ljust(256, b"\0")
    r = C.decode_additional(buf, "hccl_info")
    assert (int(r["item_id"][0]), int(r["group_name"][0]), int(r["remote_rank"][0]),
            int(r["rank_size"][0]), int(r["plane_id"][0]), int(r["notify_id"][0]),
            float(r["duration_estimated_us"][0]), int(r["data_size"][0]), int(r["link_type"][0]),
            int(r["transport_type"][0]), int(r["rdma_type"][0])) == (
        11, 13, 1, 8, 2, 44, 0.25, 4096, 1, 0, 1)


def test_api_event_and_graph_id_map():
    rec = struct.pack("<HHIIIQQQ", 0x5A5A, 20000, 3, 77, 0, 1000, 2000, 555)
    r = C.decode_api_event(rec * 2)
    assert r["begin"].tolist() == [1000, 1000] and r["item_id"].tolist() == [555, 555]
    g = (prefix(15000, 0, 1, 232, 9) + struct.pack("<QII", 42, 3, 7)).ljust(256, b"\0")
    r = C.decode_additional(g, "graph_id_map")
    assert (int(r["model_name"][0]), int(r["graph_id"][0]), int(r["model_id"][0])) == (42, 3, 7)


def test_stars_acsq_and_ffts_logs_and_other_logs_skipped():
    buf = (stars(0, 0, 1, 5, 10, 1000) + stars(1, 0, 2, 5, 10, 1600)
           + stars(34, 6, 3, 6, 11, 2000, subtype=6, subid=3) + stars(35, 6, 4, 6, 11, 2500, subid=3)
           + stars(7, 0, 5, 1, 1, 9999)                       # a PMU-type log: skipped
           + struct.pack("<HH", 0, 0x1234).ljust(64, b"\0"))  # other magic: skipped
    r = C.decode_stars_soc(buf)
    assert r["timestamp"].tolist() == [1000, 1600, 2000, 2500]
    assert r["context_id"].tolist() == [C.INVALID_CONTEXT] * 2 + [3, 3]
    assert r["is_start"].tolist() == [True, False, True, False]
    assert r["offset"].tolist() == [0, 64, 128, 192]
    s, e = C.pair_start_end([r["stream_raw"], r["task_raw"], r["context_id"]], r["timestamp"],
                            r["is_start"])
    assert (r["timestamp"][e] - r["timestamp"][s]).tolist() == [600, 500]


def test_stream_task_decoding_d5():
    # expand == 0: bit 12 set -> stream = s % 2048, task = (t & 0x1FFF) | (s & 0xE000)
    s, t = C.decode_stream_task([0x1000 | 0x4000 | 5], [0x1234])
    assert (int(s[0]), int(t[0])) == ((0x5005) % 2048, 0x1234 | 0x4000)
    # bit 13 set -> stream = (t & 0x0FFF) % 2048, task = (s & 0x0FFF) | (t & 0xF000)
    s, t = C.decode_stream_task([0x2000 | 0x0ABC], [0x3000 | 0x0007])
    assert (int(s[0]), int(t[0])) == (7, 0x0ABC | 0x3000)
    s, t = C.decode_stream_task([9], [77])
    assert (int(s[0]), int(t[0])) == (9, 77)
    # expand == 1
    s, t = C.decode_stream_task([0x8000 | 3], [0x8000 | 0x10], sqe_type=[0], expand=1)
    assert (int(s[0]), int(t[0])) == (0x10, 0x8000 | 3)
    s, t = C.decode_stream_task([0x8000 | 3], [0x10], sqe_type=[4], expand=1)
    assert (int(s[0]), int(t[0])) == (3, 0x10)


def test_hwts_round_trip_and_block_logs_skipped():
    buf = hwts(0, 30092, 519, 1000, cnt=1) + hwts(2, 30092, 519, 1001) + hwts(1, 30092, 519, 1266)
    r = C.decode_hwts(buf)
    assert r["task_id"].tolist() == [30092, 30092] and r["cnt"].tolist() == [1, 0]
    assert r["offset"].tolist() == [0, 128]
    with pytest.raises(RecordError) as ei:
        C.decode_hwts(buf + hwts(7, 1, 1, 1))
    assert ei.value.where == 192 and "unknown HWTS log type 7" in str(ei.value)


def test_truncated_and_unknown_records_name_file_and_offset():
    with pytest.raises(RecordError) as ei:
        C.decode_compact(task_track(1, 2, 3) + b"\x5a\x5a\0", "task_track", "f.slice_0")
    assert ei.value.where == 64 and str(ei.value).startswith("f.slice_0 at byte 64")
    bad = task_track(1, 2, 3) + b"\x00\x01" + task_track(1, 2, 3)[2:]
    with pytest.raises(RecordError) as ei:
        C.decode_compact(bad, "task_track", "g")
    assert ei.value.where == 64 and "magic 0x0100" in ei.value.reason
    with pytest.raises(RecordError):
        C.decode_stars_soc(b"\0" * 65)
    with pytest.raises(RecordError):
        C.decode_api_event(b"\0" * 40)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=600))
def test_arbitrary_bytes_only_record_errors(buf):
    decoders = [C.decode_api_event, C.decode_stars_soc, C.decode_hwts,
                lambda b: C.decode_compact(b, "node_basic_info"),
                lambda b: C.decode_additional(b, "tensor_info")]
    for dec in decoders:
        try:
            dec(buf)
        except InputError:   # RecordError is an InputError
            pass


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 5), st.integers(0, 10**6),
                          st.integers(1, 10**4)), max_size=30))
def test_pairing_recovers_built_tasks(tasks):
    """Tasks on distinct (stream, task) keys, each a start and an end log, shuffled: pairing
    returns exactly the built durations."""
    seen, built = set(), []
    for s, t, start, dur in tasks:
        if (s, t) not in seen:
            seen.add((s, t))
            built.append((s, t, start, dur))
    rows = [(s, t, start, True) for s, t, start, _ in built] + \
           [(s, t, start + dur, False) for s, t, start, dur in built]
    rng = np.random.default_rng(0)
    rng.shuffle(rows)
    arr = np.array([r[:3] for r in rows], dtype=np.int64).reshape(-1, 3)
    flag = np.array([r[3] for r in rows], dtype=bool)
    s_idx, e_idx = C.pair_start_end([arr[:, 0], arr[:, 1]], arr[:, 2], flag)
    got = sorted(zip(arr[s_idx, 0].tolist(), arr[s_idx, 1].tolist(), (arr[e_idx, 2] - arr[s_idx, 2]).tolist()))
    assert got == sorted((s, t, d) for s, t, _, d in built)


def test_dictionaries_and_time_alignment():
    h = C.parse_hash_dic("12:aclnnAdd\n13:a:b:c\nbad line\n12:Add_1\n")
    assert h == {12: "Add_1", 13: "a:b:c"}
    t = C.parse_type_info_dic("5000_1:KERNEL_AICORE\n10000_0:node\n")
    assert C.type_name(t, 5000, 1) == "KERNEL_AICORE" and C.type_name(t, 5000, 27) == "DYNAMIC_ENABLE"
    assert C.type_name(t, 5000, 99) == "99"
    host = C.parse_start_log("[Host]\nclock_realtime: 1700000000000000000\n"
                             "clock_monotonic_raw: 5000000000\ncntvct: 100\ncntvct_diff: 50\n")
    dev = C.parse_start_log("clock_monotonic_raw: 4000\ncntvct: 1000000\n")
    info = {"CPU": [{"Frequency": "100"}], "DeviceInfo": [{"hwts_frequency": "50"}]}
    start = {"collectionTimeBegin": "1700000000000000", "clockMonotonicRaw": "4000000000"}
    clk = C.device_clock(info, dev, host, start)
    # by hand: mono0 = 5e9 + 50*1000/100 = 5000000500 ns; offset = 1.7e18 - 4e9
    # syscnt 1000050 -> +50 ticks at 50 MHz = 1000 ns
    assert int(clk.to_local_ns([1_000_050])[0]) == 5_000_000_500 + 1000 + 1_700_000_000_000_000_000 - 4_000_000_000
    assert clk.ticks_to_ns([3]).tolist() == [60]
    with pytest.raises(ValueError):
        C.device_clock({"DeviceInfo": [{}]})


def test_slices_concatenate_in_numeric_order(tmp_path):
    for n, b in ((10, b"C"), (2, b"B"), (0, b"A")):
        (tmp_path / f"hwts.data.0.slice_{n}").write_bytes(b)
    (tmp_path / "hwts.data.0.slice_0.done").write_bytes(b"")
    g = C.slice_groups(sorted(p.name for p in tmp_path.iterdir()))
    assert g == {"hwts.data.0": ["hwts.data.0.slice_0", "hwts.data.0.slice_2", "hwts.data.0.slice_10"]}
    assert C.read_slices(tmp_path, g["hwts.data.0"]) == b"ABC"
