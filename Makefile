# loopwire — the two commands: `make run` and `make test`.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
PIP    := $(VENV)/bin/pip
PYTEST_FLAGS ?= -q
PYTEST_WORKERS ?= -n 2

.PHONY: run test check format lint typecheck bench schema screenshots browser services node cluster clean

# ---- environments ---------------------------------------------------------
$(VENV)/.base: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip
	$(PIP) install --quiet -e .
	@touch $@

$(VENV)/.dev: $(VENV)/.base
	$(PIP) install --quiet -e '.[test,dev]'
	@touch $@

$(VENV)/.bench: $(VENV)/.dev
	$(PIP) install --quiet -e '.[test,dev,bench]'
	@touch $@

# ---- the two commands -------------------------------------------------------
# The demo documents (demo/documents) are a data source unless
# LOOPWIRE_DATA_SOURCES is set (in the environment or .env; empty: none).
run: $(VENV)/.base
	@if [ -z "$${LOOPWIRE_DATA_SOURCES+set}" ] && ! grep -qs '^LOOPWIRE_DATA_SOURCES=' .env; then \
		export LOOPWIRE_DATA_SOURCES=demo=demo/documents; fi; \
	$(PY) -m backend serve

test: $(VENV)/.dev browser services tests/js/node_modules/.installed
	$(PY) -m pytest -p no:playwright $(PYTEST_WORKERS) $(PYTEST_FLAGS)

# ---- quality ----------------------------------------------------------------
format: $(VENV)/.dev
	$(VENV)/bin/ruff format backend loopwire tests benchmarks devcluster
	$(VENV)/bin/ruff check --fix backend loopwire tests benchmarks devcluster

lint: $(VENV)/.dev
	$(VENV)/bin/ruff format --check backend loopwire tests benchmarks devcluster
	$(VENV)/bin/ruff check backend loopwire tests benchmarks devcluster

typecheck: $(VENV)/.dev
	$(VENV)/bin/mypy --strict backend loopwire benchmarks devcluster

check: lint typecheck test

# docs/benchmarks.md (its generated section) and docs/benchmarks.png: ~6 minutes;
# then docs/scaling.md's figures: 1, 2 and 3 instances (~2 minutes).
bench: $(VENV)/.bench services
	$(PY) -m benchmarks
	$(PY) -m benchmarks.cluster

# Several instances on one machine: PostgreSQL, Redis and nginx from Debian's
# packages, three loopwire instances, the URL printed (docs/scaling.md).
cluster: $(VENV)/.base services
	$(PY) -m devcluster

# docs/protocol.schema.json and the page's frontend/static/js/protocol.js (from
# the protocol models), and docs/openapi.json.
schema: $(VENV)/.base
	$(PY) -m backend schema --write
	$(PY) -m backend.transport.openapi

# docs/screenshots/*.png: the chat page on the offline model, in Chromium.
screenshots: $(VENV)/.dev browser
	$(PY) -m tests.browser.screenshots docs/screenshots

# Debian's Chromium for the browser tests (installed only when root and missing).
browser:
	@if [ -x /usr/bin/chromium ]; then :; \
	elif [ "$$(id -u)" = "0" ] && command -v apt-get >/dev/null; then \
		echo "installing Debian's chromium for the browser tests"; \
		DEBIAN_FRONTEND=noninteractive apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
	else echo "note: /usr/bin/chromium missing and not root; browser tests will be skipped"; fi

# Debian's PostgreSQL, Redis and nginx for the store and cluster tests, and
# Prometheus for the metrics tests (installed only when root and missing;
# Prometheus without its recommends: node-exporter, smartmontools, ...).
# The tests start their own servers (devcluster/: PostgreSQL, Redis, nginx,
# Prometheus); none is left running.
services:
	@missing=""; lean=""; \
	ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || missing="$$missing postgresql"; \
	command -v redis-server >/dev/null || [ -x /usr/bin/redis-server ] || missing="$$missing redis-server"; \
	[ -x /usr/sbin/nginx ] || missing="$$missing nginx-light"; \
	[ -x /usr/bin/prometheus ] && [ -x /usr/bin/promtool ] || lean=" prometheus"; \
	if [ -z "$$missing$$lean" ]; then :; \
	elif [ "$$(id -u)" = "0" ] && command -v apt-get >/dev/null; then \
		echo "installing Debian's$$missing$$lean for the store, cluster and metrics tests"; \
		DEBIAN_FRONTEND=noninteractive apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$lean >/dev/null; \
	else echo "note:$$missing$$lean missing and not root; the tests that need them will be skipped"; fi

# Debian's Node (installed only when root and missing), then the client
# libraries of other ecosystems the tests drive loopwire with (tests/js/:
# pinned, lockfile committed) into tests/js/node_modules, for tests only.
node:
	@if command -v node >/dev/null && command -v npm >/dev/null; then :; \
	elif [ "$$(id -u)" = "0" ] && command -v apt-get >/dev/null; then \
		echo "installing Debian's nodejs and npm for the client-library tests"; \
		DEBIAN_FRONTEND=noninteractive apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm >/dev/null; \
	else echo "note: node missing and not root; the client-library tests will be skipped"; fi
tests/js/node_modules/.installed: tests/js/package.json tests/js/package-lock.json | node
	@if command -v npm >/dev/null; then \
		cd tests/js && npm ci --no-audit --no-fund --ignore-scripts --loglevel=error && touch node_modules/.installed; \
	fi

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
