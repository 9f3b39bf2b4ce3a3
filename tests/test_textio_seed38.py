"""sysio.textio behaviour left untested by the seed-38 mutation sample.

- A header whose last name ends in a capital X: only a carriage return is cut from the end of
  the header line, no other character.
- csv_header of a file of exactly 1 MB (HEADER_MAX_BYTES) without a line end: the whole file is
  within the limit, so it is the header (only a file longer than 1 MB has "no line end in the
  first 1 MB").
"""

from __future__ import annotations

import pytest

from ascendprof.sysio import textio

MB = 1 << 20


@pytest.mark.parametrize("end", [b"\n", b"\r\n"])
@pytest.mark.parametrize("read", ["csv_header", "read_csv"])
def test_a_header_ending_in_a_capital_x_keeps_it(tmp_path, read, end):
    path = tmp_path / "op_statistic.csv"
    path.write_bytes(b"Name,MAX" + end + b"MatMul,1" + end)
    if read == "csv_header":
        assert textio.csv_header(path) == ["Name", "MAX"]
    else:
        assert textio.read_csv(path).column_names == ["Name", "MAX"]


def test_csv_header_of_a_1_mb_file_without_a_line_end_is_its_header(tmp_path):
    # "a," 524,288 times is 1,048,576 bytes: 524,288 names "a" and an empty last one
    path = tmp_path / "op_statistic.csv"
    path.write_bytes(b"a," * (MB // 2))
    assert path.stat().st_size == textio.HEADER_MAX_BYTES
    names = textio.csv_header(path)
    assert len(names) == MB // 2 + 1
    assert names[0] == "a" and names[-2] == "a" and names[-1] == ""

