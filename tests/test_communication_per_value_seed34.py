"""communication.json values that the tolerant reader
(ascendprof.readers.communication.per_value) handles value by value, read through
read_communication (the user's path) and read_communication_per_value:

- a Bandwidth Info field that is JSON true is left out (null), with no number made up from it,
  even though Arrow's converter would take it as 1.0 (such a file goes the per-value way);
- the problem for a Bandwidth Info value that is not a number quotes at most 40 characters of
  its JSON text;
- a Bandwidth Info float beyond int64 (2^63, which Arrow will not put in a float64 column) or a
  packet count beyond int64 makes the file's InputError, naming the file, the column and the
  value (not a bare pyarrow or lookup error).

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


def _transport(**fields) -> dict:
    t = {"Transit Size(MB)": 1.0, "Transit Time(ms)": 0.25, "Bandwidth(GB/s)": 4.0,
         "Large Packet Ratio": 0.0, "Size Distribution": {"1.0": [1, 0.25]}}
    t.update(fields)
    return t


def _write(tmp_path, transport: dict):
    """One op, hcom_a__1 of group g in step1, whose only transport (HCCS) is ``transport``."""
    op = {"Communication Time Info": {
              "Start Timestamp(us)": 1000.0, "Elapse Time(ms)": 0.5, "Transit Time(ms)": 0.25,
              "Wait Time(ms)": 0.1, "Synchronization Time(ms)": 0.05, "Idle Time(ms)": 0.1,
              "Wait Time Ratio": 0.2, "Synchronization Time Ratio": 0.3},
          "Communication Bandwidth Info": {"HCCS": transport}}
    path = tmp_path / "communication.json"
    path.write_text(json.dumps({"step1": {"collective": {"hcom_a__1@g": op}}}))
    return path


@pytest.mark.parametrize("read", READERS)
def test_a_true_bandwidth_is_left_out_not_read_as_one(tmp_path, read):
    path = _write(tmp_path, _transport(**{"Bandwidth(GB/s)": True}))
    problems = Problems()
    tables = read(path, 3, problems)
    (row,) = tables[S.COMM_BANDWIDTH].to_pylist()
    assert row["transport"] == "HCCS"
    assert row["bandwidth_gbps"] is None  # true is not a number here: not 1.0
    assert row["size_mb"] == 1.0  # the other fields of the entry are kept
    assert row["transit_ns"] == 250_000  # 0.25 ms
    (p,) = [p for p in problems.items if "Bandwidth(GB/s)" in p.reason]
    assert p.reason == ("1 Bandwidth(GB/s) value(s) that are not a number left out "
                        "(e.g. true in hcom_a__1@g, HCCS)")
    assert p.where == "step1, column Bandwidth(GB/s)"
    assert p.severity == "skipped"


@pytest.mark.parametrize("read", READERS)
def test_a_long_text_value_is_quoted_to_40_characters(tmp_path, read):
    path = _write(tmp_path, _transport(**{"Bandwidth(GB/s)": "x" * 60}))
    problems = Problems()
    read(path, 3, problems)
    (p,) = [p for p in problems.items if "Bandwidth(GB/s)" in p.reason]
    # its JSON text is '"' + 60 x + '"'; the first 40 characters: the quote and 39 x
    quoted = '"' + "x" * 39
    assert p.reason == ("1 Bandwidth(GB/s) value(s) that are not a number left out "
                        f"(e.g. {quoted} in hcom_a__1@g, HCCS)")


@pytest.mark.parametrize("read", READERS)
def test_a_bandwidth_beyond_int64_is_the_files_error_naming_the_column(tmp_path, read):
    path = _write(tmp_path, _transport(**{"Bandwidth(GB/s)": 2**63}))
    with pytest.raises(InputError) as got:
        read(path, 3, Problems())
    assert got.value.path == str(path)
    assert got.value.reason == ("column 'bandwidth_gbps': 9223372036854775808 is not a valid "
                                "double value")


@pytest.mark.parametrize("read", READERS)
@pytest.mark.parametrize("count, written", [(2**63, "9223372036854775808"),
                                            # the count is int() of the double: 1e30 as a double, written out exactly
                                            (1e30, str(int(1e30)))])
def test_a_packet_count_beyond_int64_is_the_files_error_naming_the_column(tmp_path, read,
                                                                          count, written):
    assert int(written) >= 2**63
    path = _write(tmp_path, _transport(**{"Size Distribution": {"1.0": [count, 0.25]}}))
    with pytest.raises(InputError) as got:
        read(path, 3, Problems())
    assert got.value.path == str(path)
    assert got.value.reason == f"column 'count': {written} is not a valid int64 value"


@pytest.mark.parametrize("read", READERS)
@pytest.mark.parametrize("literal", ["NaN", "Infinity"])
def test_a_packet_count_that_is_not_a_number_is_left_out(tmp_path, read, literal):
    """A NaN / Infinity literal as a packet count (Python's json module writes one for a float
    count that is not a number): the reader takes such files and leaves out the values holding
    them, so the count is null, the row and the rest of the file kept; not a count of -2^63
    (NaN cast to int64) nor an OverflowError (int() of infinity)."""
    path = _write(tmp_path, _transport(**{"Size Distribution": {"1.0": [float(literal), 0.25],
                                                                 "4.0": [3, 0.5]}}))
    assert f"[{literal}, 0.25]".encode() in path.read_bytes()
    problems = Problems()
    tables = read(path, 3, problems)
    rows = [(r["transport"], r["packet_size_mb"], r["count"], r["dur_ns"])
            for r in tables[S.COMM_SIZE_DIST].to_pylist()]
    assert rows == [("HCCS", "1.0", None, 250_000), ("HCCS", "4.0", 3, 500_000)]
    assert len(tables[S.COMM_OPS]) == 1
    assert any("NaN or Infinity literal" in p.reason for p in problems.items)
