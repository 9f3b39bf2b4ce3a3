"""communication.json with an op holding a value nested deeper than orjson writes (255
levels; it reads 1024), read by the tolerant reader (ascendprof.readers.communication.per_value):
the op's ``opinfo_json`` (kept for cluster_communication.json, which msprof-analyze copies as
is) is still the op's compact JSON text, written by Python's json module for such an op:

- the text of the deep op itself and of every other op of the file (a shallow one is written
  too once one op is too deep), not ``null``;
- compact (``,`` and ``:`` with no spaces), as orjson writes the shallow ops;
- non-ASCII text written as is (UTF-8), not as ``\\uXXXX`` escapes.

Expected values: the file is written as compact JSON text by hand below, so every op's
``opinfo_json`` must be exactly its text in the file.
"""

from __future__ import annotations

import json

import pytest

from ascendprof.model import schemas as S
from ascendprof.model.problems import Problems
from ascendprof.readers import communication as C
from test_comm_deep_nesting import RANK

DEPTH = 300  # deeper than orjson writes (255), well within what it reads (1024)

# op a: a 300-deep list of lists, an object of two fields and non-ASCII text
DEEP_OP = ('{"Communication Time Info":{"Elapse Time(ms)":1,"Start Timestamp(us)":5},'
           '"x":' + "[" * DEPTH + "]" * DEPTH + ',"note":"é ü 中文"}')
# op b: an ordinary op
SHALLOW_OP = ('{"Communication Time Info":{"Elapse Time(ms)":2,"Start Timestamp(us)":7},'
              '"note":"ß"}')


def _file(tmp_path):
    path = tmp_path / "communication.json"
    path.write_bytes(('{"step1":{"p2p":{"a@g":%s,"b@g":%s}}}' % (DEEP_OP, SHALLOW_OP))
                     .encode("utf-8"))
    return path


WAYS = {
    # the user's way (the fast reader keeps each op's text as the file has it)
    "read_communication": lambda p: C.read_communication(p, RANK, Problems()),
    "read_communication_per_value":
        lambda p: C.read_communication_per_value(p, RANK, Problems()),
    # the compare gate's way: tables of the already parsed file
    "tables_from_json":
        lambda p: C.tables_from_json(json.loads(p.read_text("utf-8")), p, RANK, Problems()),
}


@pytest.mark.parametrize("way", list(WAYS))
def test_a_deep_op_and_its_neighbour_keep_their_compact_json_text(tmp_path, way):
    ops = WAYS[way](_file(tmp_path))[S.COMM_OPS]
    rows = ops.select(["op_name", "group", "elapse_ns", "opinfo_json"]).to_pylist()
    assert rows == [
        {"op_name": "a", "group": "g", "elapse_ns": 1_000_000, "opinfo_json": DEEP_OP},
        {"op_name": "b", "group": "g", "elapse_ns": 2_000_000, "opinfo_json": SHALLOW_OP}]
