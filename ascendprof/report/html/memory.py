"""Memory section: per rank the peak memory of each component (memory_summary.csv) against the
device capacity when recorded, and the operators holding most memory (memory_top_ops.csv)."""

from __future__ import annotations

import pandas as pd

from ascendprof.report.html.common import MAX_BARS, PALETTE, Chart, Section, files_section

_BARS = [("Peak Allocated(MB)", PALETTE[0]), ("Peak Reserved(MB)", PALETTE[3])]


def peaks(ms: pd.DataFrame) -> Chart:
    """Grouped bars per rank and component: peak allocated and reserved (MB)."""
    ms = ms.assign(_rank=pd.to_numeric(ms["Rank"], errors="coerce")).dropna(subset=["_rank"])
    comps = list(dict.fromkeys(ms["Component"].astype(str)))
    comp = "PTA+GE" if "PTA+GE" in comps else comps[0]
    rows = ms[ms["Component"].astype(str) == comp].sort_values("_rank")
    if len(rows) > MAX_BARS:
        rows = rows.sort_values("Peak Reserved(MB)", ascending=False).head(MAX_BARS)
        rows = rows.sort_values("_rank")
    data = {"x": [str(int(r)) for r in rows["_rank"]]}
    for col in ("Peak Allocated(MB)", "Peak Reserved(MB)", "Capacity(MB)"):
        data[col] = [None if pd.isna(v) else float(v)
                     for v in pd.to_numeric(rows.get(col, pd.Series(index=rows.index)),
                                            errors="coerce")]
    data["op"] = [str(v) for v in rows.get("Peak Allocated Operator", [""] * len(rows))]
    series = [{"type": "bar", "y": col, "label": col.replace("(MB)", ""), "color": color,
               "width": 0.34, "gap": "10%"} for col, color in _BARS]
    if any(v is not None for v in data["Capacity(MB)"]):
        series.append({"type": "scatter", "y": "Capacity(MB)", "symbol": "dash", "size": 40,
                       "label": "device capacity", "color": "#d62728"})
    return Chart("memory_peaks", data, series, height=320,
                 title=f"Peak memory per rank, component {comp} (memory_summary.csv)",
                 y_label="memory (MB)", x_label="rank",
                 tips=[("rank", "x", "", 0), ("peak allocated", "Peak Allocated(MB)", "MB", 1),
                       ("at operator", "op", "", 0),
                       ("peak reserved", "Peak Reserved(MB)", "MB", 1),
                       ("device capacity", "Capacity(MB)", "MB", 0)])


def build(d, ctx) -> Section:
    ms = d.memory_summary
    return files_section(
        "memory", "Memory", {"memory_summary.csv": ms, "memory_top_ops.csv": d.memory_top_ops},
        "no memory_summary.csv (the profiler recorded no memory)",
        "Peak device memory per rank and the operators holding the most.",
        peaks(ms) if ms is not None and len(ms) and "Component" in ms else None)
