"""Fault corpus: damaged copies of REAL profiler output, generated on demand into a temp dir.

Nothing here is hand-written profiling data. Every case starts from a copy of a real data set
(the Qwen3 fixture in ``fixtures/`` or the torch_npu / MindSpore samples in ``../shared/data``)
and applies one damage a real collection suffers: a file cut off mid-way, emptied, passed
through a spreadsheet (BOM + CRLF), a column lost or renamed, bytes that are not UTF-8, a
directory where a file should be, a duplicated rank, and so on.

A :class:`Fault` says how to build the damaged tree and what ascendprof must do with it:
the exit code, words the output must contain (the damaged file's name and the problem), and
which ranks the damage may touch (every other rank must come out exactly as in a clean run).

Use :func:`corpus` for every case, :func:`build` to materialise one under a directory.
"""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parents[1]
OUT = "ASCEND_PROFILER_OUTPUT"


from conftest import SHARED  # noqa: E402 - one definition of where the shared data is

#: base name -> (location of the real data, needs ../shared/data). Only rank directories and
#: their files are copied (no licence or provenance notes).
BASES: dict[str, tuple[Path | None, str]] = {
    "qwen3": (ROOT / "fixtures", "qwen3-4rank-pp2dp2"),
    "level0": (SHARED, "torch_npu-2rank-levels/text/level0"),
    "level1": (SHARED, "torch_npu-2rank-levels/text/level1"),
    "db_level1": (SHARED, "torch_npu-2rank-levels/db/level1"),
    "legacy_cluster": (SHARED, "mindspore-legacy/cluster_propose"),
    "raw_job": (SHARED, "mindspore-legacy/JOB3"),
}
#: Ranks of each base (for 'the other ranks are unchanged' comparisons).
BASE_RANKS = {"qwen3": (0, 1, 2, 3), "level0": (0, 1), "level1": (0, 1), "db_level1": (0, 1),
              "legacy_cluster": (0, 1, 2, 3), "raw_job": ()}
#: Rank directory names inside the bases.
RANK_DIR = {"qwen3": "rank_{}_ascend_pt", "level0": "rank{}_ascend_pt",
            "level1": "rank{}_ascend_pt", "db_level1": "rank{}_ascend_pt"}

#: Files of the Qwen3 ranks that no analysis reads, left out of the copies to keep the corpus
#: fast (the readers still parse them when present; a separate case keeps them).
_SKIP_HEAVY = ("memory_record.csv", "operator_memory.csv", "npu_module_mem.csv")


def base_path(base: str) -> Path | None:
    root, rel = BASES[base]
    if root is None:
        return None
    p = root / rel
    return p if p.is_dir() else None


def copy_base(base: str, dst: Path, *, light: bool = True) -> Path:
    """Copy the real data set ``base`` to ``dst`` (created) and return ``dst``. With ``light``
    the memory CSVs (read by no analysis) are left out."""
    src = base_path(base)
    if src is None:
        raise FileNotFoundError(f"base {base!r} not available")
    ignore = shutil.ignore_patterns("LICENSE*", "PROVENANCE*", "README*",
                                    *(_SKIP_HEAVY if light else ()))
    shutil.copytree(src, dst, ignore=ignore)
    return dst


def rank_dir(root: Path, base: str, rank: int) -> Path:
    return root / RANK_DIR[base].format(rank)


def out_file(root: Path, base: str, rank: int, name: str) -> Path:
    return rank_dir(root, base, rank) / OUT / name


# ------------------------------------------------------------------------------ mutations

def truncate(path: Path, frac: float | None = None, keep: int | None = None) -> None:
    """Cut ``path`` off after ``keep`` bytes or after ``frac`` of its size (a copy cut short)."""
    data = path.read_bytes()
    n = keep if keep is not None else int(len(data) * frac)
    path.write_bytes(data[:n])


def empty(path: Path) -> None:
    path.write_bytes(b"")


def _line_end(data: bytes) -> str:
    return "\r\n" if b"\r\n" in data[:65536] else "\n"


def read_rows(path: Path) -> tuple[list[list[str]], str]:
    data = path.read_bytes()
    text = data.decode("utf-8-sig")
    return list(csv.reader(io.StringIO(text, newline=""))), _line_end(data)


def write_rows(path: Path, rows: list[list[str]], line_end: str = "\n") -> None:
    buf = io.StringIO(newline="")
    csv.writer(buf, lineterminator=line_end).writerows(rows)
    path.write_bytes(buf.getvalue().encode("utf-8"))


def edit_csv(path: Path, fn: Callable[[list[str], list[list[str]]], tuple[list[str], list]]):
    """Rewrite a real CSV through ``fn(header, rows) -> (header, rows)`` (values kept as text)."""
    rows, le = read_rows(path)
    head, body = fn(rows[0], rows[1:])
    write_rows(path, [head] + list(body), le)


def header_only(path: Path) -> None:
    edit_csv(path, lambda h, r: (h, []))


def drop_column(path: Path, col: str) -> None:
    def fn(h, rows):
        i = h.index(col)
        return h[:i] + h[i + 1:], [r[:i] + r[i + 1:] for r in rows]
    edit_csv(path, fn)


def rename_column(path: Path, col: str, new: str) -> None:
    edit_csv(path, lambda h, rows: ([new if c == col else c for c in h], rows))


def add_column(path: Path, col: str, value: str) -> None:
    edit_csv(path, lambda h, rows: (h + [col], [r + [value] for r in rows]))


def set_cell(path: Path, row: int, col: str, value: str) -> None:
    """Set data row ``row`` (0-based) of column ``col``."""
    def fn(h, rows):
        rows[row][h.index(col)] = value
        return h, rows
    edit_csv(path, fn)


def reverse_rows(path: Path) -> None:
    """Data rows in reverse order (timestamps out of order)."""
    edit_csv(path, lambda h, rows: (h, rows[::-1]))


def insert_bytes(path: Path, offset: int, junk: bytes) -> None:
    data = path.read_bytes()
    path.write_bytes(data[:offset] + junk + data[offset:])


def break_json(path: Path, near: int) -> int:
    """Make a real JSON array invalid at the first event boundary after byte ``near``: a doubled
    comma (``}, , {``). Returns the byte offset of the damage."""
    data = path.read_bytes()
    i = data.find(b"}, {", near)
    if i < 0:
        i = data.find(b"},{", near)
    path.write_bytes(data[:i + 1] + b", ," + data[i + 1:])
    return i + 1


def spreadsheet(path: Path) -> None:
    """What a round trip through a spreadsheet leaves: a UTF-8 BOM and CRLF line ends."""
    data = path.read_bytes().replace(b"\r\n", b"\n").replace(b"\n", b"\r\n")
    path.write_bytes(b"\xef\xbb\xbf" + data)


def excel_general(text: str) -> str:
    """A number as a spreadsheet's General format writes it into a CSV: at most 11 characters,
    so a number of 12 digits or more before the point, like a us timestamp
    (``1736408883702735.700``), becomes ``1.73641E+15`` (6 significant digits). Smaller numbers
    are kept as written (trailing TAB dropped)."""
    t = text.strip()
    if abs(float(t)) < 1e11:
        return t
    mant, exp = f"{float(t):.5E}".split("E")
    mant = mant.rstrip("0").rstrip(".")
    return f"{mant}E{exp[0]}{int(exp[1:]):02d}"


def e_notation(path: Path, columns: tuple[str, ...]) -> None:
    """Values of ``columns`` as a spreadsheet saves them (:func:`excel_general`)."""
    def fn(h, rows):
        idx = [h.index(c) for c in columns]
        for r in rows:
            for i in idx:
                if r[i].strip():
                    r[i] = excel_general(r[i])
        return h, rows
    edit_csv(path, fn)


def trailing_tabs(path: Path) -> None:
    """A TAB after every value that is a number (torch_npu writes one after absolute times only;
    a spreadsheet's 'keep as text' export after every number)."""
    def fn(h, rows):
        for r in rows:
            for i, v in enumerate(r):
                try:
                    float(v.strip())
                except ValueError:
                    continue
                r[i] = v.rstrip("\t") + "\t"
        return h, rows
    edit_csv(path, fn)


def quote_all(path: Path) -> None:
    """Every cell in double quotes, numbers too (a spreadsheet's 'quote all cells' export)."""
    rows, le = read_rows(path)
    buf = io.StringIO(newline="")
    csv.writer(buf, lineterminator=le, quoting=csv.QUOTE_ALL).writerows(rows)
    path.write_bytes(buf.getvalue().encode("utf-8"))


def file_for_dir(path: Path) -> None:
    """Replace directory ``path`` by a file of the same name holding its first file's bytes."""
    first = next((p for p in sorted(path.rglob("*")) if p.is_file()), None)
    data = first.read_bytes()[:4096] if first else b""
    shutil.rmtree(path)
    path.write_bytes(data)


def dir_for_file(path: Path) -> None:
    """Replace file ``path`` by a directory of the same name (holding the original file)."""
    data = path.read_bytes()
    path.unlink()
    path.mkdir()
    (path / "part-0").write_bytes(data)


def symlink_loops(root: Path) -> None:
    """A link to the tree's own root inside a rank, and a pair of links pointing at each other."""
    first = sorted(p for p in root.iterdir() if p.is_dir())[0]
    os.symlink(os.path.relpath(root, first), first / "loop_to_root")
    os.symlink("b_link", root / "a_link")
    os.symlink("a_link", root / "b_link")


def edit_json(path: Path, fn) -> None:
    """Rewrite a real JSON file through ``fn(obj) -> obj`` (compact, as the profiler writes)."""
    obj = json.loads(path.read_bytes())
    path.write_bytes(json.dumps(fn(obj), ensure_ascii=False).encode("utf-8"))


def zero_length_steps(path: Path) -> None:
    """trace_view.json with every ProfilerStep#N event of duration 0."""
    def fn(events):
        for e in (events["traceEvents"] if isinstance(events, dict) else events):
            if isinstance(e, dict) and str(e.get("name", "")).startswith("ProfilerStep#"):
                e["dur"] = 0
        return events
    edit_json(path, fn)


def reverse_events(path: Path) -> None:
    """trace_view.json with its events in reverse order (metadata after the events it names)."""
    edit_json(path, lambda ev: ev[::-1] if isinstance(ev, list)
              else {**ev, "traceEvents": ev["traceEvents"][::-1]})


def garbage(path: Path, size: int = 4096) -> None:
    """Overwrite with deterministic non-database bytes of the same kind of size."""
    seed = path.name.encode()
    out = bytearray()
    while len(out) < size:
        seed = bytes((b * 131 + 7 + i) % 256 for i, b in enumerate(seed + b"x"))
        out += seed
    path.write_bytes(bytes(out[:size]))


# ------------------------------------------------------------------------------ the corpus

@dataclass(frozen=True)
class Fault:
    """One damaged input and the behaviour it must produce.

    ``apply(root)`` damages the copy of ``base`` at ``root``; with ``target`` it returns the
    path to give to the command (else ``root`` is given). ``exit_code``: the documented code (0 done, 2 usage, 3
    nothing analysable). ``mentions``: case-insensitive words the command's output (terminal
    summary or error line) must contain: the damaged file's name and the problem. ``touched``:
    the ranks whose results may change; every other rank of the base must give exactly the
    rows of a clean run (``None``: no comparison, e.g. when the run stops). ``skip_expected``:
    a 'skipped' problem must be recorded (False for damage ascendprof fully recovers from).
    """

    id: str
    base: str
    apply: Callable[[Path], Path | None]
    exit_code: int = 0
    mentions: tuple[str, ...] = ()
    touched: frozenset | None = frozenset()
    skip_expected: bool = True
    light: bool = True
    args: tuple[str, ...] = ()
    target: bool = False
    notes: str = ""
    extra: dict = field(default_factory=dict)


def _k(r, name):
    """Mutation target: file ``name`` of rank ``r`` (Qwen3 layout) -> function of the root."""
    return lambda root: out_file(root, "qwen3", r, name)


def corpus() -> list[Fault]:
    """Every fault case (see the module docstring)."""
    q = "qwen3"
    KD, ST, CJ, CM = ("kernel_details.csv", "step_trace_time.csv", "communication.json",
                      "communication_matrix.json")
    TV = "trace_view.json"
    f: list[Fault] = []

    def add(id_, base, apply, **kw):
        f.append(Fault(id_, base, apply, **kw))

    # --- truncated JSON at several points (communication.json of rank 2; trace_view of rank 1)
    for frac in (0.0005, 0.3, 0.999):
        add(f"truncated_communication_json_{frac}", q,
            lambda root, frac=frac: truncate(_k(2, CJ)(root), frac),
            mentions=(CJ, "json"), touched=frozenset({2}))
    add("truncated_matrix_json_one_byte", q, lambda root: truncate(_k(0, CM)(root), keep=1),
        mentions=(CM, "json"), touched=frozenset({0}))
    # trace_view.json is read only when needed (kernel_details.csv has the facts here) or asked
    # for with --timeline: damage is reported when it is read, and costs nothing otherwise
    for frac in (0.001, 0.5, 0.9999):
        add(f"truncated_trace_view_{frac}", "level1",
            lambda root, frac=frac: truncate(out_file(root, "level1", 1, TV), frac),
            mentions=(TV, "byte"), touched=frozenset({1}), args=("--timeline",))
    add("trace_view_invalid_json", "level1",
        lambda root: break_json(out_file(root, "level1", 0, TV), 5000),
        mentions=(TV, "invalid json"), touched=frozenset({0}), args=("--timeline",))
    add("trace_view_invalid_json_not_needed", "level1",
        lambda root: break_json(out_file(root, "level1", 0, TV), 5000),
        mentions=(TV, "not read"), touched=frozenset(), skip_expected=False)
    # --- empty files
    add("empty_kernel_details", q, lambda root: empty(_k(0, KD)(root)),
        mentions=(KD, "empty"), touched=frozenset({0}))
    add("empty_step_trace_time", q, lambda root: empty(_k(3, ST)(root)),
        mentions=(ST, "empty"), touched=frozenset({3}))
    add("empty_communication_json", q, lambda root: empty(_k(1, CJ)(root)),
        mentions=(CJ, "empty"), touched=frozenset({1}))
    add("empty_trace_view", "level1", lambda root: empty(out_file(root, "level1", 0, TV)),
        mentions=(TV, "empty"), touched=frozenset({0}), args=("--timeline",))
    add("empty_profiler_info_reported_once", q,
        lambda root: empty(rank_dir(root, q, 2) / "profiler_info_2.json"),
        mentions=("profiler_info_2.json", "empty"), touched=frozenset({2}))
    # --- header-only CSV
    add("header_only_kernel_details", q, lambda root: header_only(_k(2, KD)(root)),
        mentions=(KD, "no data rows"), touched=frozenset({2}), skip_expected=False)
    add("header_only_step_trace_time", q, lambda root: header_only(_k(1, ST)(root)),
        mentions=(ST, "no data rows"), touched=frozenset({1}), skip_expected=False)
    # --- missing, renamed and extra columns
    add("missing_column_duration", q, lambda root: drop_column(_k(0, KD)(root), "Duration(us)"),
        mentions=(KD, "Duration(us)"), touched=frozenset({0}))
    add("renamed_column_computing", q,
        lambda root: rename_column(_k(2, ST)(root), "Computing", "Computing Time"),
        mentions=(ST, "Computing"), touched=frozenset({2}))
    add("extra_text_column_kernel_details", q,
        lambda root: add_column(_k(0, KD)(root), "Comment", "checked by hand"),
        touched=frozenset(), skip_expected=False)
    add("extra_column_step_trace_time", q,
        lambda root: add_column(_k(1, ST)(root), "Note", "x"),
        touched=frozenset(), skip_expected=False)
    # --- empty / NaN / non-numeric cells
    # (an empty or NaN cell is reported and left out, not passed on silently)
    add("empty_cell_step_trace", q, lambda root: set_cell(_k(3, ST)(root), 0, "Free", ""),
        mentions=(ST, "empty or nan free"), touched=frozenset({3}))
    add("nan_cell_kernel_duration", q,
        lambda root: set_cell(_k(2, KD)(root), 5, "Duration(us)", "NaN"),
        mentions=(KD, "empty or nan duration", "row 6"), touched=frozenset({2}))
    add("non_numeric_cell_kernel_duration", q,
        lambda root: set_cell(_k(0, KD)(root), 10, "Duration(us)", "12,5us"),
        mentions=(KD, "Duration(us)", "row 11"), touched=frozenset({0}))
    add("non_numeric_cell_step_trace", q,
        lambda root: set_cell(_k(1, ST)(root), 0, "Computing", "fast"),
        mentions=(ST, "Computing", "fast"), touched=frozenset({1}))
    # --- encodings
    add("non_utf8_kernel_details", q, lambda root: insert_bytes(_k(2, KD)(root), 2000, b"\xff\xfe"),
        mentions=(KD, "utf-8", "byte 2000"), touched=frozenset({2}))
    add("non_utf8_communication_json", q,
        lambda root: insert_bytes(_k(3, CJ)(root), 100, b"\xc3\x28"),
        mentions=(CJ,), touched=frozenset({3}))
    add("spreadsheet_bom_crlf_csvs", q,
        lambda root: [spreadsheet(_k(0, n)(root)) for n in (KD, ST, "op_statistic.csv")],
        touched=frozenset(), skip_expected=False)
    # --- values a spreadsheet rewrote: E-notation (precision lost: reported), trailing TABs,
    # quoted numbers, with BOM + CRLF; the rank's other analyses are kept
    MR, OM = "memory_record.csv", "operator_memory.csv"
    add("spreadsheet_e_notation_memory_record", q,
        lambda root: e_notation(_k(0, MR)(root), ("Timestamp(us)",)), light=False,
        mentions=(MR, "E-notation", "Timestamp(us)"), touched=frozenset(), skip_expected=False)
    add("spreadsheet_e_notation_and_tabs_operator_memory", q,
        lambda root: [e_notation(_k(2, OM)(root), ("Allocation Time(us)",)),
                      trailing_tabs(_k(2, OM)(root))], light=False,
        mentions=(OM, "E-notation", "Allocation Time(us)"), touched=frozenset(),
        skip_expected=False)
    add("spreadsheet_every_mangling_memory_files", q,
        lambda root: [(e_notation(_k(0, MR)(root), ("Timestamp(us)",)), quote_all(_k(0, MR)(root)),
                       trailing_tabs(_k(0, OM)(root)), quote_all(_k(0, OM)(root)),
                       spreadsheet(_k(0, MR)(root)), spreadsheet(_k(0, OM)(root)))],
        light=False, mentions=(MR, "E-notation"), touched=frozenset(), skip_expected=False)
    add("spreadsheet_quoted_numbers_kernels_step_trace", q,
        lambda root: [quote_all(_k(r, n)(root)) for r, n in ((0, KD), (0, "op_statistic.csv"),
                                                              (1, ST))],
        touched=frozenset(), skip_expected=False)
    add("spreadsheet_trailing_tabs_step_trace_kernels", q,
        lambda root: [trailing_tabs(_k(r, n)(root)) for r, n in ((2, KD), (3, ST))],
        touched=frozenset(), skip_expected=False)
    add("spreadsheet_e_notation_kernel_start_times", q,
        lambda root: e_notation(_k(2, KD)(root), ("Start Time(us)",)),
        mentions=(KD, "E-notation", "Start Time(us)"), touched=frozenset({2}),
        skip_expected=False)
    add("bom_communication_json", q, lambda root: insert_bytes(_k(1, CJ)(root), 0,
                                                               b"\xef\xbb\xbf"),
        touched=frozenset(), skip_expected=False)
    # --- file where a directory is expected, and the reverse
    add("output_dir_is_a_file", q, lambda root: file_for_dir(rank_dir(root, q, 1) / OUT),
        mentions=("rank_1_ascend_pt",), touched=frozenset({1}))
    add("kernel_details_is_a_directory", q, lambda root: dir_for_file(_k(0, KD)(root)),
        touched=frozenset({0}), skip_expected=False)
    add("input_is_a_file", q, lambda root: _k(0, ST)(root), exit_code=2, target=True,
        mentions=(ST, "not a directory"), touched=None, skip_expected=False)
    # --- symlink loops
    add("symlink_loops", q, symlink_loops, touched=frozenset(), skip_expected=False)
    # --- duplicate ranks, text and db of one rank
    add("duplicate_rank_copy", q,
        lambda root: shutil.copytree(rank_dir(root, q, 3), root / "again" / "rank_3_ascend_pt"),
        mentions=("rank 3 also found",), touched=frozenset(), skip_expected=False)
    # the db export beside it is another collection (it ended 28 minutes later): two runs,
    # never one cluster (issue #15: exit 2 naming them)
    add("text_and_db_of_same_rank", "level1",
        lambda root: shutil.copytree(base_path("db_level1") / "rank0_ascend_pt",
                                     root / "db_export" / "rank0_ascend_pt"),
        exit_code=2, mentions=("2 separate runs", "db_export/rank0_ascend_pt"), touched=None,
        skip_expected=False)
    # --- ranks missing files
    add("rank_missing_communication", q,
        lambda root: [os.unlink(_k(2, n)(root)) for n in (CJ, CM)],
        touched=frozenset({2}), skip_expected=False)
    add("level0_has_no_communication_files", "level0", lambda root: None,
        touched=frozenset(), skip_expected=False)
    add("rank_without_profiler_output", q,
        lambda root: shutil.rmtree(rank_dir(root, q, 3) / OUT),
        mentions=("rank_3_ascend_pt",), touched=frozenset({3}))
    # --- steps of zero length, timestamps out of order
    add("zero_length_steps", "level1",
        lambda root: zero_length_steps(out_file(root, "level1", 1, TV)),
        touched=frozenset({1}), skip_expected=False, args=("--timeline",))
    add("kernel_rows_out_of_order", q, lambda root: reverse_rows(_k(2, KD)(root)),
        touched=frozenset(), skip_expected=False)
    add("trace_events_out_of_order", "level1",
        lambda root: reverse_events(out_file(root, "level1", 0, TV)),
        touched=frozenset(), skip_expected=False, args=("--timeline",))
    # --- databases
    add("garbage_profiler_db", "db_level1",
        lambda root: garbage(out_file(root, "db_level1", 1, "ascend_pytorch_profiler_1.db")),
        mentions=("ascend_pytorch_profiler_1.db",), touched=frozenset({1}))
    add("garbage_every_db", "db_level1",
        lambda root: [garbage(p) for p in sorted(root.rglob("*.db"))],
        exit_code=3, mentions=(".db",), touched=None)
    # --- legacy MindSpore
    add("legacy_truncated_hccl_raw", "legacy_cluster",
        lambda root: truncate(root / "hccl_raw_1.csv", 0.5),
        mentions=("hccl_raw_1.csv",), touched=frozenset({1}))
    # --- raw CANN device log cut mid-record (the only rank of the job: nothing analysable)
    add("raw_hwts_log_cut_mid_record", "raw_job",
        lambda root: truncate(sorted(root.glob("hwts.log.data.*"))[0], keep=64 * 100 + 17),
        exit_code=3, mentions=("hwts.log.data", "truncated", "byte 6400"), touched=None)
    # --- whole-run failures
    # --- odd values: each is reported (file, row, column) and left out of what it would
    # corrupt; the rank's other values and the other ranks are analysed as in a clean run
    for col, value, words in (("Start Time(us)", "-5.0", "negative start time"),
                              ("Duration(us)", "", "empty or nan duration"),
                              ("Duration(us)", "nan", "empty or nan duration"),
                              ("Wait Time(us)", "-3.5", "negative wait time"),
                              ("Block Dim", "-8", "negative block dim")):
        add(f"kernel_{words.replace(' ', '_')}_{value or 'empty'}", q,
            lambda root, col=col, value=value: set_cell(_k(0, KD)(root), 3, col, value),
            mentions=(KD, words), touched=frozenset({0}))
    for col, value, words in (("Preparing", "-17900.0", "negative preparing"),
                              ("Computing", "", "empty or nan computing"),
                              ("Computing", "nan", "empty or nan computing")):
        add(f"step_{words.replace(' ', '_')}_{value or 'empty'}", q,
            lambda root, col=col, value=value: set_cell(_k(3, ST)(root), 0, col, value),
            mentions=(ST, words), touched=frozenset({3}))
    add("step_rows_duplicated", q,
        lambda root: edit_csv(_k(3, ST)(root), lambda h, rows: (h, rows + rows)),
        mentions=(ST, "duplicated step"), touched=frozenset())
    add("every_rank_broken", q,
        lambda root: [shutil.rmtree(rank_dir(root, q, r) / OUT) for r in range(4)],
        exit_code=3, mentions=("rank_0_ascend_pt", "no ASCEND_PROFILER_OUTPUT"), touched=None)
    add("nonexistent_path", q, lambda root: root / "no_such_dir", exit_code=2, target=True,
        mentions=("no_such_dir", "no such file"), touched=None, skip_expected=False)
    add("empty_directory", q, lambda root: _emptied(root), exit_code=3, target=True,
        mentions=("no profiling data found",), touched=None, skip_expected=False)
    add("strict_turns_a_skip_into_exit_3", q, lambda root: empty(_k(0, KD)(root)),
        exit_code=3, args=("--strict",), mentions=(KD, "empty"), touched=frozenset({0}))
    add("full_qwen3_with_memory_files_damaged", q,
        lambda root: truncate(_k(2, "memory_record.csv")(root), 0.5), light=False,
        mentions=("memory_record.csv",), touched=frozenset())
    return f


def _emptied(root: Path) -> Path:
    for p in list(root.iterdir()):
        shutil.rmtree(p) if p.is_dir() else p.unlink()
    return root


def available(fault: Fault) -> bool:
    if base_path(fault.base) is None:
        return False
    return fault.id != "text_and_db_of_same_rank" or base_path("db_level1") is not None


def build(fault: Fault, where: Path) -> Path:
    """Copy ``fault.base`` to ``where/in``, damage it, and return the path to analyse."""
    root = copy_base(fault.base, Path(where) / "in", light=fault.light)
    target = fault.apply(root)
    return target if fault.target else root
