"""``ascendprof timeline DIR``: all ranks on one timeline (logic in engine/timeline.py).

Only click is imported at module level so ``ascendprof --help`` stays fast.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from ascendprof import api
from ascendprof.engine.outdir import check_output_dir
from ascendprof.model.errors import EXIT_OK, UsageError
from ascendprof.sysio.lifetime import stdout_may_close

_SIZE_UNITS = {"": 1, "B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9}


def _parse_ranks(text: str | None) -> set[int] | None:
    """'0,2,4-7' -> {0, 2, 4, 5, 6, 7}."""
    if not text:
        return None
    out: set[int] = set()
    try:
        for part in text.replace(" ", "").split(","):
            if not part:
                continue
            lo, sep, hi = part.partition("-")
            out.update(range(int(lo), int(hi) + 1) if sep else [int(lo)])
    except ValueError:
        raise click.BadParameter(f"{text!r}: expected ranks like 0,2,4-7") from None
    return out


def _parse_size(text: str) -> int:
    t = text.strip().upper().replace(" ", "")
    num = t.rstrip("KMGB")
    unit = t[len(num):]
    try:
        return int(float(num) * _SIZE_UNITS[unit])
    except (ValueError, KeyError):
        raise click.BadParameter(f"{text!r}: expected a size like 500MB or 2GB") from None


@click.command()
@click.argument("directory", type=click.Path(path_type=Path))
@click.option("-o", "--output", "out", type=click.Path(path_type=Path), default=None,
              help="Trace file to write [default: cluster_trace.json, or cluster_trace.pftrace "
                   "with --format perfetto].")
@click.option("--format", "fmt", type=click.Choice(["chrome", "perfetto"]), default="chrome",
              show_default=True,
              help="Chrome trace JSON (chrome://tracing, Perfetto UI) or "
                   "Perfetto protobuf (smaller, exact nanosecond timestamps).")
@click.option("--ranks", "ranks_text", metavar="LIST", default=None,
              help="Only these ranks, e.g. 0,2,4-7.")
@click.option("--steps", "steps_text", metavar="LIST", default=None,
              help="Only events of these steps (Step Id), e.g. 15,16.")
@click.option("--window", metavar="START:END", default=None,
              help="Only events overlapping this window, in ms from the collection's first "
                   "event (either side may be left empty).")
@click.option("--align-clocks", is_flag=True,
              help="Shift each rank by its measured clock offset so that the members of every "
                   "collective end together (see the skew printed without it).")
@click.option("--max-size", default="2GB", show_default=True, metavar="SIZE",
              help="Refuse to write a trace estimated above this size; narrow it with --ranks, "
                   "--steps or --window.")
@click.option("--workers", type=click.IntRange(min=1), default=None,
              help="Worker processes for reading ranks.")
@click.option("--quiet", "-q", is_flag=True, help="No progress bar.")
def command(directory, out, fmt, ranks_text, steps_text, window, align_clocks, max_size,
            workers, quiet):
    """Put every rank of DIRECTORY on one timeline and write it as a trace file.

    One process per rank (named "rank N (stage s, dp d)" when profiler_metadata.json says),
    device tasks on one track per stream, communication ops on a track per communication group,
    and flow arrows joining the members of each collective instance. Timestamps are the
    profiler's local wall-clock times (as the profiler aligned them), numeric and exact; the clock skew that
    remains between ranks is measured on the collectives and printed (--align-clocks removes
    it). Prints the estimated size first and refuses traces above --max-size.
    """
    from ascendprof.engine import timeline as E
    from ascendprof.report import trace

    if not directory.exists():
        raise UsageError(f"{directory}: no such file or directory")
    ranks = _parse_ranks(ranks_text)
    steps = _parse_ranks(steps_text)
    win = E.parse_window(window)
    limit = _parse_size(max_size)
    out = out or Path("cluster_trace.pftrace" if fmt == "perfetto" else "cluster_trace.json")
    check_output_dir(out.resolve().parent, [directory])
    trace.check_target(out, [directory])
    c = api.open(directory, workers=workers)
    if ranks is not None and not set(ranks) & set(c.ranks):
        raise UsageError(f"--ranks {ranks_text}: none of these ranks is under {directory}")
    n_read = len(c.ranks) if ranks is None else len(set(ranks) & set(c.ranks))
    progress, bar = None, None
    if not quiet and n_read > 1:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

        bar = Progress(TextColumn("Reading ranks"), BarColumn(), MofNCompleteColumn(),
                       transient=True, console=Console(stderr=True))
        task = bar.add_task("ranks", total=n_read)
        progress = lambda: bar.advance(task)  # noqa: E731
        bar.start()
    try:
        tl = c.timeline(ranks=ranks, steps=steps, window=win, align=align_clocks,
                        progress=progress)
    finally:
        if bar is not None:
            bar.stop()
    n_ranks = len(tl.names)
    members = sum(len(m) for m in tl.joined)
    size = trace.estimate_bytes(tl.events.num_rows, members, fmt)
    console = _console()

    def echo(*args, **kwargs):  # a reader that went away (| head) does not stop the work
        with stdout_may_close():
            console.print(*args, **kwargs)
    echo(f"{tl.events.num_rows} slices on {n_ranks} rank(s), {len(tl.joined)} collective "
         f"instances joined; estimated size {size / 1e6:.1f} MB")
    if size > limit:
        raise UsageError(f"estimated trace size {size / 1e6:.0f} MB is above --max-size "
                         f"{max_size}; narrow it with --ranks, --steps or --window, or raise "
                         f"--max-size")
    skew = tl.skew
    if skew["instances"]:
        r, w = skew["raw_us"], skew["residual_us"]
        echo(f"clock skew between ranks, measured on {skew['instances']} collectives (end "
             f"times of their members): median {r['median']:.1f} µs, p95 {r['p95']:.1f} µs; "
             f"{'removed by --align-clocks, leaving' if tl.aligned else 'constant offsets explain all but'} "
             f"median {w['median']:.1f} µs, p95 {w['p95']:.1f} µs")
    else:
        echo("clock skew between ranks: not measurable (no collective seen on two ranks)")
    path = E.write(tl, out, fmt, str(directory), [directory])
    echo(f"wrote {path} ({path.stat().st_size / 1e6:.1f} MB)")
    for p in tl.problems:
        echo(f"{p.severity}: {p.line()}", markup=False)
    sys.exit(EXIT_OK)


def _console():
    from rich.console import Console

    return Console(stderr=False, highlight=False, soft_wrap=True)
