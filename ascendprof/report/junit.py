"""JUnit XML and Markdown reports of a gate run (for CI test views and step summaries).

JUnit: one ``<testsuite name="ascendprof gate">`` with one ``<testcase>`` per rule and scope key
(classname = rule, e.g. ``Computing@rank``; name = scope key, e.g. ``rank 2``); a failed check
carries ``<failure>``, a check one side lacks ``<skipped>``. Shape warnings (the inputs differ
in ranks, groups or op types and only what both have was compared) go into the suite's
``<system-err>`` and a ``warning`` property each (JUnit), and a "Warnings" list under the
verdict line (Markdown), so a CI view shows them beside the verdict. A report file is replaced atomically
only when ascendprof wrote it (it starts with :data:`JUNIT_SIGNATURE` / :data:`MARKDOWN_SIGNATURE`);
FIFOs, devices, symlinks and files of others are written through, appended to (Markdown) or
refused (sysio.atomic.write_report).
"""

from __future__ import annotations

import html
import math
import re
from pathlib import Path
from xml.sax.saxutils import escape as _xml_escape
from xml.sax.saxutils import quoteattr as _xml_quoteattr

from ascendprof.sysio.atomic import write_report

#: characters XML 1.0 cannot hold even escaped (C0 controls but TAB / LF / CR, lone surrogates,
#: U+FFFE/U+FFFF), and C1 controls / DEL that a CI view would show raw
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff\ufffe\uffff]")


def _visible(text) -> str:
    """``text`` with every character :data:`_NOT_XML` names shown as ``\\xNN`` / ``\\uNNNN``."""
    def show(m):
        o = ord(m.group())
        return f"\\x{o:02x}" if o < 0x100 else f"\\u{o:04x}"
    return _NOT_XML.sub(show, str(text))


def escape(text) -> str:
    """XML element text for any name from the data (always well-formed XML 1.0)."""
    return _xml_escape(_visible(text))


def quoteattr(text) -> str:
    """A quoted XML attribute value for any name from the data."""
    return _xml_quoteattr(_visible(text))


#: how every JUnit report of ascendprof begins (what marks an existing file as ours)
JUNIT_SIGNATURE = b'<?xml version="1.0" encoding="UTF-8"?>\n<testsuites name="ascendprof gate"'
#: how every Markdown report of ascendprof begins
MARKDOWN_SIGNATURE = "## ascendprof gate:".encode()


def _num(v, unit: str = "") -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "n/a"
    return f"{v:.3f}{(' ' + unit) if unit else ''}"


def _pct(v) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "n/a"
    return f"{v:+.1f} %"


def check_message(r) -> str:
    """One line for a check row (a namedtuple of gate.CHECK_COLUMNS)."""
    return (f"{r.metric} {r.key}: baseline {_num(r.baseline, r.unit)}, current "
            f"{_num(r.current, r.unit)}, change {_num(r.change, r.unit)} ({_pct(r.change_pct)}); "
            f"limit {r.limit_pct:+g} %, noise floor {r.floor:g} {r.unit}"
            + (f"; {r.note}" if r.note else ""))


def junit_xml(result) -> str:
    """The JUnit XML text for a :class:`ascendprof.compare.gate.GateResult`."""
    rows = list(result.checks.itertuples(index=False))
    fails = sum(r.verdict == "fail" for r in rows)
    skips = sum(r.verdict == "skip" for r in rows)
    out = ['<?xml version="1.0" encoding="UTF-8"?>',
           f'<testsuites name="ascendprof gate" tests="{len(rows)}" failures="{fails}" '
           f'errors="0" skipped="{skips}">',
           f'  <testsuite name="ascendprof gate" tests="{len(rows)}" failures="{fails}" '
           f'errors="0" skipped="{skips}">',
           '    <properties>',
           f'      <property name="baseline" value={quoteattr(result.baseline)}/>',
           f'      <property name="current" value={quoteattr(result.current)}/>',
           *[f'      <property name="warning" value={quoteattr(w)}/>' for w in result.warnings],
           '    </properties>']
    for r in rows:
        msg = check_message(r)
        head = f'    <testcase classname={quoteattr(r.rule)} name={quoteattr(r.key)} time="0"'
        if r.verdict == "fail":
            out.append(head + ">")
            out.append(f'      <failure message={quoteattr(msg)} type="regression">'
                       f'{escape(msg)}</failure>')
            out.append("    </testcase>")
        elif r.verdict == "skip":
            out.append(head + ">")
            out.append(f"      <skipped message={quoteattr(msg)}/>")
            out.append("    </testcase>")
        else:
            out.append(head + f">\n      <system-out>{escape(msg)}</system-out>\n    </testcase>")
    if result.warnings:
        out.append("    <system-err>" + escape("\n".join(f"warning: {w}" for w in result.warnings))
                   + "</system-err>")
    out += ["  </testsuite>", "</testsuites>", ""]
    return "\n".join(out)


def write_junit(path: Path, result, inputs=()) -> Path:
    """Write :func:`junit_xml` to ``path`` (:func:`~ascendprof.sysio.atomic.write_report`:
    never one of ``inputs``, never replacing a file ascendprof did not write)."""
    return write_report(Path(path), junit_xml(result).encode("utf-8"),
                        signature=JUNIT_SIGNATURE, inputs=inputs)


def _md_cell(s) -> str:
    """A name from the data as Markdown text: HTML special characters escaped (GitHub renders
    raw HTML in Markdown: a ``<script>`` or ``<img onerror>`` in an op type must stay text),
    Markdown's own (``|``, backtick, ``*``, ``_``, ``[``, ``]``) backslash-escaped, control
    characters shown as ``\\xNN``, one line."""
    text = html.escape(_visible(str(s)).replace("\n", " ").replace("\r", " "), quote=False)
    return re.sub(r"([\\`*_\[\]|])", r"\\\1", text)


def markdown(result, *, all_checks: bool = True) -> str:
    """A Markdown report: verdict line, then a table of checks (failures first).

    ``all_checks=False`` lists only failed and skipped checks."""
    lines = [f"## ascendprof gate: {'❌ regression' if result.regression else '✅ no regression'}",
             "", f"Baseline {_md_cell(result.baseline)} · current {_md_cell(result.current)}",
             "", _md_cell(result.summary_line()), "",
             *([f"**Warnings** (only what both inputs have was compared):", "",
                *[f"- ⚠ {_md_cell(w)}" for w in result.warnings], ""] if result.warnings else []),
             "| verdict | metric | scope | baseline | current | change | limit | spread (current) |",
             "|---|---|---|---:|---:|---:|---:|---|"]
    for r in result.checks.itertuples(index=False):
        if not all_checks and r.verdict == "pass":
            continue
        spread = (f"{_num(r.current_min)}–{_num(r.current_max)} (n={r.current_n})"
                  if r.current_n else "")
        mark = {"fail": "❌ fail", "pass": "✅ pass", "skip": "⏭ skip"}[r.verdict]
        lines.append(
            f"| {mark} | {_md_cell(r.metric)} | {_md_cell(r.key)} | {_num(r.baseline, r.unit)} | "
            f"{_num(r.current, r.unit)} | {_num(r.change, r.unit)} ({_pct(r.change_pct)}) | "
            f"{r.limit_pct:+g} % / {r.floor:g} {r.unit} | {spread} |")
    lines.append("")
    return "\n".join(lines)


def write_markdown(path: Path, result, inputs=()) -> Path:
    """Write :func:`markdown` to ``path`` (:func:`~ascendprof.sysio.atomic.write_report`;
    appended to a file of others such as ``$GITHUB_STEP_SUMMARY``, as step summaries are)."""
    return write_report(Path(path), markdown(result).encode("utf-8"),
                        signature=MARKDOWN_SIGNATURE, inputs=inputs, append=True)
