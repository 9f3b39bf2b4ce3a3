"""ascendprof.readers.values, the cases the seed-34 mutation sample found untested: the text,
``where`` and ``affects`` of each problem :func:`values.check` records, as the module docstring
states them, for damage made on a copy of rank 0 of the real Qwen3 fixture and read through
``read_source``:

- a negative kernel duration names the kernel and its value (whole read and spilled read, where
  the reader leaves the rows out itself and ``report_negative_durations`` reports them);
- STEP_TRACE: a negative Stage becomes null (the other steps' Stage stays), an empty Computing
  cell is reported where it is, a step listed twice keeps its first row;
- COMM_OPS (analysis.db of the db-level1 fixture): a negative Wait Time is reported with its
  op; COMM_BANDWIDTH: a negative bandwidth is "negative or NaN" and only it becomes null;
- ``first_odd_comm_value`` (the gate's refusal) describes the first such value.

Expected values are computed here from the copied files (csv / json modules) by hand.
"""

from __future__ import annotations

import csv
import json
import shutil
import sqlite3
from pathlib import Path

import pytest

from ascendprof.model import schemas as S
from ascendprof.model.problems import Problems
from ascendprof.readers import ascend_output as AO
from ascendprof.readers import read_source
from ascendprof.readers.values import first_odd_comm_value
from ascendprof.scan import scan
from ascendprof.sysio import bigtables, textio
from conftest import QWEN3

OUT = "ASCEND_PROFILER_OUTPUT"
DB_RANK = QWEN3.parent / "torch_npu-db-level1-rank0" / "rank0_ascend_pt"
STEP_AFFECTS = ("step_breakdown", "verdicts")
KERNEL_AFFECTS = ("step_breakdown", "op_statistics")
COMM_AFFECTS = ("communication", "verdicts")


@pytest.fixture
def rank0(tmp_path) -> Path:
    dst = tmp_path / "in" / "rank_0_ascend_pt"
    shutil.copytree(QWEN3 / "rank_0_ascend_pt", dst,
                    ignore=shutil.ignore_patterns("*memory*", "*mem.csv"))
    return dst


def _source(rank_dir: Path):
    (src,) = scan(rank_dir.parent, Problems())
    return src


def _rows(path):
    with open(path, newline="") as f:
        r = csv.DictReader(f)
        return r.fieldnames, list(r)


def _write(path, head, rows):
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, head, lineterminator="\n")
        w.writeheader()
        w.writerows(rows)


def _problems(data, needle):
    return [p for p in data.problems.items if needle in p.reason]


def _negative_kernel(rank0):
    """Data row 6 of kernel_details.csv made negative; the expected problem text."""
    kd = rank0 / OUT / "kernel_details.csv"
    head, rows = _rows(kd)
    row = rows[5]
    dur = float(row["Duration(us)"])
    row["Duration(us)"] = repr(-dur)
    _write(kd, head, rows)
    return (f"1 row(s) with a negative duration left out (e.g. {row['Name']!r}: "
            f"{-dur:.3f} us)"), int(row["Step Id"])


def test_a_negative_kernel_duration_is_reported_with_the_kernel_name(rank0):
    want, step = _negative_kernel(rank0)
    data = read_source(_source(rank0))
    (p,) = _problems(data, "negative duration")
    assert p.reason == want  # the kernel's name, not None
    assert p.where == f"row 6, column Duration(us), step {step}"
    assert p.affects == KERNEL_AFFECTS and p.severity == "skipped"
    assert p.path == str(rank0 / OUT / "kernel_details.csv")


def test_a_negative_kernel_duration_in_a_spilled_read(rank0, tmp_path, monkeypatch):
    """kernel_details.csv spilled: its reader leaves the row out and report_negative_durations
    records the same problem (without a row: the batches have none)."""
    want, _ = _negative_kernel(rank0)
    monkeypatch.setattr(bigtables, "SPILL_BYTES", 1)
    monkeypatch.setattr(textio, "STREAM_BLOCK_BYTES", 64 << 10)
    (tmp_path / "scratch").mkdir()
    with bigtables.spilling(tmp_path / "scratch"):
        data = read_source(_source(rank0))
        assert S.KERNELS in data.spilled
        (p,) = _problems(data, "negative duration")
    assert p.reason == want
    assert p.where == "column Duration(us)"
    assert p.affects == KERNEL_AFFECTS and p.severity == "skipped"
    assert p.path == str(rank0 / OUT / "kernel_details.csv")


def test_step_trace_negative_empty_and_duplicated(rank0):
    st = rank0 / OUT / "step_trace_time.csv"
    head, (r13,) = _rows(st)
    stage13 = r13["Stage"]
    r13 = dict(r13, Stage="-1.5")
    r14 = dict(r13, Step="14", Stage=stage13)
    r15 = dict(r13, Step="15", Stage=stage13, Computing="")
    dup13 = dict(r13, Stage=stage13)  # step 13 again, row 4: left out, the first row kept
    _write(st, head, [r13, r14, r15, dup13])
    data = read_source(_source(rank0))
    path = str(st)

    (d,) = _problems(data, "duplicated step")
    assert d.reason == ("1 duplicated step row(s) left out (e.g. step 13 listed 2 times); the "
                        "first row of each step is kept")
    assert d.where == "row 4, column Step, step 13"
    assert d.affects == STEP_AFFECTS and d.path == path

    (n,) = _problems(data, "negative Stage")
    assert n.reason == "1 negative Stage value(s) left out (e.g. -1.500 us); this value cannot " \
                       "be negative"
    assert n.where == "row 1, column Stage, step 13"
    assert n.affects == STEP_AFFECTS and n.path == path

    (e,) = _problems(data, "empty or NaN Computing")
    assert e.reason == ("1 empty or NaN Computing value(s); left out of the sums and medians of "
                        "that metric")
    assert e.where == "row 3, column Computing, step 15"
    assert e.affects == STEP_AFFECTS and e.path == path

    t = data.tables[S.STEP_TRACE].to_pylist()
    assert [r["step"] for r in t] == [13, 14, 15]
    # only the negative Stage is null; 810022.25 us in the file -> ns
    stage_ns = round(float(stage13) * 1000)
    assert [r["stage_ns"] for r in t] == [None, stage_ns, stage_ns]


def _comm_damage(rank0):
    """communication.json: the second op's HCCS bandwidth made negative; returns the ops in
    file order as (op name, group, info)."""
    cj = rank0 / OUT / "communication.json"
    doc = json.loads(cj.read_text())
    ops = [(key, info) for step in doc.values() for kind in step.values()
           for key, info in kind.items() if key != "Total Op Info"]
    ops[1][1]["Communication Bandwidth Info"]["HCCS"]["Bandwidth(GB/s)"] = -17.5
    cj.write_text(json.dumps(doc))
    return [(*key.split("@"), info) for key, info in ops]


def _bandwidth_row(ops):
    transports = list(ops[0][2]["Communication Bandwidth Info"])
    return transports, len(transports) + transports.index("HCCS") + 1  # a row per op, transport


def test_a_negative_bandwidth_is_reported_and_only_it_made_null(rank0):
    ops = _comm_damage(rank0)
    data = read_source(_source(rank0))
    (bw,) = _problems(data, "Bandwidth(GB/s)")
    op, group, info = ops[1]
    transports, row = _bandwidth_row(ops)
    assert bw.reason == ("1 negative or NaN Bandwidth(GB/s) value(s) left out (e.g. -17.500 "
                         "GB/s); this value cannot be negative")
    assert bw.where == f"row {row}, column Bandwidth(GB/s), op {op}@{group}, step 13"
    assert bw.affects == COMM_AFFECTS
    assert bw.path == str(rank0 / OUT / "communication.json")

    # only the negative bandwidth is null; every other one as in the file
    want = [info["Communication Bandwidth Info"][tr]["Bandwidth(GB/s)"]
            for _, _, info in ops for tr in transports]
    want[row - 1] = None
    assert data.tables[S.COMM_BANDWIDTH]["bandwidth_gbps"].to_pylist() == want


def test_a_negative_comm_time_in_analysis_db_is_reported_with_its_op(tmp_path):
    """The communication.json reader leaves such an op out itself; analysis.db's
    CommAnalyzerTime rows reach values.check, which names the op in ``where``."""
    dst = tmp_path / "db" / "rank0_ascend_pt"
    shutil.copytree(DB_RANK, dst)
    db = dst / OUT / "analysis.db"
    with sqlite3.connect(db) as c:
        ops = c.execute("SELECT rowid, hccl_op_name, group_name, step FROM CommAnalyzerTime "
                        "ORDER BY start_timestamp").fetchall()
        rowid, op, group, step = ops[1]  # the second op in time: row 2 of the table
        c.execute("UPDATE CommAnalyzerTime SET wait_time = -0.5 WHERE rowid = ?", (rowid,))
    data = read_source(_source(dst))
    (w,) = _problems(data, "Wait Time")
    assert w.reason == ("1 negative Wait Time(ms) value(s) left out (e.g. -0.500 ms); this "
                        "value cannot be negative")
    assert w.where == f"row 2, column Wait Time(ms), op {op}@{group}, step {step[len('step'):]}"
    assert w.affects == COMM_AFFECTS and w.path == str(db)
    assert [r is None for r in data.tables[S.COMM_OPS]["wait_ns"].to_pylist()] == \
        [i == 1 for i in range(len(ops))]


def test_first_odd_comm_value_describes_the_first(rank0):
    """What the gate refuses an input for: the reader's tables before values.check."""
    ops = _comm_damage(rank0)
    op, group, _ = ops[1]
    _, row = _bandwidth_row(ops)
    tables = AO.read(_source(rank0)).tables
    assert first_odd_comm_value(tables) == (
        f"1 Bandwidth(GB/s) value(s) that cannot be (e.g. -17.500 GB/s; row {row}, column "
        f"Bandwidth(GB/s), op {op}@{group}, step 13)")
    assert first_odd_comm_value(read_source(_source(rank0)).tables) is None
