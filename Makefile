# Every target bootstraps .venv itself: `make chat` and `make test` work on a fresh clone.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: install chat run test test-fast lint bench clean

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), "yokebot needs Python 3.11 or newer"'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	@touch $(STAMP)

install: $(STAMP)

chat: $(STAMP)          ## talk to the default agent in the terminal (SQLite in ./yokebot.db)
	$(BIN)/yokebot chat

run: $(STAMP)           ## start adapters, scheduler and HTTP server
	$(BIN)/yokebot run

test: $(STAMP)          ## the whole suite (PostgreSQL tests skip when no server is reachable)
	$(BIN)/pytest

lint: $(STAMP)
	$(BIN)/ruff check bot tests $(wildcard bench)
	$(BIN)/pyright
	$(BIN)/lint-imports

bench: $(STAMP)
	$(BIN)/python -m bench $(ARGS)

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache *.egg-info
