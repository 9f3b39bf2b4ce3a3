"""Reader for MindSpore (2.3+) text output: ``*_ascend_ms/ASCEND_PROFILER_OUTPUT`` (spec §0, §A).

MindSpore writes the same files as torch_npu with small differences the shared parsers in
:mod:`ascendprof.readers.ascend_output` accept: step_trace_time.csv has no ``Device_id``
(§A.1), kernel_details.csv has no ``Device_id``, may call the step column ``Step ID`` and may
carry a ``Model Name`` column; with ``with_stack`` the stack is joined into ``Name``.
"""

from __future__ import annotations

from ascendprof.model.rankdata import RankData
from ascendprof.readers.ascend_output import read_output_dir
from ascendprof.model.source import Source


def read(source: Source, options=None) -> RankData:
    """One MindSpore text source (kind ``mindspore``) -> RankData; same tables, problems and
    errors as :func:`ascendprof.readers.torch_text.read`."""
    return read_output_dir(source, options)
