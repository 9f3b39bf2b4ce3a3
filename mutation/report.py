"""docs/mutation.md from mutation/results/*.json (written by mutation/run.py) and the reasons in
mutation/survivors.toml and mutation/survivors/*.toml (one file per module).

    .venv/bin/python mutation/report.py [--check]

Per module: the mutants run (a fixed-seed sample, or all of them for a full run), killed,
equivalent, accepted and unexplained survivors, the share of non-equivalent mutants killed with
its 95 % Wilson score interval, and the seconds the run took. Every mutant that was not killed
is listed with its diff and the reason it is equivalent or accepted; one without a reason in
survivors.toml is listed as "not explained". A reason whose recorded diff no longer matches the
mutant (the code changed) is shown as stale. ``--check`` exits 1 when a survivor is unexplained
or stale, or a target is missed.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
HERE = ROOT / "mutation"
DOC = ROOT / "docs" / "mutation.md"
#: Targets on the lower end of the 95 % interval of the share of non-equivalent mutants killed:
#: for each module, and pooled over every mutant run.
TARGET_MODULE = 85.0
TARGET_OVERALL = 90.0
Z95 = 1.959963984540054
KILLED = ("killed", "timeout", "segfault", "caught by type check")


def _load() -> tuple[list[dict], dict]:
    from run import modules  # noqa: PLC0415 - the module list and its order

    order = list(modules())
    res = [json.loads(p.read_text(encoding="utf-8")) for p in sorted((HERE / "results").glob(
        "*.json")) if p.name != "known_bugs.json"]
    res.sort(key=lambda r: order.index(r["name"]) if r["name"] in order else len(order))
    for r in res:  # a crash is a kill
        r["survivors"] = [s for s in r["survivors"] if s["status"] not in KILLED]
    # survivors.toml, then one file per module in survivors/ (so the reasons for different
    # modules can be written side by side without touching one file)
    reasons: dict = {}
    for p in [HERE / "survivors.toml", *sorted((HERE / "survivors").glob("*.toml"))]:
        reasons.update(tomllib.loads(p.read_text(encoding="utf-8")).get("survivor", {}))
    return res, reasons


def _git(*args: str) -> str | None:
    import subprocess

    r = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True)
    return r.stdout.strip() if r.returncode == 0 else None


def _current(r: dict) -> str:
    """Whether the module and its tests are still what was measured (git blob ids; commit ids
    change when a branch is rebased, file contents do not)."""
    blobs = r.get("blobs") or {p: _git("rev-parse", f"{r['commit']}:{p}")
                               for p in [r["module"], *r["tests"]]}
    if None in blobs.values():
        return "unknown"
    changed = [p for p, b in blobs.items() if _git("rev-parse", f"HEAD:{p}") != b]
    if not changed:
        return "yes"
    return "no: " + ", ".join(f"`{p.removeprefix('ascendprof/').removeprefix('tests/')}`"
                              for p in changed) + " changed since"


def _killed(r: dict) -> int:
    return sum(n for s, n in r["counts"].items() if s in KILLED)


def _pct(k: int, n: int) -> float:
    return 100.0 * k / n if n else 100.0


def _norm(diff: str) -> str:
    return "\n".join(ln.rstrip() for ln in diff.strip().splitlines())


def _judged(s: dict, reasons: dict) -> tuple[str, str]:
    """(kind, note) of one survivor: kind 'equivalent', 'accepted', 'killed later' (a test added
    after the run fails on it: checked by applying the mutant's diff to the module and running
    that test) or 'unexplained'."""
    why = reasons.get(s["mutant"])
    if why is None or why.get("kind") not in ("equivalent", "accepted", "killed later"):
        return "unexplained", "**not explained**"
    if _norm(why.get("diff", "")) != _norm(s["diff"]):
        return "unexplained", f"**stale reason** (the mutant changed): {why['reason']}"
    return why["kind"], f"{why['kind']}: {why['reason']}"


def wilson(k: int, n: int, z: float = Z95) -> tuple[float, float]:
    """95 % Wilson score interval (low, high), in percent, of k successes in n trials; (0, 100)
    for n == 0."""
    if n <= 0:
        return 0.0, 100.0
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return 100.0 * max(0.0, centre - half), 100.0 * min(1.0, centre + half)


def _seconds(r: dict) -> str:
    if "sample" not in r:
        return f"{r['seconds']} (full run)"
    gen = r.get("seconds_generation")
    return f"{r['seconds']}" + (f" ({gen} to generate and trace)" if gen is not None else "")


#: Tests through the user's path that fail on the code before a bug's fix (checked by running
#: them against the parent of the fixing commit; see the doc section they are listed in).
BEFORE_FIX = [
    ("tests/test_static_op_mem.py::test_read_source_reads_static_op_mem",
     "a rank holding static_op_mem.csv was dropped: the dispatcher passed bad_rows to a parser "
     "that took none", "870b187",
     "`TypeError: read_static_op_mem() got an unexpected keyword argument 'bad_rows'` "
     "(readers/ascend_output.py)"),
    ("tests/test_gate_scale.py::test_one_slow_link_of_an_eight_rank_group_fails_naming_the_link",
     "the gate judged a group's bandwidth by its median over ranks, which one link of eight "
     "30 % slower does not move", "f77557d",
     "the gate named no link: it exited 1 only on the knock-on Communication(Not Overlapped) "
     "of ranks 8 and 9 (+31.6 %, +29.8 %), and the assertion `\"10->11\" in output` failed"),
]


def _later(k: int, n: int) -> str:
    lo, hi = wilson(k, n)
    return f"{_pct(k, n):.1f} %, {lo:.1f}–{hi:.1f} %"


def _full_note(res: list[dict]) -> str:
    full = [r for r in res if "sample" not in r]
    if not full:
        return ""
    return (f"{len(full)} module{'s' if len(full) > 1 else ''} measured earlier by full runs "
            "keep those results (every mutant of the module was run, so the share has no "
            "sampling error; the interval shown treats it as a sample like the others, which "
            "only widens it; the last column says whether the module or its tests changed "
            "since). ")


def _fresh_seeds(res) -> str:
    """The seeds after 33 the results were drawn with, as text ("34 to 38")."""
    seeds = sorted({int(r["seed"]) for r in res
                    if isinstance(r, dict) and r.get("seed") is not None and int(r["seed"]) > 33})
    if not seeds:
        return "none yet"
    return str(seeds[0]) if len(seeds) == 1 else f"{seeds[0]} to {seeds[-1]}"


def build() -> tuple[str, list[str]]:
    res, reasons = _load()
    problems: list[str] = []
    out = ["# Mutation testing", "",
           "Generated by `mutation/report.py` (at commit " + (_git("rev-parse", "--short=10",
                                                                   "HEAD") or "?")
           + ") from `mutation/results/*.json` (written by "
           "`make mutants`, i.e. `mutation/run.py`: mutmut, one module at a time, on a snapshot "
           "of the commit named below, each mutant checked by the tests listed for its module "
           "in `mutation/modules.toml` that reach the mutated function). Do not edit by hand: "
           "add the reason for a surviving mutant to `mutation/survivors.toml` and run "
           "`make mutation-report`.", "",
           "**Sampled score.** A full run of a module takes hours on this 2-core machine, so "
           "`make mutants` measures each module on a fixed-seed random sample of its mutants "
           "(default 60, `mutation/run.py --sample N`; the sample is drawn from every mutant "
           "mutmut generates for the module, with a generator seeded by the seed and the module "
           "name). Tests were then written against the survivors of the samples drawn with "
           "seed 33; measuring again on those same mutants would overstate the score, so a "
           "module measured again after its tests draws a fresh sample (a seed not used for it before, "
           + _fresh_seeds(res) + ", named in the table): its score "
           "estimates how the tests do on mutants they were not written for. "
           "`mutation/run.py --full MODULE` runs every mutant of a module on demand. The "
           "share of non-equivalent mutants killed is given with its 95 % Wilson score interval; "
           "the targets are a lower bound of at least "
           f"{TARGET_MODULE:g} % for each module and {TARGET_OVERALL:g} % pooled over every "
           "mutant run. " + _full_note(res) + "`seconds` is "
           "the wall time of the whole run of the module at `nice 19` with one child, while "
           "other work shared the machine (up to five module runs at once on the two cores).",
           "",
           "**Process isolation.** Runs marked *fork* in the *isolation* column forked each "
           "mutant from the process that had run the clean tests, so a mutant inherited what "
           "that run cached (the tests' cached advice of the real ranks, `lru_cache`s in the "
           "code) and could pass tests that fail on it in a fresh process: those runs "
           "understate the kill rate. Runs marked *forkserver* fork each mutant from a server "
           "that has only collected the tests. mutmut runs, for each mutant, the listed tests it "
           "saw reach the mutated function, and it sees only calls made in the test process: "
           "runs marked *ranks in process* make every analysis without an explicit worker "
           "count run its ranks there (earlier runs did the per-rank work in a process pool, "
           "where no test was credited with it); work done once in a module-scoped fixture is "
           "still credited only to the first test that used it. `mutation/check_survivors.py` "
           "checks a survivor in a fresh process with whole test files.", "",
           "A mutant counts as killed when a test fails, errors, crashes or times out on it. "
           "Survivors are mutants no selected test noticed (`survived`) or that no selected "
           "test reaches (`no tests`); each is listed below as *equivalent* (the program "
           "behaves the same for every input it can get: no test can kill it) or *accepted* "
           "(a real change nobody should need a test for, with the reason) or *killed later* "
           "(a test written after the run, named, fails on it: checked by applying the mutant's "
           "diff to the module and running that test; the run itself had no such test). "
           "Equivalent mutants are left out of the share; accepted ones count as not killed. "
           "The interval and the target are those of the run; the column *with later tests* "
           "counts the mutants killed later as killed, until the module is measured again.", "",
           "## Summary", "",
           "| module | measured on | mutants run | killed | equivalent | accepted | "
           "unexplained | killed of non-equivalent | 95 % interval | lower bound ≥ "
           f"{TARGET_MODULE:g} % | killed later | with later tests: share, interval | seconds | "
           "isolation | module and tests unchanged since |",
           "|---|---|---:|---:|---:|---:|---:|---:|---|---|---:|---|---:|---|---|"]
    pooled = [0, 0, 0, 0]  # killed, non-equivalent, mutants, seconds
    sampled = [0, 0, 0, 0, 0]  # the same over the sampled modules only, and their count
    for r in res:
        k, n = _killed(r), r["total"]
        kinds = [_judged(s, reasons)[0] for s in r["survivors"]]
        eq, acc, unx, later = (kinds.count(x) for x in ("equivalent", "accepted",
                                                         "unexplained", "killed later"))
        blob = (r.get("blobs") or {}).get(r["module"]) or _git(
            "rev-parse", f"{r['commit']}:{r['module']}") or "?"
        lo, hi = wilson(k, n - eq)
        met = "yes" if lo >= TARGET_MODULE else "**no**"
        if lo < TARGET_MODULE:
            problems.append(f"target missed: {r['module']} lower bound {lo:.1f} % < "
                            f"{TARGET_MODULE:g} %")
        run = (f"{n} of {r['population']} (seed {r.get('seed', '?')})" if "sample" in r
               else f"{n} (all)")
        out.append(f"| `{r['module'].removeprefix('ascendprof/')}` | commit {r['commit'][:10]}, "
                   f"file {blob[:10]} ({r['measured'][:10]}) | {run} | {k} | {eq} | {acc} | "
                   f"{unx} | {k} / {n - eq} = {_pct(k, n - eq):.1f} % | {lo:.1f}–{hi:.1f} % | "
                   f"{met} | {later} | {_later(k + later, n - eq) if later else '—'} | "
                   f"{_seconds(r)} | {r.get('isolation', 'fork')} | {_current(r)} |")
        pooled[0] += k
        pooled[1] += n - eq
        pooled[2] += n
        pooled[3] += r["seconds"]
        if "sample" in r:
            for i, v in enumerate((k, n - eq, n, r["seconds"], 1)):
                sampled[i] += v
    sk, sn, stotal, ssecs, smods = sampled
    k, n, total, secs = pooled
    lo, hi = wilson(k, n)
    if n and lo < TARGET_OVERALL:
        problems.append(f"target missed: overall lower bound {lo:.1f} % < {TARGET_OVERALL:g} %")
    out += ["", "| scope | modules | mutants run | killed / non-equivalent | killed % | "
            "95 % interval | target (lower bound) | met | seconds |",
            "|---|---:|---:|---:|---:|---|---|---|---:|",
            f"| overall (pooled) | {len(res)} | {total} | {k} / {n} | {_pct(k, n):.1f} | "
            f"{lo:.1f}–{hi:.1f} % | ≥ {TARGET_OVERALL:g} % | "
            + ("not measured" if not n else "yes" if lo >= TARGET_OVERALL else "**no**")
            + f" | {secs} |"]
    if smods:
        slo, shi = wilson(sk, sn)
        out.append(f"| sampled modules only | {smods} | {stotal} | {sk} / {sn} | "
                   f"{_pct(sk, sn):.1f} | {slo:.1f}–{shi:.1f} % | ≥ {TARGET_OVERALL:g} % | "
                   + ("yes" if slo >= TARGET_OVERALL else "**no**") + f" | {ssecs} |")
    mods = __import__("run").modules()
    missing = [m for m in mods if m not in {r["name"] for r in res}]
    if missing:
        problems += [f"not measured: {mods[m]['path']}" for m in missing]
        out += ["", "**Not measured yet** (listed in `mutation/modules.toml`, no result: a "
                "sampled run takes 2 to 20 minutes a module on this machine alone, 15 to 60 "
                "with other runs sharing its two cores; `make mutants MODULES=\"...\"` "
                "measures them):", ""]
        out += [f"- `{mods[m]['path'].removeprefix('ascendprof/')}`"
                + (f": {mods[m]['note']}" if mods[m].get("note") else "") for m in missing]
    out += ["", "## Tests that fail on the code before a bug's fix", "",
            "Two bugs found after the first mutation runs passed the whole suite. Each test "
            "below goes through the user's path (`read_source`; the `ascendprof gate` command "
            "on generated 16-rank clusters) and was run on the code of the parent of the fixing "
            "commit, with the test file and its fixture or generator taken from the fixing "
            "commit (`git archive FIX^ | tar -x`, then `git archive FIX tests/... fixtures/...`, "
            "then pytest with that tree first on `PYTHONPATH`). It failed there and passes on "
            "the fix.", "",
            "| test | bug | fixed in | how it failed before the fix |", "|---|---|---|---|"]
    out += [f"| `{t}` | {bug} | {c} | {how} |" for t, bug, c, how in BEFORE_FIX]
    out += _known_bugs(problems)
    out += ["", "## Survivors", ""]
    for r in res:
        if not r["survivors"]:
            continue
        out += [f"### `{r['module'].removeprefix('ascendprof/')}`", "",
                f"Tests: {', '.join('`' + t + '`' for t in r['tests'])}.", ""]
        for s in r["survivors"]:
            kind, note = _judged(s, reasons)
            if kind == "unexplained":
                problems.append(f"unexplained: {s['mutant']}")
            short = s["mutant"].rsplit(".", 1)[-1]
            out += [f"- `{short}` ({s['status']}) — {note}", "", "  ```diff"]
            out += ["  " + ln for ln in s["diff"].splitlines()] + ["  ```", ""]
    return "\n".join(out).rstrip() + "\n", problems


def _known_bugs(problems: list[str]) -> list[str]:
    """The section on issue #23's five one-line bugs, from mutation/results/known_bugs.json
    (mutation/known_bugs.py)."""
    path = HERE / "results" / "known_bugs.json"
    if not path.exists():
        return ["", "## The five known bugs", "", "Not measured yet: run "
                "`.venv/bin/python mutation/known_bugs.py`."]
    kb = json.loads(path.read_text(encoding="utf-8"))
    out = ["", "## The five known bugs", "",
           f"`mutation/known_bugs.py` applies each one-line bug of issue #23 alone to a copy of "
           f"commit {kb['commit'][:10]} ({kb['measured'][:10]}) and runs the test suite with and "
           f"without `../shared/data`"
           + (" (stopping at the first failure; `--all` lists every failing test)"
              if kb.get("stop_at_first_failure") else "") + ".", "",
           "| bug | change | shared data | outcome | failing test |", "|---|---|---|---|---|"]
    for b in kb["bugs"]:
        if not b["killed"]:
            problems.append(f"known bug survived: {b['bug']} ({b['mode']})")
        tests = "<br>".join(f"`{t}`" for t in b["failed"]) or "—"
        out.append(f"| {b['bug']} | `{b['file'].removeprefix('ascendprof/')}`: `{b['from']}` → "
                   f"`{b['to']}` | {b['mode'].removesuffix(' shared data')} | "
                   f"{'killed' if b['killed'] else '**survived**'} | {tests} |")
    return out


def _stub() -> None:
    res, reasons = _load()
    out = []
    for r in res:
        for s in r["survivors"]:
            why = reasons.get(s["mutant"])
            if why is not None and _norm(why.get("diff", "")) == _norm(s["diff"]):
                continue
            diff = s["diff"].replace('"""', "'''")
            out.append(f'\n[survivor."{s["mutant"]}"]\nkind = "TODO"\nreason = ""\n'
                       f"diff = '''\n{diff}\n'''\n")
    if out:
        with open(HERE / "survivors.toml", "a", encoding="utf-8") as f:
            f.write("".join(out))
    print(f"{len(out)} entries added to mutation/survivors.toml")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true",
                    help="exit 1 when a survivor is unexplained or stale or a target is missed")
    ap.add_argument("--stub", action="store_true",
                    help="append an entry (kind and reason to fill in) to survivors.toml for "
                         "every unexplained or stale survivor")
    a = ap.parse_args(argv)
    sys.path.insert(0, str(HERE))
    if a.stub:
        _stub()
    text, problems = build()
    DOC.parent.mkdir(exist_ok=True)
    DOC.write_text(text, encoding="utf-8")
    print(f"wrote {DOC.relative_to(ROOT)}")
    for p in problems:
        print("  " + p)
    return 1 if a.check and problems else 0


if __name__ == "__main__":
    sys.exit(main())
