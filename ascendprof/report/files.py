"""Write a ClusterAnalysis to an output directory: every file atomic.

File names and columns are the ones the ecosystem already reads (msprof-analyze, MindStudio
Insight): cluster_step_trace_time.csv, cluster_communication.json,
cluster_communication_matrix.json, communication_group.json; plus ascendprof's own
op_statistics.csv, top_kernels.csv, step_trace_check.csv, iteration_trace.csv (graph-mode
iteration trace: interval / fp+bp / tail per rank), verdicts.json, advice.json / advice.csv
(what to change, docs/advice.md), problems.csv and summary.json.
"""

from __future__ import annotations

import gc
import os
import signal
import sys
import threading
from pathlib import Path

import orjson

from ascendprof.model.outputs import (  # noqa: F401 - OUTPUT_FILES: the registry, re-exported
    COMMUNICATION_FILE, GROUPS_FILE, MATRIX_FILE, OP_STATISTICS_FILE, OUTPUT_FILES,
    STEP_TRACE_FILE, SUMMARY_FILE)
from ascendprof.sysio.atomic import write_csv, write_frame_csv, write_frames_csv, write_json
from ascendprof.sysio.jsonstream import write_json_items
from ascendprof.sysio.lifetime import die_with_parent

PROBLEM_COLUMNS = ["Rank", "Severity", "Path", "Where", "Reason", "Affects"]


def not_written(ca) -> dict[str, str]:
    """The standard outputs this analysis cannot produce, each with the reason (for the summary).

    Profiler levels are named only for sources that have one (torch_npu / MindSpore
    ``profiler_level``); legacy MindSpore and raw CANN collections have no such level."""
    why = {}
    levels = sorted({s.profiler_level for s in ca.sources if s.profiler_level})
    lvl = f" (profiler level {', '.join(levels)})" if levels else ""
    level0 = any(str(v).strip().lower() == "level0" for v in levels)
    if ca.cluster_step_trace is None or not len(ca.cluster_step_trace):
        it = ca.iteration_trace
        why["cluster_step_trace_time.csv"] = (
            "no rank has the profiler's step breakdown (step_trace_time.csv, analysis.db "
            "StepTraceTime or MindSpore's ascend_cluster_analyse)"
            + ("; the graph-mode iteration trace is in iteration_trace.csv"
               if it is not None and len(it) else ""))
    if not ca.communication:
        why["cluster_communication.json"] = ("no rank has communication data (communication.json "
                                             f"or analysis.db){lvl}"
                                             + ("; Level0 does not collect it" if level0 else ""))
        if not ca.communication_group:
            why["communication_group.json"] = why["cluster_communication.json"]
    if not ca.communication_matrix:
        why["cluster_communication_matrix.json"] = ("no rank has communication_matrix.json or "
                                                    f"CommAnalyzerMatrix{lvl}")
    if ca.op_statistics is None or not len(ca.op_statistics):
        has_kernels = ca.top_kernels is not None and len(ca.top_kernels)
        why["op_statistics.csv"] = (
            ("no kernel carries an op type" + (" (Level0 collections write 'N/A')" if level0
                                               else "")
             + "; top_kernels.csv groups kernels by name instead") if has_kernels
            else "no rank has kernels")
    if ca.top_kernels is None or not len(ca.top_kernels):
        why["top_kernels.csv"] = "no rank has kernels (kernel_details.csv, db TASK, op_summary)"
    return why


#: the smallest cluster_communication.json (its OPINFO bytes) written by a child process: the
#: fork costs the parent ~0.1 s at LLM-size memory; the file takes ~0.1 s per 50 MB to write
#: (measured: 62 MB at 64 ranks gain 0.15 s, 15 MB at 16 ranks neither gain nor lose)
EARLY_MIN_BYTES = 16 << 20


class EarlyWrite:
    """cluster_communication.json written while the cluster step goes on.

    It is the largest output (hundreds of MB at 256 ranks, ~0.5 s to assemble and write) and
    does not depend on the verdicts, so on Linux, when it is large, a forked child process
    writes it from ``ca.communication`` (its chunks read back from the spill file, which the
    child shares) while this process derives the verdicts on the other core. The child writes
    to a hidden name; :meth:`finish` waits for it and puts the file in place, so a run that
    fails before then leaves the previous run's file. When the child failed, or cannot be
    forked (or another thread runs, whose locks a child could inherit held), or on another
    system, the file is written in this process instead, so an error surfaces as it would
    have there. Call :meth:`cancel` when the run fails before :meth:`finish`.

    Flush any buffered file the child may also touch (the spill) before creating one.
    """

    def __init__(self, ca, out: Path, min_bytes: int | None = None):
        """``min_bytes`` (default :data:`EARLY_MIN_BYTES`): a smaller file is written in this
        process when finished (``ca.communication.opinfo_bytes``)."""
        self._ca, self._path, self._pid = ca, Path(out) / COMMUNICATION_FILE, None
        self._hidden = Path(out) / f".{COMMUNICATION_FILE}.{os.getpid()}.early"
        least = EARLY_MIN_BYTES if min_bytes is None else min_bytes
        if not ca.communication or not sys.platform.startswith("linux") \
                or getattr(ca.communication, "opinfo_bytes", 0) < least:
            return
        if threading.active_count() > 1:  # a thread could hold a lock the child would need
            return
        sys.stdout.flush()
        sys.stderr.flush()
        parent = os.getpid()
        try:
            pid = os.fork()
        except OSError:
            return
        if pid == 0:  # the child: write, then leave without running the parent's exit code
            code = 1
            try:
                signal.signal(signal.SIGTERM, _exit_on_signal)  # cancel: remove the temp file

                die_with_parent(parent, signal.SIGTERM)  # and stop when the run is killed
                gc.disable()  # short-lived; a collection would copy the parent's pages
                _write_communication(ca, self._hidden)
                code = 0
            except BaseException:  # noqa: BLE001 - the parent writes it again and reports
                pass
            finally:
                os._exit(code)
        self._pid = pid

    @property
    def forked(self) -> bool:
        """True while a child process is writing the file."""
        return self._pid is not None

    def finish(self) -> list[Path]:
        """Wait for the file; returns ``[path]`` (``[]`` when there is no communication data).
        Raises what writing it in this process raises when the child did not succeed."""
        if not self._ca.communication:
            return []
        if self._pid is not None:
            _, status = os.waitpid(self._pid, 0)
            self._pid = None
            if os.waitstatus_to_exitcode(status) == 0:
                os.replace(self._hidden, self._path)
                return [self._path]
            self._remove_hidden()
        return [_write_communication(self._ca, self._path)]

    def cancel(self) -> None:
        """Stop the child, if any, wait for it (it removes its temporary file) and remove what
        it wrote: the output keeps the previous run's file."""
        if self._pid is not None:
            try:
                os.kill(self._pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            os.waitpid(self._pid, 0)
            self._pid = None
            self._remove_hidden()

    def _remove_hidden(self) -> None:
        try:
            os.unlink(self._hidden)
        except FileNotFoundError:
            pass


def _exit_on_signal(*_):
    raise SystemExit(1)


def _write_communication(ca, path: Path) -> Path:
    return write_json_items(path, ca.communication.items_json())  # one group at a time


def write_outputs(ca, out: Path, summary: dict, early: EarlyWrite | None = None) -> list[Path]:
    """Write every result of ``ca`` (a pipeline.ClusterAnalysis) under ``out``; ``early``: the
    :class:`EarlyWrite` already writing cluster_communication.json, waited for here.

    A result the data did not allow (e.g. no communication files at Level0) is not written.
    ``out`` is meant to be a fresh staging directory (engine.outdir): a file of an earlier run
    is removed there, by the manifest, never here. Returns the written paths.
    """
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []

    def frame(name, df):
        if df is not None and len(df):
            written.append(write_frames_csv(out / name, df.frames()) if hasattr(df, "frames")
                           else write_frame_csv(out / name, df))

    def js(name, obj):
        # cluster files compact, as msprof-analyze writes them (no indentation: a 256-rank
        # cluster_communication.json is hundreds of MB); members streamed one at a time
        if not obj:
            return
        if hasattr(obj, "items_json"):
            items = obj.items_json()
        else:
            opt = orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS
            items = ((k, orjson.dumps(v, option=opt)) for k, v in obj.items())
        written.append(write_json_items(out / name, items))

    frame(STEP_TRACE_FILE, ca.cluster_step_trace)
    communication_at = len(written)  # its place in the list, wherever it was written
    if early is None:
        js(COMMUNICATION_FILE, ca.communication)
    js(MATRIX_FILE, ca.communication_matrix)
    js(GROUPS_FILE, ca.communication_group)
    frame(OP_STATISTICS_FILE, ca.op_statistics)
    frame("top_kernels.csv", ca.top_kernels)
    frame("step_trace_check.csv", ca.step_trace_check)
    frame("iteration_trace.csv", ca.iteration_trace)
    for name, df in ca.csv_files.items():
        frame(name, df)
    written.append(write_json(out / "verdicts.json", {
        "verdicts": ca.verdicts, "thresholds": ca.thresholds,
        "problems": [p.as_dict() for p in ca.problems]}))
    if ca.advice is not None:  # --advice off writes neither (and removes an older run's)
        from ascendprof.analyze.advice import CSV_COLUMNS, csv_rows

        written.append(write_json(out / "advice.json", ca.advice))
        written.append(write_csv(out / "advice.csv", CSV_COLUMNS, csv_rows(ca.advice)))
    written.append(write_csv(out / "problems.csv", PROBLEM_COLUMNS, [
        ["" if p.rank is None else p.rank, p.severity, p.path, p.where, p.reason,
         ";".join(p.affects)] for p in ca.problems]))
    written.append(write_json(out / SUMMARY_FILE, summary))
    if early is not None:
        written[communication_at:communication_at] = early.finish()
    return written
