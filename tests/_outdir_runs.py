"""Runs of :class:`ascendprof.engine.outdir.OutputDir` without the analysis: a set of output
files (and ``tables/`` files) staged, then committed or left, for the output-set tests."""

from __future__ import annotations

from pathlib import Path

from ascendprof.engine import outdir
from ascendprof.model.outputs import OUTPUT_FILES


def _stage(od, files: dict[str, bytes], tables: dict[str, bytes] | None) -> None:
    for name, data in files.items():
        (od.staging / name).write_bytes(data)
    for rel, data in (tables or {}).items():
        p = od.staging / "tables" / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)


def staged(out: Path, files: dict[str, bytes], tables: dict[str, bytes] | None = None):
    """A run's OutputDir with ``files`` staged (entered; the caller commits or leaves)."""
    od = outdir.OutputDir(out, OUTPUT_FILES, tables=tables is not None)
    od.__enter__()
    _stage(od, files, tables)
    return od


def run_once(out: Path, files: dict[str, bytes], tables: dict[str, bytes] | None = None) -> None:
    """One complete run writing ``files`` (and ``tables/<rel>`` when given)."""
    with outdir.OutputDir(out, OUTPUT_FILES, tables=tables is not None) as od:
        _stage(od, files, tables)
        od.commit()
