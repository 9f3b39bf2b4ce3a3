"""Legacy MindSpore 1.x/2.0 output (mindspore-legacy/ in the shared data) feeds the common tables.

Expected values are recomputed here from the source CSV text with the csv module, independent
of the reader: the profiler writes step trace values as 100 MHz cycle counts (10 ns) and the
cluster analyse files in ms (MindInsight divides step trace values by 1e5 to get ms).
"""

from __future__ import annotations

import csv
import json

import pytest

from ascendprof.model import schemas as S
from ascendprof.analyze import iteration_trace
from ascendprof.model.errors import InputError
from ascendprof.model.problems import Problems
from ascendprof.readers import legacy_mindspore, read_source
from ascendprof.scan import LEGACY_MS, scan


def _cluster(shared_data):
    return shared_data / "mindspore-legacy" / "cluster_propose"


def _read_ranks(path):
    srcs = [s for s in scan(path, Problems()) if s.kind == LEGACY_MS]
    return {s.rank: read_source(s) for s in srcs}


def test_cluster_propose_gives_four_ranks_of_iterations(shared_data):
    ranks = _read_ranks(_cluster(shared_data))
    assert sorted(ranks) == [0, 1, 2, 3]
    for rank, data in ranks.items():
        it = data.tables[S.ITERATIONS]
        assert it.schema.equals(S.SCHEMAS[S.ITERATIONS], check_metadata=False)
        rows = list(csv.DictReader(open(_cluster(shared_data) / f"step_trace_raw_{rank}_detail_time.csv")))
        steps = [r for r in rows if r["step_num"].isdigit()]   # last row '-' is the average
        assert it.column("step").to_pylist() == [int(r["step_num"]) for r in steps]
        assert it.column("fp_bp_ns").to_pylist() == [int(r["fp_and_bp"]) * 10 for r in steps]
        assert it.column("iteration_interval_ns").to_pylist() == [
            int(r["iteration_interval"]) * 10 for r in steps]
        assert it.column("tail_ns").to_pylist() == [int(r["tail"]) * 10 for r in steps]
        assert it.column("start_ns").to_pylist() == [int(r["start_point"]) * 10 for r in steps]
        assert set(it.column("rank").to_pylist()) == {rank}


def test_cluster_propose_step_trace_matches_cluster_analyse_rows(shared_data):
    ranks = _read_ranks(_cluster(shared_data))
    for rank, data in ranks.items():
        st = data.tables[S.STEP_TRACE]
        assert st.schema.equals(S.SCHEMAS[S.STEP_TRACE], check_metadata=False)
        rows = list(csv.DictReader(open(
            _cluster(shared_data) / f"ascend_cluster_analyse_pipeline-parallel_2_4_{rank}.csv")))
        # 6 rows for 5 steps: row i is step i, the last is the average (MindInsight reads it so)
        assert len(rows) == 6 and st.num_rows == 5
        assert st.column("step").to_pylist() == [1, 2, 3, 4, 5]
        for got, row in zip(st.to_pylist(), rows):
            assert got["computing_ns"] == round(float(row["computation_time"]) * 1e6)
            assert got["stage_ns"] == round(float(row["stage_time"]) * 1e6)
            assert got["bubble_ns"] == round(float(row["receive_alone_time"]) * 1e6)
            assert got["comm_not_overlapped_ns"] == round(float(row["communication_alone_time"]) * 1e6)
            assert got["comm_not_overlapped_excl_receive_ns"] == round(
                float(row["collective_communication_alone_time"]) * 1e6)
            assert got["rank"] == rank and got["device_id"] == rank
    # rank 0 step 1 by hand: 13.8202 ms computing, 121.8989 ms stage
    first = ranks[0].tables[S.STEP_TRACE].to_pylist()[0]
    assert first["computing_ns"] == 13_820_200 and first["stage_ns"] == 121_898_900


def test_cluster_propose_comm_ops_from_hccl_raw(shared_data):
    ranks = _read_ranks(_cluster(shared_data))
    path = _cluster(shared_data) / "hccl_raw_2.csv"
    rows = [r for r in csv.DictReader(open(path)) if r["step_num"].isdigit()]
    ops = [(int(r["step_num"]), k, v) for r in rows
           for k, v in json.loads(r["communication_operator_cost"]).items()]
    t = ranks[2].tables[S.COMM_OPS]
    assert t.num_rows == len(ops)
    assert sum(t.column("transit_ns").to_pylist()) == sum(round(v[1] * 1e6) for _, _, v in ops)
    assert sum(t.column("wait_ns").to_pylist()) == sum(round(v[2] * 1e6) for _, _, v in ops)
    kinds = dict(zip(t.column("op_name").to_pylist(), t.column("kind").to_pylist()))
    assert all(kinds[k] == ("p2p" if ("Send" in k or "Receive" in k) else "collective")
               for _, k, _ in ops)


def test_iteration_trace_breakdown_per_rank(shared_data):
    import pyarrow as pa

    ranks = _read_ranks(_cluster(shared_data))
    its = pa.concat_tables([d.tables[S.ITERATIONS] for d in ranks.values()])
    table, found = iteration_trace.analyse(its)
    assert table["rank"].tolist() == [0, 1, 2, 3]
    # hand check against the CSV: rank 2 mean fp_and_bp over its 5 steps, ticks -> ms (/1e5)
    fp = [215617644, 17109793, 16913661, 16907674, 16901708]
    assert table.loc[table["rank"] == 2, "fp_bp_ms"].item() == pytest.approx(sum(fp) / 5 / 1e5)
    intervals = [0, 206175, 206782, 209059, 205894]
    assert table.loc[table["rank"] == 2, "iteration_interval_ms"].item() == pytest.approx(
        sum(intervals) / 5 / 1e5)
    # two pipeline stages of two ranks each: no single rank stands out -> no finding
    assert found == []
    table2, _ = iteration_trace.analyse(its, skip_first=True)
    assert table2["steps"].tolist() == [4, 4, 4, 4]


def test_iteration_trace_flags_one_slow_host_and_one_slow_card():
    import pandas as pd

    rows = []
    for rank in range(8):
        for step in (1, 2, 3):
            rows.append({"rank": rank, "step": step,
                         "iteration_interval_ns": 1_000_000 * (9 if rank == 5 else 1),
                         "fp_bp_ns": 100_000_000 + rank * 10_000 + (50_000_000 if rank == 2 else 0),
                         "tail_ns": 2_000_000})
    table, found = iteration_trace.analyse(pd.DataFrame(rows))
    cats = {f["category"]: f["ranks"] for f in found}
    assert cats == {"slow_host": [5], "slow_card": [2]}
    assert "rank 5" in next(f for f in found if f["category"] == "slow_host")["evidence"]


def test_single_card_run_timeline_data_gives_kernels_with_steps(shared_data):
    d = shared_data / "mindspore-legacy" / "run_1" / "normal_run" / "profiler"
    data = _read_ranks(d)[1]
    k = data.tables[S.KERNELS]
    lines = open(d / "output_timeline_data_1.txt").read().splitlines()[1:]
    assert k.num_rows == len(lines) == 2817
    total_ms = sum(float(line.split(",")[3]) for line in lines)
    assert sum(k.column("dur_ns").to_pylist()) == pytest.approx(total_ms * 1e6, abs=len(lines))
    first = lines[0].split(",")
    assert k.column("name")[0].as_py() == first[0] and k.column("op_type")[0].as_py() == "AssignAdd"
    # kernels fall inside the step trace windows (same device clock)
    assert k.column("step").null_count < k.num_rows
    assert data.tables[S.ITERATIONS].num_rows == 322


def test_damaged_step_trace_is_a_problem_not_a_crash(tmp_path):
    (tmp_path / "step_trace_raw_0_detail_time.csv").write_text(
        "step_num,start_point,end_point,total,fp_point,bp_point,iteration_interval,fp_and_bp,tail\n"
        "1,10,20,10,12,18,x,6,2\n")
    (tmp_path / "hccl_raw_0.csv").write_text("step_num,communication_cost\n")
    srcs = scan(tmp_path, Problems())
    assert [s.kind for s in srcs] == [LEGACY_MS]
    with pytest.raises(InputError):
        legacy_mindspore.read(srcs[0])   # neither file usable -> nothing of the rank
    (tmp_path / "output_timeline_data_0.txt").write_text(
        "op_name, stream_id, start_time(ms), duration(ms)\nDefault/Add-op1,5,1.5,0.25\n")
    data = legacy_mindspore.read(scan(tmp_path, Problems())[0])
    assert data.tables[S.KERNELS].column("dur_ns").to_pylist() == [250_000]
    assert len(data.problems) == 2 and "not a number" in data.problems.items[0].reason


def test_lone_profiler_info_is_not_a_rank(shared_data):
    srcs = scan(shared_data / "mindspore-legacy" / "parallel_strategy", Problems())
    assert srcs == []


def test_reading_a_legacy_rank_leaves_the_csv_field_limit_as_it_was(shared_data):
    """The reader allows fields of up to 1 GiB while it parses its CSV files, but the csv
    module's limit is process-wide: a worker that read a legacy rank must parse the next rank's
    CSV headers with the limit it had before (the default, 131,072 characters, here)."""
    before = csv.field_size_limit(131_072)
    try:
        ranks = _read_ranks(_cluster(shared_data))
        assert sorted(ranks) == [0, 1, 2, 3]  # the CSV files were read
        assert csv.field_size_limit() == 131_072
    finally:
        csv.field_size_limit(before)
