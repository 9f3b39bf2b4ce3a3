"""Computation advice rules on real exports and on copies edited to carry the problem (or to
be free of it). Expected findings are computed here from the edited files with csv / sqlite3."""

from __future__ import annotations

import math
import shutil

import pytest

from _advice_data import (OUT, advise, advise_real, copy_rank, db_query, edit_csv, found, rows, stage_us,
                          status)

ALEX = "torch_npu-2rank-levels/text/level2/rank0_ascend_pt"
ALEX_DB = "torch_npu-2rank-levels/db/level2/rank0_ascend_pt"


@pytest.fixture
def alex(shared_data, tmp_path):
    return copy_rank(shared_data / ALEX, tmp_path / "rank0_ascend_pt", skip=("trace_view.json",))


# --------------------------------------------------------------------------------- AI CPU

def test_aicpu_silent_on_the_real_export(shared_data):
    real = shared_data / ALEX
    assert not any(r["Accelerator Core"] == "AI_CPU" for r in rows(real, "kernel_details.csv"))
    assert status(advise_real(real), "computation.aicpu") == "silent"


def test_aicpu_operators_found_with_time_count_and_dtype_advice(alex):
    def to_aicpu(rs):
        for r in rs:
            if r["Type"] == "MaxPoolGradWithArgmaxV1":
                r["Accelerator Core"] = "AI_CPU"
            if r["Type"] == "ForeachMulScalar":
                r["Accelerator Core"] = "AI_CPU"
                r["Input Data Types"] = "DOUBLE;DOUBLE"
    edit_csv(alex, "kernel_details.csv", to_aicpu)
    moved = [r for r in rows(alex, "kernel_details.csv") if r["Accelerator Core"] == "AI_CPU"]
    total_us = sum(float(r["Duration(us)"]) for r in moved)  # one step collected
    (f,) = found(advise(alex), "computation.aicpu")
    ev = f["evidence"]
    assert ev["aicpu_tasks"] == len(moved) == 4
    assert ev["aicpu_us_per_step"] == pytest.approx(total_us, abs=0.002)
    by_type = {g["op_type"]: g for g in ev["op_types"]}
    assert by_type["MaxPoolGradWithArgmaxV1"]["count"] == 3
    assert by_type["MaxPoolGradWithArgmaxV1"]["not_on_ai_core_dtypes"] == ["uint16"]
    assert any("ForeachMulScalar: inputs are float64" in a for a in f["advice"])
    assert any("uint16" in a for a in f["advice"])
    share = 100 * total_us / stage_us(alex)
    assert f["share_of_step_pct"] == pytest.approx(share, abs=0.01)
    assert f["severity"] == ("warning" if share >= 1 else "info")


def test_aicpu_tasks_all_shorter_than_20us_are_not_worth_moving(alex):
    def short_ones(rs):
        for r in rs:
            if float(r["Duration(us)"]) < 20:
                r["Accelerator Core"] = "AI_CPU"
    edit_csv(alex, "kernel_details.csv", short_ones)
    assert any(r["Accelerator Core"] == "AI_CPU" for r in rows(alex, "kernel_details.csv"))
    assert status(advise(alex), "computation.aicpu") == "silent"


def test_aicpu_skipped_at_level0_without_accelerator_core(shared_data):
    res = advise_real(shared_data / "torch_npu-2rank-levels/text/level0/rank0_ascend_pt")
    assert res["status"]["computation.block_dim"][0] == "skipped"
    assert "Level0" in res["status"]["computation.block_dim"][1]
    assert res["status"]["computation.aicpu"][0] == "skipped"


# ------------------------------------------------------------------------ op compilation

def _api(rank_dir, name):
    (r,) = [r for r in rows(rank_dir, "api_statistic.csv") if r["API Name"] == name]
    return r


def test_op_compile_fires_on_the_real_export_by_time_share(shared_data):
    alex = shared_data / ALEX
    r = _api(alex, "aclopCompileAndExecute")
    calls, t = int(r["Count"]), float(r["Time(us)"])
    share = 100 * t / stage_us(alex)  # 14231.86 / 129862.75 = 10.96 %
    assert calls == 19 and share > 10
    (f,) = found(advise_real(alex), "computation.op_compile")
    assert f["evidence"]["aclopCompileAndExecute_calls_per_step"] == calls
    assert f["evidence"]["aclopCompileAndExecute_us_per_step"] == pytest.approx(t, abs=0.002)
    assert f["evidence"]["opCompile_us_per_step"] == pytest.approx(
        float(_api(alex, "opCompile")["Time(us)"]), abs=0.002)
    trans = [x for x in rows(alex, "kernel_details.csv") if x["Type"] == "TransData"]
    assert f["evidence"]["transdata_kernels_per_step"] == len(trans)
    assert f["severity"] == "critical"  # >= 10 % of the step
    assert any("jit_compile=False" in a for a in f["advice"])


def test_op_compile_silent_when_few_calls_take_little_time(alex):
    edit_csv(alex, "api_statistic.csv", lambda rs: [
        {**r, "Time(us)": "1000.0"} if r["API Name"] == "aclopCompileAndExecute" else r
        for r in rs])
    assert status(advise(alex), "computation.op_compile") == "silent"


def test_op_compile_fires_on_the_peer_count_of_20_calls(alex):
    edit_csv(alex, "api_statistic.csv", lambda rs: [
        {**r, "Time(us)": "1000.0", "Count": "40"} if r["API Name"] == "aclopCompileAndExecute"
        else r for r in rs])
    (f,) = found(advise(alex), "computation.op_compile")
    assert f["evidence"]["aclopCompileAndExecute_calls_per_step"] == 40
    assert f["severity"] == "warning"


# ------------------------------------------------------------------------------ Block Dim

def _idle_pct_by_hand(rank_dir) -> tuple[float, int]:
    ks = rows(rank_dir, "kernel_details.csv")
    aic = max(int(r["Block Dim"]) for r in ks if r["Accelerator Core"] in ("AI_CORE", "MIX_AIC"))
    cores = {"AI_CORE": aic, "AI_VECTOR_CORE": 2 * aic}
    idle = 0.0
    for r in ks:
        c, bd = cores.get(r["Accelerator Core"]), int(r["Block Dim"])
        if c and bd > 0:
            slots = math.ceil(bd / c) * c
            idle += float(r["Duration(us)"]) * (slots - bd) / slots
    (st,) = rows(rank_dir, "step_trace_time.csv")
    return 100 * idle / float(st["Computing"]), aic


def test_block_dim_idle_cores_as_share_of_computing(shared_data):
    alex = shared_data / ALEX
    pct, aic = _idle_pct_by_hand(alex)
    assert aic == 24 and pct > 5
    (f,) = found(advise_real(alex), "computation.block_dim")
    assert f["evidence"]["ai_core_count_inferred"] == 24
    assert f["evidence"]["vector_core_count_inferred"] == 48
    assert f["evidence"]["idle_core_time_pct_of_computing"] == pytest.approx(pct, abs=0.01)


def test_block_dim_silent_when_every_task_fills_the_cores(alex):
    def fill(rs):
        for r in rs:
            if r["Accelerator Core"] == "AI_CORE":
                r["Block Dim"] = "24"
            elif r["Accelerator Core"] == "AI_VECTOR_CORE":
                r["Block Dim"] = "96"  # two full waves of 48
    edit_csv(alex, "kernel_details.csv", fill)
    assert _idle_pct_by_hand(alex)[0] == 0
    assert status(advise(alex), "computation.block_dim") == "silent"


# ------------------------------------------------------------------------------ PMU ratios

def _weighted(rs, col):
    w = sum(float(r["Duration(us)"]) for r in rs)
    return sum(float(r[col]) * float(r["Duration(us)"]) for r in rs) / w


def test_pipe_bound_names_the_under_used_flash_attention_grad(qwen3, tmp_path):
    rank = copy_rank(qwen3 / "rank_0_ascend_pt", tmp_path / "rank_0_ascend_pt")
    ks = rows(rank, "kernel_details.csv")
    fa = [r for r in ks if r["Type"] == "FlashAttentionScoreGrad"]
    shapes = {r["Input Shapes"] for r in fa}
    assert len(shapes) == 1  # one group
    ratios = {c: _weighted(fa, c) for c in ("aic_mac_ratio", "aic_mte2_ratio",
                                            "aic_fixpipe_ratio", "aic_scalar_ratio",
                                            "aic_mte1_ratio")}
    # under-used by the peer's thresholds: no cube pipe at 0.8 (mte2 at 0.95), tasks >= 20 us
    assert max(ratios.values()) < 0.8
    assert sum(float(r["Duration(us)"]) for r in fa) / len(fa) >= 20
    res = advise(rank)
    (under,) = [f for f in found(res, "computation.pipe_bound")
                if f["evidence"]["class"] == "under"]
    ops = {o["name"]: o for o in under["evidence"]["operators"]}
    o = ops[fa[0]["Name"]]
    assert o["us_per_step"] == pytest.approx(sum(float(r["Duration(us)"]) for r in fa), abs=0.01)
    assert o["ratios"]["aic_fixpipe_ratio"] == pytest.approx(ratios["aic_fixpipe_ratio"],
                                                             abs=0.001)
    assert under["evidence"]["pct_of_computing"] >= 10


def test_pipe_bound_silent_when_every_operator_saturates_its_compute_pipe(qwen3, tmp_path):
    rank = copy_rank(qwen3 / "rank_0_ascend_pt", tmp_path / "rank_0_ascend_pt")

    def saturate(rs):
        for r in rs:
            for c in ("aic_mac_ratio", "aiv_vec_ratio"):
                r[c] = "0.9"
            for c in ("aic_mte2_ratio", "aiv_mte2_ratio", "aiv_mte3_ratio"):
                r[c] = "0.05"
    edit_csv(rank, "kernel_details.csv", saturate)
    assert status(advise(rank), "computation.pipe_bound") == "silent"


def test_pipe_bound_skipped_without_pmu_columns(shared_data):
    res = advise_real(shared_data / "torch_npu-2rank-levels/text/level0/rank0_ascend_pt")
    st, why = res["status"]["computation.pipe_bound"]
    assert st == "skipped" and "PMU" in why


def test_db_export_carries_the_pmu_ratios_of_task_pmu_info(shared_data):
    res = advise_real(shared_data / ALEX_DB)
    assert status(res, "computation.pipe_bound") == "fired"


# ------------------------------------------------------------------------- AI Core clock

def test_aicore_freq_silent_at_a_steady_clock(shared_data):
    db = shared_data / ALEX_DB / OUT / "ascend_pytorch_profiler_0.db"
    assert {f for (f,) in db_query(db, "SELECT freq FROM AICORE_FREQ")} == {1800}
    assert status(advise_real(shared_data / ALEX_DB), "computation.aicore_freq") == "silent"


def test_aicore_freq_drop_names_the_kernels_that_ran_slow(shared_data, tmp_path):
    rank = tmp_path / "rank0_ascend_pt"
    shutil.copytree(shared_data / ALEX_DB, rank)
    db = rank / OUT / "ascend_pytorch_profiler_0.db"
    (t0, t1), = db_query(db, "SELECT startNs, endNs FROM STEP_TIME")
    mid = (t0 + t1) // 2
    import sqlite3

    con = sqlite3.connect(str(db))
    con.execute("INSERT INTO AICORE_FREQ VALUES (0, ?, 1200)", (t0,))
    con.execute("INSERT INTO AICORE_FREQ VALUES (0, ?, 1800)", (mid,))
    con.commit()
    con.close()
    # kernels that saw the 1200 MHz sample: it was taken before they ended and it was still
    # in force when they started
    tasks = db_query(db, """SELECT t.startNs, t.endNs FROM TASK t JOIN COMPUTE_TASK_INFO c
        ON t.globalTaskId = c.globalTaskId WHERE (SELECT value FROM STRING_IDS WHERE
        id = c.taskType) IN ('AI_CORE', 'AI_VECTOR_CORE', 'MIX_AIC', 'MIX_AIV')""")
    slow_us = sum(e - s for s, e in tasks if e > t0 and s < mid) / 1000
    (computing,), = db_query(rank / OUT / "analysis.db", "SELECT computing FROM StepTraceTime")
    (f,) = found(advise(rank), "computation.aicore_freq")
    assert f["evidence"]["reference_mhz"] == 1800 and f["evidence"]["lowest_mhz"] == 1200
    assert f["impact_us_per_step"] == pytest.approx(slow_us, abs=0.002)
    assert f["evidence"]["pct_of_computing"] == pytest.approx(100 * slow_us / computing,
                                                              abs=0.01)
