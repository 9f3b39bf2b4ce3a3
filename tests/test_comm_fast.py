"""The fast communication.json reader (msgspec) and its streaming form (block scanner) give
the tables, problems and errors of the per-value reader.

Oracle: :func:`ascendprof.readers.communication.read_communication_per_value` (orjson and the
per-value rules the earlier tests pin against the real files and hand calculations), and the
json module for the OPINFO texts. Streaming is forced on small files with tiny blocks, so every
cut of the scanner (inside ops, between steps and kinds, at the end) is exercised.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ascendprof.model import schemas as S
from ascendprof.model.errors import InputError
from ascendprof.model.problems import Problems
from ascendprof.readers.communication import fast as F
from ascendprof.readers import communication as C
from conftest import QWEN3

OUT = "ASCEND_PROFILER_OUTPUT"
QWEN_FILES = sorted(QWEN3.glob(f"rank_*/{OUT}/communication.json"))


def _whole(path, problems=None):
    return F.read_tables(path, 0, problems)


def _streamed(path, problems=None, block=4096):
    """What a streaming consumer gets (the per-value reader's tables when told to reread)."""
    try:
        parts = list(F.iter_tables(path, 0, problems, whole_file_bytes=0, block_bytes=block))
    except F.Reread:
        return C.read_communication_per_value(path, 0, problems)
    return {name: pa.concat_tables([p[name] for p in parts]) for name in parts[0]}


def _oracle(path, problems=None):
    return C.read_communication_per_value(path, 0, problems)


def assert_same_tables(got: dict, want: dict):
    assert set(got) == set(want)
    for name in want:
        g, w = got[name], want[name]
        assert g.schema.equals(w.schema), name
        if name == S.COMM_OPS:
            # the fast reader keeps the object text as the file has it, the oracle re-dumps
            # it: the same JSON either way (numbers compared as floats: an integer beyond
            # 64 bits stays exact in the file's text but comes back from orjson as a float)
            assert [json.loads(x, parse_int=float) for x in g["opinfo_json"].to_pylist()] == \
                [json.loads(x, parse_int=float) for x in w["opinfo_json"].to_pylist()]
            g, w = g.drop_columns(["opinfo_json"]), w.drop_columns(["opinfo_json"])
        assert g.to_pylist() == w.to_pylist(), name


def _problems(p: Problems):
    return [(x.reason, x.severity, x.where) for x in p]


@pytest.mark.parametrize("path", QWEN_FILES, ids=lambda p: p.parts[-3])
@pytest.mark.parametrize("block", [300, 4096, 1 << 20])
def test_real_files(path, block):
    want = _oracle(path)
    assert_same_tables(_whole(path), want)
    assert_same_tables(_streamed(path, block=block), want)


def test_opinfo_is_the_files_own_text():
    path = QWEN_FILES[0]
    doc = json.loads(path.read_text())
    ops = _streamed(path, block=500)[S.COMM_OPS]
    for row in ops.to_pylist():
        key = f"{row['op_name']}@{row['group']}"
        info = doc[row["step_key"]][row["kind"]][key]
        assert row["opinfo_json"] == json.dumps(info)  # the profiler's json.dump layout


def test_generated_cluster_ranks(generated_cluster):
    cluster = generated_cluster(8, "--comm-ops-per-rank", "300")
    for path in sorted(cluster.glob(f"rank_*/{OUT}/communication.json"))[:4]:
        want = _oracle(path)
        assert_same_tables(_whole(path), want)
        assert_same_tables(_streamed(path, block=7000), want)


def _write(tmp_path, obj, name="communication.json") -> Path:
    p = tmp_path / name
    p.write_text(obj if isinstance(obj, str) else json.dumps(obj))
    return p


ODD = {
    "not_objects": {"step1": {"p2p": {"a@g": 5, "b@g": {"Communication Time Info": {
        "Elapse Time(ms)": 1.0}}, "c@g": [1, 2], "d@g": "x"}, "collective": 3}, "step2": 4},
    "bad_times": {"step1": {"collective": {
        "a@g": {"Communication Time Info": {"Elapse Time(ms)": -1.0}},
        "b@g": {"Communication Time Info": {"Elapse Time(ms)": None, "Wait Time(ms)": 2}},
        "c@g": {"Communication Time Info": {"Elapse Time(ms)": 2.5}}}}},
    "text_and_bools": {"step3": {"p2p": {
        "hcom_send__1@g": {"Communication Time Info": {"Elapse Time(ms)": "3"}},
        "hcom_send__2@g": {"Communication Time Info": {"Elapse Time(ms)": 1, "Idle Time(ms)":
                                                       True}},
        "hcom_send__3@g": {"Communication Bandwidth Info": {"HCCS": {
            "Transit Time(ms)": 1, "Size Distribution": {"1.0": [True, 2], "2": [1]}}}}}}},
    "odd_shapes": {"step1": {"collective": {
        "x": {"Communication Time Info": [], "Communication Bandwidth Info": None},
        "y@": {"Communication Time Info": {}, "Communication Bandwidth Info": {"SIO": None}},
        "z@@g": {"Communication Bandwidth Info": {"RDMA": {"Size Distribution": {
            "0.5": [2, 0.25, 9], "1": [None, 0.5]}}}},
        "Total Op Info": {"Communication Time Info": {"Elapse Time(ms)": 99}}}}},
    "big_numbers": {"step1": {"p2p": {"a@g": {"Communication Time Info": {
        "Elapse Time(ms)": 2 ** 60, "Start Timestamp(us)": 17642468771476745}}}}},
    "flat_cann": {"hcom_allReduce__1@g": {"Communication Time Info": {"Elapse Time(ms)": 1}},
                  "hcom_send__2@g": {"Communication Time Info": {"Elapse Time(ms)": 2}},
                  "Total HCCL Operators": {"Communication Time Info": {}}},
    "escapes": {"st\\ep\"1": {"p2p": {"a\"b@g\\h": {"Communication Time Info": {
        "Elapse Time(ms)": 1.5, "x\"y": "\\\"}{]["}}}}},
    "unicode": {"step1": {"collective": {"全部@组": {"Communication Time Info": {
        "Elapse Time(ms)": 1.5}}}}},
    "empty_levels": {"step1": {}, "step2": {"p2p": {}, "collective": {}}},
    "not_an_object": [1, 2, 3],
}


@pytest.mark.parametrize("case", sorted(ODD))
@pytest.mark.parametrize("block", [16, 64, 1 << 20])
def test_odd_files_as_the_per_value_reader(tmp_path, case, block):
    path = _write(tmp_path, ODD[case])
    outcomes = []
    for read in (_oracle, _whole, lambda p, pr: _streamed(p, pr, block=block)):
        probs = Problems()
        try:
            outcomes.append((read(path, probs), _problems(probs)))
        except InputError as e:
            outcomes.append((None, str(e)))
    want, whole, streamed = outcomes
    for got in (whole, streamed):
        if want[0] is None:
            assert got == want
        else:
            assert_same_tables(got[0], want[0])
            assert got[1] == want[1]


def test_a_repeated_op_key_keeps_the_last_value_at_the_first_place(tmp_path):
    text = ('{"step1": {"p2p": {"a@g": {"Communication Time Info": {"Elapse Time(ms)": 1}}, '
            '"b@g": {"Communication Time Info": {"Elapse Time(ms)": 2}}, '
            '"a@g": {"Communication Time Info": {"Elapse Time(ms)": 3}}}}}')
    path = _write(tmp_path, text)
    want = _oracle(path)
    assert [r["elapse_ns"] for r in want[S.COMM_OPS].to_pylist()] == [3_000_000, 2_000_000]
    assert_same_tables(_whole(path), want)
    assert_same_tables(_streamed(path, block=16), want)
    with pytest.raises(F.Reread):  # found after the first batch was handed out
        list(F.iter_tables(path, 0, whole_file_bytes=0, block_bytes=16))


@pytest.mark.parametrize("cut", [0.0, 0.3, 0.5, 0.9, 0.999])
def test_a_file_cut_short_is_invalid_json(tmp_path, cut):
    data = QWEN_FILES[0].read_bytes()
    path = tmp_path / "communication.json"
    path.write_bytes(data[:int(len(data) * cut) + 1])
    with pytest.raises(InputError, match="invalid JSON|empty file") as want:
        _oracle(path)
    with pytest.raises(InputError) as got:
        _whole(path)
    assert str(got.value) == str(want.value)
    with pytest.raises(InputError, match="invalid JSON|empty file|top level"):
        _streamed(path, block=256)


def test_invalid_utf8_inside_an_op(tmp_path):
    data = QWEN_FILES[0].read_bytes().replace(b'"Idle Time(ms)"', b'"Idle \x80Time(ms)"', 1)
    path = tmp_path / "communication.json"
    path.write_bytes(data)
    with pytest.raises(InputError, match="invalid JSON"):
        _oracle(path)
    with pytest.raises(InputError, match="invalid JSON"):
        _whole(path)
    with pytest.raises(InputError, match="invalid JSON"):
        _streamed(path, block=512)


def test_a_large_file_is_streamed_in_blocks(tmp_path, monkeypatch):
    """Above WHOLE_FILE_BYTES the file goes through the scanner, one batch per block."""
    path = QWEN_FILES[0]
    monkeypatch.setattr(F, "WHOLE_FILE_BYTES", 1000)
    monkeypatch.setattr(F, "BLOCK_BYTES", 2000)
    parts = list(F.iter_tables(path, 0))
    assert len(parts) > 3
    assert_same_tables({n: pa.concat_tables([p[n] for p in parts]) for n in parts[0]},
                       _oracle(path))


_SEED = json.loads(QWEN_FILES[0].read_text())


@st.composite
def mutated(draw):
    """The real file with a few values replaced by arbitrary JSON values (any depth)."""
    doc = json.loads(json.dumps(_SEED))
    values = st.recursive(st.none() | st.booleans() | st.integers(-2**70, 2**70)
                          | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=4),
                          lambda c: st.lists(c, max_size=3)
                          | st.dictionaries(st.text(max_size=4), c, max_size=3), max_leaves=5)
    for _ in range(draw(st.integers(1, 3))):
        node, path = doc, []
        while isinstance(node, dict) and node and draw(st.booleans()):
            key = draw(st.sampled_from(sorted(node)))
            path.append((node, key))
            node = node[key]
        if path:
            parent, key = path[-1]
            parent[key] = draw(values)
    return json.dumps(doc)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated(), st.sampled_from([64, 2048]))
def test_mutated_real_file_as_the_per_value_reader(tmp_path_factory, text, block):
    path = tmp_path_factory.mktemp("m") / "communication.json"
    path.write_text(text)
    outcomes = []
    for read in (_oracle, _whole, lambda p, pr: _streamed(p, pr, block=block)):
        probs = Problems()
        try:
            outcomes.append((read(path, probs), _problems(probs)))
        except InputError as e:
            outcomes.append((None, str(e)))
    want, whole, streamed = outcomes
    for got in (whole, streamed):
        if want[0] is None:
            assert got[0] is None and got[1] == want[1]
        else:
            assert_same_tables(got[0], want[0])
            assert got[1] == want[1]
