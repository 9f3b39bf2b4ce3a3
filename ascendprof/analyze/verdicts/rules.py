"""The cause rules: what is missing from the collection, ranks that compute or idle more than
the ranks doing the same work, unbalanced pipeline stages, slow links and slow groups, and the
legacy iteration trace. Each rule takes :class:`~.facts.Facts` and returns verdicts
(model.make_verdict) plus internal keys the causal story (story.py) reads:

- ``_late``: ranks whose late arrival this cause explains (waits for them become symptoms);
- ``_cross_stage``: a pipeline-stage cause, which also explains waits across stages;
- ``_groups``: group ids whose transfer time this cause explains (links);
- ``_absent``: the collection verdict, which explains waiting on members not collected;
- ``_rank_key``: order among verdicts of one severity (the seed's share spread, or a ratio).

Thresholds and their sources: thresholds.py and docs/verdicts.md.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ascendprof.analyze.verdicts.facts import Facts, _leave_one_out_median, ranks_text
from ascendprof.analyze.verdicts.model import make_verdict, ms, pct, severity

_PARTS = (("computing_ns", "computing_pct", "Computing"), ("free_ns", "free_pct", "Free"))


# --------------------------------------------------------------------------- collection


def collection_verdicts(f: Facts) -> list[dict]:
    """Ranks expected (world size, parallel_group_info, the group ranks of
    communication_matrix.json) but not collected, groups with members missing and groups
    holding only one collected rank. One verdict; waiting on those ranks is attributed to
    "ranks not in this collection"."""
    partial = [g for g in f.groups.values() if g.n_absent > 0]
    if not f.absent and not partial and not f.unreadable:
        return []
    alone = [g for g in partial if len(g.collected) == 1]
    unknown = [g for g in partial if g.global_ranks is None]
    gtext = ", ".join(g.text() for g in sorted(partial, key=lambda g: (g.label, g.id))[:6])
    more = f" and {len(partial) - 6} more" if len(partial) > 6 else ""
    parts = []
    if f.absent:
        world = f" (world size {f.world_size})" if f.world_size else ""
        parts.append(f"{ranks_text(f.absent).capitalize()} {'is' if len(f.absent) == 1 else 'are'}"
                     f" not in this collection{world}")
    for g in unknown:
        parts.append(f"{g.label} has {g.size} members (group-local ranks 0–{g.size - 1} in "
                     f"communication_matrix.json) but only {ranks_text(g.collected)} "
                     f"{'was' if len(g.collected) == 1 else 'were'} collected: {g.n_absent} "
                     f"members are not in this collection")
    if f.unreadable:
        parts.append(f"{ranks_text(f.unreadable)} could not be read (problems.csv says why)")
    msg = "; ".join(parts)
    if partial:
        msg += f". Groups with members missing: {gtext}{more}"
    if alone:
        msg += (f"; {', '.join(g.label for g in alone)} "
                f"{'holds' if len(alone) == 1 else 'hold'} only one collected rank")
    comp = f.comp
    absent_ms, unattr_ms = {}, {}
    if not comp.empty:
        per = comp.groupby("rank")[["absent_wait_ns", "unattributed_ns"]].sum()
        absent_ms = {str(r): ms(v) for r, v in per["absent_wait_ns"].items() if v > 0}
        unattr_ms = {str(r): ms(v) for r, v in per["unattributed_ns"].items() if v > 0}
    msg += (". Waiting on them cannot be attributed to a collected rank: it is reported as "
            "waiting on ranks not in this collection.")
    ev = {"world_size": f.world_size, "collected_ranks": f.collected, "absent_ranks": f.absent,
          "unreadable_ranks": f.unreadable,
          "groups": {g.label if g.name else g.id: {
              "id": g.id, "members": g.size, "global_ranks": g.global_ranks,
              "collected": g.collected, "absent": g.absent if g.global_ranks is not None
              else None, "n_absent": g.n_absent} for g in partial},
          "groups_with_one_collected_rank": [g.label for g in alone],
          "wait_on_absent_ms": absent_ms, "unattributed_ms": unattr_ms,
          "step_values": f.step_sources(f.collected)}
    who = ranks_text(f.absent) if f.absent else \
        " and ".join(f"the other {g.n_absent} members of {g.label}" for g in unknown[:2])
    nxt = (f"Copy the profiling directories of {who} beside the others and analyse again; until "
           f"then time spent waiting on them is shown as 'ranks not in this collection'.")
    if f.unreadable and not f.absent and not unknown:
        nxt = f"Fix what problems.csv reports for {ranks_text(f.unreadable)} and analyse again."
    v = make_verdict("collection", "collection", f.absent, "warning", msg, nxt, evidence=ev,
                     groups=[g.ref() for g in partial], id="collection")
    v["_absent"] = True
    v["_rank_key"] = 0.0
    return [v]


# --------------------------------------------------------------------------- ranks


def _op_type_diff(op_stat, rank: int, peers: list[int], top: int = 3) -> list[dict]:
    """Op types whose total time on ``rank`` exceeds the peers' median the most (op_statistic)."""
    if op_stat is None or op_stat.num_rows == 0:
        return []
    df = op_stat.to_pandas()
    if rank not in set(df["rank"]):
        return []
    others = [p for p in peers if p != rank and p in set(df["rank"])]
    if not others:
        return []
    per = df.groupby(["op_type", "rank"])["total_ns"].sum().unstack(fill_value=0)
    n_steps = 1
    diff = (per[rank] - per[others].median(axis=1)).sort_values(ascending=False)
    return [{"op_type": str(k), "excess_ms": ms(v / n_steps)} for k, v in diff.head(top).items()
            if v > 0]


def _groups_with(f: Facts, ranks) -> list:
    """The groups holding one of ``ranks`` and another collected rank, named ones first."""
    ranks = set(ranks)
    out = [g for g in f.groups.values() if ranks & set(g.collected) and len(g.collected) > 1]
    return sorted(out, key=lambda g: (g.name is None, g.label, g.id))


def imbalance_verdicts(f: Facts) -> list[dict]:
    """Ranks whose Computing or Free exceeds that of the ranks doing the same work (same
    pipeline stage, or all ranks without stages).

    A rank computes (idles) more only when its part in ms per step exceeds the baseline (the
    other rank of a pair; the set's median otherwise) by :meth:`Facts.excess_threshold_ns`;
    the spread of the part's share of the step over the set (seed 000's triage) ranks the
    verdicts. One or a few ranks that stand out by the robust z-score
    are each a ``slow_rank`` (Computing) or ``schedule`` (Free) verdict; a larger part of the
    set is one ``compute`` / ``schedule`` verdict for the set. Extra Free needs its peers to wait
    for it (``blame_ratio``) when that can be seen: a longer step window that nobody waits for
    (ranks starting their step at different times) is not a problem.
    """
    th, out = f.th, []
    if f.means is None:
        return out
    op_stat = f.ca.concat("op_statistic")
    for stage, peers in f.same_work_sets().items():
        if len(peers) < 2:
            continue
        sub = f.means.loc[peers]
        thr = f.excess_threshold_ns(peers)
        step_ms = ms(f.median_step_ns(peers))
        where = f"stage {stage} " if stage is not None else ""
        for col, share_col, label in _PARTS:
            vals = sub[col].astype(float)
            spread = float(sub[share_col].max() - sub[share_col].min())
            base = (pd.Series(_leave_one_out_median(vals.to_numpy()), index=vals.index)
                    if len(peers) == 2 else pd.Series(float(vals.median()), index=vals.index))
            excess = vals - base
            heavy = [int(r) for r in peers if excess[r] >= thr]
            if not heavy:
                continue
            med = float(vals.median())
            mad = float((vals - med).abs().median())
            z = {r: (0.6745 * (vals[r] - med) / mad if mad > 0 else float("inf")) for r in heavy}
            # how much later than the others it arrives at its communication ops, compared
            # with the ranks doing the same work (pipelines make every stage arrive late at
            # some ops as the pipeline fills and drains)
            lates = pd.Series({p: f.lateness(p) for p in peers}, dtype=float)
            usual = pd.Series(_leave_one_out_median(lates.to_numpy()), index=lates.index)
            blamed = {r: max(0.0, lates[r] - usual[r]) for r in heavy}
            seen = {r: f.has_peer_data(r) for r in heavy}
            if label == "Free":
                heavy = [r for r in heavy if not seen[r]
                         or blamed[r] >= th["blame_ratio"] * excess[r]]
                if not heavy:
                    continue
            outliers = len(peers) < 3 or all(z[r] >= th["slow_rank_mad_z"] for r in heavy)
            if len(peers) >= 3 and len(heavy) == 1 and not outliers:
                continue  # one rank, but no further from the median than the set's own spread
            common = {"part": label, "peers": peers, "stage": stage,
                      f"{label.lower()}_ms": {str(r): ms(vals[r]) for r in peers},
                      f"{label.lower()}_share_pct": {str(r): pct(sub.loc[r, share_col])
                                                     for r in peers},
                      "share_spread_pct": pct(spread), "median_step_ms": step_ms,
                      "threshold_ms": ms(thr), "step_values": f.step_sources(peers)}
            thr_used = {"excess_of_step_pct": th["excess_of_step_pct"],
                        "min_excess_ms": th["min_excess_ms"],
                        "slow_rank_mad_z": th["slow_rank_mad_z"]}
            if label == "Free":
                thr_used["blame_ratio"] = th["blame_ratio"]
            units = [[r] for r in heavy] if outliers else [heavy]
            for unit in units:
                out.append(_rank_verdict(f, unit, peers, label, where, vals, base, excess, z,
                                         blamed, seen, common, thr_used, thr, op_stat, spread))
    return out


def _rank_verdict(f, unit, peers, label, where, vals, base, excess, z, blamed, seen, common,
                  thr_used, thr, op_stat, spread) -> dict:
    th = f.th
    single = len(unit) == 1
    r = unit[0]
    others = [p for p in peers if p not in unit]
    ev = dict(common)
    ev.update({"ranks": unit, "baseline_ms": ms(base[r]) if single else
               ms(vals[others].median()),
               "excess_ms": {str(x): ms(excess[x]) for x in unit},
               "excess_of_step_pct": {str(x): pct(100.0 * excess[x] / f.median_step_ns(peers))
                                      for x in unit},
               "robust_z": {str(x): (None if z[x] == float("inf") else round(z[x], 2))
                            for x in unit},
               "arrives_late_ms": {str(x): ms(blamed[x]) for x in unit},
               "max_peer_wait_for_it_ms": {str(x): ms(f.max_wait_for(x)) for x in unit},
               "peer_waits_visible": {str(x): bool(seen[x]) for x in unit}})
    top = max(excess[x] for x in unit)
    sev = severity(top, thr, th["critical_factor"])
    groups = _groups_with(f, unit)
    gtext = ", ".join(g.text() for g in groups[:3])
    in_groups = f" (groups {gtext})" if gtext else ""
    peers_text = ranks_text(others) if others else "its peer"
    if label == "Computing":
        diff = _op_type_diff(op_stat, r, peers) if single else []
        if diff:
            ev["top_excess_op_types"] = diff
        ops = (f" (op types with the largest excess: "
               f"{', '.join(d['op_type'] for d in diff)})") if diff else ""
        if single:
            cat = "slow_rank"
            msg = (f"Rank {r} computes {ms(vals[r]):.1f} ms per step, {ms(excess[r]):.1f} ms "
                   f"({100 * excess[r] / f.median_step_ns(peers):.1f}% of the step) more than the "
                   f"{where}ranks doing the same work ({peers_text}: {ms(base[r]):.1f} ms)"
                   f"{in_groups}; they wait for it in the next collective.")
            nxt = (f"Compare rank {r}'s kernels and op statistics with rank {others[0]}{ops}: the "
                   f"same ops slower point at the device (AI Core frequency, temperature); more "
                   f"ops or larger shapes at more work assigned to rank {r}.")
        else:
            cat = "compute"
            msg = (f"{ranks_text(unit).capitalize()} compute "
                   f"{ms(min(vals[x] for x in unit)):.1f}–{ms(max(vals[x] for x in unit)):.1f} ms "
                   f"per step, {ms(min(excess[x] for x in unit)):.1f} ms or more above the other "
                   f"{where}ranks doing the same work ({ranks_text(others)}: "
                   f"{ms(vals[others].median()):.1f} ms){in_groups}: the work is not split "
                   f"evenly.")
            nxt = (f"Compare the op statistics of {ranks_text(unit)} with {ranks_text(others)}: "
                   f"uneven batch or sequence lengths, or more layers / experts on these ranks.")
    else:
        vis = (f"it arrives {ms(max(blamed[x] for x in unit)):.1f} ms per step later than its "
               f"peers at their communication ops"
               if all(seen[x] for x in unit) else
               "whether its peers wait for it cannot be seen (no communication data with them)")
        cat = "schedule"
        who = f"Rank {r} is" if single else f"{ranks_text(unit).capitalize()} are"
        msg = (f"{who} idle (Free) {ms(max(vals[x] for x in unit)):.1f} ms per step, "
               f"{ms(max(excess[x] for x in unit)):.1f} ms ({100 * top / f.median_step_ns(peers):.1f}"
               f"% of the step) more than the {where}ranks doing the same work ({peers_text}: "
               f"{ms(vals[others].median() if others else base[r]):.1f} ms){in_groups}, and "
               f"{vis}: the host does not keep the device busy.")
        nxt = (f"Open the timeline of {ranks_text(unit)} next to rank {others[0] if others else r}: "
               f"vertical host-to-device launch lines mean the device outruns the host "
               f"(dispatch-bound); look at host-side work, data loading and synchronisation there.")
    scope = "rank" if single else "group"
    v = make_verdict(cat, scope, unit, sev, msg, nxt, evidence=ev, threshold=thr_used,
                     groups=[g.ref() for g in groups], id=f"{cat}:{','.join(map(str, unit))}")
    v["_late"] = set(unit)
    v["_rank_key"] = spread
    return v


# --------------------------------------------------------------------------- stages


def stage_verdicts(f: Facts, outliers: set) -> list[dict]:
    """The pipeline stage that computes more than the others. A stage's Computing is the median
    over its ranks, leaving out ``outliers`` (ranks already found to compute more than their
    stage peers). Confirmed when heaviest − lightest >= :meth:`Facts.excess_threshold_ns`; the
    spread of the stages' Computing share ranks it."""
    th = f.th
    if not f.stage_of or f.means is None:
        return []
    by_stage = {s: rs for s, rs in f.same_work_sets().items() if s is not None}
    if len(by_stage) < 2:
        return []
    rows = {}
    for s, rs in sorted(by_stage.items()):
        use = [r for r in rs if r not in outliers] or rs
        sub = f.means.loc[use]
        rows[s] = {"ranks": rs, "computing_ms": ms(sub["computing_ns"].median()),
                   "computing_pct": pct(sub["computing_pct"].median()),
                   "free_ms": ms(sub["free_ns"].median()),
                   "comm_not_overlapped_ms": ms(sub["cno_ns"].median()),
                   "step_ms": ms(sub["total_ns"].median())}
    heavy = max(rows, key=lambda s: rows[s]["computing_ms"])
    light = min(rows, key=lambda s: rows[s]["computing_ms"])
    spread = rows[heavy]["computing_pct"] - rows[light]["computing_pct"]
    gap_ns = (rows[heavy]["computing_ms"] - rows[light]["computing_ms"]) * 1e6
    thr = f.excess_threshold_ns()
    if gap_ns < thr:
        return []
    hr = rows[heavy]["ranks"]
    waits = f.waits_for(set(hr))
    waits = waits[np.array([f.crosses_stages(g) for g in waits["group"]], dtype=bool)]
    wait_text = []
    for s in sorted(rows):
        if s == heavy:
            continue
        mine = waits[waits["waiter"].isin(rows[s]["ranks"])]
        if len(mine):
            by_name = mine.groupby("group_name")["peer_wait_ns"].sum()
            names = sorted(by_name[by_name >= 0.1 * by_name.sum()].index)
            per = mine[mine["group_name"].isin(names)].groupby("waiter")["peer_wait_ns"].sum()
            wait_text.append(f"stage {s} ({ranks_text(rows[s]['ranks'])}) waits "
                             f"{ms(per.mean()):.1f} ms per step for it in "
                             f"{'/'.join(names)} ops")
    ev = {"stages": {str(s): v for s, v in rows.items()}, "heavy_stage": int(heavy),
          "heavy_stage_ranks": hr, "light_stage": int(light),
          "computing_gap_ms": round(gap_ns / 1e6, 3), "computing_share_spread_pct": pct(spread),
          "threshold_ms": ms(thr), "stage_ranks_left_out": sorted(outliers & set(f.stage_of)),
          "step_values": f.step_sources(f.ranks_with_steps())}
    msg = (f"Pipeline stages are unbalanced: stage {heavy} ({ranks_text(hr)}) computes "
           f"{rows[heavy]['computing_ms']:.1f} ms per step, stage {light} "
           f"({ranks_text(rows[light]['ranks'])}) {rows[light]['computing_ms']:.1f} ms "
           f"({gap_ns / 1e6:.1f} ms more; Computing share {rows[heavy]['computing_pct']:.1f}% vs "
           f"{rows[light]['computing_pct']:.1f}%)"
           + (f"; {'; '.join(wait_text)}." if wait_text else "."))
    nxt = (f"Move layers from stage {heavy} to the lighter stages (the pipeline layer split), or "
           f"compare the op statistics of {ranks_text(hr)} with "
           f"{ranks_text(rows[light]['ranks'])} to see which op types make stage {heavy} heavier.")
    pp = [g for g in f.groups.values() if (g.name or "").lower() in
          ("pp", "pipeline", "pipeline_parallel", "pipeline_model_parallel")]
    v = make_verdict("stage", "stage", hr, severity(gap_ns, thr, th["critical_factor"]), msg,
                     nxt, evidence=ev, groups=[g.ref() for g in pp],
                     threshold={"excess_of_step_pct": th["excess_of_step_pct"],
                                "min_excess_ms": th["min_excess_ms"]},
                     id=f"stage:{heavy}")
    v["_late"] = set(hr)
    v["_cross_stage"] = True
    v["_rank_key"] = spread
    return [v]


# --------------------------------------------------------------------------- links


def link_verdicts(f: Facts) -> list[dict]:
    """Slow groups, then slow links (communication_matrix.json, §A.6, §7.3).

    A **group** is slow when the median bandwidth of its links of one transport is below
    ``slow_link_bw_ratio`` of the median of its sibling groups (same parallel-group name, same
    transport). A **link** is slow when its bandwidth is below ``slow_link_bw_ratio`` of the
    median of comparable links: same transport, same parallel-group name when that gives at
    least 3 links, else the same transport everywhere. Links moving under ``slow_link_min_mb``
    per step are not judged (latency-bound)."""
    th = f.th
    lk = f.links
    if lk.empty:
        return []
    lk = lk[(lk["size_mb"] >= th["slow_link_min_mb"]) & lk["bandwidth_gbps"].notna()].copy()
    if lk.empty:
        return []
    ratio_thr = th["slow_link_bw_ratio"]
    thr_used = {"slow_link_bw_ratio": ratio_thr, "slow_link_min_mb": th["slow_link_min_mb"]}
    named = {gid for gid, g in f.groups.items() if g.name}
    lk["family"] = [n if gid in named else "" for gid, n in zip(lk["group"], lk["group_name"])]
    slow_groups: dict[str, list] = {}  # group id -> [(transport, bw, base, n siblings, links)]
    for (transport, family), sub in lk[lk["family"] != ""].groupby(["transport", "family"]):
        med = sub.groupby("group")["bandwidth_gbps"].median()
        if len(med) < 2:
            continue
        for gid, bw in med.items():
            base = float(med.drop(gid).median())
            if base > 0 and bw / base < ratio_thr:
                slow_groups.setdefault(gid, []).append(
                    (transport, float(bw), base, int(len(med) - 1), sub[sub["group"] == gid]))
    out = [_slow_group(f, gid, found, ratio_thr, thr_used) for gid, found in slow_groups.items()]
    rest = lk[~lk["group"].isin(set(slow_groups))]
    slow_links: dict[tuple, list] = {}  # one physical link (ends, transport) -> its rows
    for transport, tdf in rest.groupby("transport"):
        if len(tdf) < 2:
            continue
        overall = float(tdf["bandwidth_gbps"].median())
        fam_n = tdf.groupby("family")["bandwidth_gbps"].transform("size")
        fam_med = tdf.groupby("family")["bandwidth_gbps"].transform("median")
        use_fam = (tdf["family"] != "") & (fam_n >= 3)
        base_s = fam_med.where(use_fam, overall)
        ratio_s = tdf["bandwidth_gbps"] / base_s.where(base_s > 0)
        for idx in tdf.index[ratio_s < ratio_thr]:
            row = tdf.loc[idx]
            known = bool(row["ranks_known"])
            key = ((int(row["src_rank"]), int(row["dst_rank"]), transport) if known else
                   (int(row["src_local"]), int(row["dst_local"]), transport, row["group"]))
            slow_links.setdefault(key, []).append(
                (row, float(base_s[idx]), float(ratio_s[idx]),
                 "group name" if use_fam[idx] else "transport"))
    out += [_slow_link(f, rows, ratio_thr, thr_used) for rows in slow_links.values()]
    return out


def _slow_group(f: Facts, gid: str, found: list, ratio_thr: float, thr_used: dict) -> dict:
    th = f.th
    g = f.group_of(gid)
    ranks = g.global_ranks if g.global_ranks is not None else g.collected
    found.sort(key=lambda x: x[1] / x[2])
    transport, bw, base, n_sib, mine = found[0]
    per = {t: {"bandwidth_gbps": round(b, 4), "sibling_groups_median_gbps": round(bs, 4),
               "bandwidth_ratio": round(b / bs, 3), "n_sibling_groups": n,
               "links": {f"{int(a)}->{int(c)}": round(float(x), 4) for a, c, x in
                         zip(m["src_rank"], m["dst_rank"], m["bandwidth_gbps"])},
               "size_mb_per_step": round(float(m["size_mb"].sum()), 3)}
           for t, b, bs, n, m in found}
    ev = {"group": g.label, "group_id": gid, "group_ranks": ranks, "transport": transport,
          "bandwidth_gbps": round(bw, 4), "sibling_groups_median_gbps": round(base, 4),
          "bandwidth_ratio": round(bw / base, 3), "by_transport": per}
    also = [t for t, *_ in found[1:]]
    msg = (f"Slow group: {g.text()} moves data over {transport} at {bw:.2f} GB/s (median of "
           f"its {len(mine)} links), {bw / base:.0%} of the {base:.2f} GB/s of the other {n_sib} "
           f"{g.label} groups" + (f" (and over {', '.join(also)} too)" if also else "")
           + ": the whole group's path is slow, not one link.")
    nxt = (f"Check the {transport} path the ranks of {g.label} ({ranks_text(ranks)}) share: "
           f"switch ports and their error counters, NIC / HCCS configuration "
           f"({'HCCL_RDMA_TC, HCCL_RDMA_SL, ' if transport == 'RDMA' else ''}link degradation), "
           f"and run a bandwidth test between two of its ranks.")
    v = make_verdict("slow_group", "group", ranks,
                     severity(bw / base, ratio_thr, th["critical_factor"], below=True), msg, nxt,
                     evidence=ev, groups=[g.ref()], threshold=thr_used,
                     id=f"slow_group:{g.label}:{gid}")
    v["_groups"] = {gid}
    v["_rank_key"] = 1.0 - bw / base
    return v


def _slow_link(f: Facts, rows: list, ratio_thr: float, thr_used: dict) -> dict:
    """One verdict for one physical link, slow in every group that reports it."""
    th = f.th
    rows.sort(key=lambda x: x[2])
    row, base, ratio, basis = rows[0]
    transport = row["transport"]
    groups = [f.group_of(r["group"]) for r, *_ in rows]
    src, dst = int(row["src_rank"]), int(row["dst_rank"])
    known = bool(row["ranks_known"])
    ev = {"transport": transport, "group": groups[0].label, "group_id": row["group"],
          "groups": [g.label for g in groups], "src_rank": src, "dst_rank": dst,
          "src_group_rank": int(row["src_local"]), "dst_group_rank": int(row["dst_local"]),
          "reported_by_rank": int(row["reported_by"]),
          "bandwidth_gbps": round(float(row["bandwidth_gbps"]), 4),
          "baseline_median_gbps": round(base, 4), "baseline": basis,
          "bandwidth_ratio": round(ratio, 3), "size_mb": round(float(row["size_mb"]), 3),
          "transit_ms": ms(row["transit_ns"]), "global_ranks_known": known}
    rk = "" if known else " (group-local rank numbers)"
    where = " and ".join(g.text() for g in groups)
    msg = (f"Slow {transport} link {src}→{dst}{rk} in {where}: {row['bandwidth_gbps']:.2f} GB/s, "
           f"{ratio:.0%} of the median {base:.2f} GB/s of comparable {transport} links; the "
           f"transfer itself is slow, whatever the waiting.")
    nxt = (f"Check the {transport} path between ranks {src} and {dst}: link health and error "
           f"counters, lane degradation, and for RDMA the NIC, switch port and retransmissions; "
           f"rerun a bandwidth test between these two devices.")
    v = make_verdict("slow_link", "link", sorted({src, dst}) if known else [],
                     severity(ratio, ratio_thr, th["critical_factor"], below=True), msg, nxt,
                     evidence=ev, groups=[g.ref() for g in groups], threshold=thr_used,
                     id=f"slow_link:{transport}:{src}->{dst}" + ("" if known else
                                                                  f"@{row['group']}"))
    v["_groups"] = {r["group"] for r, *_ in rows}
    v["_rank_key"] = 1.0 - ratio
    return v


# --------------------------------------------------------------------------- legacy

_ITERATION_NEXT = {
    "slow_host": "Look at the data pipeline and host-side work on these ranks (dataset "
                 "operations, CPU load, host memory) between iterations.",
    "slow_card": "Compare these ranks' kernels and op statistics with the others: a slower "
                 "device or more work assigned to it.",
    "long_tail": "Look at the all-reduce / parameter-update part of the step on these ranks: "
                 "communication bandwidth or waiting for slower ranks.",
}


def iteration_verdicts(f: Facts) -> list[dict]:
    """Legacy graph-mode iteration-trace findings (ascendprof.analyze.iteration_trace, seed 003),
    as verdicts. Only when the ITERATIONS table exists."""
    ca, th = f.ca, f.th
    its = ca.concat("iterations")
    if its is None or its.num_rows == 0:
        return []
    from ascendprof.analyze import iteration_trace

    z = th["slow_rank_mad_z"]
    try:
        _, found = iteration_trace.analyse(its, z_threshold=z)
    except Exception as e:  # noqa: BLE001 - a helper's failure must not lose the other verdicts
        ca.problems.warn("iterations", f"iteration-trace findings failed: {e}")
        return []
    out = []
    for x in found or []:
        ev = {"values_ms": {str(k): round(float(v), 3) for k, v in x.get("values_ms", {}).items()},
              "median_ms": round(float(x.get("median_ms", 0.0)), 3), "source": "iteration trace"}
        v = make_verdict(x.get("category", "iteration"), "rank", x.get("ranks", []), "warning",
                         str(x.get("evidence", "")),
                         _ITERATION_NEXT.get(x.get("category"), "Inspect the iteration trace."),
                         evidence=ev, threshold={"slow_rank_mad_z": z,
                                                 "min_excess_ratio": iteration_trace.MIN_EXCESS})
        v["_late"] = set(int(r) for r in x.get("ranks", []))
        v["_rank_key"] = 0.0
        out.append(v)
    return out

