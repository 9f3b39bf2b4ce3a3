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

Modules, one responsibility each (all take tables and return plain dicts / DataFrames; nothing
touches files):

- ``group_names``: the profiler's group name (:func:`double_hash`), parallel_group_info by that
  name (:func:`parallel_groups`), the group key (:func:`group_key`).
- ``membership``: which ranks belong to which group (:func:`first_memberships` per rank in the
  workers, :func:`group_membership` over all ranks).
- ``group_file``: communication_group.json (:func:`build_groups`).
- ``opinfo``: one op's OPINFO, its field names and :func:`ratio`; OPINFOs built from table rows.
- ``totals``: the per-step 'Total Op Info' sums.
- ``fragments``: one rank's OPINFOs serialised and compressed in the worker
  (:func:`rank_fragments`, :class:`OpFragments`); ``fragments_builder``: the same from tables
  read batch by batch (:class:`FragmentsBuilder`).
- ``communication_file``: cluster_communication.json streamed one group at a time from all
  ranks' fragments (:class:`CommunicationFile`).
- ``matrix``: cluster_communication_matrix.json (:func:`matrix_groups`) and the links it leaves
  out (:func:`unmapped_links`).

The public API is what this package exports (``__all__``): the engine builds the three files
with ``first_memberships``, ``rank_fragments`` / ``FragmentsBuilder``, ``group_membership``,
``build_groups``, ``CommunicationFile``, ``matrix_groups`` and ``unmapped_links``; its result
files carry ``OpFragments``; cluster_step_trace takes ``parallel_groups``; the verdicts, diff,
and generated clusters name groups with ``double_hash``.
"""

from __future__ import annotations

from ascendprof.analyze.cluster_communication.communication_file import CommunicationFile
from ascendprof.analyze.cluster_communication.fragments import (RECORDS_PER_CHUNK, OpFragments,
                                                                rank_fragments)
from ascendprof.analyze.cluster_communication.fragments_builder import FragmentsBuilder
from ascendprof.analyze.cluster_communication.group_file import build_groups
from ascendprof.analyze.cluster_communication.group_names import double_hash, parallel_groups
from ascendprof.analyze.cluster_communication.matrix import matrix_groups, unmapped_links
from ascendprof.analyze.cluster_communication.membership import (first_memberships,
                                                                 group_membership)

__all__ = ["CommunicationFile", "FragmentsBuilder", "OpFragments", "RECORDS_PER_CHUNK",
           "build_groups", "double_hash", "first_memberships", "group_membership",
           "matrix_groups", "parallel_groups", "rank_fragments", "unmapped_links"]
