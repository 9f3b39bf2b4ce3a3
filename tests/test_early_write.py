"""cluster_communication.json written by a forked child process while the parent derives the
verdicts (report.files.EarlyWrite).

Expected values: msprof-analyze 26.2.0's file for the shipped Qwen3 sample (tests/reference) and
the same analysis written in-process, byte for byte. A child that fails, and a run cancelled
while the child writes, must leave the output exactly as if no child had been used.
"""

from __future__ import annotations

import json
import os
import sys
import time
from types import SimpleNamespace

import pytest

from ascendprof.scan import load_sources
from ascendprof.engine import pipeline
from ascendprof.model.problems import Problems
from ascendprof.report import files
from ascendprof.report.files import COMMUNICATION_FILE, EarlyWrite, write_outputs
from ascendprof.engine.run import run_analyse
from ascendprof.report.summary import build_summary
from test_combine_scaling import REFERENCE, _close

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="the child process is used on Linux only")


def _gathered(root):
    problems = Problems()
    sources = load_sources(root, problems)
    return pipeline.gather(str(root), sources, pipeline.run_ranks(sources, workers=1), problems)


def _in_process(ca, out):
    write_outputs(ca, out, build_summary(ca))
    return (out / COMMUNICATION_FILE).read_bytes()


def test_forked_write_is_the_in_process_file_and_msprof_analyzes(qwen3, tmp_path):
    ca = _gathered(qwen3)
    early = EarlyWrite(ca, tmp_path / "early", min_bytes=0)
    assert early.forked
    pipeline.conclude(ca)
    written = write_outputs(ca, tmp_path / "early", build_summary(ca), early)
    assert not early.forked
    forked = (tmp_path / "early" / COMMUNICATION_FILE).read_bytes()
    assert forked == _in_process(ca, tmp_path / "plain")
    # its place in the list of written files is the one it has when written in-process
    assert [p.name for p in written].index(COMMUNICATION_FILE) == 1
    ref = json.loads((REFERENCE / "qwen3-4rank-pp2dp2" / COMMUNICATION_FILE).read_text())
    assert _close(json.loads(forked), ref, rel=1e-3) == []


def test_analyse_writes_it_through_the_spill(qwen3, tmp_path, monkeypatch):
    """run_analyse parks the ranks' chunks in a spill file, which the child reads."""
    monkeypatch.setattr(files, "EARLY_MIN_BYTES", 0)
    assert run_analyse(qwen3, tmp_path / "run", workers=2, cache=False, progress=False,
                       fmt="json") == 0
    assert (tmp_path / "run" / COMMUNICATION_FILE).read_bytes() == _in_process(
        pipeline.conclude(_gathered(qwen3)), tmp_path / "plain")


def test_only_a_large_file_is_written_by_a_child(qwen3, tmp_path):
    ca = _gathered(qwen3)
    size = ca.communication.opinfo_bytes
    assert not EarlyWrite(ca, tmp_path / "a").forked  # the sample's file is small
    assert not EarlyWrite(ca, tmp_path / "b", min_bytes=size + 1).forked
    early = EarlyWrite(ca, tmp_path / "c", min_bytes=size)
    assert early.forked
    early.finish()
    # the OPINFOs are most of the file: the rest is keys, totals and punctuation
    assert 0.5 < size / (tmp_path / "c" / COMMUNICATION_FILE).stat().st_size < 1


def test_no_child_while_other_threads_run(qwen3, tmp_path):
    import threading

    ca, stop = _gathered(qwen3), threading.Event()
    t = threading.Thread(target=stop.wait)
    t.start()
    try:
        early = EarlyWrite(ca, tmp_path / "out", min_bytes=0)
        assert not early.forked
    finally:
        stop.set()
        t.join()
    assert early.finish() == [tmp_path / "out" / COMMUNICATION_FILE]  # written in-process


def test_a_failed_child_is_written_again_in_process(qwen3, tmp_path, monkeypatch):
    parent, real = os.getpid(), files._write_communication

    def fails_in_the_child(ca, path):
        if os.getpid() != parent:
            raise OSError(28, "No space left on device")
        return real(ca, path)

    monkeypatch.setattr(files, "_write_communication", fails_in_the_child)
    ca = _gathered(qwen3)
    early = EarlyWrite(ca, tmp_path / "early", min_bytes=0)
    assert early.forked
    assert early.finish() == [tmp_path / "early" / COMMUNICATION_FILE]
    assert sorted(os.listdir(tmp_path / "early")) == [COMMUNICATION_FILE]  # no temp file left
    assert (tmp_path / "early" / COMMUNICATION_FILE).read_bytes() == _in_process(
        ca, tmp_path / "plain")


def test_elsewhere_it_is_written_in_process_at_finish(qwen3, tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "platform", "darwin")
    ca = _gathered(qwen3)
    early = EarlyWrite(ca, tmp_path / "early", min_bytes=0)
    assert not early.forked and not (tmp_path / "early").exists()
    assert early.finish() == [tmp_path / "early" / COMMUNICATION_FILE]
    assert (tmp_path / "early" / COMMUNICATION_FILE).read_bytes() == _in_process(
        ca, tmp_path / "plain")


class _SlowFile:
    """A communication mapping whose one group takes ~10 s to write."""

    def __len__(self):
        return 1

    def items_json(self):
        def pieces():
            for _ in range(200):
                time.sleep(0.05)
                yield b"{}"
        yield "group", pieces()


def test_cancel_after_the_child_finished_keeps_the_previous_file(qwen3, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / COMMUNICATION_FILE).write_bytes(b"{}")  # an earlier run's
    early = EarlyWrite(_gathered(qwen3), out, min_bytes=0)
    assert early.forked
    deadline = time.monotonic() + 120  # a bound on waiting on a loaded machine, not a timing
    while not [n for n in os.listdir(out) if n.endswith(".early")] \
            and time.monotonic() < deadline:  # the child renamed its temporary file
        time.sleep(0.02)
    early.cancel()
    assert os.listdir(out) == [COMMUNICATION_FILE]
    assert (out / COMMUNICATION_FILE).read_bytes() == b"{}"


def test_cancel_leaves_neither_the_file_nor_a_temporary(tmp_path):
    out = tmp_path / "out"
    early = EarlyWrite(SimpleNamespace(communication=_SlowFile()), out, min_bytes=0)
    assert early.forked
    deadline = time.monotonic() + 120  # a bound on waiting on a loaded machine, not a timing
    while not (out.exists() and os.listdir(out)) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert [n for n in os.listdir(out) if n.endswith(".tmp")]  # the child is writing
    early.cancel()
    assert not early.forked and os.listdir(out) == []
