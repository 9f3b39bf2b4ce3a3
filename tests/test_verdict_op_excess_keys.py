"""verdicts/facts.py OpExcess: how kernel and op-type keys are matched between ranks once
their texts are held as one integer per row. Expected values by hand."""

from __future__ import annotations

import pyarrow as pa

from ascendprof.analyze.verdicts import facts as F
from test_verdict_facts_by_hand import (MS, TH, _cluster, _even, _kernel_partial, _op_partial,
                                      _rank)


def test_missing_shapes_and_empty_shapes_are_one_kernel():
    # Rank 0 reports MatMul with no input shapes (null), rank 1 the same kernel with "" as
    # its shapes: one kernel, compared. One step each: 6 ms vs 2 ms, 5 vs 1 calls.
    ops = [("MatMul", "AI_CORE", 1, MS)]  # equal op-type time on both
    ca = _cluster(_even([0, 1]), ranks=[
        _rank(0, op_partial=_op_partial(0, ops),
              kernel_partial=_kernel_partial(0, [("MatMul", None, "MatMul", 5, 6 * MS)])),
        _rank(1, op_partial=_op_partial(1, ops),
              kernel_partial=_kernel_partial(1, [("MatMul", "", "MatMul", 1, 2 * MS)]))])
    got = F.Facts(ca, TH).op_excess.excess([0], [1])
    assert got["kernels"] == [{"kernel": "MatMul", "input_shapes": "", "op_type": "MatMul",
                               "excess_ms": 4.0, "ms": 6.0, "peer_ms": 2.0, "count": 5.0,
                               "peer_count": 1.0}]


def test_kernel_keys_across_chunks_and_a_missing_column():
    # Rank 0's kernel partial comes in two chunks (each with its own texts), rank 1's lacks
    # the input_shapes column (its kernels have shapes ""). One step each.
    #   rank 0: Add ""/Add 3 ms (1 call) + Mul "[1]"/Mul 4 ms (2 calls) + Add ""/Add 1 ms
    #           (1 call, second chunk: the same kernel as the first row) -> Add 4 ms, 2 calls
    #   rank 1: Add 1 ms (1 call), Mul "[1]" absent (0)
    # excess: Add 4 - 1 = 3 ms, Mul 4 - 0 = 4 ms -> Mul first.
    k0 = pa.concat_tables([
        _kernel_partial(0, [("Add", "", "Add", 1, 3 * MS), ("Mul", "[1]", "Mul", 2, 4 * MS)]),
        _kernel_partial(0, [("Add", "", "Add", 1, 1 * MS)])])
    assert k0.column("name").num_chunks == 2
    k1 = _kernel_partial(1, [("Add", "", "Add", 1, 1 * MS)]).drop_columns(["input_shapes"])
    ca = _cluster(_even([0, 1]), ranks=[
        _rank(0, op_partial=_op_partial(0, [("Add", "AI_CORE", 1, MS)]), kernel_partial=k0),
        _rank(1, op_partial=_op_partial(1, [("Add", "AI_CORE", 1, MS)]), kernel_partial=k1)])
    got = F.Facts(ca, TH).op_excess.excess([0], [1])
    assert got["kernels"] == [
        {"kernel": "Mul", "input_shapes": "[1]", "op_type": "Mul", "excess_ms": 4.0,
         "ms": 4.0, "peer_ms": 0.0, "count": 2.0, "peer_count": 0.0},
        {"kernel": "Add", "input_shapes": "", "op_type": "Add", "excess_ms": 3.0,
         "ms": 4.0, "peer_ms": 1.0, "count": 2.0, "peer_count": 1.0}]
    assert got["op_types"] == []  # equal op-type time: no positive excess
