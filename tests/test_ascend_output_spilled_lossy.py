"""readers/ascend_output.py: a kernel_details.csv that went through a spreadsheet (times in
E-notation) gets the same "precision lost" warnings whether it is read whole or, being large,
in batches and spilled to disk (through ``read_source`` on a copy of a real Level1 rank).
Expected texts worked out by hand in the test."""

from __future__ import annotations

from ascendprof.model import schemas as S
from test_ascend_output_seed42 import OUT, _copy, _problems, _read, spill_all  # noqa: F401

# kernel_details.csv of the fixture rank: trans_TransData_0 (line 2) lasts 53.741 us, and
# trans_TransData_1 (line 3) starts at 1736408883704801.156 us (each cell is the only one with
# that text). A spreadsheet writes them 5.3741E+01 and 1.73641E+15 (6 significant digits).
WANT = [
    "column 'Start Time(us)': 1 value(s) in E-notation (e.g. 1.73641E+15), precision lost (the "
    "file went through a spreadsheet): 1 absolute time(s) left empty (6 significant digits put "
    "them hours off)",
    "column 'Duration(us)': 1 value(s) in E-notation (e.g. 5.3741E+01), precision lost (the "
    "file went through a spreadsheet): read as written (about 6 significant digits)",
]


def _mangle(rank_dir):
    kd = rank_dir / OUT / "kernel_details.csv"
    text = kd.read_text(encoding="utf-8")
    assert text.count(",53.741,") == 1 and text.count(",1736408883704801.156\t,") == 1
    kd.write_text(text.replace(",53.741,", ",5.3741E+01,")
                  .replace(",1736408883704801.156\t,", ",1.73641E+15\t,"), encoding="utf-8")


def _warned(data):
    return [p.reason for p in _problems(data, "kernel_details.csv")]


def test_e_notation_in_kernel_details_read_whole(tmp_path):
    rank_dir = _copy(tmp_path)
    _mangle(rank_dir)
    data = _read(rank_dir)
    assert S.KERNELS not in data.spilled
    assert sorted(_warned(data)) == sorted(WANT)


def test_e_notation_in_a_large_kernel_details_is_warned_as_when_read_whole(tmp_path, spill_all):
    rank_dir = _copy(tmp_path)
    _mangle(rank_dir)
    data = _read(rank_dir)
    assert S.KERNELS in data.spilled  # the large-file path
    assert sorted(_warned(data)) == sorted(WANT)
    kernels = data.spilled[S.KERNELS].read(["name", "dur_ns", "start_ns"]).to_pylist()
    row = {k["name"]: k for k in kernels}
    assert row["trans_TransData_0"]["dur_ns"] == 53_741  # 5.3741E+01 us, read as written
    assert row["trans_TransData_1"]["start_ns"] is None  # an absolute time hours off: empty


def test_e_notation_split_between_two_blocks_is_seen(tmp_path):
    # "1.5E" ends the first 4-byte block, "+01" starts the next: the pair is seen across them;
    # a file with only "E-" (a negative exponent, not what a spreadsheet writes for a time) or
    # "+E" is not E-notation by this check
    from ascendprof.sysio.textio import holds_e_notation
    f = tmp_path / "a.csv"
    f.write_bytes(b"1.5E+01\n")
    assert holds_e_notation(f, block_bytes=4)
    f.write_bytes(b"1.5e+01\n")
    assert holds_e_notation(f, block_bytes=4)
    for text in (b"1.5E-01\n", b"+E,1\n", b""):
        f.write_bytes(text)
        assert not holds_e_notation(f, block_bytes=4), text
