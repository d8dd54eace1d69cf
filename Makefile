# infercheck — set-up, demo and tests.
# `make demo` and `make test` are the two commands a new user needs; both set up first.

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.infercheck-setup
SETUP_INPUTS := Makefile pyproject.toml scripts/setup_env.sh

.PHONY: setup demo test test-unit test-engine models doctor bench bench-quick bench-perf clean-cache

setup: $(STAMP)

$(STAMP): $(SETUP_INPUTS)
	PYTHON=$(PYTHON) VENV=$(VENV) bash scripts/setup_env.sh
	touch $(STAMP)

demo: setup
	$(VENV)/bin/infercheck doctor --no-smoke
	$(VENV)/bin/infercheck demo

# Both tiers; pytest exit 5 (no tests collected) fails the target. The engine tier prints its
# slowest tests (CI time is budgeted: README, "Tests").
test: setup
	$(PY) -m pytest -q -m "not engine" tests
	$(PY) -m pytest -q --durations=15 -m engine tests

test-unit: setup
	$(PY) -m pytest -q -m "not engine" tests

test-engine: setup
	$(PY) -m pytest -q --durations=15 -m engine tests

# Rebuild the bundled tiny models (deterministic; the built files are committed).
models: setup
	$(VENV)/bin/infercheck models build --force

doctor: setup
	$(VENV)/bin/infercheck doctor

# The full bundled benchmark: every candidate of every case, plus each case's bug check; writes
# reports/bench/ (index.html, bench.json) and exits 1 on any verdict that differs from its case.
bench: setup
	$(VENV)/bin/infercheck bench patches/

# The subset CI runs (candidates marked `quick: true`; covers every verdict class).
bench-quick: setup
	$(VENV)/bin/infercheck bench patches/ --quick

# Where a validate's time goes: the demo case cold, warm and as a further candidate (3 rounds, each in
# a fresh cache), then one multi-candidate run; medians to reports/bench-perf.json. Not part of `make test`.
bench-perf: setup
	$(VENV)/bin/infercheck perf --runs $(or $(RUNS),3)

clean-cache:
	rm -rf $${INFERCHECK_CACHE:-$$HOME/.cache/infercheck}
