"""Regression gate: load a baseline and a current result, compare metrics under rules, decide.

Each side may be

- a profiling directory (any layout ``ascendprof scan`` finds: ``*_ascend_pt``, ``*_ascend_ms``,
  ``PROF_*`` …) — read with the project's readers (:func:`load_run`);
- an ``ascendprof analyse`` output directory — ``tables/rank<r>/<table>.parquet`` when present,
  else ``cluster_step_trace_time.csv`` and ``op_statistics.csv`` (any directory holding only
  those CSVs works too, e.g. a committed baseline);
- one exported CSV: ascendprof's or msprof-analyze's ``cluster_step_trace_time.csv`` (spec §8),
  the profiler's ``step_trace_time.csv`` (§A.1), ``kernel_details.csv`` (§A.2),
  ``op_statistic.csv`` (§A.3) or ascendprof's ``op_statistics.csv``.

Everything is reduced to one *observation* table (:data:`OBS_COLUMNS`): one value per metric,
rank, step and key. A :class:`Rule` names a metric, a scope (``cluster``, ``rank``, ``op_type``,
``group``), the allowed relative change and an absolute noise floor; :func:`evaluate` takes the
median over the (rank, step) values of each scope key on each side, reports the spread, and
gives a verdict per check (:data:`CHECK_COLUMNS`).

Errors: every unreadable or incomparable input raises :class:`GateInputError` /
:class:`GateUsageError` (exit code 2).
"""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path

import pandas as pd

from ascendprof.compare.diff import COMM_CORES, COMM_METRICS, STEP_METRICS, GroupLabel, Side, \
    aggregate_kernels, group_labels
from ascendprof.model.errors import AscendProfError, EXIT_USAGE, InputError, UsageError


class GateUsageError(UsageError):
    """Bad gate arguments or rules (exit 2)."""

    exit_code = EXIT_USAGE


class GateInputError(InputError):
    """A gate input that cannot be read or compared (exit 2, not 3: for a CI gate an unusable
    input is a usage/data error, told apart from a regression)."""

    exit_code = EXIT_USAGE


# ============================================================================ metrics and rules

#: Time metrics of the step breakdown (names as in step_trace_time.csv, spec §A.1).
STEP_METRIC_NAMES = tuple(STEP_METRICS)
OP_TIME = "op_time"        #: an op type's total kernel time per step (kernel_details / op_statistic)
BANDWIDTH = "bandwidth"    #: GB/s per transport: Σ Transit Size / Σ Transit Time (spec §7.2)
GROUP_METRICS = tuple(COMM_METRICS)  #: elapse, transit, wait, synchronization, idle per group
METRICS = STEP_METRIC_NAMES + (OP_TIME, BANDWIDTH) + GROUP_METRICS

SCOPES = ("cluster", "rank", "op_type", "group")
#: Which scopes each metric kind allows.
_SCOPES_OF = {**{m: ("cluster", "rank") for m in STEP_METRIC_NAMES},
              OP_TIME: ("op_type", "rank", "cluster"),
              BANDWIDTH: ("group", "rank", "cluster"),
              **{m: ("group", "rank", "cluster") for m in GROUP_METRICS}}

_ALIASES = {"step": "Stage", "step_time": "Stage", "stage": "Stage", "computing": "Computing",
            "comm_not_overlapped": "Communication(Not Overlapped)",
            "communication_not_overlapped": "Communication(Not Overlapped)",
            "overlapped": "Overlapped", "communication": "Communication", "free": "Free",
            "bubble": "Bubble", "preparing": "Preparing",
            "comm_not_overlapped_excl_receive": "Communication(Not Overlapped and Exclude Receive)",
            "op": OP_TIME, "op_type": OP_TIME, "op_type_time": OP_TIME, "bw": BANDWIDTH,
            "sync": "synchronization", "synchronisation": "synchronization"}


def metric_unit(metric: str) -> str:
    """Display unit of a metric: ``"GB/s"`` for bandwidth, ``"ms"`` for every time."""
    return "GB/s" if metric == BANDWIDTH else "ms"


def canonical_metric(name: str) -> str:
    """The metric name for ``name`` (case-insensitive; aliases such as ``step_time``,
    ``computing``, ``comm_not_overlapped``, ``op``). Raises GateUsageError when unknown."""
    n = name.strip()
    for m in METRICS:
        if n.lower() == m.lower():
            return m
    key = re.sub(r"[\s\-]+", "_", n.lower())
    if key in _ALIASES:
        return _ALIASES[key]
    raise GateUsageError(f"unknown gate metric {name!r}; known: {', '.join(METRICS)}")


@dataclass(frozen=True)
class Rule:
    """One gate rule.

    ``limit_pct``: allowed relative change in percent. Positive: a rise beyond it is a
    regression (times). Negative: a drop beyond it is a regression (bandwidth: ``-10``).
    ``floor``: absolute noise floor in the metric's unit (ms for times, GB/s for bandwidth);
    a change whose size is not above it never fails.
    """

    metric: str
    scope: str
    limit_pct: float
    floor: float = 0.0

    @property
    def name(self) -> str:
        return f"{self.metric}@{self.scope}"

    def describe(self) -> str:
        unit = metric_unit(self.metric)
        return f"{self.limit_pct:+g} % (floor {self.floor:g} {unit})"


#: The rules used unless ``defaults = false`` (TOML) / ``--no-defaults``: step time (Stage) +5 %,
#: Computing +5 %, Communication(Not Overlapped) +10 %, Free +10 % (each for the cluster and per
#: rank), any op type's total time per step +20 % and > 1 ms, bandwidth per group and
#: transport −10 %.
DEFAULT_RULES: tuple[Rule, ...] = (
    Rule("Stage", "cluster", 5.0, 0.1), Rule("Stage", "rank", 5.0, 0.1),
    Rule("Computing", "cluster", 5.0, 0.1), Rule("Computing", "rank", 5.0, 0.1),
    Rule("Communication(Not Overlapped)", "cluster", 10.0, 0.5),
    Rule("Communication(Not Overlapped)", "rank", 10.0, 0.5),
    Rule("Free", "cluster", 10.0, 0.5), Rule("Free", "rank", 10.0, 0.5),
    Rule(OP_TIME, "op_type", 20.0, 1.0),
    Rule(BANDWIDTH, "group", -10.0, 0.1),
)


def make_rule(metric: str, scope: str | None = None, limit_pct: float | str = 0.0,
              floor: float | str = 0.0) -> Rule:
    """Validate and build a :class:`Rule` (metric aliases allowed; scope defaults to the
    metric's first allowed scope; ``limit_pct`` may be text like ``"+5%"``; ``floor`` may carry
    its unit: ``"1ms"``, ``"500us"``, ``"0.5GB/s"``). Raises GateUsageError."""
    m = canonical_metric(metric)
    allowed = _SCOPES_OF[m]
    sc = (scope or allowed[0]).strip().lower().replace("-", "_")
    sc = {"per_rank": "rank", "ranks": "rank", "op": "op_type", "op_types": "op_type",
          "groups": "group", "communication_group": "group"}.get(sc, sc)
    if sc not in allowed:
        raise GateUsageError(f"rule {m}: scope {scope!r} not allowed; use one of "
                             f"{', '.join(allowed)}")
    return Rule(m, sc, _number(limit_pct, "limit", pct=True), _floor(floor, m))


def _number(v, what: str, pct: bool = False) -> float:
    """``v`` as a finite float (text with an optional ``%`` when ``pct``). Raises
    GateUsageError for anything else: a bool, a table, NaN or an infinity would make a rule that
    can never fail (``max_change_pct = nan`` let a +50 % regression pass)."""
    if isinstance(v, bool) or isinstance(v, (dict, list)):
        raise GateUsageError(f"gate rule: {what} {v!r} is not a number")
    if isinstance(v, (int, float)):
        out = float(v)
    else:
        s = str(v).strip().replace(" ", "")
        if pct:
            s = s.rstrip("%")
        try:
            out = float(s)
        except ValueError:
            raise GateUsageError(f"gate rule: {what} {v!r} is not a number") from None
    if not math.isfinite(out):
        raise GateUsageError(f"gate rule: {what} {v!r} is not a finite number")
    return out


def _floor(v, metric: str) -> float:
    out = None
    if isinstance(v, str):
        s = v.strip().replace(" ", "")
        for suffix, factor in (("GB/s", 1.0), ("ms", 1.0), ("us", 1e-3), ("ns", 1e-6),
                               ("s", 1e3)):
            if s.lower().endswith(suffix.lower()):
                if (suffix == "GB/s") != (metric == BANDWIDTH):
                    raise GateUsageError(f"gate rule {metric}: floor {v!r} has the wrong unit "
                                         f"(use {metric_unit(metric)})")
                out = _number(s[: -len(suffix)], "floor") * factor
                break
    if out is None:
        out = _number(v, "floor")
    if out < 0:
        raise GateUsageError(f"gate rule {metric}: floor {v!r} is negative")
    return out


_RULE_RE = re.compile(r"^\s*(?P<metric>[^@=]+?)\s*(?:@\s*(?P<scope>[\w\-]+))?\s*=\s*"
                      r"(?P<limit>[+-]?[\d.]+)\s*%?\s*(?:,\s*floor\s*=\s*(?P<floor>[^,]+))?\s*$")


def parse_rule(text: str) -> Rule:
    """``--rule`` text: ``METRIC[@SCOPE]=LIMIT%[,floor=FLOOR]``, e.g. ``Stage@cluster=+5%``,
    ``op_time@op_type=+20%,floor=1ms``, ``bandwidth@group=-10%``. Raises GateUsageError."""
    m = _RULE_RE.match(text)
    if not m:
        raise GateUsageError(f"--rule {text!r}: expected METRIC[@SCOPE]=LIMIT%[,floor=FLOOR]")
    return make_rule(m["metric"], m["scope"], m["limit"], m["floor"] or 0.0)


#: Keys a [[rule]] table may have (the long and the short spellings).
_RULE_KEYS = {"metric", "scope", "max_change_pct", "limit_pct", "limit", "noise_floor", "floor"}


def load_rules_toml(path: Path) -> tuple[list[Rule], bool]:
    """Rules from a TOML file; returns ``(rules, use_defaults)``.

    Layout::

        defaults = true            # keep DEFAULT_RULES (a file rule with the same metric and
                                   # scope replaces the default one); false = only these rules
        [[rule]]
        metric = "Stage"           # see METRICS; aliases such as "step_time" work
        scope = "cluster"          # cluster | rank | op_type | group
        max_change_pct = 5         # allowed relative change; negative = allowed drop
        noise_floor = "0.1ms"      # number in ms (GB/s for bandwidth) or with a unit

    Raises GateUsageError for an unreadable file, bad TOML or a bad rule.
    """
    try:
        import tomllib  # Python 3.11+
    except ModuleNotFoundError:  # pragma: no cover - Python 3.10
        import tomli as tomllib
    path = Path(path)
    try:
        doc = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise GateUsageError(f"{path}: cannot read rules: {e.strerror or e}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise GateUsageError(f"{path}: invalid TOML: {e}") from None
    rules = []
    unknown = sorted(set(doc) - {"defaults", "rule", "rules"})
    if unknown:
        raise GateUsageError(f"{path}: unknown key(s) {', '.join(unknown)} (known: defaults, "
                             f"[[rule]])")
    if not isinstance(doc.get("defaults", True), bool):
        raise GateUsageError(f"{path}: defaults = {doc['defaults']!r}: use true or false")
    entries = doc.get("rule", doc.get("rules", []))
    if not isinstance(entries, list):
        raise GateUsageError(f"{path}: rule = {entries!r}: rules are tables, written as "
                             f"[[rule]] blocks with metric, scope, max_change_pct, noise_floor")
    for i, r in enumerate(entries):
        if not isinstance(r, dict) or "metric" not in r:
            raise GateUsageError(f"{path}: rule {i + 1} needs at least 'metric' ([[rule]] "
                                 f"blocks with metric, scope, max_change_pct, noise_floor)")
        extra = sorted(set(r) - _RULE_KEYS)
        if extra:
            raise GateUsageError(f"{path}: rule {i + 1}: unknown key(s) {', '.join(extra)} "
                                 f"(known: {', '.join(sorted(_RULE_KEYS))})")
        limit = r.get("max_change_pct", r.get("limit_pct", r.get("limit")))
        if limit is None:
            raise GateUsageError(f"{path}: rule {i + 1} ({r['metric']}) needs max_change_pct")
        try:
            if not isinstance(r["metric"], str) or not isinstance(r.get("scope", ""), str):
                raise GateUsageError(f"metric and scope are names, not {r['metric']!r}")
            rules.append(make_rule(r["metric"], r.get("scope"), limit,
                                   r.get("noise_floor", r.get("floor", 0.0))))
        except GateUsageError as e:
            raise GateUsageError(f"{path}: rule {i + 1}: {e}") from None
    return rules, bool(doc.get("defaults", True))


def merge_rules(user: list[Rule], use_defaults: bool = True) -> list[Rule]:
    """DEFAULT_RULES (when ``use_defaults``) with every user rule replacing a default of the same
    metric and scope; user rules follow in their order."""
    out = [d for d in DEFAULT_RULES if use_defaults and not any(
        u.metric == d.metric and u.scope == d.scope for u in user)]
    seen = set()
    for u in user:
        if (u.metric, u.scope) in seen:
            out = [r for r in out if (r.metric, r.scope) != (u.metric, u.scope)]
        seen.add((u.metric, u.scope))
        out.append(u)
    return out


# ============================================================================ loading inputs

#: Columns of the observation table.
OBS_COLUMNS = ["metric", "rank", "step", "key", "transport", "value", "denom"]


def load_side(path: Path, *, workers: int | None = None) -> Side:
    """Any gate input (see module doc) -> :class:`~ascendprof.compare.diff.Side`.

    Raises GateInputError / GateUsageError (exit 2) when the path is missing, unreadable, or
    holds nothing the gate can compare.
    """
    path = Path(path)
    if not path.exists():
        raise GateUsageError(f"{path}: no such file or directory")
    try:
        if path.is_file():
            return load_csv(path)
        return load_run(path, workers=workers)
    except (GateInputError, GateUsageError):
        raise
    except InputError as e:
        raise GateInputError(e.path, e.reason, e.where) from None
    except AscendProfError as e:
        raise GateInputError(path, str(e).removeprefix(f"{path}: ")) from None


# ------------------------------------------------------------------------- CSV inputs

CLUSTER_STEP_TRACE = "cluster_step_trace_time"
STEP_TRACE_TIME = "step_trace_time"
KERNEL_DETAILS = "kernel_details"
OP_STATISTIC = "op_statistic"        # the profiler's op_statistic.csv
OP_STATISTICS = "op_statistics"      # ascendprof analyse's op_statistics.csv


def csv_kind(path: Path) -> str:
    """Which exported CSV ``path`` is, from its header row only (:data:`CLUSTER_STEP_TRACE`,
    :data:`STEP_TRACE_TIME`, :data:`KERNEL_DETAILS`, :data:`OP_STATISTIC`,
    :data:`OP_STATISTICS`). Raises GateInputError when the file cannot be read or is none of
    them."""
    import csv

    path = Path(path)
    try:
        with open(path, newline="", encoding="utf-8-sig") as f:
            head = [h.strip() for h in next(csv.reader(f), [])]
    except OSError as e:
        raise GateInputError(path, f"cannot read: {e.strerror or e}") from None
    except UnicodeDecodeError as e:
        raise GateInputError(path, "not UTF-8 text", where=e.start) from None
    except csv.Error as e:
        raise GateInputError(path, f"malformed CSV: {e}") from None
    h = set(head)
    if {"Type", "Index", "Computing"} <= h:
        return CLUSTER_STEP_TRACE
    if {"Step", "Computing"} <= h:
        return STEP_TRACE_TIME
    if "Duration(us)" in h and ("Accelerator Core" in h or "Task Type" in h):
        return KERNEL_DETAILS
    if "Total Time(us)" in h and ("OP Type" in h):
        return OP_STATISTICS if "Rank" in h else OP_STATISTIC
    raise GateInputError(path, "not a CSV the gate reads (expected cluster_step_trace_time, "
                               "step_trace_time, kernel_details, op_statistic or op_statistics)")


#: The numeric columns of each gate CSV that must hold a number in every (rank) row.
_NUMERIC = {CLUSTER_STEP_TRACE: tuple(STEP_METRICS), STEP_TRACE_TIME: tuple(STEP_METRICS),
            KERNEL_DETAILS: ("Duration(us)",), OP_STATISTIC: ("Count", "Total Time(us)"),
            OP_STATISTICS: ("Count", "Total Time(us)")}


def check_csv_cells(path: Path, kind: str) -> None:
    """Every cell of the :data:`_NUMERIC` columns ``path`` has is a finite number (rank rows
    only in a cluster_step_trace_time.csv; op_statistics.csv: per-rank rows). Raises
    GateInputError naming the column, the data row and the cell: an empty or ``nan`` cell would
    otherwise drop out of one side only and look like a change."""
    import csv

    with open(path, newline="", encoding="utf-8-sig") as f:
        rd = csv.reader(f)
        head = [h.strip() for h in next(rd, [])]
        cols = [(head.index(c), c) for c in _NUMERIC[kind] if c in head]
        typ = head.index("Type") if kind == CLUSTER_STEP_TRACE and "Type" in head else None
        rk = head.index("Rank") if kind == OP_STATISTICS and "Rank" in head else None
        for n, row in enumerate(rd, start=1):
            if not row or (typ is not None and typ < len(row)
                           and row[typ].strip().lower() != "rank"):
                continue
            if rk is not None and rk < len(row) and not row[rk].strip().isdigit():
                continue
            for i, c in cols:
                cell = row[i].strip().strip("\t") if i < len(row) else ""
                try:
                    ok = math.isfinite(float(cell))
                except ValueError:
                    ok = False
                if not ok:
                    raise GateInputError(path, f"column {c!r}: {cell!r} is not a number "
                                               f"(gate inputs must be complete)",
                                         where=f"data row {n}")


def check_duplicates(side: Side, path) -> None:
    """Raise GateInputError when a (rank, step) of the step breakdown, or a (rank, op type,
    core) of op statistics, appears twice: summed, it would read as a +100 % change."""
    for frame, keys, what in ((side.steps, ["rank", "step"], "rank {} step {}"),
                              (side.op_stats, ["rank", "op_type", "accelerator_core"],
                               "rank {} op type {} ({})")):
        if frame is None or not len(frame):
            continue
        dup = frame[frame.duplicated(keys, keep=False)]
        if len(dup):
            first = dup.iloc[0]
            n = int((frame[keys] == first[keys]).all(axis=1).sum())
            raise GateInputError(path, "duplicated rows: " + what.format(
                *[("-" if pd.isna(first[k]) else first[k]) for k in keys]) + f" appears {n} times")


def load_csv(path: Path) -> Side:
    """One exported CSV -> Side (only the frames that file has). The rank of a single-rank file
    (step_trace_time, kernel_details, op_statistic) is its ``Device_id`` when it has one value,
    else 0. Raises GateInputError (also for a cell that is not a number, or duplicated rows)."""
    from ascendprof.readers import ascend_output as ao

    path = Path(path)
    kind = csv_kind(path)
    check_csv_cells(path, kind)
    side = Side(label=str(path), ranks=[])
    if kind == CLUSTER_STEP_TRACE:
        side.steps = read_cluster_step_trace(path)
    elif kind == STEP_TRACE_TIME:
        t = ao.read_step_trace_time(path, 0).to_pandas()
        side.steps = _rank_from_device(t)
    elif kind == KERNEL_DETAILS:
        t = ao.read_kernel_details(path, 0)
        cols = ["rank", "step", "device_id", "name", "op_type", "accelerator_core",
                "input_shapes", "dur_ns"]
        side.kernels = aggregate_kernels(_rank_from_device(t.select(cols).to_pandas()))
    elif kind == OP_STATISTIC:
        t = _rank_from_device(ao.read_op_statistic(path, 0).to_pandas())
        side.op_stats = t.rename(columns={"core_type": "accelerator_core"})[
            ["rank", "op_type", "accelerator_core", "count", "total_ns"]]
    else:
        side.op_stats = read_op_statistics(path)
    check_duplicates(side, path)
    side.ranks = _ranks_of(side)
    if not side.ranks:
        raise GateInputError(path, "no data rows")
    return side


def _rank_from_device(df: pd.DataFrame) -> pd.DataFrame:
    dev = df["device_id"].dropna().unique() if "device_id" in df.columns else []
    df = df.copy()
    df["rank"] = int(dev[0]) if len(dev) == 1 else 0
    return df


def read_cluster_step_trace(path: Path) -> pd.DataFrame:
    """cluster_step_trace_time.csv (msprof-analyze or ascendprof layout, spec §8: ``Step, Type,
    Index`` + the step_trace_time.csv columns in us) -> STEP_TRACE-like frame (``rank, step``
    and the ``*_ns`` columns) from the ``Type == rank`` rows; stage rows are left out. A missing
    metric column is null. Raises InputError for a missing required column or a non-number."""
    import pyarrow as pa

    from ascendprof.sysio.textio import read_csv
    from ascendprof.model.units import us_column_to_ns

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
    for name, col in STEP_METRICS.items():
        if name in ranks.columns:
            try:
                vals = us_column_to_ns(pa.array(ranks[name].astype(object).where(
                    ranks[name].notna(), None).tolist(), pa.string()))
            except ValueError as e:
                raise InputError(path, f"column {name!r}: {e}") from None
            out[col] = pd.array(vals.to_pylist(), dtype="Int64")
        else:
            out[col] = pd.array([None] * len(out), dtype="Int64")
    return out


def read_op_statistics(path: Path) -> pd.DataFrame:
    """ascendprof's op_statistics.csv (``Rank, OP Type, Accelerator Core, Count,
    Total Time(us), …``) -> ``rank, op_type, accelerator_core, count, total_ns`` for the per-rank
    rows (the ``cluster`` rows are left out). Raises InputError."""
    from ascendprof.sysio.textio import read_csv
    from ascendprof.model.units import us_column_to_ns

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
    from ascendprof.sysio.csvsafe import csv_unsafe

    return pd.DataFrame({
        "rank": df["Rank"].astype(int).to_numpy(),
        # op types that start like a formula were written with a leading quote (csv_safe)
        "op_type": df["OP Type"].map(csv_unsafe).to_numpy(),
        "accelerator_core": (df["Accelerator Core"] if "Accelerator Core" in df.columns
                             else pd.Series([""] * len(df))).fillna("").to_numpy(),
        "count": count.to_numpy(), "total_ns": total})


def _str_array(s: pd.Series):
    import pyarrow as pa

    return pa.array(s.astype(object).where(s.notna(), None).tolist(), pa.string())


def _ranks_of(side: Side) -> list[int]:
    rs: set[int] = set()
    for f in (side.steps, side.kernels, side.op_stats, side.comm_ops):
        if f is not None and len(f):
            rs.update(int(r) for r in f["rank"].dropna().unique())
    return sorted(rs)


# ------------------------------------------------------------------------- directory inputs

def is_output_dir(path: Path) -> bool:
    """True for an ``ascendprof analyse`` output directory (or a directory of its CSVs)."""
    path = Path(path)
    return (path / "tables").is_dir() or (path / "summary.json").is_file() or (
        any((path / n).is_file() for n in ("cluster_step_trace_time.csv", "op_statistics.csv",
                                            COMMUNICATION_FILE))
        and not any(p.name.endswith(("_ascend_pt", "_ascend_ms")) or p.name.startswith("PROF_")
                    for p in path.iterdir() if p.is_dir()))


#: The folder msprof-analyze writes its cluster files into, under its -o directory.
PEER_OUTPUT = "cluster_analysis_output"


def load_run(path: Path, *, workers: int | None = None) -> Side:
    """A profiling directory or an analyse output directory -> Side with every rank.

    Profiling directories go through scan and the readers (one worker per rank); the step
    breakdown is the profiler's own (STEP_TRACE) or, when a rank has none, the recomputed one.
    Raises the project's errors (UsageError, NothingAnalysable, InputError).
    """
    path = Path(path)
    if not is_output_dir(path) and is_output_dir(path / PEER_OUTPUT):
        return load_output_dir(path / PEER_OUTPUT)  # msprof-analyze's -o directory
    if is_output_dir(path):
        return load_output_dir(path)
    return load_profiling_dir(path, workers=workers)


_KERNEL_COLS = ["rank", "step", "name", "op_type", "accelerator_core", "input_shapes", "dur_ns"]
_SMALL = ("step_trace", "comm_ops", "comm_bandwidth", "op_statistic")


@dataclass
class _RankPart:
    rank: int
    tables: dict
    kernels: object  # pandas DataFrame or None
    metadata: dict
    problems: list


def _read_rank(source, tables_dir=None) -> _RankPart:
    """Worker: one source -> its small tables, aggregated kernels and metadata (picklable)."""
    from ascendprof.model import schemas as S
    from ascendprof.readers import read_source

    try:
        data = read_source(source)
    except InputError as e:
        return _RankPart(source.rank, {}, None, {}, [f"rank {source.rank}: {e}"])
    # opinfo_json (the profiler's OPINFO text, ~1 KB per op) is for cluster_communication.json
    tables = {k: data.tables[k].drop_columns([c for c in ("opinfo_json",)
                                              if c in data.tables[k].column_names]).to_pandas()
              for k in _SMALL if k in data.tables}
    if S.STEP_TRACE not in tables or not len(tables[S.STEP_TRACE]):
        try:  # no step_trace_time.csv / StepTraceTime: use the recomputed breakdown
            from ascendprof.analyze import step_breakdown

            bd, _ = step_breakdown.recompute(data.tables, data.rank)
            if bd is not None and bd.num_rows:
                tables[S.STEP_TRACE] = bd.to_pandas()
        except ImportError:
            pass
    kernels = None
    if data.has(S.KERNELS):
        kernels = aggregate_kernels(data.tables[S.KERNELS].select(_KERNEL_COLS).to_pandas())
    return _RankPart(data.rank, tables, kernels,
                     (data.meta or {}).get("profiler_metadata") or {},
                     [p.line() for p in data.problems])


def load_profiling_dir(path: Path, *, workers: int | None = None) -> Side:
    """Scan ``path``, read every rank (process pool when several) -> Side. Raises UsageError
    (no such directory), NothingAnalysable (no source / no readable rank)."""
    from ascendprof.model.errors import NothingAnalysable
    from ascendprof.engine.executors import local_map
    from ascendprof.scan import load_sources as load

    sources = load(Path(path))
    parts = local_map(_read_rank, sources, workers=workers)
    parts = [p for p in parts if p.tables or p.kernels is not None]
    if not parts:
        raise NothingAnalysable(f"{path}: no rank could be read")
    return _side_from_parts(str(path), parts)


def _cat(frames: list) -> pd.DataFrame | None:
    frames = [f for f in frames if f is not None and len(f)]
    return pd.concat(frames, ignore_index=True) if frames else None


def _side_from_parts(label: str, parts: list[_RankPart], known_groups=None) -> Side:
    side = Side(label=label, ranks=sorted(p.rank for p in parts))
    side.steps = _cat([p.tables.get("step_trace") for p in parts])
    side.kernels = _cat([p.kernels for p in parts])
    ops = _cat([p.tables.get("op_statistic") for p in parts])
    if ops is not None:
        side.op_stats = ops.rename(columns={"core_type": "accelerator_core"})[
            ["rank", "op_type", "accelerator_core", "count", "total_ns"]]
    side.comm_ops = _cat([p.tables.get("comm_ops") for p in parts])
    side.comm_bw = _cat([p.tables.get("comm_bandwidth") for p in parts])
    side.groups = group_labels(side.comm_ops, {p.rank: p.metadata for p in parts}, known_groups)
    return side


def load_output_dir(path: Path) -> Side:
    """An ``ascendprof analyse`` output directory, msprof-analyze's ``cluster_analysis_output``
    or a directory of their committed files -> Side: tables/rank<r>/*.parquet first, then
    cluster_step_trace_time.csv / op_statistics.csv / cluster_communication.json (per-op times
    and bandwidth per group) for what the tables lack; group labels from
    communication_group.json. Each CSV cell must be a number and no row may repeat. Raises
    GateInputError when nothing usable is there or an input is incomplete."""
    import pyarrow.parquet as pq

    path = Path(path)
    parts = []
    tdir = path / "tables"
    if tdir.is_dir():
        for rdir in sorted(tdir.iterdir()):
            m = re.fullmatch(r"rank(\d+)", rdir.name)
            if not m or not rdir.is_dir():
                continue
            tables, kernels = {}, None
            try:
                for name in _SMALL:
                    f = rdir / f"{name}.parquet"
                    if f.is_file():
                        tables[name] = pq.read_table(f).to_pandas()
                f = rdir / "kernels.parquet"
                if f.is_file():
                    kernels = aggregate_kernels(pq.read_table(f, columns=_KERNEL_COLS).to_pandas())
            except (OSError, ValueError) as e:  # pyarrow raises ArrowInvalid (a ValueError)
                raise GateInputError(rdir, f"unreadable Parquet table: {e}") from None
            parts.append(_RankPart(int(m.group(1)), tables, kernels, {}, []))
    side = _side_from_parts(str(path), parts, _groups_from_json(path)) if parts else \
        Side(label=str(path), ranks=[])
    if side.steps is None and (path / "cluster_step_trace_time.csv").is_file():
        check_csv_cells(path / "cluster_step_trace_time.csv", CLUSTER_STEP_TRACE)
        side.steps = read_cluster_step_trace(path / "cluster_step_trace_time.csv")
        check_duplicates(Side("", [], steps=side.steps), path / "cluster_step_trace_time.csv")
    if side.kernels is None and side.op_stats is None and (path / "op_statistics.csv").is_file():
        check_csv_cells(path / "op_statistics.csv", OP_STATISTICS)
        side.op_stats = read_op_statistics(path / "op_statistics.csv")
        check_duplicates(Side("", [], op_stats=side.op_stats), path / "op_statistics.csv")
    if side.comm_ops is None and (path / COMMUNICATION_FILE).is_file():
        side.comm_ops, side.comm_bw, seen = read_cluster_communication(path / COMMUNICATION_FILE)
        side.groups = {**seen, **_groups_from_json(path)}
    side.ranks = _ranks_of(side)
    if not side.ranks:
        raise GateInputError(path, "analyse output directory without any usable table")
    return side


COMMUNICATION_FILE = "cluster_communication.json"


def read_cluster_communication(path: Path):
    """cluster_communication.json of msprof-analyze (or ascendprof analyse) -> (COMM_OPS frame,
    COMM_BANDWIDTH frame, group name -> GroupLabel with the ranks of the group key).

    Layouts (spec §8): ``{"(r0, r1)": {step: {"<op>@<group>": {rank: OPINFO}}}}`` (26.x) and the
    older ``{"collective" | "p2p": {step: {...}}}``; the ``Total Op Info@<group>`` entries are
    sums and left out. Each rank's OPINFO goes through the communication.json reader, so values
    and the checks on them are those of a rank's own file (§A.5). Raises InputError."""
    from ascendprof.readers.communication import KINDS, op_kind
    from ascendprof.readers.communication import tables_from_json as _communication_tables
    from ascendprof.sysio.textio import read_json
    from ascendprof.model import schemas as S

    doc = read_json(path)
    if not isinstance(doc, dict):
        raise InputError(path, "not a JSON object")
    per_rank: dict[int, dict] = {}
    labels: dict[str, GroupLabel] = {}
    for top, steps in doc.items():
        if not isinstance(steps, dict):
            raise InputError(path, f"{top!r} is not an object")
        ranks = tuple(sorted(int(x) for x in re.findall(r"-?\d+", top))) \
            if top not in KINDS else ()
        for step_key, ops in steps.items():
            if not isinstance(ops, dict):
                raise InputError(path, f"{top} / {step_key} is not an object")
            for op_key, by_rank in ops.items():
                name, _, group = op_key.rpartition("@")
                if name.startswith("Total") or not isinstance(by_rank, dict):
                    continue
                if ranks and group not in labels:
                    labels[group] = GroupLabel(group, "", ranks)
                kind = top if top in KINDS else op_kind(op_key)
                for rank, info in by_rank.items():
                    try:
                        r = int(rank)
                    except ValueError:
                        raise InputError(path, f"{op_key}: rank {rank!r} is not a number") \
                            from None
                    (per_rank.setdefault(r, {}).setdefault(step_key, {})
                     .setdefault(kind, {}))[op_key] = info
    from ascendprof.model.problems import Problems

    ops, bws = [], []
    for r, data in sorted(per_rank.items()):
        odd = Problems()
        t = _communication_tables(data, path, r, odd)
        if len(odd):  # a gate input is complete or refused
            raise InputError(path, f"rank {r}: {odd.items[0].reason}")
        ops.append(t[S.COMM_OPS].drop_columns(["opinfo_json"]).to_pandas())
        bws.append(t[S.COMM_BANDWIDTH].to_pandas())
    return _cat(ops), _cat(bws), labels


def _groups_from_json(path: Path) -> dict[str, GroupLabel]:
    """Group labels from communication_group.json ``comm_group_parallel_info`` (msprof-analyze
    layout: group_name, rank_set, pg_name); empty when absent or unreadable."""
    from ascendprof.sysio.textio import read_json

    f = Path(path) / "communication_group.json"
    if not f.is_file():
        return {}
    try:
        doc = read_json(f)
    except InputError:
        return {}
    out = {}
    for g in (doc or {}).get("comm_group_parallel_info", []) or []:
        if isinstance(g, dict) and g.get("group_name") is not None:
            name = str(g["group_name"])
            out[name] = GroupLabel(name, str(g.get("pg_name") or ""),
                                   tuple(sorted(int(r) for r in g.get("rank_set") or [])))
    return out


# ============================================================================ observations

def observations(side: Side) -> pd.DataFrame:
    """Side -> observation table :data:`OBS_COLUMNS`.

    - step metrics: one row per (rank, step) and metric, ``value`` in ns;
    - ``op_time``: per (rank, step, op type) Σ kernel time in ns (communication cores left out);
      from op_statistic totals (step ``""``) divided by the rank's step count when known;
    - group metrics: per (rank, step, group label) Σ over the group's ops, ns;
    - ``bandwidth``: per (rank, step, group label, transport) ``value`` = Σ size (MB) and
      ``denom`` = Σ transit time (ns); GB/s = value / (denom / 1e6).
    """
    rows = []
    nsteps: dict[int, int] = {}
    if side.steps is not None and len(side.steps):
        st = side.steps
        nsteps = {int(r): max(int(n), 1) for r, n in st.groupby("rank")["step"].nunique().items()}
        for name, col in STEP_METRICS.items():
            v = st[col]
            ok = v.notna()
            if ok.any():
                rows.append(pd.DataFrame({
                    "metric": name, "rank": st["rank"][ok].astype(int),
                    "step": st["step"][ok].astype(str), "key": "", "transport": "",
                    "value": v[ok].astype(float), "denom": float("nan")}))
    if side.kernels is not None and len(side.kernels):
        k = side.kernels[~side.kernels["accelerator_core"].isin(COMM_CORES)]
        g = k.groupby(["rank", "step", "op_type"])["total_ns"].sum().reset_index()
        g["step"] = g["step"].astype(str)
        rows.append(pd.DataFrame({"metric": OP_TIME, "rank": g["rank"].astype(int),
                                  "step": g["step"], "key": g["op_type"], "transport": "",
                                  "value": g["total_ns"].astype(float), "denom": float("nan")}))
    elif side.op_stats is not None and len(side.op_stats):
        o = side.op_stats[~side.op_stats["accelerator_core"].isin(COMM_CORES)]
        g = o.groupby(["rank", "op_type"])["total_ns"].sum().reset_index()
        div = g["rank"].map(lambda r: nsteps.get(int(r), 1)).astype(float)
        rows.append(pd.DataFrame({"metric": OP_TIME, "rank": g["rank"].astype(int), "step": "",
                                  "key": g["op_type"], "transport": "",
                                  "value": g["total_ns"].astype(float) / div,
                                  "denom": float("nan")}))
    if side.comm_ops is not None and len(side.comm_ops):
        c = side.comm_ops.copy()
        c["key"] = c["group"].map(lambda g: (side.groups.get(str(g)) or GroupLabel(str(g))).text)
        for name, col in COMM_METRICS.items():
            g = c.groupby(["rank", "step_key", "key"])[col].sum(min_count=1).reset_index()
            g = g[g[col].notna()]
            rows.append(pd.DataFrame({"metric": name, "rank": g["rank"].astype(int),
                                      "step": g["step_key"].astype(str), "key": g["key"],
                                      "transport": "", "value": g[col].astype(float),
                                      "denom": float("nan")}))
    if side.comm_bw is not None and len(side.comm_bw):
        b = side.comm_bw.copy()
        b["key"] = b["group"].map(lambda g: (side.groups.get(str(g)) or GroupLabel(str(g))).text)
        g = b.groupby(["rank", "step_key", "key", "transport"])[["size_mb", "transit_ns"]].sum(
        ).reset_index()
        g = g[g["size_mb"] > 0]
        rows.append(pd.DataFrame({"metric": BANDWIDTH, "rank": g["rank"].astype(int),
                                  "step": g["step_key"].astype(str), "key": g["key"],
                                  "transport": g["transport"].astype(str),
                                  "value": g["size_mb"].astype(float),
                                  "denom": g["transit_ns"].astype(float)}))
    rows = [r for r in rows if len(r)]
    if not rows:
        return pd.DataFrame(columns=OBS_COLUMNS)
    return pd.concat(rows, ignore_index=True)[OBS_COLUMNS]


# ============================================================================ evaluation

#: Columns of the check table :func:`evaluate` returns (one row per rule and scope key).
CHECK_COLUMNS = ["rule", "metric", "scope", "key", "unit", "baseline", "current", "change",
                 "change_pct", "limit_pct", "floor", "verdict", "baseline_n", "baseline_min",
                 "baseline_max", "current_n", "current_min", "current_max", "note",
                 "baseline_mean", "current_mean"]
#: The statistic of each side's (rank, step) values that a rule judges (shared with diff).
STATISTIC = "median"
#: Scope key of the one row a rule gets when one side lacks its metric altogether.
NO_KEY = "-"
#: Where each kind of metric comes from, for the reason a rule is skipped.
_SOURCES = {
    "step": "the step breakdown (step_trace_time.csv, cluster_step_trace_time.csv, analysis.db "
            "or a profiling directory)",
    OP_TIME: "op times (kernel_details.csv, op_statistic.csv, ascendprof's op_statistics.csv or "
             "a profiling directory)",
    "comm": "communication data (communication.json / analysis.db in a profiling directory, or "
            "a cluster_communication.json beside the CSVs)",
}

PASS, FAIL, SKIP = "pass", "fail", "skip"


def _scope_values(obs: pd.DataFrame, rule: Rule, ranks=None) -> pd.DataFrame:
    """Per scope key: the list of per-(rank, step) values of ``rule.metric`` (display unit).

    Values are first summed within (rank, step, scope key) — bandwidth as Σ size / Σ time.
    ``ranks``: when given, scopes other than ``rank`` use only these ranks (the ones both inputs
    have). Returns columns ``key, values``."""
    o = obs[obs["metric"] == rule.metric]
    if ranks is not None and rule.scope != "rank":
        o = o[o["rank"].isin(ranks)]
    if not len(o):
        return pd.DataFrame(columns=["key", "values"])
    o = o.copy()
    if rule.scope == "cluster":
        o["skey"] = "cluster"
    elif rule.scope == "rank":
        o["skey"] = "rank " + o["rank"].astype(str)
    else:  # op_type / group
        o["skey"] = o["key"].astype(str)
    if rule.metric == BANDWIDTH:
        o["skey"] = o["skey"] + " " + o["transport"]
        g = o.groupby(["skey", "rank", "step"])[["value", "denom"]].sum().reset_index()
        g["v"] = (g["value"] / (g["denom"] / 1e6)).where(g["denom"] > 0)
        g = g[g["v"].notna()]
    else:
        g = o.groupby(["skey", "rank", "step"])["value"].sum().reset_index()
        g["v"] = g["value"] / 1e6  # ns -> ms
    return g.groupby("skey")["v"].agg(list).reset_index().rename(
        columns={"skey": "key", "v": "values"})


def _median(vals: list[float]) -> float:
    s = sorted(vals)
    n = len(s)
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2


def evaluate(baseline: pd.DataFrame, current: pd.DataFrame, rules: list[Rule],
             ranks=None) -> pd.DataFrame:
    """Apply ``rules`` to two observation tables (:func:`observations`) -> :data:`CHECK_COLUMNS`.

    For each rule and each scope key: ``baseline`` / ``current`` are the medians of the
    per-(rank, step) values (ms, or GB/s), ``*_n/min/max`` the spread; ``change`` = current −
    baseline, ``change_pct`` relative to baseline (null when baseline is 0). Verdict ``fail``
    when the change goes the rule's way beyond ``limit_pct`` and its size exceeds ``floor``;
    ``skip`` when the key exists on one side only (an op type new or gone counts as 0 there and
    is judged); a rule whose metric one side (or both) lacks altogether yields one ``skip`` row
    with key :data:`NO_KEY` and the reason in ``note``, so every rule is listed. ``ranks``:
    the ranks both inputs have, when their rank sets differ: the cluster, op type and group
    scopes then compare these ranks only (per-rank checks of the others are skipped).
    """
    out = []
    for rule in rules:
        vb, vc = _scope_values(baseline, rule, ranks), _scope_values(current, rule, ranks)
        if not len(vb) or not len(vc):  # e.g. committed CSVs without bandwidth or op types
            out.append(_skip_rule(rule, not len(vb), not len(vc)))
            continue
        m = vb.merge(vc, on="key", how="outer", suffixes=("_b", "_c"))
        for _, r in m.iterrows():
            lb = r["values_b"] if isinstance(r["values_b"], list) else []
            lc = r["values_c"] if isinstance(r["values_c"], list) else []
            out.append(_check(rule, str(r["key"]), lb, lc))
    df = pd.DataFrame(out, columns=CHECK_COLUMNS)
    if len(df):
        order = df["verdict"].map({FAIL: 0, PASS: 1, SKIP: 2})
        df = df.assign(_o=order).sort_values(["_o"], kind="stable").drop(columns="_o")
    return df.reset_index(drop=True)


def _skip_rule(rule: Rule, no_b: bool, no_c: bool) -> list:
    kind = ("step" if rule.metric in STEP_METRIC_NAMES else OP_TIME if rule.metric == OP_TIME
            else "comm")
    who = "neither input has" if no_b and no_c else "the baseline has no" if no_b else \
        "the current input has no"
    what = {"step": f"{rule.metric} values", OP_TIME: "op times",
            "comm": f"{rule.metric} per communication group"}[kind]
    note = f"skipped: {who} {what}; it comes from {_SOURCES[kind]}"
    return [rule.name, rule.metric, rule.scope, NO_KEY, metric_unit(rule.metric), None, None,
            None, None, rule.limit_pct, rule.floor, SKIP, 0, None, None, 0, None, None, note,
            None, None]


def _mean(vals: list[float]):
    return sum(vals) / len(vals) if vals else None


def _check(rule: Rule, key: str, lb: list, lc: list) -> list:
    unit = metric_unit(rule.metric)
    note = ""
    if (not lb or not lc) and rule.scope != "op_type":
        side = "baseline" if not lb else "current"
        b = _median(lb) if lb else None
        c = _median(lc) if lc else None
        return [rule.name, rule.metric, rule.scope, key, unit, b, c, None, None, rule.limit_pct,
                rule.floor, SKIP, len(lb), min(lb, default=None), max(lb, default=None), len(lc),
                min(lc, default=None), max(lc, default=None), f"skipped: not in {side}",
                _mean(lb), _mean(lc)]
    if not lb:
        note = "new in current"
    elif not lc:
        note = "gone in current"
    b = _median(lb) if lb else 0.0
    c = _median(lc) if lc else 0.0
    change = c - b
    pct = change / b * 100.0 if b else None
    if rule.limit_pct >= 0:
        beyond = change > 0 and (pct is None or pct > rule.limit_pct)
    else:
        beyond = change < 0 and (pct is None or pct < rule.limit_pct)
    verdict = FAIL if beyond and abs(change) > rule.floor else PASS
    if beyond and verdict == PASS:
        note = (note + "; " if note else "") + "below noise floor"
    return [rule.name, rule.metric, rule.scope, key, unit, b, c, change, pct, rule.limit_pct,
            rule.floor, verdict, len(lb), min(lb, default=None), max(lb, default=None), len(lc),
            min(lc, default=None), max(lc, default=None), note, _mean(lb), _mean(lc)]


@dataclass
class GateResult:
    """The outcome of a gate run: every check, and the inputs' labels."""

    baseline: str
    current: str
    checks: pd.DataFrame
    rules: list[Rule]
    #: how the two inputs differ in shape (ranks, groups, op types): :func:`shape_differences`
    warnings: list[str] = field(default_factory=list)

    @property
    def failures(self) -> pd.DataFrame:
        return self.checks[self.checks["verdict"] == FAIL]

    @property
    def regression(self) -> bool:
        return bool(len(self.failures))

    def summary_line(self) -> str:
        """One line: counts, and the failed checks named (metric, scope key, change)."""
        c = self.checks["verdict"].value_counts()
        head = (f"{int(c.get(FAIL, 0))} regression(s), {int(c.get(PASS, 0))} passed, "
                f"{int(c.get(SKIP, 0))} skipped")
        if not self.regression:
            return "no regression: " + head
        items = [f"{r.metric} {r.key} {fmt_change(r.change, r.change_pct, r.unit)}"
                 for r in self.failures.itertuples()]
        return "REGRESSION: " + head + " — " + "; ".join(items)

    def as_dict(self) -> dict:
        checks = self.checks.astype(object).where(pd.notna(self.checks), None)
        return {"baseline": self.baseline, "current": self.current,
                "regression": self.regression, "summary": self.summary_line(),
                "statistic": STATISTIC, "warnings": list(self.warnings),
                "rules": [asdict(r) for r in self.rules],
                "checks": checks.to_dict(orient="records")}


def fmt_change(change, pct, unit: str) -> str:
    """``+12.345 ms (+31.0 %)``; ``n/a`` when unknown."""
    if change is None or (isinstance(change, float) and math.isnan(change)):
        return "n/a"
    p = "" if pct is None or (isinstance(pct, float) and math.isnan(pct)) else f" ({pct:+.1f} %)"
    return f"{change:+.3f} {unit}{p}"


def _ranges(ranks) -> str:
    """``0-3, 8`` for a set of ints."""
    rs = sorted(ranks)
    out, start = [], None
    for i, r in enumerate(rs):
        if start is None:
            start = r
        if i + 1 == len(rs) or rs[i + 1] != r + 1:
            out.append(str(start) if start == r else f"{start}-{r}")
            start = None
    return ", ".join(out) or "none"


def _few(items, n: int = 4) -> str:
    items = sorted(map(str, items))
    return ", ".join(items[:n]) + (f" and {len(items) - n} more" if len(items) > n else "")


#: Below this share of op types in common, two runs are taken for different models.
MODEL_OVERLAP = 0.5


def shape_differences(sb: Side, sc: Side, ob: pd.DataFrame, oc: pd.DataFrame) -> list[str]:
    """How two gate inputs differ in shape, one sentence each: other ranks, other communication
    groups (by parallel-group name and ranks), or mostly other op types (another model: less
    than :data:`MODEL_OVERLAP` of the op types in common). Metrics one side lacks altogether
    are not differences of shape (their rules are skipped)."""
    out = []
    if set(sb.ranks) != set(sc.ranks):
        out.append(f"the ranks differ: baseline has {len(sb.ranks)} ({_ranges(sb.ranks)}), "
                   f"current {len(sc.ranks)} ({_ranges(sc.ranks)})")
    comm = ("elapse", BANDWIDTH)
    gb = set(ob.loc[ob["metric"].isin(comm), "key"])
    gc = set(oc.loc[oc["metric"].isin(comm), "key"])
    if gb and gc and gb != gc:
        out.append(f"the communication groups differ: only in baseline {_few(gb - gc) or '-'}; "
                   f"only in current {_few(gc - gb) or '-'}")
    tb = set(ob.loc[ob["metric"] == OP_TIME, "key"])
    tc = set(oc.loc[oc["metric"] == OP_TIME, "key"])
    if tb and tc and len(tb & tc) < MODEL_OVERLAP * len(tb | tc):
        out.append(f"the op types differ: {len(tb & tc)} of {len(tb | tc)} in common "
                   f"(another model or configuration?)")
    return out


def run_gate(baseline: Path, current: Path, rules: list[Rule], *,
             workers: int | None = None, same_shape: bool = False) -> GateResult:
    """Load both inputs, evaluate ``rules``. Raises GateInputError (exit 2) when an input is
    unusable, when no rule finds a metric both sides have, or -- with ``same_shape`` -- when the
    two differ in shape (:func:`shape_differences`; otherwise they are warnings of the
    result: only what both have is compared)."""
    sb = load_side(baseline, workers=workers)
    sc = load_side(current, workers=workers)
    ob, oc = observations(sb), observations(sc)
    warnings = shape_differences(sb, sc, ob, oc)
    if warnings and same_shape:
        raise GateInputError(current, f"not the same shape as {baseline}: "
                                      + "; ".join(warnings))
    common = None
    if set(sb.ranks) != set(sc.ranks) and set(sb.ranks) & set(sc.ranks):
        common = sorted(set(sb.ranks) & set(sc.ranks))
        warnings.append(f"cluster, op type and group checks use the {len(common)} rank(s) both "
                        f"have ({_ranges(common)})")
    checks = evaluate(ob, oc, rules, common)
    compared = checks[checks["verdict"] != SKIP] if len(checks) else checks
    if not len(compared):
        have_b = sorted(set(ob["metric"])) or ["nothing"]
        have_c = sorted(set(oc["metric"])) or ["nothing"]
        raise GateInputError(current, f"nothing comparable with {baseline} under the rules "
                                      f"(baseline has {', '.join(have_b)}; current has "
                                      f"{', '.join(have_c)})")
    return GateResult(str(baseline), str(current), checks, rules, warnings)
