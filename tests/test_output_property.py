"""Property (issue #17): for any sequence of runs and interrupts into one output directory,
every file ascendprof did not write is byte-identical afterwards, and the output set is always
that of one complete run (all old or all new), never a mix.

A sequence is a list of runs of three variants (the Qwen3 sample; the same with other verdict
thresholds and no tables; the sample without communication files, which writes fewer files),
each possibly hit at its k-th rename by SIGINT (a real signal to this process) or by a crash
(the process dying there: nothing after it runs but the unwinding). Expected sets: each
variant run alone into an empty directory.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import threading
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import faultgen as FG
from ascendprof.engine.run import run_analyse

VARIANTS = {
    "A": ("full", {}),
    "B": ("full", {"thresholds": {"comm_share_pct": 5.0}, "tables": False}),
    "C": ("nocomm", {}),
}
OURS = (".ascendprof-cache", ".ascendprof.lock")


class Crash(BaseException):
    """The process dies at this point."""


def user_files(out: Path) -> None:
    (out / "sub").mkdir(parents=True)
    (out / "notes.txt").write_text("my notes\n")
    (out / "sub" / "data.bin").write_bytes(bytes(range(256)))
    (out / ".hidden").write_text("mine\n")
    (out / "plots.early").write_text("not ascendprof's\n")


USER = {"notes.txt": b"my notes\n", "sub/data.bin": bytes(range(256)), ".hidden": b"mine\n",
        "plots.early": b"not ascendprof's\n"}


def output_set(out: Path) -> dict:
    """Everything under ``out`` but the user's files, the cache and the lock: path -> bytes."""
    got = {}
    for p in sorted(out.rglob("*")):
        rel = p.relative_to(out)
        if rel.parts[0] in OURS or str(rel) in USER or rel.parts[0] == "sub":
            continue
        got[str(rel)] = hashlib.sha256(p.read_bytes()).hexdigest()[:12] if p.is_file() else "dir"
    return got


def user_set(out: Path) -> dict:
    return {k: (out / k).read_bytes() for k in USER if (out / k).is_file()}


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    if FG.base_path("qwen3") is None:
        pytest.skip("qwen3 sample not present")
    base = tmp_path_factory.mktemp("prop")
    inputs = {"full": FG.copy_base("qwen3", base / "full")}
    inputs["nocomm"] = FG.copy_base("qwen3", base / "nocomm")
    for r in range(4):
        for n in ("communication.json", "communication_matrix.json"):
            FG.out_file(inputs["nocomm"], "qwen3", r, n).unlink()
    out = base / "out"
    refs = {}
    for v, (inp, opts) in VARIANTS.items():
        out.mkdir()
        run(inputs[inp], out, opts)
        refs[v] = output_set(out)
        shutil.rmtree(out)
    assert refs["A"] != refs["B"] != refs["C"] != refs["A"]
    return inputs, refs, out


def run(src, out, opts):
    return run_analyse(src, out, workers=1, progress=False, fmt="json", **opts)


class Faults:
    """os.replace hit at its ``k``-th call (every rename of a run: staged files, cache
    entries, the commit) by ``kind``."""

    def __init__(self, kind, k):
        self.kind, self.k, self.n = kind, k, 0

    def __enter__(self):
        self.real = os.replace

        def replace(src, dst, **kw):
            self.n += 1
            if self.n == self.k:
                if self.kind == "crash":
                    raise Crash()
                os.kill(os.getpid(), signal.SIGINT)
            return self.real(src, dst, **kw)

        os.replace = replace
        return self

    def __exit__(self, *exc):
        os.replace = self.real
        return False


steps = st.lists(st.tuples(st.sampled_from(sorted(VARIANTS)),
                           st.one_of(st.none(),
                                     st.tuples(st.sampled_from(["sigint", "crash"]),
                                               st.integers(1, 90)))),
                 min_size=1, max_size=3)


@pytest.mark.skipif(threading.current_thread() is not threading.main_thread(),
                    reason="signals reach the main thread only")
@settings(max_examples=8, deadline=None, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture,
                                 HealthCheck.too_slow])
@given(seq=steps)
def test_runs_and_interrupts_never_mix_sets_nor_touch_user_files(world, seq, capsys):
    inputs, refs, out = world
    if out.exists():
        shutil.rmtree(out)
    out.mkdir()
    user_files(out)
    empty = output_set(out)  # nothing of ours yet
    sets = [empty] + list(refs.values())
    before, dirty = empty, False
    for variant, fault in seq:
        inp, opts = VARIANTS[variant]
        outcome = "done"
        try:
            with Faults(*(fault or ("none", 0))):
                run(inputs[inp], out, opts)
        except KeyboardInterrupt:
            outcome = "interrupted"
        except Crash:
            outcome = "crashed"
        capsys.readouterr()
        assert user_set(out) == USER, "a file ascendprof did not write changed"
        now = output_set(out)
        if outcome == "done":
            assert now == refs[variant]
        elif outcome == "interrupted":
            allowed = sets if dirty else [before, refs[variant]]
            assert now in allowed, f"interrupted run of {variant} left a mixed set"
        if outcome == "crashed":
            dirty = True  # a crash in the commit is completed by the next run that gets in
        else:
            dirty = False
            before = now
            assert now in sets, "a mixed set"
    # whatever happened, the next complete run gives exactly its set beside the user's files
    run(inputs["full"], out, {})
    capsys.readouterr()
    assert output_set(out) == refs["A"]
    assert user_set(out) == USER
    assert sorted(p.name for p in out.iterdir() if p.name.startswith(".ascendprof-")) == [
        ".ascendprof-cache", ".ascendprof-manifest.json"]
