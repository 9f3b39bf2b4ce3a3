"""Helpers for the advice tests: copy a real rank, edit one of its files the way a problem
would show in it, and run the rank's advice exactly as analyse does (pipeline.process_rank).

The edits use the csv / json / sqlite3 modules directly, and the tests compute their expected
findings from the edited files the same independent way, never from ascendprof's tables.
"""

from __future__ import annotations

import csv
import json
import shutil
import sqlite3
from pathlib import Path

OUT = "ASCEND_PROFILER_OUTPUT"


def copy_rank(src: Path, dst: Path, skip: tuple[str, ...] = ()) -> Path:
    """Copy the rank directory ``src`` to ``dst`` (files named in ``skip`` left out)."""
    shutil.copytree(src, dst, ignore=lambda d, names: [n for n in names if n in skip])
    return dst


def read_rows(path: Path) -> tuple[list[str], list[dict]]:
    with open(path, newline="", encoding="utf-8") as f:
        r = csv.DictReader(f)
        return list(r.fieldnames), list(r)


def write_rows(path: Path, header: list[str], rows: list[dict]) -> None:
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=header)
        w.writeheader()
        w.writerows(rows)


def edit_csv(rank_dir: Path, name: str, fn) -> None:
    """Rewrite ``ASCEND_PROFILER_OUTPUT/<name>`` with ``fn(rows)`` (rows: list of dicts, in
    place or returned)."""
    p = Path(rank_dir) / OUT / name
    header, rows = read_rows(p)
    out = fn(rows)
    write_rows(p, header, rows if out is None else out)


def rows(rank_dir: Path, name: str) -> list[dict]:
    return read_rows(Path(rank_dir) / OUT / name)[1]


def edit_json(path: Path, fn) -> None:
    obj = json.loads(Path(path).read_text(encoding="utf-8"))
    out = fn(obj)
    Path(path).write_text(json.dumps(obj if out is None else out), encoding="utf-8")


def trace_events(rank_dir: Path) -> list[dict]:
    obj = json.loads((Path(rank_dir) / OUT / "trace_view.json").read_text(encoding="utf-8"))
    return obj["traceEvents"] if isinstance(obj, dict) else obj


def db_query(path: Path, sql: str, params=()):
    con = sqlite3.connect(str(path))
    try:
        return con.execute(sql, params).fetchall()
    finally:
        con.close()


def advise(rank_dir: Path, mode: str = "summary") -> dict:
    """The rank's advice result ({"findings", "status"}) as analyse --advice ``mode`` makes it."""
    from ascendprof.engine.pipeline import process_rank
    from ascendprof.model.options import ReadOptions
    from ascendprof.scan import load_sources

    (src,) = load_sources(Path(rank_dir))
    res = process_rank(src, read=ReadOptions(advice=mode))
    assert res.advice is not None, res.problems.brief()
    return res.advice


_REAL: dict = {}


def advise_real(rank_dir: Path, mode: str = "summary") -> dict:
    """:func:`advise` of an unmodified real export, computed once per session (read-only)."""
    import copy

    key = (str(rank_dir), mode)
    if key not in _REAL:
        _REAL[key] = advise(rank_dir, mode)
    return copy.deepcopy(_REAL[key])


def found(result: dict, rule_id: str) -> list[dict]:
    """The findings of one rule."""
    return [f for f in result["findings"] if f["id"] == rule_id]


def status(result: dict, rule_id: str) -> str:
    return result["status"][rule_id][0]


def stage_us(rank_dir: Path) -> float:
    """The profiler's step time (Stage, us) of a one-step rank from step_trace_time.csv."""
    (r,) = rows(rank_dir, "step_trace_time.csv")
    return float(r["Stage"])
