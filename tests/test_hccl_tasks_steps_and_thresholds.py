"""hccl_tasks by hand: the optional step columns, large-packet thresholds at and around their
edges, and the tasks op_links must leave out (module docstring, §7.2, §7.3)."""

from __future__ import annotations

import pandas as pd

from ascendprof.analyze import hccl_tasks as H

OP = "hcom_allReduce__3_1"


def _task(name, start, dur, plane=0, master=1, transport="SDMA", link="HCCS", rdma=None,
          size=0, local=0, remote=1, op=OP, **extra):
    return {"op_name": op, "group": "g", "start_ns": start, "dur_ns": dur, "plane_id": plane,
            "is_master": master, "task_name": name, "transport": transport, "link_type": link,
            "rdma_type": rdma, "size_bytes": size, "local_rank": local, "remote_rank": remote,
            **extra}


def test_step_and_step_key_columns_are_carried_into_every_table():
    # The docstring: optional step / step_key columns (default null / "step"). Two ops, one
    # 1 MB HCCS copy each, in step 4 and step 5 of a "micro_step" keyed layout.
    tasks = pd.DataFrame([
        _task("Memcpy", 0, 10, size=1_000_000, step=4, step_key="micro_step"),
        _task("Memcpy", 100, 10, size=1_000_000, step=5, step_key="micro_step",
              op="hcom_allReduce__4_1")])
    out = H.comm_tables(tasks, 3)
    for name in ("comm_ops", "comm_bandwidth", "comm_links"):
        df = out[name].to_pandas()
        assert set(df["step_key"]) == {"micro_step"}, name
        assert sorted(set(df["step"])) == [4, 5], name
    ops = out["comm_ops"].to_pandas().set_index("op_name")
    assert ops.loc[OP, "step"] == 4 and ops.loc["hcom_allReduce__4_1", "step"] == 5


def test_without_step_columns_step_is_null_and_the_key_is_flat():
    out = H.comm_tables(pd.DataFrame([_task("Memcpy", 0, 10, size=1_000_000)]), 0)
    ops = out["comm_ops"].to_pylist()
    assert [(r["step"], r["step_key"]) for r in ops] == [(None, "step")]


def test_a_link_packet_exactly_at_its_threshold_is_not_large():
    # §7.3: large means ABOVE the transport's threshold. HCCS: 32 MB exactly (32_000_000 B) is
    # not large, 33 MB is; RDMA payload of exactly 0.5 MB (500_000 B, send op: N = 3, so two
    # trailing tasks) is not large. LOCAL (ON_CHIP) has threshold 0: a 0-byte copy is not large.
    hccs = [_task("Memcpy", 0, 10, size=32_000_000, remote=1),
            _task("Memcpy", 20, 10, size=33_000_000, remote=1)]
    links = H.op_links(hccs, OP)
    assert links[(0, 1)]["large_packet_ratio"] == 0.5  # 1 large of 2
    rdma = dict(transport="RDMA", link="ROCE", op="hcom_send__1_1", remote=2)
    send = [_task("RDMASend", 0, 5, rdma="RDMA_SEND_PAYLOAD", size=500_000, **rdma),
            _task("RDMASend", 10, 5, rdma="RDMA_SEND_NOTIFY", **rdma),
            _task("Notify_Wait", 20, 5, transport="LOCAL", link="ON_CHIP", op="hcom_send__1_1",
                  remote=2)]
    assert H.op_links(send, "hcom_send__1_1")[(0, 2)]["large_packet_ratio"] == 0.0
    assert H.op_bandwidth_info(send, "hcom_send__1_1")["RDMA"]["large_packet_ratio"] == 0.0
    local = [_task("Memcpy", 0, 10, link="ON_CHIP", size=0, remote=H.INVALID_RANK)]
    assert H.op_links(local, OP)[(0, 0)] == {
        "transport": "LOCAL", "size_mb": 0.0, "transit_ns": 10, "bandwidth_gbps": 0.0,
        "large_packet_ratio": 0.0}


def test_a_transport_without_threshold_counts_any_nonzero_packet_as_large():
    # Bandwidth Info: a transport outside LARGE_PACKET_MB has threshold 0, so a 0.25 MB payload
    # (send op, N = 3) over "UB" is large: ratio 1 of 1.
    other = dict(transport="UB", link="ROCE", op="hcom_send__1_1")
    tasks = [_task("RDMASend", 0, 2, rdma="RDMA_SEND_PAYLOAD", size=250_000, **other),
             _task("RDMASend", 4, 2, **other), _task("RDMASend", 8, 2, **other)]
    bw = H.op_bandwidth_info(tasks, "hcom_send__1_1")
    assert bw["UB"]["dist"] == {0.25: [1, 10]} and bw["UB"]["large_packet_ratio"] == 1.0


def test_links_leave_out_tasks_without_a_valid_local_rank_or_a_remote_rank():
    # §7.3: only tasks with a valid local rank and a remote rank count. Three 1 MB HCCS copies:
    # local 0xFFFFFFFF -> remote 1 (invalid local), local 0 -> remote None, local 0 -> remote 2.
    tasks = [_task("Memcpy", 0, 10, size=1_000_000, local=H.INVALID_RANK, remote=1),
             _task("Memcpy", 20, 10, size=1_000_000, local=0, remote=None),
             _task("Memcpy", 40, 10, size=1_000_000, local=0, remote=2)]
    links = H.op_links(tasks, OP)
    # only 0 -> 2: 1 MB in 10 ns = 1e-5 ms -> 1 / 1e-5 = 100000 MB/ms
    assert list(links) == [(0, 2)]
    assert links[(0, 2)]["size_mb"] == 1.0 and links[(0, 2)]["bandwidth_gbps"] == 100000.0
    # a local rank of None is left out too
    assert H.op_links([_task("Memcpy", 0, 10, size=1, local=None, remote=1)], OP) == {}
