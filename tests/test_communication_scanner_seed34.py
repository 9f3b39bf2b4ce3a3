"""The block scanner of large communication.json files (ascendprof.readers.communication.scanner),
through the streamed read (fast.iter_tables with whole_file_bytes=0) of damaged or odd copies of
a real rank's file: each kind of invalid JSON it finds itself (a bad escape or invalid UTF-8 in a
step, kind or op key, invalid UTF-8 inside an op, a missing comma between ops, a stray backslash
after an op, a file cut inside an op or missing its last brace, text after the document, all also
after a byte order mark) is an InputError naming the file and the byte where it is; an escaped
quote inside a key is read as part of the key; a step key repeated keeps the last value, as JSON
does; "total ..." entries of any case are not ops.

Expected values come from the damaged file's own bytes (offsets found with bytes.index, the
file's length), Python's json module (op keys, op counts; it keeps the last value of a repeated
key) and the per-value reader.
"""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

from ascendprof.model import schemas as S
from ascendprof.model.errors import InputError
from ascendprof.readers import communication as C
from ascendprof.readers.communication import fast as F
from conftest import QWEN3

REAL = sorted(QWEN3.glob("rank_*/ASCEND_PROFILER_OUTPUT/communication.json"))[0]
DATA = REAL.read_bytes()
RANK = 2


def _streamed(path, block=512):
    parts = list(F.iter_tables(path, RANK, None, whole_file_bytes=0, block_bytes=block))
    return {n: pa.concat_tables([p[n] for p in parts]) for n in parts[0]}


def _error(tmp_path, data: bytes, block=512) -> tuple[str, InputError]:
    path = tmp_path / "communication.json"
    path.write_bytes(data)
    with pytest.raises(InputError) as got:
        _streamed(path, block)
    assert got.value.path == str(path)
    assert str(got.value).startswith(f"{path} at byte {got.value.where}: ")
    assert "invalid JSON" in got.value.reason
    return str(path), got.value


def _op_keys(doc) -> list[tuple[str, str, str]]:
    """(step key, kind, op key) of every op entry of a step -> kind -> op file, "Total ..."
    entries left out."""
    return [(s, k, op) for s, kinds in doc.items() for k, ops in kinds.items() for op in ops
            if not op.startswith("Total")]


def _replace_once(data: bytes, old: bytes, new: bytes, start: int = 0) -> tuple[bytes, int]:
    at = data.index(old, start)
    return data[:at] + new + data[at + len(old):], at


def test_the_real_file_is_what_the_fixture_says():
    """The damage below is made at places these tests take for granted."""
    doc = json.loads(DATA)
    assert list(doc) == ["step13"] and list(doc["step13"]) == ["p2p", "collective"]
    assert DATA.count(b'"p2p"') == 1 and DATA.count(b'"collective"') == 1


def test_a_bad_escape_in_a_kind_key_names_that_key(tmp_path):
    """"p2\\q" is no JSON string (\\q is no escape): the byte named is inside that key, between
    its opening quote and the backslash."""
    bad, at = _replace_once(DATA, b'"p2p"', b'"p2\\q"')
    _, err = _error(tmp_path, bad)
    assert "escape" in err.reason
    assert at < err.where <= bad.index(b"\\q")


@pytest.mark.parametrize("kind", [b"p2p", b"collective"])
def test_invalid_utf8_in_a_kind_key_names_the_bad_byte(tmp_path, kind):
    """A 0xff byte (never UTF-8) at the end of a kind key: the byte named is that 0xff; the
    reason says what is wrong."""
    bad, _ = _replace_once(DATA, b'"' + kind + b'"', b'"' + kind + b'\xff"')
    _, err = _error(tmp_path, bad)
    assert err.where == bad.index(b"\xff")
    assert err.reason == "invalid JSON (str is not valid UTF-8)"


def test_invalid_utf8_inside_an_op_names_the_bad_byte(tmp_path):
    """A 0xff byte inside a key of the second op's time info (below the op level, where the
    scanner does not decode keys but checks the block as UTF-8)."""
    second = DATA.index(b'"hcom_batchSendRecv__128_4_1')
    bad, _ = _replace_once(DATA, b'"Elapse Time(ms)"', b'"Elapse\xff Time(ms)"', second)
    _, err = _error(tmp_path, bad)
    assert err.where == bad.index(b"\xff")
    assert err.reason == "invalid JSON (str is not valid UTF-8)"


@pytest.mark.parametrize("block", [512, 4096, None])  # None: the reader's own block size
@pytest.mark.parametrize("which", [1, 5])
def test_a_missing_comma_between_two_ops_names_the_second_op(tmp_path, block, which):
    """The comma before an op key is dropped: the JSON is wrong at that key's opening quote,
    wherever the file's blocks are cut (also with complete ops before it in the same block,
    which the scanner replaces by a placeholder when it checks the levels above the ops)."""
    starts = [i for i in range(len(DATA)) if DATA.startswith(b'"hcom_', i)]
    key = starts[which]
    comma = DATA.rindex(b",", 0, key)
    assert DATA[comma + 1:key].strip() == b""
    bad = DATA[:comma] + DATA[comma + 1:]
    _, err = _error(tmp_path, bad, block)
    assert err.where == key - 1  # the quote, one byte earlier without the comma
    assert bad[err.where:err.where + 6] == b'"hcom_'


def test_a_file_cut_inside_an_op_names_its_end(tmp_path):
    """The file ends in the middle of its second op: unexpected end of data, at the file's
    end."""
    second = DATA.index(b'"hcom_batchSendRecv__128_4_1')
    bad = DATA[:second + 300]
    _, err = _error(tmp_path, bad)
    assert err.where == len(bad)
    assert err.reason == "invalid JSON (unexpected end of data)"


def test_an_escaped_quote_in_an_op_key_is_part_of_the_key(tmp_path):
    """An op key holding \\" (an escaped quote, inside the string): every op is read, and that
    op's name holds the quote, as json decodes it."""
    bad, _ = _replace_once(DATA, b'"hcom_batchSendRecv__128_4_1@', b'"hcom_batch\\"Send\\"Recv@')
    path = tmp_path / "communication.json"
    path.write_bytes(bad)
    want = [op.rsplit("@", 1)[0] for _, _, op in _op_keys(json.loads(bad))]
    assert 'hcom_batch"Send"Recv' in want
    for block in (512, 1 << 20):
        ops = _streamed(path, block)[S.COMM_OPS]
        assert ops["op_name"].to_pylist() == want


def test_a_repeated_step_key_keeps_its_last_value(tmp_path, monkeypatch):
    """{"step13": {"p2p": ...}, "step13": {"collective": ...}}: as JSON (and Python's json)
    keeps the last value of a repeated key, the ops are those of the collective kind only,
    read in one block or through the public reader in small blocks (which, once it has handed
    out a batch, rereads the file)."""
    bad, _ = _replace_once(DATA, b', "collective": ', b'}, "step13": {"collective": ')
    path = tmp_path / "communication.json"
    path.write_bytes(bad)
    doc = json.loads(bad)
    assert list(doc["step13"]) == ["collective"]
    want = [(s, k, op.rsplit("@", 1)[0]) for s, k, op in _op_keys(doc)]
    assert want  # the collective kind has ops

    def keys(ops):
        return list(zip(ops["step_key"].to_pylist(), ops["kind"].to_pylist(),
                        ops["op_name"].to_pylist()))

    assert keys(_streamed(path, 1 << 20)[S.COMM_OPS]) == want
    monkeypatch.setattr(F, "WHOLE_FILE_BYTES", 1000)
    monkeypatch.setattr(F, "BLOCK_BYTES", 512)
    assert keys(C.read_communication(path, RANK)[S.COMM_OPS]) == want


@pytest.mark.parametrize("next_key", [b"hcom_x", b"a}}[b"])
def test_a_backslash_after_an_op_is_invalid_json_at_that_byte(tmp_path, next_key):
    """A stray \\" right after the first op's closing brace (outside any string: invalid JSON)
    is an InputError at the backslash, also where a block starts at that backslash (the
    scanner cuts blocks after an op) and the next op key holds braces and a bracket, which
    must stay inside their string (a quote taken as unescaped there would put them outside,
    a list above the op level, and make the read start over instead)."""
    second = DATA.index(b'"hcom_batchSendRecv__128_4_1')
    comma = DATA.rindex(b",", 0, second)  # just after the first op's closing brace
    assert DATA[comma - 1:comma] == b"}"
    key_end = DATA.index(b'"', second + 1)
    bad = DATA[:comma] + b'\\"' + DATA[comma:second] + b'"' + next_key + DATA[key_end:]
    for block in (512, 1024, 1 << 20):
        _, err = _error(tmp_path, bad, block)
        assert err.where == comma
        assert bad[err.where:err.where + 2] == b'\\"'


# ---------------------------------------------------------------- the same kinds at other places

BLOCKS = (512, 1 << 20)  # the file cut in blocks after every op or two; the file in one block


def test_a_byte_order_mark_counts_in_the_byte_named(tmp_path):
    """A file starting with a UTF-8 byte order mark (3 bytes, skipped by the scanner) with a
    0xff inside its second op: the byte named is still the 0xff's offset in the file."""
    second = DATA.index(b'"hcom_batchSendRecv__128_4_1')
    bad, _ = _replace_once(DATA, b'"Elapse Time(ms)"', b'"Elapse\xff Time(ms)"', second)
    bad = b"\xef\xbb\xbf" + bad
    for block in BLOCKS:
        _, err = _error(tmp_path, bad, block)
        assert err.where == bad.index(b"\xff")


@pytest.mark.parametrize("block", BLOCKS)
def test_invalid_utf8_in_a_step_key_or_an_op_key_names_the_bad_byte(tmp_path, block):
    """A 0xff byte in the step key (decoded by the scanner) or in the second op's key (checked
    with the levels above the ops): the byte named is that 0xff."""
    for old, new in ((b'"step13"', b'"step\xff13"'),
                     (b'"hcom_batchSendRecv__128_4_1', b'"hcom_batch\xffSendRecv__128_4_1')):
        bad, _ = _replace_once(DATA, old, new)
        _, err = _error(tmp_path, bad, block)
        assert err.where == bad.index(b"\xff")
        assert "UTF-8" in err.reason


@pytest.mark.parametrize("block", BLOCKS)
def test_a_bad_escape_in_a_step_key_or_an_op_key_names_that_key(tmp_path, block):
    """\\q (no JSON escape) in the step key or in the sixth op's key: the byte named is in that
    key, between its opening quote and the end of the bad escape."""
    sixth = [i for i in range(len(DATA)) if DATA.startswith(b'"hcom_', i)][5]
    for old, at in ((b'"step13"', 0), (b'"hcom_', sixth)):
        bad, key = _replace_once(DATA, old, old[:3] + b"\\q" + old[3:], at)
        _, err = _error(tmp_path, bad, block)
        assert "escape" in err.reason
        assert key < err.where <= key + 5


@pytest.mark.parametrize("block", BLOCKS)
def test_text_after_the_document_names_its_first_byte(tmp_path, block):
    """Something after the closing brace of the whole document: the byte named is its first."""
    bad = DATA.rstrip() + b' x'
    _, err = _error(tmp_path, bad, block)
    assert err.where == len(bad) - 1


@pytest.mark.parametrize("block", BLOCKS)
def test_a_document_missing_its_last_brace_ends_unexpectedly(tmp_path, block):
    """The file without its last closing brace (every op complete): unexpected end of data,
    at the file's end."""
    bad = DATA.rstrip()[:-1]
    assert bad.endswith(b"}}")
    _, err = _error(tmp_path, bad, block)
    assert err.where == len(bad)
    assert err.reason == "invalid JSON (unexpected end of data)"


@pytest.mark.parametrize("block", [16, 512, 1 << 20])
def test_total_entries_of_any_case_are_not_ops(tmp_path, block):
    """Op keys starting with "total" in any case are the profiler's sums, not ops (as the
    per-value reader has it); "Tot@g" (shorter than "total") and "xtotal@g" are ops."""
    op = '{"Communication Time Info": {"Elapse Time(ms)": %d}}'
    keys = ["a@g", "TOTAL Op Info", "Tot@g", "total@g", "ToTaLx@g", "xtotal@g"]
    doc = '{"step1": {"collective": {%s}}}' % ", ".join(
        f'"{k}": {op % i}' for i, k in enumerate(keys))
    path = tmp_path / "communication.json"
    path.write_text(doc)
    want = [("a", 0), ("Tot", 2_000_000), ("xtotal", 5_000_000)]
    ops = C.read_communication_per_value(path, RANK)[S.COMM_OPS]
    assert list(zip(ops["op_name"].to_pylist(), ops["elapse_ns"].to_pylist())) == want
    ops = _streamed(path, block)[S.COMM_OPS]
    assert list(zip(ops["op_name"].to_pylist(), ops["elapse_ns"].to_pylist())) == want
