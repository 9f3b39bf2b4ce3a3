"""A flat-CANN communication_matrix.json (one record per op instance, as raw CANN exports write)
is condensed per link to top1 / middle / bottom by the records' bandwidth: top1 is the fastest
instance, bottom1 the slowest, whatever order the file lists them in."""
from __future__ import annotations

import json

import pyarrow as pa

from ascendprof.analyze import cluster_communication as cc
from ascendprof.readers.communication import read_matrix


def _link(tt, mb, ms):
    return {"Transport Type": tt, "Transit Size(MB)": mb, "Transit Time(ms)": ms,
            "Bandwidth(GB/s)": round(mb / ms, 4)}


def test_top1_is_the_fastest_record_not_the_first(tmp_path):
    # rank 1's link 1->0 in three instances: 1.0, 3.0 and 2.0 MB each in 1 ms, so 1, 3 and 2
    # GB/s; listed slowest first, the fastest second
    files = {0: {"allgather-total@g": {"0-0": _link("LOCAL", 1.0, 1.0),
                                       "0-1": _link("HCCS", 2.0, 1.0)}},
             1: {"hcom_allGather__1_0_1@g": {"1-1": _link("LOCAL", 1.0, 1.0),
                                             "1-0": _link("HCCS", 1.0, 1.0)},
                 "hcom_allGather__1_1_1@g": {"1-0": _link("HCCS", 3.0, 1.0)},
                 "hcom_allGather__1_2_1@g": {"1-0": _link("HCCS", 2.0, 1.0)}}}
    tables = []
    for rank, data in files.items():
        p = tmp_path / f"m{rank}.json"
        p.write_text(json.dumps(data))
        tables.append(read_matrix(p, rank))
    links = pa.concat_tables(tables)
    [(_, pieces)] = list(cc.matrix_json(links, membership=cc.group_membership(None, links)))
    steps = json.loads(b"".join(pieces))
    [doc] = steps.values()
    top, bottom = doc["allgather-top1@g"]["1-0"], doc["allgather-bottom1@g"]["1-0"]
    assert (top["Op Name"], top["Transit Size(MB)"]) == ("hcom_allGather__1_1_1", 3.0)
    assert (bottom["Op Name"], bottom["Transit Size(MB)"]) == ("hcom_allGather__1_0_1", 1.0)
