"""`ascendprof gate` on exported CSVs that are damaged (compare.gate.csv_inputs, mutation
sample seed 41): the one-line error (exit 2) says exactly what is wrong, word for word:

- a step_trace_time.csv copy cut off right after the step cell of a row (the row has exactly
  as many cells as the index of its first number column, Computing) is refused as an empty
  Computing cell at that data row, not an internal error;
- a file that is not UTF-8 text is searched for its first foreign byte a block of at most
  1 MiB at a time (the file may be gigabytes): no read asks for the rest of the file.

The same kinds of gap at other places: a copy whose FIRST data row is cut off right after its
step cell is refused the same way (the check of which columns have any value reaches that row
first); a file starting with the UTF-8 BOM is also searched a block of at most 1 MiB at a time
(its first block is read after the 3 BOM bytes, by another read).

Every expected value is read off the bytes written here (headers as in
tests/test_gate_csv_inputs_seed38.py: the profiler's and ascendprof's own layouts).
"""

from __future__ import annotations

import builtins

import pytest

from test_gate_csv_inputs_seed38 import STEP_HEAD, error_line, gate, write

import ascendprof.compare.gate.csv_inputs as csv_inputs


def _good_step_trace(tmp_path):
    return write(tmp_path / "step_trace_time.csv",
                 [STEP_HEAD, "0,1,1,1,0,1,1,1,0,1,0", "0,2,1,1,0,1,1,1,0,1,0"])


def test_a_row_cut_off_right_after_its_step_cell_is_refused_at_computing(tmp_path):
    base = _good_step_trace(tmp_path)
    (tmp_path / "cur").mkdir()
    # data row 2 is "0,2": Device_id and Step only, 2 cells; Computing is column index 2
    # (Device_id 0, Step 1, Computing 2), just past the end of the row
    cur = write(tmp_path / "cur" / "step_trace_time.csv",
                [STEP_HEAD, "0,1,1,1,0,1,1,1,0,1,0", "0,2"])
    assert STEP_HEAD.split(",").index("Computing") == len("0,2".split(",")) == 2
    r = gate(base, cur)
    assert r.exit_code == 2, r.output
    assert error_line(r) == (f"ascendprof: error: {cur} at data row 2: column 'Computing': "
                             "'' is not a number (gate inputs must be complete)")


def test_a_first_row_cut_off_right_after_its_step_cell_is_refused_at_computing(tmp_path):
    base = _good_step_trace(tmp_path)
    (tmp_path / "cur").mkdir()
    # data row 1 is "0,1": 2 cells, Computing (index 2) just past its end; row 2 is complete
    cur = write(tmp_path / "cur" / "step_trace_time.csv",
                [STEP_HEAD, "0,1", "0,2,1,1,0,1,1,1,0,1,0"])
    r = gate(base, cur)
    assert r.exit_code == 2, r.output
    assert error_line(r) == (f"ascendprof: error: {cur} at data row 1: column 'Computing': "
                             "'' is not a number (gate inputs must be complete)")


@pytest.mark.parametrize("bom", [b"", b"\xef\xbb\xbf"], ids=["no-bom", "bom"])
def test_the_foreign_byte_search_reads_a_block_at_a_time(tmp_path, monkeypatch, bom):
    # a 3 MiB step_trace_time.csv whose only foreign byte (0xFF) is its last-but-one byte: the
    # search reads the first 3 bytes (where a BOM would be), then blocks of 1 MiB; a read of
    # the whole rest of the file would hold a gigabyte file in memory at once
    base = _good_step_trace(tmp_path)
    (tmp_path / "cur").mkdir()
    cur = tmp_path / "cur" / "step_trace_time.csv"
    size = 3 << 20
    row = b"0,1,1,1,0,1,1,1,0,1,0\n"
    head = bom + (STEP_HEAD + "\n").encode()
    body = head + row * ((size - len(head) - 2) // len(row))
    body += b"0" * (size - 2 - len(body))  # pad to size - 2 bytes, all ASCII
    data = body + b"\xff\n"
    cur.write_bytes(data)
    offset = size - 2
    assert len(data) == size and data.index(b"\xff") == offset and body[len(bom):].isascii()

    reads = []
    real_open = builtins.open

    class Recorder:
        def __init__(self, f):
            self._f = f

        def __enter__(self):
            self._f.__enter__()
            return self

        def __exit__(self, *exc):
            return self._f.__exit__(*exc)

        def read(self, *args):
            reads.append(args[0] if args else None)
            return self._f.read(*args)

        def __getattr__(self, name):
            return getattr(self._f, name)

    def recording_open(file, mode="r", *args, **kwargs):
        f = real_open(file, mode, *args, **kwargs)
        return Recorder(f) if "b" in mode else f

    monkeypatch.setattr(csv_inputs, "open", recording_open, raising=False)
    r = gate(base, cur)
    assert r.exit_code == 2, r.output
    assert error_line(r) == f"ascendprof: error: {cur} at byte {offset}: not UTF-8 text"
    # 3 bytes (the BOM or not), then 1 MiB blocks until the foreign byte
    assert reads and reads[0] == 3, reads
    assert all(n is not None and 0 <= n <= (1 << 20) for n in reads), reads
