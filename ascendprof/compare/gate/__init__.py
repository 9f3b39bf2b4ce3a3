"""Regression gate: load a baseline and a current result, compare metrics under rules, decide.

Each side may be

- a profiling directory (any layout ``ascendprof scan`` finds: ``*_ascend_pt``, ``*_ascend_ms``,
  ``PROF_*`` …) — read by the engine's per-rank worker, as ``analyse`` reads it
  (:func:`load_run`);
- an ``ascendprof analyse`` output directory — ``tables/rank<r>/<table>.parquet`` when present,
  else ``cluster_step_trace_time.csv`` and ``op_statistics.csv`` (any directory holding only
  those CSVs works too, e.g. a committed baseline);
- one exported CSV: ascendprof's or msprof-analyze's ``cluster_step_trace_time.csv`` (spec §8),
  the profiler's ``step_trace_time.csv`` (§A.1), ``kernel_details.csv`` (§A.2),
  ``op_statistic.csv`` (§A.3) or ascendprof's ``op_statistics.csv``.

Everything is reduced to one *observation* table (:data:`OBS_COLUMNS`): one value per metric,
rank, step and key. A :class:`Rule` names a metric, a scope (``cluster``, ``rank``,
``op_type``, ``group``, ``link``), the allowed relative change and an absolute noise floor;
:func:`evaluate` takes the median over the (rank, step) values of each scope key on each side,
reports the spread, and gives a verdict per check (:data:`CHECK_COLUMNS`).

Errors: every unreadable or incomparable input raises :class:`GateInputError` /
:class:`GateUsageError` (exit code 2).

Modules (each imports only those above it in this list):

- :mod:`.errors` — GateUsageError, GateInputError;
- :mod:`.rules` — metrics, :class:`Rule`, :data:`DEFAULT_RULES`, ``--rule`` text and TOML files;
- :mod:`.links` — the src -> dst links of an input, in global ranks;
- :mod:`.csv_inputs` — one exported CSV as an input;
- :mod:`.dir_inputs` — profiling, analyse and msprof-analyze output directories as inputs (our
  own output files are read by :mod:`ascendprof.report.readback`);
- :mod:`.observe` — :func:`observations`, an input as one table of values;
- :mod:`.evaluate` — :func:`evaluate`, rules on two observation tables;
- :mod:`.result` — :func:`load_side` (any input), :func:`run_gate` and :class:`GateResult`,
  and how changes and rank sets are worded.

The names below are the public API (what the command, the API and the tests use); import them
from here.
"""

from __future__ import annotations

from ascendprof.compare.gate.csv_inputs import read_op_statistics
from ascendprof.compare.gate.dir_inputs import load_run
from ascendprof.compare.gate.errors import GateInputError, GateUsageError
from ascendprof.compare.gate.evaluate import CHECK_COLUMNS, FAIL, NO_KEY, PASS, SKIP, evaluate
from ascendprof.compare.gate.result import GateResult, fmt_change, load_side, run_gate
from ascendprof.compare.gate.rules import (DEFAULT_RULES, Rule, load_rules_toml, merge_rules,
                                           parse_rule)

__all__ = ["Rule", "DEFAULT_RULES", "parse_rule", "load_rules_toml", "merge_rules", "load_side",
           "load_run", "read_op_statistics", "CHECK_COLUMNS", "NO_KEY", "PASS", "FAIL", "SKIP",
           "evaluate", "GateResult", "run_gate", "fmt_change", "GateUsageError",
           "GateInputError"]
