"""trace_view.json read by hand-written files: the cases the seed-41 mutation sample of
readers/trace_view.py found untested (the file named by the error for a bad ts on a device
task, the TIMELINE schema's own metadata kept beside device_ids)."""

from __future__ import annotations

import json

import pytest

from ascendprof.model import schemas as S
from ascendprof.model.errors import InputError
from ascendprof.readers.trace_view import read_trace_view
from test_trace_view_by_hand import HCCL, HW, _meta, _rows, _write


def test_a_bad_ts_on_a_device_task_names_the_file(tmp_path):
    """Task k of the Ascend Hardware process has ts 1.5 as a JSON number (not text), so the
    one-pass text conversion does not take it; then a second task has ts "abc", no number.
    The reader refuses with InputError whose path is the trace file itself."""
    events = [{"ph": "X", "name": "k", "pid": HW, "tid": 1, "ts": 1.5, "dur": 1.0,
               "args": {"Task Type": "AI_CORE"}},
              {"ph": "X", "name": "bad", "pid": HW, "tid": 1, "ts": "abc", "dur": 1.0,
               "args": {"Task Type": "AI_CORE"}},
              *_meta(HW, "Ascend Hardware")]
    p = _write(tmp_path, events)
    with pytest.raises(InputError) as e:
        read_trace_view(p, 0)
    assert e.value.path == str(p)
    assert "bad" in e.value.reason


def test_the_timeline_keeps_its_schema_doc_beside_device_ids(tmp_path):
    """The TIMELINE schema carries metadata {"doc": ...}; the reader adds device_ids ([] here:
    no process_labels) without dropping it."""
    p = _write(tmp_path, [{"ph": "X", "name": "k", "pid": HW, "tid": 1, "ts": "2.000",
                           "dur": 1.0, "args": {"Task Type": "AI_CORE"}},
                          *_meta(HW, "Ascend Hardware")])
    md = read_trace_view(p, 0)[S.TIMELINE].schema.metadata
    assert json.loads(md[b"device_ids"]) == []
    assert md[b"doc"]  # the schema's description, non-empty


def test_text_connection_ids_match_only_their_own_number(tmp_path):
    """The big op on "Group g Communication" has connection_id "5" (text); task 'a' has
    connection_id 5 (a number: the same link, so communication), task 'c' has "6" (text, another
    link: not communication). Text and numbers compare by their integer value, and two
    different texts never match."""
    events = [
        {"ph": "X", "name": "a", "pid": HW, "tid": 3, "ts": "1.000", "dur": 1.0,
         "args": {"Task Type": "Other", "connection_id": 5}},
        {"ph": "X", "name": "c", "pid": HW, "tid": 4, "ts": "3.000", "dur": 1.0,
         "args": {"Task Type": "AI_CORE", "connection_id": "6"}},
        {"ph": "X", "name": "hcom_allReduce_1", "pid": HCCL, "tid": 1, "ts": "1.000", "dur": 3.0,
         "args": {"connection_id": "5"}},
        *_meta(HW, "Ascend Hardware"),
        *_meta(HCCL, "HCCL", [(1, "Group g Communication")]),
    ]
    got = {r["name"]: r["category"] for r in _rows(_write(tmp_path, events), "hardware")}
    assert got == {"a": "communication", "c": None}
