"""Expert load per rank of an EP group (analyze.moe).

No public MoE export exists (none of ../shared/data runs GroupedMatmul). The inputs here are
built from the real exports' columns: the Qwen3 sample copied, with GroupedMatmul rows added to
ranks 0 and 2's kernel_details.csv (each a copy of a real MatMulV3 row of that file with Name,
Type and Input Shapes replaced, in kernel_details' own layout) and an ``exp`` group [0, 2] added
to their profiler_metadata.json parallel_group_info, as Megatron / MindSpeed write it. Expected
values are hand calculations written out below."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pytest

from ascendprof.analyze import moe
from conftest import QWEN3, analysis_of

OUT = "ASCEND_PROFILER_OUTPUT"


def _add_grouped_matmul(rank_dir: Path, tokens: list[int], experts: int = 8):
    path = rank_dir / OUT / "kernel_details.csv"
    with open(path, newline="", encoding="utf-8-sig") as f:
        rows = list(csv.reader(f))
    head = rows[0]
    i_name, i_type, i_shapes = head.index("Name"), head.index("Type"), head.index("Input Shapes")
    template = next(r for r in rows[1:] if r[i_type] == "MatMulV3")
    for t in tokens:
        r = list(template)
        r[i_name] = "aclnnGroupedMatmulV4_GroupedMatmul_GroupedMatmul"
        r[i_type] = "GroupedMatmul"
        # x: t tokens x 1024 hidden; weight: experts x 1024 x 4096; empty optionals; group list
        r[i_shapes] = f'"{t},1024;{experts},1024,4096;;;;;;;{experts}"'
        rows.append(r)
    with open(path, "w", newline="", encoding="utf-8") as f:
        csv.writer(f).writerows(rows)


def _add_ep_group(rank_dir: Path, ranks: list[int]):
    p = rank_dir / "profiler_metadata.json"
    meta = json.loads(p.read_text())
    meta["parallel_group_info"]["group_name_99"] = {"group_name": "exp", "group_rank": 0,
                                                    "global_ranks": ranks}
    p.write_text(json.dumps(meta))


def _cluster(tmp: Path, tokens0: list[int], tokens2: list[int], group=True) -> Path:
    root = tmp / "q3"
    shutil.copytree(QWEN3, root)
    for p in root.rglob("*"):
        p.chmod(0o755 if p.is_dir() else 0o644)
    _add_grouped_matmul(root / "rank_0_ascend_pt", tokens0)
    _add_grouped_matmul(root / "rank_2_ascend_pt", tokens2)
    if group:
        for r in (0, 2):
            _add_ep_group(root / f"rank_{r}_ascend_pt", [0, 2])
    return root


def _moe(ca):
    return [v for v in ca.verdicts if v["category"] == "moe"]


def test_tokens_of_input_shapes():
    assert moe.tokens_of("2048,1024;8,1024,4096;;;;;;;8") == (2048, 8)
    # a bias input does not count as tokens (msprof-analyze would add the weights' 8)
    assert moe.tokens_of("2048,1024;8,1024,4096;8,4096;;;;;;8") == (2048, 8)
    # x and weights as lists: msprof-analyze's count, all but the last two inputs
    assert moe.tokens_of("512,64;300,64;64,32;64,32;2") == (512 + 300 + 64, None)
    assert moe.tokens_of(";;") == (None, None) and moe.tokens_of("a;b;c") == (None, None)


def test_balanced_group_is_silent(tmp_path):
    """Ranks 0 and 2 each route 4 x 2048 = 8192 tokens: max / mean 1.0, no verdict."""
    ca = analysis_of(_cluster(tmp_path, [2048] * 4, [2048] * 4))
    t = ca.csv_files["moe_expert_load.csv"]
    assert list(t.columns) == moe.COLUMNS
    assert list(t["Rank"]) == [0, 2] and list(t["Tokens"]) == [8192, 8192]
    assert list(t["Tokens per Expert"]) == [1024.0, 1024.0]  # 8192 / 8 local experts
    assert set(t["Group Max / Mean"]) == {1.0}
    assert set(t["EP Group"]) == {"(0, 2)"} and set(t["EP Group Source"]) == {"parallel_group_info"}
    assert _moe(ca) == []


def test_unbalanced_group(tmp_path):
    """Rank 2's experts take 4 x 4096 = 16384 tokens, rank 0's 4 x 2048 = 8192: mean 12288,
    max / mean = 16384 / 12288 = 1.3333 >= 1.2 -> warning on rank 2 (critical from 1.5)."""
    ca = analysis_of(_cluster(tmp_path, [2048] * 4, [4096] * 4))
    t = ca.csv_files["moe_expert_load.csv"].set_index("Rank")
    assert t.loc[2, "Tokens"] == 16384 and t.loc[0, "Group Mean Tokens"] == 12288.0
    assert t.loc[2, "Load / Mean"] == pytest.approx(1.3333, abs=1e-4)
    v = _moe(ca)
    assert len(v) == 1 and v[0]["ranks"] == [2] and v[0]["severity"] == "warning"
    assert v[0]["evidence"]["max_over_mean"] == pytest.approx(1.3333, abs=1e-4)
    assert v[0]["groups"][0]["global_ranks"] == [0, 2]


def test_without_ep_group_all_ranks_inferred(tmp_path):
    """No exp group in the metadata: the ranks with GroupedMatmul form one inferred group.
    5 x 1000 vs 1 x 1000 tokens: mean 3000, max / mean 5000 / 3000 = 1.667 -> critical."""
    ca = analysis_of(_cluster(tmp_path, [1000] * 5, [1000], group=False))
    t = ca.csv_files["moe_expert_load.csv"]
    assert set(t["EP Group Source"]) == {"inferred: all ranks with GroupedMatmul"}
    v = _moe(ca)
    assert [(x["ranks"], x["severity"]) for x in v] == [([0], "critical")]


def test_no_moe_no_file(qwen3):
    ca = analysis_of(qwen3)
    assert "moe_expert_load.csv" not in ca.csv_files and _moe(ca) == []
