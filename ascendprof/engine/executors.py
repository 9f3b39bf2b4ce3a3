"""Executors run the per-rank pure function over sources: a local process pool by default, or a
Dask distributed cluster.

Local pool size is bounded twice: by cores (at most the number of sources) and by memory. Each
worker reports its peak RSS (``resource.getrusage``) with every result; the number of ranks in
flight is then cut so that ``in flight x measured peak per rank`` stays under the memory budget
(``$ASCENDPROF_MEMORY_BUDGET_MB``, default 60 % of the machine's available memory). Before the
first measurement the peak is estimated from the rank's input size. Results come back in input
order while later ranks still run, so the parent never holds more than the small partials. One
source, or one worker, runs in-process, which keeps tests and small jobs free of pool start-up
cost. Workers die with the process that started them (SIGKILL included, see
:mod:`ascendprof.sysio.lifetime`), and an interrupted or failed run ends them at once.
"""

from __future__ import annotations

import ctypes
import os
import resource
import sys
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from functools import partial

from ascendprof.sysio.lifetime import worker_init

#: environment variable: memory budget in MB for all workers together
BUDGET_ENV = "ASCENDPROF_MEMORY_BUDGET_MB"
#: RSS of a worker before it reads anything (interpreter + pyarrow + pandas), bytes
BASE_WORKER_BYTES = 150 << 20
#: peak memory per input byte while a rank is parsed, before any measurement
BYTES_PER_INPUT_BYTE = 3.0


def memory_budget() -> int:
    """Bytes all workers together may use: ``$ASCENDPROF_MEMORY_BUDGET_MB`` or 60 % of
    MemAvailable (/proc/meminfo), 4 GiB when neither is known."""
    env = os.environ.get(BUDGET_ENV)
    if env:
        try:
            return max(1, int(float(env) * (1 << 20)))
        except ValueError:
            pass
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024 * 6 // 10
    except OSError:
        pass
    return 4 << 30


def input_bytes(source) -> int:
    """Total size of the files the scanner listed for ``source`` (0 when unknown)."""
    total = 0
    for rel in getattr(source, "files", ()):  # tests map plain values too
        try:
            total += os.path.getsize(os.path.join(source.path, rel))
        except OSError:
            pass
    return total


def estimate_peak(source) -> int:
    """Bytes one worker is expected to need for ``source`` before anything was measured."""
    return BASE_WORKER_BYTES + int(BYTES_PER_INPUT_BYTE * input_bytes(source))


def plan_workers(sources, workers: int | None = None, budget: int | None = None) -> int:
    """Worker processes for ``sources``: ``workers`` if given, else cores, capped by the number
    of sources and by ``budget // estimated peak of the largest source`` (at least 1)."""
    sources = list(sources)
    if not sources:
        return 1
    n = workers or (os.cpu_count() or 1)
    n = min(n, len(sources))
    if workers:
        return max(1, n)
    budget = budget if budget is not None else memory_budget()
    peak = max(estimate_peak(s) for s in sources)
    return max(1, min(n, budget // max(1, peak)))


def peak_rss_bytes() -> int:
    """This process's peak resident set size so far, in bytes."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024


def release_free_heap() -> None:
    """Hand the C heap's and Arrow's memory pool's free pages back to the OS (glibc
    ``malloc_trim``, ``MemoryPool.release_unused``).

    The cluster step runs phases whose transient objects (verdict split, matrix dicts) are
    freed but stay in the process's heap; trimming between phases keeps one phase's garbage
    from adding to the next one's peak (measured: 238 -> 220 MB at 256 ranks)."""
    import pyarrow as pa  # lazy: the CLI imports this module at start-up (`--help`)

    # Arrow's own allocator (mimalloc) keeps freed pages too: 0.25 GB at 10^6 steps
    pa.default_memory_pool().release_unused()
    if not sys.platform.startswith("linux"):
        return
    try:  # the process's own symbols (not ctypes.util.find_library, which forks ldconfig)
        ctypes.CDLL(None).malloc_trim(0)
    except (OSError, AttributeError):  # not glibc (musl has no malloc_trim)
        pass


def _measured(fn, source, **kwargs):
    """Run ``fn(source, **kwargs)`` in a worker; return (result, worker peak RSS bytes)."""
    result = fn(source, **kwargs)
    return result, peak_rss_bytes()


def local_map(fn, sources, *, tables_dir=None, workers=None, progress=None, budget=None,
              on_result=None, **kwargs):
    """``[fn(s, tables_dir=tables_dir, **kwargs) for s in sources]`` in a process pool, results
    in input order.

    ``workers`` (default: :func:`plan_workers`) is the pool size; the number of ranks in flight
    then adapts to the measured peak RSS per rank so that it stays under ``budget`` bytes
    (default :func:`memory_budget`). ``progress`` is called with no argument after each
    finished source; ``on_result`` with each result as it arrives (before the others finish).
    Exceptions raised by ``fn`` propagate.
    """
    sources = list(sources)
    call = partial(fn, tables_dir=tables_dir, **kwargs)
    budget = budget if budget is not None else memory_budget()
    workers = plan_workers(sources, workers, budget) if not workers else min(workers, len(sources))
    if workers <= 1 or len(sources) <= 1:
        out = []
        for s in sources:
            out.append(call(s))
            if on_result:
                on_result(out[-1])
            if progress:
                progress()
        return out
    results: list = [None] * len(sources)
    peak = max(estimate_peak(s) for s in sources)
    # in flight: up to two per worker, so a worker finds its next rank queued instead of
    # waiting for the parent's round trip; the executor still runs only ``workers`` at once
    limit = 2 * workers
    pool = _pool(workers)
    try:
        pending: dict = {}
        next_i = 0
        while next_i < len(sources) or pending:
            while next_i < len(sources) and len(pending) < limit:
                fut = pool.submit(_measured, fn, sources[next_i], tables_dir=tables_dir, **kwargs)
                pending[fut] = next_i
                next_i += 1
            done, _ = wait(pending, return_when=FIRST_COMPLETED)
            for fut in done:
                i = pending.pop(fut)
                results[i], measured = fut.result()
                if on_result:
                    on_result(results[i])
                peak = max(measured, BASE_WORKER_BYTES)
                limit = max(1, min(workers, budget // peak))  # ranks that fit at once
                limit = 2 * limit if limit == workers else limit
                if progress:
                    progress()
    except BaseException:  # Ctrl-C, SIGTERM, a failed rank: stop the workers now
        _stop(pool)
        raise
    pool.shutdown(wait=True)
    return results


def _pool(workers: int) -> ProcessPoolExecutor:
    """A pool whose workers die with this process (:func:`lifetime.worker_init`). Forked on
    Linux (the workers share the modules :func:`pipeline.preload` imported, and their parent is
    this process, which their death signal is tied to)."""
    ctx = None
    if sys.platform.startswith("linux"):
        import multiprocessing

        ctx = multiprocessing.get_context("fork")
    return ProcessPoolExecutor(max_workers=workers, mp_context=ctx, initializer=worker_init,
                               initargs=(os.getpid(),))


#: set once a pool was stopped mid-run (:func:`_stop`); see :func:`pool_abandoned`
_abandoned = False


def pool_abandoned() -> bool:
    """True once a process pool of this process was stopped mid-run (Ctrl-C, SIGTERM, a failed
    rank). Its manager thread may then never end: a worker terminated while writing its result
    leaves half a message in the result pipe, which the thread waits on forever, and the
    interpreter joins that thread at exit. The command line then leaves with os._exit after
    its clean-up (cli.main.run)."""
    return _abandoned


def _stop(pool: ProcessPoolExecutor) -> None:
    """Cancel what is queued and end the running workers instead of waiting for their ranks
    (shutdown(wait=True) would let a rank of minutes finish first)."""
    global _abandoned
    _abandoned = True
    procs = list((getattr(pool, "_processes", None) or {}).values())
    pool.shutdown(wait=False, cancel_futures=True)
    for p in procs:
        try:
            p.terminate()
        except (OSError, ValueError, AttributeError):
            pass
    for p in procs:
        try:
            p.join(timeout=5)
        except (OSError, ValueError, AttributeError, AssertionError):
            pass


def dask_map(fn, sources, *, tables_dir=None, scheduler=None, on_result=None, **kwargs):
    """``[fn(s, tables_dir=tables_dir, **kwargs) for s in sources]`` on a Dask distributed
    cluster, results in input order.

    ``scheduler`` is the scheduler address (``tcp://host:8786``) or a ``distributed.Client``;
    None starts a local in-process cluster (threads, in-process transport, no sockets). ``tables_dir`` must be a
    path every worker can write (shared file system) when the workers are on other hosts; the
    sources' paths must be readable there too. Raises ImportError when ``dask[distributed]`` is
    not installed; exceptions raised by ``fn`` propagate. ``on_result`` is called with each
    result as it arrives.
    """
    from distributed import as_completed, Client

    sources = list(sources)
    if not sources:
        return []
    own = not isinstance(scheduler, Client)
    if isinstance(scheduler, Client):
        client = scheduler
    elif scheduler:
        client = Client(scheduler)
    else:
        client = Client(processes=False, dashboard_address=None)  # inproc://, no sockets
    try:
        futures = client.map(fn, sources, tables_dir=tables_dir, pure=False, **kwargs)
        index = {f.key: i for i, f in enumerate(futures)}
        results: list = [None] * len(futures)
        done = as_completed(futures)
        # as_completed holds each future only until it yields it: with no other reference,
        # a rank's result leaves the worker's memory once the client has it (a list of every
        # future would keep all of them on the workers to the end)
        del futures
        for fut in done:
            i = index.pop(fut.key)
            results[i] = fut.result()
            fut.release()
            del fut
            if on_result:
                on_result(results[i])
        return results
    finally:
        if own:
            client.close()
