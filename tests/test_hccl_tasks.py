"""hccl_tasks (spec §7.2/§7.3) on real small tasks and on small hand-made cases.

Real data: the torch_npu db export of level1 (2 ranks) holds the HCCL small tasks
(COMMUNICATION_TASK_INFO + TASK) and, in analysis.db, the profiler's own per-op results
(CommAnalyzerTime / CommAnalyzerBandwidth / CommAnalyzerMatrix) computed from the same tasks.
The small tasks are read here with sqlite3 and fed through hccl_tasks; the results must equal
the profiler's.

What the comparison showed (and the tolerances below encode):
- COMMUNICATION_TASK_INFO has no isMaster column. The profiler's transit / wait /
  synchronization equal, for every op of both ranks, those of plane 1 alone (the first plane of
  the HCCL master thread; plane 0 holds only the local ON_CHIP copies). The test marks plane 1
  as master.
- Elapse equals the big op's window (COMMUNICATION_OP end - start), not the master plane's span
  that §7.2 describes: the CANN version that wrote this data uses the op window. So hccl_tasks is
  run with elapse="op" here; with the spec's elapse="master" only elapse/idle would differ.
- The profiler's times are float ns converted from device ticks (88.75099321875 ms), TASK's are
  whole ns: per-task rounding (< 1 ns a task) is allowed, and bandwidth (4 dp) within 1e-3
  relative. Start Timestamp of analysis.db is TASK's earliest task of the op shifted by one
  constant per rank (+13.5 us on rank 0, -21.5 us on rank 1: the two files were aligned to the
  wall clock separately), so start is checked as a constant shift.
"""

from __future__ import annotations

import sqlite3

import pandas as pd
import pytest

from ascendprof.analyze import hccl_tasks as H
from conftest import FIXTURES, SHARED, SHARED_MISSING

LEVEL1 = "torch_npu-2rank-levels/db/level1/rank{r}_ascend_pt/ASCEND_PROFILER_OUTPUT"

_TASKS_SQL = """
select o.value op_name, s.value task_name, i.planeId plane_id, tt.name transport,
       lt.name link_type, rt.name rdma_type, i.size size_bytes, i.srcRank local_rank,
       i.dstRank remote_rank, t.startNs start_ns, t.endNs - t.startNs dur_ns,
       op.startNs op_start_ns, op.endNs op_end_ns
from COMMUNICATION_TASK_INFO i
join TASK t on t.globalTaskId = i.globalTaskId
join STRING_IDS s on s.id = i.taskType
join STRING_IDS o on o.id = i.name
join COMMUNICATION_OP op on op.opId = i.opId
left join ENUM_HCCL_TRANSPORT_TYPE tt on tt.id = i.transportType
left join ENUM_HCCL_LINK_TYPE lt on lt.id = i.linkType
left join ENUM_HCCL_RDMA_TYPE rt on rt.id = i.rdmaType
"""


def _ro(path):
    return sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)


def _real(rank):
    """Rank 0 from the copy shipped in fixtures/ (so these oracles run on any clone), rank 1
    from ../shared/data."""
    if rank == 0:
        d = FIXTURES / "torch_npu-db-level1-rank0" / "rank0_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
    elif SHARED is None:
        pytest.skip(SHARED_MISSING)
    else:
        d = SHARED / LEVEL1.format(r=rank)
    with _ro(d / f"ascend_pytorch_profiler_{rank}.db") as c:
        tasks = pd.read_sql(_TASKS_SQL, c)
    with _ro(d / "analysis.db") as c:
        time = pd.read_sql("select * from CommAnalyzerTime", c)
        bw = pd.read_sql("select * from CommAnalyzerBandwidth", c)
        matrix = pd.read_sql("select * from CommAnalyzerMatrix", c)
    # the profiler keys groups by the group-name hash; one group in this run
    assert time["group_name"].nunique() == 1
    tasks["group"] = time["group_name"].iloc[0]
    tasks["is_master"] = (tasks["plane_id"] == 1).astype(int)
    return tasks, time, bw, matrix


@pytest.mark.parametrize("rank", [0, 1])
def test_time_info_equals_the_profilers_comm_analyzer_time(rank):
    tasks, ref, _, _ = _real(rank)
    ops = H.comm_tables(tasks, rank, elapse="op")["comm_ops"].to_pandas().set_index("op_name")
    assert sorted(ops.index) == sorted(ref["hccl_op_name"]) and len(ref) == 4
    for _, r in ref.iterrows():
        got = ops.loc[r["hccl_op_name"]]
        n = int((tasks["op_name"] == r["hccl_op_name"]).sum())
        for col, ns in (("elapse_time", "elapse_ns"), ("transit_time", "transit_ns"),
                        ("wait_time", "wait_ns"), ("synchronization_time", "sync_ns"),
                        ("idle_time", "idle_ns")):
            assert got[ns] == pytest.approx(r[col] * 1e6, abs=n), (r["hccl_op_name"], col)
        assert got["kind"] == r["type"] == "collective"
        assert got["group"] == r["group_name"]
    # start: one constant shift per rank (the db's TASK times and analysis.db were aligned to
    # the wall clock separately), equal for every op within the float's 0.25 us resolution
    shift = [ops.loc[r["hccl_op_name"], "start_ns"] / 1e3 - r["start_timestamp"]
             for _, r in ref.iterrows()]
    assert max(shift) - min(shift) <= 0.5 and abs(shift[0]) < 50
    # ratios are not stored in analysis.db: recompute them from its times (4 dp, §7.2)
    for _, r in ref.iterrows():
        got = ops.loc[r["hccl_op_name"]]
        w, t, s = r["wait_time"], r["transit_time"], r["synchronization_time"]
        assert got["wait_ratio"] == pytest.approx(round(w / (w + t), 4), abs=1e-4)
        assert got["sync_ratio"] == pytest.approx(round(s / (s + t), 4), abs=1e-4)


@pytest.mark.parametrize("rank", [0, 1])
def test_spec_elapse_spans_the_master_plane_only(rank):
    tasks, ref, _, _ = _real(rank)
    ops = H.comm_tables(tasks, rank)["comm_ops"].to_pandas().set_index("op_name")
    for name, g in tasks[tasks["plane_id"] == 1].groupby("op_name"):
        span = (g["start_ns"] + g["dur_ns"]).max() - g["start_ns"].min()
        assert ops.loc[name, "elapse_ns"] == span
        r = ref.set_index("hccl_op_name").loc[name]
        assert ops.loc[name, "transit_ns"] == pytest.approx(r["transit_time"] * 1e6, abs=len(g))


@pytest.mark.parametrize("rank", [0, 1])
def test_bandwidth_equals_the_profilers_comm_analyzer_bandwidth(rank):
    tasks, _, ref, _ = _real(rank)
    out = H.comm_tables(tasks, rank, elapse="op")
    bw = out["comm_bandwidth"].to_pandas().set_index(["op_name", "transport"])
    dist = out["comm_size_dist"].to_pandas()
    # analysis.db keeps only transports with traffic, one row per packet size
    for (op, transport), g in ref.groupby(["hccl_op_name", "transport_type"]):
        got = bw.loc[(op, transport)]
        r = g.iloc[0]
        n = int((tasks["op_name"] == op).sum())
        assert got["size_mb"] == pytest.approx(r["transit_size"], rel=1e-12)
        assert got["transit_ns"] == pytest.approx(r["transit_time"] * 1e6, abs=n)
        assert got["bandwidth_gbps"] == pytest.approx(r["bandwidth"], rel=1e-3)
        assert got["large_packet_ratio"] == r["large_packet_ratio"]
        want = {(round(s, 6), c, round(d * 1e6)) for s, c, d in
                zip(g["package_size"], g["count"], g["total_duration"]) if c}
        mine = dist[(dist["op_name"] == op) & (dist["transport"] == transport)]
        have = {(round(float(s), 6), c, d) for s, c, d in
                zip(mine["packet_size_mb"], mine["count"], mine["dur_ns"])}
        assert {(s, c) for s, c, _ in have} == {(s, c) for s, c, _ in want}
        for s, c, d in have:
            ref_d = next(x for x in want if x[:2] == (s, c))[2]
            assert abs(d - ref_d) <= c
    # the other transports are present with zeros
    assert set(bw.loc[ref["hccl_op_name"].iloc[0]].index) == set(H.BANDWIDTH_TYPES)
    assert bw.loc[(ref["hccl_op_name"].iloc[0], "RDMA"), "size_mb"] == 0


@pytest.mark.parametrize("rank", [0, 1])
def test_links_equal_the_profilers_comm_analyzer_matrix(rank):
    tasks, _, _, ref = _real(rank)
    links = H.comm_tables(tasks, rank, elapse="op")["comm_links"].to_pandas()
    assert (links["link_key"] == links["op_name"] + "@" + links["group"]).all()
    by = links.set_index(["op_name", "src_rank", "dst_rank"])
    # top1/middle/bottom rows name the op whose own record they are
    picked = ref[ref["op_name"] != ""]
    assert len(picked) > 0
    for _, r in picked.iterrows():
        got = by.loc[(r["op_name"], int(r["src_rank"]), int(r["dst_rank"]))]
        assert got["transport"] == r["transport_type"]
        assert got["size_mb"] == pytest.approx(r["transit_size"], rel=1e-12)
        assert got["transit_ns"] == pytest.approx(r["transit_time"] * 1e6, abs=20)
        assert got["bandwidth_gbps"] == pytest.approx(r["bandwidth"], rel=1e-3)
    # -total rows sum every op's record of the link
    totals = links.groupby(["src_rank", "dst_rank"])[["size_mb", "transit_ns"]].sum()
    for _, r in ref[ref["hccl_op_name"] == "allreduce-total"].iterrows():
        got = totals.loc[(int(r["src_rank"]), int(r["dst_rank"]))]
        assert got["size_mb"] == pytest.approx(r["transit_size"], rel=1e-12)
        assert got["transit_ns"] == pytest.approx(r["transit_time"] * 1e6, abs=80)


# ----------------------------------------------------------------------------- by hand

def _task(name, start, dur, plane=0, master=1, transport="SDMA", link="HCCS", rdma=None,
          size=0, local=0, remote=1, op="hcom_send__1_1"):
    return {"op_name": op, "group": "g", "start_ns": start, "dur_ns": dur, "plane_id": plane,
            "is_master": master, "task_name": name, "transport": transport, "link_type": link,
            "rdma_type": rdma, "size_bytes": size, "local_rank": local, "remote_rank": remote}


def test_send_op_payload_run_uses_three_trailing_tasks_and_skips_an_unclosed_run():
    # send op -> N = 3: run of 2 payloads at 0 and 100, then 2 trailing tasks; the run time
    # is end of task index 0+2+3-2 = 3 (start 300 + dur 50) minus start 0 = 350 ns.
    rdma = dict(transport="RDMA", link="ROCE")
    tasks = [_task("RDMASend", 0, 40, rdma="RDMA_SEND_PAYLOAD", size=400_000, **rdma),
             _task("RDMASend", 100, 40, rdma="RDMA_SEND_PAYLOAD", size=300_000, **rdma),
             _task("RDMASend", 200, 40, rdma="RDMA_SEND_NOTIFY", **rdma),
             _task("Notify_Wait", 300, 50, transport="LOCAL", link="ON_CHIP"),
             # an unclosed run at the end: 1 payload, needs index 4+1+3-2 = 6 > last (5)
             _task("RDMASend", 400, 10, rdma="RDMA_SEND_PAYLOAD", size=999, **rdma),
             _task("Notify_Wait", 500, 7, transport="LOCAL", link="ON_CHIP")]
    t = H.op_time_info(tasks, "hcom_send__1_1")
    # the Notify_Wait at 300 is inside the skipped trailing tasks; only the one at 500 counts
    assert (t["transit_ns"], t["wait_ns"], t["sync_ns"]) == (350, 7, 0)
    assert t["elapse_ns"] == 507 and t["idle_ns"] == 507 - 350 - 7
    assert t["wait_ratio"] == round(7 / 357, 4) and t["sync_ratio"] == 0
    b = H.op_bandwidth_info(tasks, "hcom_send__1_1")["RDMA"]
    # 0.7 MB in 350 ns = 0.00035 ms -> 0.7/1000 / (0.00035/1000) = 2000 GB/s; 0.7 > 0.5 MB
    assert b["size_mb"] == pytest.approx(0.7) and b["transit_ns"] == 350
    assert b["bandwidth_gbps"] == 2000.0 and b["large_packet_ratio"] == 1.0
    links = H.op_links(tasks, "hcom_send__1_1")
    assert links[(0, 1)]["transport"] == "RDMA" and links[(0, 1)]["transit_ns"] == 350


def test_no_master_task_leaves_times_null_and_bad_columns_raise():
    t = H.op_time_info([_task("Memcpy", 10, 5, master=0)], "op")
    assert t["start_ns"] == 10 and t["transit_ns"] is None
    with pytest.raises(ValueError, match="lacks columns"):
        H.comm_tables(pd.DataFrame({"op_name": ["x"]}), 0)
    with pytest.raises(ValueError, match="elapse"):
        H.comm_tables(pd.DataFrame([_task("Memcpy", 0, 1)]), 0, elapse="bogus")


@pytest.mark.parametrize("name, kind", [
    ("hcom_send__1_1", "p2p"), ("HCOM_RECEIVE__3_0_1", "p2p"), ("hcom_batchSendRecv__8_2_1", "p2p"),
    ("hcom_allReduce__210_0_1", "collective"), ("hcom_broadcast__1_1", "collective"),
    ("my_send", "collective")])  # the prefix decides, not a 'send' anywhere
def test_op_kind(name, kind):
    assert H.op_kind(name) == kind


def test_transport_keys_of_sdma_links_by_hand():
    """§7.2 Bandwidth Info keys of SDMA transit tasks (Memcpy / Reduce_Inline leaving the chip):
    HCCS_SW counts as HCCS, PCIE / HCCS / SIO as themselves, anything else as SDMA; SDMA's size
    and time then add HCCS + PCIE + SIO. §7.3 matrix Transport Type: ON_CHIP is LOCAL, HCCS_SW is
    HCCS, others as they are. Sizes 1..6 MB, durations 10..60 ns, one per link type."""
    links = ["HCCS_SW", "HCCS", "PCIE", "SIO", "RESERVED", "ON_CHIP"]
    tasks = [_task("Memcpy" if k % 2 else "Reduce_Inline", 100 * k, 10 * (k + 1), link=lk,
                   size=(k + 1) * 1_000_000, remote=k + 1, op="hcom_allReduce__1_1")
             for k, lk in enumerate(links)]
    bw = H.op_bandwidth_info(tasks, "hcom_allReduce__1_1")
    got = {k: (round(v["size_mb"], 6), v["transit_ns"]) for k, v in bw.items()}
    # HCCS: HCCS_SW (1 MB, 10 ns) + HCCS (2, 20); PCIE (3, 30); SIO (4, 40);
    # SDMA: RESERVED (5, 50) + HCCS + PCIE + SIO; ON_CHIP is no transit
    assert got == {"RDMA": (0, 0), "HCCS": (3.0, 30), "PCIE": (3.0, 30), "SIO": (4.0, 40),
                   "SDMA": (5.0 + 3 + 3 + 4, 50 + 30 + 30 + 40)}
    assert bw["HCCS"]["dist"] == {1.0: [1, 10], 2.0: [1, 20]}
    assert bw["SDMA"]["dist"] == {5.0: [1, 50]}  # its own packets only
    # 3 MB in 30 ns: (3/1000) GB / (30e-9 s) = 100000 GB/s
    assert bw["HCCS"]["bandwidth_gbps"] == 100000.0
    matrix = {dst: v["transport"] for (_, dst), v in H.op_links(tasks, "hcom_allReduce__1_1").items()}
    assert matrix == {1: "HCCS", 2: "HCCS", 3: "PCIE", 4: "SIO", 5: "RESERVED", 6: "LOCAL"}


def test_a_payload_run_at_the_very_end_is_skipped():
    rdma = dict(transport="RDMA", link="ROCE", op="hcom_allReduce__1_1")
    tasks = [_task("Memcpy", 0, 5, size=1_000_000, op="hcom_allReduce__1_1"),
             _task("RDMASend", 10, 5, rdma="RDMA_SEND_PAYLOAD", size=1_000_000, **rdma),
             _task("RDMASend", 20, 5, rdma="RDMA_SEND_PAYLOAD", size=1_000_000, **rdma)]
    t = H.op_time_info(tasks, "hcom_allReduce__1_1")
    assert (t["transit_ns"], t["elapse_ns"]) == (5, 25)
    assert H.op_bandwidth_info(tasks, "hcom_allReduce__1_1")["RDMA"]["size_mb"] == 0
    assert set(H.op_links(tasks, "hcom_allReduce__1_1")) == {(0, 1)}


def test_receive_ops_use_three_trailing_tasks_and_bandwidth_has_four_decimals():
    # hcom_receive: N = 3 (§7.2). Payload 1 MB at [0, 1) then 2 tasks: time = end of task
    # 0 + 1 + 3 - 2 = 2 (start 6, dur 1) - 0 = 7 ns; 1 MB in 7 ns = 142857.142857... GB/s
    rdma = dict(transport="RDMA", link="ROCE", op="hcom_receive__4_1")
    tasks = [_task("RDMASend", 0, 1, rdma="RDMA_SEND_PAYLOAD", size=1_000_000, **rdma),
             _task("RDMASend", 3, 1, rdma="RDMA_SEND_NOTIFY", **rdma),
             _task("Notify_Wait", 6, 1, transport="LOCAL", link="ON_CHIP", op="hcom_receive__4_1")]
    b = H.op_bandwidth_info(tasks, "hcom_receive__4_1")["RDMA"]
    assert b["transit_ns"] == 7 and b["bandwidth_gbps"] == 142857.1429
    link = H.op_links(tasks, "hcom_receive__4_1")[(0, 1)]
    assert link["transit_ns"] == 7 and link["bandwidth_gbps"] == 142857.1429
    # the same tasks in a collective (N = 5) leave the run unclosed: nothing counted
    assert H.op_bandwidth_info(tasks, "hcom_allReduce__4_1")["RDMA"]["transit_ns"] == 0


def test_zero_time_links_and_payloads_over_other_transports():
    # a copy of 0 ns: bandwidth 0 (no division by zero), large-packet ratio of its one packet
    links = H.op_links([_task("Memcpy", 5, 0, size=40_000_000, op="hcom_allReduce__1_1")],
                       "hcom_allReduce__1_1")
    assert links[(0, 1)]["bandwidth_gbps"] == 0.0 and links[(0, 1)]["large_packet_ratio"] == 1.0
    # an RDMA payload run over a transport outside the five keys gets its own entry
    other = dict(transport="UB", link="ROCE", op="hcom_send__1_1")
    tasks = [_task("RDMASend", 0, 2, rdma="RDMA_SEND_PAYLOAD", size=2_000_000, **other),
             _task("RDMASend", 4, 2, **other), _task("RDMASend", 8, 2, **other)]
    bw = H.op_bandwidth_info(tasks, "hcom_send__1_1")
    assert list(bw) == ["RDMA", "HCCS", "PCIE", "SDMA", "SIO", "UB"]
    ub = bw["UB"]
    assert (ub["size_mb"], ub["transit_ns"], ub["dist"]) == (2.0, 10, {2.0: [1, 10]})  # 0..8+2
    assert ub["large_packet_ratio"] == 1.0  # no threshold for it: any packet is large


_TIME_KEYS = ("start_ns", "elapse_ns", "transit_ns", "wait_ns", "sync_ns", "idle_ns",
              "wait_ratio", "sync_ratio")


def test_time_info_by_hand_synchronization_is_every_wait_before_the_first_transit():
    # Master plane 1 (is_master on its first task), in time order:
    #   Notify_Wait [0, 10) and [20, 35): waits before any transit -> wait and synchronization
    #   Memcpy over SDMA/HCCS [40, 70): transit 30
    #   Notify_Wait [80, 85): a wait after the transit -> wait only
    # Plane 0 (not master): an on-chip copy [5, 205), left out of every field but the op span.
    op = "hcom_allReduce__7_1"
    tasks = [_task("Notify_Wait", 0, 10, plane=1, transport="LOCAL", link="ON_CHIP", op=op),
             _task("Notify_Wait", 20, 15, plane=1, master=0, transport="LOCAL", link="ON_CHIP",
                   op=op),
             _task("Memcpy", 40, 30, plane=1, master=0, size=2_000_000, op=op),
             _task("Notify_Wait", 80, 5, plane=1, master=0, transport="LOCAL", link="ON_CHIP",
                   op=op),
             _task("Memcpy", 5, 200, plane=0, master=0, link="ON_CHIP", op=op)]
    # elapse over the master plane: 85 - 0; idle = 85 - transit 30 - wait (10+15+5) = 25;
    # wait ratio 30 / (30 + 30) = 0.5; sync 25, its ratio 25 / (25 + 30) = 0.4545 (4 dp)
    assert H.op_time_info(tasks, op) == {
        "start_ns": 0, "elapse_ns": 85, "transit_ns": 30, "wait_ns": 30, "sync_ns": 25,
        "idle_ns": 25, "wait_ratio": 0.5, "sync_ratio": 0.4545}
    # elapse="op" without the op's window: the span of every task of every plane, 0 .. 205
    t = H.op_time_info(tasks, op, elapse="op")
    assert (t["elapse_ns"], t["idle_ns"]) == (205, 205 - 30 - 30)
    # ... and with it, the window as given
    t = H.op_time_info(tasks, op, elapse="op", op_window=(-10, 300))
    assert (t["start_ns"], t["elapse_ns"]) == (-10, 310)
    # no task marked master: only the start is known, every other field is there and None
    no_master = [dict(x, is_master=0) for x in tasks]
    assert H.op_time_info(no_master, op) == dict.fromkeys(_TIME_KEYS) | {"start_ns": 0}


def test_sdma_large_packet_ratio_is_zero_as_the_profiler_writes_it():
    # A 40 MB copy over a RESERVED link counts as SDMA, one over HCCS as HCCS: HCCS's packet is
    # above its 32 MB threshold (ratio 1.0); SDMA's ratio is written 0 whatever its packets.
    op = "hcom_allReduce__8_1"
    tasks = [_task("Memcpy", 0, 100, link="RESERVED", size=40_000_000, op=op),
             _task("Memcpy", 200, 100, link="HCCS", size=40_000_000, remote=2, op=op)]
    bw = H.op_bandwidth_info(tasks, op)
    assert bw["SDMA"]["dist"] == {40.0: [1, 100]}
    assert bw["SDMA"]["large_packet_ratio"] == 0.0
    assert bw["HCCS"]["large_packet_ratio"] == 1.0
