"""db reader, mutation seed 45: the HCCL kernels appended to KERNELS from COMMUNICATION_OP
carry the op's name (as kernel_details.csv names its communication rows, e.g.
'hcom_allReduce__210_0_1'). Expected values come from the database itself, read with
sqlite3 (opName resolved through STRING_IDS)."""

from __future__ import annotations

import sqlite3

from ascendprof.model import schemas as S
from ascendprof.readers import read_source
from ascendprof.readers.db import COMM_CORE
from test_db_by_hand import FIXTURE, OUT, PROFILER_DB
from test_db_reader import _source


def test_communication_kernels_are_named_after_their_op():
    """Every COMMUNICATION_OP row becomes one KERNELS row on the HCCL core; in start order,
    their names are the ops' opName strings (STRING_IDS.value of the id), none missing."""
    with sqlite3.connect(FIXTURE / OUT / PROFILER_DB) as c:
        ops = c.execute("SELECT s.value, o.startNs FROM COMMUNICATION_OP o "
                        "JOIN STRING_IDS s ON s.id = o.opName ORDER BY o.startNs").fetchall()
    assert len(ops) == 4 and all(name.startswith("hcom_") for name, _ in ops)
    data = read_source(_source(FIXTURE))
    assert list(data.problems) == []
    comm = [r for r in data.tables[S.KERNELS].to_pylist() if r["accelerator_core"] == COMM_CORE]
    assert [(r["name"], r["start_ns"]) for r in comm] == ops
