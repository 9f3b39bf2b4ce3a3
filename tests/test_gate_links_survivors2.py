"""The gate's links (compare.gate.links) through the user's path, on analyse output directories
built by hand in tmp: a baseline whose links come from cluster_communication_matrix.json
(``from_matrix``: global ranks) against a current run whose links come from the ranks' own
tables/rank<r>/comm_links.parquet (``from_rank_links``: group-local ranks mapped to global ones),
and rank tables whose key columns were written as numbers by another tool.

A link is named ``"<group> <src>-><dst> <transport>"`` in the gate's checks: both inputs must
give the same text for the same link, or the two sides are never compared. Every expected value
is worked out by hand in the comments.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from click.testing import CliRunner

from ascendprof.cli.main import main
from ascendprof.compare.gate import dir_inputs as D
from ascendprof.model import schemas as S

STEP_HEAD = "Step,Type,Index,Computing,Communication(Not Overlapped),Overlapped,Free\n"
#: a real group id (the dp_cp group of ranks 0 and 1 in qwen3-4rank-pp2dp2): digits only
DP_CP = "5862276114690318097"


def write_table(out: Path, rank: int, name: str, table: pa.Table) -> None:
    d = out / "tables" / f"rank{rank}"
    d.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, d / f"{name}.parquet")


def steps(out: Path, rank: int) -> None:
    # one step of 5000 ns computing: the same on both sides, only there so the rank exists
    write_table(out, rank, S.STEP_TRACE,
                S.from_lists(S.STEP_TRACE, {"rank": [rank], "step": [1], "computing_ns": [5000]}))


def link_rows(rank: int, rows, group="g", step_key="step1") -> dict:
    """COMM_LINKS columns of one rank: rows of (local src, local dst, transport, MB, ns), all
    of op ``allreduce-total@<group>`` in ``step_key``."""
    n = len(rows)
    return {"rank": [rank] * n, "step_key": [step_key] * n,
            "link_key": [f"allreduce-total@{group}"] * n, "group": [group] * n,
            "src_rank": [r[0] for r in rows], "dst_rank": [r[1] for r in rows],
            "transport": [r[2] for r in rows], "size_mb": [r[3] for r in rows],
            "transit_ns": [r[4] for r in rows]}


def gate_json(base: Path, cur: Path):
    r = CliRunner().invoke(main, ["gate", str(base), str(cur), "--workers", "1",
                                  "--format", "json"])
    assert r.exception is None or isinstance(r.exception, SystemExit), r.output
    return r.exit_code, json.loads(r.output[r.output.index("{"):])


def test_matrix_baseline_against_rank_tables_names_the_same_links(tmp_path):
    # baseline: an output with cluster_communication_matrix.json only (global ranks): group g,
    # 0->1 and 1->0 each 100 MB in 10 ms = 10 GB/s; the self-link 0-0 (an on-chip copy) is no
    # link
    base = tmp_path / "base"
    base.mkdir()
    (base / "cluster_step_trace_time.csv").write_text(
        STEP_HEAD + "1,rank,0,0.005,0,0,0\n1,rank,1,0.005,0,0,0\n")

    def link(size, ms, transport="HCCS"):
        return {"Transport Type": transport, "Transit Size(MB)": size, "Transit Time(ms)": ms}
    (base / "cluster_communication_matrix.json").write_text(json.dumps({"(0, 1)": {"step1": {
        "Total Op Info@g": {"0-1": link(100.0, 10.0), "1-0": link(100.0, 10.0),
                            "0-0": link(1.0, 0.1, "LOCAL")}}}}))
    # current: the ranks' own links (group-local ranks; here local i is global i, as each
    # rank's self-link "i-i" says). Group g is in no communication_group.json (there is none),
    # so a local rank without a self-link maps to nothing: rank 0's 0->5 is left out.
    cur = tmp_path / "cur"
    for r in (0, 1):
        steps(cur, r)
    # 0->1 now takes 12.5 ms for the 100 MB: 8 GB/s, -20 % (the default limit is -10 %)
    write_table(cur, 0, S.COMM_LINKS, S.from_lists(S.COMM_LINKS, link_rows(0, [
        (0, 0, "LOCAL", 1.0, 100_000), (0, 1, "HCCS", 100.0, 12_500_000),
        (0, 5, "HCCS", 9.0, 900_000)])))
    write_table(cur, 1, S.COMM_LINKS, S.from_lists(S.COMM_LINKS, link_rows(1, [
        (1, 1, "LOCAL", 1.0, 100_000), (1, 0, "HCCS", 100.0, 10_000_000)])))

    code, doc = gate_json(base, cur)
    assert code == 1, doc["summary"]
    links = {c["key"]: c for c in doc["checks"] if c["rule"] == "bandwidth@link"}
    # no group label known: the group id; ranks as whole numbers on both sides ("0->1", not
    # "0->1.0"), so each link is compared and nothing is on one side only
    assert set(links) == {"g 0->1 HCCS", "g 1->0 HCCS"}
    assert links["g 0->1 HCCS"]["verdict"] == "fail"
    assert links["g 0->1 HCCS"]["baseline"] == 10.0  # 100 MB / 10 ms
    assert links["g 0->1 HCCS"]["current"] == 8.0  # 100 MB / 12.5 ms
    assert round(links["g 0->1 HCCS"]["change_pct"], 6) == -20.0
    assert links["g 1->0 HCCS"]["verdict"] == "pass"
    assert links["g 1->0 HCCS"]["change_pct"] == 0.0


def test_numeric_group_ids_map_through_communication_group_json(tmp_path):
    # A comm_links table written by another tool that read the (digits only) group id as a
    # number: group is an int64 column. Only rank 0 collected links: its self-link says local
    # 0 is rank 0; local 1 has none, and maps through the group's ranks [0, 1] from
    # communication_group.json (local 1 is the 2nd: rank 1), accepted as it maps rank 0 to
    # itself. The id is looked up as text, as the file names it.
    out = tmp_path / "out"
    steps(out, 0)
    cols = link_rows(0, [(0, 0, "LOCAL", 1.0, 100_000), (0, 1, "HCCS", 60.0, 3_000_000)],
                     group=DP_CP, step_key="step13")
    cols["group"] = pa.array([int(DP_CP)] * 2, pa.int64())
    cols["link_key"] = pa.array(cols["link_key"], pa.string())
    write_table(out, 0, S.COMM_LINKS, pa.table(cols))
    (out / "communication_group.json").write_text(json.dumps({"comm_group_parallel_info": [
        {"type": "collective", "rank_set": [0, 1], "group_name": DP_CP,
         "group_id": "group_name_5", "pg_name": "dp_cp"}]}))
    side = D.load_run(out)
    assert side.links is not None
    assert side.links.to_dict("records") == [
        {"group": DP_CP, "step_key": "step13", "src": 0, "dst": 1, "transport": "HCCS",
         "size_mb": 60.0, "transit_ns": 3_000_000}]


def test_ranks_whose_tables_disagree_on_key_types_still_map_each_other(tmp_path):
    # rank 0's table as ascendprof writes it (group and step key text), rank 1's rewritten by
    # a tool that stored both as numbers (group 7, step 13). As text they are the same group
    # "7" and step "13", so each rank's self-link tells the other which global rank its local
    # rank is: rank 0's local 0->1 is 0->1 (rank 1 said "1-1"), rank 1's 1->0 is 1->0. No
    # communication_group.json: the self-links are the only way to map them.
    out = tmp_path / "out"
    for r in (0, 1):
        steps(out, r)
    write_table(out, 0, S.COMM_LINKS, S.from_lists(S.COMM_LINKS, link_rows(
        0, [(0, 0, "LOCAL", 1.0, 100_000), (0, 1, "HCCS", 40.0, 2_000_000)],
        group="7", step_key="13")))
    cols = link_rows(1, [(1, 1, "LOCAL", 1.0, 100_000), (1, 0, "RDMA", 30.0, 1_000_000)],
                     group="7", step_key="13")
    cols["group"] = pa.array([7, 7], pa.int64())
    cols["step_key"] = pa.array([13, 13], pa.int64())
    write_table(out, 1, S.COMM_LINKS, pa.table(cols))
    side = D.load_run(out)
    assert side.links is not None
    # sorted by group, step, src, dst
    assert side.links.to_dict("records") == [
        {"group": "7", "step_key": "13", "src": 0, "dst": 1, "transport": "HCCS",
         "size_mb": 40.0, "transit_ns": 2_000_000},
        {"group": "7", "step_key": "13", "src": 1, "dst": 0, "transport": "RDMA",
         "size_mb": 30.0, "transit_ns": 1_000_000}]


def test_a_link_without_a_transport_is_compared_between_matrix_and_rank_tables(tmp_path):
    # A link whose transport the profiler did not name: the rank's table holds a null
    # transport, and ascendprof writes it to cluster_communication_matrix.json as
    # "Transport Type": null. Both sides must name it alike (no transport: empty text), or the
    # baseline's link and the current one are never compared and a slower link passes.
    base = tmp_path / "base"
    base.mkdir()
    (base / "cluster_step_trace_time.csv").write_text(
        STEP_HEAD + "1,rank,0,0.005,0,0,0\n1,rank,1,0.005,0,0,0\n")
    # baseline 0->1: 100 MB in 10 ms = 10 GB/s
    (base / "cluster_communication_matrix.json").write_text(json.dumps({"(0, 1)": {"step1": {
        "Total Op Info@g": {"0-1": {"Transport Type": None, "Transit Size(MB)": 100.0,
                                    "Transit Time(ms)": 10.0}}}}}))
    cur = tmp_path / "cur"
    for r in (0, 1):
        steps(cur, r)
    # current 0->1: 100 MB in 20 ms = 5 GB/s, -50 %; self-links map local i to global i
    write_table(cur, 0, S.COMM_LINKS, S.from_lists(S.COMM_LINKS, link_rows(0, [
        (0, 0, "LOCAL", 1.0, 100_000), (0, 1, None, 100.0, 20_000_000)])))
    write_table(cur, 1, S.COMM_LINKS, S.from_lists(S.COMM_LINKS, link_rows(1, [
        (1, 1, "LOCAL", 1.0, 100_000)])))

    code, doc = gate_json(base, cur)
    links = [c for c in doc["checks"] if c["rule"] == "bandwidth@link"]
    assert len(links) == 1, links  # one link, on both sides
    assert links[0]["baseline"] == 10.0 and links[0]["current"] == 5.0
    assert round(links[0]["change_pct"], 6) == -50.0
    assert links[0]["verdict"] == "fail" and code == 1
