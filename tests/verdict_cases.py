"""The verdict matrix: clusters with one known right diagnosis each, and the runner.

Generated clusters (tests/synth_cluster.py) of six shapes from 8 to 128 ranks, clean, with one
injected problem, or two, plus the real clusters of ../shared/data. For every case the right
diagnosis is stated as the set of (category, global ranks) the warning and critical verdicts
must name - exactly, nothing else (an empty set: no warning at all).

    python tests/verdict_cases.py [--doc docs/verdicts.md] [-k NAME] [--workers N]

runs every case (or those whose name contains NAME), prints case -> expected -> got, and with
``--doc`` rewrites the results table of docs/verdicts.md between its matrix markers
(``make verdict-matrix``). tests/test_verdict_matrix.py runs the same cases under pytest.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import orjson

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import synth_cluster as sc  # noqa: E402
from conftest import analysis_of  # noqa: E402

A = sc.Shape(2, 2, 2)   # 8 ranks, one node
F = sc.Shape(1, 1, 8)   # 8 ranks, data parallel only
B = sc.Shape(1, 4, 4)   # 16 ranks, 4 stages
C = sc.Shape(4, 2, 4)   # 32 ranks
D = sc.Shape(8, 1, 8)   # 64 ranks, TP within a node, DP across nodes
E = sc.Shape(8, 2, 8)   # 128 ranks
G = sc.Shape(8, 2, 4)   # 64 ranks, a node = a tp group of 8
P = sc.Shape(4, 4, 4)   # 64 ranks, 4 stages, tp groups of 4 (two per node)
H = sc.Shape(4, 4, 16)  # 256 ranks
K = sc.Shape(8, 1, 128)  # 1024 ranks
SHAPES = (A, F, B, C, D, E, G, P, H, K)
#: big clusters: one step, few micro-batches (the suite runs on 2 cores)
BIG = {"steps": (8,), "microbatches": 4}


@dataclass
class Case:
    name: str
    what: str  # the injected problem(s), in words
    expected: list  # [(category, [global ranks])]
    shape: sc.Shape | None = None
    spec: dict = field(default_factory=dict)
    real: str | None = None  # path under the shared data (or fixtures/) for real clusters
    #: [(category, evidence path "key.sub", expected value)]: a number the verdict of that
    #: category must state within 10 % (e.g. the injected delay)
    magnitudes: list = field(default_factory=list)
    #: [(category, ranks)] info verdicts that must be present (what the data shows, no warning)
    info: list = field(default_factory=list)

    @property
    def ranks(self) -> str:
        return str(self.shape.n) if self.shape else "-"

    @property
    def layout(self) -> str:
        return self.shape.label() if self.shape else "real"


def _lab(shape: sc.Shape) -> str:
    return f"{shape.tp}x{shape.pp}x{shape.dp}"


def _stage(shape: sc.Shape, s: int) -> list[int]:
    return [r for r in range(shape.n) if shape.coords(r)[2] == s]


def _group(shape: sc.Shape, name: str, index: int) -> list[int]:
    return [g for g in sc.build_groups(shape) if g.name == name][index].ranks


def slow(shape, rank, factor, **kw) -> Case:
    return Case(f"slow-rank-{_lab(shape)}-r{rank}", f"rank {rank} computes x{factor}",
                [("slow_rank", [rank])], shape, {"compute_scale": {rank: factor}, **kw})


def host(shape, rank, ms, **kw) -> Case:
    return Case(f"host-bound-{_lab(shape)}-r{rank}", f"rank {rank}: {ms} ms host gaps per step",
                [("schedule", [rank])], shape, {"host_gap_ms": {rank: ms}, **kw})


def stage(shape, s, factor, **kw) -> Case:
    return Case(f"stage-{_lab(shape)}-s{s}", f"stage {s} computes x{factor}",
                [("stage", _stage(shape, s))], shape, {"stage_scale": {s: factor}, **kw})


def link(shape, a, b, factor, **kw) -> Case:
    return Case(f"slow-link-{_lab(shape)}-{a}to{b}", f"link {a}->{b} at x{factor} bandwidth",
                [("slow_link", sorted({a, b}))], shape, {"link_scale": {(a, b): factor}, **kw})


def group(shape, name, index, factor, **kw) -> Case:
    return Case(f"slow-group-{_lab(shape)}-{name}{index}",
                f"every link of {name} group #{index} at x{factor}",
                [("slow_group", _group(shape, name, index))], shape,
                {"group_scale": {(name, index): factor}, **kw})


def early(shape, rank, ms, how, **kw) -> Case:
    return Case(f"unequal-steps-{_lab(shape)}-r{rank}-{how}",
                f"rank {rank} starts its step {ms} ms early ({how}): longer step, no imbalance",
                [], shape, {"early_start": {rank: (ms, how)}, **kw})


def missing(shape, ranks, **kw) -> Case:
    return Case(f"missing-{_lab(shape)}-{'-'.join(map(str, ranks))}",
                f"ranks {', '.join(map(str, ranks))} not collected",
                [("collection", sorted(ranks))], shape, {"missing": frozenset(ranks), **kw})


def pair(name: str, *cases: Case) -> Case:
    spec: dict = {}
    for c in cases:
        for k, v in c.spec.items():
            if isinstance(v, dict):
                spec.setdefault(k, {}).update(v)
            elif isinstance(v, frozenset):
                spec[k] = spec.get(k, frozenset()) | v
            else:
                spec[k] = v
    return Case(name, " + ".join(c.what for c in cases),
                sorted(e for c in cases for e in c.expected), cases[0].shape, spec)


def clean(shape, noise=0.0, seed=0) -> Case:
    what = f"clean, ±{noise:.0%} jitter" if noise else "clean"
    return Case(f"clean-{_lab(shape)}" + (f"-noise{int(noise * 100)}" if noise else ""), what, [],
                shape, {"noise": noise, "seed": seed})


def node(shape, ranks, factor, label, **kw) -> Case:
    """Ranks of one node / tp group computing x factor: one verdict naming the set."""
    ranks = sorted(ranks)
    excess = 90.0 * (factor - 1)  # Spec.compute_ms per step
    return Case(f"{label}-{_lab(shape)}-r{ranks[0]}-{ranks[-1]}",
                f"{ranks_words(ranks)} compute x{factor}", [("slow_rank", ranks)], shape,
                {"compute_scale": {r: factor for r in ranks}, **kw},
                magnitudes=[("slow_rank", f"excess_ms.{r}", excess) for r in ranks])


def ranks_words(ranks) -> str:
    return f"ranks {ranks[0]}–{ranks[-1]}" if len(ranks) > 2 else \
        f"ranks {', '.join(map(str, ranks))}"


def links(shape, pairs, factor, **kw) -> Case:
    """Physical links (both directions) at x factor: one slow_link verdict per link."""
    scale = {}
    for a, b in pairs:
        scale[(a, b)] = scale[(b, a)] = factor
    return Case(f"slow-links-{_lab(shape)}-" + "-".join(f"{a}and{b}" for a, b in pairs),
                " + ".join(f"link {a}<->{b}" for a, b in pairs) + f" at x{factor} bandwidth",
                [("slow_link", sorted(p)) for p in pairs], shape, {"link_scale": scale, **kw},
                magnitudes=[("slow_link", "bandwidth_ratio", factor)])


def spike(shape, rank, factor, step, **kw) -> Case:
    steps = tuple(range(1, 9))
    return Case(f"spike-{_lab(shape)}-r{rank}-step{step}",
                f"rank {rank} computes x{factor} in step {step} of 8", [("slow_rank", [rank])],
                shape, {"step_compute_scale": {rank: (factor, (step,))}, "steps": steps, **kw},
                magnitudes=[("slow_rank", f"by_step.{step}.excess_ms", 90.0 * (factor - 1))])


def scale_cases() -> list[Case]:
    """Clusters of 64 to 1024 ranks: a cause is one verdict whatever the number of ranks."""
    n3 = {"noise": 0.03, "seed": 5}
    idle = host(G, 13, 60.0)
    idle.name += "-late"
    idle.magnitudes = [("schedule", "excess_ms.13", 60.0), ("schedule", "arrives_late_ms.13",
                                                            60.0)]
    long_step = early(G, 20, 150.0, "free")
    long_step.name = "long-step-8x2x4-r20"
    long_step.what = "rank 20: Free +150.0 ms in its own step, nobody waits for it"
    long_step.info = [("long_step", [20])]
    long_step.magnitudes = [("long_step", "extra_free_ms", 150.0)]
    pipe = slow(P, 37, 1.25)
    pipe.name = "slow-rank-4x4x4-r37-waits-everywhere"
    pipe.what = ("rank 37 (stage 2 of 4) computes x1.25: the other stages wait for it in "
                 "their tp and p2p ops")
    pipe.magnitudes = [("slow_rank", "excess_ms.37", 22.5)]
    nometa = missing(D, [5, 40], metadata=False)
    nometa.name = "missing-nometa-8x1x8-5-40"
    nometa.what = "ranks 5, 40 not collected, no profiler_metadata.json"
    nometa.expected = [("collection", [])]
    wide = Case("wide-bandwidth-8x1x128", "every link's bandwidth drawn from x0.2–x1.0",
                [("slow_link", []), ("slow_link", [])], K,
                {"bw_spread": (0.2, 1.0), "seed": 3, **BIG})
    return [
        node(G, range(24, 32), 1.2, "slow-node"),
        node(H, range(0, 8), 1.2, "slow-node", **BIG),
        node(P, range(20, 24), 1.2, "slow-tp-group"),
        links(G, [(3, 35), (12, 44)], 0.3),
        spike(G, 11, 1.5, 3),
        long_step, idle, pipe, nometa,
        Case("high-noise-8x2x4", "±10 % jitter of every kernel and link", [], G,
             {"noise": 0.10, "seed": 13}),
        Case("noise-4x4x16", "±3 % jitter of every kernel and link", [], H, {**n3, **BIG}),
        wide,
    ]


def injected_cases() -> list[Case]:
    n3 = {"noise": 0.03, "seed": 7}
    return [
        # one problem
        slow(A, 5, 1.3), slow(F, 3, 1.15), slow(B, 6, 1.25), slow(C, 17, 1.2, **n3),
        slow(D, 40, 1.3), slow(E, 77, 1.25),
        host(A, 2, 25.0), host(F, 6, 15.0), host(C, 9, 20.0, **n3), host(D, 13, 20.0),
        stage(A, 1, 1.4), stage(B, 2, 1.3), stage(C, 0, 1.35, **n3), stage(E, 1, 1.3),
        link(A, 4, 6, 0.3), link(F, 2, 3, 0.4), link(C, 4, 20, 0.3), link(D, 8, 16, 0.35),
        group(C, "dp", 1, 0.4), group(D, "dp", 5, 0.45), group(E, "tp", 3, 0.4),
        early(A, 1, 30.0, "wait"), early(F, 4, 25.0, "free"), early(D, 20, 30.0, "free"),
        early(B, 5, 20.0, "wait"),
        missing(C, [5, 30]), missing(D, [63]), missing(F, [7]),
        Case("noise-1x4x4", "±5 % jitter of every kernel and link", [], B,
             {"noise": 0.05, "seed": 11}),
        # two problems
        pair("slow-rank+slow-link-4x2x4", slow(C, 6, 1.25), link(C, 16, 20, 0.3)),
        pair("host-bound+slow-link-8x1x8", host(D, 30, 20.0), link(D, 0, 8, 0.3)),
        pair("stage+slow-link-2x2x2", stage(A, 0, 1.4), link(A, 5, 7, 0.3)),
        pair("slow-rank+missing-8x2x8", slow(E, 70, 1.25), missing(E, [3, 100])),
        pair("two-slow-ranks-8x1x8", slow(D, 9, 1.25), slow(D, 50, 1.3)),
        pair("slow-rank+host-bound-1x1x8", slow(F, 1, 1.25), host(F, 6, 20.0)),
        pair("stage+slow-rank-1x4x4", stage(B, 3, 1.3), slow(B, 1, 1.3)),
        pair("slow-group+slow-rank-4x2x4", group(C, "dp", 2, 0.4), slow(C, 12, 1.25)),
    ]


def clean_cases() -> list[Case]:
    out = [clean(s) for s in SHAPES[:-2]] + [clean(A, 0.03, 1), clean(D, 0.03, 2)]
    for s in SHAPES[-2:]:
        c = clean(s)
        c.spec.update(BIG)
        out.append(c)
    return out


#: real clusters: path (under the shared data; fixtures/ for the Qwen3 sample) -> diagnosis
def real_cases() -> list[Case]:
    lv = "torch_npu-2rank-levels"
    comm_unknown = [("communication", [0, 1])]
    missing8 = [("collection", [])]  # an 8-member group of which ranks 0 and 1 were collected
    return [
        Case("qwen3-pp2dp2", "real: Qwen3, PP2 x DP2, stage 1 heavier",
             [("stage", [2, 3])], real="fixtures:qwen3-4rank-pp2dp2"),
        Case("qwen3-rank0-alone", "real: rank 0 of Qwen3 alone", [("collection", [1, 2, 3])],
             real="fixtures:qwen3-4rank-pp2dp2/rank_0_ascend_pt"),
        Case("levels-text-level0", "real: 2 ranks, Level0 (no communication.json)",
             comm_unknown, real=f"{lv}/text/level0"),
        Case("levels-text-level1", "real: 2 of 8 ranks, Level1", missing8,
             real=f"{lv}/text/level1"),
        Case("levels-text-level2", "real: 2 of 8 ranks, Level2", missing8,
             real=f"{lv}/text/level2"),
        Case("levels-db-level0", "real: 2 ranks, db, Level0", comm_unknown,
             real=f"{lv}/db/level0"),
        Case("levels-db-level1", "real: 2 of 8 ranks, db, Level1", missing8,
             real=f"{lv}/db/level1"),
        Case("levels-db-level2", "real: 2 of 8 ranks, db, Level2", missing8,
             real=f"{lv}/db/level2"),
    ]


def all_cases() -> list[Case]:
    return injected_cases() + scale_cases() + clean_cases() + real_cases()


# ------------------------------------------------------------------------------ running


def shared_data() -> Path | None:
    env = os.environ.get("ASCENDPROF_SHARED_DATA")
    for cand in ([Path(env)] if env else []) + [HERE.parents[1] / "shared" / "data",
                                                 HERE.parents[2] / "shared" / "data"]:
        if cand.is_dir():
            return cand
    return None


def case_root(case: Case, tmp: Path) -> Path | None:
    """The directory to analyse: generated under ``tmp``, or the real one (None when absent)."""
    if case.real:
        if case.real.startswith("fixtures:"):
            return HERE.parent / "fixtures" / case.real.split(":", 1)[1]
        base = shared_data()
        return base / case.real if base else None
    root = tmp / case.name
    sc.write(sc.Spec(case.shape, **case.spec), root)
    return root


def diagnose(root: Path, workers: int = 1) -> tuple[list, list, dict]:
    """(warning and critical verdicts as sorted (category, ranks), all verdicts, {file: bytes}
    of verdicts.json and summary.json as analyse writes them, and of the verdicts in
    summary.json)."""
    from ascendprof.report.summary import build_summary

    ca = analysis_of(root, workers=workers)
    out = ca.verdicts
    got = sorted((v["category"], list(v["ranks"])) for v in out
                 if v["severity"] in ("warning", "critical"))
    sizes = {"verdicts.json": len(json.dumps({
        "verdicts": ca.verdicts, "thresholds": ca.thresholds,
        "problems": [p.as_dict() for p in ca.problems]}, default=str).encode()),
        # as analyse writes it (indented; sysio.atomic.write_json)
        "summary.json": len(orjson.dumps(build_summary(ca), option=orjson.OPT_INDENT_2
                                         | orjson.OPT_SERIALIZE_NUMPY
                                         | orjson.OPT_NON_STR_KEYS)),
        "summary.json verdicts": len(json.dumps(ca.verdicts, default=str).encode())}
    return got, out, sizes


def run(case: Case, tmp: Path, workers: int = 1) -> dict:
    root = case_root(case, tmp)
    if root is None:
        return {"case": case, "got": None, "ok": None, "seconds": 0.0, "verdicts": []}
    t = time.perf_counter()
    got, out, sizes = diagnose(root, workers)
    want = sorted((c, list(r)) for c, r in case.expected)
    bad = check_numbers(case, out)
    return {"case": case, "got": got, "ok": got == want and not bad,
            "seconds": time.perf_counter() - t, "verdicts": out, "bad": bad, "sizes": sizes}


def evidence_value(ev, path: str):
    """The value at ``path`` ("excess_ms.13", "by_step.3.excess_ms") in a verdict's evidence
    (None when absent)."""
    cur = ev
    for part in path.split("."):
        if isinstance(cur, dict) and part in cur:
            cur = cur[part]
        elif isinstance(cur, dict) and part.isdigit() and int(part) in cur:
            cur = cur[int(part)]
        else:
            return None
    return cur


def check_numbers(case: Case, verdicts: list) -> list[str]:
    """What is wrong with the case's stated magnitudes (within 10 %) and info verdicts."""
    bad = []
    for cat, path, want in case.magnitudes:
        vals = [evidence_value(v["evidence"], path) for v in verdicts if v["category"] == cat]
        vals = [float(x) for x in vals if isinstance(x, (int, float))]
        if not any(abs(x - want) <= 0.1 * abs(want) for x in vals):
            bad.append(f"{cat} {path}: {vals or 'absent'}, injected {want}")
    for cat, ranks in case.info:
        if not any(v["category"] == cat and list(v["ranks"]) == list(ranks)
                   for v in verdicts):
            bad.append(f"no {cat} verdict on {ranks}")
    return bad


def _run_named(arg) -> dict:
    name, tmp, workers = arg
    case = next(c for c in all_cases() if c.name == name)
    r = run(case, Path(tmp), workers)
    r["case"] = name
    return r


def _fmt(diag) -> str:
    if diag is None:
        return "(data absent)"
    if not diag:
        return "nothing"
    parts = []
    for cat, ranks in diag:
        parts.append(f"{cat} {_ranks(ranks)}" if ranks else cat)
    return "; ".join(parts)


def _ranks(ranks) -> str:
    from ascendprof.analyze.verdicts import ranks_text

    return ranks_text(ranks).replace("ranks ", "").replace("rank ", "")


BEGIN, END = "<!-- verdict-matrix:begin -->", "<!-- verdict-matrix:end -->"
#: injected cases whose right diagnosis is no warning (a longer step nobody waits for, noise)
QUIET = ("unequal", "noise", "long-step", "high-noise")


def table(results: list[dict]) -> str:
    inj = [r for r in results if r["case"].shape is not None and r["case"].expected
           or r["case"].name.startswith(QUIET)]
    shapes = sorted({r["case"].layout for r in results if r["case"].shape is not None})
    clean_ok = [r for r in results if r["case"].name.startswith("clean")]
    lines = [BEGIN, "",
             f"{sum(1 for r in inj if r['ok'])} of {len(inj)} injected cases diagnosed exactly "
             f"over {len(shapes)} shapes ({', '.join(shapes)}); "
             f"{sum(1 for r in clean_ok if r['ok'])} of {len(clean_ok)} clean clusters without "
             f"a warning; {sum(1 for r in results if r['case'].real and r['ok'])} of "
             f"{sum(1 for r in results if r['case'].real)} real clusters as expected. "
             f"Regenerate with `make verdict-matrix`.", "",
             "| case | layout | ranks | injected | expected | got | |",
             "|---|---|---|---|---|---|---|"]
    for r in results:
        c = r["case"]
        want = sorted((x, list(y)) for x, y in c.expected)
        mark = "✓" if r["ok"] else ("–" if r["ok"] is None else "✗")
        lines.append(f"| {c.name} | {c.layout} | {c.ranks} | {c.what} | {_fmt(want)} | "
                     f"{_fmt(r['got'])} | {mark} |")
    lines += ["", END]
    return "\n".join(lines)


def write_doc(doc: Path, results: list[dict]) -> None:
    text = doc.read_text(encoding="utf-8")
    new = table(results)
    if BEGIN in text and END in text:
        text = re.sub(re.escape(BEGIN) + ".*?" + re.escape(END), lambda _: new, text,
                      flags=re.S)
    else:
        text = text.rstrip() + "\n\n" + new + "\n"
    tmp = doc.with_suffix(".md.tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(doc)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--doc", type=Path, help="rewrite the results table of this file")
    ap.add_argument("-k", dest="pattern", default="", help="only cases whose name contains this (several: comma-separated)")
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--jobs", type=int, default=2, help="cases analysed at once")
    args = ap.parse_args(argv)
    cases = [c for c in all_cases()
             if not args.pattern or any(p in c.name for p in args.pattern.split(","))]
    results = []
    with tempfile.TemporaryDirectory(prefix="verdict-matrix-") as tmp:
        if args.jobs > 1:
            import multiprocessing as mp
            from concurrent.futures import ProcessPoolExecutor

            with ProcessPoolExecutor(args.jobs, mp_context=mp.get_context("fork")) as pool:
                done = pool.map(_run_named, [(c.name, tmp, args.workers) for c in cases])
                done = list(done)
        else:
            done = (run(c, Path(tmp), args.workers) for c in cases)
        for r in done:
            if isinstance(r["case"], str):
                r["case"] = next(c for c in cases if c.name == r["case"])
            case = r["case"]
            results.append(r)
            mark = {True: "ok ", False: "BAD", None: "-- "}[r["ok"]]
            print(f"{mark} {case.name:32} {r['seconds']:5.1f}s  expected {_fmt(case.expected)}"
                  f"  got {_fmt(r['got'])}  {'; '.join(r.get('bad') or [])}  "
                  f"{len(r['verdicts'])} verdicts {r.get('sizes')}", flush=True)
    if args.doc:
        write_doc(args.doc, results)
    return 0 if all(r["ok"] is not False for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
