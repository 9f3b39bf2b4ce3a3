"""Why section: the tables of operator efficiency, idle time by cause, dispatch, late arrivals and
communication against the hardware (analyze.op_efficiency, idle, dispatch, late_arrivals,
comm_hardware), each as its file has it; a file an analysis did not write is said so."""

from __future__ import annotations

from ascendprof.report.html.common import Section, numbers_table

#: (ReportData attribute, file, what it answers) in page order
TABLES = (
    ("idle_breakdown", "idle_breakdown.csv", "Free time of each step by cause"),
    ("late_arrivals", "late_arrivals.csv", "what the late rank did longer before the largest waits"),
    ("dispatch_steps", "dispatch_steps.csv", "launch delay and task queue per step"),
    ("dispatch", "dispatch.csv", "launch delay and idle before launch per op type"),
    ("op_efficiency_steps", "op_efficiency_steps.csv", "MFU of the counted kernels per step"),
    ("op_efficiency", "op_efficiency.csv", "matrix and attention kernels against the peak"),
    ("collective_bandwidth", "collective_bandwidth.csv", "bus bandwidth per instance"),
    ("link_bandwidth", "link_bandwidth.csv", "link bandwidth against a reference"),
)


def build(d, ctx) -> Section:
    sec = Section("why", "Why: idle time, late ranks, dispatch, efficiency")
    shown = [(a, f, what) for a, f, what in TABLES if d.has(a)]
    if not shown:
        sec.missing = "no kernels or communication files to explain the time with"
        return sec
    sec.intro = ("Where the idle time of a step went, what a late rank did longer, how fast "
                 "the host launched work, and how the kernels and links compare with the "
                 "hardware's figures (docs/analyses.md gives definitions and sources).")
    not_seen = ((d.summary or {}).get("analyses") or {}).get("dispatch_not_seen")
    if not_seen:
        sec.text(f"Dispatch: {not_seen}.")
    for attr, file, what in shown:
        sec.text(f"{file}: {what}.")
        sec.table(numbers_table(getattr(d, attr), file))
    return sec
