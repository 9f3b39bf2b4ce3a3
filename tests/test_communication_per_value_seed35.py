"""communication.json read by the tolerant reader (ascendprof.readers.communication.per_value)
through read_communication (the user's path) and read_communication_per_value:

- on the per-value way (a file holding JSON true/false goes that way), every op's Bandwidth
  Info rows are kept, for ops after one without Bandwidth Info and after one whose transport
  entries are all objects (not only the first such op's rows);
- an integer Bandwidth Info value that a float64 column cannot hold exactly (2^53 + 1, beyond
  the 53-bit mantissa) makes the file's InputError naming the file, the column and the value,
  as the per-value rule of the column says (not a bare pyarrow error from building the table).

Expected values are written out by hand from the JSON each test writes.
"""

from __future__ import annotations

import json

import pytest

from ascendprof.model import schemas as S
from ascendprof.model.errors import InputError
from ascendprof.model.problems import Problems
from test_communication_per_value_seed34 import READERS, _transport, _write


def _op(bandwidth: dict | None, start_us: float) -> dict:
    op = {"Communication Time Info": {
        "Start Timestamp(us)": start_us, "Elapse Time(ms)": 0.5, "Transit Time(ms)": 0.25,
        "Wait Time(ms)": 0.1, "Synchronization Time(ms)": 0.05, "Idle Time(ms)": 0.1,
        "Wait Time Ratio": 0.2, "Synchronization Time Ratio": 0.3}}
    if bandwidth is not None:
        op["Communication Bandwidth Info"] = bandwidth
    return op


@pytest.mark.parametrize("read", READERS)
def test_every_ops_bandwidth_rows_are_kept_on_the_per_value_way(tmp_path, read):
    # op a: no Bandwidth Info; op b: one transport; op c: two transports, one of them with
    # a bandwidth of true (which sends the file the per-value way, and is left out as null)
    ops = {"a@g": _op(None, 1000.0),
           "b@g": _op({"HCCS": _transport(**{"Transit Size(MB)": 2.0})}, 2000.0),
           "c@g": _op({"HCCS": _transport(**{"Transit Size(MB)": 3.0}),
                       "RDMA": _transport(**{"Transit Size(MB)": 5.0,
                                             "Bandwidth(GB/s)": True})}, 3000.0)}
    path = tmp_path / "communication.json"
    path.write_text(json.dumps({"step1": {"collective": ops}}))
    assert b"true" in path.read_bytes()
    tables = read(path, 3, Problems())
    assert tables[S.COMM_OPS].column("op_name").to_pylist() == ["a", "b", "c"]
    rows = [(r["op_name"], r["transport"], r["size_mb"], r["bandwidth_gbps"])
            for r in tables[S.COMM_BANDWIDTH].to_pylist()]
    assert rows == [("b", "HCCS", 2.0, 4.0), ("c", "HCCS", 3.0, 4.0), ("c", "RDMA", 5.0, None)]
    # each transport's one Size Distribution entry {"1.0": [1, 0.25 ms]}
    sizes = [(r["op_name"], r["transport"], r["packet_size_mb"], r["count"], r["dur_ns"])
             for r in tables[S.COMM_SIZE_DIST].to_pylist()]
    assert sizes == [("b", "HCCS", "1.0", 1, 250_000), ("c", "HCCS", "1.0", 1, 250_000),
                     ("c", "RDMA", "1.0", 1, 250_000)]


@pytest.mark.parametrize("read", READERS)
@pytest.mark.parametrize("key, column", [("Transit Size(MB)", "size_mb"),
                                         ("Bandwidth(GB/s)", "bandwidth_gbps"),
                                         ("Large Packet Ratio", "large_packet_ratio")])
@pytest.mark.parametrize("value", [2**53 + 1, -(2**53) - 1])
def test_a_bandwidth_integer_not_exact_as_a_double_is_the_files_error(tmp_path, read, key,
                                                                      column, value):
    # 2^53 + 1 = 9007199254740993: a double has 53 bits of mantissa, so it would be rounded
    assert float(value) != value
    path = _write(tmp_path, _transport(**{key: value}))
    with pytest.raises(InputError) as got:
        read(path, 3, Problems())
    assert got.value.path == str(path)
    assert got.value.reason == f"column {column!r}: {value} is not a valid double value"
