"""``ascendprof gate BASELINE CURRENT``: the CI regression gate (logic in :mod:`ascendprof.compare.gate`).

Only click is imported at module level so ``ascendprof --help`` stays fast.
"""

from __future__ import annotations

import math
import os
import sys
from pathlib import Path

import click

from ascendprof.model.errors import EXIT_OK, EXIT_REGRESSION
from ascendprof.report.junit import write_junit, write_markdown
from ascendprof.report.terminal import control_safe, term_text
from ascendprof.sysio.atomic import check_report_path
from ascendprof.sysio.lifetime import stdout_may_close
from ascendprof.sysio.textio import is_regular

GATE_EPILOG = ("Exit codes: 0 no regression, 1 regression (a check failed), 2 usage or data "
               "error (missing, unreadable or incomplete input -- a cell that is not a number, "
               "a duplicated row --, bad rules, nothing comparable, or with --same-shape "
               "inputs of another shape).")


@click.command(epilog=GATE_EPILOG)
@click.argument("baseline", type=click.Path(path_type=Path))
@click.argument("current", type=click.Path(path_type=Path))
@click.option("--rules", "rules_file", type=click.Path(path_type=Path), default=None,
              help="TOML rules file ([[rule]] metric, scope, max_change_pct, noise_floor; "
                   "defaults = true|false).")
@click.option("--rule", "rule_texts", multiple=True, metavar="METRIC[@SCOPE]=LIMIT%[,floor=F]",
              help="Add or replace a rule, e.g. 'Stage@cluster=+3%', "
                   "'op_time@op_type=+20%,floor=1ms', 'bandwidth@link=-15%'. Repeatable.")
@click.option("--no-defaults", is_flag=True, help="Use only the rules given by --rules/--rule.")
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table",
              show_default=True, help="Terminal table, or the full result as JSON on stdout.")
@click.option("--junit", "junit_file", type=click.Path(path_type=Path), default=None,
              help="Write a JUnit XML report (one testcase per rule and scope).")
@click.option("--markdown", "markdown_file", type=click.Path(path_type=Path), default=None,
              help="Write a Markdown report (e.g. to $GITHUB_STEP_SUMMARY).")
@click.option("--all-checks", "--all", "all_checks", is_flag=True,
              help="Terminal table: every check, passed ones too (by default only the failed "
                   "checks and the rules skipped, then the counts).")
@click.option("--failed-only", is_flag=True, help="Terminal table: the failed and every skipped "
                                                  "check.")
@click.option("--workers", type=click.IntRange(min=1), default=None,
              help="Worker processes for reading profiling directories.")
@click.option("--same-shape", is_flag=True,
              help="Exit 2 when the two inputs differ in shape (other ranks, other "
                   "communication groups, mostly other op types) instead of warning and "
                   "comparing what they have in common.")
def command(baseline, current, rules_file, rule_texts, no_defaults, fmt, junit_file,
            markdown_file, all_checks, failed_only, workers, same_shape):
    """Compare CURRENT against BASELINE and fail on a performance regression.

    Each side is a profiling directory, an `ascendprof analyse` output directory,
    msprof-analyze's output directory (cluster_analysis_output: bandwidth and per-group times
    from its cluster_communication.json), a directory of committed copies of those files, or
    one exported CSV: cluster_step_trace_time.csv (ascendprof's or msprof-analyze's),
    step_trace_time.csv, kernel_details.csv, op_statistic.csv or ascendprof's op_statistics.csv.

    Default rules (a rule of the same metric and scope from --rules/--rule replaces one):
    Stage (step time) +5 %, Computing +5 %, Communication(Not Overlapped) +10 % and Free +10 %,
    each for the cluster and per rank; any op type's total time per step +20 % and more than
    1 ms; bandwidth -10 % per communication group and transport, per link (src->dst and
    transport, from communication_matrix.json) and per rank and transport.

    Each check compares one value per side: the median over the steps, and for the cluster
    and group scopes over the ranks too (as `ascendprof diff` shows them); the mean and the
    spread (min-max) are reported too. A median over many ranks hides one of them: one link of
    an 8-rank group 30 % slower moves the group's median by less than 0.1 %. So the defaults
    also judge every rank and every link on its own: one slow rank or link fails the gate,
    named (`Computing rank 5`, `bandwidth tp (0-7) 2->3 HCCS`), while noise of a few
    percent everywhere passes. Groups are matched by parallel-group name and ranks.

    The terminal shows the failed checks and the rules skipped (with the reason, e.g. no
    bandwidth in committed CSVs), then the counts; --all-checks shows every check. --format
    json, --junit and --markdown always hold every check.

    Metrics: Computing, Communication(Not Overlapped), Overlapped, Communication, Free, Stage,
    Bubble, Communication(Not Overlapped and Exclude Receive), Preparing (scopes cluster, rank);
    op_time (op_type, rank, cluster); bandwidth (group, link, rank, cluster); elapse, transit,
    wait, synchronization, idle (group, rank, cluster).
    """
    from ascendprof.compare import gate as G

    inputs = (baseline, current, rules_file)  # a report may never replace an input
    for i in inputs:  # a FIFO or device given as an input would block the gate forever
        if i is not None and os.path.exists(i) and not (os.path.isdir(i) or is_regular(i)):
            raise G.GateUsageError(f"{i}: not a regular file or directory; not read")

    user = []
    use_defaults = not no_defaults
    if rules_file is not None:
        file_rules, file_defaults = G.load_rules_toml(rules_file)
        user += file_rules
        use_defaults = use_defaults and file_defaults
    user += [G.parse_rule(t) for t in rule_texts]
    rules = G.merge_rules(user, use_defaults)
    if not rules:
        raise G.GateUsageError("no rules: --no-defaults needs --rules or --rule")

    if junit_file is not None and markdown_file is not None and _same_file(junit_file,
                                                                            markdown_file):
        raise G.GateUsageError(f"--junit {junit_file} and --markdown {markdown_file} name one "
                               f"file; the second report would replace or corrupt the first")
    for report in (junit_file, markdown_file):
        if report is not None:
            check_report_path(report, inputs)  # before the work, not after it
    result = G.run_gate(baseline, current, rules, workers=workers, same_shape=same_shape)

    for w in result.warnings:  # compared anyway, on what both inputs have
        click.echo(f"ascendprof gate: warning: {control_safe(w)} (only what both have is compared; "
                   f"--same-shape makes this an error)", err=True)

    if junit_file is not None or markdown_file is not None:
        if junit_file is not None:
            write_junit(junit_file, result, inputs)
        if markdown_file is not None:
            write_markdown(markdown_file, result, inputs)

    with stdout_may_close():  # `gate … | head` keeps the verdict's exit code
        if fmt == "json":
            import orjson

            click.echo(orjson.dumps(result.as_dict(), option=orjson.OPT_INDENT_2
                                    | orjson.OPT_SERIALIZE_NUMPY).decode())
        else:
            _print_table(result, "all" if all_checks else "failed" if failed_only else "brief")
    sys.exit(EXIT_REGRESSION if result.regression else EXIT_OK)


def _same_file(a, b) -> bool:
    """Whether the paths ``a`` and ``b`` name one file (same path, symlink or hard link)."""
    if os.path.realpath(a) == os.path.realpath(b):
        return True
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


#: failed checks the terminal table shows at most (unless --all-checks); JSON, JUnit and
#: Markdown always hold every check
MAX_FAILED_ROWS = 40


def _print_table(result, show: str) -> None:
    """``show``: "all" checks, "failed" and skipped ones, or "brief": the failed ones (at most
    :data:`MAX_FAILED_ROWS`) and the rules skipped altogether."""
    from rich.console import Console
    from rich.table import Table

    from ascendprof.compare.gate import FAIL, fmt_change, NO_KEY, PASS

    con = Console(highlight=False)
    if not con.is_terminal:  # CI logs: do not squeeze the table into 80 columns
        con = Console(highlight=False, width=160)
    t = Table(title=f"ascendprof gate: {term_text(result.baseline)} -> "
                    f"{term_text(result.current)}",
              title_justify="left")
    for col, just in (("verdict", "left"), ("metric", "left"), ("scope", "left"),
                      ("baseline", "right"), ("current", "right"), ("change", "right"),
                      ("limit", "right"), ("spread baseline / current", "left")):
        t.add_column(col, justify=just)
    style = {"fail": "bold red", "pass": "green", "skip": "yellow"}
    shown = 0
    for r in result.checks.itertuples(index=False):
        if show != "all" and r.verdict == PASS:
            continue
        if show == "brief" and r.verdict != FAIL and r.key != NO_KEY:
            continue
        if show == "brief" and r.verdict == FAIL:
            shown += 1
            if shown > MAX_FAILED_ROWS:
                continue
        t.add_row(f"[{style[r.verdict]}]{r.verdict.upper()}[/]", term_text(r.metric),
                  term_text(r.key),
                  _v(r.baseline, r.unit), _v(r.current, r.unit),
                  fmt_change(r.change, r.change_pct, r.unit),
                  f"{r.limit_pct:+g} % / {r.floor:g} {r.unit}",
                  f"{_spread(r.baseline_min, r.baseline_max, r.baseline_n)} / "
                  f"{_spread(r.current_min, r.current_max, r.current_n)}"
                  + (f" ({term_text(r.note)})" if r.note else ""))
    if t.row_count:
        con.print(t)
    else:
        con.print(f"ascendprof gate: {term_text(result.baseline)} -> {term_text(result.current)}")
    if shown > MAX_FAILED_ROWS:
        con.print(f"... and {shown - MAX_FAILED_ROWS} more failed checks (--all-checks, "
                  f"--format json or --junit list every check)")
    con.print(("[bold red]" if result.regression else "[bold green]")
              + term_text(result.summary_line()) + "[/]")


def _v(v, unit: str) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    return f"{v:.3f} {unit}"


def _spread(lo, hi, n) -> str:
    if not n:
        return "-"
    if n == 1:
        return "n=1"
    return f"{lo:.3f}..{hi:.3f} n={n}"
