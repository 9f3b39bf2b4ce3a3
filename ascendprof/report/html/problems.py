"""Problems section: everything skipped or odd in the input, as problems.csv has it, and the
outputs this analysis could not write (summary.json ``not_written``)."""

from __future__ import annotations

from ascendprof.report.html.common import MAX_TABLE_ROWS, Section, Table, cell


def build(d, ctx) -> Section:
    sec = Section("problems", "Problems")
    nw = (d.summary or {}).get("not_written") or {}
    if nw:
        sec.table(Table(["file", "why it was not written"], [[k, v] for k, v in nw.items()],
                        source="summary.json", title="Outputs not written (summary.json)",
                        css="numbers notwritten", open=True))
    if d.problems is None:
        sec.missing = "no problems.csv in this output"
        return sec
    df = d.problems
    sec.intro = (f"{len(df)} problem(s) in problems.csv: files, records or ranks that were "
                 f"skipped (data dropped) or odd (data kept, with a warning)."
                 if len(df) else "problems.csv is empty: nothing was skipped and nothing was odd.")
    if len(df):
        rows = [[cell(v) for v in r] for r in df.head(MAX_TABLE_ROWS).itertuples(index=False)]
        sec.table(Table(list(df.columns), rows, source="problems.csv", open=True,
                        title="problems.csv", css="numbers problems",
                        note=(f"first {MAX_TABLE_ROWS} of {len(df)}; all in problems.csv"
                              if len(df) > MAX_TABLE_ROWS else "")))
    return sec
