"""Operator efficiency: FLOPs and bytes of the matrix and attention kernels from their shapes,
the achieved TFLOP/s and GB/s, their share of the chip's peak, the roofline bound and the MFU of
each step. Input: KERNELS ``op_type``, ``input_shapes``, ``input_dtypes``, ``output_shapes`` and
``dur_ns`` (kernel_details.csv; db COMPUTE_TASK_INFO with TASK times; spec §A.2, §B.1).

FLOPs per call: **MatMul / BatchMatMul** (not GroupedMatmul) 2 · batch · M · N · K from the output
``[batch…, M, N]`` and the first input ``[batch…, M, K]`` or ``[batch…, K, M]``; fractal (NZ)
shapes ``[a, b, 16, 16]``: K = √(|A|·|B| / |C|), 2 · |C| · K. **GroupedMatmul** 2 · tokens · K ·
N (x ``[tokens, K]``, output ``[tokens, N]``). **FlashAttention** forward 4 · B · N · Sq · Skv · D
(B, N, Sq from the softmax statistics ``[B, N, Sq, 8]``, D = |q| / (B·N·Sq), Skv from k in the
layout q reveals: SBH, BSH, BNSD, BSND; TND is not parsed), halved with a 2048×2048 mask (the
compressed causal mask of sparse modes 2–4); backward 2.5 × forward (QKᵀ recomputed, then dV,
dP, dQ, dK: the FlashAttention-2 convention). Bytes: every input and output tensor once, a lower
bound of the traffic. Peak: :mod:`ascendprof.analyze.hardware` for the first input's data type;
compute-bound when FLOPs / bytes reaches the ridge point, else memory-bound. MFU of a step: the
FLOPs of these kernels over the step's device window × peak (a lower bound). Sources and the
peak table: docs/analyses.md, "Operator efficiency".
"""

from __future__ import annotations

import math

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from ascendprof.analyze import hardware as hw
from ascendprof.analyze.codes import distinct_mask
from ascendprof.model import schemas as S

OP_EFFICIENCY = "op_efficiency"
STEP_WINDOWS = "op_efficiency_steps"

PARTIAL_SCHEMA = pa.schema([
    ("rank", pa.int32()), ("step", pa.int32()), ("family", pa.string()),
    ("op_type", pa.string()), ("input_shapes", pa.string()), ("dtype", pa.string()),
    ("calls", pa.int64()), ("dur_ns", pa.int64()), ("flops", pa.float64()),
    ("bytes", pa.float64()), ("chip", pa.string())])
WINDOW_SCHEMA = pa.schema([("rank", pa.int32()), ("step", pa.int32()),
                           ("window_ns", pa.int64()), ("chip", pa.string())])

COLUMNS = ["Rank", "Step", "Family", "Op Type", "Input Shapes", "Data Type", "Calls",
           "Total Duration(us)", "Avg Duration(us)", "GFLOPs per Call", "MB per Call",
           "Achieved TFLOP/s", "Achieved GB/s", "Peak TFLOP/s", "Peak GB/s",
           "Compute Share(%)", "Bandwidth Share(%)", "Arithmetic Intensity(FLOP/B)",
           "Ridge Point(FLOP/B)", "Bound", "Chip"]
STEP_COLUMNS = ["Rank", "Step", "Step Window(us)", "Counted Kernels(us)", "TFLOPs Counted",
                "Achieved TFLOP/s", "Peak TFLOP/s", "MFU(%)", "Chip"]


# ----------------------------------------------------------------------------- shapes

def parse_shapes(text) -> list[list[int] | None]:
    """``"4096,1,2048;4096,1,1024;;"`` -> ``[[4096, 1, 2048], [4096, 1, 1024], None, None]``
    (an empty or unparsable tensor is None)."""
    if text is None or (isinstance(text, float) and math.isnan(text)):
        return []
    out: list[list[int] | None] = []
    for part in str(text).strip().strip('"').split(";"):
        part = part.strip().strip('"')
        if not part:
            out.append(None)
            continue
        try:
            out.append([int(x) for x in part.split(",") if x.strip()])
        except ValueError:
            out.append(None)
    return out


def _n(shape) -> int:
    return math.prod(shape) if shape else 0


def family_of(op_type) -> str | None:
    """``MatMul``, ``BatchMatMul``, ``GroupedMatmul``, ``FlashAttention`` or
    ``FlashAttentionGrad`` for the op types this analysis counts, else None."""
    t = str(op_type or "").lower()
    if "groupedmatmul" in t:
        return "GroupedMatmul"
    if "flashattention" in t:
        return "FlashAttentionGrad" if "grad" in t else "FlashAttention"
    if "matmul" in t:
        return "BatchMatMul" if "batch" in t else "MatMul"
    return None


def _is_nz(shape) -> bool:
    return shape is not None and len(shape) == 4 and shape[-2:] == [16, 16]


def matmul_flops(ins, outs) -> float | None:
    """FLOPs of one MatMul / BatchMatMul call (module doc); None when the shapes do not fit."""
    if len(ins) < 2 or not outs or not ins[0] or not ins[1] or not outs[0]:
        return None
    a, b, c = ins[0], ins[1], outs[0]
    if _is_nz(a) and _is_nz(b) and _is_nz(c):
        k = math.sqrt(_n(a) * _n(b) / _n(c))
        return 2.0 * _n(c) * round(k)
    if len(c) < 2 or len(a) < 2:
        return None
    m, n = c[-2], c[-1]
    batch = _n(c[:-2]) if len(c) > 2 else 1
    if a[-2] == m:
        k = a[-1]
    elif a[-1] == m:
        k = a[-2]
    else:
        return None
    if k not in b[-2:]:
        return None
    return 2.0 * batch * m * n * k


def grouped_matmul_flops(ins, outs) -> float | None:
    """FLOPs of one GroupedMatmul call: 2 · tokens · K · N (x ``[tokens, K]``, output
    ``[tokens, N]``); None when the shapes do not fit."""
    if not ins or not ins[0] or not outs or not outs[0]:
        return None
    x, y = ins[0], outs[0]
    if len(x) < 2 or len(y) < 2 or _n(x[:-1]) != _n(y[:-1]):
        return None
    return 2.0 * _n(x[:-1]) * x[-1] * y[-1]


def attention_dims(ins, outs, grad: bool) -> tuple | None:
    """(B, N, Sq, Skv, D, causal) of one FlashAttention call, None when the layout is not
    recognised (module doc)."""
    stats = [s for s in ((ins[3:] if grad else outs) or []) if s and len(s) == 4 and s[-1] == 8]
    if len(ins) < 2 or not ins[0] or not ins[1] or not stats:
        return None
    bsz, heads, sq = stats[0][0], stats[0][1], stats[0][2]
    q, k = ins[0], ins[1]
    if bsz * heads * sq == 0 or _n(q) % (bsz * heads * sq):
        return None
    d = _n(q) // (bsz * heads * sq)
    if len(q) == 3 and q[0] == sq and q[1] == bsz:        # SBH
        skv = k[0]
    elif len(q) == 3 and q[0] == bsz and q[1] == sq:      # BSH
        skv = k[1]
    elif len(q) == 4 and q[1] == heads and q[2] == sq:    # BNSD
        skv = k[2]
    elif len(q) == 4 and q[1] == sq and q[2] == heads:    # BSND
        skv = k[1]
    else:
        return None
    causal = any(s == [2048, 2048] for s in ins[2:] if s)
    return bsz, heads, sq, skv, d, causal


def attention_flops(ins, outs, grad: bool) -> float | None:
    """FLOPs of one FlashAttention forward / backward call (module doc)."""
    dims = attention_dims(ins, outs, grad)
    if dims is None:
        return None
    bsz, heads, sq, skv, d, causal = dims
    f = 4.0 * bsz * heads * sq * skv * d * (0.5 if causal else 1.0)
    return f * 2.5 if grad else f


def flops_of(family: str, in_shapes, out_shapes) -> float | None:
    """FLOPs of one call of ``family`` from the shape texts (None when not derivable)."""
    ins, outs = parse_shapes(in_shapes), parse_shapes(out_shapes)
    if family in ("MatMul", "BatchMatMul"):
        return matmul_flops(ins, outs)
    if family == "GroupedMatmul":
        return grouped_matmul_flops(ins, outs)
    if family in ("FlashAttention", "FlashAttentionGrad"):
        return attention_flops(ins, outs, family == "FlashAttentionGrad")
    return None


def bytes_of(in_shapes, in_types, out_shapes, out_types) -> float | None:
    """Bytes of every input and output tensor once (None when a non-empty tensor's data type is
    unknown)."""
    total = 0
    for shapes, types in ((in_shapes, in_types), (out_shapes, out_types)):
        sh = parse_shapes(shapes)
        ty = str(types or "").strip().strip('"').split(";")
        for i, s in enumerate(sh):
            if not s:
                continue
            size = hw.dtype_bytes(ty[i]) if i < len(ty) else None
            if size is None:
                return None
            total += _n(s) * size
    return float(total)


# ----------------------------------------------------------------------------- per rank

def rank_partial(tables: dict, rank: int, meta: dict | None = None) -> dict[str, pa.Table]:
    """{OP_EFFICIENCY: per (step, op type, input shapes, data type): calls, device ns, FLOPs
    and bytes per call, assumed chip; STEP_WINDOWS: per step the device window (STEPS, else the
    span of the step's kernels)} when the rank has kernels of the four families."""
    k = tables.get(S.KERNELS)
    if k is None or k.num_rows == 0:
        return {}
    def ours(types):
        low = pc.utf8_lower(pc.fill_null(types, ""))
        return pc.or_(pc.match_substring(low, "matmul"), pc.match_substring(low, "flashattention"))
    k = k.filter(pa.array(distinct_mask(ours, k["op_type"])))  # judged per distinct op type
    if k.num_rows == 0:
        return {}
    bw = tables.get(S.COMM_BANDWIDTH)
    # the distinct transports that carried data (chip_of looks for one): the two columns, not
    # the whole table, filtered, and no Python text per row (10^6 ops: ~4M bandwidth rows)
    used = () if bw is None or bw.num_rows == 0 else pc.unique(bw.select(
        ["size_mb", "transport"]).filter(pc.greater(pc.fill_null(bw["size_mb"], 0.0), 0.0))[
        "transport"]).to_pylist()
    chip = hw.chip_of(used)
    keys = ["_step", "op_type", "input_shapes", "input_dtypes", "output_shapes", "output_dtypes"]
    # calls and time per key summed in Arrow: pandas grouped a frame of every kernel (millions
    # on a large rank) only to count and sum; the keys come out of pandas' groupby as before
    # grouped on the texts' dictionary codes (Arrow's grouper copies every key text per row)
    codes, texts = {"_step": pc.cast(pc.fill_null(k["step"], -1), pa.int64())}, {}
    for c in keys[1:]:
        col = k[c]
        if pa.types.is_dictionary(col.type):  # (a large rank's columns read from its file)
            col = pa.table({c: col}).unify_dictionaries()[c]
            enc = col.chunks
        else:
            enc = pc.dictionary_encode(col).chunks  # one dictionary shared by the chunks
        texts[c] = enc[0].dictionary if enc else pa.array([], pa.string())
        codes[c] = pa.chunked_array([e.indices.cast(pa.int32()) for e in enc], pa.int32())
    g = pa.table({**codes, "_dur": pc.fill_null(k["dur_ns"], 0)}).group_by(
        keys, use_threads=False).aggregate([("_dur", "sum"),
                                            ("_dur", "count", pc.CountOptions(mode="all"))])
    del codes
    # one row per group, as Python values (pandas' groupby over the few groups of a rank was
    # most of this function's time), in the order pandas' sorted groupby gave: by step, then
    # each text with null last; a null text is NaN as pandas handed it to the parsers
    nan = float("nan")
    cols = [g["_step"].to_pylist()] + [
        [nan if v is None else v for v in texts[c].take(g[c]).to_pylist()] for c in keys[1:]]
    cols += [g["_dur_count"].to_pylist(), g["_dur_sum"].to_pylist()]
    del g

    def order(r):
        return (r[0], *((v is nan, "" if v is nan else v) for v in r[1:6]))

    rows = []
    for step, op_type, ins, in_t, outs, out_t, calls, dur in sorted(zip(*cols), key=order):
        fam = family_of(op_type)
        if fam is None:
            continue
        first_t = str(in_t or "").strip().strip('"').split(";")[0]
        rows.append({"rank": rank, "step": None if step < 0 else int(step), "family": fam,
                     "op_type": op_type, "input_shapes": None if ins is nan else str(ins),
                     "dtype": hw.dtype_name(first_t) or None,
                     "calls": int(calls), "dur_ns": int(dur),
                     "flops": flops_of(fam, ins, outs),
                     "bytes": bytes_of(ins, in_t, outs, out_t), "chip": chip})
    out = {OP_EFFICIENCY: pa.Table.from_pylist(rows, schema=PARTIAL_SCHEMA)}
    out[STEP_WINDOWS] = _windows(tables, rank, chip)
    return out


def _windows(tables: dict, rank: int, chip: str) -> pa.Table:
    steps = tables.get(S.STEPS)
    rows = []
    if steps is not None and steps.num_rows:
        for r in steps.to_pylist():
            if r["start_ns"] is not None and r["end_ns"] is not None:
                rows.append({"rank": rank, "step": r["step"],
                             "window_ns": int(r["end_ns"] - r["start_ns"]), "chip": chip})
    else:
        k = tables[S.KERNELS].select(["step", "start_ns", "dur_ns"]).to_pandas()
        k["end"] = k["start_ns"] + k["dur_ns"].fillna(0)
        for step, g in k.groupby(k["step"].fillna(-1).astype(int)):
            rows.append({"rank": rank, "step": None if step < 0 else int(step),
                         "window_ns": int(g["end"].max() - g["start_ns"].min()), "chip": chip})
    return pa.Table.from_pylist(rows, schema=WINDOW_SCHEMA)


# ----------------------------------------------------------------------------- cluster

def build(part: pa.Table | None, windows: pa.Table | None) -> dict[str, pd.DataFrame]:
    """{"op_efficiency.csv": one row per rank, step, op type, shapes and data type (COLUMNS),
    slowest total first within a rank; "op_efficiency_steps.csv": MFU per rank and step}."""
    if part is None or part.num_rows == 0:
        return {}
    d = part.to_pandas()
    rows = []
    for r in d.itertuples(index=False):
        chip = hw.CHIPS.get(r.chip, hw.CHIPS[hw.DEFAULT_CHIP])
        cls = hw.peak_class(r.dtype)
        peak = chip.tflops.get(cls) if cls else None
        avg_s = r.dur_ns / r.calls / 1e9 if r.calls and r.dur_ns else None
        fl = None if pd.isna(r.flops) else float(r.flops)
        by = None if pd.isna(r.bytes) else float(r.bytes)
        tfl = fl / avg_s / 1e12 if fl is not None and avg_s else None
        gbs = by / avg_s / 1e9 if by is not None and avg_s else None
        ai = fl / by if fl is not None and by else None
        ridge = peak * 1e12 / (chip.hbm_gbps * 1e9) if peak else None
        bound = None if ai is None or ridge is None else (
            "compute" if ai >= ridge else "memory")
        rows.append([int(r.rank), None if pd.isna(r.step) else int(r.step), r.family,
                     r.op_type, r.input_shapes, r.dtype, int(r.calls),
                     round(r.dur_ns / 1e3, 3), round(r.dur_ns / r.calls / 1e3, 3),
                     None if fl is None else round(fl / 1e9, 4),
                     None if by is None else round(by / 1e6, 4),
                     None if tfl is None else round(tfl, 3),
                     None if gbs is None else round(gbs, 3), peak, chip.hbm_gbps,
                     None if tfl is None or not peak else round(100 * tfl / peak, 2),
                     None if gbs is None else round(100 * gbs / chip.hbm_gbps, 2),
                     None if ai is None else round(ai, 2),
                     None if ridge is None else round(ridge, 2), bound, chip.name])
    out = pd.DataFrame(rows, columns=COLUMNS)
    out["Step"] = out["Step"].astype("Int64")
    out = out.sort_values(["Rank", "Step", "Total Duration(us)"],
                          ascending=[True, True, False], kind="stable").reset_index(drop=True)
    return {"op_efficiency.csv": out, "op_efficiency_steps.csv": _mfu(d, windows)}


def _mfu(d: pd.DataFrame, windows: pa.Table | None) -> pd.DataFrame:
    if windows is None or windows.num_rows == 0:
        return pd.DataFrame(columns=STEP_COLUMNS)
    w = windows.to_pandas()
    d = d.assign(_fl=d["flops"].fillna(0) * d["calls"])
    rows = []
    for r in w.itertuples(index=False):
        g = d[(d["rank"] == r.rank) & ((d["step"] == r.step) if not pd.isna(r.step)
                                       else d["step"].isna())]
        chip = hw.CHIPS.get(r.chip, hw.CHIPS[hw.DEFAULT_CHIP])
        # the peak of the data type that carries most of the counted FLOPs
        by_cls = g.groupby(g["dtype"].map(hw.peak_class))["_fl"].sum()
        cls = by_cls.idxmax() if len(by_cls) else None
        peak = chip.tflops.get(cls) if cls else None
        fl = float(g["_fl"].sum())
        secs = r.window_ns / 1e9 if r.window_ns else None
        ach = fl / secs / 1e12 if secs else None
        rows.append([int(r.rank), None if pd.isna(r.step) else int(r.step),
                     round(r.window_ns / 1e3, 3), round(g["dur_ns"].sum() / 1e3, 3),
                     round(fl / 1e12, 4), None if ach is None else round(ach, 3), peak,
                     None if ach is None or not peak else round(100 * ach / peak, 2),
                     chip.name])
    out = pd.DataFrame(rows, columns=STEP_COLUMNS)
    out["Step"] = out["Step"].astype("Int64")
    return out
