"""Bounded lists of summary.json, and how to read them.

A per-rank or per-step list of summary.json (``sources``, ``ranks``, ``breakdown_check``,
``problems``, ``analyses.idle`` ...) is written whole up to :data:`MAX_ROWS` rows. Above that it
becomes an object that says so::

    {"bounded": {"rows": <rows in the whole list>, "shown": <rows in items>,
                 "chosen": "<how the shown rows were chosen>",
                 "full_table": "<output file with every row>" | null},
     "items": [<the chosen rows, each shaped like a row of the whole list>],
     ...}                                 # per list: spread, per_rank_mean, counts, groups

A rank map (``breakdown_methods``, ``missing``, ``not_read``) becomes ``{"bounded": ...,
"groups": [...]}``: one group per distinct value with its ranks as ``[first, last]`` runs, so
nothing is left out. A reader that finds a list where it expected one has the whole list; one
that finds ``bounded`` must not take ``items`` for every row. Light to import (no Arrow or
pandas): the terminal summary of a restored run reads it.
"""

from __future__ import annotations

#: a list of summary.json is written whole up to this many rows (128 ranks of one step, or a
#: few ranks of a few dozen steps); above, its bounded form
MAX_ROWS = 128
#: rows a bounded list shows: the worst of them ...
SHOWN = 20
#: ... plus up to this many rows of the ranks that warning or critical verdicts name
NAMED = 10


def is_bounded(v) -> bool:
    """Whether ``v`` (a value of summary.json) is a bounded list."""
    return isinstance(v, dict) and isinstance(v.get("bounded"), dict)


def items(v) -> list:
    """The rows of ``v`` that summary.json holds: the whole list, or a bounded list's shown
    rows (check :func:`is_bounded` before taking them for every row)."""
    return list(v.get("items") or []) if is_bounded(v) else list(v or [])


def total(v) -> int:
    """How many rows the list ``v`` had before it was bounded (its length when it was not)."""
    return int(v["bounded"].get("rows") or 0) if is_bounded(v) else len(v or [])


def marker(rows: int, shown: int, chosen: str, full_table: str | None) -> dict:
    """The ``bounded`` member of a bounded list."""
    return {"rows": rows, "shown": shown, "chosen": chosen, "full_table": full_table}


def runs(ranks) -> list[list[int]]:
    """Sorted distinct ranks as ``[first, last]`` runs of consecutive ranks."""
    out: list[list[int]] = []
    for r in sorted({int(x) for x in ranks}):
        if out and r == out[-1][1] + 1:
            out[-1][1] = r
        else:
            out.append([r, r])
    return out


def expand(rs) -> list[int]:
    """The ranks of ``[first, last]`` runs (see :func:`runs`)."""
    return [r for a, b in rs for r in range(int(a), int(b) + 1)]


def rank_map(v) -> dict:
    """A rank map of summary.json (``missing``, ``not_read``, ``breakdown_methods``) as
    ``{rank (str): value}``, whole or bounded: a bounded one's groups give every rank back."""
    if not is_bounded(v):
        return {str(k): x for k, x in (v or {}).items()}
    out: dict = {}
    for g in v.get("groups") or []:
        for r in expand(g.get("ranks") or []):
            out[str(r)] = g.get("value")
    return out


def steps_of(v) -> tuple[list, int]:
    """(step ids held, how many steps there were) of a step list, whole or bounded."""
    return items(v), total(v)


def source_column(summary: dict | None, name: str) -> list:
    """One field (``rank``, ``device_id``) of every source of a summary, in order: from the
    rows, or a bounded ``sources``' complete ``columns``."""
    src = (summary or {}).get("sources")
    if is_bounded(src):
        return list((src.get("columns") or {}).get(name) or [])
    return [s.get(name) for s in src or []]
