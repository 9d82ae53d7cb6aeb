# Every target bootstraps .venv itself: `make chat` and `make test` work on a fresh clone. Running yokebot installs
# only what it runs on (`pip install -e .`); the tests and the linters add the dev tools (`.[dev]`) on first use.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
DEV    := $(VENV)/.installed-dev
# -qq: errors only (setuptools's notes about editable installs are not for the user of `make chat`)
PIP    := $(BIN)/pip install -qq --disable-pip-version-check

.PHONY: install install-dev chat demo run test test-fast lint bench lock clean

$(BIN)/python:
	@$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), "yokebot needs Python 3.11 or newer"'
	$(PYTHON) -m venv $(VENV)
	$(PIP) --upgrade pip

$(STAMP): pyproject.toml | $(BIN)/python
	$(PIP) -e .
	@touch $(STAMP)

$(DEV): pyproject.toml | $(BIN)/python
	$(PIP) -e '.[dev]'
	@touch $(DEV) $(STAMP)

install: $(STAMP)       ## what running yokebot needs
install-dev: $(DEV)     ## and the tests, linters and benchmarks

chat: $(STAMP)          ## talk to the default agent in the terminal (SQLite in ./yokebot.db)
	$(BIN)/yokebot chat

demo: $(STAMP)          ## the chat on a demo agent that reads a bundled sample nginx log (any machine)
	$(BIN)/yokebot demo

run: $(STAMP)           ## start adapters, scheduler and HTTP server
	$(BIN)/yokebot run

# Four workers on two cores: many tests wait on subprocesses and sockets, so the extra workers fill the idle
# time (measured one after the other on this 2-core machine, 2026-12-02: 300 s with 4 workers, 341 s with 3); work
# stealing keeps the long tests from piling up at the end. TEST_WORKERS=2 for a machine busy with other work.
TEST_WORKERS ?= 4

# Many tests start yokebot as a subprocess; with PYTHONDONTWRITEBYTECODE set (as in many containers) each
# one compiled bot/ again (~0.1 s of CPU each). Compiled once here, they read the cached bytecode.
test: $(DEV)            ## the whole suite, in parallel (PostgreSQL tests skip when no server is reachable)
	@$(BIN)/python -m compileall -q bot >/dev/null
	$(BIN)/pytest -n $(TEST_WORKERS) --dist worksteal --durations=10

test-fast: $(DEV)       ## everything but the slow tests (real yokebot processes) and PostgreSQL
	@$(BIN)/python -m compileall -q bot >/dev/null
	$(BIN)/pytest -n $(TEST_WORKERS) --dist worksteal -m "not slow and not postgres"

lint: $(DEV)
	$(BIN)/ruff check bot tests $(wildcard bench)
	$(BIN)/pyright
	$(BIN)/lint-imports

bench: $(DEV)
	$(BIN)/python -m bench $(ARGS)

lock: $(DEV)            ## re-pin requirements.lock (the container's dependencies) from pyproject.toml
	$(BIN)/pip install --quiet --dry-run --ignore-installed --report .lock.json '.[tokenizer,otel,vectors]'
	$(BIN)/python -c 'import json; r = json.load(open(".lock.json")); pins = sorted((i["metadata"]["name"].lower(), i["metadata"]["version"]) for i in r["install"] if i["metadata"]["name"].lower() != "yokebot"); open("requirements.lock", "w").write("# Runtime dependencies of yokebot, pinned for the container image (Python 3.11, Linux).\n# Regenerate after changing pyproject.toml: make lock\n" + "".join(f"{n}=={v}\n" for n, v in pins))'
	rm -f .lock.json

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache *.egg-info
