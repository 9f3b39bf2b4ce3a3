"""The two layouts of communication.json / communication_matrix.json and the names in them.

- torch_npu / MindSpore re-packaging: ``{step_key: {"collective" | "p2p": {"<op>@<group>": INFO,
  "Total Op Info": ...}}}`` with ``step_key`` = ``"step<N>"`` (or ``"step"`` without step info);
- raw CANN (``PROF_*/.../communication*.json``): the flat ``{"<op>@<group>": INFO, "Total HCCL
  Operators": ...}``. Its ops get step key ``"step"`` and are split into p2p / collective by the
  op-name rule of §A.5, exactly as msprof-analyze's msprof adapters do.

The profiler's own per-step totals (``Total Op Info``, ``Total HCCL Operators``, any key starting
with ``Total``) are not rows; the cluster builders recompute them.
"""

from __future__ import annotations

import re
from pathlib import Path

import orjson

from ascendprof.model.tasks import op_kind  # noqa: F401 - one definition, re-exported
from ascendprof.model.errors import InputError
from ascendprof.model.problems import Problems

KINDS = ("collective", "p2p")
#: lower-cased op-name prefixes of point-to-point ops (spec §A.5)
FLAT_STEP_KEY = "step"
_STEP_RE = re.compile(r"^step(\d+)$")

TIME_INFO = "Communication Time Info"
BANDWIDTH_INFO = "Communication Bandwidth Info"
SIZE_DIST = "Size Distribution"
#: Communication Time Info fields an op cannot be analysed without (spec §A.5, §7.2).
REQUIRED_TIMES = ("Elapse Time(ms)", "Transit Time(ms)", "Wait Time(ms)",
                  "Synchronization Time(ms)")


def step_number(step_key: str) -> int | None:
    """``"step13"`` -> 13; ``"step"`` or anything else -> None."""
    m = _STEP_RE.match(str(step_key))
    return int(m.group(1)) if m else None


def split_op_key(op_key: str) -> tuple[str, str]:
    """``"hcom_allReduce__1_1@123"`` -> (``"hcom_allReduce__1_1"``, ``"123"``); the group is what
    follows the last '@' (as msprof-analyze takes it), '' when there is none."""
    name, at, group = op_key.rpartition("@")
    return (name, group) if at else (op_key, "")


def is_total(key: str) -> bool:
    """Whether ``key`` is one of the profiler's "Total ..." sums (any case), not an op."""
    return key[:1] in "Tt" and key[:5].lower() == "total"


def is_flat(data: dict) -> bool:
    """True for the raw CANN layout: top-level keys are op keys, not step keys."""
    return any("@" in k or is_total(k) for k in data)


def iter_ops(data: dict, path: Path, problems: Problems | None, rank: int):
    """Yield (step_key, kind, op_key, info) for every op of either layout, in file order.
    Raises InputError when ``data`` is not an object; a step or kind entry that is not one is
    skipped and recorded in ``problems`` when given."""
    if not isinstance(data, dict):
        raise InputError(path, "top level is not a JSON object")
    if is_flat(data):
        for op_key, info in data.items():
            if not is_total(op_key):
                yield FLAT_STEP_KEY, op_kind(op_key), op_key, info
        return
    for step_key, step in data.items():
        if not isinstance(step, dict):
            if problems is not None:
                problems.warn(path, f"step entry {step_key!r} is not an object; skipped", rank=rank)
            continue
        for kind, ops in step.items():
            if not isinstance(ops, dict):
                if problems is not None:
                    problems.warn(path, f"{step_key}/{kind} is not an object; skipped", rank=rank)
                continue
            for op_key, info in ops.items():
                if not is_total(op_key):
                    yield step_key, kind, op_key, info


def report_bad_times(problems: Problems, path: Path, rank: int, count: int, step_key: str,
                     key: str, value, name: str, group: str) -> None:
    """The one problem of a file whose ``count`` ops were left out for a time that is not a
    non-negative number (the first: ``key`` = ``value`` of ``name@group`` in ``step_key``)."""
    problems.add(path, f"{count} op(s) left out: a {TIME_INFO} time that is not a "
                       f"non-negative number (e.g. {key} = {_show(value)} in "
                       f"{name}@{group})",
                 rank=rank, where=step_key, severity="skipped",
                 affects=("communication", "communication_matrix", "verdicts"))


def _show(v) -> str:
    text = orjson.dumps(v).decode() if not isinstance(v, float) else repr(v)
    return text if len(text) <= 40 else text[:37] + "..."
