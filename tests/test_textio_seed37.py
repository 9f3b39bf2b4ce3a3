"""sysio.textio behaviour left untested by the seed-37 mutation sample: the UTF-16 refusal
is compared as the WHOLE one-line message (``<path>: <reason>``), not a substring; a header
with no line end whose NUL byte lies one byte past read_csv's 1 MB (+1 byte) header window is
refused for having no line end (the NUL is not named). Expected values are written out by hand
from the bytes each test writes."""

from __future__ import annotations

import pytest

from ascendprof.model.errors import InputError
from ascendprof.sysio import textio

MB = 1 << 20


def _write(tmp_path, name: str, data: bytes):
    p = tmp_path / name
    p.write_bytes(data)
    return p


def _raised(read, *args, **kwargs) -> InputError:
    with pytest.raises(InputError) as e:
        read(*args, **kwargs)
    return e.value


# --- the seed-37 survivors ---------------------------------------------------------------

@pytest.mark.parametrize("bom", [b"\xff\xfe", b"\xfe\xff"], ids=["LE", "BE"])
@pytest.mark.parametrize("read", [textio.csv_header, textio.read_csv])
def test_a_utf16_csv_is_refused_with_the_whole_message(tmp_path, read, bom):
    # "Name,Count" as UTF-16 (little or big endian) behind its byte-order mark
    text = "Name,Count\r\nMatMul,1\r\n"
    body = text.encode("utf-16-le" if bom == b"\xff\xfe" else "utf-16-be")
    path = _write(tmp_path, "op_statistic.csv", bom + body)
    e = _raised(read, path)
    reason = ("UTF-16 text, not UTF-8 (a spreadsheet's \"Unicode Text\" export?): "
              "save it as CSV UTF-8; not read")
    assert e.where is None
    assert e.reason == reason
    assert str(e) == f"{path}: {reason}"


def test_read_csv_looks_for_the_header_only_in_1_mb_and_1_byte(tmp_path):
    # no line end anywhere: 1,048,576 "a" (bytes 0 .. 1,048,575), "b" at byte 1,048,576 (the
    # one byte past 1 MB that read_csv still takes as header), a NUL at byte 1,048,577 and 10
    # "c". The header window is bytes 0 .. 1,048,576: no NUL in it, so the file is refused
    # for having no line end -- the NUL just past the window is not named.
    data = b"a" * MB + b"b" + b"\0" + b"c" * 10
    assert data.index(b"\0") == MB + 1
    path = _write(tmp_path, "kernel_details.csv", data)
    e = _raised(textio.read_csv, path)
    assert e.where is None
    assert str(e) == f"{path}: no line end in the first 1 MB: no CSV header; not read"
