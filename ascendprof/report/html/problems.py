"""Problems section: everything skipped or odd in the input, as problems.csv has it, and the
outputs this analysis could not write (summary.json ``not_written``)."""

from __future__ import annotations

from ascendprof.model.ranks import rank_ranges
from ascendprof.report.html.common import MAX_TABLE_ROWS, Section, Table, cell
from ascendprof.report.headline import group_problems


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
        kinds = group_problems([{"severity": r.get("Severity"), "where": r.get("Where"),
                                 "reason": r.get("Reason"), "path": r.get("Path"),
                                 "rank": (int(r["Rank"]) if str(r.get("Rank", "")).isdigit()
                                          else None)}
                                for r in df.astype(str).to_dict(orient="records")])
        if len(kinds) < len(df):  # the same note on many ranks: one row per kind first
            sec.table(Table(["severity", "ranks", "notes", "where", "reason (the first note's)"],
                            [[k["severity"], rank_ranges(k["ranks"], 6) or k["path"],
                              str(k["count"]), k["where"], k["reason"]] for k in kinds],
                            source="problems.csv", open=True, css="numbers problem-kinds",
                            title="Problems by kind (the ranks each kind covers)"))
        rows = [[cell(v) for v in r] for r in df.head(MAX_TABLE_ROWS).itertuples(index=False)]
        sec.table(Table(list(df.columns), rows, source="problems.csv",
                        open=len(kinds) == len(df),
                        title="problems.csv", css="numbers problems",
                        note=(f"first {MAX_TABLE_ROWS} of {len(df)}; all in problems.csv"
                              if len(df) > MAX_TABLE_ROWS else "")))
    return sec
