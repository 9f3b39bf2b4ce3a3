"""cann_records: a truncated compact record names its kind in the problem (the user has four
compact kinds in one data/ directory and must know which file family is cut), built by hand."""

from __future__ import annotations

import pytest

from ascendprof.model.errors import RecordError
from ascendprof.readers import cann_records as C


@pytest.mark.parametrize("kind", ["node_basic_info", "hccl_op_info"])
def test_a_truncated_compact_record_names_its_kind(kind):
    # one whole 64-byte record (magic 0x5A5A, the rest zero) then 10 bytes of the next:
    # 74 % 64 = 10 bytes left over, the cut record starts at byte 64
    rec = b"\x5a\x5a" + b"\0" * 62
    with pytest.raises(RecordError) as ei:
        C.decode_compact(rec + rec[:10], kind, "x.slice_0")
    assert ei.value.where == 64
    assert f"truncated {kind} record: 10 of 64 bytes" in str(ei.value)
