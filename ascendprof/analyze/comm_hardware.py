"""Communication against the hardware: per communication instance (one op name of one group in
one step, as in analyze.late_arrivals) its arrival skew, transfer time, MB sent over the links
between ranks (HCCS, PCIE, SIO, RDMA; SDMA sums the on-node ones) and its bus and algorithm
bandwidth (bus bandwidth over the ring algorithm's factor, :func:`bus_factor`); per rank and
transport the achieved link bandwidth against :data:`LINK_REFERENCE_GBPS`. Input: COMM_OPS and
COMM_BANDWIDTH. Definitions: docs/analyses.md, "Communication against the hardware".
"""

from __future__ import annotations

from array import array

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from ascendprof.analyze.codes import filled_codes
from ascendprof.model import schemas as S

OPS = "comm_hw_ops"
LINKS = "comm_hw_links"
LINK_TRANSPORTS = ("HCCS", "PCIE", "SIO", "RDMA")

#: reference bandwidth per transport (GB/s, one direction, per link or port), with its source;
#: None where no public figure was found
LINK_REFERENCE_GBPS = {
    "HCCS": (30.0, "Ascend 910: HCCS 240 Gbps per link (Hot Chips 31, 2019; besthub.dev "
                   "'How Huawei Ascend 910 Redefines AI Training Performance')"),
    "PCIE": (31.5, "PCIe 4.0 x16 theoretical 31.5 GB/s, the 910B card-to-host link "
                   "(jishuzhan.net/article/1872432607539499010)"),
    "RDMA": (12.5, "100 GE RoCE per NPU port (Atlas 900: 'HCCS, PCIe 4.0, 100G Ethernet', "
                   "hxnews.com Atlas 900 launch 2019)"),
    "SIO": (None, "no public figure found"),
    "SDMA": (18.0, "msprof-analyze rules bandwidth_contention.yaml sdma_baseline 18 GB/s "
                   "(a practical baseline, not a hardware limit)"),
}

OPS_SCHEMA = pa.schema([
    ("rank", pa.int32()), ("step", pa.int32()), ("group", pa.string()), ("op_name", pa.string()),
    ("start_ns", pa.int64()), ("elapse_ns", pa.int64()), ("sent_mb", pa.float64())])
LINK_SCHEMA = pa.schema([
    ("rank", pa.int32()), ("transport", pa.string()), ("ops", pa.int64()),
    ("size_mb", pa.float64()), ("transit_ns", pa.int64()), ("large_mb", pa.float64())])

INSTANCE_COLUMNS = ["Step", "Group", "Op Name", "Ranks", "Arrival Skew(ms)", "Transfer(ms)",
                    "Sent per Rank(MB)", "Bus Factor", "Bus Bandwidth(GB/s)",
                    "Algorithm Bandwidth(GB/s)"]
LINK_COLUMNS = ["Rank", "Transport", "Ops", "Size(MB)", "Transit(ms)", "Bandwidth(GB/s)",
                "Large Packet Ratio", "Reference(GB/s)", "Share of Reference(%)",
                "Reference Source"]


def bus_factor(op_name: str, n: int) -> float:
    """The ring algorithm's bus-bandwidth factor of an op (module doc) for ``n`` ranks."""
    t = str(op_name).lower()
    if n <= 1:
        return 1.0
    if "allreduce" in t:
        return 2.0 * (n - 1) / n
    if any(k in t for k in ("allgather", "reducescatter", "alltoall")):
        return (n - 1) / n
    return 1.0


_KEYS = ("step", "group", "op_name")
#: link rows keyed a slice at a time (a few arrays of 8 bytes a row each, not ~4 M rows' worth)
_SLICE_ROWS = 1 << 18


class _OpKeys:
    """The distinct (step, group, op_name) keys of the ops, numbered (a null is a value of its
    own: a null group matches a null group), and :meth:`of` the number of any other table's
    rows in that numbering (-1: no op has the key).

    The key columns are coded one at a time against the ops' distinct values (0 null, i + 1
    the i-th value) and combined pairwise, each pair renumbered over the ops' distinct pairs
    (sorted: looked up by binary search), so no combined key exceeds (ops + 1)^2. Only the
    ops' keys are hashed, once; the link rows are looked up in them a slice at a time, never
    one hash table over ops and links together (a 1 GB communication.json: ~4 M link rows,
    ~0.4 GB)."""

    def __init__(self, ops: pa.Table):
        self.values, self.pairs, self._maps = [], [], {}
        code = None
        for c in _KEYS:
            dist, k = self._encode(ops[c])
            self.values.append(dist)
            if code is None:
                code = k
                continue
            uniq, inv = np.unique(code * (len(dist) + 1) + k, return_inverse=True)
            self.pairs.append(uniq)
            code = inv.reshape(-1).astype(np.int64, copy=False)
        self.ops = code if code is not None else np.zeros(0, np.int64)
        self.n = len(self.pairs[-1]) if self.pairs else 0

    @staticmethod
    def _encode(column) -> tuple[pa.Array, np.ndarray]:
        """The distinct non-null values of an ops' column and its codes (int64, 0 null)."""
        if pa.types.is_dictionary(column.type):
            column = column.cast(column.type.value_type)
        if pa.types.is_integer(column.type):
            column = pc.cast(column, pa.int64())
        enc = pc.dictionary_encode(column)  # one growing dictionary over the chunks
        chunks = enc.chunks if isinstance(enc, pa.ChunkedArray) else [enc]
        if not chunks:
            return pa.array([], column.type), np.zeros(0, np.int64)
        idx = pa.chunked_array([ch.indices for ch in chunks], pa.int32())
        codes = np.asarray(pc.fill_null(idx, -1).to_numpy(), np.int64) + 1
        return chunks[-1].dictionary, codes

    def _codes(self, column, i: int) -> np.ndarray:
        """int64 per row of ``column``: 0 null, v + 1 for the ops' i-th column's value v, -1
        for a value no op has."""
        dist = self.values[i]
        parts = []
        chunks = column.chunks if isinstance(column, pa.ChunkedArray) else [column]
        for ch in chunks:
            if pa.types.is_dictionary(ch.type):  # the dictionary looked up once, not per row
                d = ch.dictionary
                sig = (i, len(d), d.offset, *(b.address if b is not None else 0
                                              for b in d.buffers()))
                m = self._maps.get(sig)
                if m is None:
                    m = self._lookup_dictionary(d, dist)
                    self._maps[sig] = m
                idx = ch.indices
                out = m[np.asarray(pc.fill_null(idx, 0).to_numpy(zero_copy_only=False),
                                   np.int64)] if len(m) else np.zeros(len(ch), np.int64)
                if idx.null_count:
                    out[~np.asarray(idx.is_valid().to_numpy(zero_copy_only=False), bool)] = 0
            else:
                out = self._lookup(ch, dist)
            parts.append(out)
        return np.concatenate(parts) if parts else np.zeros(0, np.int64)

    @classmethod
    def _lookup_dictionary(cls, d: pa.Array, dist: pa.Array) -> np.ndarray:
        """:meth:`_lookup` of a dictionary ``d`` (distinct values). One much smaller than
        the ops' values (a row group's op names, ~17 k of 1.35 M) is hashed itself and the
        ops' values looked up in it: hashing the ops' values again for every row group's
        dictionary was ~0.1 GB and ~0.1 s each."""
        if d.type != dist.type:
            d = pc.cast(d, dist.type)
        if 4 * len(d) >= len(dist) or pc.count_distinct(d, mode="all").as_py() != len(d):
            return cls._lookup(d, dist)
        pos = pc.index_in(dist, value_set=d)  # of each ops' value, its place in d
        ok = np.asarray(pos.is_valid().to_numpy(zero_copy_only=False), bool)
        out = np.full(len(d), -1, np.int64)
        out[np.asarray(pos.filter(pa.array(ok)).to_numpy(), np.int64)] = \
            np.flatnonzero(ok) + 1
        if d.null_count:
            out[~np.asarray(d.is_valid().to_numpy(zero_copy_only=False), bool)] = 0
        return out

    @staticmethod
    def _lookup(values: pa.Array, dist: pa.Array) -> np.ndarray:
        if values.type != dist.type:
            values = pc.cast(values, dist.type)
        pos = pc.index_in(values, value_set=dist)
        out = np.asarray(pc.fill_null(pos, -2).to_numpy(zero_copy_only=False), np.int64) + 1
        if values.null_count:
            out[~np.asarray(values.is_valid().to_numpy(zero_copy_only=False), bool)] = 0
        return out

    def of(self, table: pa.Table) -> np.ndarray:
        """The key number (as :attr:`ops` numbers them) of each row of ``table``; -1 where no
        op has its key."""
        code = None
        for i, c in enumerate(_KEYS):
            k = self._codes(table[c], i)
            if code is None:
                code = k
                continue
            uniq = self.pairs[i - 1]
            key = code * (len(self.values[i]) + 1) + k
            pos = np.minimum(np.searchsorted(uniq, key), max(len(uniq) - 1, 0))
            found = (code >= 0) & (k >= 0)
            if len(uniq):
                found &= uniq[pos] == key
            else:
                found[:] = False
            code = np.where(found, pos, -1)
        return code


class _LinkSums:
    """Per op (of the ops whose keys ``keys`` holds) the sum of the sizes (MB) of the link
    rows with its (step, group, op_name), nulls skipped, compensated as pandas' grouped sum
    adds (Kahan, in row order); 0.0 for an op without such a row. :meth:`add` takes the rows
    of a table (or of its parts, in row order: the sums are those of one pass over them)."""

    def __init__(self, keys: "_OpKeys"):
        # running sums and compensations as C doubles (8 bytes a key, not a Python float of
        # ~32)
        self.keys = keys
        self.tot, self.comp = array("d", bytes(8 * keys.n)), array("d", bytes(8 * keys.n))

    def add(self, bw: pa.Table, link: np.ndarray, size: np.ndarray) -> None:
        """The rows of ``bw`` where ``link`` (a bool per row) is set, of sizes ``size``
        (float64 per row, NaN for null), keyed and summed a slice of ``bw`` at a time."""
        tot, comp, keys = self.tot, self.comp, self.keys
        cols = bw.select(list(_KEYS))
        for at in range(0, bw.num_rows, _SLICE_ROWS):
            sel = link[at:at + _SLICE_ROWS] & ~np.isnan(size[at:at + _SLICE_ROWS])
            if not sel.any():
                continue
            rows = np.flatnonzero(sel)
            kb = keys.of(cols.slice(at, _SLICE_ROWS))[rows]  # (a take would copy the texts)
            vals = size[at + rows]
            ok = kb >= 0
            for k, v in zip(kb[ok].tolist(), vals[ok].tolist()):
                s = tot[k]
                c = comp[k]
                y = v - c
                t = s + y
                c = t - s - y
                comp[k] = 0.0 if c != c else c
                tot[k] = t

    def result(self, n_ops: int) -> pa.Array:
        """The sums of the ``n_ops`` ops, in their order."""
        n = self.keys.n
        return pa.array(np.asarray(self.tot, np.float64)[self.keys.ops] if n
                         else np.zeros(n_ops), pa.float64())


def _link_sent(bw: pa.Table, link: np.ndarray, size: np.ndarray, keys: "_OpKeys",
               n_ops: int) -> pa.Array:
    """Per op (of the ``n_ops`` whose keys ``keys`` holds) the sum of the sizes (MB) of the
    link rows (``link``: a bool per row of ``bw``) with its (step, group, op_name), as
    :class:`_LinkSums` adds them."""
    sums = _LinkSums(keys)
    sums.add(bw, link, size)
    return sums.result(n_ops)


def _bandwidth_parts(tables):
    """The rank's COMM_BANDWIDTH in parts, in row order (tables of the same columns): its row
    groups when ``tables`` gives them (``tables.row_groups(name)``: a spilled rank's table
    read a row group at a time, analyze.registry), else the table whole; nothing when the
    rank has none."""
    row_groups = getattr(tables, "row_groups", None)
    if row_groups is not None:
        yield from row_groups(S.COMM_BANDWIDTH)
        return
    bw = tables.get(S.COMM_BANDWIDTH)
    if bw is not None:
        yield bw


def rank_partial(tables: dict, rank: int, meta: dict | None = None) -> dict[str, pa.Table]:
    """{OPS: per communication op its start, elapse and MB sent over the links between ranks;
    LINKS: per transport the rank's total size, transit time and large-packet MB}.
    COMM_BANDWIDTH is read in parts (:func:`_bandwidth_parts`: a spilled rank's row groups,
    ~0.25 GB whole at a 1 GB communication.json), each part's sums added to the previous
    ones': the same values as from the table whole."""
    ops = tables.get(S.COMM_OPS)
    if ops is None or ops.num_rows == 0:
        return {}
    # Columns and numpy arrays, not DataFrames: a rank holds a few dozen ops, where pandas'
    # per-call cost (groupby, indexing, frame building) was most of this function's time; and
    # integer codes of the (step, group, op) keys, not a Python tuple per row: a
    # communication.json of 10^6 ops made ~10^7 Python objects of its keys (~2.5 GB).
    o = ops.select(["step", "group", "op_name", "start_ns", "elapse_ns"])  # (filter copies)
    if o["start_ns"].null_count:  # (10^6 ops: ~60 MB of names copied by a filter of none)
        o = o.filter(pc.is_valid(o["start_ns"]))
    out = {}
    # the ops' keys first: encoding them (1.35 M op names) is this function's largest
    # transient, and no per-row array of the bandwidth rows exists yet
    sums = _LinkSums(_OpKeys(o.select(list(_KEYS)))) if S.COMM_BANDWIDTH in tables else None
    linked = False
    # per transport: rows, and the sizes, sizes x large-packet ratios and transit times of
    # its rows of a positive size, part by part (summed once whole, in row order: the same
    # sums as over the table whole)
    per: dict[str, list] = {}
    transit_null = False
    for bw in _bandwidth_parts(tables):
        if bw.num_rows == 0:
            continue
        tr_values, tr_codes = filled_codes(bw["transport"], "")
        tr_values = np.array([str(v).upper() for v in tr_values], dtype=object)
        size = np.asarray(bw["size_mb"].to_numpy(), np.float64)  # null: NaN
        link = np.isin(tr_values, LINK_TRANSPORTS)[tr_codes]
        # a null step never matches an op (as before: a NaN key), a null group or name
        # matches the ops' null
        link &= np.asarray(pc.is_valid(bw["step"]).to_numpy(zero_copy_only=False), bool)
        if link.any():
            sums.add(bw, link, size)
            linked = True
        sums.keys._maps.clear()  # (keyed by the part's buffers, which go with the part)
        del link
        transit_null |= bool(bw["transit_ns"].null_count)
        pos = size > 0  # (NaN, a null, is not)
        if pos.any():
            # each transport's rows taken from the columns, not every row's transit time and
            # ratio as numpy arrays at once (~0.15 GB of 5 M rows): the same values summed
            for tr in sorted(set(tr_values[tr_codes[pos]].tolist())):
                m = pos & (tr_values == tr)[tr_codes]
                at = pa.array(np.flatnonzero(m))
                lpr = np.nan_to_num(np.asarray(bw["large_packet_ratio"].take(at).to_numpy(),
                                               np.float64), nan=0.0)
                mb = size[m]
                got = per.setdefault(tr, [0, [], [], []])
                got[0] += int(m.sum())
                got[1].append(mb)
                got[2].append(mb * lpr)
                got[3].extend(bw["transit_ns"].take(at).chunks)
                del at, lpr, mb, m
        del bw, size, pos, tr_codes
    sent_mb = sums.result(o.num_rows) if linked else None
    sums = None
    if per:
        rows = []
        for tr in sorted(per):
            n, mbs, larges, transits = per.pop(tr)
            mb, large = np.concatenate(mbs), np.concatenate(larges)
            del mbs, larges
            transit = pa.chunked_array(transits).to_numpy(zero_copy_only=False)
            transit = np.nan_to_num(np.asarray(transit, np.float64), nan=0.0) \
                if transit_null else np.asarray(transit, np.int64)
            rows.append({"rank": rank, "transport": tr, "ops": n,
                         "size_mb": float(mb.sum()),
                         "transit_ns": int(transit.sum()),
                         "large_mb": float(large.sum())})
            del transit, mb, large, transits
        out[LINKS] = pa.Table.from_pylist(rows, schema=LINK_SCHEMA)
    if sent_mb is None:
        sent_mb = pa.array(np.zeros(o.num_rows), pa.float64())
    cols = {"rank": pa.array(np.full(o.num_rows, rank, np.int32)),
            **{c: o[c] for c in ("step", "group", "op_name", "start_ns", "elapse_ns")},
            "sent_mb": sent_mb}
    out[OPS] = pa.table({f.name: pc.cast(cols[f.name], f.type) for f in OPS_SCHEMA})
    return out


def _sorted_codes(column) -> tuple[np.ndarray, pa.Array]:
    """Codes of a key column in sorted order of its values (nulls last, as pandas' sorted
    groupby with dropna=False places them): ``(codes int64 per row, the distinct values in
    that order, null last when there is one)``."""
    enc = pc.dictionary_encode(column)  # one growing dictionary over the chunks
    chunks = enc.chunks if isinstance(enc, pa.ChunkedArray) else [enc]
    if not chunks:
        return np.zeros(0, np.int64), pa.array([], column.type)
    d = chunks[-1].dictionary
    order = np.asarray(pc.sort_indices(d).to_numpy(), np.int64)
    rank = np.empty(len(order) + 1, np.int64)
    rank[order] = np.arange(len(order))
    rank[-1] = len(order)  # null: after every value
    idx = pa.chunked_array([c.indices for c in chunks], pa.int32())
    codes = rank[np.asarray(pc.fill_null(idx, -1).to_numpy(), np.int64)]
    return codes, pa.concat_arrays([d.take(pa.array(order)), pa.nulls(1, d.type)])


def _as_pandas(column) -> np.ndarray:
    """An integer column as pandas converts it: int64, or float64 (NaN for null) when it has
    a null."""
    return np.asarray(column.to_numpy(), np.float64 if column.null_count else np.int64)


def _instances(ops: pa.Table):
    """Per (step, group, op_name) instance of two or more ranks, in the order of pandas'
    sorted grouping (each key ascending, nulls last): ``(step or None, group, op_name, ranks,
    latest end, latest start, earliest start, largest MB sent)``, over the ops with an elapse
    time, the values of the types pandas' grouped max / min / nunique gave (a frame of every
    op was ~0.3 GB at 1.35 M ops of one rank; codes and numpy, and only the instances of two
    or more ranks become Python values). A null group or op name is NaN, as pandas' index."""
    keep = pc.is_valid(ops["elapse_ns"])
    floats = {c: bool(ops[c].null_count) for c in ("start_ns", "elapse_ns")}
    d = ops.filter(keep) if ops["elapse_ns"].null_count else ops
    if d.num_rows == 0 or pc.count_distinct(d["rank"]).as_py() < 2:
        return  # (no instance of two ranks: one rank's 1.35 M op names not even encoded)
    code, order, starts, levels = _key_groups(d)
    ranks = np.asarray(d["rank"].to_numpy(), np.int64)
    pair = np.unique(code * (int(ranks.max()) - int(ranks.min()) + 1) + (ranks - ranks.min()))
    n = np.bincount(pair // (int(ranks.max()) - int(ranks.min()) + 1), minlength=len(starts))
    many = np.flatnonzero(n >= 2)
    if not len(many):
        return
    start = _as_pandas(d["start_ns"])
    elapse = _as_pandas(d["elapse_ns"])
    if floats["start_ns"]:
        start = start.astype(np.float64)
    if floats["elapse_ns"]:
        elapse = elapse.astype(np.float64)
    end = start + elapse
    sent = np.asarray(d["sent_mb"].to_numpy(zero_copy_only=False), np.float64)
    mx = np.fmax if end.dtype.kind == "f" else np.maximum
    smx = np.fmax if start.dtype.kind == "f" else np.maximum
    smn = np.fmin if start.dtype.kind == "f" else np.minimum
    end_max = mx.reduceat(end[order], starts)
    start_max = smx.reduceat(start[order], starts)
    start_min = smn.reduceat(start[order], starts)
    mb = np.fmax.reduceat(sent[order], starts)
    first = order[starts[many]]  # a row of each kept group
    cols = [values.take(pa.array(k[first])).to_pylist() for k, values in levels]
    del levels
    nan = np.nan
    for j, i in enumerate(many.tolist()):
        step, grp, name = cols[0][j], cols[1][j], cols[2][j]
        yield (None if step is None else int(step), nan if grp is None else grp,
               nan if name is None else name, int(n[i]), end_max[i], start_max[i], start_min[i],
               mb[i])


def _key_groups(t: pa.Table):
    """``t``'s rows (one or more) grouped by (step, group, op_name) in pandas' sorted order
    (:func:`_sorted_codes`): ``(group number per row, the rows in group order (stable),
    each group's first place in that order, per key column its (codes, values))``."""
    code, levels = None, []
    for c in _KEYS:
        k, values = _sorted_codes(t[c])
        levels.append((k, values))
        if code is None:
            code = k
            continue
        _, code = np.unique(code * (len(values) + 1) + k, return_inverse=True)  # sorted
        code = code.reshape(-1)
    order = np.argsort(code, kind="stable")
    g = code[order]
    return code, order, np.flatnonzero(np.r_[True, g[1:] != g[:-1]]), levels


#: per (step, group, op_name) of a batch of ranks (:class:`_Merged`): its number of distinct
#: ranks, the latest end, the latest and the earliest start, as exact integers (``*_i``: valid
#: when no op of the batch lacks a start) and as the floats pandas' NaN-holding columns give
#: (``*_f``), and the largest MB sent; and how the batches' values combine
_AGG = {"n": np.add, "end_i": np.maximum, "smax_i": np.maximum, "smin_i": np.minimum,
        "end_f": np.fmax, "smax_f": np.fmax, "smin_f": np.fmin, "mb": np.fmax}


class _RanksRepeat(Exception):
    """A rank number in two batches: distinct ranks per instance are not a sum of batches."""


class _Merged:
    """The instances of :func:`_instances` over ops given a batch of ranks at a time
    (:meth:`add`), combined as they come: per (step, group, op_name) seen so far, the
    :data:`_AGG` values, so that what is held is one batch's ops and one row per key, never
    every rank's ops at once. Maxima, minima and counts of integers and maxima of floats
    combine exactly (floats computed the way the whole table's would be: ``start + elapse`` of
    the two converted to float64 when either column has a null anywhere; :meth:`instances`
    picks the integers or the floats as the whole table's types would be).

    Raises :class:`_RanksRepeat` in :meth:`add` when a batch holds a rank number an earlier
    batch held."""

    def __init__(self):
        self.keys: pa.Table | None = None
        self.vals: dict[str, np.ndarray] = {}
        self.start_null = self.elapse_null = False
        self.seen: set[int] = set()
        self.rows = 0

    def add(self, ops: pa.Table) -> None:
        if ops.num_rows == 0:
            return
        self.rows += ops.num_rows
        ranks_all = set(pc.unique(ops["rank"]).to_pylist())
        if ranks_all & self.seen:
            raise _RanksRepeat
        self.seen |= ranks_all
        self.start_null |= bool(ops["start_ns"].null_count)
        self.elapse_null |= bool(ops["elapse_ns"].null_count)
        d = ops.filter(pc.is_valid(ops["elapse_ns"])) if ops["elapse_ns"].null_count else ops
        if d.num_rows == 0:
            return
        code, order, starts, _ = _key_groups(d)
        ranks = np.asarray(d["rank"].to_numpy(), np.int64)
        span = int(ranks.max()) - int(ranks.min()) + 1
        pair = np.unique(code * span + (ranks - ranks.min()))
        vals = {"n": np.bincount(pair // span, minlength=len(starts)).astype(np.int64)}
        elapse = np.asarray(d["elapse_ns"].to_numpy(), np.int64)
        if d["start_ns"].null_count:  # (the floats are used: the whole table has a null)
            start_f = np.asarray(d["start_ns"].to_numpy(zero_copy_only=False), np.float64)
            zero = np.zeros(len(starts), np.int64)
            vals.update(end_i=zero, smax_i=zero, smin_i=zero)
        else:
            start = np.asarray(d["start_ns"].to_numpy(), np.int64)
            so = start[order]
            vals.update(end_i=np.maximum.reduceat((start + elapse)[order], starts),
                        smax_i=np.maximum.reduceat(so, starts),
                        smin_i=np.minimum.reduceat(so, starts))
            start_f = start.astype(np.float64)
            del start, so
        sf = start_f[order]
        vals.update(end_f=np.fmax.reduceat((start_f + elapse.astype(np.float64))[order], starts),
                    smax_f=np.fmax.reduceat(sf, starts), smin_f=np.fmin.reduceat(sf, starts))
        sent = np.asarray(d["sent_mb"].to_numpy(zero_copy_only=False), np.float64)
        vals["mb"] = np.fmax.reduceat(sent[order], starts)
        keys = d.select(list(_KEYS)).take(pa.array(order[starts]))
        del d, code, order, starts, ranks, pair, elapse, start_f, sf, sent
        if self.keys is None:
            self.keys, self.vals = keys.combine_chunks(), vals
            return
        # the keys so far, then the batch's, grouped again (a stable sort: in that order)
        both = pa.concat_tables([self.keys, keys]).combine_chunks()
        _, order, starts, _ = _key_groups(both)
        self.vals = {c: f.reduceat(np.concatenate([self.vals[c], vals[c]])[order], starts)
                     for c, f in _AGG.items()}
        self.keys = both.take(pa.array(order[starts])).combine_chunks()

    def instances(self):
        """What :func:`_instances` yields of all ops added."""
        if self.keys is None:
            return
        v = self.vals
        many = np.flatnonzero(v["n"] >= 2)
        if not len(many):
            return
        floats = self.start_null or self.elapse_null
        end_max = v["end_f"] if floats else v["end_i"]
        start_max, start_min = ((v["smax_f"], v["smin_f"]) if self.start_null
                                else (v["smax_i"], v["smin_i"]))
        at = pa.array(many)
        cols = [self.keys[c].take(at).to_pylist() for c in _KEYS]
        nan = np.nan
        for j, i in enumerate(many.tolist()):
            step, grp, name = cols[0][j], cols[1][j], cols[2][j]
            yield (None if step is None else int(step), nan if grp is None else grp,
                   nan if name is None else name, int(v["n"][i]), end_max[i], start_max[i],
                   start_min[i], v["mb"][i])


def build_batches(ops_batches, links: pa.Table | None) -> dict[str, pd.DataFrame]:
    """:func:`build` of the ops of ``ops_batches()`` (an iterable of comm_hw_ops tables, each
    a batch of whole ranks: model.results.concat_batches) concatenated, combined a batch at a
    time (:class:`_Merged`): one batch's ops held, not every rank's. The same frames as
    :func:`build` (a rank number in two batches: the ops concatenated and :func:`build`)."""
    merged = _Merged()
    try:
        for t in ops_batches():
            merged.add(t)
            del t
    except _RanksRepeat:
        done = [t for t in ops_batches() if t.num_rows]
        return build(pa.concat_tables(done, promote_options="permissive") if done else None,
                     links)
    return _frames(merged.instances() if merged.rows else None, links)


def build(ops: pa.Table | None, links: pa.Table | None) -> dict[str, pd.DataFrame]:
    """{"collective_bandwidth.csv": per instance of two or more ranks; "link_bandwidth.csv":
    per rank and transport}."""
    return _frames(_instances(ops) if ops is not None and ops.num_rows else None, links)


def _frames(instances, links: pa.Table | None) -> dict[str, pd.DataFrame]:
    """:func:`build`'s frames of the instances (:func:`_instances`; None: no ops)."""
    out: dict[str, pd.DataFrame] = {}
    if instances is not None:
        rows = []
        for step, grp, name, n, end_max, start_max, start_min, mb in instances:
            t = int(end_max - start_max)
            f = bus_factor(name, n)
            mb = float(mb)
            bus = mb / (t / 1e6) if t > 0 and mb > 0 else None  # MB/ms = GB/s
            rows.append([step, grp, name, n, round((start_max - start_min) / 1e6, 3),
                         round(t / 1e6, 3), round(mb, 4), round(f, 4),
                         None if bus is None else round(bus, 3),
                         None if bus is None else round(bus / f, 3)])
        inst = pd.DataFrame(rows, columns=INSTANCE_COLUMNS)
        inst["Step"] = inst["Step"].astype("Int64")
        out["collective_bandwidth.csv"] = inst
    if links is not None and links.num_rows:
        ln = links.to_pandas().groupby(["rank", "transport"], as_index=False).sum()
        rows = []
        for r in ln.itertuples(index=False):
            bw = r.size_mb / (r.transit_ns / 1e6) if r.transit_ns else None
            ref, src = LINK_REFERENCE_GBPS.get(r.transport, (None, "no reference"))
            rows.append([int(r.rank), r.transport, int(r.ops), round(r.size_mb, 4),
                         round(r.transit_ns / 1e6, 3), None if bw is None else round(bw, 3),
                         round(r.large_mb / r.size_mb, 4) if r.size_mb else None, ref,
                         None if bw is None or not ref else round(100 * bw / ref, 2), src])
        out["link_bandwidth.csv"] = pd.DataFrame(rows, columns=LINK_COLUMNS)
    return out
