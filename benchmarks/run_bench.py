#!/usr/bin/env python3
"""`make bench`: ascendprof against msprof-analyze on generated clusters; figures to RESULTS.md.

For each cluster size (default 16, 64, 256 ranks, ~1000 communication ops per rank, Qwen3
template) it generates the cluster with make_cluster.py (reused when the same arguments built it
before), then times, each in a fresh child process:

* ``ascendprof analyse`` cold (empty cache), warm (same output directory, cache filled: an
  unchanged run restores its outputs) and warm with the per-rank entries only (the whole-run
  entry removed: no rank parsed again, the cluster step and every output recomputed);
* ``msprof-analyze cluster -m all`` when installed ($MSPROF_ANALYZE, PATH, /work/refvenv/bin).

Peak RSS is reported two ways: the largest single process (``ru_maxrss`` of the children, via a
small wrapper process per run) and the sum over the whole process tree, sampled every 20 ms
from /proc (both tools use worker processes). One LLM-size rank (torch_npu template, 200k
kernel rows, ~300 MB trace_view.json) gives parse throughput and working memory of
kernel_details.csv and trace_view.json with ascendprof's own readers (trace_view.json also on a
quarter-size rank, and as a parse alone, to show how memory grows with file size), and both
tools' end-to-end figures. Start-up of
``ascendprof --help`` and ``ascendprof scan`` is the best of 5 runs. The package is byte-compiled
first, as an installed one is.

``analyse`` runs with its defaults, page included, as users run it (``--no-page`` gives the
``--no-html`` figures of entries before 2026-11-27); the HTML report of the largest cluster is
also measured on its own: ``ascendprof report`` of that analysis (wall time, peak RSS, page
size; the page must stay under 5 MB at 256 ranks). ``--html-only`` runs just that measurement
(generating and analysing the largest cluster first when needed) and the page cost below.

Memory flat in ranks: clusters of 256, 1024 and 4096 ranks of 100 ops and 100 kernels each
(``--flat-sizes``), one cold run each. ``--hostile`` adds one rank with a ~1 GB
communication.json, one 1.7 GB rank analysed with ``--timeline`` and two ranks of 10^6 steps.
The run ends with the targets table: each target, the figure this run measured and whether it
is met (``--same-as COMMIT`` adds whether the largest cluster's outputs equal COMMIT's).

The page cost: ``analyse --no-cache`` of the sample and of the 256-rank cluster with the page
and without (``--html`` / ``--no-html``), best of 3 by CPU seconds: what the page adds.

Before each cold run the mean cost of creating one file in its output directory is probed
and printed beside it (:func:`file_create_ms`): this machine's disk makes that cost drift.

Generated data goes to benchmarks/out/ (gitignored) unless --work is given. Results are printed
and appended to benchmarks/RESULTS.md with the machine description.
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RESULTS = HERE / "RESULTS.md"

_WRAP = r"""
import resource, subprocess, sys, json
rc = subprocess.call(sys.argv[2:], stdout=subprocess.DEVNULL, stderr=open(sys.argv[1], "w"))
ru = resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps({"rc": rc, "maxrss_kb": ru.ru_maxrss, "cpu_s": ru.ru_utime + ru.ru_stime}))
"""


def find_msprof_analyze() -> str | None:
    for cand in (os.environ.get("MSPROF_ANALYZE"), shutil.which("msprof-analyze"),
                 "/work/refvenv/bin/msprof-analyze"):
        if cand and os.path.isfile(cand) and os.access(cand, os.X_OK):
            return cand
    return None


def ascendprof_cmd() -> list[str]:
    exe = Path(sys.executable).parent / "ascendprof"
    return [str(exe)] if exe.is_file() else [sys.executable, "-m", "ascendprof"]


def _tree_rss_kb(root_pid: int) -> int:
    """Sum of VmRSS over root_pid and all its descendants (from /proc)."""
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat") as f:
                stat = f.read()
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{entry.name}/statm") as f:
                pages = int(f.read().split()[1])
        except (OSError, ValueError, IndexError):
            continue
        pid = int(entry.name)
        children.setdefault(ppid, []).append(pid)
        rss[pid] = pages * (os.sysconf("SC_PAGE_SIZE") // 1024)
    total, todo = 0, [root_pid]
    while todo:
        p = todo.pop()
        total += rss.get(p, 0)
        todo.extend(children.get(p, []))
    return total


def measure(cmd: list[str], log: Path, env: dict | None = None) -> dict:
    """Run ``cmd`` in a wrapper process; wall seconds, largest-process and tree peak RSS (MB)."""
    log.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    p = subprocess.Popen([sys.executable, "-c", _WRAP, str(log), *cmd], stdout=subprocess.PIPE,
                         env=env)
    peak_tree = 0
    stop = threading.Event()

    def sample():
        nonlocal peak_tree
        while not stop.is_set():
            peak_tree = max(peak_tree, _tree_rss_kb(p.pid))
            stop.wait(0.02)

    th = threading.Thread(target=sample, daemon=True)
    th.start()
    out, _ = p.communicate()
    wall = time.perf_counter() - t0
    stop.set()
    th.join()
    info = json.loads(out.decode().strip().splitlines()[-1])
    if info["rc"] != 0:
        print(f"  ! {' '.join(cmd[:3])} … exited {info['rc']} (log: {log})", file=sys.stderr)
    return {"wall_s": wall, "rss_mb": info["maxrss_kb"] / 1024, "tree_rss_mb": peak_tree / 1024,
            "rc": info["rc"], "cpu_s": info.get("cpu_s"), "load": os.getloadavg()[0]}


def generate(n: int, out: Path, extra: list[str]) -> Path:
    args = [str(n), str(out), *extra]
    manifest = out / "make_cluster.json"
    want = " ".join(args)
    stamp = out / ".args"
    if manifest.is_file() and stamp.is_file() and stamp.read_text() == want:
        return out
    t0 = time.perf_counter()
    subprocess.run([sys.executable, str(HERE / "make_cluster.py"), *args, "--force"], check=True)
    stamp.write_text(want)
    print(f"  generated {out.name} in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    return out


def many_steps(base: Path, out: Path, n: int) -> Path:
    """A copy of the generated collection ``base`` whose every step_trace_time.csv repeats its
    first row as steps 1..n (a hostile size: ~120 MB a rank at 10^6 steps)."""
    stamp = out / ".args"
    if stamp.is_file() and stamp.read_text() == f"{base} {n}":
        return out
    shutil.rmtree(out, ignore_errors=True)
    shutil.copytree(base, out)
    for st in out.rglob("step_trace_time.csv"):
        head, first = st.read_text(encoding="utf-8").splitlines()[:2]
        cells = next(csv.reader([first]))
        at = next(csv.reader([head])).index("Step")
        with open(st, "w", newline="", encoding="utf-8") as f:
            f.write(head + "\n")
            w = csv.writer(f, lineterminator="\n")
            for step in range(1, n + 1):
                cells[at] = str(step)
                w.writerow(cells)
    stamp.write_text(f"{base} {n}")
    return out


def du_mb(path: Path) -> float:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) / 1e6


def file_create_ms(where: Path, n: int = 200) -> float:
    """Mean milliseconds to create one empty file in a new directory under ``where``.

    A cold ``analyse`` creates about eleven files and directories per rank (cache entry and
    tables/), and on this VM one creation has cost anything from 0.02 to 0.9 ms, changing from
    minute to minute and from directory to directory: at 256 ranks that alone moves the cold
    time by up to ~1 s. The figure is printed beside each cold run so that its share can be
    told apart from ascendprof's own work."""
    d = Path(tempfile.mkdtemp(prefix=".create-probe-", dir=where))
    times = []
    try:
        for i in range(n):
            t0 = time.perf_counter()
            os.close(os.open(d / str(i), os.O_CREAT | os.O_WRONLY | os.O_EXCL, 0o644))
            times.append(time.perf_counter() - t0)
    finally:
        shutil.rmtree(d, ignore_errors=True)
    return statistics.fmean(times) * 1e3


def run_cluster(name: str, data: Path, work: Path, ref: str | None, *,
                warm: bool = True, extra: tuple = (), page: bool = False,
                key: str | None = None) -> dict:
    ap_out = work / f"{name}.ascendprof"
    shutil.rmtree(ap_out, ignore_errors=True)
    env = dict(os.environ)
    env.pop("ASCENDPROF_CACHE", None)
    cmd = ascendprof_cmd() + ["analyse", str(data), "-o", str(ap_out), "-q",
                              *([] if page else ["--no-html"]), *extra]
    row = {"name": name, "input_mb": du_mb(data), "key": key, "page": page}
    # probed where the cold run's cache and tables/ will be created, just before it
    ap_out.mkdir(parents=True)
    row["create_ms"] = file_create_ms(ap_out)
    row["cold"] = measure(cmd, work / f"{name}.ascendprof.cold.log", env)
    if not warm:  # the size targets: one cold run, no peer
        row["warm"] = row["warm_ranks"] = row["nocache"] = row["ref"] = None
        return row
    row["warm"] = measure(cmd, work / f"{name}.ascendprof.warm.log", env)
    # the same again without the whole-run entry: every rank from its cache entry, but the
    # cluster step and all outputs recomputed (what a re-run with other thresholds costs)
    for entry in (ap_out / ".ascendprof-cache").glob("run-*"):
        shutil.rmtree(entry)
    row["warm_ranks"] = measure(cmd, work / f"{name}.ascendprof.warm-ranks.log", env)
    row["nocache"] = None
    if ref:
        ma_out = work / f"{name}.msprof"
        shutil.rmtree(ma_out, ignore_errors=True)
        row["ref"] = measure([ref, "cluster", "-d", str(data), "-m", "all", "-o", str(ma_out)],
                             work / f"{name}.msprof.log")
    else:
        row["ref"] = None
    return row


_THROUGHPUT = r"""
import json, resource, sys, time
from pathlib import Path
from ascendprof.readers.ascend_output import read_kernel_details
from ascendprof.readers.trace_view import iter_event_blocks, read_trace_view
import pyarrow.csv, pyarrow.compute, numpy, pandas  # start-up, not parsing (pyarrow pulls pandas in on first use)

def rss_mb():
    with open("/proc/self/status") as f:
        return next(int(l.split()[1]) for l in f if l.startswith("VmRSS:")) / 1024

what, p = sys.argv[1], Path(sys.argv[2])
before = rss_mb()
t0 = time.perf_counter()
table_mb = None
if what == "stream":  # the parse alone: every event decoded, nothing kept
    for _ in iter_event_blocks(p):
        pass
else:
    out = (read_kernel_details if what == "kernel_details" else read_trace_view)(p, 0)
    tables = out.values() if isinstance(out, dict) else [out]
    table_mb = sum(t.nbytes for t in tables) / 1e6
s = time.perf_counter() - t0
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps({"mb": p.stat().st_size / 1e6, "s": s, "mb_s": p.stat().st_size / 1e6 / s,
                  "peak_rss_mb": peak, "work_mb": peak - before, "table_mb": table_mb}))
"""


def _measure_reader(what: str, path: Path, runs: int = 3) -> dict:
    """One reader on one file, each run in a fresh process; the fastest of ``runs`` (this
    machine's speed drifts): seconds, MB/s, peak RSS and working memory (peak RSS minus RSS
    after the imports), MB of the tables it returns."""
    best: dict = {}
    for _ in range(runs):
        r = subprocess.run([sys.executable, "-c", _THROUGHPUT, what, str(path)],
                           capture_output=True, text=True)
        if r.returncode:
            print(r.stderr[-2000:], file=sys.stderr)
            return {}
        got = json.loads(r.stdout.strip().splitlines()[-1])
        if not best or got["s"] < best["s"]:
            best = got
    return best


def throughput(rank_dir: Path, small_rank_dir: Path | None = None) -> dict:
    """Parse throughput and memory of ascendprof's readers on the LLM-size rank; trace_view.json
    also on a smaller rank of the same template, so memory can be compared across file sizes."""
    out = {}
    d = rank_dir / "ASCEND_PROFILER_OUTPUT"
    out["kernel_details.csv"] = _measure_reader("kernel_details", d / "kernel_details.csv")
    for label, what in (("trace_view.json", "trace_view"),
                        ("trace_view.json, parse only", "stream")):
        for rd in (small_rank_dir, rank_dir):
            if rd is not None:
                out.setdefault(label, []).append(
                    _measure_reader(what, rd / "ASCEND_PROFILER_OUTPUT" / "trace_view.json"))
    return out


def startup(data: Path) -> dict:
    out = {"ranks": sum(1 for p in data.iterdir() if p.name.endswith("_ascend_pt"))}
    for label, args in (("--help", ["--help"]), ("scan", ["scan", str(data)])):
        best = None
        for _ in range(5):
            t0 = time.perf_counter()
            subprocess.run(ascendprof_cmd() + args, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
            s = time.perf_counter() - t0
            best = s if best is None else min(best, s)
        out[label] = best
    return out


def timeline_export(data: Path, work: Path) -> dict:
    """`ascendprof timeline` of the largest cluster in both formats: wall time, peak RSS and
    file size (MB)."""
    out = {}
    for fmt, name in (("chrome", "cluster_trace.json"), ("perfetto", "cluster_trace.pftrace")):
        path = work / name
        m = measure(ascendprof_cmd() + ["timeline", str(data), "-o", str(path), "--format", fmt,
                                        "-q"], work / f"timeline-{fmt}.log")
        m["size_mb"] = path.stat().st_size / 1e6 if path.exists() else None
        out[fmt] = m
    return out


def html_report(data: Path, work: Path, name: str) -> dict:
    """`ascendprof report` of the analysis of ``data`` (analysed first, without the page, when
    ``work/<name>.ascendprof`` holds none): wall time, peak RSS and page size (MB)."""
    out = work / f"{name}.ascendprof"
    if not (out / "summary.json").is_file():
        subprocess.run(ascendprof_cmd() + ["analyse", str(data), "-o", str(out), "-q",
                                           "--no-html"], check=True, stdout=subprocess.DEVNULL)
    page = out / "report.html"
    m = measure(ascendprof_cmd() + ["report", str(out)], work / "report-html.log")
    m["size_mb"] = page.stat().st_size / 1e6 if page.exists() else None
    m["ranks"] = name
    return m


def page_cost(data: Path, work: Path, name: str, runs: int = 3) -> dict:
    """What the page costs: ``analyse --no-cache`` of ``data`` with the page (``--html``) and
    without (``--no-html``), best of ``runs`` each by CPU seconds (the wall time on a shared
    machine says more about the other processes); the page's size."""
    best = {}
    for flag in ("--no-html", "--html"):
        out = work / f"page-{name.replace(' ', '_')}{flag}"
        ms = [measure(ascendprof_cmd() + ["analyse", str(data), "-o", str(out), "-q",
                                          "--no-cache", flag], work / "page-cost.log")
              for _ in range(runs)]
        best[flag] = min(ms, key=lambda m: m.get("cpu_s") or m["wall_s"])
        if flag == "--html":
            page = out / "report.html"
            best["size_mb"] = page.stat().st_size / 1e6 if page.exists() else None
    off, on = best["--no-html"], best["--html"]
    return {"name": name, "cpu_off": off.get("cpu_s"), "cpu_on": on.get("cpu_s"),
            "wall_off": off["wall_s"], "wall_on": on["wall_s"], "size_mb": best["size_mb"],
            "load": on["load"]}


def page_cost_line(c: dict) -> str:
    extra = ("-" if c["cpu_on"] is None or c["cpu_off"] is None
             else f"+{c['cpu_on'] - c['cpu_off']:.2f}")
    size = "-" if c["size_mb"] is None else f"{c['size_mb']:.2f} MB"
    return (f"| {c['name']} | {c['cpu_off']:.2f} | {c['cpu_on']:.2f} | {extra} | "
            f"{c['wall_off']:.1f} / {c['wall_on']:.1f} | {size} | {c['load']:.1f} |")


PAGE_COST_HEAD = ("| page cost: `analyse --no-cache` | CPU s --no-html | CPU s with the page | "
                  "page costs (CPU s) | wall s (off / on) | page size | load |\n"
                  "|---|---|---|---|---|---|---|")


def html_line(h: dict) -> str:
    size = "no page" if h.get("size_mb") is None else f"{h['size_mb']:.2f} MB"
    return (f"HTML report of the {h['ranks']} cluster (`ascendprof report`, the page "
            f"`analyse` writes by default): {size} in {h['wall_s']:.1f} s, peak RSS "
            f"{h['rss_mb']:.0f} MB" + ("" if h["rc"] == 0 else f" (exit {h['rc']})"))


_DASK_CLUSTER = r"""
import sys
import distributed
# worker processes on this machine, loopback only; the address on stdout, down when stdin closes
with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, protocol="tcp",
                              host="127.0.0.1", dashboard_address=None) as lc:
    print(lc.scheduler_address, flush=True)
    sys.stdin.read()
"""


def dask_client(name: str, data: Path, work: Path) -> dict:
    """``analyse`` (defaults, page included) of ``data`` on a Dask cluster of two worker
    processes on this machine, then on the local executor: the client's peak RSS (the Dask
    workers are not its children: the largest process measured is the client) and whether every
    output file is the same (summary.json's own output paths aside)."""
    env = dict(os.environ)
    env.pop("ASCENDPROF_CACHE", None)
    outs = {k: work / f"{name}.{k}.ascendprof" for k in ("dask", "local")}
    for o in outs.values():
        shutil.rmtree(o, ignore_errors=True)
    base = ascendprof_cmd() + ["analyse", str(data), "-q", "--no-cache"]
    lc = subprocess.Popen([sys.executable, "-c", _DASK_CLUSTER], stdin=subprocess.PIPE,
                          stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                          cwd=work)
    try:
        address = lc.stdout.readline().strip()
        row = {"name": name, "dask": measure(base + ["-o", str(outs["dask"]), "--executor", "dask",
                                                     "--scheduler", address],
                                             work / f"{name}.dask.log", env)}
    finally:
        lc.stdin.close()
        lc.wait(timeout=120)
    row["local"] = measure(base + ["-o", str(outs["local"])], work / f"{name}.local.log", env)
    differ = []
    for f in sorted(p.relative_to(outs["local"]) for p in outs["local"].rglob("*") if p.is_file()):
        a, b = outs["local"] / f, outs["dask"] / f
        if f.name.startswith("."):  # the run's lock and cache, not outputs
            continue
        if f.name == "summary.json":  # lists the output paths, which differ by design
            same = (a.read_text().replace(str(outs["local"]), "OUT")
                    == b.read_text().replace(str(outs["dask"]), "OUT")) if b.is_file() else False
        else:
            same = b.is_file() and a.read_bytes() == b.read_bytes()
        if not same:
            differ.append(str(f))
    row["differ"] = differ
    return row


def dask_line(r: dict) -> str:
    d, lo = r["dask"], r["local"]
    same = "yes" if not r["differ"] else f"no: {', '.join(r['differ'][:5])}"
    met = "met" if d["rss_mb"] <= 300 and d["rc"] == 0 else "**not met**"
    return (f"| {r['name']} | {d['rss_mb']:.0f}" + ("" if d["rc"] == 0 else f" (exit {d['rc']})")
            + f" | {d['wall_s']:.1f} | {lo['rss_mb']:.0f} | {same} | {met} | {d['load']:.1f} |")


DASK_HEAD = ("| on Dask (2 worker processes, `analyse` defaults) | client peak RSS MB | wall s "
             "| local run, largest process MB | outputs identical | client <= 300 MB | load |\n"
             "|---|---|---|---|---|---|---|")


def machine() -> str:
    cpu = platform.processor() or "unknown CPU"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = "?"
    try:
        for line in open("/proc/meminfo"):
            if line.startswith("MemTotal"):
                mem = f"{int(line.split()[1]) / 1024 / 1024:.1f} GiB"
    except OSError:
        pass
    return (f"{platform.system()} {platform.release()}, {cpu}, {os.cpu_count()} cores, {mem} RAM, "
            f"Python {platform.python_version()}")


def _ratio(a, b):
    return f"{a / b:.2f}" if a and b else "–"


def report(rows: list[dict], tp: dict, st: dict, ref: str | None, tl: dict | None = None,
           html: dict | None = None) -> str:
    from ascendprof import __version__

    ref_v = "not installed"
    if ref:
        ref_v = f"msprof-analyze ({ref})"
    lines = [f"## {dt.datetime.now().strftime('%Y-%m-%d %H:%M')} — ascendprof {__version__} vs {ref_v}",
             "", f"Machine: {machine()}", "",
             "| cluster | input MB | ascendprof cold s | CPU s | MB/s per CPU s | warm s "
             "| cold/warm | warm, ranks only s | peak RSS MB (largest proc / tree) "
             "| msprof-analyze s | CPU s | peak RSS MB (largest / tree) | time ratio ap/ma "
             "| CPU ratio ap/ma | load | file create ms |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        c, w, m = r["cold"], r["warm"], r["ref"]
        if w is None:  # a size target: cold only
            lines.append(
                f"| {r['name']} | {r['input_mb']:.0f} | {c['wall_s']:.1f}"
                + ("" if c["rc"] == 0 else f" (exit {c['rc']})")
                + f" | {c['cpu_s']:.1f} | {r['input_mb'] / c['cpu_s']:.0f} | – | – | – | "
                  f"{c['rss_mb']:.0f} / {c['tree_rss_mb']:.0f} | – | – | – | – | – | "
                  f"{c['load']:.1f} | – |")
            continue
        ma_t = f"{m['wall_s']:.1f}" + ("" if m["rc"] == 0 else f" (exit {m['rc']})") if m else "–"
        ma_rss = f"{m['rss_mb']:.0f} / {m['tree_rss_mb']:.0f}" if m else "–"
        lines.append(
            f"| {r['name']} | {r['input_mb']:.0f} | {c['wall_s']:.1f}"
            + ("" if c["rc"] == 0 else f" (exit {c['rc']})")
            + f" | {c['cpu_s']:.1f} | {r['input_mb'] / c['cpu_s']:.0f}"
            + f" | {w['wall_s']:.1f} | {_ratio(c['wall_s'], w['wall_s'])} | "
              + (f"{r['warm_ranks']['wall_s']:.1f}" if r.get("warm_ranks") else "–") + " | "
              f"{c['rss_mb']:.0f} / {c['tree_rss_mb']:.0f} | {ma_t} | "
              + (f"{m['cpu_s']:.1f}" if m else "–") + f" | {ma_rss} | "
              f"{_ratio(c['wall_s'], m['wall_s'] if m else None)} | "
              f"{_ratio(c['cpu_s'], m['cpu_s'] if m else None)} | {c['load']:.1f} | "
              + (f"{r['create_ms']:.2f}" if r.get("create_ms") is not None else "–") + " |")
    lines += ["", "CPU s: user + system seconds of the process and its children (the pool's "
                  "workers); MB/s per CPU s: input MB over the cold run's CPU seconds (the "
                  "per-core throughput); load: the 1-minute load average when the cold run "
                  "ended (above ~0.3 another job shared the 2 cores: compare CPU seconds, not "
                  "wall time)."]
    lines += ["", "File create ms: mean time to create one empty file where the cold run "
                  "writes, just before it (a cold run creates ~11 files and directories per "
                  "rank; this disk's cost for one drifts between ~0.02 and ~0.9 ms)."]
    if tp:
        lines += ["", "Parse throughput on the LLM-size rank (ascendprof readers, fastest of 3 runs "
                      "each in a fresh process; working memory = peak RSS minus RSS after the imports; "
                      "trace_view.json also on a smaller rank, to compare memory across sizes):",
                  ""]
        for name, runs in tp.items():
            for v in runs if isinstance(runs, list) else [runs]:
                if not v:
                    continue
                kept = f", tables {v['table_mb']:.0f} MB" if v.get("table_mb") is not None else ""
                lines.append(f"- {name}: {v['mb']:.0f} MB in {v['s']:.1f} s = "
                             f"**{v['mb_s']:.0f} MB/s**, working memory {v['work_mb']:.0f} MB"
                             f"{kept} (peak RSS {v['peak_rss_mb']:.0f} MB)")
    if tl:
        lines += ["", "Merged cluster timeline of the largest cluster (`ascendprof timeline`): "
                  + "; ".join(f"{fmt} {v['size_mb']:.0f} MB in {v['wall_s']:.1f} s, peak RSS "
                              f"{v['rss_mb']:.0f} MB" for fmt, v in tl.items()
                              if v.get("size_mb") is not None)]
    if html:
        lines += ["", html_line(html)]
    if st:
        lines += ["", f"Start-up (best of 5): `ascendprof --help` {st['--help']:.3f} s, "
                      f"`ascendprof scan` ({st['ranks']} ranks) {st['scan']:.3f} s"]
    lines.append("")
    return "\n".join(lines)


def same_outputs(commit: str, data: Path, n: int) -> dict:
    """tools/same_outputs.py --ref ``commit`` on ``data``: whether every output file of the
    working tree's ``analyse`` equals the one ``commit``'s code writes (page and summary.json
    with times, version and paths masked)."""
    r = subprocess.run([sys.executable, str(ROOT / "tools" / "same_outputs.py"), "--ref", commit,
                        str(data)], capture_output=True, text=True, cwd=ROOT)
    last = (r.stdout.strip().splitlines() or [""])[-1]
    return {"commit": commit, "ranks": n, "same": r.returncode == 0, "summary": last}


_MET = {True: "yes", False: "**no**", None: "–"}


def targets(rows: list[dict], dask_rows: list[dict], same: dict | None) -> str:
    """The speed and memory targets as a table (target, measured, met) from this run's rows.

    CPU seconds are the robust figure (other jobs inflate wall time): the wall ratio is only
    judged when the 1-minute load was under 0.5 at the end of the cold run."""
    by = {r.get("key"): r for r in rows if r.get("key")}
    out = ["| target | measured | met |", "|---|---|---|"]

    def ok(rc_rows, cond):
        return None if any(x is None or x["rc"] != 0 for x in rc_rows) else cond

    r = by.get("ranks256")
    if r and r["ref"]:
        c, m = r["cold"], r["ref"]
        page = "page included" if r["page"] else "--no-html"
        out.append(f"| 256 ranks x 1000 ops ({page}): CPU ≤ 0.10 of `msprof-analyze cluster -m "
                   f"all` | {c['cpu_s'] / m['cpu_s']:.2f} ({c['cpu_s']:.1f} / {m['cpu_s']:.1f} "
                   f"CPU s) | {_MET[ok([c, m], c['cpu_s'] <= 0.10 * m['cpu_s'])]} |")
        quiet = c["load"] < 0.5
        out.append(f"| 256 ranks x 1000 ops: wall ≤ 0.10 of the peer's on an idle machine | "
                   f"{c['wall_s'] / m['wall_s']:.2f} ({c['wall_s']:.1f} / {m['wall_s']:.1f} s, "
                   f"load {c['load']:.1f}) | "
                   + (_MET[ok([c, m], c['wall_s'] <= 0.10 * m['wall_s'])] if quiet
                      else "– (machine not idle)") + " |")
    if r:
        c = r["cold"]
        out.append(f"| 256 ranks x 1000 ops: ≥ 100 MB of input per CPU second | "
                   f"{r['input_mb'] / c['cpu_s']:.0f} MB/s ({r['input_mb']:.0f} MB / "
                   f"{c['cpu_s']:.1f} CPU s) | "
                   f"{_MET[ok([c], r['input_mb'] / c['cpu_s'] >= 100)]} |")
    for k in sorted((k for k in by if k.startswith("flat")), key=lambda k: int(k[4:])):
        c = by[k]["cold"]
        out.append(f"| {k[4:]} ranks x 100 ops: largest process ≤ 300 MB | {c['rss_mb']:.0f} MB"
                   f" | {_MET[ok([c], c['rss_mb'] <= 300)]} |")
    for key, what in (("big_comm", "one rank's {gb:.2f} GB communication.json"),
                      ("big_kernels", "a {gb:.2f} GB rank with `--timeline`")):
        r = by.get(key)
        if r:
            c = r["cold"]
            out.append(f"| {what.format(gb=r['input_mb'] / 1e3)}: largest process ≤ 1 GB | "
                       f"{c['rss_mb'] / 1024:.2f} GB | {_MET[ok([c], c['rss_mb'] <= 1024)]} |")
    r = by.get("llm")
    if r and r["ref"]:
        c, m = r["cold"], r["ref"]
        out.append(f"| LLM-size rank: largest process ≤ 2 × the peer's | {c['rss_mb']:.0f} MB "
                   f"(peer {m['rss_mb']:.0f} MB) | "
                   f"{_MET[ok([c, m], c['rss_mb'] <= 2 * m['rss_mb'])]} |")
    for d in dask_rows:
        out.append(f"| Dask, {d['name']}: the same outputs as the local run | "
                   + ("identical" if not d["differ"] else f"{len(d['differ'])} files differ")
                   + f" | {_MET[ok([d['dask'], d['local']], not d['differ'])]} |")
        out.append(f"| Dask, {d['name']}: the client ≤ 300 MB | {d['dask']['rss_mb']:.0f} MB | "
                   f"{_MET[ok([d['dask']], d['dask']['rss_mb'] <= 300)]} |")
    if same:
        out.append(f"| {same['ranks']} ranks: outputs identical to {same['commit']}'s | "
                   f"{same['summary']} | {_MET[same['same']]} |")
    return "\n".join(out)


def compile_package() -> None:
    """Byte-compile ascendprof as pip does when it installs a package (msprof-analyze's is), so
    that a run does not compile its modules again each time when $PYTHONDONTWRITEBYTECODE is
    set (an editable install otherwise writes the .pyc files on its first run)."""
    import compileall

    import ascendprof

    compileall.compile_dir(str(Path(ascendprof.__file__).parent), quiet=1)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="ascendprof vs msprof-analyze benchmark")
    ap.add_argument("--sizes", default="16,64,256", help="cluster sizes (ranks)")
    ap.add_argument("--comm-ops", type=int, default=1000, help="communication ops per rank")
    ap.add_argument("--llm-kernels", type=int, default=200_000,
                    help="kernel rows of the LLM-size rank (0 skips it)")
    ap.add_argument("--work", type=Path, default=HERE / "out", help="generated data and outputs")
    ap.add_argument("--no-reference", action="store_true", help="do not run msprof-analyze")
    ap.add_argument("--no-append", action="store_true", help="print only, leave RESULTS.md")
    ap.add_argument("--big-sizes", default="",
                    help="cluster sizes of --comm-ops ops per rank run once, cold, ascendprof "
                         "only")
    ap.add_argument("--flat-sizes", default="256,1024,4096",
                    help="cluster sizes of 100 ops and 100 kernels per rank run once, cold, "
                         "ascendprof only, page included (memory flat in ranks)")
    ap.add_argument("--no-page", action="store_true",
                    help="analyse the clusters with --no-html (as entries before 2026-11-27 did)")
    ap.add_argument("--same-as", metavar="COMMIT",
                    help="also check that the largest --sizes cluster's outputs are identical to "
                         "those of COMMIT's code (tools/same_outputs.py)")
    ap.add_argument("--db-sizes", default="256",
                    help="clusters of db exports (torch_npu-db-level1 template), both tools")
    ap.add_argument("--dask-sizes", default="1024",
                    help="cluster sizes to analyse on a Dask cluster of 2 local worker processes "
                         "(client memory, outputs compared with the local run); needs "
                         "dask[distributed]: skipped without it")
    ap.add_argument("--mesh-sizes", default="",
                    help="clusters whose ranks list a matrix link to every member of their group "
                         "(all-to-all / mesh layout, TP8 x DP; make_cluster.py --matrix mesh), "
                         "both tools")
    ap.add_argument("--hostile", action="store_true",
                    help="also one rank with a ~1 GB communication.json (--hostile-comm-ops), "
                         "one with a large kernel_details.csv + trace_view.json (--timeline) "
                         "and two ranks of 10^6 steps")
    ap.add_argument("--hostile-comm-ops", type=int, default=1_350_000,
                    help="ops in the communication.json of the hostile rank (~0.78 kB each: "
                         "1.35 M is ~1.05 GB)")
    ap.add_argument("--hostile-kernels", type=int, default=1_000_000,
                    help="kernel rows of the large-kernel rank (~0.35 kB each in "
                         "kernel_details.csv, ~1.5 kB in trace_view.json)")
    ap.add_argument("--hostile-steps", type=int, default=1_000_000,
                    help="steps in each step_trace_time.csv of the 2-rank many-steps collection")
    ap.add_argument("--html-only", action="store_true",
                    help="only the HTML report of the largest cluster (size, build time)")
    a = ap.parse_args(argv)
    ref = None if a.no_reference else find_msprof_analyze()
    compile_package()
    work = a.work
    work.mkdir(parents=True, exist_ok=True)
    rows = []
    sizes = [int(x) for x in a.sizes.split(",") if x]
    if a.html_only:
        n = max(sizes)
        data = generate(n, work / f"cluster{n}", ["--comm-ops-per-rank", str(a.comm_ops)])
        h = html_report(data, work, f"{n} ranks x {a.comm_ops} ops")
        costs = [page_cost(HERE.parent / "fixtures" / "qwen3-4rank-pp2dp2", work,
                           "sample (4 ranks)"),
                 page_cost(generate(256, work / "cluster256", ["--comm-ops-per-rank",
                                                               str(a.comm_ops)]),
                           work, f"256 ranks x {a.comm_ops} ops")]
        text = (f"## {dt.datetime.now().strftime('%Y-%m-%d %H:%M')} — HTML report only\n\n"
                f"Machine: {machine()}\n\n{html_line(h)}\n\n{PAGE_COST_HEAD}\n"
                + "\n".join(page_cost_line(c) for c in costs) + "\n")
        print(text)
        if not a.no_append:
            with open(RESULTS, "a", encoding="utf-8") as f:
                f.write(text + "\n")
        return 0 if h["rc"] == 0 else 1
    for n in sizes:
        print(f"cluster {n} ranks …", file=sys.stderr)
        data = generate(n, work / f"cluster{n}", ["--comm-ops-per-rank", str(a.comm_ops)])
        rows.append(run_cluster(f"{n} ranks x {a.comm_ops} ops", data, work, ref,
                                page=not a.no_page, key=f"ranks{n}"))
        print(json.dumps(rows[-1]), file=sys.stderr)
    for n in [int(x) for x in a.flat_sizes.split(",") if x]:
        print(f"cluster {n} ranks x 100 ops (cold only) …", file=sys.stderr)
        data = generate(n, work / f"cluster{n}x100", ["--comm-ops-per-rank", "100",
                                                      "--kernels-per-rank", "100"])
        rows.append(run_cluster(f"{n} ranks x 100 ops (cold only, page included)", data, work,
                                None, warm=False, page=True, key=f"flat{n}"))
        print(json.dumps(rows[-1]), file=sys.stderr)
    for n in [int(x) for x in a.db_sizes.split(",") if x]:
        print(f"db cluster {n} ranks …", file=sys.stderr)
        data = generate(n, work / f"db{n}", ["--template", "torch_npu-db-level1"])
        rows.append(run_cluster(f"{n} ranks db exports Level1", data, work, ref,
                                page=not a.no_page))  # no comma:
        # msprof-analyze refuses paths with "," and skips part of its work
        print(json.dumps(rows[-1]), file=sys.stderr)
    for n in [int(x) for x in a.mesh_sizes.split(",") if x]:
        print(f"mesh cluster {n} ranks …", file=sys.stderr)
        data = generate(n, work / f"mesh{n}", ["--comm-ops-per-rank", str(a.comm_ops),
                                               "--matrix", "mesh", "--tp", "8", "--pp", "1"])
        rows.append(run_cluster(f"{n} ranks x {a.comm_ops} ops, mesh matrix (TP8 DP{n // 8})",
                                data, work, ref))
        print(json.dumps(rows[-1]), file=sys.stderr)
    for n in [int(x) for x in a.big_sizes.split(",") if x]:
        print(f"cluster {n} ranks (cold only) …", file=sys.stderr)
        data = generate(n, work / f"cluster{n}", ["--comm-ops-per-rank", str(a.comm_ops)])
        rows.append(run_cluster(f"{n} ranks x {a.comm_ops} ops (cold only)", data, work, None,
                                warm=False))
        print(json.dumps(rows[-1]), file=sys.stderr)
    if a.hostile:
        print("hostile sizes …", file=sys.stderr)
        data = generate(1, work / "hostile_comm", ["--comm-ops-per-rank",
                                                   str(a.hostile_comm_ops)])
        rows.append(run_cluster(f"1 rank, communication.json of {a.hostile_comm_ops:,} ops "
                                f"(defaults: page included)", data, work, None, warm=False,
                                page=True, key="big_comm"))
        data = generate(1, work / "hostile_kernels",
                        ["--template", "torch_npu-level2", "--kernels-per-rank",
                         str(a.hostile_kernels)])
        rows.append(run_cluster(f"1 rank, {a.hostile_kernels // 1000}k kernels (kernel_details"
                                f" + trace_view.json, --timeline)", data, work, None,
                                warm=False, extra=("--timeline",), page=True,
                                key="big_kernels"))
        data = many_steps(generate(2, work / "hostile_steps_base", []), work / "hostile_steps",
                          a.hostile_steps)
        rows.append(run_cluster(f"2 ranks, step_trace_time.csv of {a.hostile_steps:,} steps "
                                f"each (defaults: page included)", data, work, None,
                                warm=False, page=True))
        print(json.dumps(rows[-3:]), file=sys.stderr)
    tp = {}
    if a.llm_kernels:
        print("LLM-size rank …", file=sys.stderr)
        data = generate(1, work / "llm1", ["--template", "torch_npu-level2",
                                           "--kernels-per-rank", str(a.llm_kernels)])
        small = generate(1, work / "llm1q", ["--template", "torch_npu-level2",
                                             "--kernels-per-rank", str(a.llm_kernels // 4)])
        tp = throughput(data / "rank_0_ascend_pt", small / "rank_0_ascend_pt")
        rows.append(run_cluster(f"1 rank, {a.llm_kernels // 1000}k kernels + trace_view", data,
                                work, ref, page=not a.no_page, key="llm"))
        print(json.dumps(rows[-1]), json.dumps(tp), file=sys.stderr)
    st = startup(work / f"cluster{max(sizes)}") if sizes else {}
    tl = timeline_export(work / f"cluster{max(sizes)}", work) if sizes else {}
    html = (html_report(work / f"cluster{max(sizes)}", work,
                        f"{max(sizes)} ranks x {a.comm_ops} ops") if sizes else None)
    text = report(rows, tp, st, ref, tl, html)
    costs = [page_cost(HERE.parent / "fixtures" / "qwen3-4rank-pp2dp2", work, "sample (4 ranks)")]
    if 256 in sizes:
        costs.append(page_cost(work / "cluster256", work, f"256 ranks x {a.comm_ops} ops"))
    text += "\n" + PAGE_COST_HEAD + "\n" + "\n".join(page_cost_line(c) for c in costs) + "\n"
    dask_rows = []
    from importlib.util import find_spec

    for n in [int(x) for x in a.dask_sizes.split(",") if x and find_spec("distributed")]:
        print(f"cluster {n} ranks on Dask …", file=sys.stderr)
        data = generate(n, work / f"cluster{n}x100", ["--comm-ops-per-rank", "100",
                                                      "--kernels-per-rank", "100"])
        dask_rows.append(dask_client(f"{n} ranks x 100 ops", data, work))
    if dask_rows:
        text += "\n" + DASK_HEAD + "\n" + "\n".join(dask_line(r) for r in dask_rows) + "\n"
    same = None
    if a.same_as and sizes:
        same = same_outputs(a.same_as, work / f"cluster{max(sizes)}", max(sizes))
    text += "\n" + targets(rows, dask_rows, same) + "\n"
    print(text)
    if not a.no_append:
        with open(RESULTS, "a", encoding="utf-8") as f:
            if RESULTS.stat().st_size == 0 if RESULTS.exists() else True:
                f.write("# Benchmark results (appended by `make bench`)\n\n"
                        "Generated clusters from benchmarks/make_cluster.py (Qwen3 template, "
                        "TP x PP x DP layout); see benchmarks/run_bench.py for the method.\n\n")
            f.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
