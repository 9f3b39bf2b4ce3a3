"""hccl_tasks: the rank every COMM_* row carries, and the shape of a Bandwidth Info entry
(module docstring, §7.2, §7.3). Small tasks written here, expected values by hand."""

from __future__ import annotations

import pandas as pd

from ascendprof.analyze import hccl_tasks as H

OP = "hcom_allReduce__5_1"


def _task(name, start, dur, transport="SDMA", link="HCCS", size=0, remote=1):
    return {"op_name": OP, "group": "g", "start_ns": start, "dur_ns": dur, "plane_id": 0,
            "is_master": 1, "task_name": name, "transport": transport, "link_type": link,
            "rdma_type": None, "size_bytes": size, "local_rank": 0, "remote_rank": remote}


def test_every_table_row_carries_the_rank_it_was_built_for():
    # One op: a 2 MB HCCS copy to group-rank 1 and a Notify_Wait. comm_tables(tasks, 6):
    # COMM_OPS 1 row, COMM_BANDWIDTH 5 rows (the five transports), COMM_SIZE_DIST 1 row
    # (HCCS, 2.0 MB; SDMA's own distribution is empty), COMM_LINKS 1 row (0 -> 1): rank 6 in all.
    tasks = pd.DataFrame([_task("Memcpy", 0, 100, size=2_000_000),
                          _task("Notify_Wait", 120, 30, transport="LOCAL", link="ON_CHIP")])
    out = H.comm_tables(tasks, 6)
    rows = {name: out[name].column("rank").to_pylist()
            for name in ("comm_ops", "comm_bandwidth", "comm_size_dist", "comm_links")}
    assert rows == {"comm_ops": [6], "comm_bandwidth": [6] * 5, "comm_size_dist": [6],
                    "comm_links": [6]}


def test_a_bandwidth_entry_holds_the_documented_keys_and_a_plain_dist():
    # The docstring: {transport: {"size_mb", "transit_ns", "bandwidth_gbps",
    # "large_packet_ratio", "dist": {size MB: [count, dur_ns]}}}. Two 1 MB HCCS copies of 10 ns:
    # HCCS size 2 MB, 20 ns, dist {1.0: [2, 20]}; 2 MB in 2e-5 ms = 100000 GB/s.
    tasks = [_task("Memcpy", 0, 10, size=1_000_000), _task("Memcpy", 20, 10, size=1_000_000)]
    bw = H.op_bandwidth_info(tasks, OP)
    for k, entry in bw.items():
        assert set(entry) == {"size_mb", "transit_ns", "bandwidth_gbps", "large_packet_ratio",
                              "dist"}, k
        # a plain dict: asking for a size never sent finds nothing (and adds nothing)
        assert type(entry["dist"]) is dict and entry["dist"].get(3.0) is None, k
    assert bw["HCCS"]["dist"] == {1.0: [2, 20]} and bw["HCCS"]["bandwidth_gbps"] == 100000.0
    assert bw["RDMA"]["dist"] == {}
