"""cluster_communication.json (analyze/cluster_communication/communication_file.py) written by
``ascendprof analyse`` for the torch_npu-2023-2rank fixture, for the gaps found by the module's
seed-36 mutation run (whose six survivors are equivalent: see
mutation/survivors/cluster_communication_communication_file.toml).

Group 13337953553061386822 has ops in both kinds on both ranks in step2 (4 collective ops and
the p2p hcom_send__822_0), so its group key "(0, 1)" holds two fragments of each rank for it,
and each rank's 'Total Op Info@<group>' is the two fragments' totals merged. The expected sums
are worked out from the profiler's own communication.json: every OPINFO of the group, both kinds.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ascendprof import api

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "torch_npu-2023-2rank"
GROUP = "13337953553061386822"


def _comm(rank: int) -> dict:
    path = FIXTURE / f"rank{rank}_ascend_pt" / "ASCEND_PROFILER_OUTPUT" / "communication.json"
    return json.loads(path.read_text())


def test_total_of_a_group_with_ops_in_both_kinds_sums_both_kinds(tmp_path):
    # each rank's Total Op Info@GROUP in step2 adds up the rank's OPINFOs of GROUP in both
    # kinds: the collective fragment's total and the p2p fragment's total merged (a hand-made
    # mutation writing the first fragment's total alone, 't[0] if True else', gives the
    # collective ops' sums only and fails here)
    out = tmp_path / "out"
    assert api.analyse(FIXTURE, out, fmt="json", workers=1, tables=False, cache=False,
                       progress=False, html=False) == 0
    got = json.loads((out / "cluster_communication.json").read_text())["(0, 1)"]["step2"]
    total = got[f"Total Op Info@{GROUP}"]
    assert set(total) == {"0", "1"}
    for r in (0, 1):
        step = _comm(r)["step2"]
        infos = {kind: [v for k, v in ops.items() if k.endswith("@" + GROUP)]
                 for kind, ops in step.items()}
        assert len(infos["collective"]) == 4 and len(infos["p2p"]) == 1  # the fixture as said
        every = infos["collective"] + infos["p2p"]
        mine = total[str(r)]
        for label in ("Elapse Time(ms)", "Transit Time(ms)", "Wait Time(ms)",
                      "Synchronization Time(ms)", "Idle Time(ms)"):
            want = sum(i["Communication Time Info"][label] for i in every)
            # to 10 ns: the totals carry 6 decimals, the OPINFOs more
            assert mine["Communication Time Info"][label] == pytest.approx(want, abs=1e-5)
        for transport, tot in mine["Communication Bandwidth Info"].items():
            parts = [i["Communication Bandwidth Info"].get(transport, {}) for i in every]
            want = sum(p.get("Transit Size(MB)", 0) for p in parts)
            assert tot["Transit Size(MB)"] == pytest.approx(want, abs=1e-5)
        # the p2p send is in the merge: without it the sums are the collective ops' alone
        coll = sum(i["Communication Time Info"]["Elapse Time(ms)"] for i in infos["collective"])
        p2p = infos["p2p"][0]["Communication Time Info"]["Elapse Time(ms)"]
        assert p2p > 1e-3
        elapse = mine["Communication Time Info"]["Elapse Time(ms)"]
        assert elapse == pytest.approx(coll + p2p, abs=1e-5)
