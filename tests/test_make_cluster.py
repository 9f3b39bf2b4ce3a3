"""The benchmark generator builds valid, consistent, deterministic clusters from the real ranks."""

from __future__ import annotations

import csv
import hashlib
import json
from pathlib import Path

import pytest
from conftest import load_make_cluster

ROOT = Path(__file__).resolve().parents[1]


mc = load_make_cluster()
REQUIRED = ("step_trace_time.csv", "communication.json", "communication_matrix.json",
            "kernel_details.csv")


def _digest(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def _ops(step: dict):
    for kind in ("p2p", "collective"):
        for name, v in (step.get(kind) or {}).items():
            if not name.startswith("Total"):
                yield kind, name, v


def test_double_hash_matches_the_profilers_group_names(shared_data):
    # The real Qwen3 rank 0 names its HCCL groups by this hash of its parallel_group_info keys:
    # default_group (group_name_0) and pp (group_name_19) appear in its communication.json.
    comm = json.loads((shared_data / "qwen3-4rank-pp2dp2/rank_0_ascend_pt/ASCEND_PROFILER_OUTPUT/"
                                     "communication.json").read_text())
    groups = {n.rpartition("@")[2] for _, n, _ in _ops(comm["step13"])}
    assert str(mc.double_hash("group_name_0")) == "5862276093215481612" and "5862276093215481612" in groups
    assert str(mc.double_hash("group_name_19")) in groups


def test_layout_is_megatron_order():
    lay = mc.make_layout(16, tp=2, pp=2)
    assert lay.dp == 4
    groups = {(role, tuple(r)) for role, r in lay.groups.values()}
    # rank = stage*TP*DP + dp*TP + tp, so TP pairs are adjacent, PP chains stride TP*DP = 8
    assert ("tp", (0, 1)) in groups and ("pp", (3, 11)) in groups and ("dp", (9, 11, 13, 15)) in groups
    assert ("mp", (0, 1, 8, 9)) in groups and ("embd", (0, 8)) in groups
    assert ("default_group", tuple(range(16))) in groups
    with pytest.raises(SystemExit):
        mc.make_layout(10, tp=4, pp=1)


@pytest.fixture(scope="module")
def cluster8(generated_cluster):
    return generated_cluster(8, "--comm-ops-per-rank", "60", "--kernels-per-rank", "3000")


def test_every_rank_is_a_valid_torch_npu_directory(cluster8):
    from ascendprof.model.problems import Problems
    from ascendprof.scan import scan

    ranks = sorted(p.name for p in cluster8.iterdir() if p.is_dir())
    assert ranks == [f"rank_{r}_ascend_pt" for r in range(8)]
    for r in range(8):
        d = cluster8 / f"rank_{r}_ascend_pt"
        assert (d / f"profiler_info_{r}.json").is_file()
        for f in REQUIRED:
            assert (d / "ASCEND_PROFILER_OUTPUT" / f).is_file(), f
    problems = Problems()
    found = scan(cluster8, problems)
    assert sorted(s.rank for s in found) == list(range(8))
    assert all(s.kind == "torch_npu" for s in found)
    assert not problems.skipped


def test_groups_agree_across_every_rank_file(cluster8):
    manifest = json.loads((cluster8 / "make_cluster.json").read_text())
    assert (manifest["tp"], manifest["pp"], manifest["dp"]) == (2, 2, 2)
    seen: dict[str, list[int]] = {}
    for r in range(8):
        d = cluster8 / f"rank_{r}_ascend_pt"
        meta = json.loads((d / "profiler_metadata.json").read_text())
        assert meta["distributed_args"]["rank"] == r and meta["distributed_args"]["world_size"] == 8
        mine = {}
        for key, g in meta["parallel_group_info"].items():
            assert seen.setdefault(key, g["global_ranks"]) == g["global_ranks"]
            assert g["global_ranks"][g["group_rank"]] == r
            mine[str(mc.double_hash(key))] = g["global_ranks"]
        comm = json.loads((d / "ASCEND_PROFILER_OUTPUT/communication.json").read_text())
        for step in comm.values():
            for _, name, _ in _ops(step):
                assert name.rpartition("@")[2] in mine, (r, name)  # only groups the rank is in
        matrix = json.loads((d / "ASCEND_PROFILER_OUTPUT/communication_matrix.json").read_text())
        for step in matrix.values():
            for kind in ("p2p", "collective"):
                for key, links in step.get(kind, {}).items():
                    size = len(mine[key.rpartition("@")[2]])
                    for lk in links:
                        a, b = map(int, lk.split("-"))
                        assert 0 <= a < size and 0 <= b < size


def test_group_members_share_op_names(cluster8):
    by_group: dict[str, dict[int, set]] = {}
    for r in range(8):
        comm = json.loads((cluster8 / f"rank_{r}_ascend_pt/ASCEND_PROFILER_OUTPUT/communication.json")
                          .read_text())
        for step in comm.values():
            for _, name, _ in _ops(step):
                op, _, grp = name.rpartition("@")
                by_group.setdefault(grp, {}).setdefault(r, set()).add(op)
    multi = [g for g in by_group.values() if len(g) > 1]
    assert multi, "some group must span several ranks"
    for members in multi:
        names = list(members.values())
        assert all(n == names[0] for n in names)


def test_sizes_and_sums_follow_the_arguments(cluster8, shared_data):
    d = cluster8 / "rank_0_ascend_pt/ASCEND_PROFILER_OUTPUT"
    with open(d / "kernel_details.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 3000
    comm = json.loads((d / "communication.json").read_text())
    ops = list(_ops(comm["step13"]))
    # template rank 0 has 3 p2p + 12 collective ops; the 4 template ranks average 19 -> x3 copies
    assert len(ops) == 15 * 3
    coll = comm["step13"]["collective"]
    total = sum(v["Communication Time Info"]["Elapse Time(ms)"] for k, v in coll.items()
                if not k.startswith("Total"))
    assert coll["Total Op Info"]["Communication Time Info"]["Elapse Time(ms)"] == pytest.approx(total)
    # the step is repeated R = max(3 comm copies, ceil(3000/2463) = 2 kernel copies) = 3 times,
    # and every duration scaled by the rank's factor in [0.95, 1.05] (x1.2-1.3 for slow ranks)
    with open(shared_data / "qwen3-4rank-pp2dp2/rank_0_ascend_pt/ASCEND_PROFILER_OUTPUT/"
                            "step_trace_time.csv", newline="") as f:
        real = next(csv.DictReader(f))
    with open(d / "step_trace_time.csv", newline="") as f:
        gen = next(csv.DictReader(f))
    ratio = float(gen["Stage"]) / (3 * float(real["Stage"]))
    assert 0.95 <= ratio <= 1.05 * 1.3
    for col in ("Computing", "Communication(Not Overlapped)", "Free"):
        assert float(gen[col]) / (3 * float(real[col])) == pytest.approx(ratio, rel=1e-6)
    # kernel durations add up to the same stretched step: sum = 3 x template sum x factor
    with open(shared_data / "qwen3-4rank-pp2dp2/rank_0_ascend_pt/ASCEND_PROFILER_OUTPUT/"
                            "kernel_details.csv", newline="") as f:
        tmpl = [float(x["Duration(us)"]) for x in csv.DictReader(f)]
    first_copy = sum(float(x["Duration(us)"]) for x in rows[:len(tmpl)])
    assert first_copy / sum(tmpl) == pytest.approx(ratio * 3 / 2, rel=1e-4)


def test_deterministic_and_seeded(cluster8, tmp_path):
    again = tmp_path / "again"
    mc.main(["8", str(again), "--comm-ops-per-rank", "60", "--kernels-per-rank", "3000"])
    assert _digest(again) == _digest(cluster8)
    other = tmp_path / "other"
    mc.main(["8", str(other), "--comm-ops-per-rank", "60", "--kernels-per-rank", "3000",
             "--seed", "1"])
    assert _digest(other) != _digest(cluster8)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["again", "other"]  # only under OUT


def test_refuses_a_non_empty_output(tmp_path):
    (tmp_path / "keep.txt").write_text("x")
    with pytest.raises(SystemExit):
        mc.main(["2", str(tmp_path), "--template", "torch_npu-level2"])
    assert (tmp_path / "keep.txt").read_text() == "x"


def test_torch_template_scales_trace_view(tmp_path, shared_data):
    out = tmp_path / "t"
    mc.main(["2", str(out), "--template", "torch_npu-level2", "--kernels-per-rank", "3100"])
    src = shared_data / "torch_npu-2rank-levels/text/level2/rank0_ascend_pt/ASCEND_PROFILER_OUTPUT/trace_view.json"
    real = json.loads(src.read_text())
    gen = json.loads((out / "rank_0_ascend_pt/ASCEND_PROFILER_OUTPUT/trace_view.json").read_text())
    copies = json.loads((out / "make_cluster.json").read_text())["repeat"]["trace_view"]
    # 3100 kernels x 1.5 kB = 4.8 MB of trace from a 2.3 MB template -> 2 copies; metadata
    # events once, ProfilerStep#50 once (stretched over both copies), every other event twice
    assert src.stat().st_size == 2326148 and copies == 2
    n_meta = sum(e["ph"] == "M" for e in real)
    assert len(gen) == n_meta + 2 * (len(real) - n_meta) - 1
    steps = [e for e in gen if str(e.get("name", "")).startswith("ProfilerStep#")]
    assert len(steps) == 1
    flows = [e["id"] for e in gen if e.get("ph") == "s"]
    assert len(flows) == len(set(flows))


# ------------------------------------------------------------------------- db clusters

@pytest.mark.parametrize("n", [4, 16])
def test_db_cluster_has_its_own_groups_and_rank_map(n, tmp_path, shared_data):
    """Each cloned db rank reports its own TP group (Megatron order, at most 8 ranks: the
    template's allreduce over one server), not the template's: group ids, local ranks and
    profiler_metadata.json agree across ranks, and ascendprof finds the groups the layout has."""
    import sqlite3

    from click.testing import CliRunner

    from ascendprof.cli.main import main

    out = tmp_path / "db"
    m = mc.build_db(n, out, data=shared_data)
    tp = min(8, n)
    assert (m["tp"], m["tp"] * m["pp"] * m["dp"]) == (tp, n)
    want_groups = [list(range(s, s + tp)) for s in range(0, n, tp)]
    for r in range(n):
        d = out / f"rank{r}_ascend_pt"
        meta = json.loads((d / "profiler_metadata.json").read_text())
        tp_groups = [(k, g) for k, g in meta["parallel_group_info"].items()
                     if g["group_name"] == "tp"]
        assert len(tp_groups) == 1
        key, g = tp_groups[0]
        assert g["global_ranks"] == want_groups[r // tp] and g["group_rank"] == r % tp
        con = sqlite3.connect(d / "ASCEND_PROFILER_OUTPUT" / "analysis.db")
        groups = {x[0] for x in con.execute("SELECT group_name FROM CommAnalyzerTime")}
        links = con.execute("SELECT src_rank, dst_rank FROM CommAnalyzerMatrix").fetchall()
        con.close()
        assert groups == {str(mc.double_hash(key))}
        assert {int(s) for s, _ in links} == {r % tp}  # its own local rank is the source
        assert all(0 <= int(x) < tp for ab in links for x in ab)
        con = sqlite3.connect(d / "ASCEND_PROFILER_OUTPUT" / f"ascend_pytorch_profiler_{r}.db")
        assert con.execute("SELECT rankId FROM RANK_DEVICE_MAP").fetchall() == [(r,)]
        con.close()
    res = CliRunner().invoke(main, ["analyse", str(out), "-o", str(tmp_path / "o"), "--quiet",
                                    "--no-cache", "--workers", "1"])
    assert res.exit_code == 0, res.output
    doc = json.loads((tmp_path / "o" / "communication_group.json").read_text())
    assert sorted(doc["collective"]) == want_groups


def test_mesh_matrix_lists_a_link_to_every_group_member(generated_cluster, tmp_path):
    # 16 ranks TP8 PP1 -> DP2: every rank is in a tp group of 8 and a dp group of 2. With
    # --matrix mesh, each op of a rank's communication_matrix.json holds its links "me-j" for
    # j = 0..n-1 of its group (n = that group's size in the manifest), and analysing the
    # cluster gives, per op, the n x n links of the whole group.
    root = generated_cluster(16, "--tp", "8", "--pp", "1", "--matrix", "mesh",
                             "--comm-ops-per-rank", "20", "--kernels-per-rank", "200")
    man = json.loads((root / "make_cluster.json").read_text())
    assert man["matrix"] == "mesh" and man["dp"] == 2
    size = {g: len(v["ranks"]) for g, v in man["groups"].items()}
    checked = 0
    for r in (0, 9):
        mat = json.loads((root / f"rank_{r}_ascend_pt/ASCEND_PROFILER_OUTPUT/"
                                 "communication_matrix.json").read_text())
        me_of = {g: v["ranks"].index(r) for g, v in man["groups"].items() if r in v["ranks"]}
        for step in mat.values():
            for ops in step.values():
                for key, links in ops.items():
                    g = key.rpartition("@")[2]
                    n, me = size[g], me_of[g]
                    assert sorted(links) == sorted(f"{me}-{j}" for j in range(n)), key
                    assert links[f"{me}-{me}"]["Transit Size(MB)"] >= 0
                    checked += 1
    assert checked > 10
    from ascendprof.cli.main import main as cli  # the user's path: analyse the cluster
    out = tmp_path / "out"
    with pytest.raises(SystemExit) as e:
        cli(["analyse", str(root), "-o", str(out), "-q", "--no-html", "--no-cache"])
    assert e.value.code == 0
    cm = json.loads((out / "cluster_communication_matrix.json").read_text())
    # keys are the groups' global ranks, e.g. "(0, 8)": every member linked to every member
    for members, steps in cm.items():
        n = len(members.strip("()").rstrip(",").split(","))
        for st in steps.values():
            for key, links in st.items():
                assert len(links) == n * n, (members, key)
    assert {len(m.split(",")) for m in cm} >= {2, 8, 16}
