"""The parts every advice rule shares: the :class:`Rule` declaration, the per-rank
:class:`Context` the rules read, and :func:`finding`, the one shape of an advice item.

A rule is plain data plus a ``check`` function: it names the tables it reads (``needs``), its
thresholds with the source of each, and returns findings (dicts, see :func:`finding`) or nothing.
It raises :class:`Skip` when the data cannot answer (e.g. no PMU columns), which the report
shows with the reason. Rules never read files.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from ascendprof.analyze.codes import filled_codes
from ascendprof.model import schemas as S, tasks

AREAS = ("computation", "schedule", "communication", "memory", "environment")
SEVERITIES = ("critical", "warning", "info")
SEVERITY_RANK = {s: i for i, s in enumerate(SEVERITIES)}

#: Human names of the tables, for skip reasons ("needs kernel_details.csv ...").
TABLE_FILES = {
    S.KERNELS: "kernels (kernel_details.csv / db TASK)",
    S.STEP_TRACE: "step breakdown (step_trace_time.csv / analysis.db)",
    S.STEPS: "step windows",
    S.COMM_OPS: "communication ops (communication.json / analysis.db)",
    S.COMM_BANDWIDTH: "communication bandwidth (communication.json / analysis.db)",
    S.COMM_LINKS: "communication links (communication_matrix.json)",
    S.API_STATISTIC: "CANN API statistics (api_statistic.csv / db CANN_API)",
    S.MEMORY_RECORD: "memory_record.csv",
    S.HOST_EVENTS: "host events (trace_view.json / db PYTORCH_API, CANN_API)",
    S.HCCL_TASKS: "HCCL small tasks with sizes (trace_view.json / db COMMUNICATION_TASK_INFO)",
    S.AICORE_FREQ: "AI Core frequency (trace_view.json / db AICORE_FREQ)",
    S.TIMELINE: "device timeline (trace_view.json / db)",
    "meta:env": "environment variables (profiler_metadata.json ENV_VARIABLES / db META_DATA)",
}
#: Tables only :mod:`ascendprof.readers.host_events` reads (trace_view.json with --advice all).
HOST_TABLES = (S.HOST_EVENTS, S.HCCL_TASKS, S.AICORE_FREQ)


class Skip(Exception):
    """Raised by a rule's check when the data present cannot answer it; the message says why."""


@dataclass(frozen=True)
class Rule:
    """One advice rule.

    ``needs``: a tuple of requirements, each a tuple of alternatives (table names of
    :mod:`ascendprof.model.schemas`, or ``"meta:env"``); the rule is skipped with a reason when
    a requirement has no alternative present. ``threshold``: name -> value (units in the name).
    ``source``: where each threshold comes from. ``scope``: ``"rank"`` (run in each rank's
    worker on its tables) or ``"cluster"`` (run once on all ranks' metadata and findings).
    ``check(ctx)`` returns a finding, a list of findings or None.
    """

    id: str
    area: str
    title: str
    needs: tuple[tuple[str, ...], ...]
    threshold: dict
    source: str
    check: Callable
    scope: str = "rank"

    def describe(self) -> dict:
        return {"id": self.id, "area": self.area, "title": self.title, "scope": self.scope,
                "needs": [list(alt) for alt in self.needs], "threshold": dict(self.threshold),
                "source": self.source}


def finding(rule: Rule, ranks, *, severity: str, message: str, advice: list[str],
            evidence: dict, impact_ns: float | None = None, step_ns: float | None = None,
            key: str | None = None) -> dict:
    """An advice item (the shape of advice.json ``items``, see docs/advice.md).

    ``impact_ns``: time per step at stake (what the finding costs, an upper bound of the gain),
    ``step_ns``: the step time it is compared with; both ns, shown in us and % of step.
    ``key`` tells findings of one rule apart when it makes several (merged over ranks by
    (rule, key)).
    """
    if severity not in SEVERITY_RANK:
        raise ValueError(f"severity {severity!r}")
    share = None
    if impact_ns is not None and step_ns:
        share = round(100.0 * impact_ns / step_ns, 2)
    return {
        "id": rule.id, "key": key or rule.id, "area": rule.area, "title": rule.title,
        "severity": severity, "scope": rule.scope, "ranks": sorted({int(r) for r in ranks}),
        "message": message, "advice": list(advice),
        "impact_us_per_step": None if impact_ns is None else round(impact_ns / 1000, 3),
        "share_of_step_pct": share,
        "evidence": _plain(evidence), "threshold": dict(rule.threshold), "source": rule.source,
    }


def severity_by_share(share_pct: float | None, warning: float, critical: float,
                      floor: str = "info") -> str:
    """``critical`` at or above ``critical`` %, ``warning`` at or above ``warning`` %, else
    ``floor``."""
    if share_pct is None:
        return floor
    if share_pct >= critical:
        return "critical"
    if share_pct >= warning:
        return "warning"
    return floor


def _plain(v):
    """JSON-ready copy: numpy scalars -> Python, NaN -> None, floats rounded to 4 decimals."""
    if isinstance(v, dict):
        return {str(k): _plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    if isinstance(v, (np.integer,)):
        return int(v)
    if isinstance(v, (float, np.floating)):
        f = float(v)
        return None if math.isnan(f) or math.isinf(f) else round(f, 4)
    if isinstance(v, np.bool_):
        return bool(v)
    return v


def us(ns) -> float:
    """ns -> us, rounded to 0.001 (for messages and evidence)."""
    return round(float(ns) / 1000.0, 3)


def ms(ns) -> float:
    """ns -> ms, rounded to 0.001."""
    return round(float(ns) / 1e6, 3)


# ------------------------------------------------------------------------------------ context

#: The columns :meth:`Context.df` converts to pandas for the tables where that matters.
READ_COLUMNS = {
    S.KERNELS: ("rank", "step", "name", "op_type", "op_state", "accelerator_core", "start_ns",
                "dur_ns", "block_num", "mix_block_num", "input_shapes", "input_dtypes",
                "output_dtypes"),
    S.COMM_OPS: ("rank", "step", "step_key", "kind", "op_name", "group", "start_ns",
                 "elapse_ns", "transit_ns", "wait_ns"),
}

@dataclass
class Context:
    """What a rule sees of one rank: its tables (schemas of :mod:`ascendprof.model.schemas`),
    ``meta`` (profiler_info / profiler_metadata), the advice ``mode`` and, filled in as rules
    run, ``fired`` (ids of the rules that found something on this rank).

    Derived values are computed once and cached: :attr:`n_steps`, :attr:`step_ns`,
    :attr:`computing_ns`, :attr:`free_ns` (means per step, ns), :meth:`karr` and :meth:`df`
    (pandas only where a rule fires: converting tables costs more than most checks).
    """

    rank: int
    tables: dict
    meta: dict = field(default_factory=dict)
    mode: str = "summary"
    fired: set = field(default_factory=set)
    #: {table name: sysio.bigtables.SpilledTable} of tables whose ``tables`` entry holds only
    #: some columns (the slim in-memory part): the others are read from the file one column at
    #: a time, when a rule asks for them (:meth:`column`)
    spilled: dict = field(default_factory=dict)
    _cache: dict = field(default_factory=dict, repr=False)

    def has(self, name: str) -> bool:
        if name == "meta:env":
            return bool(env_of(self.meta))
        t = self.tables.get(name)
        return t is not None and t.num_rows > 0

    def df(self, name: str, extra: tuple[str, ...] = ()) -> pd.DataFrame:
        """The table as pandas (cached); an empty frame with the schema's columns when absent.
        Only the columns the rules read are converted (:data:`READ_COLUMNS`; all others for
        tables not listed), plus ``extra`` ones that exist: converting every PMU column of a
        large kernels table costs more than all the rules together."""
        key = (name, extra)
        if key not in self._cache:
            t = self.tables.get(name)
            if name in self.spilled and t is not None:  # the columns not in memory too
                t = pa.table({c: self.column(name, c) for c in self.columns(name)
                              if c in (*(READ_COLUMNS.get(name) or self.columns(name)), *extra)})
                t = pa.table({c: v.cast(v.type.value_type) if pa.types.is_dictionary(v.type)
                              else v for c, v in zip(t.column_names, t.columns)})
            if t is None:
                t = S.empty(name) if name in S.SCHEMAS else pa.table({})
            want = READ_COLUMNS.get(name)
            if want is not None:
                have = set(t.column_names)
                t = t.select([c for c in (*want, *extra) if c in have])
            self._cache[key] = t.to_pandas()
        return self._cache[key]

    def columns(self, name: str) -> list[str]:
        """All column names of table ``name`` ([] when absent), spilled ones included."""
        sp = self.spilled.get(name)
        if sp is not None:
            return list(sp.schema.names)
        t = self.tables.get(name)
        return [] if t is None else list(t.column_names)

    def column(self, name: str, col: str) -> pa.ChunkedArray | None:
        """Column ``col`` of table ``name``: from memory, else read alone from the table's
        spilled file; None when the table has no such column."""
        t = self.tables.get(name)
        if t is not None and col in t.column_names:
            return t[col]
        sp = self.spilled.get(name)
        if sp is not None and col in sp.schema.names:
            return sp.read(columns=[col])[col]
        return None

    def kernel_frame(self, rows: np.ndarray, columns=None) -> pd.DataFrame:
        """The compute kernels where ``rows`` (bool per kernel of :meth:`karr`) as pandas, with
        ``columns`` (default: :data:`READ_COLUMNS` of KERNELS), in table order: only the
        selected rows are converted, so a rule looking at a few kernels of a large table costs
        little."""
        return self.rows_frame(S.KERNELS, self.karr()["rows"][np.asarray(rows, bool)], columns)

    def rows_frame(self, name: str, idx: np.ndarray, columns=None) -> pd.DataFrame:
        """Rows ``idx`` (row numbers) of table ``name`` as pandas with ``columns`` (default:
        :data:`READ_COLUMNS`; those the table has), typed as :meth:`df` types the whole table
        (an integer column with nulls anywhere is float)."""
        have = self.columns(name)
        if not have:
            return self.df(name, tuple(columns or ())).iloc[0:0]
        take, out = pa.array(idx, pa.int64()), {}
        for c in (columns or READ_COLUMNS.get(name) or have):
            if c in have:
                v = self.column(name, c)
                got = v.take(take)
                if pa.types.is_dictionary(got.type):  # (a spilled table's slim texts)
                    got = got.cast(got.type.value_type)
                out[c] = (got, v.null_count > 0 and pa.types.is_integer(v.type))
        df = pa.table({c: v for c, (v, _) in out.items()}).to_pandas()
        for c, (_, nulls) in out.items():
            if nulls:
                df[c] = df[c].astype("float64")
        return df

    def _memo(self, key, fn):
        if key not in self._cache:
            self._cache[key] = fn()
        return self._cache[key]

    def _col(self, name: str, col: str, rows=None) -> np.ndarray:
        """One column of a (small) table as a float / object numpy array ([] when absent)."""
        t = self.tables.get(name)
        if t is None or col not in t.column_names:
            return np.zeros(0)
        v = t[col].to_numpy(zero_copy_only=False)
        return v if rows is None else v[rows]

    @property
    def step_rows(self) -> np.ndarray:
        """Boolean mask of the STEP_TRACE rows that have a step (the profiler's breakdown)."""
        def f():
            st = self._col(S.STEP_TRACE, "step")
            return ~pd.isna(st) if len(st) else np.zeros(0, bool)
        return self._memo("st_rows", f)

    @property
    def n_steps(self) -> int:
        """Steps in the collection: distinct steps of STEP_TRACE, else STEPS, else of the kernels'
        Step Id; 1 when none is known (totals are then per collection)."""
        def f():
            import pyarrow.compute as pc

            for name in (S.STEP_TRACE, S.STEPS, S.KERNELS):
                t = self.tables.get(name)
                if t is not None and t.num_rows and "step" in t.column_names:
                    n = pc.count_distinct(t["step"], mode="only_valid").as_py()
                    if n:
                        return int(n)
            return 1
        return self._memo("n_steps", f)

    def _step_mean(self, col: str) -> float | None:
        rows = self.step_rows
        if not rows.any():
            return None
        v = np.asarray(self._col(S.STEP_TRACE, col, rows), dtype=float)
        v = v[~np.isnan(v)]
        return float(v.mean()) if len(v) else None

    @property
    def step_ns(self) -> float | None:
        """Mean step time (ns): Stage, else Computing + Communication(Not Overlapped) + Free of
        STEP_TRACE; else the mean STEPS window; else the kernels' span per step."""
        def f():
            rows = self.step_rows
            if rows.any():
                stage = np.asarray(self._col(S.STEP_TRACE, "stage_ns", rows), dtype=float)
                if len(stage) and not np.isnan(stage).any() and (stage > 0).all():
                    return float(stage.mean())
                parts = [np.nan_to_num(np.asarray(self._col(S.STEP_TRACE, c, rows), float))
                         for c in ("computing_ns", "comm_not_overlapped_ns", "free_ns")]
                tot = sum(parts)
                if (tot > 0).any():
                    return float(tot.mean())
            lo = np.asarray(self._col(S.STEPS, "start_ns"), dtype=float)
            hi = np.asarray(self._col(S.STEPS, "end_ns"), dtype=float)
            if len(lo):
                d = (hi - lo)[~np.isnan(hi - lo)]
                if len(d) and (d > 0).any():
                    return float(d.mean())
            t = self.tables.get(S.KERNELS)
            if t is not None and t.num_rows:
                import pyarrow.compute as pc

                end = pc.max(pc.add(t["start_ns"], t["dur_ns"])).as_py()
                first = pc.min(t["start_ns"]).as_py()
                span = (end or 0) - (first or 0)
                return float(span) / self.n_steps if span > 0 else None
            return None
        return self._memo("step_ns", f)

    @property
    def computing_ns(self) -> float | None:
        """Mean Computing per step (ns) from STEP_TRACE, else the summed duration of the compute
        kernels per step (an upper bound: overlapping kernels count twice)."""
        def f():
            v = self._step_mean("computing_ns")
            if v is not None:
                return v
            a = self.karr()
            return float(a["dur"].sum()) / self.n_steps if len(a["dur"]) else None
        return self._memo("computing_ns", f)

    @property
    def free_ns(self) -> float | None:
        return self._memo("free_ns", lambda: self._step_mean("free_ns"))

    def karr(self) -> dict:
        """Compute kernels (not communication big ops) as numpy arrays, straight from Arrow
        (no pandas: the rules' common path is a few vector tests): ``core`` (upper-case text,
        "" when null), ``name``, ``op_type``, ``shapes`` (object arrays, "" when null; each
        distinct text is one shared object, so a large table costs 8 bytes per row and
        column), ``start`` (int64 ns, 0 when null), ``dur`` (float ns, 0 when null),
        ``block`` (float, NaN when null), ``rows`` (their row numbers in the table, for
        :meth:`kernel_frame` and :meth:`kernel_values`) and ``codes``: {"core", "name",
        "op_type", "shapes": (distinct texts, int code per kernel)} to group by without
        building a text per row."""
        def f():
            if not self.has(S.KERNELS):
                return self._karr_of(S.empty(S.KERNELS).column)
            return self._karr_of(lambda c: self.column(S.KERNELS, c))
        return self._memo("karr", f)

    @staticmethod
    def _karr_of(col) -> dict:
        core_v, core_c = filled_codes(col("accelerator_core"), fn=pc.utf8_upper)
        name_v, name_c = filled_codes(col("name"))
        # tasks.comm_rows, on the distinct texts
        comm = _bools(pc.is_in(pc.utf8_upper(_strings(core_v)),
                               value_set=pa.array(tasks.COMM_CORES)))[core_c] | _bools(
            pc.starts_with(pc.utf8_lower(_strings(name_v)), tasks.COMM_NAME_PREFIX))[name_c]
        rows = np.flatnonzero(~comm)
        codes = {"core": (core_v, core_c[rows]), "name": (name_v, name_c[rows])}
        for key, c in (("op_type", "op_type"), ("shapes", "input_shapes")):
            v, k = filled_codes(col(c))
            codes[key] = (v, k[rows])
        take = pa.array(rows)
        has_core = bool(len(rows)) and bool(pc.any(pc.is_valid(
            col("accelerator_core").take(take))).as_py())

        def num(c, fill=None):
            v = col(c)
            v = v.take(take) if fill is None else pc.fill_null(v.take(take), fill)
            return v.to_numpy(zero_copy_only=False)

        out = _Texts(core=core_v[codes["core"][1]])
        out.update({"start": np.asarray(num("start_ns", 0), dtype=np.int64),
                    "dur": np.nan_to_num(np.asarray(num("dur_ns"), dtype=float)),
                    "block": np.asarray(num("block_num"), dtype=float),  # nulls -> NaN
                    "has_core": has_core, "rows": rows, "codes": codes})
        return out

    def kernel_values(self, col: str) -> np.ndarray | None:
        """Column ``col`` of the :meth:`karr` kernels as float (NaN when null); None when the
        table has no such column."""
        v = self.column(S.KERNELS, col)
        if v is None:
            return None
        v = pc.cast(v.take(pa.array(self.karr()["rows"])), pa.float64())
        return np.asarray(v.to_numpy(zero_copy_only=False), float)

    def per_step(self, total_ns: float) -> float:
        return float(total_ns) / max(self.n_steps, 1)

    def share(self, ns: float | None) -> float | None:
        """``ns`` as % of the mean step (None when the step time is unknown)."""
        if ns is None or not self.step_ns:
            return None
        return round(100.0 * ns / self.step_ns, 2)


class _Texts(dict):
    """Context.karr's arrays: "name", "op_type" and "shapes" are made from their codes each
    time a rule asks (a few rules, on a few rows), not held for the whole advice (24 MB each
    per million kernels)."""

    def __missing__(self, key):
        if key not in ("name", "op_type", "shapes"):
            raise KeyError(key)
        values, codes = self["codes"][key]
        return values[codes]


def text_mask(coded: tuple[np.ndarray, np.ndarray], fn) -> np.ndarray:
    """Bool per row of a codes.filled_codes pair: ``fn`` (an Arrow function of a string array
    returning booleans, e.g. ``lambda a: pc.match_substring(a, "x")``) applied to the distinct
    texts only."""
    values, codes = coded
    return _bools(fn(_strings(values)))[codes]


def _strings(values: np.ndarray) -> pa.Array:
    return pa.array(list(values), pa.string())


def _bools(a) -> np.ndarray:
    return np.asarray(a.to_numpy(zero_copy_only=False), bool)


def env_of(meta: dict) -> dict:
    """ENV_VARIABLES of profiler_metadata.json (or db META_DATA) as {name: value text}."""
    md = (meta or {}).get("profiler_metadata") or {}
    env = md.get("ENV_VARIABLES") if isinstance(md, dict) else None
    if isinstance(env, str):  # db META_DATA may hold it as JSON text
        import json

        try:
            env = json.loads(env)
        except ValueError:
            env = None
    if not isinstance(env, dict):
        return {}
    return {str(k): "" if v is None else str(v) for k, v in env.items()}


def missing_needs(rule: Rule, has) -> str | None:
    """Why ``rule`` cannot run (the first requirement with no alternative present), else None.
    ``has(name)`` tells whether a table / meta item is present."""
    for alts in rule.needs:
        if not any(has(a) for a in alts):
            names = " or ".join(TABLE_FILES.get(a, a) for a in alts)
            return f"needs {names}; not in this collection"
    return None
