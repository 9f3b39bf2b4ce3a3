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
#: the name prefix of every HCCL big op (``hcom_allReduce__…``, ``hcom_send__…``)
COMM_NAME_PREFIX = "hcom_"
#: point-to-point ops by name (any case): sends and receives of pipeline parallelism
P2P_PREFIXES = ("hcom_send", "hcom_receive", "hcom_batchsendrecv")


def op_kind(op_name: str) -> str:
    """"p2p" for a send / receive / batchSendRecv op (its name or communication.json key, any
    case), else "collective"."""
    return "p2p" if op_name.lower().startswith(P2P_PREFIXES) else "collective"


def comm_rows(cores, names) -> pa.Array:
    """Bool per row (never null): Accelerator Core in :data:`COMM_CORES` (any case) or a name
    starting with ``hcom_`` (any case). ``cores`` / ``names``: Arrow string columns."""
    cores, names = _text(cores), _text(names)
    core = pc.utf8_upper(pc.fill_null(cores, ""))
    name = pc.utf8_lower(pc.fill_null(names, ""))
    return pc.or_(pc.is_in(core, value_set=pa.array(COMM_CORES)),
                  pc.starts_with(name, COMM_NAME_PREFIX))


def _text(col):
    """A dictionary-encoded column (a large rank's slim kernels) as its texts."""
    if isinstance(col, (pa.Array, pa.ChunkedArray)) and pa.types.is_dictionary(col.type):
        return col.cast(col.type.value_type)
    return col
