"""What the batches of the fast communication.json reader (ascendprof.readers.communication.batch,
BatchProblems and first_bad) say once the file is read, on small hand-written files read the
way users read them (whole, and streamed in tiny and in large blocks): the warnings of the block
scanner and of the per-value batches come out in file order, a left-out op whose key has no '@'
is named by its whole key, the ops left out in several batches are counted together with the
first one in the file as the example (and its step as the place), and reading without a
problems sink gives the same tables without failing.

(The 7 survivors of seed 35 are equivalent: see mutation/survivors/communication_batch.toml.)
Expected values are written out by hand from the file texts; the per-value reader, the
definition the fast reader must agree with, is compared where it reads the same file.
"""

from __future__ import annotations

import json

import pyarrow as pa

from ascendprof.model import schemas as S
from ascendprof.model.problems import Problems
from ascendprof.readers import communication as C
from ascendprof.readers.communication import fast as F

RANK = 5
BLOCKS = (16, 1 << 20)  # 16 bytes: about one op a batch; 1 MiB: the whole file in one batch
LEFT_OUT = "op(s) left out: a Communication Time Info time that is not a non-negative number"


def _write(tmp_path, doc) -> str:
    path = tmp_path / "communication.json"
    path.write_text(json.dumps(doc))
    return path


def _streamed_parts(path, problems, block):
    return list(F.iter_tables(path, RANK, problems, whole_file_bytes=0, block_bytes=block))


def _streamed(path, problems=None, block=16):
    parts = _streamed_parts(path, problems, block)
    return {n: pa.concat_tables([p[n] for p in parts]) for n in parts[0]}


def _said(problems):
    return [(p.reason, p.where, p.severity) for p in problems]


def _time(**times):
    return {"Communication Time Info": {f"{k.replace('_', ' ')} Time(ms)": v
                                        for k, v in times.items()}}


def test_scanner_and_per_value_warnings_come_out_in_file_order(tmp_path):
    """Three ops that are warned about, in this file order: 'n@g' is a number (the block
    scanner skips it), 'x@g' has a Communication Time Info that is a number (its batch goes
    the per-value way, which skips it), 'm@h' in step2 is a list (the scanner again). The
    scanner's warnings are gathered apart from the batches', yet all three come out in file
    order, in one block or in many, as the per-value reader says them."""
    doc = {"step1": {"collective": {"n@g": 5, "x@g": {"Communication Time Info": 5},
                                    "a@g": _time(Elapse=1.0)}},
           "step2": {"p2p": {"m@h": [1], "c@h": _time(Elapse=2.0)}}}
    path = _write(tmp_path, doc)
    want = ["op 'n@g' in step1 is not an object; skipped",
            "op 'x@g' in step1: 'Communication Time Info' is not an object; op skipped",
            "op 'm@h' in step2 is not an object; skipped"]
    for block in BLOCKS:
        problems = Problems()
        tables = _streamed(path, problems, block)
        assert [p.reason for p in problems] == want, block
        assert all(p.severity == "warning" and p.rank == RANK and p.path == str(path)
                   for p in problems)
        assert tables[S.COMM_OPS]["op_name"].to_pylist() == ["a", "c"]
    oracle = Problems()
    C.read_communication_per_value(path, RANK, oracle)
    assert [p.reason for p in oracle] == want


def test_a_left_out_op_without_at_is_named_by_its_whole_key(tmp_path):
    """'plainop' (no '@': op name 'plainop', group '') has Elapse Time -1.5: the one problem
    names it as name@group = 'plainop@', on the whole-file way (keys as a list) and streamed
    (keys as an Arrow array), as the per-value reader does; the other op stays a row."""
    doc = {"step7": {"collective": {"plainop": _time(Elapse=-1.5), "a@g": _time(Elapse=1.0)}}}
    path = _write(tmp_path, doc)
    want = [(f"1 {LEFT_OUT} (e.g. Elapse Time(ms) = -1.5 in plainop@)", "step7", "skipped")]
    reads = [("whole", lambda p: F.read_tables(path, RANK, p))]
    reads += [(f"block {b}", lambda p, b=b: _streamed(path, p, b)) for b in BLOCKS]
    for how, read in reads:
        problems = Problems()
        tables = read(problems)
        assert _said(problems) == want, how
        assert [(p.rank, p.path) for p in problems] == [(RANK, str(path))]
        assert tables[S.COMM_OPS]["op_name"].to_pylist() == ["a"], how
    oracle = Problems()
    C.read_communication_per_value(path, RANK, oracle)
    assert _said(oracle) == want


def test_ops_left_out_in_several_batches_are_counted_together(tmp_path):
    """Three ops left out: 'a@g' (Elapse -1.5) in step1, then 'c@h' (Wait -2.5) and 'd@h'
    (Elapse -3.5) in step2; 'b@g' and 'e@h' are fine. In 16-byte blocks they fall in different
    batches; still one problem: 1 + 2 = 3 ops, the example is the first in the file ('a@g',
    Elapse Time -1.5) and the place its step, 'step1'."""
    doc = {"step1": {"collective": {"a@g": _time(Elapse=-1.5), "b@g": _time(Elapse=1.0)}},
           "step2": {"p2p": {"c@h": _time(Elapse=2.0, Wait=-2.5), "d@h": _time(Elapse=-3.5),
                             "e@h": _time(Elapse=4.0)}}}
    path = _write(tmp_path, doc)
    assert len(_streamed_parts(path, Problems(), 16)) >= 2  # really several batches
    want = [(f"3 {LEFT_OUT} (e.g. Elapse Time(ms) = -1.5 in a@g)", "step1", "skipped")]
    reads = [("whole", lambda p: F.read_tables(path, RANK, p))]
    reads += [(f"block {b}", lambda p, b=b: _streamed(path, p, b)) for b in BLOCKS]
    for how, read in reads:
        problems = Problems()
        tables = read(problems)
        assert _said(problems) == want, how
        assert tables[S.COMM_OPS]["op_name"].to_pylist() == ["b", "e"], how
    oracle = Problems()
    C.read_communication_per_value(path, RANK, oracle)
    assert _said(oracle) == want


def test_reading_without_a_problems_sink_gives_the_same_tables(tmp_path):
    """problems=None (the API's default): a file with ops warned about and ops left out is
    read without failing, to the same tables as with a sink (the problems are just not said)."""
    doc = {"step1": {"collective": {"n@g": 5, "x@g": {"Communication Time Info": 5},
                                    "a@g": _time(Elapse=-1.5), "b@g": _time(Elapse=1.0)}},
           "step2": {"p2p": {"d@h": _time(Elapse=-3.5), "e@h": _time(Elapse=4.0)}}}
    path = _write(tmp_path, doc)
    for block in BLOCKS:
        problems = Problems()
        with_sink = _streamed(path, problems, block)
        assert len(problems) == 3  # two warnings, one 'left out'
        without = _streamed(path, None, block)
        for name in with_sink:
            assert without[name].equals(with_sink[name]), (block, name)
        assert without[S.COMM_OPS]["op_name"].to_pylist() == ["b", "e"]
    del doc["step1"]["collective"]["n@g"], doc["step1"]["collective"]["x@g"]
    path = _write(tmp_path, doc)  # all ops objects: the whole-file fast way
    problems = Problems()
    with_sink = F.read_tables(path, RANK, problems)
    assert len(problems) == 1
    without = F.read_tables(path, RANK, None)
    for name in with_sink:
        assert without[name].equals(with_sink[name]), name
