"""cluster_step_trace: stage rows of a run whose (step, stage) pairs a careless key would merge.

One pipeline stage ``(0,)`` (rank 0; rank 1 is in the pp p2p group but in no collective group,
so it lands in the stage ``()``), three steps. The file must then hold one stage row per
(step, stage): six, each the max over its stage's ranks, which here is the one rank's values.
Expected values by hand: rank r's Computing in step s is 10*s + r us (fed as ns * 1000)."""

import pyarrow as pa

from ascendprof.analyze import cluster_step_trace as cst

GROUPS = {"comm_group_parallel_info": [
    {"type": "p2p", "pg_name": "pp", "group_name": "p", "rank_set": [0, 1]},
    {"type": "collective", "pg_name": "dp", "group_name": "g0", "rank_set": [0]},
]}


def _table():
    steps, ranks = [], []
    for s in (1, 2, 3):
        for r in (0, 1):
            steps.append(s)
            ranks.append(r)
    cols = {"rank": pa.array(ranks, pa.int64()), "step": pa.array(steps, pa.int64())}
    for _, c in cst.TIME_COLUMNS:
        cols[c] = pa.array([1000 * (10 * s + r) for s, r in zip(steps, ranks)], pa.int64())
    return pa.table(cols)


def test_one_stage_row_per_step_and_stage():
    df = cst.build(_table(), {}, GROUPS)
    stage = df[df["Type"] == "stage"]
    got = [(s, i, c) for s, i, c in zip(stage["Step"], stage["Index"], stage["Computing"])]
    # stage (0,) holds rank 0 (10*s), stage () holds rank 1 (10*s + 1); first-appearance order
    assert got == [(1, "(0,)", 10.0), (1, "()", 11.0),
                   (2, "(0,)", 20.0), (2, "()", 21.0),
                   (3, "(0,)", 30.0), (3, "()", 31.0)]
    assert len(df) == 6 + 6
