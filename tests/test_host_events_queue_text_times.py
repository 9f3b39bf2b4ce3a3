"""readers/host_events.py, db TASK_QUEUE: an Enqueue / Dequeue row whose startNs (a TEXT
column of PYTORCH_API) is not a number is left out, as HOST_EVENTS leaves such an event out,
instead of failing the whole advice read with a TypeError; an end that is not a number gives
a null duration. Expected rows worked out with sqlite3 on the edited db."""

from __future__ import annotations

from test_host_events_db_seed34 import FIXTURE, _copy, _read
from test_host_events_seed35 import _db
from test_host_events_seed37 import _first_enqueue_conn, _ro

from ascendprof.model import schemas as S


def _queue_rows(db):
    with _ro(db) as con:
        rows = con.execute(
            "SELECT s.value, p.startNs, p.endNs, ci.connectionId "
            "FROM PYTORCH_API p JOIN STRING_IDS s ON s.id = p.name "
            "JOIN CONNECTION_IDS ci ON ci.id = p.connectionId").fetchall()
    return rows


def test_enqueue_with_a_text_start_is_left_out_and_a_text_end_has_no_duration(tmp_path):
    with _ro(_db(FIXTURE)) as con:
        first = _first_enqueue_conn(con)
        (second,) = con.execute(
            "SELECT ci.connectionId FROM PYTORCH_API p JOIN STRING_IDS s ON s.id = p.name "
            "JOIN CONNECTION_IDS ci ON ci.id = p.connectionId WHERE s.value = 'Enqueue' "
            "AND ci.connectionId != ? ORDER BY CAST(p.startNs AS INTEGER) LIMIT 1",
            (first,)).fetchone()
    enq = ("SELECT p.rowid FROM PYTORCH_API p JOIN STRING_IDS s ON s.id = p.name JOIN "
           "CONNECTION_IDS ci ON ci.id = p.connectionId WHERE s.value = 'Enqueue' AND "
           "ci.connectionId = {}")
    rank_dir = _copy(tmp_path, [
        f"UPDATE PYTORCH_API SET startNs = 'soon' WHERE rowid = ({enq.format(first)})",
        f"UPDATE PYTORCH_API SET endNs = 'later' WHERE rowid = ({enq.format(second)})"])
    rows = _queue_rows(_db(rank_dir))
    # by hand from the edited db: every connection with both an Enqueue and a Dequeue, the
    # one whose Enqueue start is 'soon' left out, in Enqueue start order
    starts = {c: s for nm, s, e, c in rows if nm == "Enqueue"}
    ends = {c: e for nm, s, e, c in rows if nm == "Enqueue"}
    deq = {c for nm, s, e, c in rows if nm.startswith("Dequeue")}
    want = sorted((int(s), c) for c, s in starts.items() if c in deq and s != "soon")
    data = _read(rank_dir)
    q = data.tables[S.TASK_QUEUE].to_pylist()
    assert [r["queue_id"] for r in q] == [str(c) for _, c in want]
    assert str(first) not in {r["queue_id"] for r in q}
    row = next(r for r in q if r["queue_id"] == str(second))
    assert row["enqueue_ns"] == int(starts[second]) and row["enqueue_dur_ns"] is None
    other = next(r for r in q if r["queue_id"] != str(second))
    c = int(other["queue_id"])
    assert other["enqueue_dur_ns"] == int(ends[c]) - int(starts[c])
    assert not [p for p in data.problems if "advice" in (p.affects or ())]
