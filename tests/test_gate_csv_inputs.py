"""One exported CSV as a gate input (``compare.gate.csv_inputs.load_csv``): which file it is
from its header, every number cell checked, repeated rows refused, the rank taken from
Device_id. The files are written here in the profiler's own layouts (the headers of the Qwen3
sample's step_trace_time.csv, op_statistic.csv and kernel_details.csv, and msprof-analyze's
cluster_step_trace_time.csv); each expected value is read off the rows written.
"""

from __future__ import annotations

import csv

import pytest

from ascendprof.compare.gate.csv_inputs import (
    CLUSTER_STEP_TRACE, KERNEL_DETAILS, OP_STATISTIC, OP_STATISTICS, STEP_TRACE_TIME, csv_kind,
    load_csv)
from ascendprof.compare.gate.errors import GateInputError

STEP_HEAD = ("Device_id,Step,Computing,Communication(Not Overlapped),Overlapped,Communication,"
             "Free,Stage,Bubble,Communication(Not Overlapped and Exclude Receive),Preparing")
CLUSTER_HEAD = ("Step,Type,Index,Computing,Communication(Not Overlapped),Overlapped,"
                "Communication,Free,Stage,Bubble,Communication(Not Overlapped and Exclude "
                "Receive),Preparing,DP Index,PP Index,TP Index")
OPSTAT_HEAD = ("Device_id,OP Type,Core Type,Count,Total Time(us),Min Time(us),Avg Time(us),"
               "Max Time(us),Ratio(%)")
OPSTATS_HEAD = ("Rank,OP Type,Accelerator Core,Count,Total Time(us),Min Time(us),"
                "Avg Time(us),Max Time(us),Ratio(%)")
KERNEL_HEAD = ("Step Id,Device_id,Model ID,Task ID,Stream ID,Name,Type,OP State,"
               "Accelerator Core,Start Time(us),Duration(us),Wait Time(us),Block Dim,"
               "Input Shapes")


def _write(tmp_path, name, *lines, bom=False):
    p = tmp_path / name
    p.write_text(("\ufeff" if bom else "") + "\n".join(lines) + "\n", encoding="utf-8")
    return p


@pytest.mark.parametrize("head, kind", [
    (CLUSTER_HEAD, CLUSTER_STEP_TRACE), (STEP_HEAD, STEP_TRACE_TIME),
    (KERNEL_HEAD, KERNEL_DETAILS),
    ("Step Id,Name,Task Type,Start Time(us),Duration(us)", KERNEL_DETAILS),  # Level0 kernels
    (OPSTAT_HEAD, OP_STATISTIC), (OPSTATS_HEAD, OP_STATISTICS)])
def test_kind_from_the_header(tmp_path, head, kind):
    assert csv_kind(_write(tmp_path, "x.csv", head, bom=True)) == kind


def test_unusable_files_name_the_problem(tmp_path):
    with pytest.raises(GateInputError, match="not a CSV the gate reads"):
        csv_kind(_write(tmp_path, "a.csv", "Name,Duration(us)"))  # no core or task type
    with pytest.raises(GateInputError, match="not a CSV the gate reads"):
        csv_kind(_write(tmp_path, "b.csv", "OP Type,Count"))  # no Total Time(us)
    bad = tmp_path / "c.csv"
    bad.write_bytes(b"Step,Comp\xffuting\n")
    with pytest.raises(GateInputError, match="not UTF-8 text") as e:
        csv_kind(bad)
    assert "at byte 9" in str(e.value)
    with pytest.raises(GateInputError, match="cannot read"):
        csv_kind(tmp_path / "missing.csv")


def test_step_trace_time_rank_from_device_id_values_in_ns(tmp_path):
    p = _write(tmp_path, "step_trace_time.csv", STEP_HEAD,
               "5,13,231290.1,420174.26,0.0,420174.26,158558.0,810022.25,0,420174.26,206.25",
               "5,14,100.5,1,0,1,2,3,0,1,0\t")  # a trailing tab after a value is read
    side = load_csv(p)
    assert side.ranks == [5]
    st = side.steps.sort_values("step")
    assert st["rank"].tolist() == [5, 5] and st["step"].tolist() == [13, 14]
    # 231290.1 us -> 231290100 ns; 100.5 us -> 100500 ns
    assert st["computing_ns"].tolist() == [231_290_100, 100_500]


def test_a_cell_that_is_not_a_number_or_is_negative_is_refused(tmp_path):
    good = "0,13,1,1,0,1,1,1,0,1,0"
    for cell, what in (("nan", "is not a number"), ("", "is not a number"),
                       ("inf", "is not a number"), ("-5", "is negative")):
        p = _write(tmp_path, f"s{what[:5]}{cell}.csv", STEP_HEAD, good,
                   f"0,14,1,1,0,1,{cell},1,0,1,0")
        with pytest.raises(GateInputError, match=what) as e:
            load_csv(p)
        # the column and the data row (the header is not counted)
        assert "'Free'" in str(e.value) and "data row 2" in str(e.value)


def test_cluster_step_trace_checks_rank_rows_only(tmp_path):
    p = _write(tmp_path, "cluster_step_trace_time.csv", CLUSTER_HEAD,
               "13,rank,0,10,1,0,1,2,3,0,1,0,0,0,0",
               "13,rank,1,20,1,0,1,2,3,0,1,0,0,0,0",
               # a stage row may leave cells empty: it is not an input to the gate
               "13,stage,0,,,,,,,,,,,,")
    side = load_csv(p)
    assert side.ranks == [0, 1]
    assert sorted(side.steps["computing_ns"].tolist()) == [10_000, 20_000]
    bad = _write(tmp_path, "bad.csv", CLUSTER_HEAD, "13,rank,0,10,1,0,1,2,3,0,1,0,0,0,0",
                 "13,rank,1,,1,0,1,2,3,0,1,0,0,0,0")
    with pytest.raises(GateInputError, match="'Computing'.*not a number"):
        load_csv(bad)


def test_repeated_rows_are_refused(tmp_path):
    p = _write(tmp_path, "cluster_step_trace_time.csv", CLUSTER_HEAD,
               "13,rank,3,10,1,0,1,2,3,0,1,0,0,0,0", "13,rank,3,10,1,0,1,2,3,0,1,0,0,0,0",
               "14,rank,3,10,1,0,1,2,3,0,1,0,0,0,0")
    with pytest.raises(GateInputError, match="duplicated rows: rank 3 step 13 appears 2 times"):
        load_csv(p)
    p = _write(tmp_path, "op_statistic.csv", OPSTAT_HEAD,
               "0,MatMul,AI_CORE,2,10,4,5,6,50", "0,MatMul,AI_CORE,2,10,4,5,6,50",
               "0,MatMul,AI_CORE,2,10,4,5,6,50", "0,Add,AI_CORE,1,1,1,1,1,50")
    with pytest.raises(GateInputError, match=r"rank 0 op type MatMul \(AI_CORE\) appears 3 times"):
        load_csv(p)


def test_op_statistic_and_op_statistics(tmp_path):
    p = _write(tmp_path, "op_statistic.csv", OPSTAT_HEAD,
               "2,MatMul,AI_CORE,28,63128.66,2219.14,2254.595,2286.72,27.294",
               "2,Add,AI_VECTOR_CORE,3,1.5,0.5,0.5,0.5,0.001")
    side = load_csv(p)
    assert side.ranks == [2]
    got = side.op_stats.sort_values("op_type").to_dict("records")
    assert got == [
        {"rank": 2, "op_type": "Add", "accelerator_core": "AI_VECTOR_CORE", "count": 3,
         "total_ns": 1_500},
        {"rank": 2, "op_type": "MatMul", "accelerator_core": "AI_CORE", "count": 28,
         "total_ns": 63_128_660}]
    # analyse's op_statistics.csv: per-rank rows checked; other rows (a total) are not
    p = _write(tmp_path, "op_statistics.csv", OPSTATS_HEAD,
               "0,MatMul,AI_CORE,2,10.5,5,5.25,5.5,100", "1,MatMul,AI_CORE,2,12,6,6,6,100",
               "all,MatMul,AI_CORE,4,,,,,")
    side = load_csv(p)
    assert side.ranks == [0, 1]
    bad = _write(tmp_path, "bad_stats.csv", OPSTATS_HEAD, "0,MatMul,AI_CORE,2,x,5,5,5,100")
    with pytest.raises(GateInputError, match="'Total Time\\(us\\)'"):
        load_csv(bad)


def test_kernel_details_rank_is_the_single_device_id_else_zero(tmp_path):
    rows = ["13,{d},4294967295,1,2,mm_a,MatMul,dynamic,AI_CORE,1000.0,10.5,0,40,\"1,2\"",
            "13,{d},4294967295,2,2,mm_b,MatMul,dynamic,AI_CORE,1020.0,4.5,0,40,\"1,2\"",
            "14,{d2},4294967295,3,2,add,Add,dynamic,AI_VECTOR_CORE,2000.0,1.0,0,40,\"1\""]
    p = _write(tmp_path, "k1.csv", KERNEL_HEAD, *[r.format(d=6, d2=6) for r in rows])
    side = load_csv(p)
    assert side.ranks == [6]
    k = side.kernels.groupby(["step", "op_type"])["total_ns"].sum().to_dict()
    # step 13 MatMul: 10.5 + 4.5 us = 15000 ns; step 14 Add 1000 ns
    assert k == {(13, "MatMul"): 15_000, (14, "Add"): 1_000}
    p = _write(tmp_path, "k2.csv", KERNEL_HEAD, *[r.format(d=6, d2=7) for r in rows])
    assert load_csv(p).ranks == [0]  # two devices in one file: no single rank


def test_a_file_with_a_header_only_has_no_data_rows(tmp_path):
    with pytest.raises(GateInputError, match="no data rows"):
        load_csv(_write(tmp_path, "op_statistic.csv", OPSTAT_HEAD))


def test_error_messages_name_the_file_and_the_cause(tmp_path):
    missing = tmp_path / "missing.csv"
    with pytest.raises(GateInputError) as e:
        csv_kind(missing)
    # "<path>: cannot read: <the OS's words>", not the exception's repr
    assert str(e.value) == f"{missing}: cannot read: No such file or directory"
    # a header cell longer than the csv module's field limit (its default, 131072 characters,
    # set here: the limit is process-wide and other readers raise it)
    huge = _write(tmp_path, "huge.csv", '"' + "x" * 200_000 + '",Computing')
    old_limit = csv.field_size_limit(131_072)
    try:
        with pytest.raises(GateInputError, match="malformed CSV") as e:
            csv_kind(huge)
    finally:
        csv.field_size_limit(old_limit)
    assert str(e.value).startswith(f"{huge}: malformed CSV: field larger than field limit")
    # an empty file has no header: not a CSV the gate reads (not a crash)
    empty = _write(tmp_path, "empty.csv")
    empty.write_text("", encoding="utf-8")
    with pytest.raises(GateInputError, match="not a CSV the gate reads"):
        csv_kind(empty)
    header_only = _write(tmp_path, "op_statistic.csv", OPSTAT_HEAD)
    with pytest.raises(GateInputError) as e:
        load_csv(header_only)
    assert str(e.value) == f"{header_only}: no data rows"


def test_the_three_cluster_columns_alone_are_a_cluster_step_trace(tmp_path):
    assert csv_kind(_write(tmp_path, "c.csv", "Type,Index,Computing")) == CLUSTER_STEP_TRACE


def test_the_first_repeated_key_in_file_order_is_named(tmp_path):
    # rank 3 step 13, rank 3 step 14, step 14 again, step 13 again: step 13 is the first key
    # that repeats (both its rows are duplicates), though step 14's repeat comes first
    p = _write(tmp_path, "cluster_step_trace_time.csv", CLUSTER_HEAD,
               "13,rank,3,10,1,0,1,2,3,0,1,0,0,0,0", "14,rank,3,10,1,0,1,2,3,0,1,0,0,0,0",
               "14,rank,3,10,1,0,1,2,3,0,1,0,0,0,0", "13,rank,3,10,1,0,1,2,3,0,1,0,0,0,0")
    with pytest.raises(GateInputError, match="rank 3 step 13 appears 2 times"):
        load_csv(p)


def test_the_side_is_labelled_with_the_file(tmp_path):
    p = _write(tmp_path, "op_statistic.csv", OPSTAT_HEAD, "0,Add,AI_CORE,1,1,1,1,1,100")
    assert load_csv(p).label == str(p)
