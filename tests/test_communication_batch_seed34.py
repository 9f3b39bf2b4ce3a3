"""The shared batch helpers of the fast communication.json reader
(ascendprof.readers.communication.batch), through the public fast reader on edited copies of a
real rank's file: an op key without '@' keeps its whole text as op name and '' as group next to
keys with one, a key with two '@' splits at the last one (and the bad-time problem names it
whole), and the
problems said at the end of a streamed file carry the file's path and the caller's rank.

Expected values are written out by hand from the key texts (name before the last '@', group
after it) and compared with the per-value reader where it is the definition.
"""

from __future__ import annotations

import json

import pyarrow as pa

from ascendprof.model import schemas as S
from ascendprof.model.problems import Problems
from ascendprof.readers import communication as C
from ascendprof.readers.communication import fast as F
from conftest import QWEN3

REAL = sorted(QWEN3.glob("rank_*/ASCEND_PROFILER_OUTPUT/communication.json"))[0]
RANK = 3


def _streamed(path, rank=RANK, problems=None, block=1 << 20):
    parts = list(F.iter_tables(path, rank, problems, whole_file_bytes=0, block_bytes=block))
    return {n: pa.concat_tables([p[n] for p in parts]) for n in parts[0]}


def _first_op(doc):
    step = next(iter(doc))
    kind = next(iter(doc[step]))
    key = next(k for k in doc[step][kind] if not k.startswith("Total"))
    return step, kind, key


def _write_renamed(tmp_path, new_keys):
    """The real file with its first ops renamed to ``new_keys`` (same op bodies)."""
    doc = json.loads(REAL.read_text())
    step, kind, _ = _first_op(doc)
    ops = doc[step][kind]
    real = [k for k in ops if not k.startswith("Total")][:len(new_keys)]
    assert len(real) == len(new_keys)
    renamed = {}
    for k, v in ops.items():
        renamed[new_keys[real.index(k)] if k in real else k] = v
    doc[step][kind] = renamed
    path = tmp_path / "communication.json"
    path.write_text(json.dumps(doc))
    return path, step


def _names_groups(table, step):
    t = table.filter(pa.compute.equal(table["step_key"], step))
    return dict(zip(t["op_name"].to_pylist(), t["group"].to_pylist()))


def test_keys_with_and_without_at_in_one_batch(tmp_path):
    """'plainop' (no '@') gives op name 'plainop', group ''; 'x@y@grp' gives 'x@y', 'grp';
    'hcom_a@g1' gives 'hcom_a', 'g1' -- in the same batch, both ways of reading."""
    path, step = _write_renamed(tmp_path, ["plainop", "x@y@grp", "hcom_a@g1"])
    want = {"plainop": "", "x@y": "grp", "hcom_a": "g1"}
    for got in (_streamed(path), C.read_communication(path, RANK)):
        pairs = _names_groups(got[S.COMM_OPS], step)
        for name, group in want.items():
            assert pairs[name] == group, (name, pairs)
        assert None not in pairs and None not in pairs.values()
        assert "plainop@" not in pairs and "hcom_a@g1" not in pairs
    per_value = C.read_communication_per_value(path, RANK)
    assert _names_groups(per_value[S.COMM_OPS], step) == _names_groups(
        _streamed(path)[S.COMM_OPS], step)


def test_bad_time_problem_names_the_key_split_at_last_at_with_the_path(tmp_path):
    """An op 'x@y@grp' whose Elapse Time is -1: the one problem says 'in x@y@grp' and names
    the file and the rank."""
    doc = json.loads(REAL.read_text())
    step, kind, key = _first_op(doc)
    ops = doc[step][kind]
    body = ops.pop(key)
    body["Communication Time Info"]["Elapse Time(ms)"] = -1
    ops["x@y@grp"] = body
    path = tmp_path / "communication.json"
    path.write_text(json.dumps(doc))
    for read in (lambda p: _streamed(path, problems=p),
                 lambda p: C.read_communication(path, RANK, p)):
        problems = Problems()
        read(problems)
        bad = [p for p in problems if "left out" in p.reason]
        assert len(bad) == 1
        assert "1 op(s) left out" in bad[0].reason
        assert "Elapse Time(ms) = -1" in bad[0].reason
        assert bad[0].reason.endswith(" in x@y@grp)")
        assert bad[0].path == str(path)
        assert bad[0].rank == RANK


def test_an_op_that_is_not_an_object_is_warned_with_the_rank(tmp_path):
    """An op entry that is a number, not an object: the streamed read warns once, naming the
    file and the caller's rank, as the per-value reader does."""
    doc = json.loads(REAL.read_text())
    step, kind, key = _first_op(doc)
    doc[step][kind][key] = 5
    path = tmp_path / "communication.json"
    path.write_text(json.dumps(doc))
    problems = Problems()
    _streamed(path, problems=problems, block=512)
    said = [p for p in problems if "is not an object" in p.reason]
    assert len(said) == 1
    assert repr(key) in said[0].reason
    assert said[0].path == str(path)
    assert said[0].rank == RANK
    want = Problems()
    C.read_communication_per_value(path, RANK, want)
    assert [(p.reason, p.rank) for p in want if "is not an object" in p.reason] == \
        [(said[0].reason, RANK)]
