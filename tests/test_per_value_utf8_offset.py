"""A communication.json holding bytes that are not UTF-8, read the way a user reads a rank
(``read_source``): the problem names the file and the byte where the bad sequence starts, the
byte the streamed reader (the block scanner, ``iter_tables`` with ``whole_file_bytes=0``) names
for the same file, not byte 0.

A small file is read whole and handed to the per-value reader when it is not valid JSON; orjson
checks the whole text as UTF-8 before it parses and names byte 0 for any bad byte. The same
JSON parse reads the metadata files, so a bad byte there is named the same way.

Inputs: a copy of the qwen3 rank 1 directory of the shared data (communication.json pure ASCII,
checked below) with bytes inserted at a known offset. Every byte before the insertion is ASCII,
so the first byte that is not UTF-8 is the first inserted byte (or, for a sequence that starts
well but is cut short or encodes a surrogate, the lead byte of that sequence, where Python's
decoder and the scanner both place it).
"""

from __future__ import annotations

import shutil

import pytest

from ascendprof.model.errors import InputError
from ascendprof.model.problems import Problems
from ascendprof.readers import read_source
from ascendprof.readers.communication import fast as F
from ascendprof.scan import scan

RANK = 1
OUT = "ASCEND_PROFILER_OUTPUT"


def _rank_copy(shared_data, tmp_path):
    src = shared_data / "qwen3-4rank-pp2dp2" / f"rank_{RANK}_ascend_pt"
    rank_dir = tmp_path / src.name
    shutil.copytree(src, rank_dir)
    for p in [rank_dir, *rank_dir.rglob("*")]:  # the shared data is read-only
        p.chmod(0o755 if p.is_dir() else 0o644)
    return rank_dir


def _insert(path, before: bytes, nth: int, what: bytes) -> int:
    """``what`` written into the file ``path`` just after the ``nth`` (0-based) occurrence of
    ``before``; returns the offset of its first byte."""
    data = path.read_bytes()
    assert data.isascii()  # so no byte before the insertion can be the bad one
    at = -1
    for _ in range(nth + 1):
        at = data.index(before, at + 1)
    at += len(before)
    path.write_bytes(data[:at] + what + data[at:])
    return at


def _read(rank_dir):
    (source,) = [s for s in scan(rank_dir, Problems()) if s.rank == RANK]
    return read_source(source)


# (text after which the bytes go, which occurrence, the bytes): places from the first step key
# to the last op, and three kinds of bad sequence
PLACES = {
    # 0xff is never UTF-8: inside the step key, a few bytes into the file
    "0xff in the step key": (b'{"step', 0, b"\xff"),
    # inside the key of a Time Info field of the third op
    "0xff in an op's field name": (b'"Elapse ', 2, b"\xff"),
    # a three-byte sequence cut after its second byte (0xe4 0xb8, then an ASCII byte)
    "a cut sequence in an op name": (b'"hcom_allReduce__', 3, b"\xe4\xb8"),
    # a surrogate (U+D800) encoded as UTF-8, which UTF-8 does not allow, in the last op
    "an encoded surrogate near the end": (b'"SIO": {', -1, b"\xed\xa0\x80"),
}


@pytest.mark.parametrize("case", list(PLACES))
def test_the_problem_names_the_byte_where_the_bad_sequence_starts(shared_data, tmp_path, case):
    before, nth, what = PLACES[case]
    rank_dir = _rank_copy(shared_data, tmp_path)
    path = rank_dir / OUT / "communication.json"
    if nth < 0:
        nth = path.read_bytes().count(before) - 1
    at = _insert(path, before, nth, what)
    assert at > 0

    # the user's path: the rank is read, communication.json is one problem naming byte `at`
    got = [p for p in _read(rank_dir).problems if p.path == str(path)]
    assert [(p.where, p.reason, p.severity) for p in got] == [
        (f"byte {at}", "invalid JSON (str is not valid UTF-8)", "skipped")]

    # the streamed reader names the same byte, in the same words
    with pytest.raises(InputError) as streamed:
        list(F.iter_tables(path, RANK, None, whole_file_bytes=0, block_bytes=512))
    assert (streamed.value.where, streamed.value.reason) == (
        at, "invalid JSON (str is not valid UTF-8)")


def test_a_bad_byte_in_the_metadata_names_its_byte(shared_data, tmp_path):
    """profiler_metadata.json goes through the same JSON parse: a 0xff after its first key
    ("distributed_args") is named at its own offset."""
    rank_dir = _rank_copy(shared_data, tmp_path)
    path = rank_dir / "profiler_metadata.json"
    at = _insert(path, b'"distributed_args"', 0, b"\xff")
    got = [p for p in _read(rank_dir).problems if p.path == str(path)]
    assert [(p.where, p.reason) for p in got] == [
        (f"byte {at}", "invalid JSON (str is not valid UTF-8)")]


def _with_bom(path) -> None:
    """A UTF-8 byte order mark (3 bytes) put before the file's text, as some editors save it."""
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())


def test_after_a_byte_order_mark_the_byte_is_still_the_files(shared_data, tmp_path):
    """A communication.json saved with a byte order mark, then a 0xff inserted in its third
    op's field name: the offset named is the 0xff's offset in the file (the mark's 3 bytes
    counted), by the whole read and the streamed read alike -- not 3 bytes less where the
    whole read dropped the mark before parsing."""
    rank_dir = _rank_copy(shared_data, tmp_path)
    path = rank_dir / OUT / "communication.json"
    at = _insert(path, b'"Elapse ', 2, b"\xff")
    _with_bom(path)
    at += 3
    assert path.read_bytes()[at] == 0xff
    got = [p for p in _read(rank_dir).problems if p.path == str(path)]
    assert [(p.where, p.reason) for p in got] == [
        (f"byte {at}", "invalid JSON (str is not valid UTF-8)")]
    with pytest.raises(InputError) as streamed:
        list(F.iter_tables(path, RANK, None, whole_file_bytes=0, block_bytes=512))
    assert streamed.value.where == at


def test_a_byte_order_mark_alone_changes_nothing(shared_data, tmp_path):
    """The same rank with a byte order mark before communication.json's and the metadata's
    text, nothing else changed: the same tables and problems as without it."""
    plain = _read(_rank_copy(shared_data, tmp_path / "plain"))
    rank_dir = _rank_copy(shared_data, tmp_path / "bom")
    _with_bom(rank_dir / OUT / "communication.json")
    _with_bom(rank_dir / "profiler_metadata.json")
    marked = _read(rank_dir)
    assert sorted(marked.tables) == sorted(plain.tables)
    for name, table in plain.tables.items():
        assert marked.tables[name].equals(table), name
    assert [(p.where, p.reason) for p in marked.problems] == \
        [(p.where, p.reason) for p in plain.problems]
