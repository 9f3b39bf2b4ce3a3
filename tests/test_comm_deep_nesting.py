"""communication.json with an op holding a value nested very deeply (a damaged or hostile file;
no profiler writes one), read by every way the program reads that file: the per-value reader,
the fast reader on a small file (read whole) and on a large one (streamed).

JSON parsers stop at some depth: orjson reads 1024 levels but writes only 255, msgspec stops
near 1000 with a RecursionError. Each way either reads the op (as every other way does) or
raises the file's InputError -- never a TypeError or RecursionError, which would end the whole
run instead of being one rank's problem.

Expected values by hand: the op "a@g" (p2p) of step 1 has Elapse Time 1 ms = 1,000,000 ns; a
value of 1030 levels is over orjson's 1024, so that file is invalid JSON to every way.
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from ascendprof.model import schemas as S
from ascendprof.model.errors import InputError
from ascendprof.readers import communication as C
from ascendprof.readers.communication import fast as F

RANK = 3


def _file(tmp_path, depth: int):
    deep = "[" * depth + "]" * depth
    path = tmp_path / "communication.json"
    path.write_text('{"step1": {"p2p": {"a@g": {"Communication Time Info": '
                    '{"Elapse Time(ms)": 1}, "x": %s}}}}' % deep)
    return path


WAYS = {
    "per-value": lambda p: C.read_communication_per_value(p, RANK),
    "whole": lambda p: C.read_communication(p, RANK),
    "streamed": lambda p: {S.COMM_OPS: pa.concat_tables(
        [t[S.COMM_OPS] for t in F.iter_tables(p, RANK, whole_file_bytes=0)])},
}


# 300: deeper than orjson writes (the per-value reader writes the op's text again); 1000 and
# 1020: deeper than msgspec reads, within what orjson reads
@pytest.mark.parametrize("depth", [300, 1000, 1020])
@pytest.mark.parametrize("way", list(WAYS))
def test_a_deeply_nested_value_still_reads_the_op(tmp_path, depth, way):
    ops = WAYS[way](_file(tmp_path, depth))[S.COMM_OPS]
    assert ops.select(["rank", "step", "kind", "op_name", "group", "elapse_ns"]).to_pylist() \
        == [{"rank": RANK, "step": 1, "kind": "p2p", "op_name": "a", "group": "g",
             "elapse_ns": 1_000_000}]


@pytest.mark.parametrize("way", list(WAYS))
def test_a_value_deeper_than_json_readers_go_is_the_files_error(tmp_path, way):
    path = _file(tmp_path, 1030)
    with pytest.raises(InputError) as e:
        WAYS[way](path)
    assert e.value.path == str(path)
    assert "invalid JSON" in e.value.reason
