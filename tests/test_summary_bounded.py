"""summary.json stays small at any size: a per-rank or per-step list longer than 128 rows is
written in its bounded form (the rows that matter, how many there were, how they were chosen,
the file with every row), said in problems.csv; the full table stays in the CSV.

Before: summary.json's ``ranks`` held one object per rank and step (78 MB at 2 x 10^5 step
rows, ~0.8 GB at 2 x 10^6), and at 1024 ranks every per-rank list passed 1 MB together.

Input: ranks 1 and 3 of the real Qwen3 sample (pipeline stages 0 and 1), each rank's
step_trace_time.csv repeated over many steps with a Free that grows with the step, so the
expected rows are known from the generator alone.
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ascendprof.report import bounded

ROOT = Path(__file__).resolve().parents[1]
QWEN = ROOT / "fixtures" / "qwen3-4rank-pp2dp2"
N = 50_000  # steps per rank: 10^5 step rows in all
COLS = ("Computing", "Communication(Not Overlapped)", "Free")


def _make(dst: Path) -> dict:
    """Ranks 1 and 3 with steps 1..N; Free of step s = 100,000 + 0.1 * s us. Returns
    {rank: {column: value of step 1 as the profiler wrote it (us)}}."""
    base = {}
    for r in (1, 3):
        d = dst / f"rank_{r}_ascend_pt"
        shutil.copytree(QWEN / d.name, d)
        st = d / "ASCEND_PROFILER_OUTPUT" / "step_trace_time.csv"
        with open(st, newline="") as f:
            rows = list(csv.reader(f))
        head, row = rows[0], rows[1]
        base[r] = {c: float(row[head.index(c)]) for c in COLS}
        with open(st, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(head)
            for s in range(1, N + 1):
                row[head.index("Step")] = str(s)
                row[head.index("Free")] = repr(100000 + 0.1 * s)
                w.writerow(row)
    return base


def _free(s: int) -> float:
    return 100000 + 0.1 * s


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("many-steps")
    base = _make(tmp / "in")
    out = tmp / "out"
    p = subprocess.run([sys.executable, "-m", "ascendprof", "analyse", str(tmp / "in"), "-o",
                        str(out), "--workers", "1", "--no-html", "--no-cache"],
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr
    return base, out, p.stdout


def test_many_step_rows_give_a_small_summary_with_the_rows_that_matter(run):
    base, out, _ = run
    size = (out / "summary.json").stat().st_size
    assert size < 1_000_000, size
    s = json.loads((out / "summary.json").read_text())
    ranks = s["ranks"]
    assert bounded.is_bounded(ranks)
    b = ranks["bounded"]
    assert b["rows"] == 2 * N and b["full_table"] == "cluster_step_trace_time.csv"
    # every row is still in the CSV
    with open(out / "cluster_step_trace_time.csv", newline="") as f:
        rows = [r for r in csv.DictReader(f) if r["Type"] == "rank"]
    assert len(rows) == 2 * N
    # the rows shown, from the generator: step time = Computing + CommNO + Free
    def total(r, st):
        return base[r]["Computing"] + base[r]["Communication(Not Overlapped)"] + _free(st)

    assert total(1, 1) > total(3, N)  # rank 1's steps are all longer than rank 3's
    want = {(1, st) for st in range(N - 19, N + 1)}  # the 20 longest
    want.add((3, 1))  # the shortest
    verdicts = json.loads((out / "verdicts.json").read_text())["verdicts"]
    named = {int(x) for v in verdicts if v["severity"] in ("warning", "critical")
             for x in v["ranks"]}
    assert 3 in named  # stage 1 (rank 3) is the heavier stage
    want |= {(r, N) for r in named & {1, 3}}  # the longest step of each named rank
    got = {(r["rank"], r["step"]) for r in ranks["items"]}
    assert got == want
    assert b["shown"] == len(ranks["items"]) == len(want)
    for r in ranks["items"]:
        assert r["free_us"] == pytest.approx(_free(r["step"]))
        assert r["computing_us"] == pytest.approx(base[r["rank"]]["Computing"])
    # each rank's mean over its steps, and the spread over all rows
    means = {m["rank"]: m for m in ranks["per_rank_mean"]["items"]}
    assert set(means) == {1, 3}
    for r in (1, 3):
        assert means[r]["steps"] == N
        assert means[r]["free_us"] == pytest.approx(100000 + 0.1 * (N + 1) / 2)
        assert means[r]["computing_us"] == pytest.approx(base[r]["Computing"])
    sp = ranks["spread"]["step_us"]
    assert sp["max"] == pytest.approx(total(1, N)) and sp["min"] == pytest.approx(total(3, 1))
    # the headline's numbers come from every row, its step ids are bounded
    h = s["headline"]
    mean_step = sum(base[r]["Computing"] + base[r]["Communication(Not Overlapped)"]
                    + 100000 + 0.1 * (N + 1) / 2 for r in (1, 3)) / 2
    assert h["step_ms"] == pytest.approx(mean_step / 1000, abs=1e-3)
    assert h["slowest_rank"] == 1
    assert bounded.total(h["steps"]) == N
    assert bounded.items(h["steps"]) == list(range(1, 11)) + list(range(N - 9, N + 1))
    for src in s["sources"]:
        assert bounded.total(src["steps"]) == N


def test_the_bounding_is_said_in_problems_csv(run):
    _, out, stdout = run
    with open(out / "problems.csv", newline="") as f:
        said = [p for p in csv.DictReader(f) if p["Path"] == "summary.json"]
    assert len(said) == 1, said  # one note; each list, its rows and the rows shown in Affects
    assert said[0]["Severity"] == "warning"  # 22 rows: the 20 longest, the shortest, rank 3's longest
    assert said[0]["Reason"].startswith("4 list(s) over 128 rows summarised")
    assert sorted(said[0]["Affects"].split(";")) == sorted(
        [f"ranks: {2 * N:,} rows, 22 shown, all in cluster_step_trace_time.csv",
         f"headline steps: {N:,} rows, 20 shown, all in cluster_step_trace_time.csv"]
        + [f"step ids of the source of rank {r}: {N:,} rows, 20 shown, all in "
           "cluster_step_trace_time.csv" for r in (1, 3)])
    # the terminal's breakdown reads the bounded rows and their spread
    assert f"5 longest of {2 * N:,} rank-steps" in stdout


def test_small_runs_list_everything(tmp_path):
    """The shipped sample: every list whole, nothing said about summary.json."""
    out = tmp_path / "out"
    p = subprocess.run([sys.executable, "-m", "ascendprof", "analyse", str(QWEN), "-o",
                        str(out), "-q", "--no-html", "--no-cache"],
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr
    s = json.loads((out / "summary.json").read_text())
    assert isinstance(s["ranks"], list) and isinstance(s["sources"], list)
    assert len(s["sources"]) == 4 and {r["rank"] for r in s["ranks"]} == {0, 1, 2, 3}
    with open(out / "problems.csv", newline="") as f:
        assert not [p for p in csv.DictReader(f) if p["Path"] == "summary.json"]


def test_many_ranks_give_bounded_lists_the_terminal_and_the_page_read(tmp_path,
                                                                       generated_cluster):
    """160 ranks (above the 128-row limit), the page on: sources, ranks and the rank maps are
    bounded; every rank and device id is still in summary.json (sources' columns, the rank
    maps' groups), the page's facts count every rank, the terminal names 160 sources."""
    root = generated_cluster(160, "--kernels-per-rank", "20", "--comm-ops-per-rank", "10")
    rank_dirs = sorted(root.glob("rank_*_ascend_pt"))
    want = sorted(int(d.name.split("_")[1]) for d in rank_dirs)
    assert len(want) == 160
    out = tmp_path / "out"
    p = subprocess.run([sys.executable, "-m", "ascendprof", "analyse", str(root), "-o",
                        str(out), "--no-cache"], capture_output=True, text=True, timeout=900,
                       env={**os.environ, "COLUMNS": "120", "ASCENDPROF_HTML": "1"})
    assert p.returncode in (0, 1), p.stderr
    assert "160 torch_npu text in" in p.stdout.splitlines()[0]
    s = json.loads((out / "summary.json").read_text())
    src = s["sources"]
    assert bounded.is_bounded(src) and src["bounded"]["rows"] == 160
    assert sorted(src["columns"]["rank"]) == want
    assert sum(src["counts"]["kind"].values()) == 160
    assert len(src["items"]) == src["bounded"]["shown"] < 160
    # each rank's device id as the profiler wrote it (step_trace_time.csv's Device_id)
    devices = {}
    for d in rank_dirs:
        with open(d / "ASCEND_PROFILER_OUTPUT" / "step_trace_time.csv", newline="",
                  encoding="utf-8-sig") as f:
            devices[int(d.name.split("_")[1])] = int(next(csv.DictReader(f))["Device_id"])
    assert dict(zip(src["columns"]["rank"], src["columns"]["device_id"])) == devices
    # the step rows: every one counted, the longest shown (from cluster_step_trace_time.csv)
    with open(out / "cluster_step_trace_time.csv", newline="") as f:
        rows = [r for r in csv.DictReader(f) if r["Type"] == "rank"]
    assert s["ranks"]["bounded"]["rows"] == len(rows) > 128
    total = {(int(r["Index"]), int(r["Step"])): sum(float(r[c]) for c in COLS) for r in rows}
    longest = max(total.values())
    got = {(r["rank"], r["step"]) for r in s["ranks"]["items"]}
    assert any(abs(total[k] - longest) < 1e-6 for k in got)
    assert s["ranks"]["spread"]["step_us"]["max"] == pytest.approx(longest)
    assert s["ranks"]["spread"]["step_us"]["min"] == pytest.approx(min(total.values()))
    # a rank map: every rank back from the groups
    methods = bounded.rank_map(s["breakdown_methods"])
    assert sorted(int(r) for r in methods) == want
    # the page counts every rank, not the sources shown
    page = (out / "report.html").read_text()
    assert "160: 0-159" in page
    assert "160 × torch_npu text" in page


def test_the_page_reads_the_bounded_summary(run):
    """`ascendprof report` on the many-step output: the run's facts give the number of steps
    (not the 20 step ids summary.json holds as if they were all)."""
    _, out, _ = run
    p = subprocess.run([sys.executable, "-m", "ascendprof", "report", str(out)],
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr
    page = (out / "report.html").read_text()
    assert f"{N:,}: 1, 2, 3, 4, 5, 6, 7, 8, 9, 10 … {N}" in page
