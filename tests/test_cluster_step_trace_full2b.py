"""cluster_step_trace (full run 2): ClusterStepTrace's row count, order, empty table, parallel
columns of ranks outside the layout and the index of the one frame, on hand-built STEP_TRACE
tables (the pipeline never hands the class an empty table, nor a step 0 beside a missing step,
so the class is called directly). Expected values are worked out by hand in each test."""

from __future__ import annotations

from ascendprof.model import schemas as S
from ascendprof.analyze import cluster_step_trace as cst

US = 1000  # ns
NINE = ["Computing", "Communication(Not Overlapped)", "Overlapped", "Communication", "Free",
        "Stage", "Bubble", "Communication(Not Overlapped and Exclude Receive)", "Preparing"]
HEADERS = ["Step", "Type", "Index"] + NINE
# ranks 0 and 1 form one pipeline (pp p2p) and each its own stage (collective {0}, {1})
TWO_STAGES = {"comm_group_parallel_info": [
    {"type": "p2p", "rank_set": [0, 1], "group_name": "a", "pg_name": "pp"},
    {"type": "collective", "rank_set": [0], "group_name": "c", "pg_name": "dp"},
    {"type": "collective", "rank_set": [1], "group_name": "d", "pg_name": "dp"}]}
# ranks 0 and 1 in one stage (0, 1): collective {0, 1} beside the pp p2p group {0, 2}
ONE_STAGE = {"comm_group_parallel_info": [
    {"type": "p2p", "rank_set": [0, 2], "group_name": "a", "pg_name": "pp"},
    {"type": "collective", "rank_set": [0, 1], "group_name": "c", "pg_name": "dp"}]}
NO_PP = {"comm_group_parallel_info": [
    {"type": "collective", "rank_set": [0, 1], "group_name": "c", "pg_name": "dp"}]}


def _st(ranks, steps, computing_us):
    return S.from_lists(S.STEP_TRACE, {"rank": ranks, "step": steps,
                                       "computing_ns": [c * US for c in computing_us]})


def test_an_empty_step_trace_gives_one_empty_frame_with_the_columns():
    """A table of no rows (as None) gives no rows, and one empty frame that still has the
    file's twelve columns (table()'s docstring)."""
    for empty in (S.empty(S.STEP_TRACE), None):
        t = cst.table(empty, {}, TWO_STAGES)
        assert len(t) == 0
        frames = list(t.frames())
        assert len(frames) == 1 and list(frames[0].columns) == HEADERS and frames[0].empty
        df = cst.build(empty, {}, None)
        assert list(df.columns) == HEADERS and len(df) == 0


def test_len_is_the_rank_rows_when_there_are_no_stages():
    """Without a pp p2p group there are no stage rows: len() counts the rank rows only
    (3 rows over 2 steps -> 3), and the frame has exactly those rows."""
    st = _st([0, 1, 0], [1, 1, 2], [1, 2, 3])
    for groups, meta in ((NO_PP, {}), (None, {})):
        t = cst.table(st, meta, groups)
        assert len(t) == 3
        df = t.to_frame()
        assert df["Type"].tolist() == ["rank"] * 3 and len(df) == 3
    # with stages: 3 rank rows + one stage row per step (steps 1 and 2, one stage) = 5
    t = cst.table(st, {}, ONE_STAGE)
    assert len(t) == 5 and len(t.to_frame()) == 5


def test_rows_without_a_step_come_before_step_0():
    """Rank rows sort by step with the rows of no step first (key -inf), also before a step
    numbered 0; a missing step is not step 0: each has its own stage row, 2 + 2 rows."""
    st = _st([0, 1], [0, None], [4, 6])
    t = cst.table(st, {}, ONE_STAGE)
    assert len(t) == 4
    df = t.to_frame()
    assert df[["Step", "Type", "Index", "Computing"]].values.tolist() == [
        ["", "rank", 1, 6.0], [0, "rank", 0, 4.0],
        ["", "stage", "(0, 1)", 6.0], [0, "stage", "(0, 1)", 4.0]]
    # no stages: the same two rank rows in the same order
    df = cst.build(st, {}, NO_PP)
    assert df[["Step", "Index"]].values.tolist() == [["", 1], [0, 0]]


def test_a_rank_beyond_the_layout_gets_na():
    """world_size 2 (pp 2): the layout places ranks 0 (DP 0, PP 0, TP 0) and 1 (PP 1); rank 3
    lies beyond it (two ranks for two places, so the columns are kept) and gets 'NA'."""
    meta = {0: {"distributed_args": {"world_size": 2, "pipeline_model_parallel_size": 2}}}
    df = cst.build(_st([0, 3], [1, 1], [1, 1]), meta, NO_PP)
    assert df[["Index", "DP Index", "PP Index", "TP Index"]].values.tolist() == [
        [0, 0, 0, 0], [3, "NA", "NA", "NA"]]


def test_ranks_the_layout_does_not_place_get_na():
    """context_parallel_size 0 passes the size checks (world 2 = tp 1 * pp 1 * dp 2) but its
    data-parallel groups are range(tp * cp) = empty, so no rank is placed: the columns are
    there and every rank's DP/PP/TP Index is 'NA'."""
    meta = {0: {"distributed_args": {"world_size": 2, "data_parallel_size": 2,
                                     "context_parallel_size": 0}}}
    assert cst.parallel_index(meta[0]["distributed_args"]) == [None, None]
    df = cst.build(_st([0, 1], [1, 1], [1, 1]), meta, NO_PP)
    assert df[["Index", "DP Index", "PP Index", "TP Index"]].values.tolist() == [
        [0, "NA", "NA", "NA"], [1, "NA", "NA", "NA"]]


def test_the_one_frame_is_numbered_from_0():
    """to_frame()/build() joins the rank frame and the stage frame into one DataFrame numbered
    0..n-1 (2 rank rows + 2 stage rows), not two runs of 0, 1."""
    df = cst.build(_st([0, 1], [1, 1], [2, 3]), {}, TWO_STAGES)
    assert df["Type"].tolist() == ["rank", "rank", "stage", "stage"]
    assert df.index.tolist() == [0, 1, 2, 3]
    assert df.loc[2, "Index"] == "(0,)" and df.loc[3, "Index"] == "(1,)"


def test_ranks_in_no_stage_share_one_stage_row_per_step():
    """Ranks 3 and 4 are in no stage of ONE_STAGE (stage (0, 1)): at step 1 they form the one
    stage '()' (max of 5 and 7 us = 7), so 3 rank rows + 2 stage rows = 5, and len() says so."""
    st = _st([0, 3, 4], [1, 1, 1], [2, 5, 7])
    t = cst.table(st, {}, ONE_STAGE)
    assert len(t) == 5
    df = t.to_frame()
    assert len(df) == 5
    assert df[["Type", "Index", "Computing"]].values.tolist()[3:] == [
        ["stage", "(0, 1)", 2.0], ["stage", "()", 7.0]]
