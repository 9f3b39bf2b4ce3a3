"""cluster_communication_matrix.json as msprof-analyze writes it, and the links it leaves out."""

from __future__ import annotations

import re
from collections import defaultdict

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc

from ascendprof.analyze.cluster_communication.groups import group_membership, key_for
from ascendprof.analyze.cluster_communication.matrix_columns import NeedsRecords, group_json
from ascendprof.analyze.cluster_communication.opinfo import TOTAL_OP_INFO, ratio, to_ms
from ascendprof.model.results import concat_parts

_MATRIX_TYPE_RE = ("send|reduce|invalid|broadcast|allreduce|receive|allgather|reducescatter|"
                   "scatter|alltoall|alltoallv|alltoallvc|batchsendrecv")


def _rows(table: pa.Table | None) -> list[dict]:
    if table is None or table.num_rows == 0:
        return []
    return table.to_pylist()


def _is_raw_op_row(r: dict) -> bool:
    """A flat-CANN matrix record (link_key is the op key itself), not a torch_npu summary."""
    return r.get("op_name") is not None and r["link_key"].rpartition("@")[0] == r["op_name"]


def _matrix_type(op_name: str) -> str:
    m = re.search(_MATRIX_TYPE_RE, op_name.lower())
    return m.group() if m else op_name.split("__")[0]


def _condense_raw(rows: list[dict]) -> list[dict]:
    """Per rank and step, turn raw per-op link records into the ``<type>-top1/middle/bottom1/
    bottom2/bottom3/total@<group>`` records torch_npu writes (spec §A.6; msprof-analyze's
    MsprofCommunicationMatrixAdapter does the same for PROF_ data)."""
    out, raw = [], defaultdict(list)
    for r in rows:
        if _is_raw_op_row(r):
            raw[(r["rank"], r["step_key"], r["kind"])].append(r)
        else:
            out.append(r)
    for (rank, step_key, kind), recs in raw.items():
        by_link: dict[tuple, list[dict]] = {}
        for r in recs:
            by_link.setdefault((_matrix_type(r["op_name"]), r["group"], r["src_rank"],
                                r["dst_rank"]), []).append(r)
        for (typ, group, src, dst), data in by_link.items():
            data = sorted(data, key=lambda x: x.get("bandwidth_gbps") or 0, reverse=True)
            picks = [("top1", data[0]), ("middle", data[len(data) // 2]), ("bottom1", data[-1])]
            size = sum(x.get("size_mb") or 0 for x in data)
            time_ns = sum(x.get("transit_ns") or 0 for x in data)
            total = dict(data[0], op_name=None, size_mb=size, transit_ns=time_ns,
                         bandwidth_gbps=ratio(size, time_ns / 1e6), large_packet_ratio=None)
            picks.append(("total", total))
            if len(data) >= 2:
                picks.append(("bottom2", data[-2]))
            if len(data) >= 3:
                picks.append(("bottom3", data[-3]))
            for label, rec in picks:
                out.append(dict(rec, link_key=f"{typ}-{label}@{group}"))
    return out


_LINK_FIELDS = ("rank", "kind", "group", "step_key", "link_key", "src_rank", "dst_rank",
                "transport", "size_mb", "transit_ns", "op_name")


def _link_records(comm_links: pa.Table | None):
    """COMM_LINKS as tuples of :data:`_LINK_FIELDS`, ranks ascending (file order within a
    rank), raw flat-CANN records condensed first (:func:`_condense_raw`). Column-wise: no
    dict per row unless there are raw records."""
    if comm_links is None or comm_links.num_rows == 0:
        return []
    if _has_raw_records(comm_links):
        rows = sorted(_condense_raw(_rows(comm_links)), key=lambda r: r["rank"])
        return [tuple(r[f] for f in _LINK_FIELDS) for r in rows]
    t = comm_links.take(pc.sort_indices(comm_links.column("rank")))  # a stable sort
    return zip(*(t.column(f).to_pylist() for f in _LINK_FIELDS))


def _has_raw_records(comm_links: pa.Table) -> bool:
    before_at = pc.replace_substring_regex(comm_links.column("link_key"), "@[^@]*$", "")
    return pc.any(pc.fill_null(pc.equal(before_at, comm_links.column("op_name")), False)).as_py()


def _check_add_op(op_key: str) -> bool:
    """msprof-analyze's filter for matrix totals: skip top/middle/bottom summaries."""
    return not any(s in op_key for s in ("middle", "top", "bottom"))


def _new_link() -> dict:
    return {"Transport Type": "", "Transit Time(ms)": 0, "Transit Size(MB)": 0, "Op Name": ""}


def _add_link(acc: dict, rec: dict) -> None:
    acc["Transport Type"] = rec["Transport Type"]
    acc["Op Name"] = rec.get("Op Name") or ""
    acc["Transit Time(ms)"] += rec.get("Transit Time(ms)", 0)
    acc["Transit Size(MB)"] += rec.get("Transit Size(MB)", 0)


def _merge_step(step_ops: dict[str, dict[int, dict[str, dict]]]) -> dict:
    """One (group key, step) of the matrix: sum each link over ranks, map local -> global ranks
    through the self-links, add per-group totals (CommMatrixAnalysis.compute_total_info)."""
    local_to_global: dict[str, dict[int, int]] = {}
    for op_key, ranks in step_ops.items():
        group = op_key.split("@")[-1]
        for rank, links in ranks.items():
            for (src, dst) in links:
                if src == dst:
                    local_to_global.setdefault(group, {}).setdefault(src, rank)
    merged: dict[str, dict] = {}
    for op_key, ranks in step_ops.items():
        rmap = local_to_global.get(op_key.split("@")[-1], {})
        acc: dict[tuple, dict] = {}
        for links in ranks.values():
            for link, rec in links.items():
                _add_link(acc.setdefault(link, _new_link()), rec)
        glob = {}
        for (src, dst), d in acc.items():
            if src not in rmap or dst not in rmap:
                continue
            d["Bandwidth(GB/s)"] = ratio(d["Transit Size(MB)"], d["Transit Time(ms)"])
            glob[f"{rmap[src]}-{rmap[dst]}"] = d
        merged[op_key] = glob
    totals: dict[str, dict[str, dict]] = {}
    for op_key, links in merged.items():
        if not _check_add_op(op_key):
            continue
        for link, d in links.items():
            _add_link(totals.setdefault(op_key.split("@")[-1], {}).setdefault(link, _new_link()), d)
    for group, links in totals.items():
        for d in links.values():
            d["Bandwidth(GB/s)"] = ratio(d["Transit Size(MB)"], d["Transit Time(ms)"])
        merged[f"{TOTAL_OP_INFO}@{group}"] = links
    return merged


def unmapped_links(comm_links: pa.Table | None) -> list[dict]:
    """The links cluster_communication_matrix.json leaves out because a local rank of theirs
    cannot be mapped to a global rank (no rank of the collection reports its self-link
    ``"i-i"`` in that group and step -- typically the peer on another node whose data is not
    here), as msprof-analyze leaves them out (it warns once per link and op).

    In: all ranks' COMM_LINKS. Out: one dict per (group, step key) with dropped links:
    ``{"group", "step_key", "links": n, "ops": n distinct link keys, "local_ranks": [the
    unmapped local ranks], "example": "<link key> <src>-<dst>"}``, in first-seen order;
    [] when every link maps (or raw flat-CANN records, condensed elsewhere)."""
    if comm_links is None or comm_links.num_rows == 0 or _has_raw_records(comm_links):
        return []
    t = comm_links.select(["kind", "group", "step_key", "link_key", "src_rank", "dst_rank"])
    t = t.filter(pc.and_(pc.is_valid(t["src_rank"]), pc.is_valid(t["dst_rank"])))
    if t.num_rows == 0:
        return []
    # on integer codes (an all-to-all cluster has millions of link rows): (kind, group, step)
    # as one code, a local rank as (that code, rank) in one int64
    triple = np.stack([_filled_codes(t[c])[0] for c in ("kind", "group", "step_key")], axis=1)
    _, kcode = np.unique(triple, axis=0, return_inverse=True)
    kcode = kcode.reshape(-1).astype(np.int64)
    src = t["src_rank"].to_numpy().astype(np.int64)
    dst = t["dst_rank"].to_numpy().astype(np.int64)

    def at(local):
        return (kcode << 33) + (local + (1 << 32))

    own = np.unique(at(src)[src == dst])
    src_ok, dst_ok = np.isin(at(src), own), np.isin(at(dst), own)
    miss = np.flatnonzero(~(src_ok & dst_ok))
    if not miss.size:
        return []
    link, links = _filled_codes(t["link_key"], fill=None)
    # the ranks' records of one link are merged before mapping: one dropped link each
    _, first = np.unique(np.stack([kcode[miss], link[miss], src[miss], dst[miss]], axis=1),
                         axis=0, return_index=True)
    bad = miss[np.sort(first)]
    local = np.where(src_ok[bad], dst[bad], src[bad])
    texts = {c: t[c].take(pa.array(bad)).to_pylist() for c in ("group", "step_key")}
    out, where = [], {}
    for i, row in enumerate(bad.tolist()):
        k = int(kcode[row])
        if k not in where:
            where[k] = len(out)
            out.append({"group": texts["group"][i] or "",
                        "step_key": texts["step_key"][i] or "", "links": 0, "ops": set(),
                        "local_ranks": set(),
                        "example": f"{links[link[row]]} {int(src[row])}-{int(dst[row])}"})
        d = out[where[k]]
        d["links"] += 1
        if links[link[row]] is not None:
            d["ops"].add(int(link[row]))
        d["local_ranks"].add(int(local[i]))
    for d in out:
        d["ops"], d["local_ranks"] = len(d["ops"]), sorted(d["local_ranks"])
    return out


def _filled_codes(col, fill: str | None = ""):
    """Integer codes of a text column (missing values as ``fill``; kept apart when None) and
    the values they stand for."""
    col = col.cast(pa.string())
    if fill is not None:
        col = pc.fill_null(col, fill)
    enc = pc.dictionary_encode(col, null_encoding="encode").combine_chunks()
    return enc.indices.to_numpy(zero_copy_only=False).astype(np.int64), enc.dictionary.to_pylist()


def matrix_groups(comm_links: pa.Table | None, comm_ops: pa.Table | None = None,
                  membership=None):
    """cluster_communication_matrix.json (see the package docstring) as ``(group key, {step key:
    ...})`` pairs in first-seen order, one group key at a time: :func:`matrix_json` with each
    member parsed (for the API and the tests; the output file is written from the text).

    Out: pairs ``(group key, {step key: {link key: {"<global src>-<global dst>": {"Transport
    Type", "Transit Time(ms)", "Transit Size(MB)", "Op Name", "Bandwidth(GB/s)"}},
    "Total Op Info@<group>": {...}}})``; nothing without links."""
    for key, pieces in matrix_json(comm_links, comm_ops, membership):
        yield key, orjson.loads(b"".join(pieces))


def matrix_json(comm_links: pa.Table | None, comm_ops: pa.Table | None = None,
                membership=None):
    """cluster_communication_matrix.json (see the package docstring) as ``(group key, JSON text
    pieces)`` pairs in first-seen order, one group key at a time; each group is merged from
    columns (:mod:`.matrix_columns`: memory of a few arrays per link, not a dict per record)
    and its text is a list of bytes pieces (members of a few thousand links each).

    In: all ranks' COMM_LINKS (group-local src/dst, int ns, MB), optionally COMM_OPS (group
    membership, as msprof-analyze reads both files). Raw flat-CANN per-op records are first
    condensed to top1/middle/bottom/total like msprof-analyze does for PROF_ data, and merged
    record by record. Links whose ranks are null (not an int in the input) or cannot be mapped
    are left out. ``membership``: :func:`group_membership` of the same tables when the caller
    has it already."""
    if comm_links is None or comm_links.num_rows == 0:
        return
    coll, p2p = membership or group_membership(comm_ops, comm_links)
    if _has_raw_records(comm_links):  # PROF_ input: condensed over all rows first
        for key, steps in _matrix_members(_link_records(comm_links), coll, p2p):
            yield key, [orjson.dumps(steps, option=orjson.OPT_NON_STR_KEYS)]
        return
    t = _by_rank(comm_links)
    pair = pc.binary_join_element_wise(pc.fill_null(t.column("kind"), ""),
                                       pc.fill_null(t.column("group"), ""), "\0")
    codes, pairs = (lambda e: (e.indices.to_numpy(), e.dictionary.to_pylist()))(
        pc.dictionary_encode(pair).combine_chunks())
    del pair
    keys: dict[str, int] = {}  # group key -> position, first seen first
    key_of_pair = np.array([keys.setdefault(key_for(*p.split("\0", 1), coll, p2p), len(keys))
                            for p in pairs], dtype=np.int64)
    names = list(keys)
    row_key = key_of_pair[codes]
    order = np.argsort(row_key, kind="stable")  # rows of a group key together, in row order
    bounds = np.flatnonzero(np.r_[True, row_key[order][1:] != row_key[order][:-1], True])
    for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist()):
        # the rows passed straight on: the helper holds the only reference to them
        yield from _group_text(names[int(row_key[order[a]])], t.take(order[a:b]), coll, p2p)


def _group_text(name: str, sub: pa.Table, coll: dict, p2p: dict):
    """``(group key, JSON text pieces)`` of one group key's links ``sub`` (:func:`group_json`);
    merged record by record (:func:`_matrix_members`) when the columns cannot be, e.g. two
    local links of one global link."""
    try:
        pieces = group_json(sub)
    except NeedsRecords:
        for key, steps in _matrix_members(
                zip(*(sub.column(f).to_pylist() for f in _LINK_FIELDS)), coll, p2p):
            yield key, [orjson.dumps(steps, option=orjson.OPT_NON_STR_KEYS)]
        return
    del sub  # the pieces hold what they need: the group's rows go before its text is made
    if pieces is not None:
        yield name, pieces


def matrix_json_batches(read_batches, membership, park=None):
    """:func:`matrix_json` of the concatenation of ``read_batches()`` (same pairs, same text),
    without holding every link at once: each batch's rows are split by group key as it is
    read, and each group key's rows are put aside (``park(table)`` returns a handle that
    :func:`~ascendprof.model.results.unpark` reads back, e.g. a table parked in a scratch file;
    the table itself when None), then each group is merged from its parts alone. The links of
    4096 ranks were ~50 MB of Arrow beside the merge of their largest group.

    ``read_batches``: a callable returning an iterable of COMM_LINKS tables (a few hundred
    ranks each), ranks ascending over all of them (each rank's rows in file order); called a
    second time only for raw flat-CANN records, which are condensed over all rows at once
    (:func:`matrix_json`). ``membership``: :func:`group_membership` of the cluster."""
    coll, p2p = membership
    keys: dict[str, int] = {}  # group key -> position, first seen first
    key_of: dict[str, int] = {}  # "kind\0group" -> group key position
    parts: list[list] = []  # per group key position: its parked parts, in row order
    schemas = []
    for batch in read_batches():
        if batch is None or batch.num_rows == 0:
            continue
        if _has_raw_records(batch):  # PROF_ input: condensed over all rows at once
            del batch
            parts.clear()
            yield from matrix_json(concat_parts(read_batches(), promote_options="permissive"),
                                   membership=membership)
            return
        if not schemas or not batch.schema.equals(schemas[-1]):
            schemas.append(batch.schema)
        pair = pc.binary_join_element_wise(pc.fill_null(batch.column("kind"), ""),
                                           pc.fill_null(batch.column("group"), ""), "\0")
        enc = pc.dictionary_encode(pair).combine_chunks()
        del pair
        codes = enc.indices.to_numpy(zero_copy_only=False)
        key_of_pair = np.array([_key_position(p, key_of, keys, coll, p2p)
                                for p in enc.dictionary.to_pylist()], dtype=np.int64)
        row_key = key_of_pair[codes]
        order = np.argsort(row_key, kind="stable")  # rows of a group key together, in row order
        sorted_key = row_key[order]
        bounds = np.flatnonzero(np.r_[True, sorted_key[1:] != sorted_key[:-1], True])
        for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist()):
            k = int(sorted_key[a])
            while len(parts) <= k:
                parts.append([])
            sub = batch.take(order[a:b])
            parts[k].append(park(sub) if park is not None else sub)
        del batch, sub
    schema = (pa.unify_schemas(schemas, promote_options="permissive") if len(schemas) > 1
              else schemas[0] if schemas else None)
    for name, k in keys.items():
        if k >= len(parts) or not parts[k]:
            continue
        yield from _group_text(name, _joined(parts, k, schema), coll, p2p)


def _joined(parts: list, k: int, schema: pa.Schema) -> pa.Table:
    """Group key ``k``'s parked parts as one table of ``schema`` in one chunk; its parts are
    let go (``parts[k]`` None) once read."""
    sub = concat_parts(parts[k], promote_options="permissive")
    parts[k] = None
    if not sub.schema.equals(schema):
        sub = sub.cast(schema)
    return sub.combine_chunks()


def _key_position(pair: str, key_of: dict, keys: dict, coll: dict, p2p: dict) -> int:
    k = key_of.get(pair)
    if k is None:
        k = key_of[pair] = keys.setdefault(key_for(*pair.split("\0", 1), coll, p2p), len(keys))
    return k


def _by_rank(comm_links: pa.Table) -> pa.Table:
    """``comm_links`` in ascending rank order, each rank's rows in file order (a stable sort;
    no copy when the ranks' tables were concatenated in rank order already)."""
    rank = comm_links.column("rank").to_numpy(zero_copy_only=False)
    if rank.size < 2 or bool(np.all(rank[1:] >= rank[:-1])):
        return comm_links
    return comm_links.take(pc.sort_indices(comm_links.column("rank")))


def _matrix_members(records, coll: dict, p2p: dict):
    """(group key, {step key: merged links}) of ``records`` (tuples of :data:`_LINK_FIELDS`),
    group keys in first-seen order."""
    struct: dict = {}
    keys: dict[tuple, str] = {}
    for (rank, kind, group, step_key, link_key, src, dst, transport, size_mb, transit_ns,
         op_name) in records:
        if src is None or dst is None:
            continue
        gk = keys.get((kind, group))
        if gk is None:
            gk = keys[(kind, group)] = key_for(kind, group, coll, p2p)
        ranks = struct.setdefault(gk, {}).setdefault(step_key, {}).setdefault(link_key, {})
        links = ranks.setdefault(rank, {})
        links.setdefault((src, dst), {
            "Transport Type": transport, "Transit Size(MB)": size_mb or 0,
            "Transit Time(ms)": to_ms(transit_ns) or 0, "Op Name": op_name or ""})
    for gk, steps in struct.items():
        yield gk, {step: _merge_step(ops) for step, ops in steps.items()}
