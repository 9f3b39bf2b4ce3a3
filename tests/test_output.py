"""Output safety: refuse an output inside the input, atomic writes leave no temp files."""

import pytest

from ascendprof.errors import UsageError
from ascendprof.output import check_output_dir, write_bytes, write_json


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
