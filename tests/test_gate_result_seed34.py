"""gate_result (ascendprof/compare/gate/result.py), seed 34 survivors: the summary line's counts
and its list of failed checks, the JSON document's keys, the "nothing comparable" message, the
"op types differ" warning, and the wording helpers (few, fmt_change, ranges).

Inputs are the msprof-analyze cluster_step_trace_time.csv of the Qwen3 fixture
(tests/reference/gate) and scaled copies of it, and rank 0's profiler CSVs of
fixtures/qwen3-4rank-pp2dp2; expected values are computed here from those files with the csv
module.
"""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

from click.testing import CliRunner

from ascendprof.cli.main import main
from ascendprof.compare.gate.result import few, fmt_change, ranges

ROOT = Path(__file__).resolve().parent.parent
REF = ROOT / "tests" / "reference" / "gate" / "qwen3-4rank-pp2dp2_cluster_step_trace_time.csv"
OUT0 = ROOT / "fixtures" / "qwen3-4rank-pp2dp2" / "rank_0_ascend_pt" / "ASCEND_PROFILER_OUTPUT"


def gate(*args):
    return CliRunner().invoke(main, ["gate", *map(str, args)])


def as_json(result) -> dict:
    return json.loads(result.output[result.output.index("{"):])


def read_rows(path: Path):
    with open(path, newline="", encoding="utf-8-sig") as f:
        rd = csv.DictReader(f)
        return rd.fieldnames, list(rd)


def write_rows(path: Path, header, rows) -> None:
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, header, lineterminator="\n")
        w.writeheader()
        w.writerows(rows)


def test_no_regression_summary_counts_and_json_keys():
    """REF against itself: 4 step rules (Stage, Computing, Communication(Not Overlapped), Free)
    x (cluster + 4 ranks) = 20 passed checks, and the 4 default rules this CSV has no data for
    (op_time@op_type, bandwidth@group/link/rank) skipped."""
    r = gate(REF, REF, "--format", "json")
    assert r.exit_code == 0, r.output
    doc = as_json(r)
    assert doc["summary"] == "no regression: 0 regression(s), 20 passed, 4 skipped"
    assert doc["baseline"] == str(REF) and doc["current"] == str(REF)
    assert {"baseline", "current", "regression", "summary", "statistic", "warnings", "rules",
            "checks"} <= set(doc)
    assert doc["regression"] is False


def test_everything_50_percent_slower_summary(tmp_path):
    """Every step value x 1.5: all 20 compared checks fail, none passes. The summary names the
    first 10 failures (rules in order Stage, Computing, ...; cluster first, then rank 0..3) with
    their change, and says 10 more."""
    header, rows = read_rows(REF)
    scaled = []
    for row in rows:
        row = dict(row)
        for c in header[3:12]:
            row[c] = repr(float(row[c]) * 1.5)
        scaled.append(row)
    cur = tmp_path / "cluster_step_trace_time.csv"
    write_rows(cur, header, scaled)
    r = gate(REF, cur, "--format", "json")
    assert r.exit_code == 1, r.output
    doc = as_json(r)
    by_rank = {int(x["Index"]): x for x in rows if x["Type"] == "rank"}
    items = []
    for metric in ("Stage", "Computing"):
        vals = sorted(float(by_rank[k][metric]) for k in by_rank)
        median = (vals[1] + vals[2]) / 2  # median of four, us
        items.append(f"{metric} cluster +{median * 0.5 / 1000:.3f} ms (+50.0 %)")
        for k in range(4):
            items.append(f"{metric} rank {k} +{float(by_rank[k][metric]) * 0.5 / 1000:.3f} ms "
                         f"(+50.0 %)")
    assert doc["summary"] == ("REGRESSION: 20 regression(s), 0 passed, 4 skipped — "
                              + "; ".join(items) + "; and 10 more")
    assert doc["regression"] is True


def test_nothing_comparable_names_both_sides_metrics():
    """step_trace_time.csv has the step columns; op_statistic.csv only op times."""
    header, _ = read_rows(OUT0 / "step_trace_time.csv")
    step_cols = sorted(c for c in header if c not in ("Device_id", "Step"))
    r = gate(OUT0 / "step_trace_time.csv", OUT0 / "op_statistic.csv")
    assert r.exit_code == 2
    text = " ".join(r.output.split())
    assert f"(baseline has {', '.join(step_cols)}; current has op_time)" in text


def test_mostly_other_op_types_warns(tmp_path):
    """op_statistic.csv with all but one op type renamed: 1 type in common out of 2n - 1."""
    header, rows = read_rows(OUT0 / "op_statistic.csv")
    types = sorted({x["OP Type"] for x in rows})
    keep = types[0]
    for x in rows:
        if x["OP Type"] != keep:
            x["OP Type"] = "Other" + x["OP Type"]
    cur = tmp_path / "op_statistic.csv"
    write_rows(cur, header, rows)
    r = gate(OUT0 / "op_statistic.csv", cur, "--format", "json")
    doc = as_json(r)
    n = len(types)
    assert f"the op types differ: 1 of {2 * n - 1} in common (another model or configuration?)" \
        in doc["warnings"]


def test_few():
    assert few([3, 1, 2]) == "1, 2, 3"
    assert few(["e", "d", "c", "b", "a", "f"]) == "a, b, c, d and 2 more"
    assert few([5, 4, 3, 2, 1, 6, 7], n=2) == "1, 2 and 5 more"
    assert few([]) == ""


def test_fmt_change():
    assert fmt_change(12.3454, 31.04, "ms") == "+12.345 ms (+31.0 %)"
    assert fmt_change(-0.5, None, "GB/s") == "-0.500 GB/s"
    assert fmt_change(2.0, float("nan"), "ms") == "+2.000 ms"
    assert fmt_change(None, 3.0, "ms") == "n/a"


def test_ranges():
    assert ranges([0, 1, 2, 3, 8]) == "0-3, 8"
    assert ranges([]) == "none"


def test_communication_groups_only_one_side_has(tmp_path):
    """A copy of the Qwen3 fixture without the ops of its one-rank groups (the hash suffix of an
    op name in communication.json that only one rank has: rank 2's and rank 3's tp groups).
    Those groups move no data between ranks, so they have an elapse but no bandwidth: the
    warning must come from elapse, and name the side that lacks them with '-'."""
    import json as _json
    from collections import Counter

    qwen3 = ROOT / "fixtures" / "qwen3-4rank-pp2dp2"
    cur = tmp_path / "current"
    shutil.copytree(qwen3, cur, ignore=shutil.ignore_patterns("*.db"))
    docs, hashes = {}, {}
    for r in range(4):
        p = cur / f"rank_{r}_ascend_pt" / "ASCEND_PROFILER_OUTPUT" / "communication.json"
        docs[p] = _json.loads(p.read_text(encoding="utf-8"))
        hashes[p] = {k.split("@")[1] for step in docs[p].values() for ops in step.values()
                     for k in ops if "@" in k}
    count = Counter(h for hs in hashes.values() for h in hs)
    single = {h for h, n in count.items() if n == 1}
    assert len(single) == 2
    for p, doc in docs.items():
        for step in doc.values():
            for ops in step.values():
                for k in [k for k in ops if "@" in k and k.split("@")[1] in single]:
                    del ops[k]
        p.write_text(_json.dumps(doc), encoding="utf-8")
    r = gate(qwen3, cur, "--format", "json")
    assert r.exit_code == 0, r.output
    assert as_json(r)["warnings"] == [
        "the communication groups differ: only in baseline tp (2,), tp (3,); only in current -"]
    r = gate(cur, qwen3, "--format", "json")
    assert r.exit_code == 0, r.output
    assert as_json(r)["warnings"] == [
        "the communication groups differ: only in baseline -; only in current tp (2,), tp (3,)"]


def test_nothing_comparable_side_without_values_says_nothing(tmp_path):
    """A step_trace_time.csv whose one row has every step column empty has no value at all:
    the message says that side has "nothing" (lower case), whichever side it is."""
    real = OUT0 / "step_trace_time.csv"
    header, _ = read_rows(real)
    empty = tmp_path / "step_trace_time.csv"
    write_rows(empty, header, [{"Device_id": "0", "Step": "13"}])
    step_cols = sorted(c for c in header if c not in ("Device_id", "Step"))
    r = gate(empty, real)
    assert r.exit_code == 2, r.output
    assert f"(baseline has nothing; current has {', '.join(step_cols)})" in " ".join(r.output.split())
    r = gate(real, empty)
    assert r.exit_code == 2, r.output
    assert f"(baseline has {', '.join(step_cols)}; current has nothing)" in " ".join(r.output.split())


def test_damaged_json_in_an_input_directory_says_where(tmp_path):
    """An analyse-output-style directory (cluster_step_trace_time.csv and a
    cluster_communication.json cut off mid-number): exit 2, and the message keeps the reader's
    position, the end of the file (its length in bytes)."""
    d = tmp_path / "cut"
    d.mkdir()
    shutil.copy(REF, d / "cluster_step_trace_time.csv")
    text = ('{"(0, 1)": {"step13": {"hcom_allReduce__1@g": {"0": '
            '{"Communication Time Info": {"Elapse Time(ms)": 1.')
    cc = d / "cluster_communication.json"
    cc.write_bytes(text.encode("ascii"))
    r = gate(d, d)
    assert r.exit_code == 2, r.output
    assert f"{cc} at byte {len(text)}: invalid JSON" in r.output
