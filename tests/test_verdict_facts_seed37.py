"""verdicts/facts.py: link keys without rank numbers, a missing step key in the link table,
and the operator excess of ranks whose partials differ in schema. Expected values by hand."""

from __future__ import annotations

import json

import pyarrow as pa

import ascendprof
import synth_cluster as sc
from ascendprof.analyze.verdicts import facts as F
from ascendprof.model import schemas as S
from test_verdict_facts_by_hand import MS, TH, _cluster, _even, _link, _op_partial, _rank, _table


def test_link_keys_without_rank_numbers_do_not_stop_the_verdicts(tmp_path):
    # A 2-rank dp cluster whose communication_matrix.json names every link "x-y" (no rank
    # numbers: the reader gives null src and dst). The group then has no size from the links;
    # before the fix the verdicts stopped with "cannot convert float NaN to integer".
    root = tmp_path / "c"
    sc.write(sc.Spec(sc.Shape(1, 1, 2)), root)
    files = sorted(root.rglob("communication_matrix.json"))
    assert len(files) == 2
    for p in files:
        d = json.loads(p.read_text())
        for kinds in d.values():
            for ops in kinds.values():
                for k, links in ops.items():
                    ops[k] = {"x-y": v for v in links.values()}
        p.write_text(json.dumps(d))
    out = ascendprof.open(root, workers=1).verdicts()
    assert isinstance(out, list)
    # the same, on a hand-made table: group G has null ranks only, group H sends 0 -> 3
    t = _table(S.COMM_LINKS, [_link(0, "ar-total@G", "G", None, None, "HCCS", 1.0, 1.0),
                              _link(0, "ar-total@H", "H", 0, 3, "HCCS", 1.0, 1.0)])
    assert F.group_sizes_from_links(t) == {"H": 4}


def test_a_link_row_without_step_key_is_a_step_key_of_its_own():
    # Rank 4 sends 0 -> 1 in group G: 4 MB in 2 ms under "step1" and 2 MB in 1 ms under no
    # step key. Two step keys ("step1" and the missing one), so per step: (4 + 2) / 2 = 3 MB,
    # (2 + 1) / 2 = 1.5 ms, 2 GB/s.
    links = _table(S.COMM_LINKS, [_link(4, "ar-total@G", "G", 0, 1, "HCCS", 4.0, 2.0),
                                  _link(4, "ar-total@G", "G", 0, 1, "HCCS", 2.0, 1.0,
                                        step_key=None)])
    t = F.link_table(links, {})
    assert t["size_mb"].tolist() == [3.0] and t["transit_ns"].tolist() == [1.5 * MS]
    assert t["bandwidth_gbps"].tolist() == [2.0]


def test_op_excess_of_partials_that_differ_in_schema():
    # Rank 0's op partial has a plain op_type column, rank 1's a dictionary-encoded one (the
    # frames are then built one rank at a time). One step each. MatMul/AI_CORE: rank 0 4 tasks
    # in 8 ms, rank 1 2 tasks in 3 ms: 0 exceeds 1 by 5 ms per step.
    p1 = _op_partial(1, [("MatMul", "AI_CORE", 2, 3 * MS)])
    i = p1.schema.get_field_index("op_type")
    p1 = p1.set_column(i, "op_type", p1.column("op_type").dictionary_encode())
    assert pa.types.is_dictionary(p1.schema.field("op_type").type)
    ca = _cluster(_even([0, 1]), ranks=[
        _rank(0, op_partial=_op_partial(0, [("MatMul", "AI_CORE", 4, 8 * MS)])),
        _rank(1, op_partial=p1)])
    got = F.Facts(ca, TH).op_excess.excess([0], [1])
    assert got["op_types"] == [{"op_type": "MatMul", "accelerator_core": "AI_CORE",
                                "excess_ms": 5.0, "ms": 8.0, "peer_ms": 3.0, "count": 4.0,
                                "peer_count": 2.0}]
