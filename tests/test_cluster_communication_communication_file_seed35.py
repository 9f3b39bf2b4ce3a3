"""cluster_communication.json (analyze/cluster_communication/communication_file.py) written by
``ascendprof analyse`` for a small two-rank cluster whose ranks have different records, for the
survivors of the module's seed-35 mutation run (the op-by-op merge of 5a4b046 and the test that
sends a group to it).

The cluster is the torch_npu-2023-2rank fixture with group 13337953553061386822 (the one group
besides 9350434047717501483 that both ranks report) taken out of both ranks' communication.json,
so the group key "(0, 1)" holds one fragment per rank: group 9350434047717501483, 20 ops
hcom_*__483_0 .. hcom_*__483_19 in step2, in the same order on both ranks. Each test edits rank
1's file by hand; the expected op -> ranks lists are worked out in the comments, the OPINFOs are
the profiler's own (cluster_communication.json copies them as they are).
"""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path

from ascendprof import api
from ascendprof.analyze.cluster_communication import fragments as F

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "torch_npu-2023-2rank"
GROUP = "9350434047717501483"
DROPPED = "13337953553061386822"
OPS = [f"{n}__483_{i}@{GROUP}" for i, n in enumerate(
    ["hcom_broadcast", "hcom_broadcast", "hcom_allReduce"]
    + ["hcom_allGather", "hcom_reduceScatter"] * 8 + ["hcom_allReduce"])]
LAST = OPS[-1]  # hcom_allReduce__483_19@9350434047717501483


def _comm_path(root: Path, rank: int) -> Path:
    return root / f"rank{rank}_ascend_pt" / "ASCEND_PROFILER_OUTPUT" / "communication.json"


def _cluster(tmp_path: Path, edit_rank1) -> tuple[Path, dict, dict]:
    """The fixture copied without group DROPPED, rank 1's communication.json passed through
    ``edit_rank1``; returns the root and both ranks' (edited) communication.json."""
    root = tmp_path / "cluster"
    shutil.copytree(FIXTURE, root)
    files = {}
    for r in (0, 1):
        path = _comm_path(root, r)
        doc = json.loads(path.read_text())
        for step in doc.values():
            for kind in step.values():
                for op in [k for k in kind if k.endswith("@" + DROPPED)]:
                    del kind[op]
            for kind in [k for k, v in step.items() if set(v) <= {"Total Op Info"}]:
                del step[kind]  # p2p held group DROPPED's send only
        if r == 1:
            doc = edit_rank1(doc)
        path.write_text(json.dumps(doc))
        files[r] = doc
    assert list(files[0]["step2"]["collective"])[:20] == OPS  # the fixture as described
    return root, files[0], files[1]


def _analysed(root: Path, out: Path) -> dict:
    code = api.analyse(root, out, fmt="json", workers=1, tables=False, cache=False,
                       progress=False, html=False)
    assert code == 0
    return json.loads((out / "cluster_communication.json").read_text())


def _ranks(step: dict) -> dict:
    return {op: list(ranks) for op, ranks in step.items() if not op.startswith("Total Op Info")}


def test_unedited_group_lists_both_ranks_for_every_op(tmp_path):
    # the starting point of the tests below: both ranks have all 20 ops in step2
    root, _, _ = _cluster(tmp_path, lambda doc: doc)
    got = _analysed(root, tmp_path / "out")["(0, 1)"]
    assert list(got) == ["step2"]
    assert _ranks(got["step2"]) == {op: ["0", "1"] for op in OPS}


def test_rank_with_its_last_op_in_a_later_step_keeps_that_step(tmp_path):
    # rank 1 reports op 19 in step3 instead of step2: same op keys in the same order on both
    # ranks, different steps, so the group is merged op by op on (step, op key):
    #   step2: ops 0..18 of ranks 0 and 1, op 19 of rank 0 only
    #   step3: op 19 of rank 1 only
    # (kills _chunks__mutmut_26, which compared the steps of rank 1 with rank 1's own and
    # took the aligned path writing rank 1's op 19 under step2, and _merged__mutmut_103, which
    # coded ops by op key alone and so merged the two steps' op 19 into one op)
    def edit(doc):
        info = doc["step2"]["collective"].pop(LAST)
        doc["step3"] = {"collective": {LAST: info}}
        return doc

    root, rank0, rank1 = _cluster(tmp_path, edit)
    got = _analysed(root, tmp_path / "out")["(0, 1)"]
    assert list(got) == ["step2", "step3"]
    assert _ranks(got["step2"]) == {**{op: ["0", "1"] for op in OPS[:-1]}, LAST: ["0"]}
    assert _ranks(got["step3"]) == {LAST: ["1"]}
    assert got["step2"][LAST]["0"] == rank0["step2"]["collective"][LAST]
    assert got["step3"][LAST]["1"] == rank1["step3"]["collective"][LAST]
    assert got["step2"][OPS[0]]["1"] == rank1["step2"]["collective"][OPS[0]]


def test_rank_with_another_last_op_lists_each_op_with_its_own_rank(tmp_path):
    # rank 1's op 19 is renamed hcom_allReduce__483_20: the same steps on both ranks, op keys
    # differing in the last record, so the group is merged op by op. Ops in order of first
    # appearance (rank 0's 20 ops, then rank 1's new one):
    #   ops 0..18: ranks 0, 1; op 19: rank 0; op 20: rank 1
    # (kills _chunks__mutmut_29, which took the aligned path when the op keys differ and wrote
    # rank 1's op 20 under rank 0's op 19)
    new = f"hcom_allReduce__483_20@{GROUP}"

    def edit(doc):
        coll = doc["step2"]["collective"]
        doc["step2"]["collective"] = {(new if k == LAST else k): v for k, v in coll.items()}
        return doc

    root, rank0, rank1 = _cluster(tmp_path, edit)
    got = _analysed(root, tmp_path / "out")["(0, 1)"]
    assert list(got) == ["step2"]
    assert _ranks(got["step2"]) == {**{op: ["0", "1"] for op in OPS[:-1]}, LAST: ["0"],
                                    new: ["1"]}
    assert list(got["step2"])[-3:] == [LAST, new, f"Total Op Info@{GROUP}"]
    assert got["step2"][LAST]["0"] == rank0["step2"]["collective"][LAST]
    assert got["step2"][new]["1"] == rank1["step2"]["collective"][new]


def test_merged_group_decompresses_each_chunk_of_a_rank_once(tmp_path, monkeypatch):
    # 20 records a rank are 2 chunks of RECORDS_PER_CHUNK = 16; the op-by-op merge (rank 1's
    # op 19 in step3, as above) keeps each rank's current chunk, so writing the file
    # decompresses every (rank, kind, group, chunk) once: 4 chunks of group "(0, 1)" and 1 of
    # each single-rank group. (kills _merged__mutmut_149, which never found the chunk it held
    # and decompressed a chunk again for each record: 16 times for chunk 0 of each rank)
    assert F.RECORDS_PER_CHUNK == 16

    def edit(doc):
        info = doc["step2"]["collective"].pop(LAST)
        doc["step3"] = {"collective": {LAST: info}}
        return doc

    root, _, _ = _cluster(tmp_path, edit)
    calls: Counter = Counter()
    chunk_infos = F.OpFragments.chunk_infos

    def counted(self, i, lengths):
        calls[(self.rank, self.kind, self.group, i)] += 1
        return chunk_infos(self, i, lengths)

    monkeypatch.setattr(F.OpFragments, "chunk_infos", counted)
    got = _analysed(root, tmp_path / "out")
    assert _ranks(got["(0, 1)"]["step3"]) == {LAST: ["1"]}
    ours = {k: n for k, n in calls.items() if k[2] == GROUP}
    assert ours == {(r, "collective", GROUP, c): 1 for r in (0, 1) for c in (0, 1)}
    assert set(calls.values()) == {1}


# the same gaps at other places


def test_aligned_group_decompresses_each_chunk_of_a_rank_once(tmp_path, monkeypatch):
    # the unedited cluster: both ranks hold the same 20 records, so "(0, 1)" is written record
    # j of every rank in turn; the chunk of record j is kept until record 16 asks for the next,
    # so each of the 2 chunks of each rank is decompressed once (a hand-made mutation reloading
    # the chunk for every record, 'if c not in held' made always true, fails here)
    root, _, _ = _cluster(tmp_path, lambda doc: doc)
    calls: Counter = Counter()
    chunk_infos = F.OpFragments.chunk_infos

    def counted(self, i, lengths):
        calls[(self.rank, self.kind, self.group, i)] += 1
        return chunk_infos(self, i, lengths)

    monkeypatch.setattr(F.OpFragments, "chunk_infos", counted)
    got = _analysed(root, tmp_path / "out")
    assert _ranks(got["(0, 1)"]["step2"]) == {op: ["0", "1"] for op in OPS}
    ours = {k: n for k, n in calls.items() if k[2] == GROUP}
    assert ours == {(r, "collective", GROUP, c): 1 for r in (0, 1) for c in (0, 1)}
    assert set(calls.values()) == {1}


def test_merged_steps_in_order_of_first_appearance_each_once(tmp_path):
    # rank 0 reports its op 19 in step3, rank 1 renames its op 19 to op 20 (kept in step2).
    # Step and op codes in order of first appearance, rank 0 first: steps step2, step3; ops
    # 0..18, 19 (rank 0, step3), 20 (rank 1, step2). Written by step, then op:
    #   step2: ops 0..18 of ranks 0 and 1, then op 20 of rank 1
    #   step3: op 19 of rank 0
    # each step once (a hand-made mutation ordering by op code alone wrote step2, step3, step2
    # again: a repeated key whose second value hides the first)
    new = f"hcom_allReduce__483_20@{GROUP}"

    def edit(doc):
        coll = doc["step2"]["collective"]
        doc["step2"]["collective"] = {(new if k == LAST else k): v for k, v in coll.items()}
        return doc

    root, _, rank1 = _cluster(tmp_path, edit)
    path = _comm_path(root, 0)
    rank0 = json.loads(path.read_text())
    rank0["step3"] = {"collective": {LAST: rank0["step2"]["collective"].pop(LAST)}}
    path.write_text(json.dumps(rank0))
    out = tmp_path / "out"
    got = _analysed(root, out)["(0, 1)"]
    assert list(got) == ["step2", "step3"]
    assert _ranks(got["step2"]) == {**{op: ["0", "1"] for op in OPS[:-1]}, new: ["1"]}
    assert list(got["step2"])[-2:] == [new, f"Total Op Info@{GROUP}"]
    assert _ranks(got["step3"]) == {LAST: ["0"]}
    assert got["step3"][LAST]["0"] == rank0["step3"]["collective"][LAST]
    assert got["step2"][new]["1"] == rank1["step2"]["collective"][new]
    pairs = json.loads((out / "cluster_communication.json").read_text(),
                       object_pairs_hook=lambda kv: kv)  # every object as its (key, value) list
    assert [k for k, _ in dict(pairs)["(0, 1)"]] == ["step2", "step3"]  # no key repeated
