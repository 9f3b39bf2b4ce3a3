"""host_events (ascendprof.readers.host_events), mutation testing seed 42, read the way a run
reads a rank (engine.pipeline.read_rank), on the real AlexNet 2-rank level2 rank 0 text export
(copied, with hand-written events appended to its trace_view.json where needed).

Checked:
- TASK_QUEUE: the op name of a Dequeue is everything after its FIRST '@'
  (``Dequeue@aten::foo@bar`` -> ``aten::foo@bar``), as the db side does;
- HCCL_TASKS: an hcom op whose end (ts + dur) is exactly the small task's start still holds
  it (the op's span is closed at both ends, like the ProfilerStep windows of HOST_EVENTS);
- a ProfilerStep#N ending past the int64 nanosecond range: the advice problem's reason says
  so in those words;
- a text source read with ``--advice summary``: ``meta["advice_not_read"]`` names what was
  not read (trace_view.json and what it holds) and how to read it.
"""

from __future__ import annotations

from _advice_data import OUT
from test_host_events_seed35 import PID, _one_problem_naming_trace_view, _with_events
from test_host_events_trace_seed34 import ALEX, ns, read_all, table

from ascendprof.model import schemas as S


def test_dequeue_op_name_is_everything_after_the_first_at(shared_data, tmp_path):
    """An Enqueue (framework thread, cat cpu_op) at 5000.000 us lasting 2 us, a
    Dequeue@aten::foo@bar (NPU side, no cat) at 5010.000 us lasting 3 us, joined by the
    async_task_queue flow 424242 (s at the Enqueue, f at the Dequeue). Its TASK_QUEUE row:
    op name 'aten::foo@bar' (the name after 'Dequeue@', split at the first '@' only)."""
    rank = _with_events(shared_data, tmp_path, [
        {"ph": "X", "name": "Enqueue", "cat": "cpu_op", "pid": PID, "tid": 1,
         "ts": "5000.000", "dur": 2},
        {"ph": "X", "name": "Dequeue@aten::foo@bar", "pid": PID, "tid": 2,
         "ts": "5010.000", "dur": 3},
        {"ph": "s", "name": "Enqueue", "cat": "async_task_queue", "id": "424242", "pid": PID,
         "tid": 1, "ts": "5000.000"},
        {"ph": "f", "name": "Dequeue", "cat": "async_task_queue", "id": "424242", "pid": PID,
         "tid": 2, "ts": "5010.000", "bp": "e"}])
    data = read_all(rank)
    got = [(r["enqueue_ns"], r["enqueue_dur_ns"], r["dequeue_ns"], r["dequeue_dur_ns"],
            r["op_name"]) for r in table(data, S.TASK_QUEUE) if r["queue_id"] == "424242"]
    assert got == [(5_000_000, 2_000, 5_010_000, 3_000, "aten::foo@bar")]


def test_hccl_task_at_the_end_of_its_op_is_held_by_it(shared_data, tmp_path):
    """hcom op A at 1000.000 us lasting 20 us ends at 1020.000 us; an RDMA task starts at
    1020.000 us: A holds it (start 1000 <= 1020 <= end 1020), so the task is named after A.
    No other op of the pid."""
    rank = _with_events(shared_data, tmp_path, [
        {"ph": "X", "name": "hcom_t_A", "pid": PID, "tid": 1, "ts": "1000.000", "dur": 20},
        {"ph": "X", "name": "RDMA_t_Send", "pid": PID, "tid": 1, "ts": "1020.000", "dur": 1,
         "args": {"size(Byte)": 64}}])
    data = read_all(rank)
    got = [(r["start_ns"], r["op_name"]) for r in table(data, S.HCCL_TASKS)
           if r["task_name"] == "RDMA_t_Send"]
    assert got == [(ns("1020.000"), "hcom_t_A")]


def test_profiler_step_past_int64_reason_says_nanosecond_range(shared_data, tmp_path):
    """ProfilerStep#99 at 9223372036854775.000 us lasting 10 us ends at
    9223372036854785000 ns > 2**63 - 1: the problem's reason names the int64 nanosecond
    range."""
    rank = _with_events(shared_data, tmp_path, [
        {"ph": "X", "name": "ProfilerStep#99", "cat": "cpu_op", "pid": PID, "tid": 1,
         "ts": "9223372036854775.000", "dur": 10}])
    reason = _one_problem_naming_trace_view(rank, read_all(rank))
    assert "a ProfilerStep window or event start is beyond the int64 nanosecond range" \
        in reason, reason


def test_summary_read_says_what_trace_view_holds_and_how_to_read_it(shared_data):
    """ReadOptions() (advice summary, no timeline) does not read trace_view.json; the meta
    says what is in it and which options read it."""
    from pathlib import Path

    from ascendprof.engine.pipeline import read_rank
    from ascendprof.model.options import ReadOptions
    from ascendprof.scan import load_sources

    rank = shared_data / ALEX
    assert (rank / OUT / "trace_view.json").is_file()
    (src,) = load_sources(Path(rank))
    data, _ = read_rank(src, ReadOptions())
    assert data.meta["advice_not_read"] == (
        "trace_view.json (host events, HCCL task sizes, AI Core frequency, launch links): "
        "read with --advice all or --timeline")
    assert S.HOST_EVENTS not in data.tables
