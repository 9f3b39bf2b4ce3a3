"""Partial files and odd values (issue #16): every damage below is made on a copy of the real
Qwen3 fixture; each is left out and reported, never passed on into outputs and verdicts.

Expected values come from the copied files read with the csv / json modules, and for the links
msprof-analyze cannot map from its own warnings (tests/reference/unmapped/README.md).
"""

from __future__ import annotations

import csv
import json
import re
import shutil
from collections import Counter
from pathlib import Path

import pytest
from click.testing import CliRunner

from ascendprof.cli.main import main

OUT = "ASCEND_PROFILER_OUTPUT"
REF = Path(__file__).resolve().parent / "reference" / "unmapped"


@pytest.fixture
def copy(qwen3, tmp_path) -> Path:
    dst = tmp_path / "in"
    shutil.copytree(qwen3, dst, ignore=shutil.ignore_patterns("*memory*", "*mem.csv"))
    return dst


def analyse(src, out):
    r = CliRunner().invoke(main, ["analyse", str(src), "-o", str(out), "-q"])
    assert r.exit_code == 0, r.output
    with open(out / "problems.csv", newline="") as f:
        problems = list(csv.DictReader(f))
    return problems, json.loads((out / "summary.json").read_text())


def rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def test_truncated_kernel_details_row_drops_the_row_only(copy, tmp_path):
    kd = copy / "rank_0_ascend_pt" / OUT / "kernel_details.csv"
    lines = kd.read_text().splitlines(keepends=True)
    cut = 100  # data row 100: its last field lost, as a copy cut short leaves it
    lines[cut] = lines[cut].rstrip("\r\n").rsplit(",", 1)[0] + "\n"
    kd.write_text("".join(lines))
    n_fields = len(lines[0].split(","))
    want = Counter(r["Type"] for i, r in enumerate(rows(kd)) if None not in r.values()
                   and i != cut - 1)
    problems, _ = analyse(copy, tmp_path / "out")
    (p,) = [p for p in problems if p["Path"].endswith("kernel_details.csv")]
    assert p["Severity"] == "skipped" and p["Where"] == f"line {cut + 1}"
    assert p["Reason"].startswith(f"1 row(s) left out: {n_fields - 1} field(s) where the header "
                                  f"has {n_fields}")
    import pyarrow.parquet as pq

    k = pq.read_table(tmp_path / "out" / "tables" / "rank0" / "kernels.parquet")
    assert k.num_rows == len(lines) - 2  # every other row of rank 0 is kept
    assert Counter(k.column("op_type").to_pylist()) == want


def test_negative_durations_and_step_values_are_left_out(copy, tmp_path):
    kd = copy / "rank_0_ascend_pt" / OUT / "kernel_details.csv"
    head = kd.read_text().splitlines()[0].split(",")
    data = rows(kd)
    data[5]["Duration(us)"] = "-" + data[5]["Duration(us)"]
    with open(kd, "w", newline="") as f:
        w = csv.DictWriter(f, head, lineterminator="\n")
        w.writeheader()
        w.writerows(data)
    st = copy / "rank_2_ascend_pt" / OUT / "step_trace_time.csv"
    srows = rows(st)
    srows[0]["Computing"] = "-289400.0"
    srows[0]["Stage"] = "-1.5"
    with open(st, "w", newline="") as f:
        w = csv.DictWriter(f, list(srows[0]), lineterminator="\n")
        w.writeheader()
        w.writerows(srows)
    problems, summary = analyse(copy, tmp_path / "out")
    text = json.dumps(problems)
    assert "1 row(s) with a negative duration left out" in text
    assert "negative Computing value(s) left out (e.g. -289400.000 us)" in text
    assert "negative Stage value(s) left out" in text
    (r2,) = [r for r in summary["ranks"] if r["rank"] == 2]
    assert r2["computing_us"] is None and r2["stage_us"] is None
    assert r2["free_us"] == pytest.approx(float(srows[0]["Free"]))  # the rest of the row stays
    verdicts = json.loads((tmp_path / "out" / "verdicts.json").read_text())["verdicts"]
    assert "-289" not in json.dumps(verdicts)
    cst = rows(tmp_path / "out" / "cluster_step_trace_time.csv")
    (c2,) = [r for r in cst if r["Type"] == "rank" and r["Index"] == "2"]
    assert c2["Computing"] in ("", "nan", "NaN", "None") and not c2["Computing"].startswith("-")


@pytest.mark.parametrize("bad", ["abc", None, []], ids=["text", "null", "list"])
def test_non_numeric_elapse_is_rejected_and_reported(copy, tmp_path, bad):
    cj = copy / "rank_0_ascend_pt" / OUT / "communication.json"
    doc = json.loads(cj.read_text())
    step = next(iter(doc))
    ops = doc[step]["collective"]
    op = next(k for k in ops if not k.startswith("Total"))
    ops[op]["Communication Time Info"]["Elapse Time(ms)"] = bad
    cj.write_text(json.dumps(doc))
    problems, _ = analyse(copy, tmp_path / "out")
    (p,) = [p for p in problems if p["Path"].endswith("communication.json")]
    assert p["Severity"] == "skipped" and p["Rank"] == "0"
    assert f"Elapse Time(ms) = {json.dumps(bad)}" in p["Reason"] and op in p["Reason"]
    cc = json.loads((tmp_path / "out" / "cluster_communication.json").read_text())
    found = [ranks for g in cc.values() for s in g.values() for k, ranks in s.items() if k == op]
    assert found and all("0" not in ranks for ranks in found)  # the op of rank 0 is left out
    assert json.dumps(bad) not in json.dumps(found)


def test_links_msprof_analyze_cannot_map_are_reported(qwen3, tmp_path):
    src = tmp_path / "in"
    src.mkdir()
    for r in (0, 1, 2):  # rank 3 missing: its peers' links to it cannot be mapped
        shutil.copytree(qwen3 / f"rank_{r}_ascend_pt", src / f"rank_{r}_ascend_pt",
                        ignore=shutil.ignore_patterns("*memory*", "*mem.csv"))
    warned = (REF / "qwen3-without-rank3_warnings.txt").read_text().splitlines()
    want = Counter(re.search(r"@(\d+) ", w).group(1) for w in warned)
    problems, _ = analyse(src, tmp_path / "out")
    got = {}
    for p in problems:
        m = re.match(r"cluster_communication_matrix\.json: (\d+) link\(s\) .* in group (\d+) "
                     r"left out", p["Reason"])
        if m:
            got[m.group(2)] = int(m.group(1))
    assert got == dict(want)


def test_complete_cluster_has_no_unmapped_links(qwen3, tmp_path):
    problems, _ = analyse(qwen3, tmp_path / "out")
    assert not [p for p in problems if "cannot be mapped" in p["Reason"]]


def test_real_2023_export_with_a_row_cut_short(tmp_path):
    """fixtures/torch_npu-2023-2rank (PROVENANCE.md): upstream left line 17 of rank 0's
    kernel_details.csv with 31 of 32 fields. The other rows are read; the row is counted."""
    from conftest import FIXTURES

    src = FIXTURES / "torch_npu-2023-2rank"
    kd = src / "rank0_ascend_pt" / OUT / "kernel_details.csv"
    with open(kd, newline="") as f:
        widths = [len(r) for r in csv.reader(f)]
    bad = [i + 1 for i, w in enumerate(widths) if w != widths[0]]
    assert bad == [17] and widths[16] == widths[0] - 1
    problems, _ = analyse(src, tmp_path / "out")
    (p,) = [p for p in problems if p["Path"].endswith("kernel_details.csv")]
    assert (p["Rank"], p["Severity"], p["Where"]) == ("0", "skipped", "line 17")
    import pyarrow.parquet as pq

    k = pq.read_table(tmp_path / "out" / "tables" / "rank0" / "kernels.parquet")
    assert k.num_rows == len(widths) - 2


def _set(path: Path, row: int, col: str, value: str) -> dict:
    data = rows(path)
    head = list(data[0])
    old = dict(data[row])
    data[row][col] = value
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, head, lineterminator="\n")
        w.writeheader()
        w.writerows(data)
    return old


def test_odd_values_name_file_row_and_column_and_leave_the_sums(copy, tmp_path):
    """An empty kernel Duration, a negative Preparing: problems.csv names the file, the data
    row and the column; op_statistics counts one kernel fewer of that op type (counted from the
    file by hand), the rank's Preparing is left out instead of -17.9 ms."""
    kd = copy / "rank_0_ascend_pt" / OUT / "kernel_details.csv"
    killed = _set(kd, 3, "Duration(us)", "")
    st = copy / "rank_3_ascend_pt" / OUT / "step_trace_time.csv"
    _set(st, 0, "Preparing", "-17900.0")
    problems, summary = analyse(copy, tmp_path / "out")
    (p_kd,) = [p for p in problems if p["Path"].endswith("kernel_details.csv")
               and "duration" in p["Reason"]]
    assert p_kd["Where"].startswith("row 4, column Duration(us)"), p_kd
    assert p_kd["Rank"] == "0" and p_kd["Severity"] == "skipped"
    (p_st,) = [p for p in problems if p["Path"].endswith("step_trace_time.csv")]
    assert p_st["Where"] == "row 1, column Preparing, step 13", p_st
    assert "-17900.000 us" in p_st["Reason"]
    (r3,) = [r for r in summary["ranks"] if r["rank"] == 3]
    assert r3.get("preparing_us") is None
    # op_statistics: the kernel of the empty cell is not counted (count from the file by hand)
    want = sum(1 for r in rows(kd) if r["Type"] == killed["Type"]
               and r["Accelerator Core"] == killed["Accelerator Core"] and r["Duration(us)"])
    ops = rows(tmp_path / "out" / "op_statistics.csv")
    got = [r for r in ops if r["Rank"] == "0" and r["OP Type"] == killed["Type"]
           and r["Accelerator Core"] == killed["Accelerator Core"]]
    assert got and int(float(got[0]["Count"])) == want, got


def test_duplicated_step_rows_are_one_row_and_no_gate_regression(copy, tmp_path):
    """A rank's step_trace_time.csv written twice: before, two rows for (step, rank) in
    cluster_step_trace_time.csv and a false +100 % Free regression in the gate."""
    clean = tmp_path / "clean"
    analyse(copy, clean)
    st = copy / "rank_1_ascend_pt" / OUT / "step_trace_time.csv"
    data = st.read_text().splitlines()
    st.write_text("\n".join(data + data[1:]) + "\n")
    problems, _ = analyse(copy, tmp_path / "out")
    assert any("duplicated step row" in p["Reason"] and p["Path"].endswith("step_trace_time.csv")
               for p in problems), problems
    cst = rows(tmp_path / "out" / "cluster_step_trace_time.csv")
    assert len([r for r in cst if r["Type"] == "rank" and r["Index"] == "1"]) == 1
    assert cst == rows(clean / "cluster_step_trace_time.csv")
    r = CliRunner().invoke(main, ["gate", str(clean), str(tmp_path / "out")])
    assert r.exit_code == 0, r.output


def _edit_comm(path: Path, fn) -> None:
    doc = json.loads(path.read_text())
    fn(doc)
    path.write_text(json.dumps(doc))


def _hccs_ops(doc):
    """(step, op key, HCCS entry) of every op with HCCS traffic, in file order."""
    for step, kinds in doc.items():
        for kind, ops in kinds.items():
            for key, info in ops.items():
                h = (info.get("Communication Bandwidth Info") or {}).get("HCCS")
                if not key.startswith("Total Op Info") and h and h.get("Transit Size(MB)"):
                    yield step, key, h


@pytest.mark.parametrize("field,value,words", [
    ("Bandwidth(GB/s)", -17.5, "negative or nan bandwidth(gb/s)"),
    ("Transit Size(MB)", -3.0, "negative or nan transit size(mb)"),
    ("Transit Time(ms)", -0.5, "negative or nan transit time(ms)"),
    ("Bandwidth(GB/s)", "abc", "bandwidth(gb/s) value(s) that are not a number"),
], ids=["bandwidth", "size", "time", "text"])
def test_odd_bandwidth_values_are_reported_and_left_out(copy, tmp_path, field, value, words):
    """Before: copied into the cluster's bandwidth (-17.5 GB/s derived) without a word."""
    cj = copy / "rank_2_ascend_pt" / OUT / "communication.json"
    hit = {}

    def edit(doc):
        step, key, h = next(_hccs_ops(doc))
        hit.update(step=step, key=key)
        h[field] = value
    _edit_comm(cj, edit)
    problems, _ = analyse(copy, tmp_path / "out")
    named = [p for p in problems if p["Path"].endswith("communication.json")
             and words in p["Reason"].lower()]
    assert len(named) == 1, problems
    p = named[0]
    assert p["Rank"] == "2" and field in p["Where"] + p["Reason"]
    assert hit["step"] in p["Where"] or hit["step"].replace("step", "step ") in p["Where"]
    assert hit["key"].split("@")[0] in p["Where"] + p["Reason"]
    doc = json.loads((tmp_path / "out" / "cluster_communication.json").read_text())
    totals = list(_totals(doc))
    assert totals  # the recomputed 'Total Op Info' entries: no negative or text value in them
    for t in totals:
        for transport in (t.get("Communication Bandwidth Info") or {}).values():
            for f in ("Bandwidth(GB/s)", "Transit Size(MB)", "Transit Time(ms)"):
                v = transport.get(f)
                assert v is None or (isinstance(v, (int, float)) and v >= 0), (f, v)


def _totals(obj):
    """Every 'Total Op Info@…' OPINFO object of a cluster_communication.json."""
    if isinstance(obj, dict):
        for k, v in obj.items():
            if k.startswith("Total Op Info") and isinstance(v, dict):
                for info in v.values():
                    if isinstance(info, dict) and "Communication Bandwidth Info" in info:
                        yield info
                if "Communication Bandwidth Info" in v:
                    yield v
            else:
                yield from _totals(v)


def test_one_nan_literal_drops_only_its_op(copy, tmp_path):
    """A NaN literal (Python's json writes it) in one op's Elapse Time: before, the whole
    communication.json was invalid JSON and dropped; now that op is left out, named, and
    every other op of the file is read (counted from the file by hand)."""
    cj = copy / "rank_2_ascend_pt" / OUT / "communication.json"
    doc = json.loads(cj.read_text())
    step, key, _ = next(_hccs_ops(doc))
    kind = next(k for k, ops in doc[step].items() if key in ops)
    doc[step][kind][key]["Communication Time Info"]["Elapse Time(ms)"] = float("nan")
    cj.write_text(json.dumps(doc))  # writes NaN
    assert b"NaN" in cj.read_bytes()
    n_ops = sum(1 for s in doc.values() for ops in s.values() for k in ops
                if not k.startswith("Total Op Info"))
    problems, _ = analyse(copy, tmp_path / "out")
    named = [p for p in problems if p["Path"].endswith("communication.json")]
    assert any("1 op(s) left out" in p["Reason"] and key in p["Reason"] for p in named), named
    import pyarrow.parquet as pq

    ops = pq.read_table(tmp_path / "out" / "tables" / "rank2" / "comm_ops.parquet")
    assert ops.num_rows == n_ops - 1
