"""The op entries of a large communication.json, block by block, never holding the file whole
(see :class:`Scanner`). A vectorised structural index (the positions of quotes, brackets and
colons outside strings and their nesting depth, the first stage of simdjson done with numpy)
finds the op objects, so no Python step is taken per op. The levels above the ops are checked
as JSON block by block (orjson, with each op object replaced by ``0``), the ops by their
decoder. Peak memory is a few blocks' worth, whatever the file's size."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import orjson
import pyarrow as pa

from ascendprof.model.errors import InputError
from ascendprof.readers.communication.batch import binary_array, Entries, Irregular
from ascendprof.readers.communication.layout import is_total
from ascendprof.sysio.textio import open_regular


#: bytes.translate table: 1 for the bytes that can be structural (quotes, backslashes,
#: brackets, braces, colons), 0 for the rest; translate and a bool nonzero are ~1.5x faster
#: than numpy compares
_STRUCTURAL = bytes(1 if c in b'{}[]:"\\' else 0 for c in range(256))


def _structural(buf: bytes) -> np.ndarray:
    """Positions of the bytes of ``buf`` that can be structural."""
    return np.flatnonzero(np.frombuffer(buf.translate(_STRUCTURAL), np.bool_))


class Scanner:
    """Op entries of a large communication.json, block by block (see module doc).

    Between blocks the state is: the unscanned rest (from the end of the last complete op
    object), the nesting depth there (3: inside a kind object) and the step key and kind it is
    under. Raises InputError for invalid JSON, Irregular for a shape it leaves to the
    per-value reader (the flat CANN layout, a list above the op level, a step or kind key
    repeated)."""

    def __init__(self, path: Path, block_bytes: int):
        self.path = Path(path)
        self.block_bytes = block_bytes
        self.warnings: list[tuple[int, str]] = []  # (offset in the file, warning)
        self.steps_seen: set = set()
        self.kinds_seen: set = set()
        self.step = self.kind = None
        self.depth = 0

    def blocks(self):
        """Yield an :class:`Entries` (with ``doc``) per block that holds ops."""
        path = self.path
        with open_regular(path) as f:  # a regular file only (never a FIFO or device)
            buf = f.read(self.block_bytes)
            offset = 0
            if buf.startswith(b"\xef\xbb\xbf"):
                buf, offset = buf[3:], 3
            lead = len(buf) - len(buf.lstrip())
            if lead == len(buf):
                raise Irregular  # all white space: the per-value reader says so
            if buf[lead:lead + 1] != b"{":
                raise Irregular  # not an object
            eof = False
            while True:
                if not eof and len(buf) < self.block_bytes:
                    more = f.read(self.block_bytes)
                    eof = not more
                    buf += more
                    continue
                entries, cut = self._scan(buf, offset, eof)
                if entries is not None and len(entries):
                    yield entries
                if eof:
                    return
                buf, offset = buf[cut:], offset + cut
                more = f.read(self.block_bytes)
                eof = not more
                buf += more

    def _scan(self, buf: bytes, offset: int, eof: bool):
        """Entries of the complete ops in ``buf`` (at ``offset`` in the file) and where to cut
        it (after the last of them); at ``eof`` the buffer must end the document."""
        path = self.path
        a = np.frombuffer(buf, np.uint8)
        pos = _structural(buf)
        ch = a[pos]
        isq = ch == 34
        escapes = bool((ch == 92).any())
        if escapes:  # a quote after an odd run of backslashes is inside its string
            qi = np.flatnonzero(isq)
            for k in qi[a[np.maximum(pos[qi] - 1, 0)] == 92].tolist():
                p, n = int(pos[k]), 0
                while p - 1 - n >= 0 and buf[p - 1 - n] == 92:
                    n += 1
                if n % 2:
                    isq[k] = False
        inside = (np.cumsum(isq, dtype=np.int32) & 1).astype(np.bool_)  # after odd quotes
        outside = ~isq & ~inside & (ch != 92)
        qpos = pos[isq]
        spos = pos[outside]
        sch = ch[outside]
        del pos, ch, isq, inside, outside
        delta = ((sch == 123) | (sch == 91)).astype(np.int8) - \
            ((sch == 125) | (sch == 93)).astype(np.int8)
        after = self.depth + np.cumsum(delta, dtype=np.int32)
        before = after - delta
        # an op object opens at depth 3 and closes back to it; cut after the last close
        closes = np.flatnonzero((sch == 125) & (after == 3))
        if eof:
            cut, n_tok = len(buf), len(sch)
        elif len(closes):
            n_tok = int(closes[-1]) + 1
            cut = int(spos[n_tok - 1]) + 1
        else:
            return None, 0  # no op ends in this buffer: the caller reads on (blocks())
        sch, spos, after, before = sch[:n_tok], spos[:n_tok], after[:n_tok], before[:n_tok]
        if len(before) and (int(before.min()) < 0 or
                            ((sch == 91) & (before <= 2)).any()):
            raise Irregular  # a list above the op level, or invalid nesting
        colon = np.flatnonzero((sch == 58) & (before <= 3))
        cpos = spos[colon]
        k = np.searchsorted(qpos, cpos)
        if len(k) and int(k.min()) < 2:
            raise Irregular
        kstart, kend = qpos[k - 2] + 1, qpos[k - 1]
        nxt = np.minimum(colon + 1, max(len(sch) - 1, 0))
        next_quote = np.where(k < len(qpos), qpos[np.minimum(k, max(len(qpos) - 1, 0))],
                              len(buf))
        is_obj = (colon + 1 < len(sch)) & (sch[nxt] == 123) & (next_quote > spos[nxt])
        level = before[colon]
        upper = np.flatnonzero(level < 3)
        # the levels above the ops (few keys): the step key and kind every op is under
        ctx_step, ctx_kind = [self.step], [self.kind]
        said: list[tuple[int, str]] = []  # (colon, warning): said in file order
        for j in upper.tolist():
            key = _key(buf, int(kstart[j]), int(kend[j]), path, offset)
            if level[j] == 1:
                if "@" in key or is_total(key) or key in self.steps_seen:
                    raise Irregular  # the flat CANN layout, or a step key repeated
                self.steps_seen.add(key)
                self.step, self.kind = key, None
                if not is_obj[j]:
                    said.append((j, f"step entry {key!r} is not an object; skipped"))
            else:
                if (self.step, key) in self.kinds_seen:
                    raise Irregular
                self.kinds_seen.add((self.step, key))
                self.kind = key
                if not is_obj[j]:
                    said.append((j, f"{self.step}/{key} is not an object; skipped"))
            ctx_step.append(self.step)
            ctx_kind.append(self.kind)
        ops = np.flatnonzero(level == 3)
        ctx = np.searchsorted(upper, ops)  # upper colons before each op: its context
        op_obj = is_obj[ops]
        for j in ops[~op_obj].tolist():  # an op that is not an object: skipped, said so
            key = _key(buf, int(kstart[j]), int(kend[j]), path, offset)
            if not is_total(key):
                c = int(np.searchsorted(upper, j))
                said.append((j, f"op {key!r} in {ctx_step[c]} is not an object; skipped"))
        self.warnings.extend((offset + int(cpos[j]), w) for j, w in said)
        ops, ctx = ops[op_obj], ctx[op_obj]
        o = spos[nxt[ops]]
        which = np.searchsorted(closes, nxt[ops])
        if len(which) and int(which[-1]) >= len(closes):  # the file ends inside an op
            raise InputError(path, "invalid JSON (unexpected end of data)",
                             where=offset + len(buf))
        c = spos[closes[which]] + 1 if len(ops) else o
        ks, ke = kstart[ops], kend[ops]
        if not buf[:cut].isascii():  # before the skeleton: orjson names no byte for this
            try:
                buf[:cut].decode("utf-8")
            except UnicodeDecodeError as e:
                raise InputError(path, "invalid JSON (str is not valid UTF-8)",
                                 where=offset + e.start) from None
        self._check_skeleton(buf, o, c, cut, offset, eof)
        # "Total ..." entries are the profiler's sums, not ops
        head = np.zeros((len(ks), 5), np.uint8)
        for i in range(5):
            at = np.minimum(ks + i, len(a) - 1)
            head[:, i] = np.where(ks + i < ke, a[at] | 0x20, 0)
        real = ~(head == np.frombuffer(b"total", np.uint8)).all(axis=1)
        ks, ke, o, c, ctx = ks[real], ke[real], o[real], c[real], ctx[real]
        self.depth = int(after[-1]) if len(after) else self.depth
        if not len(o):
            return Entries([], [], [], pa.array([], pa.binary())), cut
        shape = _shape(sch, spos, before, qpos, o, c)
        view = memoryview(buf)
        if escapes and any(92 in buf[s:e] for s, e in zip(ks.tolist(), ke.tolist())):
            keys = pa.array([_key(buf, s, e, path, offset) for s, e in
                             zip(ks.tolist(), ke.tolist())], pa.string())
        else:
            keys = binary_array([view[s:e] for s, e in zip(ks.tolist(), ke.tolist())], pa.string())
        pieces = [view[s:e] for s, e in zip(o.tolist(), c.tolist())]
        texts = binary_array(pieces, pa.binary())
        doc = b"".join((b"[", b",".join(pieces), b"]"))
        del pieces, view
        steps = pa.array(ctx_step, pa.string()).take(pa.array(ctx))
        kinds = pa.array(ctx_kind, pa.string()).take(pa.array(ctx))
        entries = Entries(steps, kinds, keys, texts, doc=doc, offsets=(o + offset).tolist())
        entries.shape = shape
        return entries, cut

    def _check_skeleton(self, buf: bytes, o, c, cut: int, offset: int, eof: bool):
        """The levels above the ops of ``buf[:cut]``, each op object replaced by 0, must be
        JSON: wrapped in the brackets and keys open at its start (after an op, at depth 3,
        unless it is the file's start) and closed at its end (after an op, unless it is the
        file's end)."""
        pieces = []
        last = 0
        for s, e in zip(o.tolist(), c.tolist()):
            pieces.append(buf[last:s])
            last = e
        pieces.append(buf[last:cut])
        text = b"0".join(pieces)
        head = b'{"s":{"k":{"o":0' if offset and self.depth == 3 else b""
        tail = b"" if eof else b"}}}"
        try:
            orjson.loads(head + text + tail)
        except orjson.JSONDecodeError as e:
            at = offset + _unplaced(max(0, e.pos - len(head)), o, c, cut)
            raise InputError(self.path, f"invalid JSON ({e.msg})", where=at) from None


def _unplaced(x: int, o, c, cut: int) -> int:
    """The byte of ``buf[:cut]`` at position ``x`` of its skeleton (each op ``[o, c)`` replaced
    by the one byte ``0``): a byte of the text between ops, or the start of an op."""
    for s, e in zip([0] + c.tolist(), o.tolist() + [cut]):  # text [s, e), then an op's 0
        if x <= e - s:
            return s + x
        x -= e - s + 1
    return cut


def _key(buf: bytes, start: int, end: int, path, offset: int) -> str:
    """The JSON string buf[start:end] (without its quotes) decoded."""
    raw = buf[start:end]
    if 92 in raw:  # an escape: JSON decodes it
        try:
            return orjson.loads(b'"' + raw + b'"')
        except orjson.JSONDecodeError as e:
            raise InputError(path, f"invalid JSON ({e.msg})", where=offset + start) from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise InputError(path, "invalid JSON (str is not valid UTF-8)",
                         where=offset + start + e.start) from None


def _shape(sch, spos, before, qpos, o, c) -> dict | None:
    """What the ops [o, c) of a block hold, counted on the structural index: colons, object
    and list openings by depth (an op's object opens at depth 3), and quotes. With the
    decoded values these tell whether a lenient decoder read every value as it is
    (:func:`~ascendprof.readers.communication.decode_duckdb.duck_tables`)."""
    if not len(o):
        return None
    lo, hi = np.searchsorted(spos, o), np.searchsorted(spos, c)
    edge = np.zeros(len(sch) + 1, np.int32)
    np.add.at(edge, lo, 1)
    np.add.at(edge, hi, -1)
    inside = np.cumsum(edge[:-1]) > 0
    ch, dep = sch[inside], before[inside]
    top = 12

    def by_depth(mask):
        return np.bincount(np.minimum(dep[mask], top), minlength=top + 1)

    quotes = int((np.searchsorted(qpos, c) - np.searchsorted(qpos, o)).sum())
    return {"colons": by_depth(ch == 58), "objects": by_depth(ch == 123),
            "lists": by_depth(ch == 91), "quotes": quotes}
