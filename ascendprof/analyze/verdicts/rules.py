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

import warnings

import numpy as np
import pandas as pd

from ascendprof.analyze import iteration_trace
from ascendprof.analyze.verdicts.facts import Facts, ranks_text
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
        parts.append(f"{g.label} has at least {g.size} members (group-local ranks up to "
                     f"{g.size - 1} in communication_matrix.json; without "
                     f"profiler_metadata.json the exact size is unknown) but only "
                     f"{ranks_text(g.collected)} {'was' if len(g.collected) == 1 else 'were'} "
                     f"collected: at least {g.n_absent} members are not in this collection")
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
              "id": g.id, "members": g.size, "members_exact": g.global_ranks is not None,
              "global_ranks": g.global_ranks,
              "collected": g.collected, "absent": g.absent if g.global_ranks is not None
              else None, "n_absent": g.n_absent} for g in partial},
          "groups_with_one_collected_rank": [g.label for g in alone],
          "wait_on_absent_ms": absent_ms, "unattributed_ms": unattr_ms,
          "step_values": f.step_sources(f.collected)}
    who = ranks_text(f.absent) if f.absent else \
        " and ".join(f"the other members of {g.label} (at least {g.n_absent})"
                     for g in unknown[:2])
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


def _max_separate(f: Facts) -> int:
    """``max_separate_verdicts``: separate verdicts of one kind per set / transport."""
    return max(1, int(f.th.get("max_separate_verdicts", 4)))


def _ops_text(ex: dict, n: int = 3) -> str:
    """'MatMulV3 +36.8 ms, Cast +20.7 ms …; kernels: aclnnMatmul… [4096,151936] +36.8 ms'."""
    if not ex or not ex.get("op_types"):
        return ""
    names = [d["op_type"] for d in ex["op_types"]]
    ops = ", ".join(f"{d['op_type']}"
                    + (f" ({d['accelerator_core']})" if names.count(d["op_type"]) > 1 else "")
                    + f" +{d['excess_ms']:.1f} ms" for d in ex["op_types"][:n])
    ks = ", ".join(f"{d['kernel']} [{d['input_shapes']}] +{d['excess_ms']:.1f} ms"
                   for d in ex.get("kernels", [])[:n])
    return f"op types {ops}" + (f"; kernels {ks}" if ks else "")


def _groups_with(f: Facts, ranks) -> list:
    """The groups holding one of ``ranks`` and another collected rank, named ones first."""
    ranks = set(ranks)
    out = [g for g in f.groups.values() if ranks & set(g.collected) and len(g.collected) > 1]
    return sorted(out, key=lambda g: (g.name is None, g.label, g.id))


def _units(f: Facts, heavy: list[int]) -> list[tuple[list[int], str]]:
    """``heavy`` ranks split into causes: ranks of one node (joined by HCCS links) or of one
    communication group within their stage merge when at least half of that node's / group's
    collected ranks are heavy (a slow server, a slow tp group); the others stay alone.
    Returns [(ranks, what: "rank" | "node" | group name)]."""
    hv = set(heavy)
    parent = {r: r for r in heavy}

    def find(x):
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    kinds: dict[frozenset, str] = {}
    nodes: dict[int, list] = {}
    for r, n in f.node_of().items():
        nodes.setdefault(n, []).append(r)
    sets = [(sorted(v), "node") for v in nodes.values() if len(v) > 1]
    sets += [(sorted(g.collected), g.label) for g in f.groups.values()
             if len(g.collected) > 1 and not f.crosses_stages(g.id)]
    for members, what in sets:
        mine = [r for r in members if r in hv]
        if len(mine) < 2 or 2 * len(mine) < len(members):
            continue
        for r in mine[1:]:
            ra, rb = find(mine[0]), find(r)
            if ra != rb:
                parent[max(ra, rb)] = min(ra, rb)
        kinds.setdefault(frozenset(mine), what)
    comps: dict[int, list] = {}
    for r in heavy:
        comps.setdefault(find(r), []).append(r)
    out = []
    for rs in comps.values():
        rs = sorted(rs)
        what = "rank" if len(rs) == 1 else kinds.get(frozenset(rs), "group")
        out.append((rs, what))
    return sorted(out)


def _peer_columns(steps: pd.DataFrame, peers: list[int], cols: list[str]) -> list[np.ndarray]:
    """The columns ``cols`` of the rows of ``peers`` (arrays; not a copy of the whole frame,
    which was ~0.15 GB at 10^6 steps, nor of a column when every row is a peer's)."""
    mask = steps["rank"].isin(peers).to_numpy()
    every = bool(mask.all())
    return [steps[c].to_numpy() if every else steps[c].to_numpy()[mask] for c in cols]


def _per_step(f: Facts, peers: list[int], col: str, thr: float) -> dict[int, dict]:
    """Per rank of ``peers``: {step: (value, baseline, excess)} for the steps in which its
    ``col`` (ns) exceeds the step's baseline (the other rank of a pair; else the median of
    the set in that step) by ``thr`` and, among >= 3 ranks, stands out by the robust z."""
    rank, step, val = _peer_columns(f.steps, peers, ["rank", "step", col])
    if not len(rank):
        return {}
    # all steps at once (rows: steps, columns: ranks): a loop over 10^6 steps took minutes; the
    # sum per (rank, step) as pivot_table gives it (NaN where a rank has no such step),
    # without its index work (0.3 GB at 10^6 steps)
    ranks, ri = np.unique(rank, return_inverse=True)
    steps, si = np.unique(step, return_inverse=True)
    del rank, step
    at = si * len(ranks) + ri
    del si, ri
    v = np.bincount(at, weights=val.astype(float), minlength=len(steps) * len(ranks))
    v[np.bincount(at, minlength=len(v)) == 0] = np.nan
    v = v.reshape(len(steps), len(ranks))
    known = ~np.isnan(v)
    n = known.sum(axis=1)[:, None]
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # steps with no value: skipped below
        # the median and MAD only where they are used: steps of >= 3 ranks
        med, mad = np.full((len(v), 1), np.nan), np.full((len(v), 1), np.nan)
        big = n[:, 0] >= 3
        if big.any():
            med[big, 0] = np.nanmedian(v[big], axis=1)
            mad[big, 0] = np.nanmedian(np.abs(v[big] - med[big]), axis=1)
        # a pair: each rank against the other one
        other = np.where(v == np.nanmax(v, axis=1)[:, None], np.nanmin(v, axis=1)[:, None],
                         np.nanmax(v, axis=1)[:, None])
        base = np.where(n == 2, other, med)
        z = np.where(n == 2, np.inf, np.where(mad > 0, 0.6745 * (v - med) / mad,
                                               np.where(v > med, np.inf, 0.0)))
        ex = v - base
        hit = known & (n >= 2) & (ex >= thr) & (z >= f.th["slow_rank_mad_z"])
    out: dict[int, dict] = {}
    for i, j in zip(*np.nonzero(hit)):  # step by step, ranks in order, as they are reported
        out.setdefault(int(ranks[j]), {})[int(steps[i])] = (float(v[i, j]), float(base[i, j]),
                                                            float(ex[i, j]))
    return out


def imbalance_verdicts(f: Facts) -> list[dict]:
    """Ranks whose Computing or Free exceeds that of the ranks doing the same work (same
    pipeline stage, or all ranks without stages).

    A rank computes (idles) more only when its part in ms per step exceeds the baseline (the
    other rank of a pair; the median of the set's other ranks otherwise) by
    :meth:`Facts.excess_threshold_ns`; the spread of the part's share of the step over the set
    (seed 000's triage) ranks the verdicts. Ranks that stand out by the robust z-score are
    ``slow_rank`` (Computing) or ``schedule`` (Free) causes; ranks of one node or one group
    (tp …) that stand out together are one cause naming the set. A larger part of the set is
    one ``compute`` / ``schedule`` verdict for the set (an uneven split). Computing is also
    looked at step by step: a rank slower in some steps only is a transient straggler.
    Extra Free needs its peers to wait for it (``blame_ratio``) when that can be seen: a
    longer step that nobody waits for is an info ``long_step`` verdict saying what the data
    shows.
    """
    th, out = f.th, []
    if f.means is None:
        return out
    for stage, peers in f.same_work_sets().items():
        if len(peers) < 2:
            continue
        sub = f.means.loc[peers]
        thr = f.excess_threshold_ns(peers)
        where = f"stage {stage} " if stage is not None else ""
        n_steps_set = len(np.unique(_peer_columns(f.steps, peers, ["step"])[0]))
        for col, share_col, label in _PARTS:
            vals = sub[col].astype(float)
            spread = float(sub[share_col].max() - sub[share_col].min())
            med = float(vals.median())
            if len(peers) == 2:
                base0 = pd.Series(vals.to_numpy()[::-1], index=vals.index)
            else:
                base0 = pd.Series(med, index=vals.index)
            heavy = [int(r) for r in peers if vals[r] - base0[r] >= thr]
            steps_heavy = _per_step(f, peers, col, thr) if label == "Computing" else {}
            transient = [r for r in steps_heavy if r not in heavy]
            if not heavy and not transient:
                continue
            mad = float((vals - med).abs().median())
            z = {r: (0.6745 * (vals[r] - med) / mad if mad > 0 else float("inf"))
                 for r in peers}
            # the baseline: the ranks of the set that are not heavy (the other rank of a pair)
            rest = [p for p in peers if p not in heavy] or peers
            base = (base0 if len(peers) == 2 else
                    pd.Series(float(vals[rest].median()), index=vals.index))
            excess = vals - base
            lates = pd.Series({p: f.lateness(p) for p in peers}, dtype=float)
            usual = (pd.Series(lates.to_numpy()[::-1], index=lates.index) if len(peers) == 2
                     else pd.Series(float(lates[rest].median()), index=lates.index))
            blamed = {r: max(0.0, lates[r] - usual[r]) for r in peers}
            seen = {r: f.has_peer_data(r) for r in heavy + transient}
            ctx = {"f": f, "stage": stage, "peers": peers, "label": label, "where": where, "vals": vals,
                   "base": base, "excess": excess, "z": z, "blamed": blamed, "seen": seen,
                   "thr": thr, "spread": spread, "share_col": share_col, "sub": sub,
                   "steps_heavy": steps_heavy, "n_steps": n_steps_set}
            if label == "Free":
                quiet = [r for r in heavy if seen[r]
                         and blamed[r] < th["blame_ratio"] * excess[r]]
                heavy = [r for r in heavy if r not in quiet]
                if quiet:
                    out.append(_long_step(ctx, quiet))
            if heavy:
                outliers = len(peers) < 3 or all(z[r] >= th["slow_rank_mad_z"] for r in heavy)
                if len(peers) >= 3 and len(heavy) == 1 and not outliers:
                    heavy = []  # one rank, but no further from the median than the set's spread
                if heavy:
                    units = _units(f, heavy) if outliers else [(heavy, "set")]
                    if len(units) > _max_separate(f):
                        units = [(heavy, "many")]
                    for unit, what in units:
                        out.append(_rank_verdict(ctx, unit, what, outliers))
            if len(transient) <= _max_separate(f):
                for r in transient:
                    out.append(_transient_verdict(ctx, r))
            else:
                out.append(_transient_verdict(ctx, transient))
    return out


def longest_step_deviation(f: Facts) -> dict | None:
    """The (rank, step) whose step time (Computing + Communication(Not Overlapped) + Free)
    exceeds the median of the ranks doing the same work in that step the most, when by more
    than :meth:`Facts.excess_threshold_ns`; None otherwise (the ranks take the same time)."""
    if f.means is None:
        return None
    best = None
    for _stage, peers in f.same_work_sets().items():
        if len(peers) < 2:
            continue
        thr = f.excess_threshold_ns(peers)
        st = f.steps[f.steps["rank"].isin(peers)]
        med = st.groupby("step")["total_ns"].transform("median")
        ex = st["total_ns"] - med
        if not len(ex) or float(ex.max()) < thr:
            continue
        i = ex.idxmax()
        if best is None or float(ex[i]) > best["excess_ms"] * 1e6:
            best = {"rank": int(st.loc[i, "rank"]), "step": int(st.loc[i, "step"]),
                    "step_ms": ms(st.loc[i, "total_ns"]), "median_ms": ms(med[i]),
                    "excess_ms": ms(ex[i]), "threshold_ms": ms(thr)}
    return best


def _by_step(ctx, ranks) -> dict:
    """{step: {computing_ms / free_ms, baseline_ms, excess_ms}} of the steps in which the
    (first) rank of ``ranks`` stands out (at most 16)."""
    r = ranks[0]
    key = f"{ctx['label'].lower()}_ms"
    return {str(s): {key: ms(v), "baseline_ms": ms(b), "excess_ms": ms(e)}
            for s, (v, b, e) in sorted(ctx["steps_heavy"].get(r, {}).items())[:16]}


def _common_ev(ctx, unit) -> dict:
    f, peers, label, vals, sub = ctx["f"], ctx["peers"], ctx["label"], ctx["vals"], ctx["sub"]
    many = len(peers) > 64
    shown = sorted(unit) if many else peers
    ev = {"part": label, "n_peers": len(peers), "stage": ctx["stage"],
          f"{label.lower()}_ms": {str(r): ms(vals[r]) for r in shown},
          f"{label.lower()}_share_pct": {str(r): pct(sub.loc[r, ctx["share_col"]])
                                         for r in shown},
          "peers_median_ms": ms(vals.median()),
          "share_spread_pct": pct(ctx["spread"]), "median_step_ms": ms(f.median_step_ns(peers)),
          "threshold_ms": ms(ctx["thr"]), "step_values": f.step_sources(unit)}
    if not many:
        ev["peers"] = peers
    return ev


def _thr_used(f, label) -> dict:
    th = f.th
    out = {"excess_of_step_pct": th["excess_of_step_pct"], "min_excess_ms": th["min_excess_ms"],
           "slow_rank_mad_z": th["slow_rank_mad_z"]}
    if label == "Free":
        out["blame_ratio"] = th["blame_ratio"]
    return out


def _rank_verdict(ctx, unit, what, outliers) -> dict:
    f, peers, label, where = ctx["f"], ctx["peers"], ctx["label"], ctx["where"]
    vals, base, excess, z, blamed, seen = (ctx[k] for k in ("vals", "base", "excess", "z",
                                                           "blamed", "seen"))
    th = f.th
    single = len(unit) == 1
    r = unit[0]
    others = [p for p in peers if p not in unit]
    step_ns = f.median_step_ns(peers)
    ev = _common_ev(ctx, unit)
    ev.update({"ranks": unit, "baseline_ms": ms(base[r]),
               "excess_ms": {str(x): ms(excess[x]) for x in unit},
               "excess_of_step_pct": {str(x): pct(100.0 * excess[x] / step_ns) for x in unit},
               "robust_z": {str(x): (None if z[x] == float("inf") else round(z[x], 2))
                            for x in unit},
               "arrives_late_ms": {str(x): ms(blamed[x]) for x in unit},
               "max_peer_wait_for_it_ms": {str(x): ms(f.max_wait_for(x)) for x in unit},
               "peer_waits_visible": {str(x): bool(seen.get(x)) for x in unit}})
    top = max(excess[x] for x in unit)
    sev = severity(top, ctx["thr"], th["critical_factor"])
    groups = _groups_with(f, unit)
    if not single:  # the groups the set makes up first (its tp group …)
        u = set(unit)
        groups.sort(key=lambda g: -len(u & set(g.collected)) / max(1, len(g.collected)))
    gtext = ", ".join(g.text() for g in groups[:3]) if len(unit) <= 8 else ""
    in_groups = f" (groups {gtext})" if gtext else ""
    peers_text = ranks_text(others) if others else "its peer"
    lo, hi = min(excess[x] for x in unit), max(excess[x] for x in unit)
    ex_text = f"{ms(lo):.1f}" if round(ms(lo), 1) == round(ms(hi), 1) else \
        f"{ms(lo):.1f}–{ms(hi):.1f}"
    if label == "Computing":
        steps = ctx["steps_heavy"].get(r, {})
        n = ctx["n_steps"]
        ev["steps_slow"] = sorted(steps)
        ev["persistent"] = n > 0 and len(steps) >= max(1, n - n // 4)
        ev["by_step"] = _by_step(ctx, unit)
        it = "It" if single else "They"
        when = ("" if n <= 1 else
                f" {it} {'is' if single else 'are'} slower in every step ({n})"
                if len(steps) == n else
                f" {it} {'stands' if single else 'stand'} out in {len(steps)} of {n} steps "
                f"({', '.join(map(str, sorted(steps)[:8]))})" if steps else "")
        ex = f.op_excess.excess(unit, others)
        if ex:
            ev["which_ops"] = ex
        ops = _ops_text(ex)
        ops_sentence = (f" {'Its' if single else 'Their'} excess over "
                        f"{'its' if single else 'their'} peers, per step"
                        f"{'' if single else ' (median over them)'}: {ops}." if ops else "")
        if single or what != "set":
            cat = "slow_rank"
            if single:
                who = f"Rank {r} computes {ms(vals[r]):.1f} ms per step"
            elif what in ("node", "many") or what not in {g.label for g in f.groups.values()}:
                who = (f"{ranks_text(unit).capitalize()} "
                       f"({'one node, joined by HCCS' if what == 'node' else len(unit)})"
                       f" compute {ms(min(vals[x] for x in unit)):.1f}–"
                       f"{ms(max(vals[x] for x in unit)):.1f} ms per step")
                if what == "many":
                    who = (f"{len(unit)} ranks of the {where}set ({ranks_text(unit)}) compute "
                           f"{ms(min(vals[x] for x in unit)):.1f}–"
                           f"{ms(max(vals[x] for x in unit)):.1f} ms per step")
            else:
                who = (f"The {what} group of {ranks_text(unit)} computes "
                       f"{ms(min(vals[x] for x in unit)):.1f}–"
                       f"{ms(max(vals[x] for x in unit)):.1f} ms per step")
            msg = (f"{who}, {ex_text} ms ({100 * hi / step_ns:.1f}% of the step) more than the "
                   f"{where}ranks doing the same work ({peers_text if len(others) <= 16 else f'{len(others)} ranks'}: "
                   f"{ms(base[r]):.1f} ms){in_groups}; they wait for "
                   f"{'it' if single else 'them'} in the next collective.{when and when + '.'}"
                   f"{ops_sentence}")
            ev["scope_kind"] = what
            nxt = (f"Compare the kernels and op statistics of {ranks_text(unit)} with rank "
                   f"{others[0] if others else r} (`ascendprof diff DIR --ranks "
                   f"{others[0] if others else r},{r}`): the same ops slower point at the "
                   f"device{'s of that node' if what == 'node' else ''} (AI Core frequency, "
                   f"temperature); more ops or larger shapes at more work assigned there.")
        else:
            cat = "compute"
            msg = (f"{ranks_text(unit).capitalize()} compute "
                   f"{ms(min(vals[x] for x in unit)):.1f}–{ms(max(vals[x] for x in unit)):.1f} ms "
                   f"per step, {ms(lo):.1f} ms or more above the other "
                   f"{where}ranks doing the same work ({ranks_text(others)}: "
                   f"{ms(base[r]):.1f} ms){in_groups}: the work is not split evenly."
                   f"{ops_sentence}")
            nxt = (f"Compare the op statistics of {ranks_text(unit)} with {ranks_text(others)}: "
                   f"uneven batch or sequence lengths, or more layers / experts on these ranks.")
    else:
        vis = (f"{'it arrives' if single else 'they arrive'} "
               f"{ms(max(blamed[x] for x in unit)):.1f} ms per step later than "
               f"{'its' if single else 'their'} peers at the communication ops of "
               f"{'its' if single else 'their'} stage, which wait for "
               f"{'it' if single else 'them'}"
               if all(seen.get(x) for x in unit) else
               "whether its peers wait for it cannot be seen (no communication data with them)")
        cat = "schedule"
        who = f"Rank {r} is" if single else f"{ranks_text(unit).capitalize()} are"
        msg = (f"{who} idle (Free) {ms(max(vals[x] for x in unit)):.1f} ms per step, "
               f"{ex_text} ms ({100 * hi / step_ns:.1f}% of the step) more than the {where}ranks "
               f"doing the same work ({peers_text if len(others) <= 16 else f'{len(others)} ranks'}: "
               f"{ms(base[r]):.1f} ms){in_groups}, and {vis}: the host does not keep the device "
               f"busy.")
        nxt = (f"Open the timeline of {ranks_text(unit)} next to rank {others[0] if others else r}: "
               f"vertical host-to-device launch lines mean the device outruns the host "
               f"(dispatch-bound); look at host-side work, data loading and synchronisation there.")
    scope = "rank" if single else ("node" if what == "node" else "group")
    v = make_verdict(cat, scope, unit, sev, msg, nxt, evidence=ev,
                     threshold=_thr_used(f, label), groups=[g.ref() for g in groups[:8]],
                     id=f"{cat}:{_ids(unit)}")
    v["_late"] = set(unit)
    v["_rank_key"] = ctx["spread"]
    return v


def _ids(ranks) -> str:
    ranks = sorted(ranks)
    return ",".join(map(str, ranks)) if len(ranks) <= 16 else \
        ranks_text(ranks).replace("ranks ", "").replace(", ", ",")


def _transient_verdict(ctx, which) -> dict:
    """A rank (or, beyond ``max_separate_verdicts``, several) computing more than its peers in some steps
    only: a transient straggler."""
    f, peers, where = ctx["f"], ctx["peers"], ctx["where"]
    unit = [which] if isinstance(which, int) else sorted(which)
    r = unit[0]
    steps = ctx["steps_heavy"][r]
    n = ctx["n_steps"]
    worst = max(steps, key=lambda s: steps[s][2])
    v_, b_, e_ = steps[worst]
    others = [p for p in peers if p not in unit]
    ev = _common_ev(ctx, unit)
    ev.update({"ranks": unit, "persistent": False, "steps_slow": sorted(steps),
               "n_steps": n, "by_step": _by_step(ctx, unit),
               "excess_ms": {str(x): ms(ctx["excess"][x]) for x in unit},
               "worst_step": worst, "worst_step_excess_ms": ms(e_)})
    ex = f.op_excess.excess(unit, others)
    if ex:
        ev["which_ops"] = ex
        ev["which_ops_note"] = "over the whole capture (kernel data is not split by step here)"
    sl = ", ".join(map(str, sorted(steps)[:8]))
    if len(unit) == 1:
        msg = (f"Rank {r} is a transient straggler: it computes {ms(v_):.1f} ms in step {worst}, "
               f"{ms(e_):.1f} ms ({100 * e_ / max(b_, 1):.0f}%) more than the {where}ranks doing "
               f"the same work in that step ({ms(b_):.1f} ms); it stands out in "
               f"{len(steps)} of {n} steps ({sl}) and is in line with them in the others "
               f"(mean excess {ms(ctx['excess'][r]):.1f} ms per step).")
    else:
        msg = (f"{len(unit)} {where}ranks are transient stragglers ({ranks_text(unit)}): each "
               f"computes more than the ranks doing the same work in some steps only; the worst, "
               f"rank {r}, {ms(e_):.1f} ms more in step {worst}.")
    nxt = (f"Open step {worst} of rank {r} on the timeline next to rank "
           f"{others[0] if others else r}: a one-off slowdown (a host or device hiccup, "
           f"frequency drop, another process) rather than more work; check whether it repeats "
           f"in a longer capture.")
    sev = severity(e_, ctx["thr"], f.th["critical_factor"])
    v = make_verdict("slow_rank", "rank" if len(unit) == 1 else "group", unit, sev, msg, nxt,
                     evidence=ev, threshold=_thr_used(f, "Computing"),
                     groups=[g.ref() for g in _groups_with(f, unit)[:8]],
                     id=f"slow_rank:{_ids(unit)}:transient")
    v["_late"] = set(unit)
    v["_rank_key"] = ctx["spread"]
    return v


def _long_step(ctx, quiet) -> dict:
    """Ranks whose device idles (Free) more than their peers' while nobody waits for them: an
    info verdict saying what the data shows (their step window differs, or the data is
    inconsistent), never a cause to fix."""
    f, peers, where = ctx["f"], ctx["peers"], ctx["where"]
    vals, excess, blamed = ctx["vals"], ctx["excess"], ctx["blamed"]
    quiet = sorted(quiet)
    r = max(quiet, key=lambda x: excess[x])
    others = [p for p in peers if p not in quiet]
    steps = f.means.loc[quiet, "total_ns"]
    ev = _common_ev(ctx, quiet)
    ev.update({"ranks": quiet, "extra_free_ms": ms(excess[r]),
               "extra_free_ms_by_rank": {str(x): ms(excess[x]) for x in quiet},
               "arrives_late_ms": {str(x): ms(blamed[x]) for x in quiet},
               "max_peer_wait_for_it_ms": {str(x): ms(f.max_wait_for(x)) for x in quiet},
               "step_ms": {str(x): ms(steps[x]) for x in quiet},
               "peers_step_median_ms": ms(f.means.loc[others or peers, "total_ns"].median())})
    who = f"Rank {r}" if len(quiet) == 1 else ranks_text(quiet).capitalize()
    msg = (f"{who}'s step is longer than its peers' but nobody waits for it: its device idles "
           f"(Free) {ms(vals[r]):.1f} ms per step, {ms(excess[r]):.1f} ms more than the "
           f"{where}ranks doing the same work, while at the collectives it arrives only "
           f"{ms(blamed[r]):.1f} ms later than the others (the most any rank waits for it: "
           f"{ms(f.max_wait_for(r)):.1f} ms per step). So either its step window in "
           f"step_trace_time.csv starts earlier or ends later than theirs (idle time outside "
           f"the work they share), or its step values and communication data disagree. No "
           f"rank is slowed by it.")
    nxt = (f"Open the timeline of rank {r} next to rank {others[0] if others else r} and "
           f"compare where their steps begin and end; nothing needs a fix unless the idle "
           f"time is inside the step's work.")
    v = make_verdict("long_step", "rank" if len(quiet) == 1 else "group", quiet, "info", msg,
                     nxt, evidence=ev, threshold=_thr_used(f, "Free"),
                     id=f"long_step:{_ids(quiet)}")
    v["_rank_key"] = 0.0
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
    ex = f.op_excess.excess([r for r in hr if r not in outliers],
                            [r for r in rows[light]["ranks"] if r not in outliers])
    if ex:
        ev["which_ops"] = ex
    ops = _ops_text(ex, 5)
    msg = (f"Pipeline stages are unbalanced: stage {heavy} ({ranks_text(hr)}) computes "
           f"{rows[heavy]['computing_ms']:.1f} ms per step, stage {light} "
           f"({ranks_text(rows[light]['ranks'])}) {rows[light]['computing_ms']:.1f} ms "
           f"({gap_ns / 1e6:.1f} ms more; Computing share {rows[heavy]['computing_pct']:.1f}% vs "
           f"{rows[light]['computing_pct']:.1f}%)"
           + (f"; {'; '.join(wait_text)}." if wait_text else ".")
           + (f" Stage {heavy}'s excess over stage {light}, per step and rank "
              f"(rank {ex['ranks_compared'][0]} vs rank {ex['peers_compared'][0]}): {ops}."
              if ops else ""))
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
    # a group of two ranks has one physical link: a slow one is a slow link, not a group
    big = {gid for gid, g in f.groups.items()
           if len(g.global_ranks if g.global_ranks is not None else g.collected) >= 3}
    fam = lk[(lk["family"] != "") & lk["group"].isin(big)]
    for (transport, family), sub in fam.groupby(["transport", "family"]):
        med = sub.groupby("group")["bandwidth_gbps"].median()
        top = sub.groupby("group")["bandwidth_gbps"].max()
        if len(med) < 2:
            continue
        for gid, bw in med.items():
            base = float(med.drop(gid).median())
            # every link of the group slow: its path, not links of a wide spread
            if base > 0 and bw / base < ratio_thr and top[gid] / base < ratio_thr:
                slow_groups.setdefault(gid, []).append(
                    (transport, float(bw), base, int(len(med) - 1), sub[sub["group"] == gid]))
    out = [_slow_group(f, gid, found, ratio_thr, thr_used) for gid, found in slow_groups.items()]
    if len(out) > _max_separate(f):
        out = _distribution(f, "slow_group", [(v["evidence"]["bandwidth_ratio"], v)
                                              for v in out], thr_used, ratio_thr)
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
            ends = tuple(sorted((int(row["src_rank"]), int(row["dst_rank"]))))
            key = ((*ends, transport) if known else
                   (*sorted((int(row["src_local"]), int(row["dst_local"]))), transport,
                    row["group"]))
            slow_links.setdefault(key, []).append(
                (row, float(base_s[idx]), float(ratio_s[idx]),
                 "group name" if use_fam[idx] else "transport"))
    by_transport: dict[str, list] = {}
    for key, rows in slow_links.items():
        by_transport.setdefault(key[2], []).append(_slow_link(f, rows, ratio_thr, thr_used))
    for transport, vs in sorted(by_transport.items()):
        if len(vs) <= _max_separate(f):
            out += vs
            continue
        judged = rest[rest["transport"] == transport]
        n_phys = len({tuple(sorted((int(a), int(b)))) for a, b in
                      zip(judged["src_rank"], judged["dst_rank"])})
        out += _distribution(f, "slow_link", [(v["evidence"]["bandwidth_ratio"], v) for v in vs],
                             thr_used, ratio_thr, transport=transport, n_judged=n_phys)
    return out


def _distribution(f: Facts, cat: str, found: list, thr_used: dict, ratio_thr: float,
                  transport: str | None = None, n_judged: int | None = None) -> list[dict]:
    """Many links (groups) failing the same test: one verdict about the distribution (how
    many, how far below, the worst few, the ranks / groups / nodes they share) instead of
    one each."""
    found.sort(key=lambda x: x[0])
    ratios = np.array([x[0] for x in found], dtype=float)
    vs = [v for _, v in found]
    worst = vs[:5]
    what = "links" if cat == "slow_link" else "groups"
    tr = transport or ", ".join(sorted({v["evidence"].get("transport", "") for v in vs}))
    ends = [r for v in vs for r in v["ranks"]]
    count = pd.Series(ends, dtype="int64").value_counts() if ends else pd.Series(dtype="int64")
    shared_rank = (int(count.index[0]) if len(count) and count.iloc[0] >= max(3, len(vs) / 2)
                   else None)
    names = pd.Series([g["name"] for v in vs for g in v["groups"][:1]]).value_counts()
    nodes = f.node_of()
    node_count = pd.Series([nodes.get(r, r) for r in set(ends)]).value_counts() if ends else \
        pd.Series(dtype="int64")
    ev = {"transport": tr, f"n_slow_{what}": len(vs), f"n_{what}_judged": n_judged,
          "bandwidth_ratio_min": round(float(ratios.min()), 3),
          "bandwidth_ratio_median": round(float(np.median(ratios)), 3),
          "bandwidth_ratio_max": round(float(ratios.max()), 3),
          "worst": [{"id": v["id"], "ranks": v["ranks"],
                     "bandwidth_gbps": v["evidence"].get("bandwidth_gbps"),
                     "bandwidth_ratio": v["evidence"].get("bandwidth_ratio"),
                     "baseline_gbps": v["evidence"].get("baseline_median_gbps",
                                                        v["evidence"].get(
                                                            "sibling_groups_median_gbps")),
                     "group": v["evidence"].get("group")} for v in worst],
          "by_group_name": {str(k): int(c) for k, c in names.items()},
          "ranks_at_most_slow_links": ({str(int(k)): int(c) for k, c in count.head(5).items()}),
          "n_ranks": int(len(count)), "n_nodes": int(len(node_count)),
          "shared_rank": shared_rank}
    of = f" of {n_judged}" if n_judged else ""
    share = (f"; rank {shared_rank} is an end of {int(count.iloc[0])} of them: look at it first"
             if shared_rank is not None else
             f"; they involve {len(count)} ranks on {len(node_count)} nodes, no rank, node or "
             f"group holds most of them")
    wtxt = ", ".join(f"{v['evidence'].get('link')} {v['evidence'].get('bandwidth_ratio', 0):.0%}"
                     if cat == "slow_link"
                     else f"{v['evidence'].get('group')} ({ranks_text(v['ranks'])}) "
                          f"{v['evidence'].get('bandwidth_ratio', 0):.0%}" for v in worst)
    msg = (f"{len(vs)}{of} {tr} {what} are below {ratio_thr:.0%} of the median bandwidth of "
           f"comparable {what}: {ratios.min():.0%}–{ratios.max():.0%} of it (median "
           f"{np.median(ratios):.0%}); the worst: {wtxt}{share}. Link speeds spread widely "
           f"across the cluster rather than one {what[:-1]} being slow.")
    nxt = (f"Run a bandwidth test over the {tr} fabric (the worst {what} first) and compare "
           f"the link configuration of the slow ones with the fast ones (lanes, speed, "
           f"firmware, switch ports).")
    ratio_worst = float(ratios.min())
    v = make_verdict(cat, "transport", [shared_rank] if shared_rank is not None else [],
                     severity(ratio_worst, ratio_thr, f.th["critical_factor"], below=True), msg,
                     nxt, evidence=ev, threshold=thr_used,
                     groups=[g for v in worst for g in v["groups"][:1]],
                     id=f"{cat}:{tr}:distribution")
    v["_groups"] = set().union(*(v.get("_groups", set()) for v in vs))
    v["_rank_key"] = 1.0 - ratio_worst
    return [v]


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
    groups = list({r["group"]: f.group_of(r["group"]) for r, *_ in rows}.values())
    src, dst = int(row["src_rank"]), int(row["dst_rank"])
    known = bool(row["ranks_known"])
    dirs: dict[str, float] = {}  # "a→b": the lowest bandwidth of that direction
    for r, *_ in rows:
        d = f"{int(r['src_rank'])}→{int(r['dst_rank'])}"
        dirs[d] = min(dirs.get(d, float("inf")), round(float(r["bandwidth_gbps"]), 4))
    both = len(dirs) > 1
    link = f"{min(src, dst)}↔{max(src, dst)}" if both else f"{src}→{dst}"
    ev = {"transport": transport, "group": groups[0].label, "group_id": row["group"],
          "groups": [g.label for g in groups], "src_rank": src, "dst_rank": dst,
          "src_group_rank": int(row["src_local"]), "dst_group_rank": int(row["dst_local"]),
          "reported_by_rank": int(row["reported_by"]),
          "bandwidth_gbps": round(float(row["bandwidth_gbps"]), 4),
          "baseline_median_gbps": round(base, 4), "baseline": basis,
          "bandwidth_ratio": round(ratio, 3), "size_mb": round(float(row["size_mb"]), 3),
          "transit_ms": ms(row["transit_ns"]), "global_ranks_known": known, "link": link,
          "directions_gbps": dirs}
    rk = "" if known else " (group-local rank numbers)"
    where = " and ".join(g.text() for g in groups[:3])
    dtext = (" (both directions: " + ", ".join(f"{d} {b:.2f} GB/s" for d, b in dirs.items())
             + ")") if both else f": {row['bandwidth_gbps']:.2f} GB/s"
    msg = (f"Slow {transport} link {link}{rk} in {where}{dtext}, "
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

