"""Parquet cache of each rank's normalised tables, so a re-run skips parsing.

One entry per source (keyed by the source's absolute path, kind and rank) lives in
``<cache dir>/<key>/``: one ``<table>.parquet`` per table of the rank's
:class:`~ascendprof.rankdata.RankData` and ``entry.json`` with its metadata, missing files,
problems and the *fingerprint* it was made from. The fingerprint is the relative path, size and
mtime (ns) of every input file the scanner listed for the source, plus a fingerprint of the
ascendprof code itself (path, size, mtime of its modules), so an edited input or an upgraded
reader never serves stale tables. A mismatching entry is simply rebuilt and replaced, so the cache
holds at most one entry per source.

The cache lives in ``$ASCENDPROF_CACHE`` when set, else in ``.ascendprof-cache`` inside the
output directory; never inside an input tree (the input is read-only to ascendprof). Entries are
written to a temporary directory and renamed into place, so parallel workers and interrupted runs
never leave a half-written entry behind. A damaged entry is treated as a miss.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from functools import lru_cache
from pathlib import Path

import orjson

from ascendprof.output import PARQUET_OPTIONS

CACHE_DIRNAME = ".ascendprof-cache"
ENV = "ASCENDPROF_CACHE"
FORMAT = 1
_ENTRY = "entry.json"


def cache_dir_for(out: Path | None, inputs=()) -> Path | None:
    """Where the cache lives for an analysis writing to ``out``: ``$ASCENDPROF_CACHE`` when set,
    else ``out/.ascendprof-cache``. None (no caching) when neither is known or when the place
    lies inside one of the ``inputs`` directories (input trees are never written)."""
    env = os.environ.get(ENV)
    where = Path(env) if env else (Path(out) / CACHE_DIRNAME if out is not None else None)
    if where is None:
        return None
    resolved = where.resolve()
    for i in inputs:
        i = Path(i).resolve()
        if resolved == i or i in resolved.parents:
            return None
    return where


@lru_cache(maxsize=1)
def code_fingerprint() -> str:
    """Hash of the path, size and mtime of every ascendprof module (changes on upgrade/edit)."""
    import ascendprof

    root = Path(ascendprof.__file__).resolve().parent
    h = hashlib.sha256(f"{FORMAT}:{ascendprof.__version__}".encode())
    for p in sorted(root.rglob("*.py")):
        st = p.stat()
        h.update(f"{p.relative_to(root)}:{st.st_size}:{st.st_mtime_ns}\n".encode())
    return h.hexdigest()


def entry_key(source) -> str:
    """Stable directory name for one source: hash of its absolute path, kind and rank."""
    ident = f"{os.path.abspath(source.path)}\0{source.kind}\0{source.rank}"
    return hashlib.sha256(ident.encode()).hexdigest()[:32]


def fingerprint(source) -> str:
    """Hash of (relative path, size, mtime ns) of the source's input files and the code.

    A file that vanished since the scan is hashed as missing, so the entry no longer matches.
    """
    h = hashlib.sha256(code_fingerprint().encode())
    base = Path(source.path)
    for rel in sorted(source.files):
        try:
            st = os.stat(base / rel)
            h.update(f"{rel}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
        except OSError:
            h.update(f"{rel}\0missing\n".encode())
    return h.hexdigest()


def load(source, cache_dir: Path):
    """The cached :class:`RankData` of ``source``, or None on a miss (absent, stale, damaged).

    Tables are read back from Parquet with their schemas (including schema metadata); ``source``
    in the returned object is the one passed in.
    """
    from ascendprof.problems import Problem, Problems
    from ascendprof.rankdata import RankData

    d = Path(cache_dir) / entry_key(source)
    try:
        entry = orjson.loads((d / _ENTRY).read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return None
    if entry.get("fingerprint") != fingerprint(source):
        return None
    try:
        import pyarrow.parquet as pq

        tables = {name: pq.read_table(d / f"{name}.parquet") for name in entry["tables"]}
        problems = Problems([Problem(p["path"], p["reason"], p.get("rank"), p.get("where", ""),
                                     p.get("severity", "skipped"), tuple(p.get("affects", ())))
                             for p in entry["problems"]])
    except Exception:  # noqa: BLE001 - any damage in the cache is a miss, never an error
        return None
    return RankData(source=source, rank=entry["rank"], tables=tables, meta=entry["meta"],
                    problems=problems, missing=list(entry["missing"]))


def store(data, cache_dir: Path) -> Path | None:
    """Write ``data`` (a RankData) as the entry of its source; returns the entry directory.

    Failures to write (read-only or full disk) are ignored: the cache is an optimisation.
    """
    import pyarrow.parquet as pq

    cache_dir = Path(cache_dir)
    final = cache_dir / entry_key(data.source)
    entry = {
        "format": FORMAT, "fingerprint": fingerprint(data.source), "path": data.source.path,
        "kind": data.source.kind, "rank": data.rank, "tables": sorted(data.tables),
        "meta": data.meta, "missing": list(data.missing),
        "problems": [p.as_dict() for p in data.problems],
    }
    tmp = None
    try:
        cache_dir.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.", dir=cache_dir))
        for name, t in data.tables.items():
            pq.write_table(t, tmp / f"{name}.parquet", **PARQUET_OPTIONS)
        (tmp / _ENTRY).write_bytes(orjson.dumps(entry, option=orjson.OPT_SERIALIZE_NUMPY))
        if final.exists():
            shutil.rmtree(final, ignore_errors=True)
        os.replace(tmp, final)
        tmp = None
        return final
    except (OSError, TypeError, orjson.JSONEncodeError):
        return None
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)


_RESULT = "result.pkl"


def load_result(source, cache_dir: Path | None):
    """The cached per-rank analysis result (pipeline.RankResult) of ``source``, or None.

    It is valid only together with a fresh table entry: same fingerprint (inputs and code). The
    pickle is ascendprof's own file in the user's output (or $ASCENDPROF_CACHE) directory; any
    damage is a miss.
    """
    if cache_dir is None:
        return None
    import pickle

    d = Path(cache_dir) / entry_key(source)
    try:
        entry = orjson.loads((d / _ENTRY).read_bytes())
        if entry.get("fingerprint") != fingerprint(source):
            return None
        fp, result = pickle.loads((d / _RESULT).read_bytes())
    except Exception:  # noqa: BLE001 - a missing or damaged result is a miss
        return None
    if fp != entry["fingerprint"]:
        return None
    result.source = source
    return result


def store_result(result, cache_dir: Path | None) -> None:
    """Keep ``result`` beside the table entry of its source (only when that entry is fresh)."""
    if cache_dir is None:
        return
    import pickle

    d = Path(cache_dir) / entry_key(result.source)
    try:
        entry = orjson.loads((d / _ENTRY).read_bytes())
        fp = fingerprint(result.source)
        if entry.get("fingerprint") != fp:
            return
        fd, tmp = tempfile.mkstemp(prefix=f".{_RESULT}.", dir=d)
        with os.fdopen(fd, "wb") as f:
            pickle.dump((fp, result), f, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(tmp, d / _RESULT)
    except (OSError, orjson.JSONDecodeError, pickle.PicklingError, TypeError):
        return


def copy_tables(source, cache_dir: Path, dest: Path) -> bool:
    """Place the cached Parquet tables of ``source`` at ``dest/<table>.parquet`` (each
    atomically); False when there is no fresh entry (the caller then writes them itself).

    A file is hard-linked when the cache is on the same file system (no bytes copied; the
    entry is only ever replaced by a new directory, never written in place, so the link keeps
    the old content), else copied.
    """
    d = Path(cache_dir) / entry_key(source)
    try:
        entry = orjson.loads((d / _ENTRY).read_bytes())
        if entry.get("fingerprint") != fingerprint(source):
            return False
        dest.mkdir(parents=True, exist_ok=True)
        for name in entry["tables"]:
            src, tmp = d / f"{name}.parquet", dest / f".{name}.{os.getpid()}.tmp"
            try:
                os.link(src, tmp)
            except OSError:  # another file system, or links not supported
                shutil.copyfile(src, tmp)
            os.replace(tmp, dest / f"{name}.parquet")
        return True
    except (OSError, orjson.JSONDecodeError, KeyError):
        return False


def read_cached(source, cache_dir: Path | None):
    """Read ``source`` through the cache: the cached RankData when fresh, else the reader's
    output (stored for next time). With ``cache_dir`` None this is just the reader.

    Raises what the reader raises (InputError when nothing of the rank can be read; such a
    result is not cached).
    """
    from ascendprof.readers import read_source

    if cache_dir is None:
        return read_source(source)
    hit = load(source, cache_dir)
    if hit is not None:
        return hit
    data = read_source(source)
    store(data, cache_dir)
    return data
