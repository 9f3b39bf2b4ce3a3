"""host_events (ascendprof.readers.host_events), mutation testing seed 46, read the way a run
with ``--advice all`` reads a rank (engine.pipeline.read_rank, ReadOptions(advice="all")).

db side, on the shipped level1 rank 0 torch_npu db export (fixtures/torch_npu-db-level1-rank0),
copied and edited with sqlite3:
- a host event with no end (PYTORCH_API endNs NULL or text that is no number, the column is
  TEXT; a GC_RECORD row with endNs NULL) is kept, at its start, with duration 0 (not dropped,
  not 1 ns, not an error).

Expected values come from sqlite3 reads of the edited db, or are worked out by hand below.
"""

from __future__ import annotations

from test_host_events_db_seed34 import _copy, _read
from test_host_events_seed35 import _db
from test_host_events_seed40 import _advice_problems, _ro

from ascendprof.model import schemas as S


# ----------------------------------------------------------------------------- db side

def test_db_host_event_without_end_has_duration_zero(tmp_path):
    """Optimizer.step#SGD.step gets endNs NULL, enumerate(DataLoader)#... endNs 'unknown'
    (PYTORCH_API declares endNs TEXT), and a GC_RECORD of two collections is added, the second
    with endNs NULL. Each of the three is still a HOST_EVENTS row at its start, with
    dur_ns 0 (no end, so no duration); the collection with an end keeps endNs - startNs =
    1736410576400250000 - 1736410576400000000 = 250000."""
    opt = "Optimizer.step#SGD.step"
    dl = "enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__"

    def sid(name):
        return f"(SELECT id FROM STRING_IDS WHERE value = '{name}')"

    rank_dir = _copy(tmp_path, [
        f"UPDATE PYTORCH_API SET endNs = NULL WHERE name = {sid(opt)}",
        f"UPDATE PYTORCH_API SET endNs = 'unknown' WHERE name = {sid(dl)}",
        "CREATE TABLE GC_RECORD (startNs INTEGER, endNs INTEGER, globalTid INTEGER)",
        "INSERT INTO GC_RECORD VALUES (1736410576400000000, 1736410576400250000, 4026531841)",
        "INSERT INTO GC_RECORD VALUES (1736410576500000000, NULL, 4026531841)",
    ])
    with _ro(_db(rank_dir)) as con:
        starts = {}
        for name, start, end, tid in con.execute(
                "SELECT s.value, p.startNs, p.endNs, p.globalTid FROM PYTORCH_API p "
                f"JOIN STRING_IDS s ON s.id = p.name WHERE s.value IN ('{opt}', '{dl}')"):
            assert end in (None, "unknown")
            starts[name] = (int(start), tid)
    assert set(starts) == {opt, dl}
    data = _read(rank_dir)
    assert _advice_problems(data) == [], data.problems.brief()
    host = data.tables[S.HOST_EVENTS].to_pylist()
    got = sorted((r["source"], r["name"], r["start_ns"], r["tid"], r["dur_ns"]) for r in host
                 if r["name"] in (opt, dl, "GC"))
    assert got == sorted([
        ("framework", opt, *starts[opt], 0),
        ("framework", dl, *starts[dl], 0),
        ("gc", "GC", 1736410576400000000, 4026531841, 250000),
        ("gc", "GC", 1736410576500000000, 4026531841, 0)])

