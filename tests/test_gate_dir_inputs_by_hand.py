"""The gate's directory inputs (compare.gate.dir_inputs) on small directories built by hand in
tmp: analyse output folders (tables/rank<r>/*.parquet, cluster_step_trace_time.csv,
op_statistics.csv, cluster_communication.json) and a copy of the 2-rank torch_npu fixture.
Every expected value is worked out by hand in the comments.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from ascendprof.compare.diff import GroupLabel
from ascendprof.compare.gate import dir_inputs as D
from ascendprof.compare.gate.errors import GateInputError
from ascendprof.engine import pipeline
from ascendprof.model import schemas as S
from ascendprof.model.errors import InputError, NothingAnalysable

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
TWO_RANKS = FIXTURES / "torch_npu-2023-2rank"

STEP_HEAD = "Step,Type,Index,Computing,Communication(Not Overlapped),Overlapped,Free\n"
OPS_HEAD = "Rank,OP Type,Accelerator Core,Count,Total Time(us)\n"


def write_table(root: Path, rank: int, name: str, cols: dict) -> None:
    d = root / "tables" / f"rank{rank}"
    d.mkdir(parents=True, exist_ok=True)
    pq.write_table(S.from_lists(name, cols), d / f"{name}.parquet")


def opinfo(elapse=2.0, transit=1.5, wait=0.5, sync=0.1, size=30.0, count=1) -> dict:
    """One rank's OPINFO as communication.json has it (§A.5)."""
    return {"Communication Time Info": {
                "Start Timestamp(us)": 1000.0, "Elapse Time(ms)": elapse,
                "Transit Time(ms)": transit, "Wait Time(ms)": wait,
                "Synchronization Time(ms)": sync, "Idle Time(ms)": 0.0,
                "Wait Time Ratio": 0.25, "Synchronization Time Ratio": 0.05},
            "Communication Bandwidth Info": {"HCCS": {
                "Transit Time(ms)": transit, "Transit Size(MB)": size, "Bandwidth(GB/s)": 20.0,
                "Large Packet Ratio": 0.0, "Size Distribution": {"0.5": [count, transit]}}}}


def write_json(path: Path, doc) -> Path:
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


# ------------------------------------------------------------------ is_output_dir

def test_what_counts_as_an_output_directory(tmp_path):
    only_tables = tmp_path / "a"
    (only_tables / "tables").mkdir(parents=True)
    assert D.is_output_dir(only_tables)  # a tables/ folder alone is enough
    only_summary = tmp_path / "b"
    only_summary.mkdir()
    (only_summary / "summary.json").write_text("{}")
    assert D.is_output_dir(only_summary)  # so is a summary.json alone
    # a cluster CSV with an unrelated sub-folder: a directory of committed copies
    csv_dir = tmp_path / "c"
    (csv_dir / "notes").mkdir(parents=True)
    (csv_dir / "cluster_step_trace_time.csv").write_text(STEP_HEAD + "1,rank,0,1,0,0,0\n")
    assert D.is_output_dir(csv_dir)
    # the same CSV next to a raw CANN PROF_ folder or a torch_npu rank folder: a profiling
    # directory that happens to hold an exported CSV
    for sub in ("PROF_000001_20240101_abc", "rank0_ascend_pt", "worker_ascend_ms"):
        prof = tmp_path / f"d_{sub}"
        (prof / sub).mkdir(parents=True)
        (prof / "cluster_step_trace_time.csv").write_text(STEP_HEAD + "1,rank,0,1,0,0,0\n")
        assert not D.is_output_dir(prof), sub


# ------------------------------------------------------------------ tables/rank<r>

def test_unreadable_parquet_is_a_gate_input_error_naming_the_rank_folder(tmp_path):
    rdir = tmp_path / "out" / "tables" / "rank0"
    rdir.mkdir(parents=True)
    (rdir / "step_trace.parquet").write_bytes(b"not parquet at all")
    with pytest.raises(GateInputError) as e:
        D.load_output_dir(tmp_path / "out")
    assert e.value.path == str(rdir)
    assert e.value.reason.startswith("unreadable Parquet table: ")
    assert e.value.exit_code == 2


def test_rank_tables_win_over_the_csv_and_lose_the_opinfo_text(tmp_path):
    out = tmp_path / "out"
    # rank 0 computes 1000 ns in step 1, rank 1 2000 ns
    for rank, comp in ((0, 1000), (1, 2000)):
        write_table(out, rank, S.STEP_TRACE, {"rank": [rank], "step": [1],
                                              "computing_ns": [comp]})
        write_table(out, rank, S.COMM_OPS, {
            "rank": [rank], "step": [1], "step_key": ["step1"], "kind": ["collective"],
            "op_name": ["hcom_allReduce__1_0_1"], "group": ["g1"], "elapse_ns": [5000],
            "opinfo_json": ['{"Communication Time Info": {}}']})
    # the CSV says 5 us = 5000 ns for both ranks: the tables are read first, so it is not used
    (out / "cluster_step_trace_time.csv").write_text(
        STEP_HEAD + "1,rank,0,5.0,0,0,0\n1,rank,1,5.0,0,0,0\n")
    side = D.load_output_dir(out)
    assert side.label == str(out)
    assert side.ranks == [0, 1]
    assert side.steps[["rank", "step", "computing_ns"]].values.tolist() == [[0, 1, 1000],
                                                                           [1, 1, 2000]]
    # the two ranks' rows in one frame numbered 0, 1 (not 0, 0: one label per row)
    assert side.steps.index.tolist() == [0, 1]
    assert side.comm_ops.index.tolist() == [0, 1]
    # COMM_OPS is read without the OPINFO text, which the gate never compares
    assert "opinfo_json" not in side.comm_ops.columns
    assert side.comm_ops["elapse_ns"].tolist() == [5000, 5000]


# ------------------------------------------------------------------ committed CSVs

def test_duplicated_step_rows_are_refused_naming_the_csv(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    csv = out / "cluster_step_trace_time.csv"
    # rank 0 step 1 twice: summed it would read as +100 %
    csv.write_text(STEP_HEAD + "1,rank,0,5.0,0,0,0\n1,rank,0,5.0,0,0,0\n")
    with pytest.raises(GateInputError) as e:
        D.load_output_dir(out)
    assert e.value.path == str(csv)
    assert e.value.reason == "duplicated rows: rank 0 step 1 appears 2 times"


def test_duplicated_op_statistics_rows_are_refused(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    csv = out / "op_statistics.csv"
    csv.write_text(OPS_HEAD + "0,MatMul,AI_CORE,3,30.0\n0,MatMul,AI_CORE,3,30.0\n"
                   "1,MatMul,AI_CORE,2,20.0\n")
    with pytest.raises(GateInputError) as e:
        D.load_output_dir(out)
    assert e.value.path == str(csv)
    assert e.value.reason == "duplicated rows: rank 0 op type MatMul (AI_CORE) appears 2 times"
    # without the repeated row it is read: 30 us = 30000 ns over 3 calls on rank 0
    csv.write_text(OPS_HEAD + "0,MatMul,AI_CORE,3,30.0\n1,MatMul,AI_CORE,2,20.0\n")
    side = D.load_output_dir(out)
    assert side.op_stats[["rank", "count", "total_ns"]].values.tolist() == [[0, 3, 30000],
                                                                           [1, 2, 20000]]


# ------------------------------------------------------------------ cluster_communication.json

def test_group_labels_from_the_26x_group_key(tmp_path):
    path = write_json(tmp_path / "cluster_communication.json", {"(0, 1)": {"step1": {
        "hcom_allReduce__1_0_1@g1": {"0": opinfo(), "1": opinfo()},
        "Total Op Info@g1": {"0": opinfo(), "1": opinfo()}}}})
    ops, bw, labels = D.read_cluster_communication(path)
    # the group id after '@', no process-group name known here, the ranks of the key
    assert labels == {"g1": GroupLabel("g1", "", (0, 1))}
    assert labels["g1"].text == "(0, 1)"
    # one op row per rank; the Total Op Info sum is no row
    assert ops["rank"].tolist() == [0, 1] and ops.index.tolist() == [0, 1]
    assert ops["elapse_ns"].tolist() == [2_000_000, 2_000_000]  # 2.0 ms
    assert bw["size_mb"].tolist() == [30.0, 30.0]


def test_older_layout_takes_the_kind_from_the_file(tmp_path):
    # older msprof-analyze: {"collective" | "p2p": {step: {op@group: {rank: OPINFO}}}}; a
    # broadcast of a p2p (pipeline) group is listed under "p2p", while its name alone would
    # make it collective (op_kind: only send / receive / batchSendRecv are p2p)
    path = write_json(tmp_path / "cluster_communication.json", {
        "p2p": {"step2": {"hcom_broadcast__483_0@g2": {"0": opinfo()},
                          "hcom_send__822_0@g2": {"0": opinfo()}}},
        "collective": {"step2": {"hcom_allReduce__1_0_1@g1": {"0": opinfo()}}}})
    ops, _, labels = D.read_cluster_communication(path)
    assert ops["kind"].tolist() == ["p2p", "p2p", "collective"]
    assert labels == {}  # the older layout's keys name no ranks


def test_a_negative_time_refuses_the_file(tmp_path):
    path = write_json(tmp_path / "cluster_communication.json", {"(0, 1)": {"step1": {
        "hcom_allReduce__1_0_1@g1": {"0": opinfo(), "1": opinfo(elapse=-1.0)}}}})
    with pytest.raises(InputError) as e:
        D.read_cluster_communication(path)
    # rank 1's one op is what the rank's own reader would leave out: one problem, named
    assert e.value.path == str(path)
    assert e.value.reason.startswith("rank 1: 1 op(s) left out: ")
    assert "Elapse Time(ms) = -1.0" in e.value.reason


def test_a_value_beyond_its_column_names_the_file(tmp_path):
    # a packet count of 1e20 does not fit int64 (max ~9.2e18): the reader's InputError names
    # the file it came from
    path = write_json(tmp_path / "cluster_communication.json", {"(0, 1)": {"step1": {
        "hcom_allReduce__1_0_1@g1": {"0": opinfo(count=1e20)}}}})
    with pytest.raises(InputError) as e:
        D.read_cluster_communication(path)
    assert e.value.path == str(path)
    assert "count" in e.value.reason


# ------------------------------------------------------------------ profiling directories

def test_profiling_dir_passes_workers_and_asks_for_no_partials(monkeypatch):
    """``gate --workers N`` reaches the engine, and the gate reads ranks without the analyses'
    per-rank parts it never compares (process_rank: several times faster)."""
    seen = {}

    def fake_run_ranks(sources, tables_dir, **kw):
        seen.update(kw, ranks=sorted(s.rank for s in sources))
        return []  # no rank read: the gate then has nothing

    monkeypatch.setattr(pipeline, "run_ranks", fake_run_ranks)
    with pytest.raises(NothingAnalysable):
        D.load_run(TWO_RANKS, workers=2)
    assert seen["ranks"] == [0, 1]
    assert seen["workers"] == 2
    assert seen["partials"] is False


def test_rank_without_step_trace_gets_the_recomputed_breakdown(tmp_path):
    prof = tmp_path / "prof"
    shutil.copytree(TWO_RANKS, prof)
    (prof / "rank1_ascend_pt" / "ASCEND_PROFILER_OUTPUT" / "step_trace_time.csv").unlink()
    side = D.load_run(prof, workers=1)
    assert side.ranks == [0, 1]
    st = side.steps.set_index("rank")
    # rank 0: the profiler's own step 2, Computing 75174.57464453117 us -> 75174575 ns
    assert st.loc[0, "step"] == 2 and st.loc[0, "computing_ns"] == 75_174_575
    # rank 1 has no step_trace_time.csv: its step comes from kernel_details (recomputed), so
    # it is there with some computing time rather than missing from the comparison
    assert 1 in st.index and st.loc[1, "computing_ns"] > 0
