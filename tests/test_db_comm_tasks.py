"""db exports: Communication recomputed from the HCCL tasks (TASK joined with
COMMUNICATION_TASK_INFO on the task ids), not from the COMMUNICATION_OP spans, which torch_npu
2024 wrote wider than their tasks; an op's span is used only where the op has no tasks, and
step_trace_check.csv says which was used.

Input: copies (sqlite3 backup into tmp) of the shared Level1 db export, edited the way the older
release wrote them: every op span widened before its first and after its last task, and one op's
tasks unlinked (so its span must be used). Expected values are computed here with sqlite3 and a
plain interval union written out below, never with ascendprof's interval code.
"""

from __future__ import annotations

import sqlite3

import pytest

from conftest import analyse_quietly, csv_rows
from conftest import SHARED, SHARED_MISSING

LEVEL1 = "torch_npu-2rank-levels/db/level1"
DB = "rank{r}_ascend_pt/ASCEND_PROFILER_OUTPUT/ascend_pytorch_profiler_{r}.db"
#: how much wider than its tasks the older release wrote an op (ns before / after)
WIDEN_BEFORE, WIDEN_AFTER = 700_000, 1_300_000


_analyse, _rows = analyse_quietly, csv_rows


def _copy(src, dst):
    """sqlite3 copy of a database (the input stays read-only)."""
    dst.parent.mkdir(parents=True, exist_ok=True)
    a = sqlite3.connect(f"file:{src}?mode=ro", uri=True)
    b = sqlite3.connect(dst)
    a.backup(b)
    a.close()
    b.close()


def plain_union(intervals):
    """Merge [start, end) intervals: sort by start, extend the last piece while they touch."""
    out = []
    for s, e in sorted(intervals):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return out


def plain_minus(pieces, cut):
    """Length-preserving difference of two sorted unions, piece by piece (list of [s, e))."""
    out = []
    for s, e in pieces:
        cur = s
        for cs, ce in cut:
            if ce <= cur or cs >= e:
                continue
            if cs > cur:
                out.append([cur, cs])
            cur = max(cur, ce)
        if cur < e:
            out.append([cur, e])
    return out


def _in_step(pieces, lo, hi):
    """Total length of the pieces whose start lies in the step window [lo, hi)."""
    return sum(e - s for s, e in pieces if lo <= s < hi)


@pytest.fixture(scope="module")
def widened(tmp_path_factory):
    """The Level1 db export with widened op spans; op 2 of rank 1 without tasks."""
    if SHARED is None:
        pytest.skip(SHARED_MISSING)
    shared_data = SHARED
    root = tmp_path_factory.mktemp("db_widened") / "in"
    src = shared_data / LEVEL1
    for r in (0, 1):
        rank = src / f"rank{r}_ascend_pt"
        dst = root / f"rank{r}_ascend_pt"
        for f in rank.rglob("*"):
            if f.is_file():
                (dst / f.relative_to(rank)).parent.mkdir(parents=True, exist_ok=True)
                if f.suffix == ".db":
                    _copy(f, dst / f.relative_to(rank))
                else:
                    (dst / f.relative_to(rank)).write_bytes(f.read_bytes())
        con = sqlite3.connect(root / DB.format(r=r))
        con.execute("UPDATE COMMUNICATION_OP SET startNs = startNs - ?, endNs = endNs + ?",
                    (WIDEN_BEFORE, WIDEN_AFTER))
        if r == 1:
            con.execute("DELETE FROM COMMUNICATION_TASK_INFO WHERE opId = 2")
        con.commit()
        con.close()
    out = root.parent / "out"
    res = _analyse(root, out)
    assert res.exit_code == 0, res.output
    return root, out


def _expected(db_path):
    """Per step: (communication ns from the tasks, not-overlapped ns, communication ns from the
    op spans), with sqlite3 and the plain union above."""
    con = sqlite3.connect(db_path)
    ext = con.execute(
        "SELECT c.opId, MIN(t.startNs), MAX(t.endNs) FROM COMMUNICATION_TASK_INFO c "
        "JOIN TASK t ON t.globalTaskId = c.globalTaskId GROUP BY c.opId").fetchall()
    ops = con.execute("SELECT opId, startNs, endNs FROM COMMUNICATION_OP").fetchall()
    compute = con.execute("SELECT t.startNs, t.endNs FROM TASK t JOIN COMPUTE_TASK_INFO c "
                          "ON t.globalTaskId = c.globalTaskId").fetchall()
    steps = con.execute("SELECT id, startNs, endNs FROM STEP_TIME").fetchall()
    con.close()
    with_tasks = {op for op, _, _ in ext}
    comm = plain_union([(s, e) for _, s, e in ext]
                       + [(s, e) for op, s, e in ops if op not in with_tasks])
    spans = plain_union([(s, e) for _, s, e in ops])
    cno = plain_minus(comm, plain_union(compute))
    return {step: (_in_step(comm, lo, hi), _in_step(cno, lo, hi), _in_step(spans, lo, hi))
            for step, lo, hi in steps}, len(ops) - len(with_tasks & {o for o, _, _ in ops})


@pytest.mark.parametrize("rank", [0, 1])
def test_communication_is_the_task_union(widened, rank):
    root, out = widened
    want, bare = _expected(root / DB.format(r=rank))
    check = [r for r in _rows(out / "step_trace_check.csv") if int(r["Rank"]) == rank]
    assert check
    for step, (comm, cno, spans) in want.items():
        got = {r["Metric"]: r for r in check if r["Step"] == str(step)}
        assert float(got["Communication"]["Recomputed(us)"]) == pytest.approx(comm / 1000,
                                                                               abs=5e-4)
        assert float(got["Communication(Not Overlapped)"]["Recomputed(us)"]) == \
            pytest.approx(cno / 1000, abs=5e-4)
        # the widened op spans would have given more: this test tells the two apart
        assert spans > comm * 1.01
        # the profiler's own values (of the untouched export) are met again where every op has
        # its tasks
        if not bare:
            assert abs(float(got["Communication"]["Deviation(%)"])) <= 0.1
        method = got["Communication"]["Method"]
        assert "task extents" in method
        assert ("without tasks" in method) == (bare > 0), method
    assert bare == (1 if rank == 1 else 0)


def test_step_trace_check_within_0_1_pct_on_every_shared_db_export(shared_data, tmp_path):
    """Every metric the profiler reports and ascendprof recomputes, on every shared db export."""
    exports = sorted(p.parent.parent for p in
                     (shared_data / "torch_npu-2rank-levels" / "db").rglob(
                         "ascend_pytorch_profiler_*.db"))
    levels = sorted({p.parent for p in exports})
    assert len(levels) == 3
    for level in levels:
        out = tmp_path / level.name
        assert _analyse(level, out).exit_code == 0
        rows = _rows(out / "step_trace_check.csv")
        compared = [r for r in rows if r["Reported(us)"] and r["Recomputed(us)"]]
        assert len(compared) >= 2 * 8, level
        for r in compared:
            rep, rec = float(r["Reported(us)"]), float(r["Recomputed(us)"])
            assert abs(rec - rep) <= 0.001 * abs(rep) + 1e-6, (level.name, r)
            if r["Metric"] == "Communication":
                assert "task extents" in r["Method"]
