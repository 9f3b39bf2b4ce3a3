"""Show that a change leaves every output byte-identical: run ``analyse`` with the code of a
reference commit and with the working tree on the same inputs, then compare every file.

    python tools/same_outputs.py [--ref COMMIT] [INPUT ...]

INPUT defaults to the shipped sample and every run of the shared real data (``../shared/data``,
each run analysed into its own folder with ``--each-run``). The reference code is checked out
into a temporary git worktree and run from there (``PYTHONPATH``), with this interpreter.
Compared: every file an analysis writes, except the cache and the lock; report.html and
summary.json with the version, elapsed times and the output paths masked. Exit 0 when all are
identical, 1 with the differing files listed.
"""

from __future__ import annotations

import argparse
import filecmp
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SKIP_DIRS = {".ascendprof-cache"}
SKIP_FILES = {".ascendprof.lock"}


def default_inputs() -> list[Path]:
    inputs = [ROOT / "fixtures" / "qwen3-4rank-pp2dp2"]
    shared = Path(os.environ.get("ASCENDPROF_SHARED_DATA", ROOT.parent / "shared" / "data"))
    if shared.is_dir():
        inputs.append(shared)
    return inputs


def run(code: Path, inp: Path, out: Path) -> int:
    env = dict(os.environ, PYTHONPATH=str(code), ASCENDPROF_HTML=os.environ.get("ASCENDPROF_HTML", "1"))
    cmd = [sys.executable, "-m", "ascendprof", "analyse", str(inp), "-o", str(out), "--no-cache",
           "--each-run"]
    return subprocess.run(cmd, env=env, cwd=code, stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL).returncode


def masked(path: Path, side_root: Path) -> bytes:
    data = path.read_bytes()
    if path.suffix in (".json", ".html", ".csv", ".md", ".xml"):
        data = data.replace(str(side_root).encode(), b"<OUT>")
        data = re.sub(rb'"(elapsed_s|seconds|wall_s|version)": ?[^,}\n]+', rb'"\1": 0', data)
        data = re.sub(rb"ascendprof \d+\.\d+\.\d+\S*", b"ascendprof X", data)
    return data


def files(root: Path) -> set[str]:
    found = set()
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d not in SKIP_DIRS]
        for f in filenames:
            if f not in SKIP_FILES:
                found.add(str(Path(dirpath, f).relative_to(root)))
    return found


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ref", default="HEAD", help="reference commit (default HEAD)")
    ap.add_argument("inputs", nargs="*", type=Path)
    args = ap.parse_args()
    inputs = args.inputs or default_inputs()
    with tempfile.TemporaryDirectory(prefix="same-outputs-") as tmp:
        tmp = Path(tmp)
        ref = tmp / "ref"
        subprocess.run(["git", "worktree", "add", "-q", "--detach", str(ref), args.ref], cwd=ROOT,
                       check=True)
        try:
            bad = []
            for n, inp in enumerate(inputs):
                sides = {}
                for side, code in (("ref", ref), ("new", ROOT)):
                    out = tmp / side / str(n)
                    rc = run(code, inp.resolve(), out)
                    sides[side] = (rc, out)
                (rc_a, a), (rc_b, b) = sides["ref"], sides["new"]
                if rc_a != rc_b:
                    bad.append(f"{inp}: exit code {rc_a} -> {rc_b}")
                fa, fb = files(a), files(b)
                for rel in sorted(fa ^ fb):
                    bad.append(f"{inp}: {rel} only in {'ref' if rel in fa else 'new'}")
                same = 0
                for rel in sorted(fa & fb):
                    pa, pb = a / rel, b / rel
                    if filecmp.cmp(pa, pb, shallow=False) or masked(pa, a) == masked(pb, b):
                        same += 1
                    else:
                        bad.append(f"{inp}: {rel} differs")
                print(f"{inp}: {same} of {len(fa | fb)} files identical (exit {rc_a} / {rc_b})")
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(ref)], cwd=ROOT)
    for line in bad:
        print("DIFF", line)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
