"""communication_matrix.json of one rank (spec §A.6) -> COMM_LINKS."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa

from ascendprof.model import schemas as S
from ascendprof.model.errors import InputError
from ascendprof.model.problems import Problems
from ascendprof.model.units import ms_list_to_ns
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


def _num(v):
    """A JSON number as it is (an int or a float, not a bool); anything else None."""
    t = type(v)
    return v if t is float or t is int else None


def _local_rank(text: str) -> int | None:
    try:
        v = int(text)
    except ValueError:
        return None
    return v if -2**31 <= v < 2**31 else None


def _links_table(data, path: Path, rank: int, problems) -> pa.Table:
    # column lists filled link by link; what one op key shares (step, kind, link key, group)
    # is repeated per op afterwards, and the ms -> ns times converted in one vector
    per_op = []  # (step, step key, kind, link key, group, number of links)
    op_name, src, dst, transport, size, time_ms, bandwidth, lpr = ([] for _ in range(8))
    ends: dict = {}  # "<src>-<dst>" -> (src, dst): the same link keys recur in every op
    flat = isinstance(data, dict) and is_flat(data)
    for step_key, kind, link_key, links in iter_ops(data, path, problems, rank):
        if not isinstance(links, dict):
            if problems is not None:
                problems.warn(path, f"{link_key!r} in {step_key} is not an object; skipped",
                              rank=rank)
            continue
        key_name, group = split_op_key(link_key)
        n = 0
        for link, info in links.items():
            if not isinstance(info, dict):
                continue
            pair = ends.get(link)
            if pair is None:
                a, _, b = str(link).partition("-")
                pair = ends[link] = (_local_rank(a), _local_rank(b))
            get = info.get
            op_name.append(key_name if flat else get("Op Name"))
            src.append(pair[0])
            dst.append(pair[1])
            transport.append(get("Transport Type"))
            size.append(_num(get("Transit Size(MB)")))
            time_ms.append(_num(get("Transit Time(ms)")))
            bandwidth.append(_num(get("Bandwidth(GB/s)")))
            lpr.append(_num(get("Large Packet Ratio")))
            n += 1
        if n:
            per_op.append((step_number(step_key), step_key, kind, link_key, group, n))

    def repeat(i):
        return [v for op in per_op for v in (op[i],) * op[5]]

    cols = {"rank": [rank] * len(src), "step": repeat(0), "step_key": repeat(1),
            "kind": repeat(2), "link_key": repeat(3), "op_name": op_name, "group": repeat(4),
            "src_rank": src, "dst_rank": dst, "transport": transport, "size_mb": size,
            "bandwidth_gbps": bandwidth, "large_packet_ratio": lpr}
    t = S.from_lists(S.COMM_LINKS, cols, path)
    i = t.schema.get_field_index("transit_ns")
    return t.set_column(i, t.schema.field(i), ms_list_to_ns(time_ms))
