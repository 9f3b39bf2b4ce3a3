"""The registry of the analyses beyond the cluster files: pipeline stages, memory, data
preparation and expert load. Each is one :class:`Analysis` record in :data:`ANALYSES` — its
name, output files, per-rank partial, cluster files, verdict rule and thresholds — and the
engine runs them all through this module: :func:`rank_partials` in the worker (one rank's tables
in, small tables out), :func:`cluster_files` in the cluster step (all ranks' partials in, output
frames out), :func:`verdict_rules` and :func:`thresholds` with the verdicts.

A new analysis adds its module and one record here, and its file names to
:mod:`ascendprof.model.outputs`. A failing analysis loses its own outputs, never the run: the
failure is recorded as a problem.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc

from ascendprof.analyze import (comm_hardware, data_prep, dispatch, idle, late_arrivals, memory,
                                moe, op_efficiency, pipeline_stages)
from ascendprof.analyze.verdicts import make_verdict
from ascendprof.model import schemas as S
from ascendprof.model.results import concat_batches


def _p2p(tables, rank, meta):
    t = pipeline_stages.rank_p2p_ops(tables, rank)
    return {pipeline_stages.P2P_OPS: t} if t is not None else {}


def _pipeline_files(ca, lines):
    pipe, stages = pipeline_stages.build(ca.concat(pipeline_stages.P2P_OPS), lines,
                                         ca.step_trace, ca.breakdown)
    return {"pipeline.csv": pipe, "pipeline_stages.csv": stages}


def _memory_files(ca, lines):
    stage_of = {r: s for line in lines for s, r in enumerate(line)}
    return memory.build(ca.concat(memory.MEMORY_PEAKS), ca.concat(memory.MEMORY_OPS),
                        ca.concat(memory.MEMORY_MODULES), stage_of)


def _moe_files(ca, lines):
    return {"moe_expert_load.csv": moe.build(ca.concat(moe.EXPERT_LOAD),
                                             moe.ep_groups(ca.metadata))}


def _files(build, *partials, name: str = ""):
    """cluster_files of an analysis whose ``build`` takes its partials concatenated over the
    ranks and returns {file: frame}, or the frame of file ``name``."""
    def files(ca, lines):
        got = build(*(ca.concat(p) for p in partials))
        return {name: got} if name else got
    return files


def _comm_hardware_files(ca, lines):
    # the ranks' ops a batch of ranks at a time (all of them at once: ~0.1 GB at 4096 ranks)
    return comm_hardware.build_batches(
        lambda: concat_batches(ca.parts(comm_hardware.OPS), "permissive"),
        ca.concat(comm_hardware.LINKS))


def _late_files(ca, lines):
    # the ranks' windows one at a time, twice: their first rows, then the chosen instances' rows
    return {"late_arrivals.csv": late_arrivals.build_parts(
        lambda: ca.parts(late_arrivals.WINDOWS))}


def _rule(verdicts, file: str):
    """rule of an analysis whose ``verdicts(frame, make_verdict, th)`` reads its ``file``."""
    return lambda ca, th: verdicts(ca.csv_files.get(file), make_verdict, th)


@dataclass(frozen=True)
class Analysis:
    """One analysis as the engine runs it.

    ``files``: its output files (names also in model.outputs.ANALYSIS_FILES);
    ``rank_partial(tables, rank, meta) -> {partial name: pa.Table}`` in the worker;
    ``cluster_files(ca, pipelines) -> {file name: pandas DataFrame}`` in the cluster step
    (``pipelines``: the pp groups' ranks in stage order); ``rule(ca, th) -> [verdict]`` reads
    its files from ``ca.csv_files`` and ``thresholds`` ({lower-case name: default}) from ``th``
    (listed in verdicts.json, overridable with ``--threshold``); ``rule_name`` names the rule in
    verdicts and problems. ``kernels``: the KERNELS columns ``rank_partial`` reads (it gets
    only those: a table of millions of kernels is filtered without copying the others; none
    when it reads no kernels)."""

    name: str
    files: tuple[str, ...]
    rank_partial: Callable
    cluster_files: Callable
    rule: Callable | None = None
    rule_name: str = ""
    thresholds: Mapping[str, float] = field(default_factory=dict)
    kernels: tuple[str, ...] = ()


_TIMES = ("rank", "step", "start_ns", "dur_ns")

#: the columns the analyses' ``rank_partial`` read of the communication tables (COMM_OPS:
#: pipeline, idle, late_arrivals, comm_hardware; COMM_BANDWIDTH: op_efficiency, comm_hardware;
#: COMM_SIZE_DIST: none). The engine gives a spilled table (a communication.json of 10^6 ops:
#: ~1.4 GB as a whole table, 740 MB of it the ops' OPINFO texts) with these columns only; a
#: table not named here whole.
READ_COLUMNS = {
    S.COMM_OPS: ("rank", "step", "kind", "op_name", "group", "start_ns", "elapse_ns",
                 "wait_ns"),
    S.COMM_BANDWIDTH: ("step", "group", "op_name", "transport", "size_mb", "transit_ns",
                       "large_packet_ratio"),
    S.COMM_SIZE_DIST: (),
}


#: every analysis, in the order its files are written
ANALYSES = (
    Analysis("pipeline", ("pipeline.csv", "pipeline_stages.csv"), _p2p, _pipeline_files,
             kernels=(*_TIMES, "name", "accelerator_core")),
    Analysis("memory", ("memory_summary.csv", "memory_top_ops.csv", "memory_modules.csv"),
             memory.rank_memory, _memory_files, _rule(memory.verdicts, "memory_summary.csv"),
             "memory",
             {"memory_near_capacity_pct": memory.NEAR_CAPACITY_PCT,
              "memory_peer_excess_pct": memory.PEER_EXCESS_PCT,
              "memory_peer_excess_min_mb": memory.PEER_EXCESS_MIN_MB}),
    Analysis("data_preparation", ("data_preparation.csv", "dataset_pipeline.csv"),
             data_prep.rank_data_prep,
             _files(data_prep.build, data_prep.DATA_PREP, data_prep.DATASET_OPS_FLAGGED),
             _rule(data_prep.verdicts, "data_preparation.csv"), "data",
             {"data_bound_pct": data_prep.DATA_BOUND_PCT,
              "preparing_bound_pct": data_prep.PREPARING_BOUND_PCT}),
    Analysis("moe", ("moe_expert_load.csv",), moe.rank_expert_load, _moe_files,
             _rule(moe.verdicts, "moe_expert_load.csv"), "moe",
             {"ep_imbalance_ratio": moe.EP_IMBALANCE_RATIO},
             kernels=("rank", "step", "op_type", "input_shapes")),
    Analysis("op_efficiency", ("op_efficiency.csv", "op_efficiency_steps.csv"),
             op_efficiency.rank_partial,
             _files(op_efficiency.build, op_efficiency.OP_EFFICIENCY, op_efficiency.STEP_WINDOWS),
             kernels=(*_TIMES, "op_type", "input_shapes", "input_dtypes", "output_shapes",
                      "output_dtypes")),
    Analysis("idle", ("idle_breakdown.csv",), idle.rank_partial,
             _files(idle.build, idle.IDLE, name="idle_breakdown.csv"), kernels=_TIMES),
    Analysis("dispatch", ("dispatch.csv", "dispatch_steps.csv"), dispatch.rank_partial,
             _files(dispatch.build, dispatch.DISPATCH, dispatch.DISPATCH_STEPS),
             kernels=(*_TIMES, "op_type")),
    Analysis("late_arrivals", ("late_arrivals.csv",), late_arrivals.rank_partial,
             _late_files,
             kernels=(*_TIMES, "op_type", "accelerator_core", "input_shapes")),
    Analysis("comm_hardware", ("collective_bandwidth.csv", "link_bandwidth.csv"),
             comm_hardware.rank_partial,
             _comm_hardware_files),
)

#: the tables an engine may give :func:`rank_partials` as readers (``later``) rather than
#: whole, and the analyses that read them with the columns each asks for (None: all of
#: :data:`READ_COLUMNS`, which comm_hardware reads a row group at a time). A spilled
#: COMM_BANDWIDTH (5 M rows at a 1 GB communication.json, ~0.25 GB as the analyses' columns)
#: is then never held whole through the registry's analyses: op_efficiency reads two of its
#: columns while it runs, comm_hardware one row group at a time.
READ_LATER = {S.COMM_BANDWIDTH: {"op_efficiency": ("size_mb", "transport"),
                                 "comm_hardware": None}}

#: the order the verdict rules run in (their verdicts keep this order among equals)
_RULE_ORDER = ("memory", "moe", "data")


def _untimed(k: pa.Table):
    """The filter of KERNELS rows with a start time and a duration, None when all have both."""
    if k["start_ns"].null_count == 0 and k["dur_ns"].null_count == 0:
        return None
    return pc.and_(pc.is_valid(k["start_ns"]), pc.is_valid(k["dur_ns"]))


class _Tables(Mapping):
    """The tables one analysis (``name``) gets: ``tables``, and those of ``later`` (readers:
    ``read(columns)`` -> the table, ``row_groups(columns)`` -> its row groups in order) read
    when the analysis first asks for one (the columns :data:`READ_LATER` lists for it) and
    kept until it is done. Asking whether one is there does not read it; :meth:`row_groups`
    gives a table a row group at a time."""

    def __init__(self, tables: Mapping, later: Mapping, name: str):
        self._tables, self._later, self._read = tables, later, {}
        self._columns = {n: READ_LATER.get(n, {}).get(name) for n in later}

    def __getitem__(self, name):
        if name in self._tables:
            return self._tables[name]
        if name not in self._later:
            raise KeyError(name)
        if name not in self._read:
            self._read[name] = self._later[name].read(self._columns[name])
        return self._read[name]

    def row_groups(self, name):
        """Table ``name`` in parts, in row order (the table whole when it is in memory;
        nothing when there is none)."""
        if name in self._later and name not in self._tables and name not in self._read:
            yield from self._later[name].row_groups(self._columns[name])
        elif self.get(name) is not None:
            yield self[name]

    def __contains__(self, name) -> bool:
        return name in self._tables or name in self._later

    def __iter__(self):
        yield from self._tables
        yield from (n for n in self._later if n not in self._tables)

    def __len__(self) -> int:
        return sum(1 for _ in self)


def rank_partials(tables: dict[str, pa.Table], rank: int, problems=None,
                  meta: dict | None = None, between=None, kernels=None,
                  later: Mapping | None = None) -> dict[str, pa.Table]:
    """{partial name: table} of one rank (absent when the rank has no such data). Kernels
    without a start time or duration (left empty by the reader, e.g. a start time in
    E-notation, which lost its precision; reported there) take part in none of them.
    ``between()``, when given, is called after each analysis (the engine gives the heap's free
    pages back there for a rank of millions of kernels). ``kernels(columns) -> pa.Table``, when
    given, supplies KERNELS with those columns (the engine reads the ones a spilled table does
    not hold in memory from its file, for the one analysis that reads them). ``later``:
    {table name: reader} for tables not in ``tables`` (:class:`_Tables`: an analysis reads
    the columns :data:`READ_LATER` lists for it, when it asks, and drops them when done)."""
    out: dict[str, pa.Table] = {}
    k = tables.get(S.KERNELS)
    timed = None if k is None else _untimed(k)
    if k is not None and kernels is None:
        kernels = lambda cols: k.select([c for c in cols if c in k.column_names])  # noqa: E731
    later = {n: r for n, r in (later or {}).items() if n not in tables}
    for a in ANALYSES:
        mine = tables
        if k is not None:  # only the kernel columns it reads (none when it reads none)
            kt = kernels(a.kernels)
            mine = {**tables, S.KERNELS: kt if timed is None else kt.filter(timed)}
            del kt
        if later:
            mine = _Tables(mine, later, a.name)
        try:
            got = a.rank_partial(mine, rank, meta or {})
        except Exception as e:  # noqa: BLE001 - one analysis' defect must not lose the rank
            if problems is not None:
                problems.add("<analysis>", f"{a.name} analysis failed ({type(e).__name__}: {e}); "
                                           f"please report this", rank=rank, affects=(a.name,))
            continue
        finally:
            del mine
        out.update({k: v for k, v in got.items() if v is not None and v.num_rows})
        del got
        if between is not None:
            between()
    return out


#: the analyses whose cluster files are built first (:func:`cluster_files`): their transient
#: tables are the largest (comm_hardware: a batch of ranks' op rows and one row per instance,
#: and its frame of every instance: ~50 MB at 4096 ranks), built before the others' frames are
#: held beside them
_FIRST = ("comm_hardware",)


def cluster_files(ca, between=None) -> dict[str, object]:
    """{output file name: pandas DataFrame} from a ClusterAnalysis after gather's own results
    (step trace, breakdown, communication groups), in the order of :data:`ANALYSES`. Files
    without rows are left out. The analyses of :data:`_FIRST` run first (the result and the
    problems of a failure are the same in any order); ``between()``, when given, is called
    after each analysis (the engine gives the heap's free pages back there)."""
    got: dict[str, dict] = {}
    failed: dict[str, str] = {}
    lines = pipeline_stages.pipelines(ca.metadata, ca.communication_group)
    for a in sorted(ANALYSES, key=lambda a: a.name not in _FIRST):  # a stable sort
        try:
            got[a.name] = a.cluster_files(ca, lines)
        except Exception as e:  # noqa: BLE001
            failed[a.name] = f"{type(e).__name__}: {e}"
        if between is not None:
            between()
    out: dict[str, object] = {}
    for a in ANALYSES:
        if a.name in failed:
            ca.problems.add("<analysis>", f"{a.name} analysis failed ({failed[a.name]}); "
                                          f"please report this", affects=(a.name,))
        else:
            out.update(got.pop(a.name))
    return {k: v for k, v in out.items() if v is not None and len(v)}


def verdict_rules() -> dict:
    """{rule name: fn(ca, th)} of the analyses' verdict rules, in the order they run (given to
    analyze.verdicts.derive)."""
    by_name = {a.rule_name: a.rule for a in ANALYSES if a.rule is not None}
    return {n: by_name[n] for n in _RULE_ORDER}


def thresholds() -> dict[str, float]:
    """{lower-case name: default} of the analyses' verdict thresholds (given to
    analyze.verdicts.thresholds)."""
    by_rule = {a.rule_name: a.thresholds for a in ANALYSES if a.rule is not None}
    return {k: float(v) for n in _RULE_ORDER for k, v in by_rule[n].items()}
