"""The gate's links (compare.gate.links.from_matrix) when a baseline's
cluster_communication_matrix.json holds a Transit Time(ms) that is not a number (a tool wrote
"NaN" as text, or a field left empty): that one link has no bandwidth and is left out, the
others are still compared, and the gate does not crash. Built by hand in tmp, as in
tests/test_gate_links_survivors2.py; expected values worked out in the comments."""

from __future__ import annotations

import json

from ascendprof.model import schemas as S
from tests.test_gate_links_survivors2 import STEP_HEAD, gate_json, link_rows, steps, write_table


def test_a_matrix_link_whose_time_is_text_is_left_out_not_a_crash(tmp_path):
    base = tmp_path / "base"
    base.mkdir()
    (base / "cluster_step_trace_time.csv").write_text(
        STEP_HEAD + "1,rank,0,0.005,0,0,0\n1,rank,1,0.005,0,0,0\n")
    # 0->1: 100 MB in 10 ms = 10 GB/s; 1->0: its time is the text "n/a" -> no bandwidth
    (base / "cluster_communication_matrix.json").write_text(json.dumps({"(0, 1)": {"step1": {
        "Total Op Info@g": {
            "0-1": {"Transport Type": "HCCS", "Transit Size(MB)": 100.0, "Transit Time(ms)": 10.0},
            "1-0": {"Transport Type": "HCCS", "Transit Size(MB)": 100.0,
                    "Transit Time(ms)": "n/a"}}}}}))
    cur = tmp_path / "cur"
    for r in (0, 1):
        steps(cur, r)
    # current 0->1: 100 MB in 12.5 ms = 8 GB/s, -20 % (limit -10 %): fail; 1->0 10 GB/s
    write_table(cur, 0, S.COMM_LINKS, S.from_lists(S.COMM_LINKS, link_rows(0, [
        (0, 0, "LOCAL", 1.0, 100_000), (0, 1, "HCCS", 100.0, 12_500_000)])))
    write_table(cur, 1, S.COMM_LINKS, S.from_lists(S.COMM_LINKS, link_rows(1, [
        (1, 1, "LOCAL", 1.0, 100_000), (1, 0, "HCCS", 100.0, 10_000_000)])))

    code, doc = gate_json(base, cur)
    links = {c["key"]: c for c in doc["checks"] if c["rule"] == "bandwidth@link"}
    # the good baseline link is compared: 10 -> 8 GB/s, a failure
    assert links["g 0->1 HCCS"]["verdict"] == "fail"
    assert links["g 0->1 HCCS"]["baseline"] == 10.0
    assert links["g 0->1 HCCS"]["current"] == 8.0
    assert code == 1
    # 1->0 has no baseline bandwidth: it is never a compared pass/fail
    assert links.get("g 1->0 HCCS", {}).get("verdict") not in ("pass", "fail")
