"""communication_matrix.json of one rank (spec §A.6) -> COMM_LINKS."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa

from ascendprof.model import schemas as S
from ascendprof.model.errors import InputError
from ascendprof.model.problems import Problems
from ascendprof.model.units import ms_to_ns
from ascendprof.readers.communication.layout import is_flat, iter_ops, split_op_key, step_number
from ascendprof.sysio.textio import read_json


def read_matrix(path: Path, rank: int, problems: Problems | None = None) -> pa.Table:
    """Parse one rank's communication_matrix.json (spec §A.6) into a COMM_LINKS table.

    One row per (step, kind, link key, ``"<src>-<dst>"`` link). For the torch_npu layout
    ``link_key`` is the JSON key (``"allreduce-top1@<group>"``) and ``op_name`` the link's
    ``Op Name`` (null for ``-total@`` entries, which have none). For the flat CANN layout the
    per-op records are kept as they are: ``link_key`` is the op key ``"<op>@<group>"`` and
    ``op_name`` its op part, step key ``"step"`` (the cluster builder condenses them into
    top1/middle/bottom/total like msprof-analyze). src/dst are the group-local ranks as written
    (null when not an int32). Times ms -> int ns, sizes MB.

    Raises :class:`InputError` when the file is unreadable, not valid JSON or not a JSON object;
    entries of the wrong shape are skipped and recorded in ``problems`` when given.
    """
    path = Path(path)
    data = read_json(path)
    try:
        return _links_table(data, path, rank, problems)
    except ValueError as e:  # a time beyond int64 ns
        raise InputError(path, str(e)) from None


def _num(d: dict, key: str):
    v = d.get(key)
    return v if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _local_rank(text: str) -> int | None:
    try:
        v = int(text)
    except ValueError:
        return None
    return v if -2**31 <= v < 2**31 else None


def _links_table(data, path: Path, rank: int, problems) -> pa.Table:
    cols = {f.name: [] for f in S.SCHEMAS[S.COMM_LINKS]}
    flat = isinstance(data, dict) and is_flat(data)
    for step_key, kind, link_key, links in iter_ops(data, path, problems, rank):
        if not isinstance(links, dict):
            if problems is not None:
                problems.warn(path, f"{link_key!r} in {step_key} is not an object; skipped",
                              rank=rank)
            continue
        key_name, group = split_op_key(link_key)
        for link, info in links.items():
            if not isinstance(info, dict):
                continue
            src, _, dst = str(link).partition("-")
            op_name = key_name if flat else info.get("Op Name")
            row = {"rank": rank, "step": step_number(step_key), "step_key": step_key,
                   "kind": kind, "link_key": link_key, "op_name": op_name, "group": group,
                   "src_rank": _local_rank(src), "dst_rank": _local_rank(dst),
                   "transport": info.get("Transport Type"),
                   "size_mb": _num(info, "Transit Size(MB)"),
                   "transit_ns": ms_to_ns(_num(info, "Transit Time(ms)")),
                   "bandwidth_gbps": _num(info, "Bandwidth(GB/s)"),
                   "large_packet_ratio": _num(info, "Large Packet Ratio")}
            for k in cols:
                cols[k].append(row.get(k))
    return S.from_lists(S.COMM_LINKS, cols, path)
