"""The gate's errors: both exit 2 (a usage or data error, told apart from a regression)."""

from __future__ import annotations

from ascendprof.model.errors import EXIT_USAGE, InputError, UsageError


class GateUsageError(UsageError):
    """Bad gate arguments or rules (exit 2)."""

    exit_code = EXIT_USAGE


class GateInputError(InputError):
    """A gate input that cannot be read or compared (exit 2, not 3: for a CI gate an unusable
    input is a usage/data error, told apart from a regression)."""

    exit_code = EXIT_USAGE
