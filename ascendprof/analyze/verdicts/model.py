"""The verdict format (docs/verdicts.md, "The verdict format") and small helpers the rules share."""

from __future__ import annotations

#: Keys of every verdict dict, in output order.
VERDICT_KEYS = ("id", "category", "severity", "scope", "ranks", "groups", "message", "evidence",
                "symptoms", "threshold", "next_step", "caused_by")
#: Keys of a symptom (a consequence attached under its cause).
SYMPTOM_KEYS = ("id", "category", "scope", "ranks", "groups", "message", "evidence", "caused_by")
SEVERITY_ORDER = {"critical": 0, "warning": 1, "info": 2}


def make_verdict(category: str, scope: str, ranks, severity: str, message: str, next_step: str,
                 *, evidence: dict | None = None, threshold: dict | None = None,
                 groups: list[dict] | None = None, symptoms: list[dict] | None = None,
                 id: str | None = None, caused_by: str | None = None) -> dict:  # noqa: A002
    """One verdict in the documented format. For rule functions, built-in or contributed
    (:func:`ascendprof.analyze.verdicts.register_rule`).

    ``category``: what kind of cause ("stage", "slow_rank", "schedule", "compute",
    "communication", "slow_link", "slow_group", "collection" …, or a contributed one such as
    "data", "memory", "moe"); ``scope``: "cluster" | "stage" | "group" | "rank" | "link" |
    "transport" | "collection"; ``ranks``: the global ranks the cause is on; ``severity``:
    "critical" | "warning" | "info"; ``groups``: ``[{"name": parallel-group name or id, "id":
    group id, "global_ranks": [...]}]`` the verdict talks about; ``symptoms``: consequences
    attached as evidence (each with at least ``message``, ``ranks`` and ``caused_by``);
    ``caused_by``: id of another verdict this one is a consequence of (it is then moved under
    that verdict's symptoms by derive). ``id`` defaults to ``category:scope:ranks``; derive makes
    ids unique. Raises ValueError for an unknown severity.
    """
    if severity not in SEVERITY_ORDER:
        raise ValueError(f"severity must be one of {sorted(SEVERITY_ORDER)}, got {severity!r}")
    ranks = sorted({int(r) for r in ranks})
    return {"id": id or f"{category}:{scope}:{','.join(map(str, ranks))}",
            "category": category, "severity": severity, "scope": scope, "ranks": ranks,
            "groups": list(groups or []), "message": message, "evidence": dict(evidence or {}),
            "symptoms": list(symptoms or []), "threshold": dict(threshold or {}),
            "next_step": next_step, "caused_by": caused_by}


def symptom(cause_id: str, category: str, ranks, message: str, *, groups=None, evidence=None,
            scope: str = "rank") -> dict:
    """A consequence of the verdict ``cause_id``, for its ``symptoms`` list."""
    ranks = sorted({int(r) for r in ranks})
    return {"id": f"{cause_id}/{category}:{','.join(map(str, ranks))}", "category": category,
            "scope": scope, "ranks": ranks, "groups": list(groups or []), "message": message,
            "evidence": dict(evidence or {}), "caused_by": cause_id}


def severity(measure: float, threshold: float, factor: float, below: bool = False) -> str:
    """warning past the threshold, critical ``factor`` times past it (or below 1/factor)."""
    if below:
        return "critical" if threshold > 0 and measure <= threshold / factor else "warning"
    return "critical" if measure >= threshold * factor else "warning"


def ms(ns) -> float:
    """ns -> ms rounded to the µs."""
    return round(float(ns) / 1e6, 3)


def pct(x) -> float:
    return round(float(x), 2)
