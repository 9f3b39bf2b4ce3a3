"""Which names in an output directory are ascendprof's: the fixed names of its managed set and
the manifest that lists the files of the last complete run. Everything that removes or
replaces a file asks here first, so a file ascendprof did not write is never touched."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import orjson

from ascendprof.sysio.textio import read_regular

MANIFEST = ".ascendprof-manifest.json"
LOCK = ".ascendprof.lock"
STAGING_PREFIX = ".ascendprof-staging-"
TRASH_PREFIX = ".ascendprof-trash-"
TABLES = "tables"
#: the per-rank cache inside an output directory (or ``$ASCENDPROF_CACHE``)
CACHE_DIRNAME = ".ascendprof-cache"
#: a manifest larger than this is not ascendprof's (256 ranks x 12 tables is ~200 KB)
MANIFEST_MAX_BYTES = 64 << 20


def managed_names(names) -> set[str]:
    """Every name directly under an output directory that ascendprof writes or may remove:
    the outputs ``names``, ``tables``, the cache, and its own hidden files."""
    return set(names) | {TABLES, CACHE_DIRNAME, MANIFEST, LOCK}


def is_managed(name: str, names) -> bool:
    """True when ``name`` (directly under an output directory) is ascendprof's."""
    return name in managed_names(names) or name.startswith((STAGING_PREFIX, TRASH_PREFIX))


def read_manifest(out: Path) -> dict | None:
    """The manifest of ``out`` as ``{"files": [...], "tables": [...]}``, None when there is
    none or it is not ascendprof's (not a small regular file holding that shape)."""
    p = Path(out) / MANIFEST
    try:
        st = os.lstat(p)
        if not stat.S_ISREG(st.st_mode):
            return None
        doc = orjson.loads(read_regular(p, max_bytes=MANIFEST_MAX_BYTES))
    except (OSError, ValueError):
        return None
    if not (isinstance(doc, dict) and doc.get("tool") == "ascendprof"
            and isinstance(doc.get("files"), list) and isinstance(doc.get("tables"), list)
            and all(isinstance(x, str) for x in doc["files"] + doc["tables"])):
        return None
    return doc
