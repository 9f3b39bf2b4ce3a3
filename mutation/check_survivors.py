"""Which survivors of a module's last run the tests of the working tree kill now.

    .venv/bin/python mutation/check_survivors.py MODULE TEST [TEST ...] [--only MUTANT ...]

For each surviving mutant recorded in mutation/results/MODULE.json, its diff is applied to a
scratch copy of the working tree (the checkout itself is never modified), the given tests are
run there (``pytest -x``, one process) and the first failing test is printed. This is how a
mutant is checked before it is recorded as "killed later" in mutation/survivors/: the run
itself had no such test. ``--write`` appends those entries to mutation/survivors/MODULE.toml.
A mutant whose original text is not found exactly once in the module is reported and skipped
(check it by hand).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import tomllib
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HERE = ROOT / "mutation"
_SKIP = {".git", ".venv", ".mutants", "ascendprof_output", "__pycache__", ".pytest_cache",
         "build", "dist"}


def _copy(dst: Path) -> None:
    shutil.copytree(ROOT, dst, ignore=lambda d, names: [n for n in names if n in _SKIP
                                                        or n.endswith(".egg-info")],
                    dirs_exist_ok=True)


def _sides(diff: str) -> tuple[str, str]:
    lines = diff.splitlines()
    return ("\n".join(ln[1:] for ln in lines if ln.startswith("-")),
            "\n".join(ln[1:] for ln in lines if ln.startswith("+")))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("module", help="a name from mutation/modules.toml with a result")
    ap.add_argument("tests", nargs="+", help="test files or node ids")
    ap.add_argument("--only", nargs="*", default=[], help="mutant names (or their last part)")
    ap.add_argument("--write", action="store_true",
                    help="append the killed ones to mutation/survivors/MODULE.toml")
    a = ap.parse_args(argv)
    res = json.loads((HERE / "results" / f"{a.module}.json").read_text(encoding="utf-8"))
    only = set(a.only)
    todo = [s for s in res["survivors"]
            if not only or s["mutant"] in only or s["mutant"].rsplit(".", 1)[-1] in only]
    killed = []
    with tempfile.TemporaryDirectory(prefix="ap-survivors-") as tmp:
        work = Path(tmp)
        _copy(work)
        mod = work / res["module"]
        orig = mod.read_text(encoding="utf-8")
        # the scratch copy is not beside ../shared/data: name it, as mutation/run.py does
        shared = os.environ.get("ASCENDPROF_SHARED_DATA") or str(ROOT.parent / "shared" / "data")
        env = dict(os.environ, PYTHONPATH=str(work), PYTHONDONTWRITEBYTECODE="1",
                   ASCENDPROF_SHARED_DATA=shared)
        for s in todo:
            old, new = _sides(s["diff"])
            n = orig.count(old)
            if n != 1:
                print(f"{s['mutant']}: its text is found {n} times in the module, skipped")
                continue
            mod.write_text(orig.replace(old, new), encoding="utf-8")
            try:
                p = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-n", "0",
                                    "-p", "no:cacheprovider", "-p", "no:randomly", *a.tests],
                                   cwd=work, env=env, capture_output=True, text=True,
                                   timeout=1800)
            finally:
                mod.write_text(orig, encoding="utf-8")
            # "FAILED <node id> - <message>": the node id may hold spaces and quotes
            failed = [ln.split(" ", 1)[1].split(" - ", 1)[0] for ln in p.stdout.splitlines()
                      if ln.startswith(("FAILED ", "ERROR "))]
            if p.returncode not in (0, 5):
                test = failed[0] if failed else f"(exit {p.returncode})"
                killed.append((s, test))
                print(f"{s['mutant']}: killed by {test}", flush=True)
            else:
                print(f"{s['mutant']}: survives", flush=True)
    if a.write and killed:
        out = HERE / "survivors" / f"{a.module}.toml"
        out.parent.mkdir(exist_ok=True)
        # a name already in the file (an earlier seed's entry, or a second run of this script)
        # is not declared again: TOML refuses a table defined twice, and report.py with it
        have = tomllib.loads(out.read_text(encoding="utf-8")).get("survivor", {}) \
            if out.is_file() else {}
        again = [s["mutant"] for s, _ in killed if s["mutant"] in have]
        killed = [(s, test) for s, test in killed if s["mutant"] not in have]
        for name in again:
            print(f"{name}: already in {out.relative_to(ROOT)}; not written again")
        with open(out, "a", encoding="utf-8") as f:
            for s, test in killed:
                f.write(f'\n[survivor."{s["mutant"]}"]\nkind = "killed later"\n'
                        f"reason = {json.dumps(test + ' fails on it')}\n"
                        f"diff = '''\n{s['diff']}\n'''\n")
        print(f"{len(killed)} entries appended to {out.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
