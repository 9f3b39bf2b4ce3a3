"""Dispatch (analyze.dispatch, dispatch.csv / dispatch_steps.csv) and its two routes to the
launch of each device task: trace_view.json's HostToDevice flows (text export) and the db's
CANN_API / TASK connection ids (db export).

The shared 2-rank Level2 text and db exports are two separate profiling runs of the same script
(profiler_info collectionTimeEnd 1736412475.03 s and 1736414119.97 s, 27 min apart), not one run
exported twice: the same kernel's launch delay differs by run-to-run jitter, so the routes are
compared on the pairing they produce (same kernels, same launching calls, delays in step) rather
than to 1 us per kernel. Each route is also checked on one kernel against the raw file, the
expected value computed here from the JSON / SQL directly."""

from __future__ import annotations

import json
import sqlite3
from decimal import Decimal

import numpy as np
import pytest

import ascendprof
from ascendprof.cli.main import main
from click.testing import CliRunner
from ascendprof.engine.pipeline import read_rank
from ascendprof.model import schemas as S
from ascendprof.model.options import ReadOptions
from conftest import SHARED, SHARED_MISSING

pytestmark = pytest.mark.skipif(SHARED is None, reason=SHARED_MISSING)


def _levels():
    return SHARED / "torch_npu-2rank-levels"


def _launches(kind: str, read: ReadOptions):
    c = ascendprof.open(_levels() / kind / "level2")
    data, _ = read_rank(c.source(0), read)
    la = data.tables[S.LAUNCHES].to_pandas()
    st = data.tables[S.STEPS].to_pandas().iloc[0]
    la = la[(la.device_start_ns >= st.start_ns) & (la.device_start_ns <= st.end_ns)]
    la = la.sort_values("device_start_ns").copy()
    la["delay_ns"] = la.device_start_ns - la.host_start_ns
    la["occ"] = la.groupby("task_name").cumcount()
    return la


def test_text_route_against_the_raw_trace_view():
    path = _levels() / "text/level2/rank0_ascend_pt/ASCEND_PROFILER_OUTPUT/trace_view.json"
    ev = json.load(open(path))
    s = next(e for e in ev if e.get("cat") == "HostToDevice" and e["ph"] == "s"
             and str(e["id"]) == "965")
    f = next(e for e in ev if e.get("cat") == "HostToDevice" and e["ph"] == "f"
             and str(e["id"]) == "965")
    ns = lambda t: int(Decimal(str(t)) * 1000)  # noqa: E731  (exact: ts is text in us)
    host = [e for e in ev if e.get("ph") == "X" and e["tid"] == s["tid"]
            and str(e["name"]).startswith("AscendCL@")
            and ns(e["ts"]) <= ns(s["ts"]) <= ns(e["ts"]) + round(e["dur"] * 1000)]
    assert [h["name"] for h in host] == ["AscendCL@aclrtMemcpyAsync"]
    # 1736412474725417.508 - 1736412474721169.590 us = 4247.918 us
    expected = ns(f["ts"]) - ns(host[0]["ts"])
    assert expected == 4_247_918
    la = _launches("text", ReadOptions(timeline=True))
    row = la[la.conn_id == "965"].iloc[0]
    assert row.delay_ns == expected and row.host_name == "AscendCL@aclrtMemcpyAsync"


def test_db_route_against_the_raw_database():
    db = _levels() / "db/level2/rank0_ascend_pt/ASCEND_PROFILER_OUTPUT/ascend_pytorch_profiler_0.db"
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    (t_start,) = con.execute("SELECT startNs FROM TASK WHERE connectionId = 965").fetchone()
    (a_start,) = con.execute("SELECT startNs FROM CANN_API WHERE connectionId = 965").fetchone()
    con.close()
    # 1736414119646051168 - 1736414119641685760 ns = 4365.408 us
    assert t_start - a_start == 4_365_408
    la = _launches("db", ReadOptions())
    row = la[la.conn_id == "965"].iloc[0]
    assert row.delay_ns == t_start - a_start


def test_two_routes_pair_the_same_kernels():
    text = _launches("text", ReadOptions(timeline=True))
    db = _launches("db", ReadOptions())
    m = text.merge(db, on=["task_name", "occ"], suffixes=("_t", "_d"))
    # 211 of the text export's 215 flow-linked tasks of step 50 are found in the db run
    assert len(m) >= 0.95 * len(text)
    # the same launching call on both routes (Node@launch, AscendCL@aclrtMemcpyAsync, ...)
    assert (m.host_name_t == m.host_name_d).all()
    # delays of two runs agree in shape: correlation ~1, median difference under 15 %
    assert np.corrcoef(m.delay_ns_t, m.delay_ns_d)[0, 1] > 0.99
    rel = (m.delay_ns_t - m.delay_ns_d).abs() / m.delay_ns_d.abs().clip(lower=1000)
    assert rel.median() < 0.15


def test_dispatch_files_both_routes_and_not_read():
    text = ascendprof.open(_levels() / "text/level2", timeline=True).analysis().csv_files
    db = ascendprof.open(_levels() / "db/level2").analysis().csv_files
    for files, src in ((text, "trace_view flows"), (db, "db connection ids")):
        st = files["dispatch_steps.csv"]
        assert list(st["Rank"]) == [0, 1] and set(st["Source"]) == {src}
        # 159 (text) / 159-175 (db) Enqueue->Dequeue pairs in the step windows
        assert (st["Queue Entries"] > 100).all() and (st["Queue Length Max"] >= 1).all()
        ops = files["dispatch.csv"]
        mm = ops[(ops["Rank"] == 0) & (ops["Op Type"] == "MatMulV2")].iloc[0]
        assert mm["Launches"] == 8  # 8 MatMulV2 rows in rank 0's kernel_details.csv step 50


def test_without_timeline_the_summary_says_what_was_not_read(tmp_path):
    # without --timeline the text export's trace_view.json is not read: no dispatch files, and
    # summary.json says why rather than writing empty ones
    out = tmp_path / "out"
    res = CliRunner().invoke(main, ["analyse", str(_levels() / "text/level2"), "-o", str(out),
                                    "--no-cache"])
    assert res.exit_code == 0, res.output
    assert not (out / "dispatch.csv").exists()
    summary = json.loads((out / "summary.json").read_text())
    assert "--timeline" in summary["analyses"]["dispatch_not_seen"]
    assert {r["host_data"] for r in summary["analyses"]["idle"]} == {"none"}


def test_host_bound_advice_cites_the_launch_numbers():
    # the db export's ranks are host-bound (schedule.device_idle, dispatch form); its evidence
    # and message carry the launch delays that dispatch.csv lists
    ca = ascendprof.open(_levels() / "db/level2").analysis()
    item = next(i for i in ca.advice["items"] if i["key"] == "schedule.device_idle:dispatch")
    launch = item["evidence"]["launch"]
    st = ca.csv_files["dispatch_steps.csv"]
    worst = st[st["Rank"] == item["worst_rank"]].iloc[0]
    assert launch["launches"] == worst["Launches"]
    assert launch["delay_median_us"] == pytest.approx(worst["Launch Delay P50(us)"], abs=0.01)
    assert launch["idle_before_launch_us_per_step"] > 0
    assert "Launch delay median" in item["message"] and "dispatch.csv" in item["message"]
