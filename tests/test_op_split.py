"""The verdicts' split of communication op time (verdicts.op_rows, OpInstances, op_totals).

The expected values come from a second method: the per-row definition written out below with
pandas group-bys on the text keys (how the split was first implemented, before the workers sent
compact per-op rows), run on the real Qwen3 ranks, on a generated 8-rank cluster and on random
tables with ties, missing values and single-member op instances. One case is also worked out
by hand. The sums the verdicts take from the split one batch of ranks at a time (op_totals) are
checked against pandas group-bys of the per-row split of all ranks at once.
"""

from __future__ import annotations

import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from _verdict_tables import split_op_time, tables as qwen_tables
from ascendprof.scan import load_sources
from ascendprof.model import schemas as S
from ascendprof.analyze import verdicts as V

COLS = ["rank", "step_key", "kind", "group", "elapse_ns", "wait_ns", "idle_ns", "op",
        "transfer_ns", "waited_for", "peer_wait_ns", "absent_wait_ns", "other_ns",
        "unattributed_ns", "late_ns", "complete"]
NUM = ("elapse_ns", "transfer_ns", "peer_wait_ns", "absent_wait_ns", "other_ns",
       "unattributed_ns", "wait_ns", "idle_ns", "late_ns")


def _keyed(table: pa.Table) -> pd.DataFrame:
    """``table`` as pandas with the op key columns of the definition: step_key and group ''
    when missing, op = the name before its first '@' ('None' when missing)."""
    df = table.to_pandas()
    df["step_key"] = df["step_key"].fillna("")
    df["group"] = df["group"].fillna("")
    df["op"] = df["op_name"].fillna("None").map(lambda s: s.split("@", 1)[0])
    return df


def bandwidth_transit(comm_bandwidth: pa.Table) -> pd.Series:
    """Per op key (rank, step_key, op, group): summed RDMA + SDMA Transit Time (missing as 0),
    for the ops that have such rows (transport compared case-blind)."""
    bw = _keyed(comm_bandwidth)
    bw = bw[bw["transport"].fillna("").str.upper().isin(["RDMA", "SDMA"])]
    return bw.groupby(["rank", "step_key", "op", "group"])["transit_ns"].sum(min_count=0)


def oracle(comm_ops: pa.Table, comm_bandwidth: pa.Table | None = None,
           sizes: dict | None = None) -> pd.DataFrame:
    """The split by its definition, on text keys: COMM_OPS, and COMM_BANDWIDTH for the transfer
    of ops that report no Transit Time; ``sizes`` {group: members} where known. An instance is
    complete when all its members are present (p2p: 2; a group of unknown size: 2 or more);
    without that, the last present arrival's own Wait Time is waiting on absent members and
    the rest is unattributed."""
    ops = _keyed(comm_ops)
    for c in ("elapse_ns", "transit_ns", "wait_ns", "sync_ns", "idle_ns"):
        ops[c] = ops[c].fillna(0).astype("int64")
    if comm_bandwidth is not None and comm_bandwidth.num_rows:
        per_op = bandwidth_transit(comm_bandwidth)
        bw = pd.Series([per_op.get(k, 0) for k in
                        zip(ops["rank"], ops["step_key"], ops["op"], ops["group"])],
                       index=ops.index, dtype="int64")
        fallback = pd.concat([bw, ops["elapse_ns"]], axis=1).min(axis=1)
        transfer = ops["transit_ns"].where(ops["transit_ns"] > 0, fallback)
    else:
        transfer = ops["transit_ns"]
    ops["transfer_ns"] = pd.concat([transfer, ops["elapse_ns"]], axis=1).min(axis=1)
    key = ["step_key", "op", "group"]
    inst = ops.groupby(key, sort=False)
    members = inst["rank"].transform("nunique")
    shortest = inst["elapse_ns"].transform("min")
    first_min = inst["elapse_ns"].transform("idxmin")
    others_median = pd.Series(0, index=ops.index, dtype="int64")
    for _, idx in inst.groups.items():
        el = ops.loc[idx, "elapse_ns"].to_numpy()
        for i, row in enumerate(idx):
            rest = sorted(el[:i].tolist() + el[i + 1:].tolist())
            if not rest:
                others_median[row] = el[i]
                continue
            mid = len(rest) // 2
            others_median[row] = (rest[mid] if len(rest) % 2 else
                                  (rest[mid - 1] + rest[mid]) // 2)
    waited = ops["rank"].to_numpy()[first_min.to_numpy()]
    last_wait = ops["wait_ns"].to_numpy()[first_min.to_numpy()]
    room = ops["elapse_ns"] - ops["transfer_ns"]
    own = members >= 2
    peer = (ops["elapse_ns"] - shortest).clip(lower=0).where(own, 0)
    peer = pd.concat([peer, room], axis=1).min(axis=1)
    ok = own & (peer > 0) & (waited != ops["rank"])
    size = ops["group"].map(lambda g: (sizes or {}).get(g, 0)).astype("int64")
    expected = size.where(size > 0, members.clip(lower=2)).where(ops["kind"] != "p2p", 2)
    complete = members >= expected
    rest = room - peer
    absent = pd.Series(last_wait, index=ops.index).clip(lower=0)
    absent = pd.concat([absent, rest], axis=1).min(axis=1).where(~complete, 0)
    return pd.DataFrame({
        "rank": ops["rank"].astype("int32"), "step_key": ops["step_key"], "kind": ops["kind"],
        "group": ops["group"], "elapse_ns": ops["elapse_ns"], "wait_ns": ops["wait_ns"],
        "idle_ns": ops["idle_ns"], "op": ops["op"], "transfer_ns": ops["transfer_ns"],
        "waited_for": pd.Series(waited, index=ops.index).where(ok, -1).astype("int64"),
        "peer_wait_ns": peer.astype("int64"), "absent_wait_ns": absent.astype("int64"),
        "other_ns": rest.where(complete, 0).astype("int64"),
        "unattributed_ns": (rest - absent).where(~complete, 0).astype("int64"),
        # how much later than the other members (their median elapse) it arrived, >= 0
        "late_ns": (others_median - ops["elapse_ns"]).clip(lower=0).where(own, 0)
        .astype("int64"),
        "complete": complete.astype(bool)})


def _plain(df: pd.DataFrame) -> pd.DataFrame:
    """Text columns as Python texts with None for missing (pandas may infer its string dtype
    for either side), the rest as they are."""
    df = df[COLS].reset_index(drop=True)
    for c in ("step_key", "kind", "group", "op"):
        df[c] = df[c].astype(object).where(df[c].notna(), None)
    return df


def check(comm_ops: pa.Table, comm_bandwidth=None, sizes=None) -> pd.DataFrame:
    got = split_op_time(V.op_rows(comm_ops, comm_bandwidth), sizes)
    pd.testing.assert_frame_equal(_plain(got), _plain(oracle(comm_ops, comm_bandwidth, sizes)),
                                  check_dtype=True)
    return got


_OP_COLS = ("rank", "step_key", "kind", "op_name", "group")


def _ops(rows: list[dict]) -> pa.Table:
    return pa.Table.from_pylist([{k: v for k, v in r.items() if k != "bw"} for r in rows],
                                schema=S.SCHEMAS[S.COMM_OPS])


def _bandwidth(rows: list[dict]) -> pa.Table:
    """COMM_BANDWIDTH with the ``bw`` entries (transport, transit_ns) of every op row."""
    return pa.Table.from_pylist([{**{k: r[k] for k in _OP_COLS}, **b}
                                 for r in rows for b in r.get("bw", ())],
                                schema=S.SCHEMAS[S.COMM_BANDWIDTH])


def test_by_hand():
    # one allReduce instance on ranks 0, 1, 2 (elapse 10, 4, 4 ms; rank 0 arrived first and
    # waited); rank 2 has a second op alone in its group.
    ms = 1_000_000
    rows = [dict(rank=0, step_key="step1", kind="collective", op_name="ar_1", group="g",
                 elapse_ns=10 * ms, transit_ns=1 * ms, wait_ns=9 * ms, sync_ns=0, idle_ns=0),
            dict(rank=1, step_key="step1", kind="collective", op_name="ar_1", group="g",
                 elapse_ns=4 * ms, transit_ns=1 * ms, wait_ns=3 * ms, sync_ns=0, idle_ns=0),
            dict(rank=2, step_key="step1", kind="collective", op_name="ar_1", group="g",
                 elapse_ns=4 * ms, transit_ns=3 * ms, wait_ns=1 * ms, sync_ns=0, idle_ns=0),
            dict(rank=2, step_key="step1", kind="p2p", op_name="send_1", group="pp",
                 elapse_ns=5 * ms, transit_ns=0, wait_ns=2 * ms, sync_ns=0, idle_ns=0)]
    cols = ["peer_wait_ns", "waited_for", "absent_wait_ns", "other_ns", "unattributed_ns"]
    got = check(_ops(rows))
    # rank 0: 10 - 4 = 6 ms waiting for rank 1 (the first of the two shortest members);
    # other = 10 - 1 - 6 = 3 ms
    assert got.loc[0, cols].tolist() == [6 * ms, 1, 0, 3 * ms, 0]
    # ranks 1 and 2 are the shortest: no peer wait, nobody waited for
    assert got.loc[1:2, "peer_wait_ns"].tolist() == [0, 0]
    assert got.loc[1:2, "waited_for"].tolist() == [-1, -1]
    # the send's other member is not collected: its own Wait Time (2 ms) is waiting on it,
    # the remaining 5 - 0 - 2 = 3 ms cannot be attributed
    assert got.loc[3, cols].tolist() == [0, -1, 2 * ms, 0, 3 * ms]
    # group g has 4 members, one not collected: rank 1 (arrived last of the three present,
    # Wait Time 3 ms) waited 3 ms on it, so did everyone; rank 0: 6 ms for rank 1, 3 ms on the
    # absent member (10 - 1 - 6 - 3 = 0 left); rank 2: 1 ms transfer-room left after 3 ms absent
    got = check(_ops(rows), sizes={"g": 4})
    assert got.loc[0, cols].tolist() == [6 * ms, 1, 3 * ms, 0, 0]
    assert got.loc[1, cols].tolist() == [0, -1, 3 * ms, 0, 0]
    assert got.loc[2, cols].tolist() == [0, -1, 1 * ms, 0, 0]


def test_real_ranks(qwen3):
    t = qwen_tables(qwen3)
    got = check(t[S.COMM_OPS], t[S.COMM_BANDWIDTH])
    assert (got["waited_for"] >= 0).any() and (got["peer_wait_ns"] > 0).any()


def test_generated_cluster(generated_cluster):
    from ascendprof.engine import pipeline
    from ascendprof.model.problems import Problems
    from ascendprof.readers import read_source

    root = generated_cluster(8, "--comm-ops-per-rank", "120", "--kernels-per-rank", "500")
    ops, bws = [], []
    for src in load_sources(root, Problems()):
        data = read_source(src)
        ops.append(data.tables[S.COMM_OPS])
        bws.append(data.tables[S.COMM_BANDWIDTH])
    got = check(pa.concat_tables(ops), pa.concat_tables(bws))
    assert got["waited_for"].nunique() > 2


_row = st.fixed_dictionaries({
    "rank": st.integers(0, 5),
    "step_key": st.sampled_from(["step1", "step2", None]),
    "kind": st.sampled_from(["collective", "p2p", None]),
    "op_name": st.sampled_from(["ar_1", "ar_2", "ar_1@x", "send", None]),
    "group": st.sampled_from(["g1", "g2", None]),
    "elapse_ns": st.one_of(st.none(), st.integers(0, 50)),
    "transit_ns": st.one_of(st.none(), st.integers(-2, 50)),
    "wait_ns": st.one_of(st.none(), st.integers(0, 50)),
    "sync_ns": st.just(0),
    "idle_ns": st.one_of(st.none(), st.integers(0, 9)),
    # the op's Communication Bandwidth Info rows: only RDMA and SDMA (any case) count
    "bw": st.lists(st.fixed_dictionaries({
        "transport": st.sampled_from(["RDMA", "SDMA", "sdma", "HCCS", None]),
        "transit_ns": st.one_of(st.none(), st.integers(0, 40))}), max_size=2),
})


@settings(max_examples=300, deadline=None)
@given(st.lists(_row, min_size=1, max_size=40), st.booleans(),
       st.sampled_from([None, {"g1": 3}, {"g1": 1, "g2": 6}]))
def test_random_tables(rows, with_bw, sizes):
    check(_ops(rows), _bandwidth(rows) if with_bw else None, sizes)


@pytest.mark.parametrize("chunks", [1, 3])
def test_chunked_rows_as_from_workers(chunks):
    """The cluster step concatenates per-rank op_rows: codes must agree across chunks."""
    # the groups differ between the parts, so their dictionaries differ too
    rows = [dict(rank=r, step_key=f"step{i % 2}", kind="collective", op_name=f"ar_{i}",
                 group="g" if i % 2 else f"h{r % 2}", elapse_ns=10 + r + i, transit_ns=1,
                 wait_ns=2, sync_ns=0, idle_ns=0)
            for r in range(3) for i in range(4)]
    whole = split_op_time(V.op_rows(_ops(rows)))
    parts = [V.op_rows(_ops(rows[i::chunks])) for i in range(chunks)]
    got = split_op_time(pa.concat_tables(parts))
    order = [j for i in range(chunks) for j in range(i, len(rows), chunks)]
    pd.testing.assert_frame_equal(_plain(got), _plain(whole.iloc[order]))


def _expected_totals(frame: pd.DataFrame, flagged: dict):
    """What OpTotals must hold, computed with pandas from the per-row split."""
    f = frame.copy()
    for c in ("step_key", "kind", "group", "op"):
        f[c] = f[c].astype(object).where(f[c].notna(), None)
    n_steps = f.groupby("rank")["step_key"].nunique(dropna=False)
    comp = f[f["kind"].notna()].groupby(["rank", "kind", "group"]).agg(
        **{c: (c, "sum") for c in NUM}, n_ops=("elapse_ns", "size"))
    comp = comp.reset_index()
    for c in NUM:
        comp[c] = comp[c] / comp["rank"].map(n_steps)
    w = f[f["waited_for"] >= 0]
    blame = {(int(a), int(b), g or ""): int(v) for (a, b, g), v in
             w.groupby(["rank", "waited_for", w["group"].fillna("")])["peer_wait_ns"].sum()
             .items()}
    op_elapse = {}
    for stage, ranks in flagged.items():
        mine = f[f["rank"].isin(ranks)]
        op_elapse[stage] = {k: int(v) for k, v in mine.groupby("op")["elapse_ns"].sum().items()}
    return comp, blame, op_elapse


def _check_totals(batches: list, flagged: dict) -> None:
    totals = V.op_totals(lambda: iter(batches), flagged)
    comp, blame, op_elapse = _expected_totals(split_op_time(pa.concat_tables(batches)),
                                              flagged)
    got = totals.components({}).drop(columns="group_name")
    got["rank"] = got["rank"].astype("int64")
    comp["rank"] = comp["rank"].astype("int64")
    pd.testing.assert_frame_equal(got.reset_index(drop=True),
                                  comp[got.columns].reset_index(drop=True), check_dtype=False)
    assert totals.blame == blame
    assert {stage: totals.op_elapse(stage) for stage in flagged} == op_elapse


@pytest.mark.parametrize("batch_rows", [1, 1 << 15])
def test_streamed_totals_equal_the_per_row_split(qwen3, monkeypatch, batch_rows):
    """op_totals over one rank at a time (or all together) holds what pandas sums from the
    per-row split of all ranks at once."""
    monkeypatch.setattr(V.opsplit, "_BATCH_ROWS", batch_rows)
    t = qwen_tables(qwen3)
    rank = t[S.COMM_OPS].column("rank")
    batches = [V.op_rows(t[S.COMM_OPS].filter(pa.compute.equal(rank, r)), t[S.COMM_BANDWIDTH])
               for r in range(4)]
    _check_totals(batches, {0: [0, 1], 1: [2, 3]})
    _check_totals(batches, {None: [0, 1, 2, 3]})
    _check_totals(batches, {})


@settings(max_examples=150, deadline=None)
@given(st.lists(_row, min_size=1, max_size=40), st.integers(1, 5), st.booleans())
def test_streamed_totals_on_random_tables(rows, batch_rows, by_rank):
    import pyarrow.compute as pc

    V.opsplit._BATCH_ROWS, saved = batch_rows, V.opsplit._BATCH_ROWS
    try:
        # ranks in ascending order (as the pipeline sends them)
        rows = sorted(rows, key=lambda r: r["rank"])
        ops, bw = _ops(rows), _bandwidth(rows)
        ranks = sorted({r["rank"] for r in rows})
        if by_rank:  # one batch per rank, as the pipeline sends them
            batches = [V.op_rows(ops.filter(pc.equal(ops.column("rank"), r)), bw)
                       for r in ranks]
        else:  # slices of 3 rows: one rank's rows in several batches
            batches = [V.op_rows(ops.slice(i, 3), bw) for i in range(0, ops.num_rows, 3)]
        _check_totals(batches, {"even": [r for r in ranks if r % 2 == 0],
                                "odd": [r for r in ranks if r % 2]})
    finally:
        V.opsplit._BATCH_ROWS = saved


def test_real_data_parallel_ops_by_hand(qwen3):
    """Every op of the dp_cp group of ranks 0 and 1 in the Qwen3 fixture (HCCL group
    5862276114690318097), worked out from the two communication.json files with the json module:
    the member with the longer Elapse waited elapse_long - elapse_short for the other (at most
    its elapse minus its transfer), and 'other' is what is left after transfer and that wait.
    These ops report Transit Time 0 in their time info, so the transfer is the RDMA + SDMA
    Transit Time of their bandwidth info (SDMA there already includes HCCS, spec §7.2), at most
    the elapse."""
    from _verdict_tables import comm_json

    group = "5862276114690318097"
    own = comm_json(qwen3)
    want = {}
    for step_key, kinds in own[0].items():
        for kind, ops in kinds.items():
            for key, info0 in ops.items():
                if not key.endswith("@" + group) or key.startswith("Total"):
                    continue
                info1 = own[1][step_key][kind][key]
                t = {r: i["Communication Time Info"] for r, i in ((0, info0), (1, info1))}
                e = {r: round(t[r]["Elapse Time(ms)"] * 1e6) for r in (0, 1)}
                assert t[0]["Transit Time(ms)"] == t[1]["Transit Time(ms)"] == 0
                bw = {r: i["Communication Bandwidth Info"] for r, i in ((0, info0), (1, info1))}
                tr = {r: min(sum(round(bw[r][x]["Transit Time(ms)"] * 1e6)
                                 for x in ("RDMA", "SDMA")), e[r]) for r in (0, 1)}
                short = min((0, 1), key=lambda r: (e[r], r))  # first of equal ones: rank 0
                for r in (0, 1):
                    peer = min(e[r] - e[short], e[r] - tr[r])
                    waited = short if peer > 0 and short != r else -1
                    want[(r, step_key, key.split("@")[0])] = (tr[r], peer, waited,
                                                              e[r] - tr[r] - peer)
    assert len(want) == 8 and sum(v[2] >= 0 for v in want.values()) >= 3
    t = qwen_tables(qwen3)
    got = split_op_time(V.op_rows(t[S.COMM_OPS], t[S.COMM_BANDWIDTH]))
    got = got[got["group"].astype(str) == group]
    mine = {(int(r.rank), str(r.step_key), str(r.op)): (r.transfer_ns, r.peer_wait_ns,
                                                         r.waited_for, r.other_ns)
            for r in got.itertuples() if (int(r.rank), str(r.step_key), str(r.op)) in want}
    assert mine == want
