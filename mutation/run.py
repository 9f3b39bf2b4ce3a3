"""Mutation testing of the modules that hold the profiling knowledge, one module at a time.

    .venv/bin/python mutation/run.py [MODULE ...]      # default: every module in modules.toml
    .venv/bin/python mutation/run.py --list

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
            'also_copy = ["fixtures", "benchmarks"]\n'
            "timeout_multiplier = 10.0\ntimeout_constant = 20.0\n")


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


def run_module(name: str, mod: dict, mutmut: str) -> dict:
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
               OPENBLAS_NUM_THREADS="1", PYTHONHASHSEED="0")
    started = time.monotonic()
    log = work / "mutmut-run.log"
    with open(log, "w", encoding="utf-8") as f:
        r = subprocess.run(["nice", "-n", "19", mutmut, "run", "--max-children", "1"],
                           cwd=work, env=env, stdout=f, stderr=subprocess.STDOUT,
                           preexec_fn=_limit_memory)
    statuses = _statuses(work, mutmut, env)
    if r.returncode != 0 or not statuses:
        tail = log.read_text(encoding="utf-8", errors="replace")[-3000:]
        raise SystemExit(f"mutmut failed for {name} (exit {r.returncode}); see {log}:\n{tail}")
    counts: dict[str, int] = {}
    for s in statuses.values():
        counts[s] = counts.get(s, 0) + 1
    survivors = [{"mutant": m, "status": s, "diff": _diff(work, mutmut, env, m)}
                 for m, s in sorted(statuses.items(), key=lambda kv: _natural(kv[0]))
                 if s not in ("killed", "timeout", "segfault", "caught by type check")]
    blobs = {p: _git("rev-parse", f"{commit}:{p}") for p in [mod["path"], *mod["tests"]]}
    return {"module": mod["path"], "name": name, "tests": mod["tests"], "commit": commit,
            "blobs": blobs,
            "measured": _dt.datetime.now().isoformat(timespec="seconds"),
            "seconds": round(time.monotonic() - started),
            "mutmut": subprocess.run([mutmut, "--version"], capture_output=True,
                                     text=True).stdout.strip(),
            "total": len(statuses), "counts": counts, "survivors": survivors}


#: Address space per process: a mutant that turns a loop endless while it appends (seen: 8.6 GB
#: resident within minutes) fails with MemoryError instead of taking a shared machine's memory.
MEMORY_LIMIT = int(os.environ.get("MUTANTS_MEMORY_GB", "6")) << 30


def _limit_memory() -> None:
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


def _natural(key: str):
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", key)]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("modules", nargs="*", help="names from mutation/modules.toml (default all)")
    ap.add_argument("--list", action="store_true", help="list the modules and their tests")
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
        res = run_module(name, mods[name], mutmut)
        (RESULTS / f"{name}.json").write_text(json.dumps(res, indent=1) + "\n", encoding="utf-8")
        c = res["counts"]
        print(f"  {res['total']} mutants: {c.get('killed', 0)} killed, "
              f"{c.get('timeout', 0)} timeout, {len(res['survivors'])} not killed "
              f"({res['seconds']} s)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
