"""Readers of a rank's communication.json and communication_matrix.json (spec §A.5, §A.6) ->
the COMM_* tables of :mod:`ascendprof.model.schemas`.

Public API (what the other readers and ``compare`` use; the modules inside are not):
:func:`read_communication` (the tables of one file; units and errors are said there),
:func:`iter_tables` (the same tables in batches, in bounded memory; :class:`Reread` when, after
some batches, the file turns out to need :func:`read_communication_per_value`, the tolerant
reader the fast one is tested against), :func:`tables_from_json` (the same tables of already
parsed data: the OPINFO of cluster_communication.json), :func:`read_matrix` (COMM_LINKS from
communication_matrix.json), :data:`KINDS` and :func:`op_kind` (the op kinds 'collective' and
'p2p', and the op-name rule of the flat CANN layout).

Modules: :mod:`.layout` (the two layouts and the names in them), :mod:`.columns` (columns and
tables shared by every way), :mod:`.per_value` (the tolerant per-op way), :mod:`.fast` (the
fast way: whole file or streamed), with :mod:`.scanner` (the block scanner of large files),
:mod:`.batch`, :mod:`.decode_duckdb` and :mod:`.decode_msgspec` (decoding a batch of ops), and
:mod:`.matrix` (communication_matrix.json).
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa

from ascendprof.model.problems import Problems
from ascendprof.readers.communication.fast import Reread, iter_tables, read_tables
from ascendprof.readers.communication.layout import KINDS, op_kind
from ascendprof.readers.communication.matrix import read_matrix
from ascendprof.readers.communication.per_value import (read_communication_per_value,
                                                        tables_from_json)

__all__ = ["read_communication", "iter_tables", "Reread", "read_communication_per_value",
           "tables_from_json", "read_matrix", "KINDS", "op_kind"]


def read_communication(path: Path, rank: int, problems: Problems | None = None
                       ) -> dict[str, pa.Table]:
    """Parse one rank's communication.json (spec §A.5) into three tables.

    Returns ``{COMM_OPS, COMM_BANDWIDTH, COMM_SIZE_DIST}`` (schemas in :mod:`ascendprof.model.schemas`):

    - COMM_OPS: one row per op and step, from ``Communication Time Info``: ``start_ns`` from
      ``Start Timestamp(us)``, ``elapse/transit/wait/sync/idle_ns`` from the ``(ms)`` fields,
      ``wait_ratio`` / ``sync_ratio`` as written, ``opinfo_json`` the op's object as the file
      has it;
    - COMM_BANDWIDTH: one row per op and transport type (RDMA/HCCS/PCIE/SDMA/SIO …) of
      ``Communication Bandwidth Info``, zero rows included;
    - COMM_SIZE_DIST: one row per ``Size Distribution`` entry (packet size key kept as text).

    Times int ns (``Start Timestamp(us)`` through its decimal text), sizes MB (10^6 bytes),
    bandwidths GB/s and ratios as written; the profiler's "Total ..." entries are not rows.
    ``step_key`` keeps the JSON key (``"step13"``; ``"step"`` for the flat CANN layout, step
    null). ``rank`` fills the rank column. Raises :class:`InputError` when the file cannot be read,
    is not valid JSON (with byte offset), is not a JSON object, or a value does not fit its
    column (a time beyond int64 ns); an op or step entry of the wrong shape is skipped and
    recorded in ``problems`` when given, and ops whose required time is not a non-negative number
    are left out and counted in one problem of the file.
    """
    return read_tables(path, rank, problems)
