# Court: one Python workspace in .venv/, managed by uv from pyproject.toml + uv.lock.
SHELL := /bin/bash
PY ?= python3
UV := $(shell command -v uv 2>/dev/null || echo "$(PY) -m uv")
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.court-setup
PYTEST_ARGS ?=
TEST_WORKERS ?= $(shell echo $$(( $$(nproc 2>/dev/null || echo 1) + 1 )))
# Every Python process here (pytest's workers, each service and tool a test starts: several hundred
# in `make test`) reads its modules' bytecode instead of compiling them again: .venv's packages are
# compiled once at install (--compile-bytecode below), and our own modules' caches may be written.
# With PYTHONDONTWRITEBYTECODE set in the caller's environment, as on some CI machines, each process
# compiled sqlalchemy, grpc, protobuf and the rest from source: about a second of CPU per process.
unexport PYTHONDONTWRITEBYTECODE

.PHONY: setup test bench lint typecheck vectors clean proto proto-check contract token run play image image-test chaos

# Creates or updates .venv (a no-op when pyproject.toml and uv.lock are unchanged).
setup: $(STAMP)

$(STAMP): pyproject.toml uv.lock
	@command -v uv >/dev/null 2>&1 || $(PY) -m uv --version >/dev/null 2>&1 || $(PY) -m pip install -q --disable-pip-version-check uv
	$(UV) sync --frozen --compile-bytecode --extra cli --python $(PY)
	@touch $@

# The compiled core: court_games compiled by mypyc beside its .py files (scripts/compile_core.py, which
# derives the modules from the package; with it the bots' inner loop that court_games._form.ALSO_COMPILED
# names), again when one of them changes; a compile error fails setup.
# COURT_COMPILE=0 make setup compiles nothing (and removes a build): the .py files run. COURT_PURE=1
# runs them anyway. docs/development.md.
CORE := libs/court_games/_core__mypyc.json
setup: $(CORE)

$(CORE): $(STAMP) scripts/compile_core.py $(shell find libs/court_games -name '*.py' -not -path '*/__pycache__/*') \
		libs/court_bots/games/the_court_policy.py
	$(BIN)/python scripts/compile_core.py

# The web client (web/, docs/web-client.md): npm ci when its lock changed, then the typed clients
# generated from protos/ and the esbuild bundle into web/dist/ when a source changed.
WEB_SRC := $(shell find web/src -path web/src/gen -prune -o -type f -print 2>/dev/null) web/build.mjs web/buf.gen.yaml $(wildcard protos/court/*/v1/*.proto)
setup: web/dist/index.html

web/node_modules/.package-lock.json: web/package-lock.json
	npm ci --prefix web --no-audit --no-fund --loglevel=error
	@touch $@

web/dist/index.html: web/node_modules/.package-lock.json $(WEB_SRC)
	npm run --prefix web --silent build

uv.lock: pyproject.toml
	@command -v uv >/dev/null 2>&1 || $(PY) -m uv --version >/dev/null 2>&1 || $(PY) -m pip install -q --disable-pip-version-check uv
	$(UV) lock

# Every test, slow suites included (pytest-xdist spreads them over the cores, one worker more than
# there are cores: many tests wait on a lease, a clock or a restart for seconds at a time, and the
# spare worker keeps the cores busy meanwhile; --dist worksteal with the longest tests first,
# tests/conftest.py, so the chaos suite overlaps the rest). TEST_WORKERS=N to choose. The SQL storage
# tests run against SQLite and a real PostgreSQL server: scripts/test-postgres.sh starts a private
# one and stops it again when the tests end, pass, fail or are interrupted (Ctrl-C); set
# COURT_TEST_POSTGRES_URL to use your own server instead (then nothing is started or stopped).
test: setup
	@if [ -n "$${COURT_TEST_POSTGRES_URL:-}" ]; then exec $(BIN)/pytest -n $(TEST_WORKERS) --dist worksteal $(PYTEST_ARGS); fi; \
	trap 'scripts/test-postgres.sh stop' EXIT; trap 'exit 130' INT; trap 'exit 143' TERM; \
	url=$$(scripts/test-postgres.sh) || exit 1; \
	echo "PostgreSQL for the tests: $$url (stopped when they end)"; \
	COURT_TEST_POSTGRES_URL="$$url" $(BIN)/pytest -n $(TEST_WORKERS) --dist worksteal $(PYTEST_ARGS)

# The whole stack on one command (court_cli.stack): nats-server with JetStream and the rules, lobby,
# ranking and bot services as processes on SQLite, state under .state/ (kept between runs); a bot
# game of Queen's Court is drawn live. Ctrl-C stops everything. Ports: COURT_RULES_ADDR,
# COURT_LOBBY_ADDR, COURT_RANKING_ADDR, COURT_BOT_ADDR, COURT_NATS_URL (README). RUN_ARGS="--no-demo".
RUN_ARGS ?=
run: setup
	$(BIN)/court stack up $(RUN_ARGS)

# Sit down and play against bots on the stack `make run` is running: GAME=hearts (default),
# queens_court, the_court or court_wars. A stack on another state folder: make play COURT_STATE_DIR=...
GAME ?= hearts
play: setup
	$(BIN)/court play $(GAME)

bench: setup
	$(BIN)/python -m tests.bench $(ONLY)

vectors: setup
	$(BIN)/court-vectors tests/vectors/*/*.json > /dev/null && echo "all vectors pass"

# Regenerates libs/court_proto/ (Python + gRPC + .pyi stubs) from protos/; checked in, never hand-edited.
proto: setup
	$(BIN)/python protos/generate.py libs/court_proto

# docs/contract-reference.md from the protos' comments (protos/contract_doc.py; tests check it is in step).
contract: setup
	$(BIN)/python protos/contract_doc.py

# buf lint, and buf breaking against main's previous commit (BASE=<rev> to choose another):
# scripts/proto-check.sh, with buf from tools/buf (npm ci there on first use).
BASE ?= HEAD~1
proto-check:
	scripts/proto-check.sh $(BASE)

# A development bearer token: make token SUB=alice ROLE=player (TTL=seconds); signed with the lobby's
# key (COURT_SIGNING_KEY) or, with COURT_ENV=dev (the default here), the dev key the stack generated under
# $COURT_STATE_DIR/keys/ (default .state; a stack on another folder: make token COURT_STATE_DIR=...).
SUB ?= dev
ROLE ?= player
TTL ?= 86400
token: setup
	@COURT_ENV="$${COURT_ENV:-dev}" $(BIN)/court-token --sub "$(SUB)" --role "$(ROLE)" --ttl "$(TTL)"

# ruff check and ruff format --check (CI runs both).
lint: $(STAMP)
	$(BIN)/ruff check libs services tests
	$(BIN)/ruff format --check .

# mypy: strict on libs/ ([tool.mypy] in pyproject.toml; generated court_proto is not checked).
typecheck: $(STAMP)
	$(BIN)/mypy

# The service image (deploy/Dockerfile) with Podman or Docker, whichever runs; with no registry
# the base is built from Debian packages (deploy/images/build-base.sh). IMAGE=court:dev, BASE=...
IMAGE ?= court:dev
image:
	deploy/images/build.sh $(IMAGE)

# Builds the image, then runs it (tests/image/): NATS, PostgreSQL, the migration step and the four
# services as containers through testcontainers on Podman's Docker API socket; a full online game
# from the host through the mapped ports; everything stopped after.
image-test: setup image
	COURT_IMAGE=$(IMAGE) $(BIN)/pytest -p no:cacheprovider -o addopts="-ra --strict-markers" -q tests/image $(PYTEST_ARGS)

# The chaos suite alone (tests/chaos: a 3-server NATS cluster, two rules replicas, PostgreSQL, fault-
# injecting proxies on their links; kills, partitions, stalls, delays and cuts under online ante games,
# every move recorded and the history checked); `make test` runs one wave of 20 games.
# DURATION=<seconds> and/or MIN_GAMES=<n>: waves of 50 games under the nemesis until that long has passed
# and that many games were played, after a first wave with no fault (the baseline of the figures it
# prints); NEMESIS=0: no fault at all.
chaos: setup
	COURT_CHAOS_DURATION=$(DURATION) COURT_CHAOS_MIN_GAMES=$(MIN_GAMES) COURT_CHAOS_NEMESIS=$(or $(NEMESIS),1) $(BIN)/pytest -p no:cacheprovider -o addopts="-ra --strict-markers" -q -s tests/chaos $(PYTEST_ARGS)

clean:
	$(PY) scripts/compile_core.py --clean
	rm -rf $(VENV) .pytest_cache .hypothesis .ruff_cache build/mypyc

# Render deploy/base and every overlay with kubectl kustomize, validate them offline against the
# Kubernetes schemas, and check docker-compose.yml and deploy/Dockerfile (tests/deploy/).
.PHONY: deploy-check
deploy-check: setup
	$(BIN)/pytest -q tests/deploy
