"""`ascendprof diff` on the Qwen3 fixture (PP2 x DP2): ranks 0 and 2 are the two pipeline
stages. Expected numbers are read here straight from the profiler's step_trace_time.csv,
op_statistic.csv, communication.json and profiler_metadata.json."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

from ascendprof.cli.main import main
from ascendprof.compare.diff import (KERNEL_DIFF_COLUMNS, STEP_DIFF_COLUMNS, Side, diff_kernels,
                             group_hash)

OUT = "ASCEND_PROFILER_OUTPUT"
PP_GROUP = "3985310405473756128"  # the pp group of ranks 0 and 2 in communication.json


def step_row(qwen3: Path, rank: int) -> dict:
    with open(qwen3 / f"rank_{rank}_ascend_pt" / OUT / "step_trace_time.csv", newline="") as f:
        return {k: float(v) for k, v in next(csv.DictReader(f)).items()}


def wait_ms(qwen3: Path, rank: int, group: str) -> float:
    """Σ Wait Time(ms) of the ops of ``group`` in the rank's communication.json."""
    doc = json.loads((qwen3 / f"rank_{rank}_ascend_pt" / OUT / "communication.json").read_text())
    total = 0.0
    for step in doc.values():
        for kind in step.values():
            for key, op in kind.items():
                if key != "Total Op Info" and key.endswith("@" + group):
                    total += op["Communication Time Info"]["Wait Time(ms)"]
    return total


def op_stat_us(qwen3: Path, rank: int, op_type: str, core: str) -> tuple[float, int]:
    with open(qwen3 / f"rank_{rank}_ascend_pt" / OUT / "op_statistic.csv", newline="") as f:
        for r in csv.DictReader(f):
            if r["OP Type"] == op_type and r["Core Type"] == core:
                return float(r["Total Time(us)"]), int(r["Count"])
    return 0.0, 0


def run(*args):
    return CliRunner().invoke(main, ["diff", *map(str, args)])


@pytest.fixture(scope="module")
def ranks02_json():
    qwen3 = Path(__file__).resolve().parents[1] / "fixtures" / "qwen3-4rank-pp2dp2"
    r = run(qwen3, "--ranks", "0,2", "--format", "json", "--top", "50")
    assert r.exit_code == 0, r.output
    return json.loads(r.output[r.output.index("{"):])


def test_step_breakdown_of_the_two_stages(qwen3, ranks02_json):
    a, b = step_row(qwen3, 0), step_row(qwen3, 2)
    steps = ranks02_json["steps"]
    assert list(steps[0]) == STEP_DIFF_COLUMNS
    assert {s["scope"] for s in steps} == {"rank 0 vs rank 2"}
    assert len(steps) == 9
    for s in steps:
        m = s["metric"]
        assert s["a_us"] == pytest.approx(a[m], abs=1e-3), m
        assert s["b_us"] == pytest.approx(b[m], abs=1e-3), m
        assert s["delta_us"] == pytest.approx(b[m] - a[m], abs=2e-3), m
    # the later stage computes ~169 ms more per step and waits correspondingly less
    comp = next(s for s in steps if s["metric"] == "Computing")
    assert comp["delta_us"] > 150_000


def test_explanation_names_computing_and_waiting(qwen3, ranks02_json):
    a, b = step_row(qwen3, 0), step_row(qwen3, 2)
    text = ranks02_json["explanation"]
    d_comp_ms = (b["Computing"] - a["Computing"]) / 1000
    d_cno_ms = (b["Communication(Not Overlapped)"] - a["Communication(Not Overlapped)"]) / 1000
    assert f"+{d_comp_ms:.1f} ms Computing" in text
    assert f"-{abs(d_cno_ms):.1f} ms Communication(Not Overlapped)" in text
    # Stage differs by 0.2 ms of 810 ms: the stages are balanced, time moves between buckets
    assert "same time per step" in text
    # waiting in the pp group (global ranks 0, 2 per profiler_metadata.json)
    w0, w2 = wait_ms(qwen3, 0, PP_GROUP), wait_ms(qwen3, 2, PP_GROUP)
    assert w0 - w2 > 100  # rank 0 waits on the slower stage
    assert f"waits {abs(w2 - w0):.1f} ms less in group pp (0, 2)" in text
    comm = {c["group"]: c for c in ranks02_json["communication"]}
    assert comm["pp"]["group_a"] == comm["pp"]["group_b"] == "pp (0, 2)"
    assert comm["pp"]["delta_wait_us"] == pytest.approx((w2 - w0) * 1000, abs=1e-3)
    assert comm["pp"]["a_wait_us"] == pytest.approx(w0 * 1000, abs=1e-3)


def test_op_types_match_the_profilers_op_statistic(qwen3, ranks02_json):
    ops = ranks02_json["op_types"]
    deltas = [abs(o["delta_us"]) for o in ops]
    assert deltas == sorted(deltas, reverse=True)
    by = {(o["op_type"], o["accelerator_core"]): o for o in ops}
    for key in (("MatMulV3", "AI_CORE"), ("FlashAttentionScoreGrad", "MIX_AIC"), ("Cast",
                                                                                 "AI_VECTOR_CORE")):
        ta, ca = op_stat_us(qwen3, 0, *key)
        tb, cb = op_stat_us(qwen3, 2, *key)
        o = by[key]
        assert (o["a_us"], o["b_us"]) == pytest.approx((ta, tb), abs=1e-3), key
        assert (o["a_count"], o["b_count"], o["count_delta"]) == (ca, cb, cb - ca)
    # MatMulV3 on MIX_AIC exists only on the last stage (the output layer)
    tb, cb = op_stat_us(qwen3, 2, "MatMulV3", "MIX_AIC")
    assert op_stat_us(qwen3, 0, "MatMulV3", "MIX_AIC") == (0.0, 0)
    o = by[("MatMulV3", "MIX_AIC")]
    assert o["presence"] == "only_b" and o["b_us"] == pytest.approx(tb, abs=1e-3)


def test_terminal_view(qwen3):
    a, b = step_row(qwen3, 0), step_row(qwen3, 2)
    r = run(qwen3, "--ranks", "0,2", "--top", "5")
    assert r.exit_code == 0, r.output
    out = r.output
    # the terminal prints ms (3 decimals: the files' µs resolution); step_trace_time.csv is µs
    assert f"{a['Computing'] / 1000:,.3f}" in out and f"{b['Computing'] / 1000:,.3f}" in out
    assert "(ms; median over rank-steps" in out
    assert "Computing" in out and "pp (0, 2)" in out and "Bandwidth" in out
    assert "Communication(Not Overlapped and Exclude Receive)" in out


def test_rank_directories_give_the_same_result(qwen3, ranks02_json):
    r = run(qwen3 / "rank_0_ascend_pt", qwen3 / "rank_2_ascend_pt", "--format", "json",
            "--top", "50")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.output[r.output.index("{"):])
    assert [s["delta_us"] for s in doc["steps"]] == [s["delta_us"] for s in ranks02_json["steps"]]
    assert doc["op_types"] == ranks02_json["op_types"]


def test_cluster_against_itself_and_csv_and_output_dir(qwen3, tmp_path):
    r = run(qwen3, qwen3, "--format", "csv", "--table", "steps", "-o", tmp_path / "d")
    assert r.exit_code == 0, r.output
    rows = list(csv.DictReader(r.output.splitlines()))
    assert list(rows[0]) == STEP_DIFF_COLUMNS
    # cluster rows + one block per rank (all 4 ranks have step_trace_time.csv)
    assert [x["scope"] for x in rows[::9]] == ["cluster", "rank 0", "rank 1", "rank 2", "rank 3"]
    assert all(float(x["delta_us"]) == 0 for x in rows)
    for name in ("steps", "op_types", "kernels", "communication", "bandwidth"):
        assert (tmp_path / "d" / f"{name}.csv").is_file()
    doc = json.loads((tmp_path / "d" / "diff.json").read_text())
    assert doc["explanation"].startswith("B and A take the same time per step")
    # the cluster value of Computing is the median of the four ranks' step_trace_time.csv
    # values (one step each), as gate takes it; the mean is shown beside it
    vals = sorted(step_row(qwen3, r)["Computing"] for r in range(4))
    assert float(rows[0]["a_us"]) == pytest.approx((vals[1] + vals[2]) / 2, abs=1e-3)
    assert float(rows[0]["a_mean_us"]) == pytest.approx(sum(vals) / 4, abs=1e-3)
    assert doc["statistic"] == "median" and doc["unmatched_groups"] == []


def test_usage_errors_exit_2(qwen3, tmp_path):
    assert run(qwen3).exit_code == 2                       # one directory, no --ranks
    r = run(qwen3, "--ranks", "0,7")
    assert r.exit_code == 2 and "7" in r.output
    assert run(tmp_path / "nope", qwen3).exit_code == 2
    assert run(qwen3, "--ranks", "0").exit_code == 2
    r = run(qwen3, qwen3, "-o", qwen3 / "inside")          # never write into the input
    assert r.exit_code == 2 and not (qwen3 / "inside").exists()


def test_group_hash_matches_the_profilers_group_names(qwen3):
    """Every group name in communication.json is the hash of a parallel_group_info id."""
    for rank in (0, 2):
        base = qwen3 / f"rank_{rank}_ascend_pt"
        meta = json.loads((base / "profiler_metadata.json").read_text())
        hashes = {str(group_hash(g)) for g in meta["parallel_group_info"]}
        doc = json.loads((base / OUT / "communication.json").read_text())
        groups = {k.rsplit("@", 1)[1] for s in doc.values() for kind in s.values() for k in kind
                  if k != "Total Op Info"}
        assert groups and groups <= hashes


def test_kernel_matching_falls_back_to_op_type_and_shapes():
    """Hand-made kernels: one matched by name, one renamed (matched on op type + shapes), one
    only in A, one only in B. Values are per step: A has 2 steps, B 1 step; each is the median
    over the rank-steps in which the kernel runs (as gate judges op time)."""
    def k(rows, steps):
        df = pd.DataFrame(rows, columns=["rank", "step", "name", "op_type", "accelerator_core",
                                         "input_shapes", "count", "total_ns"])
        st = pd.DataFrame({"rank": 0, "step": steps})
        for c in ("computing_ns",):
            st[c] = 0
        return Side("x", [0], steps=st, kernels=df)

    a = k([[0, 1, "mm", "MatMul", "AI_CORE", "8,8", 2, 4000],
           [0, 2, "mm", "MatMul", "AI_CORE", "8,8", 2, 4000],
           [0, 1, "addA", "Add", "AI_VECTOR_CORE", "4", 1, 1000],
           [0, 1, "old", "Gone", "AI_CPU", "", 1, 500]], [1, 2])
    b = k([[0, 5, "mm", "MatMul", "AI_CORE", "8,8", 3, 6000],
           [0, 5, "addB", "Add", "AI_VECTOR_CORE", "4", 1, 3000],
           [0, 5, "new", "Fresh", "AI_CORE", "2", 4, 800]], [5])
    d = diff_kernels(a, b)
    assert list(d.columns) == KERNEL_DIFF_COLUMNS
    rows = {r.match + ":" + str(r.op_type): r for r in d.itertuples()}
    mm = rows["name+shapes:MatMul"]      # A: 8000 ns / 2 steps = 4 us; B: 6 us
    assert (mm.a_us, mm.b_us, mm.delta_us, mm.a_count, mm.b_count) == (4.0, 6.0, 2.0, 2.0, 3.0)
    add = rows["op_type+shapes:Add"]     # A: 1000 ns in its one step = 1 us; B: 3 us
    assert (add.name_a, add.name_b, add.a_us, add.b_us) == ("addA", "addB", 1.0, 3.0)
    assert rows["only_a:Gone"].a_us == 0.5 and rows["only_b:Fresh"].b_us == 0.8
    assert d["delta_us"].abs().tolist() == sorted(d["delta_us"].abs(), reverse=True)


def test_output_dir_replaces_only_its_own_files(qwen3, tmp_path):
    """-o writes its tables into a directory that may hold other files: a file of one of its
    names that ascendprof did not write stops the command before anything is written."""
    d = tmp_path / "d"
    assert run(qwen3, "--ranks", "0,2", "-o", d).exit_code == 0
    assert run(qwen3, "--ranks", "0,2", "-o", d).exit_code == 0  # its own files: replaced
    (d / "steps.csv").write_text("my,own\n1,2\n")
    before = (d / "diff.json").read_bytes()
    r = run(qwen3, "--ranks", "0,2", "-o", d)
    assert r.exit_code == 2 and "did not write" in r.output
    assert (d / "steps.csv").read_text() == "my,own\n1,2\n"
    assert (d / "diff.json").read_bytes() == before
