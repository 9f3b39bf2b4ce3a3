"""The block scanner of large communication.json files (ascendprof.readers.communication.scanner),
through the streamed read (fast.iter_tables with whole_file_bytes=0) and the scanner's own
batches, on a real rank's file and damaged or odd copies of it: a step or kind key ending in an
escaped backslash (\\\\ right before its closing quote) is read as JSON decodes it; invalid JSON
inside an op of a later block is an InputError at the byte where it is wrong (the op's offset in
the file, not in the block); the counts the scanner takes of the ops' texts (keys, objects, lists
by depth, quotes) are those of the parsed ops; a full first block is scanned (and its ops
handed out as a batch) as it is read.

Expected values come from Python's json module (keys, the position of a JSON error, a walk over
the parsed document for the counts) and the damaged file's own bytes.
"""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pytest

from ascendprof.model import schemas as S
from ascendprof.model.errors import InputError
from ascendprof.readers.communication import fast as F
from ascendprof.readers.communication.scanner import Scanner
from conftest import QWEN3

REAL = sorted(QWEN3.glob("rank_*/ASCEND_PROFILER_OUTPUT/communication.json"))[0]
DATA = REAL.read_bytes()
RANK = 2
BLOCKS = (512, 1 << 20)  # the file cut in blocks after every op or two; the file in one block


def _streamed(path, block):
    parts = list(F.iter_tables(path, RANK, None, whole_file_bytes=0, block_bytes=block))
    return {n: pa.concat_tables([p[n] for p in parts]) for n in parts[0]}


def _replace_once(data: bytes, old: bytes, new: bytes, start: int = 0) -> tuple[bytes, int]:
    at = data.index(old, start)
    return data[:at] + new + data[at + len(old):], at


def test_the_real_file_is_what_the_fixture_says():
    """The damage below is made at places these tests take for granted."""
    doc = json.loads(DATA)
    assert list(doc) == ["step13"] and list(doc["step13"]) == ["p2p", "collective"]
    assert DATA.count(b'"p2p"') == 1 and DATA.count(b'"step13"') == 1
    assert len([i for i in range(len(DATA)) if DATA.startswith(b'"hcom_', i)]) > 6


@pytest.mark.parametrize("block", BLOCKS)
@pytest.mark.parametrize("old,new", [(b'"step13"', b'"step13\\\\"'), (b'"p2p"', b'"p2p\\\\"'),
                                     (b'"p2p"', b'"p2p\\\\\\\\"')])
def test_a_key_ending_in_an_escaped_backslash_is_read_as_json_has_it(tmp_path, block, old, new):
    """A step or kind key ending in \\\\ (an escaped backslash; or two): the quote after it
    closes the key (an even run of backslashes before a quote escapes none of it), so every op
    is read, under the key as json decodes it."""
    bad, _ = _replace_once(DATA, old, new)
    path = tmp_path / "communication.json"
    path.write_bytes(bad)
    doc = json.loads(bad)
    want = [(s, k) for s, kinds in doc.items() for k, ops in kinds.items() for op in ops
            if not op.startswith("Total")]
    assert any(s.endswith("\\") or k.endswith("\\") for s, k in want)
    ops = _streamed(path, block)[S.COMM_OPS]
    assert list(zip(ops["step_key"].to_pylist(), ops["kind"].to_pylist())) == want


@pytest.mark.parametrize("which", [1, 5])
def test_a_missing_colon_inside_a_later_op_names_its_byte(tmp_path, which):
    """The colon after "Elapse Time(ms)" in the second or sixth op is dropped (inside the op,
    where the scanner leaves the JSON to the op decoder): read in blocks of 512 bytes (the op in
    a later block than the first), the byte named is where json finds the error, counted from
    the file's start."""
    op = [i for i in range(len(DATA)) if DATA.startswith(b'"hcom_', i)][which]
    bad, _ = _replace_once(DATA, b'"Elapse Time(ms)":', b'"Elapse Time(ms)"', op)
    with pytest.raises(json.JSONDecodeError) as want:
        json.loads(bad)
    assert op < want.value.pos
    path = tmp_path / "communication.json"
    path.write_bytes(bad)
    for block in BLOCKS:
        with pytest.raises(InputError) as got:
            _streamed(path, block)
        assert got.value.path == str(path)
        assert got.value.where == want.value.pos
        assert "invalid JSON" in got.value.reason and "':'" in got.value.reason


def _counts(doc) -> dict:
    """Keys (colons), objects and lists by depth and the quotes of every op object (not the
    "Total ..." entries) of a step -> kind -> op document, the op object at depth 3 (its keys
    at depth 4), depths 12 and beyond counted as 12."""
    top = 12
    got = {"colons": np.zeros(top + 1, int), "objects": np.zeros(top + 1, int),
           "lists": np.zeros(top + 1, int), "quotes": 0}

    def walk(v, d):
        if isinstance(v, dict):
            got["objects"][min(d, top)] += 1
            for value in v.values():
                got["colons"][min(d + 1, top)] += 1
                got["quotes"] += 2
                walk(value, d + 1)
        elif isinstance(v, list):
            got["lists"][min(d, top)] += 1
            for value in v:
                walk(value, d + 1)
        elif isinstance(v, str):
            got["quotes"] += 2

    for kinds in doc.values():
        for ops in kinds.values():
            for key, op in ops.items():
                if not key.lower().startswith("total"):
                    walk(op, 3)
    return got


@pytest.mark.parametrize("block", [512, 4096, 1 << 20])
@pytest.mark.parametrize("lists", [False, True])
def test_the_counts_of_the_ops_texts_are_those_of_the_parsed_ops(tmp_path, block, lists):
    """The counts the scanner hands with each batch (which decide whether DuckDB's lenient
    reader may decode it), summed over the batches, equal a walk over the ops json parses:
    the real file, and a copy whose empty size distributions hold [count, duration] lists too
    (and with a text value, two more quotes)."""
    data = DATA
    if lists:
        data = data.replace(b'"Size Distribution": {}',
                            b'"Size Distribution": {"0.004": [2, 0.5], "1.5": [1, 3]}')
        data, _ = _replace_once(data, b'"Wait Time Ratio": 1.0', b'"Wait Time Ratio": "1.0"')
    path = tmp_path / "communication.json"
    path.write_bytes(data)
    want = _counts(json.loads(data))
    assert want["objects"][3] > 0 and want["colons"][4] > 0 and want["lists"][7] > 0
    scanner = Scanner(path, block)
    shapes = [e.shape for e in scanner.blocks()]
    assert shapes and all(s is not None for s in shapes)
    for name in ("colons", "objects", "lists"):
        assert sum(s[name] for s in shapes).tolist() == want[name].tolist(), name
    assert sum(s["quotes"] for s in shapes) == want["quotes"]


def test_a_full_first_block_is_scanned_as_it_is(tmp_path):
    """A batch per block: with block_bytes some bytes past the end of the first op (its
    closing brace found by json's raw_decode), the first batch holds that op alone (the first
    block is scanned when read, not after reading another)."""
    text = DATA.decode()
    key = DATA.index(b'"hcom_')
    start = DATA.index(b"{", key)
    _, end = json.JSONDecoder().raw_decode(text, start)
    _, end2 = json.JSONDecoder().raw_decode(text, DATA.index(b"{", DATA.index(b'"hcom_', end)))
    block = end + 60
    assert end2 < 2 * block  # the second op ends within two blocks
    path = tmp_path / "communication.json"
    path.write_bytes(DATA)
    first = next(Scanner(path, block).blocks())
    assert first.keys.to_pylist() == [json.loads(DATA[key:DATA.index(b'"', key + 1) + 1])]
