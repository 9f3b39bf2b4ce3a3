"""Gate inputs that are directories: a profiling directory (read by the engine's per-rank worker,
as ``analyse`` reads it), an ``ascendprof analyse`` output directory, msprof-analyze's output
directory or a directory of committed copies of their files (read back through
:mod:`ascendprof.report.readback`), each into a :class:`~ascendprof.compare.diff.Side`.

Errors: GateInputError (exit 2) for an unusable output directory; the project's errors
(UsageError, NothingAnalysable, InputError) for a profiling directory.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from ascendprof.compare.diff import GroupLabel, Side, aggregate_kernels, group_labels
from ascendprof.compare.gate.csv_inputs import (CLUSTER_STEP_TRACE, OP_STATISTICS, check_csv_cells,
                                                check_duplicates, ranks_of)
from ascendprof.compare.gate import links as L
from ascendprof.compare.gate.errors import GateInputError
from ascendprof.engine import pipeline
from ascendprof.model import schemas as S
from ascendprof.model.errors import InputError, NothingAnalysable
from ascendprof.model.options import ReadOptions
from ascendprof.model.outputs import (COMMUNICATION_FILE, MATRIX_FILE, OP_STATISTICS_FILE,
                                      STEP_TRACE_FILE, SUMMARY_FILE)
from ascendprof.model.problems import Problems
from ascendprof.readers.communication import KINDS, op_kind, tables_from_json
from ascendprof.readers.values import first_odd_comm_value
from ascendprof.report import readback
from ascendprof.scan import load_sources
from ascendprof.sysio.textio import read_json

#: The folder msprof-analyze writes its cluster files into, under its -o directory.
PEER_OUTPUT = "cluster_analysis_output"

_KERNEL_COLS = ["rank", "step", "name", "op_type", "accelerator_core", "input_shapes", "dur_ns"]
#: the per-rank tables the gate compares (besides the kernels)
_SMALL = (S.STEP_TRACE, S.COMM_OPS, S.COMM_BANDWIDTH, S.OP_STATISTIC, S.COMM_LINKS)


def is_output_dir(path: Path) -> bool:
    """True for an ``ascendprof analyse`` output directory (or a directory of its CSVs)."""
    path = Path(path)
    return (path / readback.TABLES_DIR).is_dir() or (path / SUMMARY_FILE).is_file() or (
        any((path / n).is_file() for n in (STEP_TRACE_FILE, OP_STATISTICS_FILE,
                                            COMMUNICATION_FILE))
        and not any(p.name.endswith(("_ascend_pt", "_ascend_ms")) or p.name.startswith("PROF_")
                    for p in path.iterdir() if p.is_dir()))


def load_run(path: Path, *, workers: int | None = None) -> Side:
    """A profiling directory or an analyse output directory -> Side with every rank.

    Profiling directories go through scan and the engine's per-rank worker (one worker per
    rank); the step breakdown is the profiler's own (STEP_TRACE) or, when a rank has none, the
    recomputed one. Raises the project's errors (UsageError, NothingAnalysable, InputError).
    """
    path = Path(path)
    if not is_output_dir(path) and is_output_dir(path / PEER_OUTPUT):
        return load_output_dir(path / PEER_OUTPUT)  # msprof-analyze's -o directory
    if is_output_dir(path):
        return load_output_dir(path)
    return load_profiling_dir(path, workers=workers)


@dataclass
class _RankPart:
    rank: int
    tables: dict
    kernels: object  # pandas DataFrame or None
    metadata: dict


def _read_rank_dir(rank: int, rdir: Path, metadata: dict) -> _RankPart:
    """One ``tables/rank<r>`` folder -> its compared tables (COMM_OPS without the OPINFO text)
    and its kernels aggregated. Raises GateInputError for an unreadable Parquet file."""
    try:
        tables = readback.read_rank_tables(rdir, _SMALL, drop={S.COMM_OPS: ("opinfo_json",)})
        kernels = readback.read_rank_tables(rdir, [S.KERNELS],
                                            columns={S.KERNELS: _KERNEL_COLS}).get(S.KERNELS)
    except (OSError, ValueError) as e:  # pyarrow raises ArrowInvalid (a ValueError)
        raise GateInputError(rdir, f"unreadable Parquet table: {e}") from None
    if kernels is not None:
        kernels = aggregate_kernels(kernels) if len(kernels) else None
    return _RankPart(rank, tables, kernels, metadata)


def load_profiling_dir(path: Path, *, workers: int | None = None) -> Side:
    """Scan ``path`` and read every rank with the engine's per-rank worker
    (:func:`ascendprof.engine.pipeline.run_ranks`, a process pool when several; no advice and
    none of the analyses' per-rank parts, which the gate does not compare),
    its tables written to a temporary folder and read back as from an analyse output -> Side.
    Raises UsageError (no such directory), NothingAnalysable (no source / no readable rank)."""
    sources = load_sources(Path(path))
    with tempfile.TemporaryDirectory(prefix="ascendprof-gate-") as tmp:
        results = pipeline.run_ranks(sources, Path(tmp), workers=workers,
                                     read=ReadOptions(advice="off"), partials=False)
        parts = []
        for res in results:
            meta = (res.meta or {}).get("profiler_metadata") or {}
            part = _read_rank_dir(res.rank, Path(tmp) / f"rank{res.rank}", meta)
            st = part.tables.get(S.STEP_TRACE)
            if (st is None or not len(st)) and res.breakdown is not None \
                    and res.breakdown.num_rows:
                part.tables[S.STEP_TRACE] = res.breakdown.to_pandas()  # recomputed breakdown
            if part.tables or part.kernels is not None:
                parts.append(part)
    if not parts:
        raise NothingAnalysable(f"{path}: no rank could be read")
    return _side_from_parts(str(path), parts)


def _cat(frames: list) -> pd.DataFrame | None:
    frames = [f for f in frames if f is not None and len(f)]
    return pd.concat(frames, ignore_index=True) if frames else None


def _side_from_parts(label: str, parts: list[_RankPart], known_groups=None) -> Side:
    side = Side(label=label, ranks=sorted(p.rank for p in parts))
    side.steps = _cat([p.tables.get(S.STEP_TRACE) for p in parts])
    side.kernels = _cat([p.kernels for p in parts])
    ops = _cat([p.tables.get(S.OP_STATISTIC) for p in parts])
    if ops is not None:
        side.op_stats = ops.rename(columns={"core_type": "accelerator_core"})[
            ["rank", "op_type", "accelerator_core", "count", "total_ns"]]
    side.comm_ops = _cat([p.tables.get(S.COMM_OPS) for p in parts])
    side.comm_bw = _cat([p.tables.get(S.COMM_BANDWIDTH) for p in parts])
    side.groups = group_labels(side.comm_ops, {p.rank: p.metadata for p in parts}, known_groups)
    side.links = L.from_rank_links(_cat([p.tables.get(S.COMM_LINKS) for p in parts]),
                                   side.groups)
    return side


def load_output_dir(path: Path) -> Side:
    """An ``ascendprof analyse`` output directory, msprof-analyze's ``cluster_analysis_output``
    or a directory of their committed files -> Side: tables/rank<r>/*.parquet first, then
    cluster_step_trace_time.csv / op_statistics.csv / cluster_communication.json (per-op times
    and bandwidth per group) for what the tables lack; group labels from
    communication_group.json. Each CSV cell must be a number and no row may repeat. Raises
    GateInputError when nothing usable is there or an input is incomplete."""
    path = Path(path)
    parts = [_read_rank_dir(rank, rdir, {})
             for rank, rdir in readback.rank_table_dirs(path / readback.TABLES_DIR)]
    side = _side_from_parts(str(path), parts, _groups_from_json(path)) if parts else \
        Side(label=str(path), ranks=[])
    steps_csv = path / STEP_TRACE_FILE
    if side.steps is None and steps_csv.is_file():
        check_csv_cells(steps_csv, CLUSTER_STEP_TRACE)
        side.steps = readback.cluster_step_trace(steps_csv)
        check_duplicates(Side("", [], steps=side.steps), steps_csv)
    ops_csv = path / OP_STATISTICS_FILE
    if side.kernels is None and side.op_stats is None and ops_csv.is_file():
        check_csv_cells(ops_csv, OP_STATISTICS)
        side.op_stats = readback.op_statistics(ops_csv)
        check_duplicates(Side("", [], op_stats=side.op_stats), ops_csv)
    if side.comm_ops is None and (path / COMMUNICATION_FILE).is_file():
        side.comm_ops, side.comm_bw, seen = read_cluster_communication(path / COMMUNICATION_FILE)
        side.groups = {**seen, **_groups_from_json(path)}
    matrix = path / MATRIX_FILE
    if side.links is None and matrix.is_file():
        side.links = L.from_matrix(readback.matrix_links(read_json(matrix)))
    side.ranks = ranks_of(side)
    if not side.ranks:
        raise GateInputError(path, "analyse output directory without any usable table")
    return side


def read_cluster_communication(path: Path):
    """cluster_communication.json of msprof-analyze (or ascendprof analyse) -> (COMM_OPS frame,
    COMM_BANDWIDTH frame, group name -> GroupLabel with the ranks of the group key).

    Layouts (spec §8): ``{"(r0, r1)": {step: {"<op>@<group>": {rank: OPINFO}}}}`` (26.x) and the
    older ``{"collective" | "p2p": {step: {...}}}`` (read by
    :func:`ascendprof.report.readback.communication_entries`); the ``Total Op Info@<group>``
    entries are sums and left out. Each rank's OPINFO goes through the communication.json
    reader, so values and the checks on them are those of a rank's own file (§A.5). Raises
    InputError."""
    per_rank: dict[int, dict] = {}
    labels: dict[str, GroupLabel] = {}
    for e in readback.communication_entries(path):
        if e.is_total or not isinstance(e.by_rank, dict):
            continue
        group = e.group
        if group not in labels and e.top not in KINDS and e.ranks:
            labels[group] = GroupLabel(group, "", e.ranks)
        kind = e.top if e.top in KINDS else op_kind(e.op_key)
        for rank, info in e.by_rank.items():
            try:
                r = int(rank)
            except ValueError:
                raise InputError(path, f"{e.op_key}: rank {rank!r} is not a number") from None
            (per_rank.setdefault(r, {}).setdefault(e.step, {})
             .setdefault(kind, {}))[e.op_key] = info
    ops, bws = [], []
    for r, data in sorted(per_rank.items()):
        odd = Problems()
        t = tables_from_json(data, path, r, odd)
        if len(odd):  # a gate input is complete or refused
            raise InputError(path, f"rank {r}: {odd.items[0].reason}")
        why = first_odd_comm_value(t)  # a -17.5 GB/s would move the group's bandwidth
        if why:
            raise InputError(path, f"rank {r}: {why}; a gate input must be complete")
        ops.append(t[S.COMM_OPS].drop_columns(["opinfo_json"]).to_pandas())
        bws.append(t[S.COMM_BANDWIDTH].to_pandas())
    return _cat(ops), _cat(bws), labels


def _groups_from_json(path: Path) -> dict[str, GroupLabel]:
    """Group labels from communication_group.json ``comm_group_parallel_info`` (msprof-analyze
    layout: group_name, rank_set, pg_name); empty when absent or unreadable."""
    return {g.group_name: GroupLabel(g.group_name, g.pg_name, g.ranks)
            for g in readback.parallel_groups(readback.read_groups(path))}
