"""The CSV/JSON readers of sysio.textio on spec-built files: their errors name the file and
what is wrong, duplicated headers keep the first column, E-notation leaves decimal columns as
text, a file read whole or only its header line sees the same header. Expected values are
written out by hand from the bytes each test writes."""

from __future__ import annotations

import os
import stat

import pyarrow as pa
import pytest

from ascendprof.model.errors import InputError
from ascendprof.sysio import textio


def _write(tmp_path, name: str, data: bytes):
    p = tmp_path / name
    p.write_bytes(data)
    return p


@pytest.mark.parametrize("mode, kind", [
    (stat.S_IFREG, "regular file"), (stat.S_IFDIR, "directory"), (stat.S_IFIFO, "FIFO"),
    (stat.S_IFCHR, "character device"), (stat.S_IFBLK, "block device"),
    (stat.S_IFSOCK, "socket"), (0, "special file")])
def test_file_kind_in_words(mode, kind):
    assert textio.file_kind(mode | 0o644) == kind


def test_nul_bytes_in_the_header_name_file_and_byte(tmp_path):
    path = _write(tmp_path, "op_statistic.csv", b"Op Type,Co\0unt\n1,2\n")
    for read in (textio.read_csv, textio.csv_header):
        with pytest.raises(InputError) as e:
            read(path)
        assert e.value.path == path or str(e.value.path) == str(path)
        assert "NUL bytes in the header line (a file cut off or zero-filled by a crash?); " \
               "not read" in str(e.value)
        assert e.value.where == 10  # 'Op Type,Co' is 10 bytes (0-9): the NUL is byte 10


def test_a_lone_cr_ends_the_header_as_it_ends_a_row(tmp_path):
    # a lone CR inside an unquoted header name ends the line there, as it ends every row for
    # Arrow's parser (a spreadsheet's "CSV (Macintosh)" ends each row with a lone CR): the
    # header is "Op Type,Co", and the next line "unt" is a row of one field where two are due
    path = _write(tmp_path, "op_statistic.csv", b'Op Type,Co\runt\r\n1,2\n')
    assert textio.csv_header(path) == ["Op Type", "Co"]
    with pytest.raises(InputError) as e:
        textio.read_csv(path)
    assert str(e.value.path) == str(path) and "malformed CSV" in str(e.value)
    # CR-only line endings throughout: header and rows as with LF
    path = _write(tmp_path, "mac.csv", b"Name,Duration(us)\rx,1.5\ry,2\r")
    assert textio.csv_header(path) == ["Name", "Duration(us)"]
    assert textio.read_csv(path).column("Name").to_pylist() == ["x", "y"]


def test_header_crlf_and_unended(tmp_path):
    # CRLF: the CR is no part of the last name; whole read and header-only read agree
    path = _write(tmp_path, "a.csv", b"Name,Duration(us)\r\nx,1.5\r\n")
    assert textio.csv_header(path) == ["Name", "Duration(us)"]
    # only the CR goes: the names as written (the TAB an absolute time's header may carry)
    path = _write(tmp_path, "t.csv", b"Name,Start Time(us)\t\r\nx,1\r\n")
    assert textio.csv_header(path) == ["Name", "Start Time(us)\t"]
    path = _write(tmp_path, "a.csv", b"Name,Duration(us)\r\nx,1.5\r\n")
    assert textio.read_csv(path).column_names == ["Name", "Duration(us)"]
    # a header-only file without a line end is a header
    path = _write(tmp_path, "b.csv", b"Name,Count")
    assert textio.csv_header(path) == ["Name", "Count"]
    # no line end within the first MB: no header
    big = _write(tmp_path, "c.csv", b"x" * (textio.HEADER_MAX_BYTES + 10))
    for read in (textio.read_csv, textio.csv_header):
        with pytest.raises(InputError, match="no line end in the first 1 MB"):
            read(big)
    # a line end in the second 64 KB block still ends the header
    name = "N" * 70_000
    path = _write(tmp_path, "d.csv", name.encode() + b",Count\n1,2\n")
    assert textio.csv_header(path) == [name, "Count"]


def test_duplicated_headers_keep_the_first_and_mark_the_rest(tmp_path):
    path = _write(tmp_path, "a.csv", b"Name,Count,Name,Count,Other\nx,1,y,2,z\n")
    for types in (None, {"Count": pa.int64()}):
        t = textio.read_csv(path, types=types)
        assert t.column_names == ["Name", "Count", "Name.dup", "Count.dup", "Other"]
        assert t.column("Name").to_pylist() == ["x"] and t.column("Name.dup").to_pylist() == ["y"]
    # names equal only after an alias are duplicates too
    path = _write(tmp_path, "b.csv", b"Block Dim,Block Num\n1,2\n")
    t = textio.read_csv(path, aliases={"Block Dim": "Block Num"}, types={"Block Num": pa.int64()})
    assert t.column_names == ["Block Num", "Block Num.dup"]
    assert t.column("Block Num").to_pylist() in (["1"], [1])
    # an alias renames the column before it is typed
    path = _write(tmp_path, "c.csv", b"Block Dim,Name\n4,x\n")
    t = textio.read_csv(path, aliases={"Block Dim": "Block Num"}, types={"Block Num": pa.int64()})
    assert t.column_names == ["Block Num", "Name"]
    assert t.column("Block Num").type == pa.int64() and t.column("Block Num").to_pylist() == [4]


def test_typed_read_unnamed_columns_and_demotion(tmp_path):
    path = _write(tmp_path, "a.csv", b"Count,Name,Size\n1,x,2.5\n3,y,oops\n")
    t = textio.read_csv(path, types={"Count": pa.int64(), "Size": pa.float64()},
                        other=pa.string())
    assert t.column("Count").to_pylist() == [1, 3]
    # a cell that is not a number: the column comes back as text
    assert t.column("Size").type == pa.string() and t.column("Size").to_pylist() == ["2.5",
                                                                                    "oops"]
    assert t.column("Name").type == pa.string()
    # other given: the columns not named take it
    path = _write(tmp_path, "b.csv", b"Count,Extra\n1,7\n")
    t = textio.read_csv(path, types={"Count": pa.int64()}, other=pa.int64())
    assert t.column("Extra").type == pa.int64() and t.column("Extra").to_pylist() == [7]


@pytest.mark.parametrize("mark", [b"E+", b"e+"])
def test_e_notation_leaves_decimal_columns_as_text(tmp_path, mark):
    path = _write(tmp_path, "a.csv", b"Start Time(us),Count\n1.7364108" + mark + b"15,2\n")
    t = textio.read_csv(path, types={"Start Time(us)": pa.decimal128(22, 3),
                                     "Count": pa.int64()})
    assert t.column("Start Time(us)").type == pa.string()
    assert t.column("Count").to_pylist() == [2]
    # without E-notation the decimal column is read exactly
    path = _write(tmp_path, "b.csv", b"Start Time(us),Count\n1736410815.250,2\n")
    t = textio.read_csv(path, types={"Start Time(us)": pa.decimal128(22, 3)})
    assert pa.types.is_decimal(t.column("Start Time(us)").type)


def test_size_limit_names_the_file_and_the_limit(tmp_path):
    path = _write(tmp_path, "a.json", b"[" + b"1," * (1 << 20) + b"1]")
    with pytest.raises(InputError) as e:
        textio.read_regular(path, 1 << 20)
    assert str(e.value.path) == str(path)
    assert f"{path.stat().st_size} bytes, more than the 1 MB a file of this kind may hold" \
        in str(e.value)
    assert textio.read_regular(path, 4 << 20)[:3] == b"[1,"
    with pytest.raises(InputError, match="more than the 1 MB"):
        textio.read_json(path, 1 << 20)


def test_open_regular_refuses_a_fifo_without_blocking(tmp_path):
    path = tmp_path / "communication.json"
    os.mkfifo(path)
    with pytest.raises(InputError, match=r"not a regular file \(FIFO\); not read"):
        textio.read_regular(path)


def test_typed_read_of_a_row_of_the_wrong_width_is_the_text_readers_error(tmp_path):
    # not a cell conversion error: the typed read gives up and the text read names the row
    path = _write(tmp_path, "a.csv", b"Count,Name\n1,x\n2,y,extra\n")
    with pytest.raises(InputError) as e:
        textio.read_csv(path, types={"Count": pa.int64()})
    assert str(e.value.path) == str(path)
    bad: list = []
    t = textio.read_csv(path, types={"Count": pa.int64()}, bad_rows=bad)
    assert t.column("Count").to_pylist() == [1] and len(bad) == 1


def test_an_empty_first_line_is_a_line_end_even_in_a_large_file(tmp_path):
    # the header line is empty (a line end at byte 0): the error is not "no line end"
    path = _write(tmp_path, "a.csv", b"\n" + b"x" * (textio.HEADER_MAX_BYTES + 10) + b"\n")
    with pytest.raises(InputError) as e:
        textio.read_csv(path)
    assert "no line end" not in str(e.value)
    assert (e.value.reason, e.value.where) == ("the first line is blank: no header row",
                                               "line 1")


def test_a_file_that_grew_past_the_limit_while_read_is_refused(tmp_path, monkeypatch):
    # fstat saw it within the limit (0 bytes); the read finds more than 1 MB
    path = _write(tmp_path, "a.json", b"[" + b"1," * (1 << 20) + b"1]")
    real = os.fstat

    def fstat_then_grown(fd):
        st = real(fd)
        return os.stat_result((st.st_mode, st.st_ino, st.st_dev, st.st_nlink, st.st_uid,
                               st.st_gid, 0, st.st_atime, st.st_mtime, st.st_ctime))
    monkeypatch.setattr(textio.os, "fstat", fstat_then_grown)
    with pytest.raises(InputError) as e:
        textio.read_regular(path, 1 << 20)
    assert str(e.value.path) == str(path)
    assert "more than the 1 MB a file of this kind may hold; not read" in str(e.value)


def test_utf16_text_is_named_as_such(tmp_path):
    # a spreadsheet's "Unicode Text": UTF-16 with its byte-order mark, little or big endian;
    # every ASCII character has a NUL byte, which must not read as a zero-filled file
    for enc, bom in (("utf-16-le", b"\xff\xfe"), ("utf-16-be", b"\xfe\xff")):
        path = _write(tmp_path, f"{enc}.csv", bom + "Name\tDuration(us)\nx\t1\n".encode(enc))
        for read in (textio.csv_header, textio.read_csv):
            with pytest.raises(InputError, match="UTF-16 text, not UTF-8") as e:
                read(path)
            assert str(e.value.path) == str(path)
