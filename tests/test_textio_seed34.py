"""sysio.textio behaviour left untested by the seed-34 mutation sample: a read error of a
regular file is named with the OS's words (``/proc/self/mem`` is a regular file whose first
page cannot be read: EIO), csv_header reads only about its 1 MB limit and drops a UTF-8 BOM,
a whitespace-only file is "empty", and a non-ASCII UTF-8 CSV reads. Expected values are
written out by hand from the bytes each test writes."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from ascendprof.model.errors import InputError
from ascendprof.sysio import textio

# a regular file (st_mode S_IFREG) whose read at offset 0 fails with EIO: page 0 of the
# reading process is never mapped
_UNREADABLE = Path("/proc/self/mem")
_EIO = f"cannot read: {os.strerror(errno.EIO)}"


def _write(tmp_path, name: str, data: bytes):
    p = tmp_path / name
    p.write_bytes(data)
    return p


@pytest.mark.skipif(not _UNREADABLE.exists(), reason="needs Linux /proc")
@pytest.mark.parametrize("read", [textio.read_regular, textio.holds_e_notation])
def test_a_read_error_is_named_with_the_os_words(read):
    with pytest.raises(InputError) as e:
        read(_UNREADABLE)
    assert str(e.value.path) == str(_UNREADABLE)
    assert e.value.reason == _EIO
    assert str(e.value) == f"{_UNREADABLE}: {_EIO}"


def test_csv_header_reads_only_about_its_limit(tmp_path):
    # no line end at all, and a NUL byte 100 KB past the 1 MB limit: csv_header reads 64 KB
    # blocks until it holds more than 1 MB (17 blocks, 1,114,112 bytes), so it never sees the
    # NUL at byte 1,048,576 + 100,000 = 1,148,576 and refuses the file for the missing line end
    nul_at = (1 << 20) + 100_000
    path = _write(tmp_path, "kernel_details.csv", b"a" * nul_at + b"\0" + b"b" * 200_000)
    with pytest.raises(InputError) as e:
        textio.csv_header(path)
    assert e.value.reason == "no line end in the first 1 MB: no CSV header; not read"
    assert e.value.where is None


def test_csv_header_drops_a_utf8_bom(tmp_path):
    path = _write(tmp_path, "kernel_details.csv",
                  b"\xef\xbb\xbfStep Id,Name,Duration(us)\r\n1,MatMul,2.5\r\n")
    assert textio.csv_header(path) == ["Step Id", "Name", "Duration(us)"]


@pytest.mark.parametrize("read", [textio.read_csv, textio.read_json, textio.read_payload])
def test_a_whitespace_only_file_is_empty(tmp_path, read):
    path = _write(tmp_path, "op_statistic.csv", b" \r\n\t\n")
    with pytest.raises(InputError) as e:
        read(path)
    assert e.value.reason == "empty file"
    assert str(e.value) == f"{path}: empty file"


def test_a_non_ascii_utf8_csv_reads(tmp_path):
    # "Größe" and "算子" are valid UTF-8: the file is read, the text kept as written
    path = _write(tmp_path, "op_statistic.csv",
                  "Name,Größe\n算子,1\n".encode("utf-8"))
    t = textio.read_csv(path)
    assert t.column_names == ["Name", "Größe"]
    assert t.column("Name").to_pylist() == ["算子"]
    assert t.column("Größe").to_pylist() == ["1"]

