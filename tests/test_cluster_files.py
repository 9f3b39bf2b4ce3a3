"""The msprof-analyze-compatible cluster files against msprof-analyze 26.2.0's own output.

Expected values: tests/reference/ (produced by the peer tool, see its README.md), each rank's
step_trace_time.csv read here with the csv module, and hand calculations written out below.
Our side is built from our readers only, or is what ``ascendprof analyse`` writes.
"""

from __future__ import annotations

import csv
import json
import math
import os
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pytest

from ascendprof import api
from ascendprof.model import schemas as S
from ascendprof.analyze import cluster_communication as cc
from ascendprof.analyze import cluster_step_trace as cst
from ascendprof.readers.ascend_output import read_step_trace_time
from ascendprof.readers.communication import read_communication, read_matrix

REFERENCE = Path(__file__).parent / "reference"
#: fields msprof-analyze rounds to 4 decimals from ms values; our int-ns times can land on the
#: other side of a half-way point (README.md), so they get an absolute 1e-4 allowance.
ROUNDED = {"Bandwidth(GB/s)", "Wait Time Ratio", "Synchronization Time Ratio",
           "Large Packet Ratio"}


def load_ranks(root: Path) -> dict:
    """Every rank of a torch_npu text job, through our readers. rank = N of profiler_info_N.json."""
    parts = {n: [] for n in (S.COMM_OPS, S.COMM_BANDWIDTH, S.COMM_SIZE_DIST, S.COMM_LINKS,
                             S.STEP_TRACE)}
    meta = {}
    for d in sorted(root.glob("*_ascend_pt")):
        rank = int(next(d.glob("profiler_info_*.json")).stem.rsplit("_", 1)[1])
        md = d / "profiler_metadata.json"
        meta[rank] = json.loads(md.read_text()) if md.exists() else {}
        out = d / "ASCEND_PROFILER_OUTPUT"
        parts[S.STEP_TRACE].append(read_step_trace_time(out / "step_trace_time.csv", rank))
        if (out / "communication.json").exists():
            for name, t in read_communication(out / "communication.json", rank).items():
                parts[name].append(t)
        if (out / "communication_matrix.json").exists():
            parts[S.COMM_LINKS].append(read_matrix(out / "communication_matrix.json", rank))
    tables = {n: (pa.concat_tables(v) if v else None) for n, v in parts.items()}
    return {"tables": tables, "meta": meta}


def diffs(ours, ref, path="", key="") -> list[str]:
    """Differences between two JSON-like values: same keys, numbers within 1e-3 relative."""
    out = []
    if isinstance(ref, dict):
        if not isinstance(ours, dict):
            return [f"{path}: not an object"]
        if set(ours) != set(ref):
            out.append(f"{path}: keys differ, ours-only {sorted(set(ours) - set(ref))[:5]}, "
                       f"reference-only {sorted(set(ref) - set(ours))[:5]}")
        for k in set(ours) & set(ref):
            out += diffs(ours[k], ref[k], f"{path}/{k}", k)
    elif isinstance(ref, list):
        if not isinstance(ours, list) or len(ours) != len(ref):
            return [f"{path}: list differs {ours!r} vs {ref!r}"]
        for i, (a, b) in enumerate(zip(ours, ref)):
            out += diffs(a, b, f"{path}[{i}]", key)
    elif isinstance(ref, (int, float)) and not isinstance(ref, bool):
        tol = 1.5e-4 if key in ROUNDED else 1e-12
        if not isinstance(ours, (int, float)) or not math.isclose(ours, ref, rel_tol=1e-3,
                                                                  abs_tol=tol):
            out.append(f"{path}: {ours!r} vs reference {ref!r}")
    elif ours != ref:
        out.append(f"{path}: {ours!r} vs reference {ref!r}")
    return out


def ref_json(name: str, file: str):
    return json.loads((REFERENCE / name / file).read_text())


def as_json(obj):
    return json.loads(json.dumps(obj))


def sorted_groups(g: dict) -> dict:
    """communication_group.json with its lists in a fixed order (the tool lists groups in the
    order it found the rank directories)."""
    return {"collective": sorted(g["collective"]), "p2p": sorted(g["p2p"]),
            "comm_group_parallel_info": sorted(g["comm_group_parallel_info"],
                                               key=lambda r: (r["type"], r["group_name"]))}


CASES = [("qwen3-4rank-pp2dp2", None), ("torch_npu-2rank-level1", "torch_npu-2rank-levels/text/level1"),
         ("torch_npu-2rank-level2", "torch_npu-2rank-levels/text/level2")]


@pytest.fixture(params=CASES, ids=[c[0] for c in CASES])
def case(request, qwen3):
    name, rel = request.param
    if rel is None:
        root = qwen3
    else:
        root = request.getfixturevalue("shared_data") / rel
    return name, root, load_ranks(root)


def analysed(root: Path, out: Path) -> Path:
    """``ascendprof analyse root -o out`` (no cache, tables or page); returns ``out``."""
    code = api.analyse(root, out, fmt="json", workers=1, tables=False, cache=False,
                       progress=False, html=False)
    assert code == 0
    return out


def without_matrix_files(root: Path, tmp: Path) -> Path:
    """A copy of ``root`` (files linked) without any rank's communication_matrix.json."""
    for dirpath, _, files in os.walk(root):
        here = tmp / Path(dirpath).relative_to(root)
        here.mkdir(parents=True, exist_ok=True)
        for f in files:
            if f != "communication_matrix.json":
                (here / f).symlink_to(Path(dirpath) / f)
    return tmp


@pytest.fixture
def written(case, tmp_path):
    """The case and the directory ``ascendprof analyse`` wrote for it."""
    name, root, d = case
    return name, root, d, analysed(root, tmp_path / "out")


def test_cluster_communication_json(written):
    name, _, _, out = written
    ours = json.loads((out / "cluster_communication.json").read_text())
    assert diffs(ours, ref_json(name, "cluster_communication.json")) == []


def test_cluster_communication_json_without_links(case, tmp_path):
    """Without the matrix files (group membership from the ops alone) the file is the same on
    consistent data."""
    name, root, _ = case
    out = analysed(without_matrix_files(root, tmp_path / "in"), tmp_path / "out")
    assert not (out / "cluster_communication_matrix.json").exists()
    ours = json.loads((out / "cluster_communication.json").read_text())
    assert diffs(ours, ref_json(name, "cluster_communication.json")) == []


def test_cluster_communication_matrix_json(written):
    name, _, _, out = written
    ours = json.loads((out / "cluster_communication_matrix.json").read_text())
    assert diffs(ours, ref_json(name, "cluster_communication_matrix.json")) == []


def test_communication_group_json(case):
    name, _, d = case
    t = d["tables"]
    ours = cc.build_groups(t[S.COMM_OPS], d["meta"], comm_links=t[S.COMM_LINKS])
    assert sorted_groups(as_json(ours)) == sorted_groups(ref_json(name, "communication_group.json"))


def _ref_csv(name: str) -> pd.DataFrame:
    return pd.read_csv(REFERENCE / name / "cluster_step_trace_time.csv", dtype=str,
                       keep_default_na=False)


def _compare_step_trace(ours: pd.DataFrame, ref: pd.DataFrame):
    assert list(ours.columns) == list(ref.columns)
    ours = ours.astype(str)
    key = ["Step", "Type", "Index"]
    o, r = ours.set_index(key).sort_index(), ref.set_index(key).sort_index()
    assert list(o.index) == list(r.index)
    for col in r.columns:
        for idx in r.index:
            a, b = o.at[idx, col], r.at[idx, col]
            if b == "NA":
                assert a == "NA", (idx, col)
            else:
                assert float(a) == pytest.approx(float(b), rel=1e-3, abs=1e-9), (idx, col)


def test_cluster_step_trace_time(case):
    name, _, d = case
    t = d["tables"]
    groups = cc.build_groups(t[S.COMM_OPS], d["meta"], comm_links=t[S.COMM_LINKS])
    ours = cst.build(t[S.STEP_TRACE], d["meta"], groups)
    _compare_step_trace(ours, _ref_csv(name))


def test_cluster_step_trace_time_stages_from_metadata_only(case):
    """Without communication groups the stages come from parallel_group_info: same file here."""
    name, _, d = case
    _compare_step_trace(cst.build(d["tables"][S.STEP_TRACE], d["meta"]), _ref_csv(name))


def test_level0_without_communication(shared_data, tmp_path):
    """Level0 has no communication*.json: msprof-analyze writes an empty group file and the
    step trace; we build the same and write neither cluster_communication*.json."""
    root = shared_data / "torch_npu-2rank-levels/text/level0"
    d = load_ranks(root)
    t = d["tables"]
    assert t[S.COMM_OPS] is None and t[S.COMM_LINKS] is None
    groups = cc.build_groups(None, d["meta"])
    assert groups == ref_json("torch_npu-2rank-level0", "communication_group.json")
    _compare_step_trace(cst.build(t[S.STEP_TRACE], d["meta"], groups),
                        _ref_csv("torch_npu-2rank-level0"))
    out = analysed(root, tmp_path / "out")
    assert not (out / "cluster_communication_matrix.json").exists()
    assert not (out / "cluster_communication.json").exists()


def _own_step_trace(root: Path) -> dict[tuple[int, int], dict[str, float]]:
    """(step, rank) -> each rank's step_trace_time.csv values, read with the csv module."""
    out = {}
    for dd in sorted(root.glob("*_ascend_pt")):
        rank = int(next(dd.glob("profiler_info_*.json")).stem.rsplit("_", 1)[1])
        with open(dd / "ASCEND_PROFILER_OUTPUT" / "step_trace_time.csv", newline="",
                  encoding="utf-8-sig") as f:
            for row in csv.DictReader(f):
                out[(int(row["Step"]), rank)] = {k: float(v) for k, v in row.items()
                                                 if k not in ("Step", "Device_id")}
    return out


def test_rank_rows_equal_own_step_trace(case):
    _, root, d = case
    ours = cst.build(d["tables"][S.STEP_TRACE], d["meta"])
    own = _own_step_trace(root)
    rows = ours[ours["Type"] == "rank"]
    assert len(rows) == len(own)
    assert list(zip(rows["Step"], rows["Index"])) == sorted(own)  # sorted by (step, rank)
    for _, row in rows.iterrows():
        for col, v in own[(row["Step"], row["Index"])].items():
            assert round(row[col], 3) == round(v, 3), (row["Index"], col)


def test_qwen3_index_is_rank_not_device_id(qwen3):
    """Rank 2's Device_id is 4 and rank 3's is 5; Index and DP/PP/TP follow the rank."""
    d = load_ranks(qwen3)
    ours = cst.build(d["tables"][S.STEP_TRACE], d["meta"]).set_index(["Type", "Index"])
    assert ours.loc[("rank", 2), "Computing"] == pytest.approx(400448.26)  # rank 2's own value
    # Megatron layout, tp1 pp2 dp2 world 4: model-parallel groups [0, 2] and [1, 3]
    assert [tuple(ours.loc[("rank", r), ["DP Index", "PP Index", "TP Index"]]) for r in range(4)] \
        == [(0, 0, 0), (1, 0, 0), (0, 1, 0), (1, 1, 0)]
    # stage (0, 1) = column max over ranks 0 and 1: Communication 441708.38 is rank 1's
    assert ours.loc[("stage", "(0, 1)"), "Communication"] == pytest.approx(441708.38)


def test_parallel_index_by_hand():
    # tp2 pp2 dp2, world 8: data-parallel groups [0,2] [1,3] [4,6] [5,7]; model-parallel groups
    # [0,1,4,5] (DP 0) and [2,3,6,7] (DP 1); PP = which tp-sized chunk, TP = place in the chunk.
    idx = cst.parallel_index({"world_size": 8, "tensor_model_parallel_size": 2,
                              "pipeline_model_parallel_size": 2, "data_parallel_size": 2})
    assert idx[5] == (0, 1, 1) and idx[6] == (1, 1, 0) and idx[0] == (0, 0, 0)
    # every rank as msprof-analyze placed it for the 8-rank cluster cloned with this layout
    with open(REFERENCE / "generated-8rank" / "cluster_step_trace_time.csv", newline="") as f:
        want = {int(r["Index"]): (int(r["DP Index"]), int(r["PP Index"]), int(r["TP Index"]))
                for r in csv.DictReader(f) if r["Type"] == "rank"}
    assert {r: idx[r] for r in range(8)} == want
    # expert parallel must divide dp; zero sizes count as one
    assert cst.parallel_index({"world_size": 8, "tensor_model_parallel_size": 2,
                               "pipeline_model_parallel_size": 2, "data_parallel_size": 2,
                               "expert_model_parallel_size": 4}) is None
    assert cst.parallel_index({"world_size": 4, "tensor_model_parallel_size": 0,
                               "pipeline_model_parallel_size": 2, "data_parallel_size": 2}) == \
        [(0, 0, 0), (1, 0, 0), (0, 1, 0), (1, 1, 0)]
    assert cst.parallel_index({"world_size": 6, "tensor_model_parallel_size": 2,
                               "pipeline_model_parallel_size": 2, "data_parallel_size": 2}) is None
    assert cst.parallel_index({"world_size": "4"}) is None


@pytest.mark.parametrize("args, want", json.loads(
    (REFERENCE / "parallel_index.json").read_text()), ids=lambda v: json.dumps(v)[:60])
def test_parallel_index_as_msprof_analyze(args, want):
    """DP/PP/TP Index per rank for Megatron distributed_args as msprof-analyze's own calculator
    gave them (tests/reference/parallel_index.json), None where it rejects the layout."""
    got = cst.parallel_index(args)
    assert (None if got is None else [list(x) if x else None for x in got]) == want


def test_stages_as_msprof_analyze():
    """Pipeline stages from comm_group_parallel_info for 95 group sets (the Qwen3 one, edge
    cases, random ones with up to 40 ranks, rank lists in and out of order, two where the order
    of the pp links matters) as msprof-analyze's own StageInfoAnalysis gave them
    (tests/reference/stages.json), ranks in the same order, since the order becomes the stage
    row's Index text."""
    cases = json.loads((REFERENCE / "stages.json").read_text())
    got = [cst.stages_from_groups({"comm_group_parallel_info": recs}) for recs, _ in cases]
    assert got == [want for _, want in cases]
    assert sum(bool(w) for _, w in cases) > 30


def test_double_hash_names_groups():
    # reference communication_group.json: group_id group_name_5 is written as this group name
    assert cc.double_hash("group_name_5") == 5862276114690318097


def test_group_totals_match_reference_totals(qwen3, tmp_path):
    """The per-rank 'Total Op Info@<group>' sums ascendprof writes are msprof-analyze's time
    fields (to 2 ns), under the same group key; the groups' parallel names and global ranks
    come from parallel_group_info."""
    out = analysed(qwen3, tmp_path / "out")
    ours = json.loads((out / "cluster_communication.json").read_text())
    ref = ref_json("qwen3-4rank-pp2dp2", "cluster_communication.json")
    n = 0
    for gk, steps in ref.items():
        for step_key, ops in steps.items():
            for op_key, ranks in ops.items():
                if not op_key.startswith("Total Op Info@"):
                    continue
                for rank, total in ranks.items():
                    mine = ours[gk][step_key][op_key][rank]["Communication Time Info"]
                    tinfo = total["Communication Time Info"]
                    for label in ("Elapse Time(ms)", "Transit Time(ms)", "Wait Time(ms)",
                                  "Synchronization Time(ms)", "Idle Time(ms)"):
                        assert mine[label] * 1e6 == pytest.approx(tinfo[label] * 1e6, abs=2)
                    assert mine["Wait Time Ratio"] == pytest.approx(tinfo["Wait Time Ratio"],
                                                                    abs=1e-4)
                    n += 1
    assert n == sum(len(ranks) for steps in ours.values() for ops in steps.values()
                    for op_key, ranks in ops.items() if op_key.startswith("Total Op Info@")) > 0
    info = json.loads((out / "communication_group.json").read_text())["comm_group_parallel_info"]
    dp = [g for g in info if g["group_name"] == "5862276114690318097"]
    assert {g["pg_name"] for g in dp} == {"dp_cp"} and {tuple(g["rank_set"]) for g in dp} \
        == {(0, 1)}
    pp = [g for g in info if g["pg_name"] == "pp"]
    assert {g["type"] for g in pp} == {"p2p"} and {tuple(g["rank_set"]) for g in pp} \
        == {(0, 2), (1, 3)}


def test_matrix_from_flat_cann_records_by_hand(tmp_path):
    """Raw PROF_ communication_matrix.json (per op, spec §A.6/§7.3) is condensed per link like
    msprof-analyze's msprof adapter: records sorted by bandwidth, top1 / middle (n//2) / bottom1 /
    bottom2 / total (summed size and time, bandwidth = MB/ms), then mapped to global ranks."""
    def link(tt, mb, ms):
        return {"Transport Type": tt, "Transit Size(MB)": mb, "Transit Time(ms)": ms,
                "Bandwidth(GB/s)": round(mb / ms, 4)}
    files = {0: {"hcom_allReduce__1_0_1@g": {"0-0": link("LOCAL", 4.0, 0.5),
                                             "0-1": link("HCCS", 2.0, 1.0)},
                 "hcom_allReduce__1_1_1@g": {"0-1": link("HCCS", 2.0, 0.5)}},
             1: {"hcom_allReduce__1_0_1@g": {"1-1": link("LOCAL", 4.0, 0.5)}}}
    tables = []
    for rank, data in files.items():
        p = tmp_path / f"m{rank}.json"
        p.write_text(json.dumps(data))
        tables.append(read_matrix(p, rank))
    out = dict(cc.matrix_groups(pa.concat_tables(tables)))
    step = out["(0, 1)"]["step"]
    # link 0-1 of rank 0: op 1_1 (4 GB/s) before op 1_0 (2 GB/s)
    assert step["allreduce-top1@g"]["0-1"]["Op Name"] == "hcom_allReduce__1_1_1"
    assert step["allreduce-middle@g"]["0-1"]["Op Name"] == "hcom_allReduce__1_0_1"  # index 2//2
    assert step["allreduce-bottom1@g"]["0-1"]["Op Name"] == "hcom_allReduce__1_0_1"
    assert step["allreduce-bottom2@g"]["0-1"]["Op Name"] == "hcom_allReduce__1_1_1"
    assert "allreduce-bottom3@g" not in step or "0-1" not in step["allreduce-bottom3@g"]
    total = step["allreduce-total@g"]["0-1"]
    assert total["Transit Size(MB)"] == pytest.approx(4.0)
    assert total["Transit Time(ms)"] == pytest.approx(1.5)
    assert total["Bandwidth(GB/s)"] == 2.6667 and total["Op Name"] == ""
    # the group total sums only the -total@ entries: 0-0 4 MB / 0.5 ms, 1-1 the same
    assert step["Total Op Info@g"]["0-0"]["Bandwidth(GB/s)"] == 8.0
    assert set(step["Total Op Info@g"]) == {"0-0", "0-1", "1-1"}


def test_cluster_step_trace_by_hand_missing_steps_and_metrics():
    """Four ranks, stages (0, 1) and (2, 3) (pp p2p groups {0, 2} and {1, 3}, dp groups {0, 1}
    and {2, 3}); rank 2 has no step number, rank 0 no Free and ranks 0 and 1 no Preparing.
    A row without a step comes first with Step ''; a metric nobody recorded stays empty (not 0)
    in the rank row and in the stage row; a stage row takes the largest value its ranks have."""
    us = 1000

    def row(rank, step, free, prep):
        return {"rank": rank, "step": step, "computing_ns": (rank + 1) * 100 * us,
                "free_ns": free, "preparing_ns": prep}

    rows = [row(0, 5, None, None), row(1, 5, 10 * us, None), row(2, None, 7 * us, 3 * us),
            row(3, 5, 4 * us, 2 * us)]
    st = S.from_lists(S.STEP_TRACE, {k: [r[k] for r in rows] for k in rows[0]})
    groups = {"comm_group_parallel_info": [
        {"type": "p2p", "rank_set": [0, 2], "group_name": "a", "pg_name": "pp"},
        {"type": "p2p", "rank_set": [1, 3], "group_name": "b", "pg_name": "pp"},
        {"type": "collective", "rank_set": [0, 1], "group_name": "c", "pg_name": "dp"},
        {"type": "collective", "rank_set": [2, 3], "group_name": "d", "pg_name": "dp"}]}
    df = cst.build(st, {}, groups)
    got = df[["Step", "Type", "Index", "Computing", "Free", "Preparing"]].astype(object)
    got = got.where(got.notna(), None)
    assert got.values.tolist() == [
        ["", "rank", 2, 300.0, 7.0, 3.0],
        [5, "rank", 0, 100.0, None, None],
        [5, "rank", 1, 200.0, 10.0, None],
        [5, "rank", 3, 400.0, 4.0, 2.0],
        ["", "stage", "(2, 3)", 300.0, 7.0, 3.0],
        [5, "stage", "(0, 1)", 200.0, 10.0, None],
        [5, "stage", "(2, 3)", 400.0, 4.0, 2.0]]
    assert "DP Index" not in df.columns  # no distributed_args
    assert cst.build(None, {}).empty


def test_cluster_step_trace_written_in_slices_has_the_text_of_one_frame(tmp_path):
    """The file is written a slice of steps at a time (a run of 10^6 steps has millions of
    rows); the text is what one frame gives: steps as integers (also in stage rows when another
    row has no step), a stage row per step with the max of its ranks, slices cut between steps.
    Ranks 0 and 1 form the stage (0, 1): collective group {0, 1} beside the pp p2p group
    {0, 2}."""
    from ascendprof.sysio.atomic import write_frames_csv

    us = 1000
    st = S.from_lists(S.STEP_TRACE, {"rank": [1, 0, 0, 1, 0], "step": [2, 2, 1, 1, None],
                                     "computing_ns": [5 * us, 7 * us, 1 * us, 3 * us, 9 * us]})
    groups = {"comm_group_parallel_info": [
        {"type": "p2p", "rank_set": [0, 2], "group_name": "a", "pg_name": "pp"},
        {"type": "collective", "rank_set": [0, 1], "group_name": "c", "pg_name": "dp"}]}
    t = cst.table(st, {}, groups)
    assert len(t) == 5 + 3  # rank rows, and stage rows for steps '', 1 and 2
    for rows in (1, 2, 100):  # a slice per step, two steps in a slice, one slice for all
        path = write_frames_csv(tmp_path / f"c{rows}.csv", t.frames(rows=rows))
        with open(path, newline="") as f:
            got = [[r["Step"], r["Type"], r["Index"], r["Computing"]] for r in csv.DictReader(f)]
        assert got == [["", "rank", "0", "9.0"], ["1", "rank", "0", "1.0"],
                       ["1", "rank", "1", "3.0"], ["2", "rank", "0", "7.0"],
                       ["2", "rank", "1", "5.0"], ["", "stage", "(0, 1)", "9.0"],
                       ["1", "stage", "(0, 1)", "3.0"], ["2", "stage", "(0, 1)", "7.0"]], rows


def test_cluster_step_trace_parallel_columns_and_ranks_outside_stages():
    """DP/PP/TP Index columns appear only when distributed_args place at least as many ranks as
    there are; a rank the layout does not place gets 'NA' (as stage rows do); a rank in no
    stage forms the stage '()' (msprof-analyze's StepTraceTimeAnalysis)."""
    def table(ranks):
        return S.from_lists(S.STEP_TRACE, {"rank": ranks, "step": [1] * len(ranks),
                                           "computing_ns": [1000] * len(ranks)})

    groups = {"comm_group_parallel_info": [
        {"type": "p2p", "rank_set": [0, 1], "group_name": "a", "pg_name": "pp"},
        {"type": "collective", "rank_set": [0], "group_name": "c", "pg_name": "dp"},
        {"type": "collective", "rank_set": [1], "group_name": "d", "pg_name": "dp"}]}
    two = {0: {"distributed_args": {"world_size": 2, "pipeline_model_parallel_size": 2}}}
    # ranks 0, 1 and 2; the layout places 0 and 1 only (world 2), and rank 2 is in no stage
    df = cst.build(table([0, 1, 2]), two, groups)
    assert "DP Index" not in df.columns  # 2 places for 3 ranks: no columns at all
    assert df[["Type", "Index"]].values.tolist() == [
        ["rank", 0], ["rank", 1], ["rank", 2], ["stage", "(0,)"], ["stage", "(1,)"],
        ["stage", "()"]]
    # ranks 0 and 2 with world 2: rank 2 lies outside the layout
    df = cst.build(table([0, 2]), two, groups)
    assert df[["Index", "DP Index", "PP Index", "TP Index"]].values.tolist() == [
        [0, 0, 0, 0], [2, "NA", "NA", "NA"], ["(0,)", "NA", "NA", "NA"], ["()", "NA", "NA", "NA"]]
