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

import bisect
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

import orjson
import pandas as pd

from ascendprof.model.errors import UsageError

#: what each attribute of :class:`ReportData` is read from
FILES = {
    "step_trace": "cluster_step_trace_time.csv",
    "matrix": "cluster_communication_matrix.json",
    "communication": "cluster_communication.json",
    "groups": "communication_group.json",
    "op_stats": "op_statistics.csv",
    "top_kernels": "top_kernels.csv",
    "verdicts": "verdicts.json",
    "problems": "problems.csv",
    "summary": "summary.json",
    "step_check": "step_trace_check.csv",
    "pipeline": "pipeline.csv",
    "pipeline_stages": "pipeline_stages.csv",
    "memory_summary": "memory_summary.csv",
    "memory_top_ops": "memory_top_ops.csv",
    "advice": "advice.json",
    "iteration_trace": "iteration_trace.csv",
    "data_preparation": "data_preparation.csv",
    "dataset_pipeline": "dataset_pipeline.csv",
    "moe_expert_load": "moe_expert_load.csv",
}

#: link columns of :attr:`ReportData.links` (one row per src→dst link of a group's
#: 'Total Op Info' in cluster_communication_matrix.json)
LINK_COLUMNS = ["Group", "Group Id", "Step", "Src Rank", "Dst Rank", "Transport Type",
                "Transit Time(ms)", "Transit Size(MB)", "Bandwidth(GB/s)"]
#: columns of :attr:`ReportData.comm_totals` (one row per rank of a group's 'Total Op Info' in
#: cluster_communication.json: its Communication Time Info)
TOTAL_COLUMNS = ["Group", "Group Id", "Step", "Rank", "Elapse Time(ms)", "Transit Time(ms)",
                 "Wait Time(ms)", "Synchronization Time(ms)", "Idle Time(ms)"]
TOTAL_OP_INFO = "Total Op Info@"


@dataclass
class ReportData:
    """Everything the page shows, as read from ``out``.

    - ``step_trace``: cluster_step_trace_time.csv (``Index`` as text: rank number or the stage's
      rank tuple);
    - ``links``: :data:`LINK_COLUMNS`, from cluster_communication_matrix.json;
    - ``comm_totals``: :data:`TOTAL_COLUMNS`, from cluster_communication.json;
    - ``group_names``: group id (the profiler's hash, as after ``@`` in op keys) ->
      parallel-group name (``pp``, ``dp`` …; the group id when the profiler wrote none);
    - the other CSVs as DataFrames, the JSONs as parsed.
    """

    out: Path
    present: dict[str, Path] = field(default_factory=dict)
    step_trace: pd.DataFrame | None = None
    links: pd.DataFrame | None = None
    comm_totals: pd.DataFrame | None = None
    groups: dict | None = None
    group_names: dict[str, str] = field(default_factory=dict)
    op_stats: pd.DataFrame | None = None
    top_kernels: pd.DataFrame | None = None
    verdicts: dict | None = None
    problems: pd.DataFrame | None = None
    summary: dict | None = None
    step_check: pd.DataFrame | None = None
    pipeline: pd.DataFrame | None = None
    pipeline_stages: pd.DataFrame | None = None
    memory_summary: pd.DataFrame | None = None
    memory_top_ops: pd.DataFrame | None = None
    advice: dict | None = None
    iteration_trace: pd.DataFrame | None = None
    data_preparation: pd.DataFrame | None = None
    dataset_pipeline: pd.DataFrame | None = None
    moe_expert_load: pd.DataFrame | None = None

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
        got = set()
        for s in (self.summary or {}).get("sources", []):
            if s.get("rank") is not None:
                got.add(int(s["rank"]))
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
                d.links = matrix_links(orjson.loads(path.read_bytes()))
            elif attr == "communication":
                d.comm_totals = communication_totals(path)
            elif path.suffix == ".json":
                setattr(d, attr, orjson.loads(path.read_bytes()))
            else:
                setattr(d, attr, _csv(path))
        except (orjson.JSONDecodeError, json.JSONDecodeError, ValueError, KeyError,
                TypeError, AttributeError, UnicodeDecodeError) as e:
            raise UsageError(f"{path}: cannot be read for the report ({type(e).__name__}: "
                             f"{e})") from None
    d.group_names = group_names(d.groups)
    for frame in (d.links, d.comm_totals):
        if frame is not None and len(frame):
            frame["Group"] = [d.group_names.get(g, g) for g in frame["Group Id"]]
    return d


def _csv(path: Path) -> pd.DataFrame:
    # identifiers stay text ('(0, 1)' stage indices, kernel shapes, NA parallel indices)
    text_cols = {"Index": str, "Ranks": str, "Input Shapes": str, "Pipeline": str,
                 "Path": str, "Where": str, "Reason": str, "Affects": str, "Note": str,
                 "Send": str, "Recv": str, "Name": str, "OP Type": str, "Rank": str,
                 "Accelerator Core": str, "Component": str, "Kind": str, "Phase": str,
                 "Op Name": str, "Severity": str, "Source": str, "Module": str, "Metric": str,
                 "Method": str, "Peak Allocated Operator": str, "Schedule": str,
                 "Wait Source": str, "Bottleneck Stage": str, "Bottleneck Operator": str,
                 "Evidence": str, "Op Type": str, "Children": str, "Bottleneck": str}
    df = pd.read_csv(path, dtype=text_cols, keep_default_na=False, na_values=[""])
    for c in df.columns:
        if c in text_cols:
            df[c] = df[c].fillna("")
    return df


def group_names(groups: dict | None) -> dict[str, str]:
    """communication_group.json -> {group id (hash text): parallel-group name, else its group_id,
    else ``ranks a, b, …``}."""
    names = {}
    for g in (groups or {}).get("comm_group_parallel_info", []) or []:
        gid = str(g.get("group_name", ""))
        ranks = g.get("rank_set") or []
        if gid:
            names[gid] = str(g.get("pg_name") or g.get("group_id")
                             or (f"ranks {', '.join(map(str, ranks))}" if ranks else gid))
    return names


def _split_op_key(key: str) -> str:
    return key.rsplit("@", 1)[1] if "@" in key else ""


def matrix_links(doc: dict) -> pd.DataFrame:
    """cluster_communication_matrix.json -> :data:`LINK_COLUMNS` rows, one per src→dst link of
    each group's ``Total Op Info@<group>`` per step (§A.6: link keys ``"src-dst"`` in global
    ranks). Values are the file's, unchanged."""
    rows = []
    for _group_key, steps in doc.items():
        if not isinstance(steps, dict):
            continue
        for step, ops in steps.items():
            if not isinstance(ops, dict):
                continue
            for op, links in ops.items():
                if not op.startswith(TOTAL_OP_INFO) or not isinstance(links, dict):
                    continue
                gid = _split_op_key(op)
                for link, v in links.items():
                    src, sep, dst = str(link).partition("-")
                    if not sep or not isinstance(v, dict):
                        continue
                    try:
                        s, t = int(src), int(dst)
                    except ValueError:
                        continue
                    rows.append((gid, gid, str(step), s, t, str(v.get("Transport Type", "")),
                                 v.get("Transit Time(ms)"), v.get("Transit Size(MB)"),
                                 v.get("Bandwidth(GB/s)")))
    return pd.DataFrame(rows, columns=LINK_COLUMNS)


_TOTAL_RE = re.compile(r'"Total Op Info@([^"]*)"\s*:\s*')
_STEP_RE = re.compile(r'"(step[^"]*)"\s*:\s*\{')
_TIME_FIELDS = TOTAL_COLUMNS[4:]


def communication_totals(path: Path) -> pd.DataFrame:
    """The ``Total Op Info@<group>`` members of cluster_communication.json -> :data:`TOTAL_COLUMNS`
    rows (per group, step and rank: its summed 'Communication Time Info', ms).

    The file is hundreds of MB at 256 ranks, almost all of it per-op records the page does not
    show: parsing it whole costs ~10 s and ~1.5 GB. So only those members are decoded: each is
    found by its key and decoded with the standard JSON decoder from there; its step is the
    nearest step key (``"step…": {``, §A.5) before it. Works on indented (msprof-analyze) and
    compact (ascendprof) files alike.
    """
    text = path.read_bytes().decode("utf-8")
    steps = [(m.start(), m.group(1)) for m in _STEP_RE.finditer(text)]
    starts = [p for p, _ in steps]
    dec = json.JSONDecoder()
    rows = []
    for m in _TOTAL_RE.finditer(text):
        members, _ = dec.raw_decode(text, m.end())
        i = bisect.bisect_right(starts, m.start()) - 1
        step = steps[i][1] if i >= 0 else ""
        gid = m.group(1)
        for rank, info in members.items():
            t = (info or {}).get("Communication Time Info", {})
            rows.append((gid, gid, step, int(rank), *(t.get(f) for f in _TIME_FIELDS)))
    return pd.DataFrame(rows, columns=TOTAL_COLUMNS)
