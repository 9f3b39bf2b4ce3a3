"""The block scanner of large communication.json files (ascendprof.readers.communication.scanner),
through the streamed read (fast.iter_tables with whole_file_bytes=0) and the public reader in
small blocks, on a damaged copy of a real rank's file: a kind key repeated under one step keeps
its last value, as JSON does (the scanner leaves such a file to the per-value reader rather than
reading the ops of both values).

Expected values come from Python's json module (it keeps the last value of a repeated key).
"""

from __future__ import annotations

import json

from ascendprof.model import schemas as S
from ascendprof.readers import communication as C
from ascendprof.readers.communication import fast as F
from test_communication_scanner_seed34 import DATA, RANK, _op_keys, _replace_once, _streamed


def _keys(ops) -> list[tuple[str, str, str]]:
    return list(zip(ops["step_key"].to_pylist(), ops["kind"].to_pylist(),
                    ops["op_name"].to_pylist()))


def test_a_repeated_kind_key_keeps_its_last_value(tmp_path, monkeypatch):
    """{"step13": {"p2p": {...}, "p2p": {...}}} (the second kind key renamed from "collective"):
    as JSON keeps the last value of a repeated key, the ops are those of the second value only,
    under the kind "p2p", read in one block or through the public reader in small blocks
    (which, once it has handed out a batch, rereads the file)."""
    bad, _ = _replace_once(DATA, b'"collective"', b'"p2p"')
    path = tmp_path / "communication.json"
    path.write_bytes(bad)
    doc = json.loads(bad)
    assert list(doc["step13"]) == ["p2p"]
    want = [(s, k, op.rsplit("@", 1)[0]) for s, k, op in _op_keys(doc)]
    first = {op for _, k, op in _op_keys(json.loads(DATA)) if k == "p2p"}
    assert want and first and not first & {op for _, _, op in _op_keys(doc)}  # none shared

    assert _keys(_streamed(path, 1 << 20)[S.COMM_OPS]) == want
    monkeypatch.setattr(F, "WHOLE_FILE_BYTES", 1000)
    monkeypatch.setattr(F, "BLOCK_BYTES", 512)
    assert _keys(C.read_communication(path, RANK)[S.COMM_OPS]) == want
