# infercheck — set-up, demo and tests.
# `make demo` and `make test` are the two commands a new user needs; both set up first.

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.infercheck-setup
SETUP_INPUTS := Makefile pyproject.toml scripts/setup_env.sh

.PHONY: setup demo test test-unit test-engine models doctor bench clean-cache

setup: $(STAMP)

$(STAMP): $(SETUP_INPUTS)
	PYTHON=$(PYTHON) VENV=$(VENV) bash scripts/setup_env.sh
	touch $(STAMP)

demo: setup
	$(VENV)/bin/infercheck doctor --no-smoke
	$(VENV)/bin/infercheck demo

# Both tiers; pytest exit 5 (no tests collected) fails the target.
test: setup
	$(PY) -m pytest -q -m "not engine" tests
	$(PY) -m pytest -q -m engine tests

test-unit: setup
	$(PY) -m pytest -q -m "not engine" tests

test-engine: setup
	$(PY) -m pytest -q -m engine tests

# Rebuild the bundled tiny models (deterministic; the built files are committed).
models: setup
	$(VENV)/bin/infercheck models build --force

doctor: setup
	$(VENV)/bin/infercheck doctor

clean-cache:
	rm -rf $${INFERCHECK_CACHE:-$$HOME/.cache/infercheck}
