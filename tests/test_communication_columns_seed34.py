"""Columns shared by every way of reading communication.json
(ascendprof.readers.communication.columns), checked through read_communication (the user's
path) and read_communication_per_value on small communication.json files:

- an integer Start Timestamp(us) is converted through its own decimal text, so one beyond
  2^53 (where a float64 has no exact value) keeps its last digit: 9007199254740993 us is
  9007199254740993000 ns, not the float's 9007199254740992000;
- a rank outside int32 is the file's InputError naming the column 'rank' and the value, also
  for a file with no op at all (where no rank value is ever written to a row);
- a packet count past 2^53 is kept exact; a Size Distribution pair without its duration adds no
  size row; a transport whose value is null adds no bandwidth or size row.

Expected values are written out by hand from the JSON each test writes.
"""

from __future__ import annotations

import json

import pytest

from ascendprof.model import schemas as S
from ascendprof.model.errors import InputError
from ascendprof.model.problems import Problems
from ascendprof.readers import communication as C

READERS = [C.read_communication, C.read_communication_per_value]


def _op(start) -> dict:
    return {"Communication Time Info": {
                "Start Timestamp(us)": start, "Elapse Time(ms)": 0.5, "Transit Time(ms)": 0.25,
                "Wait Time(ms)": 0.1, "Synchronization Time(ms)": 0.05, "Idle Time(ms)": 0.1,
                "Wait Time Ratio": 0.2, "Synchronization Time Ratio": 0.3},
            "Communication Bandwidth Info": {"HCCS": {
                "Transit Size(MB)": 1.0, "Transit Time(ms)": 0.25, "Bandwidth(GB/s)": 4.0,
                "Large Packet Ratio": 0.0, "Size Distribution": {"1.0": [1, 0.25]}}}}


def _write(tmp_path, doc: dict):
    path = tmp_path / "communication.json"
    path.write_text(json.dumps(doc))
    return path


@pytest.mark.parametrize("read", READERS)
def test_an_integer_start_beyond_2_53_keeps_its_last_digit(tmp_path, read):
    # 2^53 = 9007199254740992; 2^53 + 1 has no float64: float() would round it to 2^53
    start_us = 9007199254740993
    path = _write(tmp_path, {"step1": {"collective": {"hcom_a__1@g": _op(start_us)}}})
    (row,) = read(path, 3, Problems())[S.COMM_OPS].to_pylist()
    # us * 1000 exactly: 9007199254740993 us = 9_007_199_254_740_993_000 ns
    assert row["start_ns"] == 9_007_199_254_740_993_000
    assert row["rank"] == 3


@pytest.mark.parametrize("read", READERS)
@pytest.mark.parametrize("rank", [2**31, -2**31 - 1])  # one past int32 max / min
@pytest.mark.parametrize("with_op", [True, False], ids=["one-op", "no-op"])
def test_a_rank_outside_int32_is_the_files_error_naming_the_rank(tmp_path, read, rank, with_op):
    doc = {"step1": {"collective": {"hcom_a__1@g": _op(1000.0)}}} if with_op else {"step1": {}}
    path = _write(tmp_path, doc)
    with pytest.raises(InputError) as e:
        read(path, rank, Problems())
    msg = str(e.value)
    assert str(path) in msg
    assert f"column 'rank': {rank} is not a valid int32 value" in msg


# -- the same gaps at other places: the size distribution and bandwidth rows of typed_columns_of

def _bw_op(bandwidth: dict) -> dict:
    op = _op(1000.0)
    op["Communication Bandwidth Info"] = bandwidth
    return op


def _transport(dist: dict) -> dict:
    return {"Transit Size(MB)": 1.0, "Transit Time(ms)": 0.25, "Bandwidth(GB/s)": 4.0,
            "Large Packet Ratio": 0.0, "Size Distribution": dist}


def _read(tmp_path, read, bandwidth: dict):
    path = _write(tmp_path, {"step1": {"collective": {"hcom_a__1@g": _bw_op(bandwidth)}}})
    return read(path, 0, Problems())


@pytest.mark.parametrize("read", READERS)
def test_a_packet_count_past_2_53_is_kept_exact(tmp_path, read):
    # 2^53 + 1 = 9007199254740993 is not a float64: the count must not go through one
    tables = _read(tmp_path, read, {"HCCS": _transport({"1.0": [2**53 + 1, 0.25]})})
    (row,) = tables[S.COMM_SIZE_DIST].to_pylist()
    assert (row["transport"], row["packet_size_mb"], row["count"], row["dur_ns"]) == \
        ("HCCS", "1.0", 9007199254740993, 250_000)  # 0.25 ms


@pytest.mark.parametrize("read", READERS)
def test_a_size_pair_without_its_duration_adds_no_row(tmp_path, read):
    # "1.0": [3] has a count but no duration: only the full pair "2.0": [4, 0.5] is a row
    tables = _read(tmp_path, read, {"HCCS": _transport({"1.0": [3], "2.0": [4, 0.5]})})
    rows = [(r["transport"], r["packet_size_mb"], r["count"], r["dur_ns"])
            for r in tables[S.COMM_SIZE_DIST].to_pylist()]
    assert rows == [("HCCS", "2.0", 4, 500_000)]  # 0.5 ms
    assert [r["transport"] for r in tables[S.COMM_BANDWIDTH].to_pylist()] == ["HCCS"]


@pytest.mark.parametrize("read", READERS)
def test_a_transport_whose_value_is_null_adds_no_row(tmp_path, read):
    tables = _read(tmp_path, read, {"HCCS": None, "RDMA": _transport({"2.0": [4, 0.5]})})
    (bw,) = tables[S.COMM_BANDWIDTH].to_pylist()
    assert (bw["transport"], bw["transit_ns"], bw["size_mb"], bw["bandwidth_gbps"]) == \
        ("RDMA", 250_000, 1.0, 4.0)
    rows = [(r["transport"], r["packet_size_mb"], r["count"], r["dur_ns"])
            for r in tables[S.COMM_SIZE_DIST].to_pylist()]
    assert rows == [("RDMA", "2.0", 4, 500_000)]
