"""A gate run: both inputs loaded (:func:`load_side`), their shapes compared, the rules
evaluated -> :class:`GateResult` (every check, the failures, a one-line summary, the JSON
document), and how its changes and rank sets are worded."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from pathlib import Path

import pandas as pd

from ascendprof.compare.diff import Side
from ascendprof.compare.gate.csv_inputs import load_csv
from ascendprof.compare.gate.dir_inputs import load_run
from ascendprof.compare.gate.errors import GateInputError, GateUsageError
from ascendprof.compare.gate.evaluate import FAIL, PASS, SKIP, STATISTIC, evaluate
from ascendprof.compare.gate.observe import observations
from ascendprof.compare.gate.rules import BANDWIDTH, OP_TIME, Rule
from ascendprof.model.errors import AscendProfError, InputError
from ascendprof.model.ranks import rank_ranges


def load_side(path: Path, *, workers: int | None = None) -> Side:
    """Any gate input (see :mod:`ascendprof.compare.gate`): one exported CSV
    (:mod:`~ascendprof.compare.gate.csv_inputs`) or a directory
    (:mod:`~ascendprof.compare.gate.dir_inputs`) -> :class:`~ascendprof.compare.diff.Side`.

    Raises GateInputError / GateUsageError (exit 2) when the path is missing, unreadable, or
    holds nothing the gate can compare.
    """
    path = Path(path)
    if not path.exists():
        raise GateUsageError(f"{path}: no such file or directory")
    try:
        return load_csv(path) if path.is_file() else load_run(path, workers=workers)
    except (GateInputError, GateUsageError):
        raise
    except InputError as e:
        raise GateInputError(e.path, e.reason, e.where) from None
    except AscendProfError as e:
        raise GateInputError(path, str(e).removeprefix(f"{path}: ")) from None


def fmt_change(change, pct, unit: str) -> str:
    """``+12.345 ms (+31.0 %)``; ``n/a`` when unknown."""
    if change is None or (isinstance(change, float) and math.isnan(change)):
        return "n/a"
    p = "" if pct is None or (isinstance(pct, float) and math.isnan(pct)) else f" ({pct:+.1f} %)"
    return f"{change:+.3f} {unit}{p}"


def ranges(ranks) -> str:
    """``0-3, 8`` for a set of ints, every run listed; ``none`` for no rank."""
    return rank_ranges(ranks, len(ranks)) or "none"


def few(items, n: int = 4) -> str:
    items = sorted(map(str, items))
    return ", ".join(items[:n]) + (f" and {len(items) - n} more" if len(items) > n else "")


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

    def summary_line(self, most: int = 10) -> str:
        """One line: counts, and the failed checks named (metric, scope key, change): the
        ``most`` first of them, then how many more."""
        c = self.checks["verdict"].value_counts()
        head = (f"{int(c.get(FAIL, 0))} regression(s), {int(c.get(PASS, 0))} passed, "
                f"{int(c.get(SKIP, 0))} skipped")
        if not self.regression:
            return "no regression: " + head
        items = [f"{r.metric} {r.key} {fmt_change(r.change, r.change_pct, r.unit)}"
                 for r in self.failures.head(most).itertuples()]
        more = len(self.failures) - len(items)
        return "REGRESSION: " + head + " — " + "; ".join(items) + (
            f"; and {more} more" if more > 0 else "")

    def as_dict(self) -> dict:
        checks = self.checks.astype(object).where(pd.notna(self.checks), None)
        return {"baseline": self.baseline, "current": self.current,
                "regression": self.regression, "summary": self.summary_line(),
                "statistic": STATISTIC, "warnings": list(self.warnings),
                "rules": [asdict(r) for r in self.rules],
                "checks": checks.to_dict(orient="records")}


#: Below this share of op types in common, two runs are taken for different models.
MODEL_OVERLAP = 0.5


def shape_differences(sb: Side, sc: Side, ob: pd.DataFrame, oc: pd.DataFrame) -> list[str]:
    """How two gate inputs differ in shape, one sentence each: other ranks, other communication
    groups (by parallel-group name and ranks), or mostly other op types (another model: less
    than :data:`MODEL_OVERLAP` of the op types in common). Metrics one side lacks altogether
    are not differences of shape (their rules are skipped)."""
    out = []
    if set(sb.ranks) != set(sc.ranks):
        out.append(f"the ranks differ: baseline has {len(sb.ranks)} ({ranges(sb.ranks)}), "
                   f"current {len(sc.ranks)} ({ranges(sc.ranks)})")
    comm = ("elapse", BANDWIDTH)
    gb = set(ob.loc[ob["metric"].isin(comm), "key"])
    gc = set(oc.loc[oc["metric"].isin(comm), "key"])
    if gb and gc and gb != gc:
        out.append(f"the communication groups differ: only in baseline {few(gb - gc) or '-'}; "
                   f"only in current {few(gc - gb) or '-'}")
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
    if sb.ranks and sc.ranks and not set(sb.ranks) & set(sc.ranks):
        # cluster, op type and group values of other ranks are no comparison: before, they
        # were compared anyway and "passed"
        raise GateInputError(current, f"no rank in common with {baseline} (baseline "
                                      f"{ranges(sb.ranks)}, current {ranges(sc.ranks)}): "
                                      f"nothing to compare")
    if set(sb.ranks) != set(sc.ranks) and set(sb.ranks) & set(sc.ranks):
        common = sorted(set(sb.ranks) & set(sc.ranks))
        warnings.append(f"cluster, op type and group checks use the {len(common)} rank(s) both "
                        f"have ({ranges(common)})")
    one_sided: list[str] = []  # ranks with a metric's values on one side only
    checks = evaluate(ob, oc, rules, common, said=one_sided)
    if one_sided and same_shape:
        raise GateInputError(current, f"not the same shape as {baseline}: "
                                      + "; ".join(one_sided))
    warnings += one_sided
    compared = checks[checks["verdict"] != SKIP] if len(checks) else checks
    if not len(compared):
        have_b = sorted(set(ob["metric"])) or ["nothing"]
        have_c = sorted(set(oc["metric"])) or ["nothing"]
        raise GateInputError(current, f"nothing comparable with {baseline} under the rules "
                                      f"(baseline has {', '.join(have_b)}; current has "
                                      f"{', '.join(have_c)})")
    return GateResult(str(baseline), str(current), checks, rules, warnings)
