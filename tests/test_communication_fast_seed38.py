"""The fast communication.json reader (ascendprof.readers.communication.fast) read the way a big
file is (streamed): when the batch decoder calls a batch's op array invalid JSON but no single
op text is to blame (the two JSON parsers disagreeing, simulated here), the error still names
the file and is placed at the batch's first op object.

Expected values come from the file's own bytes (offsets found with bytes.index) and the JSON
module (which op comes first).
"""

from __future__ import annotations

import json

import msgspec
import pytest

from ascendprof.model.errors import InputError
from ascendprof.readers.communication import fast as F
from test_communication_fast_seed34 import REAL, _streamed


class _RefusingDecoder:
    """Stands in for fast.OPS: calls every op array invalid JSON."""

    @staticmethod
    def decode(_doc):
        raise msgspec.DecodeError("JSON is malformed (simulated)")


def _first_op_object_at(data: bytes) -> int:
    """Offset of the '{' that opens the file's first op object ("Total ..." entries are the
    profiler's sums, not ops)."""
    doc = json.loads(data)
    step_key, step = next(iter(doc.items()))
    kind, ops = next(iter(step.items()))
    op_key = next(k for k in ops if not k.startswith("Total"))
    step_at = data.index(json.dumps(step_key).encode() + b":")
    kind_at = data.index(json.dumps(kind).encode() + b":", step_at)
    key = json.dumps(op_key).encode() + b": "
    at = data.index(key, kind_at) + len(key)
    assert data[at:at + 1] == b"{"
    return at


@pytest.mark.parametrize("block", [512, 1 << 20])
def test_invalid_json_no_op_text_shows_is_placed_at_the_batch_start(tmp_path, monkeypatch,
                                                                      block):
    """DuckDB declining the batch and msgspec calling its op array malformed while orjson reads
    every op text: InputError naming the file, "invalid JSON", at the first op's '{'."""
    data = REAL.read_bytes()
    path = tmp_path / "communication.json"
    path.write_bytes(data)
    want_at = _first_op_object_at(data)
    assert want_at > 0
    monkeypatch.setattr(F, "duck_tables", lambda *_args: None)
    monkeypatch.setattr(F, "OPS", _RefusingDecoder)
    with pytest.raises(InputError) as got:
        _streamed(path, block=block)
    assert got.value.path == str(path)
    assert got.value.reason == "invalid JSON"
    assert got.value.where == want_at
