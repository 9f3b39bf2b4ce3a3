"""communication.json / communication_matrix.json reader against the profiler's own files.

Expected values come from the JSON itself (parsed independently with the json module), from the
same rank's analysis.db (the profiler's second export of the same data, spec §B.3) and from hand
calculations written out below.
"""

from __future__ import annotations

import json
import sqlite3

import pytest

from ascendprof.model import schemas as S
from ascendprof.model.errors import InputError
from ascendprof.model.problems import Problems
from ascendprof.readers.communication import read_communication, read_matrix


def _out(root, rank):
    return root / f"rank_{rank}_ascend_pt" / "ASCEND_PROFILER_OUTPUT"


def test_qwen3_ops_match_json_and_total_is_not_a_row(qwen3):
    path = _out(qwen3, 0) / "communication.json"
    raw = json.loads(path.read_text())
    expected = {(step, kind, k) for step, kinds in raw.items() for kind, ops in kinds.items()
                for k in ops if k != "Total Op Info"}
    t = read_communication(path, 0)
    ops = t[S.COMM_OPS]
    assert ops.schema.equals(S.SCHEMAS[S.COMM_OPS], check_metadata=False)
    got = {(r["step_key"], r["kind"], f"{r['op_name']}@{r['group']}") for r in ops.to_pylist()}
    assert got == expected and ops.num_rows == len(expected) == 15
    assert not any(n.startswith("Total") for n in ops.column("op_name").to_pylist())
    assert set(ops.column("step").to_pylist()) == {13}
    assert set(ops.column("rank").to_pylist()) == {0}


def test_qwen3_first_op_by_hand(qwen3):
    # communication.json rank 0, step13/p2p/hcom_batchSendRecv__128_3_1@3985310405473756128:
    # Start 1764246877147674.5 us, Elapse 0.43614 ms, Wait = Sync 0.4035 ms, Idle 0.03264 ms.
    ops = read_communication(_out(qwen3, 0) / "communication.json", 0)[S.COMM_OPS].to_pylist()
    op = next(r for r in ops if r["op_name"] == "hcom_batchSendRecv__128_3_1")
    assert op["group"] == "3985310405473756128" and op["kind"] == "p2p"
    assert op["start_ns"] == 1_764_246_877_147_674_500  # exact, not via a float product
    assert (op["elapse_ns"], op["transit_ns"], op["wait_ns"], op["sync_ns"], op["idle_ns"]) == \
        (436_140, 0, 403_500, 403_500, 32_640)
    assert op["wait_ratio"] == 1.0 and op["sync_ratio"] == 1.0


@pytest.mark.parametrize("rank", [0, 1, 2, 3])
def test_qwen3_ops_match_analysis_db(qwen3, rank):
    """analysis.db CommAnalyzerTime holds the same op records in ms (spec §B.3)."""
    out = _out(qwen3, rank)
    ops = read_communication(out / "communication.json", rank)[S.COMM_OPS].to_pylist()
    with sqlite3.connect(out / "analysis.db") as db:
        rows = db.execute("select hccl_op_name, group_name, step, type, elapse_time, "
                          "transit_time, wait_time, synchronization_time, idle_time "
                          "from CommAnalyzerTime").fetchall()
    ours = {(r["op_name"], r["group"], r["step_key"], r["kind"]): r for r in ops}
    assert set(ours) == {row[:4] for row in rows}
    for name, group, step, kind, *ms in rows:
        r = ours[(name, group, step, kind)]
        got = [r["elapse_ns"], r["transit_ns"], r["wait_ns"], r["sync_ns"], r["idle_ns"]]
        assert got == [pytest.approx(v * 1e6, abs=1) for v in ms]


def test_qwen3_bandwidth_and_size_distribution(qwen3):
    path = _out(qwen3, 0) / "communication.json"
    raw = json.loads(path.read_text())
    t = read_communication(path, 0)
    n_bw = n_sd = 0
    for kinds in raw.values():
        for ops in kinds.values():
            for k, info in ops.items():
                if k == "Total Op Info":
                    continue
                for tr in info["Communication Bandwidth Info"].values():
                    n_bw += 1
                    n_sd += len(tr["Size Distribution"])
    assert t[S.COMM_BANDWIDTH].num_rows == n_bw == 75
    assert t[S.COMM_SIZE_DIST].num_rows == n_sd
    # hcom_batchSendRecv__128_4_1 HCCS: 8.388608 MB in 0.40168 ms, one 8.388608 MB packet
    bw = [r for r in t[S.COMM_BANDWIDTH].to_pylist()
          if r["op_name"] == "hcom_batchSendRecv__128_4_1" and r["transport"] == "HCCS"]
    assert len(bw) == 1
    assert bw[0]["size_mb"] == 8.388608 and bw[0]["transit_ns"] == 401_680
    assert bw[0]["bandwidth_gbps"] == pytest.approx(8.388608 / 0.40168, abs=1e-4)
    sd = [r for r in t[S.COMM_SIZE_DIST].to_pylist()
          if r["op_name"] == "hcom_batchSendRecv__128_4_1"]
    assert [(r["transport"], r["packet_size_mb"], r["count"], r["dur_ns"]) for r in sd] == \
        [("HCCS", "8.388608", 1, 401_680)]


def test_qwen3_matrix(qwen3):
    path = _out(qwen3, 2) / "communication_matrix.json"
    raw = json.loads(path.read_text())
    n = sum(len(links) for kinds in raw.values() for ops in kinds.values()
            for links in ops.values())
    links = read_matrix(path, 2)
    assert links.schema.equals(S.SCHEMAS[S.COMM_LINKS], check_metadata=False)
    assert links.num_rows == n
    rows = links.to_pylist()
    # rank 2 is local rank 1 of the pp group (global ranks [0, 2]); its link 1-0 to rank 0
    # appears under batchsendrecv-top1, and -total@ records carry no Op Name.
    top = [r for r in rows if r["link_key"] == "batchsendrecv-top1@3985310405473756128"]
    assert {(r["src_rank"], r["dst_rank"]) for r in top} == {(1, 1), (1, 0)}
    assert all(r["op_name"].startswith("hcom_batchSendRecv") for r in top)
    total = [r for r in rows if "-total@" in r["link_key"]]
    assert total and all(r["op_name"] is None for r in total)
    assert all(r["step_key"] == "step13" and r["step"] == 13 for r in rows)


def test_level1_shared(shared_data):
    out = shared_data / "torch_npu-2rank-levels/text/level1/rank1_ascend_pt/ASCEND_PROFILER_OUTPUT"
    raw = json.loads((out / "communication.json").read_text())
    names = {k for k in raw["step50"]["collective"] if k != "Total Op Info"}
    ops = read_communication(out / "communication.json", 1)[S.COMM_OPS]
    assert {f"{o}@{g}" for o, g in zip(ops.column("op_name").to_pylist(),
                                        ops.column("group").to_pylist())} == names
    assert set(ops.column("kind").to_pylist()) == {"collective"}
    links = read_matrix(out / "communication_matrix.json", 1)
    assert {r["src_rank"] for r in links.to_pylist()} == {1}


def _flat_op(start_us, elapse_ms, transit_ms, wait_ms):
    """One OPINFO record in the raw CANN shape of spec §A.5 / §7.2."""
    return {"Communication Time Info": {
        "Start Timestamp(us)": start_us, "Elapse Time(ms)": elapse_ms,
        "Transit Time(ms)": transit_ms, "Wait Time(ms)": wait_ms,
        "Synchronization Time(ms)": 0.0, "Idle Time(ms)": elapse_ms - transit_ms - wait_ms,
        "Wait Time Ratio": 0.0, "Synchronization Time Ratio": 0.0},
        "Communication Bandwidth Info": {"RDMA": {
            "Transit Size(MB)": 2.0, "Transit Time(ms)": transit_ms, "Bandwidth(GB/s)": 1.0,
            "Large Packet Ratio": 1.0, "Size Distribution": {"1.0": [2, transit_ms]}}}}


def test_flat_cann_layout(tmp_path):
    """Raw PROF_ communication.json (spec §A.5): no step level, 'Total HCCL Operators' entry."""
    data = {"hcom_allReduce__1_0_1@g1": _flat_op(1000.5, 2.0, 1.0, 0.5),
            "hcom_send__1_1_1@g2": _flat_op(2000.0, 1.0, 0.25, 0.25),
            "Total HCCL Operators": _flat_op(0, 3.0, 1.25, 0.75)}
    p = tmp_path / "communication.json"
    p.write_text(json.dumps(data))
    t = read_communication(p, 5)
    ops = t[S.COMM_OPS].to_pylist()
    assert [(o["op_name"], o["group"], o["kind"], o["step_key"], o["step"], o["rank"])
            for o in ops] == [("hcom_allReduce__1_0_1", "g1", "collective", "step", None, 5),
                              ("hcom_send__1_1_1", "g2", "p2p", "step", None, 5)]
    assert ops[0]["start_ns"] == 1_000_500 and ops[0]["elapse_ns"] == 2_000_000
    assert t[S.COMM_SIZE_DIST].column("count").to_pylist() == [2, 2]
    matrix = {"hcom_allReduce__1_0_1@g1": {"0-1": {"Transport Type": "HCCS",
                                                  "Transit Size(MB)": 4.0,
                                                  "Transit Time(ms)": 0.5,
                                                  "Bandwidth(GB/s)": 8.0}},
              "Total HCCL Operators": {"0-1": {"Transport Type": "HCCS"}}}
    pm = tmp_path / "communication_matrix.json"
    pm.write_text(json.dumps(matrix))
    links = read_matrix(pm, 5).to_pylist()
    assert len(links) == 1
    assert (links[0]["link_key"], links[0]["op_name"], links[0]["src_rank"],
            links[0]["dst_rank"], links[0]["transit_ns"]) == \
        ("hcom_allReduce__1_0_1@g1", "hcom_allReduce__1_0_1", 0, 1, 500_000)


def test_invalid_json_names_byte_offset(tmp_path):
    p = tmp_path / "communication.json"
    p.write_text('{"step1": {"collective": {')
    with pytest.raises(InputError) as e:
        read_communication(p, 0)
    assert isinstance(e.value.where, int) and str(p) in str(e.value)
    with pytest.raises(InputError):
        read_matrix(p, 0)


def test_wrong_shape_is_skipped_and_recorded(tmp_path):
    p = tmp_path / "communication.json"
    p.write_text(json.dumps({"step1": {"collective": {"op@g": 3}}, "step2": []}))
    problems = Problems()
    t = read_communication(p, 0, problems)
    assert t[S.COMM_OPS].num_rows == 0 and len(problems) == 2
    p.write_text("[1, 2]")
    with pytest.raises(InputError, match="not a JSON object"):
        read_communication(p, 0)
