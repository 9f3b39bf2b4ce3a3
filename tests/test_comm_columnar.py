"""The column-wise communication.json reader and the vectorised ms -> ns conversion.

Expected values are hand calculations written out below, and the per-value definition
:func:`ascendprof.units.ms_to_ns` (one IEEE product by 10^6, round half to even) for the
vectorised form.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ascendprof import schemas as S
from ascendprof.errors import InputError
from ascendprof.readers.communication import read_communication
from ascendprof.units import ms_list_to_ns, ms_to_ns


def test_ms_list_by_hand():
    # 27.215284 ms = 27 215 284 ns; 2 ms (an int) = 2 000 000 ns; missing stays missing;
    # 0.25e-6 ms = 0.25 ns -> 0; -0.75e-6 ms -> -1 (nearest)
    got = ms_list_to_ns([27.215284, 2, None, 0.25e-6, -0.75e-6]).to_pylist()
    assert got == [27_215_284, 2_000_000, None, 0, -1]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(st.none(), st.integers(-10**9, 10**9),
                          st.floats(-9.2e12, 9.2e12, allow_nan=False))))
def test_ms_list_matches_per_value(values):
    assert ms_list_to_ns(values).to_pylist() == [ms_to_ns(v) for v in values]


@pytest.mark.parametrize("bad, message", [
    ([1.0, 9.3e12], "value out of range for int64 nanoseconds: 9300000000000.0"),
    ([1e300], "value out of range for int64 nanoseconds: 1e+300"),
    ([float("inf")], "not a finite number: inf")])
def test_ms_list_errors_name_the_value(bad, message):
    with pytest.raises(ValueError, match=message.replace("+", r"\+")):
        ms_list_to_ns(bad)


def _write(tmp_path, obj):
    p = tmp_path / "communication.json"
    p.write_text(json.dumps(obj))
    return p


def test_rows_follow_their_op(tmp_path):
    # Two ops, two bandwidth rows: both rows belong to the first op (the second has no
    # bandwidth info), so a row count equal to the op count must not pair row i with op i.
    path = _write(tmp_path, {"step7": {"collective": {
        "hcom_allReduce__1@g1": {
            "Communication Time Info": {"Elapse Time(ms)": 1.5, "Start Timestamp(us)": 10.25},
            "Communication Bandwidth Info": {
                "RDMA": {"Transit Time(ms)": 0.5, "Size Distribution": {"0.5": [2, 0.125]}},
                "SDMA": {"Transit Time(ms)": 0.25}}},
        "hcom_broadcast__2@g2": {"Communication Time Info": {"Elapse Time(ms)": 2}}}}})
    t = read_communication(path, 3)
    ops = t[S.COMM_OPS].to_pylist()
    assert [(r["op_name"], r["group"], r["elapse_ns"], r["start_ns"], r["step"]) for r in ops] \
        == [("hcom_allReduce__1", "g1", 1_500_000, 10_250, 7),
            ("hcom_broadcast__2", "g2", 2_000_000, None, 7)]
    bw = t[S.COMM_BANDWIDTH].to_pylist()
    assert [(r["op_name"], r["group"], r["transport"], r["transit_ns"], r["rank"]) for r in bw] \
        == [("hcom_allReduce__1", "g1", "RDMA", 500_000, 3),
            ("hcom_allReduce__1", "g1", "SDMA", 250_000, 3)]
    sd = t[S.COMM_SIZE_DIST].to_pylist()
    assert [(r["op_name"], r["packet_size_mb"], r["count"], r["dur_ns"]) for r in sd] \
        == [("hcom_allReduce__1", "0.5", 2, 125_000)]


def test_text_where_a_number_belongs_is_missing(tmp_path):
    path = _write(tmp_path, {"step1": {"p2p": {"hcom_send__3@g": {"Communication Time Info": {
        "Elapse Time(ms)": "3", "Wait Time(ms)": True, "Idle Time(ms)": 0.001}}}}})
    op = read_communication(path, 0)[S.COMM_OPS].to_pylist()[0]
    assert (op["elapse_ns"], op["wait_ns"], op["idle_ns"]) == (None, None, 1_000)


def test_time_beyond_int64_names_file_and_value(tmp_path):
    path = _write(tmp_path, {"step1": {"p2p": {"hcom_send__3@g": {"Communication Time Info": {
        "Elapse Time(ms)": 1.0, "Idle Time(ms)": 9.3e12}}}}})
    with pytest.raises(InputError, match=r"communication\.json.*out of range.*9300000000000"):
        read_communication(path, 0)
