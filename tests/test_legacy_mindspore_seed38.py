"""Legacy MindSpore profiler files through ``read_source`` / ``analyse``: the cases the seed-38
mutation sample of readers/legacy_mindspore.py found untested. Each starts from a copy of a
real legacy tree in /work/shared/data/mindspore-legacy (run_1/normal_run/profiler, rank 1, and
profiler/, whose aicore detail carries MindSpore 1.x's ``full_kernel_time`` header) with one
file broken by hand, and checks what the user is told (the problem's text, the file it names,
its rank, the analysis it affects) and the tables still read. Expected values are worked out
from the files in the comments.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import shutil
from decimal import Decimal

from ascendprof import api
from ascendprof.model import schemas as S
from ascendprof.readers import read_source
from test_legacy_mindspore_by_hand import _problem, _rank

RUN_1 = "mindspore-legacy/run_1/normal_run/profiler"
TIMELINE = "output_timeline_data_1.txt"
DETAIL = "aicore_intermediate_1_detail.csv"
STEPS = "step_trace_raw_1_detail_time.csv"


def _copy(shared_data, tmp_path, names, src=RUN_1):
    """A profiler/ folder holding copies of ``names`` from the real legacy tree ``src``."""
    d = tmp_path / "profiler"
    d.mkdir()
    for n in names:
        shutil.copy(shared_data / src / n, d / n)
    return d


# ------------------------------------------------------------------ output_timeline_data

def test_a_timeline_data_with_a_cut_header_is_a_problem_of_the_op_statistics(shared_data,
                                                                              tmp_path):
    """run_1 rank 1: the header of output_timeline_data_1.txt cut to its first three columns
    (``op_name, stream_id, start_time(ms)``, no duration). The reader needs 4 columns: one
    problem naming that file, rank 1, affecting the op statistics; no kernels. The step trace
    is still read: 323 data rows, the last the average ('-'), so steps 1..322."""
    d = _copy(shared_data, tmp_path, [STEPS, TIMELINE])
    lines = (d / TIMELINE).read_text().splitlines(keepends=True)
    assert lines[0] == "op_name, stream_id, start_time(ms), duration(ms)\n"
    lines[0] = "op_name, stream_id, start_time(ms)\n"
    (d / TIMELINE).write_text("".join(lines))

    data = read_source(_rank(d, 1))
    p = _problem(data, TIMELINE)
    assert p.path == str(d / TIMELINE)
    assert (p.reason, p.rank, p.affects) == (
        "expected columns op_name, stream_id, start_time(ms), duration(ms)", 1, ("op_statistics",))
    assert S.KERNELS not in data.tables
    assert data.tables[S.ITERATIONS].column("step").to_pylist() == list(range(1, 323))


def test_analyse_lists_the_cut_timeline_data_in_problems_csv(shared_data, tmp_path):
    """The same broken file through ``analyse``: problems.csv has its row, naming the file,
    rank 1, the reason (no line: the header is wrong), and op_statistics as what it affects."""
    d = _copy(shared_data, tmp_path, [STEPS, TIMELINE])
    lines = (d / TIMELINE).read_text().splitlines(keepends=True)
    lines[0] = "op_name, stream_id, start_time(ms)\n"
    (d / TIMELINE).write_text("".join(lines))
    out = tmp_path / "out"
    api.analyse(d, out)
    with open(out / "problems.csv", newline="") as f:
        rows = [r for r in csv.DictReader(f) if r["Path"].endswith(TIMELINE)]
    assert len(rows) == 1, rows
    (r,) = rows
    assert (r["Rank"], r["Severity"], r["Path"], r["Where"]) == (
        "1", "skipped", str(d / TIMELINE), "")
    assert r["Reason"] == "expected columns op_name, stream_id, start_time(ms), duration(ms)"
    assert r["Affects"] == "op_statistics"


# ------------------------------------------------------------------ timeline display

def test_timeline_display_rows_carry_their_rank(shared_data, tmp_path):
    """timeline_display_1.json of run_1 (file name rank 1): every row of the timeline is
    rank 1's; the X events are counted from the file."""
    d = _copy(shared_data, tmp_path, [STEPS, "timeline_display_1.json"])
    events = json.loads((d / "timeline_display_1.json").read_text())
    x = sum(1 for e in events if isinstance(e, dict) and e.get("ph") == "X")
    tl = read_source(_rank(d, 1)).tables[S.TIMELINE]
    assert tl.num_rows == x
    assert tl.column("rank").to_pylist() == [1] * x


# ------------------------------------------------------------------ aicore_intermediate detail

def test_an_aicore_detail_of_mindspore_1x_takes_its_first_column_as_the_name(shared_data):
    """mindspore-legacy/profiler/aicore_intermediate_1_detail.csv is headed
    ``full_kernel_time,execution_time,execution_frequency`` (MindSpore 1.x's typo: neither
    full_op_name nor full_kernel_name): the op names are its first column, one kernel per
    data row (10), e.g. Default/AtomicAddrClean-op104 with 0.00133 ms = 1330 ns."""
    d = shared_data / "mindspore-legacy" / "profiler"
    with open(d / DETAIL, newline="") as f:
        rows = list(csv.reader(f))
    assert rows[0][0] == "full_kernel_time"
    data = read_source(_rank(d, 1))
    assert not [p for p in data.problems if p.path.endswith(DETAIL)]
    k = data.tables[S.KERNELS]
    assert k.column("name").to_pylist() == [r[0] for r in rows[1:]]
    assert k.column("dur_ns").to_pylist() == [
        int(Decimal(r[1]) * 1_000_000) for r in rows[1:]]
    first = k.to_pylist()[0]
    assert (first["name"], first["op_type"], first["dur_ns"]) == (
        "Default/AtomicAddrClean-op104", "AtomicAddrClean", 1330)


def test_an_aicore_detail_of_a_rank_without_device_id_gives_the_rank_as_device(shared_data,
                                                                                 tmp_path):
    """A rank handed over without a device id (a Source built through the API, device_id
    None): the kernels of its aicore detail name the rank as their device, 1 for rank 1."""
    d = _copy(shared_data, tmp_path, [DETAIL])
    src = dataclasses.replace(_rank(d, 1), device_id=None)
    k = read_source(src).tables[S.KERNELS]
    # 69 data rows in run_1's aicore_intermediate_1_detail.csv (70 lines, the 1st the header)
    n = len((d / DETAIL).read_text().splitlines()) - 1
    assert k.num_rows == n == 69
    assert k.column("device_id").to_pylist() == [1] * n
    assert k.column("rank").to_pylist() == [1] * n


def test_a_short_aicore_detail_row_says_how_many_fields_it_has(shared_data, tmp_path):
    """run_1's aicore detail (header full_kernel_name,execution_time,execution_frequency:
    3 fields) with its 3rd line cut to the name alone: one field, where the name (column 0)
    and the time (column 1) are needed -> "row has 1 fields, header has 3" at line 3."""
    d = _copy(shared_data, tmp_path, [STEPS, DETAIL])
    lines = (d / DETAIL).read_text().splitlines(keepends=True)
    assert lines[2].startswith("Default/StreamSend-op199,")
    lines[2] = "Default/StreamSend-op199\n"
    (d / DETAIL).write_text("".join(lines))
    data = read_source(_rank(d, 1))
    p = _problem(data, DETAIL)
    assert (p.path, p.reason, p.where, p.rank, p.affects) == (
        str(d / DETAIL), "row has 1 fields, header has 3", "line 3", 1, ("op_statistics",))
    assert S.KERNELS not in data.tables


def test_an_aicore_detail_time_that_is_no_number_names_the_file(shared_data, tmp_path):
    """run_1's aicore detail with the execution time of line 4 (Default/StreamRecv-op202,
    5e-05) replaced by 'n/a': the problem names aicore_intermediate_1_detail.csv, line 4."""
    d = _copy(shared_data, tmp_path, [STEPS, DETAIL])
    lines = (d / DETAIL).read_text().splitlines(keepends=True)
    assert lines[3] == "Default/StreamRecv-op202,5e-05,3\n"
    lines[3] = "Default/StreamRecv-op202,n/a,3\n"
    (d / DETAIL).write_text("".join(lines))
    data = read_source(_rank(d, 1))
    p = _problem(data, DETAIL)
    assert (p.path, p.reason, p.where, p.rank) == (
        str(d / DETAIL), "not a number: 'n/a'", "line 4", 1)
    assert S.KERNELS not in data.tables
