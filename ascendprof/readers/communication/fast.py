"""communication.json (spec §A.5) read fast and, for a large file, in bounded memory.

Same tables, rows and problems as the per-value reader
(:mod:`ascendprof.readers.communication.per_value`), which stays the definition: whatever the
fast way cannot map exactly goes through it. Two ways of cutting the file into op entries:

* a file up to :data:`WHOLE_FILE_BYTES` is split by msgspec into ``step -> kind -> op`` with
  every op's object left undecoded (``msgspec.Raw``); anything but that three-level object shape
  (the flat CANN layout, an entry that is not an object, invalid JSON) sends the whole file to
  the per-value reader, which words the warnings and errors;
* a larger file is never held whole: :class:`~ascendprof.readers.communication.scanner.Scanner`
  reads it in blocks of :data:`BLOCK_BYTES`.

The op objects of a batch are decoded by DuckDB when the batch's shape allows
(:mod:`~ascendprof.readers.communication.decode_duckdb`, streaming only), else by msgspec
(:mod:`~ascendprof.readers.communication.decode_msgspec`), else by the per-value rules.
``opinfo_json`` is the op's object text as the file has it (msprof-analyze copies it as is
into cluster_communication.json).

Public: :func:`read_tables` (whole tables), :func:`iter_tables` (batches of tables, for the
streaming engine). Both raise :class:`~ascendprof.model.errors.InputError` as the per-value
reader does.
"""

from __future__ import annotations

import os
import queue
import threading
from array import array
from pathlib import Path

import msgspec
import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc

from ascendprof.model import schemas as S
from ascendprof.model.errors import InputError
from ascendprof.readers.communication.batch import (BatchProblems, Entries, Irregular,
                                                     binary_array)
from ascendprof.readers.communication.decode_duckdb import duck_tables
from ascendprof.readers.communication.decode_msgspec import (LAYOUT, OPS, TYPED, ops_of,
                                                             typed_tables)
from ascendprof.readers.communication.layout import is_flat, is_total
from ascendprof.readers.communication.per_value import (NAN_LITERAL, entry_tables,
                                                        read_communication_per_value)
from ascendprof.readers.communication.scanner import Scanner
from ascendprof.sysio.textio import read_payload

#: files up to this size are split in one msgspec call (the whole file in memory, ~2.5 times its
#: size at the peak); larger ones are streamed block by block
WHOLE_FILE_BYTES = 64 << 20
#: NAN_LITERAL for Arrow's regular expressions (RE2)
_NAN_PATTERN = NAN_LITERAL.decode()
#: bytes scanned at a time when streaming (~20k ops of the usual ~800 bytes)
BLOCK_BYTES = 16 << 20


class Reread(Exception):
    """Raised by :func:`iter_tables` after it handed out batches, when the file turns out to
    need the per-value reader after all (an op key repeated in one step and kind: JSON keeps
    the last value at the first place). The consumer drops what it got and reads the file with
    :func:`~ascendprof.readers.communication.read_communication_per_value`."""


# ------------------------------------------------------------------------------ entry points

def read_tables(path: Path, rank: int, problems=None) -> dict[str, pa.Table]:
    """The three COMM_* tables of ``path``
    (see :func:`ascendprof.readers.communication.read_communication`), as one table each."""
    try:
        parts = list(iter_tables(path, rank, problems))
    except Reread:
        return read_communication_per_value(path, rank, problems)
    if len(parts) == 1:
        return parts[0]
    return {name: pa.concat_tables([p[name] for p in parts]) for name in parts[0]}


def iter_tables(path: Path, rank: int, problems=None, *, whole_file_bytes: int | None = None,
                block_bytes: int | None = None):
    """Yield ``{COMM_OPS, COMM_BANDWIDTH, COMM_SIZE_DIST}`` batches of ``path`` in file order
    (at least one, possibly empty). A streamed file's problems are recorded once it has been
    read to its end. Raises InputError, or :class:`Reread` after some batches."""
    path = Path(path)
    limit = WHOLE_FILE_BYTES if whole_file_bytes is None else whole_file_bytes
    try:
        size = os.stat(path).st_size
    except OSError:
        size = 0
    if size <= limit:
        yield _whole(path, rank, problems)
    else:
        yield from _streamed(path, rank, problems, block_bytes or BLOCK_BYTES)


def _whole(path, rank, problems):
    raw = read_payload(path, as_json=True)
    try:
        if not raw.isascii():
            raw.decode("utf-8")  # msgspec does not look inside the values it skips
        entries = _entries_of(LAYOUT.decode(raw))
    except (msgspec.DecodeError, UnicodeDecodeError, Irregular, RecursionError):
        # not this shape, or not valid JSON (or nested beyond msgspec's recursion): the
        # per-value reader words what is wrong
        return read_communication_per_value(path, rank, problems, raw)
    try:
        entries.ops = ops_of(TYPED.decode(raw))
    except (msgspec.ValidationError, RecursionError):  # (a ValidationError is a DecodeError
        entries.ops = None                             # too: the layout decode checked it)
    sink = BatchProblems()
    try:
        tables = typed_tables(entries, path, rank, sink) if entries.ops is not None else None
    except ValueError as e:  # a Start Timestamp beyond int64 ns (units raise only ValueError)
        raise InputError(path, str(e)) from None
    if tables is None:  # a value the structs do not take exactly: the per-value rules
        return read_communication_per_value(path, rank, problems, raw)
    sink.flush(problems, path, rank)
    return tables


def _entries_of(layout: dict) -> Entries:
    """The op entries of a decoded ``step -> kind -> op -> Raw`` layout; Irregular for the
    flat CANN layout and for an op that is not an object (the per-value reader takes both)."""
    steps, kinds, keys, texts = [], [], [], []
    if is_flat(layout):
        raise Irregular
    for step_key, step in layout.items():
        for kind, ops in step.items():
            ks = list(ops)
            vs = list(ops.values())
            if any(map(is_total, ks)):
                keep = [i for i, k in enumerate(ks) if not is_total(k)]
                ks, vs = [ks[i] for i in keep], [vs[i] for i in keep]
            steps.extend([step_key] * len(ks))
            kinds.extend([kind] * len(ks))
            keys.extend(ks)
            texts.extend(vs)
    texts = list(map(memoryview, texts))
    if any(t[0] != 123 for t in texts):  # not an object (a Raw holds no leading space)
        raise Irregular
    # not pa.array of the views (see binary_array): that kept every rank's whole file in the
    # worker's memory for the rest of its life (~0.8 MB a rank of 1000 ops)
    return Entries(steps, kinds, keys, binary_array(texts, pa.binary()))


def _decode_batch(entries: Entries, path, rank, sink: BatchProblems):
    """Tables of one streamed batch: by DuckDB when the batch's shape allows, else msgspec,
    else the per-value rules. Raises InputError for an op text that is not valid JSON or a time
    beyond int64 ns."""
    try:
        return _decode_batch_or_raise(entries, path, rank, sink)
    except ValueError as e:  # a Start Timestamp beyond int64 ns (units raise only ValueError)
        raise InputError(path, str(e)) from None


def _decode_batch_or_raise(entries: Entries, path, rank, sink: BatchProblems):
    # NaN / Infinity literals: the per-value reader takes the file (one warning, those values
    # left out), as it does a small file; DuckDB would read them as numbers, msgspec and orjson
    # refuse them, and a large file must not fare worse than a small one
    if pc.any(pc.match_substring_regex(entries.texts, _NAN_PATTERN)).as_py():
        raise Irregular
    tables = duck_tables(entries, path, rank, sink)
    if tables is not None:
        return tables
    try:
        entries.ops = OPS.decode(entries.doc)
    except (msgspec.ValidationError, RecursionError):  # the per-value rules decide
        entries.ops = None
    except (msgspec.DecodeError, UnicodeDecodeError):
        _raise_invalid(path, entries)
    entries.doc = None
    tables = typed_tables(entries, path, rank, sink) if entries.ops is not None else None
    if tables is None:
        tables = _per_value_batch(entries, path, rank, sink)
    return tables


def _per_value_batch(entries: Entries, path, rank, sink: BatchProblems):
    texts = entries.texts.to_pylist()
    try:
        infos = list(map(orjson.loads, texts))
    except orjson.JSONDecodeError:
        _raise_invalid(path, entries)
    keys = entries.keys if isinstance(entries.keys, list) else entries.keys.to_pylist()
    steps = entries.steps if isinstance(entries.steps, list) else entries.steps.to_pylist()
    kinds = entries.kinds if isinstance(entries.kinds, list) else entries.kinds.to_pylist()
    bad: list = []
    at = [0]
    offsets = entries.offsets or [0] * len(texts)

    def numbered():
        for j, entry in enumerate(zip(steps, kinds, keys, infos)):
            at[0] = j
            yield entry

    class Said:  # the per-value rules' warnings, placed in file order by the op's offset
        @staticmethod
        def warn(_path, message, rank=None):
            sink.warnings.append((offsets[at[0]], message))

        @staticmethod
        def add(*_args, **_kwargs):
            # a Bandwidth Info value that is not a number: the per-value reader counts those
            # over the whole file (one problem per field), which a batch cannot
            raise Irregular

    try:
        tables = entry_tables(numbered(), path, rank, Said, typed=False, bad_sink=bad,
                               opinfo=texts)
    except ValueError as e:  # a time beyond int64 ns
        raise InputError(path, str(e)) from None
    sink.bad.extend(bad)
    return tables


def _raise_invalid(path, entries: Entries):
    for text, off in zip(entries.texts.to_pylist(), entries.offsets or ()):
        try:
            orjson.loads(text)
        except orjson.JSONDecodeError as e:
            raise InputError(path, f"invalid JSON ({e.msg})", where=off + e.pos) from None
    raise InputError(path, "invalid JSON", where=(entries.offsets or [0])[0])


# ------------------------------------------------------------------------------ streaming

def _streamed(path, rank, problems, block_bytes):
    """iter_tables for a large file (see :class:`Scanner`); a file of a shape the scanner
    leaves to the per-value reader is read whole by it, which is only possible before any
    batch was handed out."""
    sink = BatchProblems()
    scanner = Scanner(path, block_bytes)
    seen = array("q")
    yielded = False
    try:
        for entries in _ahead(scanner.blocks()):
            tables = _decode_batch(entries, path, rank, sink)
            _remember(seen, tables[S.COMM_OPS])
            yielded = True
            yield tables
        if _repeated(seen):  # JSON keeps the last value of a key, at its first place
            raise Irregular
    except Irregular:
        if yielded:
            raise Reread(path) from None
        yield read_communication_per_value(path, rank, problems)
        return
    sink.warnings.extend(scanner.warnings)
    if not yielded:
        yield _empty_tables(rank, path)
    sink.flush(problems, path, rank)


def _ahead(blocks, depth: int = 2):
    """``blocks`` iterated in a thread, up to ``depth`` ahead: the scan of the next block
    (numpy, mostly outside the GIL) runs while this one is decoded (DuckDB, outside it)."""
    q: queue.Queue = queue.Queue(maxsize=depth)
    stop = threading.Event()
    done = object()

    def run():
        try:
            for b in blocks:
                while not stop.is_set():
                    try:
                        q.put(("ok", b), timeout=0.1)
                        break
                    except queue.Full:
                        continue
                if stop.is_set():
                    return
            q.put(("ok", done))
        except BaseException as e:  # noqa: BLE001 - handed to the consumer
            q.put(("err", e))

    t = threading.Thread(target=run, name="ascendprof-comm-scan", daemon=True)
    t.start()
    try:
        while True:
            kind, item = q.get()
            if kind == "err":
                raise item
            if item is done:
                return
            yield item
    finally:
        stop.set()
        while t.is_alive():  # unblock a producer waiting on a full queue
            try:
                q.get_nowait()
            except queue.Empty:
                pass
            t.join(timeout=0.05)


def _empty_tables(rank, path):
    e = Entries([], [], [], pa.array([], pa.binary()), ops=[])
    return typed_tables(e, path, rank, BatchProblems())


def _remember(seen: "array", ops: pa.Table):
    """Keep a hash of every op key (step key, kind, op key) of the batch: 8 bytes an op, so
    10^6 ops cost 8 MB (:func:`_repeated` checks them at the end)."""
    if not ops.num_rows:
        return
    joined = pc.binary_join_element_wise(ops["step_key"], ops["kind"], ops["op_name"],
                                         ops["group"], "\x00").to_pylist()
    seen.extend(map(hash, joined))


def _repeated(seen: "array") -> bool:
    """Whether two ops had the same key (a hash collision only costs the per-value read)."""
    h = np.frombuffer(seen, np.int64) if len(seen) else np.zeros(0, np.int64)
    return len(np.unique(h)) != len(h)
