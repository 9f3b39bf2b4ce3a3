"""Schedule advice rules on the real AlexNet 2-rank exports (text and db) and on copies edited
to carry the problem or to be free of it. Expected findings come from the edited files,
computed here with csv / json / sqlite3 and exact decimal arithmetic."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest

from _advice_data import (OUT, advise, advise_real, copy_rank, db_query, edit_csv, found, rows,
                          status, trace_events)

ALEX = "torch_npu-2rank-levels/text/level2/rank0_ascend_pt"
ALEX_DB = "torch_npu-2rank-levels/db/level2/rank0_ascend_pt"


@pytest.fixture
def alex(shared_data, tmp_path):
    return copy_rank(shared_data / ALEX, tmp_path / "rank0_ascend_pt")


def ns(text) -> int:
    return int(Decimal(str(text).strip()) * 1000)


def gaps_by_hand(rank_dir) -> list[tuple[int, int]]:
    """(start, length) in ns of the gaps between the merged kernel intervals of the step."""
    iv = sorted((ns(r["Start Time(us)"]), ns(r["Start Time(us)"]) + ns(r["Duration(us)"]))
                for r in rows(rank_dir, "kernel_details.csv"))
    out, reach = [], iv[0][1]
    for s, e in iv[1:]:
        if s > reach:
            out.append((reach, s - reach))
        reach = max(reach, e)
    return out


def write_trace(rank_dir, events) -> None:
    (rank_dir / OUT / "trace_view.json").write_text(json.dumps(events), encoding="utf-8")


def profiler_step(events) -> dict:
    (e,) = [e for e in events if e.get("name", "").startswith("ProfilerStep#")]
    return e


# ----------------------------------------------------------------------------- device idle

def test_device_idle_real_export_is_host_bound_dispatch(shared_data):
    alex = shared_data / ALEX
    (st,) = rows(alex, "step_trace_time.csv")
    share = 100 * float(st["Free"]) / float(st["Stage"])
    gaps = gaps_by_hand(alex)
    small = [g for _, g in gaps if 10_000 <= g < 1_000_000]  # task switches < 10 us apart
    big = [g for _, g in gaps if g >= 1_000_000]
    switch = [g for _, g in gaps if g < 10_000]
    assert share > 10 and sum(small) > sum(big)
    (f,) = found(advise_real(alex), "schedule.device_idle")
    assert f["key"] == "schedule.device_idle:dispatch"
    ev = f["evidence"]
    assert ev["free_pct_of_step"] == pytest.approx(share, abs=0.01)
    assert ev["dispatch_gaps"]["count_per_step"] == len(small)
    assert ev["dispatch_gaps"]["us_per_step"] == pytest.approx(sum(small) / 1000, abs=0.002)
    assert ev["stall_gaps"]["count_per_step"] == len(big)
    assert ev["task_switch_gaps"]["count_per_step"] == len(switch)
    assert ev["profiler_options_adding_host_time"] == ["with_stack", "record_shapes",
                                                       "profile_memory"]
    assert any("TASK_QUEUE_ENABLE=2" in a for a in f["advice"])
    assert any("with_stack" in a for a in f["advice"])


def test_device_idle_silent_when_free_is_small(alex):
    def little_free(rs):
        for r in rs:
            stage = float(r["Stage"])
            r["Free"] = str(0.05 * stage)
    edit_csv(alex, "step_trace_time.csv", little_free)
    assert status(advise(alex), "schedule.device_idle") == "silent"


def test_device_idle_skipped_without_the_profilers_free(alex):
    (alex / OUT / "step_trace_time.csv").unlink()
    st, why = advise(alex)["status"]["schedule.device_idle"]
    assert st == "skipped" and "step breakdown" in why


def test_device_idle_stall_names_the_long_gap_and_what_the_host_did(alex):
    gaps = gaps_by_hand(alex)
    cut, gap = gaps[len(gaps) // 2]  # open a 40 ms stall at this gap
    shift = 40_000_000
    events = trace_events(alex)
    step = profiler_step(events)

    def later(rs):
        for r in rs:
            if ns(r["Start Time(us)"]) > cut:
                r["Start Time(us)"] = str(Decimal(r["Start Time(us)"].strip()) + 40_000)
    edit_csv(alex, "kernel_details.csv", later)
    edit_csv(alex, "step_trace_time.csv", lambda rs: [
        {**r, "Free": str(float(r["Free"]) + 40_000), "Stage": str(float(r["Stage"]) + 40_000)}
        for r in rs])
    # the host sat in a synchronisation for the whole stall
    events.append({"ph": "X", "name": "AscendCL@aclrtSynchronizeStream", "pid": 1, "tid": 1,
                   "ts": str(Decimal(cut) / 1000), "dur": (gap + shift) / 1000,
                   "args": {}})
    step["dur"] = float(step["dur"]) + shift / 1000
    write_trace(alex, events)
    (f,) = found(advise(alex, "all"), "schedule.device_idle")
    assert f["key"] == "schedule.device_idle:stall"
    top = f["evidence"]["largest_gaps"][0]
    assert top["start_ns"] == cut
    assert top["dur_ms"] == pytest.approx((gap + shift) / 1e6, abs=0.001)
    assert top["host"][0]["name"] == "AscendCL@aclrtSynchronizeStream"
    assert "AscendCL@aclrtSynchronizeStream" in f["message"]


# ------------------------------------------------------------------------- synchronisation

def test_synchronize_real_db_export_host_waits_with_the_triggering_ops(shared_data):
    db = shared_data / ALEX_DB / OUT / "ascend_pytorch_profiler_0.db"
    (sync_ns, calls), = db_query(db, """SELECT SUM(endNs - startNs), COUNT(*) FROM CANN_API a
        WHERE (SELECT value FROM STRING_IDS WHERE id = a.name) LIKE 'aclrtSynchronize%'""")
    (items,), = db_query(db, """SELECT COUNT(*) FROM PYTORCH_API p WHERE (SELECT value FROM
        STRING_IDS WHERE id = p.name) = 'aten::item'""")
    (stage,), = db_query(shared_data / ALEX_DB / OUT / "analysis.db",
                         "SELECT stage FROM StepTraceTime")
    assert 100 * sync_ns / 1000 / stage > 10
    (f,) = found(advise_real(shared_data / ALEX_DB), "schedule.synchronize")
    assert f["key"] == "schedule.synchronize:wait"
    assert f["evidence"]["sync_calls_per_step"] == calls
    assert f["evidence"]["sync_us_per_step"] == pytest.approx(sync_ns / 1000, abs=0.002)
    assert f["evidence"]["framework_triggers_per_step"]["aten::item"] == items
    assert f["severity"] == "info"  # the device rarely runs dry during them


def test_synchronize_silent_when_the_host_rarely_waits(alex):
    edit_csv(alex, "api_statistic.csv", lambda rs: [
        {**r, "Time(us)": "100.0"} if "Synchronize" in r["API Name"] else r for r in rs])
    assert status(advise(alex), "schedule.synchronize") == "silent"


def test_synchronize_after_every_launch_is_launch_blocking(alex):
    events = trace_events(alex)
    launches = [e for e in events if e.get("ph") == "X" and e.get("name") == "Node@launch"]
    for e in launches:
        end = Decimal(e["ts"]) + Decimal(str(e["dur"]))
        events.append({"ph": "X", "name": "AscendCL@aclrtSynchronizeStream", "pid": e["pid"],
                       "tid": e["tid"], "ts": str(end + Decimal("0.001")), "dur": 1.0,
                       "args": {}})
    write_trace(alex, events)
    (f,) = found(advise(alex, "all"), "schedule.synchronize")
    assert f["key"] == "schedule.synchronize:blocking" and f["severity"] == "critical"
    assert f["evidence"]["node_launches"] == len(launches)
    assert f["evidence"]["co_occurrence_ratio"] > 0.5


# ------------------------------------------------------------------------------- dataloader

def _dataloader_max_us(events) -> float:
    return max(float(e["dur"]) for e in events
               if e.get("ph") == "X" and "dataloader" in e.get("name", "").lower())


def test_dataloader_silent_on_the_real_export(shared_data):
    alex = shared_data / ALEX
    assert _dataloader_max_us(trace_events(alex)) < 10_000
    assert status(advise_real(alex, "all"), "schedule.dataloader") == "silent"


def test_dataloader_slow_when_loading_takes_over_10ms(alex):
    events = trace_events(alex)
    for e in events:
        if e.get("ph") == "X" and "dataloader" in e.get("name", "").lower():
            e["dur"] = float(e["dur"]) * 5
    write_trace(alex, events)
    longest = _dataloader_max_us(events)  # the outermost frame holds the others
    (f,) = found(advise(alex, "all"), "schedule.dataloader")
    assert f["evidence"]["dataloader_ms_per_step"]["50"] == pytest.approx(longest / 1000,
                                                                          abs=0.001)
    assert f["impact_us_per_step"] == pytest.approx(longest, abs=0.01)


def test_dataloader_skipped_without_host_events_in_summary_mode(shared_data):
    st, why = advise_real(shared_data / ALEX)["status"]["schedule.dataloader"]
    assert st == "skipped" and "--advice all" in why


# ------------------------------------------------------------------------------------ GC

def _with_gc(rank_dir, durs_us):
    events = trace_events(rank_dir)
    step = profiler_step(events)
    t = Decimal(step["ts"]) + 1000
    for d in durs_us:
        events.append({"ph": "X", "cat": "GC", "name": "GC", "pid": step["pid"],
                       "tid": step["tid"], "ts": str(t), "dur": d, "args": {}})
        t += 5000
    write_trace(rank_dir, events)


def test_gc_events_of_1ms_or_more_are_reported(alex):
    _with_gc(alex, [2500.0, 500.0, 1200.0])
    (f,) = found(advise(alex, "all"), "schedule.gc")
    assert f["evidence"]["gc_count"] == 2  # 2.5 ms and 1.2 ms; 0.5 ms is normal
    assert f["evidence"]["gc_total_ms"] == pytest.approx(3.7)
    assert f["evidence"]["longest_ms"] == pytest.approx(2.5)


def test_gc_short_collections_are_normal(alex):
    _with_gc(alex, [500.0, 900.0])
    assert status(advise(alex, "all"), "schedule.gc") == "silent"


def test_gc_skipped_without_gc_records(shared_data):
    st, why = advise_real(shared_data / ALEX, "all")["status"]["schedule.gc"]
    assert st == "skipped" and "gc_detect_threshold" in why


def test_conjectured_gc_long_idle_without_host_api(alex):
    events = trace_events(alex)
    acl = [(ns(e["ts"]), ns(e["ts"]) + int(Decimal(str(e["dur"])) * 1000)) for e in events
           if e.get("ph") == "X" and e.get("name", "").startswith("AscendCL@")]
    # a gap at which no host API call is in flight: the process pauses there for 300 ms
    cut, gap = next((c, g) for c, g in gaps_by_hand(alex)
                    if not any(s <= c <= e for s, e in acl) and g > 50_000)
    shift = Decimal(300_000)  # us

    def later(rs):
        for r in rs:
            if ns(r["Start Time(us)"]) > cut:
                r["Start Time(us)"] = str(Decimal(r["Start Time(us)"].strip()) + shift)
    edit_csv(alex, "kernel_details.csv", later)
    for e in events:
        if "ts" in e and ns(e["ts"]) > cut:
            e["ts"] = str(Decimal(str(e["ts"])) + shift)
    write_trace(alex, events)
    lo, hi = cut, cut + gap + 300_000_000
    inside = [(s, e) for s, e in ((ns(e["ts"]), ns(e["ts"]) + int(Decimal(str(e["dur"])) * 1000))
                                  for e in events if e.get("ph") == "X"
                                  and e.get("name", "").startswith("AscendCL@"))
              if e > lo and s < hi]
    assert len(inside) / ((hi - lo) / 1000) < 0.0001  # the peer's event rate
    (f,) = found(advise(alex, "all"), "schedule.conjectured_gc")
    (g,) = f["evidence"]["gaps"]
    assert g["start_ns"] == cut
    assert g["dur_ms"] == pytest.approx((hi - lo) / 1e6, abs=0.001)
    assert g["acl_events"] == len(inside)


def test_conjectured_gc_silent_on_the_real_export(shared_data):
    alex = shared_data / ALEX
    assert max(g for _, g in gaps_by_hand(alex)) < 200_000_000
    assert status(advise_real(alex, "all"), "schedule.conjectured_gc") == "silent"


# ---------------------------------------------------------------------------- SyncBatchNorm

def _with_syncbn(rank_dir, n):
    events = trace_events(rank_dir)
    step = profiler_step(events)
    t = Decimal(step["ts"]) + 100
    for _ in range(n):
        events.append({"ph": "X", "cat": "cpu_op", "name": "SyncBatchNorm", "pid": step["pid"],
                       "tid": step["tid"], "ts": str(t), "dur": 50.0, "args": {}})
        t += 100
    write_trace(rank_dir, events)


def test_syncbn_20_or_more_per_step(alex):
    _with_syncbn(alex, 25)
    (f,) = found(advise(alex, "all"), "schedule.syncbn")
    assert f["evidence"]["syncbn_calls_per_step"] == 25
    assert f["evidence"]["host_ms_per_step"] == pytest.approx(25 * 0.05)


def test_syncbn_few_calls_are_fine(alex):
    _with_syncbn(alex, 10)
    assert status(advise(alex, "all"), "schedule.syncbn") == "silent"
