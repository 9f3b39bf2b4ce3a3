"""Data preparation: how long each step waits for its data, which stage carries the batches too
slowly (the host pipeline of dataset operators, the host to device transfer, the device read) and
which dataset operator is the bottleneck (seeds 000, 002, 004; the queue rules and thresholds of
MindInsight's minddata analyser and MindSpore's MinddataProfilingAnalyzer: :data:`HOST_EMPTY_PCT`,
:data:`DEVICE_READ_PCT`, :data:`IN_OUT_DIFF_PCT`, :data:`LEAF_LOW_PCT`). The wait per step is the
data loader spans (TIMELINE track ``dataloader``), else ``Preparing`` (STEP_TRACE), or the legacy
iteration gap (ITERATIONS). Inputs, rules and columns: docs/analyses.md, "Data preparation".

:func:`rank_data_prep` runs per rank (tables in, two small tables out), :func:`build` makes
data_preparation.csv and dataset_pipeline.csv, :func:`verdicts` the ``data`` verdict. Nothing here
reads files.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from ascendprof.model import schemas as S

DATA_PREP = "data_prep"
DATASET_OPS_FLAGGED = "dataset_ops_flagged"

#: host queue empty in more than this % of batches: the host pipeline is the bottleneck
#: (MindInsight DEVICE_QUEUE_EMPTY_WARNING_THRESHOLD 0.7)
HOST_EMPTY_PCT = 70.0
#: GetNext taking this % of the step while the device queue has data: device read
DEVICE_READ_PCT = 10.0
#: input minus output queue usage (points) that flags an operator (MindSpore 50)
IN_OUT_DIFF_PCT = 50.0
#: a source operator's output queue usage below this flags it (MindSpore 50)
LEAF_LOW_PCT = 50.0
#: data-bound: the measured data wait (data loader spans or iteration gap) >= this % of the step
DATA_BOUND_PCT = 10.0
#: data-bound when only Preparing is known (it also holds host launch time): >= this % of the step
PREPARING_BOUND_PCT = 25.0

PREP_COLUMNS = ["Rank", "Steps", "Step(ms)", "Data Wait(ms)", "Data Wait(%)", "Wait Source",
                "Preparing(ms)", "Dataloader(ms)", "Host Queue Batches", "Host Queue Empty(%)",
                "Host Queue Full(%)", "Device Queue Batches", "Device Queue Empty(%)",
                "Pipeline Time(ms)", "Push Time(ms)", "Batch Time(ms)", "GetNext Time(ms)",
                "Bottleneck Stage", "Bottleneck Operator", "Evidence"]
OPS_COLUMNS = ["Rank", "Op Id", "Op Type", "Workers", "Parent Id", "Children", "Queue Capacity",
               "Queue Avg Size", "Queue Usage(%)", "Queue Empty(%)", "Input Queue Usage(%)",
               "CPU(%)", "CPU per Worker(%)", "Bottleneck", "Reason"]

_PREP_SCHEMA = pa.schema([
    ("rank", pa.int32()), ("steps", pa.int64()), ("step_ms", pa.float64()),
    ("wait_ms", pa.float64()), ("wait_pct", pa.float64()), ("wait_source", pa.string()),
    ("preparing_ms", pa.float64()), ("loader_ms", pa.float64()),
    ("host_batches", pa.int64()), ("host_empty_pct", pa.float64()),
    ("host_full_pct", pa.float64()), ("device_batches", pa.int64()),
    ("device_empty_pct", pa.float64()), ("pipeline_ms", pa.float64()), ("push_ms", pa.float64()),
    ("batch_ms", pa.float64()), ("getnext_ms", pa.float64()), ("stage", pa.string()),
    ("operator", pa.string()), ("evidence", pa.string()), ("measured", pa.bool_())])

STAGE_HOST = "host pipeline"
STAGE_TRANSFER = "host to device transfer"
STAGE_DEVICE = "device read"
STAGE_NONE = "none"


# ---------------------------------------------------------------------------------------------
# the dataset pipeline


def flag_operators(ops: pd.DataFrame) -> pd.DataFrame:
    """DATASET_OPS rows of one rank with ``input_usage_pct`` (the lowest usage of its
    children's output queues), ``bottleneck`` (bool) and ``reason`` (module doc)."""
    ops = ops.copy()
    usage = dict(zip(ops["op_id"], ops["queue_usage_pct"]))
    kids = {i: [int(c) for c in str(ch).split(",") if c.strip()] if pd.notna(ch) else []
            for i, ch in zip(ops["op_id"], ops["children"])}
    inputs = []
    for i in ops["op_id"]:
        vals = [usage[c] for c in kids[i] if c in usage and pd.notna(usage[c])]
        inputs.append(min(vals) if vals else np.nan)
    ops["input_usage_pct"] = inputs
    ops["bottleneck"] = False
    ops["reason"] = ""
    diff = ops["input_usage_pct"] - ops["queue_usage_pct"]
    hit = diff >= IN_OUT_DIFF_PCT
    for idx in ops.index[hit.fillna(False)]:
        r = ops.loc[idx]
        ops.loc[idx, "reason"] = (f"input queue {r['input_usage_pct']:.1f}% used, its own output "
                                  f"queue {r['queue_usage_pct']:.1f}%: it consumes slower than "
                                  f"its input is produced")
    if hit.any():
        worst = diff[hit].idxmax()
        ops.loc[worst, "bottleneck"] = True
    else:
        is_leaf = np.array([not kids[i] for i in ops["op_id"]], bool)
        leaves = ops[is_leaf & ops["queue_usage_pct"].notna().to_numpy()]
        low = leaves[leaves["queue_usage_pct"] < LEAF_LOW_PCT]
        if not low.empty:
            idx = low["queue_usage_pct"].idxmin()
            ops.loc[idx, "bottleneck"] = True
            ops.loc[idx, "reason"] = (f"source operator whose output queue is only "
                                      f"{ops.loc[idx, 'queue_usage_pct']:.1f}% used: the "
                                      f"operators after it wait for its data")
    return ops


def _op_name(r) -> str:
    return f"{r['op_type']}(id={int(r['op_id'])})"


# ---------------------------------------------------------------------------------------------
# per rank


def _mean(values) -> float | None:
    v = [x for x in values if x is not None and not pd.isna(x)]
    return float(np.mean(v)) if v else None


def _mean_of(a: np.ndarray) -> float | None:
    return float(np.mean(a)) if len(a) else None


def _ints(col) -> tuple[np.ndarray, np.ndarray]:
    """(values with nulls as 0, validity) of an int ns column, as int64 arrays."""
    valid = col.is_valid().to_numpy(zero_copy_only=False)
    return pc.fill_null(col, 0).to_numpy(zero_copy_only=False).astype(np.int64), valid


def _step_waits(tables, rank):
    """(steps, step_ms, wait_ms, source, preparing_ms, loader_ms, measured)."""
    its = S.of_rank(tables.get(S.ITERATIONS), rank)
    st = S.of_rank(tables.get(S.STEP_TRACE), rank)
    tl = S.of_rank(tables.get(S.TIMELINE), rank)
    loader: dict = {}
    if tl is not None:
        lt = tl.filter(pc.equal(pc.fill_null(tl["track"], ""), "dataloader"))
        for step, dur in zip(lt["step"].to_pylist(), lt["dur_ns"].to_pylist()):
            if step is not None and dur is not None:
                loader[step] = loader.get(step, 0) + dur
    if st is not None and st["preparing_ns"].null_count < st.num_rows:
        # on columns: 10^6 steps are ~1 GB as row dicts
        t = st.filter(pc.is_valid(st["preparing_ns"]))
        prep_ns = _ints(t["preparing_ns"])[0]
        stage, _ = _ints(t["stage_ns"])
        parts, known = np.zeros(t.num_rows, np.int64), stage != 0
        for c in ("computing_ns", "comm_not_overlapped_ns", "free_ns"):
            v, valid = _ints(t[c])
            parts += v
            known |= valid
        busy = np.where(stage != 0, stage, parts)  # Stage, else the sum of the known parts
        prep = _mean_of(prep_ns / 1e6)
        total = _mean_of((busy + prep_ns)[known] / 1e6)
        got = [loader[s] / 1e6 for s in t["step"].to_pylist() if s in loader] if loader else []
        if got:
            loader_ms = _mean(got)
            return t.num_rows, total, loader_ms, "dataloader spans", prep, loader_ms, True
        return t.num_rows, total, prep, "Preparing", prep, None, False
    if its is not None:
        rows = [r for r in its.select(["iteration_interval_ns", "fp_bp_ns", "tail_ns"])
                .to_pylist() if r["iteration_interval_ns"] is not None]
        if rows:
            total = [sum(v for v in r.values() if v is not None) / 1e6 for r in rows]
            return (len(rows), _mean(total), _mean([r["iteration_interval_ns"] / 1e6
                                                    for r in rows]),
                    "iteration gap", None, None, True)
    if loader:
        ms = [v / 1e6 for v in loader.values()]
        return len(ms), None, _mean(ms), "dataloader spans", None, _mean(ms), True
    return 0, None, None, "", None, None, False


def _queues(q: pd.DataFrame | None):
    """Queue statistics of one rank's DATASET_QUEUE rows (first batch left out when there are
    more, as MindSpore's analyser does)."""
    res = dict(host_batches=None, host_empty_pct=None, host_full_pct=None, device_batches=None,
               device_empty_pct=None, pipeline_ms=None, push_ms=None, batch_ms=None,
               getnext_ms=None, device_waits=None)
    if q is None or q.empty:
        return res

    def later(d):
        return d[d["step"] >= 2] if (d["step"] >= 2).any() else d

    host = later(q[(q["queue"] == "host") & (q["kind"] == "size")])
    if not host.empty:
        res["host_batches"] = len(host)
        res["host_empty_pct"] = 100.0 * (host["size"] == 0).mean()
        res["host_full_pct"] = 100.0 * (host["size"] == host["capacity"]).mean()
    for kind, key in (("pipeline_time", "pipeline_ms"), ("push_time", "push_ms"),
                      ("batch_time", "batch_ms")):
        t = later(q[(q["queue"] == "host") & (q["kind"] == kind)])
        if not t.empty:
            res[key] = float(t["value_ms"].mean())
    dev = q[(q["queue"] == "device") & (q["kind"] == "size")].sort_values("step")
    if not dev.empty:
        rest = dev.iloc[1:] if len(dev) > 1 else dev
        res["device_batches"] = len(dev)
        res["device_empty_pct"] = 100.0 * (rest["size"] == 0).mean()
        res["device_waits"] = int((rest["size"] == 0).sum())
        dur = (dev["end_ns"] - dev["start_ns"]).dropna()
        if not dur.empty:
            res["getnext_ms"] = float(dur.mean() / 1e6)
    return res


def bottleneck_stage(qs: dict, step_ms: float | None) -> tuple[str, str]:
    """(stage, evidence) from :func:`_queues` statistics (module doc); ("", "") without queue
    data."""
    host_e = qs.get("host_empty_pct")
    if qs.get("device_batches"):
        waits = qs["device_waits"] or 0
        if waits:
            if host_e is not None and host_e > HOST_EMPTY_PCT:
                return STAGE_HOST, (f"the device queue was empty at {waits} GetNext(s) and the "
                                    f"host queue empty in {host_e:.0f}% of the batches")
            if host_e is not None:
                return STAGE_TRANSFER, (f"the device queue was empty at {waits} GetNext(s) while "
                                        f"the host queue held batches ({host_e:.0f}% empty)")
            return STAGE_HOST, (f"the device queue was empty at {waits} GetNext(s) (no host "
                                f"queue record to tell pipeline from transfer)")
        gn = qs.get("getnext_ms")
        if gn is not None and step_ms and gn / step_ms * 100 >= DEVICE_READ_PCT:
            return STAGE_DEVICE, (f"GetNext takes {gn:.3f} ms, {gn / step_ms * 100:.1f}% of the "
                                  f"step, although the device queue always held data")
        return STAGE_NONE, "the device queue always held a batch when GetNext asked"
    if host_e is not None:
        if host_e > HOST_EMPTY_PCT:
            return STAGE_HOST, f"the host queue was empty in {host_e:.0f}% of the batches"
        return STAGE_NONE, f"the host queue was empty in only {host_e:.0f}% of the batches"
    return "", ""


def rank_data_prep(tables: dict, rank: int, meta: dict | None = None) -> dict[str, pa.Table]:
    """{DATA_PREP: one row, DATASET_OPS_FLAGGED: the rank's dataset operators with flags} (each
    only when the rank has the data)."""
    out = {}
    n, step_ms, wait_ms, source, prep_ms, loader_ms, measured = _step_waits(tables, rank)
    qt = S.of_rank(tables.get(S.DATASET_QUEUE), rank)
    qs = _queues(qt.to_pandas() if qt is not None else None)
    stage, evidence = bottleneck_stage(qs, step_ms)
    ops = S.of_rank(tables.get(S.DATASET_OPS), rank)
    op_name = ""
    if ops is not None:
        flagged = flag_operators(ops.to_pandas())
        hit = flagged[flagged["bottleneck"]]
        if not hit.empty:
            op_name = _op_name(hit.iloc[0])
        keep = [c for c in flagged.columns if c != "source"]
        out[DATASET_OPS_FLAGGED] = pa.Table.from_pandas(flagged[keep], preserve_index=False)
    if not n and not qs.get("host_batches") and not qs.get("device_batches") and ops is None:
        return out
    row = {"rank": rank, "steps": n, "step_ms": step_ms, "wait_ms": wait_ms,
           "wait_pct": (wait_ms / step_ms * 100) if wait_ms is not None and step_ms else None,
           "wait_source": source, "preparing_ms": prep_ms, "loader_ms": loader_ms,
           **{k: v for k, v in qs.items() if k != "device_waits"},
           "stage": stage, "operator": op_name, "evidence": evidence, "measured": measured}
    out[DATA_PREP] = pa.Table.from_pylist([row], schema=_PREP_SCHEMA)
    return out


# ---------------------------------------------------------------------------------------------
# the cluster


def _r(v, nd=3):
    return None if v is None or pd.isna(v) else round(float(v), nd)


def build(prep: pa.Table | None, ops: pa.Table | None) -> dict[str, pd.DataFrame]:
    """{"data_preparation.csv", "dataset_pipeline.csv": DataFrame} (columns
    :data:`PREP_COLUMNS`, :data:`OPS_COLUMNS`; ms and %); frames without rows are left out."""
    out = {}
    if prep is not None and prep.num_rows:
        p = prep.to_pandas().sort_values("rank")
        out["data_preparation.csv"] = pd.DataFrame({
            "Rank": p["rank"].astype(int), "Steps": p["steps"].astype(int),
            "Step(ms)": p["step_ms"].map(_r), "Data Wait(ms)": p["wait_ms"].map(_r),
            "Data Wait(%)": p["wait_pct"].map(lambda v: _r(v, 2)),
            "Wait Source": p["wait_source"], "Preparing(ms)": p["preparing_ms"].map(_r),
            "Dataloader(ms)": p["loader_ms"].map(_r),
            "Host Queue Batches": p["host_batches"].astype("Int64"),
            "Host Queue Empty(%)": p["host_empty_pct"].map(lambda v: _r(v, 2)),
            "Host Queue Full(%)": p["host_full_pct"].map(lambda v: _r(v, 2)),
            "Device Queue Batches": p["device_batches"].astype("Int64"),
            "Device Queue Empty(%)": p["device_empty_pct"].map(lambda v: _r(v, 2)),
            "Pipeline Time(ms)": p["pipeline_ms"].map(_r), "Push Time(ms)": p["push_ms"].map(_r),
            "Batch Time(ms)": p["batch_ms"].map(_r), "GetNext Time(ms)": p["getnext_ms"].map(_r),
            "Bottleneck Stage": p["stage"], "Bottleneck Operator": p["operator"],
            "Evidence": p["evidence"]}).reset_index(drop=True)
    if ops is not None and ops.num_rows:
        o = ops.to_pandas().sort_values(["rank", "op_id"])
        per_worker = o["avg_cpu_pct"] / o["num_workers"].where(o["num_workers"] > 0)
        out["dataset_pipeline.csv"] = pd.DataFrame({
            "Rank": o["rank"].astype(int), "Op Id": o["op_id"].astype(int),
            "Op Type": o["op_type"], "Workers": o["num_workers"].astype("Int64"),
            "Parent Id": o["parent_id"].astype("Int64"), "Children": o["children"],
            "Queue Capacity": o["queue_length"].astype("Int64"),
            "Queue Avg Size": o["queue_avg_size"].map(_r),
            "Queue Usage(%)": o["queue_usage_pct"].map(lambda v: _r(v, 2)),
            "Queue Empty(%)": o["queue_empty_pct"].map(lambda v: _r(v, 2)),
            "Input Queue Usage(%)": o["input_usage_pct"].map(lambda v: _r(v, 2)),
            "CPU(%)": o["avg_cpu_pct"].map(lambda v: _r(v, 2)),
            "CPU per Worker(%)": per_worker.map(lambda v: _r(v, 2)),
            "Bottleneck": o["bottleneck"].map(lambda b: "yes" if b else ""),
            "Reason": o["reason"]}).reset_index(drop=True)
    return out


def verdicts(prep: pd.DataFrame | None, make, th: dict | None = None) -> list[dict]:
    """The ``data`` verdict from data_preparation.csv's frame; ``make`` builds one verdict
    (verdicts.make_verdict's signature). Ranks are data-bound when the measured data wait (data
    loader spans, iteration gap) is >= :data:`DATA_BOUND_PCT` % of the step, or, when only
    Preparing is known, Preparing >= :data:`PREPARING_BOUND_PCT` %; critical at twice the
    threshold. One verdict for all such ranks; silent otherwise."""
    th = th or {}
    bound = float(th.get("data_bound_pct", DATA_BOUND_PCT))
    prep_bound = float(th.get("preparing_bound_pct", PREPARING_BOUND_PCT))
    if prep is None or prep.empty:
        return []
    hits = []
    for r in prep.to_dict("records"):
        pct = r["Data Wait(%)"]
        if pct is None or pd.isna(pct):
            continue
        limit = prep_bound if r["Wait Source"] == "Preparing" else bound
        if pct >= limit:
            hits.append((r, pct, limit))
    if not hits:
        return []
    ranks = [int(h[0]["Rank"]) for h in hits]
    worst = max(hits, key=lambda h: h[1] / h[2])
    severity = "critical" if worst[1] >= 2 * worst[2] else "warning"
    r = worst[0]
    what = {"dataloader spans": "in its data loader", "iteration gap":
            "in the iteration gap (reading its batch from the data queue)",
            "Preparing": "between the step start and its first device task (Preparing: the "
                         "data loader and the host's launch of the first operators; no data "
                         "loader spans were read to tell them apart: they are in trace_view.json, "
                         "which analyse reads with --timeline)"}.get(r["Wait Source"],
                                                                            "for its data")
    stage = r.get("Bottleneck Stage") or ""
    op = r.get("Bottleneck Operator") or ""
    msg = (f"Data-bound: rank {r['Rank']} waits {r['Data Wait(ms)']:.2f} ms per step {what}, "
           f"{r['Data Wait(%)']:.1f}% of its {r['Step(ms)']:.2f} ms step")
    if len(ranks) > 1:
        msg += f" ({len(ranks)} ranks at or above {min(h[2] for h in hits):g}%)"
    msg += "."
    if stage and stage != STAGE_NONE:
        msg += f" The bottleneck is the {stage}: {r['Evidence']}."
        if op:
            msg += f" Slowest dataset operator: {op}."
    elif stage == STAGE_NONE:
        msg += (" The data queues show no data-preparation stage starving the device, so look "
                "at what runs on the host between steps.")
    nxt = {STAGE_HOST: "Speed up the dataset pipeline: more num_parallel_workers for the "
                       f"bottleneck operator{(' ' + op) if op else ''}, a faster data format "
                       "(MindRecord), or cheaper map operations (dataset_pipeline.csv).",
           STAGE_TRANSFER: "The host has batches ready but they reach the device late: check "
                           "the host-to-device transfer (prefetch size, CPU load of the sending "
                           "thread, PCIe).",
           STAGE_DEVICE: "GetNext itself is slow: check the device-side data queue and its "
                         "AI CPU operators."}.get(stage, (
        "Give the data loader more workers (num_workers), pin memory and prefetch, or move "
        "preprocessing off the training process; compare data_preparation.csv across ranks."))
    if r["Wait Source"] == "Preparing":
        nxt = ("Analyse again with --timeline to read the data loader spans of trace_view.json "
               "and measure the loader's own wait. " + nxt)
    ev = {"ranks": {str(int(h[0]["Rank"])): {"data_wait_ms": _r(h[0]["Data Wait(ms)"]),
                                            "data_wait_pct": _r(h[1], 2),
                                            "step_ms": _r(h[0]["Step(ms)"]),
                                            "source": h[0]["Wait Source"]} for h in hits}}
    if stage:
        ev["bottleneck_stage"] = stage
        ev["stage_evidence"] = r["Evidence"]
    if op:
        ev["bottleneck_operator"] = op
    return [make("data", "rank", ranks, severity, msg, nxt, id="data:" + ",".join(map(str, ranks)),
                 evidence=ev, threshold={"data_bound_pct": bound,
                                         "preparing_bound_pct": prep_bound})]


__all__ = ["DATA_PREP", "DATASET_OPS_FLAGGED", "rank_data_prep", "flag_operators",
           "bottleneck_stage", "build", "verdicts", "PREP_COLUMNS", "OPS_COLUMNS"]
