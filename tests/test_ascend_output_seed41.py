"""readers/ascend_output.py seed-41 survivors. Through the user's path (``read_source``) on
copies of the Level1 torch_npu rank of fixtures/torch_npu-static-graph-mem (rank0_ascend_pt)
changed by hand: trace_view.json is skipped (and ``meta["not_read"]`` says why) for a rank with
a single kernel when communication.json has the ops, and for a rank without communication.json
whose step_trace_time.csv reports no communication; a time column holding both an absolute time
and a duration in E-notation reports how many of each. By hand-built calls: read_metadata of a
directory that cannot be listed, read_output_dir of a source whose rank is unknown, and a
communication.json read in batches that must be reread whole (a repeated op key) keeps the rank.
Expected values are worked out from the files' text in the comments."""

from __future__ import annotations

import dataclasses

import pytest

from ascendprof.model import schemas as S
from ascendprof.model.errors import InputError
from ascendprof.readers.ascend_output import (read_communication_spilled, read_metadata,
                                              read_output_dir)
from test_ascend_output_seed40 import OUT, _copy, _problems, _read, _source

TRACE = "trace_view.json"


def _with_trace_view(rank_dir):
    (rank_dir / OUT / TRACE).write_text("[]")


def test_one_kernel_and_communication_json_make_the_timeline_unneeded(tmp_path):
    rank_dir = _copy(tmp_path)
    kd = rank_dir / OUT / "kernel_details.csv"
    lines = kd.read_text().splitlines(keepends=True)
    kd.write_text("".join(lines[:2]))  # header + the first row (trans_TransData_0, AI_VECTOR_CORE)
    _with_trace_view(rank_dir)
    data = _read(rank_dir)
    assert data.tables[S.KERNELS].num_rows == 1
    # one compute kernel, communication.json present (COMM_OPS read): trace_view not needed
    assert data.meta["not_read"][TRACE].startswith(
        "kernel_details.csv and communication.json have the compute tasks")


def test_a_step_trace_without_communication_makes_the_timeline_unneeded(tmp_path):
    rank_dir = _copy(tmp_path)
    for name in ("communication.json", "communication_matrix.json"):
        (rank_dir / OUT / name).unlink()
    kd = rank_dir / OUT / "kernel_details.csv"
    lines = kd.read_text().splitlines(keepends=True)
    kd.write_text("".join(lines[:3]))  # header + two TransData rows on AI_VECTOR_CORE (compute)
    st = rank_dir / OUT / "step_trace_time.csv"
    header, row = st.read_text().splitlines()[:2]
    cells = row.split(",")
    names = header.split(",")
    for c in ("Communication(Not Overlapped)", "Communication"):
        cells[names.index(c)] = "0"  # the step reports no communication at all
    st.write_text(header + "\n" + ",".join(cells) + "\n")
    _with_trace_view(rank_dir)
    data = _read(rank_dir)
    assert not data.has(S.COMM_OPS)
    assert data.meta["not_read"][TRACE].startswith(
        "kernel_details.csv has the compute tasks and step_trace_time.csv reports no "
        "communication")


def test_absolute_times_and_durations_in_e_notation_are_counted_apart(tmp_path):
    rank_dir = _copy(tmp_path)
    kd = rank_dir / OUT / "kernel_details.csv"
    text = kd.read_text()
    # Start Time(us) of the first two rows, as a spreadsheet would write them: one absolute time
    # (1.73641E+15 us >= 1e12: left empty) and one small value (15 us < 1e12: read as written)
    for old, new in (("1736408883704643.212\t", "1.73641E+15"),
                     ("1736408883704801.156\t", "1.5E+01")):
        assert text.count(old) == 1
        text = text.replace(old, new)
    kd.write_text(text)
    data = _read(rank_dir)
    msgs = [p.reason for p in _problems(data, "kernel_details.csv") if "E-notation" in p.reason]
    assert len(msgs) == 1
    # 2 cells in E-notation, 1 absolute, 2 - 1 = 1 read as written
    assert "2 value(s) in E-notation (e.g. 1.73641E+15)" in msgs[0]
    assert msgs[0].endswith("1 absolute time(s) left empty (6 significant digits put them "
                            "hours off), 1 duration(s) read as written")


def test_metadata_of_a_directory_that_cannot_be_listed_is_an_input_error(tmp_path):
    gone = tmp_path / "gone"
    with pytest.raises(InputError) as e:
        read_metadata(gone)
    assert e.value.path == str(gone)
    assert e.value.reason.startswith("cannot list: ")  # then the OS's reason (No such file ...)


def test_a_source_of_unknown_rank_is_refused_naming_its_directory(tmp_path):
    rank_dir = _copy(tmp_path)
    source = dataclasses.replace(_source(rank_dir), rank=None)
    with pytest.raises(InputError) as e:
        read_output_dir(source)
    assert e.value.path == str(rank_dir)
    assert e.value.reason == "rank unknown; not read"


def test_a_communication_json_reread_whole_keeps_the_rank(tmp_path):
    # op key a@g twice in step1/p2p: the streaming reader hands out the batch, then finds the
    # repeat and asks for the per-value reader (JSON keeps the last value, 3 ms, at the first place)
    path = tmp_path / "communication.json"
    path.write_text('{"step1": {"p2p": {"a@g": {"Communication Time Info": {"Elapse Time(ms)": 1}}, '
                    '"b@g": {"Communication Time Info": {"Elapse Time(ms)": 2}}, '
                    '"a@g": {"Communication Time Info": {"Elapse Time(ms)": 3}}}}}')
    tables, spilled = read_communication_spilled(path, 3)
    assert spilled == {}
    ops = tables[S.COMM_OPS]
    assert ops["rank"].to_pylist() == [3, 3]
    assert ops["elapse_ns"].to_pylist() == [3_000_000, 2_000_000]
