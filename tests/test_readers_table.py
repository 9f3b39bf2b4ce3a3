"""docs/readers.md, one test per row: every file a producer writes, read through the user's path
(``scan`` then ``read_source``, as ``analyse`` and ``ascendprof.open()`` do) on the fixture the
table names: real data (fixtures/, ../shared/data) or, where no public sample exists, files
built here in the producer's layout (said so in the table and in the builder).

Expected values come from the files themselves, counted here with csv / json / sqlite3 (rows,
ops, links, tasks), never from ascendprof's output. A file no analysis reads is checked to be
left alone: the rank holding it is read without a problem naming it.

The table in docs/readers.md and :data:`ROWS` must list the same (producer, file) pairs.
"""

from __future__ import annotations

import csv
import json
import re
import shutil
import sqlite3
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path

import pytest

from ascendprof.model import schemas as S
from ascendprof.model.options import ReadOptions
from ascendprof.model.problems import Problems
from ascendprof.readers import read_source
from ascendprof.scan import scan
from conftest import FIXTURES, ROOT, SHARED, SHARED_MISSING

DOC = ROOT / "docs" / "readers.md"
OUT = "ASCEND_PROFILER_OUTPUT"
LEVELS = "torch_npu-2rank-levels"
LEGACY = "mindspore-legacy"


# ------------------------------------------------------------------------------- helpers

def _shared(rel: str) -> Path:
    if SHARED is None:
        pytest.skip(SHARED_MISSING)
    return SHARED / rel


def _read(root: Path, rank: int | None = 0, kind: str | None = None, timeline=False):
    """RankData of ``rank`` under ``root`` through scan + read_source."""
    found = [s for s in scan(root, Problems()) if (rank is None or s.rank == rank)
             and (kind is None or s.kind == kind)]
    assert found, f"no source of rank {rank} under {root}"
    return read_source(found[0], ReadOptions(timeline=timeline))


def _csv_rows(path: Path) -> list[dict]:
    with open(path, newline="", encoding="utf-8-sig") as f:
        return list(csv.DictReader(f))


def _count(db: Path, sql: str) -> int:
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return con.execute(sql).fetchone()[0]
    finally:
        con.close()


def _n(data, table: str) -> int:
    t = data.tables.get(table)
    return 0 if t is None else t.num_rows


def _no_problem_names(data, name: str):
    assert not [p for p in data.problems if name in p.path or name in p.reason], \
        [p for p in data.problems]


def _comm_json_ops(path: Path) -> int:
    doc = json.loads(path.read_text())  # {step: {kind: {op: ...}}}; the per-step total is no op
    return sum(1 for kinds in doc.values() for ops in kinds.values() for op in ops
               if not op.startswith("Total Op Info"))


def _matrix_links(path: Path) -> int:
    doc = json.loads(path.read_text())
    return sum(len(links) for kinds in doc.values() for ops in kinds.values()
               for links in ops.values())


# ------------------------------------------------------------------------------- builders

def _text_rank(level: int, rank: int = 0) -> Path:
    return _shared(f"{LEVELS}/text/level{level}")


def _db_level(level: int) -> Path:
    return _shared(f"{LEVELS}/db/level{level}")


def build_mindspore_text(tmp: Path) -> Path:
    """BUILT: a MindSpore 2.3+ ``*_ascend_ms`` rank (no public sample): the real torch_npu Level1
    rank 0 copied under a ``_ascend_ms`` name with MindSpore's differences: step_trace_time.csv
    without Device_id, kernel_details.csv with ``Step ID`` and a ``Model Name`` column, and the
    data preparation files of a real MindSpore job (legacy run_2, rank 1 renamed rank 0)."""
    src = _shared(f"{LEVELS}/text/level1/rank0_ascend_pt")
    dst = tmp / "ms" / "rank0_ascend_ms"
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("trace_view.json",
                                                            "operator_details.csv"))
    out = dst / OUT
    import faultgen as FG

    FG.drop_column(out / "step_trace_time.csv", "Device_id") if "Device_id" in \
        _csv_rows(out / "step_trace_time.csv")[0] else None
    FG.rename_column(out / "kernel_details.csv", "Step Id", "Step ID")
    FG.add_column(out / "kernel_details.csv", "Model Name", "Default")
    run2 = _shared(f"{LEGACY}/run_2/normal_run/profiler")
    for name in ("minddata_pipeline_raw_1.csv", "minddata_cpu_utilization_1.json",
                 "device_queue_profiling_1.txt", "minddata_aicpu_1.txt"):
        shutil.copy(run2 / name, out / name.replace("_1.", "_0."))
    (out / "dataset.csv").write_text("Operation,Stage,Occurrences,Avg. time(us)\n")
    return dst.parent


def build_mindspore_db(tmp: Path) -> Path:
    """BUILT: a MindSpore db export (no public sample): the real torch_npu Level1 db of rank 0
    under MindSpore's names (``*_ascend_ms``, ``ascend_mindspore_profiler_0.db``)."""
    src = _db_level(1) / "rank0_ascend_pt"
    dst = tmp / "msdb" / "rank0_ascend_ms"
    shutil.copytree(src, dst)
    (dst / OUT / "ascend_pytorch_profiler_0.db").rename(dst / OUT /
                                                         "ascend_mindspore_profiler_0.db")
    return dst.parent


def _w(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def build_prof_export(tmp: Path) -> Path:
    """BUILT: a stand-alone msprof ``PROF_*`` with ``mindstudio_profiler_output`` (no public
    sample of useful size): the CANN text export's files with the column lists msprof writes,
    values by hand; ``analyze/communication*.json`` copied from the real torch_npu Level1 rank 0;
    msprof_*.json = the first 200 events of the real Level1 trace_view.json."""
    d = tmp / "prof" / "PROF_000001_20240101_ABC"
    _w(d / "device_0" / "info.json.0", json.dumps({"rank_id": 0, "DeviceInfo": [{"id": 0}]}))
    out = d / "mindstudio_profiler_output"
    head = ("Device_id,Model ID,Task ID,Stream ID,Op Name,OP Type,OP State,Task Type,"
            "Task Start Time(us),Task Duration(us),Task Wait Time(us),Block Num,aic_mac_ratio\n")
    _w(out / "op_summary_slice_0_20240101.csv",
       head + "0,1,10,2,MatMul_1,MatMul,static,AI_CORE,1700000000000100.500\t,12.250,0,8,0.5\n"
              "0,1,11,2,Add_2,Add,static,AI_VECTOR_CORE,1700000000000200.000\t,1.000,87.250,4,N/A\n")
    _w(out / "op_summary_slice_1_20240101.csv",
       head + "0,1,12,2,Mul_3,Mul,static,AI_VECTOR_CORE,1700000000000300.000\t,2.000,99.000,4,N/A\n")
    _w(out / "op_statistic_20240101.csv",
       "Device_id,OP Type,Core Type,Count,Total Time(us),Min Time(us),Avg Time(us),"
       "Max Time(us),Ratio(%)\n0,MatMul,AI_CORE,1,12.25,12.25,12.25,12.25,80.3\n"
       "0,Add,AI_VECTOR_CORE,1,1,1,1,1,6.6\n")
    _w(out / "api_statistic_20240101.csv",
       "Device_id,Level,API Name,Time(us),Count,Avg(us),Min(us),Max(us),Variance\n"
       "host,acl,aclnnMatmul,10.5,1,10.5,10.5,10.5,0\n")
    _w(out / "step_trace_20240101.csv",
       "Device_id,Iteration ID,FP Start(us),BP End(us),Iteration End(us),Iteration Time(us),"
       "FP to BP Time(us),Iteration Refresh(us),Data Aug Bound(us),Model ID\n"
       "0,1,1700000000000100.000\t,1700000000000150.000\t,1700000000000400.000\t,350.000,"
       "50.000,250.000,0,1\n")
    _w(out / "communication_statistic_20240101.csv",
       "Device_id,OP Type,Count,Total Time(us),Min Time(us),Avg Time(us),Max Time(us),Ratio(%)\n"
       "0,hcom_allReduce_,4,100,10,25,40,100\n")
    _w(out / "npu_mem_20240101.csv", "Device_id,event,ddr(KB),hbm(KB),memory(KB),timestamp(us)\n"
                                     "0,APP,0,1024,1024,1700000000000100.000\t\n")
    tv = json.loads((_shared(f"{LEVELS}/text/level1/rank0_ascend_pt") / OUT /
                     "trace_view.json").read_text())
    _w(out / "msprof_20240101.json", json.dumps(tv[:200]))
    real = _shared(f"{LEVELS}/text/level1/rank0_ascend_pt") / OUT
    for n in ("communication.json", "communication_matrix.json"):
        _w(d / "analyze" / n, (real / n).read_text())
    (d / "msprof_20240101.db").write_bytes(b"")
    return d.parent


def build_prof_task_time_only(tmp: Path) -> Path:
    """BUILT: a ``mindstudio_profiler_output`` with task_time_*.csv and no op_summary."""
    d = tmp / "prof_tt" / "PROF_000002_20240101_DEF"
    _w(d / "device_0" / "info.json.0", json.dumps({"rank_id": 0, "DeviceInfo": [{"id": 0}]}))
    _w(d / "mindstudio_profiler_output" / "task_time_20240101.csv",
       "Device_id,kernel_name,kernel_type,stream_id,task_id,task_time(us),task_start(us),"
       "task_stop(us)\n0,MatMul_1,KERNEL_AICORE,2,10,12.250,1700000000000100.500\t,"
       "1700000000000112.750\t\n0,Add_2,KERNEL_AIVEC,2,11,1.000,1700000000000200.000\t,"
       "1700000000000201.000\t\n")
    return d.parent


def build_prof_raw(tmp: Path) -> Path:
    """BUILT: PROF_ raw data (CANN 6+ binary logs; no public sample) -- the builder of
    test_raw_cann.py (STARS device log, host task_track / node_basic_info, dictionaries)."""
    from test_raw_cann import _build_prof_raw

    return _build_prof_raw(tmp / "raw").parent


def build_prof_raw_hccl(tmp: Path) -> Path:
    """BUILT: PROF_ raw data with HCCL small tasks (api_event, hccl_op_info, hccl_info) -- the
    builder of test_raw_cann_comm.py."""
    from test_raw_cann_comm import _build

    root = tmp / "rawcomm"
    root.mkdir()
    _build(root)
    return root


# ------------------------------------------------------------------------------- rows

class Row:
    """One row of docs/readers.md: ``producer`` and ``file`` as the table writes them, and the
    check: ``run(tmp)`` builds or finds the fixture and asserts what the reader gives."""

    def __init__(self, producer: str, file: str, run):
        self.producer, self.file, self.run = producer, file, run

    @property
    def id(self) -> str:
        return f"{self.producer} | {self.file}"


def _torch_csv(level, name, table, col=None):
    def run(tmp):
        root = _text_rank(level)
        data = _read(root, 0)
        rows = _csv_rows(root / "rank0_ascend_pt" / OUT / name)
        assert rows and _n(data, table) == len(rows)
        if col:  # one value as written, to the ns
            first = data.tables[table].column(col[1])[0].as_py()
            assert first == col[2](rows[0][col[0]])
    return run


def _us_ns(text: str) -> int:
    """us text -> ns, rounded half-up at the ns (the profiler's 231290.09999999995 us)."""
    return int((Decimal(text.strip()) * 1000).quantize(Decimal(1), ROUND_HALF_UP))


def _kernels_level(level):
    def run(tmp):
        root = _text_rank(level)
        data = _read(root, 0)
        rows = _csv_rows(root / "rank0_ascend_pt" / OUT / "kernel_details.csv")
        k = data.tables[S.KERNELS]
        assert k.num_rows == len(rows)
        assert k.column("start_ns")[0].as_py() == _us_ns(rows[0]["Start Time(us)"])
        pmu = [c for c in k.column_names if c.startswith(S.PMU_PREFIX)]
        assert bool(pmu) == (level > 0), pmu  # Level0: base columns only
    return run


def _comm_json(level):
    def run(tmp):
        root = _text_rank(level)
        data = _read(root, 0)
        assert _n(data, S.COMM_OPS) == _comm_json_ops(root / "rank0_ascend_pt" / OUT /
                                                      "communication.json") > 0
        assert _n(data, S.COMM_BANDWIDTH) > 0
    return run


def _matrix_json(level):
    def run(tmp):
        root = _text_rank(level)
        data = _read(root, 0)
        assert _n(data, S.COMM_LINKS) == _matrix_links(
            root / "rank0_ascend_pt" / OUT / "communication_matrix.json") > 0
    return run


def _trace_view(level):
    def run(tmp):
        root = _text_rank(level)
        data = _read(root, 0, timeline=True)
        events = json.loads((root / "rank0_ascend_pt" / OUT / "trace_view.json").read_text())
        steps = [e for e in events if e.get("ph") == "X"
                 and str(e.get("name", "")).startswith("ProfilerStep#")]
        assert _n(data, S.STEPS) == len(steps) > 0
        tracks = set(data.tables[S.TIMELINE].column("track").to_pylist())
        assert {"hardware", "step"} <= tracks
    return run


def _profiler_info(root_fn, rank_dir, rank=0):
    def run(tmp):
        root = root_fn()
        data = _read(root, rank)
        info = json.loads(next((root / rank_dir).glob("profiler_info*.json")).read_text())
        assert data.meta["profiler_info"] == info
    return run


def _metadata(tmp):
    root = FIXTURES / "qwen3-4rank-pp2dp2"
    data = _read(root, 0)
    md = json.loads((root / "rank_0_ascend_pt" / "profiler_metadata.json").read_text())
    assert data.meta["profiler_metadata"] == md


def _not_read(root_fn, rank, name, kind=None):
    def run(tmp):
        root = root_fn(tmp) if callable(root_fn) else root_fn
        assert any(p.name == name or re.fullmatch(name, p.name) for p in root.rglob("*")), name
        data = _read(root, rank, kind)
        _no_problem_names(data, name)
        assert data.tables  # the rank's other files are read
    return run


def _static(tmp):
    root = FIXTURES / "torch_npu-static-graph-mem"
    data = _read(root, 0)
    rows = _csv_rows(root / "rank0_ascend_pt" / OUT / "static_op_mem.csv")
    assert _n(data, S.STATIC_OP_MEM) == len(rows) > 0


def _db(level, table, sql, extra=None):
    def run(tmp):
        root = _db_level(level)
        data = _read(root, 0)
        db = root / "rank0_ascend_pt" / OUT / "ascend_pytorch_profiler_0.db"
        want = _count(db, sql)
        got = extra(data) if extra else _n(data, table)
        assert got == want, (got, want)
    return run


def _analysis_db(level, table, sql, extra=None):
    def run(tmp):
        root = _db_level(level)
        data = _read(root, 0)
        want = _count(root / "rank0_ascend_pt" / OUT / "analysis.db", sql)
        got = extra(data) if extra else _n(data, table)
        assert got == want and want > 0, (got, want)
    return run


def _tl(track, thread_suffix=None):
    def count(data):
        tl = data.tables[S.TIMELINE].to_pylist()
        return sum(r["track"] == track and (thread_suffix is None or
                                            r["thread"].endswith(thread_suffix)) for r in tl)
    return count


def _comm_kernels(data):
    k = data.tables[S.KERNELS]
    return sum(c == "HCCL" for c in k.column("accelerator_core").to_pylist())


def _compute_kernels(data):
    return _n(data, S.KERNELS) - _comm_kernels(data)


def _big_ops(data):
    return sum(r["track"] == "communication" and not r["thread"].endswith(" tasks")
               for r in data.tables[S.TIMELINE].to_pylist())


def _api_groups(data):
    return _n(data, S.API_STATISTIC)


def _ms_text(check):
    def run(tmp):
        root = build_mindspore_text(tmp)
        data = _read(root, 0)
        check(data, root / "rank0_ascend_ms" / OUT)
    return run


def _ms_step_trace(data, out):
    assert _n(data, S.STEP_TRACE) == len(_csv_rows(out / "step_trace_time.csv")) > 0
    assert data.tables[S.STEP_TRACE].column("device_id").null_count == _n(data, S.STEP_TRACE)


def _ms_kernels(data, out):
    rows = _csv_rows(out / "kernel_details.csv")
    k = data.tables[S.KERNELS]
    assert k.num_rows == len(rows) and "Step ID" in rows[0] and "Model Name" in rows[0]
    assert k.column("step").to_pylist()[0] == int(rows[0]["Step ID"])


def _ms_comm(data, out):
    assert _n(data, S.COMM_OPS) == _comm_json_ops(out / "communication.json")
    assert _n(data, S.COMM_LINKS) == _matrix_links(out / "communication_matrix.json")


def _ms_minddata(data, out):
    raw = _csv_rows(out / "minddata_pipeline_raw_0.csv")
    assert _n(data, S.DATASET_OPS) == len(raw) > 0
    host = [ln for ln in (out / "device_queue_profiling_0.txt").read_text().splitlines()
            if ln.strip()]
    device = [ln for ln in (out / "minddata_aicpu_0.txt").read_text().splitlines() if ln.strip()]
    q = data.tables[S.DATASET_QUEUE].column("queue").to_pylist()
    assert q.count("host") == len(host) and q.count("device") == len(device)


def _ms_not_read(data, out):
    _no_problem_names(data, "dataset.csv")


def _ms_db(tmp):
    root = build_mindspore_db(tmp)
    data = _read(root, 0)
    db = root / "rank0_ascend_ms" / OUT / "ascend_mindspore_profiler_0.db"
    assert _compute_kernels(data) == _count(
        db, "SELECT COUNT(*) FROM TASK t JOIN COMPUTE_TASK_INFO c ON t.globalTaskId = c.globalTaskId")
    assert _n(data, S.STEP_TRACE) == _count(root / "rank0_ascend_ms" / OUT / "analysis.db",
                                            "SELECT COUNT(*) FROM StepTraceTime")


def _prof(check, builder=build_prof_export, kind="prof"):
    def run(tmp):
        root = builder(tmp)
        data = _read(root, 0, kind)
        check(data, next(root.iterdir()))
    return run


def _prof_op_summary(data, d):
    rows = [r for p in sorted((d / "mindstudio_profiler_output").glob("op_summary_*.csv"))
            for r in _csv_rows(p)]
    k = data.tables[S.KERNELS]
    assert k.column("name").to_pylist() == [r["Op Name"] for r in rows]
    assert k.column("start_ns").to_pylist() == [_us_ns(r["Task Start Time(us)"]) for r in rows]


def _prof_task_time(data, d):
    rows = _csv_rows(next((d / "mindstudio_profiler_output").glob("task_time_*.csv")))
    assert data.tables[S.KERNELS].column("name").to_pylist() == [r["kernel_name"] for r in rows]


def _prof_csv(table, module):
    def check(data, d):
        rows = _csv_rows(next((d / "mindstudio_profiler_output").glob(f"{module}_*.csv")))
        assert _n(data, table) == len(rows) > 0
    return check


def _prof_msprof_json(data, d):
    events = json.loads(next((d / "mindstudio_profiler_output").glob("msprof_*.json")).read_text())
    assert data.has(S.TIMELINE) and _n(data, S.TIMELINE) <= len(events)
    assert _n(data, S.TIMELINE) > 0


def _prof_analyze(data, d):
    assert _n(data, S.COMM_OPS) == _comm_json_ops(d / "analyze" / "communication.json") > 0
    assert _n(data, S.COMM_LINKS) == _matrix_links(d / "analyze" / "communication_matrix.json")


def _prof_not_read(name):
    def check(data, d):
        _no_problem_names(data, name)
    return check


def _legacy_prof(check):
    def run(tmp):
        root = _shared(f"{LEGACY}/profiler")
        srcs = [s for s in scan(root, Problems()) if s.kind == "prof"]
        assert srcs
        src = srcs[0]
        data = read_source(src)
        check(data, Path(src.path), src)
    return run


def _lp_task_time(data, d, src):
    tl = d / f"device_{src.device_id}" / "timeline"
    n = 0
    for p in tl.glob("task_time_*.json"):
        n += sum(1 for e in json.loads(p.read_text()) if e.get("ph") == "X")
    assert _n(data, S.KERNELS) == n > 0


def _lp_step_trace(data, d, src):
    """Every step_trace file repeats the iterations: one row per distinct iteration."""
    its = set()
    for p in (d / f"device_{src.device_id}" / "timeline").glob("step_trace_*.json"):
        for e in json.loads(p.read_text()):
            it = (e.get("args") or {}).get("Iteration ID")
            if e.get("ph") == "X" and it is not None:
                its.add(int(it))
    assert _n(data, S.ITERATIONS) == len(its) > 0


def _lp_timeline(data, d, src):
    assert _n(data, S.TIMELINE) > 0


def _lp_info(data, d, src):
    info = next(d.glob("device_*/info.json.*[0-9]"))
    assert data.meta["prof_info"] == json.loads(info.read_text())
    assert src.rank == json.loads(info.read_text()).get("rank_id", src.rank)


def _lp_start_info(data, d, src):
    # start_info moves the monotonic times to wall clock (us since 1970 > 10^15)
    assert data.tables[S.KERNELS].column("start_ns")[0].as_py() > 10 ** 18


def _job3(tmp):
    root = _shared(f"{LEGACY}/JOB3")
    data = _read(root, None, "raw_cann")
    desc = [ln for ln in (root / "Framework.host.vm.task_desc_info.1.slice_0").read_text()
            .splitlines() if ln.strip()]
    assert 0 < _n(data, S.KERNELS) and desc


def _raw_prof(tmp):
    root = build_prof_raw(tmp)
    data = _read(root, None, "raw_cann")
    assert data.tables[S.KERNELS].column("name").to_pylist() == ["MatMul_1", "Add_2"]


def _raw_prof_hccl(tmp):
    root = build_prof_raw_hccl(tmp)
    data = _read(root, None, "raw_cann")
    assert _n(data, S.COMM_OPS) > 0 and _n(data, S.COMM_LINKS) > 0


def _legacy(rel, rank, check):
    def run(tmp):
        root = _shared(f"{LEGACY}/{rel}")
        data = _read(root, rank, "legacy_mindspore")
        check(data, root, rank)
    return run


def _lg_step_trace(data, root, rank):
    rows = _csv_rows(root / f"step_trace_raw_{rank}_detail_time.csv")
    steps = [r for r in rows if r["step_num"] not in ("-", "0", "")]
    assert _n(data, S.ITERATIONS) == len(steps) > 0


def _lg_cluster_analyse(data, root, rank):
    f = next(root.glob(f"ascend_cluster_analyse_*_{rank}.csv"))
    rows = _csv_rows(f)
    assert _n(data, S.STEP_TRACE) in (len(rows), len(rows) - 1) and rows


def _lg_hccl_raw(data, root, rank):
    """One COMM_OPS row per op of each step's communication_operator_cost."""
    want = sum(len(json.loads(r["communication_operator_cost"]))
               for r in _csv_rows(root / f"hccl_raw_{rank}.csv")
               if r["step_num"] not in ("-", "0", "") and r["communication_operator_cost"])
    assert _n(data, S.COMM_OPS) == want > 0


def _lg_timeline_data(data, root, rank):
    lines = [ln for ln in (root / f"output_timeline_data_{rank}.txt").read_text().splitlines()[1:]
             if ln.strip()]
    assert _n(data, S.KERNELS) == len(lines) > 0


def _lg_display(data, root, rank):
    assert (root / f"ascend_timeline_display_{rank}.json").is_file()
    assert _n(data, S.TIMELINE) > 0


def _lg_minddata(data, root, rank):
    raw = _csv_rows(root / f"minddata_pipeline_raw_{rank}.csv")
    assert _n(data, S.DATASET_OPS) == len(raw) > 0 and _n(data, S.DATASET_QUEUE) > 0


def _lg_aicore_alone(tmp):
    """BUILT from real files: the run_2 rank with only its aicore_intermediate_1_detail.csv and
    step trace (no output_timeline_data): one kernel row per op from the aicore file."""
    src = _shared(f"{LEGACY}/run_2/normal_run/profiler")
    dst = tmp / "aicore" / "profiler"
    dst.mkdir(parents=True)
    for n in ("aicore_intermediate_1_detail.csv", "step_trace_raw_1_detail_time.csv"):
        shutil.copy(src / n, dst / n)
    data = _read(dst, 1, "legacy_mindspore")
    rows = _csv_rows(dst / "aicore_intermediate_1_detail.csv")
    assert _n(data, S.KERNELS) == len(rows) > 0


def _lg_memory_summary(tmp):
    """BUILT: memory_usage_summary_{rank}.json (no public sample) beside a real legacy rank,
    with the capacity MindSpore writes."""
    src = _shared(f"{LEGACY}/run_2/normal_run/profiler")
    dst = tmp / "mem" / "profiler"
    shutil.copytree(src, dst)
    (dst / "memory_usage_summary_1.json").write_text(json.dumps(
        {"capacity": 31.5, "allocations": 10, "deallocations": 10, "peak_mem": 1.25,
         "static_mem": 0.5}))
    data = _read(dst, 1, "legacy_mindspore")
    assert data.meta["memory_capacity_mb"] == pytest.approx(31.5 * 1024)


LV = (0, 1, 2)
ROWS: list[Row] = []


def _add(producer, file, run):
    ROWS.append(Row(producer, file, run))


for lv in LV:
    p = f"torch_npu text Level{lv}"
    _add(p, "step_trace_time.csv", _torch_csv(lv, "step_trace_time.csv", S.STEP_TRACE,
                                                ("Computing", "computing_ns", _us_ns)))
    _add(p, "kernel_details.csv", _kernels_level(lv))
    _add(p, "trace_view.json", _trace_view(lv))
    _add(p, "memory_record.csv", _torch_csv(lv, "memory_record.csv", S.MEMORY_RECORD,
                                              ("Timestamp(us)", "ts_ns", _us_ns)))
    _add(p, "operator_memory.csv", _torch_csv(lv, "operator_memory.csv", S.OPERATOR_MEMORY,
                                                ("Allocation Time(us)", "alloc_ns", _us_ns)))
    _add(p, "npu_module_mem.csv", _torch_csv(lv, "npu_module_mem.csv", S.NPU_MODULE_MEM))
    _add(p, "profiler_info_{rank}.json",
         _profiler_info(lambda lv=lv: _text_rank(lv), "rank0_ascend_pt"))
    _add(p, "operator_details.csv, l2_cache.csv",
         _not_read(lambda tmp, lv=lv: _text_rank(lv), 0, "l2_cache.csv"))
    if lv:
        _add(p, "op_statistic.csv", _torch_csv(lv, "op_statistic.csv", S.OP_STATISTIC))
        _add(p, "api_statistic.csv", _torch_csv(lv, "api_statistic.csv", S.API_STATISTIC))
        _add(p, "communication.json", _comm_json(lv))
        _add(p, "communication_matrix.json", _matrix_json(lv))
_add("torch_npu text", "profiler_metadata.json", _metadata)
_add("torch_npu text", "static_op_mem.csv", _static)

_TASK_COMPUTE = ("SELECT COUNT(*) FROM TASK t JOIN COMPUTE_TASK_INFO c "
                 "ON t.globalTaskId = c.globalTaskId")
for lv in LV:
    p = f"torch_npu db Level{lv}"
    _add(p, "TASK, COMPUTE_TASK_INFO, STRING_IDS", _db(lv, S.KERNELS, _TASK_COMPUTE,
                                                       _compute_kernels))
    _add(p, "COMMUNICATION_OP", _db(lv, S.KERNELS, "SELECT COUNT(*) FROM COMMUNICATION_OP",
                                    _big_ops))
    _add(p, "COMMUNICATION_TASK_INFO",
         _db(lv, S.TIMELINE, "SELECT COUNT(DISTINCT opId) FROM COMMUNICATION_TASK_INFO",
             _tl("communication", " tasks")))
    _add(p, "STEP_TIME", _db(lv, S.STEPS, "SELECT COUNT(*) FROM STEP_TIME"))
    _add(p, "MEMORY_RECORD, NPU_MEM", _db(
        lv, S.MEMORY_RECORD, "SELECT (SELECT COUNT(*) FROM MEMORY_RECORD) + "
        "(SELECT COUNT(*) FROM NPU_MEM WHERE type = (SELECT id FROM STRING_IDS WHERE "
        "value = 'app'))"))
    _add(p, "OP_MEMORY", _db(lv, S.OPERATOR_MEMORY, "SELECT COUNT(*) FROM OP_MEMORY"))
    _add(p, "NPU_MODULE_MEM", _db(lv, S.NPU_MODULE_MEM, "SELECT COUNT(*) FROM NPU_MODULE_MEM"))
    _add(p, "CANN_API", _db(lv, S.API_STATISTIC,
                            "SELECT COUNT(*) FROM (SELECT DISTINCT type, name FROM CANN_API)",
                            _api_groups))
    _add(p, "analysis.db StepTraceTime",
         _analysis_db(lv, S.STEP_TRACE, "SELECT COUNT(*) FROM StepTraceTime"))
    if lv:
        _add(p, "analysis.db CommAnalyzerTime", _analysis_db(
            lv, S.COMM_OPS, "SELECT COUNT(*) FROM (SELECT DISTINCT step, type, hccl_op_name, "
            "group_name FROM CommAnalyzerTime)"))
        _add(p, "analysis.db CommAnalyzerBandwidth", _analysis_db(
            lv, S.COMM_SIZE_DIST, "SELECT COUNT(*) FROM CommAnalyzerBandwidth WHERE count > 0"))
        _add(p, "analysis.db CommAnalyzerMatrix", _analysis_db(
            lv, S.COMM_LINKS, "SELECT COUNT(*) FROM CommAnalyzerMatrix"))
_add("torch_npu db Level1", "OVERLAP_ANALYSIS",
     _db(1, S.TIMELINE, "SELECT COUNT(*) FROM OVERLAP_ANALYSIS", _tl("overlap")))
_add("torch_npu db", "PYTORCH_API", _db(
    1, S.TIMELINE, "SELECT COUNT(*) FROM PYTORCH_API p JOIN STRING_IDS s ON s.id = p.name "
    "WHERE s.value LIKE 'enumerate(DataLoader)%'", _tl("dataloader")))
_add("torch_npu db", "META_DATA, RANK_DEVICE_MAP", _db(
    1, None, "SELECT deviceId FROM RANK_DEVICE_MAP WHERE rankId = 0",
    lambda data: data.meta["device_id"]))

_add("MindSpore text", "step_trace_time.csv", _ms_text(_ms_step_trace))
_add("MindSpore text", "kernel_details.csv", _ms_text(_ms_kernels))
_add("MindSpore text", "communication.json, communication_matrix.json", _ms_text(_ms_comm))
_add("MindSpore text", "minddata_pipeline_raw_{rank}.csv, minddata_cpu_utilization_{rank}.json, "
     "device_queue_profiling_{rank}.txt, minddata_aicpu_{rank}.txt", _ms_text(_ms_minddata))
_add("MindSpore text", "dataset.csv", _ms_text(_ms_not_read))
_add("MindSpore db", "ascend_mindspore_profiler_{rank}.db, analysis.db", _ms_db)

_add("PROF_ mindstudio_profiler_output", "op_summary_*.csv", _prof(_prof_op_summary))
_add("PROF_ mindstudio_profiler_output", "task_time_*.csv",
     _prof(_prof_task_time, build_prof_task_time_only))
_add("PROF_ mindstudio_profiler_output", "op_statistic_*.csv",
     _prof(_prof_csv(S.OP_STATISTIC, "op_statistic")))
_add("PROF_ mindstudio_profiler_output", "api_statistic_*.csv",
     _prof(_prof_csv(S.API_STATISTIC, "api_statistic")))
_add("PROF_ mindstudio_profiler_output", "step_trace_*.csv",
     _prof(_prof_csv(S.ITERATIONS, "step_trace")))
_add("PROF_ mindstudio_profiler_output", "msprof_*.json", _prof(_prof_msprof_json))
_add("PROF_ mindstudio_profiler_output", "analyze/communication.json, "
     "analyze/communication_matrix.json", _prof(_prof_analyze))
_add("PROF_ mindstudio_profiler_output", "communication_statistic_*.csv, npu_mem_*.csv, "
     "msprof_*.db", _prof(_prof_not_read("npu_mem_")))
_add("PROF_ (CANN 2023, per-iteration timeline)", "device_{id}/timeline/task_time_*.json",
     _legacy_prof(_lp_task_time))
_add("PROF_ (CANN 2023, per-iteration timeline)", "device_{id}/timeline/step_trace_*.json",
     _legacy_prof(_lp_step_trace))
_add("PROF_ (CANN 2023, per-iteration timeline)", "device_{id}/timeline/msprof_*.json, hccl_*.json",
     _legacy_prof(_lp_timeline))
_add("PROF_ (CANN 2023, per-iteration timeline)", "device_{id}/info.json.{id}",
     _legacy_prof(_lp_info))
_add("PROF_ (CANN 2023, per-iteration timeline)", "device_{id}/start_info.{id}",
     _legacy_prof(_lp_start_info))

_add("raw CANN (legacy JOB)", "hwts.log.data.*, Framework.host.vm.task_desc_info.*, "
     "graph_desc_info.*", _job3)
_add("raw CANN (legacy JOB)", "training_trace.*",
     _not_read(lambda tmp: _shared(f"{LEGACY}/JOB3"), None, r"training_trace\..*", "raw_cann"))
_add("raw CANN (PROF_ data/)", "device_{id}/data/stars_soc.data.*, host/data/*task_track*, "
     "*node_basic_info*, *hash_dic*, *type_info_dic*", _raw_prof)
_add("raw CANN (PROF_ data/)", "host/data/*api_event*, *hccl_op_info*, *hccl_info*", _raw_prof_hccl)

_add("legacy MindSpore", "step_trace_raw_{rank}_detail_time.csv",
     _legacy("cluster_propose", 1, _lg_step_trace))
_add("legacy MindSpore", "ascend_cluster_analyse_*_{rank}.csv",
     _legacy("cluster_propose", 2, _lg_cluster_analyse))
_add("legacy MindSpore", "hccl_raw_{rank}.csv", _legacy("cluster_propose", 3, _lg_hccl_raw))
_add("legacy MindSpore", "output_timeline_data_{rank}.txt",
     _legacy("run_2/normal_run/profiler", 1, _lg_timeline_data))
_add("legacy MindSpore", "aicore_intermediate_{rank}_detail.csv", _lg_aicore_alone)
_add("legacy MindSpore", "ascend_timeline_display_{rank}.json",
     _legacy("run_2/normal_run/profiler", 1, _lg_display))
_add("legacy MindSpore", "minddata_pipeline_raw_{rank}.csv, device_queue_profiling_{rank}.txt, "
     "minddata_aicpu_{rank}.txt, minddata_cpu_utilization_{rank}.json",
     _legacy("run_2/normal_run/profiler", 1, _lg_minddata))
_add("legacy MindSpore", "memory_usage_summary_{rank}.json", _lg_memory_summary)


@pytest.mark.parametrize("row", ROWS, ids=[r.id for r in ROWS])
def test_row(row, tmp_path):
    row.run(tmp_path)


def _doc_rows() -> list[tuple[str, str]]:
    out = []
    for line in DOC.read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 5 and line.startswith("|") and not set(cells[0]) <= {"-", " "} \
                and cells[0] != "producer":
            out.append((cells[0].replace("`", ""), cells[1].replace("`", "")))
    return out


def test_doc_table_and_rows_list_the_same_files():
    doc = _doc_rows()
    ids = [(r.producer, r.file) for r in ROWS]
    assert len(ids) == len(set(ids))
    assert sorted(doc) == sorted(ids), (sorted(set(doc) - set(ids)), sorted(set(ids) - set(doc)))
