"""host_events (ascendprof.readers.host_events), mutation testing seed 43, read the way a run
reads a rank (engine.pipeline.read_rank), on the real AlexNet 2-rank level2 rank 0 text export
(copied, with hand-written events appended to its trace_view.json).

Checked:
- HCCL_TASKS: a small task without ``transport type`` / ``link type`` args has null
  transport and link type (not the text 'None');
- LAUNCHES: a HostToDevice flow whose "f" end points at no device task takes its stream id
  from the tid of that "f" end;
- LAUNCHES: a host tid past int64 is one advice problem naming trace_view.json;
- flows without an id are no launch; an async_task_queue flow with only its "f" end is no
  TASK_QUEUE row (and no error).
"""

from __future__ import annotations

from test_host_events_seed35 import PID, _one_problem_naming_trace_view, _with_events
from test_host_events_trace_seed34 import ns, read_all, table

from ascendprof.model import schemas as S


def test_hccl_task_without_transport_or_link_type_has_null_ones(shared_data, tmp_path):
    """An RDMA_t_Send with args {size(Byte): 64} only: transport and link type are absent,
    so both are null."""
    rank = _with_events(shared_data, tmp_path, [
        {"ph": "X", "name": "RDMA_t_Send", "pid": PID, "tid": 1, "ts": "1020.000", "dur": 1,
         "args": {"size(Byte)": 64}}])
    data = read_all(rank)
    got = [(r["start_ns"], r["size_bytes"], r["transport"], r["link_type"])
           for r in table(data, S.HCCL_TASKS) if r["task_name"] == "RDMA_t_Send"]
    assert got == [(ns("1020.000"), 64, None, None)]


def test_launch_to_no_device_task_takes_stream_from_the_f_end_tid(shared_data, tmp_path):
    """HostToDevice flow 777001: s at tid 1, 3000.000 us (no CANN call there); f at tid 7,
    3005.000 us where no device task is. Its LAUNCHES row: no task name, and stream id 7
    (the tid of the f end, where the device task would be)."""
    rank = _with_events(shared_data, tmp_path, [
        {"ph": "s", "name": "HostToDevice", "cat": "HostToDevice", "id": "777001", "pid": PID,
         "tid": 1, "ts": "3000.000"},
        {"ph": "f", "name": "HostToDevice", "cat": "HostToDevice", "id": "777001", "pid": PID,
         "tid": 7, "ts": "3005.000", "bp": "e"}])
    data = read_all(rank)
    got = [(r["host_tid"], r["flow_start_ns"], r["device_start_ns"], r["task_name"],
            r["stream_id"]) for r in table(data, S.LAUNCHES) if r["conn_id"] == "777001"]
    assert got == [(1, 3_000_000, 3_005_000, None, 7)]


def test_launch_host_tid_past_int64_names_trace_view(shared_data, tmp_path):
    """HostToDevice flow 777002 whose s end is on tid 2**64 = 18446744073709551616 (past
    int64, LAUNCHES.host_tid cannot hold it): one advice problem naming trace_view.json."""
    rank = _with_events(shared_data, tmp_path, [
        {"ph": "s", "name": "HostToDevice", "cat": "HostToDevice", "id": "777002", "pid": PID,
         "tid": 18446744073709551616, "ts": "3000.000"},
        {"ph": "f", "name": "HostToDevice", "cat": "HostToDevice", "id": "777002", "pid": PID,
         "tid": 7, "ts": "3005.000", "bp": "e"}])
    _one_problem_naming_trace_view(rank, read_all(rank))


def test_host_to_device_flow_without_id_is_no_launch(shared_data, tmp_path):
    """A HostToDevice s (tid 1, 3000.000 us) and f (tid 7, 3005.000 us) with no id: nothing
    joins them, so LAUNCHES has no row starting at 3000.000 us (and no conn id 'None')."""
    rank = _with_events(shared_data, tmp_path, [
        {"ph": "s", "name": "HostToDevice", "cat": "HostToDevice", "pid": PID,
         "tid": 1, "ts": "3000.000"},
        {"ph": "f", "name": "HostToDevice", "cat": "HostToDevice", "pid": PID,
         "tid": 7, "ts": "3005.000", "bp": "e"}])
    data = read_all(rank)
    assert not list(data.problems), data.problems.brief()
    rows = table(data, S.LAUNCHES)
    assert rows and not [r for r in rows if r["conn_id"] == "None"
                         or r["flow_start_ns"] == 3_000_000]


def test_queue_flow_with_only_its_f_end_is_no_row(shared_data, tmp_path):
    """async_task_queue flow 424243 with only its f end (at a Dequeue@aten::foo, 5010.000 us),
    no s end: no Enqueue to join, so no TASK_QUEUE row for it and no problem."""
    rank = _with_events(shared_data, tmp_path, [
        {"ph": "X", "name": "Dequeue@aten::foo", "pid": PID, "tid": 2,
         "ts": "5010.000", "dur": 3},
        {"ph": "f", "name": "Dequeue", "cat": "async_task_queue", "id": "424243", "pid": PID,
         "tid": 2, "ts": "5010.000", "bp": "e"}])
    data = read_all(rank)
    assert not list(data.problems), data.problems.brief()
    assert not [r for r in table(data, S.TASK_QUEUE) if r["queue_id"] == "424243"]
