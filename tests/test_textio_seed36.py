"""sysio.textio behaviour left untested by the seed-36 mutation sample: a header line with
several NUL bytes is refused naming the first of them; a header line of exactly the 1 MB limit
(with its line end) is still read by csv_header; a malformed CSV's InputError
carries the first line of Arrow's message; csv_header calls a whitespace-only file empty; both
csv_header and read_csv look for the header only in the first 1 MB (a NUL past it is not named);
holds_e_notation reads the file in blocks of block_bytes, never whole.
Expected values are written out by hand from the bytes each test writes."""

from __future__ import annotations

import pytest

from ascendprof.model.errors import InputError
from ascendprof.sysio import textio
from tests.test_textio_seed34 import _write


@pytest.mark.parametrize("read", [textio.csv_header, textio.read_csv])
def test_a_header_with_several_nul_bytes_is_named_at_the_first(tmp_path, read):
    # "Name," is bytes 0-4; the NULs are bytes 5 and 8 ("\0ab\0"): the first one is named
    path = _write(tmp_path, "op_statistic.csv", b"Name,\0ab\0,Count\nMatMul,1,2\n")
    with pytest.raises(InputError) as e:
        read(path)
    assert e.value.reason.startswith("NUL bytes in the header line")
    assert e.value.where == 5


def test_a_header_line_of_exactly_1_mb_is_read(tmp_path):
    # 16 names of 65,535 "a"/"b"/... each plus 15 commas: 16 * 65,535 + 15 = 1,048,575 bytes,
    # and one trailing "," makes the line exactly 1,048,576 bytes = 1 MB (the limit is "more
    # than 1 MB"), so the header is read: 16 names and an empty 17th
    names = [chr(ord("a") + i) * 65_535 for i in range(16)]
    line = (",".join(names) + ",").encode()
    assert len(line) == 1 << 20
    path = _write(tmp_path, "kernel_details.csv", line + b"\n" + b"1," * 16 + b"\n")
    assert textio.csv_header(path) == names + [""]


def test_a_malformed_csv_names_arrows_reason(tmp_path):
    # row 2 has 3 fields under a 2-name header: without bad_rows the read is refused, the
    # reason the first line of Arrow's parse error
    path = _write(tmp_path, "op_statistic.csv", b"Name,Count\nMatMul,1,2\n")
    with pytest.raises(InputError) as e:
        textio.read_csv(path)
    assert e.value.reason.startswith("malformed CSV: CSV parse error: ")
    assert "Expected 2 columns, got 3" in e.value.reason
    assert "\n" not in e.value.reason


@pytest.mark.parametrize("data", [b" \r\n\t\n", b"\xef\xbb\xbf \n"])
def test_csv_header_of_a_whitespace_only_file_is_empty(tmp_path, data):
    path = _write(tmp_path, "kernel_details.csv", data)
    with pytest.raises(InputError) as e:
        textio.csv_header(path)
    assert e.value.reason == "empty file"
    assert str(e.value) == f"{path}: empty file"


@pytest.mark.parametrize("read", [textio.csv_header, textio.read_csv])
@pytest.mark.parametrize("after", [b"", b"bb\n1\n"])
def test_a_nul_past_the_first_mb_is_not_looked_for(tmp_path, read, after):
    # no line end in the first 1 MB, a NUL byte 100 KB past it (byte 1,048,576 + 100,000),
    # then (or not) a line end: the header search stops at 1 MB, so both readers refuse the
    # file for the missing line end and never name the NUL (csv_header reads 17 64 KB blocks,
    # 1,114,112 bytes, and does not reach it; read_csv looks at its first 1 MB + 1 byte)
    nul_at = (1 << 20) + 100_000
    path = _write(tmp_path, "kernel_details.csv", b"a" * nul_at + b"\0" + after)
    with pytest.raises(InputError) as e:
        read(path)
    assert e.value.reason == "no line end in the first 1 MB: no CSV header; not read"
    assert e.value.where is None


class _Reads:
    """A file wrapper recording the size asked of every read()."""

    def __init__(self, f, asked):
        self._f, self._asked = f, asked

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._f.close()

    def read(self, n=-1):
        self._asked.append(n)
        return self._f.read(n)


@pytest.mark.parametrize("data, found", [(b"1.5,2.5\n3,4\n", False),   # 12 bytes, no E+
                                         (b"1.5,2.5E+3\n", True)])  # 11 bytes: "E" 7, "+" 8
def test_holds_e_notation_reads_in_blocks(tmp_path, monkeypatch, data, found):
    # the file is never held whole: 4-byte blocks; 12 bytes without E+ are 3 full blocks and
    # the empty read at the end (4 reads); with "E" ending block 2 (bytes 4-7) and "+" opening
    # block 3 (bytes 8-10), the pair split between blocks is found at the 3rd read
    asked: list = []
    real = textio.open_regular
    monkeypatch.setattr(textio, "open_regular", lambda p, *a: _Reads(real(p, *a), asked))
    path = _write(tmp_path, "kernel_details.csv", data)
    assert textio.holds_e_notation(path, block_bytes=4) is found
    assert asked == [4] * (3 if found else 4)
