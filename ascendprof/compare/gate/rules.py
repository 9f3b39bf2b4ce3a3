"""Gate rules: the metrics, a :class:`Rule` (metric, scope, allowed change, noise floor), the
default rules, and the two ways to give rules (``--rule`` text, a TOML file).

Errors: :class:`~ascendprof.compare.gate.errors.GateUsageError` (exit 2) for an unknown
metric or scope, a limit or floor that is not a finite number, a bad TOML file.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path

from ascendprof.compare.diff import COMM_METRICS, STEP_METRICS
from ascendprof.compare.gate.errors import GateUsageError

#: Time metrics of the step breakdown (names as in step_trace_time.csv, spec §A.1).
STEP_METRIC_NAMES = tuple(STEP_METRICS)
OP_TIME = "op_time"        #: an op type's total kernel time per step (kernel_details / op_statistic)
BANDWIDTH = "bandwidth"    #: GB/s per transport: Σ Transit Size / Σ Transit Time (spec §7.2)
#: the observations of ``bandwidth@link`` (src -> dst links, from communication_matrix.json)
LINK_BANDWIDTH = "link bandwidth"
GROUP_METRICS = tuple(COMM_METRICS)  #: elapse, transit, wait, synchronization, idle per group
METRICS = STEP_METRIC_NAMES + (OP_TIME, BANDWIDTH) + GROUP_METRICS

#: Which scopes (cluster, rank, op_type, group, link) each metric kind allows.
_SCOPES_OF = {**{m: ("cluster", "rank") for m in STEP_METRIC_NAMES},
              OP_TIME: ("op_type", "rank", "cluster"),
              BANDWIDTH: ("group", "link", "rank", "cluster"),
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
#: rank), any op type's total time per step +20 % and > 1 ms, bandwidth −10 % per group and
#: transport, per src -> dst link and per rank and transport. Each value compared is one
#: rank's, one link's or one op type's (the median over steps), never only a median over the
#: ranks of a group: one slow rank or link among many would not move that.
DEFAULT_RULES: tuple[Rule, ...] = (
    Rule("Stage", "cluster", 5.0, 0.1), Rule("Stage", "rank", 5.0, 0.1),
    Rule("Computing", "cluster", 5.0, 0.1), Rule("Computing", "rank", 5.0, 0.1),
    Rule("Communication(Not Overlapped)", "cluster", 10.0, 0.5),
    Rule("Communication(Not Overlapped)", "rank", 10.0, 0.5),
    Rule("Free", "cluster", 10.0, 0.5), Rule("Free", "rank", 10.0, 0.5),
    Rule(OP_TIME, "op_type", 20.0, 1.0),
    Rule(BANDWIDTH, "group", -10.0, 0.1), Rule(BANDWIDTH, "link", -10.0, 0.1),
    Rule(BANDWIDTH, "rank", -10.0, 0.1),
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
          "groups": "group", "communication_group": "group", "links": "link"}.get(sc, sc)
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
        scope = "cluster"          # cluster | rank | op_type | group | link
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
