"""Raw CANN record decoders (spec §D), case by case, on records built byte by byte with struct from
the offset tables of §D.2 / §D.4 (no public raw CANN 7/8 data exists); expected values worked
out by hand in the comments.

Covered here: which api_event records are API ranges, the error of a damaged record (file and
byte offset), HWTS columns as exact integers, the clock conversion's rounding and its terms
when start logs are missing, and enum codes just past the known names.
"""

from __future__ import annotations

import struct

import numpy as np
import pytest

from ascendprof.model.errors import RecordError
from ascendprof.readers import cann_records as C


def api_event(level, begin, end, thread=7, typ=1, item=0, magic=0x5A5A):
    return struct.pack("<HHIIIQQQ", magic, level, typ, thread, 0, begin, end, item)


def hwts(kind, task, stream, syscnt, cnt=0, task_type=0):
    return struct.pack("<BBHHHQI", kind | (cnt << 4), task_type, 0, 0, task, syscnt,
                       stream).ljust(64, b"\0")


def test_api_ranges_keep_ranges_of_the_level_only():
    """§D.2: an Event record (end = 0xFFFFFFFFFFFFFFFF) and a zero-length range are no API
    ranges (CANN drops them); another level's range is not this level's."""
    buf = (api_event(5500, 10, 20, item=1)            # a range: kept
           + api_event(5500, 30, C.EVENT_FLAG, item=2)  # an Event (point) record
           + api_event(5500, 40, 40, item=3)            # zero length
           + api_event(10000, 10, 50, item=4)           # node level
           + api_event(5500, 60, 61, item=5))           # a range of one ns: kept
    api = C.decode_api_event(buf)
    assert C.api_ranges(api, 5500)["item_id"].tolist() == [1, 5]
    assert C.api_ranges(api, 10000)["item_id"].tolist() == [4]


def test_a_truncated_api_event_names_the_file():
    with pytest.raises(RecordError) as ei:
        C.decode_api_event(api_event(5500, 1, 2) + b"\x5a\x5a", "host/data/api_event.data.slice_0")
    assert ei.value.path == "host/data/api_event.data.slice_0" and ei.value.where == 40


def test_an_additional_record_with_a_bad_magic_names_its_offset():
    """The second 256-byte hccl_info record has magic 0x1234: error at byte 256."""
    good = struct.pack("<HHIIIQ", 0x5A5A, 5500, 0, 1, 232, 5).ljust(256, b"\0")
    bad = struct.pack("<HHIIIQ", 0x1234, 5500, 0, 1, 232, 5).ljust(256, b"\0")
    with pytest.raises(RecordError) as ei:
        C.decode_additional(good + bad, "hccl_info", "f")
    assert ei.value.where == 256 and "magic 0x1234" in ei.value.reason


def test_hwts_columns_are_exact_integers():
    """A syscnt above 2^53 (where a float64 can no longer hold every integer) comes back
    exactly, and ids / types are integers (printed 30092, not 30092.0)."""
    big = 2 ** 53 + 1
    r = C.decode_hwts(hwts(0, 30092, 519, big, task_type=3) + hwts(1, 30092, 519, big + 2))
    assert r["timestamp"].tolist() == [big, big + 2]
    assert int(r["timestamp"][1] - r["timestamp"][0]) == 2
    assert [str(x) for x in r["task_id"]] == ["30092", "30092"]
    assert [str(x) for x in r["task_type"]] == ["3", "0"]
    assert [str(x) for x in r["stream_id"]] == ["519", "519"]


def test_stream_task_decoding_takes_unsigned_64_bit_ids():
    """Raw ids given as uint16 / uint64 arrays decode as the plain ints do (§D.5, expand 0,
    neither bit 12 nor 13 set: stream = s % 2048, task = t)."""
    s, t = C.decode_stream_task(np.array([5], np.uint16), np.array([0x1234], np.uint64))
    assert (s.tolist(), t.tolist()) == ([5], [0x1234])


# ------------------------------------------------------------------ time (§D.6)

def _info(freq):
    return {"DeviceInfo": [{"hwts_frequency": freq}]}


def test_ticks_round_half_up_to_whole_ns():
    """3 MHz: 1 tick = 333.33 ns -> 333; 2 ticks = 666.67 ns -> 667; 3 ticks = 1000 ns."""
    clk = C.device_clock(_info("3"))
    assert clk.ticks_to_ns([1, 2, 3]).tolist() == [333, 667, 1000]


def test_ticks_at_a_fractional_frequency():
    """2.5 MHz: 1 tick = 400 ns; 3 ticks = 1200 ns."""
    assert C.device_clock(_info("2.5")).ticks_to_ns([1, 3]).tolist() == [400, 1200]


def test_ticks_given_as_int32_do_not_overflow():
    """3e6 ticks at 1000 MHz = 3e6 ns; 3e6 * 1000 does not fit int32."""
    clk = C.device_clock(_info("1000"))
    assert clk.ticks_to_ns(np.array([3_000_000], np.int32)).tolist() == [3_000_000]


def test_without_start_logs_times_are_device_ticks_and_no_offset():
    """Only info.json: no host start, no start_info: t = syscnt ticks at 50 MHz (20 ns), no
    offset term at all."""
    clk = C.device_clock(_info("50"))
    assert (clk.host_mono0_ns, clk.local_offset_ns, clk.dev_cntvct) == (0, 0, 0)
    assert clk.to_local_ns([100]).tolist() == [2000]


def test_missing_hwts_frequency_is_named():
    with pytest.raises(ValueError, match=r"DeviceInfo\[0\]\.hwts_frequency"):
        C.device_clock({"DeviceInfo": [{"id": 0}]})


def test_enum_code_just_past_the_names_is_its_number():
    """TRANSPORT_TYPES has 3 names (0..2): code 3 is unknown -> '3'; 65535 is 'not set'."""
    assert list(C.enum_names([0, 2, 3, 65535], C.TRANSPORT_TYPES)) == ["SDMA", "LOCAL", "3", None]


# ------------------------------------------------------------------ STARS logs (§D.3)

def stars(func, sqe, cnt, stream, task, ts):
    """A 64-byte stars_soc record: header bits 5..0 func type, 9..6 cnt, 15..10 SQE type."""
    header = func | (cnt << 6) | (sqe << 10)
    return struct.pack("<HHHHQ", header, C.STARS_MAGIC, stream, task, ts).ljust(64, b"\0")


def test_stars_header_fields():
    """Header 0x0C81 of the 2nd record = func 1 (ACSQ end) | cnt 2 << 6 | SQE type 3 << 10:
    0x0001 + 0x0080 + 0x0C00."""
    r = C.decode_stars_soc(stars(0, 0, 15, 5, 10, 1000) + stars(1, 3, 2, 5, 10, 1600))
    assert r["func_type"].tolist() == [0, 1]
    assert r["cnt"].tolist() == [15, 2]
    assert r["sqe_type"].tolist() == [0, 3]
    assert struct.unpack("<H", stars(1, 3, 2, 5, 10, 1600)[:2]) == (0x0C81,)


def test_a_truncated_stars_record_names_the_file_kind_and_offset():
    """Two whole records and 10 bytes of a third: error at byte 128, naming stars_soc."""
    buf = stars(0, 0, 1, 5, 10, 1000) * 2 + b"\0" * 10
    with pytest.raises(RecordError) as ei:
        C.decode_stars_soc(buf, "device_0/data/stars_soc.data.0.slice_0")
    assert ei.value.path == "device_0/data/stars_soc.data.0.slice_0" and ei.value.where == 128
    assert ei.value.reason == "truncated stars_soc record: 10 of 64 bytes"


# ------------------------------------------------------------------ host terms of the clock (§D.6)

def test_ticks_exactly_half_a_ns_round_up():
    """80 MHz: 1 tick = 12.5 ns -> 13 (half up); 3 ticks = 37.5 ns -> 38; 2 ticks = 25 ns."""
    assert C.device_clock(_info("80")).ticks_to_ns([1, 2, 3]).tolist() == [13, 25, 38]


def _host_clock(cpu, host):
    info = {"DeviceInfo": [{"hwts_frequency": "50"}], **cpu}
    return C.device_clock(info, {"cntvct": 1000}, host)


def test_host_counter_difference_at_one_mhz_counts():
    """CPU Frequency 1 (MHz): cntvct_diff 7 ticks = 7 * 1000 / 1 = 7000 ns added to the host's
    clock_monotonic_raw 5000: host_mono0 = 12000."""
    clk = _host_clock({"CPU": [{"Frequency": "1"}]},
                      {"clock_monotonic_raw": 5000, "cntvct_diff": 7})
    assert clk.host_mono0_ns == 12000 and clk.dev_cntvct == 1000


def test_host_counter_difference_without_cpu_frequency_is_left_out():
    """No CPU Frequency in info.json: the cntvct_diff ticks cannot be converted and are not
    added; host_mono0 = clock_monotonic_raw 5000."""
    clk = _host_clock({}, {"clock_monotonic_raw": 5000, "cntvct_diff": 7})
    assert clk.host_mono0_ns == 5000


def test_host_start_without_monotonic_clock_counts_from_zero():
    """host_start.log with cntvct_diff 3 but no clock_monotonic_raw: that term is 0, so
    host_mono0 = 3 ticks * 1000 / 100 MHz = 30 ns; syscnt 1100 = 100 ticks past the device's
    cntvct 1000 at 50 MHz = 2000 ns -> 30 + 2000."""
    clk = _host_clock({"CPU": [{"Frequency": "100"}]}, {"cntvct_diff": 3})
    assert clk.host_mono0_ns == 30
    assert clk.to_local_ns([1100]).tolist() == [2030]


# ------------------------------------------------------------------ layouts, errors, small parsers

def test_record_layout_reads_each_field_at_its_offset():
    """_dt builds every record layout of §D (called at import, so test it directly): an 8-byte
    record with a u16 at byte 2 and a u32 at byte 4; bytes 2-3 = 34 12 -> 0x1234, bytes 4-7 =
    78 56 34 12 -> 0x12345678 (little-endian), bytes 0-1 belong to no field."""
    dt = C._dt(8, [("a", "<u2", 2), ("b", "<u4", 4)])
    assert dt.itemsize == 8 and dt.names == ("a", "b")
    rec = np.frombuffer(b"\xff\xff\x34\x12\x78\x56\x34\x12", dtype=dt)
    assert (int(rec["a"][0]), int(rec["b"][0])) == (0x1234, 0x12345678)


def test_api_event_errors_name_the_record_kind():
    """One whole 40-byte record and 2 bytes of a second: 'truncated api_event record: 2 of 40
    bytes'. A second record with magic 0x1234: 'unknown api_event record (magic 0x1234,
    expected 0x5A5A)' at byte 40."""
    with pytest.raises(RecordError) as ei:
        C.decode_api_event(api_event(5500, 1, 2) + b"\x5a\x5a", "f")
    assert ei.value.reason == "truncated api_event record: 2 of 40 bytes"
    with pytest.raises(RecordError) as ei:
        C.decode_api_event(api_event(5500, 1, 2) + api_event(5500, 3, 4, magic=0x1234), "f")
    assert ei.value.where == 40
    assert ei.value.reason == "unknown api_event record (magic 0x1234, expected 0x5A5A)"


def test_expanded_stream_ids_without_bit_15_are_taken_as_they_are():
    """§D.5, expand 1: bit 15 of the raw stream id clear (s = 5) and no SQE type given: stream =
    s & 0x7FFF = 5, task = t = 7. With bit 15 set (s = 0x8005, t = 7): stream = t & 0x7FFF = 7,
    task = (t & 0x8000) | (s & 0x7FFF) = 0 | 5 = 5."""
    stream, task = C.decode_stream_task([5, 0x8005], [7, 7], expand=1)
    assert (stream.tolist(), task.tolist()) == ([5, 7], [7, 5])


def test_start_log_value_with_colons_is_not_a_number():
    """'key: value' split at the first ':': 'collected: 2024-05-01 10:20:30' has the value
    ' 2024-05-01 10:20:30', not an integer, so it is left out; the section header has no ':'."""
    text = "[Host]\nclock_monotonic_raw: 5000\ncollected: 2024-05-01 10:20:30\ncntvct: 42\n"
    assert C.parse_start_log(text) == {"clock_monotonic_raw": 5000, "cntvct": 42}


def test_type_info_line_without_colon_is_ignored():
    """'<level>_<type>:<string>' lines only: '5500_3' has no ':' and names nothing."""
    assert C.parse_type_info_dic("5000_1:launch\n5500_3\n") == {(5000, 1): "launch"}
