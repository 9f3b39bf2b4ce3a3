"""The column-wise communication.json reader and the vectorised ms -> ns conversion.

Expected values are hand calculations written out below, the real files' values read with the
json module and converted with Decimal, and the per-value definition
:func:`ascendprof.model.units.ms_to_ns` (one IEEE product by 10^6, round half to even) for the
vectorised form.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ascendprof.model import schemas as S
from ascendprof.model.errors import InputError
from ascendprof.readers.communication import read_communication
from ascendprof.model.units import ms_list_to_ns, ms_to_ns


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


def test_text_where_a_number_belongs_leaves_the_op_out(tmp_path):
    """A time that is not a number (text, a bool) cannot be analysed: the op is left out and
    reported (issue #16); an absent field is null; Idle (derived) is not required."""
    from ascendprof.model.problems import Problems

    path = _write(tmp_path, {"step1": {"p2p": {
        "hcom_send__3@g": {"Communication Time Info": {
            "Elapse Time(ms)": "3", "Wait Time(ms)": True, "Idle Time(ms)": 0.001}},
        "hcom_send__4@g": {"Communication Time Info": {
            "Elapse Time(ms)": 2, "Idle Time(ms)": 0.001}}}}})
    probs = Problems()
    ops = read_communication(path, 0, probs)[S.COMM_OPS].to_pylist()
    assert [(op["op_name"], op["elapse_ns"], op["wait_ns"], op["idle_ns"]) for op in ops] == [
        ("hcom_send__4", 2_000_000, None, 1_000)]
    (p,) = list(probs)
    assert "1 op(s) left out" in p.reason and 'Elapse Time(ms) = "3"' in p.reason


def test_time_beyond_int64_names_file_and_value(tmp_path):
    path = _write(tmp_path, {"step1": {"p2p": {"hcom_send__3@g": {"Communication Time Info": {
        "Elapse Time(ms)": 1.0, "Idle Time(ms)": 9.3e12}}}}})
    with pytest.raises(InputError, match=r"communication\.json.*out of range.*9300000000000"):
        read_communication(path, 0)


# --- the typed way (Arrow's converter) against the per-value rules ---------------------------

from ascendprof.readers.communication import columns, layout  # noqa: E402
from ascendprof.readers.communication import per_value as C  # noqa: E402
from conftest import FIXTURES  # noqa: E402


def _both(data, path):
    """(typed tables or the exception raised, per-value tables or the exception raised)."""
    out = []
    for typed in (True, False):
        try:
            out.append(C.tables_from_json(data, path, 5, None, typed))
        except Exception as e:  # noqa: BLE001 - compared below
            out.append(e)
    return out


def _assert_same(a, b):
    if isinstance(b, Exception):
        assert type(a) is type(b) and str(a) == str(b)
        return
    assert not isinstance(a, Exception), a
    for name in b:
        assert a[name].equals(b[name]), name


def test_typed_way_on_real_files():
    files = sorted(FIXTURES.glob("qwen3-4rank-pp2dp2/*/ASCEND_PROFILER_OUTPUT/communication.json"))
    assert len(files) == 4
    for f in files:
        raw = f.read_bytes()
        assert b"true" not in raw and b"false" not in raw
        data = json.loads(raw)
        o_info = [op["Communication Time Info"] for _, _, _, op in layout.iter_ops(data, f, None, 0)]
        o_bw = [op.get("Communication Bandwidth Info") for _, _, _, op in
                layout.iter_ops(data, f, None, 0)]
        assert C._typed_columns(o_info, o_bw) is not None  # real files take the typed way
        typed, per_value = _both(data, f)
        _assert_same(typed, per_value)
        assert typed[S.COMM_SIZE_DIST].num_rows > 0  # the size rows are exercised
        _assert_as_in_the_file(typed, data)


def _ns(ms) -> int:
    """ms in the JSON -> int ns: the shortest decimal text of the float, times 10^6, rounded
    half to even (Decimal arithmetic, not the reader's float product)."""
    from decimal import ROUND_HALF_EVEN, Decimal

    return int((Decimal(repr(ms)) * 1_000_000).to_integral_value(ROUND_HALF_EVEN))


def _assert_as_in_the_file(tables, data):
    """Every op, transport and packet size of the parsed JSON, field by field, in file order
    ('Total Op Info' left out)."""
    ops, bw, dist = [], [], []
    for step_key, kinds in data.items():
        for kind, entries in kinds.items():
            for key, info in entries.items():
                if key.startswith("Total Op Info"):
                    continue
                op, group = key.split("@", 1)
                t = info["Communication Time Info"]
                ops.append((int(step_key[4:]), step_key, kind, op, group,
                            _ns(t["Elapse Time(ms)"]), _ns(t["Transit Time(ms)"]),
                            _ns(t["Wait Time(ms)"]), _ns(t["Synchronization Time(ms)"]),
                            _ns(t["Idle Time(ms)"]), t["Wait Time Ratio"],
                            t["Synchronization Time Ratio"]))
                for tr, v in info["Communication Bandwidth Info"].items():
                    bw.append((op, tr, v["Transit Size(MB)"], _ns(v["Transit Time(ms)"]),
                               v["Bandwidth(GB/s)"], v["Large Packet Ratio"]))
                    for size, (count, dur) in v["Size Distribution"].items():
                        dist.append((op, tr, size, count, _ns(dur)))
    cols = lambda t, names: list(zip(*(t[n].to_pylist() for n in names)))  # noqa: E731
    assert cols(tables[S.COMM_OPS], ["step", "step_key", "kind", "op_name", "group", "elapse_ns",
                                     "transit_ns", "wait_ns", "sync_ns", "idle_ns",
                                     "wait_ratio", "sync_ratio"]) == ops
    assert cols(tables[S.COMM_BANDWIDTH], ["op_name", "transport", "size_mb", "transit_ns",
                                           "bandwidth_gbps", "large_packet_ratio"]) == bw
    assert cols(tables[S.COMM_SIZE_DIST], ["op_name", "transport", "packet_size_mb", "count",
                                           "dur_ns"]) == dist


def _hand_case(extra_pair):
    dist = {"4.0": [2.9, 0.125], "8.0": [1], "9.0": None, "16.0": extra_pair}
    return {"step2": {"collective": {"hcom_allGather__1@g": {
        "Communication Time Info": {"Elapse Time(ms)": 0.5, "Wait Time Ratio": 1},
        "Communication Bandwidth Info": {
            "HCCS": {"Transit Time(ms)": 0.25, "Bandwidth(GB/s)": 3, "Size Distribution": dist},
            "SIO": None,
            "RDMA": {"Size Distribution": {}}}}}}}


@pytest.mark.parametrize("extra_pair, typed_way", [
    ([7, 0.5, 99], True),  # numbers past the pair are ignored
    ([7, 0.5, "text"], False)])  # text where the converter wants a number: per-value way
def test_typed_way_by_hand(tmp_path, extra_pair, typed_way):
    # a transport whose value is null adds no row; a size entry needs two numbers (the 1-item
    # one and the null one are dropped); counts truncate toward zero as int() does: 2.9 -> 2
    data = _hand_case(extra_pair)
    info = data["step2"]["collective"]["hcom_allGather__1@g"]
    got = C._typed_columns([info["Communication Time Info"]],
                           [info["Communication Bandwidth Info"]])
    assert (got is not None) == typed_way
    typed, per_value = _both(data, tmp_path / "communication.json")
    _assert_same(typed, per_value)
    bw = typed[S.COMM_BANDWIDTH].to_pylist()
    assert [(r["transport"], r["transit_ns"], r["bandwidth_gbps"]) for r in bw] == [
        ("HCCS", 250_000, 3.0), ("RDMA", None, None)]
    sd = typed[S.COMM_SIZE_DIST].to_pylist()
    assert [(r["transport"], r["packet_size_mb"], r["count"], r["dur_ns"]) for r in sd] == [
        ("HCCS", "4.0", 2, 125_000), ("HCCS", "16.0", 7, 500_000)]


_json_scalar = st.one_of(st.none(), st.integers(-2**70, 2**70), st.text(max_size=3),
                         st.floats(-1e16, 1e16, allow_nan=False),
                         st.sampled_from([0, 0.0, 1.5, -2.25, 2**53, 2**53 + 1, 2**63]))
_json_value = st.recursive(_json_scalar, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=3), inner, max_size=3)),
    max_leaves=6)
_time_keys = st.sampled_from([k for _, k in columns.OP_MS + columns.OP_RATIOS] + ["Start Timestamp(us)"])
_bw_keys = st.sampled_from([k for _, k in (columns.BW_MS,) + columns.BW_FLOATS])
_pair = st.one_of(st.lists(st.one_of(st.none(), st.integers(-2**60, 2**60),
                                     st.floats(-1e6, 1e6, allow_nan=False)), max_size=3),
                  _json_value)
_dist = st.one_of(st.dictionaries(st.sampled_from(["0.5", "4.0", "64"]), _pair, max_size=3),
                  _json_value)
_transport = st.one_of(
    st.fixed_dictionaries({}, optional={"Size Distribution": _dist}).flatmap(
        lambda d: st.dictionaries(_bw_keys, st.one_of(_json_scalar, _json_value),
                                  max_size=4).map(lambda f: {**f, **d})),
    _json_value)
_op = st.fixed_dictionaries({}, optional={
    "Communication Time Info": st.one_of(
        st.dictionaries(_time_keys, st.one_of(st.floats(-1e6, 1e6, allow_nan=False),
                                              st.integers(-10**6, 10**6), _json_scalar),
                        max_size=8), _json_value),
    "Communication Bandwidth Info": st.one_of(
        st.dictionaries(st.sampled_from(["RDMA", "HCCS", "SDMA", "SIO"]), _transport,
                        max_size=4), _json_value)})


@settings(max_examples=300, deadline=None)
@given(st.lists(_op, max_size=4))
def test_typed_way_matches_per_value_rules(ops):
    # any shape JSON can take (no true/false: those files go the per-value way by contract):
    # the typed way gives the same tables, or falls back and so raises the same error
    data = {"step1": {"collective": {f"hcom_op__{i}@g{i % 2}": op for i, op in enumerate(ops)}}}
    typed, per_value = _both(json.loads(json.dumps(data)), C.Path("communication.json"))
    _assert_same(typed, per_value)


@pytest.mark.parametrize("raw", [b"", b"t", b"true", b"false", b"tru", b"fals", b"rue", b"alse",
                                 b"[true]", b"x false", b"falsetrue", b"trUe", b"t r u e",
                                 b"{\"a\": fals e}", b"truefals", b"xxtrue", b"xfalse"])
def test_true_or_false_scan_edges(raw):
    assert columns.has_true_or_false(raw) == (b"true" in raw or b"false" in raw)


@settings(max_examples=500, deadline=None)
@given(st.lists(st.sampled_from([b"t", b"r", b"u", b"e", b"f", b"a", b"l", b"s", b" ", b"true",
                                 b"false", b"tr", b"fal", b"\xff"]), max_size=30))
def test_true_or_false_scan_is_substring_search(parts):
    # the reference is Python's own substring search, over text made of the needles' letters
    raw = b"".join(parts)
    assert columns.has_true_or_false(raw) == (b"true" in raw or b"false" in raw)


def test_start_timestamp_beyond_int64_names_file_and_value(tmp_path):
    # 1e16 us = 1e19 ns > 2^63 - 1: the vectorised conversion fails, the value-by-value way
    # names the value
    path = _write(tmp_path, {"step1": {"p2p": {"hcom_send__3@g": {"Communication Time Info": {
        "Elapse Time(ms)": 1.0, "Start Timestamp(us)": 1e16}}}}})
    with pytest.raises(InputError, match=r"communication\.json.*out of range.*1e\+?16"):
        read_communication(path, 0)


@pytest.mark.parametrize("rank", [2**31, -2**31 - 1])
def test_rank_beyond_int32_names_the_file(tmp_path, rank):
    path = _write(tmp_path, {"step1": {"p2p": {"hcom_send__3@g": {"Communication Time Info": {
        "Elapse Time(ms)": 1.0}}}}})
    with pytest.raises(InputError, match=r"communication\.json"):
        read_communication(path, rank)


def test_start_timestamp_beyond_int64_streamed_names_file_and_value(tmp_path):
    from ascendprof.readers.communication.fast import iter_tables

    path = _write(tmp_path, {"step1": {"p2p": {"hcom_send__3@g": {"Communication Time Info": {
        "Elapse Time(ms)": 1.0, "Start Timestamp(us)": 1e16}}}}})
    with pytest.raises(InputError, match=r"communication\.json.*out of range.*1e\+?16"):
        list(iter_tables(path, 0, None, whole_file_bytes=0))  # read in batches


def test_streamed_per_value_batch_keeps_opinfo_verbatim(tmp_path):
    """A batch the typed decoders do not take (a JSON true in a Bandwidth Info) read in batches
    by the per-value rules: opinfo_json is the op's own text."""
    from ascendprof.readers.communication.fast import iter_tables

    op = {"Communication Time Info": {"Elapse Time(ms)": 1.5, "Transit Time(ms)": 0.5,
                                      "Wait Time(ms)": 0.25, "Synchronization Time(ms)": 0.125},
          "Communication Bandwidth Info": {"HCCS": {"Transit Size(MB)": 4,
                                                    "Large Packet Ratio": True}}}
    path = _write(tmp_path, {"step1": {"collective": {"hcom_allReduce__9@g": op}}})
    ops = [r for part in iter_tables(path, 0, None, whole_file_bytes=0)
           for r in part[S.COMM_OPS].to_pylist()]
    assert [(r["op_name"], r["group"], r["elapse_ns"]) for r in ops] == [
        ("hcom_allReduce__9", "g", 1_500_000)]
    assert json.loads(ops[0]["opinfo_json"]) == op


def test_nan_literal_in_broken_json_is_invalid_json(tmp_path):
    # valid but for NaN would be read; broken besides, it is the JSON error naming the file
    path = tmp_path / "communication.json"
    raw = (b'{"step1": {"p2p": {"hcom_send__3@g": {"Communication Time Info": '
           b'{"Elapse Time(ms)": NaN}}}')
    path.write_bytes(raw)
    with pytest.raises(InputError, match=r"communication\.json.*invalid JSON") as e:
        read_communication(path, 0)
    assert e.value.where == raw.index(b"NaN")  # the first thing JSON does not allow
