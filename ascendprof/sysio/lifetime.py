"""Process lifetime: worker processes die with the run that started them, SIGTERM ends a run
like Ctrl-C (its clean-up runs), and a short critical section can hold signals back.

Why: a CI job that times out sends SIGTERM (then SIGKILL) to ascendprof; without this the
pool's workers (~200 MB each) went on running as orphans, and a run stopped half-way through
replacing its outputs left a mix of two runs.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import threading
import time
from contextlib import contextmanager

#: prctl option: signal this process receives when the thread that created it exits (Linux)
_PR_SET_PDEATHSIG = 1


class Terminated(KeyboardInterrupt):
    """Raised in the main thread by SIGTERM (see :func:`terminate_like_interrupt`): a subclass of
    KeyboardInterrupt, so every clean-up that runs on Ctrl-C runs on SIGTERM too."""

    exit_code = 128 + signal.SIGTERM


def _raise_terminated(signum, frame):
    raise Terminated()


def terminate_like_interrupt() -> None:
    """From now on SIGTERM raises :class:`Terminated` in the main thread (no-op elsewhere)."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _raise_terminated)


def die_with_parent(parent_pid: int, sig: int = signal.SIGKILL) -> None:
    """Make this (child) process receive ``sig`` when its parent ``parent_pid`` ends, however it
    ends (SIGKILL included). Linux: prctl(PR_SET_PDEATHSIG); elsewhere a daemon thread polls the
    parent. Exits at once when the parent is already gone."""
    done = False
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            done = libc.prctl(_PR_SET_PDEATHSIG, int(sig), 0, 0, 0) == 0
        except (OSError, AttributeError):
            done = False
    if os.getppid() != parent_pid:  # the parent ended before the prctl took effect
        os._exit(1)
    if not done:
        def watch():
            while os.getppid() == parent_pid:
                time.sleep(1.0)
            os._exit(1)

        threading.Thread(target=watch, name="ascendprof-parent-watch", daemon=True).start()


def worker_init(parent_pid: int) -> None:
    """Initializer of the pool's worker processes: die with the parent, leave Ctrl-C to the
    parent (which stops the pool), and let SIGTERM end the worker at once (the parent's own
    SIGTERM handler, inherited through fork, would otherwise be caught by the pool's loop)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    die_with_parent(parent_pid)


#: signals :func:`deferred_signals` holds back
DEFERRED = tuple(s for s in (getattr(signal, n, None) for n in ("SIGINT", "SIGTERM", "SIGHUP"))
                 if s is not None)


@contextmanager
def deferred_signals(signals=DEFERRED):
    """Hold ``signals`` back while the block runs (a few renames that must not be cut in the
    middle) and deliver them when it ends, to the handlers in place before. Only in the main
    thread (elsewhere signals are not handled in Python anyway)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    got: list[int] = []
    old = {}
    try:
        for s in signals:
            old[s] = signal.signal(s, lambda n, _f: got.append(n))
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)
        for n in dict.fromkeys(got):
            os.kill(os.getpid(), n)  # delivered again, now to the previous handler


#: exit status when stdout was closed by its reader and the command could not finish its
#: output (a shell reports a process killed by SIGPIPE the same way)
EXIT_BROKEN_PIPE = 128 + getattr(signal, "SIGPIPE", 13)


def silence_stdout() -> None:
    """Point stdout at /dev/null after its reader went away (``ascendprof … | head``), so the
    rest of the output and the interpreter's final flush do not fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):
        pass


@contextmanager
def stdout_may_close():
    """Run the block that prints; when stdout's reader has gone, stop printing quietly and
    carry on (the command's exit code then still says what it found, e.g. the gate's
    regression verdict). The block must only print: a SystemExit raised in it is taken for
    rich's reaction to a broken pipe."""
    try:
        yield
        sys.stdout.flush()
    except BrokenPipeError:
        silence_stdout()
    except SystemExit:  # rich's Console ends the process with exit 1 on a broken pipe
        silence_stdout()
