"""Raw CANN HCCL small tasks -> COMM_* tables.

No public modern PROF_ raw data exists, so the raw records are built here byte by byte from the
spec tables (§D.1 names; §D.2 api_event / compact / additional layouts; §D.3 STARS logs; §D.6
time files). Every expected value below is a hand calculation from the chosen numbers.

The op (hcom_allReduce__7_0_1, not send/receive -> 5 trailing RDMA tasks), local rank 0,
device clock 50 MHz (20 ns a tick), all tasks on stream 5 (ACSQ logs, no context id):

plane 0 (HCCL API type "master")      ticks        plane 1 ("slave")
  t10 Notify_Wait          [100,150] 1000 ns        t20 Memcpy HCCS 1.5 MB ->2 [170,245] 1500 ns
  t11 Memcpy HCCS 2 MB ->1 [160,260] 2000 ns        t21 Reduce_Inline ON_CHIP 1000 B, no peer
  t12 Notify_Wait          [270,290]  400 ns            [250,252] 40 ns
  t13 RDMASend PAYLOAD 0.3 MB ->3 [300,310]
  t14 RDMASend PAYLOAD 0.4 MB ->3 [312,322]
  t15 RDMASend NOTIFY [324,330], t16 Notify_Wait [332,350],
  t17 RDMASend NOTIFY [352,356], t18 Notify_Wait [358,400]
  t19 Notify_Wait          [410,425]  300 ns
"""

from __future__ import annotations

import json
import struct

import pytest

from ascendprof.model import schemas as S
from ascendprof.model.problems import Problems
from ascendprof.readers import raw_cann
from ascendprof.scan import scan

TICK_NS = 20
DEV_CNT0 = 1_000_000
HOST_MONO0 = 2_000_000_000
LOCAL_OFFSET = 1_700_000_000_000_000_000 - 1_000_000_000
OP, GROUP_HASH = "hcom_allReduce__7_0_1", 401
NAMES = {501: "Memcpy", 502: "Notify_Wait", 503: "Reduce_Inline", 504: "RDMASend"}
INVALID = 0xFFFFFFFF
SDMA, RDMA, LOCAL = 0, 1, 2
ON_CHIP, HCCS, ROCE = 0, 1, 3
NOTIFY, PAYLOAD, NONE = 0, 1, 0xFFFF

# (task id, plane, name hash, transport, link, rdma type, bytes, remote, start tick, end tick)
TASKS = [
    (10, 0, 502, LOCAL, 0xFFFF, NONE, 0, 1, 100, 150),
    (11, 0, 501, SDMA, HCCS, NONE, 2_000_000, 1, 160, 260),
    (12, 0, 502, LOCAL, 0xFFFF, NONE, 0, 1, 270, 290),
    (13, 0, 504, RDMA, ROCE, PAYLOAD, 300_000, 3, 300, 310),
    (14, 0, 504, RDMA, ROCE, PAYLOAD, 400_000, 3, 312, 322),
    (15, 0, 504, RDMA, ROCE, NOTIFY, 0, 3, 324, 330),
    (16, 0, 502, LOCAL, 0xFFFF, NONE, 0, 3, 332, 350),
    (17, 0, 504, RDMA, ROCE, NOTIFY, 0, 3, 352, 356),
    (18, 0, 502, LOCAL, 0xFFFF, NONE, 0, 3, 358, 400),
    (19, 0, 502, LOCAL, 0xFFFF, NONE, 0, 1, 410, 425),
    (20, 1, 501, SDMA, HCCS, NONE, 1_500_000, 2, 170, 245),
    (21, 1, 503, SDMA, ON_CHIP, NONE, 1000, INVALID, 250, 252),
]


def _prefix(level, typ, ts, thread=7):
    return struct.pack("<HHIIIQ", 0x5A5A, level, typ, thread, 40, ts)


def _api(level, typ, begin, end, item, thread=7):
    return struct.pack("<HHIIIQQQ", 0x5A5A, level, typ, thread, 0, begin, end, item)


def _stars(func, stream, task, ts, cnt):
    return struct.pack("<HHHHQ", func | ((cnt % 16) << 6), 0x6BD3, stream, task, ts).ljust(64, b"\0")


def _build(root):
    d = root / "PROF_000001_1_X"
    dev, host = d / "device_0", d / "host" / "data"
    (dev / "data").mkdir(parents=True)
    host.mkdir(parents=True)
    (dev / "info.json.0").write_text(json.dumps({"rank_id": 0, "DeviceInfo": [
        {"id": 0, "hwts_frequency": "50"}], "CPU": [{"Frequency": ""}]}))
    (dev / "dev_start.log.0").write_text(f"clock_monotonic_raw: 1\ncntvct: {DEV_CNT0}\n")
    (dev / "host_start.log.0").write_text(f"[Host]\nclock_monotonic_raw: {HOST_MONO0}\ncntvct: 5\n")
    (dev / "start_info.0").write_text(json.dumps({"collectionTimeBegin": "1700000000000000",
                                                  "clockMonotonicRaw": "1000000000"}))
    logs = []
    for task, *_, s, e in TASKS:
        logs += [(DEV_CNT0 + s, 0, task), (DEV_CNT0 + e, 1, task)]
    stars = b"".join(_stars(f, 5, t, ts, i) for i, (ts, f, t) in enumerate(sorted(logs)))
    (dev / "data" / "stars_soc.data.0.slice_0").write_bytes(stars)
    # host (monotonic ns, all before the device tasks): node API of the op, one HCCL API per
    # small task holding its hccl_info and task_track
    h0 = HOST_MONO0 - 1_000_000
    api = [_api(10000, 1, h0, h0 + 900_000, 301)]
    info, track = [], []
    for k, (task, plane, name, tr, link, rdma, size, remote, *_) in enumerate(TASKS):
        b = h0 + 1000 + k * 1000
        api.append(_api(5500, 1 if plane == 0 else 2, b, b + 500, 600 + k))
        info.append((_prefix(5500, 0, b + 100) + struct.pack(
            "<QQQIIIIIIQIIdQQQIIIII", name, 0, 999, 0, remote, 4, 0, plane, INVALID, 0, 0, 0,
            0.0, 0, 0, size, 0, 0, link, tr, rdma)).ljust(256, b"\0"))
        track.append((_prefix(5000, 2, b + 200) + struct.pack(
            "<HHHHQQHHB", 0, 5, task, 0, 2, 0, 0, 0, 0)).ljust(64, b"\0"))
    hop = (_prefix(10000, 10, h0 + 10) + struct.pack("<BBQQQ", 0, 4, 0, 1024, GROUP_HASH)
           ).ljust(64, b"\0")
    (host / "unaging.api_event.data.slice_0").write_bytes(b"".join(api))
    (host / "unaging.additional.hccl_info.slice_0").write_bytes(b"".join(info[:5]))
    (host / "aging.additional.hccl_info.slice_0").write_bytes(b"".join(info[5:]))
    (host / "unaging.compact.task_track.slice_0").write_bytes(b"".join(track))
    (host / "unaging.compact.hccl_op_info.slice_0").write_bytes(hop)
    (host / "unaging.additional.hash_dic.slice_0").write_text(
        f"301:{OP}\n401:10.0.0.1%eth0_60000_0_1\n"
        + "".join(f"{k}:{v}\n" for k, v in NAMES.items()))
    (host / "unaging.additional.type_info_dic.slice_0").write_text(
        "5500_1:master\n5500_2:slave\n5000_2:NOTIFY_WAIT\n")
    return d


@pytest.fixture
def comm(tmp_path):
    _build(tmp_path)
    src = scan(tmp_path, Problems())[0]
    return raw_cann.read(src)


def test_comm_ops_by_hand(comm):
    ops = comm.tables[S.COMM_OPS].to_pylist()
    assert len(ops) == 1
    op = ops[0]
    assert (op["op_name"], op["group"], op["kind"], op["step_key"], op["step"]) == \
        (OP, str(GROUP_HASH), "collective", "step", None)
    # start: earliest task (t10, tick 100) -> host mono0 + 100 ticks * 20 ns + local offset
    assert op["start_ns"] == HOST_MONO0 + 100 * TICK_NS + LOCAL_OFFSET
    # master plane 0: transit = Memcpy t11 (2000) + RDMA run t13..t18 ((400-300)*20 = 2000)
    assert op["transit_ns"] == 2000 + 2000
    # wait = t10 (1000) + t12 (400) + t19 (300); t16 / t18 are inside the RDMA run, skipped
    assert op["wait_ns"] == 1000 + 400 + 300
    # synchronization: only t10 comes before the first transit
    assert op["sync_ns"] == 1000
    # elapse over the master plane: (425 - 100) ticks
    assert op["elapse_ns"] == 325 * TICK_NS == 6500
    assert op["idle_ns"] == 6500 - 4000 - 1700 == 800
    assert op["wait_ratio"] == round(1700 / 5700, 4) == 0.2982
    assert op["sync_ratio"] == round(1000 / 5000, 4) == 0.2


def test_comm_bandwidth_and_size_distribution_by_hand(comm):
    bw = {r["transport"]: r for r in comm.tables[S.COMM_BANDWIDTH].to_pylist()}
    assert list(bw) == ["RDMA", "HCCS", "PCIE", "SDMA", "SIO"]
    # HCCS: t11 2 MB/2000 ns + t20 1.5 MB/1500 ns (both planes); 3.5 MB in 0.0035 ms:
    # (3.5/1000) GB / (0.0035/1000) s = 1000 GB/s; no packet above 32 MB
    assert bw["HCCS"]["size_mb"] == pytest.approx(3.5) and bw["HCCS"]["transit_ns"] == 3500
    assert bw["HCCS"]["bandwidth_gbps"] == 1000.0 and bw["HCCS"]["large_packet_ratio"] == 0
    # SDMA totals include HCCS (t21 is ON_CHIP: no transit)
    assert bw["SDMA"]["size_mb"] == pytest.approx(3.5) and bw["SDMA"]["transit_ns"] == 3500
    assert bw["SDMA"]["bandwidth_gbps"] == 1000.0
    # RDMA: one run, 0.3 + 0.4 = 0.7 MB in 2000 ns -> 0.0007 / 0.000002 = 350 GB/s; 0.7 > 0.5
    assert bw["RDMA"]["size_mb"] == pytest.approx(0.7) and bw["RDMA"]["transit_ns"] == 2000
    assert bw["RDMA"]["bandwidth_gbps"] == 350.0 and bw["RDMA"]["large_packet_ratio"] == 1.0
    assert bw["PCIE"]["size_mb"] == 0 and bw["SIO"]["transit_ns"] == 0
    dist = {(r["transport"], r["packet_size_mb"]): (r["count"], r["dur_ns"])
            for r in comm.tables[S.COMM_SIZE_DIST].to_pylist()}
    assert dist == {("HCCS", "2.0"): (1, 2000), ("HCCS", "1.5"): (1, 1500),
                    ("RDMA", "0.7"): (1, 2000)}


def test_comm_links_by_hand(comm):
    links = {(r["src_rank"], r["dst_rank"]): r for r in comm.tables[S.COMM_LINKS].to_pylist()}
    assert set(links) == {(0, 1), (0, 3), (0, 2), (0, 0)}
    assert {r["link_key"] for r in links.values()} == {f"{OP}@{GROUP_HASH}"}
    assert {r["op_name"] for r in links.values()} == {OP}
    one, three, two, local = links[(0, 1)], links[(0, 3)], links[(0, 2)], links[(0, 0)]
    # 0-1: t11, 2 MB in 2000 ns -> 2 / 0.002 ms = 1000
    assert (one["transport"], one["size_mb"], one["transit_ns"], one["bandwidth_gbps"],
            one["large_packet_ratio"]) == ("HCCS", 2.0, 2000, 1000.0, 0.0)
    # 0-3: the RDMA run, 0.7 MB in 2000 ns -> 350; 0.7 > 0.5 MB
    assert (three["transport"], three["transit_ns"], three["bandwidth_gbps"],
            three["large_packet_ratio"]) == ("RDMA", 2000, 350.0, 1.0)
    assert three["size_mb"] == pytest.approx(0.7)
    # 0-2: t20, 1.5 MB in 1500 ns
    assert (two["transport"], two["size_mb"], two["transit_ns"], two["bandwidth_gbps"]) == \
        ("HCCS", 1.5, 1500, 1000.0)
    # 0-0: t21 ON_CHIP with no peer -> LOCAL; 0.001 MB in 40 ns = 0.001 / 0.00004 = 25;
    # LOCAL has no threshold (0), so the packet is large
    assert (local["transport"], local["size_mb"], local["transit_ns"], local["bandwidth_gbps"],
            local["large_packet_ratio"]) == ("LOCAL", 0.001, 40, 25.0, 1.0)


def test_hccl_small_tasks_are_not_kernels(comm):
    assert comm.tables[S.KERNELS].num_rows == 0
