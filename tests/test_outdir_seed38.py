"""The output directory (ascendprof.engine.outdir), seed-38 survivors: the refusal of an output
inside a rank's own folder says why through the CLI, adopt() writes the manifest in the same
indented format as a run, and a foreign lock holder's text is shown up to 32 bytes."""

from __future__ import annotations

import fcntl
import os
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from _outdir_runs import run_once
from ascendprof.cli.main import main
from ascendprof.engine import outdir
from ascendprof.model.outputs import OUTPUT_FILES

RANK0 = Path(__file__).resolve().parent.parent / "fixtures" / "torch_npu-db-level1-rank0"


def test_analyse_into_a_ranks_own_folder_exits_2_naming_both_folders(tmp_path):
    # One rank folder (rank0_ascend_pt) given as the input, -o inside that rank's folder: the
    # refusal is a usage error (exit 2) that names the output, the rank's folder, and what to
    # do; nothing is created inside the rank.
    src = tmp_path / "in"
    shutil.copytree(RANK0, src)
    rank = (src / "rank0_ascend_pt").resolve()
    out = rank / "sub"
    r = CliRunner().invoke(main, ["analyse", str(src), "-o", str(out)])
    assert r.exit_code == 2, r.output
    assert (f"{out}: output directory is inside the profiling directory {rank}; "
            f"choose another -o") in r.output.replace("\n", "")
    assert not out.exists()


def test_adopt_writes_the_manifest_indented_like_a_run_does(tmp_path):
    # A run writes the manifest as JSON indented by two spaces, one member per line:
    #   {
    #     "tool": "ascendprof",
    #     "format": 1,
    #     "files": [
    #       "summary.json"
    #     ],
    #     "tables": []
    #   }
    # adopt() rewrites it with "report.html" added: the same layout, the list one more line.
    out = tmp_path / "out"
    run_once(out, {"summary.json": b"1"})
    ran = (out / outdir.MANIFEST).read_text()
    assert ran == ('{\n  "tool": "ascendprof",\n  "format": 1,\n  "files": [\n'
                   '    "summary.json"\n  ],\n  "tables": []\n}')
    (out / "report.html").write_text("<html></html>")
    outdir.adopt(out, "report.html")
    assert (out / outdir.MANIFEST).read_text() == (
        '{\n  "tool": "ascendprof",\n  "format": 1,\n  "files": [\n'
        '    "report.html",\n    "summary.json"\n  ],\n  "tables": []\n}')


def test_a_long_foreign_lock_holder_is_shown_by_its_first_32_bytes(tmp_path):
    # Something else holds the lock and its lock file holds 40 characters, no newline:
    # "0123456789" * 4. The busy message shows the first 32 bytes of it only
    # ("01234567890123456789012345678901"), not the whole file.
    out = tmp_path / "out"
    out.mkdir()
    fd = os.open(out / outdir.LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        os.write(fd, b"0123456789" * 4)
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        with pytest.raises(outdir.OutputBusy) as ei:
            with outdir.OutputDir(out, OUTPUT_FILES):
                pass
        assert str(ei.value) == (
            f"{out}: another ascendprof run (pid 01234567890123456789012345678901) is writing "
            f"to this directory; wait for it to finish or choose another --output")
    finally:
        os.close(fd)
