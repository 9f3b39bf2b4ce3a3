"""One rank's windows before its communication ops (analyze.late_arrivals.rank_partial) on a
hand-built rank: what filled each window — kernels by item, device idle, DataLoader time —
worked out by hand below."""

from __future__ import annotations

import pyarrow as pa

from ascendprof.analyze import late_arrivals as LA
from ascendprof.model import schemas as S


def _tab(name, rows):
    return pa.Table.from_pylist(rows, schema=S.SCHEMAS[name])


def _rank():
    # step 1 spans [0, 1000) ns. Kernels: MatMul [2,2] on [100, 200), Add [4] on [300, 350).
    # Group g: op a starts at 400 for 50 ns (ends 450), op b at 700 for 100. A DataLoader call
    # on the host over [500, 600).
    return {
        S.STEPS: _tab(S.STEPS, [{"rank": 3, "step": 1, "start_ns": 0, "end_ns": 1000}]),
        S.KERNELS: _tab(S.KERNELS, [
            {"rank": 3, "step": 1, "op_type": "MatMul", "input_shapes": '"2,2"',
             "accelerator_core": "AI_CORE", "start_ns": 100, "dur_ns": 100},
            {"rank": 3, "step": 1, "op_type": "Add", "input_shapes": "4",
             "accelerator_core": "AI_VECTOR_CORE", "start_ns": 300, "dur_ns": 50}]),
        S.COMM_OPS: _tab(S.COMM_OPS, [
            {"rank": 3, "step": 1, "kind": "collective", "op_name": "a", "group": "g",
             "start_ns": 400, "elapse_ns": 50, "wait_ns": 10},
            {"rank": 3, "step": 1, "kind": "collective", "op_name": "b", "group": "g",
             "start_ns": 700, "elapse_ns": 100, "wait_ns": None}]),
        S.HOST_EVENTS: _tab(S.HOST_EVENTS, [
            {"rank": 3, "step": 1, "name": "DataLoader.__next__", "start_ns": 500,
             "dur_ns": 100}]),
    }


def test_each_window_holds_its_kernels_idle_and_dataloader_time():
    (part,) = LA.rank_partial(_rank(), 3).values()
    got = [(r["op_name"], r["window_start_ns"], r["kind"], r["item"], r["dur_ns"])
           for r in part.to_pylist()]
    # a: first op of g in step 1, its window from the step's start: [0, 400) holds MatMul
    # 100 ns and Add 50 ns (largest first; the shapes' quotes dropped) and 400 - 150 = 250 ns
    # with nothing on the device; no DataLoader time in it.
    # b: window from a's end, [450, 700): no kernel, nothing on the device for 250 ns, the
    # DataLoader call's 100 ns ([500, 600)).
    assert got == [("a", 0, "kernel", "MatMul [2,2]", 100), ("a", 0, "kernel", "Add [4]", 50),
                   ("a", 0, "idle", "device idle", 250),
                   ("b", 450, "idle", "device idle", 250),
                   ("b", 450, "data loader", "DataLoader", 100)]
    rows = part.to_pylist()
    assert {(r["rank"], r["step"], r["group"]) for r in rows} == {(3, 1, "g")}
    assert [r["start_ns"] for r in rows] == [400, 400, 400, 700, 700]
    assert [r["wait_ns"] for r in rows] == [10, 10, 10, None, None]
    assert part.schema == LA.SCHEMA
