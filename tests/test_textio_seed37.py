"""sysio.textio behaviour left untested by the seed-37 mutation sample, and the same gap at
every other place: each problem textio raises is compared as the WHOLE one-line message
(``<path>[ at <where>]: <reason>``), not a substring, so a change to any word, letter case or
number of a message a user reads fails a test.

Covered: the UTF-16 refusal; a header with no line end whose NUL byte lies one byte past the
1 MB (+1 byte) header window (read_csv names the missing line end, not the NUL); every other
message (cannot read, not a regular file and file_kind's words, too large by size and while
read, empty file, blank first line, not UTF-8, missing columns, NUL bytes, no line end,
over-long header field, Arrow's malformed row, invalid JSON and its byte offsets with and
without a BOM); the 1 MB header limit on both sides of its boundary for read_csv, and the
16 MB metadata limit on both sides of its boundary. Expected values are written out by hand
from the bytes each test writes (messages of Python's csv module, Arrow and orjson as the
pinned versions word them)."""

from __future__ import annotations

import csv
import os
import stat

import pyarrow as pa
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


# --- every other message, whole ----------------------------------------------------------

_READERS = [textio.read_csv, textio.csv_header, textio.read_json, textio.read_regular,
            textio.read_payload]


@pytest.mark.parametrize("read", _READERS)
def test_a_missing_file_cannot_be_read(tmp_path, read):
    path = tmp_path / "absent.csv"
    e = _raised(read, path)
    assert e.where is None
    assert str(e) == f"{path}: cannot read: No such file or directory"


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads a file without read permission")
def test_a_file_without_read_permission_cannot_be_read(tmp_path):
    path = _write(tmp_path, "op_summary.csv", b"A\n1\n")
    path.chmod(0)
    e = _raised(textio.read_csv, path)
    assert str(e) == f"{path}: cannot read: Permission denied"


@pytest.mark.parametrize("read", _READERS)
def test_a_directory_is_not_a_regular_file(tmp_path, read):
    path = tmp_path / "kernel_details.csv"
    path.mkdir()
    e = _raised(read, path)
    assert e.where is None
    assert str(e) == f"{path}: not a regular file (directory); not read"


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs mkfifo")
@pytest.mark.parametrize("read", _READERS)
def test_a_fifo_is_not_a_regular_file(tmp_path, read):
    path = tmp_path / "profiler_info_0.json"
    os.mkfifo(path)
    e = _raised(read, path)
    assert str(e) == f"{path}: not a regular file (FIFO); not read"


@pytest.mark.skipif(not os.path.exists("/dev/null"), reason="needs /dev/null")
@pytest.mark.parametrize("read", _READERS)
def test_a_character_device_is_not_a_regular_file(read):
    e = _raised(read, "/dev/null")
    assert str(e) == "/dev/null: not a regular file (character device); not read"


@pytest.mark.parametrize("mode, name", [
    (stat.S_IFREG | 0o644, "regular file"), (stat.S_IFDIR | 0o755, "directory"),
    (stat.S_IFIFO | 0o600, "FIFO"), (stat.S_IFCHR | 0o666, "character device"),
    (stat.S_IFBLK | 0o660, "block device"), (stat.S_IFSOCK | 0o777, "socket"),
    (0, "special file")])
def test_file_kind_names_every_kind(mode, name):
    assert textio.file_kind(mode) == name


def test_a_metadata_file_over_16_mb_is_refused_by_its_size(tmp_path):
    # METADATA_MAX_BYTES is 16 MB = 16,777,216 bytes; a (sparse) file one byte longer is refused
    # before it is read, naming its size
    assert textio.METADATA_MAX_BYTES == 16_777_216
    path = tmp_path / "profiler_metadata.json"
    with open(path, "wb") as f:
        f.truncate(16_777_217)
    e = _raised(textio.read_json, path, textio.METADATA_MAX_BYTES)
    assert e.where is None
    assert str(e) == (f"{path}: 16777217 bytes, more than the 16 MB a file of this kind may "
                      f"hold; not read")


def test_a_metadata_file_of_exactly_16_mb_is_read(tmp_path):
    # "[", 16,777,214 spaces, "]": exactly 16,777,216 bytes, the limit itself: read, an empty list
    path = _write(tmp_path, "profiler_metadata.json", b"[" + b" " * (16_777_216 - 2) + b"]")
    assert textio.read_json(path, textio.METADATA_MAX_BYTES) == []


def test_a_1_mb_limit_is_named_in_mb(tmp_path):
    # 1 MB + 1 byte against a 1 MB limit: "1048577 bytes, more than the 1 MB"
    path = _write(tmp_path, "profiler_info_0.json", b" " * (MB + 1))
    e = _raised(textio.read_regular, path, MB)
    assert str(e) == (f"{path}: 1048577 bytes, more than the 1 MB a file of this kind may hold; "
                      f"not read")


@pytest.mark.skipif(not os.path.exists("/proc/self/maps"), reason="needs Linux /proc")
def test_a_file_that_holds_more_than_its_size_says_is_refused_while_read():
    # /proc/self/maps is a regular file of st_size 0 that reads as many KB: past the size check,
    # the read of max_bytes + 1 = 11 bytes finds more than 10 (10 >> 20 is 0 MB)
    e = _raised(textio.read_regular, "/proc/self/maps", 10)
    assert e.where is None
    assert str(e) == "/proc/self/maps: more than the 0 MB a file of this kind may hold; not read"


@pytest.mark.parametrize("data", [b"", b" \r\n\t \n", b"\xef\xbb\xbf", b"\xef\xbb\xbf \n"],
                         ids=["nothing", "white space", "BOM", "BOM and white space"])
@pytest.mark.parametrize("read", [textio.read_csv, textio.csv_header, textio.read_json,
                                  textio.read_payload])
def test_an_empty_file_is_named_empty(tmp_path, read, data):
    path = _write(tmp_path, "op_summary.csv", data)
    e = _raised(read, path)
    assert e.where is None
    assert str(e) == f"{path}: empty file"


@pytest.mark.parametrize("first", [b"\n", b"\r\n", b"\r"], ids=["LF", "CRLF", "CR"])
def test_a_blank_first_line_is_named_at_line_1(tmp_path, first):
    path = _write(tmp_path, "op_summary.csv", first + b"Name,Count\nMatMul,1\n")
    e = _raised(textio.read_csv, path)
    assert e.where == "line 1"
    assert str(e) == f"{path} at line 1: the first line is blank: no header row"


def test_a_csv_that_is_not_utf8_names_the_byte(tmp_path):
    # "Name,Count\n" is bytes 0-10, "Mat" 11-13: the 0xFF is byte 14
    path = _write(tmp_path, "op_summary.csv", b"Name,Count\nMat\xffMul,1\n")
    e = _raised(textio.read_csv, path)
    assert e.where == 14
    assert str(e) == f"{path} at byte 14: not UTF-8 text"


def test_missing_columns_are_listed_in_order_with_commas(tmp_path):
    path = _write(tmp_path, "op_summary.csv", b"Name,Count\nMatMul,1\n")
    e = _raised(textio.read_csv, path, required=("Name", "Task Duration(us)", "Block Dim"))
    assert e.where is None
    assert str(e) == f"{path}: missing column(s) Task Duration(us), Block Dim"


@pytest.mark.parametrize("read", [textio.csv_header, textio.read_csv])
def test_nul_bytes_in_the_header_are_named_at_the_first(tmp_path, read):
    # "Op,Ty" is bytes 0-4: the first NUL is byte 5
    path = _write(tmp_path, "op_summary.csv", b"Op,Ty\0\0pe\nMatMul,1\n")
    e = _raised(read, path)
    assert e.where == 5
    assert str(e) == (f"{path} at byte 5: NUL bytes in the header line (a file cut off or "
                      f"zero-filled by a crash?); not read")


@pytest.mark.parametrize("read", [textio.csv_header, textio.read_csv])
def test_a_header_without_a_line_end_in_1_mb_is_refused(tmp_path, read):
    # 2 MB of "x" and no line end
    path = _write(tmp_path, "kernel_details.csv", b"x" * (2 * MB))
    e = _raised(read, path)
    assert e.where is None
    assert str(e) == f"{path}: no line end in the first 1 MB: no CSV header; not read"


def test_read_csv_reads_a_header_line_just_under_1_mb(tmp_path):
    # 16 names of 65,535 letters and 15 commas = 1,048,575 bytes (1 MB - 1), then the line end
    # at byte 1,048,575: read, 16 columns. (A header of exactly 1 MB passes textio's own check
    # but not Arrow's: its 1 MB parse block must hold the line end too -- see the report.)
    names = [chr(ord("a") + i) * 65_535 for i in range(16)]
    line = ",".join(names).encode()
    assert len(line) == MB - 1
    path = _write(tmp_path, "kernel_details.csv", line + b"\n" + b"1," * 15 + b"1\n")
    table = textio.read_csv(path)
    assert table.column_names == names
    assert table.num_rows == 1


@pytest.mark.parametrize("read", [textio.csv_header, textio.read_csv])
def test_a_header_line_of_1_mb_and_1_byte_is_refused(tmp_path, read):
    # the same header one byte longer (1,048,577 bytes, line end at byte 1,048,577): too long
    names = [chr(ord("a") + i) * 65_535 for i in range(16)]
    line = (",".join(names) + ",z").encode()
    assert len(line) == MB + 1
    path = _write(tmp_path, "kernel_details.csv", line + b"\n" + b"1," * 16 + b"\n")
    e = _raised(read, path)
    assert str(e) == f"{path}: no line end in the first 1 MB: no CSV header; not read"


@pytest.mark.parametrize("read", [textio.csv_header, textio.read_csv])
def test_a_header_field_over_the_csv_field_limit_is_malformed(tmp_path, read):
    # a header name of 200,000 letters: more than the csv module's default field limit, 131,072
    # (process-wide: a test before this one may have left another, so it is set here)
    path = _write(tmp_path, "op_summary.csv", b"Name," + b"n" * 200_000 + b"\nMatMul,1\n")
    old = csv.field_size_limit(131_072)
    try:
        e = _raised(read, path)
    finally:
        csv.field_size_limit(old)
    assert e.where is None
    assert str(e) == f"{path}: malformed CSV: header row: field larger than field limit (131072)"


def test_a_row_of_the_wrong_width_is_malformed_in_arrows_words(tmp_path):
    # row 2 holds 3 fields under a 2-name header; Arrow's first message line follows the prefix
    path = _write(tmp_path, "op_statistic.csv", b"Name,Count\nMatMul,1,2\n")
    e = _raised(textio.read_csv, path)
    assert e.where is None
    assert str(e) == (f"{path}: malformed CSV: CSV parse error: Row #2: Expected 2 columns, "
                      f"got 3: MatMul,1,2")


@pytest.mark.parametrize("data, where, why", [
    # '{"a": 1' is 7 bytes: the data ends at byte 7
    (b'{"a": 1', 7, "unexpected end of data"),
    # '{"a":"' is bytes 0-5: the 0xFF is byte 6 (orjson itself names byte 0)
    (b'{"a":"\xff"}', 6, "str is not valid UTF-8"),
])
def test_invalid_json_names_the_byte(tmp_path, data, where, why):
    path = _write(tmp_path, "profiler_info_0.json", data)
    e = _raised(textio.parse_json, path, data)
    assert e.where == where
    assert str(e) == f"{path} at byte {where}: invalid JSON ({why})"
    e = _raised(textio.read_json, path)
    assert str(e) == f"{path} at byte {where}: invalid JSON ({why})"


@pytest.mark.parametrize("data, where, why", [
    (b'{"a": 1', 10, "unexpected end of data"),  # 3 BOM bytes + 7
    (b'{"a":"\xff"}', 9, "str is not valid UTF-8"),  # 3 BOM bytes + 6
])
def test_invalid_json_behind_a_bom_names_the_byte_in_the_file(tmp_path, data, where, why):
    path = _write(tmp_path, "profiler_info_0.json", b"\xef\xbb\xbf" + data)
    e = _raised(textio.read_json, path)
    assert e.where == where
    assert str(e) == f"{path} at byte {where}: invalid JSON ({why})"


def test_read_payload_keeps_the_file_offsets_only_for_json(tmp_path):
    path = _write(tmp_path, "profiler_info_0.json", b"\xef\xbb\xbf{}")
    assert textio.read_payload(path) == b"{}"
    assert textio.read_payload(path, as_json=True) == b"   {}"


@pytest.mark.skipif(not os.path.exists("/proc/self/mem"), reason="needs Linux /proc")
@pytest.mark.parametrize("read", [textio.csv_header, textio.read_csv, textio.read_json])
def test_a_read_error_is_named_whole_by_every_reader(read):
    # /proc/self/mem is a regular file whose first page is never mapped: reading it fails, EIO
    e = _raised(read, "/proc/self/mem")
    assert e.where is None
    assert str(e) == "/proc/self/mem: cannot read: Input/output error"


# --- the other constants -----------------------------------------------------------------

def test_the_typed_read_nulls_exactly_the_nine_missing_spellings(tmp_path):
    # each of "", "N/A", "NA", "None", "none", "null", "nan", "NaN", "-" is null in an int64
    # column (which stays int64); any other spelling ("NULL" here) is a bad cell: the column
    # demoted to text, still with the nine spellings null. (A name column keeps the row with
    # the empty cell from being a blank line, which Arrow skips.)
    cells = [b"", b"N/A", b"NA", b"None", b"none", b"null", b"nan", b"NaN", b"-"]
    body = b"Name,Count\nk,1\n" + b"".join(b"k," + c + b"\n" for c in cells) + b"k,2\n"
    path = _write(tmp_path, "op_statistic.csv", body)
    t = textio.read_csv(path, types={"Count": pa.int64()})
    assert t.column("Count").type == pa.int64()
    assert t.column("Count").to_pylist() == [1] + [None] * 9 + [2]
    path = _write(tmp_path, "op_statistic2.csv", body + b"k,NULL\n")
    t = textio.read_csv(path, types={"Count": pa.int64()})
    assert t.column("Count").to_pylist() == ["1"] + [None] * 9 + ["2", "NULL"]


def _rows_csv(tmp_path):
    # "A,B\n" (4 bytes) and 224,000 rows of 16 bytes ("0000000,xxxxxxx\n"): 3,584,004 bytes.
    # Arrow parses 1 MB (1,048,576-byte) blocks cut at the last row end: block 1 holds the
    # header and (1,048,576 - 4) // 16 = 65,535 rows, blocks 2 and 3 65,536 rows each,
    # block 4 the last 224,000 - 65,535 - 2 * 65,536 = 27,393
    data = b"A,B\n" + b"".join(b"%07d,xxxxxxx\n" % i for i in range(224_000))
    assert len(data) == 3_584_004
    return _write(tmp_path, "kernel_details.csv", data)


@pytest.mark.parametrize("threads", [True, False])
@pytest.mark.parametrize("block_bytes, want", [
    # default STREAM_BLOCK_BYTES, 4 MB: 4 blocks of 1 MB a batch -> the whole file in one
    (None, [(224_000, 4)]),
    # 3 MB: 3 blocks a batch
    (3 << 20, [(65_535 + 2 * 65_536, 3), (27_393, 1)]),
    # 2 MB: 2 blocks a batch
    (2 << 20, [(65_535 + 65_536, 2), (65_536 + 27_393, 2)]),
    # 512 KB: parsed in 512 KB blocks (less than STREAM_PARSE_BYTES), one a batch:
    # (524,288 - 4) // 16 = 32,767 rows, then 32,768 each, 27,393 left at the end
    (512 << 10, [(32_767, 1)] + [(32_768, 1)] * 5 + [(27_393, 1)]),
])
def test_a_streamed_csv_comes_in_batches_of_1_mb_blocks(tmp_path, threads, block_bytes, want):
    path = _rows_csv(tmp_path)
    got = [(t.num_rows, t.column("A").num_chunks)
           for t in textio.open_csv_stream(path, {"A": pa.int64(), "B": pa.string()},
                                           threads=threads, block_bytes=block_bytes)]
    assert got == want
