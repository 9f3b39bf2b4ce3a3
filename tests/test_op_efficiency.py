"""Operator efficiency (analyze.op_efficiency): FLOP formulas per op family against hand
calculations written out here, and op_efficiency.csv / op_efficiency_steps.csv through the
user's path on the shipped Qwen3 sample (expected values from its kernel_details.csv read
independently with the csv module)."""

from __future__ import annotations

import csv

import pytest
from click.testing import CliRunner

from ascendprof.analyze import hardware as hw
from ascendprof.analyze import op_efficiency as oe
from ascendprof.cli.main import main
from conftest import QWEN3, analysis_of

KD0 = QWEN3 / "rank_0_ascend_pt" / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv"


# ----------------------------------------------------------------------------- formulas

def test_matmul_flops_by_hand():
    # A [M=4096, K=1024] x B [N=6144, K=1024]^T -> C [4096, 6144]: 2*M*N*K
    assert oe.flops_of("MatMul", '"4096,1024;6144,1024"', '"4096,6144"') == \
        2 * 4096 * 6144 * 1024 == 51_539_607_552
    # A transposed: A [K=4096, M=1024] -> C [1024, 3072]; K = 4096
    assert oe.flops_of("MatMul", "4096,1024;4096,3072", "1024,3072") == 2 * 1024 * 3072 * 4096
    # fractal NZ shapes of the vocabulary projection's weight gradient:
    # A (151936 x 4096) = 9496*16 x 256*16, B (4096 x 1024), C (151936 x 1024) = 64,9496,16,16
    nz = oe.flops_of("MatMul", "9496,256,16,16;64,256,16,16", "64,9496,16,16")
    assert nz == 2 * 151936 * 1024 * 4096 == 1_274_531_545_088
    # the same product in ND shapes gives the same count
    assert oe.flops_of("MatMul", "4096,151936;151936,1024", "4096,1024") == nz
    # shapes that do not multiply: no figure rather than a wrong one
    assert oe.flops_of("MatMul", "4096,1000;7,7", "4096,6144") is None


def test_batch_matmul_flops_by_hand():
    # 8 batches of [128, 64] x [64, 256]
    assert oe.flops_of("BatchMatMul", "8,128,64;8,64,256", "8,128,256") == 2 * 8 * 128 * 256 * 64
    # batch folded into A's rows against a 2-D weight [N=512, K=64]
    assert oe.flops_of("BatchMatMul", "4,100,64;512,64", "4,100,512") == 2 * 4 * 100 * 512 * 64


def test_grouped_matmul_flops_by_hand():
    # 1024 tokens, K = 2048, 8 experts of 2048 x 768, group list of 8: 2 * 1024 * 2048 * 768
    assert oe.flops_of("GroupedMatmul", "1024,2048;8,2048,768;8", "1024,768") == \
        2 * 1024 * 2048 * 768


def test_flash_attention_flops_by_hand():
    # Qwen3 layer (SBH): q [S=4096, B=1, H=2048], k/v [4096, 1, 1024] (GQA), softmax stats
    # [B=1, N=16, Sq=4096, 8] -> D = 2048 / 16 = 128; the 2048x2048 mask is the compressed
    # causal mask -> half of 4 * B * N * Sq * Skv * D
    fwd_in = "4096,1,2048;4096,1,1024;4096,1,1024;;;;2048,2048;;;;;;;;"
    fwd_out = "1,16,4096,8;1,16,4096,8;;4096,1,2048"
    fwd = 4 * 1 * 16 * 4096 * 4096 * 128 // 2
    assert fwd == 68_719_476_736
    assert oe.flops_of("FlashAttention", fwd_in, fwd_out) == fwd
    bwd_in = ("4096,1,2048;4096,1,1024;4096,1,1024;4096,1,2048;2048,2048;1,16,4096,8;"
              "1,16,4096,8;;4096,1,2048;;;;;;")
    assert oe.flops_of("FlashAttentionGrad", bwd_in, "4096,1,2048;4096,1,1024;4096,1,1024;;;") \
        == 2.5 * fwd
    # BNSD without a mask: B=2, N=8, Sq=512, Skv=1024, D=64
    assert oe.flops_of("FlashAttention", "2,8,512,64;2,8,1024,64;2,8,1024,64",
                       "2,8,512,8;2,8,512,8;;2,8,512,64") == 4 * 2 * 8 * 512 * 1024 * 64


def test_bytes_and_families():
    # every tensor once: (4096*1024 + 6144*1024 + 4096*6144) bf16 elements
    assert oe.bytes_of("4096,1024;6144,1024", "DT_BF16;DT_BF16", "4096,6144", "DT_BF16") == \
        (4096 * 1024 + 6144 * 1024 + 4096 * 6144) * 2
    assert oe.bytes_of("4,4", "NOT_A_TYPE", "4,4", "FLOAT") is None
    assert [oe.family_of(t) for t in ("MatMulV3", "BatchMatMulV2", "GroupedMatmul",
                                      "FlashAttentionScore", "FlashAttentionScoreGrad", "Add")] \
        == ["MatMul", "BatchMatMul", "GroupedMatmul", "FlashAttention", "FlashAttentionGrad",
            None]


def test_peak_table_cites_a_source_for_every_figure():
    for chip in hw.CHIPS.values():
        assert chip.sources["fp16/bf16"] and chip.sources["hbm"]
        assert chip.tflops["bf16"] > 0 and chip.hbm_gbps > 0
    assert hw.chip_of(["HCCS", "PCIE"]) == "Ascend910B"
    assert hw.chip_of(["SIO", "HCCS"]) == "Ascend910C"


# ----------------------------------------------------------------------------- real data

def _kernel_rows(path):
    with open(path, newline="", encoding="utf-8-sig") as f:
        return list(csv.DictReader(f))


def test_qwen3_through_open():
    ca = analysis_of(QWEN3)
    eff = ca.csv_files["op_efficiency.csv"]
    rows = _kernel_rows(KD0)
    # FlashAttentionScore calls of rank 0 in its kernel_details.csv
    fa = [r for r in rows if r["Type"] == "FlashAttentionScore"]
    got = eff[(eff["Rank"] == 0) & (eff["Op Type"] == "FlashAttentionScore")]
    assert int(got["Calls"].sum()) == len(fa) == 28
    # one MatMulV3 shape: achieved TFLOP/s = 2*4096*6144*1024 / mean Duration(us)
    shp = '"4096,1024;6144,1024"'
    mm = [float(r["Duration(us)"]) for r in rows
          if r["Type"] == "MatMulV3" and r["Input Shapes"] == shp]
    row = eff[(eff["Rank"] == 0) & (eff["Op Type"] == "MatMulV3")
              & (eff["Input Shapes"].str.strip('"') == shp.strip('"'))].iloc[0]
    mean_s = sum(mm) / len(mm) / 1e6
    assert row["Calls"] == len(mm)
    assert row["Achieved TFLOP/s"] == pytest.approx(2 * 4096 * 6144 * 1024 / mean_s / 1e12,
                                                     rel=1e-4)
    assert row["Chip"] == "Ascend910B"  # HCCS/PCIE links only, no SIO
    assert row["Compute Share(%)"] == pytest.approx(100 * row["Achieved TFLOP/s"] / 280, rel=1e-3)
    assert row["Bound"] == "compute"  # 723 FLOP/B against a ridge of 280e12/1.2e12 = 233
    # MFU of rank 0's step 13: the counted FLOPs over the step's kernel window x 280 TFLOP/s
    start = min(float(r["Start Time(us)"]) for r in rows)
    end = max(float(r["Start Time(us)"]) + float(r["Duration(us)"]) for r in rows)
    flops = sum((oe.flops_of(oe.family_of(r["Type"]), r["Input Shapes"], r["Output Shapes"])
                 or 0) for r in rows if oe.family_of(r["Type"]))
    steps = ca.csv_files["op_efficiency_steps.csv"]
    s0 = steps[steps["Rank"] == 0].iloc[0]
    assert s0["MFU(%)"] == pytest.approx(100 * flops / ((end - start) / 1e6) / 280e12, abs=0.01)
    # ranks 1 and 3 have no kernel_details.csv: no rows rather than zeros
    assert set(eff["Rank"]) == {0, 2}


def test_qwen3_cli_writes_the_files(tmp_path):
    out = tmp_path / "out"
    res = CliRunner().invoke(main, ["analyse", str(QWEN3), "-o", str(out), "--no-cache"])
    assert res.exit_code == 0, res.output
    with open(out / "op_efficiency.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    fams = {r["Family"] for r in rows}
    assert {"MatMul", "FlashAttention", "FlashAttentionGrad"} <= fams
    assert (out / "op_efficiency_steps.csv").is_file()
