"""Every normalised table, in one place.

Each reader (torch_npu text, MindSpore text, db export, PROF_, raw CANN, legacy MindSpore) emits
these tables with exactly these columns, so every analysis runs unchanged on any input kind.

Conventions (see ``shared/spec/formats.md``):
- absolute timestamps are ``*_ns`` int64, local wall-clock (Unix epoch) nanoseconds (spec §A, §D.6);
- durations are ``*_ns`` int64 nanoseconds;
- sizes carry their unit in the name (``*_mb`` = 10^6 bytes, as CANN uses; ``*_bytes``);
- every table has ``rank`` (int32, global rank); ``step`` (int32, null when the data has no step).

A table missing from a rank's result means the input did not have it; an empty table with the
schema means the input had it but it held no rows.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from ascendprof.model.errors import InputError

I32, I64, F64, STR = pa.int32(), pa.int64(), pa.float64(), pa.string()


def _s(*fields: tuple[str, pa.DataType], doc: str) -> pa.Schema:
    return pa.schema([pa.field(n, t) for n, t in fields], metadata={"doc": doc})


#: The nine step-breakdown metrics in step_trace_time.csv order: (column name as the profiler and
#: msprof-analyze write it, STEP_TRACE column in ns) (spec §A.1).
STEP_METRICS: tuple[tuple[str, str], ...] = (
    ("Computing", "computing_ns"),
    ("Communication(Not Overlapped)", "comm_not_overlapped_ns"),
    ("Overlapped", "overlapped_ns"),
    ("Communication", "communication_ns"),
    ("Free", "free_ns"),
    ("Stage", "stage_ns"),
    ("Bubble", "bubble_ns"),
    ("Communication(Not Overlapped and Exclude Receive)", "comm_not_overlapped_excl_receive_ns"),
    ("Preparing", "preparing_ns"),
)

# Names of the tables a reader may emit.
KERNELS = "kernels"
STEP_TRACE = "step_trace"
STEPS = "steps"
COMM_OPS = "comm_ops"
COMM_BANDWIDTH = "comm_bandwidth"
COMM_SIZE_DIST = "comm_size_dist"
COMM_LINKS = "comm_links"
TIMELINE = "timeline"
OP_STATISTIC = "op_statistic"
API_STATISTIC = "api_statistic"
MEMORY_RECORD = "memory_record"
OPERATOR_MEMORY = "operator_memory"
NPU_MODULE_MEM = "npu_module_mem"
ITERATIONS = "iterations"
STATIC_OP_MEM = "static_op_mem"
DATASET_OPS = "dataset_ops"
DATASET_QUEUE = "dataset_queue"
# Read for the advice rules only (readers/host_events.py): host-side events, HCCL small tasks with
# their sizes, and the AI Core frequency samples.
HOST_EVENTS = "host_events"
HCCL_TASKS = "hccl_tasks"
AICORE_FREQ = "aicore_freq"
# Read with the host events (readers/host_events.py) for the dispatch and idle analyses: each
# device task with the host call that launched it, and each task-queue enqueue with its dequeue.
LAUNCHES = "launches"
TASK_QUEUE = "task_queue"

#: Prefix of the extra PMU metric columns a kernels table may carry after its fixed columns
#: (``pmu:aic_mac_ratio`` …, float64), named as in op_summary / kernel_details (spec §A.2, §C.1).
PMU_PREFIX = "pmu:"

SCHEMAS: dict[str, pa.Schema] = {
    KERNELS: _s(
        ("rank", I32), ("step", I32), ("device_id", I32),
        ("model_id", I64), ("task_id", I64), ("stream_id", I64), ("context_id", I64),
        ("name", STR), ("op_type", STR), ("op_state", STR), ("accelerator_core", STR),
        ("start_ns", I64), ("dur_ns", I64), ("wait_ns", I64),
        ("block_num", I64), ("mix_block_num", I64), ("hf32_eligible", STR),
        ("input_shapes", STR), ("input_dtypes", STR), ("input_formats", STR),
        ("output_shapes", STR), ("output_dtypes", STR), ("output_formats", STR),
        doc="One device task of a compute op (kernel_details.csv §A.2, op_summary §C.1, "
            "TASK+COMPUTE_TASK_INFO §B.1, raw HWTS/STARS §D.3-4). Communication big ops that "
            "kernel_details lists with Accelerator Core COMMUNICATION/HCCL are kept as rows too. "
            "Extra float64 PMU columns named 'pmu:<op_summary column>' may follow.",
    ),
    STEP_TRACE: _s(
        ("rank", I32), ("step", I32), ("device_id", I32),
        ("computing_ns", I64), ("comm_not_overlapped_ns", I64), ("overlapped_ns", I64),
        ("communication_ns", I64), ("free_ns", I64), ("stage_ns", I64), ("bubble_ns", I64),
        ("comm_not_overlapped_excl_receive_ns", I64), ("preparing_ns", I64),
        doc="The profiler's own per-step breakdown as reported (step_trace_time.csv §A.1, "
            "analysis.db StepTraceTime §B.3, legacy step_trace_raw). Values rounded to whole ns.",
    ),
    STEPS: _s(
        ("rank", I32), ("step", I32), ("start_ns", I64), ("end_ns", I64), ("origin", STR),
        doc="Step windows [start_ns, end_ns] on the device timeline (§7.1.a). origin names where "
            "the window came from (trace_view ProfilerStep#, db STEP_TIME, kernel Step Id span).",
    ),
    COMM_OPS: _s(
        ("rank", I32), ("step", I32), ("step_key", STR), ("kind", STR),
        ("op_name", STR), ("group", STR), ("start_ns", I64),
        ("elapse_ns", I64), ("transit_ns", I64), ("wait_ns", I64), ("sync_ns", I64),
        ("idle_ns", I64), ("wait_ratio", F64), ("sync_ratio", F64), ("opinfo_json", STR),
        doc="One communication big op on one rank: 'Communication Time Info' of "
            "communication.json (§A.5, §7.2), CommAnalyzerTime (§B.3), COMMUNICATION_OP (§B.1). "
            "kind is 'collective' or 'p2p'; step_key is the JSON key ('step13' or 'step'). "
            "opinfo_json is the op's whole OPINFO object as communication.json has it (compact "
            "JSON; null for db / PROF_ / raw input), copied into cluster_communication.json. "
            "The profiler's per-step 'Total Op Info' entries are not rows (recomputed).",
    ),
    COMM_BANDWIDTH: _s(
        ("rank", I32), ("step", I32), ("step_key", STR), ("kind", STR),
        ("op_name", STR), ("group", STR), ("transport", STR),
        ("size_mb", F64), ("transit_ns", I64), ("bandwidth_gbps", F64),
        ("large_packet_ratio", F64),
        doc="'Communication Bandwidth Info' per op and transport type (RDMA/HCCS/PCIE/SDMA/SIO) "
            "(§A.5, CommAnalyzerBandwidth §B.3). size_mb is 10^6 bytes.",
    ),
    COMM_SIZE_DIST: _s(
        ("rank", I32), ("step", I32), ("step_key", STR), ("kind", STR),
        ("op_name", STR), ("group", STR), ("transport", STR),
        ("packet_size_mb", STR), ("count", I64), ("dur_ns", I64),
        doc="'Size Distribution' entries per op and transport: packet size key exactly as the "
            "profiler wrote it (MB as text), packet count and total duration (§A.5).",
    ),
    COMM_LINKS: _s(
        ("rank", I32), ("step", I32), ("step_key", STR), ("kind", STR),
        ("link_key", STR), ("op_name", STR), ("group", STR),
        ("src_rank", I32), ("dst_rank", I32), ("transport", STR),
        ("size_mb", F64), ("transit_ns", I64), ("bandwidth_gbps", F64),
        ("large_packet_ratio", F64),
        doc="One src->dst link of communication_matrix.json (§A.6, §7.3; CommAnalyzerMatrix "
            "§B.3). link_key is the JSON key ('allreduce-top1@<group>'); src/dst ranks are the "
            "group-local ranks as written by the profiler.",
    ),
    TIMELINE: _s(
        ("rank", I32), ("step", I32), ("track", STR), ("process", STR), ("thread", STR),
        ("name", STR), ("start_ns", I64), ("dur_ns", I64), ("task_type", STR),
        ("category", STR),
        doc="Complete ('X') events of the tracks the analyses use (trace_view.json §A.7, "
            "msprof_*.json §C.8, OVERLAP_ANALYSIS §B.1). track is 'overlap' (thread Computing / "
            "Communication / Communication(Not Overlapped) / Free), 'communication' (HCCL big ops "
            "and planes), 'hardware' (Ascend Hardware tasks) or 'step' (ProfilerStep#N). "
            "task_type: args 'Task Type' of hardware tasks / 'task type' of HCCL small tasks "
            "(AI_CORE, MIX_AIV, SDMA, Notify Wait, ...), null when the input has none. "
            "category: what a hardware task is linked to, when the input says so: 'compute' "
            "(it has compute-op info: db COMPUTE_TASK_INFO), 'communication' (it belongs to an "
            "HCCL op: same connection id as a big op, in COMMUNICATION_TASK_INFO, or on a stream "
            "of HCCL tasks), 'other' (db: neither); null when the input has no such link. The "
            "step breakdown classifies tasks by these links before it looks at task_type (a "
            "label that changed between releases).",
    ),
    OP_STATISTIC: _s(
        ("rank", I32), ("device_id", I32), ("op_type", STR), ("core_type", STR),
        ("count", I64), ("total_ns", I64), ("min_ns", I64), ("avg_ns", I64), ("max_ns", I64),
        ("ratio_pct", F64),
        doc="The profiler's op_statistic.csv as reported (§A.3).",
    ),
    API_STATISTIC: _s(
        ("rank", I32), ("level", STR), ("api_name", STR), ("total_ns", I64), ("count", I64),
        ("avg_ns", I64), ("min_ns", I64), ("max_ns", I64), ("variance", F64),
        doc="api_statistic.csv (§A.4). variance is in us^2 as the profiler writes it.",
    ),
    MEMORY_RECORD: _s(
        ("rank", I32), ("component", STR), ("ts_ns", I64),
        ("total_allocated_mb", F64), ("total_reserved_mb", F64), ("total_active_mb", F64),
        ("stream_ptr", STR), ("device_type", STR),
        doc="memory_record.csv (§A.8). MB here is 2^20 bytes, as torch_npu writes it.",
    ),
    OPERATOR_MEMORY: _s(
        ("rank", I32), ("name", STR), ("size_kb", F64),
        ("alloc_ns", I64), ("release_ns", I64), ("dur_ns", I64),
        ("alloc_total_allocated_mb", F64), ("alloc_total_reserved_mb", F64),
        ("release_total_allocated_mb", F64), ("release_total_reserved_mb", F64),
        ("device_type", STR),
        doc="operator_memory.csv (§A.8). KB/MB binary (2^10 / 2^20 bytes).",
    ),
    NPU_MODULE_MEM: _s(
        ("rank", I32), ("device_id", I32), ("component", STR), ("ts_ns", I64),
        ("total_reserved_mb", F64), ("device", STR),
        doc="npu_module_mem.csv (§A.9). MB binary.",
    ),
    STATIC_OP_MEM: _s(
        ("rank", I32), ("device_id", I32), ("name", STR), ("model_name", STR),
        ("graph_id", STR), ("node_start", I64), ("node_end", I64), ("size_kb", F64),
        doc="static_op_mem.csv (static graph op memory; columns Device_id, Op Name, Model Name, "
            "Graph ID, Node Index Start, Node Index End, Size(KB)): an op's memory and its "
            "lifetime in node indices. KB binary.",
    ),
    DATASET_OPS: _s(
        ("rank", I32), ("op_id", I64), ("op_type", STR), ("num_workers", I64),
        ("parent_id", I64), ("children", STR), ("queue_length", I64),
        ("queue_avg_size", F64), ("queue_usage_pct", F64), ("queue_empty_pct", F64),
        ("queue_samples", I64), ("avg_cpu_pct", F64), ("source", STR),
        doc="One MindSpore dataset (minddata) pipeline operator: its output queue (capacity, "
            "average size, usage = average size / capacity in %, % of samples empty), workers, "
            "parent and children op ids (children comma-separated) and the mean CPU % of its "
            "workers (user + sys). From minddata_pipeline_raw_{rank}.csv, "
            "pipeline_profiling_{rank}.json, minddata_pipeline_summary_{rank}.json/.csv and "
            "minddata_cpu_utilization_{rank}.json (seeds 000, 004).",
    ),
    DATASET_QUEUE: _s(
        ("rank", I32), ("queue", STR), ("step", I64), ("size", I64), ("capacity", I64),
        ("value_ms", F64), ("kind", STR), ("start_ns", I64), ("end_ns", I64),
        doc="Per batch record of MindSpore data preparation: queue 'host' (device_queue_profiling"
            "_{rank}.txt / dataset_iterator_profiling_{rank}.txt: the host-side connector feeding "
            "the device, kind 'size' with size/capacity, or kind 'pipeline_time' / 'push_time' / "
            "'batch_time' with value_ms) and queue 'device' (minddata_aicpu_{rank}.txt: the device "
            "queue size when GetNext dequeued, start/end of the GetNext in the file's clock "
            "(us, kept as ns)). step is the batch number the profiler wrote.",
    ),
    ITERATIONS: _s(
        ("rank", I32), ("step", I32), ("start_ns", I64), ("end_ns", I64),
        ("iteration_interval_ns", I64), ("fp_bp_ns", I64), ("tail_ns", I64),
        doc="Graph-mode iteration trace (legacy MindSpore step_trace_raw_*_detail_time.csv, "
            "CANN step_trace_*.csv §C.5): data-wait interval, forward+backward, tail per step.",
    ),
    HOST_EVENTS: _s(
        ("rank", I32), ("step", I32), ("source", STR), ("name", STR), ("tid", I64),
        ("start_ns", I64), ("dur_ns", I64),
        doc="Host-side events the advice rules look at (trace_view.json §A.7 framework and CANN "
            "events; db PYTORCH_API / CANN_API / GC_RECORD §B.1). source is 'framework' "
            "(ProfilerStep#N, dataloader, SyncBatchNorm, Optimizer.step#, host-synchronising "
            "aten ops), 'cann' (AscendCL@* and Node@launch, named as trace_view writes them) or "
            "'gc' (Python garbage collection). tid is the host thread.",
    ),
    HCCL_TASKS: _s(
        ("rank", I32), ("step", I32), ("op_name", STR), ("task_name", STR),
        ("start_ns", I64), ("dur_ns", I64), ("size_bytes", I64), ("transport", STR),
        ("link_type", STR),
        doc="HCCL small tasks that move data (Memcpy, Reduce_Inline, RDMA*) with their size "
            "(trace_view.json HCCL/Communication process args 'size(Byte)', 'transport type', "
            "'link type' §A.7; db COMMUNICATION_TASK_INFO + TASK §B.1). op_name is the big op "
            "whose window holds the task (null when none does).",
    ),
    AICORE_FREQ: _s(
        ("rank", I32), ("device_id", I32), ("ts_ns", I64), ("freq_mhz", F64),
        doc="AI Core frequency samples: trace_view.json counter 'AI Core Freq' (args MHz), db "
            "AICORE_FREQ (§B.1). A sample holds until the next one.",
    ),
    LAUNCHES: _s(
        ("rank", I32), ("step", I32), ("conn_id", STR), ("host_name", STR), ("host_tid", I64),
        ("host_start_ns", I64), ("host_dur_ns", I64), ("flow_start_ns", I64),
        ("device_start_ns", I64), ("device_dur_ns", I64), ("task_name", STR),
        ("task_type", STR), ("stream_id", I64),
        doc="One device task with the host call that launched it: trace_view.json "
            "'HostToDevice' flows (s on a CANN thread, f at the task start §A.7; host_name the "
            "Node@ / AscendCL@ event holding the flow start, flow_start_ns the flow's own "
            "start) or the db's CANN_API and TASK rows of one connectionId (§B.1; "
            "flow_start_ns = the CANN_API start). step: null (the analyses place tasks in "
            "the STEPS windows).",
    ),
    TASK_QUEUE: _s(
        ("rank", I32), ("step", I32), ("queue_id", STR), ("enqueue_ns", I64),
        ("enqueue_dur_ns", I64), ("dequeue_ns", I64), ("dequeue_dur_ns", I64),
        ("op_name", STR),
        doc="One entry of torch_npu's task queue: the Enqueue on the framework thread and its "
            "Dequeue on the dispatch thread, linked by trace_view.json 'async_task_queue' "
            "flows (§A.7) or PYTORCH_API queue rows of one connectionId (§B.1). op_name: what "
            "the Dequeue ran ('Dequeue@<op>').",
    ),
}


def of_rank(table: pa.Table | None, rank: int) -> pa.Table | None:
    """The rows of ``rank`` in ``table`` (any schema with a ``rank`` column), or None when there
    are none. A table with a null rank, or without the column, is taken as the rank's whole (the
    readers fill it per rank); the filter runs only when other ranks are present."""
    if table is None or table.num_rows == 0:
        return None
    if "rank" in table.column_names and table["rank"].null_count == 0:
        mm = pc.min_max(table["rank"]).as_py()
        if mm["min"] != rank or mm["max"] != rank:
            table = table.filter(pc.equal(table["rank"], rank))
    return table if table.num_rows else None


def of_steps(table: pa.Table, steps) -> pa.Table:
    """The rows of ``table`` (a ``step`` column) whose step is one of ``steps``; ``None`` among
    them takes the rows without a step. For the few steps an analysis reports out of a table
    that may hold 10^6 (one Python object per row would be ~1 GB)."""
    st = table.column("step")
    keep = pc.is_in(st, value_set=pa.array(sorted(s for s in steps if s is not None), st.type))
    if None in steps:
        keep = pc.or_kleene(keep, pc.is_null(st))
    return table.filter(pc.fill_null(keep, False))


def pair_codes(table: pa.Table):
    """(rank, step) of each row of ``table`` (int32 ``rank`` and ``step`` columns, as STEP_TRACE)
    as one int64 numpy array, equal exactly when both are (a missing step equals a missing
    step): for matching rows of two tables of 10^6 steps without a Python tuple per row."""
    step = pc.fill_null(table.column("step").cast(pa.int64()), -(1 << 31) - 1)
    return (table.column("rank").cast(pa.int64()).to_numpy() << 33) + step.to_numpy()


def empty(name: str) -> pa.Table:
    """An empty table with the schema of ``name``."""
    return SCHEMAS[name].empty_table()


def conform(name: str, table: pa.Table) -> pa.Table:
    """Return ``table`` with exactly the columns of schema ``name`` in order, cast to its types.

    Missing columns become all-null; for :data:`KERNELS`, extra columns whose name starts with
    :data:`PMU_PREFIX` are kept (cast to float64) after the fixed ones; any other extra column is
    dropped. Raises ``pyarrow.ArrowInvalid`` when a value cannot be cast (a reader bug, not bad input:
    readers convert text first).
    """
    schema = SCHEMAS[name]
    n = table.num_rows
    names = table.column_names  # builds a new list on every access: once per call
    present = set(names)
    cols, fields = [], []
    for f in schema:
        if f.name in present:
            col = table.column(f.name)
            cols.append(col if col.type == f.type else col.cast(f.type))
        else:
            cols.append(pa.nulls(n, f.type))
        fields.append(f)
    if name == KERNELS:
        for c in names:
            if c.startswith(PMU_PREFIX):
                col = table.column(c)
                cols.append(col if col.type == F64 else col.cast(F64))
                fields.append(pa.field(c, F64))
    return pa.Table.from_arrays(cols, schema=pa.schema(fields, metadata=schema.metadata))


def from_lists(name: str, cols: dict, path=None) -> pa.Table:
    """Table of schema ``name`` from Python lists, as the JSON and text parsers collect them.

    ``cols`` maps column names to equally long lists; absent columns become all-null, columns not
    in the schema are dropped (except ``pmu:`` float columns of KERNELS). Text columns take
    ``str()`` of any non-null value (a JSON number where a name was expected is still a name).
    Raises :class:`~ascendprof.model.errors.InputError` naming ``path`` and the column when a value does
    not fit a numeric column (text, a fraction in an integer column, beyond int64), never a
    pyarrow error.
    """
    schema = SCHEMAS[name]
    n = max((len(v) for v in cols.values()), default=0)
    fields = list(schema)
    if name == KERNELS:
        fields += [pa.field(c, F64) for c in cols if str(c).startswith(PMU_PREFIX)]
    arrays = []
    for f in fields:
        vals = cols.get(f.name)
        if vals is None:
            arrays.append(pa.nulls(n, f.type))
            continue
        vals = list(vals)
        if pa.types.is_string(f.type):
            vals = [v if v is None or isinstance(v, str) else str(v) for v in vals]
        try:
            arrays.append(pa.array(vals, f.type))
        except (pa.ArrowException, OverflowError, TypeError, ValueError):
            bad = next((v for v in vals if not _fits(v, f.type)), None)
            raise InputError(path or "<data>", f"column {f.name!r}: {bad!r} is not a valid "
                                               f"{f.type} value") from None
    return pa.Table.from_arrays(arrays, schema=pa.schema(fields, metadata=schema.metadata))


def _fits(v, typ: pa.DataType) -> bool:
    try:
        pa.array([v], typ)
        return True
    except (pa.ArrowException, OverflowError, TypeError, ValueError):
        return False
