"""Cluster communication files in msprof-analyze's layout, built from the COMM_* tables.

Reproduces what ``msprof-analyze cluster -m all`` (26.2.0, text data) writes
(spec §8; msprof_analyze/cluster_analyse: communication_group/base_communication_group.py,
analysis/communication_analysis.py, analysis/comm_matrix_analysis.py, analysis/base_analysis.py):

- ``communication_group.json``: the rank sets of every collective and p2p communication group,
  plus ``comm_group_parallel_info`` joining each group with ``parallel_group_info`` of
  profiler_metadata.json (§A.13); the profiler names a group by ``double_hash(group id)``.
- ``cluster_communication.json``: ``{"(r0, r1, ...)": {step_key: {"<op>@<group>": {rank: OPINFO},
  "Total Op Info@<group>": {rank: TOTAL}}}}`` — per op the rank's own record (§A.5); per group
  the sums of the time fields, Wait Time Ratio = wait/(wait+transit), Synchronization Time Ratio
  = sync/(sync+transit), per transport summed size/time/size distribution and Bandwidth(GB/s) =
  MB/ms, all ratios rounded to 4 decimals (0 when the denominator is 0).
- ``cluster_communication_matrix.json``: the same group/step nesting, each link summed over the
  ranks and re-keyed from group-local to global ranks; local ranks are mapped through the
  self-links ``"i-i"`` each rank reports in the same step (what msprof-analyze effectively does:
  its parallel_group_info lookup never matches), unmappable links are dropped; per group a
  ``Total Op Info@<group>`` sums the ``-total@`` (and raw per-op) entries.

Group keys are ``str(tuple(set_of_ranks))`` as msprof-analyze writes them. msprof-analyze adds
ranks in the order it finds the rank directories; we add them in ascending rank order, and list
groups, ops and ranks in that order too (same keys and values; list order can differ).

Public API (``__all__``), by module; all take tables and return plain dicts, none touches files.
``groups``: :func:`double_hash` (the profiler's group name), :func:`parallel_groups`,
:func:`first_memberships` (per rank, in the workers), :func:`group_membership`,
:func:`build_groups` (communication_group.json). ``fragments``: :func:`rank_fragments`
serialises and compresses a rank's OPINFOs in the worker into :class:`OpFragments`
(:data:`RECORDS_PER_CHUNK` per chunk), :class:`FragmentsBuilder` the same from tables read
batch by batch. ``communication_file``: :class:`CommunicationFile`,
cluster_communication.json streamed one group at a time. ``matrix``: :func:`matrix_json` / :func:`matrix_groups`
(cluster_communication_matrix.json, as text or parsed; :func:`matrix_json_batches` from links
read a batch of ranks at a time), :func:`unmapped_links` (the links it leaves out).
Internal: ``opinfo`` (an OPINFO's fields, built from rows), ``totals`` ('Total Op Info' sums).
"""

from __future__ import annotations

from ascendprof.analyze.cluster_communication.communication_file import CommunicationFile
from ascendprof.analyze.cluster_communication.fragments import (RECORDS_PER_CHUNK,
                                                                FragmentsBuilder, OpFragments,
                                                                rank_fragments)
from ascendprof.analyze.cluster_communication.groups import (build_groups, double_hash,
                                                             first_memberships, group_membership,
                                                             parallel_groups)
from ascendprof.analyze.cluster_communication.matrix import (matrix_groups, matrix_json,
                                                             matrix_json_batches,
                                                             unmapped_links)

__all__ = ["CommunicationFile", "FragmentsBuilder", "OpFragments", "RECORDS_PER_CHUNK",
           "build_groups", "double_hash", "first_memberships", "group_membership",
           "matrix_groups", "matrix_json", "matrix_json_batches", "parallel_groups",
           "rank_fragments", "unmapped_links"]
