"""Apply each known one-line bug (issue #23) alone to a scratch copy of the committed tree (HEAD)
and run the test suite on it, with and without ../shared/data. Every bug must make the suite
fail.

    .venv/bin/python mutation/known_bugs.py [--all] [--only NAME] [--shared DIR]

``--all`` runs every test (lists every test that fails) instead of stopping at the first failure.
Exit status 1 when a bug survives in a mode where it must be killed.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: name -> (file, text, replacement, the test file that should catch it). Every bug must be
#: killed with and without the shared data. The suite runs that test file first, so that a
#: run stopping at the first failure (the default) ends early; --all runs everything.
BUGS = {
    "step window end inclusive": (
        "ascendprof/analyze/step_breakdown.py", "(starts < hi[j])", "(starts <= hi[j])",
        "tests/test_step_breakdown.py"),
    "gate bandwidth drop inverted": (
        "ascendprof/compare/gate/evaluate.py", "change < 0 and (pct is None or pct < rule.limit_pct)",
        "change < 0 and (pct is None or pct > rule.limit_pct)", "tests/test_gate.py"),
    "gate noise floor ignored": (
        "ascendprof/compare/gate/evaluate.py", "if beyond and abs(change) > rule.floor else",
        "if beyond else", "tests/test_gate.py"),
    "slow-link ratio 0.6 -> 0.8": (
        "ascendprof/analyze/verdicts/thresholds.py", "SLOW_LINK_BW_RATIO = 0.6",
        "SLOW_LINK_BW_RATIO = 0.8", "tests/test_slow_link_threshold.py"),
    "db reader counts the HCCL carrier task as compute": (
        # (since 2036edc the reader labels tasks by their links: the carrier's link to its op
        # made 'compute' instead of 'communication')
        "ascendprof/readers/db.py", "WHEN {comm} THEN 'communication' ELSE",
        "WHEN {comm} THEN 'compute' ELSE", "tests/test_db_reader.py"),
}


def _copy_tree(dst: Path) -> None:
    """The committed tree (HEAD): a snapshot that edits in the checkout cannot disturb."""
    archive = subprocess.run(["git", "archive", "HEAD"], cwd=ROOT, capture_output=True,
                             check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(dst)], input=archive, check=True)


def _run(tree: Path, shared: str, stop_first: bool, first: str) -> tuple[int, list[str]]:
    env = dict(os.environ, ASCENDPROF_SHARED_DATA=shared, CI="")
    # one process: -x and the order of the files below hold only there
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rf", "-n", "0"]
    if stop_first:  # the given file first, then every other one (pytest keeps that order)
        rest = sorted(str(p.relative_to(tree)) for p in (tree / "tests").glob("test_*.py"))
        cmd += ["-x", first] + [f for f in rest if f != first]
    r = subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True)
    failed = re.findall(r"^FAILED (\S+)", r.stdout, re.M)
    return r.returncode, failed


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--all", action="store_true", help="run every test, list all that fail")
    ap.add_argument("--only", help="run only the bug whose name contains this text")
    ap.add_argument("--shared", default=str(ROOT.parent / "shared" / "data"),
                    help="the shared data directory (default ../shared/data)")
    a = ap.parse_args(argv)
    bad = 0
    record = {"commit": subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, text=True,
                                       capture_output=True).stdout.strip(),
              "measured": _dt.datetime.now().isoformat(timespec="seconds"),
              "stop_at_first_failure": not a.all, "bugs": []}
    for name, (rel, old, new, first) in BUGS.items():
        if a.only and a.only not in name:
            continue
        with tempfile.TemporaryDirectory(prefix="ascendprof-bug-") as tmp:
            tree = Path(tmp)
            _copy_tree(tree)
            text = (tree / rel).read_text(encoding="utf-8")
            if text.count(old) != 1:
                print(f"{name}: {old!r} found {text.count(old)} times in {rel}; update BUGS")
                bad = 1
                continue
            (tree / rel).write_text(text.replace(old, new), encoding="utf-8")
            for mode, shared in (("with shared data", a.shared),
                                 ("without shared data", str(tree / "no-shared-data"))):
                rc, failed = _run(tree, shared, not a.all, first)
                killed = rc != 0
                if not killed:
                    bad = 1
                print(f"{name} [{mode}]: {'KILLED' if killed else 'SURVIVED'}"
                      + (f" by {len(failed)} test(s): " + ", ".join(failed) if failed else ""),
                      flush=True)
                record["bugs"].append({"bug": name, "file": rel, "from": old, "to": new,
                                       "mode": mode, "killed": killed, "failed": failed})
    if not a.only:
        out = ROOT / "mutation" / "results" / "known_bugs.json"
        out.parent.mkdir(exist_ok=True)
        out.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    return bad


if __name__ == "__main__":
    sys.exit(main())
