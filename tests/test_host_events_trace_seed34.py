"""host_events' trace_view.json side (readers.host_events.read_trace_host), read the way a run
with ``--advice all`` reads a rank (engine.pipeline.read_rank, ReadOptions(advice="all")), on
the real AlexNet 2-rank text export and on copies of it edited by hand.

Checked against the trace_view.json read here with json and exact decimal arithmetic:
HOST_EVENTS keeps the host-synchronising framework ops (aten::item ...) with their thread id
(a tid written as text included); HCCL_TASKS carries each small task's transport and link
type; AICORE_FREQ the ``AI Core Freq`` counter's MHz; LAUNCHES joins each ``HostToDevice``
flow end to the innermost Node@ call holding its start (else the innermost AscendCL@ call) and
to the device task at its end; TASK_QUEUE joins each Enqueue to its Dequeue@<op>
(``async_task_queue`` flows). Mutation testing seed 34 of host_events."""

from __future__ import annotations

import json
from decimal import ROUND_HALF_EVEN, Decimal
from pathlib import Path

import pytest

from _advice_data import OUT, copy_rank, trace_events

ALEX = "torch_npu-2rank-levels/text/level2/rank0_ascend_pt"


def ns(v) -> int:
    """A trace_view time or duration in us (text or number) as int ns, exactly."""
    return int((Decimal(str(v)) * 1000).quantize(Decimal(1), rounding=ROUND_HALF_EVEN))


def read_all(rank_dir: Path):
    from ascendprof.engine.pipeline import read_rank
    from ascendprof.model.options import ReadOptions
    from ascendprof.scan import load_sources

    (src,) = load_sources(Path(rank_dir))
    data, _ = read_rank(src, ReadOptions(advice="all"))
    return data


def table(data, name) -> list[dict]:
    t = data.tables.get(name)
    assert t is not None, (name, data.problems.brief())
    return t.to_pylist()


@pytest.fixture
def real(shared_data):
    rank = shared_data / ALEX
    return trace_events(rank), read_all(rank)


def write_trace(rank_dir: Path, events: list) -> None:
    (rank_dir / OUT / "trace_view.json").write_text(json.dumps(events), encoding="utf-8")


# ----------------------------------------------------------------------------- HOST_EVENTS

def test_sync_ops_are_host_events(real):
    from ascendprof.model import schemas as S

    events, data = real
    sync = ("aten::item", "aten::_local_scalar_dense")  # the two the AlexNet run calls
    want = sorted((e["name"], e["tid"], ns(e["ts"]), ns(e["dur"])) for e in events
                  if e.get("ph") == "X" and e.get("cat") is not None and e["name"] in sync)
    assert len(want) == 54  # 27 .item() calls, each through _local_scalar_dense
    got = sorted((r["name"], r["tid"], r["start_ns"], r["dur_ns"])
                 for r in table(data, S.HOST_EVENTS) if r["name"] in sync)
    assert got == want
    assert all(r["source"] == "framework" for r in table(data, S.HOST_EVENTS)
               if r["name"] in sync)


def test_text_tid_is_kept_as_its_number(shared_data, tmp_path):
    from ascendprof.model import schemas as S

    rank = copy_rank(shared_data / ALEX, tmp_path / "rank0_ascend_pt")
    events = trace_events(rank)
    (step,) = [e for e in events if e.get("name", "").startswith("ProfilerStep#")]
    items = [e for e in events if e.get("name") == "aten::item" and e.get("cat")]
    tids = {e["tid"] for e in items}
    assert all(isinstance(t, int) for t in tids) and isinstance(step["tid"], int)
    for e in items:
        e["tid"] = str(e["tid"])  # the same thread id, written as text
    step["tid"] = str(step["tid"])
    write_trace(rank, events)
    rows = table(read_all(rank), S.HOST_EVENTS)
    got = [r for r in rows if r["name"] == "aten::item"]
    assert len(got) == len(items) == 27
    assert sorted((r["start_ns"], r["tid"]) for r in got) == sorted(
        (ns(e["ts"]), int(e["tid"])) for e in items)
    (st,) = [r for r in rows if r["name"] == step["name"]]
    assert st["tid"] == int(step["tid"])


# ----------------------------------------------------------------------------- HCCL_TASKS

def test_hccl_task_transport_and_link_type(real):
    from ascendprof.model import schemas as S

    events, data = real
    want = sorted((e["name"], ns(e["ts"]), ns(e["dur"]), e["args"]["size(Byte)"],
                   e["args"]["transport type"], e["args"]["link type"]) for e in events
                  if e.get("ph") == "X" and e.get("cat") is None
                  and e["name"] in ("Memcpy", "Reduce_Inline")
                  and "size(Byte)" in (e.get("args") or {}))
    assert len(want) == 72 and {w[5] for w in want} == {"ON_CHIP", "HCCS"}
    got = sorted((r["task_name"], r["start_ns"], r["dur_ns"], r["size_bytes"], r["transport"],
                  r["link_type"]) for r in table(data, S.HCCL_TASKS))
    assert got == want


def test_hccl_task_op_is_the_hcom_op_holding_it(real):
    """op_name: the hcom_* X event of the task's process whose window holds the task start
    (the latest-starting one)."""
    from ascendprof.model import schemas as S

    events, data = real
    ops = [(e["pid"], ns(e["ts"]), ns(e["ts"]) + ns(e["dur"]), e["name"]) for e in events
           if e.get("ph") == "X" and e.get("name", "").startswith("hcom_")]
    want = []
    for e in events:
        if e.get("ph") == "X" and e.get("cat") is None and e["name"] in ("Memcpy",
                                                                          "Reduce_Inline") \
                and "size(Byte)" in (e.get("args") or {}):
            t = ns(e["ts"])
            holding = [o for o in ops if o[0] == e["pid"] and o[1] <= t <= o[2]]
            want.append((t, max(holding, key=lambda o: o[1])[3] if holding else None))
    assert len(want) == 72 and all(w[1] for w in want)
    got = sorted((r["start_ns"], r["op_name"]) for r in table(data, S.HCCL_TASKS))
    assert got == sorted(want)


# ----------------------------------------------------------------------------- AICORE_FREQ

def test_aicore_freq_samples(real):
    from ascendprof.model import schemas as S

    events, data = real
    want = sorted((ns(e["ts"]), float(e["args"]["MHz"])) for e in events
                  if e.get("ph") == "C" and e.get("name") == "AI Core Freq")
    assert len(want) == 2 and {w[1] for w in want} == {1800.0}
    got = sorted((r["ts_ns"], r["freq_mhz"]) for r in table(data, S.AICORE_FREQ))
    assert got == want


# ----------------------------------------------------------------------------- LAUNCHES

def launches_by_hand(events) -> list[tuple]:
    """(conn_id, host_name, host_start_ns, host_dur_ns, flow_start_ns, device_start_ns,
    device_dur_ns, task_name) of every (s, f) pair of a HostToDevice flow: the host call is the
    innermost Node@ event (no cat) of the s end's thread holding its ts, else the innermost
    AscendCL@ one; the device task is the X event with args "Task Type" at the f end."""
    calls = [(e["tid"], ns(e["ts"]), ns(e["ts"]) + ns(e["dur"]), e["name"]) for e in events
             if e.get("ph") == "X" and e.get("cat") is None
             and e["name"].startswith(("Node@", "AscendCL@"))]
    tasks = {(e["pid"], e["tid"], ns(e["ts"])): e for e in events
             if e.get("ph") == "X" and "Task Type" in (e.get("args") or {})}
    starts, ends = {}, {}
    for e in events:
        if e.get("cat") == "HostToDevice" and e.get("ph") in ("s", "f"):
            at = (e["pid"], e["tid"], ns(e["ts"]))
            if e["ph"] == "s":
                starts[str(e["id"])] = at
            else:
                ends.setdefault(str(e["id"]), []).append(at)
    out = []
    for fid, (_, tid, t) in starts.items():
        best = None
        for level in ("Node@", "AscendCL@"):
            holding = [c for c in calls if c[0] == tid and c[3].startswith(level)
                       and c[1] <= t <= c[2]]
            if holding:
                # innermost: the latest start, then the earliest end
                best = min(holding, key=lambda c: (-c[1], c[2]))
                break
        for at in ends.get(fid, []):
            task = tasks.get(at)  # none at an hcom_ op's end
            out.append((fid, best[3] if best else None, best[1] if best else t,
                        best[2] - best[1] if best else None, t, at[2],
                        ns(task["dur"]) if task else None, task["name"] if task else None))
    return sorted(out, key=str)


def launch_rows(data) -> list[tuple]:
    from ascendprof.model import schemas as S

    return sorted(((r["conn_id"], r["host_name"], r["host_start_ns"], r["host_dur_ns"],
                    r["flow_start_ns"], r["device_start_ns"], r["device_dur_ns"],
                    r["task_name"]) for r in table(data, S.LAUNCHES)), key=str)


def test_launches_join_host_call_to_device_task(real):
    events, data = real
    want = launches_by_hand(events)
    # 215 flow ends of 210 flows; 191 launched by Node@launch, 24 by an AscendCL@ call alone
    assert len(want) == 215
    assert sum(1 for w in want if w[1] == "Node@launch") == 191
    assert sum(1 for w in want if w[1] and w[1].startswith("AscendCL@")) == 24
    assert all(w[3] is not None for w in want)
    assert sum(1 for w in want if w[6]) == 215 - sum(1 for w in want if w[7] is None) > 200
    assert launch_rows(data) == want


def test_launch_host_call_innermost_of_same_start(shared_data, tmp_path):
    """Two Node@ calls on one thread starting at the same ts: the shorter (inner) one is the
    launch."""
    rank = copy_rank(shared_data / ALEX, tmp_path / "rank0_ascend_pt")
    events = trace_events(rank)
    (s,) = [e for e in events if e.get("cat") == "HostToDevice" and e.get("ph") == "s"
            and str(e["id"]) == first_node_flow(events)]
    t = ns(s["ts"])
    (inner,) = [e for e in events if e.get("ph") == "X" and e.get("cat") is None
                and e.get("tid") == s["tid"] and e["name"].startswith("Node@")
                and ns(e["ts"]) <= t <= ns(e["ts"]) + ns(e["dur"])]
    outer = dict(inner, name="Node@launch", dur=inner["dur"] * 3)
    events.append(outer)
    write_trace(rank, events)
    want = launches_by_hand(events)
    (row,) = [w for w in want if w[0] == str(s["id"])]
    assert row[2] == ns(inner["ts"]) and row[3] == ns(inner["dur"])
    assert launch_rows(read_all(rank)) == want


def first_node_flow(events) -> str:
    """The id of the first HostToDevice flow whose start a Node@ event holds."""
    nodes = [(e["tid"], ns(e["ts"]), ns(e["ts"]) + ns(e["dur"])) for e in events
             if e.get("ph") == "X" and e.get("cat") is None
             and e.get("name", "").startswith("Node@")]
    for e in events:
        if e.get("cat") == "HostToDevice" and e.get("ph") == "s":
            t = ns(e["ts"])
            if any(n[0] == e["tid"] and n[1] <= t <= n[2] for n in nodes):
                return str(e["id"])
    raise AssertionError("no flow starts in a Node@ call")


# ----------------------------------------------------------------------------- TASK_QUEUE

def test_task_queue_joins_enqueue_to_dequeue(real):
    from ascendprof.model import schemas as S

    events, data = real
    q = {(e["pid"], e["tid"], ns(e["ts"])): e for e in events if e.get("ph") == "X"
         and (e.get("name") == "Enqueue" or e.get("name", "").startswith("Dequeue"))}
    flows: dict = {}
    for e in events:
        if e.get("cat") == "async_task_queue" and e.get("ph") in ("s", "f"):
            flows.setdefault(str(e["id"]), {})[e["ph"]] = (e["pid"], e["tid"], ns(e["ts"]))
    want = []
    for fid, fl in flows.items():
        enq, deq = q[fl["s"]], q[fl["f"]]
        assert enq["name"] == "Enqueue" and deq["name"].startswith("Dequeue@")
        want.append((fid, fl["s"][2], ns(enq["dur"]), fl["f"][2], ns(deq["dur"]),
                     deq["name"][len("Dequeue@"):]))
    assert len(want) == 159
    got = [(r["queue_id"], r["enqueue_ns"], r["enqueue_dur_ns"], r["dequeue_ns"],
            r["dequeue_dur_ns"], r["op_name"]) for r in table(data, S.TASK_QUEUE)]
    assert sorted(got) == sorted(want)
