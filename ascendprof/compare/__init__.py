"""Comparisons of two runs: ``diff`` (explain the difference between two runs or two ranks)
and ``gate`` (the CI regression gate with rules and exit codes). Both work on the outputs and
tables of the other layers; they parse no profiler file themselves."""
