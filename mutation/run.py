"""Mutation testing of the modules that hold the profiling knowledge, one module at a time.

    .venv/bin/python mutation/run.py [MODULE ...]      # default: every module in modules.toml
    .venv/bin/python mutation/run.py --sample 100 MODULE  # a bigger sample
    .venv/bin/python mutation/run.py --full MODULE     # every mutant (hours for a big module)
    .venv/bin/python mutation/run.py --list

By default a module is measured on a SAMPLE: mutmut generates every mutant of the module and
collects which listed tests reach which function (``mutmut run`` with a name filter that
matches nothing stops right after that phase), then a fixed-seed random sample of the mutant
names (``--sample``, default 60; ``--seed``) is run with ``mutmut run NAME ...``. The result
records the sample, the number of mutants it was drawn from, the statuses and the seconds; the
report gives the kill rate with its 95 % Wilson interval. ``--full`` runs every mutant.

For each module (a path under ascendprof/, listed in mutation/modules.toml with the tests that
exercise it): the committed tree (HEAD; commit first) is copied to ``.mutants/<name>/`` (never
touching the checkout), mutmut mutates that one module there and runs, for each mutant, only the listed tests
that reach the mutated function (mutmut's own per-function test selection), at ``nice 19`` with
one child. The outcome is written to ``mutation/results/<name>.json``: the commit measured,
counts per status and every surviving mutant with its diff. ``mutation/report.py`` turns those files into docs/mutation.md.

The shared data is taken from ASCENDPROF_SHARED_DATA or ../shared/data beside the checkout.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import random
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
HERE = ROOT / "mutation"
WORK = ROOT / ".mutants"
RESULTS = HERE / "results"


def modules() -> dict[str, dict]:
    """name -> {"path": module path, "tests": [test files], "note": text} from modules.toml."""
    cfg = tomllib.loads((HERE / "modules.toml").read_text(encoding="utf-8"))
    return {name: m for name, m in cfg["module"].items()}


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True,
                          check=True).stdout.strip()


def _copy_checkout(dst: Path) -> None:
    """The committed tree (HEAD), so the figures belong to one commit."""
    archive = subprocess.run(["git", "archive", "HEAD"], cwd=ROOT, capture_output=True,
                             check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(dst)], input=archive, check=True)


def _shared_data() -> str:
    env = os.environ.get("ASCENDPROF_SHARED_DATA")
    return env or str((ROOT.parent / "shared" / "data").resolve())


def _mutmut_config(mod: dict) -> str:
    tests = json.dumps(mod["tests"])
    return (f'\n[tool.mutmut]\nsource_paths = ["ascendprof"]\nonly_mutate = ["{mod["path"]}"]\n'
            f"pytest_add_cli_args_test_selection = {tests}\n"
            '# no randomised order, no cache, one process (mutmut instruments this one);\n'
            '# hypothesis examples fixed so a run is repeatable\n'
            'pytest_add_cli_args = ["-p", "no:cacheprovider", "-p", "no:randomly", "-n", "0", '
            '"-q", "-x"]\n'
            'also_copy = ["fixtures", "benchmarks", "docs"]\n'
            "timeout_multiplier = 10.0\ntimeout_constant = 20.0\n"
            # each mutant forked from a server that has only collected the tests: forked from
            # the process that ran them, a mutant inherits what the clean run cached (the
            # tests' cached advice of the real ranks, the code's lru_caches) and passes
            # tests that fail on it in a fresh process
            'process_isolation = "forkserver"\n')


def _statuses(work: Path, mutmut: str, env: dict) -> dict[str, str]:
    out = subprocess.run([mutmut, "results", "--all", "true"], cwd=work, env=env,
                         capture_output=True, text=True).stdout
    got = {}
    for line in out.splitlines():
        m = re.match(r"\s*(\S+): (.+)$", line)
        if m:
            got[m.group(1)] = m.group(2).strip()
    return got


def _diff(work: Path, mutmut: str, env: dict, name: str) -> str:
    out = subprocess.run([mutmut, "show", name], cwd=work, env=env, capture_output=True,
                         text=True).stdout
    lines = [ln for ln in out.splitlines()
             if ln[:1] in "+-" and not ln.startswith(("+++", "---"))]
    return "\n".join(lines)


#: A name filter that matches no mutant: ``mutmut run`` generates the mutants and collects the
#: test statistics, then stops with this message (mutmut 3.8's check of an empty filter).
_NO_MUTANT = "ascendprof.x_sampling_matches_no_mutant__mutmut_0"
_NOTHING_MATCHES = "Filtered for specific mutants, but nothing matches"
#: Default sample size per module and seed (the sample of a module is drawn with
#: random.Random(f"{seed}:{module name}") from the naturally sorted mutant names).
SAMPLE = 60
#: 33 drew the samples whose survivors the hand-built tests were written against; a score
#: measured again on that same sample would be biased upward (those tests were aimed at
#: exactly its mutants), so measurements after them draw a fresh sample with seed 34.
SEED = 34


def _mutmut(work: Path, mutmut: str, env: dict, args: list[str], log: Path) -> int:
    """One mutmut process at nice 19 with one child, output appended to *log*."""
    with open(log, "a", encoding="utf-8") as f:
        f.write(f"\n$ mutmut {' '.join(args[:8])}{' ...' if len(args) > 8 else ''}\n")
        f.flush()
        r = subprocess.run(["nice", "-n", "19", mutmut, *args], cwd=work, env=env, stdout=f,
                           stderr=subprocess.STDOUT, preexec_fn=_limit_memory)
    return r.returncode


def draw(names: list[str], size: int | None, seed: int, module: str) -> list[str]:
    """The mutants to run: all of *names* when size is None or covers them, else a random sample
    of *size* drawn with a generator seeded by seed and module name (the same code, seed and
    size give the same sample), in natural order."""
    ordered = sorted(names, key=_natural)
    if size is None or size >= len(ordered):
        return ordered
    return sorted(random.Random(f"{seed}:{module}").sample(ordered, size), key=_natural)


def run_module(name: str, mod: dict, mutmut: str, sample: int | None = SAMPLE,
               seed: int = SEED) -> dict:
    commit = _git("rev-parse", "HEAD")
    work = WORK / name
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    _copy_checkout(work)
    with open(work / "pyproject.toml", "a", encoding="utf-8") as f:
        f.write(_mutmut_config(mod))
    env = dict(os.environ, ASCENDPROF_SHARED_DATA=_shared_data(), CI="",
               HYPOTHESIS_PROFILE=os.environ.get("HYPOTHESIS_PROFILE", ""),
               OPENBLAS_NUM_THREADS="1", PYTHONHASHSEED="0",
               # every analysis without an explicit worker count runs its ranks in the test's
               # own process (a 1 MB budget plans one worker): mutmut credits a function to
               # the tests that reach it only for calls it sees in that process, so the
               # per-rank work done in a pool was run against no test
               ASCENDPROF_MEMORY_BUDGET_MB="1")
    started = time.monotonic()
    log = work / "mutmut-run.log"
    log.write_text("", encoding="utf-8")

    def fail(what: str, rc: int):
        tail = log.read_text(encoding="utf-8", errors="replace")[-3000:]
        raise SystemExit(f"mutmut {what} failed for {name} (exit {rc}); see {log}:\n{tail}")

    chosen: list[str] = []
    generated = None
    if sample is None:
        rc = _mutmut(work, mutmut, env, ["run", "--max-children", "1"], log)
        if rc != 0:
            fail("run", rc)
    else:
        # phase 1: generate the mutants and collect which tests reach which function
        rc = _mutmut(work, mutmut, env, ["run", "--max-children", "1", _NO_MUTANT], log)
        if _NOTHING_MATCHES not in log.read_text(encoding="utf-8", errors="replace"):
            fail("mutant generation / test statistics", rc)
        generated = round(time.monotonic() - started)
        every = list(_statuses(work, mutmut, env))
        if not every:
            fail("mutant generation (no mutants listed)", rc)
        chosen = draw(every, sample, seed, name)
        # phase 2: run the sample (mutmut selects, per mutant, the tests reaching its function)
        rc = _mutmut(work, mutmut, env, ["run", "--max-children", "1", *chosen], log)
        if rc != 0:
            fail("run of the sample", rc)
    statuses = _statuses(work, mutmut, env)
    if not statuses:
        fail("run", rc)
    population = len(statuses)
    if chosen:
        statuses = {m: statuses[m] for m in chosen}
    left = [m for m, s in statuses.items() if s == "not checked"]
    if left:
        fail(f"run ({len(left)} mutants not checked, e.g. {left[0]})", rc)
    counts: dict[str, int] = {}
    for s in statuses.values():
        counts[s] = counts.get(s, 0) + 1
    survivors = [{"mutant": m, "status": s, "diff": _diff(work, mutmut, env, m)}
                 for m, s in sorted(statuses.items(), key=lambda kv: _natural(kv[0]))
                 if s not in ("killed", "timeout", "segfault", "caught by type check")]
    blobs = {p: _git("rev-parse", f"{commit}:{p}") for p in [mod["path"], *mod["tests"]]}
    out = {"module": mod["path"], "name": name, "tests": mod["tests"], "commit": commit,
           "blobs": blobs,
           "measured": _dt.datetime.now().isoformat(timespec="seconds"),
           "seconds": round(time.monotonic() - started),
           "mutmut": _mutmut_version(), "isolation": "forkserver, ranks in process",
           "population": population, "total": len(statuses), "counts": counts,
           "survivors": survivors}
    if sample is not None:
        out.update({"sample": len(chosen), "seed": seed, "seconds_generation": generated,
                    "sampled": chosen})
    return out


#: Address space per process: a mutant that turns a loop endless while it appends (seen: 8.6 GB
#: resident within minutes) fails with MemoryError instead of taking a shared machine's memory.
MEMORY_LIMIT = int(os.environ.get("MUTANTS_MEMORY_GB", "6")) << 30


def _limit_memory() -> None:
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


def _mutmut_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("mutmut")
    except PackageNotFoundError:  # pragma: no cover
        return ""


def _natural(key: str):
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", key)]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("modules", nargs="*", help="names from mutation/modules.toml (default all)")
    ap.add_argument("--list", action="store_true", help="list the modules and their tests")
    ap.add_argument("--sample", type=int, default=SAMPLE, metavar="N",
                    help=f"mutants per module, a fixed-seed random sample (default {SAMPLE})")
    ap.add_argument("--seed", type=int, default=SEED, help=f"seed of the sample (default {SEED})")
    ap.add_argument("--full", action="store_true", help="run every mutant of the module")
    a = ap.parse_args(argv)
    mods = modules()
    if a.list:
        for name, m in mods.items():
            print(f"{name}: {m['path']} <- {' '.join(m['tests'])}")
        return 0
    unknown = [n for n in a.modules if n not in mods]
    if unknown:
        ap.error(f"unknown module(s) {unknown}; known: {', '.join(mods)}")
    mutmut = shutil.which("mutmut", path=str(Path(sys.executable).parent)) or shutil.which("mutmut")
    if not mutmut:
        raise SystemExit("mutmut not installed: .venv/bin/pip install -e '.[mutation]'")
    RESULTS.mkdir(exist_ok=True)
    for name in a.modules or list(mods):
        print(f"mutating {mods[name]['path']} ...", flush=True)
        res = run_module(name, mods[name], mutmut, None if a.full else a.sample, a.seed)
        (RESULTS / f"{name}.json").write_text(json.dumps(res, indent=1) + "\n", encoding="utf-8")
        c = res["counts"]
        of = f" (a sample of {res['population']})" if "sample" in res else ""
        print(f"  {res['total']} mutants{of}: {c.get('killed', 0)} killed, "
              f"{c.get('timeout', 0)} timeout, {len(res['survivors'])} not killed "
              f"({res['seconds']} s)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
