# ascendprof developer targets. `make install demo` is what the README's first command runs.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: install demo test bench scan clean mutants mutation-report verdict-matrix

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

install: $(BIN)/python
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'

demo:
	$(BIN)/ascendprof analyse fixtures/qwen3-4rank-pp2dp2 -o ascendprof_output

scan:
	$(BIN)/ascendprof scan fixtures

test:
	$(BIN)/python -m pytest -q

# Both tools side by side at 16-256 ranks and on db exports, 1024 ranks and hostile single-rank
# sizes for ascendprof alone; appends to benchmarks/RESULTS.md (BENCH_ARGS to adjust).
bench:
	$(BIN)/python benchmarks/run_bench.py --hostile $(BENCH_ARGS)

# Mutation testing of analyze/, readers/, compare/, engine/outdir, module by module at nice 19:
# a fixed-seed sample of 60 mutants per module (SAMPLE=100 for more; mutation/run.py --full MODULE
# runs every mutant, hours for a big module); MODULES="db gate_rules" limits it (names:
# mutation/modules.toml). Then docs/mutation.md from the results.
mutants:
	$(BIN)/python -m pip install --quiet -e '.[mutation]'
	$(BIN)/python mutation/run.py $(if $(SAMPLE),--sample $(SAMPLE)) $(MODULES)
	$(BIN)/python mutation/report.py

mutation-report:
	$(BIN)/python mutation/report.py

# the verdict matrix: every case -> expected -> got, rewritten into docs/verdicts.md
verdict-matrix:
	$(BIN)/python tests/verdict_cases.py --doc docs/verdicts.md

clean:
	rm -rf ascendprof_output build dist *.egg-info .pytest_cache .mutants
