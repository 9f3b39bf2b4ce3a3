"""A rank's pipeline.RankResult as a data-only file, for the cache.

The cache directory may be shared (``$ASCENDPROF_CACHE``) or copied from elsewhere, so what is
read back must never be able to run code: no pickle. The file is::

    MAGIC | hash (20 bytes) | header length (uint64 little-endian) | header (JSON) | blobs

The hash (BLAKE2b) covers everything after it: header and blobs, so an edited rank, table
name or table row is a miss like a truncated file.

The header holds the scalars (rank, breakdown method, metadata, problems, missing files, table
row counts, the advice findings (plain JSON), the cache fingerprint it belongs to, a hash of the
blobs) and, for every table and byte string, its ``[offset, length]`` in the blob area. Tables
are Arrow IPC streams; the compressed cluster_communication.json fragments
(analyze.cluster_communication.OpFragments) are raw bytes. :func:`decode` checks every field's
type, every reference's bounds, every LZ4 size claim and the schema of every table that has a
fixed one before building the result; any mismatch raises :class:`BadResult` (the caller treats
it as a cache miss).
"""

from __future__ import annotations

import hashlib
import io
import re
import struct

import orjson

from ascendprof.model.problems import Problem, Problems

MAGIC = b"ASCENDPROF-RANKRESULT\x00v2\n"
_LEN = struct.Struct("<Q")
_HASH_BYTES = 20
#: attributes of RankResult holding one Arrow table or None
TABLE_FIELDS = ("breakdown", "op_partial", "kernel_partial", "memberships")
#: LZ4 cannot expand data more than ~255x; a claimed size beyond this is not ours
_LZ4_MAX_RATIO = 256
_MAX_HEADER = 256 << 20


class BadResult(ValueError):
    """The file is not a result ascendprof wrote for this fingerprint."""


# What a cache entry must be before any of it is used (the cache is untrusted input), here and
# in engine.cache: table names that may become file names, and the rank an entry must carry.
_NAME = re.compile(r"[A-Za-z0-9_]{1,64}\Z")


def safe_name(name) -> bool:
    """True for a table name the cache may turn into a file name (``[A-Za-z0-9_]``, at most 64
    characters): no separator, no ``..``, nothing hidden."""
    return isinstance(name, str) and _NAME.match(name) is not None


def expected_rank(source) -> int:
    """The rank a cached entry of ``source`` must carry (the readers' rule: the scanned rank,
    -1 for a db export whose rank is unknown)."""
    return int(source.rank) if source.rank is not None else -1


# ------------------------------------------------------------------------------ encode

def encode(result, fingerprint: str) -> bytes:
    """The bytes of ``result`` (a pipeline.RankResult whose tables are pyarrow Tables and whose
    fragments hold bytes), tied to the cache ``fingerprint``. Raises TypeError /
    orjson.JSONEncodeError for content that is not plain data."""
    out = io.BytesIO()
    write(result, fingerprint, out)
    return out.getvalue()


def write(result, fingerprint: str, file) -> None:
    """Write the bytes :func:`encode` gives to ``file`` (a binary file open for writing and
    seeking, at its start), a part at a time: each table's IPC stream goes to the file as it
    is made, so the result is never copied whole in memory (at 10^6 ops it is ~0.2 GB). The
    hash, which comes first, is written last. Raises what :func:`encode` raises, OSError."""
    blobs: list = []  # bytes, or a table whose IPC stream is written in place
    size = [0]

    def ref(data) -> list[int]:
        if isinstance(data, bytearray):
            data = bytes(data)
        n = _ipc_size(data) if isinstance(data, _arrow_table()) else None
        if n is None:
            if not isinstance(data, bytes):
                raise TypeError(f"not bytes: {type(data).__name__}")
            n = len(data)
        r = [size[0], n]
        blobs.append(data)
        size[0] += n
        return r

    def table(t):
        return None if t is None else ref(t)

    header = {
        "fingerprint": fingerprint,
        "rank": result.rank,
        "breakdown_method": result.breakdown_method,
        "meta": result.meta,
        "problems": [p.as_dict() for p in result.problems],
        "missing": list(result.missing),
        "table_rows": dict(result.table_rows),
        "advice": result.advice,
        "tables": {name: table(t) for name, t in result.tables.items()},
        **{name: table(getattr(result, name)) for name in TABLE_FIELDS},
        "fragments": [{
            "rank": f.rank, "kind": f.kind, "group": f.group, "count": f.count,
            "head": [f.head[0], ref(f.head[1])],
            "chunks": [[n, ref(blob)] for n, blob in f.chunks],
            "totals": [[ref(step), ref(total)] for step, total in f.totals],
            "steps": [ref(s) for s in f.steps],
        } for f in result.comm_fragments],
    }
    head = orjson.dumps(header, option=orjson.OPT_SERIALIZE_NUMPY)
    start = file.tell()
    file.write(MAGIC)
    file.write(bytes(_HASH_BYTES))  # the hash's place
    out = _Hashing(file)
    out.write(_LEN.pack(len(head)))
    out.write(head)
    for data in blobs:
        if isinstance(data, bytes):
            out.write(data)
        else:
            _write_ipc(out, data)
    if out.written != _LEN.size + len(head) + size[0]:  # the IPC streams were not as measured
        raise ValueError("result tables changed while written")
    end = file.tell()
    file.seek(start + len(MAGIC))
    file.write(out.hash.digest())
    file.seek(end)


class _Hashing:
    """A writable file that hashes (:func:`_digest`'s hash) what it passes on."""

    def __init__(self, file):
        self.file, self.hash, self.written = file, hashlib.blake2b(digest_size=_HASH_BYTES), 0
        self.closed = False

    def write(self, data) -> int:
        self.hash.update(data)
        self.file.write(data)
        n = memoryview(data).nbytes
        self.written += n
        return n

    def flush(self) -> None:
        pass


def _digest(parts) -> bytes:
    """Hash of the header and blob area (damage, or an edit of any byte)."""
    h = hashlib.blake2b(digest_size=_HASH_BYTES)
    for p in parts:
        h.update(p)
    return h.digest()


def _arrow_table():
    import pyarrow as pa

    return pa.Table


def _ipc_size(table) -> int:
    """The length of ``table``'s IPC stream, counted without making it."""
    import pyarrow as pa

    sink = pa.MockOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as w:
        w.write_table(table)
    return sink.size()


def _write_ipc(file, table) -> None:
    # lazy: a cache hit is restored before Arrow is imported
    from ascendprof.sysio.parking import write_ipc

    write_ipc(file, table)


# ------------------------------------------------------------------------------ decode

def decode(data: bytes, fingerprint: str, source):
    """The RankResult in ``data`` for ``source``; raises :class:`BadResult` unless the file is
    intact, of this format and made for ``fingerprint``."""
    from ascendprof.model.results import RankResult

    view = memoryview(data)
    at = len(MAGIC) + _HASH_BYTES
    if not data.startswith(MAGIC) or len(data) < at + _LEN.size:
        raise BadResult("not a result file")
    _want(bytes(view[len(MAGIC):at]) == _digest([view[at:]]), "hash")
    (n,) = _LEN.unpack_from(data, at)
    start = at + _LEN.size
    if n > min(_MAX_HEADER, len(data) - start):
        raise BadResult("header length out of range")
    try:
        h = orjson.loads(view[start:start + n])
    except orjson.JSONDecodeError as e:
        raise BadResult(f"header: {e}") from None
    blobs = view[start + n:]
    _want(isinstance(h, dict) and h.get("fingerprint") == fingerprint, "fingerprint")

    def blob(r) -> bytes:
        _want(isinstance(r, list) and len(r) == 2 and all(_is_int(x) for x in r)
              and 0 <= r[0] and 0 <= r[1] and r[0] + r[1] <= len(blobs), "reference")
        return bytes(blobs[r[0]:r[0] + r[1]])

    def table(r, name=None):
        if r is None:
            return None
        t = _table(blob(r))
        _check_schema(name, t)
        return t

    rank = h.get("rank")
    _want(_is_int(rank) and rank == expected_rank(source), "rank")
    _want(isinstance(h.get("breakdown_method"), str), "breakdown_method")
    _want(isinstance(h.get("meta"), dict), "meta")
    _want(isinstance(h.get("missing"), list) and all(isinstance(x, str) for x in h["missing"]),
          "missing")
    rows = h.get("table_rows")
    _want(isinstance(rows, dict) and all(safe_name(k) and _is_int(v) and v >= 0
                                         for k, v in rows.items()), "table_rows")
    tables = h.get("tables")
    _want(isinstance(tables, dict) and all(isinstance(k, str) for k in tables), "tables")
    advice = h.get("advice")
    _want(advice is None or (isinstance(advice, dict) and isinstance(advice.get("findings"), list)
                             and isinstance(advice.get("status"), dict)), "advice")
    probs = h.get("problems")
    _want(isinstance(probs, list), "problems")
    problems = Problems()
    for p in probs:
        _want(isinstance(p, dict) and isinstance(p.get("path"), str)
              and isinstance(p.get("reason"), str) and isinstance(p.get("where", ""), str)
              and p.get("severity") in ("skipped", "warning")
              and (p.get("rank") is None or _is_int(p["rank"]))
              and isinstance(p.get("affects", []), list)
              and all(isinstance(a, str) for a in p.get("affects", [])), "problem")
        problems.items.append(Problem(p["path"], p["reason"], p.get("rank"), p.get("where", ""),
                                      p["severity"], tuple(p.get("affects", ()))))
    res = RankResult(source=source, rank=rank)
    res.breakdown_method = h["breakdown_method"]
    res.meta, res.missing, res.table_rows = h["meta"], list(h["missing"]), dict(rows)
    res.problems, res.advice = problems, advice
    res.tables = {name: table(r, name) for name, r in tables.items()}
    for name in TABLE_FIELDS:
        setattr(res, name, table(h.get(name)))
    frags = h.get("fragments")
    _want(isinstance(frags, list), "fragments")
    res.comm_fragments = [_fragment(f, blob) for f in frags]
    return res


def _fragment(f, blob):
    from ascendprof.analyze.cluster_communication import OpFragments

    _want(isinstance(f, dict) and _is_int(f.get("rank")) and isinstance(f.get("kind"), str)
          and isinstance(f.get("group"), str) and _is_int(f.get("count")) and f["count"] >= 0,
          "fragment")

    def sized(p):
        _want(isinstance(p, list) and len(p) == 2 and _is_int(p[0]) and p[0] >= 0, "chunk")
        raw = blob(p[1])
        _want(p[0] <= _LZ4_MAX_RATIO * len(raw) + 64, "chunk size")  # no decompression bomb
        return p[0], raw

    head = sized(f.get("head"))
    _want(head[0] >= 12 * f["count"], "fragment head")
    chunks = f.get("chunks")
    totals = f.get("totals")
    steps = f.get("steps")
    _want(isinstance(chunks, list) and isinstance(totals, list) and isinstance(steps, list),
          "fragment parts")
    _want(all(isinstance(t, list) and len(t) == 2 for t in totals), "fragment totals")
    return OpFragments(rank=f["rank"], kind=f["kind"], group=f["group"], head=head,
                       chunks=[sized(c) for c in chunks],
                       totals=[(blob(a), blob(b)) for a, b in totals],
                       count=f["count"], steps=[blob(s) for s in steps])


def _table(data: bytes):
    import pyarrow as pa

    try:
        return pa.ipc.open_stream(pa.py_buffer(data)).read_all()
    except (pa.ArrowException, ValueError, OSError) as e:
        raise BadResult(f"table: {e}") from None


def _check_schema(name, table) -> None:
    """A table with a fixed schema (model.schemas) must have exactly it."""
    from ascendprof.model import schemas as S

    want = S.SCHEMAS.get(name) if name else None
    if want is not None and not table.schema.equals(want, check_metadata=False):
        raise BadResult(f"table {name}: schema differs")


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _want(ok: bool, what: str) -> None:
    if not ok:
        raise BadResult(f"bad {what}")
