"""`ascendprof gate` on real data: the Qwen3 4-rank fixture and a real msprof-analyze
cluster_step_trace_time.csv (tests/reference/gate/README.md says how it was made).

Expected values come from the profiler's own files read here with the csv module
(step_trace_time.csv, op_statistic.csv) and from hand-made perturbations of copies in tmp.
"""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from junitparser import JUnitXml

from ascendprof.cli.main import main

REF = Path(__file__).resolve().parent / "reference" / "gate" / \
    "qwen3-4rank-pp2dp2_cluster_step_trace_time.csv"
OUT = "ASCEND_PROFILER_OUTPUT"


def gate(*args):
    r = CliRunner().invoke(main, ["gate", *map(str, args)])
    return r


def read_rows(path: Path) -> tuple[list[str], list[dict]]:
    with open(path, newline="", encoding="utf-8-sig") as f:
        rd = csv.DictReader(f)
        return rd.fieldnames, list(rd)


def write_rows(path: Path, header, rows) -> None:
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, header, lineterminator="\n")
        w.writeheader()
        w.writerows(rows)


def scale_csv(path: Path, columns, factor: float, where=None) -> None:
    """Multiply ``columns`` of the rows matching ``where`` by ``factor`` (in place)."""
    header, rows = read_rows(path)
    for r in rows:
        if where is None or where(r):
            for c in columns:
                v = r[c].strip().strip("\t")
                if v not in ("", "N/A"):
                    r[c] = repr(float(v) * factor)
    write_rows(path, header, rows)


@pytest.fixture
def copy(qwen3, tmp_path) -> Path:
    dst = tmp_path / "current"
    shutil.copytree(qwen3, dst, ignore=shutil.ignore_patterns("*.db", "*memory*", "*mem.csv"))
    return dst


def as_json(result) -> dict:
    start = result.output.index("{")
    return json.loads(result.output[start:])


def failures(doc: dict) -> set[tuple[str, str]]:
    return {(c["rule"], c["key"]) for c in doc["checks"] if c["verdict"] == "fail"}


# ------------------------------------------------------------------ profiling directories

def test_result_against_itself_passes(qwen3, tmp_path):
    r = gate(qwen3, qwen3, "--format", "json", "--junit", tmp_path / "j.xml")
    assert r.exit_code == 0, r.output
    doc = as_json(r)
    assert not doc["regression"] and not failures(doc)
    # every default rule found data: step metrics per rank, op types, bandwidth per group
    rules = {c["rule"] for c in doc["checks"]}
    assert {"Stage@cluster", "Computing@rank", "Free@rank", "op_time@op_type",
            "bandwidth@group"} <= rules
    # the per-rank values are the profiler's own step_trace_time.csv values (us -> ms)
    _, rows = read_rows(qwen3 / "rank_2_ascend_pt" / OUT / "step_trace_time.csv")
    row = next(c for c in doc["checks"] if c["rule"] == "Computing@rank" and c["key"] == "rank 2")
    assert row["baseline"] == pytest.approx(float(rows[0]["Computing"]) / 1000, abs=1e-6)
    suite = JUnitXml.fromfile(str(tmp_path / "j.xml"))
    cases = [c for s in suite for c in s]
    assert len(cases) == len(doc["checks"])
    assert all(c.is_passed for c in cases)


def test_one_rank_computing_30_percent_higher_fails_naming_rank_and_metric(qwen3, copy, tmp_path):
    st = copy / "rank_2_ascend_pt" / OUT / "step_trace_time.csv"
    scale_csv(st, ["Computing"], 1.3)
    junit, md = tmp_path / "gate.xml", tmp_path / "gate.md"
    r = gate(qwen3, copy, "--junit", junit, "--markdown", md)
    assert r.exit_code == 1, r.output
    assert "Computing" in r.output and "rank 2" in r.output and "REGRESSION" in r.output
    doc = as_json(gate(qwen3, copy, "--format", "json"))
    # ranks 0,1 compute ~231 ms and ranks 2,3 ~401 ms: the cluster median moves by
    # ((231.29 + 401.13)/2 - (231.29 + 400.45)/2) = 0.34 ms, far below 5 %; only rank 2 fails
    assert failures(doc) == {("Computing@rank", "rank 2")}
    _, rows = read_rows(qwen3 / "rank_2_ascend_pt" / OUT / "step_trace_time.csv")
    base = float(rows[0]["Computing"]) / 1000
    bad = next(c for c in doc["checks"] if c["verdict"] == "fail")
    assert bad["baseline"] == pytest.approx(base, abs=1e-6)
    assert bad["current"] == pytest.approx(base * 1.3, abs=1e-6)
    assert bad["change_pct"] == pytest.approx(30.0, abs=1e-6)
    # JUnit: one testcase per rule and scope, exactly one failure, the rest passed
    suite = JUnitXml.fromfile(str(junit))
    cases = [c for s in suite for c in s]
    failed = [c for c in cases if not c.is_passed and not c.is_skipped]
    assert len(cases) == len(doc["checks"])
    assert [(c.classname, c.name) for c in failed] == [("Computing@rank", "rank 2")]
    assert sum(c.is_passed for c in cases) == len(cases) - 1
    assert "regression" in md.read_text(encoding="utf-8")


def test_one_op_type_30_percent_slower_fails(qwen3, copy):
    for rank in (0, 2):  # ranks 1 and 3 have no kernel_details.csv
        scale_csv(copy / f"rank_{rank}_ascend_pt" / OUT / "kernel_details.csv",
                  ["Duration(us)"], 1.3, where=lambda r: r["Type"] == "MatMulV3")
    r = gate(qwen3, copy, "--format", "json")
    assert r.exit_code == 1, r.output
    doc = as_json(r)
    assert failures(doc) == {("op_time@op_type", "MatMulV3")}
    # baseline: median over ranks 0 and 2 of MatMulV3's total (all cores) in op_statistic.csv
    totals = []
    for rank in (0, 2):
        _, rows = read_rows(qwen3 / f"rank_{rank}_ascend_pt" / OUT / "op_statistic.csv")
        totals.append(sum(float(x["Total Time(us)"]) for x in rows if x["OP Type"] == "MatMulV3"))
    expected = sum(totals) / 2 / 1000  # median of two = their mean, in ms
    bad = next(c for c in doc["checks"] if c["verdict"] == "fail")
    assert bad["baseline"] == pytest.approx(expected, rel=1e-9)
    assert bad["change_pct"] == pytest.approx(30.0, abs=1e-3)


def test_two_percent_everywhere_passes_default_rules(qwen3, copy):
    metrics = ["Computing", "Communication(Not Overlapped)", "Overlapped", "Communication", "Free",
               "Stage", "Bubble", "Communication(Not Overlapped and Exclude Receive)", "Preparing"]
    for rank in range(4):
        scale_csv(copy / f"rank_{rank}_ascend_pt" / OUT / "step_trace_time.csv", metrics, 1.02)
    for rank in (0, 2):
        scale_csv(copy / f"rank_{rank}_ascend_pt" / OUT / "kernel_details.csv",
                  ["Duration(us)"], 1.02)
    r = gate(qwen3, copy, "--format", "json")
    assert r.exit_code == 0, r.output
    doc = as_json(r)
    stage = next(c for c in doc["checks"] if c["rule"] == "Stage@cluster")
    assert stage["change_pct"] == pytest.approx(2.0, abs=1e-3)
    # a stricter rule from the command line turns the same +2 % into a regression
    r = gate(qwen3, copy, "--rule", "Stage@cluster=+1%")
    assert r.exit_code == 1 and "Stage" in r.output


@pytest.mark.parametrize("bad", ["missing", "garbage", "bad_number", "empty_dir"])
def test_unreadable_input_exits_2_with_one_line(qwen3, tmp_path, bad):
    if bad == "missing":
        p = tmp_path / "nope"
    elif bad == "garbage":
        p = tmp_path / "garbage.csv"
        p.write_bytes(b"\x00\xff\xfe not a csv")
    elif bad == "bad_number":
        p = tmp_path / "step_trace_time.csv"
        header, rows = read_rows(qwen3 / "rank_0_ascend_pt" / OUT / "step_trace_time.csv")
        rows[0]["Computing"] = "12x.5"
        write_rows(p, header, rows)
    else:
        p = tmp_path / "empty"
        p.mkdir()
    for args in ((p, qwen3), (qwen3, p)):
        r = gate(*args)
        assert r.exit_code == 2, (bad, r.output)
        err = r.stderr.strip() if hasattr(r, "stderr") and r.stderr else r.output.strip()
        assert err.startswith("ascendprof: error:") and len(err.splitlines()) == 1, err
        assert str(p) in err


def test_bad_rules_exit_2(qwen3, tmp_path):
    assert gate(qwen3, qwen3, "--rule", "nonsense").exit_code == 2
    assert gate(qwen3, qwen3, "--rule", "Computing@op_type=+5%").exit_code == 2
    toml = tmp_path / "gate.toml"
    toml.write_text("[[rule]\nmetric=", encoding="utf-8")
    assert gate(qwen3, qwen3, "--rules", toml).exit_code == 2


def test_toml_rules_replace_defaults(qwen3, copy, tmp_path):
    scale_csv(copy / "rank_2_ascend_pt" / OUT / "step_trace_time.csv", ["Computing"], 1.3)
    toml = tmp_path / "gate.toml"
    toml.write_text('defaults = false\n\n[[rule]]\nmetric = "computing"\nscope = "rank"\n'
                    'max_change_pct = 50\nnoise_floor = "1ms"\n', encoding="utf-8")
    r = gate(qwen3, copy, "--rules", toml, "--format", "json")
    assert r.exit_code == 0, r.output
    doc = as_json(r)
    assert {c["rule"] for c in doc["checks"]} == {"Computing@rank"}
    assert len(doc["checks"]) == 4


# ------------------------------------------------------------------ exported CSV inputs

def test_msprof_analyze_csv_against_itself_passes():
    r = gate(REF, REF, "--format", "json")
    assert r.exit_code == 0, r.output
    doc = as_json(r)
    _, rows = read_rows(REF)
    rank_rows = [x for x in rows if x["Type"] == "rank"]
    per_rank = [c for c in doc["checks"] if c["rule"] == "Stage@rank"]
    assert len(per_rank) == len(rank_rows) == 4
    want = {f"rank {x['Index']}": float(x["Stage"]) / 1000 for x in rank_rows}
    assert {c["key"]: c["baseline"] for c in per_rank} == pytest.approx(want)


def test_msprof_analyze_csv_rank_computing_30_percent_fails(tmp_path):
    cur = tmp_path / "cluster_step_trace_time.csv"
    shutil.copy(REF, cur)
    scale_csv(cur, ["Computing"], 1.3, where=lambda r: r["Type"] == "rank" and r["Index"] == "3")
    junit = tmp_path / "j.xml"
    r = gate(REF, cur, "--junit", junit)
    assert r.exit_code == 1, r.output
    assert "Computing" in r.output and "rank 3" in r.output
    suite = JUnitXml.fromfile(str(junit))
    cases = [c for s in suite for c in s]
    failed = [(c.classname, c.name) for c in cases if not c.is_passed and not c.is_skipped]
    assert failed == [("Computing@rank", "rank 3")]
    # 4 step rules x (cluster + 4 ranks), and the four default rules this CSV has no data for,
    # listed as skipped with the reason
    assert len(cases) == 24
    skipped = [(c.classname, c.name) for c in cases if c.is_skipped]
    assert sorted(skipped) == [("bandwidth@group", "-"), ("bandwidth@link", "-"),
                               ("bandwidth@rank", "-"), ("op_time@op_type", "-")]


def test_msprof_analyze_csv_two_percent_passes(tmp_path):
    cur = tmp_path / "cluster_step_trace_time.csv"
    shutil.copy(REF, cur)
    header, _ = read_rows(REF)
    scale_csv(cur, header[3:12], 1.02)
    assert gate(REF, cur).exit_code == 0


def test_msprof_analyze_csv_truncated_exits_2(tmp_path):
    cur = tmp_path / "cluster_step_trace_time.csv"
    cur.write_text(REF.read_text(encoding="utf-8").splitlines()[0] + "\n13,rank,0,12.5\n",
                   encoding="utf-8")
    r = gate(REF, cur)
    assert r.exit_code == 2 and str(cur) in r.output


def test_profiler_csvs_as_inputs(qwen3, tmp_path):
    """step_trace_time.csv, kernel_details.csv and op_statistic.csv as the two sides."""
    out0 = qwen3 / "rank_0_ascend_pt" / OUT
    assert gate(out0 / "step_trace_time.csv", out0 / "step_trace_time.csv").exit_code == 0
    # op_statistic.csv totals are the sums of kernel_details durations (spec §A.3), so the
    # two files of one rank compare equal
    r = gate(out0 / "op_statistic.csv", out0 / "kernel_details.csv", "--format", "json")
    assert r.exit_code == 0, r.output
    checks = [c for c in as_json(r)["checks"] if c["verdict"] != "skip"]
    assert checks and all(abs(c["change"]) < 1e-3 for c in checks)
    # op types 30 % slower in a kernel_details copy fail against the profiler's op_statistic
    kd = tmp_path / "kernel_details.csv"
    shutil.copy(out0 / "kernel_details.csv", kd)
    scale_csv(kd, ["Duration(us)"], 1.3, where=lambda r: r["Type"] == "FlashAttentionScoreGrad")
    r = gate(out0 / "op_statistic.csv", kd, "--format", "json")
    assert r.exit_code == 1
    assert failures(as_json(r)) == {("op_time@op_type", "FlashAttentionScoreGrad")}


def test_nothing_comparable_exits_2(qwen3):
    out0 = qwen3 / "rank_0_ascend_pt" / OUT
    r = gate(out0 / "step_trace_time.csv", out0 / "op_statistic.csv")
    assert r.exit_code == 2 and "nothing comparable" in r.output


def test_analyse_output_dir_as_baseline(qwen3, tmp_path):
    out = tmp_path / "out"
    r = CliRunner().invoke(main, ["analyse", str(qwen3), "-o", str(out), "-q"])
    assert r.exit_code == 0, r.output[-2000:]  # a failing analyse is a failure, not a skip
    r = gate(out, qwen3, "--format", "json")
    assert r.exit_code == 0, r.output
    assert not failures(as_json(r))
    # its CSV alone (cluster_step_trace_time.csv) against msprof-analyze's: same rank values
    assert gate(out / "cluster_step_trace_time.csv", REF).exit_code == 0


def test_directory_of_committed_csvs_as_baseline(qwen3, tmp_path):
    """A baseline directory holding ascendprof's two CSVs (cluster_step_trace_time.csv in the
    msprof-analyze layout, op_statistics.csv with a Rank column) is read like analyse output."""
    base = tmp_path / "baseline"
    base.mkdir()
    shutil.copy(REF, base / "cluster_step_trace_time.csv")
    rows = []
    for rank in (0, 2):
        _, rs = read_rows(qwen3 / f"rank_{rank}_ascend_pt" / OUT / "op_statistic.csv")
        rows += [{"Rank": rank, "OP Type": x["OP Type"], "Accelerator Core": x["Core Type"],
                  "Count": x["Count"], "Total Time(us)": x["Total Time(us)"]} for x in rs]
    write_rows(base / "op_statistics.csv",
               ["Rank", "OP Type", "Accelerator Core", "Count", "Total Time(us)"], rows)
    r = gate(base, qwen3, "--format", "json")
    assert r.exit_code == 0, r.output
    doc = as_json(r)
    assert {"Stage@rank", "op_time@op_type"} <= {c["rule"] for c in doc["checks"]}
    assert all(abs(c["change"]) < 1e-3 for c in doc["checks"] if c["verdict"] != "skip")


# ------------------------------------------------------------------ bandwidth and noise floors
# HCCL group ids in communication.json of the parallel_group_info groups of
# profiler_metadata.json: dp_cp of ranks 0, 1 (group_name_5) and dp of ranks 2, 3 (group_name_3;
# only rank 3 reports its few bytes).
DP_CP_01 = "5862276114690318097"
DP_23 = "5862276106100383503"


def scale_transit(root: Path, group: str, transport: str, factor: float, ranks=(0, 1)) -> None:
    """Multiply Transit Time(ms) of ``transport`` in every op of ``group`` (communication.json
    of ``ranks``): the group's bandwidth Σ size / Σ time becomes 1 / factor of what it was."""
    for rank in ranks:
        path = root / f"rank_{rank}_ascend_pt" / OUT / "communication.json"
        doc = json.loads(path.read_text())
        for kinds in doc.values():
            for ops in kinds.values():
                for key, info in ops.items():
                    bw = (info.get("Communication Bandwidth Info") or {}).get(transport)
                    if key.endswith("@" + group) and bw:
                        bw["Transit Time(ms)"] *= factor
        path.write_text(json.dumps(doc))


def own_bandwidth(root: Path, rank: int, group: str, transport: str) -> float:
    """GB/s of ``group`` over ``transport`` on ``rank`` in its one step: Σ Transit Size(MB) /
    Σ Transit Time(ms) of the group's ops (MB/ms = GB/s, spec §7.2), 'Total Op Info' left out."""
    doc = json.loads((root / f"rank_{rank}_ascend_pt" / OUT / "communication.json").read_text())
    size = time = 0.0
    for kinds in doc.values():
        for ops in kinds.values():
            for key, info in ops.items():
                bw = (info.get("Communication Bandwidth Info") or {}).get(transport)
                if key.endswith("@" + group) and not key.startswith("Total") and bw:
                    size += bw["Transit Size(MB)"]
                    time += bw["Transit Time(ms)"]
    return size / time


def check_of(doc: dict, rule: str, key: str) -> dict:
    (c,) = [c for c in doc["checks"] if c["rule"] == rule and c["key"] == key]
    return c


def test_bandwidth_drop_beyond_ten_percent_fails_that_group_only(qwen3, copy):
    scale_transit(copy, DP_CP_01, "HCCS", 1 / 0.85)  # 15 % less bandwidth, ranks 0 and 1
    r = gate(qwen3, copy, "--format", "json")
    assert r.exit_code == 1, r.output
    doc = as_json(r)
    # the group, and each of its two ranks on its own (most of their HCCS traffic is in this
    # group: their own bandwidth drops beyond 10 % too); the links (communication_matrix.json,
    # not edited) pass
    assert failures(doc) == {("bandwidth@group", "dp_cp (0, 1) HCCS"),
                             ("bandwidth@rank", "rank 0 HCCS"), ("bandwidth@rank", "rank 1 HCCS")}
    c = check_of(doc, "bandwidth@group", "dp_cp (0, 1) HCCS")
    base = [own_bandwidth(qwen3, rank, DP_CP_01, "HCCS") for rank in (0, 1)]
    assert 18 < min(base) and c["baseline"] == pytest.approx(sum(base) / 2, rel=1e-9)  # median
    # times are read as integer ns: a relative error of ~1e-7 from rounding
    assert c["current"] == pytest.approx(c["baseline"] * 0.85, rel=1e-6)
    assert c["change_pct"] == pytest.approx(-15.0, abs=1e-4)


@pytest.mark.parametrize("factor, pct", [(1 / 0.95, -5.0), (0.5, 100.0)])
def test_bandwidth_drop_within_the_limit_or_a_rise_passes(qwen3, copy, factor, pct):
    scale_transit(copy, DP_CP_01, "HCCS", factor)  # 5 % less, or twice the bandwidth
    r = gate(qwen3, copy, "--format", "json")
    assert r.exit_code == 0, r.output
    c = check_of(as_json(r), "bandwidth@group", "dp_cp (0, 1) HCCS")
    assert c["verdict"] == "pass" and c["change_pct"] == pytest.approx(pct, abs=1e-4)
    assert c["note"] == ""


def test_default_noise_floors(qwen3, copy):
    """Default floors: an op type's time per step must grow by more than 1 ms and a group's
    bandwidth drop by more than 0.1 GB/s. Op totals per step (rank 0 / rank 2 op_statistic.csv):
    Cos ~0.92 ms, LpNormV2 ~3.31 ms; the dp group of ranks 2, 3 moves ~0.008 GB/s."""
    for rank in (0, 2):
        scale_csv(copy / f"rank_{rank}_ascend_pt" / OUT / "kernel_details.csv", ["Duration(us)"],
                  1.5, where=lambda r: r["Type"] in ("Cos", "LpNormV2"))
    scale_transit(copy, DP_23, "HCCS", 2.0, ranks=(2, 3))  # half the bandwidth
    r = gate(qwen3, copy, "--format", "json")
    assert r.exit_code == 1, r.output
    doc = as_json(r)
    assert failures(doc) == {("op_time@op_type", "LpNormV2")}  # +1.65 ms
    cos = check_of(doc, "op_time@op_type", "Cos")  # +50 % but only +0.46 ms
    assert cos["change_pct"] == pytest.approx(50.0, abs=1e-3) and cos["change"] < 1.0
    assert cos["verdict"] == "pass" and "below noise floor" in cos["note"]
    dp = check_of(doc, "bandwidth@group", "dp (2, 3) HCCS")  # -50 % of ~0.008 GB/s
    assert dp["change_pct"] == pytest.approx(-50.0, abs=1e-4) and abs(dp["change"]) < 0.1
    assert dp["verdict"] == "pass" and "below noise floor" in dp["note"]


@pytest.mark.parametrize("margin, verdict", [(1.01, "pass"), (0.99, "fail")])
def test_rule_noise_floor_decides_at_its_value(qwen3, copy, margin, verdict):
    """Rank 2's Computing +30 % (from its step_trace_time.csv: ~401 ms -> +120 ms) against a
    rule whose floor is just above or just below that change."""
    _, rows = read_rows(qwen3 / "rank_2_ascend_pt" / OUT / "step_trace_time.csv")
    change_ms = float(rows[0]["Computing"]) * 0.3 / 1000
    scale_csv(copy / "rank_2_ascend_pt" / OUT / "step_trace_time.csv", ["Computing"], 1.3)
    r = gate(qwen3, copy, "--no-defaults", "--format", "json",
             "--rule", f"Computing@rank=+5%,floor={change_ms * margin:.3f}ms")
    assert r.exit_code == (1 if verdict == "fail" else 0), r.output
    c = check_of(as_json(r), "Computing@rank", "rank 2")
    assert c["verdict"] == verdict and c["change"] == pytest.approx(change_ms, rel=1e-6)
    assert ("below noise floor" in c["note"]) == (verdict == "pass")
