# Court: one Python workspace in .venv/, managed by uv from pyproject.toml + uv.lock.
SHELL := /bin/bash
PY ?= python3
UV := $(shell command -v uv 2>/dev/null || echo "$(PY) -m uv")
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.court-setup
PYTEST_ARGS ?=

.PHONY: setup test bench lint vectors clean

# Creates or updates .venv (a no-op when pyproject.toml and uv.lock are unchanged).
setup: $(STAMP)

$(STAMP): pyproject.toml uv.lock
	@command -v uv >/dev/null 2>&1 || $(PY) -m uv --version >/dev/null 2>&1 || $(PY) -m pip install -q --disable-pip-version-check uv
	$(UV) sync --frozen --python $(PY)
	@touch $@

uv.lock: pyproject.toml
	@command -v uv >/dev/null 2>&1 || $(PY) -m uv --version >/dev/null 2>&1 || $(PY) -m pip install -q --disable-pip-version-check uv
	$(UV) lock

# Every test, slow suites included (pytest-xdist spreads them over the cores). The SQL storage
# tests run against SQLite and a real PostgreSQL server: scripts/test-postgres.sh starts a private
# one (set COURT_TEST_POSTGRES_URL to use your own).
test: setup
	COURT_TEST_POSTGRES_URL="$${COURT_TEST_POSTGRES_URL:-$$(scripts/test-postgres.sh)}" $(BIN)/pytest -n auto $(PYTEST_ARGS)

bench: setup
	$(BIN)/python -m tests.bench

vectors: setup
	$(BIN)/court-vectors tests/vectors/*/*.json > /dev/null && echo "all vectors pass"

lint: setup
	$(BIN)/ruff check libs services tests

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis .ruff_cache
