"""The walk: find profiling sources under a directory, at any depth, and say what each allows.

A *source* is the data of one rank from one producer:

- ``torch_npu`` / ``mindspore`` text: a ``*_ascend_pt`` / ``*_ascend_ms`` directory whose
  ``ASCEND_PROFILER_OUTPUT`` holds the text files (spec §0, §A);
- ``db``: the same directories holding only ``.db`` exports (§B);
- ``prof``: a stand-alone CANN ``PROF_*`` directory with ``mindstudio_profiler_output`` or
  per-iteration timeline JSON (§C);
- ``raw_cann``: a ``PROF_*`` / job directory with only raw host/device data (§D);
- ``legacy_mindspore``: MindSpore 1.x/2.0 output (``step_trace_raw_{rank}_detail_time.csv``,
  ``hccl_raw_{rank}.csv``, ``output_timeline_data_*`` …); one directory may hold several ranks.

Scanning reads only names and a few small metadata files, so it stays fast on large trees. It
never follows symlinked directories (no loops, no escape from the tree) and never writes
anything. Only regular files are listed (a FIFO or a link to a device is reported, never
opened); a directory that cannot be listed, a symlinked directory, a name that is not UTF-8 or a
path the system cannot open is reported in ``problems`` and costs at most its own rank.
"""

from __future__ import annotations

import csv
import io
import os
import re
from pathlib import Path

from ascendprof.model.errors import InputError, NothingAnalysable, UsageError
from ascendprof.model.numtext import int_text
from ascendprof.model.problems import Problems
from ascendprof.model.source import DB, LEGACY_MS, MS_TEXT, PROF, RAW_CANN, Source, TORCH_TEXT
from ascendprof.scan.runs import group_runs, pick
from ascendprof.sysio.ownership import CACHE_DIRNAME, LOCK, MANIFEST, STAGING_PREFIX
from ascendprof.sysio.textio import file_kind, METADATA_MAX_BYTES, open_regular, read_json

OUTPUT_DIR = "ASCEND_PROFILER_OUTPUT"
_TEXT_FILES = ("kernel_details.csv", "step_trace_time.csv", "trace_view.json",
               "communication.json", "communication_matrix.json", "op_statistic.csv")
_DB_RE = re.compile(r"^(ascend_pytorch_profiler|ascend_mindspore_profiler)(_\d+)?\.db$|^analysis\.db$")
_PROFILER_INFO_RE = re.compile(r"^profiler_info(?:_(\d+))?\.json$")
#: legacy MindSpore 1.x/2.0 files; ``rank`` is the number just before the suffix (for
#: ``ascend_cluster_analyse_{mode}_{stages}_{rank_size}_{rank}.csv`` the last one).
_LEGACY_RE = re.compile(
    r"^(?P<kind>step_trace_raw|hccl_raw|output_timeline_data|aicore_intermediate|aicpu_intermediate|"
    r"ascend_timeline_display|timeline_display|ascend_cluster_analyse_[a-z-]+_\d+_\d+|"
    r"output_op_compute_time(?:_detail)?|op_intermediate_detail|min_cycle_counter|framework_raw|"
    r"output_format_data_hwts|profiler_info|flops|flops_summary|"
    r"minddata_pipeline_raw|minddata_pipeline_summary|pipeline_profiling|minddata_aicpu|"
    r"minddata_cpu_utilization|device_queue_profiling|dataset_iterator_profiling|"
    r"memory_usage_summary)"
    r"_(?P<rank>\d+)(?:_[a-z_]+)?\.(?:csv|txt|json)$")
#: legacy files that alone make a rank worth reading (the others only describe it)
_LEGACY_PRIMARY = ("step_trace_raw", "hccl_raw", "output_timeline_data", "aicore_intermediate",
                   "ascend_timeline_display", "timeline_display", "ascend_cluster_analyse")
#: raw CANN / legacy raw job files (spec §D.1); device-side ones carry the timing
_RAW_HINT_RE = re.compile(r"(^|\.)(hwts\.(log\.)?data|stars_soc\.data|training_trace|ts_track\.data|"
                          r"api_event\.data|compact\.|additional\.|Framework\.host)")
#: device task logs, the part of raw data ascendprof decodes (training_trace / ts_track step
#: markers alone are not decoded)
_RAW_DEVICE_RE = re.compile(r"^(hwts\.(log\.)?data|stars_soc\.data)")

#: analyses and the files that allow them (any one suffices)
ANALYSES = ("step_breakdown", "cluster_step_trace", "communication", "communication_matrix",
            "op_statistics", "verdicts")


def scan(root: Path, problems: Problems | None = None) -> list[Source]:
    """Every source under ``root`` (a directory, or itself a source), in path order.

    Raises :class:`UsageError` when ``root`` does not exist or is not a directory. Records a
    warning in ``problems`` for every rank taken from a fallback. Duplicates are kept here; see
    :func:`one_per_rank` for the set an analysis uses.
    """
    root = Path(root)
    problems = problems if problems is not None else Problems()
    if not root.exists():
        raise UsageError(f"{root}: no such file or directory")
    if not root.is_dir():
        raise UsageError(f"{root}: not a directory")
    found: list[Source] = []
    for dirpath, dirnames, filenames in _walk(root, problems):
        name = os.path.basename(dirpath)
        if name.endswith("_ascend_pt") or name.endswith("_ascend_ms"):
            src = _framework_source(Path(dirpath), name, problems)
            if src:
                found.append(src)
            dirnames[:] = []  # its PROF_ and FRAMEWORK belong to it
            continue
        if name.startswith("PROF_"):
            src = _prof_source(Path(dirpath), problems)
            if src:
                found.append(src)
            dirnames[:] = []
            continue
        legacy = _legacy_sources(Path(dirpath), filenames, problems)
        if legacy:
            found.extend(legacy)
            continue
        if any(_RAW_HINT_RE.search(f) for f in filenames) and not any(
                os.path.basename(s.path) == name for s in found):
            src = _raw_job_source(Path(dirpath), filenames, problems)
            if src:
                found.append(src)
    for src in found:  # analysed as any other; its paths are shown with \x escapes
        if not _is_utf8(os.path.relpath(src.path, root)):
            problems.warn(src.path, "directory name is not valid UTF-8; paths are shown with "
                                    "\\x escapes")
    return found


#: hidden folders ascendprof makes inside an output directory (staging, cache)
OURS_PREFIXES = (STAGING_PREFIX, CACHE_DIRNAME)


def _is_our_output(dirpath: str, filenames) -> bool:
    """An output directory of ``ascendprof analyse``: it holds ascendprof's manifest or lock."""
    return MANIFEST in filenames or LOCK in filenames


#: the largest rank or device number taken from a name (ranks are int32 in every table)
RANK_LIMIT = 2**31


def _looks_like_source(name: str) -> bool:
    return name.endswith(("_ascend_pt", "_ascend_ms")) or name.startswith("PROF_")


def _walk(root: Path, problems: Problems | None = None):
    """os.walk of ``root`` (sorted, each directory once); directories that cannot be listed
    and symlinked directories (not followed) are recorded in ``problems``."""
    seen = set()

    def unreadable(e: OSError):
        _record_unlistable(problems, e)

    for dirpath, dirnames, filenames in _walk_iter(str(root), unreadable):
        try:
            st = os.stat(dirpath)
        except OSError as e:
            unreadable(e)
            dirnames[:] = []
            continue
        key = (st.st_dev, st.st_ino)
        if key in seen:
            dirnames[:] = []
            continue
        seen.add(key)
        if dirpath != str(root) and _is_our_output(dirpath, filenames):
            dirnames[:] = []  # ascendprof's own output (e.g. `analyse .` writing into the job)
            continue
        dirnames[:] = [d for d in dirnames if not d.startswith(OURS_PREFIXES)]
        dirnames.sort()
        if problems is not None:
            for d in dirnames:
                if os.path.islink(os.path.join(dirpath, d)):
                    _record_symlinked_dir(problems, Path(dirpath) / d)
        yield dirpath, dirnames, sorted(filenames)


def _walk_iter(top: str, onerror):
    """``os.walk(top, onerror=onerror, followlinks=False)``, top-down, without recursion: any
    depth is walked (Python 3.11's os.walk recurses and a chain of ~1,000 folders raised
    RecursionError). The caller may prune or reorder the yielded ``dirnames`` in place;
    symlinked directories are listed in ``dirnames`` but never entered."""
    stack = [top]
    while stack:
        d = stack.pop()
        try:
            with os.scandir(d) as it:
                entries = list(it)
        except OSError as e:
            onerror(e)
            continue
        dirnames, filenames, links = [], [], set()
        for e in entries:
            try:
                is_dir = e.is_dir()
            except OSError:
                is_dir = False
            if is_dir:
                dirnames.append(e.name)
                try:
                    if e.is_symlink():
                        links.add(e.name)
                except OSError:
                    pass
            else:
                filenames.append(e.name)
        yield d, dirnames, filenames
        stack.extend(os.path.join(d, n) for n in reversed(dirnames) if n not in links)


def _record_unlistable(problems: Problems | None, e: OSError) -> None:
    if problems is not None:
        path = e.filename or "?"
        problems.add(path, f"cannot list this directory ({e.strerror or e}); its data is not "
                           f"read", affects=("all",) if _looks_like_source(
                               os.path.basename(str(path))) else ())


def _record_symlinked_dir(problems: Problems | None, path: Path) -> None:
    """A symlinked directory is never followed (it may loop or lead out of the tree): skipped
    when its name is a rank's, a warning otherwise."""
    if problems is None:
        return
    rank_like = _looks_like_source(path.name)
    problems.add(path, "symbolic link to a directory, not followed (links may loop or lead "
                       "outside the tree); analyse its target directly or copy it here",
                 severity="skipped" if rank_like else "warning",
                 affects=("all",) if rank_like else ())


def _list_files(base: Path, max_depth: int = 4, problems: Problems | None = None) -> list[str]:
    """Regular files under ``base`` (relative paths, files of a directory before its
    sub-directories, each level sorted), ``max_depth`` levels down. Anything else is recorded
    in ``problems`` and left out: FIFOs, devices and links to them, broken links, symlinked
    directories, names that are not UTF-8, directories that cannot be listed."""
    out: list[str] = []

    def visit(d: str, rel: str, depth: int) -> None:
        try:
            with os.scandir(d) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError as e:
            _record_unlistable(problems, e)
            return
        subdirs = []
        for e in entries:
            r = e.name if not rel else os.path.join(rel, e.name)
            try:
                if not _is_utf8(e.name):
                    _skip(problems, e.path, "name is not valid UTF-8 (shown with \\x escapes); "
                                            "not read - rename it")
                elif e.is_dir(follow_symlinks=False):
                    subdirs.append((e.path, r))
                elif e.is_file():  # follows a symlink: a link to a regular file is read
                    out.append(r)
                elif e.is_dir():
                    _record_symlinked_dir(problems, Path(e.path))
                else:
                    _skip(problems, e.path, _not_regular(e.path))
            except OSError as err:  # e.g. a path too long for the system
                _skip(problems, e.path, f"cannot read ({err.strerror or err})")
        if depth < max_depth:
            for path, r in subdirs:
                visit(path, r, depth + 1)

    visit(str(base), "", 0)
    return out


def _skip(problems: Problems | None, path, reason: str) -> None:
    if problems is not None:
        problems.add(path, reason)


def _not_regular(path: str) -> str:
    try:
        kind = file_kind(os.stat(path).st_mode)
    except OSError as e:
        return f"cannot read ({e.strerror or e}); not read"
    return f"not a regular file ({kind}); not read"


def _is_utf8(name: str) -> bool:
    """False for a name os.fsdecode could only decode with surrogate escapes."""
    try:
        name.encode("utf-8")
        return True
    except UnicodeEncodeError:
        return False


def _load_json_quiet(path: Path, problems: Problems) -> dict | None:
    """A metadata JSON object, or None (problem recorded) when unreadable or not an object."""
    try:
        obj = read_json(path, METADATA_MAX_BYTES)
    except InputError as e:
        problems.add_error(e, affects=("metadata",))
        return None
    if not isinstance(obj, dict):
        problems.add(path, "not a JSON object", affects=("metadata",))
        return None
    return obj


def _obj(v) -> dict:
    return v if isinstance(v, dict) else {}


#: ``{worker_name}_{timestamp}_ascend_pt``; worker_name defaults to ``{hostname}_{pid}``
_WORKER_DIR_RE = re.compile(r"^(?P<host>.+?)_(?P<pid>\d+)_(?P<ts>\d{14,17})_ascend_(pt|ms)$")


def _epoch_ns(v) -> int | None:
    """A collection time as ns since the epoch: torch_npu writes ns, CANN end_info µs."""
    v = int_text(v) if isinstance(v, str) else v
    if not isinstance(v, int) or isinstance(v, bool) or v <= 0:
        return None
    return v * 1000 if v < 10**17 else v


def _rank_value(v) -> int | None:
    """A rank id from metadata (int or decimal text) when it is a plausible int32 >= 0."""
    if isinstance(v, str):
        v = int_text(v)
    if isinstance(v, int) and not isinstance(v, bool) and 0 <= v < RANK_LIMIT:
        return v
    return None


def _text(v) -> str | None:
    return None if v is None or isinstance(v, (dict, list)) else str(v)


def _listdir(d: Path, problems: Problems) -> list[str] | None:
    """Sorted names in ``d``; None (recorded) when it cannot be listed."""
    try:
        return sorted(os.listdir(d))
    except OSError as e:
        problems.add(d, f"cannot list this directory ({e.strerror or e}); its data is not read",
                     affects=("all",))
        return None


def _framework_source(d: Path, name: str, problems: Problems) -> Source | None:
    top = _listdir(d, problems)
    if top is None:
        return None
    out_dir = d / OUTPUT_DIR
    outs = (_listdir(out_dir, problems) or []) if out_dir.is_dir() else []
    has_text = any(f in outs for f in _TEXT_FILES)
    has_db = any(_DB_RE.match(f) for f in outs)
    is_ms = name.endswith("_ascend_ms")
    if has_text:
        kind = MS_TEXT if is_ms else TORCH_TEXT
    elif has_db:
        kind = DB
    else:
        prof_dirs = [f for f in top if f.startswith("PROF_") and (d / f).is_dir()]
        if not prof_dirs:
            problems.add(d, f"no {OUTPUT_DIR} data and no PROF_ directory; not analysable",
                         severity="skipped", affects=("all",))
            return None
        kind = PROF
    files = _list_files(d, max_depth=2 if kind != PROF else 4, problems=problems)
    src = Source(path=str(d), kind=kind, rank=None, files=files, mtime=_mtime(d),
                 framework="mindspore" if is_ms else "torch_npu")
    m = _WORKER_DIR_RE.match(name)
    if m:
        src.host = m.group("host")
    if kind in (MS_TEXT, TORCH_TEXT) and has_db:
        src.also.append(DB)
    info = None
    for f in top:
        m = _PROFILER_INFO_RE.match(f)
        if m:
            info = _load_json_quiet(d / f, problems) or {}
            if m.group(1) is not None and _rank_value(m.group(1)) is not None:
                src.rank, src.rank_origin = int(m.group(1)), f
                inside = _rank_value(info.get("rank_id"))
                if inside is not None and inside != src.rank:  # one of them is wrong: say so
                    problems.warn(d / f, f"rank_id {inside} inside contradicts the file name "
                                         f"(rank {src.rank}); rank {src.rank} of the file name "
                                         f"is used")
            elif _rank_value(info.get("rank_id")) is not None:
                src.rank, src.rank_origin = _rank_value(info["rank_id"]), f"{f} rank_id"
            break
    if info:
        src.framework_version = _text(info.get("torch_npu_version")
                                      or info.get("mindspore_version") or info.get("ms_version"))
        src.cann_version = _text(info.get("cann_version"))
        exp = _obj(_obj(info.get("config")).get("experimental_config"))
        src.profiler_level = _text(exp.get("_profiler_level") or exp.get("profiler_level")
                                   or info.get("profiler_level"))
        src.end_ns = _epoch_ns(_obj(info.get("end_info")).get("collectionTimeEnd"))
    if src.rank is None:
        meta_path = d / "profiler_metadata.json"
        meta = _load_json_quiet(meta_path, problems) if meta_path.is_file() else None
        r = _rank_value(_obj(_obj(meta).get("distributed_args")).get("rank"))
        if r is not None:
            src.rank, src.rank_origin = r, "profiler_metadata.json distributed_args.rank"
            problems.warn(d, "no profiler_info_{rank}.json; rank taken from profiler_metadata.json")
    if src.rank is None and not _rank_from_name(src, name, problems):
        return None
    _fill_from_outputs(src, out_dir, outs, problems)
    src.analyses = allowed_analyses(src)
    return src


def _rank_from_name(src: Source, name: str, problems: Problems) -> bool:
    """Take the rank from the first number in ``name`` (warning). False (the source is skipped,
    recorded) when that number is no possible rank."""
    nums = re.findall(r"\d+", name)
    if nums:
        if _rank_value(nums[0]) is None:
            shown = nums[0] if len(nums[0]) <= 24 else nums[0][:20] + "..."
            problems.add(src.path, f"no rank in the profiler's metadata and the number {shown} in "
                                   f"the directory name is no rank (0 to {RANK_LIMIT - 1}); "
                                   f"not analysed", affects=("all",))
            return False
        src.rank, src.rank_origin = int(nums[0]), "directory name"
        problems.warn(src.path, f"no rank in the profiler's metadata; rank {src.rank} taken from "
                                f"the directory name")
    return True


def _fill_from_outputs(src: Source, out_dir: Path, outs: list[str], problems: Problems) -> None:
    """Device id and steps from the small step_trace_time.csv (first column Device_id)."""
    if "step_trace_time.csv" not in outs:
        return
    device, steps = None, []
    try:  # a row at a time: a file of 10^6 steps is ~120 MB of text, ~1 GB as rows
        with open_regular(out_dir / "step_trace_time.csv") as f:
            rows = csv.reader(io.TextIOWrapper(f, encoding="utf-8-sig", newline=""))
            head = [h.strip() for h in next(rows, [])]
            at = {h: i for i, h in enumerate(head)}  # a repeated name: its last column
            dev_at, step_at = at.get("Device_id"), at.get("Step")
            for r in rows:
                if device is None and dev_at is not None and dev_at < len(r):
                    device = _rank_value(r[dev_at] or "")
                st = _rank_value(r[step_at] or "") if step_at is not None and step_at < len(r) \
                    else None
                if st is not None:
                    steps.append(st)
    except (InputError, OSError, UnicodeDecodeError, csv.Error):
        return  # the reader reports it
    if src.device_id is None:
        src.device_id = device
    src.steps.extend(steps)


def _prof_source(d: Path, problems: Problems) -> Source | None:
    """A stand-alone ``PROF_*`` directory (spec §0, §C, §D).

    Kind ``prof`` when it holds exported output (``mindstudio_profiler_output/``, ``analyze/``,
    or the per-iteration ``device_*/timeline/*.json`` of older CANN); kind ``raw_cann`` when it
    holds only ``host/data`` / ``device_*/data`` binaries. ``.done`` / ``.complete`` / ``.zip``
    markers are not data and are not listed. Rank from ``device_<id>/info.json.<id>``
    ``rank_id``; else the device id (warning). A PROF_ directory with several devices is read as
    the first device (warning).
    """
    files = [f for f in _list_files(d, max_depth=4, problems=problems)
             if not f.endswith((".done", ".complete", ".zip"))]
    has_out = any(f.startswith(("mindstudio_profiler_output/", "analyze/")) for f in files) or any(
        re.match(r"^device_\d+/timeline/.+\.json$", f) for f in files)
    has_raw = any(re.match(r"^(host|device_\d+)/data/", f) for f in files)
    if not has_out and not has_raw:
        problems.add(d, "PROF_ directory with neither exported output nor raw data",
                     severity="skipped", affects=("all",))
        return None
    src = Source(path=str(d), kind=PROF if has_out else RAW_CANN, rank=None, files=files,
                 mtime=_mtime(d), framework="cann")
    devices = sorted({_rank_value(m.group(1)) for f in files
                      for m in [re.match(r"^device_(\d+)/", f)] if m} - {None})
    if len(devices) > 1:
        problems.warn(d, f"PROF_ directory holds devices {devices}; only device {devices[0]} is read")
    for f in files:
        m = re.match(r"^device_(\d+)/info\.json\.(\d+)$", f)
        if m and _rank_value(m.group(2)) is not None:
            src.device_id = int(m.group(2))
            info = _load_json_quiet(d / f, problems) or {}
            r = _rank_value(info.get("rank_id"))
            if r is not None:
                src.rank, src.rank_origin = r, f"{f} rank_id"
            src.cann_version = _text(info.get("cannVersion") or info.get("version"))
            src.host = _text(info.get("hostname"))
            end = f.replace("info.json.", "end_info.")
            if end in files:
                src.end_ns = _epoch_ns(_obj(_load_json_quiet(d / end, problems)).get(
                    "collectionTimeEnd"))
            break
    if src.device_id is None and devices:
        src.device_id = devices[0]
    if src.rank is None and src.device_id is not None:
        src.rank, src.rank_origin = src.device_id, "device id"
        problems.warn(d, f"no rank_id in PROF_ info.json; rank {src.rank} taken from the device id")
    if src.rank is None and not _rank_from_name(src, d.name, problems):
        return None
    src.analyses = allowed_analyses(src)
    return src


def _legacy_sources(d: Path, filenames: list[str], problems: Problems) -> list[Source]:
    """Legacy MindSpore 1.x/2.0 ranks in one directory, one Source per rank.

    A rank is listed only when one of its files carries data (:data:`_LEGACY_PRIMARY`:
    step trace, hccl_raw, timeline, aicore_intermediate, cluster analyse); descriptive files
    (profiler_info, framework_raw, flops, min_cycle_counter …) join the rank of the same number but
    do not make one on their own, so fragments such as a lone ``profiler_info_0.json`` are not
    mistaken for a rank. The number in the file names is the rank id as MindSpore wrote it.
    """
    by_rank: dict[int, list[str]] = {}
    primary: set[int] = set()
    for f in filenames:
        m = _LEGACY_RE.match(f)
        if m and _rank_value(m.group("rank")) is None:
            problems.add(d / f, f"rank number in the file name is no rank (0 to "
                                f"{RANK_LIMIT - 1}); not read")
        elif m:
            rank = int(m.group("rank"))
            by_rank.setdefault(rank, []).append(f)
            if m.group("kind").startswith(_LEGACY_PRIMARY):
                primary.add(rank)
    out = []
    for rank in sorted(primary):
        files = sorted(by_rank[rank])
        src = Source(path=str(d), kind=LEGACY_MS, rank=rank, device_id=rank,
                     rank_origin="file name suffix", files=files, mtime=_mtime(d),
                     framework="legacy_mindspore")
        src.analyses = allowed_analyses(src)
        out.append(src)
    return out


def _raw_job_source(d: Path, filenames: list[str], problems: Problems) -> Source | None:
    """A raw CANN / legacy job directory (``JOB*``: ``hwts.log.data.*``, ``training_trace.*``,
    ``Framework.host.*`` …, spec §D) as one ``raw_cann`` source, decoded by ascendprof.

    The job's ``data/`` sub-directory belongs to the job: when ``d`` is ``<job>/data`` and
    ``<job>`` itself has raw files, ``d`` is not listed again (``<job>`` lists ``data/…``).
    A directory with only host-side framework text (no device log) is recorded as skipped:
    there is nothing to time; so is one with only ``training_trace`` step markers (not decoded).
    Rank = device id from the device file name
    (``….<device>.slice_<n>``), with a warning (raw data carries no rank).
    """
    if d.name == "data":
        try:
            parent_files = [f for f in os.listdir(d.parent) if (d.parent / f).is_file()]
        except OSError:
            parent_files = []
        if any(_RAW_HINT_RE.search(f) for f in parent_files):
            return None
    files = [f for f in _list_files(d, max_depth=2, problems=problems)
             if not f.endswith((".done", ".complete", ".zip"))]
    if not any(_RAW_DEVICE_RE.match(os.path.basename(f)) for f in files):
        problems.add(d, "raw data without a device task log (hwts.log.data / stars_soc.data): "
                        "only host framework text or step-trace markers, which ascendprof does not "
                        "decode", severity="skipped", affects=("all",))
        return None
    src = Source(path=str(d), kind=RAW_CANN, rank=None, files=files, mtime=_mtime(d),
                 framework="cann")
    for f in files:
        m = re.search(r"\.(\d+)\.slice_\d+$", os.path.basename(f))
        if m and _RAW_DEVICE_RE.match(os.path.basename(f)) and _rank_value(m.group(1)) is not None:
            src.device_id = int(m.group(1))
            break
    if src.device_id is not None:
        src.rank, src.rank_origin = src.device_id, "device id in raw file name"
        problems.warn(d, f"raw CANN data has no rank; rank {src.rank} taken from the device id")
    src.analyses = allowed_analyses(src)
    return src


def allowed_analyses(src: Source) -> list[str]:
    """Which analyses the files of ``src`` allow (by file presence only)."""
    names = {os.path.basename(f) for f in src.files}
    has = names.__contains__
    dbs = any(_DB_RE.match(n) for n in names)
    out = []
    if src.kind in (TORCH_TEXT, MS_TEXT):
        if has("trace_view.json") or has("kernel_details.csv") or dbs:
            out.append("step_breakdown")
        if has("step_trace_time.csv") or has("analysis.db"):
            out.append("cluster_step_trace")
        if has("communication.json"):
            out.append("communication")
        if has("communication_matrix.json"):
            out.append("communication_matrix")
        if has("kernel_details.csv") or has("op_statistic.csv"):
            out.append("op_statistics")
    elif src.kind == DB:
        out += ["step_breakdown", "cluster_step_trace"]
        if has("analysis.db"):
            out += ["communication", "communication_matrix"]
        out.append("op_statistics")
    elif src.kind == PROF:
        out += ["step_breakdown", "op_statistics"]
        if any(n.startswith("communication") for n in names):
            out += ["communication", "communication_matrix"]
    elif src.kind == RAW_CANN:
        out += ["op_statistics"]
    elif src.kind == LEGACY_MS:
        if any(n.startswith("step_trace_raw") for n in names):
            out.append("cluster_step_trace")
        if any(n.startswith("hccl_raw") for n in names):
            out.append("communication")
        if any(n.startswith(("output_timeline_data", "aicore_intermediate")) for n in names):
            out.append("op_statistics")
    if out:
        out.append("verdicts")
    return out


def _mtime(d: Path) -> float:
    try:
        return max((e.stat().st_mtime for e in os.scandir(d)), default=os.stat(d).st_mtime)
    except OSError:
        return 0.0


def one_per_rank(found: list[Source], problems: Problems) -> list[Source]:
    """One source per rank, sorted by rank: text beats db beats the rest; within a kind the
    newest wins. Every dropped copy and every source without a rank is recorded in ``problems``.
    """
    pref = {TORCH_TEXT: 0, MS_TEXT: 0, DB: 1, PROF: 2, LEGACY_MS: 3, RAW_CANN: 4}
    by_rank: dict[int, list[Source]] = {}
    unranked = []
    for s in found:
        (by_rank.setdefault(s.rank, []) if s.rank is not None else unranked).append(s)
    out = []
    for rank, group in sorted(by_rank.items()):
        group.sort(key=lambda s: (pref.get(s.kind, 9), -s.mtime))
        keep = group[0]
        for other in group[1:]:
            problems.warn(other.path, f"rank {rank} also found at {keep.path} ({keep.label}); "
                                      f"using that one, this copy is ignored")
            if other.kind != keep.kind and other.kind not in keep.also:
                keep.also.append(other.kind)
        out.append(keep)
    for s in unranked:
        problems.add(s.path, "rank unknown (no profiler_info, metadata or number in the name); "
                             "not analysed", severity="skipped", affects=("all",))
    return out


class MultipleRuns(UsageError):
    """The directory holds several runs (different jobs or collections); ``runs`` lists them
    (runs.Run). Exit 2 with one line naming them and how to pick one."""

    def __init__(self, root, runs, hint: str):
        self.runs = runs
        names = "; ".join(r.describe() for r in runs)
        super().__init__(f"{root} holds {len(runs)} separate runs (different jobs, not one "
                         f"cluster): {names}. {hint}")


#: how to pick one run, for commands without --run (diff, gate)
PICK_BY_PATH = "Give the path of one of them."


def runs_of(root: Path, problems: Problems | None = None) -> tuple[list[Source], list]:
    """:func:`scan` ``root`` and group the sources by run (:func:`ascendprof.scan.runs.group_runs`):
    (sources, runs)."""
    found = scan(Path(root), problems)
    if not found:
        outer = enclosing_source(Path(root))
        if outer is not None:  # a folder inside a rank: that rank
            found = [s for s in scan(outer, problems) if Path(s.path) == outer]
            if found and problems is not None:
                problems.warn(str(root), f"this folder is inside the profiling directory "
                                         f"{outer}; that directory was read (give it next time)")
    return found, group_runs(found, root)


#: how many folders up a path inside a rank is looked for its rank directory
ENCLOSING_LEVELS = 4


def enclosing_source(path: Path) -> Path | None:
    """The profiling directory (``*_ascend_pt``, ``*_ascend_ms``, ``PROF_*``) that ``path``
    lies in, up to :data:`ENCLOSING_LEVELS` folders up (``rank_0_ascend_pt/
    ASCEND_PROFILER_OUTPUT``, ``PROF_x/device_0``), else None."""
    p = Path(os.path.abspath(path))
    for parent in list(p.parents)[:ENCLOSING_LEVELS]:
        if _looks_like_source(parent.name):
            return parent
    return None


def load_sources(root: Path, problems: Problems | None = None, *, run: str | None = None,
                 hint: str = PICK_BY_PATH) -> list[Source]:
    """:func:`scan` ``root``, keep the sources of one run and one source per rank
    (:func:`one_per_rank`).

    ``run`` picks a run by name, path or number (``ascendprof scan`` lists them); without it,
    a root holding several runs raises :class:`MultipleRuns` (exit 2; ``hint`` says how to
    pick one). Raises UsageError for an unknown ``run``, NothingAnalysable when no source is
    left (with what was skipped). Light: no Arrow import, so a re-run that restores its outputs
    from the cache starts fast."""
    problems = problems if problems is not None else Problems()
    found, runs = runs_of(root, problems)
    if run is not None:
        chosen = pick(runs, run)
        if chosen is None:
            known = ", ".join(r.name for r in runs) or "none"
            raise UsageError(f"{root}: no run {run!r} (runs: {known})")
        found = chosen.sources
    elif len(runs) > 1:
        raise MultipleRuns(root, runs, hint)
    sources = one_per_rank(found, problems)
    if not sources:
        why = problems.brief()
        raise NothingAnalysable(f"{root}: no profiling data found (looked for *_ascend_pt, "
                                f"*_ascend_ms, PROF_* and legacy MindSpore output)"
                                + (f"; skipped: {why}" if why else ""))
    return sources
