"""Raw CANN data (kind raw_cann) read through ``read_source``: the cases the seed-38 mutation
sample of readers/raw_cann.py found untested (the rank the communication tables and the
"no node_basic_info" warning carry). Directories built byte by byte with the helpers of
test_raw_cann_by_hand.py / test_raw_cann_warnings_and_legacy_jobs.py (their job is rank 3:
info.json.0 says rank_id 3); expected values worked out in the comments.
"""

from __future__ import annotations

from ascendprof.model import schemas as S
from test_raw_cann_by_hand import _job, _read
from test_raw_cann_warnings_and_legacy_jobs import _allreduce_job


def test_communication_tables_of_a_prof_job_carry_its_rank(tmp_path):
    """One all-reduce (node API item 301) with one master HCCL API holding one 1 MB hccl_info
    (local rank 0 -> remote 1) for device task stream 5 task 10: the job is rank 3, so its
    COMM_OPS row and its COMM_LINKS row are rank 3's (not -1, the 'rank unknown' value)."""
    h = _allreduce_job(tmp_path, [1_000_000])
    (h / "unaging.additional.hash_dic.slice_0").write_text(
        "301:hcom_allReduce__7_0_1\n501:Memcpy\n")
    (h / "unaging.additional.type_info_dic.slice_0").write_text("5500_1:master\n")
    data = _read(tmp_path)
    assert data.rank == 3
    ops = data.tables[S.COMM_OPS].to_pylist()
    assert [(o["rank"], o["op_name"]) for o in ops] == [(3, "hcom_allReduce__7_0_1")]
    links = data.tables[S.COMM_LINKS].to_pylist()
    assert [(r["rank"], r["src_rank"], r["dst_rank"]) for r in links] == [(3, 0, 1)]


def test_the_missing_node_basic_info_warning_names_the_rank(tmp_path):
    """Host task_track but no node_basic_info: the warning that kernel names come from the
    task_track kernel names is about rank 3, the job's rank (a per-rank report lists it
    there)."""
    d = _job(tmp_path)
    (d / "host" / "data" / "aging.compact.node_basic_info.slice_0").unlink()
    data = _read(tmp_path)
    hits = [p for p in data.problems if p.reason.startswith("no node_basic_info")]
    assert [(p.reason, p.rank) for p in hits] == [
        ("no node_basic_info: kernel names from task_track kernel names", 3)]
