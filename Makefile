# durable-runs — the two commands a newcomer needs are `make up` and `make test`.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
PYTEST_ARGS ?=

.PHONY: help install lock up demo test test-fast test-integration lint bench bench-ui bench-retention bench-backlog bench-load chaos stop clean
.DEFAULT_GOAL := help

## help: this list (each target's `##` lines).
help:
	@grep -E '^##' $(MAKEFILE_LIST) | sed -E 's/^## ?//'

# The venv is (re)built when pyproject.toml or the lock changes. It installs the pinned
# versions of requirements/dev.txt, so every machine tests what CI tested; then the
# project itself, editable, without resolving anything again.
$(VENV)/.installed: pyproject.toml requirements/dev.txt
	@$(PYTHON) -c 'import sys; sys.exit("durable-runs needs Python >= 3.11, found " + sys.version.split()[0]) if sys.version_info < (3, 11) else None'
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements/dev.txt
	$(PY) -m pip install --quiet --no-deps -e .
	@touch $@

# The browser tests' accessibility checker (axe-core, package.json), when npm is here; a
# newcomer without npm still gets every other test.
node_modules/.installed: package.json package-lock.json
	@if command -v npm >/dev/null 2>&1; then \
		npm ci --no-audit --no-fund --silent && touch $@; \
	else \
		echo "npm not found: the browser tests' accessibility checks need it (apt-get install npm)"; \
	fi

## install: the virtualenv (.venv, from the lock) and the browser tests' npm packages.
install: $(VENV)/.installed node_modules/.installed

## lock: re-pin requirements/dev.txt, requirements/base.txt (production: what
##     docker/Dockerfile installs; held to dev.txt's versions, so the image runs what the
##     tests ran) and requirements/bench.txt from pyproject.toml's ranges (uv pip compile,
##     for every platform, Python 3.11 up); commit what changed.
LOCK := $(VENV)/bin/uv pip compile pyproject.toml --universal --python-version 3.11 --quiet
lock: $(VENV)/.installed
	$(PY) -m pip install --quiet uv
	$(LOCK) --extra dev -o requirements/dev.txt
	$(LOCK) --constraint requirements/dev.txt -o requirements/base.txt
	$(LOCK) --extra dev --extra bench -o requirements/bench.txt

## up: embedded PostgreSQL + Redis (unless DATABASE_URL / CELERY_BROKER_URL are set),
##     migrations, an operator login, then web + worker + beat; a worker or beat that
##     dies is restarted. Ctrl-C stops everything.
up: install
	$(PY) scripts/stack.py up

## demo: on the stack `make up` runs (in another shell), fill the dashboard in under a
##     minute: unresolved claims (one with a probe's evidence, one with a late result), a
##     run waiting for approval, a failed and a compensated run (`manage.py demo`, with the
##     example workflows and --this-is-not-production: never point it at production).
DEMO_ARGS ?=
demo: install
	@test -n "$$DATABASE_URL" || test -f "$${DURABLE_RUNS_VAR:-var}/services.env" || \
		{ echo "make demo needs the running stack: start \`make up\` in another shell first"; exit 1; }
	RUNS_WORKFLOW_MODULES="$${RUNS_WORKFLOW_MODULES:-examples.workflows}" \
		$(PY) manage.py demo --this-is-not-production $(DEMO_ARGS)

## test: the whole suite, on DATABASE_URL / CELERY_BROKER_URL when set, else embedded servers;
##     TEST_PROCESSES pytest processes (pytest-xdist, a file each at a time), each a session
##     with its own queue and test database; TEST_PROCESSES=0 runs them in this one.
TEST_PROCESSES ?= 2
XDIST := $(if $(filter 0,$(TEST_PROCESSES)),,-n $(TEST_PROCESSES) --dist loadfile)
test: install
	$(PY) scripts/stack.py test $(XDIST) $(PYTEST_ARGS)

## test-fast: the in-process tier, in a few minutes: no worker, no server process of the
##     tests' own, no browser, no soak, no image install (markers servers, live, browser,
##     soak, image left out).
##     What it leaves out is what `make test` adds; CI runs `make test`.
FAST_MARKS := not servers and not live and not browser and not soak and not image
test-fast: install
	$(PY) scripts/stack.py test $(XDIST) -m "$(FAST_MARKS)" $(PYTEST_ARGS)

## test-integration: only what depends on the servers (marker `servers`: tests/integration,
##     every test that starts workers, the readiness checks, migrations from zero), on
##     DATABASE_URL / CELERY_BROKER_URL when set, else embedded servers. On RabbitMQ:
##     CELERY_BROKER_URL=amqp://guest:guest@127.0.0.1:5672/durable_runs make test-integration
##     CI's RabbitMQ pass: INTEGRATION_MARKS="broker or (servers and not workers)" (what
##     depends on the broker's delivery, and the checks of the machine's PostgreSQL).
##     TEST_DATABASE_POOLER=pgbouncer: every test reaches the test database through a
##     PgBouncer in transaction mode that the tests start (Debian's pgbouncer; CI does).
INTEGRATION_MARKS ?= servers
test-integration: install
	$(PY) scripts/stack.py test $(XDIST) -m "$(INTEGRATION_MARKS)" $(PYTEST_ARGS)

## lint: ruff (check and format), the import contracts (lint-imports) and mypy; all but
##     mypy (too slow for every commit) run before each commit once `pre-commit install`
##     is done (.pre-commit-config.yaml).
lint: install
	@# A merge left unfinished must never land: no conflict markers in tracked files.
	@! git grep -nE '^(<<<<<<<|>>>>>>>) ' -- . 2>/dev/null
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	@# The layers and doors of docs/architecture.md ([tool.importlinter] in pyproject.toml).
	$(VENV)/bin/lint-imports
	@# Strict, on the files [tool.mypy] names (the whole project but its migrations, tests
	@# and bench). django-stubs loads the settings, which refuse to load without a SECRET_KEY.
	SECRET_KEY=type-checking-only $(VENV)/bin/mypy

## bench: the engine's figures (bench/engine.py; docs/performance.md); the bench extra
##     brings the peer it is compared with (DBOS Transact) and psutil.
BENCH_ARGS ?=
bench: install
	$(PY) -m pip install --quiet -r requirements/bench.txt
	$(PY) scripts/stack.py run $(PY) bench/engine.py $(BENCH_ARGS)

## bench-ui: server time and queries of each page with 100,000 runs and 1,000,000 events,
##     seeded once into a database of its own (bench/seed_ui.py); BENCH_UI_ARGS="--explain 2"
##     adds the plans of the slowest queries. A million runs, in a database of their own:
##     BENCH_UI_SEED_ARGS="--runs 1000000 --database ui_1m" BENCH_UI_ARGS="--database ui_1m".
BENCH_UI_ARGS ?=
BENCH_UI_SEED_ARGS ?=
bench-ui: install
	$(PY) scripts/stack.py run sh -c '$(PY) bench/seed_ui.py --if-needed $(BENCH_UI_SEED_ARGS) && $(PY) bench/ui.py $(BENCH_UI_ARGS)'

## bench-retention: a purge of 1,000,000 events of finished runs in bounded batches (rows
##     per second per stage) while a writer commits small step transactions on live runs
##     (its longest wait); in a database of its own. BENCH_RETENTION_ARGS="--events 200000".
BENCH_RETENTION_ARGS ?=
bench-retention: install
	$(PY) scripts/stack.py run $(PY) bench/retention.py $(BENCH_RETENTION_ARGS)

## bench-backlog: operator work during a backlog of thousands of map batches on two worker
##     processes (bench/backlog.py): a bulk cancel, a bulk retry, a pause and resume, claim
##     decisions and a worker group killed; each action's wait, the broker's depth against
##     the queued steps, the figures against the truth. Exits 1 on a missed target.
BENCH_BACKLOG_ARGS ?=
bench-backlog: install
	$(PY) -m pip install --quiet -r requirements/bench.txt
	$(PY) scripts/stack.py run $(PY) bench/backlog.py $(BENCH_BACKLOG_ARGS)

## bench-load: the web tier under locust (50 submitters, 5 operators, 120 s) while 4,000 map
##     batches drain (bench/load.py); BENCH_LOAD_ARGS="--duration 30 --gunicorn-threads 4".
BENCH_LOAD_ARGS ?=
bench-load: install
	$(PY) -m pip install --quiet -r requirements/bench.txt
	$(PY) scripts/stack.py run $(PY) bench/load.py $(BENCH_LOAD_ARGS)

## chaos: the chaos soak (bench/chaos.py): real workers, beat, PostgreSQL and Redis of its
##     own, faults from a fixed seed, then duplicate/lost effects, probes, verify_history
##     and recovery times. CHAOS_ARGS="--seed 7 --duration 300". Bounded; stops by itself.
CHAOS_ARGS ?=
chaos: install
	@# The clock-skewed worker needs libfaketime (Debian's faketime); without it that fault is skipped.
	@test -e /usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1 || [ "$$(id -u)" != 0 ] || \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq faketime >/dev/null 2>&1 || true
	$(PY) bench/chaos.py $(CHAOS_ARGS)

## stop: stop embedded servers left running by an interrupted `make up` / `make test`.
stop:
	$(PY) scripts/stack.py stop

## clean: stop, then remove var/ (embedded servers' data) and .venv.
clean: stop
	rm -rf var $(VENV)
