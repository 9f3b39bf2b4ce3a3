"""Reader for torch_npu text output: ``*_ascend_pt/ASCEND_PROFILER_OUTPUT`` (spec §0, §A).

All parsing is shared with the MindSpore reader in :mod:`ascendprof.readers.ascend_output`.
"""

from __future__ import annotations

from ascendprof.model.rankdata import RankData
from ascendprof.readers.ascend_output import read_output_dir
from ascendprof.model.source import Source


def read(source: Source, options=None) -> RankData:
    """One torch_npu text source (kind ``torch_npu``) -> RankData.

    Tables: KERNELS (kernel_details.csv), STEP_TRACE, OP_STATISTIC, API_STATISTIC, MEMORY_RECORD,
    OPERATOR_MEMORY, NPU_MODULE_MEM, COMM_* (communication*.json), TIMELINE and STEPS
    (trace_view.json; STEPS else from the kernels' Step Id), each present only when its file is.
    ``meta`` holds profiler_info / profiler_metadata. Damaged files are recorded in ``problems``;
    absent analysis inputs are named in ``missing``. Raises InputError only when the rank is
    unknown or ASCEND_PROFILER_OUTPUT is absent. See :func:`ascend_output.read_output_dir`
    (``options.timeline``: read trace_view.json even when not needed).
    """
    return read_output_dir(source, options)
