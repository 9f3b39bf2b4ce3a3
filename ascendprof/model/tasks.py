"""Which kernel_details / KERNELS rows are communication big ops (spec §A.2, §A.3).

The one place readers and analyses take this from: torch_npu writes the HCCL big ops into
kernel_details.csv with Accelerator Core ``COMMUNICATION`` (older versions ``HCCL``), and their
names start with ``hcom_``.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

#: Accelerator Core values of communication rows; the profiler's op_statistic leaves them out.
COMM_CORES = ("COMMUNICATION", "HCCL")


def comm_rows(cores, names) -> pa.Array:
    """Bool per row (never null): Accelerator Core in :data:`COMM_CORES` (any case) or a name
    starting with ``hcom_`` (any case). ``cores`` / ``names``: Arrow string columns."""
    core = pc.utf8_upper(pc.fill_null(cores, ""))
    name = pc.utf8_lower(pc.fill_null(names, ""))
    return pc.or_(pc.is_in(core, value_set=pa.array(COMM_CORES)), pc.starts_with(name, "hcom_"))
