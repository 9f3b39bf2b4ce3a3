"""The files of an ``ascendprof analyse`` output directory, read back for the HTML report.

The page is built from these files only, so ``analyse`` and ``ascendprof report OUT_DIR`` make
the same page and every number on it is one the CSV/JSON outputs hold. A file that is absent
(an analysis the data did not allow, or an output of an older ascendprof) leaves its attribute
``None``; the section that needs it then says so.

Frames keep the files' own column names and units (µs in the CSVs, ms / MB / GB/s in the
communication JSONs). Raises :class:`~ascendprof.model.errors.UsageError` when ``out`` is not
an analysis output directory (no summary.json and no cluster_step_trace_time.csv) or naming the
file when one cannot be parsed (exit code 2, as for the gate's unreadable inputs).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import orjson
import pandas as pd

from ascendprof.model.errors import UsageError
from ascendprof.model.outputs import (COMMUNICATION_FILE, GROUPS_FILE, MATRIX_FILE,
                                      OP_STATISTICS_FILE, STEP_TRACE_FILE, SUMMARY_FILE)
from ascendprof.report import readback
from ascendprof.report.bounded import source_column
from ascendprof.report.html.common import MAX_STEPS, MAX_TABLE_ROWS
# the layouts of the files read back, re-exported for the page's sections
from ascendprof.report.readback import (LINK_COLUMNS, TOTAL_COLUMNS,  # noqa: F401
                                        communication_totals, group_names, matrix_links_file)

#: what each attribute of :class:`ReportData` is read from (only what a section shows:
#: step_trace_check.csv, ~10 MB of CSV at 4096 ranks, is not)
FILES = {
    "step_trace": STEP_TRACE_FILE,
    "matrix": MATRIX_FILE,
    "communication": COMMUNICATION_FILE,
    "groups": GROUPS_FILE,
    "op_stats": OP_STATISTICS_FILE,
    "top_kernels": "top_kernels.csv",
    "verdicts": "verdicts.json",
    "problems": "problems.csv",
    "summary": SUMMARY_FILE,
    "pipeline": "pipeline.csv",
    "pipeline_stages": "pipeline_stages.csv",
    "memory_summary": "memory_summary.csv",
    "memory_top_ops": "memory_top_ops.csv",
    "advice": "advice.json",
    "iteration_trace": "iteration_trace.csv",
    "data_preparation": "data_preparation.csv",
    "dataset_pipeline": "dataset_pipeline.csv",
    "moe_expert_load": "moe_expert_load.csv",
    **{n: f"{n}.csv" for n in ("op_efficiency", "op_efficiency_steps", "idle_breakdown",
                               "dispatch", "dispatch_steps", "late_arrivals",
                               "collective_bandwidth", "link_bandwidth")},
}


@dataclass
class ReportData:
    """Everything the page shows, as read from ``out``.

    - ``links``: :data:`LINK_COLUMNS`, from cluster_communication_matrix.json;
    - ``comm_totals``: :data:`TOTAL_COLUMNS`, from cluster_communication.json;
    - ``group_names``: group id (the profiler's hash, as after ``@`` in op keys) ->
      parallel-group name (``pp``, ``dp`` …; the group id when the profiler wrote none);
    - every other file of :data:`FILES` by its attribute name (``d.step_trace``,
      ``d.verdicts`` …), None when absent: a CSV as a DataFrame (cluster_step_trace_time.csv's
      ``Index`` as text: rank number or the stage's rank tuple), a JSON as parsed.
    """

    out: Path
    present: dict[str, Path] = field(default_factory=dict)
    links: pd.DataFrame | None = None
    comm_totals: pd.DataFrame | None = None
    group_names: dict[str, str] = field(default_factory=dict)
    #: the other files read back, by attribute name
    files: dict = field(default_factory=dict)

    def __getattr__(self, name: str):
        if name in FILES:
            return self.__dict__.get("files", {}).get(name)
        raise AttributeError(name)

    def has(self, attr: str) -> bool:
        v = getattr(self, attr)
        return v is not None and (len(v) > 0 if hasattr(v, "__len__") else True)

    def rank_rows(self) -> pd.DataFrame | None:
        """The ``Type == rank`` rows of cluster_step_trace_time.csv with an int ``Rank``."""
        st = self.step_trace
        if st is None or not len(st):
            return None
        r = st[st["Type"].astype(str) == "rank"].copy()
        r["Rank"] = pd.to_numeric(r["Index"], errors="coerce")
        return r.dropna(subset=["Rank"]).astype({"Rank": int})

    def stage_of(self) -> dict[int, int]:
        """Rank -> pipeline stage (``PP Index`` of cluster_step_trace_time.csv; 0 without it)."""
        rows = self.rank_rows()
        if rows is None:
            return {}
        pp = pd.to_numeric(rows.get("PP Index", pd.Series(0, index=rows.index)), errors="coerce")
        return {int(r): (0 if pd.isna(p) else int(p)) for r, p in zip(rows["Rank"], pp)}

    def ranks(self) -> list[int]:
        """Every rank the analysis read (summary.json sources, else the step trace's ranks)."""
        got = {int(r) for r in source_column(self.summary, "rank") if r is not None}
        rows = self.rank_rows()
        if rows is not None:
            got.update(int(r) for r in rows["Rank"])
        return sorted(got)


def load(out: Path) -> ReportData:
    """Read the output directory ``out`` (see the module docstring for errors)."""
    out = Path(out)
    if not out.is_dir():
        raise UsageError(f"{out}: no such directory (give the output directory of "
                         f"`ascendprof analyse`)")
    present = {a: out / f for a, f in FILES.items() if (out / f).is_file()}
    if "summary" not in present and "step_trace" not in present:
        raise UsageError(f"{out}: not an ascendprof analyse output (no summary.json and no "
                         f"cluster_step_trace_time.csv)")
    d = ReportData(out=out, present=present)
    for attr, path in present.items():
        try:
            if attr == "matrix":
                d.links = matrix_links_file(path)
            elif attr == "communication":
                d.comm_totals = communication_totals(path)
            elif path.suffix == ".json":
                d.files[attr] = orjson.loads(path.read_bytes())
            elif attr == "step_trace":
                d.files[attr] = readback.read_step_frame(path, MAX_STEPS, MAX_TABLE_ROWS)
            else:
                d.files[attr] = readback.read_frame(path)
        except (orjson.JSONDecodeError, json.JSONDecodeError, ValueError, KeyError,
                TypeError, AttributeError, UnicodeDecodeError) as e:
            raise UsageError(f"{path}: cannot be read for the report ({type(e).__name__}: "
                             f"{e})") from None
    try:
        d.group_names = group_names(d.groups)
    except (ValueError, TypeError, AttributeError) as e:
        raise UsageError(f"{present['groups']}: cannot be read for the report "
                         f"({type(e).__name__}: {e})") from None
    for frame in (d.links, d.comm_totals):
        if frame is not None and len(frame):
            frame["Group"] = [d.group_names.get(g, g) for g in frame["Group Id"]]
    return d
