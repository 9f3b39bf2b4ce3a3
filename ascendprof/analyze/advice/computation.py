"""Computation advice: what to change in the operators themselves.

Rules: AI CPU operators (``computation.aicpu``), online operator compilation / dynamic shapes
(``computation.op_compile``), Block Dim that leaves cores idle (``computation.block_dim``),
pipe-bound or under-used operators from the PMU ratios (``computation.pipe_bound``) and AI
Core frequency drops (``computation.aicore_freq``). Thresholds and their sources are declared
on each rule; docs/advice.md lists them.
"""

from __future__ import annotations

import numpy as np

from ascendprof.analyze.advice.base import Rule, Skip, finding, severity_by_share, us
from ascendprof.analyze.codes import filled_codes, group_codes
from ascendprof.model import schemas as S

# ------------------------------------------------------------------------------------ AI CPU

NO_CORE = ("kernels carry no Accelerator Core (torch_npu Level0 exports and legacy HWTS "
           "timelines do not record it)")

#: An AI CPU task shorter than this is not worth moving (msprof-analyze advisor
#: aicpu_checker.py ``_MIN_TASK_DURATION = 20`` us).
AICPU_MIN_TASK_US = 20.0
#: Data types AI Core operators take (msprof-analyze rules/en/aicpu_rules.yaml, DataTypeChecker
#: for CANN 8.0.RC1 / 7.0.0, op_type __ALL__); an AI CPU op with another type ran there because
#: of it.
AICORE_DTYPES = {"float", "float32", "float16", "dt_bf16", "bf16", "bfloat16", "float64",
                 "double", "bool", "int32", "int64", "int8", "uint8", "int16", "complex64",
                 "complex128"}
#: Op types with a known AI Core replacement (aicpu_rules.yaml ExampleGuideChecker).
AICPU_REPLACEMENTS = {
    "index": "replace tensor indexing (x[idx]) with torch.index_select / gather, which run on AI Core",
    "indexput": "replace index_put / x[mask] = v with torch.masked_fill / scatter, which run on AI Core",
    "indexputv2": "replace index_put / x[mask] = v with torch.masked_fill / scatter, which run on AI Core",
    "nonzero": "avoid nonzero / boolean-mask indexing (data-dependent shape): use masked_fill or torch.where",
    "argmin": "upgrade CANN to 7.0.RC1 or later, where ArgMin runs on AI Core",
}


def _aicpu(ctx):
    a = ctx.karr()
    if not a["has_core"]:
        raise Skip(NO_CORE)
    m = a["core"] == "AI_CPU"
    if not m.any() or a["dur"][m].max() < AICPU_MIN_TASK_US * 1000:
        return None
    ai = ctx.kernel_frame(m)  # only these rows of a large table become pandas
    if ai.empty or ai["dur_ns"].max() < AICPU_MIN_TASK_US * 1000:
        return None
    groups = []
    for op_type, g in ai.groupby(ai["op_type"].fillna("?")):
        dtypes = set()
        for col in ("input_dtypes", "output_dtypes"):
            for v in g[col].dropna():
                dtypes.update(x.strip().lower() for x in str(v).split(";") if x.strip())
        groups.append({"op_type": op_type, "count": len(g),
                       "total_us_per_step": us(ctx.per_step(g["dur_ns"].sum())),
                       "max_us": us(g["dur_ns"].max()),
                       "dtypes": sorted(dtypes),
                       "not_on_ai_core_dtypes": sorted(dtypes - AICORE_DTYPES),
                       "names": sorted(g["name"].dropna().unique().tolist())[:5]})
    groups.sort(key=lambda x: -x["total_us_per_step"])
    total = ctx.per_step(ai["dur_ns"].sum())
    advice = [f"Move these operators to AI Core: {', '.join(g['op_type'] for g in groups[:5])} "
              f"(AI CPU runs them one at a time on the device's CPU)."]
    for g in groups:
        t = g["op_type"].lower()
        if t in AICPU_REPLACEMENTS:
            advice.append(f"{g['op_type']}: {AICPU_REPLACEMENTS[t]}.")
        if "double" in g["dtypes"] or "float64" in g["dtypes"]:
            advice.append(f"{g['op_type']}: inputs are float64; cast them to float32, which AI "
                          f"Core supports.")
        elif g["not_on_ai_core_dtypes"]:
            advice.append(f"{g['op_type']}: data type {', '.join(g['not_on_ai_core_dtypes'])} "
                          f"is not supported on AI Core; convert to one of float16/float32/"
                          f"bf16/int32/int64.")
    share = ctx.share(total)
    top = groups[0]
    return finding(
        RULES[0], [ctx.rank], severity=severity_by_share(share, 1.0, 10.0),
        message=(f"{len(ai)} AI CPU task(s) of {len(groups)} op type(s) take "
                 f"{us(total):.1f} us per step"
                 + (f" ({share:.1f}% of the step)" if share is not None else "")
                 + f"; most: {top['op_type']} ({top['count']} tasks, "
                   f"{top['total_us_per_step']:.1f} us, longest {top['max_us']:.1f} us)."),
        advice=advice,
        evidence={"aicpu_tasks": len(ai), "aicpu_us_per_step": us(total),
                  "longest_task_us": us(ai["dur_ns"].max()), "op_types": groups[:10],
                  "n_steps": ctx.n_steps},
        impact_ns=total, step_ns=ctx.step_ns)


# ------------------------------------------------------------------------ online compilation

#: aclopCompileAndExecute calls per step from which compilation is a problem (msprof-analyze
#: prof_common/constant.py ``MAX_OP_COMPILE_NUM = 20``, used by its OpDispatchAnalyzer).
OP_COMPILE_CALLS = 20
#: ... or from this share of the step spent in aclopCompileAndExecute (ascendprof: 19 calls
#: took 11% of the AlexNet step of the real torch_npu export, under the peer's count).
OP_COMPILE_PCT = 5.0
COMPILE_API = "aclopCompileAndExecute"
COMPILE_ONLY_API = "opCompile"


def _api_totals(ctx, api: str) -> tuple[float, float] | None:
    """(calls, ns) per step of one CANN API: from host events when read, else api_statistic."""
    import pyarrow.compute as pc

    h = ctx.tables.get(S.HOST_EVENTS)
    if h is not None and h.num_rows:
        rows = h.filter(pc.and_(pc.equal(h["source"], "cann"),
                                pc.equal(h["name"], f"AscendCL@{api}")))
        return ctx.per_step(rows.num_rows), ctx.per_step(pc.sum(rows["dur_ns"]).as_py() or 0)
    a = ctx.tables.get(S.API_STATISTIC)
    if a is not None and a.num_rows:
        rows = a.filter(pc.equal(a["api_name"], api))
        return (ctx.per_step(pc.sum(rows["count"]).as_py() or 0),
                ctx.per_step(pc.sum(rows["total_ns"]).as_py() or 0))
    return None


def _op_compile(ctx):
    got = _api_totals(ctx, COMPILE_API)
    if got is None:
        raise Skip("no CANN API data")
    calls, ns = got
    share = ctx.share(ns)
    if calls < OP_COMPILE_CALLS and (share is None or share < OP_COMPILE_PCT):
        return None
    compile_calls, compile_ns = _api_totals(ctx, COMPILE_ONLY_API) or (0.0, 0.0)
    dyn_pct, trans = None, ctx.rows_frame(S.KERNELS, np.zeros(0, np.int64), ("dur_ns",))
    if ctx.has(S.KERNELS):  # counted on the distinct texts, not a text per kernel
        values, codes = filled_codes(ctx.column(S.KERNELS, "op_state"))
        low = np.array([v.lower() for v in values], dtype=object)  # as pandas' str.lower
        n = np.bincount(codes, minlength=len(values))
        dyn, static = int(n[low == "dynamic"].sum()), int(n[low == "static"].sum())
        dyn_pct = round(100.0 * (dyn / (dyn + static)), 1) if dyn + static else None
        values, codes = filled_codes(ctx.column(S.KERNELS, "op_type"))
        trans = ctx.rows_frame(S.KERNELS, np.flatnonzero((values == "TransData")[codes]),
                               ("dur_ns",))
    evidence = {"aclopCompileAndExecute_calls_per_step": round(calls, 2),
                "aclopCompileAndExecute_us_per_step": us(ns),
                "opCompile_calls_per_step": round(compile_calls, 2),
                "opCompile_us_per_step": us(compile_ns),
                "dynamic_op_state_pct": dyn_pct, "n_steps": ctx.n_steps,
                "transdata_kernels_per_step": round(ctx.per_step(len(trans)), 1),
                "transdata_us_per_step": us(ctx.per_step(trans["dur_ns"].sum())) if len(trans)
                else 0.0}
    trans_note = (f"; {evidence['transdata_kernels_per_step']:.0f} TransData kernels per step "
                  f"({evidence['transdata_us_per_step']:.0f} us) convert to internal formats"
                  if len(trans) else "")
    return finding(
        RULES[1], [ctx.rank], severity=severity_by_share(share, 0.0, 10.0),
        message=(f"{calls:.0f} operator call(s) per step take the online-compiled aclop path "
                 f"(aclopCompileAndExecute: compile or reuse, then launch), {us(ns):.0f} us of "
                 f"host time per step"
                 + (f" ({share:.1f}% of the step)" if share is not None else "")
                 + f", of which opCompile {us(compile_ns):.0f} us{trans_note}."),
        advice=["Turn off online compilation (binary kernels instead): at the start of the "
                "script `torch_npu.npu.set_compile_mode(jit_compile=False)` and "
                "`torch_npu.npu.config.allow_internal_format = False`.",
                "If input shapes change from step to step, pad or bucket them to a few fixed "
                "shapes; set HOST_CACHE_CAPACITY (e.g. 20) to cache the executors of recurring "
                "shapes."],
        evidence=evidence, impact_ns=ns, step_ns=ctx.step_ns)


# -------------------------------------------------------------------------------- Block Dim

#: Operator-efficiency findings (Block Dim, under-used pipes) are warnings from this share of the
#: step, critical from 10 %: a compute inefficiency matters in proportion to the step it can
#: shorten (ascendprof).
STEP_WARNING_PCT = 2.0

#: Only operators whose cores left idle add up to this share of Computing are worth reporting
#: (ascendprof: msprof-analyze's block_dim_checker lists every op whose Block Dim is not a
#: multiple of the core count, however short).
BLOCK_DIM_IDLE_PCT = 5.0
BLOCK_DIM_TOP = 10


def core_counts(a: dict) -> tuple[int | None, int | None]:
    """(AI Core count, vector core count) of the chip, inferred from the kernels (the arrays of
    Context.karr).

    AI Core: the largest Block Dim of AI_CORE / MIX_AIC tasks (cube kernels tile to the core
    count: 24 on Ascend 910B1-B2, 20 on 910B3-B4). Vector cores: twice that (910B pairs two
    vector cores with each cube core); without cube tasks, the most common Block Dim of the
    AI_VECTOR_CORE tasks (vector kernels may launch more blocks than cores, so not the largest).
    None when not inferable."""
    bd = a["block"]
    cube = np.isin(a["core"], ["AI_CORE", "MIX_AIC"]) & ~np.isnan(bd)
    if cube.any() and bd[cube].max() >= 2:
        aic = int(bd[cube].max())
        return aic, 2 * aic
    v = bd[(a["core"] == "AI_VECTOR_CORE") & ~np.isnan(bd)]
    v = v[v >= 2]
    if not len(v):
        return None, None
    vals, counts = np.unique(v, return_counts=True)
    return None, int(vals[counts == counts.max()].max())


def _block_dim(ctx):
    a = ctx.karr()
    if not a["has_core"]:
        raise Skip(NO_CORE)
    bd = a["block"]
    if np.isnan(bd).all():
        raise Skip("kernels carry no Block Dim")
    aic, aiv = core_counts(a)
    cores = np.full(len(bd), np.nan)
    if aic:
        cores[a["core"] == "AI_CORE"] = aic
    if aiv:
        cores[a["core"] == "AI_VECTOR_CORE"] = aiv
    ok = ~np.isnan(cores) & ~np.isnan(bd) & (bd > 0)
    if not ok.any():
        raise Skip("no AI_CORE / AI_VECTOR_CORE task with a Block Dim")
    slots = np.where(ok, np.ceil(np.where(ok, bd, 1) / np.where(ok, cores, 1)) * cores, 1.0)
    idle_ns = np.where(ok, a["dur"] * (slots - bd) / slots, 0.0)
    comp = ctx.computing_ns
    idle = ctx.per_step(idle_ns.sum())
    pct = 100.0 * idle / comp if comp else None
    if pct is None or pct < BLOCK_DIM_IDLE_PCT:
        return None
    sel = idle_ns > 0
    names, cores_txt, op_types = a["name"][sel], a["core"][sel], a["op_type"][sel]
    (name_v, name_c), (core_v, core_c) = a["codes"]["name"], a["codes"]["core"]
    pairs, inv = group_codes(name_c[sel], core_c[sel])
    # operators in the order of their text "name\x1fcore" (the text built per operator only)
    key = np.char.add(np.char.add(name_v[pairs[:, 0]].astype(str), "\x1f"),
                      core_v[pairs[:, 1]].astype(str))
    uniq, pos = np.unique(key, return_inverse=True)
    codes = np.asarray(pos).reshape(-1)[inv]
    g_idle = np.bincount(codes, weights=idle_ns[sel])
    g_dur = np.bincount(codes, weights=a["dur"][sel])
    g_cnt = np.bincount(codes)
    first = np.full(len(uniq), -1)
    first[codes[::-1]] = np.arange(len(codes))[::-1]
    ops = []
    for gi in np.argsort(-g_idle)[:BLOCK_DIM_TOP]:
        i = first[gi]
        ops.append({"name": names[i], "op_type": op_types[i],
                    "accelerator_core": cores_txt[i],
                    "block_dim": sorted({int(x) for x in bd[sel][codes == gi]})[:5],
                    "cores": int(cores[sel][i]), "count": int(g_cnt[gi]),
                    "total_us_per_step": us(ctx.per_step(g_dur[gi])),
                    "idle_core_us_per_step": us(ctx.per_step(g_idle[gi]))})
    n_ops, n_bad = len(uniq), int(sel.sum())
    ops.sort(key=lambda o: -o["idle_core_us_per_step"])
    top = ops[0]
    return finding(
        RULES[2], [ctx.rank], severity=severity_by_share(ctx.share(idle), STEP_WARNING_PCT, 10.0),
        message=(f"{n_bad} task(s) of {n_ops} operator(s) use a Block Dim that is not a "
                 f"multiple of the cores ({aic} AI Core / {aiv} vector cores inferred); the "
                 f"idle cores amount to {pct:.1f}% of Computing (e.g. {top['name']}: Block Dim "
                 f"{top['block_dim']} on {top['cores']} cores)."),
        advice=["For your own kernels (Ascend C) set the block dim to the core count or a "
                "multiple (GetCoreNumAic/GetCoreNumAiv) and tile the data to fill them.",
                "For built-in operators, small shapes give few blocks: batch or fuse the small "
                "operations, or pick shapes whose split fills the cores."],
        evidence={"ai_core_count_inferred": aic, "vector_core_count_inferred": aiv,
                  "idle_core_time_pct_of_computing": round(pct, 2),
                  "idle_core_us_per_step": us(idle), "operators": ops[:BLOCK_DIM_TOP]},
        impact_ns=idle, step_ns=ctx.step_ns)


# ------------------------------------------------------------------------- PMU pipe ratios

#: Cube ops: aic_mac_ratio >= 0.8 -> cube-bound; aic_mte2_ratio >= 0.95 -> MTE2-bound
#: (msprof-analyze rules/en/aicore_performance.yaml cube_operators).
CUBE_MAC, CUBE_MTE2 = 0.8, 0.95
#: Vector ops: vec+mte2+mte3 >= 0.9 -> bound; mte2 / mte3 / vec >= 0.7 -> bound by it
#: (aicore_performance.yaml vector_operators).
VEC_TOTAL, VEC_ONE = 0.9, 0.7
#: An operator whose largest pipe ratio is below this uses no pipe well (msprof-analyze
#: config.ini ``operator_bound_ratio = 0.8``, OperatorBoundChecker) ...
UNDER_RATIO = 0.8
#: ... when its tasks last at least this long on average (OperatorBoundChecker
#: ``_MIN_TASK_DURATION = 20`` us; shorter ones are launch-latency bound).
UNDER_MIN_US = 20.0
#: A class (memory-bound / under-used) is reported when it holds this share of Computing
#: (ascendprof; the peer lists the top operators regardless of their weight).
PIPE_CLASS_PCT = 10.0
_CUBE = ("AI_CORE", "MIX_AIC")
_VEC = ("AI_VECTOR_CORE", "MIX_AIV")


def classify(core: str, r: dict) -> tuple[str, str]:
    """(class, bound) of one operator group from its time-weighted PMU ratios ``r``:
    class ``compute`` (the compute pipe is saturated: healthy), ``memory`` (bound by data
    movement) or ``under`` (no pipe above :data:`UNDER_RATIO`, or only the scalar pipe: tiling
    and control overhead)."""
    g = lambda k: r.get(k) or 0.0  # noqa: E731
    if core in _CUBE:
        mac, mte2 = g("aic_mac_ratio"), g("aic_mte2_ratio")
        if mac >= CUBE_MAC:
            return "compute", "cube (mac)"
        if mte2 >= CUBE_MTE2:
            return "memory", "mte2"
        best = max((g(c), c) for c in ("aic_mac_ratio", "aic_mte2_ratio", "aic_fixpipe_ratio",
                                        "aic_scalar_ratio", "aic_mte1_ratio"))
        if best[0] >= UNDER_RATIO:  # fixpipe / mte1 saturated: data movement; scalar: control
            return ("under" if "scalar" in best[1] else "memory"), best[1][4:-6]
        return "under", f"max {best[1][4:-6]} {best[0]:.2f}"
    vec, mte2, mte3 = g("aiv_vec_ratio"), g("aiv_mte2_ratio"), g("aiv_mte3_ratio")
    if mte2 >= VEC_ONE:
        return "memory", "mte2"
    if mte3 >= VEC_ONE:
        return "memory", "mte3"
    if vec >= VEC_ONE:
        return "compute", "vec"
    if vec + mte2 + mte3 >= VEC_TOTAL:
        return ("memory" if mte2 + mte3 > vec else "compute"), "vec+mte2+mte3"
    best = max((g(c), c) for c in ("aiv_vec_ratio", "aiv_mte2_ratio", "aiv_mte3_ratio",
                                    "aiv_scalar_ratio"))
    if best[0] >= UNDER_RATIO:  # only the scalar pipe can be left here: control overhead
        return "under", best[1][4:-6]
    return "under", f"max {best[1][4:-6]} {best[0]:.2f}"


_RATIOS = ("aic_mac_ratio", "aic_mte2_ratio", "aic_fixpipe_ratio", "aic_scalar_ratio",
           "aic_mte1_ratio", "aiv_vec_ratio", "aiv_mte2_ratio", "aiv_mte3_ratio",
           "aiv_scalar_ratio")


def headroom(r: dict) -> float:
    """The share of an under-used operator's time it could save by bringing its busiest data
    or compute pipe (not scalar) up to :data:`UNDER_RATIO`: ``1 - busiest / 0.8`` (0 when
    already there). An upper bound in the sense that the busiest pipe then saturates."""
    busiest = max((v for k, v in r.items() if v is not None and "scalar" not in k), default=0.0)
    return max(0.0, 1.0 - busiest / UNDER_RATIO)


def pipe_groups(ctx) -> list[dict]:
    """Compute kernels grouped by (name, Accelerator Core, input shapes) with their time per
    step, mean task time and duration-weighted PMU ratios (tasks without a value left out of
    that ratio's weights), classified by :func:`classify`. Vectorised: group codes of the
    distinct texts, one bincount per ratio, ratios read one column at a time."""
    a = ctx.karr()
    sel = np.isin(a["core"], _CUBE + _VEC)
    if not sel.any():
        return []
    names, accs, shapes = a["name"][sel], a["core"][sel], a["shapes"][sel]
    kc = a["codes"]
    _, codes = group_codes(kc["name"][1][sel], kc["core"][1][sel], kc["shapes"][1][sel])
    n = int(codes.max()) + 1
    dur = a["dur"][sel]
    total = np.bincount(codes, weights=dur, minlength=n)
    count = np.bincount(codes, minlength=n)
    ratios = {}
    for c in _RATIOS:
        v = ctx.kernel_values(S.PMU_PREFIX + c)  # one column at a time
        if v is None:
            continue
        v = v[sel]
        ok = ~np.isnan(v)
        w = np.where(ok, np.maximum(dur, 0), 0.0)
        vv = np.where(ok, v, 0.0)
        den = np.bincount(codes, weights=w, minlength=n)
        num = np.bincount(codes, weights=vv * w, minlength=n)
        cnt = np.bincount(codes, weights=ok.astype(float), minlength=n)
        plain = np.bincount(codes, weights=vv, minlength=n)
        with np.errstate(invalid="ignore", divide="ignore"):
            ratios[c] = np.where(den > 0, num / den, np.where(cnt > 0, plain / cnt, np.nan))
    first = np.full(n, -1)
    first[codes[::-1]] = np.arange(len(codes))[::-1]  # first row of each group
    op_types = a["op_type"][sel]
    out = []
    ratio_lists = {c: x.tolist() for c, x in ratios.items()}  # Python floats (NaN: none)
    for gi in range(n):
        r = {c: (None if x[gi] != x[gi] else x[gi]) for c, x in ratio_lists.items()}
        if all(v is None for v in r.values()):
            continue
        i = first[gi]
        cls, bound = classify(str(accs[i]), r)
        out.append({"name": names[i], "op_type": op_types[i], "accelerator_core": accs[i],
                    "input_shapes": shapes[i], "count": int(count[gi]), "class": cls,
                    "bound": bound, "ns_per_step": ctx.per_step(total[gi]),
                    "headroom": round(headroom(r), 4),
                    "mean_task_us": us(total[gi] / count[gi]),
                    "ratios": {c: round(v, 3) for c, v in r.items() if v is not None}})
    return out


def _pipe_bound(ctx):
    if not any(c.startswith(S.PMU_PREFIX) and c.endswith("_ratio")
               for c in ctx.columns(S.KERNELS)):
        raise Skip("kernels carry no PMU ratios (collect with aic_metrics PipeUtilization, "
                   "Level1 or Level2)")
    groups = pipe_groups(ctx)
    if not groups:
        raise Skip("no AI Core / vector task with PMU ratios")
    comp = ctx.computing_ns or sum(g["ns_per_step"] for g in groups)
    out = []
    classes = {
        "memory": ("limited by data movement (MTE2 loads from HBM / MTE3 stores)",
                   ["Fuse chains of element-wise operators so intermediate tensors stay on chip "
                    "(fused kernels such as npu_rms_norm, npu_swiglu, fused optimizers, or "
                    "graph mode).",
                    "Move less data: bf16/fp16 instead of fp32 where accuracy allows; avoid "
                    "format conversions (TransData) between operators."]),
        "under": (f"using no data or compute pipe at {UNDER_RATIO:g} (or bound by the scalar "
                  f"pipe) while running {UNDER_MIN_US:g} us or more per task",
                  ["Tune the cube operators with AOE (aoe --job_type=2) and check their shapes: "
                   "inner axes that are multiples of 16 elements (fp16/bf16) and 256 bytes map "
                   "onto the cube without padding.",
                   "Check Block Dim (computation.block_dim) and the scalar ratio: a high scalar "
                   "share means tiling/control overhead; larger tiles or fused operators help."]),
    }
    for cls, (what, advice) in classes.items():
        mine = [g for g in groups if g["class"] == cls
                and (cls != "under" or g["mean_task_us"] >= UNDER_MIN_US)]
        ns = sum(g["ns_per_step"] for g in mine)
        pct = 100.0 * ns / comp if comp else 0.0
        if pct < PIPE_CLASS_PCT:
            continue
        mine.sort(key=lambda g: -g["ns_per_step"])
        top = mine[0]
        tops = [{**{k: v for k, v in g.items() if k != "ns_per_step"},
                 "us_per_step": us(g["ns_per_step"])} for g in mine[:10]]
        if cls == "under":  # what reaching 0.8 on the busiest pipe would save
            gain = sum(g["ns_per_step"] * g["headroom"] for g in mine)
            sev = severity_by_share(ctx.share(gain), STEP_WARNING_PCT, 10.0)
            saving = f"; up to {us(gain):.0f} us per step if their busiest pipe reached " \
                     f"{UNDER_RATIO:g}"
        else:  # memory-bound work runs at the bandwidth limit: only fewer bytes help
            gain, sev, saving = ns, "info", ""
        out.append(finding(
            RULES[3], [ctx.rank], key=f"{RULES[3].id}:{cls}", severity=sev,
            message=(f"{pct:.1f}% of Computing ({us(ns):.0f} us per step) is in {len(mine)} "
                     f"operator(s) {what}; largest: {top['name']} ({top['bound']}, "
                     f"{us(top['ns_per_step']):.0f} us per step){saving}."),
            advice=advice,
            evidence={"class": cls, "pct_of_computing": round(pct, 2),
                      "class_us_per_step": us(ns), "operators": tops},
            impact_ns=gain, step_ns=ctx.step_ns))
    return out or None


# --------------------------------------------------------------------------- AI Core clock

#: A drop of this fraction below the reference clock counts (msprof-analyze config.ini
#: ``frequency_threshold = 0.05``, AICoreFreqChecker).
FREQ_DROP = 0.05
#: Report when kernels that ran below it hold this share of Computing (ascendprof).
FREQ_MIN_PCT = 1.0


def _aicore_freq(ctx):
    f = ctx.df(S.AICORE_FREQ).dropna(subset=["ts_ns", "freq_mhz"]).sort_values("ts_ns")
    if f.empty:
        raise Skip("no AI Core frequency sample with a time and a value")
    k = ctx.kernel_frame(np.isin(ctx.karr()["core"], _CUBE + _VEC),
                         ("name", "start_ns", "dur_ns"))
    if k.empty:
        raise Skip("no AI Core / vector task")
    ref = float(f["freq_mhz"].max())
    if ref <= 0:
        raise Skip("AI Core frequency samples are all zero")
    ts = f["ts_ns"].to_numpy()
    fr = f["freq_mhz"].to_numpy()
    starts = k["start_ns"].to_numpy()
    ends = starts + k["dur_ns"].to_numpy()
    # the sample in force at the start, and every sample taken before the end: the lowest
    first = np.searchsorted(ts, starts, side="right") - 1
    last = np.searchsorted(ts, ends, side="left") - 1
    lows = np.empty(len(k))
    for i, (a, b) in enumerate(zip(first, last)):
        a = max(a, 0)
        b = max(b, a)
        lows[i] = fr[a:b + 1].min() if b >= a else fr[a]
    slow = lows < ref * (1 - FREQ_DROP)
    comp = ctx.computing_ns
    ns = ctx.per_step(k["dur_ns"].to_numpy()[slow].sum())
    pct = 100.0 * ns / comp if comp else None
    if not slow.any() or pct is None or pct < FREQ_MIN_PCT:
        return None
    ks = k[slow].assign(low=lows[slow])
    ops = [{"name": n, "count": len(g), "us_per_step": us(ctx.per_step(g["dur_ns"].sum())),
            "min_mhz": float(g["low"].min()), "mean_mhz": round(float(g["low"].mean()), 1)}
           for n, g in ks.groupby(ks["name"].fillna("?"))]
    ops.sort(key=lambda o: -o["us_per_step"])
    return finding(
        RULES[4], [ctx.rank], severity="warning" if pct >= 10 else "info",
        message=(f"{int(slow.sum())} kernel(s), {pct:.1f}% of Computing, ran with the AI Core "
                 f"clock more than {FREQ_DROP:.0%} below {ref:.0f} MHz (lowest "
                 f"{fr.min():.0f} MHz)."),
        advice=["Check the card's temperature and power cap while training (npu-smi info -t "
                "temp / -t power): the clock drops when either limit is reached.",
                "Check the cooling and the power configuration of the server."],
        evidence={"reference_mhz": ref, "lowest_mhz": float(fr.min()), "samples": len(f),
                  "pct_of_computing": round(pct, 2), "operators": ops[:10]},
        impact_ns=ns, step_ns=ctx.step_ns)


RULES = [
    Rule("computation.aicpu", "computation", "AI CPU operators",
         needs=((S.KERNELS,),),
         threshold={"min_task_us": AICPU_MIN_TASK_US, "warning_share_of_step_pct": 1.0,
                    "critical_share_of_step_pct": 10.0},
         source="min_task_us: msprof-analyze advisor aicpu_checker.py (_MIN_TASK_DURATION); "
                "dtypes and replacements: rules/en/aicpu_rules.yaml; severity bands: ascendprof",
         check=_aicpu),
    Rule("computation.op_compile", "computation", "Online operator compilation (dynamic shapes)",
         needs=((S.API_STATISTIC, S.HOST_EVENTS),),
         threshold={"aclopCompileAndExecute_calls_per_step": OP_COMPILE_CALLS,
                    "aclopCompileAndExecute_pct_of_step": OP_COMPILE_PCT,
                    "critical_share_of_step_pct": 10.0},
         source="calls: msprof-analyze prof_common/constant.py MAX_OP_COMPILE_NUM "
                "(OpDispatchAnalyzer); share of step: ascendprof; advice: the peer's "
                "OpDispatch/DynamicShape prompts",
         check=_op_compile),
    Rule("computation.block_dim", "computation", "Block Dim leaves cores idle",
         needs=((S.KERNELS,),),
         threshold={"idle_core_time_pct_of_computing": BLOCK_DIM_IDLE_PCT,
                    "warning_share_of_step_pct": STEP_WARNING_PCT},
         source="rule (Block Dim not a multiple of the core count): msprof-analyze "
                "block_dim_checker.py; the floor on idle core time: ascendprof",
         check=_block_dim),
    Rule("computation.pipe_bound", "computation", "Operators bound by data movement or using "
                                                  "no pipe well (PMU)",
         needs=((S.KERNELS,),),
         threshold={"cube_mac_ratio": CUBE_MAC, "cube_mte2_ratio": CUBE_MTE2,
                    "vector_total_ratio": VEC_TOTAL, "vector_single_ratio": VEC_ONE,
                    "under_used_max_ratio": UNDER_RATIO, "under_used_min_task_us": UNDER_MIN_US,
                    "class_pct_of_computing": PIPE_CLASS_PCT,
                    "warning_share_of_step_pct": STEP_WARNING_PCT},
         source="ratios: msprof-analyze rules/en/aicore_performance.yaml; 0.8 and 20 us: "
                "config.ini operator_bound_ratio and operator_bound_checker.py; class floor: "
                "ascendprof",
         check=_pipe_bound),
    Rule("computation.aicore_freq", "computation", "AI Core frequency drops",
         needs=((S.AICORE_FREQ,), (S.KERNELS,)),
         threshold={"drop_fraction": FREQ_DROP, "min_pct_of_computing": FREQ_MIN_PCT},
         source="drop: msprof-analyze config.ini frequency_threshold (AICoreFreqChecker); "
                "reference = highest sample of the collection (the peer uses info.json "
                "aic_frequency, absent from torch_npu exports); floor: ascendprof",
         check=_aicore_freq),
]
