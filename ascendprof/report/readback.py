"""Reading back the files of an ``ascendprof analyse`` output directory.

The one place that knows the layouts of our own outputs as a reader: the HTML report
(:mod:`ascendprof.report.html.data`) and the regression gate (:mod:`ascendprof.compare.gate`)
both read them through here. msprof-analyze's ``cluster_analysis_output`` has the same cluster
files (same names, same layouts), so it is read here too.

- ``cluster_step_trace_time.csv`` (spec §8): :func:`read_frame` (the file's columns, µs, as
  text where they are identifiers) or :func:`cluster_step_trace` (the rank rows, int ns);
- ``op_statistics.csv``: :func:`read_frame` or :func:`op_statistics` (per-rank rows, int ns);
- ``cluster_communication.json`` (§8, §A.5): :func:`communication_entries` (every op entry of
  the file, parsed whole) and :func:`communication_totals` (only the ``Total Op Info@<group>``
  members, found without parsing the rest: the file is hundreds of MB at 256 ranks);
- ``cluster_communication_matrix.json`` (§A.6): :func:`matrix_links` / :func:`matrix_links_file`;
- ``communication_group.json``: :func:`parallel_groups`, :func:`group_names`;
- ``tables/rank<r>/<table>.parquet``: :func:`rank_table_dirs`, :func:`read_rank_tables`.

Errors: the readers of the CSV/JSON files raise :class:`~ascendprof.model.errors.InputError`
naming the file (or let the JSON/CSV library's error through where a caller words it, as
documented per function).
"""

from __future__ import annotations

import codecs
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from ascendprof.model import schemas as S
from ascendprof.model.errors import InputError
from ascendprof.model.outputs import GROUPS_FILE
from ascendprof.model.units import us_column_to_ns
from ascendprof.sysio.csvsafe import csv_unsafe
from ascendprof.sysio.textio import read_csv, read_json

#: the folder of the normalised tables (``tables/rank<r>/<table>.parquet``)
TABLES_DIR = "tables"

#: prefix of the per-group sums in cluster_communication*.json (left out of per-op rows)
TOTAL_OP_INFO = "Total Op Info@"


# ============================================================================ CSV files

#: columns read as text by :func:`read_frame` (identifiers: '(0, 1)' stage indices, kernel
#: shapes, NA parallel indices, names)
TEXT_COLUMNS = {"Index": str, "Ranks": str, "Input Shapes": str, "Pipeline": str,
                "Path": str, "Where": str, "Reason": str, "Affects": str, "Note": str,
                "Send": str, "Recv": str, "Name": str, "OP Type": str, "Rank": str,
                "Accelerator Core": str, "Component": str, "Kind": str, "Phase": str,
                "Op Name": str, "Severity": str, "Source": str, "Module": str, "Metric": str,
                "Method": str, "Peak Allocated Operator": str, "Schedule": str,
                "Wait Source": str, "Bottleneck Stage": str, "Bottleneck Operator": str,
                "Evidence": str, "Op Type": str, "Children": str, "Bottleneck": str}


def read_frame(path: Path) -> pd.DataFrame:
    """One of our CSV outputs as written: the file's column names and units; the
    :data:`TEXT_COLUMNS` as text ('' for an empty cell), the others as pandas infers them.
    Raises pandas' ValueError (or UnicodeDecodeError) for a file it cannot parse."""
    return _text_filled(pd.read_csv(path, **_READ_OPTIONS))


#: how our CSV outputs are read back: identifiers as text, only an empty cell is missing
_READ_OPTIONS = dict(dtype=TEXT_COLUMNS, keep_default_na=False, na_values=[""])
if int(pd.__version__.split(".")[0]) < 3:
    # pandas 2's default float parser is not correctly rounded (an absolute time such as
    # 1764246877470477.750 us read as ...477.5); pandas 3's is (and deprecates the option):
    # the page and the comparisons read the same numbers under either
    _READ_OPTIONS["float_precision"] = "round_trip"


def _text_filled(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` with '' for the empty cells of its :data:`TEXT_COLUMNS`."""
    for c in df.columns:
        if c in TEXT_COLUMNS:
            df[c] = df[c].fillna("")
    return df


def read_step_frame(path: Path, steps: int, head: int, chunk_rows: int = 100_000
                    ) -> pd.DataFrame:
    """cluster_step_trace_time.csv as :func:`read_frame` reads it, bounded for the page (a run
    of 10^6 steps writes millions of rows): the rows of the first ``steps`` steps in file
    order, the first ``head`` rows, and the first row of each other (Type, Index), so every
    rank and stage is there once. ``df.attrs``: ``rows`` and ``steps``, the file's counts of
    rows and of distinct steps. Read ``chunk_rows`` at a time. Raises as read_frame."""
    kept, first, seen, every, total = [], {}, set(), set(), 0
    for part in pd.read_csv(path, chunksize=chunk_rows, low_memory=False, **_READ_OPTIONS):
        part = _text_filled(part)
        step = part["Step"].astype(str) if "Step" in part else pd.Series("", index=part.index)
        every.update(step.unique())
        for s in step.unique():
            if len(first) < steps:
                first.setdefault(s, None)
        key = (part["Type"].astype(str) + "|" + part["Index"].astype(str)
               if "Type" in part and "Index" in part else pd.Series("", index=part.index))
        keep = (step.isin(list(first)) | (np.arange(total, total + len(part)) < head)
                | (~key.duplicated() & ~key.isin(seen))).to_numpy()
        seen.update(key[keep])
        kept.append(part[keep])
        total += len(part)
    df = pd.concat(kept, ignore_index=True) if kept else read_frame(path)
    df.attrs.update(rows=total, steps=len(every))
    return df


def cluster_step_trace(path: Path) -> pd.DataFrame:
    """cluster_step_trace_time.csv (msprof-analyze or ascendprof layout, spec §8: ``Step, Type,
    Index`` + the step_trace_time.csv columns in us) -> STEP_TRACE-like frame (``rank, step``
    and the ``*_ns`` columns of :data:`~ascendprof.model.schemas.STEP_METRICS`) from the
    ``Type == rank`` rows; stage rows are left out. A missing metric column is null. Raises
    InputError for a missing required column or a non-number."""
    path = Path(path)
    raw = read_csv(path, required=("Step", "Type", "Index", "Computing"))
    df = raw.to_pandas()
    ranks = df[df["Type"].astype(str).str.strip().str.lower() == "rank"]
    if not len(ranks):
        raise InputError(path, "no rows of Type 'rank'")
    out = pd.DataFrame()
    try:
        out["rank"] = ranks["Index"].astype(str).str.strip().astype(int).to_numpy()
        step = ranks["Step"].astype(str).str.strip()
        out["step"] = pd.to_numeric(step.where(step.str.fullmatch(r"\d+")), errors="coerce"
                                    ).astype("Int64").to_numpy()
    except ValueError as e:
        raise InputError(path, f"column Index: not a rank number ({e})") from None
    for name, col in S.STEP_METRICS:
        if name in ranks.columns:
            try:
                vals = us_column_to_ns(_str_array(ranks[name]))
            except ValueError as e:
                raise InputError(path, f"column {name!r}: {e}") from None
            out[col] = pd.array(vals.to_pylist(), dtype="Int64")
        else:
            out[col] = pd.array([None] * len(out), dtype="Int64")
    return out


def op_statistics(path: Path) -> pd.DataFrame:
    """ascendprof's op_statistics.csv (``Rank, OP Type, Accelerator Core, Count,
    Total Time(us), …``) -> ``rank, op_type, accelerator_core, count, total_ns`` for the per-rank
    rows (the ``cluster`` rows are left out); op types written with a leading quote against
    formula injection get their text back. Raises InputError."""
    path = Path(path)
    raw = read_csv(path, required=("Rank", "OP Type", "Count", "Total Time(us)"),
                   aliases={"Core Type": "Accelerator Core"})
    df = raw.to_pandas()
    df = df[df["Rank"].astype(str).str.strip().str.fullmatch(r"\d+")]
    try:
        total = us_column_to_ns(_str_array(df["Total Time(us)"])).to_pylist()
        count = pd.to_numeric(df["Count"], errors="raise")
    except ValueError as e:
        raise InputError(path, f"not a number: {e}") from None
    return pd.DataFrame({
        "rank": df["Rank"].astype(int).to_numpy(),
        # op types that start like a formula were written with a leading quote (csv_safe)
        "op_type": df["OP Type"].map(csv_unsafe).to_numpy(),
        "accelerator_core": (df["Accelerator Core"] if "Accelerator Core" in df.columns
                             else pd.Series([""] * len(df))).fillna("").to_numpy(),
        "count": count.to_numpy(), "total_ns": total})


def _str_array(s: pd.Series):
    return pa.array(s.astype(object).where(s.notna(), None).tolist(), pa.string())


# ======================================================================== communication_group.json

@dataclass(frozen=True)
class ParallelGroup:
    """One entry of communication_group.json ``comm_group_parallel_info`` (msprof-analyze
    layout): the group id (the profiler's hash, as after ``@`` in op keys), its parallel-group
    name (``pp``, ``dp`` … or ''), the metadata's group id text and its global ranks."""

    group_name: str
    pg_name: str
    group_id: str
    ranks: tuple[int, ...]


def parallel_groups(doc) -> list[ParallelGroup]:
    """communication_group.json (parsed) -> its :class:`ParallelGroup` entries, in file order;
    entries without a ``group_name`` are left out. Raises ValueError / TypeError for a rank
    that is not a number."""
    out = []
    for g in (doc or {}).get("comm_group_parallel_info", []) or []:
        if isinstance(g, dict) and g.get("group_name") is not None:
            out.append(ParallelGroup(str(g["group_name"]), str(g.get("pg_name") or ""),
                                     str(g.get("group_id") or ""),
                                     tuple(sorted(int(r) for r in g.get("rank_set") or []))))
    return out


def group_names(doc) -> dict[str, str]:
    """communication_group.json -> {group id (hash text): parallel-group name, else its group_id,
    else ``ranks a, b, …``}."""
    names = {}
    for g in parallel_groups(doc):
        if g.group_name:
            names[g.group_name] = (g.pg_name or g.group_id or (
                f"ranks {', '.join(map(str, g.ranks))}" if g.ranks else g.group_name))
    return names


def read_groups(out: Path):
    """communication_group.json of ``out`` parsed, or None when absent or unreadable."""
    f = Path(out) / GROUPS_FILE
    if not f.is_file():
        return None
    try:
        return read_json(f)
    except InputError:
        return None


# ====================================================================== cluster_communication.json

def split_op_key(key: str) -> tuple[str, str]:
    """``"<op name>@<group id>"`` -> (op name, group id): the group is what follows the last
    '@'; ``(key, "")`` when there is none."""
    name, at, group = key.rpartition("@")
    return (name, group) if at else (key, "")


@dataclass(frozen=True)
class CommEntry:
    """One op entry of cluster_communication.json: ``{top: {step: {op_key: by_rank}}}``.

    ``top``: the group's rank tuple text (``"(0, 1, 2, 3)"``, 26.x layout) or ``collective`` /
    ``p2p`` (older layout); ``step``: the step key (``step<N>``); ``op_key``:
    ``<op name>@<group id>`` (``Total Op Info@<group id>`` for the per-group sums);
    ``by_rank``: rank text -> that rank's OPINFO (as in its communication.json, §A.5), or
    whatever the file holds there when it is not an object."""

    top: str
    step: str
    op_key: str
    by_rank: object

    @property
    def name(self) -> str:
        return self.op_key.rpartition("@")[0]

    @property
    def group(self) -> str:
        return self.op_key.rpartition("@")[2]

    @property
    def is_total(self) -> bool:
        """A per-group sum (``Total …``), not an op."""
        return self.name.startswith("Total")

    @property
    def ranks(self) -> tuple[int, ...]:
        """The global ranks of the group key (26.x layout); () for ``collective`` / ``p2p``."""
        return tuple(sorted(int(x) for x in re.findall(r"-?\d+", self.top)))


def communication_entries(path: Path) -> Iterator[CommEntry]:
    """Every op entry of cluster_communication.json (msprof-analyze's or ascendprof's), in file
    order, the file parsed whole. Raises InputError naming the file when it is not JSON or a
    level is not an object."""
    doc = read_json(path)
    if not isinstance(doc, dict):
        raise InputError(path, "not a JSON object")
    for top, steps in doc.items():
        if not isinstance(steps, dict):
            raise InputError(path, f"{top!r} is not an object")
        for step_key, ops in steps.items():
            if not isinstance(ops, dict):
                raise InputError(path, f"{top} / {step_key} is not an object")
            for op_key, by_rank in ops.items():
                yield CommEntry(top, step_key, op_key, by_rank)


#: columns of :func:`communication_totals` (one row per rank of a group's 'Total Op Info' in
#: cluster_communication.json: its Communication Time Info)
TOTAL_COLUMNS = ["Group", "Group Id", "Step", "Rank", "Elapse Time(ms)", "Transit Time(ms)",
                 "Wait Time(ms)", "Synchronization Time(ms)", "Idle Time(ms)"]
_TOTAL_RE = re.compile(r'"Total Op Info@([^"]*)"\s*:\s*')
_STEP_RE = re.compile(r'"(step[^"]*)"\s*:\s*\{')
_TIME_FIELDS = TOTAL_COLUMNS[4:]


def communication_totals(path: Path) -> pd.DataFrame:
    """The ``Total Op Info@<group>`` members of cluster_communication.json -> :data:`TOTAL_COLUMNS`
    rows (per group, step and rank: its summed 'Communication Time Info', ms; ``Group`` is the
    group id until a caller names it).

    The file is hundreds of MB at 256 ranks, almost all of it per-op records: parsing it whole
    costs ~10 s and ~1.5 GB. So only those members are decoded: each is found by its key and
    decoded with the standard JSON decoder from there; its step is the nearest step key
    (``"step…": {``, §A.5) before it. The file is read :data:`TOTALS_CHUNK` characters at a
    time (holding it whole as bytes and text was twice its size: ~0.2 GB at 1024 ranks). Works
    on indented (msprof-analyze) and compact (ascendprof) files alike. Raises
    UnicodeDecodeError, json.JSONDecodeError, ValueError or AttributeError for a file that is
    not what it should be.
    """
    rows = []
    for step, gid, members in total_members(path):
        for rank, info in members.items():
            t = (info or {}).get("Communication Time Info", {})
            rows.append((gid, gid, step, int(rank), *(t.get(f) for f in _TIME_FIELDS)))
    return pd.DataFrame(rows, columns=TOTAL_COLUMNS)


def total_members(path: Path) -> Iterator[tuple[str, str, object]]:
    """``(step key, group id, value)`` of every ``"Total Op Info@<group>"`` member of a
    cluster_communication.json or cluster_communication_matrix.json, in file order, without
    parsing the rest: each member is found by its key and decoded with the standard JSON
    decoder from there; its step is the nearest step key (``"step…": {``) before it. The file
    is read :data:`TOTALS_CHUNK` characters at a time. Raises UnicodeDecodeError or
    json.JSONDecodeError for a file that is not JSON text."""
    dec = json.JSONDecoder()
    utf8 = codecs.getincrementaldecoder("utf-8")()
    step, text = "", ""
    with open(path, "rb") as f:
        while True:
            raw = f.read(TOTALS_CHUNK)
            end = not raw
            text += utf8.decode(raw, final=end)
            # a match starting before ``safe`` has its key and members in ``text`` (or the
            # members are decoded again from the next round's text)
            safe = len(text) if end else len(text) - _TOTALS_TAIL
            steps = _STEP_RE.finditer(text)
            nxt = next(steps, None)
            cut = max(safe, 0)
            for m in _TOTAL_RE.finditer(text):
                if m.start() >= safe:
                    break
                while nxt is not None and nxt.start() < m.start():
                    step, nxt = nxt.group(1), next(steps, None)
                try:
                    members, _ = dec.raw_decode(text, m.end())
                except json.JSONDecodeError:
                    if end:
                        raise
                    cut = m.start()  # cut off by the end of what was read: again with more
                    break
                yield step, m.group(1), members
            while nxt is not None and nxt.start() < cut:
                step, nxt = nxt.group(1), next(steps, None)
            if end:
                break
            text = text[cut:]


#: characters of cluster_communication.json read at a time by :func:`communication_totals`
TOTALS_CHUNK = 1 << 23
#: characters kept for the next round: longer than any step key or 'Total Op Info' key (their
#: members may be longer: they are decoded again once the next chunk is read)
_TOTALS_TAIL = 1 << 20


# =============================================================== cluster_communication_matrix.json

#: link columns of :func:`matrix_links` (one row per src→dst link of a group's
#: 'Total Op Info' in cluster_communication_matrix.json)
LINK_COLUMNS = ["Group", "Group Id", "Step", "Src Rank", "Dst Rank", "Transport Type",
                "Transit Time(ms)", "Transit Size(MB)", "Bandwidth(GB/s)"]


def matrix_links(doc: dict) -> pd.DataFrame:
    """cluster_communication_matrix.json (parsed) -> :data:`LINK_COLUMNS` rows, one per src→dst
    link of each group's ``Total Op Info@<group>`` per step (§A.6: link keys ``"src-dst"`` in
    global ranks). Values are the file's, unchanged; ``Group`` is the group id until a caller
    names it."""
    rows = []
    for _group_key, steps in doc.items():
        if not isinstance(steps, dict):
            continue
        for step, ops in steps.items():
            if not isinstance(ops, dict):
                continue
            for op, links in ops.items():
                if op.startswith(TOTAL_OP_INFO):
                    _link_rows(rows, split_op_key(op)[1], str(step), links)
    return pd.DataFrame(rows, columns=LINK_COLUMNS)


def matrix_links_file(path: Path) -> pd.DataFrame:
    """:func:`matrix_links` of the file ``path`` read as a stream (:func:`total_members`): only
    the 'Total Op Info' members are decoded. The file grows with the square of the group size
    when every rank lists a link to every member (all-to-all); parsed whole it was ~6x its
    size in memory. Raises UnicodeDecodeError or json.JSONDecodeError for a file that is not
    JSON text."""
    rows = []
    for step, gid, links in total_members(path):
        _link_rows(rows, gid, step, links)
    return pd.DataFrame(rows, columns=LINK_COLUMNS)


def _link_rows(rows: list, gid: str, step: str, links) -> None:
    if not isinstance(links, dict):
        return
    for link, v in links.items():
        src, sep, dst = str(link).partition("-")
        if not sep or not isinstance(v, dict):
            continue
        try:
            s, t = int(src), int(dst)
        except ValueError:
            continue
        transport = v.get("Transport Type")  # null: not named, as a rank's null is read
        rows.append((gid, gid, step, s, t, "" if transport is None else str(transport),
                     v.get("Transit Time(ms)"), v.get("Transit Size(MB)"),
                     v.get("Bandwidth(GB/s)")))


# ========================================================================================= tables/

def rank_table_dirs(tables: Path) -> list[tuple[int, Path]]:
    """The ``rank<r>`` folders under ``tables`` (an output's ``tables/``), as (rank, folder)
    sorted by folder name; [] when ``tables`` is not a directory."""
    tables = Path(tables)
    if not tables.is_dir():
        return []
    out = []
    for rdir in sorted(tables.iterdir()):
        m = re.fullmatch(r"rank(\d+)", rdir.name)
        if m and rdir.is_dir():
            out.append((int(m.group(1)), rdir))
    return out


def read_rank_tables(rdir: Path, names, columns: dict | None = None,
                     drop: dict | None = None) -> dict[str, pd.DataFrame]:
    """The Parquet tables ``names`` of one ``rank<r>`` folder that exist, as DataFrames:
    ``columns``: table -> the columns to read (all when not given); ``drop``: table -> columns
    not to read. Raises OSError or pyarrow's ArrowInvalid (a ValueError) for an unreadable
    file."""
    out = {}
    for name in names:
        f = Path(rdir) / f"{name}.parquet"
        if not f.is_file():
            continue
        cols = (columns or {}).get(name)
        skip = (drop or {}).get(name)
        if skip and cols is None:
            cols = [c for c in pq.read_schema(f).names if c not in skip]
        out[name] = pq.read_table(f, columns=cols).to_pandas()
    return out
