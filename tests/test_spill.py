"""Large input files read in batches and kept on disk (model/bigtables.py) give the same
tables and outputs as reading them whole.

Oracles: the whole-file readers (read_kernel_details, read_communication_per_value), whose
results earlier tests pin against the real files, and a complete analyse of the same data
without spilling. Spilling is forced on small real files by lowering SPILL_BYTES (and the
batch size), so every code path runs without gigabyte fixtures; the gigabyte files are measured
by `make bench`.
"""

from __future__ import annotations

import csv
import filecmp
import io
import json
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from ascendprof.analyze import cluster_communication as CC
from ascendprof.engine.run import run_analyse
from ascendprof.sysio import bigtables
from ascendprof.model import schemas as S
from ascendprof.model.errors import InputError
from ascendprof.readers import ascend_output as AO
from ascendprof.readers.communication import fast as F
from ascendprof.sysio import textio
from conftest import QWEN3

OUT = "ASCEND_PROFILER_OUTPUT"
KD = QWEN3 / "rank_0_ascend_pt" / OUT / "kernel_details.csv"


@pytest.fixture
def spill_all(monkeypatch, tmp_path):
    """Every file spills, in batches of ~64 KB of text."""
    monkeypatch.setattr(bigtables, "SPILL_BYTES", 1)
    monkeypatch.setattr(textio, "STREAM_BLOCK_BYTES", 64 << 10)
    monkeypatch.setattr(F, "BLOCK_BYTES", 32 << 10)
    with bigtables.spilling(tmp_path / "scratch"):
        (tmp_path / "scratch").mkdir()
        yield tmp_path / "scratch"


def _kernels_whole(path, bad=None):
    return AO.read_kernel_details(path, 3, bad_rows=bad)


def _kernels_spilled(path, bad=None, negative=None):
    got = AO.read_kernel_details_spilled(path, 3, bad, negative)
    assert got is not None
    slim, spilled = got
    whole = spilled.read()
    assert bigtables.plain(slim).equals(whole.select(list(bigtables.SLIM_COLUMNS[S.KERNELS])))
    assert all(pa.types.is_dictionary(slim.schema.field(c).type)  # texts held as codes
               for c in bigtables.SLIM_DICTIONARY[S.KERNELS])
    assert spilled.num_rows == whole.num_rows
    return whole


def test_kernel_details_real_file(spill_all):
    want = _kernels_whole(KD)
    got = _kernels_spilled(KD)
    assert got.schema.equals(want.schema)
    assert got.equals(want)
    assert pq.read_metadata(got and AO.read_kernel_details_spilled(KD, 3)[1].path) \
        .num_row_groups > 3  # read in several batches


def _rows(path):
    with open(path, newline="", encoding="utf-8-sig") as f:
        return list(csv.reader(f))


def _write_rows(path, rows):
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows(rows)
    path.write_text(buf.getvalue(), encoding="utf-8")
    return path


def _damaged(tmp_path, how):
    head, *rows = _rows(KD)
    rows = [list(r) for r in rows * 3]  # (copies: each row edited alone)
    late = len(rows) - 5  # in a later batch than the first
    i_dur, i_block = head.index("Duration(us)"), head.index("Block Dim")
    if how == "text_in_pmu_late":
        rows[late][head.index("aic_mac_ratio")] = "oops"
    elif how == "text_in_int_late":
        rows[late][i_block] = "12x"
    elif how == "float_in_int_late":
        rows[late][i_block] = "40.0"
    elif how == "unknown_text_column":
        head.append("Comment")
        rows = [r + ["note"] for r in rows]
    elif how == "unknown_text_column_late":
        head.append("Comment")
        rows = [r + [""] for r in rows]
        rows[late][-1] = "note"
    elif how == "negative_durations":
        for j in (3, late):
            rows[j][i_dur] = "-" + rows[j][i_dur]
    elif how == "short_rows":
        rows[7] = rows[7][:5]
        rows[late] = rows[late][:9]
    elif how == "header_only":
        rows = []
    elif how == "missing_required":
        head[head.index("Accelerator Core")] = "Core"
    elif how == "current_headers":  # the real file has the older Block Dim spelling
        head[i_block] = "Block Num"
    return _write_rows(tmp_path / "kernel_details.csv", [head] + rows)


@pytest.mark.parametrize("how", ["text_in_pmu_late", "text_in_int_late", "float_in_int_late",
                                 "unknown_text_column", "unknown_text_column_late",
                                 "negative_durations", "short_rows", "header_only",
                                 "missing_required", "current_headers"])
def test_kernel_details_damaged_as_the_whole_file_read(spill_all, tmp_path, how):
    path = _damaged(tmp_path, how)
    bad_w, bad_s, negative = [], [], [0, None]
    try:
        want = _kernels_whole(path, bad_w)
    except InputError as e:
        with pytest.raises(InputError) as got:
            _kernels_spilled(path, bad_s)
        assert str(got.value) == str(e)
        return
    got = _kernels_spilled(path, bad_s, negative)
    assert bad_s == bad_w
    if how == "negative_durations":  # values.check leaves them out of the whole read
        assert negative[0] == 2 and negative[1]["dur_ns"] < 0
        want = want.filter(pa.compute.greater_equal(want["dur_ns"], 0))
    assert got.schema.equals(want.schema), how
    assert got.equals(want), how


@pytest.fixture
def spill_joined(spill_all, monkeypatch):
    """As spill_all, each batch of ~64 KB joined from 16 KB blocks of Arrow's parse (in
    analyse: 4 MB batches of 1 MB blocks, which bounds what Arrow reads ahead)."""
    monkeypatch.setattr(textio, "STREAM_PARSE_BYTES", 16 << 10)
    yield spill_all


def test_kernel_details_batches_join_parse_blocks(spill_joined):
    want = _kernels_whole(KD)
    got = _kernels_spilled(KD)
    assert got.schema.equals(want.schema)
    assert got.equals(want)
    spilled = AO.read_kernel_details_spilled(KD, 3)[1]
    groups = spilled.num_row_groups
    blocks = KD.stat().st_size // (16 << 10)  # ~50 parse blocks of the 0.8 MB file
    # one row group per batch of ~64 KB of text: about four parse blocks each, not one
    assert 3 < groups <= blocks // 3


@pytest.mark.parametrize("how", ["text_in_pmu_late", "text_in_int_late", "float_in_int_late",
                                 "unknown_text_column_late", "negative_durations",
                                 "short_rows", "header_only"])
def test_kernel_details_damaged_joined_batches(spill_joined, tmp_path, how):
    test_kernel_details_damaged_as_the_whole_file_read(spill_joined, tmp_path, how)


def test_non_utf8_kernel_details(spill_all, tmp_path):
    data = KD.read_bytes()
    cut = data.index(b"\n", len(data) // 2) + 1
    path = tmp_path / "kernel_details.csv"
    path.write_bytes(data[:cut] + b"\xff\xfe" + data[cut:])
    with pytest.raises(InputError, match="not UTF-8"):
        _kernels_spilled(path)


def _unpack(frags):
    out = {}
    for f in frags:
        steps, keys, infos = f.unpack()
        out[(f.rank, f.kind, f.group)] = (
            [bytes(s) for s in steps], [bytes(k) for k in keys],
            [json.loads(bytes(i)) for i in infos],
            [(json.loads(s), json.loads(t)) for s, t in f.totals])
    return out


def _approx(a, b):
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_approx(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_approx(x, y) for x, y in zip(a, b))
    if isinstance(a, float) or isinstance(b, float):
        return a == pytest.approx(b, rel=1e-12, abs=1e-12)
    return a == b


@pytest.mark.parametrize("rank", [0, 2])
def test_fragments_built_batch_by_batch(rank):
    path = QWEN3 / f"rank_{rank}_ascend_pt" / OUT / "communication.json"
    whole = F.read_tables(path, rank)
    want = _unpack(CC.rank_fragments(whole[S.COMM_OPS], whole[S.COMM_BANDWIDTH],
                                     whole[S.COMM_SIZE_DIST]))
    builder = CC.FragmentsBuilder()
    n = 0
    for batch in F.iter_tables(path, rank, whole_file_bytes=0, block_bytes=700):
        builder.add(batch[S.COMM_OPS], batch[S.COMM_BANDWIDTH], batch[S.COMM_SIZE_DIST])
        n += 1
    assert n > 5
    got = _unpack(builder.result())
    assert list(got) == list(want)  # same groups in the same order
    for key in want:
        assert got[key][:3] == want[key][:3], key
        assert _approx(got[key][3], want[key][3]), key


def _same_order(a, b) -> bool:
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same_order(a[k], b[k]) for k in a)
    return True


def _analyse(src, out, **kw):
    rc = run_analyse(src, out, workers=1, progress=False, **kw)
    assert rc == 0
    return out


def _same_outputs(a: Path, b: Path):
    names = sorted(p.name for p in a.iterdir() if p.is_file() and p.name != "summary.json")
    assert names == sorted(p.name for p in b.iterdir()
                           if p.is_file() and p.name != "summary.json")
    for name in names:
        if name == "cluster_communication.json" and not filecmp.cmp(a / name, b / name):
            # totals summed batch by batch: a float sum may differ in its last bits
            x, y = json.loads((a / name).read_text()), json.loads((b / name).read_text())
            assert _same_order(x, y) and _approx(x, y), name
            continue
        assert filecmp.cmp(a / name, b / name, shallow=False), name
    ta = sorted(p.relative_to(a) for p in (a / "tables").rglob("*.parquet"))
    assert ta == sorted(p.relative_to(b) for p in (b / "tables").rglob("*.parquet"))
    for rel in ta:
        assert pq.read_table(a / rel).equals(pq.read_table(b / rel)), rel


@pytest.mark.parametrize("cache", [True, False])
def test_analyse_spilled_equals_whole(monkeypatch, tmp_path, cache):
    want = _analyse(QWEN3, tmp_path / "whole", cache=cache)
    monkeypatch.setattr(bigtables, "SPILL_BYTES", 1)
    monkeypatch.setattr(textio, "STREAM_BLOCK_BYTES", 64 << 10)
    monkeypatch.setattr(F, "BLOCK_BYTES", 4 << 10)
    got = _analyse(QWEN3, tmp_path / "spilled", cache=cache)
    _same_outputs(want, got)
    if cache:  # what the cache entries say was spilled; a warm run reads them in row groups
        entries = [json.loads(p.read_text()) for p in
                   (got / ".ascendprof-cache").glob("*/entry.json")]
        assert any(S.KERNELS in e["spilled"] and S.COMM_OPS in e["spilled"] for e in entries)
        shutil.rmtree(next((got / ".ascendprof-cache").glob("run-*")))
        for p in (got / ".ascendprof-cache").glob("*/result.*"):
            p.unlink()  # per-rank results gone: the tables are read back from the entries
        _same_outputs(want, _analyse(QWEN3, got, cache=cache))
    scratch = list(tmp_path.rglob("*.spill"))
    assert scratch == []  # no temporary file left behind


def test_generated_cluster_spilled(monkeypatch, tmp_path, generated_cluster):
    cluster = generated_cluster(8, "--comm-ops-per-rank", "200")
    want = _analyse(cluster, tmp_path / "whole")
    monkeypatch.setattr(bigtables, "SPILL_BYTES", 100_000)  # some ranks' files, not all
    monkeypatch.setattr(F, "BLOCK_BYTES", 16 << 10)
    _same_outputs(want, _analyse(cluster, tmp_path / "spilled"))
