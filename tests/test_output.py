"""Output safety: refuse an output inside the input, atomic writes leave no temp files."""

import pytest

from ascendprof.model.errors import UsageError
from ascendprof.engine.outdir import check_output_dir
from ascendprof.sysio.atomic import write_bytes, write_json


def test_refuses_output_inside_input(tmp_path):
    (tmp_path / "in").mkdir()
    with pytest.raises(UsageError, match="inside the input"):
        check_output_dir(tmp_path / "in" / "out", [tmp_path / "in"])
    with pytest.raises(UsageError):
        check_output_dir(tmp_path / "in", [tmp_path / "in"])
    assert check_output_dir(tmp_path / "out", [tmp_path / "in"]) == (tmp_path / "out").resolve()


def test_atomic_replace(tmp_path):
    p = tmp_path / "x" / "a.json"
    write_json(p, {"a": 1})
    write_bytes(p, b"second")
    assert p.read_bytes() == b"second"
    assert [q.name for q in p.parent.iterdir()] == ["a.json"]


@pytest.mark.parametrize("umask", [0o022, 0o027, 0o077])
def test_outputs_get_the_permissions_of_any_new_file(tmp_path, monkeypatch, umask):
    """Written through a temporary file (0600 from mkstemp), an output still ends with the mode
    open() gives a new file under the user's umask, so teammates can read shared results."""
    import os
    import stat

    from ascendprof.sysio import atomic as output

    monkeypatch.setattr(output, "_FILE_MODE", None)
    old = os.umask(umask)
    try:
        write_bytes(tmp_path / "out.csv", b"a\n")
        with open(tmp_path / "plain.csv", "wb"):
            pass
    finally:
        os.umask(old)
    mode = stat.S_IMODE((tmp_path / "out.csv").stat().st_mode)
    assert mode == stat.S_IMODE((tmp_path / "plain.csv").stat().st_mode) == 0o666 & ~umask
