"""The per-step 'Total Op Info' of a rank's ops in one group (msprof-analyze's
CommunicationAnalysis totals): sums of the COMM_* tables, which add up batch by batch, and
totals merged from partial ones."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ascendprof.analyze.cluster_communication.opinfo import (BANDWIDTH_INFO, TIME_FIELDS,
                                                             TIME_INFO, ratio)

ROW = "__row"

_NOT_SUMMED = frozenset(("Wait Time Ratio", "Synchronization Time Ratio", "Start Timestamp(us)"))


class _Totals:
    """Running 'Total Op Info' of OPINFOs (CommunicationAnalysis totals): time fields and per
    transport size / time / size distribution summed in the order the OPINFOs are added."""

    __slots__ = ("t", "b", "lpr")

    def __init__(self):
        self.t: dict[str, float] = {}
        self.b: dict[str, dict] = {}
        self.lpr = None  # "Large Packet Ratio" of the totals, when the parts have one

    def add(self, info: dict) -> None:
        t, b = self.t, self.b
        for label, v in info.get(TIME_INFO, {}).items():
            if label not in _NOT_SUMMED:
                t[label] = t.get(label, 0.0) + v
        for transport, part in info.get(BANDWIDTH_INFO, {}).items():
            tot = b.get(transport)
            if tot is None:
                tot = b[transport] = {"Transit Time(ms)": 0, "Transit Size(MB)": 0,
                                      "Size Distribution": {}}
            if "Large Packet Ratio" in part and self.lpr is None:
                self.lpr = part["Large Packet Ratio"]
            tot["Transit Time(ms)"] += part.get("Transit Time(ms)", 0)
            tot["Transit Size(MB)"] += part.get("Transit Size(MB)", 0)
            sizes = tot["Size Distribution"]
            for size, (count, dur) in part.get("Size Distribution", {}).items():
                acc = sizes.get(size)
                if acc is None:
                    acc = sizes[size] = [0, 0]
                acc[0] += count
                acc[1] += dur

    def result(self) -> dict:
        for tot in self.b.values():
            tot["Bandwidth(GB/s)"] = ratio(tot["Transit Size(MB)"], tot["Transit Time(ms)"])
            if self.lpr is not None:
                tot["Large Packet Ratio"] = self.lpr
        return {TIME_INFO: with_ratios(self.t), BANDWIDTH_INFO: self.b}


def with_ratios(t: dict) -> dict:
    """Summed time fields ``t`` (ms) plus Wait / Synchronization Time Ratio computed from them
    (CommunicationAnalysis totals)."""
    wait, transit, sync = (t.get("Wait Time(ms)", 0), t.get("Transit Time(ms)", 0),
                           t.get("Synchronization Time(ms)", 0))
    t["Wait Time Ratio"] = ratio(wait, wait + transit)
    t["Synchronization Time Ratio"] = ratio(sync, sync + transit)
    return t


_GROUP = ["rank", "kind", "group", "step_key"]


def _sums(table: pa.Table, keys: list, columns) -> list[dict]:
    """Rows of ``table`` grouped by ``keys`` (first-appearance order) with ``<col>_sum`` of each
    of ``columns`` (nulls read as 0 when ``columns`` maps to True, else skipped; an all-null
    skipped column sums to null)."""
    fill = {c: pc.fill_null(table.column(c), 0) for c, zero in columns.items() if zero}
    t = table.select(keys + [c for c in columns if c not in fill])
    for c, col in fill.items():
        t = t.append_column(c, col)
    t = t.append_column(ROW, pa.array(np.arange(t.num_rows)))
    # sorted by first row: Acero's group order is not always the order of appearance
    g = t.group_by(keys, use_threads=False).aggregate([(c, "sum") for c in columns]
                                                      + [(ROW, "min")])
    return g.sort_by(f"{ROW}_min").drop_columns([f"{ROW}_min"]).to_pylist()


def step_totals(ops: pa.Table, bw: pa.Table | None, dist: pa.Table | None,
                large_packet_ratio=None) -> dict[tuple, dict[str, dict]]:
    """(rank, kind, group) -> step key -> its 'Total Op Info' (CommunicationAnalysis totals):
    time fields summed (a field no op has is left out), ratios from the sums, per transport
    summed Transit Time / Size, Size Distribution and Bandwidth(GB/s) = MB/ms. Times in ms.
    ``large_packet_ratio``: the value of a "Large Packet Ratio" key in every transport entry
    (msprof-analyze writes 0 in the totals of db input); None: no such key (its text input)."""
    return totals_from_sums(step_sums(ops, bw, dist), large_packet_ratio)


def step_sums(ops: pa.Table, bw: pa.Table | None, dist: pa.Table | None) -> dict:
    """The sums behind :func:`step_totals`, which add up over batches of one rank's ops
    (:func:`add_sums`): ``{"ops": {(rank, kind, group, step key): {col: sum or None}},
    "bw": {(..., transport): [transit ns, size MB]}, "dist": {(..., transport, size):
    [count, dur ns]}}`` in first-appearance order."""
    out: dict = {"ops": {}, "bw": {}, "dist": {}}
    cols = [col for _, col in TIME_FIELDS]
    for r in _sums(ops, _GROUP, {col: False for col in cols}):
        out["ops"][tuple(r[k] for k in _GROUP)] = {col: r[f"{col}_sum"] for col in cols}
    if bw is not None and bw.num_rows:
        for r in _sums(bw, _GROUP + ["transport"], {"transit_ns": True, "size_mb": True}):
            out["bw"][tuple(r[k] for k in _GROUP + ["transport"])] = \
                [r["transit_ns_sum"], r["size_mb_sum"]]
    if dist is not None and dist.num_rows:
        keys = _GROUP + ["transport", "packet_size_mb"]
        for r in _sums(dist, keys, {"count": True, "dur_ns": True}):
            out["dist"][tuple(r[k] for k in keys)] = [r["count_sum"], r["dur_ns_sum"]]
    return out


def add_sums(acc: dict, more: dict) -> dict:
    """``more`` (:func:`step_sums` of a later batch) added into ``acc``."""
    for key, sums in more["ops"].items():
        have = acc["ops"].get(key)
        if have is None:
            acc["ops"][key] = dict(sums)
            continue
        for col, v in sums.items():
            if v is not None:
                have[col] = v if have[col] is None else have[col] + v
    for part in ("bw", "dist"):
        for key, (a, b) in more[part].items():
            have = acc[part].get(key)
            if have is None:
                acc[part][key] = [a, b]
            else:
                have[0] += a
                have[1] += b
    return acc


def totals_from_sums(sums: dict, large_packet_ratio=None) -> dict[tuple, dict[str, dict]]:
    out: dict[tuple, dict[str, dict]] = {}
    for (rank, kind, group, step), r in sums["ops"].items():
        t = with_ratios({label: r[col] / 1e6 for label, col in TIME_FIELDS
                          if r[col] is not None})
        out.setdefault((rank, kind, group), {})[step] = {TIME_INFO: t, BANDWIDTH_INFO: {}}
    for (rank, kind, group, step, transport), (transit, size) in sums["bw"].items():
        time_ms = transit / 1e6
        out[(rank, kind, group)][step][BANDWIDTH_INFO][transport] = {
            "Transit Time(ms)": time_ms, "Transit Size(MB)": size, "Size Distribution": {},
            "Bandwidth(GB/s)": ratio(size, time_ms)}
        if large_packet_ratio is not None:
            out[(rank, kind, group)][step][BANDWIDTH_INFO][transport]["Large Packet Ratio"] = \
                large_packet_ratio
    for (rank, kind, group, step, transport, size), (count, dur) in sums["dist"].items():
        entry = out[(rank, kind, group)][step][BANDWIDTH_INFO].get(transport)
        if entry is not None:  # sizes count only under a transport the op reports
            entry["Size Distribution"][size] = [count, dur / 1e6]
    return out


def merge_totals(totals: list[dict]) -> dict:
    """One 'Total Op Info' from several partial ones (a rank whose ops of one group name come
    in two kinds that share a group key): sums again, ratios and bandwidths recomputed."""
    acc = _Totals()
    for t in totals:
        acc.add(t)
    return acc.result()
