"""Any gate input -> :class:`~ascendprof.compare.diff.Side`: one exported CSV
(:mod:`~ascendprof.compare.gate.csv_inputs`) or a directory
(:mod:`~ascendprof.compare.gate.dir_inputs`)."""

from __future__ import annotations

from pathlib import Path

from ascendprof.compare.diff import Side
from ascendprof.compare.gate.csv_inputs import load_csv
from ascendprof.compare.gate.dir_inputs import load_run
from ascendprof.compare.gate.errors import GateInputError, GateUsageError
from ascendprof.model.errors import AscendProfError, InputError


def load_side(path: Path, *, workers: int | None = None) -> Side:
    """Any gate input (see :mod:`ascendprof.compare.gate`) ->
    :class:`~ascendprof.compare.diff.Side`.

    Raises GateInputError / GateUsageError (exit 2) when the path is missing, unreadable, or
    holds nothing the gate can compare.
    """
    path = Path(path)
    if not path.exists():
        raise GateUsageError(f"{path}: no such file or directory")
    try:
        if path.is_file():
            return load_csv(path)
        return load_run(path, workers=workers)
    except (GateInputError, GateUsageError):
        raise
    except InputError as e:
        raise GateInputError(e.path, e.reason, e.where) from None
    except AscendProfError as e:
        raise GateInputError(path, str(e).removeprefix(f"{path}: ")) from None
