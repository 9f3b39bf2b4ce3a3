"""Parquet cache of each rank's normalised tables, so a re-run skips parsing.

One entry per source (keyed by the source's absolute path, kind and rank) lives in
``<cache dir>/<key>/``: one ``<table>.parquet`` per table of the rank's
:class:`~ascendprof.model.rankdata.RankData` and ``entry.json`` with its metadata, missing files,
problems and the *fingerprint* it was made from. The fingerprint is the relative path, size and
mtime (ns) of every input file the scanner listed for the source, plus a fingerprint of the
ascendprof code itself (path, size, mtime of its modules), so an edited input or an upgraded
reader never serves stale tables. ``result.bin`` beside them is the rank's pipeline.RankResult
in a data-only format (:mod:`ascendprof.engine.resultfile`: JSON and Arrow IPC, checked field
by field when read). Nothing from the cache is ever unpickled: the directory may be shared.
pipeline.process_rank loads an entry, or reads the source and stores tables and result
together; a mismatching entry is simply rebuilt and replaced, so the cache holds at most one
entry per source.

The cache lives in ``$ASCENDPROF_CACHE`` when set, else in ``.ascendprof-cache`` inside the
output directory; never inside an input tree (the input is read-only to ascendprof). Entries are
written to a temporary directory and renamed into place, so parallel workers and interrupted runs
never leave a half-written entry behind. A damaged entry is treated as a miss.

The cache is untrusted input (it may be shared, copied or edited): every name read from it is
checked (:func:`safe_name`, :func:`safe_relpath`) before it becomes a path, the rank must be the
source's, entry.json carries a hash of its own content and of every Parquet file, a run entry a
hash of every output file, and nothing in it is followed through a symlink. Input files are
fingerprinted by size, mtime, ctime and inode, so an edit that restores the old mtime is
noticed (ctime cannot be set back). Anything odd is a miss.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import tempfile
from functools import lru_cache
from pathlib import Path

import orjson

from ascendprof._version import __version__
from ascendprof.engine import resultfile
from ascendprof.engine.resultfile import expected_rank, safe_name
from ascendprof.model.errors import AscendProfError
from ascendprof.model.problems import printable, Problem, Problems
from ascendprof.sysio.atomic import ensure_dir
from ascendprof.sysio.ownership import CACHE_DIRNAME  # noqa: F401 - re-exported
from ascendprof.sysio.parquet import parquet_bytes
from ascendprof.sysio.textio import open_regular, read_regular

ENV = "ASCENDPROF_CACHE"
FORMAT = 3  # 2: per-rank results in resultfile's data-only format instead of pickle;
#             3: hashes over the whole entry, input ctime and inode in the fingerprint
_ENTRY = "entry.json"
#: an entry.json larger than this is not ascendprof's
_ENTRY_MAX_BYTES = 64 << 20


def _b(text: str) -> bytes:
    """UTF-8 of a path-bearing text, bytes that are not UTF-8 kept as they were."""
    return text.encode("utf-8", "surrogateescape")


def _read_entry(d: Path) -> dict | None:
    """The entry.json of the entry directory ``d`` (a real directory, not a symlink, holding a
    small regular file with an object whose ``entry_hash`` matches its content and whose table
    names are safe (:func:`safe_name`)), None otherwise."""
    try:
        if not stat.S_ISDIR(os.lstat(d).st_mode) or os.path.islink(d / _ENTRY):
            return None
        entry = orjson.loads(read_regular(d / _ENTRY, _ENTRY_MAX_BYTES))
    except (OSError, ValueError, AscendProfError):
        return None
    if not isinstance(entry, dict) or entry.get("entry_hash") != _entry_hash(entry):
        return None
    tables, spilled, hashes = entry.get("tables"), entry.get("spilled"), entry.get("hashes")
    if not (isinstance(tables, list) and isinstance(spilled, list) and isinstance(hashes, dict)
            and all(safe_name(n) and isinstance(hashes.get(n), str) for n in tables)
            and all(n in tables for n in spilled)):
        return None
    return entry


def _entry_hash(entry: dict) -> str:
    """Hash of everything in ``entry`` but its ``entry_hash`` (canonical JSON)."""
    rest = {k: v for k, v in entry.items() if k != "entry_hash"}
    return hashlib.blake2b(orjson.dumps(rest, option=orjson.OPT_SORT_KEYS
                                        | orjson.OPT_SERIALIZE_NUMPY),
                           digest_size=20).hexdigest()


def safe_relpath(rel) -> bool:
    """True for a relative path of an output file a run entry may restore: ``/``-separated
    names, none empty, ``.``, ``..`` or hidden, no backslash or NUL."""
    if not isinstance(rel, str) or not rel or "\\" in rel or "\0" in rel:
        return False
    return all(part and not part.startswith(".") for part in rel.split("/"))


def file_hash(path: Path) -> str:
    """Hash of the regular file ``path``'s bytes (read in 1 MB blocks; never a FIFO or device:
    InputError otherwise)."""
    h = hashlib.blake2b(digest_size=20)
    with open_regular(path) as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _bytes_hash(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=20).hexdigest()


class CacheRefused(AscendProfError):
    """The cache location is a symlink or not a directory (exit 2)."""

    exit_code = 2


def cache_dir_for(out: Path | None, inputs=()) -> Path | None:
    """Where the cache lives for an analysis writing to ``out``: ``$ASCENDPROF_CACHE`` when set,
    else ``out/.ascendprof-cache``. None (no caching) when neither is known or when the place
    lies inside one of the ``inputs`` directories (input trees are never written). Raises
    :class:`CacheRefused` (exit 2) when the place is a symbolic link (never followed: it could
    lead anywhere) or exists and is not a directory."""
    env = os.environ.get(ENV)
    where = Path(env) if env else (Path(out) / CACHE_DIRNAME if out is not None else None)
    if where is None:
        return None
    if os.path.islink(where):
        raise CacheRefused(f"{where}: the cache directory is a symbolic link; not followed "
                           f"(remove it, or run with --no-cache)")
    if os.path.lexists(where) and not os.path.isdir(where):
        raise CacheRefused(f"{where}: exists and is not a directory; the cache needs that name "
                           f"(remove it, or run with --no-cache)")
    resolved = where.resolve()
    for i in inputs:
        i = Path(i).resolve()
        if resolved == i or i in resolved.parents:
            return None
    return where


@lru_cache(maxsize=1)
def code_fingerprint() -> str:
    """Hash of the path, size and mtime of every ascendprof module (changes on upgrade/edit)."""
    root = Path(__file__).resolve().parents[1]  # the ascendprof package
    h = hashlib.sha256(f"{FORMAT}:{__version__}".encode())
    for p in sorted(root.rglob("*.py")):
        st = p.stat()
        h.update(_b(f"{p.relative_to(root)}:{st.st_size}:{st.st_mtime_ns}\n"))
    return h.hexdigest()


def entry_key(source) -> str:
    """Stable directory name for one source: hash of its absolute path, kind and rank."""
    ident = f"{os.path.abspath(source.path)}\0{source.kind}\0{source.rank}"
    return hashlib.sha256(_b(ident)).hexdigest()[:32]


def fingerprint(source, read=None) -> str:
    """Hash of (relative path, size, mtime ns, ctime ns, inode) of the source's input files,
    the code and the reading choices ``read`` (model.options.ReadOptions: ``timeline``,
    ``advice``). ctime and inode change with every write and cannot be set back, so an edit of
    the same size that restores the old mtime is a miss too.

    A file that vanished since the scan is hashed as missing, so the entry no longer matches.
    """
    h = hashlib.sha256(code_fingerprint().encode())
    if read is not None:  # a reading choice changes the tables read and the result
        h.update(read.cache_text())
    base = Path(source.path)
    for rel in sorted(source.files):
        try:
            st = os.stat(base / rel)
            h.update(_b(f"{rel}\0{st.st_size}\0{st.st_mtime_ns}\0{st.st_ctime_ns}"
                        f"\0{st.st_ino}\n"))
        except OSError:
            h.update(_b(f"{rel}\0missing\n"))
    return h.hexdigest()


def load(source, cache_dir: Path, read=None):
    """The cached :class:`RankData` of ``source``, or None on a miss (absent, stale, damaged).

    Tables are read back from Parquet with their schemas (including schema metadata); ``source``
    in the returned object is the one passed in.
    """
    from ascendprof.model.rankdata import RankData

    d = Path(cache_dir) / entry_key(source)
    entry = _read_entry(d)
    if (entry is None or entry.get("fingerprint") != fingerprint(source, read)
            or entry.get("rank") != expected_rank(source)):
        return None
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq

        from ascendprof.sysio import bigtables

        tables, spilled = {}, {}
        for name in entry["tables"]:
            path = d / f"{name}.parquet"
            if os.path.islink(path):
                return None
            if name in entry.get("spilled", ()) and bigtables.spill_dir() is not None:
                # a table too large to hold: its slim columns, the rest read in row groups
                if file_hash(path) != entry["hashes"][name]:
                    return None
                spilled[name] = bigtables.SpilledTable.open(path)
                cols = bigtables.SLIM_COLUMNS.get(name)
                if cols:  # its texts dictionary-encoded, as the reader keeps them
                    tables[name] = pq.read_table(path, columns=list(cols), read_dictionary=[
                        c for c in bigtables.SLIM_DICTIONARY.get(name, ()) if c in cols])
            else:
                raw = read_regular(path)
                if _bytes_hash(raw) != entry["hashes"][name]:
                    return None
                tables[name] = pq.read_table(pa.BufferReader(raw))
        problems = Problems([Problem(p["path"], p["reason"], p.get("rank"), p.get("where", ""),
                                     p.get("severity", "skipped"), tuple(p.get("affects", ())))
                             for p in entry["problems"]])
    except Exception:  # noqa: BLE001 - any damage in the cache is a miss, never an error
        return None
    return RankData(source=source, rank=entry["rank"], tables=tables, meta=entry["meta"],
                    problems=problems, missing=list(entry["missing"]), spilled=spilled)


def store(data, cache_dir: Path, result=None, read=None) -> Path | None:
    """Write ``data`` (a RankData) as the entry of its source, with the per-rank ``result``
    (pipeline.RankResult) when given, in one directory rename; returns the entry directory.

    Failures to write (read-only or full disk) are ignored (None): the cache is an
    optimisation.
    """
    cache_dir = Path(cache_dir)
    final = cache_dir / entry_key(data.source)

    entry = {
        "format": FORMAT, "fingerprint": fingerprint(data.source, read),
        "path": printable(data.source.path),
        "kind": data.source.kind, "rank": data.rank, "tables": sorted(data.names()),
        "spilled": sorted(data.spilled),
        "meta": data.meta, "missing": list(data.missing),
        "problems": [p.as_dict() for p in data.problems],
    }
    tmp = None
    try:
        ensure_dir(cache_dir)
        tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.", dir=cache_dir))
        if not all(safe_name(n) for n in entry["tables"]):
            return None
        hashes = {}
        for name, t in data.tables.items():
            if name not in data.spilled:
                raw = parquet_bytes(t)
                hashes[name] = _bytes_hash(raw)
                (tmp / f"{name}.parquet").write_bytes(raw)
        for name, sp in data.spilled.items():  # the whole table, already written
            _link_or_copy(sp.path, tmp / f"{name}.parquet")
            hashes[name] = file_hash(tmp / f"{name}.parquet")
        entry["hashes"] = hashes
        entry = orjson.loads(orjson.dumps(entry, option=orjson.OPT_SERIALIZE_NUMPY))
        entry["entry_hash"] = _entry_hash(entry)
        (tmp / _ENTRY).write_bytes(orjson.dumps(entry, option=orjson.OPT_SERIALIZE_NUMPY))
        if result is not None:
            with open(tmp / _RESULT, "wb") as f:  # a part at a time, not one copy of it all
                resultfile.write(result, entry["fingerprint"], f)
        if final.exists():
            shutil.rmtree(final, ignore_errors=True)
        os.replace(tmp, final)
        tmp = None
        return final
    except (OSError, TypeError, ValueError, orjson.JSONEncodeError, AscendProfError):
        return None
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)


_RESULT = "result.bin"


def load_result(source, cache_dir: Path | None, read=None):
    """The cached per-rank analysis result (pipeline.RankResult) of ``source``, or None.

    It is valid only together with a fresh table entry: same fingerprint (inputs and code).
    The file is data only (:mod:`ascendprof.engine.resultfile`), checked before use; anything
    missing, damaged or crafted is a miss.
    """
    if cache_dir is None:
        return None

    d = Path(cache_dir) / entry_key(source)
    entry = _read_entry(d)
    fp = fingerprint(source, read)
    if entry is None or entry.get("fingerprint") != fp:
        return None
    try:
        if os.path.islink(d / _RESULT):
            return None
        res = resultfile.decode(read_regular(d / _RESULT), fp, source)
    except (OSError, ValueError, AscendProfError):
        return None
    # the result names the entry's tables and nothing else (they become file names)
    if res.rank != expected_rank(source) or set(res.table_rows) != set(entry["tables"]):
        return None
    return res


def store_result(result, cache_dir: Path | None, read=None) -> Path | None:
    """Keep ``result`` beside the table entry of its source (only when that entry is fresh);
    returns the entry directory, None when nothing was stored."""
    if cache_dir is None:
        return None

    d = Path(cache_dir) / entry_key(result.source)
    entry = _read_entry(d)
    fp = fingerprint(result.source, read)
    if entry is None or entry.get("fingerprint") != fp:
        return None
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{_RESULT}.", dir=d)
        with os.fdopen(fd, "wb") as f:
            resultfile.write(result, fp, f)
        os.replace(tmp, d / _RESULT)
        tmp = None
        return d
    except (OSError, TypeError, ValueError):
        return None
    finally:
        if tmp is not None and os.path.exists(tmp):
            os.unlink(tmp)


def link_tables(entry: Path, names, dest: Path) -> bool:
    """Place the Parquet files ``names`` of the cache ``entry`` directory at
    ``dest/<name>.parquet``, each atomically; False when one cannot be placed, or when a name is
    not a :func:`safe_name`, a file is not a regular file or its bytes are not those entry.json
    records (nothing outside ``dest`` is ever created; what was placed stays, replaced by the
    caller's own write).

    A file is hard-linked when the cache is on the same file system (no bytes copied; an entry
    is only ever replaced by a new directory, never written in place, so the link keeps the old
    content), else copied; the hash is checked on the placed file."""
    entry = Path(entry)
    doc = _read_entry(entry)
    names = list(names)
    if doc is None or not all(safe_name(n) and n in doc["hashes"] for n in names):
        return False
    try:
        ensure_dir(dest)
        for name in names:
            _place(entry / f"{name}.parquet", dest / f"{name}.parquet", doc["hashes"][name])
        return True
    except (OSError, AscendProfError):
        return False


# --- whole-run entries: an unchanged re-run restores its outputs ------------------------------

_RUN_PREFIX = "run-"
_MANIFEST = "manifest.json"


def run_key(sources, out: Path, options: dict, scan_problems=(), read=None) -> str:
    """Key of one ``analyse`` run: the output directory, the options that change outputs
    (thresholds, tables), what the scan reported, and every source's :func:`fingerprint`
    (inputs and code). Equal keys mean byte-identical outputs."""
    h = hashlib.sha256(_b(f"{_RUN_PREFIX}{FORMAT}\0{os.path.abspath(out)}\0"))
    h.update(orjson.dumps(options, option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS))
    for p in scan_problems:
        h.update(_b(f"{p}\n"))
    for s in sorted(sources, key=lambda s: (s.rank, s.path)):
        h.update(_b(f"{os.path.abspath(s.path)}\0{s.kind}\0{s.rank}\0{fingerprint(s, read)}\n"))
    return h.hexdigest()[:32]


def _place(src: Path, dest: Path, want_hash: str | None = None) -> None:
    """``dest`` becomes ``src``'s content atomically: a hard link when possible, else a copy.
    ``src`` must be a regular file (a symlink is not followed: OSError); with ``want_hash`` its
    placed bytes must have that :func:`file_hash` (OSError otherwise, nothing placed)."""
    ensure_dir(dest.parent)
    if not stat.S_ISREG(os.lstat(src).st_mode):
        raise OSError(f"{src}: not a regular file")
    try:
        if os.path.samefile(src, dest) and want_hash is None:  # already this file
            return
    except OSError:
        pass  # no dest yet
    tmp = dest.parent / f".{dest.name}.{os.getpid()}.tmp"
    _link_or_copy(src, tmp)
    try:
        if want_hash is not None and file_hash(tmp) != want_hash:
            raise OSError(f"{src}: content differs from the entry's hash")
        os.replace(tmp, dest)
    except BaseException:
        if os.path.lexists(tmp):
            os.unlink(tmp)
        raise


def _link_or_copy(src: Path, dest: Path) -> None:
    """``dest`` (not existing yet) hard-linked to ``src``, or a copy across file systems."""
    try:
        os.link(src, dest, follow_symlinks=False)
    except OSError:
        shutil.copyfile(src, dest, follow_symlinks=False)


def store_run(cache_dir: Path | None, key: str, out: Path, files, extra: dict) -> None:
    """Keep the run's output ``files`` (paths under ``out``) as the entry of ``key``, with
    ``extra`` (JSON-able facts the caller needs back, e.g. the exit status). Linked, not copied,
    when the cache is on the same file system; each file's size and content hash are recorded
    so an output edited in place later (whatever its mtime) is noticed and the entry not used.
    Failures are ignored."""
    if cache_dir is None:
        return
    cache_dir, out = Path(cache_dir), Path(out)
    tmp = None
    try:
        ensure_dir(cache_dir)
        for old in cache_dir.glob(f"{_RUN_PREFIX}*"):  # one run entry per cache: the newest
            shutil.rmtree(old, ignore_errors=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{_RUN_PREFIX}", dir=cache_dir))
        (tmp / "files").mkdir()
        stats = {}
        # numbered, in one directory: a directory per rank under tables/ cost a mkdir each
        # (~0.25 ms on ext4, serial at the end of the run); the manifest keeps the paths
        for i, f in enumerate(files):
            kept = tmp / "files" / str(i)
            _link_or_copy(f, kept)  # a fresh private directory: no atomic rename needed
            rel = Path(f).relative_to(out).as_posix()
            if not safe_relpath(rel):
                return
            stats[rel] = [i, os.stat(kept).st_size, file_hash(kept)]
        (tmp / _MANIFEST).write_bytes(orjson.dumps({"files": stats, "extra": extra}))
        os.replace(tmp, cache_dir / f"{_RUN_PREFIX}{key}")
        tmp = None
    except (OSError, ValueError, TypeError, orjson.JSONEncodeError, AscendProfError):
        return
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)


def restore_run(cache_dir: Path | None, key: str, out: Path, dest_of=None) -> dict | None:
    """Put the outputs of the run entry ``key`` back under ``out`` (each file atomically; at
    ``dest_of(relative path)`` when given) and return its ``extra``; None when there is no
    intact entry: a path that is not a :func:`safe_relpath`, a file that is not a regular file
    of the recorded size and hash. Checked before anything is placed, and again on each placed
    file (what was placed before a mismatch is the caller's staging to clear)."""
    if cache_dir is None:
        return None

    d = Path(cache_dir) / f"{_RUN_PREFIX}{key}"
    try:
        if not stat.S_ISDIR(os.lstat(d).st_mode):
            return None
        manifest = orjson.loads(read_regular(d / _MANIFEST, _ENTRY_MAX_BYTES))
        files = manifest["files"]
        if not isinstance(files, dict) or not isinstance(manifest.get("extra"), dict):
            return None
        for rel, rec in files.items():
            if not (safe_relpath(rel) and isinstance(rec, list) and len(rec) == 3
                    and isinstance(rec[0], int) and not isinstance(rec[0], bool)
                    and rec[0] >= 0 and isinstance(rec[2], str)):
                return None
            st = os.lstat(d / "files" / str(rec[0]))
            if not stat.S_ISREG(st.st_mode) or st.st_size != rec[1]:
                return None
        for rel, (i, _, digest) in files.items():
            _place(d / "files" / str(i), dest_of(rel) if dest_of else Path(out) / rel, digest)
        return manifest["extra"]
    except (OSError, orjson.JSONDecodeError, KeyError, TypeError, ValueError, AscendProfError):
        return None
