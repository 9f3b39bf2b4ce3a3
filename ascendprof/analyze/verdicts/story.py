"""The causal story: causes once, their symptoms attached (design note §3).

Inputs are the cause verdicts of rules.py (and contributed rules) with their internal keys
(rules module doc). This module

1. attributes every wait in the wait-for graph to the cause that explains the rank waited for:
   a cause naming that rank (``_late``), or a rank that was itself waiting for such a rank (late
   only because it waited: followed through the graph), or - for waits across pipeline stages -
   the stage verdict (the pipeline filling and draining behind the heavier stage);
2. examines every rank whose Communication(Not Overlapped) share passes ``comm_share_pct``:
   its time in communication ops split into waiting for collected peers, waiting on ranks not
   collected, transfer and the rest (opsplit.py). When a cause explains the larger part, the
   observation is that cause's symptom; otherwise it is a ``communication`` verdict of its own
   that says what the time is, and what it is not;
3. orders the list: severity, then the seed's ranking (share spread, or ratio for links).

Waits that no cause explains are never pinned on the rank waited for: a rank is a cause only
when its own work explains its lateness.
"""

from __future__ import annotations

import pandas as pd

from ascendprof.analyze.verdicts.facts import Facts, ranks_text
from ascendprof.analyze.verdicts.model import (SEVERITY_ORDER, make_verdict, ms, pct, severity,
                                               symptom)

#: symptoms listed per cause at most (the rest are summed in the cause's evidence)
MAX_SYMPTOMS = 8


def _cause_of_rank(f: Facts, causes: list[dict]) -> dict[int, dict]:
    """rank -> the cause verdict that explains why that rank arrives late: named by a cause
    (``_late``), or - transitively - a rank whose own peer waits are mostly for a rank with a
    cause (it was late only because it waited)."""
    out: dict[int, dict] = {}
    for v in causes:
        for r in v.get("_late", ()):
            out.setdefault(int(r), v)
    b = f.blame
    if b.empty or not out:
        return out
    waits = b.groupby(["waiter", "waited_for"])["peer_wait_ns"].sum()
    total = waits.groupby(level=0).sum()
    for _ in range(4):  # short chains: a tp peer of a slow rank, then its pipeline partner
        grew = False
        for (w, x), v in waits.items():
            w, x = int(w), int(x)
            if w in out or x not in out:
                continue
            if v >= 0.5 * total[w] and v > 0:
                out[w] = out[x]
                grew = True
        if not grew:
            break
    return out


def _stage_cause(causes):
    return next((v for v in causes if v.get("_cross_stage")), None)


def _blame_symptoms(f: Facts, causes: list[dict], cause_of: dict[int, dict]) -> None:
    """Attach, to each cause, the waits of other ranks it explains: one symptom per group name
    (pp, dp, tp …) and stage of the waiting ranks."""
    b = f.blame
    if b.empty:
        return
    stage = _stage_cause(causes)
    acc: dict = {}
    for row in b.itertuples(index=False):
        waiter, waited = int(row.waiter), int(row.waited_for)
        cross = f.crosses_stages(row.group)
        v = cause_of.get(waited)
        if v is not None and waiter in v.get("_late", ()):
            v = None  # ranks of one cause waiting for each other
        if v is None and stage is not None and cross:
            v = stage  # filling / draining behind the heavier stage
        if v is None or (v is stage and (not cross or f.stage_of.get(waiter)
                                         == f.stage_of.get(waited))):
            continue
        key = (v["id"], f.group_of(row.group).label, f.stage_of.get(waiter))
        e = acc.setdefault(key, {"cause": v, "waiters": {}, "waited": set(), "groups": {}})
        e["waiters"][waiter] = e["waiters"].get(waiter, 0.0) + row.peer_wait_ns
        e["waited"].add(waited)
        e["groups"][row.group] = None
    per_cause: dict = {}
    for (vid, label, st), e in acc.items():
        per_cause.setdefault(vid, []).append((label, st, e))
    for vid, items in per_cause.items():
        v = items[0][2]["cause"]
        items.sort(key=lambda it: -sum(it[2]["waiters"].values()))
        total_ms = 0.0
        for label, st, e in items:
            waiters = e["waiters"]
            mean = sum(waiters.values()) / len(waiters)
            total_ms += sum(waiters.values()) / 1e6
            if mean < 0.05e6 or len(v["symptoms"]) >= MAX_SYMPTOMS:
                continue
            late = v.get("_late", set())
            drain = bool(v.get("_cross_stage")) and not (e["waited"] & late)
            how = (": the pipeline fills and drains behind the heavier stage, a consequence of "
                   "the imbalance, not a second cause" if drain else "")
            who = (f"stage {st} ({ranks_text(waiters)})" if st is not None and f.stage_of
                   else ranks_text(waiters))
            whom = ranks_text(e["waited"])
            if v.get("_cross_stage") and f.stage_of:
                sts = sorted({f.stage_of.get(x) for x in e["waited"]} - {None})
                if len(sts) == 1:
                    whom = f"stage {sts[0]} ({whom})"
            one = len(waiters) == 1 or who.startswith("stage")
            msg = (f"{who[0].upper() + who[1:]} {'waits' if one else 'wait'} "
                   f"{ms(mean):.1f} ms per step (up to {ms(max(waiters.values())):.1f}) for "
                   f"{whom} in {label} ops{how}.")
            groups = [f.group_of(g).ref() for g in list(e["groups"])[:8]]
            v["symptoms"].append(symptom(
                vid, "communication", waiters, msg, groups=groups,
                evidence={"wait_ms": {str(r): ms(x) for r, x in sorted(waiters.items())},
                          "mean_wait_ms": ms(mean), "waited_for_ranks": sorted(e["waited"]),
                          "pipeline_fill_drain": drain}))
        v["evidence"]["peer_wait_explained_ms"] = round(total_ms, 3)


def _observations(f: Facts) -> list[dict]:
    """Ranks whose Communication(Not Overlapped) share passes the threshold, one observation per
    stage (or for all ranks without stages), with their op time split per step (ns, mean over
    the set's ranks) and who they wait for."""
    out = []
    for stage, ranks in f.flagged.items():
        n = len(ranks)
        sub = f.comp[f.comp["rank"].isin(ranks)] if not f.comp.empty else f.comp
        cols = ["elapse_ns", "transfer_ns", "peer_wait_ns", "absent_wait_ns", "other_ns",
                "unattributed_ns"]
        tot = {c: float(sub[c].sum()) / n if len(sub) else 0.0 for c in cols}
        by_group = (sub.groupby("group")[cols].sum() / n) if len(sub) else pd.DataFrame()
        b = f.blame[f.blame["waiter"].isin(ranks)]
        waited = (b.groupby("waited_for")["peer_wait_ns"].sum() / n) if len(b) else pd.Series()
        out.append({"stage": stage, "ranks": sorted(ranks), "tot": tot, "by_group": by_group,
                    "waited": waited, "blame": b})
    return out


def _where(f: Facts, obs) -> str:
    st = obs["stage"]
    return f"stage {st} ({ranks_text(obs['ranks'])})" if st is not None else \
        ranks_text(obs["ranks"])


def _share_text(f: Facts, ranks) -> tuple[str, float]:
    shares = f.means.loc[ranks, "cno_pct"]
    span = (f"{shares.min():.1f}–{shares.max():.1f}%" if len(ranks) > 1 and
            round(shares.min(), 1) != round(shares.max(), 1) else f"{shares.max():.1f}%")
    return span, float(shares.max())


def _split_ev(f: Facts, obs) -> dict:
    t = obs["tot"]
    ev = {"comm_not_overlapped_ms": {str(r): ms(f.means.loc[r, "cno_ns"]) for r in obs["ranks"]},
          "comm_not_overlapped_pct": {str(r): pct(f.means.loc[r, "cno_pct"])
                                      for r in obs["ranks"]},
          "op_elapse_ms": ms(t["elapse_ns"]), "transfer_ms": ms(t["transfer_ns"]),
          "peer_wait_ms": ms(t["peer_wait_ns"]), "wait_on_absent_ms": ms(t["absent_wait_ns"]),
          "other_ms": ms(t["other_ns"]), "unattributed_ms": ms(t["unattributed_ns"]),
          "waited_for_ms": {str(int(r)): ms(v) for r, v in obs["waited"].items() if v >= 1e3},
          "by_group": {f.group_of(g).label: {k.replace("_ns", "_ms"): ms(v) for k, v in row.items()}
                       for g, row in obs["by_group"].iterrows()} if len(obs["by_group"]) else {},
          "step_values": f.step_sources(obs["ranks"])}
    if obs["stage"] is not None:
        ev["stage"] = int(obs["stage"])
    return ev


def _attach(v: dict, f: Facts, obs, msg: str, part_ms: float) -> None:
    groups = [f.group_of(g).ref() for g in obs["by_group"].index] if len(obs["by_group"]) else []
    s = symptom(v["id"], "communication", obs["ranks"], msg, groups=groups,
                evidence={**_split_ev(f, obs), "explained_ms": round(part_ms, 3)},
                scope="stage" if obs["stage"] is not None else "rank")
    v["symptoms"].insert(0, s)


def _communication(f: Facts, causes: list[dict], cause_of: dict[int, dict]) -> list[dict]:
    """Each observation attached to the cause that explains most of it, or its own verdict."""
    th, out = f.th, []
    stage = _stage_cause(causes)
    collection = next((v for v in causes if v.get("_absent")), None)
    link_causes = [v for v in causes if v.get("_groups")]
    thr_used = {"comm_share_pct": th["comm_share_pct"], "wait_ratio": th["wait_ratio"]}
    for obs in _observations(f):
        t = obs["tot"]
        if stage is None and _bubble_only(f, obs["ranks"]):
            continue
        span, top = _share_text(f, obs["ranks"])
        where = _where(f, obs)
        lead = f"Communication(Not Overlapped) takes {span} of the step on {where}"
        elapse = t["elapse_ns"]
        sev = severity(top, th["comm_share_pct"], th["critical_factor"])
        if elapse <= 0:
            if stage is not None and obs["stage"] is not None:
                _attach(stage, f, obs, f"{lead}; without per-op communication data it cannot "
                        f"be split, but in a pipeline with a heavier stage the other stages "
                        f"waiting for it (and the pipeline draining) is the expected part of "
                        f"it.", 0.0)
                continue
            out.append(_unknown(f, obs, lead, sev, thr_used))
            continue
        wait = t["peer_wait_ns"] + t["absent_wait_ns"]
        explained: dict = {}
        for w, amt in obs["waited"].items():
            v = cause_of.get(int(w))
            if v is None and stage is not None:
                cross = obs["blame"]
                cross = cross[cross["waited_for"] == w]
                amt_cross = sum(a for g, a in zip(cross["group"], cross["peer_wait_ns"])
                                if f.crosses_stages(g)) / len(obs["ranks"])
                if amt_cross > 0:
                    explained[stage["id"]] = explained.get(stage["id"], 0.0) + amt_cross
                continue
            if v is not None:
                explained[v["id"]] = explained.get(v["id"], 0.0) + float(amt)
        if collection is not None and t["absent_wait_ns"] > 0:
            explained[collection["id"]] = explained.get(collection["id"], 0.0) + t["absent_wait_ns"]
        rest = t["other_ns"] + t["unattributed_ns"]
        by_id = {v["id"]: v for v in causes}
        if wait >= th["wait_ratio"] * elapse:
            if sum(explained.values()) >= 0.5 * wait:
                main = max(explained, key=explained.get)
                whom = ", ".join(f"{ms(a):.1f} ms {_cause_label(by_id[k])}"
                                 for k, a in sorted(explained.items(), key=lambda x: -x[1]))
                msg = (f"{lead}: {wait / elapse:.0%} of the time in communication ops is "
                       f"waiting ({ms(wait):.1f} of {ms(elapse):.1f} ms per step): {whom}.")
                _attach(by_id[main], f, obs, msg, ms(explained[main]))
                continue
            out.append(_unexplained_wait(f, obs, lead, wait, elapse, thr_used, cause_of))
            continue
        # transfer or the rest: a slow link / group of these groups, or missing members
        gids = set(obs["by_group"].index) if len(obs["by_group"]) else set()
        owner = None
        for v in link_causes:
            share = sum(float(obs["by_group"].loc[g, "transfer_ns"] + obs["by_group"].loc[g,
                        "other_ns"]) for g in v["_groups"] & gids)
            if share > 0 and (owner is None or share > owner[1]):
                owner = (v, share)
        if owner is not None and owner[1] >= 0.5 * (t["transfer_ns"] + rest):
            v = owner[0]
            msg = (f"{lead}: most of the time in communication ops is transfer and time spent "
                   f"inside the ops of {', '.join(f.group_of(g).label for g in v['_groups'])} "
                   f"({ms(owner[1]):.1f} of {ms(elapse):.1f} ms per step), slowed by "
                   f"{_cause_label(v)}.")
            _attach(v, f, obs, msg, ms(owner[1]))
            continue
        if (collection is not None and t["unattributed_ns"] + t["absent_wait_ns"]
                >= max(t["transfer_ns"], t["other_ns"], t["peer_wait_ns"])):
            part = t["unattributed_ns"] + t["absent_wait_ns"]
            msg = (f"{lead}: {ms(part):.1f} of {ms(elapse):.1f} ms per step inside the "
                   f"communication ops cannot be attributed: their groups have members not in "
                   f"this collection (it may be waiting on them); {ms(t['transfer_ns']):.1f} ms "
                   f"is transfer, {ms(t['peer_wait_ns']):.1f} ms waiting for collected peers.")
            _attach(collection, f, obs, msg, ms(part))
            continue
        out.append(_own(f, obs, lead, sev, thr_used, link_causes))
    return out


def _bubble_only(f: Facts, ranks) -> bool:
    """True when, without the waiting across pipeline stages (the pipeline filling and
    draining: the bubble any pipeline schedule has), the Communication(Not Overlapped) share
    of every rank of ``ranks`` is below ``comm_share_pct``: an even pipeline, nothing to
    report."""
    if not f.stage_of or f.comp.empty:
        return False
    c = f.comp[f.comp["rank"].isin(ranks)]
    cross = c[[f.crosses_stages(g) for g in c["group"]]]
    wait = cross.groupby("rank")["peer_wait_ns"].sum()
    m = f.means.loc[list(ranks)]
    rest = (m["cno_ns"] - wait.reindex(m.index, fill_value=0.0)) / m["total_ns"].where(
        m["total_ns"] > 0)
    return bool((100.0 * rest.fillna(0.0) < f.th["comm_share_pct"]).all())


def _cause_label(v: dict) -> str:
    if v.get("_absent"):
        return "on ranks not in this collection"
    if v.get("_cross_stage"):
        return f"for the heavier pipeline stage ({ranks_text(v['ranks'])}) and its fill/drain"
    if v.get("_groups"):
        return f"the {v['category'].replace('_', ' ')} ({v['evidence'].get('group', '')})"
    return f"for {ranks_text(v['ranks'])} ({v['category'].replace('_', ' ')})"


def _unknown(f: Facts, obs, lead, sev, thr_used) -> dict:
    missing = sorted({x for r in obs["ranks"] for x in f.missing_files.get(r, [])
                      if x.startswith("communication")})
    levels = sorted({str(f.levels.get(r)) for r in obs["ranks"] if f.levels.get(r)})
    lvl = f" (profiler level {', '.join(levels)})" if levels else ""
    why = (f"{', '.join(missing)} {'was' if len(missing) == 1 else 'were'} not collected{lvl}"
           if missing else "there are no per-op communication times")
    msg = (f"{lead}; whether it is waiting for a slower rank or data transfer cannot be told: "
           f"{why}.")
    kinds = {f.kinds.get(r) for r in obs["ranks"]}
    framework = kinds & {"torch_npu", "mindspore", "db"}
    if "Level0" in levels or (framework and not levels):
        nxt = ("Collect with communication analysis on (profiler level 1 or higher: "
               "communication.json) to split this time into transfer and waiting; meanwhile "
               "compare the communication ops of all ranks on the timeline.")
    elif not framework:
        # legacy MindSpore / CANN msprof data: no torch_npu profiler level to raise
        nxt = ("Collect the communication (HCCL) data of every rank to split this time into "
               "transfer and waiting; meanwhile compare the communication ops of all ranks on "
               "the timeline.")
    else:
        nxt = (f"Copy the {', '.join(missing) or 'communication files'} the profiler wrote for "
               f"{ranks_text(obs['ranks'])} (or re-export them) to split this time into "
               f"transfer and waiting.")
    ev = _split_ev(f, obs)
    ev.update({"cause": "unknown", "missing_files": missing, "profiler_levels": levels})
    return make_verdict("communication", "stage" if obs["stage"] is not None else "rank",
                        obs["ranks"], sev, msg, nxt, evidence=ev, threshold=thr_used,
                        id=f"communication:{obs['stage']}")


def _unexplained_wait(f: Facts, obs, lead, wait, elapse, thr_used, cause_of) -> dict:
    waited = obs["waited"]
    top = float(waited.max()) if len(waited) else 0.0
    main = sorted(int(r) for r, v in waited.items() if v >= 0.25 * top and top > 0)
    peers_ok = []
    for w in main:
        if f.means is not None and w in f.means.index:
            peers_ok.append(w)
    msg = (f"{lead}: {wait / elapse:.0%} of the time in communication ops is waiting "
           f"({ms(wait):.1f} of {ms(elapse):.1f} ms per step), mostly for "
           f"{ranks_text(main) if main else 'peers'}; but "
           f"{'their' if len(main) != 1 else 'its'} own Computing and Free are not above "
           f"those of the ranks doing the same work, so no rank's work explains it (ranks that "
           f"start their step at different times, or a delay the profile does not show).")
    nxt = (f"Open {ranks_text(main) if main else 'these ranks'} and {ranks_text(obs['ranks'])} "
           f"on the timeline around the ops they wait in; nothing here needs a fix unless the "
           f"step time of the cluster is too long.")
    ev = _split_ev(f, obs)
    ev.update({"cause": "waiting, unexplained", "waited_for_ranks": main})
    return make_verdict("communication", "stage" if obs["stage"] is not None else "rank",
                        obs["ranks"], "info", msg, nxt, evidence=ev, threshold=thr_used,
                        id=f"communication:{obs['stage']}")


def _own(f: Facts, obs, lead, sev, thr_used, link_causes) -> dict:
    t = obs["tot"]
    elapse = t["elapse_ns"]
    ev = _split_ev(f, obs)
    bg = obs["by_group"]
    scope = "stage" if obs["stage"] is not None else "rank"
    if t["transfer_ns"] >= t["other_ns"] + t["unattributed_ns"]:
        ev["cause"] = "transfer"
        gid = bg["transfer_ns"].idxmax()
        g = f.group_of(gid)
        lk = f.links[f.links["group"] == gid] if not f.links.empty else f.links
        tr_text = ""
        if len(lk):
            by_tr = lk.groupby("transport").agg(size_mb=("size_mb", "sum"),
                                                transit_ns=("transit_ns", "sum"))
            tr = by_tr["size_mb"].idxmax()
            bw = by_tr.loc[tr, "size_mb"] / (by_tr.loc[tr, "transit_ns"] / 1e6)
            size = float(lk.loc[lk["transport"] == tr].groupby("reported_by")["size_mb"]
                         .sum().median())
            tr_text = (f" over {tr} at {bw:.2f} GB/s ({size:.1f} MB per rank and step)")
            ev.update({"transport": tr, "bandwidth_gbps": round(float(bw), 4),
                       "size_mb_per_rank": round(size, 3)})
        ev["group"] = g.label
        msg = (f"{lead}: most of it is data transfer ({ms(t['transfer_ns']):.1f} of "
               f"{ms(elapse):.1f} ms per step), mostly in {g.text()}{tr_text}; no link or group "
               f"is slower than comparable ones, so the volume is the cost.")
        nxt = (f"Overlap the communication of {g.label} with computation (bucketed / overlapped "
               f"gradient reduction) or reduce its volume (fewer, larger all-reduces; a "
               f"different parallel split).")
        return make_verdict("communication", scope, obs["ranks"], sev, msg, nxt, evidence=ev,
                            threshold=thr_used, groups=[g.ref()],
                            id=f"communication:{obs['stage']}")
    ev["cause"] = "other"
    by_op = pd.Series(f.totals.op_elapse(obs["stage"]), dtype="int64").sort_index()
    longest = (by_op / len(obs["ranks"])).sort_values(ascending=False, kind="stable").head(3)
    ev["longest_ops_ms"] = {str(k): ms(v) for k, v in longest.items()}
    gid = bg["other_ns"].idxmax() if len(bg) else ""
    g = f.group_of(gid)
    msg = (f"{lead}: {ms(t['other_ns']):.1f} of {ms(elapse):.1f} ms per step inside the "
           f"communication ops is neither transfer nor waiting for a peer; every member of "
           f"{g.text()} is collected and spends it alike (longest: "
           f"{', '.join(ev['longest_ops_ms'])}).")
    nxt = ("Open these ops on the timeline of all ranks: time common to every member usually "
           "means all ranks waited for the same thing (host-side launch of the op's tasks, a "
           "synchronisation, the first op of the step absorbing setup).")
    return make_verdict("communication", scope, obs["ranks"], sev, msg, nxt, evidence=ev,
                        threshold=thr_used, groups=[g.ref()] if gid else [],
                        id=f"communication:{obs['stage']}")


def assemble(f: Facts, causes: list[dict]) -> list[dict]:
    """Causes with their symptoms, plus the communication verdicts no cause explains; internal
    keys still present (derive strips them)."""
    cause_of = _cause_of_rank(f, causes)
    out = list(causes)
    if f.means is not None:
        out += _communication(f, causes, cause_of)
    _blame_symptoms(f, causes, cause_of)
    for v in causes:  # the largest consequences first
        v["symptoms"].sort(key=lambda s: -float(s["evidence"].get("explained_ms")
                                                or s["evidence"].get("mean_wait_ms") or 0.0))
    out.sort(key=lambda v: (SEVERITY_ORDER.get(v["severity"], 3), -float(v.get("_rank_key", 0))))
    return out
