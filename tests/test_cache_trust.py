"""The cache is untrusted input (it may be shared through $ASCENDPROF_CACHE, copied or edited):
no name read from it becomes a path outside OUT, every byte of an entry is covered by a hash,
the rank is the source's, an input edited with its old mtime restored is noticed, and the
cache directory is never followed through a symlink.

Before: a `table_rows` key "../../../../x/PLANTED" in a cached result.bin made analyse create
a folder and hard-link a .parquet file outside OUT (exit 0); "rank": 0 -> 7 in the header was
accepted (the verdicts named rank 7); doubling dur_ns in a cached Parquet table changed every
output; a same-size edit with the old mtime restored was served; a symlinked
.ascendprof-cache was followed out of OUT; a file of that name ended in "internal error", exit 3.

Expected values: the outputs of a run without any cache on the same (edited) input.
"""

from __future__ import annotations

import os
import shutil
import struct
from pathlib import Path

import orjson
import pytest

import faultgen as FG
from ascendprof.engine import cache
from ascendprof.engine import resultfile as RF
from ascendprof.engine.run import run_analyse
from test_cache import analysis_outputs, assert_same_outputs


def analyse(src: Path, out: Path, use_cache: bool = True) -> int:
    return run_analyse(src, out, cache=use_cache, progress=False, fmt="json", workers=1,
                       html=False)


@pytest.fixture()
def warm(tmp_path):
    """Two Qwen3 ranks, a clean analysis without cache, and a warm cache in OUT."""
    src = FG.copy_base("qwen3", tmp_path / "in")
    for r in (2, 3):
        shutil.rmtree(FG.rank_dir(src, "qwen3", r))
    clean, out = tmp_path / "clean", tmp_path / "x" / "y" / "z" / "out"
    analyse(src, clean, use_cache=False)
    analyse(src, out)
    return src, clean, out


def rank_entries(out: Path) -> list[Path]:
    store = out / cache.CACHE_DIRNAME
    return sorted(e for e in store.iterdir() if e.is_dir() and not e.name.startswith("run-"))


def drop_run_entries(out: Path) -> None:
    for e in (out / cache.CACHE_DIRNAME).glob("run-*"):
        shutil.rmtree(e)


def rewrite_result(entry: Path, edit) -> None:
    """Edit result.bin's header with ``edit(header)`` and write it back WITH a fresh hash: a
    crafted file, not a damaged one (only the field checks can refuse it)."""
    data = (entry / "result.bin").read_bytes()
    at = len(RF.MAGIC) + RF._HASH_BYTES
    n = struct.unpack_from("<Q", data, at)[0]
    head = orjson.loads(data[at + 8:at + 8 + n])
    edit(head)
    raw = orjson.dumps(head)
    body = struct.pack("<Q", len(raw)) + raw + data[at + 8 + n:]
    (entry / "result.bin").write_bytes(RF.MAGIC + RF._digest([body]) + body)


def rewrite_entry(entry: Path, edit, rehash: bool = True) -> None:
    doc = orjson.loads((entry / "entry.json").read_bytes())
    edit(doc)
    if rehash:
        doc["entry_hash"] = cache._entry_hash(doc)
    (entry / "entry.json").write_bytes(orjson.dumps(doc))


def everything_under(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


def test_a_planted_table_name_creates_nothing_outside_out(warm, tmp_path):
    src, clean, out = warm
    drop_run_entries(out)
    before = everything_under(tmp_path)
    for e in rank_entries(out):
        rewrite_result(e, lambda h: h["table_rows"].update({"../../../../x/PLANTED": 3}))
        (e / "../../../../x").resolve()  # where the key points: tmp_path/x/...
    assert analyse(src, out) == 0
    new = everything_under(tmp_path) - before
    assert not [p for p in new if "PLANTED" in p], new
    assert_same_outputs(analysis_outputs(clean), analysis_outputs(out))
    # the same name in entry.json (hash made anew): refused as well
    drop_run_entries(out)
    for e in rank_entries(out):
        rewrite_entry(e, lambda d: d["tables"].append("../../../../x/PLANTED"))
    assert analyse(src, out) == 0
    assert not [p for p in everything_under(tmp_path) if "PLANTED" in p]
    assert_same_outputs(analysis_outputs(clean), analysis_outputs(out))


def test_a_rank_edited_in_the_cache_is_not_believed(warm):
    src, clean, out = warm
    drop_run_entries(out)
    for e in rank_entries(out):
        rewrite_result(e, lambda h: h.update(rank=h["rank"] + 7))
        rewrite_entry(e, lambda d: d.update(rank=d["rank"] + 7))
    assert analyse(src, out) == 0
    assert_same_outputs(analysis_outputs(clean), analysis_outputs(out))
    assert not (out / "tables" / "rank7").exists()
    # the header edited without the hash made anew: the hash refuses it
    drop_run_entries(out)
    for e in rank_entries(out):
        rewrite_entry(e, lambda d: d.update(rank=d["rank"] + 7), rehash=False)
        data = bytearray((e / "result.bin").read_bytes())
        i = data.index(b'"rank":')
        data[i + 7] = ord("7") if data[i + 7] != ord("7") else ord("6")
        (e / "result.bin").write_bytes(bytes(data))
    assert analyse(src, out) == 0
    assert_same_outputs(analysis_outputs(clean), analysis_outputs(out))


def test_a_cached_parquet_table_edited_is_a_miss(warm):
    """dur_ns doubled in every cached kernels table (same schema, a valid Parquet file)."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    src, clean, out = warm
    drop_run_entries(out)
    edited = 0
    for e in rank_entries(out):
        for p in e.glob("*.parquet"):
            t = pq.read_table(p)
            if "dur_ns" in t.column_names:
                i = t.column_names.index("dur_ns")
                t = t.set_column(i, t.field(i), pc.multiply(t.column(i), pa.scalar(2, t.field(i).type)))
                st = os.stat(p)
                p.unlink()  # a new file (the old one is hard-linked into OUT/tables)
                pq.write_table(t, p)
                os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns))
                edited += 1
    assert edited
    assert analyse(src, out) == 0
    assert_same_outputs(analysis_outputs(clean), analysis_outputs(out))


def test_an_input_edited_with_its_old_mtime_restored_is_read_again(warm, tmp_path):
    """One digit of a kernel's Duration(us) changed in place (same size, same inode), the old
    mtime set back: the outputs are those of the edited input."""
    src, _, out = warm
    f = FG.out_file(src, "qwen3", 0, "kernel_details.csv")
    data = f.read_bytes()
    header, first, rest = data.split(b"\n", 2)
    cells = first.split(b",")
    col = header.split(b",").index(b"Duration(us)")
    cell = cells[col]
    j = next(k for k, c in enumerate(cell) if chr(c).isdigit() and chr(c) not in "09")
    cells[col] = cell[:j] + b"9" + cell[j + 1:]
    st = os.stat(f)
    with open(f, "r+b") as fh:  # in place: same inode
        fh.write(header + b"\n" + b",".join(cells) + b"\n" + rest)
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert os.stat(f).st_size == st.st_size and os.stat(f).st_mtime_ns == st.st_mtime_ns
    fresh = tmp_path / "fresh"
    analyse(src, fresh, use_cache=False)
    a, b = analysis_outputs(fresh), analysis_outputs(out)
    assert a["op_statistics.csv"] != b["op_statistics.csv"]  # the edit shows in the outputs
    assert analyse(src, out) == 0
    assert_same_outputs(a, analysis_outputs(out))


def test_a_run_entry_file_edited_with_its_old_mtime_restored_is_not_served(warm):
    src, clean, out = warm
    run = next((out / cache.CACHE_DIRNAME).glob("run-*"))
    manifest = orjson.loads((run / "manifest.json").read_bytes())
    i = manifest["files"]["cluster_step_trace_time.csv"][0]
    kept = run / "files" / str(i)
    data = bytearray(kept.read_bytes())
    st = os.stat(kept)
    k = data.rindex(b"1")
    data[k] = ord("9")
    with open(kept, "r+b") as fh:  # in place (it is a hard link of OUT's file: fixed below)
        fh.write(bytes(data))
    os.utime(kept, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert analyse(src, out) == 0
    assert_same_outputs(analysis_outputs(clean), analysis_outputs(out))


def test_a_run_entry_path_outside_out_is_refused(warm, tmp_path):
    src, clean, out = warm
    run = next((out / cache.CACHE_DIRNAME).glob("run-*"))
    manifest = orjson.loads((run / "manifest.json").read_bytes())
    rel, rec = next(iter(manifest["files"].items()))
    manifest["files"]["../../../../../PLANTED.csv"] = rec
    (run / "manifest.json").write_bytes(orjson.dumps(manifest))
    before = everything_under(tmp_path)
    assert analyse(src, out) == 0
    assert not [p for p in everything_under(tmp_path) - before if "PLANTED" in p]
    assert_same_outputs(analysis_outputs(clean), analysis_outputs(out))


def test_a_symlinked_or_file_cache_directory_is_refused(tmp_path):
    from click.testing import CliRunner

    from ascendprof.cli.main import main

    src = FG.copy_base("qwen3", tmp_path / "in")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    out = tmp_path / "out"
    out.mkdir()
    (out / cache.CACHE_DIRNAME).symlink_to(elsewhere)
    r = CliRunner().invoke(main, ["analyse", str(src), "-o", str(out), "-q"])
    assert r.exit_code == 2, r.output
    assert r.output.strip().count("\n") == 0 and "symbolic link" in r.output
    assert list(elsewhere.iterdir()) == []
    (out / cache.CACHE_DIRNAME).unlink()
    (out / cache.CACHE_DIRNAME).write_text("not a directory")
    r = CliRunner().invoke(main, ["analyse", str(src), "-o", str(out), "-q"])
    assert r.exit_code == 2, r.output
    assert r.output.strip().count("\n") == 0 and "not a directory" in r.output
    assert "internal error" not in r.output
    assert (out / cache.CACHE_DIRNAME).read_text() == "not a directory"
