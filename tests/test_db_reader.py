"""The SQLite export reader (ascendprof.readers.db, spec §B) against real data.

Expected values come only from the profiler's own files, read here independently with the
stdlib (csv, json, sqlite3): kernel_details.csv / step_trace_time.csv / communication*.json
of the text export, and the StepTraceTime rows of analysis.db.
"""

from __future__ import annotations

import csv
import hashlib
import json
import shutil
import sqlite3
from collections import Counter
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path

import pytest

from ascendprof.model import schemas as S
from ascendprof.model.errors import InputError
from ascendprof.scan import load_sources as load
from ascendprof.model.problems import Problems
from ascendprof.readers import db as dbreader
from ascendprof.readers import read_source
from ascendprof.scan import DB, TORCH_TEXT, Source, one_per_rank, scan

OUT = "ASCEND_PROFILER_OUTPUT"
LEVELS = ("level0", "level1", "level2")


def _source(rank_dir: Path) -> Source:
    found = scan(rank_dir, Problems())
    assert len(found) == 1 and found[0].kind == DB, found
    return found[0]


def _levels(shared_data: Path) -> Path:
    return shared_data / "torch_npu-2rank-levels"


def _sha(paths) -> dict[str, str]:
    return {str(p): hashlib.sha256(Path(p).read_bytes()).hexdigest() for p in paths}


def _ro(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)


# ----------------------------------------------------------------------------- kernels

@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("rank", (0, 1))
def test_kernels_match_text_export_of_the_same_level(shared_data, level, rank):
    """db and text exports of one level are two separate runs of the same job (different
    timestamps, see the step windows), so times differ; what the job launched must not.

    Tolerance: the multiset of (op type, accelerator core) must be equal, and so must the count
    per op type. This run shape is fully deterministic (a fixed CNN, one step), so "as two runs of
    one job differ" means zero difference here; a difference of one kernel would already reveal a
    lost or duplicated row.
    """
    base = _levels(shared_data)
    data = dbreader.read(_source(base / "db" / level / f"rank{rank}_ascend_pt"))
    k = data.tables[S.KERNELS]
    got = Counter(zip(k["op_type"].to_pylist(), k["accelerator_core"].to_pylist()))

    text = base / "text" / level / f"rank{rank}_ascend_pt" / OUT / "kernel_details.csv"
    with open(text, newline="", encoding="utf-8-sig") as f:
        rows = list(csv.DictReader(f))
    # kernel_details writes "N/A" for an unknown type or core (every Level0 type): no value
    want = Counter((_na(r["Type"]), _na(r["Accelerator Core"])) for r in rows)

    assert set(got) == set(want)
    assert Counter(t for t, _ in got.elements()) == Counter(t for t, _ in want.elements())
    assert got == want
    # every kernel of the one collected step is inside its STEP_TIME window
    assert set(k["step"].to_pylist()) == {int(r["Step Id"]) for r in rows} == {50}


def _na(v: str) -> str | None:
    return None if v == "N/A" else v


def test_kernel_columns_resolved_from_string_ids(shared_data):
    """Names, shapes and types are STRING_IDS values, not ids; times are ns from TASK. Shapes
    lose the double quotes torch_npu wraps them in, as the text export's are read."""
    path = _levels(shared_data) / "db" / "level2" / "rank0_ascend_pt"
    dbfile = path / OUT / "ascend_pytorch_profiler_0.db"
    data = dbreader.read(_source(path))
    k = data.tables[S.KERNELS]
    assert k.schema.names[: len(S.SCHEMAS[S.KERNELS])] == S.SCHEMAS[S.KERNELS].names
    with _ro(dbfile) as c:
        name, shapes, start, end = c.execute(
            """SELECT n.value, sh.value, t.startNs, t.endNs FROM TASK t
               JOIN COMPUTE_TASK_INFO ci ON ci.globalTaskId = t.globalTaskId
               JOIN STRING_IDS n ON n.id = ci.name JOIN STRING_IDS sh ON sh.id = ci.inputShapes
               ORDER BY t.startNs LIMIT 1""").fetchone()
    first = [r for r in k.to_pylist() if r["accelerator_core"] != dbreader.COMM_CORE][0]
    assert shapes.startswith('"') and shapes.endswith('"')  # as the profiler wrote it
    assert (first["name"], first["input_shapes"]) == (name, shapes[1:-1])
    assert (first["start_ns"], first["dur_ns"]) == (start, end - start)
    assert first["rank"] == 0 and first["device_id"] == 0


# ----------------------------------------------------------------------------- step trace

@pytest.mark.parametrize("level", LEVELS)
def test_step_trace_equals_step_trace_time_table(shared_data, level):
    rank_dir = _levels(shared_data) / "db" / level / "rank1_ascend_pt"
    data = dbreader.read(_source(rank_dir))
    st = data.tables[S.STEP_TRACE].to_pylist()
    with _ro(rank_dir / OUT / "analysis.db") as c:
        c.row_factory = sqlite3.Row
        rows = [dict(r) for r in c.execute("SELECT * FROM StepTraceTime")]
    assert len(st) == len(rows) == 1
    got, want = st[0], rows[0]
    assert got["step"] == int(want["step"]) == 50
    assert got["device_id"] == 1  # StepTraceTime has no deviceId here: RANK_DEVICE_MAP
    for src, dst in (("computing", "computing_ns"), ("free", "free_ns"),
                     ("communication_not_overlapped", "comm_not_overlapped_ns"),
                     ("overlapped", "overlapped_ns"), ("communication", "communication_ns"),
                     ("stage", "stage_ns"), ("bubble", "bubble_ns"), ("preparing", "preparing_ns"),
                     ("communication_not_overlapped_and_exclude_receive",
                      "comm_not_overlapped_excl_receive_ns")):
        assert got[dst] == round(want[src] * 1000), src


# Stage and Preparing of step_trace_time.csv come from float microsecond timestamps near
# 1.76e15 us, whose float64 spacing is 0.25 us (the CSV values are multiples of 0.25), while
# analysis.db computes them from integer ns. So those two may differ by up to 0.25 us; every
# other column is a sum of durations and matches to 3 decimals.
_FLOAT_TS_TOLERANCE_US = 0.25


@pytest.mark.parametrize("rank", (0, 1, 2, 3))
def test_qwen3_analysis_db_step_trace_vs_csv(qwen3, rank):
    rank_dir = qwen3 / f"rank_{rank}_ascend_pt"
    src = Source(path=str(rank_dir), kind=DB, rank=rank,
                 files=[f"{OUT}/analysis.db", f"profiler_info_{rank}.json"])
    data = dbreader.read(src)
    assert "profiler .db" in data.missing  # only analysis.db in this fixture
    got = data.tables[S.STEP_TRACE].to_pylist()
    with open(rank_dir / OUT / "step_trace_time.csv", newline="") as f:
        want = list(csv.DictReader(f))
    assert len(got) == len(want) == 1
    g, w = got[0], want[0]
    assert g["step"] == int(w["Step"]) and g["device_id"] == int(w["Device_id"])
    exact = {"Computing": "computing_ns", "Communication(Not Overlapped)": "comm_not_overlapped_ns",
             "Overlapped": "overlapped_ns", "Communication": "communication_ns", "Free": "free_ns",
             "Bubble": "bubble_ns",
             "Communication(Not Overlapped and Exclude Receive)":
                 "comm_not_overlapped_excl_receive_ns"}
    for col, dst in exact.items():
        assert g[dst] / 1000 == pytest.approx(float(w[col]), abs=0.0005), col
    for col, dst in (("Stage", "stage_ns"), ("Preparing", "preparing_ns")):
        assert abs(g[dst] / 1000 - float(w[col])) <= _FLOAT_TS_TOLERANCE_US, col


# ----------------------------------------------------------------------------- communication

def _qwen3_db(qwen3: Path, rank: int):
    rank_dir = qwen3 / f"rank_{rank}_ascend_pt"
    src = Source(path=str(rank_dir), kind=DB, rank=rank, files=[f"{OUT}/analysis.db"])
    return rank_dir, dbreader.read(src)


@pytest.mark.parametrize("rank", (0, 1, 2, 3))
def test_qwen3_comm_ops_vs_communication_json(qwen3, rank):
    rank_dir, data = _qwen3_db(qwen3, rank)
    doc = json.loads((rank_dir / OUT / "communication.json").read_text())
    want = {}
    for step_key, kinds in doc.items():
        for kind, ops in kinds.items():
            for key, info in ops.items():
                if key == "Total Op Info":
                    continue
                op, group = key.rsplit("@", 1)
                want[(step_key, kind, op, group)] = info
    ops = data.tables[S.COMM_OPS].to_pylist()
    assert {(o["step_key"], o["kind"], o["op_name"], o["group"]) for o in ops} == set(want)
    for o in ops:
        t = want[(o["step_key"], o["kind"], o["op_name"], o["group"])]["Communication Time Info"]
        assert o["step"] == int(o["step_key"].removeprefix("step"))
        # the JSON float's shortest decimal text, times 1000 (exact, no float product)
        start_us = Decimal(repr(t["Start Timestamp(us)"]))
        assert o["start_ns"] == int((start_us * 1000).to_integral_value(ROUND_HALF_UP))
        for field, col in (("Elapse Time(ms)", "elapse_ns"), ("Transit Time(ms)", "transit_ns"),
                           ("Wait Time(ms)", "wait_ns"), ("Synchronization Time(ms)", "sync_ns"),
                           ("Idle Time(ms)", "idle_ns")):
            assert o[col] == round(t[field] * 1e6), field
        assert o["wait_ratio"] == pytest.approx(t["Wait Time Ratio"], abs=1e-9)
        assert o["sync_ratio"] == pytest.approx(t["Synchronization Time Ratio"], abs=1e-9)

    # bandwidth: the db lists the transports that carried data, the reader adds the JSON's zero
    # rows for the other four, so every (op, transport) of the JSON is there
    bw = {(b["op_name"], b["group"], b["transport"]): b
          for b in data.tables[S.COMM_BANDWIDTH].to_pylist()}
    want_bw = {}
    want_dist = Counter()
    for (step_key, kind, op, group), info in want.items():
        for transport, v in info["Communication Bandwidth Info"].items():
            want_bw[(op, group, transport)] = v
            for size, (count, dur_ms) in v["Size Distribution"].items():
                want_dist[(op, transport, size, count, round(dur_ms * 1e6))] += 1
    assert set(bw) == set(want_bw)
    for key, v in want_bw.items():
        assert bw[key]["size_mb"] == pytest.approx(v["Transit Size(MB)"], rel=1e-12)
        assert bw[key]["transit_ns"] == round(v["Transit Time(ms)"] * 1e6)
        assert bw[key]["bandwidth_gbps"] == pytest.approx(v["Bandwidth(GB/s)"], rel=1e-12)
        assert bw[key]["large_packet_ratio"] == pytest.approx(v["Large Packet Ratio"])
    got_dist = Counter((d["op_name"], d["transport"], d["packet_size_mb"], d["count"], d["dur_ns"])
                       for d in data.tables[S.COMM_SIZE_DIST].to_pylist())
    assert got_dist == want_dist


@pytest.mark.parametrize("rank", (0, 1, 2, 3))
def test_qwen3_comm_links_vs_communication_matrix_json(qwen3, rank):
    rank_dir, data = _qwen3_db(qwen3, rank)
    doc = json.loads((rank_dir / OUT / "communication_matrix.json").read_text())
    want = {}
    for step_key, kinds in doc.items():
        for kind, ops in kinds.items():
            for key, links in ops.items():
                for link, v in links.items():
                    src, dst = link.split("-")
                    want[(step_key, kind, key, int(src), int(dst))] = v
    got = {(r["step_key"], r["kind"], r["link_key"], r["src_rank"], r["dst_rank"]): r
           for r in data.tables[S.COMM_LINKS].to_pylist()}
    assert set(got) == set(want)
    for k, v in want.items():
        assert got[k]["transport"] == v["Transport Type"]
        assert got[k]["op_name"] == v.get("Op Name")  # absent for '-total' links
        assert got[k]["size_mb"] == pytest.approx(v["Transit Size(MB)"], rel=1e-12)
        assert got[k]["transit_ns"] == round(v["Transit Time(ms)"] * 1e6)
        assert got[k]["bandwidth_gbps"] == pytest.approx(v["Bandwidth(GB/s)"], rel=1e-12)


# ----------------------------------------------------------------------------- timeline

def test_timeline_tracks_follow_trace_view_conventions(shared_data):
    """level1 rank0 db holds OVERLAP_ANALYSIS; counts per type from the table itself."""
    rank_dir = _levels(shared_data) / "db" / "level1" / "rank0_ascend_pt"
    dbfile = rank_dir / OUT / "ascend_pytorch_profiler_0.db"
    tl = dbreader.read(_source(rank_dir)).tables[S.TIMELINE]
    with _ro(dbfile) as c:
        by_type = dict(c.execute("SELECT type, COUNT(*) FROM OVERLAP_ANALYSIS GROUP BY type"))
        n_task = c.execute("SELECT COUNT(*) FROM TASK").fetchone()[0]
        groups = [r[0] for r in c.execute(
            "SELECT s.value FROM COMMUNICATION_OP o JOIN STRING_IDS s ON s.id = o.groupName")]
        n_compute = c.execute("SELECT COUNT(*) FROM COMPUTE_TASK_INFO").fetchone()[0]
    rows = tl.to_pylist()
    overlap = Counter(r["thread"] for r in rows if r["track"] == "overlap")
    assert overlap == {"Computing": by_type[0], "Communication": by_type[1],
                       "Communication(Not Overlapped)": by_type[2], "Free": by_type[3]}
    assert all(r["name"] == r["thread"] for r in rows if r["track"] == "overlap")
    hw = [r for r in rows if r["track"] == "hardware"]
    assert len(hw) == n_task and all(r["thread"].startswith("Stream ") for r in hw)
    assert sum(r["task_type"] in ("AI_CORE", "AI_VECTOR_CORE", "MIX_AIV", "DSA_SQE")
               and not r["name"].isupper() for r in hw) == n_compute
    comm = [r for r in rows if r["track"] == "communication"]
    big = [r for r in comm if not r["thread"].endswith(" tasks")]
    assert [r["thread"] for r in big] == [f"Group {g} Communication" for g in groups]
    # per op the extent of its HCCL tasks (every op of this export has tasks)
    tasks = [r for r in comm if r["thread"].endswith(" tasks")]
    assert [r["thread"] for r in tasks] == [f"Group {g} Communication tasks" for g in groups]
    assert {r["task_type"] for r in tasks} == {"HCCL tasks"}
    assert [r["name"] for r in rows if r["track"] == "step"] == ["ProfilerStep#50"]


def test_missing_overlap_table_is_recorded(shared_data):
    rank_dir = _levels(shared_data) / "db" / "level2" / "rank0_ascend_pt"
    data = dbreader.read(_source(rank_dir))
    assert "ascend_pytorch_profiler_0.db:OVERLAP_ANALYSIS" in data.missing
    assert "overlap" not in set(data.tables[S.TIMELINE]["track"].to_pylist())


# ----------------------------------------------------------------------------- input safety

def test_input_databases_unchanged_after_reading(shared_data, qwen3):
    dirs = [_levels(shared_data) / "db" / lv / f"rank{r}_ascend_pt" for lv in LEVELS
            for r in (0, 1)]
    files = [p for d in dirs for p in sorted(d.rglob("*"))]
    before = _sha(p for p in files if p.is_file())
    for d in dirs:
        dbreader.read(_source(d))
    after_files = [p for d in dirs for p in sorted(d.rglob("*"))]
    assert after_files == files  # no -journal / -wal / -shm appeared
    assert _sha(p for p in after_files if p.is_file()) == before


def test_corrupt_database_raises_input_error_naming_it(tmp_path):
    rank_dir = tmp_path / "rank0_ascend_pt"
    (rank_dir / OUT).mkdir(parents=True)
    bad = rank_dir / OUT / "ascend_pytorch_profiler_0.db"
    bad.write_bytes(b"SQLite format 3\x00" + b"\xff" * 200)
    src = Source(path=str(rank_dir), kind=DB, rank=0, files=[f"{OUT}/{bad.name}"])
    with pytest.raises(InputError) as err:
        dbreader.read(src)
    assert str(bad) in str(err.value) and "\n" not in str(err.value)


def test_corrupt_analysis_db_next_to_good_profiler_db_is_a_problem(shared_data, tmp_path):
    good = _levels(shared_data) / "db" / "level0" / "rank0_ascend_pt"
    rank_dir = tmp_path / "rank0_ascend_pt"
    shutil.copytree(good, rank_dir)
    (rank_dir / OUT / "analysis.db").write_bytes(b"not a database at all" * 10)
    data = dbreader.read(_source(rank_dir))
    assert S.KERNELS in data.tables and S.STEP_TRACE not in data.tables
    assert any(p.path.endswith("analysis.db") for p in data.problems)


# ----------------------------------------------------------------------------- mixed trees

def test_mixed_tree_uses_text_once_and_says_so(shared_data, tmp_path):
    """Text and db copies of the same two ranks side by side: each rank is analysed once, from
    the text export, and the dropped db copy is named in a warning. (One collection exported
    both ways: both copies carry the text export's profiler_info, so they are one run; the real
    text and db collections ended 28 minutes apart and are two runs.)"""
    base = _levels(shared_data)
    for kind in ("text", "db"):
        for r in (0, 1):
            src = base / kind / "level1" / f"rank{r}_ascend_pt"
            dst = tmp_path / kind / f"rank{r}_ascend_pt"
            (dst / OUT).mkdir(parents=True)
            shutil.copy2(base / "text" / "level1" / f"rank{r}_ascend_pt" /
                         f"profiler_info_{r}.json", dst)
            wanted = ("step_trace_time.csv",) if kind == "text" else ("analysis.db",)
            for f in wanted:
                shutil.copy2(src / OUT / f, dst / OUT / f)
    # make the db copies the newest, so kind (not age) must decide
    for p in (tmp_path / "db").rglob("*"):
        p.touch()
    problems = Problems()
    found = scan(tmp_path, problems)
    assert sorted((s.rank, s.kind) for s in found) == [(0, DB), (0, TORCH_TEXT), (1, DB),
                                                        (1, TORCH_TEXT)]
    chosen = load(tmp_path, problems)
    assert [(s.rank, s.kind) for s in chosen] == [(0, TORCH_TEXT), (1, TORCH_TEXT)]
    assert all(DB in s.also for s in chosen)
    for r in (0, 1):
        dropped = [p for p in problems if p.path == str(tmp_path / "db" / f"rank{r}_ascend_pt")]
        assert dropped and dropped[0].severity == "warning"
        assert str(tmp_path / "text" / f"rank{r}_ascend_pt") in dropped[0].reason
        assert "torch_npu text" in dropped[0].reason


def test_one_directory_with_text_and_db_is_read_as_text(shared_data, tmp_path):
    base = _levels(shared_data)
    d = tmp_path / "rank0_ascend_pt"
    (d / OUT).mkdir(parents=True)
    shutil.copy2(base / "text/level1/rank0_ascend_pt/profiler_info_0.json", d)
    shutil.copy2(base / "text/level1/rank0_ascend_pt" / OUT / "step_trace_time.csv", d / OUT)
    shutil.copy2(base / "db/level1/rank0_ascend_pt" / OUT / "analysis.db", d / OUT)
    problems = Problems()
    (s,) = one_per_rank(scan(tmp_path, problems), problems)
    assert s.kind == TORCH_TEXT and s.also == [DB]


# ----------------------------------------------------------------------------- same tables

@pytest.mark.parametrize("rank", (0, 1, 2, 3))
def test_qwen3_comm_tables_identical_to_json_reader(qwen3, rank):
    """Same run, two inputs: the db reader's COMM_* tables equal those the communication.json
    reader builds (row order aside), so the cluster analyses see one set of tables."""
    from ascendprof.readers import communication

    rank_dir, data = _qwen3_db(qwen3, rank)
    js = communication.read_communication(rank_dir / OUT / "communication.json", rank)
    js[S.COMM_LINKS] = communication.read_matrix(rank_dir / OUT / "communication_matrix.json",
                                                 rank)
    for name in (S.COMM_OPS, S.COMM_BANDWIDTH, S.COMM_SIZE_DIST, S.COMM_LINKS):
        # opinfo_json is the communication.json text itself, which a db does not have
        a = [{k: v for k, v in r.items() if k != "opinfo_json"} for r in js[name].to_pylist()]
        b = [{k: v for k, v in r.items() if k != "opinfo_json"}
             for r in data.tables[name].to_pylist()]
        key = lambda r: json.dumps(r, sort_keys=True, default=str)  # noqa: E731
        assert len(a) == len(b), name
        for x, y in zip(sorted(a, key=key), sorted(b, key=key)):
            assert x.keys() == y.keys()
            for k in x:
                if isinstance(x[k], float):
                    assert y[k] == pytest.approx(x[k], rel=1e-12), (name, k)
                else:
                    assert y[k] == x[k], (name, k)


@pytest.mark.parametrize("level", LEVELS)
def test_operator_memory_matches_text_export(shared_data, level):
    """Allocation sizes of this fixed job repeat exactly between the two runs: the multiset of
    (name, size) of OP_MEMORY equals operator_memory.csv, GE rows named 'cann::<op>' in both."""
    base = _levels(shared_data)
    data = dbreader.read(_source(base / "db" / level / "rank0_ascend_pt"))
    got = Counter((r["name"], r["size_kb"]) for r in data.tables[S.OPERATOR_MEMORY].to_pylist())
    path = base / "text" / level / "rank0_ascend_pt" / OUT / "operator_memory.csv"
    with open(path, newline="") as f:
        want = Counter((r["Name"], float(r["Size(KB)"])) for r in csv.DictReader(f))
    assert got == want
    assert any(n.startswith("cann::") for n, _ in got)


def test_api_statistic_sums_cann_api(shared_data):
    """Count and total time per (level, API) against an independent sum over CANN_API."""
    rank_dir = _levels(shared_data) / "db" / "level2" / "rank0_ascend_pt"
    api = dbreader.read(_source(rank_dir)).tables[S.API_STATISTIC].to_pylist()
    with _ro(rank_dir / OUT / "ascend_pytorch_profiler_0.db") as c:
        rows = c.execute("""SELECT e.name, s.value, a.startNs, a.endNs FROM CANN_API a
                            JOIN ENUM_API_TYPE e ON e.id = a.type
                            JOIN STRING_IDS s ON s.id = a.name""").fetchall()
    want: dict = {}
    for level, name, start, end in rows:
        n, tot = want.get((level, name), (0, 0))
        want[(level, name)] = (n + 1, tot + end - start)
    assert {(r["level"], r["api_name"]): (r["count"], r["total_ns"]) for r in api} == want


def test_api_statistic_average_and_variance_through_read_source(shared_data):
    """Average (ns) and population variance (us^2) per (level, API), as api_statistic.csv
    gives them, against statistics.pvariance over the CANN_API durations in us."""
    import statistics

    rank_dir = _levels(shared_data) / "db" / "level2" / "rank1_ascend_pt"
    api = read_source(_source(rank_dir)).tables[S.API_STATISTIC].to_pylist()
    with _ro(rank_dir / OUT / "ascend_pytorch_profiler_1.db") as c:
        rows = c.execute("""SELECT e.name, s.value, a.endNs - a.startNs FROM CANN_API a
                            JOIN ENUM_API_TYPE e ON e.id = a.type
                            JOIN STRING_IDS s ON s.id = a.name""").fetchall()
    durs: dict = {}
    for level, name, d in rows:
        durs.setdefault((level, name), []).append(d)
    assert len(api) == len(durs) and any(len(v) > 1 for v in durs.values())
    for r in api:
        d = durs[(r["level"], r["api_name"])]
        assert r["avg_ns"] == round(sum(d) / len(d))
        assert r["variance"] == pytest.approx(statistics.pvariance([x / 1000 for x in d]),
                                              rel=1e-6, abs=1e-6)
    assert all(r["rank"] == 1 for r in api)


@pytest.mark.parametrize("rank", (0, 1))
def test_memory_tables_carry_the_rank_and_megabytes(shared_data, rank):
    """OP_MEMORY and NPU_MEM through read_source: every row carries the source's rank; totals
    are bytes / 2^20. NPU_MEM's APP rows (here STRING_IDS names the types 'app' and 'device';
    the app one is also the one whose largest ddr + hbm is the smaller, the device total
    including the application's memory) become MEMORY_RECORD rows of component APP, Total
    Reserved = (ddr + hbm) / 2^20 at each timestamp."""
    rank_dir = _levels(shared_data) / "db" / "level2" / f"rank{rank}_ascend_pt"
    data = read_source(_source(rank_dir))
    with _ro(rank_dir / OUT / f"ascend_pytorch_profiler_{rank}.db") as c:
        op_mem = c.execute("""SELECT size, allocationTotalReserved, releaseTotalAllocated
                              FROM OP_MEMORY ORDER BY allocationTime""").fetchall()
        npu = c.execute("SELECT type, ddr, hbm, timestampNs FROM NPU_MEM").fetchall()
    om = data.tables[S.OPERATOR_MEMORY].to_pylist()
    assert len(om) == len(op_mem) > 100 and {r["rank"] for r in om} == {rank}

    def flat(rows):  # sorted, flattened; a value the profiler left empty (not released) as -1
        return [-1.0 if v is None else v for row in sorted(
            tuple(-1.0 if v is None else v for v in row) for row in rows) for v in row]
    assert flat((r["size_kb"], r["alloc_total_reserved_mb"], r["release_total_allocated_mb"])
                for r in om) == pytest.approx(flat(
                    (sz / 1024, ar / 2**20, None if ra is None else ra / 2**20)
                    for sz, ar, ra in op_mem))
    peak: dict = {}
    for typ, ddr, hbm, _ in npu:
        peak[typ] = max(peak.get(typ, 0), ddr + hbm)
    assert len(peak) == 2
    app_type = min(peak, key=peak.get)
    want = sorted((ts, (ddr + hbm) / 2**20) for typ, ddr, hbm, ts in npu if typ == app_type)
    app = [r for r in data.tables[S.MEMORY_RECORD].to_pylist() if r["component"] == "APP"]
    assert {r["rank"] for r in app} == {rank}
    got = sorted((r["ts_ns"], r["total_reserved_mb"]) for r in app)
    assert [t for t, _ in got] == [t for t, _ in want] and len(want) > 10
    assert [v for _, v in got] == pytest.approx([v for _, v in want], rel=1e-12)


@pytest.mark.parametrize("level", LEVELS)
def test_step_breakdown_recompute_runs_on_db_timeline(shared_data, level):
    """The step breakdown recomputed from the db timeline equals the profiler's own
    StepTraceTime of the same file set: compute tasks are the TASK rows with COMPUTE_TASK_INFO
    (as CANN's overlap analysis takes them, §7.1.b) -- not the 5 short AI_CORE tasks per step
    without compute info (trace_view's '*_MemSet' kernels) that a type label would count."""
    from ascendprof.analyze import step_breakdown

    data = dbreader.read(_source(_levels(shared_data) / "db" / level / "rank0_ascend_pt"))
    got, method = step_breakdown.recompute(data.tables, data.rank)
    assert "compute-op info" in method, method
    (g,) = got.to_pylist()
    (r,) = data.tables[S.STEP_TRACE].to_pylist()
    for col in ("computing_ns", "comm_not_overlapped_ns", "communication_ns", "stage_ns",
                "preparing_ns", "bubble_ns"):
        assert g[col] == r[col], col


# ----------------------------------------------------------------------------- the HCCL carrier
# fixtures/torch_npu-db-level1-rank0 is the level1 rank 0 db export of the shared data, shipped
# so that these oracles (the profiler's own tables, read here with sqlite3) run on any clone.

DB_FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "torch_npu-db-level1-rank0" / \
    "rank0_ascend_pt"


def test_hccl_carrier_tasks_are_not_compute():
    """Each COMMUNICATION_OP has one TASK row that carries the whole op: same connectionId, in
    neither COMPUTE_TASK_INFO nor COMMUNICATION_TASK_INFO, with the TASK type AI_CORE. §7.1.b
    counts only COMPUTE_TASK_INFO tasks as compute, so those rows are linked to communication in
    the hardware track, and the recomputed Computing is the profiler's own: the sum of the
    OVERLAP_ANALYSIS type 0 (Computing) pieces, and analysis.db's StepTraceTime."""
    from ascendprof.analyze import step_breakdown

    dbfile = DB_FIXTURE / OUT / "ascend_pytorch_profiler_0.db"
    with _ro(dbfile) as c:
        carriers = c.execute(
            """SELECT t.startNs, t.endNs - t.startNs, s.value FROM TASK t
               JOIN STRING_IDS s ON s.id = t.taskType
               WHERE t.connectionId IN (SELECT connectionId FROM COMMUNICATION_OP)
                 AND t.globalTaskId NOT IN (SELECT globalTaskId FROM COMMUNICATION_TASK_INFO)
                 AND t.globalTaskId NOT IN (SELECT globalTaskId FROM COMPUTE_TASK_INFO)""").fetchall()
        n_ops = c.execute("SELECT COUNT(*) FROM COMMUNICATION_OP").fetchone()[0]
        computing = c.execute("SELECT SUM(endNs - startNs) FROM OVERLAP_ANALYSIS WHERE type = 0"
                              ).fetchone()[0]
        (comm_elapse,) = c.execute("SELECT SUM(endNs - startNs) FROM COMMUNICATION_OP").fetchone()
    assert len(carriers) == n_ops == 4 and {t for _, _, t in carriers} == {"AI_CORE"}
    # the carriers span about as much as the ops (~100 ms), ten times the step's Computing
    assert sum(d for _, d, _ in carriers) > comm_elapse / 2 > 5 * computing

    data = dbreader.read(_source(DB_FIXTURE))
    hw = [r for r in data.tables[S.TIMELINE].to_pylist() if r["track"] == "hardware"]
    category = {(r["start_ns"], r["dur_ns"]): r["category"] for r in hw}
    assert [category[(s, d)] for s, d, _ in carriers] == ["communication"] * 4

    got, method = step_breakdown.recompute(data.tables, data.rank)
    assert method.startswith("timeline"), method
    (row,) = got.to_pylist()
    assert row["step"] == 50 and row["computing_ns"] == computing
    # and the profiler's StepTraceTime in analysis.db says the same Computing (us, 3 decimals)
    with _ro(DB_FIXTURE / OUT / "analysis.db") as c:
        (reported_us,) = c.execute("SELECT computing FROM StepTraceTime").fetchone()
    assert round(reported_us * 1000) == computing


# ----------------------------------------------------------------------------- spec-built variants
# A copy of the fixture database changed the way other exports differ from it (the spec's §B
# columns); the expected values are read back from the changed database with sqlite3.

def _changed_copy(tmp_path: Path, *sql: str) -> Path:
    rank_dir = tmp_path / "rank0_ascend_pt"
    shutil.copytree(DB_FIXTURE, rank_dir)
    run_sql(rank_dir / OUT / "ascend_pytorch_profiler_0.db", sql)
    return rank_dir


def run_sql(db: Path, sql) -> None:
    """Run the statements ``sql`` on the database file ``db`` and commit them into the file."""
    c = sqlite3.connect(db)
    try:
        with c:
            for q in sql:
                c.execute(q)
        # the export is in WAL mode and the reader opens it immutable (WAL not read): write
        # the changes into the database file itself
        c.execute("PRAGMA journal_mode=DELETE")
    finally:
        c.close()


def test_op_state_and_hf32_columns_of_newer_exports_are_resolved(tmp_path):
    """COMPUTE_TASK_INFO.opState / hf32Eligible (newer CANN exports; the shared data has
    neither) are STRING_IDS ids: through read_source the kernels carry their text."""
    rank_dir = _changed_copy(
        tmp_path,
        "INSERT INTO STRING_IDS (id, value) VALUES (900001, 'dynamic'), (900002, 'YES')",
        "ALTER TABLE COMPUTE_TASK_INFO ADD COLUMN opState INTEGER",
        "ALTER TABLE COMPUTE_TASK_INFO ADD COLUMN hf32Eligible INTEGER",
        "UPDATE COMPUTE_TASK_INFO SET opState = 900001, hf32Eligible = 900002")
    with _ro(rank_dir / OUT / "ascend_pytorch_profiler_0.db") as c:
        n_compute = c.execute("SELECT COUNT(*) FROM COMPUTE_TASK_INFO").fetchone()[0]
    k = read_source(_source(rank_dir)).tables[S.KERNELS].to_pylist()
    states = Counter((r["op_state"], r["hf32_eligible"]) for r in k)
    assert states[("dynamic", "YES")] == n_compute > 0


def test_hccl_task_extents_group_by_op_id_when_op_names_repeat(tmp_path):
    """The communication section of each HCCL op is the extent of ITS tasks, matched by opId:
    with every op (and its tasks) carrying the same name, as an export repeating an op name
    would, the four ops keep their own four spans (min start, max end of the tasks of each
    opId), not one span over all of them."""
    rank_dir = _changed_copy(
        tmp_path,
        "UPDATE COMMUNICATION_OP SET opName = (SELECT MIN(opName) FROM COMMUNICATION_OP)",
        "UPDATE COMMUNICATION_TASK_INFO SET name = (SELECT MIN(opName) FROM COMMUNICATION_OP)")
    with _ro(rank_dir / OUT / "ascend_pytorch_profiler_0.db") as c:
        want = c.execute("""SELECT MIN(t.startNs), MAX(t.endNs) - MIN(t.startNs)
                            FROM COMMUNICATION_TASK_INFO ci JOIN TASK t
                              ON t.globalTaskId = ci.globalTaskId
                            GROUP BY ci.opId ORDER BY 1""").fetchall()
    assert len(want) == 4
    tl = read_source(_source(rank_dir)).tables[S.TIMELINE].to_pylist()
    got = sorted((r["start_ns"], r["dur_ns"]) for r in tl if r["track"] == "communication"
                 and r["thread"].endswith("Communication tasks"))
    assert got == [tuple(w) for w in want]


def test_npu_mem_type_named_app_in_string_ids_is_taken_alone(tmp_path):
    """Where STRING_IDS names NPU_MEM's type ``APP`` (CANN's own exports), those rows are the
    APP memory even without Device rows to compare with: MEMORY_RECORD gets one APP row per
    NPU_MEM row, Total Reserved = (ddr + hbm) / 2^20."""
    rank_dir = _changed_copy(
        tmp_path,
        "INSERT INTO STRING_IDS (id, value) VALUES (900003, 'APP')",
        "DELETE FROM NPU_MEM WHERE type = (SELECT MAX(type) FROM NPU_MEM)",
        "UPDATE NPU_MEM SET type = 900003")
    with _ro(rank_dir / OUT / "ascend_pytorch_profiler_0.db") as c:
        want = c.execute("SELECT timestampNs, ddr + hbm FROM NPU_MEM ORDER BY 1").fetchall()
    assert len(want) > 10
    app = [r for r in read_source(_source(rank_dir)).tables[S.MEMORY_RECORD].to_pylist()
           if r["component"] == "APP"]
    got = sorted((r["ts_ns"], r["total_reserved_mb"]) for r in app)
    assert [t for t, _ in got] == [t for t, _ in want]
    assert [v for _, v in got] == pytest.approx([b / 2**20 for _, b in want], rel=1e-12)


def test_npu_mem_types_not_named_app_by_the_smaller_peak(tmp_path):
    """Where STRING_IDS does not name NPU_MEM's types (torch_npu's merged STRING_IDS may reuse
    the ids for other strings), of the two types the one whose largest ddr + hbm is the smaller
    is APP (the device total includes the application's memory)."""
    rank_dir = _changed_copy(tmp_path, "UPDATE NPU_MEM SET type = type + 800000")
    with _ro(rank_dir / OUT / "ascend_pytorch_profiler_0.db") as c:
        npu = c.execute("SELECT type, ddr, hbm, timestampNs FROM NPU_MEM").fetchall()
        assert not c.execute("SELECT COUNT(*) FROM STRING_IDS WHERE id IN "
                             "(SELECT type FROM NPU_MEM)").fetchone()[0]
    peak: dict = {}
    for typ, ddr, hbm, _ in npu:
        peak[typ] = max(peak.get(typ, 0), ddr + hbm)
    app_type = min(peak, key=peak.get)
    want = sorted((ts, (ddr + hbm) / 2**20) for typ, ddr, hbm, ts in npu if typ == app_type)
    app = [r for r in read_source(_source(rank_dir)).tables[S.MEMORY_RECORD].to_pylist()
           if r["component"] == "APP"]
    got = sorted((r["ts_ns"], r["total_reserved_mb"]) for r in app)
    assert [t for t, _ in got] == [t for t, _ in want] and len(want) > 10
    assert [v for _, v in got] == pytest.approx([v for _, v in want], rel=1e-12)


def test_kernel_context_ids_memory_records_and_dataloader_spans(shared_data):
    """Through read_source on the level2 db export: a kernel's context id is TASK.contextId,
    CANN's invalid marker 4294967295 read as null (kernel_details.csv writes N/A); MEMORY_RECORD
    totals are bytes / 2^20 and streamPtr is kept as text; the data loader spans of PYTORCH_API
    ('enumerate(DataLoader)...') are timeline rows on thread DataLoader."""
    rank_dir = _levels(shared_data) / "db" / "level2" / "rank0_ascend_pt"
    data = read_source(_source(rank_dir))
    with _ro(rank_dir / OUT / "ascend_pytorch_profiler_0.db") as c:
        ctx = c.execute("""SELECT t.contextId FROM TASK t JOIN COMPUTE_TASK_INFO ci
                           ON ci.globalTaskId = t.globalTaskId""").fetchall()
        mem = c.execute("SELECT totalReserved, totalActive, streamPtr FROM MEMORY_RECORD"
                        ).fetchall()
        loader = c.execute("""SELECT s.value, p.startNs, p.endNs - p.startNs FROM PYTORCH_API p
                              JOIN STRING_IDS s ON s.id = p.name
                              WHERE s.value LIKE 'enumerate(DataLoader)%'""").fetchall()
    want_ctx = Counter(None if v == 4294967295 else v for (v,) in ctx)
    assert want_ctx[None] and len(want_ctx) > 1
    k = data.tables[S.KERNELS].to_pylist()
    assert Counter(r["context_id"] for r in k if r["accelerator_core"] != dbreader.COMM_CORE) \
        == want_ctx
    rec = data.tables[S.MEMORY_RECORD].to_pylist()
    got = sorted((r["total_reserved_mb"], r["total_active_mb"], r["stream_ptr"])
                 for r in rec if r["component"] != "APP")
    assert got == sorted((r / 2**20, a / 2**20, None if p is None else str(p))
                         for r, a, p in mem) and any(p is not None for _, _, p in mem)
    tl = [r for r in data.tables[S.TIMELINE].to_pylist() if r["track"] == "dataloader"]
    assert [(r["name"], r["start_ns"], r["dur_ns"], r["thread"]) for r in tl] == [
        (n, int(s), d, "DataLoader") for n, s, d in loader] and loader  # startNs may be TEXT



def test_profiler_metadata_json_beside_the_db_is_read(tmp_path):
    """A profiler_metadata.json in the rank directory (spec §A.13; the db exports at hand have
    none, so one is written here) is the rank's metadata; the db's META_DATA only adds keys it
    lacks."""
    rank_dir = _changed_copy(tmp_path)
    want = {"ENV_VARIABLES": {"ASCEND_GLOBAL_LOG_LEVEL": "3"}, "distributed_args": {"tp": 2}}
    (rank_dir / "profiler_metadata.json").write_text(json.dumps(want), encoding="utf-8")
    meta = read_source(_source(rank_dir)).meta["profiler_metadata"]
    assert {k: meta.get(k) for k in want} == want
