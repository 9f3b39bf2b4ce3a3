"""Property: every per-file parser, fed any bytes, either returns a table of its schema or raises
the project's own error (an AscendProfError subclass naming the file); never KeyError,
ValueError, IndexError, ArrowInvalid, UnicodeDecodeError, csv.Error, sqlite3 errors ...

Inputs are (a) arbitrary bytes and (b) REAL profiler files (the Qwen3 fixture, ../shared/data)
damaged by hypothesis: cut, bytes inserted / overwritten / deleted, CSV cells replaced by awkward
values, JSON leaves replaced by values of the wrong type. Examples are few per parser (CI speed)
and there is no deadline (file I/O and pyarrow start-up make timings noisy).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import faultgen as FG
from ascendprof.model import schemas as S
from ascendprof.model.errors import AscendProfError
from ascendprof.readers import ascend_output as AO
from ascendprof.readers import cann_records as C
from ascendprof.readers import communication as CO
from ascendprof.readers import legacy_mindspore as LM
from ascendprof.readers import prof as PR
from ascendprof.readers import trace_view as TV

FUZZ = settings(max_examples=int(os.environ.get("ASCENDPROF_FUZZ_EXAMPLES", "40")),
                deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                       HealthCheck.function_scoped_fixture])
QWEN = FG.ROOT / "fixtures" / "qwen3-4rank-pp2dp2" / "rank_0_ascend_pt"
SHARED = FG.SHARED
#: Scratch directory of this module's cases (set per session from pytest's tmp_path_factory,
#: which cleans up after itself; hypothesis' @given cannot take function-scoped tmp_path).
_WORK: Path = Path("unset")


@pytest.fixture(scope="module", autouse=True)
def _work_dir(tmp_path_factory):
    global _WORK
    _WORK = tmp_path_factory.mktemp("fuzz")
    yield


def _head(path: Path | None, lines: int | None = None, size: int | None = None) -> bytes | None:
    """The first ``lines`` lines (or ``size`` bytes) of a real file, None when absent."""
    if path is None or not path.is_file():
        return None
    data = path.read_bytes()
    if lines is not None:
        data = b"".join(data.splitlines(keepends=True)[:lines])
    return data[:size] if size else data


def _shared(rel: str) -> Path | None:
    return SHARED / rel if SHARED is not None else None


def _first_events(path: Path | None, n: int) -> bytes | None:
    """A real trace_view / timeline JSON cut to its first ``n`` events plus every metadata and
    ProfilerStep event (still valid JSON, a few KB)."""
    if path is None or not path.is_file():
        return None
    ev = json.loads(path.read_bytes())
    ev = ev["traceEvents"] if isinstance(ev, dict) else ev
    keep = [e for e in ev if e.get("ph") == "M" or str(e.get("name", "")).startswith(
        "ProfilerStep#")]
    keep += [e for e in ev if e.get("ph") in ("X", "s", "f") and e not in keep][:n]
    return json.dumps(keep).encode()


# ------------------------------------------------------------------------------ strategies

#: byte strings that break parsers in interesting ways (separators, BOM, bad UTF-8, numbers
#: out of range, digits that str.isdigit accepts but int() does not)
TOKENS = [b",", b'"', b"\n", b"\r\n", b"\t", b"\xff", b"\xef\xbb\xbf", b"\x00", b"{", b"}",
          b"[", b"]", b":", b"null", b"NaN", b"-", b"1e999", b"99999999999999999999999",
          "²".encode(), "١٢".encode(), b"N/A", b"\\", b"'", b" "]
#: awkward cell texts for CSV columns
CELLS = ["", " ", "N/A", "NaN", "nan", "inf", "-inf", "-", "None", "abc", "1,5", "1.5.5",
         "1e400", "-0", "+7", "0x10", "99999999999999999999999", "12.", ".5", "\t", "²",
         "١٢", "1764246877073569.640\t", '"', "true", "1e-9", "-1"]
#: awkward JSON values for JSON leaves
JSON_VALUES = st.sampled_from([None, "", "abc", "1.5", -1, 0, 2**70, 1e308, -1e308, True,
                               [], {}, [1, 2], {"a": 1}, "²", "NaN"])


@st.composite
def damaged(draw, seed: bytes | None):
    """Real bytes ``seed`` with 1-3 random cuts, insertions, overwrites or deletions."""
    if seed is None:
        return draw(st.binary(max_size=512))
    data = bytearray(seed)
    for _ in range(draw(st.integers(1, 3))):
        op = draw(st.sampled_from(["cut", "insert", "overwrite", "delete"]))
        pos = draw(st.integers(0, len(data)))
        if op == "cut":
            del data[pos:]
        elif op == "insert":
            data[pos:pos] = draw(st.sampled_from(TOKENS) | st.binary(min_size=1, max_size=6))
        elif op == "overwrite" and pos < len(data):
            data[pos] = draw(st.integers(0, 255))
        elif op == "delete":
            del data[pos:pos + draw(st.integers(1, 64))]
    return bytes(data)


@st.composite
def bad_cells(draw, seed: bytes | None):
    """A real CSV (header + first rows) with some cells replaced by awkward values."""
    if seed is None:
        return draw(st.binary(max_size=512))
    import csv
    import io

    rows = list(csv.reader(io.StringIO(seed.decode("utf-8-sig"), newline="")))
    head, body = rows[0], [r for r in rows[1:] if r]
    for _ in range(draw(st.integers(1, 4))):
        if not body:
            break
        r = draw(st.integers(0, len(body) - 1))
        c = draw(st.integers(0, len(body[r]) - 1))
        body[r][c] = draw(st.sampled_from(CELLS) | st.text(max_size=6))
    if draw(st.booleans()):  # sometimes a row of the wrong width
        body.append(draw(st.lists(st.sampled_from(CELLS), max_size=len(head) + 2)))
    buf = io.StringIO(newline="")
    csv.writer(buf, lineterminator=draw(st.sampled_from(["\n", "\r\n"]))).writerows([head] + body)
    return buf.getvalue().encode("utf-8", "surrogatepass")


def _paths(obj, prefix=(), out=None, limit=400):
    out = [] if out is None else out
    if len(out) >= limit:
        return out
    out.append(prefix)
    if isinstance(obj, dict):
        for k, v in obj.items():
            _paths(v, prefix + (k,), out, limit)
    elif isinstance(obj, list):
        for i, v in enumerate(obj[:20]):
            _paths(v, prefix + (i,), out, limit)
    return out


@st.composite
def bad_json(draw, seed: bytes | None):
    """A real JSON document with 1-4 values (at any depth) replaced by values of another type."""
    if seed is None:
        return draw(st.binary(max_size=512))
    obj = json.loads(seed)
    paths = _paths(obj)
    for _ in range(draw(st.integers(1, 4))):
        path = draw(st.sampled_from(paths))
        new = draw(JSON_VALUES)
        if not path:
            obj = new
            break
        parent = obj
        try:
            for k in path[:-1]:
                parent = parent[k]
            parent[path[-1]] = new
        except (KeyError, IndexError, TypeError):
            continue
    return json.dumps(obj).encode()


def inputs(seed: bytes | None, kind: str):
    """Arbitrary bytes, or the real seed damaged at byte level, or structurally (cells/JSON)."""
    structured = {"csv": bad_cells, "json": bad_json}.get(kind)
    parts = [st.binary(max_size=300), damaged(seed)]
    if structured is not None and seed is not None:
        parts.append(structured(seed))
    return st.one_of(*parts)


# ------------------------------------------------------------------------------ harness

def _write(name: str, data: bytes) -> Path:
    d = _WORK / "f"
    d.mkdir(exist_ok=True)
    p = d / name
    p.write_bytes(data)
    return p


def only_own_errors(call, data: bytes, name: str, schema: str | None = None):
    """Run ``call(path)`` on ``data`` written as ``name``: fine when it returns (tables of the
    schema) or raises an AscendProfError that names the file."""
    p = _write(name, data)
    try:
        got = call(p)
    except AscendProfError as e:
        assert name in str(e) or str(_WORK) in str(e), f"error does not name the file: {e}"
        return None
    if isinstance(got, pa.Table) and schema is not None:
        want = S.SCHEMAS[schema]
        assert [(f.name, f.type) for f in got.schema if f.name in want.names] == \
            [(f.name, f.type) for f in want], "columns of the schema, in order"
        assert all(n in want.names or n.startswith(S.PMU_PREFIX) for n in got.column_names)
    return got


# ------------------------------------------------------------------------------ CSV parsers

_CSV = [
    ("kernel_details.csv", AO.read_kernel_details, S.KERNELS, QWEN / FG.OUT, 6),
    ("step_trace_time.csv", AO.read_step_trace_time, S.STEP_TRACE, QWEN / FG.OUT, None),
    ("op_statistic.csv", AO.read_op_statistic, S.OP_STATISTIC, QWEN / FG.OUT, 8),
    ("api_statistic.csv", AO.read_api_statistic, S.API_STATISTIC, QWEN / FG.OUT, 8),
    ("memory_record.csv", AO.read_memory_record, S.MEMORY_RECORD, QWEN / FG.OUT, 8),
    ("operator_memory.csv", AO.read_operator_memory, S.OPERATOR_MEMORY, QWEN / FG.OUT, 8),
    ("npu_module_mem.csv", AO.read_npu_module_mem, S.NPU_MODULE_MEM, QWEN / FG.OUT, 8),
]


@pytest.mark.parametrize("name,parse,schema,where,lines", _CSV, ids=[c[0] for c in _CSV])
def test_ascend_output_csv_parsers(name, parse, schema, where, lines):
    seed = _head(where / name, lines)

    @FUZZ
    @given(inputs(seed, "csv"))
    def run(data):
        only_own_errors(lambda p: parse(p, 0), data, name, schema)

    run()


def test_prof_csv_parsers():
    """task_time / step_trace CSVs of mindstudio_profiler_output (no real sample: kernel_details
    rows renamed to the op_summary / task_time header are the closest real cells)."""
    @FUZZ
    @given(st.binary(max_size=300), st.sampled_from(["task", "step"]))
    def run(data, which):
        if which == "task":
            only_own_errors(lambda p: PR.read_task_time_csv(p, 0), data, "task_time_1.csv",
                            S.KERNELS)
        else:
            only_own_errors(lambda p: PR.read_step_trace_csv(p, 0), data, "step_trace_1.csv",
                            S.ITERATIONS)

    run()
    header = (b"Device_id,kernel_name,kernel_type,stream_id,task_id,task_time(us),"
              b"task_start(us),task_stop(us)\n")
    head2 = (b"Iteration ID,Iteration End(us),Iteration Time(us),FP to BP Time(us),"
             b"Iteration Refresh(us),Data Aug Bound(us)\n")

    @FUZZ
    @given(st.lists(st.lists(st.sampled_from(CELLS), min_size=8, max_size=8), max_size=4))
    def cells(rows):
        body = b"".join(",".join(r).encode() + b"\n" for r in rows)
        only_own_errors(lambda p: PR.read_task_time_csv(p, 0), header + body, "task_time_1.csv")
        body6 = b"".join(",".join(r[:6]).encode() + b"\n" for r in rows)
        only_own_errors(lambda p: PR.read_step_trace_csv(p, 0), head2 + body6, "step_trace_1.csv")

    cells()


# ------------------------------------------------------------------------------ JSON parsers

def test_read_metadata():
    seeds = [_head(QWEN / "profiler_info_0.json"), _head(QWEN / "profiler_metadata.json")]

    @FUZZ
    @given(inputs(seeds[0], "json"), inputs(seeds[1], "json"))
    def run(info, meta):
        d = _WORK / "meta"
        shutil.rmtree(d, ignore_errors=True)
        d.mkdir()
        (d / "profiler_info_0.json").write_bytes(info)
        (d / "profiler_metadata.json").write_bytes(meta)
        try:
            AO.read_metadata(d)
        except AscendProfError:
            pass
        from ascendprof.model.problems import Problems

        AO.read_metadata(d, Problems(), 0)  # with a problem list it never raises

    run()


@pytest.mark.parametrize("name,parse", [
    ("communication.json", CO.read_communication), ("communication_matrix.json", CO.read_matrix)])
def test_communication_parsers(name, parse):
    seed = _head(QWEN / FG.OUT / name)

    @FUZZ
    @given(inputs(seed, "json"))
    def run(data):
        only_own_errors(lambda p: parse(p, 0), data, name)

    run()


_TRACE_SEED = _first_events(_shared("torch_npu-2rank-levels/text/level1/rank0_ascend_pt/"
                                    "ASCEND_PROFILER_OUTPUT/trace_view.json"), 150)


def test_trace_view_streamer():
    @FUZZ
    @given(inputs(_TRACE_SEED, "json"))
    def run(data):
        only_own_errors(lambda p: TV.read_trace_view(p, 0), data, "trace_view.json")
        only_own_errors(lambda p: list(TV.iter_events(p)), data, "trace_view.json")

    run()


_PROF_TL = _shared("mindspore-legacy/profiler/PROF_000001_20230818142704322_COJGGGCANRMICFBC/"
                   "device_0/timeline")


@pytest.mark.parametrize("stem,call", [
    ("msprof_0_2_1.json", lambda p: PR.timeline_rows(p, 0, 10**12, 1)),
    ("task_time_0_2_3.json", lambda p: PR.task_time_kernels(p, 0, 0, 2, 3, None)),
    ("step_trace_0_2_3.json", lambda p: PR.step_trace_iterations(p, 0, 10**12)),
    ("hccl_0_2_3.json", lambda p: PR.timeline_rows(p, 0, None, 3)),
])
def test_prof_timeline_json(stem, call):
    seed = _first_events(_PROF_TL / stem if _PROF_TL else None, 60)

    @FUZZ
    @given(inputs(seed, "json"))
    def run(data):
        only_own_errors(call, data, stem)

    run()


# ------------------------------------------------------------------------------ legacy MindSpore

_CLUSTER = _shared("mindspore-legacy/cluster_propose")
_RUN1 = _shared("mindspore-legacy/run_1/normal_run/profiler")
_LEGACY = [
    ("step_trace_raw_0_detail_time.csv", lambda p: LM.read_step_trace_raw(p, 0), _CLUSTER, 6),
    ("ascend_cluster_analyse_pipeline-parallel_2_4_0.csv",
     lambda p: LM.read_cluster_analyse(p, 0, 0, None), _CLUSTER, 6),
    ("hccl_raw_0.csv", lambda p: LM.read_hccl_raw(p, 0), _CLUSTER, 4),
    ("output_timeline_data_1.txt", lambda p: LM.read_timeline_data(p, 1, 1, None), _RUN1, 8),
    ("aicore_intermediate_1_detail.csv", lambda p: LM.read_aicore_detail(p, 1, 1), _RUN1, 8),
    ("timeline_display_1.json", lambda p: LM.read_timeline_display(p, 1), _RUN1, None),
]


@pytest.mark.parametrize("name,call,where,lines", _LEGACY, ids=[c[0] for c in _LEGACY])
def test_legacy_parsers(name, call, where, lines):
    if name.endswith(".json"):
        seed = _first_events(where / name if where else None, 40)
        kind = "json"
    else:
        seed = _head(where / name if where else None, lines)
        kind = "csv"

    @FUZZ
    @given(inputs(seed, kind))
    def run(data):
        only_own_errors(call, data, name)

    run()


# ------------------------------------------------------------------------------ databases

def _db_source(d: Path, rank: int = 0):
    from ascendprof.scan import DB, Source

    files = [str(p.relative_to(d)) for p in sorted(d.rglob("*")) if p.is_file()]
    return Source(path=str(d), kind=DB, rank=rank, files=files)


def _db_seeds():
    seeds = [("analysis.db", _head(QWEN / FG.OUT / "analysis.db"))]
    lvl = _shared("torch_npu-2rank-levels/db/level1/rank0_ascend_pt/ASCEND_PROFILER_OUTPUT/"
                  "ascend_pytorch_profiler_0.db")
    if lvl is not None and lvl.is_file():
        seeds.append(("ascend_pytorch_profiler_0.db", lvl.read_bytes()))
    return seeds


@pytest.mark.parametrize("name,seed", _db_seeds(), ids=[s[0] for s in _db_seeds()])
def test_db_reader_on_damaged_database(name, seed):
    """The db reader on garbage and on a real database with bytes overwritten (pages damaged):
    an InputError naming the file, or tables with recorded problems; the file is not changed."""
    from ascendprof.readers import db as DBR

    @st.composite
    def pages(draw):
        data = bytearray(seed)
        for _ in range(draw(st.integers(1, 8))):
            pos = draw(st.integers(0, len(data) - 1))
            chunk = draw(st.binary(min_size=1, max_size=16))
            data[pos:pos + len(chunk)] = chunk
        return bytes(data[:len(seed)])

    @settings(FUZZ, max_examples=25)
    @given(st.one_of(st.binary(max_size=2048), pages(), st.just(seed[:len(seed) // 2])))
    def run(data):
        d = _WORK / "db"
        shutil.rmtree(d, ignore_errors=True)
        (d / FG.OUT).mkdir(parents=True)
        p = d / FG.OUT / name
        p.write_bytes(data)
        try:
            DBR.read(_db_source(d))
        except AscendProfError as e:
            assert name in str(e), e
        assert p.read_bytes() == data and sorted(os.listdir(d / FG.OUT)) == [name]

    run()


# ------------------------------------------------------------------------------ raw decoders

_HWTS = None
if SHARED is not None:
    _job3 = SHARED / "mindspore-legacy" / "JOB3"
    _h = sorted(_job3.glob("hwts.log.data.*")) if _job3.is_dir() else []
    _HWTS = _h[0].read_bytes()[:64 * 40] if _h else None


@pytest.mark.parametrize("decode", [
    C.decode_api_event, lambda b, p: C.decode_stars_soc(b, p), lambda b, p: C.decode_hwts(b, p),
    *[lambda b, p, k=k: C.decode_compact(b, k, p) for k in C.COMPACT],
    *[lambda b, p, k=k: C.decode_additional(b, k, p) for k in C.ADDITIONAL],
], ids=["api_event", "stars_soc", "hwts"] + [f"compact_{k}" for k in C.COMPACT]
    + [f"additional_{k}" for k in C.ADDITIONAL])
def test_raw_record_decoders(decode):
    @FUZZ
    @given(st.one_of(st.binary(max_size=600), damaged(_HWTS),
                     st.integers(0, 12).map(lambda n: bytes(64 * n))))
    def run(data):
        try:
            decode(data, "raw.data")
        except AscendProfError as e:
            assert "raw.data" in str(e)

    run()


def test_raw_text_parsers():
    """hash_dic / type_info_dic / start logs / task_desc_info never raise anything but the
    project's error (only parse_task_desc is documented to raise)."""
    from ascendprof.readers import raw_cann as RC

    text = st.text(alphabet=st.sampled_from(list("0123456789_:-+ \n\r\tabc²١")), max_size=200)

    @FUZZ
    @given(text)
    def run(t):
        C.parse_hash_dic(t)
        C.parse_type_info_dic(t)
        C.parse_start_log(t)
        RC.parse_graph_desc(t)
        try:
            RC.parse_task_desc(t, "task_desc_info")
        except AscendProfError as e:
            assert "task_desc_info" in str(e)

    run()


# ------------------------------------------------------------------------------ scanner

def test_scan_on_damaged_metadata():
    """scan reads profiler_info / profiler_metadata / step_trace_time.csv of each rank: damaged
    copies of the real files give sources or recorded problems, never another exception."""
    from ascendprof.model.problems import Problems
    from ascendprof.scan import scan

    seeds = {n: _head(QWEN / n) for n in ("profiler_info_0.json", "profiler_metadata.json")}
    seeds["step_trace_time.csv"] = _head(QWEN / FG.OUT / "step_trace_time.csv")

    @FUZZ
    @given(st.sampled_from(sorted(seeds)).flatmap(
        lambda n: st.tuples(st.just(n), inputs(seeds[n], "csv" if n.endswith("csv") else "json"))))
    def run(case):
        name, data = case
        root = _WORK / "scan"
        shutil.rmtree(root, ignore_errors=True)
        rank = root / "rank_0_ascend_pt"
        (rank / FG.OUT).mkdir(parents=True)
        for n, b in seeds.items():
            target = rank / FG.OUT / n if n.endswith(".csv") else rank / n
            target.write_bytes(data if n == name else b)
        try:
            scan(root, Problems())
        except AscendProfError:
            pass

    run()


# ------------------------------------------------------------------------------ intervals
# tests/test_intervals.py checks the set operations against brute force on small numbers; what
# it does not cover is real-epoch nanoseconds (~1.76e18, near int64's 9.2e18), negative
# durations and unsorted input as the readers deliver them.

_EPOCH = 1_764_246_877_073_569_640  # a real Start Time(us) of the Qwen3 fixture, in ns
_spans = st.lists(st.tuples(st.integers(0, 10**12), st.integers(-10**6, 10**9)), max_size=30)


@FUZZ
@given(_spans, _spans)
def test_intervals_translation_invariant_at_epoch_scale(a, b):
    from ascendprof.analyze import intervals as I

    def sets(spans, shift):
        return I.from_durations([s + shift for s, _ in spans], [d for _, d in spans])

    for op in (I.intersection, I.difference):
        small = op(I.union(sets(a, 0)), I.union(sets(b, 0)))
        big = op(I.union(sets(a, _EPOCH)), I.union(sets(b, _EPOCH)))
        assert (big[0] - _EPOCH).tolist() == small[0].tolist()
        assert (big[1] - _EPOCH).tolist() == small[1].tolist()
    u = I.union(sets(a, _EPOCH))
    assert I.total(u) == I.total(I.union(sets(a, 0)))
    assert I.total(u) <= sum(max(d, 0) for _, d in a)  # negative durations count as zero
    assert all(x < y for x, y in zip(u[1][:-1], u[0][1:]))  # sorted, disjoint, not touching
