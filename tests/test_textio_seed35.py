"""sysio.textio behaviour left untested by the seed-35 mutation sample: csv_header refuses a
header line longer than its 1 MB limit even when a line end follows, and reads a blank first
line as no names; a header that is not UTF-8 or that the csv module refuses is an InputError
with its reason; a body that is not UTF-8 is named with the byte; the all-text read nulls only
"" and "N/A", the typed read every MISSING_CELLS spelling; the typed read gives up after
_MAX_DEMOTIONS demoted columns and when Arrow sees another header; read_json names offsets in
the file even after a UTF-8 BOM; is_regular answers for a real file. Expected values are
written out by hand from the bytes each test writes."""

from __future__ import annotations

import csv

import pyarrow as pa
import pytest

from ascendprof.model.errors import InputError
from ascendprof.sysio import textio
from tests.test_textio_seed34 import _write

_NO_END = "no line end in the first 1 MB: no CSV header; not read"


def test_csv_header_refuses_a_header_line_longer_than_1_mb(tmp_path):
    # the header line is 1,050,000 bytes, its LF at byte 1,050,000 (past the 1,048,576-byte
    # limit but inside the 17th 64 KB block, which csv_header still reads): too long a header
    path = _write(tmp_path, "kernel_details.csv", b"a" * 1_050_000 + b"\n1\n")
    with pytest.raises(InputError) as e:
        textio.csv_header(path)
    assert e.value.reason == _NO_END


@pytest.mark.parametrize("first_end", [b"\n", b"\r\n", b"\r"])
def test_csv_header_of_a_blank_first_line_is_no_names(tmp_path, first_end):
    # the first line (up to its first CR or LF, byte 0) is empty: zero header names, and
    # read_csv refuses the file naming line 1 (Arrow alone would skip the blank line, take the
    # second line for the header and infer the column types)
    path = _write(tmp_path, "kernel_details.csv", first_end + b"Name,Duration(us)\n")
    assert textio.csv_header(path) == []
    with pytest.raises(InputError) as e:
        textio.read_csv(path)
    assert (e.value.reason, e.value.where) == ("the first line is blank: no header row",
                                               "line 1")


def test_a_header_that_is_not_utf8_is_refused_as_such(tmp_path):
    # byte 5 (0xff) of the header is no UTF-8: the header is decoded with U+FFFD replacement
    # (csv_header) and read_csv refuses the file naming that byte
    data = b"Name\xff,Count\nMatMul,1\n"
    path = _write(tmp_path, "op_statistic.csv", data)
    assert textio.csv_header(path) == ["Name\ufffd", "Count"]
    with pytest.raises(InputError) as e:
        textio.read_csv(path)
    assert e.value.reason == "not UTF-8 text"
    assert e.value.where == 4


def test_a_body_that_is_not_utf8_is_named(tmp_path):
    # "Name,Count\n" is 11 bytes, "MatMul" 6 more: the lone 0xe9 (Latin-1 é) is byte 17
    path = _write(tmp_path, "op_statistic.csv", b"Name,Count\nMatMul\xe9,1\n")
    with pytest.raises(InputError) as e:
        textio.read_csv(path)
    assert e.value.reason == "not UTF-8 text"
    assert e.value.where == 17
    assert str(e.value) == f"{path} at byte 17: not UTF-8 text"


def test_a_header_field_over_the_csv_limit_is_malformed(tmp_path):
    # one header name of 200,000 characters: more than the csv module's default field limit
    # of 131,072 (another reader may raise the process-wide limit, so it is set here)
    path = _write(tmp_path, "op_statistic.csv", b"n" * 200_000 + b",Count\nMatMul,1\n")
    old = csv.field_size_limit(131_072)
    try:
        with pytest.raises(InputError) as e:
            textio.csv_header(path)
    finally:
        csv.field_size_limit(old)
    assert e.value.reason == ("malformed CSV: header row: field larger than field limit "
                              "(131072)")


def test_the_text_read_nulls_only_empty_and_n_a(tmp_path):
    # without types only "" and "N/A" are null; "NA", "null", "nan", "NaN" and "#N/A" stay text
    # (a second column, as a one-column file's empty cell would be an empty line, skipped)
    cells = [b"", b"N/A", b"NA", b"null", b"nan", b"NaN", b"#N/A", b"None", b"-"]
    path = _write(tmp_path, "op_statistic.csv",
                  b"Name,Count\n" + b"".join(c + b",1\n" for c in cells))
    t = textio.read_csv(path)
    assert t.column("Name").to_pylist() == [None, None, "NA", "null", "nan", "NaN", "#N/A",
                                            "None", "-"]


def test_the_typed_read_nulls_every_missing_spelling(tmp_path):
    # with types, the MISSING_CELLS spellings ("None", "none", "-" among them) are null in an
    # int64 column, which therefore stays int64
    path = _write(tmp_path, "op_statistic.csv", b"Count\n1\nNone\nnone\n-\nnull\n2\n")
    t = textio.read_csv(path, types={"Count": pa.int64()})
    assert t.column("Count").type == pa.int64()
    assert t.column("Count").to_pylist() == [1, None, None, None, None, 2]


def test_the_typed_read_gives_up_after_three_demotions(tmp_path):
    # four int64 columns with a bad cell each: the typed read demotes three (_MAX_DEMOTIONS),
    # fails on the fourth and the file is read all text, the good column E as well
    path = _write(tmp_path, "op_statistic.csv", b"A,B,C,D,E\nx,x,x,x,5\n1,2,3,4,6\n")
    types = {c: pa.int64() for c in "ABCDE"}
    t = textio.read_csv(path, types=types)
    assert [t.column(c).type for c in "ABCDE"] == [pa.string()] * 5
    assert t.column("E").to_pylist() == ["5", "6"]
    # three bad columns are within the limit: E stays int64
    path = _write(tmp_path, "op_statistic3.csv", b"A,B,C,D,E\nx,x,x,4,5\n1,2,3,4,6\n")
    t = textio.read_csv(path, types=types)
    assert [t.column(c).type for c in "ABCDE"] == [pa.string()] * 3 + [pa.int64()] * 2


def test_a_typed_read_of_a_blank_first_line_is_refused_not_typed_by_arrow(tmp_path):
    # a blank first line: our header is [] but Arrow would skip the empty line and take
    # "Name,Count" for its header, then infer types; the file is refused instead
    path = _write(tmp_path, "op_statistic.csv", b"\nName,Count\nNA,-\n")
    with pytest.raises(InputError) as e:
        textio.read_csv(path, types={"Count": pa.int64()})
    assert e.value.reason == "the first line is blank: no header row"


def test_read_json_names_offsets_in_the_file_after_a_bom(tmp_path):
    # BOM (3 bytes) + '{"a": x}': the bad "x" is byte 3 + 6 = 9 of the file
    data = b'\xef\xbb\xbf{"a": x}'
    path = _write(tmp_path, "profiler_info_0.json", data)
    with pytest.raises(InputError) as e:
        textio.read_json(path)
    assert e.value.where == data.index(b"x") == 9
    assert e.value.reason.startswith("invalid JSON (")


def test_read_json_reads_a_bom_file(tmp_path):
    path = _write(tmp_path, "profiler_info_0.json", b'\xef\xbb\xbf{"rank_id": 3}')
    assert textio.read_json(path) == {"rank_id": 3}


def test_is_regular(tmp_path):
    path = _write(tmp_path, "a.csv", b"x\n")
    assert textio.is_regular(path) is True
    assert textio.is_regular(str(path)) is True
    assert textio.is_regular(tmp_path) is False
    assert textio.is_regular(tmp_path / "missing") is False
