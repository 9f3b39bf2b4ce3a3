"""The parts every advice rule shares (analyze/advice/base.py): the shape and rounding of a
finding, the unit helpers, the reason a rule is skipped, the rule table of advice.json, the
recorded environment variables, and the per-rank Context the rules read (which tables it says
are present, the pandas frames and kernel arrays it hands out, with or without a spilled
kernels table).

Expected values are worked out by hand in the comments, or read from the real files with the
json / csv / sqlite3 modules; the spilled Context is pinned against the same rank read whole.
"""

from __future__ import annotations

import json
import sqlite3

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from _advice_data import OUT, advise, copy_rank, edit_csv, found, rows, status
from ascendprof.analyze import advice
from ascendprof.analyze.advice import base
from ascendprof.analyze.advice.base import Context, Rule, finding, ms, severity_by_share, us
from ascendprof.engine import pipeline
from ascendprof.model import schemas as S
from ascendprof.model.options import ReadOptions
from ascendprof.scan import load_sources
from ascendprof.sysio import bigtables

ALEX = "torch_npu-2rank-levels/text/level2/rank0_ascend_pt"
ALEX_DB = "torch_npu-2rank-levels/db/level2/rank0_ascend_pt"

RULE = Rule("memory.test", "memory", "A test rule", needs=((S.KERNELS,),),
            threshold={"t_pct": 1.0}, source="by hand", check=lambda ctx: None)


# ------------------------------------------------------------------- a finding and its units

def test_finding_rounds_share_and_impact_and_makes_evidence_plain():
    f = finding(RULE, [np.int64(3), 1, 3], severity="warning", message="m", advice=("a",),
                evidence={"ops": [{"us": 1.23456}, np.int64(7), float("nan")],
                          "pair": (np.float32(0.5), np.bool_(True)), 2: "two"},
                impact_ns=1234.0, step_ns=10000.0)
    # 100 * 1234 / 10000 = 12.34 % of the step (kept to 2 decimals, not rounded to 12)
    assert f["share_of_step_pct"] == 12.34
    # 1234 ns = 1.234 us
    assert f["impact_us_per_step"] == 1.234
    # every element of a list is made plain: 1.23456 -> 1.2346 (4 decimals), numpy int ->
    # int, NaN -> None; tuples become lists, numpy bool -> bool, keys -> text
    assert f["evidence"] == {"ops": [{"us": 1.2346}, 7, None], "pair": [0.5, True], "2": "two"}
    assert type(f["evidence"]["ops"][1]) is int
    assert f["ranks"] == [1, 3] and f["key"] == "memory.test" and f["title"] == "A test rule"
    assert f["threshold"] == {"t_pct": 1.0} and f["source"] == "by hand"


def test_finding_without_step_time_has_no_share():
    f = finding(RULE, [0], severity="info", message="m", advice=[], evidence={},
                impact_ns=500.0, step_ns=None)
    assert f["share_of_step_pct"] is None and f["impact_us_per_step"] == 0.5


def test_unit_helpers_round_to_three_decimals():
    # 1234 ns = 1.234 us; 1 ns = 0.001 us; 1499 ns = 1.499 us
    assert us(1234) == 1.234 and us(1) == 0.001 and us(np.int64(1499)) == 1.499
    # 1234567 ns = 1.234567 ms -> 1.235; 2.5e6 ns = 2.5 ms; 400 ns = 0.0004 ms -> 0.0
    assert ms(1234567) == 1.235 and ms(2.5e6) == 2.5 and ms(400) == 0.0
    assert ms(np.int64(1_000_000)) == 1.0


@pytest.mark.parametrize("share,want", [
    (None, "info"), (0.0, "info"), (4.99, "info"), (5.0, "warning"), (9.99, "warning"),
    (10.0, "critical"), (50.0, "critical"),
])
def test_severity_by_share_warning_from_5_critical_from_10(share, want):
    got = severity_by_share(share, 5.0, 10.0)
    assert got == want and got in base.SEVERITIES


# ------------------------------------------------------------ skip reasons and the rule table

def test_skip_reason_names_every_alternative(shared_data, tmp_path):
    """op_compile reads api_statistic.csv or the host events: with neither (no api_statistic,
    no trace_view.json) it is skipped naming both, joined by "or"."""
    rank = copy_rank(shared_data / ALEX, tmp_path / "rank0_ascend_pt",
                     skip=("trace_view.json", "api_statistic.csv"))
    st, why = advise(rank)["status"]["computation.op_compile"]
    assert st == "skipped"
    assert why.startswith(
        "needs CANN API statistics (api_statistic.csv / db CANN_API) or host events "
        "(trace_view.json / db PYTORCH_API, CANN_API); not in this collection"), why


def test_skip_reason_of_one_missing_table_by_hand():
    r = Rule("memory.x", "memory", "x", needs=((S.KERNELS,), ("meta:env", S.STEPS)),
             threshold={"t": 1}, source="s", check=lambda ctx: None)
    assert base.missing_needs(r, lambda a: a == S.KERNELS) == (
        "needs environment variables (profiler_metadata.json ENV_VARIABLES / db META_DATA) "
        "or step windows; not in this collection")
    assert base.missing_needs(r, lambda a: a in (S.KERNELS, S.STEPS)) is None


def test_advice_json_rule_table_declares_each_rule():
    doc = advice.cluster_advice({}, {})
    assert len(doc["rules"]) == len(advice.RULES)
    for d, r in zip(doc["rules"], advice.RULES):
        assert {k: d[k] for k in ("id", "area", "title", "scope", "threshold", "source")} == {
            "id": r.id, "area": r.area, "title": r.title, "scope": r.scope,
            "threshold": r.threshold, "source": r.source}
        assert d["needs"] == [list(alt) for alt in r.needs]


# ------------------------------------------------------------------ environment variables

def _one_rank(shared_data, tmp_path, env_variables):
    root = tmp_path / "run"
    rank = copy_rank(shared_data / ALEX, root / "rank0_ascend_pt", skip=("trace_view.json",))
    p = rank / "profiler_metadata.json"
    meta = json.loads(p.read_text())
    meta["ENV_VARIABLES"] = env_variables(meta["ENV_VARIABLES"])
    p.write_text(json.dumps(meta))
    return root


def _cluster_advice(root):
    import ascendprof

    return ascendprof.open(root).analysis().advice


def _item(doc, key):
    got = [f for f in doc["items"] if f["key"] == key]
    return got[0] if got else None


def test_launch_blocking_read_from_profiler_metadata(shared_data, tmp_path):
    # ASCEND_LAUNCH_BLOCKING=1 (a value), ASCEND_GLOBAL_LOG_LEVEL=1 (info): both reported
    root = _one_rank(shared_data, tmp_path, lambda e: {
        **e, "ASCEND_LAUNCH_BLOCKING": "1", "ASCEND_GLOBAL_LOG_LEVEL": 1})
    doc = _cluster_advice(root)
    lb = _item(doc, "environment.launch_blocking")
    assert lb is not None and lb["ranks"] == [0] and lb["severity"] == "critical"
    # the number 1 is read as the text "1"
    assert _item(doc, "environment.log_level")["evidence"]["values"] == {"1": [0]}


def test_environment_recorded_as_json_text_is_read(shared_data, tmp_path):
    """ENV_VARIABLES held as JSON text (as db META_DATA stores it) is parsed, not dropped."""
    root = _one_rank(shared_data, tmp_path, lambda e: json.dumps(
        {**e, "ASCEND_LAUNCH_BLOCKING": "1"}))
    doc = _cluster_advice(root)
    lb = _item(doc, "environment.launch_blocking")
    assert lb is not None and lb["ranks"] == [0]


def test_env_of_values_as_text():
    meta = {"profiler_metadata": {"ENV_VARIABLES": {
        "A": "1", "B": None, "C": 3, "D": "", "E": "expandable_segments:True"}}}
    # None -> "", 3 -> "3", texts unchanged
    assert base.env_of(meta) == {"A": "1", "B": "", "C": "3", "D": "",
                                 "E": "expandable_segments:True"}
    assert base.env_of({"profiler_metadata": {"ENV_VARIABLES": "not json"}}) == {}
    assert base.env_of({}) == {} and base.env_of(None) == {}


def test_env_of_the_db_export(shared_data):
    """The db export records ENV_VARIABLES in META_DATA; what the reader gives env_of is that
    text's variables (read here with sqlite3 and json)."""
    from ascendprof.readers import read_source

    db = shared_data / ALEX_DB / OUT / "ascend_pytorch_profiler_0.db"
    con = sqlite3.connect(str(db))
    try:
        (text,) = con.execute("SELECT value FROM META_DATA WHERE name = 'ENV_VARIABLES'").fetchone()
    finally:
        con.close()
    want = json.loads(text)
    assert want and "PYTORCH_NPU_ALLOC_CONF" in want
    (src,) = load_sources(shared_data / ALEX_DB)
    data = read_source(src)
    assert base.env_of(data.meta) == want


# ------------------------------------------------------------------------------- the Context

def test_a_one_kernel_rank_has_kernels(shared_data, tmp_path):
    """A kernels table of one row is present: the kernel rules run on it (not skipped)."""
    rank = copy_rank(shared_data / ALEX, tmp_path / "rank0_ascend_pt", skip=("trace_view.json",))
    edit_csv(rank, "kernel_details.csv", lambda rs: rs[:1])
    assert len(rows(rank, "kernel_details.csv")) == 1
    res = advise(rank)
    for rid in ("computation.aicpu", "computation.block_dim", "schedule.device_idle"):
        assert status(res, rid) in ("fired", "silent"), (rid, res["status"][rid])
    assert Context(rank=0, tables={S.STEPS: pa.table({"step": [1]})}).has(S.STEPS)
    assert not Context(rank=0, tables={S.STEPS: pa.table({"step": pa.array([], pa.int32())})}
                       ).has(S.STEPS)


def test_op_compile_on_a_rank_without_kernels(shared_data, tmp_path):
    """op_compile counts TransData kernels when there are kernels; a rank without
    kernel_details.csv still gets the finding, with none counted."""
    rank = copy_rank(shared_data / ALEX, tmp_path / "rank0_ascend_pt",
                     skip=("trace_view.json", "kernel_details.csv"))
    (f,) = found(advise(rank), "computation.op_compile")
    ev = f["evidence"]
    assert ev["transdata_kernels_per_step"] == 0.0 and ev["transdata_us_per_step"] == 0.0
    assert ev["dynamic_op_state_pct"] is None


def test_context_without_tables():
    ctx = Context(rank=0, tables={})
    a = ctx.karr()
    assert len(a["rows"]) == 0 and len(a["dur"]) == 0 and len(a["name"]) == 0
    assert a["has_core"] is False
    assert ctx.computing_ns is None and ctx.step_ns is None and ctx.n_steps == 1
    f = ctx.rows_frame(S.KERNELS, np.zeros(0, np.int64), ("dur_ns",))
    assert len(f) == 0 and "dur_ns" in f.columns
    f = ctx.kernel_frame(np.zeros(0, bool))
    assert len(f) == 0 and list(f.columns) == list(base.READ_COLUMNS[S.KERNELS])


def test_share_of_the_mean_step_keeps_two_decimals():
    # one step of Stage 3000 ns: 1000 ns is 33.33 % of it
    st = pa.table({"step": pa.array([1], pa.int32()), "stage_ns": pa.array([3000], pa.int64())})
    ctx = Context(rank=0, tables={S.STEP_TRACE: st})
    assert ctx.step_ns == 3000.0 and ctx.share(1000) == 33.33 and ctx.share(None) is None


@pytest.fixture
def alex_whole(shared_data):
    (src,) = load_sources(shared_data / ALEX)
    data, _ = pipeline.read_rank(src, ReadOptions(advice="summary"))
    assert not data.spilled
    return data


def test_df_gives_each_table_its_own_frame(shared_data, alex_whole):
    ctx = Context(rank=0, tables=alex_whole.tables)
    # communication.json of this rank: one step, four collective ops ("Total Op Info" is not
    # one), each named "<op>@<group hash>"
    comm = json.loads((shared_data / ALEX / OUT / "communication.json").read_text())
    want_ops = sorted(k.split("@")[0] for s in comm.values() for kind in s.values() for k in kind
                      if k != "Total Op Info")
    assert len(want_ops) == 4
    ops = ctx.df(S.COMM_OPS)
    assert sorted(ops["op_name"].unique()) == want_ops
    assert list(ops.columns) == [c for c in base.READ_COLUMNS[S.COMM_OPS]
                                 if c in alex_whole.tables[S.COMM_OPS].column_names]
    # step_trace_time.csv: one row, step 50
    steps = ctx.df(S.STEP_TRACE)
    assert steps["step"].tolist() == [50] and "computing_ns" in steps.columns
    # an extra column asked for is a frame of its own (kernels: READ_COLUMNS, then extra)
    k = ctx.df(S.KERNELS)
    kx = ctx.df(S.KERNELS, ("wait_ns",))
    assert "wait_ns" not in k.columns and "wait_ns" in kx.columns
    assert len(k) == len(kx) == len(rows(shared_data / ALEX, "kernel_details.csv"))
    # a table the rank lacks: empty, with the schema's columns
    h = ctx.df(S.HCCL_TASKS)
    assert len(h) == 0 and list(h.columns) == S.empty(S.HCCL_TASKS).column_names


def test_df_of_a_spilled_kernels_table_is_the_whole_table(shared_data, alex_whole, tmp_path,
                                                           monkeypatch):
    """A spilled kernels table keeps only slim (some dictionary-encoded) columns in memory:
    df reads the others from its file and gives the frame the rank read whole gives."""
    (src,) = load_sources(shared_data / ALEX)
    monkeypatch.setattr(bigtables, "SPILL_BYTES", 1)
    with bigtables.spilling(tmp_path):
        data, _ = pipeline.read_rank(src, ReadOptions(advice="summary"))
    tables, spilled = pipeline._advice_tables(data)
    assert S.KERNELS in spilled
    slim = tables[S.KERNELS]
    assert "block_num" not in slim.column_names
    assert any(pa.types.is_dictionary(f.type) for f in slim.schema)
    ctx = Context(rank=0, tables=tables, spilled=spilled)
    whole = Context(rank=0, tables=alex_whole.tables)
    for extra in ((), ("wait_ns",)):
        got, want = ctx.df(S.KERNELS, extra), whole.df(S.KERNELS, extra)
        assert "block_num" in got.columns and "input_dtypes" in got.columns
        pd.testing.assert_frame_equal(got, want)


# ----------------------------------------------------- the kernel arrays of a hand-built table

def _kernels(**cols):
    return S.conform(S.KERNELS, pa.table(cols))


def test_karr_gives_a_kernel_without_start_the_start_zero():
    """karr's ``start``: int64 ns, 0 where the start is null. Kernels: a (start null), the
    HCCL big op hcom_x (left out: communication), b (start 100)."""
    t = _kernels(name=["a", "hcom_x", "b"], accelerator_core=["AI_CORE", "HCCL", "AI_CORE"],
                 start_ns=pa.array([None, 50, 100], pa.int64()),
                 dur_ns=pa.array([10, 20, 30], pa.int64()))
    a = Context(rank=0, tables={S.KERNELS: t}).karr()
    assert a["start"].tolist() == [0, 100]
    assert a["rows"].tolist() == [0, 2]


def test_computing_of_kernels_past_int64_when_summed_is_not_negative():
    """No step trace: Computing = the compute kernels' summed duration per step (1 step: no
    step column). Two kernels of 2^62 ns each: 2^63 ns, past int64 (the durations are summed
    as float, so the mean stays positive: an int64 sum would wrap to -2^63)."""
    t = _kernels(name=["a", "b"], accelerator_core=["AI_CORE", "AI_CORE"],
                 start_ns=pa.array([0, 1], pa.int64()),
                 dur_ns=pa.array([2 ** 62, 2 ** 62], pa.int64()))
    ctx = Context(rank=0, tables={S.KERNELS: t})
    assert ctx.computing_ns == 2.0 ** 63


def test_a_column_the_kernels_table_lacks_is_none():
    """column / kernel_values of a column the (not spilled) table does not have: None, which
    the PMU rules take as "this rank has no such counter"."""
    t = _kernels(name=["a"], accelerator_core=["AI_CORE"], start_ns=[0], dur_ns=[5])
    ctx = Context(rank=0, tables={S.KERNELS: t})
    assert ctx.column(S.KERNELS, S.PMU_PREFIX + "aic_mac_ratio") is None
    assert ctx.kernel_values(S.PMU_PREFIX + "aic_mac_ratio") is None
    assert ctx.column(S.KERNELS, "name").to_pylist() == ["a"]


def test_kernel_frame_has_the_columns_asked_for():
    """kernel_frame(rows, columns): the chosen compute kernels (here the 2nd and 3rd of a, b,
    c; hcom_x is no compute kernel) with only those columns, in that order."""
    t = _kernels(name=["a", "hcom_x", "b", "c"],
                 accelerator_core=["AI_CORE", "HCCL", "AI_CPU", "AI_CORE"],
                 start_ns=[0, 5, 10, 20], dur_ns=[1, 2, 3, 4])
    ctx = Context(rank=0, tables={S.KERNELS: t})
    f = ctx.kernel_frame(np.array([False, True, True]), ("dur_ns", "name"))
    assert list(f.columns) == ["dur_ns", "name"]
    assert f.to_dict("list") == {"dur_ns": [3, 4], "name": ["b", "c"]}
