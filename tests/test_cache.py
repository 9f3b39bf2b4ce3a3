"""The Parquet cache gives back exactly what the readers produce, and the same outputs."""

from __future__ import annotations

import os
from pathlib import Path

import orjson
import pytest

from ascendprof.engine import cache
from ascendprof.scan import load_sources
from ascendprof.engine.pipeline import process_rank
from ascendprof.readers import read_source
from ascendprof.engine.run import run_analyse
from test_make_cluster import mc
from treehash import tree_fingerprint


def _make(tmp: Path, n: int = 8) -> Path:
    try:
        mc.shared_data_dir()
    except SystemExit:
        pytest.skip("the Qwen3 ranks are in neither ../shared/data nor fixtures/")
    out = tmp / f"cluster{n}"
    mc.main([str(n), str(out), "--comm-ops-per-rank", "40"])
    return out


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    return _make(tmp_path_factory.mktemp("cache"))


def analysis_outputs(out: Path) -> dict:
    """Every output file's content; Parquet tables as Arrow tables, summary.json without the
    list of output paths (which names the output directory)."""
    import pyarrow.parquet as pq

    got = {}
    for p in sorted(out.rglob("*")):
        rel = str(p.relative_to(out))
        if not p.is_file() or rel.startswith(cache.CACHE_DIRNAME):
            continue
        if p.suffix == ".parquet":
            got[rel] = pq.read_table(p)
        elif p.name == "summary.json":
            doc = orjson.loads(p.read_bytes())
            doc.pop("outputs", None)
            got[rel] = doc
        else:
            got[rel] = p.read_bytes()
    return got


def assert_same_outputs(a: dict, b: dict):
    assert sorted(a) == sorted(b)
    for k in a:
        if hasattr(a[k], "equals"):
            assert a[k].equals(b[k], check_metadata=True), k
        else:
            assert a[k] == b[k], k


def test_round_trip_equals_the_reader(cluster, tmp_path):
    for src in load_sources(cluster):
        data = read_source(src)
        assert cache.load(src, tmp_path) is None  # cold
        assert cache.store(data, tmp_path) is not None
        hit = cache.load(src, tmp_path)
        assert hit is not None and hit.source is src and hit.rank == data.rank
        assert sorted(hit.tables) == sorted(data.tables)
        for name, t in data.tables.items():
            assert hit.tables[name].equals(t, check_metadata=True), name
        assert hit.meta == data.meta and hit.missing == data.missing
        assert list(hit.problems) == list(data.problems)


def test_outputs_identical_without_cache_cold_and_warm(cluster, tmp_path, monkeypatch):
    no_cache, with_cache = tmp_path / "a", tmp_path / "b"
    run_analyse(cluster, no_cache, cache=False, progress=False, fmt="json", workers=2)
    assert not (no_cache / cache.CACHE_DIRNAME).exists()
    run_analyse(cluster, with_cache, cache=True, progress=False, fmt="json", workers=2)
    entries = list((with_cache / cache.CACHE_DIRNAME).iterdir())
    assert len([e for e in entries if not e.name.startswith("run-")]) == 8  # one per rank
    assert len([e for e in entries if e.name.startswith("run-")]) == 1  # and the run
    cold = analysis_outputs(with_cache)
    assert_same_outputs(analysis_outputs(no_cache), cold)

    # warm, same run: the outputs come back from the run entry, nothing is recomputed
    def no_gather(*_a, **_k):
        raise AssertionError("combined again despite an unchanged run")

    monkeypatch.setattr("ascendprof.engine.pipeline.gather", no_gather)
    run_analyse(cluster, with_cache, cache=True, progress=False, fmt="json", workers=2)
    assert_same_outputs(cold, analysis_outputs(with_cache))
    monkeypatch.undo()

    # warm ranks only (run entry gone): nothing may be parsed again (one worker runs
    # in-process, so the patch applies)
    for run_entry in (with_cache / cache.CACHE_DIRNAME).glob("run-*"):
        import shutil

        shutil.rmtree(run_entry)

    def no_parsing(source):
        raise AssertionError(f"parsed {source.path} despite a fresh cache entry")

    monkeypatch.setattr("ascendprof.readers.read_source", no_parsing)
    run_analyse(cluster, with_cache, cache=True, progress=False, fmt="json", workers=1)
    assert_same_outputs(cold, analysis_outputs(with_cache))


def test_run_entry_used_only_when_nothing_changed(tmp_path, monkeypatch):
    """The whole-run entry is not used after an output was edited in place (the output is
    rewritten correctly), with other thresholds or without tables (tables/ then goes), or after
    an input changed."""
    c = _make(tmp_path, n=2)
    out = tmp_path / "out"
    calls = []
    from ascendprof.engine import pipeline

    real = pipeline.gather
    monkeypatch.setattr(pipeline, "gather", lambda *a, **k: calls.append(1) or real(*a, **k))

    def run(**kw):
        calls.clear()
        run_analyse(c, out, cache=True, progress=False, fmt="json", workers=1, **kw)
        return bool(calls)

    assert run() is True
    clean = analysis_outputs(out)
    assert run() is False
    assert_same_outputs(clean, analysis_outputs(out))
    with open(out / "cluster_step_trace_time.csv", "ab") as f:  # same inode as the entry's
        f.write(b"edited\n")
    assert run() is True
    assert_same_outputs(clean, analysis_outputs(out))
    assert run(thresholds={"comm_share_pct": 99}) is True
    assert run(tables=False) is True and not (out / "tables").exists()
    assert run(tables=False) is False and not (out / "tables").exists()
    kd = next(c.rglob("kernel_details.csv"))
    st = kd.stat()
    os.utime(kd, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    assert run(tables=False) is True


def test_changed_input_or_damaged_entry_is_a_miss(tmp_path):
    c = _make(tmp_path, n=2)
    store = tmp_path / "store"
    src = load_sources(c)[0]
    cache.store(read_source(src), store)
    assert cache.load(src, store) is not None
    kd = Path(src.path) / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv"
    st = kd.stat()
    os.utime(kd, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    assert cache.load(src, store) is None  # newer input file -> stale
    cache.store(read_source(src), store)
    assert cache.load(src, store) is not None
    entry = store / cache.entry_key(src)
    assert len(list(store.iterdir())) == 1  # replaced, not added
    (entry / "kernels.parquet").write_bytes(b"not parquet")
    assert cache.load(src, store) is None
    res = process_rank(src, None, store)  # rebuilt from the input
    assert res.table_rows.get("kernels") and cache.load(src, store) is not None


def test_cache_location(tmp_path, monkeypatch):
    monkeypatch.delenv(cache.ENV, raising=False)
    out, inp = tmp_path / "out", tmp_path / "in"
    inp.mkdir()
    assert cache.cache_dir_for(out, [inp]) == out / ".ascendprof-cache"
    monkeypatch.setenv(cache.ENV, str(tmp_path / "elsewhere"))
    assert cache.cache_dir_for(out, [inp]) == tmp_path / "elsewhere"
    monkeypatch.setenv(cache.ENV, str(inp / "sub"))
    assert cache.cache_dir_for(out, [inp]) is None  # never inside the input tree


def test_env_cache_inside_input_leaves_input_untouched(tmp_path, monkeypatch):
    c = _make(tmp_path, n=2)
    before = tree_fingerprint(c)
    monkeypatch.setenv(cache.ENV, str(c / "cache"))
    run_analyse(c, tmp_path / "out", cache=True, progress=False, fmt="json", workers=1)
    assert tree_fingerprint(c) == before


def test_tables_linked_or_copied_equal_the_entry(cluster, tmp_path, monkeypatch):
    """tables/ takes the cache entry's Parquet files: hard links on one file system, byte
    copies when linking fails; either way the same bytes, and replacing the entry later does
    not change what tables/ holds."""
    src = load_sources(cluster)[0]
    data = read_source(src)
    entry = cache.store(data, tmp_path / "c")
    linked, copied = tmp_path / "linked", tmp_path / "copied"
    assert cache.link_tables(entry, data.tables, linked)

    def no_links(*_a, **_k):
        raise OSError("cross-device link")

    monkeypatch.setattr(os, "link", no_links)
    assert cache.link_tables(entry, data.tables, copied)
    names = sorted(p.name for p in entry.glob("*.parquet"))
    assert names and sorted(p.name for p in linked.iterdir()) == names
    for n in names:
        want = (entry / n).read_bytes()
        assert (linked / n).read_bytes() == want and (copied / n).read_bytes() == want
        assert (linked / n).stat().st_ino == (entry / n).stat().st_ino
        assert (copied / n).stat().st_ino != (entry / n).stat().st_ino
    before = {n: (linked / n).read_bytes() for n in names}
    monkeypatch.undo()
    cache.store(read_source(src), tmp_path / "c")  # a rebuilt entry replaces the directory
    assert {n: (linked / n).read_bytes() for n in names} == before


class _Payload:
    """Unpickling this runs code: it creates the file ``marker``."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (exec, (f"open({str(self.marker)!r}, 'w').close()",))


def test_a_crafted_cache_file_never_runs_code(tmp_path):
    """Issue #17 item 6. Before: a crafted result.pkl in the cache directory (which may be
    shared through $ASCENDPROF_CACHE) was unpickled, running its code. Now the per-rank result
    is a data-only file: a crafted or damaged one is a miss, and the run gives the outputs of
    a clean run."""
    import pickle
    import shutil

    c = _make(tmp_path, n=2)
    clean, out = tmp_path / "clean", tmp_path / "out"
    run_analyse(c, clean, cache=False, progress=False, fmt="json", workers=1)
    run_analyse(c, out, cache=True, progress=False, fmt="json", workers=1)
    marker = tmp_path / "pwned"
    evil = pickle.dumps(_Payload(marker))
    store = out / cache.CACHE_DIRNAME
    entries = [e for e in store.iterdir() if e.is_dir() and not e.name.startswith("run-")]
    assert len(entries) == 2
    for e in entries:
        for name in ("result.pkl", "result.bin"):
            (e / name).write_bytes(evil)
    for run_entry in store.glob("run-*"):
        shutil.rmtree(run_entry)
    run_analyse(c, out, cache=True, progress=False, fmt="json", workers=1)
    assert not marker.exists(), "the cache ran code"
    assert_same_outputs(analysis_outputs(clean), analysis_outputs(out))


def test_result_file_round_trip_and_checks(cluster):
    """A rank's result read back from its data-only file equals the result computed from the
    input; a file damaged, of another fingerprint, lying about a compressed size or carrying
    a table of the wrong schema is refused."""
    import struct

    import orjson

    from ascendprof.engine import resultfile as RF

    src = load_sources(cluster)[0]
    res = process_rank(src)
    assert res.comm_fragments and res.tables and res.op_partial is not None
    data = RF.encode(res, "fp")
    back = RF.decode(data, "fp", src)
    assert back.source is src and back.rank == res.rank
    assert sorted(back.tables) == sorted(res.tables)
    for k, t in res.tables.items():
        assert back.tables[k].equals(t, check_metadata=True), k
    for name in RF.TABLE_FIELDS:
        a, b = getattr(res, name), getattr(back, name)
        assert (a is None) == (b is None) and (a is None or a.equals(b)), name
    assert [vars(f) for f in back.comm_fragments] == [vars(f) for f in res.comm_fragments]
    assert list(back.problems) == list(res.problems) and back.meta == res.meta
    assert back.table_rows == res.table_rows and back.missing == res.missing
    assert back.breakdown_method == res.breakdown_method

    def refused(blob, fp="fp"):
        with pytest.raises(RF.BadResult):
            RF.decode(blob, fp, src)

    refused(data, fp="other")
    refused(data[:-10])                                    # truncated
    refused(data[:-1] + bytes([data[-1] ^ 1]))             # a flipped bit in the blobs
    refused(b"\x80\x04K\x01." + data)                      # not our magic (a pickle)
    at = len(RF.MAGIC) + RF._HASH_BYTES
    n = struct.unpack_from("<Q", data, at)[0]
    start = at + 8
    head = orjson.loads(data[start:start + n])

    def with_head(h, rehash=True):
        """The file with header ``h``, its hash made anew (the checks behind the hash) or
        left as it was (an edit the hash must catch)."""
        raw = orjson.dumps(h)
        body = struct.pack("<Q", len(raw)) + raw + data[start + n:]
        digest = RF._digest([body]) if rehash else data[len(RF.MAGIC):at]
        return RF.MAGIC + digest + body

    assert RF.decode(with_head(head), "fp", src).rank == res.rank  # re-encoding is fine
    # the header is covered by the hash: the rank edited (same length), nothing else changed
    other_rank = orjson.loads(orjson.dumps(head))
    other_rank["rank"] = 7 if res.rank != 7 else 6
    refused(with_head(other_rank, rehash=False))
    refused(with_head(other_rank))  # and behind a recomputed hash: not the source's rank
    for key in ("../../../../x/PLANTED", "a/b", ".hidden", ""):
        planted = orjson.loads(orjson.dumps(head))
        planted["table_rows"][key] = 1
        refused(with_head(planted))
    bomb = orjson.loads(orjson.dumps(head))
    bomb["fragments"][0]["chunks"][0][0] = 1 << 40         # claims a 1 TB chunk
    refused(with_head(bomb))
    wrong = orjson.loads(orjson.dumps(head))
    name = next(k for k in wrong["tables"] if k == "step_trace")
    wrong["tables"][name] = wrong["op_partial"]            # a table of another schema
    refused(with_head(wrong))
    out_of_range = orjson.loads(orjson.dumps(head))
    out_of_range["tables"][name] = [0, 1 << 40]
    refused(with_head(out_of_range))


def test_an_unchanged_rerun_imports_neither_arrow_nor_pandas(tmp_path):
    """The restored run stays light (~0.3 s at 16 ranks): checking and replacing the output
    set must not pull in the analyses (whose modules import pandas and pyarrow)."""
    import subprocess
    import sys

    c = _make(tmp_path, n=2)
    out = tmp_path / "out"
    run_analyse(c, out, cache=True, progress=False, fmt="json", workers=1)
    code = ("import sys\n"
            "from ascendprof.cli.main import main\n"
            "try:\n"
            f"    main(['analyse', {str(c)!r}, '-o', {str(out)!r}, '-q'])\n"
            "except SystemExit as e:\n"
            "    assert e.code == 0, e.code\n"
            "print(sorted(m for m in ('pandas', 'pyarrow') if m in sys.modules))\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().splitlines()[-1] == "[]", r.stdout[-500:]
